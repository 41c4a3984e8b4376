//! [`StreamExecutor`]: the workers of one kind (compute or copy) of one GPU, each with a
//! non-blocking stream of its own and a [`Completer`] for that stream.
//!
//! The workers are a `depengine-cpu` block: a [`WorkerBlock`] for compute ops (any order: the
//! engine dispatches an op only once its dependencies completed), a [`PriorityBlock`] for
//! copies, which `MXNet` serves highest priority first. A worker's start hook makes its
//! [`CudaRun`] current, so that the op it runs finds the stream (`CudaRun::current`). A
//! device op ([`Executor::execute_device`]) first makes the worker's stream wait for the fences
//! of the launched ops it was released behind (`fence.rs`), then runs its function on the
//! worker, which numbers the op on its stream (`tail.rs`), reports it launched with that place
//! as its fence (releasing the GPU ops behind it), and hands the op's completion to its stream's
//! completer, with an event recorded after it unless the launch released exactly one GPU op,
//! kept to run next here (at most `UNRECORDED_MAX` in a row); the op completes when an event
//! after it has fired (`completer.rs`).
//!
//! A GPU op released by that launch, on a worker of the same block, waits in the worker's slot
//! for its next task (`spawn_next`, `push_next`) instead of the block's queues, where an idle
//! worker would steal it: a chain of GPU ops stays on one stream, and its links need no wait
//! across streams. Only the first op released so is kept; the others of a branching graph
//! are queued for any worker, as are the GPU ops an op's function pushes (it may wait for
//! them, and nothing but this worker would run one kept here).

use std::cell::Cell;
use std::sync::Arc;

use cudarc::driver::CudaStream;
use depengine_cpu::{BlockOptions, PriorityBlock, WorkerBlock};
use depengine_device::{
    BackendError, DeviceCompletion, DeviceError, DeviceTask, Executor, Fence, Task,
};

use crate::completer::{AfterWork, Completer, device_error};
use crate::device::GpuDevice;
use crate::event::EventPool;
use crate::fence::{self, StreamFence};
use crate::graph;
use crate::host_wait;
use crate::run::CudaRun;
use crate::stray;
use crate::tail::{StreamTail, UNRECORDED_MAX};

thread_local! {
    /// While this GPU worker reports an op's launch (else `None`), the GPU ops the launch
    /// released so far: `(kept for this worker, queued)`. The first of this block is kept
    /// (`queue_device`); those pushed by an op's function are not: the function may wait for
    /// them, and no other worker would run one kept here.
    static REPORTING_LAUNCH: Cell<Option<(u32, u32)>> = const { Cell::new(None) };
}

/// Marks the calling worker as reporting a launch until dropped (also on unwind).
struct ReportingLaunch;

impl ReportingLaunch {
    fn enter() -> Self {
        REPORTING_LAUNCH.with(|released| released.set(Some((0, 0))));
        ReportingLaunch
    }

    /// Ends the report: whether the launch released one GPU op, kept to run next on this
    /// worker, and no other (which would wait for the op's fence on another stream).
    fn end(self) -> bool {
        let released = REPORTING_LAUNCH.with(Cell::get);
        drop(self);
        released == Some((1, 0))
    }
}

impl Drop for ReportingLaunch {
    fn drop(&mut self) {
        REPORTING_LAUNCH.with(|released| released.set(None));
    }
}

/// Which ops a [`StreamExecutor`] serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Compute ops, in any order.
    Compute,
    /// Copies to and from the device, highest priority first.
    Copy,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Compute => "compute",
            Kind::Copy => "copy",
        }
    }
}

/// The block of workers under a [`StreamExecutor`].
enum Block {
    /// Compute workers: the pool's queues, no order among ready ops.
    Compute(WorkerBlock),
    /// Copy workers: highest priority first.
    Copy(PriorityBlock),
}

/// See the module documentation.
pub(crate) struct StreamExecutor {
    /// Its drop runs every accepted task, each of which hands its op to its worker's
    /// completer, then joins the workers, whose exit hooks drop their `CudaRun`s: the last
    /// reference to each completer then goes, which completes what it holds and joins it.
    block: Block,
    /// Whether an op's stream waits for the fences it was released behind: always, but for
    /// the GPU tests that show the race the waits prevent
    /// (`CudaBackend::without_fence_waits`).
    fence_waits: bool,
}

impl StreamExecutor {
    /// Starts `threads` workers of `kind` on `device`, each with a new stream.
    pub(crate) fn start(
        device: &Arc<GpuDevice>,
        kind: Kind,
        threads: usize,
        fence_waits: bool,
    ) -> Result<Self, BackendError> {
        let name = format!("depengine-gpu{}-{}", device.ordinal(), kind.label());
        let unavailable = |message: String| BackendError::Unavailable {
            backend: "cuda".to_owned(),
            device: device.ordinal(),
            message,
        };
        // The streams are made here, so that a failure is the caller's error rather than a
        // worker's; a stream is not tied to a thread. Each worker has two: its own, and one on
        // which it records device graphs (`graph.rs`).
        let streams: Arc<[[Arc<CudaStream>; 2]]> = (0..threads)
            .map(|_| {
                Ok([
                    device.context().new_stream()?,
                    device.context().new_stream()?,
                ])
            })
            .collect::<Result<_, cudarc::driver::DriverError>>()
            .map_err(|error| unavailable(format!("creating a stream: {error}")))?;
        let tails: Arc<[Arc<StreamTail>]> = streams
            .iter()
            .map(|[stream, _]| {
                StreamTail::new(
                    Arc::clone(stream),
                    EventPool::new(Arc::clone(device.context())),
                )
            })
            .collect();
        let completers: Arc<[Arc<Completer>]> = (0..threads)
            .map(|index| {
                let tail = Arc::clone(&tails[index]);
                Completer::start(&format!("{name}-{index}"), tail).map(Arc::new)
            })
            .collect::<Result<_, _>>()
            .map_err(|error| unavailable(format!("starting a completion thread: {error}")))?;
        let options = {
            let device = Arc::clone(device);
            BlockOptions {
                on_start: Some(Box::new(move |index| {
                    CudaRun::new(
                        device.ordinal(),
                        index,
                        Arc::clone(device.context()),
                        streams[index].clone(),
                        Arc::clone(&completers[index]),
                        Arc::clone(&tails[index]),
                    )
                    .enter();
                })),
                on_exit: Some(Box::new(|_| CudaRun::leave())),
                pin_threads: false,
                max_spin: None,
            }
        };
        let block = match kind {
            Kind::Compute => WorkerBlock::with_options(&name, threads, options).map(Block::Compute),
            Kind::Copy => PriorityBlock::with_options(&name, threads, options).map(Block::Copy),
        }
        .map_err(|error| unavailable(error.to_string()))?;
        Ok(StreamExecutor { block, fence_waits })
    }

    fn queue(&self, priority: i32, task: Task) {
        match &self.block {
            Block::Compute(block) => block.execute(priority, task),
            Block::Copy(block) => block.execute(priority, task),
        }
    }

    /// Queues `task`, next on the calling thread if it is one of the block's workers reporting
    /// a launch (`REPORTING_LAUNCH`: a GPU op released by the launch of the op this worker
    /// ran): a chain stays on one stream, and pays no wait across streams, unless the graph
    /// branches (see the module documentation).
    fn queue_device(&self, priority: i32, task: Task) {
        let Some((was_kept, was_queued)) = REPORTING_LAUNCH.with(Cell::get) else {
            return self.queue(priority, task);
        };
        let count = |kept: u32, queued: u32| {
            REPORTING_LAUNCH.with(|released| {
                released.set(Some((was_kept + kept, was_queued + queued)));
            });
        };
        // Kept only by a worker of this block: released by a launch on another, it is queued.
        match &self.block {
            Block::Compute(block) if block.is_current() => {
                count(1, 0);
                block.spawn_next(task);
            }
            Block::Copy(block) if block.is_current() => {
                count(1, 0);
                block.push_next(priority, task);
            }
            _ => {
                count(0, 1);
                self.queue(priority, task);
            }
        }
    }
}

impl Executor for StreamExecutor {
    /// Runs `task` on a worker, with the worker's stream current.
    fn execute(&self, priority: i32, task: Task) {
        self.queue(priority, task);
    }

    fn execute_device(&self, task: DeviceTask) {
        let fence_waits = self.fence_waits;
        self.queue_device(
            task.priority(),
            Box::new(move || run_on_worker(task, fence_waits)),
        );
    }
}

/// Runs device task `task` on the calling GPU worker: its stream waits for the task's fences
/// (if `fence_waits`), its function (or recorded graph) launches its work, and the op is
/// reported launched and handed to the stream's completer ([`hand_over`]).
fn run_on_worker(task: DeviceTask, fence_waits: bool) {
    // Every worker of the block made its `CudaRun` current in its start hook, before its first
    // task: `None` would be a task run by another thread.
    let Some(run) = CudaRun::current() else {
        return task.run().complete(Err(DeviceError::Failed {
            backend: "cuda".to_owned(),
            message: "a GPU op ran on a thread that is no GPU worker".to_owned(),
        }));
    };
    // So that the function's cudarc calls return errors of their own.
    stray::report(run.context(), run.device());
    // An op released behind no launched op (most are) takes no lock of the order.
    let waited = if fence_waits && !task.fences().is_empty() {
        fence::wait_for(run.stream(), &mut run.order(), task.fences())
    } else {
        Ok(())
    };
    let (completion, recorded) = match task.recording().cloned() {
        Some(recording) => graph::run_recorded(&run, task, &recording),
        None => (task.run(), Ok(())),
    };
    let after = run.take_after_work();
    let failed = match (recorded, waited) {
        // Nothing of its graph was launched.
        (Err(error), _) => Some(error),
        // Its stream could not be ordered after the work it depends on: the work it launched
        // must end before it completes (as in `hand_over`).
        (Ok(()), Err(error)) => {
            let _ = host_wait::stream(run.stream());
            Some(error)
        }
        (Ok(()), Ok(())) => None,
    };
    match failed {
        Some(error) => {
            completion.complete(Err(device_error(error)));
            after.drop_all();
        }
        None => hand_over(&run, completion, after),
    }
}

/// Reports the op whose work `run`'s worker just launched as launched, at its place on the
/// stream (releasing the GPU ops behind it), then hands it, with the values to drop after it,
/// to the stream's completer: with an event recorded after it, unless the chain goes on on
/// this worker (the op kept next comes with one, or one after it does; the completer records
/// one if none comes: `tail.rs`).
fn hand_over(run: &CudaRun, mut completion: DeviceCompletion, after: AfterWork) {
    let tail = run.tail();
    let (seq, uncovered) = tail.launch();
    let reporting = ReportingLaunch::enter();
    completion.launched(Fence::new(StreamFence {
        tail: Arc::clone(tail),
        seq,
    }));
    let chain_goes_on = reporting.end();
    if chain_goes_on && uncovered + 1 < UNRECORDED_MAX {
        return run.completer().launched(None, completion, after);
    }
    match tail.covering(seq) {
        Ok(covering) => run
            .completer()
            .launched(Some(covering.event), completion, after),
        Err(refused) => {
            // No event to wait for: the work launched so far must end before the op completes
            // (and its buffers may be reused), so this worker waits for its stream, on this
            // failure path only; the op's outcome is that wait's.
            tracing::warn!(
                target: "depengine_cuda",
                error = %refused,
                "recording an event failed; the worker waited for its stream",
            );
            let waited = host_wait::stream(run.stream());
            completion.complete(waited.map_err(device_error));
            after.drop_all();
        }
    }
}
