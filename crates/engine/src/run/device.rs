//! A GPU op on its device executor: the function runs on one of the executor's workers, and
//! the op completes when the executor says that the work it launched is done.
//!
//! ```text
//! dispatch ──► executor.execute_device(task)
//!                  worker: task.run() ── launch: run the function (it launches on the
//!                  │                     worker's stream), keep its outcome
//!                  └─► records an event, hands it and the completion to its stream's
//!                      completion thread ── the event fired ──► completion.complete(device)
//!                                                                   │
//!                             finish: the function's outcome, else the device's ◄──┘
//! ```
//!
//! The op's vars stay held until the device is done, so no op that uses them (on the CPU or on
//! another stream) starts before the work this one launched has finished. A skipped op, and an
//! async function (which completes through its own `Completion`), are finished by
//! `run_function` as on a CPU worker; their device completion has nothing left to do.

use std::sync::Arc;

use depengine_device::{DeviceCompletion, DeviceError, DeviceTask};
use depengine_graph::ReadyOp;

use crate::failure::{FailureCause, OpFailure};
use crate::op::record::OpRecord;
use crate::profile::recorder::Started;
use crate::run::EngineState;
use crate::thread::task::TaskMarker;

/// A GPU op whose function returned, waiting in its completion for the device.
struct Returned {
    op: ReadyOp<OpRecord>,
    /// What the function returned (or its panic), as the op's outcome.
    outcome: Result<(), OpFailure>,
    /// When it started, for a profiled op.
    started: Option<Started>,
}

impl EngineState {
    /// The task that runs ready GPU op `op` on its device executor.
    pub(super) fn device_task(self: &Arc<Self>, op: ReadyOp<OpRecord>) -> DeviceTask {
        let priority = op.payload().priority;
        let unlaunched = Unlaunched {
            state: Arc::clone(self),
            op: Some(op),
        };
        DeviceTask::new(priority, move || unlaunched.launch())
    }

    /// Runs the op's function on the executor's worker; the completion finishes the op.
    fn launch(self: Arc<Self>, op: ReadyOp<OpRecord>) -> DeviceCompletion {
        let marker = TaskMarker::enter(self.id);
        let mut completion = None;
        self.run_function(op, None, |op, outcome, started| {
            let returned = Returned {
                op,
                outcome,
                started,
            };
            let state = Arc::clone(&self);
            completion = Some(DeviceCompletion::new(move |device| {
                state.finish_launched(returned, device);
            }));
        });
        // An op finished without a sync function's outcome (skipped, async) waits for nothing.
        let completion = completion.unwrap_or_else(|| DeviceCompletion::new(drop));
        // As for a priority task: this reference goes while the thread is still marked.
        drop(self);
        drop(marker);
        completion
    }

    /// Finishes an op whose function returned, once the device is done with what it launched:
    /// with the function's failure if it failed, else with the device's.
    fn finish_launched(self: Arc<Self>, returned: Returned, device: Result<(), DeviceError>) {
        let marker = TaskMarker::enter(self.id);
        let Returned {
            op,
            outcome,
            started,
        } = returned;
        let outcome = outcome.and_then(|()| {
            device.map_err(|error| op.payload().failure(FailureCause::Error(Box::new(error))))
        });
        self.profile(|| op.payload().profiled_op(), started, &outcome);
        self.finish(op, outcome, true, None);
        drop(self);
        drop(marker);
    }
}

/// A GPU op handed to its executor and not run yet: if the executor drops the task unrun, the
/// op fails (its function dropped unrun) instead of holding its vars forever.
struct Unlaunched {
    state: Arc<EngineState>,
    /// `Some` until the task runs.
    op: Option<ReadyOp<OpRecord>>,
}

impl Unlaunched {
    fn launch(mut self) -> DeviceCompletion {
        let state = Arc::clone(&self.state);
        match self.op.take() {
            Some(op) => state.launch(op),
            // `op` is taken only here, and `launch` consumes the guard.
            None => DeviceCompletion::new(drop),
        }
    }
}

impl Drop for Unlaunched {
    fn drop(&mut self) {
        if let Some(op) = self.op.take() {
            let _marker = TaskMarker::enter(self.state.id);
            let failure = op
                .payload()
                .failure(FailureCause::Error(Box::new(DeviceError::Dropped)));
            self.state.fail_unrun(op, failure);
        }
    }
}
