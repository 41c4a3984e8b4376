//! The device-backend trait: how the engine reaches a device's workers without knowing the
//! device.
//!
//! The engine facade routes each ready op by its context: CPU ops to this crate's blocks, GPU ops
//! to the [`Executor`]s a [`DeviceBackend`] hands out, one for compute and one for copies per GPU
//! (MXNet's `gpu_normal_workers_` and `gpu_copy_workers_`). `depengine-cuda` implements
//! `DeviceBackend` with one stream per worker; an engine built without a backend rejects GPU ops
//! at push time.

use std::sync::Arc;

use crate::{PriorityBlock, WorkerBlock};

/// A unit of work handed to an executor: runs once, on whatever thread the executor picks.
pub type Task = Box<dyn FnOnce() + Send + 'static>;

/// Something that runs tasks: a block of workers.
pub trait Executor: Send + Sync {
    /// Runs `task`, eventually. `priority` orders tasks in executors backed by a priority queue
    /// (higher first); FIFO executors may ignore it. The executor must run every task it
    /// accepted, also when it shuts down.
    fn execute(&self, priority: i32, task: Task);
}

/// Why a backend could not provide an executor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The backend has no device with this id.
    #[error("{backend} has no device {device}")]
    NoSuchDevice {
        /// The backend's name.
        backend: String,
        /// The requested device id.
        device: u32,
    },
    /// The device exists but its workers could not start.
    #[error("{backend} could not start workers for device {device}: {message}")]
    Unavailable {
        /// The backend's name.
        backend: String,
        /// The requested device id.
        device: u32,
        /// What went wrong.
        message: String,
    },
}

/// A device backend (e.g. CUDA): hands out the executors of each of its devices.
///
/// The engine calls each method at most once per device id and caches the result, so a backend
/// may create workers lazily inside these calls.
pub trait DeviceBackend: Send + Sync {
    /// A short name for messages, e.g. `"cuda"`.
    fn name(&self) -> &str;

    /// The executor of compute ops on device `device`, running on `threads` workers.
    ///
    /// # Errors
    ///
    /// [`BackendError`] if the device does not exist or its workers cannot start.
    fn compute(&self, device: u32, threads: usize) -> Result<Arc<dyn Executor>, BackendError>;

    /// The executor of copy ops to and from device `device` (`CopyToGpu`, `CopyFromGpu`), on
    /// `threads` workers; MXNet serves these from a priority queue.
    ///
    /// # Errors
    ///
    /// As [`compute`](Self::compute).
    fn copy(&self, device: u32, threads: usize) -> Result<Arc<dyn Executor>, BackendError>;
}

impl Executor for WorkerBlock {
    fn execute(&self, _priority: i32, task: Task) {
        self.spawn(task);
    }
}

impl Executor for PriorityBlock {
    fn execute(&self, priority: i32, task: Task) {
        self.push(priority, task);
    }
}
