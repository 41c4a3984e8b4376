//! [`StreamExecutor`]: the workers of one kind (compute or copy) of one GPU, each with a
//! non-blocking stream of its own and a [`Completer`] for that stream.
//!
//! The workers are a `depengine-cpu` block: a [`WorkerBlock`] for compute ops (any order: the
//! engine dispatches an op only once its dependencies completed), a [`PriorityBlock`] for
//! copies, which `MXNet` serves highest priority first. A worker's start hook makes its
//! [`CudaRun`] current, so that the op it runs finds the stream (`CudaRun::current`). A
//! device op ([`Executor::execute_device`]) runs its function on a worker, which then records
//! a blocking-sync event on its stream and hands the event and the op's completion to its
//! stream's completer; the op completes when the event has fired (`completer.rs`).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cudarc::driver::sys::CUevent_flags;
use depengine_cpu::{BlockOptions, PriorityBlock, WorkerBlock};
use depengine_device::{BackendError, DeviceTask, Executor, Task};

use crate::completer::{Completer, device_error};
use crate::device::GpuDevice;
use crate::run::CudaRun;

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
    Fifo(WorkerBlock),
    Priority(PriorityBlock),
}

/// See the module documentation.
pub(crate) struct StreamExecutor {
    // Field order is drop order: the block first (its drop runs every accepted task, each of
    // which hands its op to a completer), then the completers (each completes what it holds).
    block: Block,
    /// One per worker, worker `i`'s at `completers[i]`.
    completers: Arc<[Completer]>,
}

impl StreamExecutor {
    /// Starts `threads` workers of `kind` on `device`, each with a new stream.
    pub(crate) fn start(
        device: &Arc<GpuDevice>,
        kind: Kind,
        threads: usize,
    ) -> Result<Self, BackendError> {
        let name = format!("depengine-gpu{}-{}", device.ordinal(), kind.label());
        let unavailable = |message: String| BackendError::Unavailable {
            backend: "cuda".to_owned(),
            device: device.ordinal(),
            message,
        };
        // The streams are made here, so that a failure is the caller's error rather than a
        // worker's; a stream is not tied to a thread.
        let streams: Arc<[Arc<CudaStream>]> = (0..threads)
            .map(|_| device.context().new_stream())
            .collect::<Result<_, _>>()
            .map_err(|error| unavailable(format!("creating a stream: {error}")))?;
        let completers: Arc<[Completer]> = (0..threads)
            .map(|index| Completer::start(&format!("{name}-{index}")))
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
                        Arc::clone(&streams[index]),
                    )
                    .enter();
                })),
                on_exit: Some(Box::new(|_| CudaRun::leave())),
                pin_threads: false,
            }
        };
        let block = match kind {
            Kind::Compute => WorkerBlock::with_options(&name, threads, options).map(Block::Fifo),
            Kind::Copy => PriorityBlock::with_options(&name, threads, options).map(Block::Priority),
        }
        .map_err(|error| unavailable(error.to_string()))?;
        Ok(StreamExecutor { block, completers })
    }

    fn queue(&self, priority: i32, task: Task) {
        match &self.block {
            Block::Fifo(block) => block.execute(priority, task),
            Block::Priority(block) => block.execute(priority, task),
        }
    }
}

impl Executor for StreamExecutor {
    /// Runs `task` on a worker, with its stream current, and counts it done when it returns.
    fn execute(&self, priority: i32, task: Task) {
        self.queue(priority, task);
    }

    fn execute_device(&self, task: DeviceTask) {
        let completers = Arc::clone(&self.completers);
        self.queue(
            task.priority(),
            Box::new(move || {
                let completion = task.run();
                // Every worker of this block made its `CudaRun` current in its start hook,
                // before its first task: `None` would be a task run by another thread.
                let Some(run) = CudaRun::current() else {
                    return completion.complete(Err(depengine_device::DeviceError::Failed {
                        backend: "cuda".to_owned(),
                        message: "a GPU op ran on a thread that is no GPU worker".to_owned(),
                    }));
                };
                match run
                    .stream()
                    .record_event(Some(CUevent_flags::CU_EVENT_BLOCKING_SYNC))
                {
                    Ok(event) => completers[run.worker()].launched(event, completion),
                    Err(error) => completion.complete(Err(device_error(error))),
                }
            }),
        );
    }
}
