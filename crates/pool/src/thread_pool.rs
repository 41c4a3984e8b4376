//! `ThreadPool`: the handle users hold; spawning, `install` and shutdown.

use crate::builder::{BuildError, Builder, ThreadHook};
use crate::item::{Item, Work};
use crate::job::{JobRef, StackJob};
use crate::unwind::{self, PanicHandler};
use crate::worker::Shared;
use depengine_sync::{Arc, Mutex, lock, thread};
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::panic::{self, AssertUnwindSafe};

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
///
/// A pool can also carry values of its own item type `T` unboxed, beside closures
/// ([`Item`], [`submit`](Self::submit)); `join`, `scope`, `install` and `parallel_for` are
/// for the closure-only pool, `ThreadPool<Infallible>` (the default).
pub struct ThreadPool<T: Item = Infallible> {
    pub(crate) shared: Arc<Shared<T>>,
    /// The workers not yet joined; taken by the first `shut_down_and_join` (or the drop).
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
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
        self.shared.inject_job(unsafe { job.as_job_ref() });
        job.latch.wait();
        match job.into_result() {
            Ok(value) => value,
            Err(payload) => panic::resume_unwind(payload),
        }
    }
}

impl<T: Item> ThreadPool<T> {
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
        let shared = Arc::new(Shared::new(
            threads,
            builder.queue_capacity,
            builder.saturation,
            builder.max_spin,
            handler,
        ));
        let cores = if builder.pin_threads {
            core_ids()
        } else {
            Vec::new()
        };
        let pool = ThreadPool {
            shared,
            threads: Mutex::new(Vec::with_capacity(threads)),
        };
        for index in 0..threads {
            let mut spawner =
                thread::Builder::new().name(format!("{}-{index}", builder.thread_name));
            if let Some(bytes) = builder.stack_size {
                spawner = spawner.stack_size(bytes);
            }
            let shared = Arc::clone(&pool.shared);
            let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
            let (on_start, on_exit) = (
                builder.on_thread_start.clone(),
                builder.on_thread_exit.clone(),
            );
            let main: WorkerMain = Box::new(move || {
                pin_to(core);
                call_hook(&shared, on_start.as_ref(), index);
                shared.run_worker(index);
                call_hook(&shared, on_exit.as_ref(), index);
            });
            match spawn(spawner, main) {
                Ok(handle) => lock(&pool.threads).push(handle),
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
    ///
    /// The task may outlive the caller, so it owns what it uses (`'static`): it cannot borrow
    /// the caller's locals (move them in, or use [`scope`](Self::scope)):
    ///
    /// ```compile_fail,E0373
    /// # let pool = depengine_pool::ThreadPool::new(2)?;
    /// let counts = vec![1, 2, 3];
    /// pool.spawn(|| println!("{}", counts.len())); // borrows `counts`
    /// # Ok::<(), depengine_pool::BuildError>(())
    /// ```
    pub fn spawn<F>(&self, task: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.shared.inject_job(JobRef::boxed_static(task));
    }

    /// Queues `item`, unboxed, as [`spawn`](Self::spawn) queues a task: to the front of the
    /// calling worker's queue, or to the injector from any other thread; a worker runs it
    /// with [`Item::run`].
    #[inline]
    pub fn submit(&self, item: T) {
        self.shared.inject(Work::Item(item));
    }

    /// Queues `item` as [`submit`](Self::submit) does, except on a worker of this pool whose
    /// queue is full: there the item runs right away, before this returns (as a task spawned
    /// into a full queue does in a pool that may run tasks inline; an item run that way never
    /// has one run nested inside it again). For a caller that holds nothing the item could
    /// need, and whose thread is better used running queued work than queueing more: a task
    /// that releases a large batch of items starts running them at once.
    #[inline]
    pub fn submit_or_run(&self, item: T) {
        self.shared.inject_or_run(Work::Item(item));
    }

    /// As [`submit_or_run`](Self::submit_or_run), but an item run right away is run by `run`
    /// rather than [`Item::run`]: for a caller that has at hand what the item's own `run`
    /// would have to look up (the engine, which runs an op it releases with the state it
    /// completed the releasing op with). A panic in `run` goes to the pool's panic handler,
    /// as one in `Item::run` does.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine_pool::{Item, ThreadPool};
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::mpsc::channel;
    ///
    /// struct Count(Arc<AtomicUsize>);
    ///
    /// impl Item for Count {
    ///     fn run(self) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// let pool = Arc::new(
    ///     ThreadPool::builder()
    ///         .threads(1)
    ///         .queue_capacity(4)
    ///         .build_for::<Count>()
    ///         .unwrap(),
    /// );
    /// let count = Arc::new(AtomicUsize::new(0));
    /// let (tx, rx) = channel();
    /// let (inner, total) = (Arc::clone(&pool), Arc::clone(&count));
    /// pool.spawn(move || {
    ///     // On the worker: four items fill its queue, the other four run at once, here.
    ///     let mut ran_here = 0;
    ///     for _ in 0..8 {
    ///         inner.submit_or_run_with(Count(Arc::clone(&total)), |item| {
    ///             ran_here += 1;
    ///             item.run();
    ///         });
    ///     }
    ///     tx.send(ran_here).unwrap();
    /// });
    /// assert_eq!(rx.recv().unwrap(), 4);
    /// pool.shut_down_and_join(); // runs the four queued
    /// assert_eq!(count.load(Ordering::Relaxed), 8);
    /// ```
    #[inline]
    pub fn submit_or_run_with(&self, item: T, run: impl FnOnce(T)) {
        self.shared.inject_item_or_run(item, run);
    }

    /// The item the calling worker keeps to run next ([`submit_next`](Self::submit_next)),
    /// taken out of its slot for the caller to run right here: for an item's own
    /// [`Item::run`], which can then run the successors it releases in a loop instead of
    /// returning to the worker's loop for each. `None` from outside the pool, or when the
    /// worker keeps nothing or a closure.
    #[expect(
        clippy::inline_always,
        reason = "called once per op that a burst runs inline; `docs/decisions.md`, \"The kept successor, taken back by the runner\""
    )]
    #[inline(always)]
    pub fn take_kept(&self) -> Option<T> {
        self.shared.take_kept_item()
    }

    /// Queues `item` as [`spawn_next`](Self::spawn_next) queues a task: next on the calling
    /// worker, after the task running now.
    #[inline]
    pub fn submit_next(&self, item: T) {
        self.shared.inject_next(Work::Item(item));
    }

    /// Runs `task` on the pool, detached, as soon as possible on the calling worker: from one
    /// of the pool's workers, `task` runs on that worker right after the task running now
    /// returns (its data is still in this core's cache), and no other worker can take it, nor
    /// is one woken for it (tokio's LIFO slot). A worker keeps one such task: a second
    /// `spawn_next` before the first one ran, or a call from any other thread, is a
    /// [`spawn`](Self::spawn).
    ///
    /// Meant for a task that the running one makes ready as it ends (the engine's released
    /// successor): kept until the current task returns, the task waits for all of it.
    ///
    /// ```
    /// use depengine_pool::ThreadPool;
    /// use std::sync::{Arc, mpsc};
    ///
    /// let mut pool = Arc::new(ThreadPool::new(2).expect("threads start"));
    /// let (tx, rx) = mpsc::channel();
    /// let inner = Arc::clone(&pool);
    /// pool.spawn(move || {
    ///     let me = inner.current_thread_index();
    ///     let check = Arc::clone(&inner);
    ///     inner.spawn_next(move || tx.send(me == check.current_thread_index()).unwrap());
    /// });
    /// assert!(rx.recv().unwrap(), "a kept task runs on the worker that kept it");
    /// // The tasks drop their handles as they finish; the last one, dropped here, joins the
    /// // workers (a pool dropped by its own worker could not).
    /// let pool = loop {
    ///     match Arc::try_unwrap(pool) {
    ///         Ok(pool) => break pool,
    ///         Err(shared) => {
    ///             pool = shared;
    ///             std::thread::yield_now();
    ///         }
    ///     }
    /// };
    /// drop(pool);
    /// ```
    pub fn spawn_next<F>(&self, task: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.shared
            .inject_next(Work::Job(JobRef::boxed_static(task)));
    }

    /// Runs queued tasks on the calling thread until none is queued, for a thread that stands
    /// in for a blocked worker (the engine's stand-ins): tasks from outside first, then one at a
    /// time from the back of each worker's queue. The calling thread stays no worker of the
    /// pool: what the tasks spawn goes to the injector, where the workers and this loop find
    /// it. From one of the pool's own workers, runs what that worker would find.
    pub fn help(&self) {
        match self.shared.current_index() {
            Some(index) => {
                while let Some(job) = self.shared.find_work(index) {
                    self.shared.execute(job);
                }
            }
            None => self.shared.help(),
        }
    }

    /// Whether any task is queued now (tasks kept by [`spawn_next`](Self::spawn_next) aside:
    /// they run on their worker before it does anything else).
    pub fn has_queued(&self) -> bool {
        self.shared.has_work()
    }

    /// Shuts the pool down and joins its workers, as dropping it does, for an owner that
    /// holds it behind a shared reference: every task already queued runs (with the tasks
    /// those spawn), then the workers exit. Called from one of the pool's own tasks, returns
    /// at once and the workers finish on their own, detached. Later calls return at once.
    ///
    /// Once this has begun, nothing may be submitted from outside the pool: no worker
    /// would be left to run it.
    pub fn shut_down_and_join(&self) {
        // See the shutdown protocol in `worker.rs`: the workers run what is queued, and
        // the last of them to go idle (or this thread, if they all are already) ends it.
        self.shared.shut_down();
        if self.shared.current_index().is_some() {
            // Called by one of its own tasks: the workers cannot all go idle until
            // this task returns, so joining them here would deadlock. They finish the
            // shutdown protocol (running every queued task) on their own, detached:
            // this worker, once idle, is the last one and terminates the pool.
            return;
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for handle in threads {
            // A worker never panics (tasks' and hooks' panics are caught), so this only
            // fails if the thread was killed some other way; nothing is left to clean up.
            let _ = handle.join();
        }
    }
}

impl<T: Item> Drop for ThreadPool<T> {
    fn drop(&mut self) {
        self.shut_down_and_join();
    }
}

/// Calls a worker's start or exit hook, if any; its panic goes to the panic handler.
fn call_hook<T: Item>(shared: &Shared<T>, hook: Option<&ThreadHook>, index: usize) {
    if let Some(hook) = hook
        && let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| hook(index)))
    {
        shared.handle_panic(payload);
    }
}

impl<T: Item> fmt::Debug for ThreadPool<T> {
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
        let result = ThreadPool::<std::convert::Infallible>::start_with(
            &ThreadPool::builder().threads(8),
            |spawner, main| {
                spawns += 1;
                if spawns == 4 {
                    return Err(io::Error::other("no thread for you"));
                }
                let exited = Arc::clone(&exited);
                spawner.spawn(move || {
                    main();
                    exited.fetch_add(1, Ordering::SeqCst);
                })
            },
        );
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
        let result = ThreadPool::<std::convert::Infallible>::start_with(
            &ThreadPool::builder().threads(2),
            |_, _| Err(io::Error::other("none")),
        );
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
        // `tests/it/loom/pool.rs`, which explains the settings and the count printed).
        let mut builder = loom::model::Builder::new();
        builder.max_branches = 100_000;
        builder.preemption_bound = Some(3);
        let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&executions);
        builder.check(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut spawns = 0;
            let result = ThreadPool::<std::convert::Infallible>::start_with(
                &ThreadPool::builder().threads(2),
                |spawner, main| {
                    spawns += 1;
                    if spawns == 2 {
                        return Err(std::io::Error::other("refused"));
                    }
                    spawner.spawn(main)
                },
            );
            assert!(matches!(result, Err(BuildError::Spawn { index: 1, .. })));
        });
        eprintln!(
            "Completed in {} iterations",
            executions.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
}
