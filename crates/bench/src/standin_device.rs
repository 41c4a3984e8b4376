//! [`StandinBackend`]: a device whose work is done when an op's function returns, for the
//! engine's own cost of a GPU op without a GPU (the `engine` group's `device_` workloads).
//!
//! Its one executor runs each device op on a single worker thread, as a GPU worker would, and
//! reports it launched (with a fence that orders nothing) and then complete, at once: the engine
//! walks the path of a launched GPU op (its fences registered, the ops behind it released at the
//! launch, its completion) while no driver call or completion thread adds to it.

use std::sync::Arc;

use depengine::{BackendError, DeviceBackend, DeviceTask, Executor, Fence, Task};
use depengine_pool::ThreadPool;

/// See the module documentation.
pub(crate) struct StandinBackend {
    worker: Arc<StandinExecutor>,
}

impl StandinBackend {
    /// A stand-in device 0 with one worker thread.
    pub(crate) fn new() -> Result<Self, String> {
        let pool = ThreadPool::new(1).map_err(|e| e.to_string())?;
        Ok(StandinBackend {
            worker: Arc::new(StandinExecutor(pool)),
        })
    }
}

impl DeviceBackend for StandinBackend {
    fn name(&self) -> &'static str {
        "stand-in"
    }

    fn compute(&self, device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        if device != 0 {
            return Err(BackendError::NoSuchDevice {
                backend: self.name().to_owned(),
                device,
            });
        }
        Ok(Arc::clone(&self.worker) as Arc<dyn Executor>)
    }

    fn copy(&self, device: u32, threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        self.compute(device, threads)
    }
}

/// The stand-in device's worker.
struct StandinExecutor(ThreadPool);

impl Executor for StandinExecutor {
    fn execute(&self, _priority: i32, task: Task) {
        self.0.spawn(task);
    }

    fn execute_device(&self, task: DeviceTask) {
        self.0.spawn(move || {
            let mut completion = task.run();
            completion.launched(Fence::new(()));
            completion.complete(Ok(()));
        });
    }
}
