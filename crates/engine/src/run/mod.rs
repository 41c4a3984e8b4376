//! [`EngineState`]: the engine's shared state, the parts it is made of, and the path of an op
//! through them.
//!
//! ```text
//! push ──► Graph::push ──► (ready) dispatch ─┬─► a wait: released, its one-shot set
//!                                            └─► route: inline | worker block | priority | device
//!                                                         │
//!                                   execute: skip if a var failed, else run the function
//!                                                         │
//!                     dispatch ◄── released ◄── finish: Graph::complete, pending -= 1
//! ```
//!
//! The state is a set of parts, each owning its fields privately, with its methods in the
//! module of its concept; the state owns the parts, and this module (with `dispatch.rs` and
//! `execute.rs`) is the one place that joins them. The threads that touch each part:
//!
//! - `graph`, an [`EngineGraph`] (depengine-graph): pushers push; the thread that completes an
//!   op releases its dependents; waits and stall warnings inspect it. Each var keeps the fences
//!   of the GPU ops launched on it ([`LaunchedOnVar`], `run/fences.rs`): the threads that
//!   launch and complete GPU ops register and remove them there, under the var's lock; threads
//!   that dispatch a GPU op look them up.
//! - `workers`, [`Workers`] (`route/workers.rs`): pushers resolve routes (starting blocks);
//!   dispatching threads look blocks and executors up; a worker waiting inside an op asks for
//!   queued work, and its stand-in runs it; the teardown stops the blocks.
//! - `pending`, [`PendingOps`] (`wait/pending.rs`): pushers count in (and may be held back);
//!   completers count out; `wait_for_all` and the teardown wait on it; the shutdown sets its
//!   flag.
//! - `failures`, [`FailureLog`] (`failure/log.rs`): completers of failed ops add;
//!   `wait_for_all` takes; `stats` counts.
//! - `profiler`, [`ProfilerState`] (`profile/recorder.rs`): every executing thread reads its
//!   flag and records; the `Profiler` handle's callers start, stop and take.
//! - `blocked_waits`, [`BlockedWaits`] (`wait/deadlock.rs`): threads waiting inside ops
//!   register and walk.
//! - `stand_ins`, [`StandIns`] (`wait/stand_in.rs`): workers waiting inside ops start
//!   stand-ins; stand-ins leave; the state's drop joins them.
//! - `var_names`, [`VarNames`] (`name/var_names.rs`): `new_var_named`'s callers name vars;
//!   threads that build an error or a warning look names up.
//! - `retired_data`, [`RetiredData`] (`run/retired.rs`): a thread dropping the last handle of
//!   a value whose var was deleted by hand keeps its release there; the state's drop runs it.
//! - `releases`, [`Releases`] (`wait/releases.rs`): completers count the values' releases they
//!   run after their ops; `wait_for_all` waits for none to run.
//! - `bulk`, [`Bulk`] (`bulk/mod.rs`), on an engine that bulks: pushers count their entries
//!   into the graph and read the count to join their segments.
//!
//! A pusher touches `pending`, `graph` and `workers`; a worker `profiler`, `graph`,
//! `failures` (only for a failed op), `workers` (to queue what it released) and `pending`. The
//! cold parts, `blocked_waits`, `stand_ins`, `var_names`, `retired_data` and `releases`, are
//! boxed, off the lines of the parts every op reads. Each part documents its own fields' threads.

mod bulk;
mod device;
mod dispatch;
mod execute;
mod fences;
mod held_vars;
mod replay;
mod retired;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use depengine_graph::{Graph, Var, Waits};

use crate::config::{EngineConfig, EngineKind};
use crate::context::{Context, FnProperty};
use crate::error::{EngineError, Result};
use crate::failure::OpFailure;
use crate::failure::log::FailureLog;
use crate::name::VarNames;
use crate::op::record::{OpRecord, Payload, Route};
use crate::profile::recorder::{ProfileOutput, ProfilerState};
use crate::route::workers::Workers;
use crate::thread;
use crate::thread::open_segment;
use crate::thread::serving::{BlockRunner, Served};
use crate::wait::deadlock::{BlockedWaits, WaitOneShot};
use crate::wait::idle::PendingBound;
use crate::wait::pending::PendingOps;
use crate::wait::releases::Releases;
use crate::wait::stand_in::StandIns;

use bulk::Bulk;
#[cfg(all(test, loom))]
pub(crate) use bulk::GraphEntries;
use dispatch::Dispatcher;
use fences::LaunchedOnVar;
use retired::RetiredData;

static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// The engine's graph: its ops' records, their failures, and on each var the fences of the GPU
/// ops launched on it.
pub(crate) type EngineGraph = Graph<Payload, OpFailure, LaunchedOnVar>;

/// The state of one engine, shared by its handles, the workers of its CPU blocks (through
/// their runners), its tasks on the priority block and device executors, its async ops'
/// `Completion`s and its stand-ins: the parts listed in the module documentation.
pub(crate) struct EngineState {
    /// Which engine this is: the threads' markers (`thread/`) and operators name it.
    id: u64,
    graph: EngineGraph,
    workers: Workers,
    pending: PendingOps,
    failures: FailureLog,
    profiler: ProfilerState,
    blocked_waits: Box<BlockedWaits>,
    /// Stand-in threads started for workers blocked in waits, joined when the state drops.
    stand_ins: Box<StandIns>,
    /// The names users gave vars, read only to describe a var.
    var_names: Box<VarNames>,
    /// Data values released when the state drops (misuse only: `run/retired.rs`).
    retired_data: Box<RetiredData>,
    /// The releases that completions run after their ops (`wait/releases.rs`).
    releases: Box<Releases>,
    /// Bulk execution, if the engine bulks (`EngineConfig::bulk_size` of 2 or more).
    bulk: Option<Box<Bulk>>,
}

impl EngineState {
    pub(crate) fn new(mut config: EngineConfig) -> Result<Self> {
        config.validate()?;
        // Opened now, so that a path that cannot be written fails here, not at the end.
        let setting = config.profiler_output_setting();
        let output = config
            .profiler_output
            .take()
            .map(|path| ProfileOutput::open(path, setting))
            .transpose()?;
        let id = NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed);
        Ok(EngineState {
            id,
            graph: Graph::new(),
            workers: Workers::new(id, &config),
            pending: PendingOps::new(
                // The naive engine runs every op on the thread that makes it ready: nothing
                // to hold back (see `wait/throttle.rs`).
                match config.kind {
                    EngineKind::Naive => None,
                    _ => config
                        .max_pending
                        .map(|max| PendingBound::new(max, config.max_pending_wait)),
                },
                config.stall_warning,
            ),
            failures: FailureLog::default(),
            profiler: ProfilerState::new(config.profiler_autostart, config.profiler_mode, output),
            blocked_waits: Box::default(),
            stand_ins: Box::default(),
            var_names: Box::default(),
            retired_data: Box::default(),
            releases: Box::default(),
            bulk: Bulk::new(config.bulk_size),
        })
    }

    /// Starts the workers every engine of its kind has from the start (the others start on
    /// first use). A started block's workers hold the engine's state until
    /// `Workers::stop_blocks`.
    pub(crate) fn start(self: &Arc<Self>) -> Result<()> {
        self.workers.start(|| self.block_runner())
    }

    /// What the threads of this engine's CPU blocks run its ops with.
    fn block_runner(self: &Arc<Self>) -> Arc<dyn BlockRunner> {
        Arc::new(execute::BlockOps(Arc::clone(self)))
    }

    /// Which engine this is.
    #[inline]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The engine kind.
    pub(crate) fn kind(&self) -> EngineKind {
        self.workers.kind()
    }

    /// The dependency graph: vars, and the ops pushed on them.
    pub(crate) fn graph(&self) -> &EngineGraph {
        &self.graph
    }

    /// The engine was found idle: the storage a burst of ops grew goes back, the graph's op
    /// slots (`Graph::trim`) and the blocks of the closures too large for a record
    /// (`op/sync_fn.rs`; shared by every engine, so only once no engine holds one).
    pub(crate) fn trim_storage(&self) {
        self.graph.trim();
        crate::op::sync_fn::trim_closure_blocks();
    }

    /// Where the engine's ops run.
    pub(crate) fn workers(&self) -> &Workers {
        &self.workers
    }

    /// The ops pushed and not yet completed, and the shut-down flag.
    pub(crate) fn pending(&self) -> &PendingOps {
        &self.pending
    }

    /// The failures `wait_for_all` reports and clears.
    pub(crate) fn failures(&self) -> &FailureLog {
        &self.failures
    }

    /// The profiler's state.
    pub(crate) fn profiler(&self) -> &ProfilerState {
        &self.profiler
    }

    /// The waits inside ops that are blocked now, for deadlock checks.
    pub(crate) fn blocked_waits(&self) -> &BlockedWaits {
        &self.blocked_waits
    }

    /// The stand-in threads of workers blocked in waits.
    pub(crate) fn stand_ins(&self) -> &StandIns {
        &self.stand_ins
    }

    /// The names users gave vars.
    pub(crate) fn var_names(&self) -> &VarNames {
        &self.var_names
    }

    /// Data values whose release waits for this state's drop.
    pub(crate) fn retired_data(&self) -> &RetiredData {
        &self.retired_data
    }

    /// The releases running after their ops.
    pub(crate) fn releases(&self) -> &Releases {
        &self.releases
    }

    /// `error` with the names the user knows: its vars' (this engine's names) and, for a
    /// push's error, the op's (`op`). For error paths only.
    #[cold]
    /// `Ok` if `var` is a live var of this engine: `DeletedVar` or `ForeignVar` otherwise.
    pub(crate) fn check_var(&self, var: Var) -> Result<()> {
        self.graph
            .var_failure(var)
            .map(drop)
            .map_err(EngineError::from)
    }

    pub(crate) fn named(&self, error: EngineError, op: Option<&str>) -> EngineError {
        error.named(|var| self.var_names.get(var), op)
    }

    /// Where an op with this context and property runs; starts its workers on first use.
    #[inline]
    pub(crate) fn route(self: &Arc<Self>, context: Context, property: FnProperty) -> Result<Route> {
        self.workers
            .route(context, property, || self.block_runner())
    }

    /// Pushes one op record (already routed): on an engine that bulks, into the thread's open
    /// segment if it may join (`bulk/mod.rs`). Without bulk execution: one branch, then the
    /// body of `push_one` (inlined here).
    pub(crate) fn push_record(
        self: &Arc<Self>,
        reads: &[Var],
        writes: &[Var],
        record: OpRecord,
    ) -> Result<()> {
        if let Some(bulk) = &self.bulk {
            return self.push_bulked(bulk, reads, writes, record);
        }
        self.push_one(reads, writes, record)
    }

    /// Pushes one op record into the graph.
    #[inline]
    fn push_one(self: &Arc<Self>, reads: &[Var], writes: &[Var], record: OpRecord) -> Result<()> {
        self.pending.admit(thread::runs_engine_work)?;
        self.push_counted(reads, writes, record)
    }

    /// Pushes an admitted op (counted pending) that no bulk segment takes: as `push_record`,
    /// without its admission, for a caller that must admit before taking a lock it pushes
    /// under (a replay, `run/replay/`). Counted out again if the graph refuses it.
    pub(crate) fn push_admitted(
        self: &Arc<Self>,
        reads: &[Var],
        writes: &[Var],
        record: OpRecord,
    ) -> Result<()> {
        // On a bulk engine, as `push_after_segment` (no op pushed after this one joins a
        // segment pushed before it; the segment stays open if the push is refused).
        let previous = self.bulk.as_ref().and_then(|_| open_segment::take(self.id));
        if let Err(error) = self.push_counted(reads, writes, record) {
            open_segment::restore(previous);
            return Err(error);
        }
        self.entered_graph();
        drop(previous);
        Ok(())
    }

    /// The graph's part of `push_one`, for an op admitted already.
    #[allow(
        clippy::inline_always,
        reason = "every push's path: left to the compiler, the record is moved into a call of its own"
    )]
    #[inline(always)]
    fn push_counted(
        self: &Arc<Self>,
        reads: &[Var],
        writes: &[Var],
        record: OpRecord,
    ) -> Result<()> {
        let mut dispatcher = Dispatcher::new(self, true, None);
        // A sync GPU op may start behind launched GPU work: its stream waits for that work,
        // and its work is what it launches there (`run/device.rs`).
        let waits = match (&record.route, &record.func) {
            (Route::Device { .. }, Some(func)) if func.is_sync() => Waits::Launch,
            _ => Waits::Completion,
        };
        if let Err(error) =
            self.graph
                .push_with(waits, reads, writes, Payload::Op(record), &mut dispatcher)
        {
            let _ = self.pending.done();
            return Err(error.into());
        }
        Ok(())
    }

    /// Pushes `wait_for_var(var)`'s wait op, a write of `var` that sets `one_shot` once every op
    /// pushed on `var` before it completed (not counted pending: nobody waits for it but its
    /// waiter). A write: it waits for every op pushed on `var` before it (reads included) and
    /// runs alone, so taking the var's failure there races with nothing.
    pub(crate) fn push_wait(self: &Arc<Self>, var: Var, one_shot: &Arc<WaitOneShot>) -> Result<()> {
        let mut dispatcher = Dispatcher::new(self, false, None);
        self.graph.push(
            &[],
            &[var],
            Payload::Wait(Arc::clone(one_shot)),
            &mut dispatcher,
        )?;
        self.entered_graph();
        Ok(())
    }

    /// Counts an entry into the graph other than an op's push (a wait op, a deletion) for bulk
    /// execution's joins, on an engine that bulks.
    pub(crate) fn entered_graph(&self) {
        if let Some(bulk) = &self.bulk {
            bulk.entered();
        }
    }

    /// Ends this thread's open bulk segment of this engine, if any: its ops run all the same
    /// (the segment is in the graph), and the thread's next ops start a new one. Waits call
    /// it (they order nothing through it: an entry into the graph ends joins anyway, and a
    /// segment that completed is closed), so that a thread that waits keeps no reference to
    /// a segment that ran.
    pub(crate) fn close_open_segment(&self) {
        if self.bulk.is_some() {
            open_segment::close(self.id);
        }
    }

    /// A stand-in for a blocked worker of `block`: runs what is queued there until none is
    /// left (see `Workers::stand_in`), holding this reference to the engine meanwhile.
    pub(crate) fn stand_in(self: Arc<Self>, block: Served) {
        self.workers.stand_in(block, || self.block_runner());
    }
}
