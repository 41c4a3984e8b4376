//! Configuring and starting a [`ThreadPool`].

use crate::ThreadPool;
use crate::item::Item;
use crate::run_queue::DEFAULT_CAPACITY;
use crate::unwind::PanicHandler;
use std::sync::Arc;
use std::time::Duration;

/// The most worker threads a pool may have.
///
/// Far more than any machine has cores: a count above it is a mistake (a typo, a unit
/// mix-up), and it fails at once with [`BuildError::TooManyThreads`] rather than running
/// into the operating system's thread limit, or starting a pool whose idle workers each
/// scan every other worker's queue before they sleep. The default thread count (the
/// available parallelism) is capped at it.
pub const MAX_THREADS: usize = 4096;

/// How long a worker searches for work before it sleeps, at most, unless
/// [`Builder::max_spin`] says otherwise: 4 ms.
pub const DEFAULT_MAX_SPIN: Duration = crate::spin_window::SpinWindow::LONGEST;

/// Why a pool could not start.
///
/// # Examples
///
/// ```
/// use depengine_pool::{BuildError, MAX_THREADS, ThreadPool};
///
/// let requested = MAX_THREADS + 1;
/// let pool = match ThreadPool::new(requested) {
///     Ok(pool) => pool,
///     // Fails before starting any thread; fall back to a small pool.
///     Err(BuildError::TooManyThreads { requested: asked, max }) => {
///         assert_eq!((asked, max), (requested, MAX_THREADS));
///         ThreadPool::new(2)?
///     }
///     Err(error) => return Err(error),
/// };
/// assert_eq!(pool.num_threads(), 2);
/// assert!(matches!(ThreadPool::new(0), Err(BuildError::ZeroThreads)));
/// # Ok::<(), BuildError>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A pool needs at least one worker.
    #[error("a thread pool needs at least one thread")]
    ZeroThreads,
    /// More threads than [`MAX_THREADS`].
    #[error("a thread pool has at most {max} threads, {requested} were requested")]
    TooManyThreads {
        /// The thread count asked for.
        requested: usize,
        /// [`MAX_THREADS`].
        max: usize,
    },
    /// The operating system refused to start a worker thread.
    #[error("could not start worker thread {index}: {source}")]
    Spawn {
        /// Index of the worker that failed to start.
        index: usize,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Configures a [`ThreadPool`]: `ThreadPool::builder().threads(4).build()`.
///
/// # Examples
///
/// ```
/// use depengine_pool::ThreadPool;
///
/// let pool = ThreadPool::builder()
///     .threads(2)
///     .thread_name("compute")
///     .build()
///     .expect("threads start");
/// assert_eq!(pool.num_threads(), 2);
/// ```
#[derive(Clone)]
#[must_use]
pub struct Builder {
    pub(crate) threads: Option<usize>,
    pub(crate) thread_name: String,
    pub(crate) stack_size: Option<usize>,
    pub(crate) pin_threads: bool,
    pub(crate) max_spin: Duration,
    pub(crate) queue_capacity: usize,
    pub(crate) saturation: Saturation,
    pub(crate) panic_handler: Option<PanicHandler>,
    pub(crate) on_thread_start: Option<ThreadHook>,
    pub(crate) on_thread_exit: Option<ThreadHook>,
}

/// A hook a worker calls with its index (see [`Builder::on_thread_start`]).
pub(crate) type ThreadHook = Arc<dyn Fn(usize) + Send + Sync>;

/// What a spawn does when the pool is saturated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Saturation {
    /// A spawn into a worker's full queue, or from outside into an injector holding one queue
    /// capacity per worker, runs the task inline.
    RunInline,
    /// The task is queued all the same: into the injector, which has no limit.
    Queue,
}

impl Builder {
    /// The defaults: one thread per available core, threads named `depengine-pool-N`,
    /// the platform's stack size, no pinning, queues of 1024 tasks.
    pub fn new() -> Self {
        Self {
            threads: None,
            thread_name: "depengine-pool".to_owned(),
            stack_size: None,
            pin_threads: false,
            max_spin: DEFAULT_MAX_SPIN,
            queue_capacity: DEFAULT_CAPACITY,
            saturation: Saturation::RunInline,
            panic_handler: None,
            on_thread_start: None,
            on_thread_exit: None,
        }
    }

    /// The number of worker threads, at most [`MAX_THREADS`] (default: the available
    /// parallelism, capped at [`MAX_THREADS`]).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// The prefix of the workers' names; worker `i` is named `{prefix}-{i}`.
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = prefix.into();
        self
    }

    /// The stack size of each worker, in bytes.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Pins worker `i` to core `i % cores`. Cores that cannot be pinned are reported
    /// as `tracing` warnings; the worker then runs unpinned.
    pub fn pin_threads(mut self, pin: bool) -> Self {
        self.pin_threads = pin;
        self
    }

    /// How long, at most, a worker that ran out of work keeps searching before it sleeps
    /// (default [`DEFAULT_MAX_SPIN`]). It searches 50 µs (or this long, if shorter), and up to
    /// this long while work comes back at a steady period: once two idle periods in a row
    /// ended with work within this bound, for twice the shorter of the two. A searching worker
    /// starts a job within a look, where a sleeping one waits for a wake-up (microseconds);
    /// it yields its core at every look, but it keeps using CPU time while it searches.
    /// `Duration::ZERO`: workers sleep as soon as they find no work.
    ///
    /// ```
    /// use depengine_pool::ThreadPool;
    /// use std::time::Duration;
    ///
    /// // Background work that comes at any time: spin no longer than the first 50 µs.
    /// let pool = ThreadPool::builder()
    ///     .threads(2)
    ///     .max_spin(Duration::from_micros(50))
    ///     .build()
    ///     .expect("threads start");
    /// assert_eq!(pool.install(|| 6 * 7), 42);
    /// ```
    pub fn max_spin(mut self, max: Duration) -> Self {
        self.max_spin = max;
        self
    }

    /// The capacity of each worker's run queue (rounded up to a power of two). A
    /// task spawned into a full queue runs inline, on the spawning thread (see
    /// [`never_inline`](Self::never_inline)).
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity;
        self
    }

    /// Never runs a task on the thread that spawns it. By default a saturated pool does:
    /// a spawn into a worker's full queue, or from outside into an injector already holding
    /// one queue capacity per worker, runs the task inline, since a growing backlog only costs
    /// memory. That is wrong for a spawner that holds a lock the task takes, or that must not
    /// be kept waiting: with this setting such a task goes to the injector, which then has no
    /// limit, and bounding what is spawned is the spawners' part (depengine's engine counts
    /// its pending ops).
    pub fn never_inline(mut self) -> Self {
        self.saturation = Saturation::Queue;
        self
    }

    /// Called by each worker with its index when it starts, before it runs any task (rayon's
    /// `start_handler`). A panic in it goes to the panic handler; the worker runs anyway.
    ///
    /// ```
    /// use depengine_pool::ThreadPool;
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&started);
    /// let pool = ThreadPool::builder()
    ///     .threads(2)
    ///     .on_thread_start(move |_index| {
    ///         counter.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()
    ///     .expect("threads start");
    /// drop(pool);
    /// assert_eq!(started.load(Ordering::Relaxed), 2);
    /// ```
    pub fn on_thread_start<F>(mut self, hook: F) -> Self
    where
        F: Fn(usize) + Send + Sync + 'static,
    {
        self.on_thread_start = Some(Arc::new(hook));
        self
    }

    /// Called by each worker with its index when it exits, after its last task (rayon's
    /// `exit_handler`). A panic in it goes to the panic handler.
    pub fn on_thread_exit<F>(mut self, hook: F) -> Self
    where
        F: Fn(usize) + Send + Sync + 'static,
    {
        self.on_thread_exit = Some(Arc::new(hook));
        self
    }

    /// Receives the panics of detached tasks (default: a `tracing` error event).
    pub fn panic_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(Box<dyn std::any::Any + Send>) + Send + Sync + 'static,
    {
        self.panic_handler = Some(Arc::new(handler));
        self
    }

    /// Starts the pool.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroThreads`] for `threads(0)`, [`BuildError::TooManyThreads`] above
    /// [`MAX_THREADS`]; [`BuildError::Spawn`] if a thread fails to start (the threads
    /// already started are stopped and joined).
    pub fn build(self) -> Result<ThreadPool, BuildError> {
        ThreadPool::start(&self)
    }

    /// Starts a pool that also carries items of type `T` unboxed (see [`Item`]).
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    pub fn build_for<T: Item>(self) -> Result<ThreadPool<T>, BuildError> {
        ThreadPool::start(&self)
    }

    pub(crate) fn thread_count(&self) -> Result<usize, BuildError> {
        match self.threads {
            Some(0) => Err(BuildError::ZeroThreads),
            Some(requested) if requested > MAX_THREADS => Err(BuildError::TooManyThreads {
                requested,
                max: MAX_THREADS,
            }),
            Some(threads) => Ok(threads),
            None => Ok(std::thread::available_parallelism()
                .map_or(1, usize::from)
                .min(MAX_THREADS)),
        }
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("threads", &self.threads)
            .field("thread_name", &self.thread_name)
            .field("stack_size", &self.stack_size)
            .field("pin_threads", &self.pin_threads)
            .field("max_spin", &self.max_spin)
            .field("queue_capacity", &self.queue_capacity)
            .field("saturation", &self.saturation)
            .field("panic_handler", &self.panic_handler.is_some())
            .field("on_thread_start", &self.on_thread_start.is_some())
            .field("on_thread_exit", &self.on_thread_exit.is_some())
            .finish()
    }
}
