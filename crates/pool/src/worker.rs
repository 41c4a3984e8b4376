//! The workers: what each pool thread runs, how it finds work, sleeps and shuts down.
//!
//! # Finding work
//!
//! A worker looks, in order, at
//! 1. its next-task slot (`worker_local.rs`), then the front of its own queue (its own newest
//!    spawns: LIFO, cache-hot);
//! 2. the injector, where threads outside the pool submit (FIFO), taking the oldest job and
//!    up to `INJECTOR_BATCH - 1` more behind it (as many as its own queue has room for)
//!    into the front of its own queue, in order
//!    (tokio's workers take from their injector in batches too). A worker that takes one job
//!    per look keeps pace with a thread pushing a stream of small jobs job by job, so every
//!    push and every take moves the injector's lines from one core to the other
//!    (`docs/decisions.md`, "The injector taken in batches"); the jobs taken along stay
//!    visible to thieves in the worker's queue. A worker that has just run a job, and is not
//!    back from the sleep protocol, leaves fewer than `INJECTOR_BATCH` jobs there for up to
//!    `BATCH_WAIT` (about a microsecond; its looks during that time are step 4's), so that a
//!    stream of pushes is taken in batches even when the worker is faster than the pusher:
//!    taken one by one, every job also moves the lines of the vars and op slots it touches
//!    from the pusher's core to the worker's and back ("A worker waits up to 1 µs for a
//!    batch"). A job that is alone in the injector starts at most `BATCH_WAIT` later; one
//!    pushed to a sleeping pool wakes a worker that takes it at once;
//! 3. the backs of the other queues, visited from a random start with a random stride
//!    coprime with the worker count (each visited once, thieves spread out), stealing
//!    about half of the first non-empty one (`RunQueue::pop_back_half`);
//! 4. the same search for a while longer (`spinners` counts the workers doing so): a
//!    worker that has just run out of work is likely to get more within microseconds
//!    (the released successors of the ops it ran, the next of a stream of pushes), and
//!    sleeping costs a futex wait now and a futex wake for whoever pushes next. Every idle
//!    worker spins: with only one spinner allowed, a worker that found the spinner's role
//!    taken went straight to sleep, and a stream of pushes about one worker's pace woke it
//!    once per push (`docs/decisions.md`, "Every idle worker spins"). A spinner yields the
//!    CPU between looks (`sched_yield`, as rayon's idle workers do), so that on a machine
//!    with as many workers as cores, idle workers do not take the core of the thread that
//!    feeds them (the engine's pusher, a thread outside the pool): a worker spinning on
//!    spin-loop hints keeps the core until a preemption tick, and the pusher, the bottleneck
//!    while workers idle, runs on what is left ("A spinner yields between looks"). A yield
//!    returns at once when nothing else wants the core, so a spinner with a core to itself
//!    still looks again within a system call's time. How long a worker spins is its window
//!    (`spin_window.rs`), learned from its own idle periods: 50 µs, or up to the pool's
//!    bound (`Builder::max_spin`, 4 ms by default) while work comes back at a steady period.
//!    A push that sees a spinner wakes nobody, counting on it; so a worker that leaves the
//!    idle path (spinning or sleeping) with a job and still sees work queued wakes a sleeper
//!    for that work, which does the same in turn (otherwise a second job pushed while one
//!    worker spun would wait for the first one to finish while the other workers sleep).
//!    A thread outside the pool does not count on a spinner forever: one that shares the
//!    pusher's core hardly gets it back while the pusher pushes, so every
//!    `STARVATION_CHECK` skipped wake-ups the pusher looks at the injector, and wakes a
//!    sleeper if `STARVED_BACKLOG` jobs wait there (`Shared::wake_for_push`);
//! 5. the sleep protocol below.
//!
//! # Sleeping
//!
//! ```text
//!   event.prewait(me)                     // announce (Dekker write + SeqCst fence)
//!   if some queue or the injector holds work: // neither misses a completed push
//!       event.cancel_wait(me); look again
//!   idle += 1; then the shutdown check below
//!   event.commit_wait(me); idle -= 1
//! ```
//!
//! Every push is followed by a `SeqCst` fence and a read of the spinner count: a push that
//! sees no spinner notifies the event count (`notify_fenced(false)`, which reads the
//! waiters), and one that sees a spinner counts on it (step 4, and the starvation check
//! there for pushes from outside), so a push is never stranded while every worker sleeps.
//! A worker's own queue is bounded: a spawn from a worker whose queue is full runs the
//! task inline. The injector is unbounded.
//!
//! # Shutdown protocol
//!
//! The pool's life is one atomic, `phase`: `RUNNING → DRAINING → TERMINATED`.
//! `ThreadPool::drop` moves it to `DRAINING` and wakes nobody: the workers run what is
//! queued and go idle as usual. Whoever first sees every worker idle while `DRAINING`
//! (the dropper, or the last worker to go idle) looks at every queue once; if all are
//! empty it sets `TERMINATED` and wakes everyone once (`notify(true)`), and each woken
//! worker exits on seeing `TERMINATED`, without looking at any queue. One scan and one
//! broadcast in all, so a drop takes time linear in the worker count (were each exiting
//! worker to wake the others, each re-scanning every queue, it would be quadratic).
//!
//! ```text
//!   dropper (`shut_down`)                  worker, in the sleep protocol (`wait_for_work`)
//!   ─────────────────────                  ──────────────────────────────────────────────
//!   phase = DRAINING      (Release)        (prewait; no work seen)
//!   fence(SeqCst)                          idle += 1                  (AcqRel)
//!   if idle == workers:   (Relaxed)        fence(SeqCst)
//!       terminate()                        match phase                (Acquire)
//!   join the workers                         TERMINATED: exit
//!                                            DRAINING and idle == workers:
//!                                                if terminate(): exit
//!                                                else: idle -= 1; look again
//!                                            else: commit_wait (sleep);
//!                                                if phase == TERMINATED: exit, no scan
//!                                                idle -= 1; look again
//!
//!   terminate():  if some queue or the injector holds work: return false
//!                 phase: DRAINING → TERMINATED (compare-exchange: of a dropper and a
//!                 worker that both get here, one wins; the other sees it done)
//!                 the winner calls notify(true); return true
//! ```
//!
//! `idle` counts the workers inside the sleep protocol, and, from the start, those whose
//! thread failed to start (`count_unstarted_as_idle`): `workers` is the number of queues.
//! A pool dropped by one of its own tasks does not join (see `ThreadPool::drop`): its
//! dropping worker is busy, so the count is not full until that worker goes idle, the
//! last one, and terminates the pool itself.
//!
//! ## Why no task is lost
//!
//! - A worker pushes only to the front of its own queue (a spawn, or the rest of a
//!   steal), and it exits only from the sleep protocol, which it enters with its own
//!   queue empty (`find_work` pops it first): no worker leaves behind a task it pushed.
//!   (A worker that is still running a task when another one sets `TERMINATED`, because it
//!   counted as idle while a wake-up was on its way to it, finishes that task and its
//!   spawns, and exits at its next sleep protocol.)
//! - Every other task came from outside the pool, through the injector, before the drop:
//!   submitting takes a `&ThreadPool`, which the dropper owns. Such a push happens before
//!   `phase = DRAINING`, which `terminate`'s caller has read (`Release`/`Acquire`) or
//!   written itself before its scan: the scan sees the task, and `TERMINATED` is set only
//!   once every such task was taken by a worker, which runs it. This scan is what a
//!   single-worker pool needs: its worker's look after `prewait` may miss a task pushed
//!   right before the drop (that push's wake-up is then on its way to it), while
//!   `idle == workers` holds as soon as it counts itself in.
//!
//! ## Why no worker sleeps forever
//!
//! - `TERMINATED` wakes everyone: `terminate` sets it before `notify(true)`, whose fence
//!   pairs with each worker's `prewait` fence. A worker that announced itself before that
//!   fence is signaled, and the signal (through the event count) makes `TERMINATED`
//!   visible to it; one that announces itself after it reads `TERMINATED` after its own
//!   fences.
//! - `TERMINATED` is reached once the workers stop finding work. Suppose that from some
//!   point on every worker stays idle, and take the final `idle += 1` that comes last in
//!   the count's modification order (it makes the count `workers`). Its worker's fence and
//!   the dropper's are ordered (`SeqCst`, the Dekker pair): if the dropper's comes first,
//!   the worker reads `DRAINING`; if the worker's does, the dropper reads the full count.
//!   Whichever it is calls `terminate`, and its scan finds nothing: every increment is
//!   `AcqRel`, so everything any worker did before counting itself in (its last pops)
//!   happens before that last increment and, through the fences, before the dropper's
//!   scan; and nothing is still queued, or a worker would have been woken for it.
//! - A `terminate` that does find work (a task pushed right before the drop, whose wake-up
//!   is on its way to some worker) leaves the phase `DRAINING`: that worker runs the task,
//!   goes idle again, and the argument above applies to its new increment.
//!
//! A worker's own queue is bounded: a spawn from a worker whose queue is full runs the
//! task inline (once: what that task spawns into the still full queue goes to the
//! injector). The injector is unbounded; outside submissions beyond the pool's
//! `injector_limit` run inline on the submitter, unless the pool has no limit.

use crate::builder::Saturation;
use crate::event_count::EventCount;
use crate::injector::Injector;
use crate::item::{Item, Work};
use crate::job::{JobRef, Panic};
use crate::latch::Latch;
use crate::rng;
use crate::run_queue::RunQueue;
use crate::spin_window::SpinWindow;
use crate::unwind::PanicHandler;
use crate::worker_local;
use depengine_sync::{
    AtomicU8, AtomicUsize, Backoff, CachePadded, UnsafeCell, fence, spin_hint, yield_now,
};
use smallvec::SmallVec;
use std::convert::Infallible;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::time::{Duration, Instant};

/// The most looks a spinning worker makes before it goes to sleep: its window
/// (`spin_window.rs`) ends it first, except under Miri (a few looks, whatever the time) and
/// loom (none).
const SPIN_ROUNDS: usize = if cfg!(loom) {
    0
} else if cfg!(miri) {
    8
} else {
    1 << 20
};

/// The most jobs one look at the injector takes (step 2 of the module documentation).
const INJECTOR_BATCH: usize = 16;

/// How many jobs a worker waiting for a batch wants in the injector before it takes them
/// (step 2 of the module documentation). One under loom, where the wait is left out of the
/// models: a look that leaves the jobs where they are writes nothing, so to every other
/// thread it is a look that found none, which the models cover; and its worker then goes
/// through the sleep protocol, whose look after `prewait` sees the jobs and sends it back to
/// take any job (the path of a push that lands between a look and `prewait`, also modeled).
/// With the wait in, the pool's models took ten times as long.
const BATCH_LEN: usize = if cfg!(loom) { 1 } else { INJECTOR_BATCH };

/// How long a worker waits for `BATCH_LEN` jobs in the injector (step 2 of the module
/// documentation).
const BATCH_WAIT: Duration = Duration::from_micros(1);

/// How many pushes from outside the pool skip their wake-up for a spinner before the
/// pushing thread checks that the spinner takes what they queued (`Shared::wake_for_push`).
const STARVATION_CHECK: u32 = 128;

/// The injector backlog at which a push from outside the pool takes the spinners it saw to
/// be starved (`Shared::wake_for_push`). A heuristic: a spinner that looks takes up to
/// `INJECTOR_BATCH` jobs, so a backlog of twice that suggests that no spinner has looked
/// for a while.
const STARVED_BACKLOG: usize = 2 * INJECTOR_BATCH;

/// The most tasks one steal moves; bounds the time a thief holds a victim's lock.
const MAX_STEAL: usize = 64;

/// `Shared::phase`, in order (see the shutdown protocol): the pool takes work...
const RUNNING: u8 = 0;
/// ...the pool is being dropped: the workers finish what is queued...
const DRAINING: u8 = 1;
/// ...every worker is idle and nothing is queued: the workers exit.
const TERMINATED: u8 = 2;

/// State shared by the pool handle and its workers.
pub(crate) struct Shared<T = Infallible> {
    /// One queue per worker; worker `i` owns the front of `queues[i]`.
    pub(crate) queues: Box<[RunQueue<Work<T>>]>,
    /// One next-task slot per worker (`worker_local.rs`); worker `i` alone touches `next[i]`.
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
    /// `RUNNING`, `DRAINING` or `TERMINATED` (see the shutdown protocol). Moved on by the
    /// dropper (`shut_down`) and by `terminate`; read by workers in the sleep protocol.
    phase: AtomicU8,
    /// Workers inside the sleep protocol, plus those that never started (see the shutdown
    /// protocol). Changed by each worker as it goes to sleep and comes back, and once by
    /// the thread that starts the pool if a worker fails to start; read by the dropper.
    idle: AtomicUsize,
    /// Strides coprime with the worker count, for victim order.
    strides: Box<[usize]>,
    /// The bound of every worker's spin window (`Builder::max_spin`, `spin_window.rs`).
    max_spin: Duration,
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
        max_spin: Duration,
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
            phase: AtomicU8::new(RUNNING),
            idle: AtomicUsize::new(0),
            strides: rng::coprimes(threads),
            max_spin,
            panic_handler,
        }
    }

    /// The index of the current thread in this pool, if it is one of its workers.
    #[inline]
    pub(crate) fn current_index(&self) -> Option<usize> {
        worker_local::worker_index(self.address())
    }

    /// This pool's identity in the workers' local state.
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

    /// As `inject_or_run` for an item, run by `run` instead of [`Item::run`] when the calling
    /// worker's queue is full: the caller has at hand what the item's own `run` would look up.
    #[inline]
    pub(crate) fn inject_item_or_run(&self, item: T, run: impl FnOnce(T)) {
        if let Some(index) = self.current_index()
            && !worker_local::overflowing()
        {
            let own = &self.queues[index];
            // Only this worker pushes to its queue and thieves only take from it, so a queue
            // seen with room takes the push below; one seen full may have lost a job to a
            // thief since, which only means the item runs here a little early. (Looking first,
            // rather than running what `inject_with`'s push hands back, keeps the item out of
            // a `Work` and a refused push, a copy of the item each.)
            if own.len() >= own.capacity() {
                self.release_kept(index);
                worker_local::set_overflowing(true);
                let outcome = panic::catch_unwind(AssertUnwindSafe(|| run(item)));
                worker_local::set_overflowing(false);
                if let Err(payload) = outcome {
                    self.handle_panic(payload);
                }
                return;
            }
        }
        self.inject_or_run(Work::Item(item));
    }

    /// `inject`, with `inline_when_full` deciding what a worker with a full queue does. Never
    /// inline for work spawned by work that runs inline because the worker's queue was full:
    /// that goes to the injector, so that a chain of spawns into a full queue cannot nest
    /// without bound.
    #[inline]
    fn inject_with(&self, work: Work<T>, inline_when_full: bool) {
        match self.current_index() {
            Some(index) => {
                // SAFETY: `current_index` is `Some(index)` only on worker `index` of this
                // pool (`run_worker` sets it on that thread alone): the queue's owner.
                if let Err(work) = unsafe { self.queues[index].push_front(work) } {
                    if !inline_when_full || worker_local::overflowing() {
                        self.injector.push(work);
                    } else {
                        self.release_kept(index);
                        worker_local::set_overflowing(true);
                        self.execute(work);
                        worker_local::set_overflowing(false);
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
            None => {
                self.injector.push(work);
                self.wake_for_push();
                return;
            }
        }
        self.wake_one();
    }

    /// Before worker `index` runs work inline because its queue is full: the work may block
    /// (wait for something), so what the worker keeps in its next-task slot goes where other
    /// threads can run it, and one of them is woken for it if none is looking. Called by
    /// worker `index` only.
    fn release_kept(&self, index: usize) {
        if let Some(kept) = self.take_next(index) {
            self.injector.push(kept);
            self.wake_one();
        }
    }

    /// Submits a closure (`inject` of a `Work::Job`).
    #[inline]
    pub(crate) fn inject_job(&self, job: JobRef) {
        self.inject(Work::Job(job));
    }

    /// Submits work to run next on the current worker, after the task running now (see
    /// `worker_local.rs`); from outside the pool, or if this worker already keeps work, as
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
    #[expect(
        clippy::inline_always,
        reason = "called once per op that a burst runs inline; `docs/decisions.md`, \"The kept successor, taken back by the runner\""
    )]
    #[inline(always)]
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
        if !self.spinner_will_look() {
            self.event.notify_fenced(false);
        }
    }

    /// `wake_one` for a job pushed into the injector from outside the pool, which does not
    /// count on a spinner forever. A spinner yields its core at every look, so one that
    /// shares a core with the pushing thread hardly runs while that thread pushes (the
    /// scheduler gives the pusher its slice, and moves the spinner to an idle core only at
    /// a later balancing tick), and the jobs wait while the other cores sleep. So every
    /// `STARVATION_CHECK` pushes that skipped their wake-up, the pushing thread looks at the
    /// injector (its worker-local state counts them); if `STARVED_BACKLOG` jobs wait there, the spinners
    /// it saw are not taking them, and it wakes a sleeper anyway, which the scheduler places
    /// on an idle core. A wake-up more than `wake_one` would make is never wrong (a woken
    /// worker that finds nothing goes back to sleep), so the check needs no ordering of its
    /// own. The models never reach it: their injector holds fewer than `STARVATION_CHECK`
    /// pushes.
    #[inline]
    fn wake_for_push(&self) {
        let counted_on_a_spinner = self.spinner_will_look()
            && !(worker_local::check_due_after_skipped_wake(STARVATION_CHECK)
                && self.injector.len() >= STARVED_BACKLOG);
        if !counted_on_a_spinner {
            self.event.notify_fenced(false);
        }
    }

    /// The pusher's half of the Dekker pairing with the spinners, like the event count's own
    /// handshake: whether a spinner will see the job just published (then no sleeper need be
    /// woken for it). The job is published before this fence; a spinner decrements `spinners`
    /// before the fence in its `prewait`. So either we see it spinning, or it sees our job.
    /// Without the fence, two models of `tests/it/loom/pool.rs` fail: the worker's last look
    /// misses the job, the pusher misses the waiter. They are
    /// `install_from_outside_wakes_the_sleeping_worker` (a push from outside, `wake_for_push`:
    /// deadlock) and `a_spawn_from_a_waiting_task_wakes_the_other_worker` (a worker's push,
    /// `wake_one`: a deadlock, or loom's branch limit while the spawning task yields). The
    /// fence also serves `notify_fenced`, which reads the waiters after it.
    #[inline]
    fn spinner_will_look(&self) -> bool {
        fence(SeqCst);
        self.spinners.load(Relaxed) > 0
    }

    /// `wake_one` for work that the pushing worker runs itself if nobody takes it: a
    /// join's second half, which the joining worker pops back or waits for while helping
    /// (`join.rs`). Wakes a sleeper only if one is seen waiting, and skips the fence that
    /// `wake_one` needs when none is.
    ///
    /// The fence is what makes a waiter and a push see each other (see `wake_one`); here
    /// it would buy parallelism, never progress: a worker that goes to sleep at the very
    /// moment of the push, unseen, leaves the half to the joiner (or to the next push that
    /// sees it waiting, such as the next join inside the first half). Without it a join
    /// pays for one locked instruction (its pop), as rayon's does.
    #[inline]
    pub(crate) fn wake_one_for_own_work(&self) {
        if self.event.has_waiters() {
            self.wake_one();
        }
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
        self.look(index, Injected::Any)
    }

    /// `find_work`, taking from the injector only what `injected` accepts.
    #[inline]
    fn look(&self, index: usize, injected: Injected) -> Option<Work<T>> {
        self.take_next(index)
            .or_else(|| self.queues[index].pop_front())
            .or_else(|| match injected {
                // `len` reads the indices that `steal` would read first anyway.
                Injected::Batch if BATCH_LEN > 1 && self.injector.len() < BATCH_LEN => None,
                _ => self.steal_injected(index),
            })
            .or_else(|| self.steal(index))
    }

    /// Step 2: takes the injector's oldest job, and up to `INJECTOR_BATCH - 1` more behind
    /// it (as many as worker `index`'s own queue has room for) into the front of that queue,
    /// in their order (pushed newest first, so the next `pop_front` takes the oldest).
    /// Called by worker `index` only.
    fn steal_injected(&self, index: usize) -> Option<Work<T>> {
        let first = self.injector.steal()?;
        let own = &self.queues[index];
        // Only this worker pushes to its queue, and thieves only take from it: the room
        // seen here can only grow while the batch is taken.
        let room = own.capacity().saturating_sub(own.len());
        let mut batch = SmallVec::<[Work<T>; INJECTOR_BATCH]>::new();
        while batch.len() < room.min(INJECTOR_BATCH - 1)
            && let Some(job) = self.injector.steal()
        {
            batch.push(job);
        }
        while let Some(job) = batch.pop() {
            // SAFETY: `steal_injected` runs on worker `index` (its callers are that worker's
            // search for work), the owner of `own`.
            if let Err(job) = unsafe { own.push_front(job) } {
                // Not reached (the room above): kept so that no job is ever lost.
                self.injector.push(job);
            }
        }
        Some(first)
    }

    /// Visits every other queue once, in a random coprime order, and steals about
    /// half of the first non-empty one: the first stolen job is returned, the rest go
    /// to the front of the thief's own queue.
    fn steal(&self, index: usize) -> Option<Work<T>> {
        let n = self.queues.len();
        if n < 2 {
            return None;
        }
        let random = worker_local::next_random() as usize;
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
                        // SAFETY: `steal` runs on worker `index` (its callers are that
                        // worker's search for work), the owner of `own`.
                        unsafe { own.push_front(job) }
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

    /// Step 4: keep searching for up to `window` (`spin_window.rs`) since `started` (`None`
    /// under loom: no clock); `injected` says what the first looks, up to `BATCH_WAIT`, take
    /// from the injector (step 2). Returns the work found, with the time since `started` at
    /// the last look the clock was read for (`None` if it was not: found within 8 looks).
    fn spin_for_work(
        &self,
        index: usize,
        injected: Injected,
        started: Option<Instant>,
        window: Duration,
    ) -> Option<(Work<T>, Option<Duration>)> {
        if window.is_zero() {
            // A pool that never spins (`Builder::max_spin`): straight to the sleep protocol.
            return None;
        }
        // Relaxed: the count publishes nothing; a push that reads it is answered by the
        // Dekker pair below (the decrement, then a fence, then a look at every queue).
        self.spinners.fetch_add(1, Relaxed);
        let mut found = None;
        let mut spun = None;
        let mut waiting = injected;
        // Under loom `SPIN_ROUNDS` is 0 (no spinning in the models): an empty range on purpose.
        #[cfg_attr(loom, allow(clippy::reversed_empty_ranges))]
        for round in 0..SPIN_ROUNDS {
            if waiting == Injected::Batch
                && started.is_none_or(|started| started.elapsed() >= BATCH_WAIT)
            {
                // The wait for a batch is over: any job will do.
                waiting = Injected::Any;
            }
            found = self.look(index, waiting);
            if found.is_some() {
                break;
            }
            // Leave the core to any thread that wants it (step 4 of the module documentation).
            yield_now();
            // The clock is read once every 8 looks, which is often enough beside a yield each.
            if round % 8 == 7
                && let Some(started) = started
            {
                let elapsed = started.elapsed();
                spun = Some(elapsed);
                if elapsed >= window {
                    break;
                }
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
        found.map(|work| (work, spun))
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
        // AcqRel: chains every worker's increment to the last one, so that whoever
        // terminates sees what each worker did before it went idle (its last pops). Loom's
        // fences are stronger than C++'s, so no model fails without it (docs/loom.md).
        let idle = self.idle.fetch_add(1, AcqRel) + 1;
        // The worker's side of the Dekker pair with `shut_down` (count in, fence, read the
        // phase): either the last worker to count itself in reads `DRAINING`, or the
        // dropper reads the full count. Without it
        // `every_worker_exits_when_the_pool_is_dropped_as_they_go_to_sleep` deadlocks.
        fence(SeqCst);
        // Acquire: pairs with `shut_down`'s Release, so that `terminate`'s scan sees the
        // tasks pushed from outside before the drop (needed in C++ only: under loom the
        // injector's `SeqCst` loads see every push anyway; docs/loom.md).
        match self.phase.load(Acquire) {
            TERMINATED => {
                self.event.cancel_wait(index);
                return Wake::Exit;
            }
            DRAINING if idle == self.queues.len() => {
                self.event.cancel_wait(index);
                if self.terminate() {
                    return Wake::Exit;
                }
                // A task pushed right before the drop: its wake-up is on its way to
                // some worker (maybe this one). Look again.
                self.idle.fetch_sub(1, Relaxed);
                return Wake::Retry;
            }
            _ => {}
        }
        self.event.commit_wait(index);
        // Woken by `terminate`'s `notify(true)`: exit without looking at any queue. The
        // signal makes `TERMINATED` visible (it was stored before the notification).
        if self.phase.load(Acquire) == TERMINATED {
            return Wake::Exit;
        }
        // Relaxed: a read-modify-write, so it carries on the release sequence of the
        // increments; leaving the count publishes nothing.
        self.idle.fetch_sub(1, Relaxed);
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

    /// Begins shutdown (the dropper's side of the shutdown protocol): workers finish all
    /// queued work, then exit.
    pub(crate) fn shut_down(&self) {
        // Release: publishes the tasks pushed before the drop to a worker that reads
        // `DRAINING` and then scans the queues in `terminate`. Only the first call moves
        // the phase (`shut_down_and_join` may be followed by the drop); a later one has
        // nothing to add.
        if self
            .phase
            .compare_exchange(RUNNING, DRAINING, Release, Relaxed)
            .is_err()
        {
            return;
        }
        // The dropper's side of the Dekker pair with `wait_for_work`. Without it
        // `every_worker_exits_when_the_pool_is_dropped_as_they_go_to_sleep` deadlocks.
        fence(SeqCst);
        // Relaxed: the fences order this load after the last worker's increment (when
        // the worker's fence comes first), and with it everything that happens before
        // that increment, the other workers' increments included.
        if self.idle.load(Relaxed) == self.queues.len() {
            self.terminate();
        }
    }

    /// Called by whoever sees every worker idle while `DRAINING`: if no queue holds
    /// work, moves the pool to `TERMINATED` and wakes every worker to exit. Returns
    /// whether the pool is terminated.
    fn terminate(&self) -> bool {
        if self.has_work() {
            return false;
        }
        // Relaxed: the phase publishes nothing to the exiting workers, and the fence in
        // `notify` orders this store before the read of the waiters (a worker not yet
        // announced reads `TERMINATED` after its `prewait`). A failed exchange means the
        // dropper and the last worker both got here and the other one won (callers see
        // `DRAINING`, so the phase is `TERMINATED`): it notifies.
        if self
            .phase
            .compare_exchange(DRAINING, TERMINATED, Relaxed, Relaxed)
            .is_ok()
        {
            self.event.notify(true);
        }
        true
    }

    /// Records that only the first `started` workers exist (a later one failed to start):
    /// the others count as idle for good, as they never run anything.
    pub(crate) fn count_unstarted_as_idle(&self, started: usize) {
        // Relaxed: a read-modify-write of the count, as the workers' are (each reads the
        // latest value), and `shut_down`, which reads the count next, runs on this thread.
        self.idle.fetch_add(self.queues.len() - started, Relaxed);
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
        worker_local::set_worker(self.address(), index);
        // Whether this worker comes back from the sleep protocol (see `wake_another`).
        let mut woken = false;
        // When this worker's idle period began, while it lasts (not timed under loom), and
        // how long the next one may spin (`spin_window.rs`).
        let mut idle_since: Option<Instant> = None;
        let mut window = SpinWindow::new(self.max_spin);
        loop {
            // Back from the sleep protocol, a worker takes any job (it was woken for one, or
            // saw one before sleeping); one that has just run a job waits for a batch from
            // the injector (step 2 of the module documentation).
            let injected = if woken {
                Injected::Any
            } else {
                Injected::Batch
            };
            if let Some(job) = self.look(index, injected) {
                if std::mem::take(&mut woken) {
                    if let Some(since) = idle_since.take() {
                        window.ended_after(since.elapsed());
                    }
                    self.wake_another();
                }
                self.execute(job);
                continue;
            }
            // A period that began before a sleep goes on (the wake-up found nothing).
            let fresh = idle_since.is_none();
            if fresh && !cfg!(loom) {
                idle_since = Some(Instant::now());
            }
            if let Some((job, spun)) =
                self.spin_for_work(index, injected, idle_since, window.length())
            {
                // Found within the first looks of a fresh period: a short one, untimed.
                let idle_for = match (spun, idle_since.take()) {
                    (Some(spun), _) => spun,
                    (None, Some(since)) if !fresh => since.elapsed(),
                    (None, _) => Duration::ZERO,
                };
                window.ended_after(idle_for);
                self.wake_another();
                self.execute(job);
                continue;
            }
            if let Wake::Exit = self.wait_for_work(index) {
                break;
            }
            woken = true;
        }
        worker_local::set_worker(0, 0);
    }
}

/// What a look takes from the injector (step 2 of the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Injected {
    /// Any job there.
    Any,
    /// Jobs only if `BATCH_LEN` are there.
    Batch,
}

/// What the sleep protocol came back with.
enum Wake {
    Retry,
    Exit,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{STARVATION_CHECK, STARVED_BACKLOG};
    use crate::ThreadPool;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering::{Relaxed, SeqCst};
    use std::time::{Duration, Instant};

    /// Jobs pushed from outside while a counted spinner never looks (the test counts itself
    /// as one, as a spinner starved of its core would be): each push skips its wake-up, until
    /// the pushing thread's check finds them waiting and wakes the sleeping worker, which
    /// runs them all. Without the check none runs (the worker sleeps with every job queued).
    #[test]
    fn jobs_pushed_beside_a_spinner_that_never_looks_still_run() {
        const { assert!(STARVED_BACKLOG <= STARVATION_CHECK as usize) };
        let pool = ThreadPool::builder()
            .threads(1)
            .max_spin(Duration::ZERO)
            .build()
            .expect("a pool of one worker");
        // Past its last look: counted idle only after `prewait` found no work.
        while pool.shared.idle.load(SeqCst) == 0 {
            std::thread::yield_now();
        }
        pool.shared.spinners.fetch_add(1, SeqCst);
        // As many pushes as one check takes, from a thread that has pushed nothing yet: the
        // check comes with the last push, every job queued (the worker, once woken, sleeps
        // again with no spinner that looks, so a job pushed after the check would stay).
        let jobs = STARVATION_CHECK as usize;
        let ran = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for _ in 0..jobs {
                    let ran = Arc::clone(&ran);
                    pool.spawn(move || {
                        ran.fetch_add(1, Relaxed);
                    });
                }
            });
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while ran.load(Relaxed) < jobs && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let ran_beside_the_spinner = ran.load(Relaxed);
        // The spinner leaves; a wake-up for what it left lets the pool drain on drop (else a
        // failure here would hang in the drop instead of failing).
        pool.shared.spinners.fetch_sub(1, SeqCst);
        pool.shared.wake_one();
        assert_eq!(
            ran_beside_the_spinner, jobs,
            "jobs left behind a starved spinner"
        );
    }
}
