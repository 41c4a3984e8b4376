//! [`Engine`]: the handle users hold, and the builders it hands out.

pub(crate) mod async_wait;
pub(crate) mod blocking;
pub(crate) mod capture;
mod dump;
pub(crate) mod op_builder;
pub(crate) mod operator;
pub(crate) mod profiler_handle;

use std::borrow::Cow;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use depengine_graph::{GraphError, Var};

use crate::api::async_wait::{WaitForAll, WaitForVar};
use crate::api::op_builder::OpBuilder;
use crate::api::operator::{Operator, OperatorBuilder};
use crate::api::profiler_handle::Profiler;
use crate::config::{EngineConfig, EngineKind};
use crate::context::Context;
use crate::error::{EngineError, Result};
use crate::failure::{FailureCause, OpFailure, panic_message};
use crate::op::record::{OpFn, OpRecord, Payload};
use crate::profile::recorder::OutputFailure;
use crate::run::EngineState;
use crate::thread::frame::{running_op_of, running_op_uses, sync_ops_hold};
use crate::thread::task::TaskMarker;
use crate::wait::deadlock::closes_cycle;
use crate::wait::one_shot::OneShot;

/// Counters for leak checks and monitoring, from [`Engine::stats`].
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, EngineKind, EngineStats};
///
/// let config = EngineConfig::default().kind(EngineKind::Naive).cpu_worker_threads(1);
/// let engine = Engine::new(config)?;
/// assert_eq!(engine.stats(), EngineStats::default()); // nothing live yet
///
/// let var = engine.new_var()?;
/// // The naive engine runs the op before `push_sync` returns: its failure is on `var` now.
/// engine.op("fails").writes([var]).push_sync(|_| Err("no".into()))?;
/// let stats = engine.stats();
/// assert_eq!((stats.live_vars, stats.pending_ops, stats.failed_vars), (1, 0, 1));
///
/// assert!(engine.wait_for_all().is_err()); // returns the failure and clears it
/// assert_eq!((engine.stats().failed_vars, engine.stats().logged_failures), (0, 0));
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct EngineStats {
    /// Ops pushed and not yet completed.
    pub pending_ops: usize,
    /// Vars created and not yet reclaimed (a var whose deletion is pending still counts).
    pub live_vars: usize,
    /// Ops waiting for their dependencies (not the replays queued on a replay of their plan,
    /// which `pending_ops` counts: [`Engine::replay`]).
    pub waiting_ops: usize,
    /// Vars holding a failure.
    pub failed_vars: usize,
    /// Entries the failure log keeps for the next [`Engine::wait_for_all`]: failures no wait
    /// returned yet, and vars whose failures it will clear. Bounded (pruned as it grows) also
    /// when `wait_for_all` is never called.
    pub logged_failures: usize,
}

/// The last handle's teardown: waits for every op, then joins the threads.
///
/// The workers of the engine's CPU blocks hold the engine's state (`thread/serving.rs`), so
/// the state lives until the blocks are shut down, which the teardown does once every op has
/// completed. Where the teardown cannot wait (see `close`), a thread of its own does it.
struct Handle {
    state: Arc<EngineState>,
    /// Set by the first `close` (the last clone's `shutdown`, or the drop).
    closed: bool,
}

impl Handle {
    /// Marks the engine shut and tears it down: here, returning whether the profile could be
    /// written; or, where this thread cannot wait for the engine's ops, on a thread of its own,
    /// which reports a profile it cannot write as a warning (`Ok` here).
    fn close(&mut self) -> Result<(), OutputFailure> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        self.state.pending().shut_down();
        self.state.close_open_segment();
        let naive = self.state.kind() == EngineKind::Naive;
        if TaskMarker::active(self.state.id()) || (naive && crate::route::naive::is_running()) {
            // Dropped by a task of this engine (an op's closure held the last handle), or on a
            // thread that has naive ops queued (possibly this engine's): waiting here would
            // wait for this very thread. (Inside a task of another engine only, the teardown
            // goes on here: this engine's ops do not wait for that task.) The naive engine has
            // no blocks to stop: its state writes the profile when it drops.
            if !naive {
                // Another thread waits for the work to finish, then stops the blocks.
                let state = Arc::clone(&self.state);
                let started = std::thread::Builder::new()
                    .name("depengine-teardown".to_owned())
                    .spawn(move || {
                        if let Err(failure) = tear_down(&state) {
                            failure.warn();
                        }
                    });
                if let Err(error) = started {
                    // Without a thread, the blocks' workers keep the engine's state (and
                    // themselves) alive, idle, until the process ends.
                    tracing::error!(
                        target: "depengine::engine",
                        %error,
                        "no thread could start to shut the engine down: its workers stay"
                    );
                }
            }
            return Ok(());
        }
        tear_down(&self.state)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // A drop has no caller to return the error to.
        if let Err(failure) = self.close() {
            failure.warn();
        }
    }
}

/// Waits for every op, shuts the CPU blocks down (their workers drop their references to the
/// engine as they exit), waits for the other references to go, and writes the profile.
///
/// A leaked guard or `Completion` keeps its op pending, and the shutdown must wait for it (the
/// value may be in use): every stall period it warns, with `dump_pending`'s picture of who
/// holds what, so that such a wait is never silent. Device work that makes no progress (a hung
/// kernel) is waited for up to `EngineConfig::device_hang_limit`; then the teardown warns and
/// returns, leaving the threads and the state to the process.
fn tear_down(state: &Arc<EngineState>) -> Result<(), OutputFailure> {
    if let Err(hung) = blocking::wait_for_shutdown(state) {
        // The blocks keep running, and with them the engine's state: the hung work may still
        // end, and what waits behind it then runs. Joining them would hang here.
        hung.warn();
        return state.profiler().write_output();
    }
    state.workers().stop_blocks();
    // Stand-ins, task epilogues, async completions and values' releases drop their references
    // once their op completed; once only the caller's is left, dropping it drops the state.
    blocking::wait_for_last_reference(state);
    state.profiler().write_output()
}

/// A dependency engine: push ops that read and write vars; each runs once its dependencies
/// allow. Cheap to clone (an `Arc`), `Send + Sync`. Dropping the last clone shuts it down: every
/// pushed op completes, then the threads are joined (bounded only for GPU work that makes no
/// progress: [`EngineConfig::device_hang_limit`](crate::EngineConfig::device_hang_limit)). See
/// the [crate documentation](crate).
///
/// # Examples
///
/// ```
/// use std::thread;
///
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let sum = engine.data_named("sum", 0_u64)?;
/// // Clones share one engine: any thread pushes to it.
/// let pushers: Vec<_> = (1..=4_u64)
///     .map(|step| {
///         let (engine, sum) = (engine.clone(), sum.clone());
///         thread::spawn(move || engine.op("add").write(&sum).push_sync(move |_, s| *s += step))
///     })
///     .collect();
/// for pusher in pushers {
///     pusher.join().unwrap()?;
/// }
/// assert_eq!(*engine.read(&sum)?, 10);
/// engine.shutdown()?; // the last clone: waits for every op, then joins the workers
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Clone)]
pub struct Engine {
    handle: Arc<Handle>,
}

impl Engine {
    /// Starts an engine.
    ///
    /// # Errors
    ///
    /// [`EngineError::Config`] for a thread count of zero or above [`MAX_THREADS`] (naming the
    /// [`EngineConfig`] field), [`EngineError::WorkerStart`] if a thread cannot start (the
    /// threads already started are shut down and joined).
    ///
    /// [`MAX_THREADS`]: crate::MAX_THREADS
    pub fn new(config: EngineConfig) -> Result<Self> {
        let state = Arc::new(EngineState::new(config)?);
        // Before the handle exists: if a thread cannot start, the state drops with `state`
        // (the block that failed has joined the threads it started).
        state.start()?;
        Ok(Engine {
            handle: Arc::new(Handle {
                state,
                closed: false,
            }),
        })
    }

    /// An engine configured from the `DEPENGINE_*` environment variables
    /// ([`EngineConfig::from_env`]).
    ///
    /// # Errors
    ///
    /// As [`EngineConfig::from_env`] and [`Engine::new`].
    pub fn from_env() -> Result<Self> {
        Self::new(EngineConfig::from_env()?)
    }

    #[inline]
    pub(crate) fn state(&self) -> &Arc<EngineState> {
        &self.handle.state
    }

    pub(crate) fn id(&self) -> u64 {
        self.state().id()
    }

    /// The engine kind.
    pub fn kind(&self) -> EngineKind {
        self.state().kind()
    }

    /// Creates a var.
    ///
    /// # Errors
    ///
    /// [`EngineError::ShutDown`] once the engine was shut down (nothing could be pushed on the
    /// var); [`EngineError::CapacityExhausted`] when 2^31 vars are live.
    pub fn new_var(&self) -> Result<Var> {
        self.create_var(None)
    }

    /// Creates a var carrying `attachment` (`Graph::new_attached_var`), or none.
    pub(crate) fn create_var(&self, attachment: Option<NonNull<()>>) -> Result<Var> {
        let state = self.state();
        if state.pending().is_shut_down() {
            return Err(EngineError::ShutDown);
        }
        let graph = state.graph();
        Ok(match attachment {
            Some(attachment) => graph.new_attached_var(attachment)?,
            None => graph.new_var()?,
        })
    }

    /// Creates a var named `name`: errors and stall warnings show it as `var "name" (#0.1)`
    /// (slot and generation) instead of `var #0.1`. The name is stored once, beside the graph,
    /// and read only to describe the var: ops on it cost the same as on an unnamed var.
    ///
    /// ```
    /// use depengine::{Engine, EngineConfig, EngineError};
    ///
    /// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
    /// let weights = engine.new_var_named("weights")?;
    /// assert_eq!(engine.var_name(weights).as_deref(), Some("weights"));
    /// let error = engine.op("update").reads([weights]).writes([weights]).push_sync(|_| {});
    /// assert_eq!(
    ///     error.unwrap_err().to_string(),
    ///     format!(
    ///         "op `update`: var \"weights\" (#{}.{}) is both read and written by one op \
    ///          (list it only as a write)",
    ///         weights.index(),
    ///         weights.generation()
    ///     )
    /// );
    /// # Ok::<(), EngineError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`new_var`](Self::new_var).
    pub fn new_var_named(&self, name: impl Into<Arc<str>>) -> Result<Var> {
        let var = self.new_var()?;
        self.state().var_names().insert(var, name.into());
        Ok(var)
    }

    /// The name `var` was created with ([`new_var_named`](Self::new_var_named)), also once it
    /// was deleted (until a named var takes its slot); `None` for a var created without one, or
    /// of another engine.
    pub fn var_name(&self, var: Var) -> Option<Arc<str>> {
        let state = self.state();
        if let Err(GraphError::ForeignVar { .. }) = state.graph().var_status(var) {
            return None;
        }
        state.var_names().get(var)
    }

    /// Deletes `var` once every op already pushed on it completed, then calls `on_deleted`
    /// (on the thread that completes the last of those ops, once that op is counted done and
    /// with no lock of the engine held, or on this one if there is none): it may call the
    /// engine. Later pushes naming `var` fail with [`EngineError::DeletedVar`].
    ///
    /// A panic in `on_deleted` is caught: the next [`wait_for_all`](Self::wait_for_all)
    /// reports it, as the failure of an op named `delete_var`.
    ///
    /// # Errors
    ///
    /// [`EngineError::DeletedVar`] if it was already deleted, [`EngineError::ForeignVar`].
    pub fn delete_var<F>(&self, var: Var, on_deleted: F) -> Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        // Weak: the callback lives in the graph, which the engine state owns. Whoever runs it
        // (a completion, a wait, this call) holds the state, so an upgrade never takes the
        // last reference.
        let engine = Arc::downgrade(self.state());
        let on_deleted = move || {
            // It runs at the end of the completion of the var's last op, or of this call:
            // unwinding from there would take a worker down, or skip other callbacks.
            if let Err(payload) = catch_unwind(AssertUnwindSafe(on_deleted))
                && let Some(state) = engine.upgrade()
            {
                // A failure that belongs to no op's vars, for `wait_for_all` to report.
                let cause = FailureCause::Panic(panic_message(&*payload));
                let failure = OpFailure::new(Cow::Borrowed("delete_var"), cause);
                state.failures().add_root(failure);
            }
        };
        let state = self.state();
        let deletion = state
            .graph()
            .delete_var(var, on_deleted)
            .map_err(|error| state.named(error.into(), None))?;
        state.entered_graph();
        deletion.call_if_reclaimed();
        Ok(())
    }

    /// Starts describing an op to push: `engine.op("name").reads(..).writes(..).push_sync(f)`.
    pub fn op(&self, name: impl Into<Cow<'static, str>>) -> OpBuilder<'_> {
        OpBuilder::new(self, name.into())
    }

    /// Starts describing a reusable operator (MXNet's `NewOperator`).
    pub fn operator(&self, name: impl Into<Cow<'static, str>>) -> OperatorBuilder<'_> {
        OperatorBuilder::new(self, name.into())
    }

    /// The engine's profiler: start it, stop it, take what it recorded (see [`Profiler`]).
    pub fn profiler(&self) -> Profiler<'_> {
        Profiler::new(self.state().profiler())
    }

    /// Pushes one run of `operator` (MXNet's `Push`).
    ///
    /// # Errors
    ///
    /// [`EngineError::OperatorDeleted`], [`EngineError::ForeignOperator`], and the errors of
    /// [`OpBuilder::push_sync`].
    pub fn push(&self, operator: &Operator, context: Context, priority: i32) -> Result<()> {
        let op = &operator.def;
        if op.engine != self.id() {
            return Err(EngineError::ForeignOperator {
                name: op.name.to_string(),
            });
        }
        if operator.is_deleted() {
            return Err(EngineError::OperatorDeleted {
                name: op.name.to_string(),
            });
        }
        let state = self.state();
        let named = |error| state.named(error, Some(op.name.as_str()));
        let record = OpRecord {
            name: op.name.clone(),
            func: Some(OpFn::Operator(Arc::clone(op))),
            context,
            property: op.property,
            priority,
            route: state.route(context, op.property).map_err(named)?,
            profiled: op.profiled,
        };
        state
            .push_record(&op.reads, &op.writes, record)
            .map_err(named)
    }

    /// Deletes `operator`: later pushes of it (through any clone) fail with
    /// [`EngineError::OperatorDeleted`]; pushes already made still run, and the function is
    /// freed once the last of them completed.
    ///
    /// # Errors
    ///
    /// [`EngineError::OperatorDeleted`] if it was already deleted,
    /// [`EngineError::ForeignOperator`].
    pub fn delete_operator(&self, operator: Operator) -> Result<()> {
        let op = &operator.def;
        if op.engine != self.id() {
            return Err(EngineError::ForeignOperator {
                name: op.name.to_string(),
            });
        }
        // Relaxed: only the swap's atomicity matters (one delete wins); see
        // `OperatorDef::deleted`.
        if op.deleted.swap(true, Ordering::Relaxed) {
            return Err(EngineError::OperatorDeleted {
                name: op.name.to_string(),
            });
        }
        // Pending pushes hold their own reference; the function is freed after the last.
        drop(operator);
        Ok(())
    }

    /// Waits until every op pushed on `var` before this call completed. Returns the failure
    /// `var` holds, if any, and clears it (see the failure rules in the crate documentation).
    ///
    /// # Errors
    ///
    /// [`EngineError::OpFailed`]; [`EngineError::WaitOnOwnVar`] from inside an op that reads or
    /// writes `var`; [`EngineError::WaitDeadlock`] from inside an op, if an op pushed on `var`
    /// before depends on that op's vars; [`EngineError::DeletedVar`],
    /// [`EngineError::ForeignVar`].
    pub fn wait_for_var(&self, var: Var) -> Result<()> {
        let state = self.state();
        state.close_open_segment();
        if running_op_uses(state.id(), var) {
            return Err(state.named(EngineError::wait_on_own_var(var), None));
        }
        let one_shot = Arc::new(OneShot::new());
        // Inside an op of this engine, the wait may close a cycle: register it before pushing
        // (see `deadlock.rs`). A thread outside every op holds no var, so it cannot.
        let held = sync_ops_hold(state.id());
        let mut registration = (!held.is_empty())
            .then(|| state.blocked_waits().register(&one_shot, held.clone(), var));
        state
            .push_wait(var, &one_shot)
            .map_err(|error| state.named(error, None))?;
        if registration.is_some()
            && !one_shot.is_set()
            && closes_cycle(
                state.graph(),
                state.blocked_waits(),
                &one_shot,
                &held,
                Payload::wait_one_shot,
            )
        {
            // Unregistered first: our vars are about to be released, so other walks must not
            // go on through them.
            drop(registration.take());
            if one_shot.abandon() {
                return Err(state.named(EngineError::wait_deadlock(var), None));
            }
            // Claimed meanwhile: the wait op is being released after all.
        }
        let outcome = blocking::wait_watched(state, &one_shot, var);
        drop(registration);
        var_outcome(outcome)
    }

    /// The twin of [`wait_for_var`](Self::wait_for_var) for async code: a future that
    /// resolves once every op pushed on `var` before this call completed, with the same
    /// outcome (the failure `var` holds, taken and cleared). The wait op is pushed here; no
    /// thread blocks while the future is pending, and it works with any executor.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use depengine::{Engine, EngineConfig, EngineError};
    ///
    /// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
    /// let var = engine.new_var()?;
    /// engine.op("slow").writes([var]).push_sync(|_| std::thread::sleep(Duration::from_millis(5)))?;
    /// let written = engine.wait_for_var_async(var);
    /// futures::executor::block_on(written)?;
    ///
    /// engine.op("fails").writes([var]).push_sync(|_| Err("no".into()))?;
    /// let failed = futures::executor::block_on(engine.wait_for_var_async(var));
    /// assert!(matches!(failed, Err(EngineError::OpFailed(_))));
    /// // Taken and cleared, as `wait_for_var` does.
    /// futures::executor::block_on(engine.wait_for_var_async(var))?;
    /// # Ok::<(), EngineError>(())
    /// ```
    ///
    /// Dropping the future before it resolves gives up the wait (see [`WaitForVar`]).
    ///
    /// Inside an op of this engine, creating the future is fine, but the deadlock checks of
    /// [`wait_for_var`](Self::wait_for_var) are not made (the future blocks no thread, so it
    /// keeps no var held): awaiting it with a blocking executor there is the caller's own
    /// blocking, and deadlocks if an op pushed on `var` before waits for the op's vars (or,
    /// on a naive engine, is queued on this thread behind the op).
    ///
    /// # Errors
    ///
    /// Returned by the future: [`EngineError::OpFailed`]; [`EngineError::WaitOnOwnVar`] if
    /// created inside an op that reads or writes `var`; [`EngineError::DeletedVar`],
    /// [`EngineError::ForeignVar`], [`EngineError::ShutDown`].
    pub fn wait_for_var_async(&self, var: Var) -> WaitForVar {
        let state = self.state();
        state.close_open_segment();
        if running_op_uses(state.id(), var) {
            return WaitForVar::refused(state.named(EngineError::wait_on_own_var(var), None));
        }
        let one_shot = Arc::new(OneShot::new());
        match state.push_wait(var, &one_shot) {
            Ok(()) => WaitForVar::waiting(one_shot),
            Err(error) => WaitForVar::refused(state.named(error, None)),
        }
    }

    /// Waits until every pushed op completed. Returns the first op failure (in completion
    /// order) recorded since the last `wait_for_all` and not yet returned by a
    /// [`wait_for_var`](Self::wait_for_var), and clears every var failure recorded since then
    /// (see the failure rules in the crate documentation).
    ///
    /// Found idle, the engine also gives back the memory a burst of waiting ops grew (the op
    /// slots beyond the first thousand, see `Graph::trim` in `depengine-graph`; and the blocks
    /// of op closures too large for an op's record once no engine holds one): the worker whose
    /// completion ends the wait does it after waking it, or else the waiting thread.
    ///
    /// # Errors
    ///
    /// [`EngineError::OpFailed`]; [`EngineError::WaitAllInsideOp`] from inside an op.
    pub fn wait_for_all(&self) -> Result<()> {
        let state = self.state();
        state.close_open_segment();
        if running_op_of(state.id()) {
            return Err(EngineError::WaitAllInsideOp);
        }
        blocking::wait_idle(state, "wait_for_all");
        after_idle(state)
    }

    /// The twin of [`wait_for_all`](Self::wait_for_all) for async code: a future that
    /// resolves once every pushed op completed, with the same outcome (the first unreported
    /// failure; every var failure cleared) and the same trim of the graph. No thread blocks
    /// while it is pending (and none warns that it stalls), and it works with any executor.
    ///
    /// ```
    /// use depengine::{Engine, EngineConfig, EngineError};
    ///
    /// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
    /// let var = engine.new_var()?;
    /// for _ in 0..100 {
    ///     engine.op("step").writes([var]).push_sync(|_| {})?;
    /// }
    /// futures::executor::block_on(engine.wait_for_all_async())?;
    /// assert_eq!(engine.stats().pending_ops, 0);
    /// # Ok::<(), EngineError>(())
    /// ```
    ///
    /// Dropping the future before it resolves gives up the wait (see [`WaitForAll`]).
    ///
    /// # Errors
    ///
    /// Returned by the future: [`EngineError::OpFailed`]; [`EngineError::WaitAllInsideOp`] if
    /// created inside an op of this engine (it could never resolve while the op runs unless
    /// the op returned first, and an op cannot await it without blocking itself; as
    /// `wait_for_all` does, it refuses).
    pub fn wait_for_all_async(&self) -> WaitForAll {
        self.state().close_open_segment();
        if running_op_of(self.id()) {
            return WaitForAll::refused(EngineError::WaitAllInsideOp);
        }
        WaitForAll::waiting(self.clone())
    }

    /// Shuts the engine down: later pushes and new vars (through any clone) fail with
    /// [`EngineError::ShutDown`]; waits for every pushed op, as
    /// [`wait_for_all`](Self::wait_for_all) does. If this is the last clone, the threads are
    /// joined and the profile written ([`EngineConfig::profiler_output`]) here, otherwise
    /// when the last clone is dropped or shut down.
    ///
    /// # Errors
    ///
    /// As [`wait_for_all`](Self::wait_for_all); from the last clone, also
    /// [`EngineError::ProfilerOutput`] if the profile could not be written (when an op failure
    /// is returned instead, the write's failure is a warning: see
    /// [`EngineConfig::stall_warning`] for where warnings go).
    ///
    /// [`EngineConfig::profiler_output`]: crate::EngineConfig::profiler_output
    /// [`EngineConfig::stall_warning`]: crate::EngineConfig::stall_warning
    pub fn shutdown(self) -> Result<()> {
        self.state().pending().shut_down();
        let waited = self.wait_for_all();
        // The last clone tears the engine down here rather than in its drop, so that a profile
        // it cannot write is this call's error.
        let written = match Arc::into_inner(self.handle) {
            Some(mut handle) => handle.close(),
            None => Ok(()),
        };
        match (waited, written) {
            (Ok(()), Err(failure)) => Err(failure.into()),
            (waited, Err(failure)) => {
                failure.warn();
                waited
            }
            (waited, Ok(())) => waited,
        }
    }

    /// Whether the engine was shut down.
    pub fn is_shut_down(&self) -> bool {
        self.state().pending().is_shut_down()
    }

    /// Writes a picture of the ops pending now to `out`, as a Graphviz DOT digraph (render it
    /// with `dot -Tsvg`): what each waiting op waits for, and what holds each var.
    ///
    /// - A var with running or waiting ops is a node `"var 3.0"` (slot, generation), an
    ///   ellipse labelled with its name (or `#3.0`), with an edge "held by" to its holder: the
    ///   holding op's node while that op waits for another var, else a dashed box
    ///   `"var 3.0 held"` ("running write" or "N running reads", and the var the holder waits
    ///   for when it is blocked in a `wait_for_var`; running ops are not tracked).
    /// - A waiting op is a node `"op 5.1"` (name and id), with an edge to each var it waits
    ///   on, labelled with its place in that var's queue and its access (`1: write`).
    ///
    /// Nodes first (vars by slot, ops by id), then edges (by var, in queue order); an idle
    /// engine writes `digraph pending {}`. Vars are read one at a time, not as one snapshot;
    /// on a stalled engine nothing moves and the picture is exact. Cold: it locks every var.
    /// A replay is one op (`replay <plan>`); the replays queued on it ([`Engine::replay`]) are
    /// not shown.
    ///
    /// ```
    /// use std::sync::mpsc;
    ///
    /// use depengine::{Engine, EngineConfig, FnProperty};
    ///
    /// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
    /// let weights = engine.new_var_named("weights")?;
    /// // An async op holds `weights` until its `Completion` completes; `update` waits for it.
    /// let (tx, rx) = mpsc::channel();
    /// engine
    ///     .op("load")
    ///     .writes([weights])
    ///     .prop(FnProperty::Async)
    ///     .push_async(move |_, done| tx.send(done).unwrap())?;
    /// let done = rx.recv().unwrap();
    /// engine.op("update").writes([weights]).push_sync(|_| {})?;
    ///
    /// let mut dot = Vec::new();
    /// engine.dump_pending(&mut dot)?;
    /// let dot = String::from_utf8(dot).unwrap();
    /// let var = format!("\"var {}.{}\"", weights.index(), weights.generation());
    /// assert!(dot.starts_with("digraph pending {\n"));
    /// assert!(dot.contains(&format!("{var} [shape=ellipse, label=\"weights\"];")));
    /// assert!(dot.contains(&format!("{var} -> \"var {}.{} held\"", weights.index(), weights.generation())));
    /// assert!(dot.contains("running write"));
    /// assert!(dot.contains("label=\"update (op#"));
    /// assert!(dot.contains(&format!(" -> {var} [label=\"1: write\"];")));
    ///
    /// done.ok();
    /// engine.wait_for_all()?;
    /// let mut idle = Vec::new();
    /// engine.dump_pending(&mut idle)?;
    /// assert_eq!(idle, b"digraph pending {\n}\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of writing to `out`.
    pub fn dump_pending<W: std::io::Write + ?Sized>(&self, out: &mut W) -> std::io::Result<()> {
        self.state().close_open_segment();
        dump::write_pending(self.state(), out)
    }

    /// Counters for leak checks.
    pub fn stats(&self) -> EngineStats {
        let state = self.state();
        let graph = state.graph().stats();
        EngineStats {
            pending_ops: state.pending().count(),
            live_vars: graph.live_vars,
            waiting_ops: graph.live_op_blocks,
            failed_vars: graph.failed_vars,
            logged_failures: state.failures().len(),
        }
    }
}

/// The outcome of a `wait_for_var`, blocking or async, from the value its one-shot carried: the
/// failure taken from the var, now returned (so `wait_for_all` does not return it again).
pub(crate) fn var_outcome(taken: Option<OpFailure>) -> Result<()> {
    match taken {
        Some(failure) => {
            failure.mark_reported();
            Err(EngineError::OpFailed(failure))
        }
        None => Ok(()),
    }
}

/// What `wait_for_all`, blocking or async, does once the engine was found idle: gives back the
/// op storage a burst grew (if the completion that woke the wait did not give it back already:
/// then this is one load), takes the failure log, clears the var failures it lists, and
/// returns the first failure no wait returned.
pub(crate) fn after_idle(state: &EngineState) -> Result<()> {
    state.trim_storage();
    let taken = state.failures().take();
    for var in taken.vars {
        // A var deleted meanwhile has dropped its failure already.
        let _ = state.graph().clear_failure(var);
    }
    var_outcome(taken.unreported)
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("kind", &self.kind())
            .field("stats", &self.stats())
            .finish()
    }
}
