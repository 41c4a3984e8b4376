//! A replay's GPU ops: each goes to its device's executor (`OnDevice`), handed over from a
//! queue one at a time (an executor may complete an op inside its `execute_device`, which
//! releases the next); its function runs on a worker there, and it is done when the executor
//! reports the device done with the work it launched (an async one: when its own completion
//! is); the executor's thread then releases its dependents. As when pushed, a sync GPU op
//! behind another is released at that one's launch (`DeviceWork`), its work ordered behind the
//! launch's fence, and finished only after it (`plan/launches.rs`); every other dependent waits
//! for the work to finish. A skipped GPU op is done at once (after the ops it was released
//! behind at their launch).

use std::sync::Arc;

use depengine_device::{
    DeviceCompletion, DeviceError, DeviceOp, DeviceTask, Fence, Fences, TaskRun,
};

use super::{Part, Replay, run_queued};
use crate::failure::{FailureCause, OpFailure};
use crate::op::plan::{PlanFn, Target};
use crate::plan::deps::Edge;
use crate::plan::launches::Launches;
use crate::run::device::{self, InFlight};
use crate::thread;
use crate::thread::task::TaskMarker;

impl Replay {
    /// Queues released GPU ops `ops` for their executors, and hands the queue over unless a
    /// thread does already (`Queued`).
    pub(super) fn to_devices(self: &Arc<Self>, ops: impl Iterator<Item = u32>) {
        run_queued(&self.devices, ops, |op| self.to_device(op));
    }

    /// Hands GPU op `op` to its device's executor; an executor it cannot have (the device was
    /// lost since the replay was pushed) fails it, as the device would have failed it had the
    /// op been pushed then; a skipped op is done at once.
    fn to_device(self: &Arc<Self>, op: u32) {
        let plan_op = &self.plan.ops[op as usize];
        // A failure passed on by a predecessor that launched and finished before this op was
        // released (by another) is an input's failure too: it skips, as a pushed op would find
        // the failure on its var. Not run, it has no failure of its own to keep.
        if let Some(passed_on) = self.launches.as_ref().and_then(|l| l.passed_on(op)) {
            self.fail(op, passed_on);
        }
        if self.failure(op).is_some() {
            // Skipped (the profiler records it), as a pushed op: no device work to wait for.
            let _ = self.run_op(op);
            return self.part_done(op, Part::unrun(Ok(())));
        }
        // Its work behind the launched work of the ops it was released behind.
        let fences = match &self.launches {
            Some(launches) => launches.fences_of(&self.plan.deps.launch_preds[op as usize]),
            None => Fences::new(),
        };
        let run = plan_op.run;
        let copy = matches!(plan_op.target, Target::Device { copy: true });
        let executor = self
            .state
            .route(run.context, run.property)
            .and_then(|_| self.state.workers.executor(run.context, copy).cloned());
        let task = OnDevice {
            replay: Some(Arc::clone(self)),
            op,
        };
        match executor {
            Ok(executor) => {
                let task = match &plan_op.func {
                    PlanFn::DeviceGraph(graph) => {
                        let recording = Arc::clone(&graph.recording);
                        DeviceTask::recorded(run.priority, recording, move |how| task.run(how))
                    }
                    PlanFn::Sync(_) | PlanFn::Async(_) => {
                        DeviceTask::new(run.priority, move || task.run(TaskRun::Call))
                    }
                };
                device::hand_over(&*executor, task.after(fences));
            }
            // The op fails, unrun.
            Err(error) => task.fail(FailureCause::Error(Box::new(error))),
        }
    }

    /// Runs GPU op `op`'s function on a device executor's worker (a graph's functions, unless
    /// `how` says its executor launches the work it recorded of them). A sync op (or graph) is
    /// finished by the completion the executor completes when the device is done with the work
    /// launched, with the functions' failure, else the device's, recorded for the profiler from
    /// its start to then (as a pushed op's); an async one by its own completion.
    fn run_device_op(self: Arc<Self>, op: u32, how: TaskRun) -> DeviceCompletion {
        let marker = TaskMarker::enter(self.state.id());
        let plan_op = &self.plan.ops[op as usize];
        let profiler = &self.state.profiler;
        let start = || {
            profiler
                .wants(plan_op.profiled)
                .then(|| profiler.start(thread::profiled()))
        };
        let (started, returned) = match &plan_op.func {
            PlanFn::Sync(func) => {
                let started = start();
                let returned =
                    self.within_frame(|| self.call_sync(&plan_op.name, func, plan_op.run, plan_op));
                (started, returned)
            }
            PlanFn::DeviceGraph(graph) => {
                let started = start();
                let returned = match how {
                    TaskRun::Call => self.within_frame(|| self.call_device_graph(graph)),
                    TaskRun::LaunchRecorded => Ok(()),
                };
                (started, returned)
            }
            PlanFn::Async(_) => {
                let _ = self.within_frame(|| self.run_op(op));
                drop(self);
                drop(marker);
                return DeviceCompletion::new(drop);
            }
        };
        let completion = DeviceCompletion::for_op(Box::new(DeviceWork {
            part: Some(Part {
                returned,
                device: Ok(()),
                started,
                launched: false,
                work: Some(InFlight::counted(Arc::clone(&self.state))),
            }),
            replay: Arc::clone(&self),
            op,
        }));
        // As for a priority task: this reference goes while the thread is still marked.
        drop(self);
        drop(marker);
        completion
    }

    /// Sync GPU op `op`'s work was launched, behind `fence`: the GPU ops behind it go to their
    /// devices, their work ordered behind it.
    fn launched(self: &Arc<Self>, op: u32, fence: Fence) {
        let Some(launches) = &self.launches else {
            return;
        };
        launches.launched(op, fence);
        for edge in self.plan.deps.successors(op) {
            if edge.at_launch && (edge.sole || self.counts.release(edge.to)) {
                self.release(edge.to);
            }
        }
    }

    /// Sync GPU op `op`'s own part is done: it finishes now, or once the ops it was released
    /// behind at their launch are finished (`Launches`).
    fn part_done(self: &Arc<Self>, op: u32, part: Part) {
        match &self.launches {
            Some(launches) if !self.plan.deps.launch_preds[op as usize].is_empty() => {
                if launches.own_done(op, part) {
                    self.finish_held(launches, op);
                }
            }
            _ => self.finish_part(op, part),
        }
    }

    /// Finishes `op`, whose own part `launches` holds, from a queue one thread at a time: a
    /// finish passes to the ops it released at its launch, which may have done their part.
    fn finish_held(self: &Arc<Self>, launches: &Launches<Part>, op: u32) {
        run_queued(&self.finishing, [op], |op| {
            if let Some(part) = launches.take_part(op) {
                self.finish_part(op, part);
            }
        });
    }

    /// Finishes sync GPU op `op`: with its function's failure, else one passed on to it (it
    /// skipped, or it ran behind work that failed), else its device's.
    fn finish_part(self: &Arc<Self>, op: u32, part: Part) {
        let Part {
            returned,
            device,
            started,
            launched,
            work,
        } = part;
        // Passed on before its release (it skipped), or at its predecessors' finish.
        let passed_on = self.failure(op).cloned().or_else(|| {
            let launches = self.launches.as_ref()?;
            launches.passed_on(op).cloned()
        });
        let outcome = match (returned, passed_on) {
            (Err(own), _) => Err(own),
            (Ok(()), Some(passed_on)) => {
                // Not its own: stored, not logged.
                self.fail(op, &passed_on);
                let outcome = Err(passed_on);
                self.state
                    .profile(|| self.profiled_op(op), started, &outcome);
                return self.finished_gpu_op(op, launched, work);
            }
            (Ok(()), None) => {
                device.map_err(|error| self.op_failure(op, FailureCause::Error(Box::new(error))))
            }
        };
        self.state
            .profile(|| self.profiled_op(op), started, &outcome);
        if let Err(failure) = outcome {
            self.state.log_own_failure(&failure);
            self.fail(op, &failure);
        }
        self.finished_gpu_op(op, launched, work);
    }

    /// Sync GPU op `op` is finished (its failure stored): its dependents are released, those
    /// it released at its `launched` launch learn it, and it is counted.
    fn finished_gpu_op(self: &Arc<Self>, op: u32, launched: bool, work: Option<InFlight>) {
        let marker = TaskMarker::enter(self.state.id());
        self.release_dependents_with::<true>(op, None, launched);
        if self.plan.inline {
            self.run_inline(1);
        } else {
            self.count_finished(1);
        }
        // Counted as device work until the op is finished, as a pushed one (`run/device.rs`).
        drop(work);
        drop(marker);
    }

    /// The sync GPU op at the start of at-launch `edge` finished, passing `failure` on. If it
    /// `launched`, its launch counted the dependent down, which may have run since: the failure
    /// is kept aside (`Launches::pass_on`; its own failure wins, and if it is released only
    /// now, by another, it skips on it: `to_device`); else the dependent is counted down now,
    /// skipping on the failure. It is finished if this was what it waited for.
    #[cold]
    pub(super) fn launch_edge_done(
        self: &Arc<Self>,
        edge: Edge,
        failure: Option<&OpFailure>,
        launched: bool,
    ) {
        let to = edge.to;
        if let Some(failure) = failure {
            match &self.launches {
                Some(joins) if launched => joins.pass_on(to, failure),
                _ => self.fail(to, failure),
            }
        }
        if !launched && (edge.sole || self.counts.release(to)) {
            self.release(to);
        }
        if let Some(joins) = &self.launches
            && joins.upstream_done(to)
        {
            self.finish_held(joins, to);
        }
    }
}

/// A replayed GPU op handed to its device's executor (`Replay::to_device`): dropped unrun
/// (an executor that drops its task, or none to hand it to), it fails the op, so that the
/// replay still ends.
struct OnDevice {
    /// `None` once run.
    replay: Option<Arc<Replay>>,
    op: u32,
}

impl OnDevice {
    fn run(mut self, how: TaskRun) -> DeviceCompletion {
        match self.replay.take() {
            Some(replay) => replay.run_device_op(self.op, how),
            // `replay` is taken only here, and `run` consumes the task.
            None => DeviceCompletion::new(drop),
        }
    }

    /// Fails the op, unrun, with `cause`.
    fn fail(mut self, cause: FailureCause) {
        self.fail_unrun(cause);
    }

    fn fail_unrun(&mut self, cause: FailureCause) {
        if let Some(replay) = self.replay.take() {
            let _marker = TaskMarker::enter(replay.state.id());
            let failure = replay.op_failure(self.op, cause);
            replay.part_done(self.op, Part::unrun(Err(failure)));
        }
    }
}

impl Drop for OnDevice {
    fn drop(&mut self) {
        self.fail_unrun(FailureCause::Error(Box::new(DeviceError::Dropped)));
    }
}

/// A replayed sync GPU op whose function returned, as its executor reports on it: its launch
/// releases the GPU ops behind it (`Replay::launched`); its completion is its own part
/// (`Replay::part_done`). Dropped uncompleted (a panic on the way), it fails the op.
struct DeviceWork {
    replay: Arc<Replay>,
    op: u32,
    /// `None` once completed.
    part: Option<Part>,
}

impl DeviceOp for DeviceWork {
    fn launched(mut self: Box<Self>, fence: Fence) -> Box<dyn DeviceOp> {
        // An op whose function failed does not launch, as a pushed one (`run/device.rs`).
        if let Some(part) = &mut self.part
            && part.returned.is_ok()
            && !part.launched
        {
            part.launched = true;
            let marker = TaskMarker::enter(self.replay.state.id());
            self.replay.launched(self.op, fence);
            drop(marker);
        }
        self
    }

    fn function_failed(&self) -> bool {
        self.part
            .as_ref()
            .is_some_and(|part| part.returned.is_err())
    }

    fn complete(self: Box<Self>, device: Result<(), DeviceError>) {
        let marker = TaskMarker::enter(self.replay.state.id());
        let mut work = *self;
        work.report(device);
        // As for a priority task: this reference goes while the thread is still marked.
        drop(work);
        drop(marker);
    }
}

impl DeviceWork {
    /// The device is done with the op's work, with `device`: its own part is done.
    fn report(&mut self, device: Result<(), DeviceError>) {
        let Some(mut part) = self.part.take() else {
            return;
        };
        let marker = TaskMarker::enter(self.replay.state.id());
        // Noted at once, as for a pushed op: a lost device refuses the pushes after.
        let context = self.replay.plan.ops[self.op as usize].run.context;
        self.replay
            .state
            .workers
            .note_device_outcome(context, &device);
        part.device = device;
        self.replay.part_done(self.op, part);
        drop(marker);
    }
}

impl Drop for DeviceWork {
    fn drop(&mut self) {
        self.report(Err(DeviceError::Dropped));
    }
}
