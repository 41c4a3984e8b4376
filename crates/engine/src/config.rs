//! [`EngineConfig`], [`EngineKind`], and reading them from the environment.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use depengine_device::DeviceBackend;
use depengine_pool::MAX_THREADS;

use crate::profile::recorder::ProfileMode;

/// Which engine runs the ops (MXNet's `MXNET_ENGINE_TYPE`).
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
///
/// use depengine::{Engine, EngineConfig, EngineKind};
///
/// assert_eq!(EngineKind::default(), EngineKind::ThreadedPerDevice);
/// let kind: EngineKind = "ThreadedEnginePooled".parse()?; // MXNet's names are accepted
/// assert_eq!(kind.to_string(), "ThreadedPooled");
/// assert!("Threaded".parse::<EngineKind>().is_err());
///
/// let config = EngineConfig::default().kind(EngineKind::Naive).cpu_worker_threads(1);
/// let engine = Engine::new(config)?;
/// assert_eq!(engine.kind(), EngineKind::Naive);
/// let (tx, rx) = mpsc::channel();
/// engine.op("inline").push_sync(move |_| tx.send(std::thread::current().id()).unwrap())?;
/// // The naive engine ran it on this thread before `push_sync` returned.
/// assert_eq!(rx.try_recv(), Ok(std::thread::current().id()));
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    /// Runs each op inline on the thread that makes it ready (the pushing thread, for a single
    /// pusher of sync ops), in push order: the debugging engine.
    Naive,
    /// One shared worker block for all normal ops, one for copy ops.
    ThreadedPooled,
    /// A worker block per CPU device, a shared priority block for `CpuPrioritized` ops, GPU
    /// compute and copy workers from the device backend; ready async ops run on the pusher.
    #[default]
    ThreadedPerDevice,
}

impl EngineKind {
    /// The accepted spellings, for messages.
    pub const ACCEPTED: &'static str = "Naive, ThreadedPooled or ThreadedPerDevice";

    /// The name as `DEPENGINE_ENGINE_TYPE` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            EngineKind::Naive => "Naive",
            EngineKind::ThreadedPooled => "ThreadedPooled",
            EngineKind::ThreadedPerDevice => "ThreadedPerDevice",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EngineKind {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "Naive" | "NaiveEngine" => Ok(EngineKind::Naive),
            "ThreadedPooled" | "ThreadedEnginePooled" => Ok(EngineKind::ThreadedPooled),
            "ThreadedPerDevice" | "ThreadedEnginePerDevice" => Ok(EngineKind::ThreadedPerDevice),
            other => Err(ConfigError::Invalid {
                variable: ENGINE_TYPE,
                value: other.to_owned(),
                expected: EngineKind::ACCEPTED,
            }),
        }
    }
}

/// A configuration value that is not accepted.
///
/// # Examples
///
/// ```
/// use depengine::{ConfigError, ENGINE_TYPE, Engine, EngineConfig, EngineError, MAX_THREADS};
///
/// let from_env = EngineConfig::from_lookup(|name| (name == ENGINE_TYPE).then(|| "Fast".into()));
/// match from_env.err() {
///     Some(ConfigError::Invalid { variable, value, .. }) => {
///         assert_eq!((variable, value.as_str()), (ENGINE_TYPE, "Fast"));
///     }
///     other => panic!("expected an invalid engine type, got {other:?}"),
/// }
///
/// // Set in code, checked by `Engine::new`, which starts nothing then.
/// let too_many = Engine::new(EngineConfig::default().cpu_worker_threads(MAX_THREADS + 1));
/// assert!(matches!(
///     too_many,
///     Err(EngineError::Config(ConfigError::TooManyThreads { requested, .. }))
///         if requested == MAX_THREADS + 1
/// ));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// An environment variable, or an [`EngineConfig`] field set in code, holds a value that is
    /// not accepted.
    #[error("{variable}={value:?} is not valid: expected {expected}")]
    Invalid {
        /// The environment variable (`DEPENGINE_...`) or the field (`EngineConfig::...`).
        variable: &'static str,
        /// Its value.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// A thread count above [`MAX_THREADS`](crate::MAX_THREADS), the most a block of workers
    /// may have.
    #[error("{setting}={requested} is too many threads: a block of workers has at most {max}")]
    TooManyThreads {
        /// The environment variable (`DEPENGINE_..._NTHREADS`) or the field
        /// (`EngineConfig::..._threads`) that asks for them.
        setting: &'static str,
        /// The thread count asked for.
        requested: usize,
        /// [`MAX_THREADS`](crate::MAX_THREADS).
        max: usize,
    },
    /// A bulk segment size above [`MAX_BULK_SIZE`], the most ops one segment may hold.
    #[error("{setting}={requested} is too large a bulk segment: a segment holds at most {max} ops")]
    BulkTooLarge {
        /// [`BULK_SIZE`] or `EngineConfig::bulk_size`.
        setting: &'static str,
        /// The size asked for.
        requested: usize,
        /// [`MAX_BULK_SIZE`].
        max: usize,
    },
}

/// `Naive` | `ThreadedPooled` | `ThreadedPerDevice`.
pub const ENGINE_TYPE: &str = "DEPENGINE_ENGINE_TYPE";
/// Threads per CPU worker block (and of `ThreadedPooled`'s shared block).
pub const CPU_WORKER_NTHREADS: &str = "DEPENGINE_CPU_WORKER_NTHREADS";
/// Threads of the CPU priority block.
pub const CPU_PRIORITY_NTHREADS: &str = "DEPENGINE_CPU_PRIORITY_NTHREADS";
/// Threads per GPU compute block.
pub const GPU_WORKER_NTHREADS: &str = "DEPENGINE_GPU_WORKER_NTHREADS";
/// Threads per GPU copy block (and of `ThreadedPooled`'s copy block).
pub const GPU_COPY_NTHREADS: &str = "DEPENGINE_GPU_COPY_NTHREADS";

/// `1` (or `true`, `on`): the profiler runs from the engine's start; `0` (`false`, `off`): it
/// does not (MXNet's `MXNET_PROFILER_AUTOSTART`).
pub const PROFILER_AUTOSTART: &str = "DEPENGINE_PROFILER_AUTOSTART";
/// `all` | `marked`: which ops the profiler records (see [`ProfileMode`]).
pub const PROFILER_MODE: &str = "DEPENGINE_PROFILER_MODE";
/// A file path: where the engine writes the profile nobody took (a Chrome trace) when its last
/// clone is dropped.
pub const PROFILER_OUTPUT: &str = "DEPENGINE_PROFILER_OUTPUT";
/// Seconds (a decimal number) a wait blocks before the engine warns about it (see
/// [`EngineConfig::stall_warning`]); `0` turns the warnings off.
pub const STALL_WARNING_SECS: &str = "DEPENGINE_STALL_WARNING_SECS";

/// The most ops that may be pending (pushed, not completed) before a push waits for some to
/// complete (see [`EngineConfig::max_pending`]): a positive integer, or `0` / `off` for no
/// bound.
pub const MAX_PENDING: &str = "DEPENGINE_MAX_PENDING";

/// Microseconds a push held back by the pending bound waits while the pending count makes no
/// progress before it goes on (see [`EngineConfig::max_pending_wait`]): a positive integer, or
/// `0` / `off` for a strict bound (the push waits as long as it takes).
pub const MAX_PENDING_WAIT_US: &str = "DEPENGINE_MAX_PENDING_WAIT_US";

/// The default [`EngineConfig::max_pending`]: enough ops ahead to keep every worker busy,
/// few enough that their state stays in the caches (see `docs/engine.md`, "The pending bound").
pub const DEFAULT_MAX_PENDING: usize = 4096;

/// The default [`EngineConfig::max_pending_wait`].
pub const DEFAULT_MAX_PENDING_WAIT: Duration = Duration::from_millis(1);

/// The default [`EngineConfig::device_hang_limit`].
pub const DEFAULT_DEVICE_HANG_LIMIT: Duration = Duration::from_mins(1);

/// The most ops one bulk segment may hold (see [`EngineConfig::bulk_size`]): a positive
/// integer up to [`MAX_BULK_SIZE`], or `0` / `off` for no bulk execution (the default).
pub const BULK_SIZE: &str = "DEPENGINE_BULK_SIZE";

/// `1` (or `true`, `on`): pin the CPU workers to cores (see [`EngineConfig::pin_workers`]);
/// `0` (`false`, `off`): leave them where the OS puts them.
pub const PIN_WORKERS: &str = "DEPENGINE_PIN_WORKERS";

/// Microseconds, at most, that a CPU worker searches for work before it sleeps (see
/// [`EngineConfig::cpu_max_spin`]): an integer up to 1 000 000 ([`MAX_CPU_SPIN`]), `0` for no
/// search.
pub const CPU_MAX_SPIN_US: &str = "DEPENGINE_CPU_MAX_SPIN_US";

/// The largest [`EngineConfig::cpu_max_spin`]: one second.
pub const MAX_CPU_SPIN: Duration = Duration::from_secs(1);

/// The largest [`EngineConfig::bulk_size`]: a segment holds every var its first op uses until
/// its last op ran, and keeps the functions of the ops that joined it until then; segments
/// larger than a few thousand ops only hold vars longer.
pub const MAX_BULK_SIZE: usize = 4096;

/// The name [`EngineConfig::validate`] gives `max_pending` in its errors.
const MAX_PENDING_FIELD: &str = "EngineConfig::max_pending";
/// The name [`EngineConfig::validate`] gives `max_pending_wait` in its errors.
const MAX_PENDING_WAIT_FIELD: &str = "EngineConfig::max_pending_wait";

/// The name [`EngineConfig::validate`] gives `device_hang_limit` in its errors.
const DEVICE_HANG_LIMIT_FIELD: &str = "EngineConfig::device_hang_limit";
/// The name [`EngineConfig::validate`] gives `stall_warning` in its errors.
const STALL_WARNING_FIELD: &str = "EngineConfig::stall_warning";
/// The name errors about a profiler output set in code give it.
const PROFILER_OUTPUT_FIELD: &str = "EngineConfig::profiler_output";

const POSITIVE: &str = "a positive integer";
const BOUND: &str = "a positive integer, or `0` / `off` for no bound";
const PATIENCE: &str = "a number of microseconds, or `0` / `off` to wait as long as it takes";
const SECONDS: &str = "a number of seconds (0: off)";
const BULK: &str = "a number of ops per segment, or `0` / `off` for no bulk execution";
const SPIN: &str = "a number of microseconds, at most 1000000 (0: no search)";

/// How to build an [`Engine`](crate::Engine).
///
/// ```
/// use depengine::{EngineConfig, EngineKind};
///
/// let config = EngineConfig::default()
///     .kind(EngineKind::ThreadedPooled)
///     .cpu_worker_threads(2);
/// assert_eq!(config.kind, EngineKind::ThreadedPooled);
/// ```
#[derive(Clone)]
#[non_exhaustive]
#[must_use]
pub struct EngineConfig {
    /// The engine kind (default `ThreadedPerDevice`).
    pub kind: EngineKind,
    /// Threads per CPU worker block (default: the available parallelism). Each thread count is
    /// at most [`MAX_THREADS`](crate::MAX_THREADS).
    pub cpu_worker_threads: usize,
    /// Threads of the CPU priority block (default 4, as MXNet).
    pub cpu_priority_threads: usize,
    /// Threads per GPU compute block (default 2, as MXNet).
    pub gpu_worker_threads: usize,
    /// Threads per GPU copy block (default 2, as MXNet).
    pub gpu_copy_threads: usize,
    /// The device backend GPU ops run on; without one, GPU ops are rejected at push. With the
    /// `cuda` feature the default is a `depengine::cuda::CudaBackend`, which probes
    /// the driver at the first GPU op: on a machine without one, that push fails with the
    /// reason (no driver, no such device), and all CPU work runs as usual.
    pub device_backend: Option<Arc<dyn DeviceBackend>>,
    /// Whether the profiler runs from the start (default `false`; see [`Profiler`]).
    ///
    /// [`Profiler`]: crate::Profiler
    pub profiler_autostart: bool,
    /// Which ops the profiler records (default [`ProfileMode::All`]).
    pub profiler_mode: ProfileMode,
    /// Where the engine writes the recorded ops nobody took, as a Chrome trace, when its last
    /// clone is dropped or shut down (default: nowhere). [`Engine::new`] creates (or opens) the
    /// file, so that a path that cannot be written is an error there
    /// ([`EngineError::ProfilerOutput`]), not a profile lost at the end.
    ///
    /// [`Engine::new`]: crate::Engine::new
    /// [`EngineError::ProfilerOutput`]: crate::EngineError::ProfilerOutput
    pub profiler_output: Option<PathBuf>,
    /// How long a wait (`wait_for_var`, `wait_for_all`, the last clone's shutdown, a push
    /// held back by [`max_pending`](Self::max_pending)) blocks before the engine warns about
    /// it, and again after each further period, naming what it waits for; `None`: never
    /// (default 10 s). A zero period is refused ([`ConfigError::Invalid`]): it would warn on
    /// every check of a blocked wait.
    ///
    /// Warnings (these, and a profile that the last clone's drop cannot write) are `WARN`
    /// events (targets `depengine::stall`, `depengine::profiler`) when the current `tracing`
    /// subscriber wants them, and lines on stderr (`depengine: warning: ...`) otherwise, as
    /// with no subscriber installed: a hang is never silent.
    pub stall_warning: Option<Duration>,
    /// The most ops that may be pending (pushed and not completed) before a push waits for
    /// some to complete: a thread that pushes faster than the workers run then waits, once
    /// `max_pending` ops are pending, until half of them completed, instead of parking every
    /// op it pushes (memory that grows with the lead, and ops that slow down as their state
    /// outgrows the caches). Default: [`DEFAULT_MAX_PENDING`] (4096); `None`: no bound.
    ///
    /// Pushes from inside an op, from a worker's task, and on the naive engine are never held
    /// back (they could wait for themselves). A pusher that holds something its pending ops
    /// need (a lock their functions take, the `Completion` of an op they depend on, a var it
    /// writes only after pushing them) sees the pending count stop falling while it is held
    /// back: after [`max_pending_wait`](Self::max_pending_wait) it goes on, for `max_pending`
    /// more pushes; unless that is `None`, when it waits forever.
    pub max_pending: Option<usize>,
    /// How long a push held back by [`max_pending`](Self::max_pending) waits while the
    /// pending count makes no progress (no new low) before it goes on: the next `max_pending`
    /// pushes are then admitted whatever is pending, and past them the bound holds again. So
    /// a pusher holding what its ops need (see `max_pending`) is delayed one patience per
    /// `max_pending` pushes instead of stopped. Default: [`DEFAULT_MAX_PENDING_WAIT`] (1 ms).
    /// `None`: a strict bound: the push waits as long as it takes, and the stall warning names
    /// it. A zero duration is refused ([`ConfigError::Invalid`]): it would make the bound
    /// admit every push.
    pub max_pending_wait: Option<Duration>,
    /// How long the last clone's drop waits, while no op completes and no device work is handed
    /// over or reported done, for device work that an executor has not reported done (a hung
    /// kernel) before it gives up: it reports an error
    /// (a stall warning) and leaves the engine's threads, and the data of the ops still
    /// pending, to the process, instead of hanging. Default: [`DEFAULT_DEVICE_HANG_LIMIT`]
    /// (60 s); `None`: as long as it takes. A stall with no device work in flight (a guard
    /// not dropped) is waited for as long as it takes, with its warnings. A zero duration is
    /// refused ([`ConfigError::Invalid`]).
    pub device_hang_limit: Option<Duration>,
    /// Bulk execution (MXNet's `MXNET_EXEC_BULK_EXEC_*`): at most this many consecutive sync
    /// ops that one thread pushes run as one scheduled unit, a *segment*, with the dependency
    /// and failure semantics of ops pushed alone. `0` (the default) or `1`: every op runs
    /// alone. At most [`MAX_BULK_SIZE`].
    ///
    /// An op joins the segment its thread pushed last when it is a `push_sync` op with
    /// [`FnProperty::Normal`](crate::FnProperty::Normal) in the same context and priority,
    /// uses only vars of the segment's first op (a write only of a var that op writes), and
    /// conflicts with the segment's last op (which depends on the one before it, and so on:
    /// pushed alone, it would have waited for each op of the segment); and when nothing else entered the engine's dependency graph since the segment
    /// did (an op pushed by another thread or by an op, a wait, a deletion). The segment is in
    /// the graph from its first op on, so an op that joins it runs whatever the pushing thread
    /// does next: nothing waits for a flush. Ops pushed after a segment on its vars wait for
    /// the whole segment. `docs/engine.md`, "Bulk execution", has the design.
    pub bulk_size: usize,
    /// Pins the CPU workers to cores: worker `i` of each CPU block (each CPU device's block in
    /// `ThreadedPerDevice`, the shared block in `ThreadedPooled`) to core `i % cores`. The
    /// priority and copy blocks' workers, and the threads that push, stay where the OS puts
    /// them. A core that cannot be pinned (a CPU set smaller than the worker count, a platform
    /// without affinity) is a `tracing` warning, and its worker runs unpinned. Default: off
    /// (`docs/decisions.md`, "Workers not pinned by default").
    pub pin_workers: bool,
    /// How long, at most, a CPU worker that ran out of work searches for more before it
    /// sleeps: it searches 50 µs (or this long, if shorter), and up to this long while work
    /// comes back at a steady period, so that an op pushed every millisecond or two starts
    /// within a look instead of after a wake-up (`depengine_pool`'s `Builder::max_spin`). A
    /// searching worker yields its core at every look, but uses CPU time. `Duration::ZERO`:
    /// workers sleep as soon as they find no work. At most [`MAX_CPU_SPIN`]. Default:
    /// [`depengine_pool::DEFAULT_MAX_SPIN`], 4 ms (`docs/engine.md`, "Worker placement").
    pub cpu_max_spin: Duration,
    /// The `profiler_output` that `from_lookup` read from [`PROFILER_OUTPUT`]: while the field
    /// still holds it, errors about the path name the variable, not the field.
    profiler_output_from_env: Option<PathBuf>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        // The device backend: CUDA's with the `cuda` feature, none without.
        #[cfg(feature = "cuda")]
        let device_backend: Option<Arc<dyn DeviceBackend>> =
            Some(Arc::new(crate::cuda::CudaBackend::new()));
        #[cfg(not(feature = "cuda"))]
        let device_backend = None;
        EngineConfig {
            kind: EngineKind::default(),
            cpu_worker_threads: std::thread::available_parallelism()
                .map_or(1, usize::from)
                .min(MAX_THREADS),
            cpu_priority_threads: 4,
            gpu_worker_threads: 2,
            gpu_copy_threads: 2,
            device_backend,
            profiler_autostart: false,
            profiler_mode: ProfileMode::All,
            profiler_output: None,
            stall_warning: Some(Duration::from_secs(10)),
            max_pending: Some(DEFAULT_MAX_PENDING),
            max_pending_wait: Some(DEFAULT_MAX_PENDING_WAIT),
            device_hang_limit: Some(DEFAULT_DEVICE_HANG_LIMIT),
            bulk_size: 0,
            pin_workers: false,
            cpu_max_spin: depengine_pool::DEFAULT_MAX_SPIN,
            profiler_output_from_env: None,
        }
    }
}

impl EngineConfig {
    /// The defaults, overridden by the `DEPENGINE_*` environment variables that are set.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the variable and the accepted values;
    /// [`ConfigError::TooManyThreads`] naming the variable of a thread count above
    /// [`MAX_THREADS`](crate::MAX_THREADS).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| {
            std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
        })
    }

    /// As [`from_env`](Self::from_env), reading variables through `lookup`.
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = EngineConfig::default();
        if let Some(value) = lookup(ENGINE_TYPE) {
            config.kind = value.trim().parse()?;
        }
        if let Some(value) = lookup(PROFILER_AUTOSTART) {
            config.profiler_autostart = flag(PROFILER_AUTOSTART, &value)?;
        }
        if let Some(value) = lookup(PROFILER_OUTPUT) {
            if value.trim().is_empty() {
                return Err(ConfigError::Invalid {
                    variable: PROFILER_OUTPUT,
                    value,
                    expected: "a file path",
                });
            }
            config.profiler_output = Some(PathBuf::from(value));
            config
                .profiler_output_from_env
                .clone_from(&config.profiler_output);
        }
        if let Some(value) = lookup(PROFILER_MODE) {
            config.profiler_mode = match value.trim().to_ascii_lowercase().as_str() {
                "all" => ProfileMode::All,
                "marked" => ProfileMode::Marked,
                _ => {
                    return Err(ConfigError::Invalid {
                        variable: PROFILER_MODE,
                        value,
                        expected: "`all` or `marked`",
                    });
                }
            };
        }
        if let Some(value) = lookup(STALL_WARNING_SECS) {
            config.stall_warning =
                match value.trim().parse::<f64>() {
                    Ok(0.0) => None,
                    Ok(secs) => Some(Duration::try_from_secs_f64(secs).map_err(|_| {
                        ConfigError::Invalid {
                            variable: STALL_WARNING_SECS,
                            value: value.clone(),
                            expected: SECONDS,
                        }
                    })?),
                    Err(_) => {
                        return Err(ConfigError::Invalid {
                            variable: STALL_WARNING_SECS,
                            value,
                            expected: SECONDS,
                        });
                    }
                };
        }
        if let Some(value) = lookup(MAX_PENDING) {
            config.max_pending = bound(MAX_PENDING, &value)?;
        }
        if let Some(value) = lookup(MAX_PENDING_WAIT_US) {
            config.max_pending_wait = patience(MAX_PENDING_WAIT_US, &value)?;
        }
        if let Some(value) = lookup(BULK_SIZE) {
            config.bulk_size = bulk_size(BULK_SIZE, &value)?;
        }
        if let Some(value) = lookup(PIN_WORKERS) {
            config.pin_workers = flag(PIN_WORKERS, &value)?;
        }
        if let Some(value) = lookup(CPU_MAX_SPIN_US) {
            config.cpu_max_spin = spin_micros(CPU_MAX_SPIN_US, &value)?;
        }
        for (variable, field) in [
            (CPU_WORKER_NTHREADS, &mut config.cpu_worker_threads),
            (CPU_PRIORITY_NTHREADS, &mut config.cpu_priority_threads),
            (GPU_WORKER_NTHREADS, &mut config.gpu_worker_threads),
            (GPU_COPY_NTHREADS, &mut config.gpu_copy_threads),
        ] {
            if let Some(value) = lookup(variable) {
                *field = thread_count(variable, &value)?;
            }
        }
        Ok(config)
    }

    /// Sets the engine kind.
    pub fn kind(mut self, kind: EngineKind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets the threads per CPU worker block.
    pub fn cpu_worker_threads(mut self, threads: usize) -> Self {
        self.cpu_worker_threads = threads;
        self
    }

    /// Sets the threads of the CPU priority block.
    pub fn cpu_priority_threads(mut self, threads: usize) -> Self {
        self.cpu_priority_threads = threads;
        self
    }

    /// Sets the threads per GPU compute block.
    pub fn gpu_worker_threads(mut self, threads: usize) -> Self {
        self.gpu_worker_threads = threads;
        self
    }

    /// Sets the threads per GPU copy block.
    pub fn gpu_copy_threads(mut self, threads: usize) -> Self {
        self.gpu_copy_threads = threads;
        self
    }

    /// Sets the device backend GPU ops run on.
    pub fn device_backend(mut self, backend: Arc<dyn DeviceBackend>) -> Self {
        self.device_backend = Some(backend);
        self
    }

    /// Sets whether the profiler runs from the start.
    pub fn profiler_autostart(mut self, autostart: bool) -> Self {
        self.profiler_autostart = autostart;
        self
    }

    /// Sets which ops the profiler records.
    pub fn profiler_mode(mut self, mode: ProfileMode) -> Self {
        self.profiler_mode = mode;
        self
    }

    /// Sets where the engine writes the recorded ops nobody took when its last clone is dropped.
    pub fn profiler_output(mut self, path: impl Into<PathBuf>) -> Self {
        self.profiler_output = Some(path.into());
        self
    }

    /// Sets how long a wait blocks before the engine warns about it (`None`: never).
    pub fn stall_warning(mut self, after: Option<Duration>) -> Self {
        self.stall_warning = after;
        self
    }

    /// Sets the most ops that may be pending before a push waits (`None`: no bound).
    pub fn max_pending(mut self, max: Option<usize>) -> Self {
        self.max_pending = max;
        self
    }

    /// Sets how long a held-back push waits while the pending count makes no progress before
    /// it goes on (`None`: as long as it takes; see [`max_pending_wait`](Self::max_pending_wait)).
    pub fn max_pending_wait(mut self, patience: Option<Duration>) -> Self {
        self.max_pending_wait = patience;
        self
    }

    /// Sets how long the last clone's drop waits for a device that makes no progress (`None`:
    /// as long as it takes; see [`device_hang_limit`](Self::device_hang_limit)).
    pub fn device_hang_limit(mut self, limit: Option<Duration>) -> Self {
        self.device_hang_limit = limit;
        self
    }

    /// Sets the most ops one bulk segment holds (`0`: no bulk execution; see
    /// [`bulk_size`](Self::bulk_size)).
    pub fn bulk_size(mut self, ops: usize) -> Self {
        self.bulk_size = ops;
        self
    }

    /// Pins the CPU workers to cores, or not (see [`pin_workers`](Self::pin_workers)).
    pub fn pin_workers(mut self, pin: bool) -> Self {
        self.pin_workers = pin;
        self
    }

    /// Sets how long, at most, a CPU worker searches for work before it sleeps (see
    /// [`cpu_max_spin`](Self::cpu_max_spin)).
    pub fn cpu_max_spin(mut self, max: Duration) -> Self {
        self.cpu_max_spin = max;
        self
    }

    /// What set the profiler's output path, for errors: [`PROFILER_OUTPUT`] while the field
    /// holds the path `from_lookup` read, else the field.
    pub(crate) fn profiler_output_setting(&self) -> &'static str {
        if self.profiler_output.is_some() && self.profiler_output == self.profiler_output_from_env {
            PROFILER_OUTPUT
        } else {
            PROFILER_OUTPUT_FIELD
        }
    }

    /// Checks every thread count is between 1 and [`MAX_THREADS`], and that a pending bound, its
    /// patience and the stall-warning period are positive. An error names the field:
    /// a count read from the environment was checked by [`from_lookup`](Self::from_lookup),
    /// which names the variable, so a count out of range here was set in code.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_pending == Some(0) {
            return Err(ConfigError::Invalid {
                variable: MAX_PENDING_FIELD,
                value: "Some(0)".to_owned(),
                expected: "a positive bound, or `None` for no bound",
            });
        }
        for (variable, period, expected) in [
            (
                STALL_WARNING_FIELD,
                self.stall_warning,
                "a positive duration, or `None` for no stall warnings",
            ),
            (
                MAX_PENDING_WAIT_FIELD,
                self.max_pending_wait,
                "a positive duration, or `None` to wait as long as it takes",
            ),
            (
                DEVICE_HANG_LIMIT_FIELD,
                self.device_hang_limit,
                "a positive duration, or `None` to wait as long as it takes",
            ),
        ] {
            if period == Some(Duration::ZERO) {
                return Err(ConfigError::Invalid {
                    variable,
                    value: "Some(0ns)".to_owned(),
                    expected,
                });
            }
        }
        if self.cpu_max_spin > MAX_CPU_SPIN {
            return Err(ConfigError::Invalid {
                variable: "EngineConfig::cpu_max_spin",
                value: format!("{:?}", self.cpu_max_spin),
                expected: "at most `MAX_CPU_SPIN` (1 s)",
            });
        }
        if self.bulk_size > MAX_BULK_SIZE {
            return Err(ConfigError::BulkTooLarge {
                setting: "EngineConfig::bulk_size",
                requested: self.bulk_size,
                max: MAX_BULK_SIZE,
            });
        }
        for (field, value) in [
            ("EngineConfig::cpu_worker_threads", self.cpu_worker_threads),
            (
                "EngineConfig::cpu_priority_threads",
                self.cpu_priority_threads,
            ),
            ("EngineConfig::gpu_worker_threads", self.gpu_worker_threads),
            ("EngineConfig::gpu_copy_threads", self.gpu_copy_threads),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    variable: field,
                    value: "0".to_owned(),
                    expected: POSITIVE,
                });
            }
            if value > MAX_THREADS {
                return Err(ConfigError::TooManyThreads {
                    setting: field,
                    requested: value,
                    max: MAX_THREADS,
                });
            }
        }
        Ok(())
    }
}

fn flag(variable: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" => Ok(true),
        "0" | "false" | "off" | "" => Ok(false),
        _ => Err(ConfigError::Invalid {
            variable,
            value: value.to_owned(),
            expected: "`1`/`true`/`on` or `0`/`false`/`off`",
        }),
    }
}

/// A pending bound: a positive integer, or `0` / `off` for none.
fn bound(variable: &'static str, value: &str) -> Result<Option<usize>, ConfigError> {
    positive_or_off(variable, value, BOUND)
}

/// How long a held-back push waits while the pending count makes no progress: microseconds,
/// `0` or `off` for as long as it takes.
fn patience(variable: &'static str, value: &str) -> Result<Option<Duration>, ConfigError> {
    Ok(positive_or_off(variable, value, PATIENCE)?
        .map(|micros| Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))))
}

/// A positive integer, or `None` for `0` / `off`; an error names `variable` and `expected`.
fn positive_or_off(
    variable: &'static str,
    value: &str,
    expected: &'static str,
) -> Result<Option<usize>, ConfigError> {
    let text = value.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    match text.parse::<usize>() {
        Ok(0) => Ok(None),
        Ok(max) => Ok(Some(max)),
        Err(_) => Err(ConfigError::Invalid {
            variable,
            value: value.to_owned(),
            expected,
        }),
    }
}

/// A bulk segment size: an integer up to [`MAX_BULK_SIZE`], `0` or `off` for none.
fn bulk_size(variable: &'static str, value: &str) -> Result<usize, ConfigError> {
    let text = value.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(0);
    }
    match text.parse::<usize>() {
        Ok(ops) if ops > MAX_BULK_SIZE => Err(ConfigError::BulkTooLarge {
            setting: variable,
            requested: ops,
            max: MAX_BULK_SIZE,
        }),
        Ok(ops) => Ok(ops),
        Err(_) => Err(ConfigError::Invalid {
            variable,
            value: value.to_owned(),
            expected: BULK,
        }),
    }
}

/// A spin bound from `variable`: microseconds, up to [`MAX_CPU_SPIN`].
fn spin_micros(variable: &'static str, value: &str) -> Result<Duration, ConfigError> {
    match value.trim().parse::<u64>() {
        Ok(micros) if Duration::from_micros(micros) <= MAX_CPU_SPIN => {
            Ok(Duration::from_micros(micros))
        }
        _ => Err(ConfigError::Invalid {
            variable,
            value: value.to_owned(),
            expected: SPIN,
        }),
    }
}

/// A thread count from `variable`: a positive integer, at most [`MAX_THREADS`].
fn thread_count(variable: &'static str, value: &str) -> Result<usize, ConfigError> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > MAX_THREADS => Err(ConfigError::TooManyThreads {
            setting: variable,
            requested: n,
            max: MAX_THREADS,
        }),
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ConfigError::Invalid {
            variable,
            value: value.to_owned(),
            expected: POSITIVE,
        }),
    }
}

impl fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineConfig")
            .field("kind", &self.kind)
            .field("cpu_worker_threads", &self.cpu_worker_threads)
            .field("cpu_priority_threads", &self.cpu_priority_threads)
            .field("gpu_worker_threads", &self.gpu_worker_threads)
            .field("gpu_copy_threads", &self.gpu_copy_threads)
            .field(
                "device_backend",
                &self.device_backend.as_ref().map(|backend| backend.name()),
            )
            .field("profiler_autostart", &self.profiler_autostart)
            .field("profiler_mode", &self.profiler_mode)
            .field("profiler_output", &self.profiler_output)
            .field("stall_warning", &self.stall_warning)
            .field("max_pending", &self.max_pending)
            .field("max_pending_wait", &self.max_pending_wait)
            .field("device_hang_limit", &self.device_hang_limit)
            .field("bulk_size", &self.bulk_size)
            .field("pin_workers", &self.pin_workers)
            .field("cpu_max_spin", &self.cpu_max_spin)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn reads_every_variable() {
        let config = EngineConfig::from_lookup(lookup(&[
            (ENGINE_TYPE, "Naive"),
            (CPU_WORKER_NTHREADS, "3"),
            (CPU_PRIORITY_NTHREADS, "5"),
            (GPU_WORKER_NTHREADS, "7"),
            (GPU_COPY_NTHREADS, "9"),
        ]))
        .unwrap();
        assert_eq!(config.kind, EngineKind::Naive);
        assert_eq!(
            (
                config.cpu_worker_threads,
                config.cpu_priority_threads,
                config.gpu_worker_threads,
                config.gpu_copy_threads
            ),
            (3, 5, 7, 9)
        );
        let pooled = EngineConfig::from_lookup(lookup(&[(ENGINE_TYPE, "ThreadedPooled")])).unwrap();
        assert_eq!(pooled.kind, EngineKind::ThreadedPooled);
        let default = EngineConfig::from_lookup(lookup(&[])).unwrap();
        assert_eq!(default.kind, EngineKind::ThreadedPerDevice);
    }

    #[test]
    fn a_bad_value_names_the_variable_and_the_accepted_values() {
        let error = EngineConfig::from_lookup(lookup(&[(ENGINE_TYPE, "Turbo")])).unwrap_err();
        let message = error.to_string();
        assert!(message.contains(ENGINE_TYPE), "{message}");
        assert!(message.contains("ThreadedPerDevice"), "{message}");
        for variable in [
            CPU_WORKER_NTHREADS,
            CPU_PRIORITY_NTHREADS,
            GPU_WORKER_NTHREADS,
            GPU_COPY_NTHREADS,
        ] {
            for bad in ["0", "-1", "many", ""] {
                let error = EngineConfig::from_lookup(lookup(&[(variable, bad)])).unwrap_err();
                let message = error.to_string();
                assert!(message.contains(variable), "{message}");
                assert!(message.contains("positive integer"), "{message}");
            }
        }
    }

    #[test]
    fn reads_the_stall_warning() {
        let read = |value: &str| EngineConfig::from_lookup(lookup(&[(STALL_WARNING_SECS, value)]));
        assert_eq!(
            read("2.5").unwrap().stall_warning,
            Some(Duration::from_millis(2500))
        );
        assert_eq!(read(" 0 ").unwrap().stall_warning, None);
        assert_eq!(
            EngineConfig::from_lookup(lookup(&[]))
                .unwrap()
                .stall_warning,
            Some(Duration::from_secs(10))
        );
        for bad in ["-1", "soon", "", "inf", "NaN"] {
            let message = read(bad).unwrap_err().to_string();
            assert!(message.contains(STALL_WARNING_SECS), "{message}");
            assert!(message.contains("number of seconds"), "{message}");
        }
    }

    #[test]
    fn reads_the_profiler_variables() {
        let config = EngineConfig::from_lookup(lookup(&[
            (PROFILER_AUTOSTART, "1"),
            (PROFILER_MODE, "Marked"),
            (PROFILER_OUTPUT, "trace.json"),
        ]))
        .unwrap();
        assert!(config.profiler_autostart);
        assert_eq!(config.profiler_mode, ProfileMode::Marked);
        assert_eq!(config.profiler_output, Some(PathBuf::from("trace.json")));
        let default = EngineConfig::from_lookup(lookup(&[])).unwrap();
        assert!(!default.profiler_autostart);
        assert_eq!(default.profiler_mode, ProfileMode::All);
        for (variable, bad, expected) in [
            (PROFILER_AUTOSTART, "yes please", "`0`/`false`/`off`"),
            (PROFILER_MODE, "some", "`all` or `marked`"),
            (PROFILER_OUTPUT, " ", "a file path"),
        ] {
            let message = EngineConfig::from_lookup(lookup(&[(variable, bad)]))
                .unwrap_err()
                .to_string();
            assert!(message.contains(variable), "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn reads_the_pending_bound() {
        let read = |value: &str| EngineConfig::from_lookup(lookup(&[(MAX_PENDING, value)]));
        assert_eq!(read("1048576").unwrap().max_pending, Some(1 << 20));
        assert_eq!(read(" 64 ").unwrap().max_pending, Some(64));
        assert_eq!(read("0").unwrap().max_pending, None);
        assert_eq!(read("OFF").unwrap().max_pending, None);
        assert_eq!(
            EngineConfig::from_lookup(lookup(&[])).unwrap().max_pending,
            EngineConfig::default().max_pending
        );
        for bad in ["-1", "lots", "", "1e6", "18446744073709551616"] {
            let error = read(bad).unwrap_err();
            let message = error.to_string();
            assert!(message.contains(MAX_PENDING), "{message}");
            assert!(message.contains("positive integer"), "{message}");
            assert!(
                matches!(&error, ConfigError::Invalid { variable, value, .. }
                    if *variable == MAX_PENDING && value == bad),
                "{error:?}"
            );
        }
    }

    #[test]
    fn the_default_bound_is_generous_and_patient() {
        let config = EngineConfig::default();
        assert_eq!(config.max_pending, Some(DEFAULT_MAX_PENDING));
        assert_eq!(config.max_pending_wait, Some(DEFAULT_MAX_PENDING_WAIT));
    }

    #[test]
    fn reads_how_long_a_held_back_push_waits() {
        let read = |value: &str| EngineConfig::from_lookup(lookup(&[(MAX_PENDING_WAIT_US, value)]));
        assert_eq!(
            read("250").unwrap().max_pending_wait,
            Some(Duration::from_micros(250))
        );
        assert_eq!(read("0").unwrap().max_pending_wait, None);
        assert_eq!(read("off").unwrap().max_pending_wait, None);
        for bad in ["-1", "1ms", ""] {
            let error = read(bad).unwrap_err();
            assert!(error.to_string().contains("microseconds"), "{error}");
            assert!(
                matches!(&error, ConfigError::Invalid { variable, value, .. }
                    if *variable == MAX_PENDING_WAIT_US && value == bad),
                "{error:?}"
            );
        }
    }

    #[test]
    fn reads_how_long_the_workers_spin() {
        let read = |value: &str| EngineConfig::from_lookup(lookup(&[(CPU_MAX_SPIN_US, value)]));
        assert_eq!(
            read("250").unwrap().cpu_max_spin,
            Duration::from_micros(250)
        );
        assert_eq!(read(" 0 ").unwrap().cpu_max_spin, Duration::ZERO);
        assert_eq!(read("1000000").unwrap().cpu_max_spin, MAX_CPU_SPIN);
        assert_eq!(
            EngineConfig::from_lookup(lookup(&[])).unwrap().cpu_max_spin,
            depengine_pool::DEFAULT_MAX_SPIN
        );
        for bad in ["1000001", "-1", "4ms", ""] {
            let error = read(bad).unwrap_err();
            assert!(
                matches!(&error, ConfigError::Invalid { variable, .. } if *variable == CPU_MAX_SPIN_US),
                "{bad}: {error:?}"
            );
            assert!(error.to_string().contains(CPU_MAX_SPIN_US), "{error}");
        }
        let too_long = EngineConfig::default().cpu_max_spin(Duration::from_secs(2));
        assert!(too_long.validate().is_err());
        assert!(EngineConfig::default().validate().is_ok());
    }

    #[test]
    fn reads_whether_to_pin_the_workers() {
        let read = |value: &str| EngineConfig::from_lookup(lookup(&[(PIN_WORKERS, value)]));
        for on in ["1", "true", " ON "] {
            assert!(read(on).unwrap().pin_workers, "{on}");
        }
        for off in ["0", "false", "off"] {
            assert!(!read(off).unwrap().pin_workers, "{off}");
        }
        assert!(!EngineConfig::from_lookup(lookup(&[])).unwrap().pin_workers);
        let error = read("cores").unwrap_err();
        assert!(
            matches!(&error, ConfigError::Invalid { variable, .. } if *variable == PIN_WORKERS),
            "{error:?}"
        );
        assert!(error.to_string().contains(PIN_WORKERS), "{error}");
    }

    #[test]
    fn reads_the_bulk_size() {
        let read = |value: &str| EngineConfig::from_lookup(lookup(&[(BULK_SIZE, value)]));
        assert_eq!(read("64").unwrap().bulk_size, 64);
        assert_eq!(read(" 7 ").unwrap().bulk_size, 7);
        assert_eq!(read("0").unwrap().bulk_size, 0);
        assert_eq!(read("Off").unwrap().bulk_size, 0);
        assert_eq!(
            read(&MAX_BULK_SIZE.to_string()).unwrap().bulk_size,
            MAX_BULK_SIZE
        );
        assert_eq!(EngineConfig::from_lookup(lookup(&[])).unwrap().bulk_size, 0);
        for bad in ["-1", "many", "", "1.5", "18446744073709551616"] {
            let error = read(bad).unwrap_err();
            assert!(
                matches!(&error, ConfigError::Invalid { variable, value, .. }
                    if *variable == BULK_SIZE && value == bad),
                "{error:?}"
            );
            let message = error.to_string();
            assert!(message.contains(BULK_SIZE), "{message}");
            assert!(message.contains("ops per segment"), "{message}");
        }
        let too_large = read("100000").unwrap_err();
        assert_eq!(
            too_large,
            ConfigError::BulkTooLarge {
                setting: BULK_SIZE,
                requested: 100_000,
                max: MAX_BULK_SIZE,
            }
        );
        let message = too_large.to_string();
        assert!(message.contains("DEPENGINE_BULK_SIZE=100000"), "{message}");
        assert!(message.contains(&MAX_BULK_SIZE.to_string()), "{message}");
    }

    #[test]
    fn a_bulk_size_set_in_code_is_bounded_and_names_the_field() {
        assert!(EngineConfig::default().bulk_size(0).validate().is_ok());
        assert!(
            EngineConfig::default()
                .bulk_size(MAX_BULK_SIZE)
                .validate()
                .is_ok()
        );
        let error = EngineConfig::default()
            .bulk_size(MAX_BULK_SIZE + 1)
            .validate()
            .unwrap_err();
        assert_eq!(
            error,
            ConfigError::BulkTooLarge {
                setting: "EngineConfig::bulk_size",
                requested: MAX_BULK_SIZE + 1,
                max: MAX_BULK_SIZE,
            }
        );
    }

    #[test]
    fn a_bound_of_zero_names_the_field() {
        let message = EngineConfig::default()
            .max_pending(Some(0))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(message.contains("EngineConfig::max_pending"), "{message}");
        assert!(
            EngineConfig::default()
                .max_pending(Some(1))
                .validate()
                .is_ok()
        );
        assert!(EngineConfig::default().max_pending(None).validate().is_ok());
    }

    #[test]
    fn zero_threads_set_in_code_name_the_field() {
        let config = EngineConfig::default().cpu_worker_threads(0);
        assert_eq!(
            config.validate(),
            Err(ConfigError::Invalid {
                variable: "EngineConfig::cpu_worker_threads",
                value: "0".to_owned(),
                expected: POSITIVE,
            })
        );
        assert!(EngineConfig::default().validate().is_ok());
    }

    #[test]
    fn too_many_threads_name_the_variable_or_the_field() {
        let from_env = EngineConfig::from_lookup(lookup(&[(GPU_COPY_NTHREADS, " 5000 ")]));
        assert_eq!(
            from_env.unwrap_err(),
            ConfigError::TooManyThreads {
                setting: GPU_COPY_NTHREADS,
                requested: 5000,
                max: MAX_THREADS,
            }
        );
        let in_code = EngineConfig::default().gpu_copy_threads(5000).validate();
        assert_eq!(
            in_code.unwrap_err(),
            ConfigError::TooManyThreads {
                setting: "EngineConfig::gpu_copy_threads",
                requested: 5000,
                max: MAX_THREADS,
            }
        );
        let at_the_limit =
            EngineConfig::from_lookup(lookup(&[(CPU_PRIORITY_NTHREADS, &MAX_THREADS.to_string())]))
                .unwrap();
        assert_eq!(at_the_limit.cpu_priority_threads, MAX_THREADS);
        assert!(at_the_limit.validate().is_ok());
    }
}
