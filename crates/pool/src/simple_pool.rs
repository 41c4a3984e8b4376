//! `SimplePool`: Eigen's `SimpleThreadPool`, the work-sharing baseline.
//!
//! One deque behind one mutex, shared by all workers; a condition variable wakes an
//! idle worker per task. Simple and fair, and every operation contends on the same
//! lock, which is what the work-stealing [`ThreadPool`](crate::ThreadPool) avoids.
//! Kept as the baseline of `cargo xtask bench pool`.

use crate::builder::{BuildError, MAX_THREADS};
use crate::unwind::{self, PanicHandler};
use depengine_sync::{Arc, Condvar, Mutex, lock, thread, wait};
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};

type Task = Box<dyn FnOnce() + Send>;

struct Queue {
    tasks: VecDeque<Task>,
    /// Workers blocked on `available`.
    idle: usize,
    done: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    available: Condvar,
    panic_handler: PanicHandler,
}

/// A mutex-and-condvar thread pool: the work-sharing baseline.
///
/// Dropping it runs every queued task, then joins the threads.
///
/// ```
/// use depengine_pool::SimplePool;
/// use std::sync::mpsc;
///
/// let pool = SimplePool::new(2).unwrap();
/// let (tx, rx) = mpsc::channel();
/// pool.spawn(move || tx.send(42).unwrap());
/// assert_eq!(rx.recv().unwrap(), 42);
/// ```
pub struct SimplePool {
    shared: Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl SimplePool {
    /// Starts `threads` workers.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroThreads`], [`BuildError::TooManyThreads`] above
    /// [`MAX_THREADS`], or [`BuildError::Spawn`] if a thread fails to start (those already
    /// started are joined).
    pub fn new(threads: usize) -> Result<Self, BuildError> {
        if threads == 0 {
            return Err(BuildError::ZeroThreads);
        }
        if threads > MAX_THREADS {
            return Err(BuildError::TooManyThreads {
                requested: threads,
                max: MAX_THREADS,
            });
        }
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                tasks: VecDeque::new(),
                idle: 0,
                done: false,
            }),
            available: Condvar::new(),
            panic_handler: std::sync::Arc::new(unwind::log_panic),
        });
        let mut pool = SimplePool {
            shared,
            threads: Vec::with_capacity(threads),
        };
        for index in 0..threads {
            let shared = Arc::clone(&pool.shared);
            let spawned = thread::Builder::new()
                .name(format!("depengine-simple-{index}"))
                .spawn(move || shared.run_worker());
            match spawned {
                Ok(handle) => pool.threads.push(handle),
                Err(source) => return Err(BuildError::Spawn { index, source }),
            }
        }
        Ok(pool)
    }

    /// The number of worker threads.
    pub fn num_threads(&self) -> usize {
        self.threads.len()
    }

    /// Queues `task`; an idle worker, if any, is woken for it.
    pub fn spawn<F>(&self, task: F)
    where
        F: FnOnce() + Send + 'static,
    {
        let mut queue = lock(&self.shared.queue);
        queue.tasks.push_back(Box::new(task));
        let wake = queue.idle > 0;
        drop(queue);
        if wake {
            self.shared.available.notify_one();
        }
    }
}

impl Shared {
    fn run_worker(&self) {
        let mut queue = lock(&self.queue);
        loop {
            if let Some(task) = queue.tasks.pop_front() {
                drop(queue);
                if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(task)) {
                    let _ = panic::catch_unwind(AssertUnwindSafe(|| (self.panic_handler)(payload)));
                }
                queue = lock(&self.queue);
            } else if queue.done {
                return;
            } else {
                queue.idle += 1;
                queue = wait(&self.available, queue);
                queue.idle -= 1;
            }
        }
    }
}

impl Drop for SimplePool {
    fn drop(&mut self) {
        lock(&self.shared.queue).done = true;
        self.shared.available.notify_all();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for SimplePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimplePool")
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}
