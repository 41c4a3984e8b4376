//! `depengine-device`: the seam between the engine and the workers that run its ops, so that
//! backends implement it without depending on each other or on the facade.
//!
//! ```text
//!                    depengine          the facade: API, engine kinds, config, failure policy
//!          ┌─────────────┴─────────────┬ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ┐ feature `cuda`
//!          │                     depengine-cpu ◄──────── depengine-cuda
//!          │                   ┌───────┴───────┐              │
//!          │                   │               └──────┬───────┘
//!   depengine-graph     depengine-pool         depengine-device  ◄── this crate
//!   ═══════════════════════════════════════
//!   depengine-sync: std or loom primitives, poison-ignoring locks, padding
//! ```
//!
//! Lines lead down to dependencies. `depengine-graph` and `depengine-pool` are siblings that only
//! the facade joins; the facade also uses `depengine-pool` and `depengine-device` directly.
//! `depengine-sync` is under every crate that synchronizes; this crate, a set of traits, has no
//! dependencies of ours.
//!
//! The engine facade routes each ready op by its context to an [`Executor`]: CPU ops to the
//! blocks of `depengine-cpu` (which implements `Executor` for its `WorkerBlock` and
//! `PriorityBlock`), GPU ops to the executors a [`DeviceBackend`] hands out, one for compute and
//! one for copies per device (MXNet's `gpu_normal_workers_` and `gpu_copy_workers_`).
//! `depengine-cuda` implements `DeviceBackend` with one stream per worker; an engine built
//! without a backend rejects GPU ops at push time. A device op reaches its executor through
//! [`Executor::execute_device`]: its function starts the work ([`DeviceTask::run`]) and gives
//! back the [`DeviceCompletion`] that the executor completes once the device has done that
//! work, so that the op's dependents are released then, and the engine makes no worker wait
//! for the device.
//!
//! ```
//! use std::sync::{Arc, mpsc};
//!
//! use depengine_device::{BackendError, DeviceBackend, Executor, Task};
//!
//! /// Runs each task on a thread of its own.
//! struct ThreadPerTask;
//!
//! impl Executor for ThreadPerTask {
//!     fn execute(&self, _priority: i32, task: Task) {
//!         std::thread::spawn(task);
//!     }
//! }
//!
//! /// A backend with a single device, 0, whose compute and copy ops share one executor.
//! struct OneDevice(Arc<ThreadPerTask>);
//!
//! impl OneDevice {
//!     fn executor(&self, device: u32) -> Result<Arc<dyn Executor>, BackendError> {
//!         if device == 0 {
//!             Ok(self.0.clone())
//!         } else {
//!             Err(BackendError::NoSuchDevice { backend: self.name().to_owned(), device })
//!         }
//!     }
//! }
//!
//! impl DeviceBackend for OneDevice {
//!     fn name(&self) -> &str {
//!         "one-device"
//!     }
//!     fn compute(&self, device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
//!         self.executor(device)
//!     }
//!     fn copy(&self, device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
//!         self.executor(device)
//!     }
//! }
//!
//! let backend = OneDevice(Arc::new(ThreadPerTask));
//! let (tx, rx) = mpsc::channel();
//! backend.compute(0, 1)?.execute(0, Box::new(move || tx.send(42).unwrap()));
//! assert_eq!(rx.recv().unwrap(), 42);
//! assert!(matches!(backend.copy(1, 1), Err(BackendError::NoSuchDevice { device: 1, .. })));
//! # Ok::<(), BackendError>(())
//! ```

#![forbid(unsafe_code)]
#![allow(
    clippy::doc_markdown,
    reason = "the docs name MXNet and its members, which are not items of this crate"
)]

use std::sync::Arc;

/// A unit of work handed to an executor: runs once, on whatever thread the executor picks.
///
/// ```
/// use depengine_device::Task;
///
/// let task: Task = Box::new(|| println!("ran"));
/// task();
/// ```
pub type Task = Box<dyn FnOnce() + Send + 'static>;

/// Something that runs tasks: a block of workers, a device's streams.
///
/// ```
/// use std::sync::Mutex;
///
/// use depengine_device::{Executor, Task};
///
/// /// Queues tasks, highest priority first, until `run_all` runs them on the caller's thread.
/// #[derive(Default)]
/// struct Deferred(Mutex<Vec<(i32, Task)>>);
///
/// impl Executor for Deferred {
///     fn execute(&self, priority: i32, task: Task) {
///         self.0.lock().unwrap().push((priority, task));
///     }
/// }
///
/// impl Deferred {
///     fn run_all(&self) {
///         let mut tasks = std::mem::take(&mut *self.0.lock().unwrap());
///         tasks.sort_by_key(|(priority, _)| std::cmp::Reverse(*priority));
///         for (_, task) in tasks {
///             task();
///         }
///     }
/// }
///
/// let order = std::sync::Arc::new(Mutex::new(Vec::new()));
/// let executor = Deferred::default();
/// for priority in [1, 3, 2] {
///     let order = order.clone();
///     executor.execute(priority, Box::new(move || order.lock().unwrap().push(priority)));
/// }
/// executor.run_all();
/// assert_eq!(*order.lock().unwrap(), [3, 2, 1]);
/// ```
pub trait Executor: Send + Sync {
    /// Runs `task`, eventually. `priority` orders tasks in executors backed by a priority queue
    /// (higher first); FIFO executors may ignore it. The executor must run every task it
    /// accepted, also when it shuts down.
    fn execute(&self, priority: i32, task: Task);

    /// Runs a device op: [`DeviceTask::run`] on one of the executor's workers (which starts
    /// the op's work on the device, a stream's launches for instance), then completes the
    /// [`DeviceCompletion`] that `run` returned once that work is done, with its outcome. The
    /// executor must run every task it accepted and complete every completion, also when it
    /// shuts down.
    ///
    /// The default runs the task as [`execute`](Self::execute) does and completes it as soon
    /// as `run` returns: right for an executor whose work is done when the function returns
    /// (CPU threads). A device backend overrides it to complete when the device is done.
    fn execute_device(&self, task: DeviceTask) {
        let priority = task.priority();
        self.execute(priority, Box::new(move || task.run().complete(Ok(()))));
    }
}

/// A device op as its executor receives it ([`Executor::execute_device`]): a priority, and a
/// function that starts the op's work and returns the completion to call once that work is
/// done. Only running the task gives the completion, so no executor can complete an op before
/// it ran.
///
/// ```
/// use std::sync::mpsc;
///
/// use depengine_device::{DeviceCompletion, DeviceTask};
///
/// let (tx, rx) = mpsc::channel();
/// let task = DeviceTask::new(3, move || {
///     // Start the work (a kernel launch), then say how to finish the op.
///     DeviceCompletion::new(move |outcome| tx.send(outcome.is_ok()).unwrap())
/// });
/// assert_eq!(task.priority(), 3);
/// let completion = task.run();
/// // ... once the device has done the work:
/// completion.complete(Ok(()));
/// assert!(rx.recv().unwrap());
/// ```
pub struct DeviceTask {
    priority: i32,
    run: Box<dyn FnOnce() -> DeviceCompletion + Send + 'static>,
}

impl DeviceTask {
    /// A task of `priority` (higher first, in executors that order by it) that runs `run`.
    pub fn new(priority: i32, run: impl FnOnce() -> DeviceCompletion + Send + 'static) -> Self {
        DeviceTask {
            priority,
            run: Box::new(run),
        }
    }

    /// The task's priority.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// Runs the task's function on the calling thread (a worker of the executor, with its
    /// device resources current): it starts the op's work, and the completion it returns
    /// must be completed once that work is done.
    pub fn run(self) -> DeviceCompletion {
        (self.run)()
    }
}

impl std::fmt::Debug for DeviceTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTask")
            .field("priority", &self.priority)
            .finish_non_exhaustive()
    }
}

/// How an executor finishes a device op once its work on the device is done
/// ([`complete`](Self::complete)), with the device's outcome. Dropping it uncompleted
/// completes it with [`DeviceError::Dropped`], so an op is never left pending by an executor
/// that loses it (a worker that unwinds, say).
///
/// ```
/// use std::sync::mpsc;
///
/// use depengine_device::{DeviceCompletion, DeviceError};
///
/// let (tx, rx) = mpsc::channel();
/// drop(DeviceCompletion::new(move |outcome| tx.send(outcome).unwrap()));
/// assert_eq!(rx.recv().unwrap(), Err(DeviceError::Dropped));
/// ```
#[must_use = "an op completes only when its completion is completed (or dropped, as a failure)"]
pub struct DeviceCompletion {
    finish: Option<Finish>,
}

/// What a [`DeviceCompletion`] calls.
type Finish = Box<dyn FnOnce(Result<(), DeviceError>) + Send + 'static>;

impl DeviceCompletion {
    /// A completion that calls `finish` with the outcome, once.
    pub fn new(finish: impl FnOnce(Result<(), DeviceError>) + Send + 'static) -> Self {
        DeviceCompletion {
            finish: Some(Box::new(finish)),
        }
    }

    /// Finishes the op with `outcome`: `Ok` if its work on the device succeeded.
    pub fn complete(mut self, outcome: Result<(), DeviceError>) {
        if let Some(finish) = self.finish.take() {
            finish(outcome);
        }
    }
}

impl Drop for DeviceCompletion {
    fn drop(&mut self) {
        if let Some(finish) = self.finish.take() {
            finish(Err(DeviceError::Dropped));
        }
    }
}

impl std::fmt::Debug for DeviceCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCompletion")
            .field("completed", &self.finish.is_none())
            .finish()
    }
}

/// Why a device op's work on the device failed, as its executor reports it through
/// [`DeviceCompletion::complete`].
///
/// ```
/// use depengine_device::DeviceError;
///
/// let error = DeviceError::Failed {
///     backend: "cuda".to_owned(),
///     message: "CUDA_ERROR_ILLEGAL_ADDRESS".to_owned(),
/// };
/// assert_eq!(error.to_string(), "cuda: CUDA_ERROR_ILLEGAL_ADDRESS");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The device reported an error for the op's work.
    #[error("{backend}: {message}")]
    Failed {
        /// The backend's name.
        backend: String,
        /// The device's error, named as the device names it.
        message: String,
    },
    /// The executor dropped the op's completion without completing it.
    #[error("the device executor dropped the op without completing it")]
    Dropped,
}

/// Why a backend could not provide an executor.
///
/// ```
/// use depengine_device::BackendError;
///
/// let error = BackendError::NoSuchDevice { backend: "cuda".to_owned(), device: 3 };
/// assert_eq!(error.to_string(), "cuda has no device 3");
/// ```
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
/// may create workers lazily inside these calls. The crate documentation has an example.
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
