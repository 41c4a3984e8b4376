//! [`WorkerBlock`]: a block of CPU workers on depengine-pool.

use std::fmt;

use depengine_device::{Executor, Task};
use depengine_pool::{Builder, Item, ThreadPool};
use std::convert::Infallible;
use std::time::Duration;

use crate::BlockError;

/// A block of CPU workers (MXNet's `ThreadWorkerBlock<kWorkerQueue>`) on a work-stealing
/// [`ThreadPool`].
///
/// [`spawn`](Self::spawn) from one of the block's own workers pushes to the front of that
/// worker's queue (a task spawned by the task running now runs soon, on the same core, unless
/// an idle worker steals it first); from any other thread, to the pool's injector queue, which
/// idle workers poll. A task never runs on the thread that spawns it (a full worker queue
/// overflows into the injector): the spawner may hold a lock the task takes. Dropping the
/// block (or
/// [`shut_down_and_join`](Self::shut_down_and_join)) runs every task already submitted, then
/// joins the threads.
///
/// # Examples
///
/// ```
/// use depengine_cpu::WorkerBlock;
/// use std::sync::mpsc;
///
/// let block = WorkerBlock::new("example", 2).expect("threads start");
/// let (tx, rx) = mpsc::channel();
/// block.spawn(move || tx.send(21 * 2).unwrap());
/// assert_eq!(rx.recv().unwrap(), 42);
/// ```
///
/// A block can also run values of an item type `T` of its owner's, queued unboxed
/// ([`submit`](Self::submit), [`Item`]): the engine's ready ops.
pub struct WorkerBlock<T: Item = Infallible> {
    name: String,
    pool: ThreadPool<T>,
}

/// A hook a worker of a block calls with its index (see [`BlockOptions`]).
///
/// # Examples
///
/// ```
/// use depengine_cpu::{BlockOptions, WorkerBlock, WorkerHook};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let exited = Arc::new(AtomicUsize::new(0));
/// let counter = Arc::clone(&exited);
/// let on_exit: WorkerHook = Box::new(move |_index| {
///     counter.fetch_add(1, Ordering::Relaxed);
/// });
/// let options = BlockOptions { on_exit: Some(on_exit), ..BlockOptions::default() };
/// let block: WorkerBlock = WorkerBlock::with_options("hooked", 2, options)?;
/// block.shut_down_and_join();
/// // Each worker called the hook once, after its last task.
/// assert_eq!(exited.load(Ordering::Relaxed), 2);
/// # Ok::<(), depengine_cpu::BlockError>(())
/// ```
pub type WorkerHook = Box<dyn Fn(usize) + Send + Sync>;

/// How a block's workers start, beyond the block's name and size
/// ([`WorkerBlock::with_options`]); the default: no hooks, workers not pinned.
///
/// # Examples
///
/// ```
/// use depengine_cpu::{BlockOptions, WorkerBlock};
/// use std::sync::mpsc;
///
/// let (started, workers) = mpsc::channel();
/// let started = std::sync::Mutex::new(started);
/// let options = BlockOptions {
///     on_start: Some(Box::new(move |index| started.lock().unwrap().send(index).unwrap())),
///     pin_threads: true,
///     ..BlockOptions::default()
/// };
/// let block: WorkerBlock = WorkerBlock::with_options("pinned", 2, options).expect("threads start");
/// let mut indices: Vec<usize> = workers.iter().take(2).collect();
/// indices.sort();
/// assert_eq!(indices, [0, 1]);
/// drop(block);
/// ```
#[derive(Default)]
pub struct BlockOptions {
    /// Called by each worker with its index when it starts (before its first task): how an
    /// owner gives the workers per-thread state, such as a reference to what their tasks
    /// belong to. Such a reference lives as long as the workers: an owner that the workers'
    /// hooks keep alive must end the block with
    /// [`shut_down_and_join`](WorkerBlock::shut_down_and_join).
    pub on_start: Option<WorkerHook>,
    /// Called by each worker with its index when it exits (after its last task).
    pub on_exit: Option<WorkerHook>,
    /// Pins worker `i` to core `i % cores` (`depengine_pool`'s `Builder::pin_threads`): a core
    /// that cannot be pinned is a `tracing` warning, and the worker runs unpinned.
    pub pin_threads: bool,
    /// How long, at most, a worker searches for work before it sleeps (`depengine_pool`'s
    /// `Builder::max_spin`); `None`: the pool's default, `depengine_pool::DEFAULT_MAX_SPIN`.
    pub max_spin: Option<Duration>,
}

impl BlockOptions {
    /// The builder of a block's pool: `threads` workers named `<name>-<i>`, never running a
    /// task on the thread that submits it, with these options.
    pub(crate) fn pool_builder(self, name: &str, threads: usize) -> Result<Builder, BlockError> {
        if threads == 0 {
            return Err(BlockError::ZeroThreads {
                name: name.to_owned(),
            });
        }
        let mut builder = ThreadPool::builder()
            .threads(threads)
            .thread_name(name)
            .pin_threads(self.pin_threads)
            .never_inline();
        if let Some(max) = self.max_spin {
            builder = builder.max_spin(max);
        }
        if let Some(hook) = self.on_start {
            builder = builder.on_thread_start(hook);
        }
        if let Some(hook) = self.on_exit {
            builder = builder.on_thread_exit(hook);
        }
        Ok(builder)
    }
}

impl fmt::Debug for BlockOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockOptions")
            .field("on_start", &self.on_start.is_some())
            .field("on_exit", &self.on_exit.is_some())
            .field("pin_threads", &self.pin_threads)
            .field("max_spin", &self.max_spin)
            .finish()
    }
}

impl WorkerBlock {
    /// Starts a block of `threads` workers named `<name>-<i>`.
    ///
    /// # Errors
    ///
    /// [`BlockError::ZeroThreads`] for `threads == 0`, [`BlockError::TooManyThreads`] above
    /// [`depengine_pool::MAX_THREADS`], [`BlockError::Spawn`] if a thread could not start
    /// (the threads already started are shut down and joined).
    pub fn new(name: &str, threads: usize) -> Result<Self, BlockError> {
        Self::with_options(name, threads, BlockOptions::default())
    }
}

impl<T: Item> WorkerBlock<T> {
    /// As [`new`](Self::new), with `options` (hooks, pinning).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn with_options(
        name: &str,
        threads: usize,
        options: BlockOptions,
    ) -> Result<Self, BlockError> {
        let builder = options.pool_builder(name, threads)?;
        let pool = builder
            .build_for::<T>()
            .map_err(|error| BlockError::from_pool(name, error))?;
        Ok(WorkerBlock {
            name: name.to_owned(),
            pool,
        })
    }

    /// Runs `task` on the block (see the type's documentation for where it is queued).
    #[inline]
    pub fn spawn<F>(&self, task: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.pool.spawn(task);
    }

    /// Queues `item`, unboxed, as [`spawn`](Self::spawn) queues a task; a worker runs it with
    /// [`Item::run`].
    #[inline]
    pub fn submit(&self, item: T) {
        self.pool.submit(item);
    }

    /// Queues `item`, or on a worker of the block whose queue is full runs it at once (see
    /// [`ThreadPool::submit_or_run`]): only for a caller that holds nothing the item needs.
    #[inline]
    pub fn submit_or_run(&self, item: T) {
        self.pool.submit_or_run(item);
    }

    /// As [`submit_or_run`](Self::submit_or_run), an item run at once being run by `run` (see
    /// [`ThreadPool::submit_or_run_with`]).
    #[inline]
    pub fn submit_or_run_with(&self, item: T, run: impl FnOnce(T)) {
        self.pool.submit_or_run_with(item, run);
    }

    /// The item the calling worker keeps to run next, taken for the caller to run (see
    /// [`ThreadPool::take_kept`]).
    #[expect(
        clippy::inline_always,
        reason = "called once per op that a burst runs inline; `docs/decisions.md`, \"The kept successor, taken back by the runner\""
    )]
    #[inline(always)]
    pub fn take_kept(&self) -> Option<T> {
        self.pool.take_kept()
    }

    /// Queues `item` as [`spawn_next`](Self::spawn_next) queues a task: next on the calling
    /// worker if it is one of the block's.
    #[inline]
    pub fn submit_next(&self, item: T) {
        self.pool.submit_next(item);
    }

    /// Runs `task` on the block, next on the calling worker if it is one of the block's
    /// (after the task running now returns, unless it keeps one already), else as
    /// [`spawn`](Self::spawn). See [`ThreadPool::spawn_next`].
    #[inline]
    pub fn spawn_next<F>(&self, task: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.pool.spawn_next(task);
    }

    /// Runs the block's queued tasks on the calling thread until none is queued: for a thread
    /// standing in for a blocked worker. See [`ThreadPool::help`].
    pub fn help(&self) {
        self.pool.help();
    }

    /// Whether tasks are queued on the block now.
    pub fn has_queued(&self) -> bool {
        self.pool.has_queued()
    }

    /// Runs every task already submitted, then joins the threads, as dropping the block does
    /// (see [`ThreadPool::shut_down_and_join`]). Nothing may be spawned from outside the block
    /// afterwards.
    pub fn shut_down_and_join(&self) {
        self.pool.shut_down_and_join();
    }

    /// Whether the calling thread is one of this block's workers.
    #[inline]
    pub fn is_current(&self) -> bool {
        self.pool.current_thread_index().is_some()
    }

    /// The number of worker threads.
    pub fn num_threads(&self) -> usize {
        self.pool.num_threads()
    }

    /// The block's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Spawns the task ([`WorkerBlock::spawn`]); a worker block is FIFO, `priority` is ignored.
impl<T: Item> Executor for WorkerBlock<T> {
    fn execute(&self, _priority: i32, task: Task) {
        self.spawn(task);
    }
}

impl<T: Item> fmt::Debug for WorkerBlock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerBlock")
            .field("name", &self.name)
            .field("threads", &self.num_threads())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::WorkerBlock;
    use crate::BlockError;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn zero_threads_is_an_error() {
        assert!(matches!(
            WorkerBlock::new("zero", 0),
            Err(BlockError::ZeroThreads { .. })
        ));
    }

    #[test]
    fn more_than_max_threads_is_an_error() {
        let requested = depengine_pool::MAX_THREADS + 1;
        match WorkerBlock::new("many", requested) {
            Err(BlockError::TooManyThreads {
                name,
                requested: got,
                max,
            }) => {
                assert_eq!(name, "many");
                assert_eq!((got, max), (requested, depengine_pool::MAX_THREADS));
            }
            other => panic!("expected TooManyThreads, got {other:?}"),
        }
    }

    #[test]
    fn drop_runs_every_task() {
        let ran = Arc::new(AtomicUsize::new(0));
        let block = WorkerBlock::new("drop-test", 2).unwrap();
        assert_eq!(block.num_threads(), 2);
        assert!(!block.is_current());
        for _ in 0..1000 {
            let ran = Arc::clone(&ran);
            block.spawn(move || {
                ran.fetch_add(1, Ordering::Relaxed);
            });
        }
        drop(block);
        assert_eq!(ran.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn knows_its_own_workers() {
        let block = Arc::new(WorkerBlock::new("current-test", 1).unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let inner = Arc::clone(&block);
        block.spawn(move || tx.send(inner.is_current()).unwrap());
        assert!(rx.recv().unwrap());
    }
}
