//! Running a ready segment: its members one after the other, each checked for failures and
//! recorded as an op of its own, then one completion with each written var's last outcome
//! (see "Why the semantics are those of ops pushed alone" in `mod.rs`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use depengine_graph::{ReadyOp, Var};

use crate::failure::OpFailure;
use crate::op::record::{BlockKey, OpRecord};
use crate::op::segment::{Member, Segment};
use crate::profile::recorder::ProfiledOp;
use crate::run::EngineState;
use crate::run::held_vars::HeldVars;
use crate::thread;

/// The failures a segment's vars hold while its members run: what each held when the segment
/// became ready, then what each member that wrote it left. Made only once a var of the segment
/// holds one (the first failing member, or a failure found when the segment became ready).
struct HeldFailures {
    /// The segment's vars, by position (reads, then writes).
    vars: Box<[Var]>,
    /// The failure each var holds now, by position.
    held: Box<[Option<OpFailure>]>,
    /// The vars that failed or skipped members wrote, for the failure log.
    written: Vec<Var>,
}

impl HeldFailures {
    /// No failure held on `op`'s vars.
    fn none(op: &ReadyOp<OpRecord>) -> Self {
        let vars: Box<[Var]> = op.reads().chain(op.writes()).collect();
        HeldFailures {
            held: vec![None; vars.len()].into(),
            vars,
            written: Vec::new(),
        }
    }

    /// The first failure held by one of `positions` (a member's vars, in its order).
    fn first(&self, positions: &[u8]) -> Option<OpFailure> {
        positions
            .iter()
            .find_map(|&at| self.held.get(usize::from(at))?.clone())
    }

    /// A member wrote `positions` and ended with `failure`.
    fn failed(&mut self, positions: &[u8], failure: &OpFailure) {
        for &at in positions {
            if let (Some(held), Some(&var)) = (
                self.held.get_mut(usize::from(at)),
                self.vars.get(usize::from(at)),
            ) {
                *held = Some(failure.clone());
                self.written.push(var);
            }
        }
    }

    /// A member wrote `positions` and succeeded: the write replaced the failed data.
    fn cleared(&mut self, positions: &[u8]) {
        for &at in positions {
            if let Some(held) = self.held.get_mut(usize::from(at)) {
                *held = None;
            }
        }
    }
}

impl EngineState {
    /// Runs the segment `segment` of the ready `op` (or skips its members whose vars failed)
    /// and completes it; `failed_before`: a var of the segment held a failure when it became
    /// ready. `keep_for` as for `execute`.
    pub(in crate::run) fn run_segment(
        self: &Arc<Self>,
        op: ReadyOp<OpRecord>,
        segment: &Segment,
        failed_before: bool,
        keep_for: Option<BlockKey>,
    ) {
        let mut failures = failed_before.then(|| {
            let mut failures = HeldFailures::none(&op);
            for (held, &var) in failures.held.iter_mut().zip(&failures.vars) {
                *held = self.graph.var_failure(var).ok().flatten();
            }
            failures
        });
        let mut batch = Vec::new();
        while segment.take_into(&mut batch) {
            for member in batch.drain(..) {
                self.run_member(&op, member, &mut failures);
            }
        }
        self.finish_segment(op, failures, keep_for);
    }

    /// Runs one member of the segment `op` (or skips it, rule 2 on its own vars), as an op of
    /// its own for the profiler, `tracing` and the failure log.
    #[allow(
        unsafe_code,
        reason = "a member's function is called with its vars: see the SAFETY comment"
    )]
    fn run_member(
        &self,
        op: &ReadyOp<OpRecord>,
        member: Member,
        failures: &mut Option<HeldFailures>,
    ) {
        let record = op.payload();
        let profiled = self.profiler.wants(member.profiled);
        let name = &member.name;
        let profiled_op = || ProfiledOp {
            name,
            context: record.context,
            property: record.property,
            priority: record.priority,
        };
        let inherited = failures
            .as_ref()
            .and_then(|failures| failures.first(member.vars.all()));
        let outcome = if let Some(failure) = inherited {
            // Rule 2: it does not run; it passes the failure on.
            let func = member.func;
            let _ = catch_unwind(AssertUnwindSafe(move || drop(func)));
            if profiled {
                self.profiler
                    .record_skipped(&profiled_op(), thread::profiled());
            }
            Err(failure)
        } else {
            let started = profiled.then(|| self.profiler.start(thread::profiled()));
            let func = member.func;
            let vars = HeldVars::of_member(&self.graph, op, &member.vars);
            let outcome = self.call_sync(op, name, record.run_context(), |run| {
                // SAFETY: `vars` are the member's, as it named them (positions in the
                // segment's vars), and the segment holds every one of them until it is
                // finished, after its last member returned.
                unsafe { func.call(run, &vars) }
            });
            self.profile(profiled_op, started, &outcome);
            if let Err(failure) = &outcome {
                self.log_own_failure(failure);
            }
            outcome
        };
        match outcome {
            Ok(()) => {
                if let Some(failures) = failures {
                    failures.cleared(member.vars.writes());
                }
            }
            Err(failure) => failures
                .get_or_insert_with(|| HeldFailures::none(op))
                .failed(member.vars.writes(), &failure),
        }
    }

    /// Completes a segment: each written var with the outcome its last writer left (a failure
    /// stored, or cleared), what it released dispatched as `finish` does; then the failed and
    /// skipped members' vars go to the failure log, and the segment is counted done.
    fn finish_segment(
        self: &Arc<Self>,
        op: ReadyOp<OpRecord>,
        failures: Option<HeldFailures>,
        keep_for: Option<BlockKey>,
    ) {
        let (held, written) = failures.map_or((None, Vec::new()), |failures| {
            (Some(failures.held), failures.written)
        });
        let failure_of = |position: usize| held.as_ref()?.get(position)?.as_ref();
        self.finish_each(op, failure_of, written, keep_for);
    }
}
