//! Execute and finish: a ready op runs its function (or is skipped, passing on the failure of
//! one of its vars) and completes, releasing its dependents; and the ways the engine's threads
//! reach these steps (a CPU block's runner, a naive op queued on a thread, an async op's
//! `Completion`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use depengine_graph::{LaunchedOp, ReadyOp, Var};

use crate::context::RunContext;
use crate::failure::{BoxError, FailureCause, OpFailure, panic_message};
use crate::name::OpName;
use crate::op::record::OperatorFn;
use crate::op::record::{BlockKey, OpFn, OpRecord, Payload};
use crate::op::record::{Completion, FinishAsync};
use crate::profile::recorder::{ProfiledOp, Started};
use crate::profile::report::ProfiledOutcome;
use crate::route::block::BlockOp;
use crate::run::fences::Registration;
use crate::run::held_vars::HeldVars;
use crate::run::{Dispatcher, EngineState};
use crate::thread::frame::{self, OpFrame};
use crate::thread::serving::BlockRunner;
use crate::thread::task::TaskMarker;
use crate::thread::{self, RunQueuedOp};

/// The `tracing` span an op's function runs in: `Span::none()` (a level check) unless a
/// subscriber wants `TRACE` from `depengine::op`.
#[inline]
pub(super) fn op_span(name: &str) -> tracing::Span {
    tracing::trace_span!(target: "depengine::op", "op", name)
}

/// Drops an op's function unrun: a panic in a captured value's `Drop` must not keep the op
/// from completing.
fn drop_unrun(op: &mut ReadyOp<OpRecord>) {
    let func = op.payload_mut().func.take();
    let _ = catch_unwind(AssertUnwindSafe(move || drop(func)));
}

/// `op_span` for an async op, created before the op moves into its `Completion`; a panic in
/// the subscriber leaves the op without a span.
fn async_op_span(op: &ReadyOp<OpRecord>) -> tracing::Span {
    let name = op.payload().name.as_str();
    catch_unwind(AssertUnwindSafe(|| op_span(name))).unwrap_or_else(|_| tracing::Span::none())
}

impl EngineState {
    /// Runs a ready op (or skips it, passing on the failure of one of its vars) and completes
    /// it. With `keep_for` (the calling thread is a worker of that block), the first op that
    /// the completion of a sync (or skipped) op releases onto the same block is kept for this
    /// worker, which runs it next. Async ops complete through their `Completion`, on any
    /// thread: nothing is kept for them.
    ///
    /// The op runs as a task of this engine (`TaskMarker`): a thread with `keep_for` serves one
    /// of the engine's blocks, which already counts as running its tasks (`TaskMarker::active`),
    /// so only the others mark themselves, and a worker's op pays no thread-local push and pop.
    pub(super) fn execute(self: &Arc<Self>, op: ReadyOp<OpRecord>, keep_for: Option<BlockKey>) {
        let _marker = keep_for.is_none().then(|| TaskMarker::enter(self.id));
        self.run_function(op, keep_for, |op, outcome, started| {
            self.finish_profiled(op, started, outcome, true, keep_for);
        });
    }

    /// Runs a ready op's function, or skips it (passing on the failure of one of its vars). A
    /// sync function's op goes to `returned` with what the function returned (or its panic) as
    /// the op's outcome, and when it started for a profiled op, to be finished (at once on a
    /// CPU worker, once the device is done for a GPU op, `run/device.rs`); an op that is
    /// finished otherwise (skipped, without a function, async, a bulk segment) does not, and
    /// `returned` is not called. Three arguments rather than one struct of them: 144 bytes,
    /// which the compiler copied with a call to `memcpy` per op.
    #[allow(
        clippy::inline_always,
        reason = "the CPU workers' per-op path: left to the compiler it was measurably slower, see docs/decisions.md, 'Inlining the worker path'"
    )]
    #[allow(
        unsafe_code,
        reason = "a sync function is called with its op's vars: see the SAFETY comment"
    )]
    #[inline(always)]
    pub(super) fn run_function(
        self: &Arc<Self>,
        mut op: ReadyOp<OpRecord>,
        keep_for: Option<BlockKey>,
        returned: impl FnOnce(ReadyOp<OpRecord>, Result<(), OpFailure>, Option<Started>),
    ) {
        let profiled = self.profiler.wants(op.payload().profiled);
        if let Some(failure) = self.graph.op_failure(&op) {
            // A segment's members are checked one by one, on their own vars.
            if let Some(segment) = op.payload_mut().take_segment() {
                return self.run_segment(op, &segment, true, keep_for);
            }
            // A replay's ops check their own vars.
            if let Some((plan, link)) = op.payload_mut().take_replay() {
                return self.start_replay(plan, link, op, true);
            }
            // Rule 2: a dependent of a failed var does not run; it passes the failure on.
            drop_unrun(&mut op);
            if profiled {
                self.profiler
                    .record_skipped(&op.payload().profiled_op(), thread::profiled());
            }
            return self.finish(op, Err(failure), false, keep_for);
        }
        self.graph.prefetch_vars(&op);
        let run = op.payload().run_context();
        let Some(func) = op.payload_mut().func.take() else {
            return self.finish(op, Ok(()), false, keep_for);
        };
        let start = || profiled.then(|| self.profiler.start(thread::profiled()));
        // The op's `tracing` span is created, entered, left and closed inside the op's
        // `catch_unwind`: a panicking subscriber fails the op instead of unwinding a worker.
        match func {
            OpFn::Sync(func) => {
                let started = start();
                let vars = HeldVars::of(&self.graph, &op);
                let outcome = self.call_sync(&op, &op.payload().name, run, |run| {
                    // SAFETY: `vars` are the op's own, as pushed, and the op holds them until
                    // `returned` completes it, after this call.
                    unsafe { func.call(run, &vars) }
                });
                returned(op, outcome, started);
            }
            OpFn::Async(func) => self.call_async(op, start(), run, func),
            OpFn::Operator(operator) => match &operator.func {
                OperatorFn::Sync(func) => {
                    let started = start();
                    let outcome = self.call_sync(&op, &op.payload().name, run, func);
                    // The last reference to a deleted operator drops its function (and what
                    // it captured), which may panic.
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(operator)));
                    returned(op, outcome, started);
                }
                OperatorFn::Async(func) => {
                    self.call_async(op, start(), run, func);
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(operator)));
                }
            },
            // Its members are recorded (and their spans made) one by one.
            OpFn::Segment(segment) => self.run_segment(op, &segment, false, keep_for),
            OpFn::Replay(plan, link) => self.start_replay(plan, link, op, false),
        }
    }

    /// Completes an op that does not run, with its own `failure` (its function dropped
    /// unrun).
    pub(super) fn fail_unrun(self: &Arc<Self>, mut op: ReadyOp<OpRecord>, failure: OpFailure) {
        drop_unrun(&mut op);
        self.finish(op, Err(failure), true, None);
    }

    /// Calls a sync op's function inside its frame (holding `op`'s vars) and `tracing` span,
    /// catching a panic, and turns what it returned into the outcome of the op named `name`
    /// (`op`'s own name, or a segment member's).
    pub(super) fn call_sync(
        &self,
        op: &ReadyOp<OpRecord>,
        name: &OpName,
        run: RunContext,
        func: impl FnOnce(RunContext) -> Result<(), BoxError>,
    ) -> Result<(), OpFailure> {
        let outcome = frame::within(self.id, op, || {
            let name = name.as_str();
            catch_unwind(AssertUnwindSafe(move || {
                op_span(name).in_scope(|| func(run))
            }))
        });
        Self::outcome(name, outcome)
    }

    /// Calls an async op's function with its `Completion`, inside its frame and span. A panic
    /// drops the `Completion` while unwinding, which completes the op as panicked.
    fn call_async(
        self: &Arc<Self>,
        op: ReadyOp<OpRecord>,
        started: Option<Started>,
        run: RunContext,
        func: impl FnOnce(RunContext, Completion),
    ) {
        let released = Arc::new(AtomicBool::new(false));
        let frame = OpFrame::enter_async(self.id, &op, Arc::clone(&released));
        let span = async_op_span(&op);
        let done = Completion::new(
            Arc::clone(self) as Arc<dyn FinishAsync>,
            op,
            started,
            released,
        );
        let _ = catch_unwind(AssertUnwindSafe(move || span.in_scope(|| func(run, done))));
        drop(frame);
    }

    /// Records a profiled op (`started` is `Some`; `op` says what it was) that ends with
    /// `outcome` now.
    pub(super) fn profile<'a>(
        &self,
        op: impl FnOnce() -> ProfiledOp<'a>,
        started: Option<Started>,
        outcome: &Result<(), OpFailure>,
    ) {
        if let Some(started) = started {
            let outcome = match outcome {
                Ok(()) => ProfiledOutcome::Completed,
                Err(_) => ProfiledOutcome::Failed,
            };
            self.profiler.record(&op(), started, outcome);
        }
    }

    /// Turns what the function of the op named `name` returned (or its panic) into an
    /// outcome: inlined into every sync op's call, the failures in a cold function.
    #[inline]
    pub(super) fn outcome(
        name: &OpName,
        result: std::thread::Result<Result<(), BoxError>>,
    ) -> Result<(), OpFailure> {
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(Self::failure(name, FailureCause::Error(error))),
            Err(payload) => Err(Self::failure(
                name,
                FailureCause::Panic(panic_message(&*payload)),
            )),
        }
    }

    /// The failure of the op named `name` with `cause`.
    #[cold]
    fn failure(name: &OpName, cause: FailureCause) -> OpFailure {
        OpFailure::new(name.to_cow(), cause)
    }

    /// Logs an op's own failure (rule 1): a `tracing` event, and the failure log that
    /// `wait_for_all` reports from.
    pub(super) fn log_own_failure(&self, failure: &OpFailure) {
        // Subscriber code and the op's error's `Display` run here: not under the failure
        // log's lock, and a panic in them must not keep the op from completing.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            tracing::debug!(target: "depengine::failure", %failure, "op failed");
        }));
        self.failures.add_root(failure.clone());
    }

    /// Completes an op with `outcome` (rule 1: a failure is stored on its written vars),
    /// dispatches what it released (keeping the first op released onto block `keep_for` for
    /// the calling worker, see `execute`), and counts it done. `root`: the failure is the op's
    /// own (not passed on from a var).
    pub(super) fn finish(
        self: &Arc<Self>,
        op: ReadyOp<OpRecord>,
        outcome: Result<(), OpFailure>,
        root: bool,
        keep_for: Option<BlockKey>,
    ) {
        // A failed op's written vars go to the failure log once the failure is stored on them
        // (see `failure/log.rs`); on this path only, so the copy costs nothing otherwise.
        let failed_writes: Option<Vec<Var>> = outcome.is_err().then(|| op.writes().collect());
        if let Err(failure) = &outcome
            && root
        {
            self.log_own_failure(failure);
        }
        let mut dispatcher = Dispatcher::new(self, false, keep_for);
        // The op came from this graph, so `complete` cannot fail; the payload (the op's record,
        // its function already consumed) is dropped here.
        let _ = self
            .graph
            .complete(op.map(Payload::Op), outcome, &mut dispatcher);
        dispatcher.wake_now();
        self.finished(failed_writes);
        // Only now, the op counted done: the callbacks of the vars it reclaimed.
        drop(dispatcher);
    }

    /// Completes a launched GPU op (`run/device.rs`) once the device is done with its work,
    /// with `outcome`: as `finish` does for an op that did not launch, releasing the ops behind
    /// it that wait for completion (`root`: a failure is the op's own, not passed on).
    pub(super) fn finish_launched(
        self: &Arc<Self>,
        op: LaunchedOp<OpRecord>,
        outcome: Result<(), OpFailure>,
        root: bool,
        registration: &Registration,
    ) {
        let failed_writes: Option<Vec<Var>> = outcome.is_err().then(|| op.writes().collect());
        if let Err(failure) = &outcome
            && root
        {
            self.log_own_failure(failure);
        }
        let mut dispatcher = Dispatcher::new(self, false, None);
        // Launched from this graph, so `complete_launched` cannot fail.
        let _ = self.graph.complete_launched(
            op,
            outcome,
            |_, on_var| on_var.remove(registration),
            &mut dispatcher,
        );
        dispatcher.wake_now();
        self.finished(failed_writes);
        // As in `finish`.
        drop(dispatcher);
    }

    /// Counts an op done that the graph could not complete (only another graph's op, which
    /// the engine never hands it): nobody waits for it forever.
    pub(super) fn finish_uncompleted(&self) {
        self.finished(None);
    }

    /// Completes an op that stands for several (a bulk segment, a replay), whose parts logged
    /// their own failures: each var it writes ends with `failure_of(position)` (`None`:
    /// cleared; `position` in its reads then writes), what that releases is dispatched as
    /// `finish` does, and `failed_writes` go to the failure log.
    pub(super) fn finish_each<'f>(
        self: &Arc<Self>,
        op: ReadyOp<OpRecord>,
        failure_of: impl Fn(usize) -> Option<&'f OpFailure>,
        failed_writes: Vec<Var>,
        keep_for: Option<BlockKey>,
    ) {
        let mut dispatcher = Dispatcher::new(self, false, keep_for);
        // The op came from this graph, so `complete_each` cannot fail; its record is dropped
        // here.
        let _ = self
            .graph
            .complete_each(op.map(Payload::Op), failure_of, &mut dispatcher);
        dispatcher.wake_now();
        self.finished((!failed_writes.is_empty()).then_some(failed_writes));
        // As in `finish`: the reclaimed vars' callbacks once the op is counted done.
        drop(dispatcher);
    }

    /// What every completion ends with: a failed op's written vars go to the failure log, and
    /// the op is counted done.
    #[inline]
    pub(super) fn finished(&self, failed_writes: Option<Vec<Var>>) {
        if let Some(vars) = failed_writes {
            let holds_failure = |var| matches!(self.graph.var_failure(var), Ok(Some(_)));
            self.failures.add_vars(vars, holds_failure);
        }
        if self.pending.done() {
            // This completion woke a `wait_for_all` (or the teardown): the engine is idle, so
            // the op storage a burst grew goes back here, after the waiter was woken, rather
            // than on the waiter, which has no need to wait for it (see `Graph::trim`).
            self.trim_storage();
        }
    }
}

impl FinishAsync for EngineState {
    fn finish_async(
        self: Arc<Self>,
        op: ReadyOp<OpRecord>,
        started: Option<Started>,
        outcome: Result<(), OpFailure>,
    ) {
        self.finish_profiled(op, started, outcome, true, None);
    }
}

impl EngineState {
    /// Completes `op` with `outcome` (`root`: its own failure, not passed on; `keep_for`: as
    /// `finish`'s), recorded for the profiler if it `started` a profiled run.
    #[inline]
    pub(super) fn finish_profiled(
        self: &Arc<Self>,
        op: ReadyOp<OpRecord>,
        started: Option<Started>,
        outcome: Result<(), OpFailure>,
        root: bool,
        keep_for: Option<BlockKey>,
    ) {
        self.profile(|| op.payload().profiled_op(), started, &outcome);
        self.finish(op, outcome, root, keep_for);
    }

    /// Completes `op`, which stands for several (a replay), with an outcome per var:
    /// `failures[position]` for the var at `position` of its reads then writes (`None`:
    /// cleared), the failures its parts logged already.
    pub(super) fn finish_with_each(
        self: &Arc<Self>,
        op: ReadyOp<OpRecord>,
        failures: &[Option<OpFailure>],
    ) {
        let reads = op.reads().count();
        let failed: Vec<Var> = op
            .writes()
            .enumerate()
            .filter(|&(k, _)| failures.get(reads + k).is_some_and(Option::is_some))
            .map(|(_, var)| var)
            .collect();
        self.finish_each(
            op,
            |position| failures.get(position)?.as_ref(),
            failed,
            None,
        );
    }
}

impl RunQueuedOp for EngineState {
    fn run_queued_op(self: Arc<Self>, op: ReadyOp<OpRecord>) {
        self.execute(op, None);
    }
}

/// The engine as its CPU blocks' threads hold it (see `thread/serving.rs`).
pub(super) struct BlockOps(pub(super) Arc<EngineState>);

impl BlockRunner for BlockOps {
    #[inline]
    fn run_block_op(&self, op: ReadyOp<OpRecord>) {
        let state = &self.0;
        let key = op.payload().block_key();
        state.execute(op, key);
        // The successors each completion keeps for this worker, run here one after another.
        // The pool's loop would find them in the same slot first thing (`find_work`); taking
        // them here skips its round trip (the item's trip through the worker loop, and the
        // thread-local lookup of the runner per op; `docs/decisions.md`, "The kept successor,
        // taken back by the runner").
        // A successor is kept only for an op of the same block (`Dispatcher`), so `key` is the
        // block of each op taken here.
        if let Some(block) = key.and_then(|key| state.workers.block(key)) {
            while let Some(BlockOp(next)) = block.take_kept() {
                state.execute(next, key);
            }
        }
    }
}
