//! [`Replay`]: one replay of a plan, run when the replay's op is ready (it holds the plan's
//! vars): its ops are released by counters (`plan/release_counts.rs`) straight onto their CPU
//! blocks, and the thread that counts the last one finished completes the replay's op.
//! A GPU op goes to its device's executor, and a sync one behind another is released at that
//! one's launch (`device.rs`).
//!
//! The roots go to their blocks in jobs of a few, enough jobs for every worker to steal some.
//! An op that releases dependents keeps the first one on its block to run next on the same
//! thread (the data it wrote is in this core's cache); the others are spawned on their blocks.
//! On the naive engine (no blocks) the ops run one at a time on the thread that made the
//! replay ready, or on the one that completes an async op, from a queue (`Queued`) that keeps
//! the stack from growing with a chain of async ops completed inside their functions.
//! An async op is done when its completion is, from any thread: that thread releases its
//! dependents.
//! Failures follow the crate's rules within the plan: an op whose var holds a failure (before
//! the replay, or from a plan op that wrote it) is skipped and passes the failure on; each var
//! the plan writes ends with the outcome of its last writer.
//!
//! Chained replays: a replay pushed when nothing waits on the plan's vars behind its last
//! pushed replay (waiting or running) is queued on that one (`plan/chain.rs`) rather than
//! pushed; that one, once its ops are done, starts it on the vars it holds, handing on what
//! its last writers left on the vars it wrote (a failure, or none), and only the last of a
//! chain gives the vars back. A replay is pushed under the chain's lock, so that the tail it
//! records is the last one in every var's queue. Not chained: a plan that writes no var (its
//! replays may overlap) and the naive engine's plans (a push there may run the replay on the
//! pushing thread, which would then hold that lock).
//!
//! Subtle: an op's failure slot is written (by a failed dependency, or at the start for a
//! failure a var held) before the count-down that releases it, and so is the replay's
//! `failed` flag; the op reads both after that count-down (or after the pool handed it over),
//! so it sees them, and a replay in which nothing failed reads only the flag, a line nobody
//! writes.

mod device;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::Arc;

use depengine_device::DeviceError;
use depengine_graph::{Access, ReadyOp, Var};
use depengine_sync::{AtomicBool, Mutex, OnceLock, Ordering, lock};

use crate::context::{FnProperty, RunContext};
use crate::error::Result;
use crate::failure::{FailureCause, OpFailure};
use crate::name::OpName;
use crate::op::plan::{
    FinishPlanOp, GpuGraph, GraphMember, PlanFn, PlanInner, PlanOp, PlanOpDone, SyncPlanFn, Target,
};
use crate::op::record::{OpFn, OpRecord, Payload};
use crate::op::vars::OpVars;
use crate::plan::chain::ReplayLink;
use crate::plan::launches::Launches;
use crate::plan::release_counts::ReleaseCounts;
use crate::profile::recorder::{ProfiledOp, Started};
use crate::route::block::CpuBlock;
use crate::run::EngineState;
use crate::run::device::InFlight;
use crate::run::execute::op_span;
use crate::thread;
use crate::thread::frame;

/// One replay of a plan (see the module documentation).
struct Replay {
    state: Arc<EngineState>,
    plan: Arc<PlanInner>,
    /// What was pushed (or queued on) as this replay: where replays queue behind it.
    link: Arc<ReplayLink>,
    /// Per op, its dependencies still running; then (`end`) the ops not finished.
    counts: ReleaseCounts,
    /// The counter past the ops': the thread that takes it to zero completes the replay (and
    /// has taken in every op's effects, as a dependent would).
    end: u32,
    /// Per op, its failure: inherited (it skips) or its own; made at the first failure, so
    /// that a replay in which nothing fails allocates none.
    failures: OnceLock<Box<[OnceLock<OpFailure>]>>,
    /// Whether any failure slot was written.
    failed: AtomicBool,
    /// Some var may hold a failure from before its chain (`EntryFailures::graph`), for the replay
    /// it passes its vars on to.
    graph_failures: bool,
    /// The replay's op, completed once (by the thread that takes `end` to zero).
    done: Mutex<Option<ReadyOp<OpRecord>>>,
    /// The released ops without a block (the naive engine).
    inline: Mutex<Queued>,
    /// The released GPU ops not yet handed to their executors.
    devices: Mutex<Queued>,
    /// Its sync GPU ops released at each other's launch, if the plan has such
    /// (`plan/launches.rs`).
    launches: Option<Launches<Part>>,
    /// The sync GPU ops whose last predecessor along an at-launch edge finished, to finish.
    finishing: Mutex<Queued>,
}

/// A sync GPU op's own part, done: what its function and its device gave (`Launches`).
struct Part {
    /// What its function returned (its own failure); `Ok` for a skipped op.
    returned: Result<(), OpFailure>,
    device: Result<(), DeviceError>,
    started: Option<Started>,
    /// Its launch released its dependents along at-launch edges.
    launched: bool,
    /// Counted as device work until the op is finished.
    work: Option<InFlight>,
}

impl Part {
    /// The part of an op done without device work: skipped (`returned` `Ok`), or failed unrun.
    fn unrun(returned: Result<(), OpFailure>) -> Self {
        Part {
            returned,
            device: Ok(()),
            started: None,
            launched: false,
            work: None,
        }
    }
}

/// Ops of a replay that are released and not yet run (or handed to their executors), and
/// whether a thread is running them: one at a time, so that an op released while one runs (by
/// an async op completed inside its function, a device op completed inside `execute_device`)
/// waits in the queue rather than on the stack.
#[derive(Default)]
struct Queued {
    ops: Vec<u32>,
    running: bool,
}

impl Queued {
    /// The next op for the thread that runs them, if `starting` it and no thread does; `None`
    /// once none is queued, when no thread runs them any more (set under the queue's lock, so
    /// that an op queued after runs on the thread that queued it).
    fn next(&mut self, starting: bool) -> Option<u32> {
        if starting {
            if self.running {
                return None;
            }
            self.running = true;
        }
        let op = self.ops.pop();
        self.running = op.is_some();
        op
    }
}

/// Queues `ops` on `queue`, then runs what it holds with `run`, one op after another, unless a
/// thread runs it already (which then runs them).
fn run_queued(queue: &Mutex<Queued>, ops: impl IntoIterator<Item = u32>, mut run: impl FnMut(u32)) {
    lock(queue).ops.extend(ops);
    let mut next = lock(queue).next(true);
    while let Some(op) = next {
        run(op);
        next = lock(queue).next(false);
    }
}

/// Where the failures a replay's vars hold on entry are found.
struct EntryFailures {
    /// Some var may hold one in the graph (`Graph::op_failure` found one when the chain's
    /// first replay started): looked up there, but for the vars `previous` wrote.
    graph: bool,
    /// What the replay before it in its chain left on the vars it wrote, by position in the
    /// plan's reads then writes (`Replay::complete`'s list; empty: no failure); `None` for a
    /// replay that took its vars from the graph.
    previous: Option<Vec<Option<OpFailure>>>,
}

impl EntryFailures {
    /// The failure `var`, at `position` of the plan's reads then writes (of which `reads`
    /// are reads), holds.
    fn failure(
        &self,
        state: &EngineState,
        var: Var,
        position: usize,
        reads: usize,
    ) -> Option<OpFailure> {
        match &self.previous {
            Some(previous) if position >= reads => previous.get(position)?.clone(),
            _ if self.graph => state.graph.var_failure(var).ok().flatten(),
            _ => None,
        }
    }

    /// Whether any var may hold a failure.
    fn any(&self) -> bool {
        self.graph || self.previous.as_ref().is_some_and(|list| !list.is_empty())
    }
}

impl EngineState {
    /// Runs a replay of `plan` (queued replays behind it on `link`), whose op `op` is ready;
    /// `failed_before`: some var of it may hold a failure (`Graph::op_failure` found one).
    pub(super) fn start_replay(
        self: &Arc<Self>,
        plan: Arc<PlanInner>,
        link: Arc<ReplayLink>,
        op: ReadyOp<OpRecord>,
        failed_before: bool,
    ) {
        if plan.deps.counts.is_empty() {
            // A plan without ops has no vars: nothing is queued on it.
            return self.finish_with_each(op, &[]);
        }
        let on_entry = EntryFailures {
            graph: failed_before,
            previous: None,
        };
        self.run_replay(plan, link, op, &on_entry);
    }

    /// Pushes a replay of `plan`, or queues it on the plan's last pushed replay when nothing
    /// waits behind that one on the plan's vars (see the module documentation).
    ///
    /// # Errors
    ///
    /// As a push's.
    pub(crate) fn push_replay(self: &Arc<Self>, plan: &Arc<PlanInner>) -> Result<()> {
        let named = |error| self.named(error, Some(plan.replay_name.as_str()));
        let route = self
            .route(plan.context, FnProperty::Normal)
            .map_err(named)?;
        for &device in &*plan.devices {
            self.route(device, FnProperty::Normal).map_err(named)?;
        }
        // Admitted before the chain's lock: the bound may block, and the tail needs the lock
        // to end.
        self.pending.admit(thread::runs_engine_work)?;
        let deps = &plan.deps;
        let link = Arc::new(ReplayLink::default());
        let record = || OpRecord {
            name: plan.replay_name.clone(),
            func: Some(OpFn::Replay(Arc::clone(plan), Arc::clone(&link))),
            context: plan.context,
            property: FnProperty::Normal,
            priority: 0,
            route,
            profiled: false,
        };
        // A plan that writes no var is not chained: replays of it may run side by side, as
        // reads do, where a chain would run them one after the other.
        if plan.inline || deps.writes.is_empty() {
            return self
                .push_admitted(&deps.reads, &deps.writes, record())
                .map_err(named);
        }
        // Checked outside the chain's lock, which the tail takes to end (`plan/chain.rs`).
        let queued = plan.chain.tail().is_some_and(|tail| {
            let behind_tail = deps.reads.iter().chain(&deps.writes).all(|&var| {
                self.graph.waits_last(
                    var,
                    |payload| matches!(payload, Payload::Op(record) if record.is_replay(&tail)),
                )
            });
            behind_tail && plan.chain.lock().try_queue(&tail)
        });
        if queued {
            // An entry into the graph, as a push is (see `push_admitted`).
            self.close_open_segment();
            self.entered_graph();
            return Ok(());
        }
        let mut chain = plan.chain.lock();
        self.push_admitted(&deps.reads, &deps.writes, record())
            .map_err(named)?;
        chain.pushed(&link);
        Ok(())
    }

    /// Runs a replay of `plan` on the vars its op `op` holds, which hold the failures
    /// `on_entry` finds.
    fn run_replay(
        self: &Arc<Self>,
        plan: Arc<PlanInner>,
        link: Arc<ReplayLink>,
        op: ReadyOp<OpRecord>,
        on_entry: &EntryFailures,
    ) {
        let deps = &plan.deps;
        let ops = deps.counts.len();
        // Capture numbers ops by `u32`, one below the most.
        let end = u32::try_from(ops).unwrap_or(u32::MAX);
        let replay = Arc::new(Replay {
            state: Arc::clone(self),
            counts: ReleaseCounts::new(deps.counts.iter().copied().chain([end])),
            end,
            failures: OnceLock::new(),
            failed: AtomicBool::new(false),
            graph_failures: on_entry.graph,
            done: Mutex::new(Some(op)),
            inline: Mutex::new(Queued::default()),
            devices: Mutex::new(Queued::default()),
            launches: plan
                .deps
                .launches()
                .then(|| Launches::new(&plan.deps.launch_preds)),
            finishing: Mutex::new(Queued::default()),
            plan,
            link,
        });
        // Rule 2 on entry: the plan's first ops on a var that holds a failure skip.
        let deps = &replay.plan.deps;
        if on_entry.any() {
            let vars = deps.reads.iter().chain(&deps.writes);
            for (position, (&var, entries)) in vars.zip(&*deps.entries).enumerate() {
                if let Some(failure) = on_entry.failure(self, var, position, deps.reads.len()) {
                    for &op in &**entries {
                        replay.fail(op, &failure);
                    }
                }
            }
        }
        for (group, roots) in (0..).zip(&*replay.plan.roots) {
            let block = match roots.target {
                Target::Block(key) => self.workers.block(key),
                Target::Inline => None,
                Target::Device { .. } => {
                    replay.to_devices(roots.ops.iter().rev().copied());
                    continue;
                }
            };
            if let Some(block) = block {
                // Up to `JOBS_PER_WORKER` jobs per worker, of `grain` roots each: a job costs a
                // spawn and a steal, and enough of them keep every worker busy.
                let jobs = block.num_threads() * JOBS_PER_WORKER;
                let grain = roots.ops.len().div_ceil(jobs).max(1);
                for start in (0..roots.ops.len()).step_by(grain) {
                    let replay = Arc::clone(&replay);
                    block.spawn(move || replay.run_roots(group, start, grain));
                }
            } else {
                // The naive engine's (a block a plan names started at its capture, and is never
                // stopped while the engine lives).
                lock(&replay.inline)
                    .ops
                    .extend(roots.ops.iter().rev().copied());
                replay.run_inline(0);
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
        match self.plan.ops[op as usize].target {
            Target::Block(key) => self.state.workers.block(key),
            Target::Inline | Target::Device { .. } => None,
        }
    }

    /// Sends a released `op` to its block, its device's executor, or the inline queue.
    #[inline]
    fn release(self: &Arc<Self>, op: u32) {
        if let Some(block) = self.block(op) {
            let replay = Arc::clone(self);
            return block.spawn(move || replay.run_from(std::iter::once(op)));
        }
        match self.plan.ops[op as usize].target {
            Target::Device { .. } => self.to_devices(std::iter::once(op)),
            Target::Block(_) | Target::Inline => lock(&self.inline).ops.push(op),
        }
    }

    /// A failure of `op` of this cause.
    fn op_failure(&self, op: u32, cause: FailureCause) -> OpFailure {
        OpFailure::new(self.plan.ops[op as usize].name.to_cow(), cause)
    }

    /// Gives `op` `failure`, unless it has one.
    fn fail(&self, op: u32, failure: &OpFailure) {
        let failures = self
            .failures
            .get_or_init(|| (0..self.plan.ops.len()).map(|_| OnceLock::new()).collect());
        let _ = failures[op as usize].set(failure.clone());
        self.failed.store(true, Ordering::Relaxed);
    }

    /// `op`'s failure, if it has one.
    #[inline]
    fn failure(&self, op: u32) -> Option<&OpFailure> {
        if self.failed.load(Ordering::Relaxed) {
            self.failures.get()?[op as usize].get()
        } else {
            None
        }
    }

    /// Runs the roots `start..start + grain` of root group `group`.
    fn run_roots(self: &Arc<Self>, group: usize, start: usize, grain: usize) {
        let ops = &self.plan.roots[group].ops;
        let end = (start + grain).min(ops.len());
        self.run_from(ops[start..end].iter().copied());
    }

    /// Runs each op of `first` and the dependents it keeps, until none is left; then counts
    /// them finished. The ops of `first` share a block. An async op is counted by its
    /// completion instead (`finish_plan_op`).
    fn run_from(self: &Arc<Self>, mut first: impl Iterator<Item = u32>) {
        let finished = self.within_frame(|| {
            let mut next = None;
            let mut finished = 0;
            while let Some(op) = next.take().or_else(|| first.next()) {
                if self.run_op(op) == Ran::Done {
                    self.release_dependents(op, Some(&mut next));
                    finished += 1;
                }
            }
            finished
        });
        self.count_finished(finished);
    }

    /// Runs `f`, which runs ops of the replay, inside a frame of the replay's vars: a wait
    /// inside an op's function sees them held (`thread/frame.rs`). One frame for every op `f`
    /// runs, as they share it; the completion of the replay runs outside (`count_finished`).
    #[inline]
    fn within_frame<R>(&self, f: impl FnOnce() -> R) -> R {
        let deps = &self.plan.deps;
        frame::within_replay(self.state.id(), &deps.reads, &deps.writes, f)
    }

    /// Runs the inline queue's ops until it is empty, unless another call runs them (on this
    /// thread, further up the stack, or on another); then counts them finished, with
    /// `finished` more.
    fn run_inline(self: &Arc<Self>, mut finished: u32) {
        self.within_frame(|| {
            run_queued(&self.inline, [], |op| {
                if self.run_op(op) == Ran::Done {
                    self.release_dependents(op, None);
                    finished += 1;
                }
            });
        });
        self.count_finished(finished);
    }

    /// Counts `finished` ops finished; the thread that counts the last completes the replay.
    fn count_finished(&self, finished: u32) {
        // None counted: the counter may have reached zero already (async ops completed
        // elsewhere), and the replay is completed once.
        if finished > 0 && self.counts.release_many(self.end, finished) {
            self.complete();
        }
    }

    /// Counts `op`, which is done, finished for each of its dependents, passing its failure on:
    /// the first released on its block goes to `keep` (if given, and empty) to run next on this
    /// thread; the others are released (`release`).
    #[inline]
    fn release_dependents(self: &Arc<Self>, op: u32, keep: Option<&mut Option<u32>>) {
        self.release_dependents_with::<false>(op, keep, false);
    }

    /// As `release_dependents`; with `LAUNCHES`, for a sync GPU op, which has edges at launch
    /// (the others have none: `mark_launches`), and whose launch released its dependents along
    /// them already if `launched`.
    #[inline]
    fn release_dependents_with<const LAUNCHES: bool>(
        self: &Arc<Self>,
        op: u32,
        mut keep: Option<&mut Option<u32>>,
        launched: bool,
    ) {
        let failure = self.failure(op).cloned();
        let target = self.plan.ops[op as usize].target;
        for edge in self.plan.deps.successors(op) {
            if LAUNCHES && edge.at_launch {
                let passed_on = failure.as_ref().filter(|_| edge.passes_failure);
                self.launch_edge_done(*edge, passed_on, launched);
                continue;
            }
            if edge.passes_failure
                && let Some(failure) = &failure
            {
                self.fail(edge.to, failure);
            }
            debug_assert!(
                !edge.at_launch,
                "an edge at launch from an op that cannot launch"
            );
            // A sole dependency's count-down is skipped: this thread releases the dependent,
            // which the pool (or this thread) hands over with what this op wrote.
            if !edge.sole && !self.counts.release(edge.to) {
                continue;
            }
            match keep.as_deref_mut() {
                Some(next @ None) if self.plan.ops[edge.to as usize].target == target => {
                    *next = Some(edge.to);
                }
                _ => self.release(edge.to),
            }
        }
    }

    /// What the profiler records of `op`.
    fn profiled_op(&self, op: u32) -> ProfiledOp<'_> {
        let plan_op = &self.plan.ops[op as usize];
        ProfiledOp {
            name: &plan_op.name,
            context: plan_op.run.context,
            property: plan_op.run.property,
            priority: plan_op.run.priority,
        }
    }

    /// Runs `op`'s function, unless it inherited a failure; a failure of its own is kept. An
    /// async op is `Pending` until its completion.
    #[inline]
    fn run_op(self: &Arc<Self>, op: u32) -> Ran {
        let plan_op = &self.plan.ops[op as usize];
        let profiler = &self.state.profiler;
        let recorded = profiler.wants(plan_op.profiled);
        if self.failure(op).is_some() {
            if recorded {
                profiler.record_skipped(&self.profiled_op(op), thread::profiled());
            }
            return Ran::Done;
        }
        let started = recorded.then(|| profiler.start(thread::profiled()));
        let outcome = match &plan_op.func {
            PlanFn::Sync(func) => {
                let vars = PlanOpVars::of(&self.state, plan_op);
                let returned = Self::call(&plan_op.name, || func(plan_op.run, &vars));
                EngineState::outcome(&plan_op.name, returned)
            }
            PlanFn::DeviceGraph(graph) => self.call_device_graph(graph),
            PlanFn::Async(func) => {
                let done = PlanOpDone {
                    replay: Some(Arc::clone(self) as Arc<dyn FinishPlanOp>),
                    op,
                    started,
                };
                let vars = PlanOpVars::of(&self.state, plan_op);
                // A panic drops the completion (or `done`, before it became one) while
                // unwinding, which fails the op.
                let _ = Self::call(&plan_op.name, || func(plan_op.run, &vars, done));
                return Ran::Pending;
            }
        };
        self.state
            .profile(|| self.profiled_op(op), started, &outcome);
        if let Err(failure) = outcome {
            self.state.log_own_failure(&failure);
            self.fail(op, &failure);
        }
        Ran::Done
    }

    /// Calls sync function `func` of `op`, named `name`: its outcome.
    #[inline]
    fn call_sync(
        &self,
        name: &OpName,
        func: &SyncPlanFn,
        run: RunContext,
        op: &impl NamedVars,
    ) -> Result<(), OpFailure> {
        let vars = PlanOpVars::of(&self.state, op);
        EngineState::outcome(name, Self::call(name, || func(run, &vars)))
    }

    /// Calls the functions of `graph`'s ops one after another, up to the first that fails: the
    /// graph's outcome (it fails as one op). Out of line: only a device's executor, or the
    /// naive engine's inline queue, runs a graph.
    #[inline(never)]
    fn call_device_graph(&self, graph: &GpuGraph) -> Result<(), OpFailure> {
        graph
            .members
            .iter()
            .try_for_each(|op| self.call_sync(&op.name, &op.func, op.run, op))
    }

    /// Calls `f`, the function of op `name`, catching a panic; the span is made inside the
    /// `catch_unwind`, as a pushed op's (`run/execute.rs`). Its caller runs it inside the
    /// replay's frame (`within_frame`).
    #[inline]
    fn call<R>(name: &OpName, f: impl FnOnce() -> R) -> std::thread::Result<R> {
        catch_unwind(AssertUnwindSafe(|| op_span(name.as_str()).in_scope(f)))
    }

    /// Completes the replay's op: each written var with its last writer's outcome.
    fn complete(&self) {
        let deps = &self.plan.deps;
        // None: every var cleared, as an empty list says.
        let mut failures: Vec<Option<OpFailure>> = Vec::new();
        if self.failed.load(Ordering::Relaxed) {
            failures.resize(deps.reads.len(), None);
            failures.extend(
                deps.last_writers
                    .iter()
                    .map(|&writer| self.failure(writer).cloned()),
            );
        }
        let done = lock(&self.done).take();
        let Some(op) = done else {
            return;
        };
        if self.plan.chain.pass_on(&self.link) {
            // This replay is done; the queued one starts on its vars, which stay held.
            self.state.finished(None);
            let on_entry = EntryFailures {
                graph: self.graph_failures,
                previous: Some(failures),
            };
            // A plan with GPU ops starts it on a worker of the replay's block: an executor that
            // completes ops inside `execute_device` would otherwise run a chain's replays nested
            // on this stack, one level per replay.
            let block = (!self.plan.devices.is_empty())
                .then(|| op.payload().block_key())
                .flatten()
                .and_then(|key| self.state.workers.block(key));
            let (state, plan, link) = (
                Arc::clone(&self.state),
                Arc::clone(&self.plan),
                Arc::clone(&self.link),
            );
            let next = move || state.run_replay(plan, link, op, &on_entry);
            return match block {
                Some(block) => block.spawn(next),
                None => next(),
            };
        }
        self.state.finish_with_each(op, &failures);
    }
}

/// What running a plan's op did.
#[derive(PartialEq, Eq)]
enum Ran {
    /// It is done (run, failed or skipped).
    Done,
    /// Its function took its completion (an async op).
    Pending,
}

impl FinishPlanOp for Replay {
    fn finish_plan_op(
        self: Arc<Self>,
        op: u32,
        started: Option<Started>,
        outcome: Result<(), OpFailure>,
    ) {
        self.state
            .profile(|| self.profiled_op(op), started, &outcome);
        if let Err(failure) = outcome {
            self.state.log_own_failure(&failure);
            self.fail(op, &failure);
        }
        // Its dependents go to their blocks: this thread may be any (one the function handed
        // its completion to). On the naive engine they run here, as a pushed op's would,
        // unless a thread runs the replay's ops already (this one, if the function completed
        // the op before returning).
        self.release_dependents(op, None);
        if self.plan.inline {
            self.run_inline(1);
        } else {
            self.count_finished(1);
        }
    }

    fn plan_op_name(&self, op: u32) -> &OpName {
        &self.plan.ops[op as usize].name
    }
}

/// The vars of a replayed op (`O`: a plan's op, or an op of a graph), which its replay holds
/// while the function runs: where a typed op finds its data's cells (`data/access.rs`).
struct PlanOpVars<'a, O> {
    state: &'a EngineState,
    op: &'a O,
}

impl<'a, O: NamedVars> PlanOpVars<'a, O> {
    fn of(state: &'a EngineState, op: &'a O) -> Self {
        PlanOpVars { state, op }
    }
}

/// A captured op's vars, as named: its reads or its writes.
trait NamedVars {
    fn named(&self, access: Access) -> &[Var];
}

impl NamedVars for PlanOp {
    #[inline]
    fn named(&self, access: Access) -> &[Var] {
        match access {
            Access::Read => &self.reads,
            Access::Write => &self.writes,
        }
    }
}

impl NamedVars for GraphMember {
    fn named(&self, access: Access) -> &[Var] {
        match access {
            Access::Read => &self.reads,
            Access::Write => &self.writes,
        }
    }
}

impl<O: NamedVars> OpVars for PlanOpVars<'_, O> {
    fn attachment(&self, access: Access, from_end: usize) -> Option<NonNull<()>> {
        let list = self.op.named(access);
        let at = list.len().checked_sub(from_end + 1)?;
        self.state.graph.attachment(list[at])
    }
}
