//! Configuring and starting a [`ThreadPool`].

use crate::ThreadPool;
use crate::run_queue::DEFAULT_CAPACITY;
use crate::unwind::PanicHandler;
use std::sync::Arc;

/// The most worker threads a pool may have.
///
/// Far more than any machine has cores: a count above it is a mistake (a typo, a unit
/// mix-up), and it fails at once with [`BuildError::TooManyThreads`] rather than running
/// into the operating system's thread limit, or starting a pool whose idle workers each
/// scan every other worker's queue before they sleep. The default thread count (the
/// available parallelism) is capped at it.
pub const MAX_THREADS: usize = 4096;

/// Why a pool could not start.
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
    pub(crate) queue_capacity: usize,
    pub(crate) panic_handler: Option<PanicHandler>,
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
            queue_capacity: DEFAULT_CAPACITY,
            panic_handler: None,
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

    /// The capacity of each worker's run queue (rounded up to a power of two). A
    /// task spawned into a full queue runs inline, on the spawning thread.
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity;
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
            .field("queue_capacity", &self.queue_capacity)
            .field("panic_handler", &self.panic_handler.is_some())
            .finish()
    }
}
