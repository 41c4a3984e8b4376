//! `ThreadPool`: the handle users hold; spawning, `install` and shutdown.

use crate::builder::{BuildError, Builder};
use crate::job::{JobRef, StackJob};
use crate::unwind::{self, PanicHandler};
use crate::worker::Shared;
use depengine_sync::{Arc, thread};
use std::fmt;
use std::io;
use std::panic;

/// A worker thread's body, as `ThreadPool::start_with` hands it to its spawn function.
type WorkerMain = Box<dyn FnOnce() + Send + 'static>;

/// A work-stealing thread pool in the design of Eigen's `NonBlockingThreadPool`.
///
/// Each worker owns a [`RunQueue`](crate::RunQueue): tasks spawned by a worker go to
/// the front of its own queue, tasks from outside to a shared injector queue; idle
/// workers take from the injector and steal from the backs of the others, and sleep on an
/// [`EventCount`](crate::EventCount) when there is nothing anywhere. See `worker.rs`
/// for the algorithm and the shutdown protocol.
///
/// Dropping the pool runs every task already queued (and every task those spawn),
/// then joins the threads: no task is ever lost.
///
/// # Examples
///
/// ```
/// use depengine_pool::ThreadPool;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let pool = ThreadPool::new(2).expect("threads start");
/// let sum = AtomicUsize::new(0);
/// pool.scope(|s| {
///     for i in 1..=10 {
///         let sum = &sum;
///         s.spawn(move |_| {
///             sum.fetch_add(i, Ordering::Relaxed);
///         });
///     }
/// });
/// assert_eq!(sum.into_inner(), 55);
///
/// let (a, b) = pool.join(|| 1 + 1, || 2 + 2);
/// assert_eq!((a, b), (2, 4));
/// ```
pub struct ThreadPool {
    pub(crate) shared: Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl ThreadPool {
    /// A pool of `threads` workers with the default settings.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`].
    pub fn new(threads: usize) -> Result<Self, BuildError> {
        Builder::new().threads(threads).build()
    }

    /// A [`Builder`] to configure a pool.
    pub fn builder() -> Builder {
        Builder::new()
    }

    pub(crate) fn start(builder: &Builder) -> Result<Self, BuildError> {
        Self::start_with(builder, thread::Builder::spawn)
    }

    /// [`start`](Self::start), with each worker's thread started by `spawn` (the unit
    /// tests' hook to make a spawn fail).
    fn start_with(
        builder: &Builder,
        mut spawn: impl FnMut(thread::Builder, WorkerMain) -> io::Result<thread::JoinHandle<()>>,
    ) -> Result<Self, BuildError> {
        let threads = builder.thread_count()?;
        let handler: PanicHandler = builder
            .panic_handler
            .clone()
            .unwrap_or_else(|| std::sync::Arc::new(unwind::log_panic));
        let shared = Arc::new(Shared::new(threads, builder.queue_capacity, handler));
        let cores = if builder.pin_threads {
            core_ids()
        } else {
            Vec::new()
        };
        let mut pool = ThreadPool {
            shared,
            threads: Vec::with_capacity(threads),
        };
        for index in 0..threads {
            let mut spawner =
                thread::Builder::new().name(format!("{}-{index}", builder.thread_name));
            if let Some(bytes) = builder.stack_size {
                spawner = spawner.stack_size(bytes);
            }
            let shared = Arc::clone(&pool.shared);
            let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
            let main: WorkerMain = Box::new(move || {
                pin_to(core);
                shared.run_worker(index);
            });
            match spawn(spawner, main) {
                Ok(handle) => pool.threads.push(handle),
                Err(source) => {
                    // Dropping `pool` shuts the started workers down and joins them.
                    pool.shared.count_unstarted_as_idle(index);
                    return Err(BuildError::Spawn { index, source });
                }
            }
        }
        Ok(pool)
    }

    /// The number of worker threads.
    pub fn num_threads(&self) -> usize {
        self.shared.queues.len()
    }

    /// The index (`0..num_threads()`) of the calling thread if it is a worker of this
    /// pool, `None` otherwise.
    pub fn current_thread_index(&self) -> Option<usize> {
        self.shared.current_index()
    }

    /// Runs `task` on the pool, detached. A panic in it goes to the panic handler
    /// (see [`Builder::panic_handler`]).
    ///
    /// From a worker, the task goes to the front of the worker's own queue (if that
    /// queue is full, the task runs inline, before `spawn` returns); from any other
    /// thread, to the pool's injector queue, which idle workers poll.
    pub fn spawn<F>(&self, task: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.shared.inject(JobRef::boxed_static(task));
    }

    /// Runs `op` on a worker of this pool and returns its result; runs it right away
    /// if the caller is already one. A panic in `op` resumes in the caller.
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        if self.shared.current_index().is_some() {
            return op();
        }
        let job = StackJob::new(op);
        // SAFETY: `job` stays in this frame until its latch is set: we wait for it
        // below, and `inject` either queues the reference (a worker runs it once) or
        // runs it inline before returning.
        self.shared.inject(unsafe { job.as_job_ref() });
        job.latch.wait();
        match job.into_result() {
            Ok(value) => value,
            Err(payload) => panic::resume_unwind(payload),
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        // See the shutdown protocol in `worker.rs`: the workers run what is queued, and
        // the last of them to go idle (or this thread, if they all are already) ends it.
        self.shared.shut_down();
        if self.shared.current_index().is_some() {
            // Dropped by one of its own tasks: the workers cannot all go idle until
            // this task returns, so joining them here would deadlock. They finish the
            // shutdown protocol (running every queued task) on their own, detached:
            // this worker, once idle, is the last one and terminates the pool.
            return;
        }
        for handle in self.threads.drain(..) {
            // A worker never panics (tasks' panics are caught), so this only fails if
            // the thread was killed some other way; nothing is left to clean up then.
            let _ = handle.join();
        }
    }
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool")
            .field("threads", &self.num_threads())
            .field("event", &self.shared.event)
            .finish_non_exhaustive()
    }
}

#[cfg(not(loom))]
fn core_ids() -> Vec<core_affinity::CoreId> {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    if cores.is_empty() {
        tracing::warn!(target: "depengine_pool", "core pinning requested but no core ids are available");
    }
    cores
}

#[cfg(loom)]
fn core_ids() -> Vec<usize> {
    Vec::new()
}

#[cfg(not(loom))]
fn pin_to(core: Option<core_affinity::CoreId>) {
    if let Some(core) = core
        && !core_affinity::set_for_current(core)
    {
        tracing::warn!(target: "depengine_pool", core = core.id, "could not pin a worker");
    }
}

#[cfg(loom)]
fn pin_to(_core: Option<usize>) {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::ThreadPool;
    use crate::BuildError;
    use std::io;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A worker whose thread cannot start: `build` returns `Spawn` (no hang), after the
    /// workers already started were shut down and joined.
    #[test]
    fn a_worker_that_cannot_start_is_an_error_and_the_started_ones_are_joined() {
        let exited = Arc::new(AtomicUsize::new(0));
        let mut spawns = 0;
        let result = ThreadPool::start_with(&ThreadPool::builder().threads(8), |spawner, main| {
            spawns += 1;
            if spawns == 4 {
                return Err(io::Error::other("no thread for you"));
            }
            let exited = Arc::clone(&exited);
            spawner.spawn(move || {
                main();
                exited.fetch_add(1, Ordering::SeqCst);
            })
        });
        match result {
            Err(BuildError::Spawn { index, source }) => {
                assert_eq!(index, 3);
                assert_eq!(source.to_string(), "no thread for you");
            }
            other => panic!("expected a spawn error, got {other:?}"),
        }
        assert_eq!(spawns, 4, "no spawn after the failed one");
        // Joined before `start_with` returned.
        assert_eq!(exited.load(Ordering::SeqCst), 3);
    }

    /// The first spawn fails: nothing to shut down.
    #[test]
    fn a_pool_whose_first_worker_cannot_start_is_an_error() {
        let result = ThreadPool::start_with(&ThreadPool::builder().threads(2), |_, _| {
            Err(io::Error::other("none"))
        });
        assert!(matches!(result, Err(BuildError::Spawn { index: 0, .. })));
    }
}

/// loom: the pool's start fails at its second worker; the first one, already asleep or
/// about to be, must still exit (it counts with the unstarted one as idle), or the drop
/// inside `start_with` joins it forever (a deadlock).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::ThreadPool;
    use crate::BuildError;

    #[test]
    fn a_pool_whose_second_worker_cannot_start_shuts_the_first_down() {
        // A worker runs more atomic steps than loom's default branch budget (as in
        // `tests/loom_pool.rs`, which explains the settings and the count printed).
        let mut builder = loom::model::Builder::new();
        builder.max_branches = 100_000;
        builder.preemption_bound = Some(3);
        let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&executions);
        builder.check(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut spawns = 0;
            let result =
                ThreadPool::start_with(&ThreadPool::builder().threads(2), |spawner, main| {
                    spawns += 1;
                    if spawns == 2 {
                        return Err(std::io::Error::other("refused"));
                    }
                    spawner.spawn(main)
                });
            assert!(matches!(result, Err(BuildError::Spawn { index: 1, .. })));
        });
        eprintln!(
            "Completed in {} iterations",
            executions.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
}
