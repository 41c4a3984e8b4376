//! `depengine-device`: the seam between the engine and the workers that run its ops, so that
//! backends implement it without depending on each other or on the facade.
//!
//! A set of traits with no dependencies of ours; the crate graph: `docs/architecture.md`.
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
//! for the device. An executor that can order device work behind a point in other work (a
//! CUDA stream waiting for an event) reports, before that, that the op's work was launched,
//! with a [`Fence`] after it ([`DeviceCompletion::launched`]): the engine then releases the
//! device ops behind it at once, each with the fences it must start after
//! ([`DeviceTask::fences`]), and holds the CPU ops behind it until the completion. A recorded
//! task ([`DeviceTask::recorded`]) lets an executor that can record device work (a CUDA graph)
//! keep what its functions launched in a [`Recording`] and launch that again for the later tasks
//! of the same recording, calling no function.
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

use std::any::Any;
use std::sync::Arc;

use smallvec::SmallVec;

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
    /// An executor that can order device work behind a point in other work (a CUDA stream
    /// waiting for an event) reports the op's launch before its completion
    /// ([`DeviceCompletion::launched`], with a [`Fence`] after the op's work), and makes the
    /// work of each task start after the task's [`fences`](DeviceTask::fences).
    ///
    /// The default runs the task as [`execute`](Self::execute) does and completes it as soon
    /// as `run` returns: right for an executor whose work is done when the function returns
    /// (CPU threads), which reports no launches and so gets no fences. A device backend
    /// overrides it to complete when the device is done.
    fn execute_device(&self, task: DeviceTask) {
        let priority = task.priority();
        self.execute(priority, Box::new(move || task.run().complete(Ok(()))));
    }
}

/// A point in a device's work that later device work can be ordered behind (a CUDA event
/// recorded on a stream after an op's launches). An executor reports one when a device op's
/// work was launched ([`DeviceCompletion::launched`]), and the engine hands it to the device
/// ops it releases behind that op ([`DeviceTask::fences`]), whose executor makes their work
/// start after it. Opaque to the engine: a backend makes its own fences and reads them back.
///
/// ```
/// use depengine_device::Fence;
///
/// /// A backend's fence: the stream and the position in it.
/// struct StreamPoint {
///     stream: u32,
///     position: u64,
/// }
///
/// let fence = Fence::new(StreamPoint { stream: 1, position: 7 });
/// let point = fence.downcast_ref::<StreamPoint>().expect("one of ours");
/// assert_eq!((point.stream, point.position), (1, 7));
/// assert!(fence.downcast_ref::<u32>().is_none());
/// ```
#[derive(Clone)]
pub struct Fence(Arc<dyn Any + Send + Sync>);

impl Fence {
    /// A fence that carries `point`, the backend's own description of it.
    pub fn new(point: impl Any + Send + Sync) -> Self {
        Fence(Arc::new(point))
    }

    /// The backend's description, if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence").finish_non_exhaustive()
    }
}

/// The fences a device op's work starts after ([`DeviceTask::after`]): inline for the few an
/// op is usually released behind, so that a chain allocates none per op.
pub type Fences = SmallVec<[Fence; 2]>;

/// A device op as its executor receives it ([`Executor::execute_device`]): a priority, the
/// fences its work must start after, and a function that starts the op's work and returns the
/// completion to call once that work is done. Only running the task gives the completion, so
/// no executor can complete an op before it ran.
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
    fences: Fences,
    /// Where an executor that records device work keeps this task's (`recorded`).
    recording: Option<Arc<Recording>>,
    run: Box<dyn FnOnce(TaskRun) -> DeviceCompletion + Send + 'static>,
}

/// How a [`DeviceTask`]'s function is run: called, or (a recorded task whose work its executor
/// recorded before) left uncalled while the executor launches that recorded work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskRun {
    /// Its functions are called, and launch its work: [`DeviceTask::run`].
    Call,
    /// Its functions are not called: [`DeviceTask::launch_recorded`].
    LaunchRecorded,
}

/// Where an executor keeps the device work of a recorded [`DeviceTask`] (a CUDA graph of the
/// launches its functions made), so that a later task of the same [`Recording`] launches that
/// work again instead of calling its functions ([`DeviceTask::launch_recorded`]). Opaque to the engine,
/// which hands the same recording to every run of the same work: a backend stores its own
/// type, set once.
///
/// ```
/// use depengine_device::Recording;
///
/// /// A backend's recorded work: here, the names of the kernels launched.
/// struct Launches(Vec<&'static str>);
///
/// let recording = Recording::new();
/// assert!(recording.get::<Launches>().is_none());
/// assert!(recording.set(Launches(vec!["scale", "add"])).is_ok());
/// // Set once: a second recording of the same work is handed back.
/// assert!(recording.set(Launches(vec!["other"])).is_err());
/// assert_eq!(recording.get::<Launches>().unwrap().0, ["scale", "add"]);
/// assert!(recording.get::<u32>().is_none());
/// ```
#[derive(Default)]
pub struct Recording(std::sync::OnceLock<Box<dyn Any + Send + Sync>>);

impl Recording {
    /// An empty recording.
    pub fn new() -> Self {
        Self::default()
    }

    /// The recorded work, if some was recorded and it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.get()?.downcast_ref()
    }

    /// Keeps `work` as the recorded work, unless some was kept already.
    ///
    /// # Errors
    ///
    /// `work`, given back, when the recording holds work already.
    pub fn set<T: Any + Send + Sync>(&self, work: T) -> Result<(), T> {
        let mut work = Some(work);
        let _ = self
            .0
            .get_or_init(|| Box::new(work.take().expect("taken once")));
        work.map_or(Ok(()), Err)
    }
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("recorded", &self.0.get().is_some())
            .finish()
    }
}

impl DeviceTask {
    /// A task of `priority` (higher first, in executors that order by it) that runs `run`.
    pub fn new(priority: i32, run: impl FnOnce() -> DeviceCompletion + Send + 'static) -> Self {
        DeviceTask {
            priority,
            fences: Fences::new(),
            recording: None,
            run: Box::new(move |_| run()),
        }
    }

    /// A task whose device work may be recorded: an executor that records work calls its
    /// functions (`run` with [`TaskRun::Call`]) until a run succeeds in keeping the work they
    /// launched in `recording`, and for each later task of the same `recording` launches that
    /// work again and calls `run` with [`TaskRun::LaunchRecorded`], whose functions then do not run.
    /// An executor that records nothing calls every task's functions ([`run`](Self::run)).
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use depengine_device::{DeviceCompletion, DeviceTask, Recording, TaskRun};
    ///
    /// let recording = Arc::new(Recording::new());
    /// let task = |expected: TaskRun| {
    ///     DeviceTask::recorded(0, Arc::clone(&recording), move |how| {
    ///         assert_eq!(how, expected); // `Call`: launch the work; else launch nothing
    ///         DeviceCompletion::new(drop)
    ///     })
    /// };
    /// // The first run calls the functions, and its executor keeps what they launched.
    /// let first = task(TaskRun::Call);
    /// assert!(first.recording().is_some_and(|r| r.get::<&str>().is_none()));
    /// first.run().complete(Ok(()));
    /// recording.set("the launches").unwrap();
    /// // A later one finds them recorded, launches them, and calls no function.
    /// let later = task(TaskRun::LaunchRecorded);
    /// assert_eq!(later.recording().unwrap().get::<&str>(), Some(&"the launches"));
    /// later.launch_recorded().complete(Ok(()));
    /// ```
    pub fn recorded(
        priority: i32,
        recording: Arc<Recording>,
        run: impl FnOnce(TaskRun) -> DeviceCompletion + Send + 'static,
    ) -> Self {
        DeviceTask {
            priority,
            fences: Fences::new(),
            recording: Some(recording),
            run: Box::new(run),
        }
    }

    /// The same task, whose work must start after `fences` (the launched device ops it was
    /// released behind).
    #[must_use]
    pub fn after(mut self, fences: impl Into<Fences>) -> Self {
        self.fences = fences.into();
        self
    }

    /// The task's priority.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// The fences the task's work must start after: its executor orders the work it launches
    /// behind each of them (a CUDA stream waits for each event not recorded on it), or waits
    /// until each is passed. Fences come from the launches that executors report
    /// ([`DeviceCompletion::launched`]): a backend whose executors report none hands its tasks
    /// none, and one whose executors do must honour them in every executor.
    pub fn fences(&self) -> &[Fence] {
        &self.fences
    }

    /// Runs the task's function on the calling thread (a worker of the executor, with its
    /// device resources current): it starts the op's work, and the completion it returns
    /// must be completed once that work is done.
    pub fn run(self) -> DeviceCompletion {
        (self.run)(TaskRun::Call)
    }

    /// Where the task's device work is recorded, if it is a recorded task
    /// ([`recorded`](Self::recorded)).
    pub fn recording(&self) -> Option<&Arc<Recording>> {
        self.recording.as_ref()
    }

    /// The completion of a recorded task whose work its executor launches from its
    /// [`recording`](Self::recording) instead: the task's functions are not called (a task that
    /// is not recorded has no work recorded, and runs as [`run`](Self::run)).
    pub fn launch_recorded(self) -> DeviceCompletion {
        let how = if self.recording.is_some() {
            TaskRun::LaunchRecorded
        } else {
            TaskRun::Call
        };
        (self.run)(how)
    }
}

impl std::fmt::Debug for DeviceTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTask")
            .field("priority", &self.priority)
            .field("fences", &self.fences.len())
            .field("recorded", &self.recording.is_some())
            .finish_non_exhaustive()
    }
}

/// The engine's side of a device op whose function ran, as its executor reports to it through
/// a [`DeviceCompletion`]: first, optionally, that the op's work was launched, then that it is
/// done.
///
/// ```
/// use std::sync::mpsc::{self, Sender};
///
/// use depengine_device::{DeviceCompletion, DeviceError, DeviceOp, Fence};
///
/// /// Reports each step of the op.
/// struct Reporting(Sender<&'static str>);
///
/// impl DeviceOp for Reporting {
///     fn launched(self: Box<Self>, _fence: Fence) -> Box<dyn DeviceOp> {
///         self.0.send("launched").unwrap();
///         self
///     }
///     fn complete(self: Box<Self>, outcome: Result<(), DeviceError>) {
///         self.0.send(if outcome.is_ok() { "done" } else { "failed" }).unwrap();
///     }
/// }
///
/// let (tx, rx) = mpsc::channel();
/// let mut completion = DeviceCompletion::for_op(Box::new(Reporting(tx)));
/// completion.launched(Fence::new(()));
/// completion.complete(Ok(()));
/// assert_eq!(rx.iter().collect::<Vec<_>>(), ["launched", "done"]);
/// ```
pub trait DeviceOp: Send + 'static {
    /// The op's work was launched, and device work ordered behind `fence` would start only
    /// after it. Called at most once, before [`complete`](Self::complete), which goes to the
    /// op this returns (`self`, or what the op is once launched).
    fn launched(self: Box<Self>, fence: Fence) -> Box<dyn DeviceOp>;

    /// The op's work is done, with the device's outcome: `Ok` if it succeeded.
    fn complete(self: Box<Self>, outcome: Result<(), DeviceError>);

    /// Whether the op's function failed, so that the work it launched is not the op's work: an
    /// executor recording it keeps none of it. Ops that never fail so keep the default.
    fn function_failed(&self) -> bool {
        false
    }
}

/// A [`DeviceOp`] that only completes: a function called with the outcome.
struct CompleteOnly<F>(F);

impl<F: FnOnce(Result<(), DeviceError>) + Send + 'static> DeviceOp for CompleteOnly<F> {
    fn launched(self: Box<Self>, _fence: Fence) -> Box<dyn DeviceOp> {
        self
    }

    fn complete(self: Box<Self>, outcome: Result<(), DeviceError>) {
        (self.0)(outcome);
    }
}

/// How an executor finishes a device op: optionally, [`launched`](Self::launched) once the
/// op's work was launched (an executor that can order device work behind a [`Fence`]); then
/// [`complete`](Self::complete) once the work is done, with the device's outcome. Dropping it
/// uncompleted completes it with [`DeviceError::Dropped`], so an op is never left pending by an
/// executor that loses it (a worker that unwinds, say).
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
    /// `Some` until completed.
    op: Option<Box<dyn DeviceOp>>,
}

impl DeviceCompletion {
    /// A completion that calls `finish` with the outcome, once, and ignores a launch.
    pub fn new(finish: impl FnOnce(Result<(), DeviceError>) + Send + 'static) -> Self {
        Self::for_op(Box::new(CompleteOnly(finish)))
    }

    /// A completion that reports to `op`.
    pub fn for_op(op: Box<dyn DeviceOp>) -> Self {
        DeviceCompletion { op: Some(op) }
    }

    /// Reports that the op's work was launched and that device work ordered behind `fence`
    /// starts only after it: the engine releases the device ops behind this one now, and the
    /// others once it completes. At most once, before [`complete`](Self::complete); an executor
    /// that cannot order work behind a fence never calls it.
    pub fn launched(&mut self, fence: Fence) {
        if let Some(op) = self.op.take() {
            self.op = Some(op.launched(fence));
        }
    }

    /// Whether the op's function failed ([`DeviceOp::function_failed`]): the work it launched
    /// is not to be recorded.
    pub fn function_failed(&self) -> bool {
        self.op.as_ref().is_some_and(|op| op.function_failed())
    }

    /// Finishes the op with `outcome`: `Ok` if its work on the device succeeded.
    pub fn complete(mut self, outcome: Result<(), DeviceError>) {
        if let Some(op) = self.op.take() {
            op.complete(outcome);
        }
    }
}

impl Drop for DeviceCompletion {
    fn drop(&mut self) {
        if let Some(op) = self.op.take() {
            op.complete(Err(DeviceError::Dropped));
        }
    }
}

impl std::fmt::Debug for DeviceCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCompletion")
            .field("completed", &self.op.is_none())
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
    /// The op's work hit a fault that leaves the device unusable for every later op (CUDA's
    /// sticky errors, such as an illegal address): the engine refuses GPU ops on that device
    /// from then on, naming this first fault, while its other work goes on.
    #[error("{backend}: the device is lost: {message}")]
    Lost {
        /// The backend's name.
        backend: String,
        /// The device's error, named as the device names it.
        message: String,
    },
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
///
/// # Examples
///
/// A host-only stand-in for a GPU backend, for tests: two devices whose executors run each task
/// at once on the caller's thread.
///
/// ```
/// use std::sync::{Arc, mpsc};
///
/// use depengine_device::{BackendError, DeviceBackend, DeviceCompletion, DeviceTask};
/// use depengine_device::{Executor, Task};
///
/// struct Inline;
///
/// impl Executor for Inline {
///     fn execute(&self, _priority: i32, task: Task) {
///         task();
///     }
/// }
///
/// struct InlineBackend;
///
/// impl DeviceBackend for InlineBackend {
///     fn name(&self) -> &str {
///         "inline"
///     }
///     fn compute(&self, device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
///         if device < 2 {
///             Ok(Arc::new(Inline))
///         } else {
///             Err(BackendError::NoSuchDevice { backend: self.name().to_owned(), device })
///         }
///     }
///     fn copy(&self, device: u32, threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
///         self.compute(device, threads)
///     }
/// }
///
/// let backend: Arc<dyn DeviceBackend> = Arc::new(InlineBackend);
/// let (tx, rx) = mpsc::channel();
/// let op = DeviceTask::new(0, move || DeviceCompletion::new(move |done| tx.send(done).unwrap()));
/// backend.compute(1, 1)?.execute_device(op);
/// // Run inline, and completed by `execute_device`'s default as soon as it returned.
/// assert_eq!(rx.try_recv(), Ok(Ok(())));
/// assert!(matches!(backend.copy(2, 1), Err(BackendError::NoSuchDevice { device: 2, .. })));
/// # Ok::<(), BackendError>(())
/// ```
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
