//! [`WorkerBlock`]: a block of CPU workers on depengine-pool.

use std::fmt;

use depengine_device::{Executor, Task};
use depengine_pool::{BuildError, ThreadPool};

use crate::BlockError;

/// A block of CPU workers (MXNet's `ThreadWorkerBlock<kWorkerQueue>`) on a work-stealing
/// [`ThreadPool`].
///
/// [`spawn`](Self::spawn) from one of the block's own workers pushes to the front of that
/// worker's queue (the task runs next, on the same core); from any other thread, to the pool's
/// injector queue, which idle workers poll. Dropping the block runs every task already
/// submitted, then joins the threads.
pub struct WorkerBlock {
    name: String,
    pool: ThreadPool,
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
        if threads == 0 {
            return Err(BlockError::ZeroThreads {
                name: name.to_owned(),
            });
        }
        let pool = ThreadPool::builder()
            .threads(threads)
            .thread_name(name)
            .build()
            .map_err(|error| match error {
                BuildError::TooManyThreads { requested, max } => BlockError::TooManyThreads {
                    name: name.to_owned(),
                    requested,
                    max,
                },
                other => BlockError::Spawn {
                    name: name.to_owned(),
                    message: other.to_string(),
                },
            })?;
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
impl Executor for WorkerBlock {
    fn execute(&self, _priority: i32, task: Task) {
        self.spawn(task);
    }
}

impl fmt::Debug for WorkerBlock {
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
