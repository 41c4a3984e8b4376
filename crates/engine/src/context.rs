//! [`Context`]: where an op runs, and [`FnProperty`]: what kind of op it is.

use std::fmt;

/// The kind of device a [`Context`] names.
///
/// # Examples
///
/// ```
/// use depengine::{Context, DeviceType};
///
/// let staging = Context::cpu_pinned(1);
/// assert_eq!(staging.device_type(), DeviceType::CpuPinned);
/// assert_eq!(Context::gpu(1).device_type(), DeviceType::Gpu);
///
/// // Where an op's data lives: pinned memory is host memory, run by CPU workers.
/// let on_host = |context: Context| match context.device_type() {
///     DeviceType::Cpu | DeviceType::CpuPinned => true,
///     DeviceType::Gpu => false,
/// };
/// assert!(on_host(staging) && !staging.is_gpu());
/// assert!(on_host(Context::default()) && !on_host(Context::gpu(0)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// Host memory, CPU workers.
    Cpu,
    /// Page-locked host memory (for transfers with GPU `id`); runs on CPU workers.
    CpuPinned,
    /// A GPU; runs on the workers of the engine's device backend.
    Gpu,
}

/// Where an op runs: a device type and a device id (MXNet's `Context`).
///
/// # Examples
///
/// ```
/// use depengine::{Context, Engine, EngineConfig, EngineError};
///
/// let gpu = Context::gpu(1);
/// assert!(gpu.is_gpu() && !Context::cpu_pinned(1).is_gpu());
/// assert_eq!((gpu.device_id(), gpu.to_string()), (1, "gpu(1)".to_owned()));
/// assert_eq!(Context::default(), Context::cpu(0));
///
/// // An op runs in the context it is pushed on; a GPU context needs a device backend.
/// let mut config = EngineConfig::default().cpu_worker_threads(1);
/// config.device_backend = None;
/// let engine = Engine::new(config)?;
/// let refused = engine.op("kernel").on(gpu).push_sync(|_| {});
/// assert!(matches!(refused, Err(EngineError::NoDeviceBackend { context, .. }) if context == gpu));
/// # Ok::<(), EngineError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Context {
    device: DeviceType,
    id: u32,
}

impl Context {
    /// CPU device `id` (each CPU device id gets its own worker block in `ThreadedPerDevice`).
    pub const fn cpu(id: u32) -> Self {
        Context {
            device: DeviceType::Cpu,
            id,
        }
    }

    /// Pinned host memory associated with GPU `id`; runs on the CPU workers of device `id`.
    pub const fn cpu_pinned(id: u32) -> Self {
        Context {
            device: DeviceType::CpuPinned,
            id,
        }
    }

    /// GPU `id`.
    pub const fn gpu(id: u32) -> Self {
        Context {
            device: DeviceType::Gpu,
            id,
        }
    }

    /// The device type.
    pub const fn device_type(self) -> DeviceType {
        self.device
    }

    /// The device id.
    pub const fn device_id(self) -> u32 {
        self.id
    }

    /// Whether ops in this context run on a device backend rather than on CPU workers.
    pub const fn is_gpu(self) -> bool {
        matches!(self.device, DeviceType::Gpu)
    }
}

impl Default for Context {
    /// `Context::cpu(0)`.
    fn default() -> Self {
        Context::cpu(0)
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.device {
            DeviceType::Cpu => "cpu",
            DeviceType::CpuPinned => "cpu_pinned",
            DeviceType::Gpu => "gpu",
        };
        write!(f, "{kind}({})", self.id)
    }
}

/// What kind of op this is; decides where a ready op is queued (MXNet's `FnProperty`).
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, FnProperty};
///
/// assert_eq!(FnProperty::default(), FnProperty::Normal);
/// assert!(FnProperty::CopyToGpu.is_copy() && !FnProperty::Async.is_copy());
///
/// // An `Async` op ready at push runs on the pushing thread (`ThreadedPerDevice`).
/// assert!(FnProperty::Async.runs_on_pusher() && !FnProperty::Normal.runs_on_pusher());
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let var = engine.new_var()?;
/// let pusher = std::thread::current().id();
/// engine.op("start io").prop(FnProperty::Async).writes([var]).push_async(move |run, done| {
///     assert_eq!(run.property, FnProperty::Async);
///     assert_eq!(std::thread::current().id(), pusher);
///     done.ok();
/// })?;
/// engine.wait_for_var(var)?; // `Err` if an assertion failed: the op panicked
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FnProperty {
    /// An ordinary op: the worker block of its context.
    #[default]
    Normal,
    /// A copy from a GPU: the GPU's copy workers (`ThreadedPooled`: the copy block).
    CopyFromGpu,
    /// A copy to a GPU: as `CopyFromGpu`.
    CopyToGpu,
    /// A CPU op served by the shared priority block, higher priority first
    /// (`ThreadedPerDevice`; elsewhere like `Normal`).
    CpuPrioritized,
    /// An op that only starts asynchronous work: `ThreadedPerDevice` runs it on the pushing
    /// thread when it is ready at push time.
    Async,
    /// An op that deletes data: run like `Async` (cheap, on the pushing thread when ready).
    DeleteVar,
}

impl FnProperty {
    /// Whether this is a copy to or from a GPU.
    pub const fn is_copy(self) -> bool {
        matches!(self, FnProperty::CopyFromGpu | FnProperty::CopyToGpu)
    }

    /// Whether `ThreadedPerDevice` runs the op on the pushing thread when it is ready at push.
    pub const fn runs_on_pusher(self) -> bool {
        matches!(self, FnProperty::Async | FnProperty::DeleteVar)
    }
}

/// What a running op is told about itself.
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
///
/// use depengine::{Context, Engine, EngineConfig, FnProperty, RunContext};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let (tx, rx) = mpsc::channel();
/// engine
///     .op("told")
///     .on(Context::cpu(1))
///     .priority(3)
///     .push_sync(move |run: RunContext| tx.send(run).unwrap())?;
/// let expected = RunContext {
///     context: Context::cpu(1),
///     priority: 3,
///     property: FnProperty::Normal,
/// };
/// assert_eq!(rx.recv().unwrap(), expected);
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunContext {
    /// The context it was pushed with.
    pub context: Context,
    /// Its priority.
    pub priority: i32,
    /// Its property.
    pub property: FnProperty,
}

#[cfg(feature = "cuda")]
impl RunContext {
    /// The CUDA resources of the GPU worker running this op (the device's context and the
    /// worker's stream), for an op pushed on a GPU context of an engine on the CUDA backend;
    /// `None` for any other op. Launch the op's work on the stream and return without waiting
    /// for it: the op completes, and releases what depends on it, once that work is done.
    pub fn cuda(&self) -> Option<crate::cuda::CudaRun> {
        if self.context.is_gpu() {
            depengine_cuda::CudaRun::current()
        } else {
            None
        }
    }
}
