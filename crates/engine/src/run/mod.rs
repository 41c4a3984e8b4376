//! The engine's shared state and how an op is dispatched, executed and completed.
//!
//! ```text
//! push ──► Graph::push ──► (ready) dispatch ──► route: inline | worker block | priority | device
//!                                                    │
//!                                              execute: skip if a var failed, else run the fn
//!                                                    │
//!                      dispatch ◄── released ◄── finish: Graph::complete, pending -= 1
//! ```

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use depengine_sync::{Mutex, MutexGuard, lock};
use std::time::Duration;

use depengine_graph::{Dispatch, Graph, ReadyOp, Var};

use crate::config::{EngineConfig, EngineKind};
use crate::context::{Context, FnProperty, RunContext};
use crate::error::{EngineError, Result};
use crate::failure::log::FailureLog;
use crate::failure::{FailureCause, OpFailure, panic_message};
use crate::op::completion::{Completion, FinishAsync};
use crate::op::operator::OperatorFn;
use crate::op::record::{BlockKey, OpFn, OpRecord, Route};
use crate::profile::recorder::{ProfilerState, Started};
use crate::profile::report::ProfiledOutcome;
use crate::route::block::{BlockOp, CpuBlock};
use crate::route::devices::GpuExecutors;
use crate::route::naive;
use crate::route::per_device::PerDevice;
use crate::route::pooled::Pooled;
use crate::thread::frame::OpFrame;
use crate::thread::serving::{BlockRunner, Served, Serving, StandingIn};
use crate::thread::task::TaskMarker;
use crate::thread::{self, RunQueuedOp};
use crate::wait::deadlock::BlockedWaits;
use crate::wait::idle::{IdleCounter, PendingBound};
use crate::wait::stand_in::StandIns;
use crate::wait::throttle;

static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// The worker blocks of each engine kind.
pub(crate) enum Workers {
    Naive,
    Pooled(Pooled),
    PerDevice(PerDevice),
}

pub(crate) struct Inner {
    pub(crate) id: u64,
    pub(crate) kind: EngineKind,
    pub(crate) graph: Graph<OpRecord, OpFailure>,
    pub(crate) workers: Workers,
    pub(crate) gpus: GpuExecutors,
    pub(crate) idle: IdleCounter,
    /// Set by `Engine::shutdown` and by the last handle's drop; a push that sees it fails.
    ///
    /// `Relaxed` everywhere: the flag publishes no data (nothing written before the store is
    /// read because of a load that sees it). "Later pushes fail" needs only coherence: a push
    /// that happens-after the store sees it, whatever the ordering. A push concurrent with the
    /// store may see it or not under any ordering short of `SeqCst` on both sides of the
    /// push's add-then-check against the shutdown's store-then-wait, which the engine does
    /// not claim (`shutdown` waits as `wait_for_all` does: for the ops counted before the
    /// idle moment). The last handle's drop does not rely on the flag to stop pushes either:
    /// with no `Engine` left, only running ops can push, and none runs once idle (see
    /// `wait.rs`).
    pub(crate) shut_down: AtomicBool,
    pub(crate) failures: Mutex<FailureLog>,
    pub(crate) profiler: ProfilerState,
    /// Waits inside ops, for deadlock checks (`deadlock.rs`). Boxed, as `stand_ins`: cold,
    /// and kept off the lines of the fields every op reads.
    pub(crate) blocked_waits: Box<BlockedWaits>,
    /// Stand-in threads started for workers blocked in waits (`stand_in.rs`), joined on drop.
    pub(crate) stand_ins: Box<StandIns>,
    /// `EngineConfig::stall_warning` (`stall.rs`).
    pub(crate) stall_warning: Option<Duration>,
}

/// The `tracing` span an op's function runs in: `Span::none()` (a level check) unless a
/// subscriber wants `TRACE` from `depengine::op`.
#[inline]
fn op_span(name: &str) -> tracing::Span {
    tracing::trace_span!(target: "depengine::op", "op", name)
}

/// `op_span` for an async op, created before the op moves into its `Completion`; a panic in
/// the subscriber leaves the op without a span.
fn async_op_span(op: &ReadyOp<OpRecord>) -> tracing::Span {
    let name = op.payload().name.as_str();
    catch_unwind(AssertUnwindSafe(|| op_span(name))).unwrap_or_else(|_| tracing::Span::none())
}

/// The graph's dispatcher: routes each ready op.
pub(crate) struct Dispatcher<'a> {
    pub(crate) inner: &'a Arc<Inner>,
    /// Called from `push` on the pushing thread (ready `Async` ops may run right here).
    pub(crate) from_push: bool,
    /// Set when completing a sync op on a worker of this block, after its function returned
    /// (so no lock of the op's is held): the first released op routed to the same block is
    /// kept for this worker, which runs it next (`CpuBlock::submit_next`: the pool's slot for
    /// the worker's next task); when the completion releases more ops onto the block than the
    /// worker's queue holds, the rest run here at once (`CpuBlock::submit_or_run`) instead of
    /// piling up in the injector.
    keep_for: Option<BlockKey>,
    /// Whether an op was kept for this worker.
    kept: bool,
}

impl<'a> Dispatcher<'a> {
    #[inline]
    pub(crate) fn new(inner: &'a Arc<Inner>, from_push: bool, keep_for: Option<BlockKey>) -> Self {
        Dispatcher {
            inner,
            from_push,
            keep_for,
            kept: false,
        }
    }
}

impl Dispatch<OpRecord> for Dispatcher<'_> {
    #[inline]
    fn dispatch(&mut self, op: ReadyOp<OpRecord>) {
        if let Some(key) = self.keep_for
            && op.payload().block_key() == Some(key)
            && let Some(block) = self.inner.block(key)
        {
            let op = BlockOp { op, key };
            if std::mem::replace(&mut self.kept, true) {
                block.submit_or_run(op);
            } else {
                block.submit_next(op);
            }
            return;
        }
        self.inner.dispatch(op, self.from_push);
    }
}

impl Inner {
    pub(crate) fn new(config: EngineConfig) -> Result<Self> {
        config.validate()?;
        let workers = match config.kind {
            EngineKind::Naive => Workers::Naive,
            EngineKind::ThreadedPooled => Workers::Pooled(Pooled::new(
                config.cpu_worker_threads,
                config.gpu_copy_threads,
            )),
            EngineKind::ThreadedPerDevice => Workers::PerDevice(PerDevice::new(
                config.cpu_worker_threads,
                config.cpu_priority_threads,
            )),
        };
        Ok(Inner {
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            kind: config.kind,
            graph: Graph::new(),
            workers,
            gpus: GpuExecutors::new(
                config.device_backend,
                config.gpu_worker_threads,
                config.gpu_copy_threads,
            ),
            // The naive engine runs every op on the thread that makes it ready: nothing to
            // hold back (see `wait/throttle.rs`).
            idle: IdleCounter::with_bound(match config.kind {
                EngineKind::Naive => None,
                _ => config.max_pending.map(PendingBound::new),
            }),
            shut_down: AtomicBool::new(false),
            failures: Mutex::new(FailureLog::default()),
            profiler: ProfilerState::new(
                config.profiler_autostart,
                config.profiler_mode,
                config.profiler_output,
            ),
            blocked_waits: Box::default(),
            stand_ins: Box::default(),
            stall_warning: config.stall_warning,
        })
    }

    /// Starts the workers every engine of its kind has from the start (the pooled engine's
    /// normal block); the others start on first use. A started block's workers hold the
    /// engine's state until [`stop_blocks`](Self::stop_blocks).
    pub(crate) fn start(self: &Arc<Self>) -> Result<()> {
        match &self.workers {
            Workers::Pooled(pooled) => pooled.start(self.id, || self.block_runner()),
            Workers::Naive | Workers::PerDevice(_) => Ok(()),
        }
    }

    /// What the threads of this engine's CPU blocks run its ops with.
    fn block_runner(self: &Arc<Self>) -> Arc<dyn BlockRunner> {
        Arc::new(BlockOps(Arc::clone(self)))
    }

    /// Where an op with this context and property runs; starts its workers on first use.
    pub(crate) fn route(self: &Arc<Self>, context: Context, property: FnProperty) -> Result<Route> {
        if context.is_gpu() {
            let route = self.gpus.route(context, property)?;
            return Ok(match self.workers {
                // The debugging engine runs everything inline, GPU ops included.
                Workers::Naive => Route::Inline,
                _ => route,
            });
        }
        let runner = || self.block_runner();
        match &self.workers {
            Workers::Naive => Ok(Route::Inline),
            Workers::Pooled(pooled) => pooled.route(property, self.id, runner),
            Workers::PerDevice(per_device) => per_device.route(context, property, self.id, runner),
        }
    }

    /// Shuts the started CPU blocks down and joins their threads (every op is complete: the
    /// caller waited for the engine to be idle), which drops the references to the engine
    /// that their workers hold.
    pub(crate) fn stop_blocks(&self) {
        match &self.workers {
            Workers::Naive => {}
            Workers::Pooled(pooled) => pooled.blocks().for_each(CpuBlock::shut_down_and_join),
            Workers::PerDevice(per_device) => per_device
                .cpu_blocks()
                .for_each(CpuBlock::shut_down_and_join),
        }
    }

    /// Pushes one op record (already routed).
    pub(crate) fn push_record(
        self: &Arc<Self>,
        reads: &[Var],
        writes: &[Var],
        record: OpRecord,
    ) -> Result<()> {
        throttle::admit(&self.idle, self.stall_warning, thread::runs_engine_work);
        if self.shut_down.load(Ordering::Relaxed) {
            self.idle.done();
            return Err(EngineError::ShutDown);
        }
        let mut dispatcher = Dispatcher::new(self, true, None);
        if let Err(error) = self.graph.push(reads, writes, record, &mut dispatcher) {
            self.idle.done();
            return Err(error.into());
        }
        Ok(())
    }

    /// Sends a ready op where it runs.
    pub(crate) fn dispatch(self: &Arc<Self>, op: ReadyOp<OpRecord>, from_push: bool) {
        let record = op.payload();
        if from_push
            && record.property.runs_on_pusher()
            && matches!(self.workers, Workers::PerDevice(_))
        {
            self.execute(op, None);
            return;
        }
        match record.route {
            Route::Inline => naive::run(self, op, |op| self.execute(op, None)),
            Route::Wait => self.release_waiter(op),
            Route::Pooled | Route::PooledCopy | Route::Cpu => {
                let key = record.block_key();
                match key.and_then(|key| self.block(key).map(|block| (key, block))) {
                    // The op is queued once, unboxed, in the block's pool; the worker that
                    // runs it has the engine (`thread/serving.rs`).
                    Some((key, block)) => block.submit(BlockOp { op, key }),
                    None => self.execute(op, None),
                }
            }
            Route::Priority => match &self.workers {
                Workers::PerDevice(per_device) if per_device.priority.get().is_some() => {
                    let priority = record.priority;
                    let inner = Arc::clone(self);
                    if let Some(block) = per_device.priority.get() {
                        block.push(priority, Box::new(move || inner.execute_priority_task(op)));
                    }
                }
                _ => self.execute(op, None),
            },
            Route::Device { copy } => match self.gpus.executor(record.context.device_id(), copy) {
                Some(executor) => {
                    let priority = record.priority;
                    let inner = Arc::clone(self);
                    executor.execute(priority, Box::new(move || inner.execute_task(op)));
                }
                // Not reached: resolving the route created the executor.
                None => self.execute(op, None),
            },
        }
    }

    /// A task of the priority block or a device executor: executes the op, and drops this
    /// reference to the engine while still marked as an engine task (see `Engine`'s shutdown).
    fn execute_task(self: Arc<Self>, op: ReadyOp<OpRecord>) {
        let marker = TaskMarker::enter(self.id);
        self.execute(op, None);
        drop(self);
        drop(marker);
    }

    /// A task of the priority block: as `execute_task`, marked as serving that block (for a
    /// wait inside the op, see `stand_in.rs`).
    fn execute_priority_task(self: Arc<Self>, op: ReadyOp<OpRecord>) {
        let serving = Serving::enter(self.id, Served::Priority);
        self.execute_task(op);
        drop(serving);
    }

    /// The started worker block of `key`.
    #[inline]
    pub(crate) fn block(&self, key: BlockKey) -> Option<&CpuBlock> {
        match (&self.workers, key) {
            (Workers::Pooled(pooled), key) => pooled.block(key),
            (Workers::PerDevice(per_device), BlockKey::Cpu(id)) => per_device.cpu_block(id),
            _ => None,
        }
    }

    /// `wait_for_var`'s write became ready: every op pushed on the var before it completed.
    /// Takes (clears) the var's failure while the write still holds the var alone, so every op
    /// pushed before the wait saw the failure and every op pushed after sees the var cleared.
    /// A wait its waiter abandoned (`deadlock.rs`) takes nothing: the var keeps its failure.
    fn release_waiter(self: &Arc<Self>, mut op: ReadyOp<OpRecord>) {
        let latch = match op.payload_mut().func.take() {
            Some(OpFn::Wait(latch)) => Some(latch),
            _ => None,
        };
        let var = op.writes().next();
        let (failure, outcome) = if latch.as_ref().is_none_or(|latch| latch.claim()) {
            // Completing the write with `Ok` leaves the var clear.
            let failure = var.and_then(|var| self.graph.clear_failure(var).ok().flatten());
            (failure, Ok(()))
        } else {
            // Completing it with the var's own failure (if any) leaves that in place.
            let kept = var.and_then(|var| self.graph.var_failure(var).ok().flatten());
            (None, kept.map_or(Ok(()), Err))
        };
        let mut dispatcher = Dispatcher::new(self, false, None);
        // Our own op, so `complete` cannot fail.
        let _ = self.graph.complete(op, outcome, &mut dispatcher);
        if let Some(latch) = latch {
            latch.set(failure);
        }
    }

    /// The failure log, locked (a panic while it was held cannot leave it inconsistent).
    pub(crate) fn failure_log(&self) -> MutexGuard<'_, FailureLog> {
        lock(&self.failures)
    }

    /// Records a failure that belongs to no op's vars (a panicking `delete_var` callback), for
    /// `wait_for_all` to report.
    pub(crate) fn log_failure(&self, failure: OpFailure) {
        self.failure_log().add_root(failure);
    }

    /// Runs a ready op (or skips it, passing on the failure of one of its vars) and completes
    /// it. With `keep_for` (the calling thread is a worker of that block), the first op that
    /// the completion of a sync (or skipped) op releases onto the same block is kept for this
    /// worker, which runs it next. Async ops complete through their `Completion`, on any
    /// thread: nothing is kept for them.
    pub(crate) fn execute(self: &Arc<Self>, mut op: ReadyOp<OpRecord>, keep_for: Option<BlockKey>) {
        let _marker = TaskMarker::enter(self.id);
        let profiled = self.profiler.wants(op.payload().profiled);
        if let Some(failure) = self.graph.op_failure(&op) {
            // Rule 2: a dependent of a failed var does not run; it passes the failure on. Its
            // function is dropped unrun; a panic in a captured value's `Drop` must not keep the
            // op from completing.
            let func = op.payload_mut().func.take();
            let _ = catch_unwind(AssertUnwindSafe(move || drop(func)));
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
        let started = profiled.then(|| self.profiler.start(thread::profiled()));
        // The op's `tracing` span is created, entered, left and closed inside the op's
        // `catch_unwind`: a panicking subscriber fails the op instead of unwinding a worker.
        match func {
            OpFn::Sync(func) => {
                let outcome = self.call_sync(&op, run, func);
                self.profile(&op, started, &outcome);
                self.finish(op, outcome, true, keep_for);
            }
            OpFn::Async(func) => self.call_async(op, started, run, func),
            OpFn::Operator(operator) => match &operator.func {
                OperatorFn::Sync(func) => {
                    let outcome = self.call_sync(&op, run, func);
                    // The last reference to a deleted operator drops its function (and what
                    // it captured), which may panic.
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(operator)));
                    self.profile(&op, started, &outcome);
                    self.finish(op, outcome, true, keep_for);
                }
                OperatorFn::Async(func) => {
                    self.call_async(op, started, run, func);
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(operator)));
                }
            },
            OpFn::Wait(latch) => {
                // Not reached (waits are released at dispatch); complete it the same way.
                op.payload_mut().func = Some(OpFn::Wait(latch));
                self.release_waiter(op);
            }
        }
    }

    /// Calls a sync op's function inside its frame and `tracing` span, catching a panic, and
    /// turns what it returned into the op's outcome.
    fn call_sync(
        &self,
        op: &ReadyOp<OpRecord>,
        run: RunContext,
        func: impl FnOnce(RunContext) -> Result<(), crate::failure::BoxError>,
    ) -> Result<(), OpFailure> {
        let outcome = {
            let _frame = OpFrame::enter(self.id, op);
            let name = op.payload().name.as_str();
            catch_unwind(AssertUnwindSafe(move || {
                op_span(name).in_scope(|| func(run))
            }))
        };
        Self::outcome(op, outcome)
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

    /// Records a profiled op (`started` is `Some`) that ends with `outcome` now.
    pub(crate) fn profile(
        &self,
        op: &ReadyOp<OpRecord>,
        started: Option<Started>,
        outcome: &Result<(), OpFailure>,
    ) {
        if let Some(started) = started {
            let outcome = match outcome {
                Ok(()) => ProfiledOutcome::Completed,
                Err(_) => ProfiledOutcome::Failed,
            };
            self.profiler
                .record(&op.payload().profiled_op(), started, outcome);
        }
    }

    /// Turns what a sync op function returned (or its panic) into an outcome.
    fn outcome(
        op: &ReadyOp<OpRecord>,
        result: std::thread::Result<Result<(), crate::failure::BoxError>>,
    ) -> Result<(), OpFailure> {
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(op.payload().failure(FailureCause::Error(error))),
            Err(payload) => Err(op
                .payload()
                .failure(FailureCause::Panic(panic_message(&*payload)))),
        }
    }

    /// Completes an op with `outcome` (rule 1: a failure is stored on its written vars),
    /// dispatches what it released (keeping the first op released onto block `keep_for` for
    /// the calling worker, see `execute`), and counts it done. `root`: the failure is the op's
    /// own (not passed on from a var).
    pub(crate) fn finish(
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
            // Subscriber code and the op's error's `Display` run here: not under the failure
            // log's lock, and a panic in them must not keep the op from completing.
            let _ = catch_unwind(AssertUnwindSafe(|| {
                tracing::debug!(target: "depengine::failure", %failure, "op failed");
            }));
            self.failure_log().add_root(failure.clone());
        }
        let mut dispatcher = Dispatcher::new(self, false, keep_for);
        // The op came from this graph, so `complete` cannot fail; the payload (the op's record,
        // its function already consumed) is dropped here.
        let _ = self.graph.complete(op, outcome, &mut dispatcher);
        if let Some(vars) = failed_writes {
            let holds_failure = |var| matches!(self.graph.var_failure(var), Ok(Some(_)));
            self.failure_log().add_vars(vars, holds_failure);
        }
        self.idle.done();
    }
}

impl FinishAsync for Inner {
    fn finish_async(
        self: Arc<Self>,
        op: ReadyOp<OpRecord>,
        started: Option<Started>,
        outcome: Result<(), OpFailure>,
    ) {
        self.profile(&op, started, &outcome);
        self.finish(op, outcome, true, None);
    }
}

impl RunQueuedOp for Inner {
    fn run_queued_op(self: Arc<Self>, op: ReadyOp<OpRecord>) {
        self.execute(op, None);
    }
}

/// The engine as its CPU blocks' threads hold it (see `thread/serving.rs`).
struct BlockOps(Arc<Inner>);

impl BlockRunner for BlockOps {
    #[inline]
    fn run_block_op(&self, op: ReadyOp<OpRecord>, key: BlockKey) {
        let inner = &self.0;
        inner.execute(op, Some(key));
        // The successors each completion keeps for this worker, run here one after another.
        if let Some(block) = inner.block(key) {
            while let Some(next) = block.take_kept() {
                inner.execute(next.op, Some(next.key));
            }
        }
    }
}

impl Inner {
    /// Whether ops are queued on `block` now.
    pub(crate) fn has_queued(&self, block: Served) -> bool {
        match block {
            Served::Queued(key) => self.block(key).is_some_and(CpuBlock::has_queued),
            Served::Priority => match &self.workers {
                Workers::PerDevice(per_device) => per_device
                    .priority
                    .get()
                    .is_some_and(depengine_cpu::PriorityBlock::has_queued),
                _ => false,
            },
        }
    }

    /// A stand-in for a blocked worker of `block`: runs what is queued there until none is
    /// left (for a CPU worker block, as its workers do, without being one of them).
    pub(crate) fn stand_in(self: Arc<Self>, block: Served) {
        match block {
            Served::Queued(key) => {
                if let Some(block) = self.block(key) {
                    let standing_in = StandingIn::enter(self.id, key, self.block_runner());
                    block.help();
                    drop(standing_in);
                }
            }
            Served::Priority => {
                if let Workers::PerDevice(per_device) = &self.workers
                    && let Some(priority) = per_device.priority.get()
                {
                    // Each task marks itself (`execute_priority_task`) and holds its own
                    // reference to the engine.
                    priority.run_queued();
                }
            }
        }
    }
}
