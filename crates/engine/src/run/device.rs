//! A GPU op on its device executor: the function runs on one of the executor's workers, the
//! device ops behind it may start once its work was launched, and the op completes when the
//! executor says that work is done.
//!
//! ```text
//! dispatch ──► executor.execute_device(task, after the fences of the launched ops behind
//!                  │                     which the graph released it: run/fences.rs)
//!                  worker: its work waits for the fences, then task.run() ── the function
//!                  │        launches on the worker's stream; its outcome is kept (Returned)
//!                  ├─► records an event: completion.launched(fence)
//!                  │       if the function succeeded: the fence registered on the op's vars,
//!                  │       Graph::launch releases the device ops behind it (LaunchedWork)
//!                  └─► hands the event and the completion to its stream's completion thread
//!                          ── the event fired ──► completion.complete(device's outcome)
//!                                   │
//!    finish: the function's outcome, else the device's; the fence removed; Graph::complete
//!            (or complete_launched) releases the CPU ops behind it, pending -= 1
//! ```
//!
//! Sync GPU ops are pushed waiting for launch (`Waits::Launch`): once an op launched, the
//! device ops behind it are released at once, and their work is ordered behind its fence on
//! the device (a stream waits for its event), so a chain of GPU ops makes no host round trip
//! per link. Only their *work* is ordered so: the function of such an op runs while the work
//! it depends on may still be running, so it launches work on its stream and must not read,
//! on the host, what that earlier work produces. The CPU ops behind a launched op (and
//! `wait_for_var`, deletions, every wait) wait for its completion, when the device is done, so
//! none of them sees the op's data before its work has finished; async GPU ops, whose work is
//! not what they launch on the worker's stream, wait for completion too. An op whose function
//! failed does not launch: it completes with its failure. An executor that reports no launch
//! completes its ops as CPU workers do, when they are done.
//!
//! A failure of the device's work is known only at the completion: it is stored on the vars
//! the op wrote then, so every op that waits for completion behind it sees it; device ops
//! released at the launch ran behind the failed work (CUDA's errors are sticky within a
//! context: theirs fail too on the same device; across devices they do not, `docs/cuda.md`).
//! A skipped op, and an async function (which completes through its own `Completion`), are
//! finished by `run_function` as on a CPU worker; their device completion has nothing left
//! to do.

use std::sync::Arc;

use depengine_device::{DeviceCompletion, DeviceError, DeviceOp, DeviceTask, Fence};
use depengine_graph::{LaunchedOp, ReadyOp};

use crate::failure::{FailureCause, OpFailure};
use crate::op::record::OpRecord;
use crate::profile::recorder::Started;
use crate::run::EngineState;
use crate::run::dispatch::Dispatcher;
use crate::thread::task::TaskMarker;

impl EngineState {
    /// The task that runs ready GPU op `op` on its device executor, after the fences of the
    /// launched ops it was released behind.
    pub(super) fn device_task(self: &Arc<Self>, op: ReadyOp<OpRecord>) -> DeviceTask {
        let priority = op.payload().priority;
        let fences = self.fences.behind(op.reads(), op.writes());
        let unlaunched = Unlaunched {
            state: Arc::clone(self),
            op: Some(op),
        };
        DeviceTask::new(priority, move || unlaunched.run()).after(fences)
    }

    /// Runs the op's function on the executor's worker; the completion finishes the op.
    fn run_on_device(self: Arc<Self>, op: ReadyOp<OpRecord>) -> DeviceCompletion {
        let marker = TaskMarker::enter(self.id);
        let mut completion = None;
        self.run_function(op, None, |op, outcome, started| {
            completion = Some(DeviceCompletion::for_op(Box::new(Returned {
                state: Arc::clone(&self),
                op,
                outcome,
                started,
            })));
        });
        // An op finished without a sync function's outcome (skipped, async) waits for nothing.
        let completion = completion.unwrap_or_else(|| DeviceCompletion::new(drop));
        // As for a priority task: this reference goes while the thread is still marked.
        drop(self);
        drop(marker);
        completion
    }
}

/// A GPU op whose function returned, holding its vars until the executor reports on it.
struct Returned {
    state: Arc<EngineState>,
    op: ReadyOp<OpRecord>,
    /// What the function returned (or its panic), as the op's outcome.
    outcome: Result<(), OpFailure>,
    /// When it started, for a profiled op.
    started: Option<Started>,
}

impl DeviceOp for Returned {
    /// The function succeeded and its work was launched: the op launches in the graph, which
    /// releases the device ops behind it, after `fence`.
    fn launched(self: Box<Self>, fence: Fence) -> Box<dyn DeviceOp> {
        if self.outcome.is_err() {
            // It completes with its own failure, once the work it launched before failing
            // is done (its buffers may still be in use).
            return self;
        }
        let Returned {
            state, op, started, ..
        } = *self;
        let marker = TaskMarker::enter(state.id);
        // Registered before the launch releases anything: every device op it releases
        // finds the fence (`run/fences.rs`).
        let registered = state.fences.register(op.reads(), op.writes(), &fence);
        // Our own op, so the graph takes it; were it refused (another graph's op), its fence
        // goes and only its count is finished, at its completion.
        let launched = state
            .graph
            .launch(op, &mut Dispatcher::new(&state, false, None));
        if launched.is_err() {
            state.fences.remove_everywhere(registered);
        }
        drop(marker);
        Box::new(LaunchedWork {
            state,
            op: launched.ok().map(|op| (op, registered)),
            started,
        })
    }

    /// The device is done with the work the function launched: the op finishes with the
    /// function's failure if it failed, else with the device's.
    fn complete(self: Box<Self>, device: Result<(), DeviceError>) {
        let Returned {
            state,
            op,
            outcome,
            started,
        } = *self;
        let marker = TaskMarker::enter(state.id);
        let outcome =
            outcome.and_then(|()| device.map_err(|error| device_failure(op.payload(), error)));
        state.profile(|| op.payload().profiled_op(), started, &outcome);
        state.finish(op, outcome, true, None);
        drop(state);
        drop(marker);
    }
}

/// A GPU op whose work was launched: the device ops behind it were released; the others wait
/// for its completion.
struct LaunchedWork {
    state: Arc<EngineState>,
    /// The op and its id in the fence registry; `None` had the graph refused the launch, which
    /// it does only for another graph's op (then only the op's count is finished).
    op: Option<(LaunchedOp<OpRecord>, u64)>,
    started: Option<Started>,
}

impl DeviceOp for LaunchedWork {
    fn launched(self: Box<Self>, _fence: Fence) -> Box<dyn DeviceOp> {
        self
    }

    /// The launched work is done: its fence goes, and the op completes with the device's
    /// outcome, releasing the CPU ops behind it.
    fn complete(self: Box<Self>, device: Result<(), DeviceError>) {
        let LaunchedWork { state, op, started } = *self;
        let marker = TaskMarker::enter(state.id);
        match op {
            Some((op, registered)) => {
                state
                    .fences
                    .remove(registered, op.reads().chain(op.writes()));
                let outcome = device.map_err(|error| device_failure(op.payload(), error));
                state.profile(|| op.payload().profiled_op(), started, &outcome);
                state.finish_launched(op, outcome);
            }
            None => state.finish_uncompleted(),
        }
        drop(state);
        drop(marker);
    }
}

/// The failure of the op of `record`, whose work failed on the device.
fn device_failure(record: &OpRecord, error: DeviceError) -> OpFailure {
    record.failure(FailureCause::Error(Box::new(error)))
}

/// A GPU op handed to its executor and not run yet: if the executor drops the task unrun, the
/// op fails (its function dropped unrun) instead of holding its vars forever.
struct Unlaunched {
    state: Arc<EngineState>,
    /// `Some` until the task runs.
    op: Option<ReadyOp<OpRecord>>,
}

impl Unlaunched {
    fn run(mut self) -> DeviceCompletion {
        let state = Arc::clone(&self.state);
        match self.op.take() {
            Some(op) => state.run_on_device(op),
            // `op` is taken only here, and `run` consumes the guard.
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
