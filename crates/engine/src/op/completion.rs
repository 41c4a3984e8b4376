//! How the [`Completion`] an async op holds completes it, exactly once, from any thread (the
//! token itself is one of the op's types, `record.rs`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine_graph::ReadyOp;

use crate::failure::{BoxError, FailureCause, OpFailure};
use crate::name::OpName;
use crate::op::plan::PlanOpDone;
use crate::op::record::{Completes, Completion, FinishAsync, OpRecord};
use crate::profile::recorder::Started;

impl Completion {
    pub(crate) fn new(
        engine: Arc<dyn FinishAsync>,
        op: ReadyOp<OpRecord>,
        started: Option<Started>,
        released: Arc<AtomicBool>,
    ) -> Self {
        Completion {
            target: Some(Completes::Op {
                engine,
                op,
                released,
            }),
            started,
        }
    }

    /// The completion of an op of a replay.
    pub(crate) fn of_plan_op(mut done: PlanOpDone) -> Self {
        let op = done.op;
        Completion {
            started: done.started.take(),
            target: done
                .replay
                .take()
                .map(|replay| Completes::PlanOp { replay, op }),
        }
    }

    /// Completes the op with `outcome`, or with `cause` as its failure.
    fn finish(&mut self, outcome: std::result::Result<(), FailureCause>) {
        let Some(target) = self.target.take() else {
            return;
        };
        let outcome = outcome.map_err(|cause| OpFailure::new(target.name().to_cow(), cause));
        match target {
            Completes::Op {
                engine,
                op,
                released,
            } => {
                // Before the vars are released (see `thread/frame.rs`). Relaxed: the flag
                // publishes no data (see `thread/frame.rs` for why the checks that read it need
                // no ordering).
                released.store(true, Ordering::Relaxed);
                engine.finish_async(op, self.started.take(), outcome);
            }
            Completes::PlanOp { replay, op } => {
                replay.finish_plan_op(op, self.started.take(), outcome);
            }
        }
    }

    /// Completes the op: `Ok` lets its dependents run, `Err` fails it (the failure rules of
    /// the crate documentation apply).
    pub fn complete<E>(mut self, result: Result<(), E>)
    where
        E: Into<BoxError>,
    {
        self.finish(result.map_err(|error| FailureCause::Error(error.into())));
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
        self.target
            .as_ref()
            .map_or("", |target| target.name().as_str())
    }
}

impl Completes {
    /// The name of the op.
    fn name(&self) -> &OpName {
        match self {
            Completes::Op { op, .. } => &op.payload().name,
            Completes::PlanOp { replay, op } => replay.plan_op_name(*op),
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if self.target.is_some() {
            let cause = if std::thread::panicking() {
                FailureCause::Panic("the op panicked before completing".to_owned())
            } else {
                FailureCause::CompletionDropped
            };
            self.finish(Err(cause));
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
