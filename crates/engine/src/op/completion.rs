//! How the [`Completion`] an async op holds completes it, exactly once, from any thread (the
//! token itself is one of the op's types, `record.rs`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine_graph::ReadyOp;

use crate::failure::{BoxError, FailureCause, OpFailure};
use crate::op::record::{Completion, FinishAsync, OpRecord};
use crate::profile::recorder::Started;

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

    /// Completes the op with an outcome per var (see `FinishAsync::finish_async_each`): for an
    /// op that stands for several (a replay), whose own parts logged their failures.
    pub(crate) fn complete_each(mut self, failures: Vec<Option<OpFailure>>) {
        if let Some((engine, op)) = self.state.take() {
            self.released.store(true, Ordering::Relaxed);
            engine.finish_async_each(op, failures);
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
