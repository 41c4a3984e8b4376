//! [`Completion`]: the token an async op completes, exactly once, from any thread.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine_graph::ReadyOp;

use crate::failure::{BoxError, FailureCause, OpFailure};
use crate::op::record::OpRecord;
use crate::profile::recorder::Started;

/// Where an async op's completion goes: the engine that runs the op. A trait object, so that
/// what an op is (this module) does not depend on how the engine runs it (`run/`).
pub(crate) trait FinishAsync: Send + Sync {
    /// Completes `op` with `outcome` (recording it for the profiler if it `started` a profiled
    /// run), releasing its dependents.
    fn finish_async(
        self: Arc<Self>,
        op: ReadyOp<OpRecord>,
        started: Option<Started>,
        outcome: Result<(), OpFailure>,
    );
}

/// Completes an async op. Consumed by [`complete`](Self::complete) (or [`ok`](Self::ok),
/// [`fail`](Self::fail)), so an op completes at most once; dropped without completing, it
/// completes the op with [`FailureCause::CompletionDropped`] (or [`FailureCause::Panic`] when
/// dropped by a panic), so a forgotten completion is an error, never a hang. Only
/// `std::mem::forget` can leak it, and then waits on the op's vars never return.
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
///
/// use depengine::{Completion, Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let var = engine.new_var()?;
/// let (tx, rx) = mpsc::channel::<Completion>();
/// engine.op("download").writes([var]).push_async(move |_, done| tx.send(done).unwrap())?;
/// let done = rx.recv().unwrap(); // the op returned; it runs until `done` completes
/// assert_eq!(done.op_name(), "download");
///
/// // Completed once, from any thread: `ok`, `fail` or `complete`.
/// std::thread::spawn(move || done.fail("connection reset")).join().unwrap();
/// let error = engine.wait_for_var(var).unwrap_err();
/// assert_eq!(error.to_string(), "op `download` failed: connection reset");
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "an async op must complete its token (dropping it fails the op)"]
pub struct Completion {
    state: Option<(Arc<dyn FinishAsync>, ReadyOp<OpRecord>)>,
    /// When the op's function started, if the profiler records it.
    started: Option<Started>,
    /// The op's frame flag (`frame.rs`): set before the op's vars are released, so that its
    /// function, if still running, no longer counts as holding them.
    released: Arc<AtomicBool>,
}

impl Completion {
    pub(crate) fn new(
        engine: Arc<dyn FinishAsync>,
        op: ReadyOp<OpRecord>,
        started: Option<Started>,
        released: Arc<AtomicBool>,
    ) -> Self {
        Completion {
            state: Some((engine, op)),
            started,
            released,
        }
    }

    /// Completes the op with `outcome`.
    fn finish(
        &mut self,
        engine: Arc<dyn FinishAsync>,
        op: ReadyOp<OpRecord>,
        outcome: Result<(), OpFailure>,
    ) {
        // Before the vars are released (see `thread/frame.rs`). Relaxed: the flag publishes no
        // data (see `thread/frame.rs` for why the checks that read it need no ordering).
        self.released.store(true, Ordering::Relaxed);
        engine.finish_async(op, self.started.take(), outcome);
    }

    /// Completes the op: `Ok` lets its dependents run, `Err` fails it (the failure rules of
    /// the crate documentation apply).
    pub fn complete<E>(mut self, result: Result<(), E>)
    where
        E: Into<BoxError>,
    {
        if let Some((engine, op)) = self.state.take() {
            let outcome =
                result.map_err(|error| op.payload().failure(FailureCause::Error(error.into())));
            self.finish(engine, op, outcome);
        }
    }

    /// Completes the op successfully.
    pub fn ok(self) {
        self.complete(Ok::<(), BoxError>(()));
    }

    /// Fails the op with `error`.
    pub fn fail<E>(self, error: E)
    where
        E: Into<BoxError>,
    {
        self.complete(Err(error));
    }

    /// The name of the op this token completes.
    pub fn op_name(&self) -> &str {
        self.state
            .as_ref()
            .map_or("", |(_, op)| op.payload().name.as_str())
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some((engine, op)) = self.state.take() {
            let cause = if std::thread::panicking() {
                FailureCause::Panic("the op panicked before completing".to_owned())
            } else {
                FailureCause::CompletionDropped
            };
            let outcome = Err(op.payload().failure(cause));
            self.finish(engine, op, outcome);
        }
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("op", &self.op_name())
            .finish()
    }
}
