//! The workers: what each pool thread runs, how it finds work, sleeps and shuts down.
//!
//! # Finding work
//!
//! A worker looks, in order, at
//! 1. its next-task slot (`context.rs`), then the front of its own queue (its own newest
//!    spawns: LIFO, cache-hot);
//! 2. the injector, where threads outside the pool submit (FIFO);
//! 3. the backs of the other queues, visited from a random start with a random stride
//!    coprime with the worker count (each visited once, thieves spread out), stealing
//!    about half of the first non-empty one (`RunQueue::pop_back_half`);
//! 4. the same search for a while longer (`spinners` counts the workers doing so): a
//!    worker that has just run out of work is likely to get more within microseconds
//!    (the released successors of the ops it ran, the next of a stream of pushes), and
//!    sleeping costs a futex wait now and a futex wake for whoever pushes next. Every idle
//!    worker spins: with only one spinner allowed, a worker that found the spinner's role
//!    taken went straight to sleep, and a stream of pushes about one worker's pace woke it
//!    once per push (on the engine's `independent` workload, 38 400 futex calls and 25 700
//!    context switches for 2·10^6 ops, against 4 400 and 2 900 with every idle worker
//!    spinning). A push that sees a spinner wakes nobody, counting on it; so a worker that
//!    leaves the idle path (spinning or sleeping) with a job and still sees work queued
//!    wakes a sleeper for that work, which does the same in turn (otherwise a second job
//!    pushed while one worker spun would wait for the first one to finish while the other
//!    workers sleep);
//! 5. the sleep protocol below.
//!
//! # Sleeping
//!
//! ```text
//!   event.prewait(me)                     // announce (Dekker write + SeqCst fence)
//!   if some queue or the injector holds work: // neither misses a completed push
//!       event.cancel_wait(me); look again
//!   else if shutting down: see below
//!   else:
//!       blocked += 1; event.commit_wait(me); blocked -= 1
//! ```
//!
//! Every push is followed by `event.notify(false)` (write, `SeqCst` fence, read the
//! waiters), so a push is never stranded while every worker sleeps.
//!
//! # Shutdown protocol
//!
//! `ThreadPool::drop` sets `done` and calls `event.notify(true)`, then joins the workers.
//! A worker exits only when `done` is set, no queue holds work, and *every* live worker
//! is in the sleep protocol (`blocked == live_workers`): while any worker still runs a
//! task, that task may spawn more, and the sleeping workers must stay around to help.
//! The worker that completes the count exits without decrementing `blocked` and wakes
//! everyone (`notify(true)`); each woken worker finds the count complete again and
//! exits the same way. Nothing is ever left in a queue: a worker only exits after a
//! check, made after its `prewait`, that every queue is empty, and no new task can be
//! submitted from outside once `drop` has begun (it owns the pool).
//! A worker's own queue is bounded: a spawn from a worker whose queue is full runs the
//! task inline (once: what that task spawns into the still full queue goes to the
//! injector). The injector is unbounded; outside submissions beyond the pool's
//! `injector_limit` run inline on the submitter, unless the pool has no limit.

use crate::builder::Saturation;
use crate::context;
use crate::event_count::EventCount;
use crate::injector::Injector;
use crate::item::{Item, Work};
use crate::job::{JobRef, Panic};
use crate::latch::Latch;
use crate::rng;
use crate::run_queue::RunQueue;
use crate::unwind::PanicHandler;
use depengine_sync::{AtomicBool, AtomicUsize, Backoff, CachePadded, UnsafeCell, fence, spin_hint};
use std::convert::Infallible;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

/// The most looks a spinning worker makes before it goes to sleep (see `SPIN_TIME`).
const SPIN_ROUNDS: usize = if cfg!(loom) {
    0
} else if cfg!(miri) {
    8
} else {
    1000
};

/// How long a worker spins, at most, before it goes to sleep.
const SPIN_TIME: std::time::Duration = std::time::Duration::from_micros(50);

/// The longest wait between two looks of a spinning worker, in spin-loop hints; the wait starts
/// at one hint and doubles after each look. A look reads the injector's indices, which a
/// thread pushing from outside writes on every push: polling them back to back pulls those
/// lines away from the pusher between two of its pushes (on 2 cores, with both workers idle
/// and spinning, the pusher of the engine's `independent` workload lost a quarter of its
/// time to such misses).
const MAX_PAUSES_PER_LOOK: u32 = 64;

/// The most tasks one steal moves; bounds the time a thief holds a victim's lock.
const MAX_STEAL: usize = 64;

/// State shared by the pool handle and its workers.
pub(crate) struct Shared<T = Infallible> {
    /// One queue per worker; worker `i` owns the front of `queues[i]`.
    pub(crate) queues: Box<[RunQueue<Work<T>>]>,
    /// One next-task slot per worker (`context.rs`); worker `i` alone touches `next[i]`.
    next: Box<[CachePadded<NextSlot<T>>]>,
    /// Work submitted from outside the pool.
    injector: Injector<Work<T>>,
    /// Outside submissions beyond this backlog run inline on the submitter, like a
    /// spawn into a full `RunQueue`: the pool is saturated, and a growing backlog
    /// only costs memory and cache misses. One queue capacity per worker; `None` for a pool
    /// that never runs a task inline (`Builder::never_inline`).
    injector_limit: Option<usize>,
    /// Whether a spawn into a worker's full queue runs the task inline.
    inline_when_full: bool,
    /// Where idle workers sleep.
    pub(crate) event: EventCount,
    /// Workers spinning now (step 4 above). Changed by idle workers only.
    spinners: CachePadded<AtomicUsize>,
    /// Set once by `ThreadPool::drop`; read by idle workers.
    done: AtomicBool,
    /// Workers inside the sleep protocol; see the shutdown protocol.
    blocked: AtomicUsize,
    /// Workers that were started (all of them, unless a spawn failed).
    live_workers: AtomicUsize,
    /// Strides coprime with the worker count, for victim order.
    strides: Box<[usize]>,
    panic_handler: PanicHandler,
}

/// A worker's next-task slot: what it runs as soon as the task running now returns.
struct NextSlot<T>(UnsafeCell<Option<Work<T>>>);

// SAFETY: slot `i` is touched only by worker `i` (`Shared::keep_next` and `Shared::take_next`
// check that the calling thread is that worker), so no two threads ever access one slot; the
// work in it moves between threads only as a queued item would (`T: Send`).
unsafe impl<T: Send> Sync for NextSlot<T> {}

impl<T: Item> Shared<T> {
    pub(crate) fn new(
        threads: usize,
        queue_capacity: usize,
        saturation: Saturation,
        panic_handler: PanicHandler,
    ) -> Self {
        let inline = saturation == Saturation::RunInline;
        Self {
            queues: (0..threads)
                .map(|_| RunQueue::with_capacity(queue_capacity))
                .collect(),
            next: (0..threads)
                .map(|_| CachePadded::new(NextSlot(UnsafeCell::new(None))))
                .collect(),
            injector: Injector::new(),
            injector_limit: inline.then(|| threads.saturating_mul(queue_capacity)),
            inline_when_full: inline,
            event: EventCount::new(threads),
            spinners: CachePadded::new(AtomicUsize::new(0)),
            done: AtomicBool::new(false),
            blocked: AtomicUsize::new(0),
            live_workers: AtomicUsize::new(threads),
            strides: rng::coprimes(threads),
            panic_handler,
        }
    }

    /// The index of the current thread in this pool, if it is one of its workers.
    #[inline]
    pub(crate) fn current_index(&self) -> Option<usize> {
        context::worker_index(self.address())
    }

    /// This pool's identity in the workers' contexts.
    fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Submits work: to the front of the current worker's queue, or to the injector from
    /// outside the pool. A full queue (an injector holding `injector_limit` jobs) runs the
    /// work inline, unless the pool never does (`inline_when_full`, see `inject_or_run`).
    #[inline]
    pub(crate) fn inject(&self, work: Work<T>) {
        self.inject_with(work, self.inline_when_full);
    }

    /// As `inject`, but a worker whose queue is full runs the work inline whatever the pool's
    /// setting (for a caller that knows it holds nothing the work could need).
    #[inline]
    pub(crate) fn inject_or_run(&self, work: Work<T>) {
        self.inject_with(work, true);
    }

    /// `inject`, with `inline_when_full` deciding what a worker with a full queue does. Never
    /// inline for work spawned by work that runs inline because the worker's queue was full:
    /// that goes to the injector, so that a chain of spawns into a full queue cannot nest
    /// without bound.
    #[inline]
    fn inject_with(&self, work: Work<T>, inline_when_full: bool) {
        match self.current_index() {
            Some(index) => {
                if let Err(work) = self.queues[index].push_front(work) {
                    if !inline_when_full || context::overflowing() {
                        self.injector.push(work);
                    } else {
                        // The work about to run here may block (wait for something): what
                        // this worker keeps for later goes where other threads can run it.
                        if let Some(kept) = self.take_next(index) {
                            self.injector.push(kept);
                        }
                        context::set_overflowing(true);
                        self.execute(work);
                        context::set_overflowing(false);
                        return;
                    }
                }
            }
            None if self
                .injector_limit
                .is_some_and(|limit| self.injector.len() >= limit) =>
            {
                self.execute(work);
                return;
            }
            None => self.injector.push(work),
        }
        self.wake_one();
    }

    /// Submits a closure (`inject` of a `Work::Job`).
    #[inline]
    pub(crate) fn inject_job(&self, job: JobRef) {
        self.inject(Work::Job(job));
    }

    /// Submits work to run next on the current worker, after the task running now (see
    /// `context.rs`); from outside the pool, or if this worker already keeps work, as
    /// `inject`.
    #[inline]
    pub(crate) fn inject_next(&self, work: Work<T>) {
        let work = match self.current_index() {
            Some(index) => match self.keep_next(index, work) {
                Ok(()) => return,
                Err(work) => work,
            },
            None => work,
        };
        self.inject(work);
    }

    /// Puts `work` into worker `index`'s next-task slot, which must be empty; gives it back if
    /// it is not. Called by worker `index` only.
    #[inline]
    fn keep_next(&self, index: usize, work: Work<T>) -> Result<(), Work<T>> {
        debug_assert_eq!(self.current_index(), Some(index));
        self.next[index].0.with_mut(|slot| {
            // SAFETY: only worker `index` touches its slot (see `NextSlot`), and this is it;
            // the reference does not outlive this closure.
            let slot = unsafe { &mut *slot };
            match slot {
                None => {
                    *slot = Some(work);
                    Ok(())
                }
                Some(_) => Err(work),
            }
        })
    }

    /// Takes the item in the calling worker's next-task slot, if it is one (a kept closure
    /// stays).
    #[inline]
    pub(crate) fn take_kept_item(&self) -> Option<T> {
        let index = self.current_index()?;
        match self.take_next(index)? {
            Work::Item(item) => Some(item),
            job @ Work::Job(_) => {
                // The slot was ours and empty a moment ago: putting the job back succeeds.
                let _ = self.keep_next(index, job);
                None
            }
        }
    }

    /// Takes the work in worker `index`'s next-task slot. Called by worker `index` only.
    #[inline]
    fn take_next(&self, index: usize) -> Option<Work<T>> {
        // SAFETY: as in `keep_next`.
        self.next[index]
            .0
            .with_mut(|slot| unsafe { (*slot).take() })
    }

    /// Makes sure some worker will look at a job just published: a spinning worker
    /// will (it keeps searching, and it passes through the sleep protocol, which
    /// re-checks every queue, before it sleeps); otherwise wake a sleeper, if any.
    pub(crate) fn wake_one(&self) {
        // Dekker with the spinners, like the event count's own handshake: our job is
        // published before this fence; a spinner decrements `spinners` before the fence
        // in its `prewait`. So either we see it spinning, or it sees our job. Without this
        // fence `install_from_outside_wakes_the_sleeping_worker` (tests/loom_pool.rs)
        // deadlocks: the worker's last look misses the job and we miss the waiter.
        fence(SeqCst);
        if self.spinners.load(Relaxed) > 0 {
            return;
        }
        self.event.notify_fenced(false);
    }

    /// Runs a job, routing a panic that escapes it (only detached tasks let one
    /// escape) to the panic handler. The worker survives either way.
    #[inline]
    pub(crate) fn execute(&self, work: Work<T>) {
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| match work {
            // SAFETY: every JobRef in this pool comes from `inject` or `join`, whose
            // callers keep the job's data alive until it has run, and each is popped from
            // a queue (or refused by one) exactly once.
            Work::Job(job) => unsafe { job.run() },
            Work::Item(item) => item.run(),
        }));
        if let Err(payload) = outcome {
            self.handle_panic(payload);
        }
    }

    pub(crate) fn handle_panic(&self, payload: Panic) {
        // A panicking handler must not take the worker down with it; its own panic
        // has already been reported by the panic hook.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| (self.panic_handler)(payload)));
    }

    /// Steps 1 to 3: the next-task slot and own queue, the injector, then one round of
    /// stealing. Called by worker `index` only.
    #[inline]
    pub(crate) fn find_work(&self, index: usize) -> Option<Work<T>> {
        self.take_next(index)
            .or_else(|| self.queues[index].pop_front())
            .or_else(|| self.injector.steal())
            .or_else(|| self.steal(index))
    }

    /// Visits every other queue once, in a random coprime order, and steals about
    /// half of the first non-empty one: the first stolen job is returned, the rest go
    /// to the front of the thief's own queue.
    fn steal(&self, index: usize) -> Option<Work<T>> {
        let n = self.queues.len();
        if n < 2 {
            return None;
        }
        let random = rng::next_u64() as usize;
        let stride = self.strides[(random >> 16) % self.strides.len()];
        let mut victim = random % n;
        let own = &self.queues[index];
        for _ in 0..n {
            if victim != index {
                let mut first = None;
                self.queues[victim].pop_back_half(MAX_STEAL, |job| {
                    if first.is_none() {
                        first = Some(job);
                        Ok(())
                    } else {
                        own.push_front(job)
                    }
                });
                if first.is_some() {
                    return first;
                }
            }
            victim = (victim + stride) % n;
        }
        None
    }

    /// Step 4: keep searching for a while.
    fn spin_for_work(&self, index: usize) -> Option<Work<T>> {
        // Relaxed: the count publishes nothing; a push that reads it is answered by the
        // Dekker pair below (the decrement, then a fence, then a look at every queue).
        self.spinners.fetch_add(1, Relaxed);
        let mut found = None;
        let mut pauses = 1;
        let started = (!cfg!(loom)).then(std::time::Instant::now);
        // Under loom `SPIN_ROUNDS` is 0 (no spinning in the models): an empty range on purpose.
        #[cfg_attr(loom, allow(clippy::reversed_empty_ranges))]
        for round in 0..SPIN_ROUNDS {
            found = self.find_work(index);
            if found.is_some() {
                break;
            }
            for _ in 0..pauses {
                spin_hint();
            }
            pauses = (pauses * 2).min(MAX_PAUSES_PER_LOOK);
            // The clock is read once every 8 looks: a look is a few loads.
            if round % 8 == 7 && started.is_some_and(|started| started.elapsed() >= SPIN_TIME) {
                break;
            }
        }
        // SeqCst: a push that saw a spinner counted skipped its wake-up, counting on it. The
        // decrement, then the fence in `wake_another` (found a job) or in `prewait` (going
        // to sleep), then a look at every queue pairs with `wake_one`'s publish, fence, load
        // of the count: either that push read a count without our increment or with our
        // decrement (and woke a sleeper itself if no other spinner was counted, each of
        // which makes the same look), or our look sees its job. The argument needs only the
        // fence that follows the decrement (fence-to-fence ordering), not the decrement's
        // own `SeqCst`: it is kept `SeqCst` as belt and braces.
        self.spinners.fetch_sub(1, SeqCst);
        found
    }

    /// Called by a worker that leaves the idle path (spinning or sleeping) with a job: if
    /// more work is queued, wakes a sleeper for it. Pushes made while a worker spun skipped
    /// their wake-ups, and this worker runs one job at a time; the woken worker does the
    /// same when it finds a job, so the wake-ups chain until the work or the sleepers run
    /// out (tokio's last searcher does the same).
    fn wake_another(&self) {
        fence(SeqCst);
        if self.has_work() {
            self.event.notify_fenced(false);
        }
    }

    /// Step 5: the sleep protocol, with the shutdown check.
    fn wait_for_work(&self, index: usize) -> Wake {
        self.event.prewait(index);
        if self.has_work() {
            self.event.cancel_wait(index);
            // Possibly an item still being published: let its producer finish before
            // the caller looks again.
            spin_hint();
            return Wake::Retry;
        }
        // SeqCst: pairs with the store in `shut_down`; both sides then synchronize
        // through the event count's fences (write `done`, notify / prewait, read).
        let blocked = self.blocked.fetch_add(1, SeqCst) + 1;
        if self.done.load(SeqCst) && blocked >= self.live_workers.load(SeqCst) {
            // Everyone is idle and nothing is queued: nothing can create work any more.
            // Leave `blocked` counted, so that each woken worker completes it again.
            self.event.cancel_wait(index);
            self.event.notify(true);
            return Wake::Exit;
        }
        self.event.commit_wait(index);
        self.blocked.fetch_sub(1, SeqCst);
        Wake::Retry
    }

    /// Runs queued jobs on the calling thread, which is no worker of this pool, until it
    /// finds none: the injector first, then one job at a time from the back of each worker's
    /// queue. Jobs these jobs spawn go to the injector and are run here too, or by the
    /// workers `inject` wakes for them.
    pub(crate) fn help(&self) {
        while let Some(job) = self
            .injector
            .steal()
            .or_else(|| self.queues.iter().find_map(RunQueue::pop_back))
        {
            self.execute(job);
        }
    }

    /// Whether any queue or the injector holds work (or a push in flight).
    pub(crate) fn has_work(&self) -> bool {
        !self.injector.is_empty() || self.queues.iter().any(|queue| !queue.is_empty())
    }

    /// Begins shutdown: workers finish all queued work, then exit.
    pub(crate) fn shut_down(&self) {
        self.done.store(true, SeqCst);
        self.event.notify(true);
    }

    /// Records that only `started` workers exist (a later one failed to start).
    pub(crate) fn set_live_workers(&self, started: usize) {
        self.live_workers.store(started, SeqCst);
    }

    /// Called by a worker that must wait for `latch` (a stolen `join` half, a scope,
    /// a `parallel_for`): it runs other work meanwhile, then parks on the latch.
    pub(crate) fn wait_until(&self, index: usize, latch: &Latch) {
        let backoff = Backoff::new();
        while !latch.probe() {
            if let Some(job) = self.find_work(index) {
                self.execute(job);
                continue;
            }
            if backoff.is_completed() {
                // Nothing to help with: sleep until the latch is set. Work pushed
                // meanwhile is taken by the other workers, which `inject` wakes.
                latch.wait();
                return;
            }
            backoff.snooze();
        }
    }

    /// The body of worker `index`.
    pub(crate) fn run_worker(&self, index: usize) {
        context::set_worker(self.address(), index);
        // Whether this worker comes back from the sleep protocol (see `wake_another`).
        let mut woken = false;
        loop {
            if let Some(job) = self.find_work(index) {
                if std::mem::take(&mut woken) {
                    self.wake_another();
                }
                self.execute(job);
                continue;
            }
            if let Some(job) = self.spin_for_work(index) {
                self.wake_another();
                self.execute(job);
                continue;
            }
            if let Wake::Exit = self.wait_for_work(index) {
                break;
            }
            woken = true;
        }
        context::set_worker(0, 0);
    }
}

/// What the sleep protocol came back with.
enum Wake {
    Retry,
    Exit,
}
