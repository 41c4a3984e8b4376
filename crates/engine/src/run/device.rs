//! A GPU op on its device executor: the function runs on one of the executor's workers, the
//! device ops behind it may start once its work was launched, and the op completes when the
//! executor says that work is done.
//!
//! ```text
//! dispatch ──► executor.execute_device(task, after the fences of the launched ops behind
//!                  │                     which the graph released it: run/fences.rs)
//!                  worker: its work waits for the fences, then task.run() ── the function
//!                  │        launches on the worker's stream; its outcome is kept
//!                  │        (AwaitingDevice, Step::Returned: one box for the op's two steps)
//!                  ├─► reports the launch: completion.launched(fence)
//!                  │       if the function succeeded: Graph::launch registers the fence on the
//!                  │       op's vars and releases the device ops behind it (Step::Launched)
//!                  └─► hands the completion to its stream's completion thread
//!                        ── an event after it fired ──► completion.complete(device's outcome)
//!                                   │
//!    finish: the function's outcome, else a failure passed on from the launched ops it was
//!            released behind (run/fences.rs, Failures), else the device's; Graph::complete
//!            (or complete_launched, which removes the fence where it stores the failure)
//!            releases the CPU ops behind it, pending -= 1; its outcome settled for the device
//!            ops behind it
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
//! the op wrote then, so every op that waits for completion behind it sees it. The device ops
//! released at the launch ran behind the failed work, and their own work may have succeeded
//! (on another device: CUDA's errors are sticky within a context only); each of them completes
//! once the outcomes of the launched writers of its vars are known, passing a failure on
//! (`Upstream`, `run/fences.rs`, "Failures").
//! A skipped op, and an async function (which completes through its own `Completion`), are
//! finished by `run_function` as on a CPU worker; their device completion has nothing left
//! to do.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use depengine_device::{DeviceCompletion, DeviceError, DeviceOp, DeviceTask, Executor, Fence};
use depengine_graph::{LaunchedOp, ReadyOp};

use crate::failure::{FailureCause, OpFailure};
use crate::op::record::OpRecord;
use crate::profile::recorder::Started;
use crate::run::EngineState;
use crate::run::dispatch::Dispatcher;
use crate::run::fences::{self, Registration, Upstream};
use crate::thread::task::TaskMarker;

impl EngineState {
    /// Hands ready GPU op `op` to `executor` ([`hand_over`]).
    pub(super) fn hand_to_device(self: &Arc<Self>, executor: &dyn Executor, op: ReadyOp<OpRecord>) {
        hand_over(executor, self.device_task(op));
    }

    /// The task that runs ready GPU op `op` on its device executor, after the fences of the
    /// launched ops it was released behind.
    fn device_task(self: &Arc<Self>, op: ReadyOp<OpRecord>) -> DeviceTask {
        let priority = op.payload().priority;
        let behind = fences::behind(&self.graph, op.reads(), op.writes());
        let unlaunched = Unlaunched {
            state: Arc::clone(self),
            op: Some((op, behind.upstream)),
        };
        DeviceTask::new(priority, move || unlaunched.run()).after(behind.fences)
    }

    /// Runs the op's function on the executor's worker; the completion finishes the op, after
    /// the outcomes of the launched ops it was released behind (`upstream`).
    fn run_on_device(
        self: Arc<Self>,
        op: ReadyOp<OpRecord>,
        upstream: Upstream,
    ) -> DeviceCompletion {
        let marker = TaskMarker::enter(self.id);
        let mut completion = None;
        self.run_function(op, None, |op, outcome, started| {
            completion = Some(DeviceCompletion::for_op(Box::new(AwaitingDevice {
                in_flight: InFlight::counted(Arc::clone(&self)),
                started,
                upstream,
                step: Step::Returned { op, outcome },
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

/// A GPU op whose function returned, holding its vars until the executor reports on it: that
/// its work launched (optionally), then that the work is done. One box for both steps.
struct AwaitingDevice {
    /// Its count as device work, and the engine.
    in_flight: InFlight,
    /// When it started, for a profiled op.
    started: Option<Started>,
    /// The outcomes of the launched ops it was released behind (`run/fences.rs`, "Failures").
    upstream: Upstream,
    step: Step,
}

/// How far the executor has reported on an [`AwaitingDevice`] op.
enum Step {
    /// The function returned `outcome` (or panicked); no launch reported.
    Returned {
        op: ReadyOp<OpRecord>,
        outcome: Result<(), OpFailure>,
    },
    /// The function succeeded and its work launched: the device ops behind it were released;
    /// the others wait for its completion.
    Launched {
        /// `None` had the graph refused the launch, which it does only for another graph's
        /// op (then only the op's count is finished).
        op: Option<LaunchedOp<OpRecord>>,
        /// What names its fences on its vars; settled with its outcome at its completion.
        registration: Registration,
    },
}

impl Step {
    /// The op's record, unless the graph refused its launch.
    fn record(&self) -> Option<&OpRecord> {
        match self {
            Step::Returned { op, .. } => Some(op.payload()),
            Step::Launched { op, .. } => op.as_ref().map(LaunchedOp::payload),
        }
    }
}

impl DeviceOp for AwaitingDevice {
    /// The op's work was launched: unless its function failed, the op launches in the graph,
    /// which releases the device ops behind it, after `fence`.
    fn launched(mut self: Box<Self>, fence: Fence) -> Box<dyn DeviceOp> {
        // The op moves out of the box and back, as the next step: one allocation for both.
        let Step::Returned {
            op,
            outcome: Ok(()),
        } = self.step
        else {
            // Its function failed: it completes with its own failure, once the work it
            // launched before failing is done (its buffers may still be in use).
            return self;
        };
        let state = self.in_flight.state();
        let marker = TaskMarker::enter(state.id);
        // Registered on each var before the launch releases anything there: every device op it
        // releases finds the fence (`run/fences.rs`). Our own op, so the graph takes it; were
        // it refused (another graph's op), nothing is registered and only its count is
        // finished, at its completion.
        let registration = Registration::new();
        let launched = state.graph.launch(
            op,
            |access, on_var| on_var.register(access, &fence, &registration),
            &mut Dispatcher::new(state, false, None),
        );
        drop(marker);
        self.step = Step::Launched {
            op: launched.ok(),
            registration,
        };
        self
    }

    fn function_failed(&self) -> bool {
        matches!(
            self.step,
            Step::Returned {
                outcome: Err(_),
                ..
            }
        )
    }

    /// The device is done with the work the function launched: the op finishes with the
    /// function's failure if it failed, else, once the launched ops it was released behind
    /// are known, with the first failure among them, else with the device's outcome.
    fn complete(self: Box<Self>, device: Result<(), DeviceError>) {
        let AwaitingDevice {
            in_flight,
            started,
            upstream,
            step,
        } = *self;
        let state = in_flight.state();
        if let Some(record) = step.record() {
            state.workers.note_device_outcome(record.context, &device);
        }
        match step {
            Step::Returned { op, outcome } => {
                if let Err(own) = outcome {
                    // Its own failure wins over anything passed on: no need to wait.
                    return finish(in_flight, op, started, Err(own), true);
                }
                upstream.then(move |passed_on| {
                    let (outcome, root) = outcome_of(passed_on, device, op.payload());
                    finish(in_flight, op, started, outcome, root);
                });
            }
            // Once the launched ops it was released behind are known, the op completes with
            // the first failure among them, else with the device's outcome, releasing the CPU
            // ops behind it; its fence goes from each var in the section of the var's lock
            // that stores its failure; then the device ops released behind it learn that
            // outcome. Subtle: a device op released from now on (behind another launched op)
            // either finds this op's fence on a var, and takes its outcome, or finds the
            // failure stored on the var, which skips it (failure rule 2); never neither.
            Step::Launched { op, registration } => {
                upstream.then(move |passed_on| {
                    let state = in_flight.state();
                    let marker = TaskMarker::enter(state.id);
                    if let Some(op) = op {
                        let (outcome, root) = outcome_of(passed_on, device, op.payload());
                        let failure = outcome.as_ref().err().cloned();
                        state.profile(|| op.payload().profiled_op(), started, &outcome);
                        state.finish_launched(op, outcome, root, &registration);
                        registration.settle(failure.as_ref());
                    } else {
                        state.finish_uncompleted();
                        registration.settle(None);
                    }
                    // As for a priority task: the engine's reference goes while the thread is
                    // still marked.
                    drop(in_flight);
                    drop(marker);
                });
            }
        }
    }
}

/// Completes the op with `outcome` (`root`: its own failure, not passed on), then its count
/// as device work.
fn finish(
    in_flight: InFlight,
    op: ReadyOp<OpRecord>,
    started: Option<Started>,
    outcome: Result<(), OpFailure>,
    root: bool,
) {
    let state = in_flight.state();
    let marker = TaskMarker::enter(state.id);
    state.finish_profiled(op, started, outcome, root, None);
    // As for a priority task: the engine's reference goes while the thread is still marked.
    drop(in_flight);
    drop(marker);
}

/// The outcome of the op of `record` whose work the device reported on (`device`), once the
/// launched ops it was released behind are known: the first failure among them (`passed_on`,
/// not its own), else the device's (`root`: its own).
fn outcome_of(
    passed_on: Option<OpFailure>,
    device: Result<(), DeviceError>,
    record: &OpRecord,
) -> (Result<(), OpFailure>, bool) {
    match passed_on {
        Some(failure) => (Err(failure), false),
        None => (
            device.map_err(|error| record.failure(FailureCause::Error(Box::new(error)))),
            true,
        ),
    }
}

/// A GPU op handed to its executor and not run yet: if the executor drops the task unrun, the
/// op fails (its function dropped unrun) instead of holding its vars forever.
struct Unlaunched {
    state: Arc<EngineState>,
    /// `Some` until the task runs: the op, and the outcomes of the launched ops it was released
    /// behind.
    op: Option<(ReadyOp<OpRecord>, Upstream)>,
}

impl Unlaunched {
    fn run(mut self) -> DeviceCompletion {
        let state = Arc::clone(&self.state);
        match self.op.take() {
            Some((op, upstream)) => state.run_on_device(op, upstream),
            // `op` is taken only here, and `run` consumes the guard.
            None => DeviceCompletion::new(drop),
        }
    }
}

impl Drop for Unlaunched {
    fn drop(&mut self) {
        if let Some((op, _)) = self.op.take() {
            let _marker = TaskMarker::enter(self.state.id);
            let failure = op
                .payload()
                .failure(FailureCause::Error(Box::new(DeviceError::Dropped)));
            self.state.fail_unrun(op, failure);
        }
    }
}

/// Hands `task` to `executor`. A backend whose `execute_device` panics has dropped the task
/// on the way (its op fails, `DeviceError::Dropped`), or keeps it: either way this thread goes
/// on with what it was doing (the panic hook reported the panic), rather than unwinding through
/// the engine, which would leave a replay's device queue (`run/replay/`) held by no thread.
pub(super) fn hand_over(executor: &dyn Executor, task: DeviceTask) {
    let _ = catch_unwind(AssertUnwindSafe(|| executor.execute_device(task)));
}

/// A sync GPU op whose function returned and whose device work the executor has not reported
/// done: counted while alive (`GpuExecutors::work_handed`), so that a shutdown stalled on a
/// hung device can tell (`api/blocking.rs`). A function still running (it may block on the
/// host) is not device work. Its owner moves it along the op's path and drops it once the op
/// is finished; an [`AwaitingDevice`] reaches the engine through it.
pub(super) struct InFlight(Arc<EngineState>);

impl InFlight {
    pub(super) fn counted(state: Arc<EngineState>) -> Self {
        state.workers.gpus().work_handed();
        InFlight(state)
    }

    fn state(&self) -> &Arc<EngineState> {
        &self.0
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.workers.gpus().work_reported();
    }
}
