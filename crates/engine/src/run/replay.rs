//! [`Replay`]: one replay of a plan, run when the replay's op is ready (it holds the plan's
//! vars): its ops are released by counters (`plan/release_counts.rs`) straight onto their CPU
//! blocks, and the thread that counts the last one finished completes the replay's op.
//!
//! The roots go to their blocks in jobs of a few, enough jobs for every worker to steal some.
//! An op that releases dependents keeps the first one on its block to run next on the same
//! thread (the data it wrote is in this core's cache); the others are spawned on their blocks.
//! On the naive engine (no blocks) every op runs on the thread that made the replay ready.
//! Failures follow the crate's rules within the plan: an op whose var holds a failure (before
//! the replay, or from a plan op that wrote it) is skipped and passes the failure on; each var
//! the plan writes ends with the outcome of its last writer.
//!
//! Subtle: an op's failure slot is written (by a failed dependency, or at the start for a
//! failure a var held) before the count-down that releases it, and so is the replay's
//! `failed` flag; the op reads both after that count-down (or after the pool handed it over),
//! so it sees them, and a replay in which nothing failed reads only the flag, a line nobody
//! writes.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::AtomicBool as StdAtomicBool;

use depengine_graph::{Access, ReadyOp};
use depengine_sync::{AtomicBool, Mutex, OnceLock, Ordering, lock};

use crate::failure::OpFailure;
use crate::op::plan::{PlanInner, PlanOp};
use crate::op::record::{Completion, FinishAsync, OpRecord};
use crate::op::vars::OpVars;
use crate::plan::release_counts::ReleaseCounts;
use crate::profile::recorder::ProfiledOp;
use crate::route::block::CpuBlock;
use crate::run::EngineState;
use crate::run::execute::op_span;
use crate::thread;
use crate::thread::frame;

/// One replay of a plan (see the module documentation).
struct Replay {
    state: Arc<EngineState>,
    plan: Arc<PlanInner>,
    /// Per op, its dependencies still running; then (`end`) the ops not finished.
    counts: ReleaseCounts,
    /// The counter past the ops': the thread that takes it to zero completes the replay (and
    /// has taken in every op's effects, as a dependent would).
    end: u32,
    /// Per op, its failure: inherited (it skips) or its own.
    failures: Box<[OnceLock<OpFailure>]>,
    /// Whether any failure slot was written.
    failed: AtomicBool,
    /// The replay's op, completed once.
    done: Mutex<Option<Completion>>,
}

impl EngineState {
    /// Runs a replay of `plan`, whose op `op` is ready; `failed_before`: some var of it may hold
    /// a failure (`Graph::op_failure` found one).
    pub(super) fn start_replay(
        self: &Arc<Self>,
        plan: Arc<PlanInner>,
        op: ReadyOp<OpRecord>,
        failed_before: bool,
    ) {
        let done = Completion::new(
            Arc::clone(self) as Arc<dyn FinishAsync>,
            op,
            None,
            Arc::new(StdAtomicBool::new(false)),
        );
        let deps = &plan.deps;
        let ops = deps.counts.len();
        if ops == 0 {
            return done.complete_each(vec![None; deps.reads.len() + deps.writes.len()]);
        }
        // Capture numbers ops by `u32`, one below the most.
        let end = u32::try_from(ops).unwrap_or(u32::MAX);
        let replay = Arc::new(Replay {
            state: Arc::clone(self),
            counts: ReleaseCounts::new(deps.counts.iter().copied().chain([end])),
            end,
            failures: (0..ops).map(|_| OnceLock::new()).collect(),
            failed: AtomicBool::new(false),
            done: Mutex::new(Some(done)),
            plan,
        });
        // Rule 2 on entry: the plan's first ops on a var that holds a failure skip.
        let deps = &replay.plan.deps;
        if failed_before {
            for (position, &var) in deps.reads.iter().chain(&deps.writes).enumerate() {
                if let Ok(Some(failure)) = self.graph.var_failure(var) {
                    for &op in &*deps.entries[position] {
                        replay.fail(op, &failure);
                    }
                }
            }
        }
        for (group, roots) in (0..).zip(&*replay.plan.roots) {
            match roots.block.and_then(|key| self.workers.block(key)) {
                // Up to `JOBS_PER_WORKER` jobs per worker, of `grain` roots each: a job costs
                // a spawn and a steal, and enough of them keep every worker busy.
                Some(block) => {
                    let jobs = block.num_threads() * JOBS_PER_WORKER;
                    let grain = roots.ops.len().div_ceil(jobs).max(1);
                    for start in (0..roots.ops.len()).step_by(grain) {
                        let replay = Arc::clone(&replay);
                        block.spawn(move || replay.run_roots(group, start, grain));
                    }
                }
                None => replay.run_from(
                    std::iter::empty(),
                    roots.ops.iter().rev().copied().collect(),
                ),
            }
        }
    }
}

/// Jobs a replay's roots are split into, per worker of their block.
const JOBS_PER_WORKER: usize = 8;

impl Replay {
    /// The block `op` runs on, if it has one.
    #[inline]
    fn block(&self, op: u32) -> Option<&CpuBlock> {
        self.state.workers.block(self.plan.ops[op as usize].block?)
    }

    /// Sends a released `op` to its block, or to `inline` (run by the caller) without one.
    #[inline]
    fn release(self: &Arc<Self>, op: u32, inline: &mut Vec<u32>) {
        match self.block(op) {
            Some(block) => {
                let replay = Arc::clone(self);
                block.spawn(move || replay.run_from(std::iter::once(op), Vec::new()));
            }
            None => inline.push(op),
        }
    }

    /// Gives `op` `failure`, unless it has one.
    fn fail(&self, op: u32, failure: &OpFailure) {
        let _ = self.failures[op as usize].set(failure.clone());
        self.failed.store(true, Ordering::Relaxed);
    }

    /// `op`'s failure, if it has one.
    #[inline]
    fn failure(&self, op: u32) -> Option<&OpFailure> {
        if self.failed.load(Ordering::Relaxed) {
            self.failures[op as usize].get()
        } else {
            None
        }
    }

    /// Runs the roots `start..start + grain` of root group `group`.
    fn run_roots(self: &Arc<Self>, group: usize, start: usize, grain: usize) {
        let ops = &self.plan.roots[group].ops;
        let end = (start + grain).min(ops.len());
        self.run_from(ops[start..end].iter().copied(), Vec::new());
    }

    /// Runs each op of `first` and the dependents it keeps, then those in `inline`, until none
    /// is left; then counts them finished. The ops of `first` share a block.
    fn run_from(self: &Arc<Self>, mut first: impl Iterator<Item = u32>, mut inline: Vec<u32>) {
        let mut next = None;
        let mut finished = 0;
        while let Some(op) = next
            .take()
            .or_else(|| first.next())
            .or_else(|| inline.pop())
        {
            self.run_op(op);
            let failure = self.failure(op).cloned();
            let key = self.plan.ops[op as usize].block;
            for edge in self.plan.deps.successors(op) {
                if edge.passes_failure
                    && let Some(failure) = &failure
                {
                    self.fail(edge.to, failure);
                }
                if !self.counts.release(edge.to) {
                    continue;
                }
                if next.is_none() && self.plan.ops[edge.to as usize].block == key {
                    next = Some(edge.to);
                } else {
                    self.release(edge.to, &mut inline);
                }
            }
            finished += 1;
        }
        if self.counts.release_many(self.end, finished) {
            self.complete();
        }
    }

    /// Runs `op`'s function, unless it inherited a failure; a failure of its own is kept.
    fn run_op(&self, op: u32) {
        let plan_op = &self.plan.ops[op as usize];
        let deps = &self.plan.deps;
        let profiled_op = || ProfiledOp {
            name: &plan_op.name,
            context: plan_op.run.context,
            property: plan_op.run.property,
            priority: plan_op.run.priority,
        };
        let profiler = &self.state.profiler;
        let recorded = profiler.wants(plan_op.profiled);
        if self.failure(op).is_some() {
            if recorded {
                profiler.record_skipped(&profiled_op(), thread::profiled());
            }
            return;
        }
        let started = recorded.then(|| profiler.start(thread::profiled()));
        // A wait inside the function sees the replay's vars as held (`thread/frame.rs`); the
        // span is made inside the `catch_unwind`, as a pushed op's (`run/execute.rs`).
        let name = plan_op.name.as_str();
        let vars = PlanOpVars {
            state: &self.state,
            op: plan_op,
        };
        let result = frame::within_replay(self.state.id(), &deps.reads, &deps.writes, || {
            catch_unwind(AssertUnwindSafe(|| {
                op_span(name).in_scope(|| (plan_op.func)(plan_op.run, &vars))
            }))
        });
        let outcome = EngineState::outcome(&plan_op.name, result);
        self.state.profile(profiled_op, started, &outcome);
        if let Err(failure) = outcome {
            self.state.log_own_failure(&failure);
            self.fail(op, &failure);
        }
    }

    /// Completes the replay's op: each written var with its last writer's outcome.
    fn complete(&self) {
        let deps = &self.plan.deps;
        let mut failures: Vec<Option<OpFailure>> = vec![None; deps.reads.len()];
        failures.extend(
            deps.last_writers
                .iter()
                .map(|&writer| self.failure(writer).cloned()),
        );
        let done = lock(&self.done).take();
        if let Some(done) = done {
            done.complete_each(failures);
        }
    }
}

/// The vars of a replayed op, which its replay holds while the function runs: where a typed
/// op finds its data's cells (`data/access.rs`).
struct PlanOpVars<'a> {
    state: &'a EngineState,
    op: &'a PlanOp,
}

impl OpVars for PlanOpVars<'_> {
    fn attachment(&self, access: Access, from_end: usize) -> Option<NonNull<()>> {
        let list = match access {
            Access::Read => &self.op.reads,
            Access::Write => &self.op.writes,
        };
        let at = list.len().checked_sub(from_end + 1)?;
        self.state.graph.attachment(list[at])
    }
}
