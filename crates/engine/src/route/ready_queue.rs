//! [`ReadyQueue`]: the lock-free queue-and-drainers protocol behind [`QueuedBlock`], apart from
//! the engine's types so that the loom models (`loom_tests.rs`) can drive it.
//!
//! Submitters push items; up to `max_drainers` *drainers* (tasks the caller spawns when
//! [`ReadyQueue::submit`] says so) pop them until the queue is empty, then
//! [`retire`](ReadyQueue::retire). See `queued.rs` for why there are as many drainers as there
//! are, and why a submit from a drainer may hand its item back.
//!
//! # No item is stranded
//!
//! A submitter pushes the item, issues a `SeqCst` fence, then reads `drainers`; a drainer that
//! found the queue empty decrements `drainers`, issues a `SeqCst` fence, then re-checks the
//! queue. The `SeqCst` fences are totally ordered, and a write sequenced before one fence is
//! seen by a read sequenced after a later one (C++ `[atomics.order]`, the fence-to-fence
//! rule). So either the submitter's fence comes first, and the drainer's re-check sees the
//! push (the queue's tail moves before the item is written, so a push in flight counts), or
//! the drainer's does, and the submitter reads the decremented count (and enlists a new
//! drainer, or sees another one enlisted since, which checks the queue after enlisting). A
//! drainer that sees the item re-enlists itself, unless `max_drainers` drainers are enlisted
//! again, each of which will drain the queue before retiring.
//!
//! The spinner's `spinning` flag pairs with the same submitter fence the same way: the
//! spinner clears the flag, issues a `SeqCst` fence, then counts the items; either the count
//! includes the submitter's item, or the submitter sees the flag cleared and does not count on
//! the spinner.
//!
//! The fences carry both handshakes, so the accesses of `drainers` and `spinning` are all
//! `Relaxed`: nothing is published through them (a drainer reads items through the queue,
//! and the caller starts it as a new task), and a read-modify-write reads the latest value
//! whatever its ordering, which is all the bound on `drainers` and the one-spinner rule need.
//! The loom models fail with either fence removed (see `loom_tests.rs`).
//!
//! Every atomic and the fence come from the `sync` facade, the per-thread sampling state from the
//! thread's context (a loom thread-local under loom); the queue is the
//! pool's `Injector`, which under loom is the pool's model of crossbeam's synchronization (so
//! nothing but the fences orders a push against a drainer's `is_empty` or `len`), and the
//! retire spin and the sampling period shrink to keep the models small.
//!
//! [`QueuedBlock`]: crate::route::queued::QueuedBlock

use depengine_pool::Injector;

use crate::thread;
use depengine_sync::{AtomicBool, AtomicUsize, CachePadded, Ordering, fence, spin_hint};

/// How many times a drainer that found the queue empty looks again before it retires.
const RETIRE_LOOKS: usize = if cfg!(loom) { 1 } else { 12 };

/// Spin-loop hints between two looks (a few hundred nanoseconds): polling the queue's indices
/// back to back would keep pulling the line the submitter writes next.
const PAUSES_PER_LOOK: usize = if cfg!(loom) { 1 } else { 8 };

/// Items a spinning drainer waits for during its first `BATCH_LOOKS` looks (then one will do).
const BATCH: usize = if cfg!(loom) { 1 } else { 4 };
/// Looks during which a spinning drainer waits for `BATCH` items.
const BATCH_LOOKS: usize = 3;

/// The longest wait between two looks (the wait doubles from `PAUSES_PER_LOOK`).
const MAX_PAUSES_PER_LOOK: usize = if cfg!(loom) { 1 } else { 128 };

/// A submitting thread reads the queue's length on one submit in this many (a power of two).
/// Under loom, one in two, and the models pick which submits sample ([`sample_next_submit`]),
/// to cover both paths.
const SAMPLE_EVERY: u32 = if cfg!(loom) { 2 } else { 8 };

/// Sampling of the queue length by submitting threads.
///
/// Reading the length reads the queue's head index, which every pop writes: a cache miss for
/// the submitter and, worse, a line the next pop must take back, so the drainers' pops miss
/// too (`perf annotate` of the `independent` workload put 45% of the drainer's time on the
/// head's `compare_exchange` while every submit read the length). One submit in
/// `SAMPLE_EVERY` per thread reads it; the backlog check and the second drainer's
/// enlistment act on that sample (the flag is per thread, shared by every queue the thread
/// submits to: it only steers how soon a busy queue stops growing).
struct Sample;

impl Sample {
    #[inline]
    fn next() -> bool {
        thread::with(|cx| {
            let submits = cx.sampling.submits.get().wrapping_add(1);
            cx.sampling.submits.set(submits);
            submits.is_multiple_of(SAMPLE_EVERY)
        })
    }
}

/// Whether this thread's next submit samples the queue length (for the models).
#[cfg(all(test, loom))]
pub(crate) fn sample_next_submit(sampled: bool) {
    let submits = if sampled { SAMPLE_EVERY - 1 } else { 0 };
    thread::with(|cx| cx.sampling.submits.set(submits));
}

/// Runs `run` (an item [`Submit::RunInline`] handed back) marked as an overflow run: submits
/// from it queue their items whatever the backlog.
#[inline]
pub(crate) fn run_overflow<R>(run: impl FnOnce() -> R) -> R {
    thread::with(|cx| cx.sampling.running_overflow.set(true));
    let result = run();
    thread::with(|cx| cx.sampling.running_overflow.set(false));
    result
}

/// What [`ReadyQueue::retire`] decided.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retire {
    /// The drainer retired (it is no longer enlisted).
    Retired,
    /// The queue has items: the drainer stays enlisted and drains them; `helpers`: drainers
    /// enlisted besides it, which the caller must start.
    Stay { helpers: usize },
}

/// What [`ReadyQueue::submit`] did with an item.
#[must_use]
pub(crate) enum Submit<T> {
    /// Queued; `enlist`: a drainer was enlisted for it, which the caller must start (it pops
    /// until the queue is empty, then retires, see [`ReadyQueue::retire`]).
    Queued { enlist: bool },
    /// The queue is over its backlog and the caller drains it: the caller runs the item
    /// itself (through [`run_overflow`]), as if it had popped it.
    RunInline(T),
}

pub(crate) struct ReadyQueue<T> {
    /// The pool's `Injector` (crossbeam's lock-free MPMC queue; under loom, the pool's model
    /// of its synchronization, which orders nothing a push does against `is_empty` or `len`
    /// beyond what crossbeam's orders).
    queue: Injector<T>,
    /// Drainers enlisted (spawned or running, not retired); at most `max_drainers`.
    drainers: AtomicUsize,
    /// Whether a drainer spins on the empty queue before retiring (at most one does). Only
    /// drainers touch it: its own line, apart from `drainers`, which every submit reads.
    spinning: CachePadded<AtomicBool>,
    max_drainers: usize,
    /// Queued items beyond which a sampled submit hands its item back.
    backlog: usize,
}

impl<T> ReadyQueue<T> {
    pub(crate) fn new(max_drainers: usize, backlog: usize) -> Self {
        ReadyQueue {
            queue: Injector::new(),
            drainers: AtomicUsize::new(0),
            spinning: CachePadded::new(AtomicBool::new(false)),
            max_drainers,
            backlog,
        }
    }

    /// Queues `item` and enlists a drainer if the queue needs one (see the module
    /// documentation); or, when the submitter is one of this queue's drainers (`drainer`) and
    /// this thread's last sample found the queue over its backlog, hands the item back.
    #[inline]
    pub(crate) fn submit(&self, item: T, drainer: bool) -> Submit<T> {
        let sample = Sample::next();
        let queued = sample.then(|| self.queue.len());
        if let Some(queued) = queued {
            thread::with(|cx| cx.sampling.over_backlog.set(queued >= self.backlog));
        }
        if drainer
            && thread::with(|cx| {
                cx.sampling.over_backlog.get() && !cx.sampling.running_overflow.get()
            })
        {
            return Submit::RunInline(item);
        }
        self.queue.push(item);
        fence(Ordering::SeqCst);
        let enlist = self.wants_drainer(queued.map(|queued| queued + 1)) && self.try_enlist();
        Submit::Queued { enlist }
    }

    /// Whether a submit should enlist a drainer (up to `max_drainers`):
    ///
    /// - always when none is enlisted: the guarantee that no item is stranded;
    /// - when none of the enlisted drainers spins on the queue: all of them are running items,
    ///   possibly long ones, and this item must not wait for one of them to finish while a
    ///   worker idles (independent ops run in parallel);
    /// - when this submit sampled the queue length (`queued`) and the items queued outnumber
    ///   the drainers enlisted: the enlisted ones cannot keep up.
    ///
    /// While a drainer spins, it takes the item, and enlists helpers for any others (see
    /// [`retire`](Self::retire)). A stream of small items costs a second drainer each time
    /// the spinner stops spinning with more than one item queued, which the spinner's wait
    /// for a few items (`BATCH`) makes likely: about one spawn per spin episode.
    #[inline]
    fn wants_drainer(&self, queued: Option<usize>) -> bool {
        // Relaxed, after the submit's SeqCst fence: a drainer decrements the count and fences
        // before re-checking the queue, so either this load sees the decrement or the drainer
        // sees the item (see the module documentation).
        let enlisted = self.drainers.load(Ordering::Relaxed);
        enlisted == 0
            || (enlisted < self.max_drainers
                // Relaxed, after the submit's SeqCst fence: the spinner clears the flag and
                // fences before counting the items, so either this load sees it cleared or the
                // spinner counts this item (and enlists helpers for it).
                && (!self.spinning.load(Ordering::Relaxed)
                    || queued.is_some_and(|queued| queued > enlisted)))
    }

    /// The next queued item, if any.
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        self.queue.steal()
    }

    /// Called by a drainer that found the queue empty: whether it retired, or stays enlisted
    /// because the queue is not empty after all.
    ///
    /// The first drainer to find the queue empty spins on it for a while before retiring
    /// (the others retire at once): a pusher that is still pushing usually queues the next item
    /// within a few hundred nanoseconds, and a drainer that is still enlisted takes it
    /// without a new task being spawned and a worker woken. Submits made while it spun
    /// counted on it, and it runs one item at a time: a spinner that stays enlists a helper
    /// for each further item queued (up to `max_drainers` in all), which the caller starts.
    pub(crate) fn retire(&self) -> Retire {
        // Relaxed: an RMW reads the latest value, so at most one drainer spins; the flag
        // publishes nothing.
        let spinner = !self.spinning.swap(true, Ordering::Relaxed);
        if spinner {
            let mut found = false;
            let mut pauses = PAUSES_PER_LOOK;
            for look in 0..RETIRE_LOOKS {
                for _ in 0..pauses {
                    spin_hint();
                }
                // Early looks wait for a few items: a drainer that takes each item the moment
                // it is queued catches the pusher still writing it, and the two cores pass the
                // item's lines back and forth.
                let queued = self.queue.len();
                if queued >= BATCH || (queued > 0 && look >= BATCH_LOOKS) {
                    found = true;
                    break;
                }
                // Look less and less often: each look reads the tail index the pusher writes
                // on every push, so a drainer polling an empty queue hard slows the pusher it
                // waits for.
                pauses = (pauses * 2).min(MAX_PAUSES_PER_LOOK);
            }
            // Cleared, then a SeqCst fence before counting the items (here or below):
            // against a submit's push, fence, load of `spinning` (the same pairing as
            // `drainers` below). Either the submit sees the spinner gone and enlists a
            // drainer itself, or the count includes its item. Relaxed: the fence orders it.
            self.spinning.store(false, Ordering::Relaxed);
            if found {
                fence(Ordering::SeqCst);
                return Retire::Stay {
                    helpers: self.enlist_helpers(),
                };
            }
        }
        // Relaxed: the fence orders it before the re-check (see the module documentation).
        self.drainers.fetch_sub(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if !self.queue.is_empty() && self.try_enlist() {
            // A spinner that gave up just before items came: they may have counted on it.
            let helpers = if spinner { self.enlist_helpers() } else { 0 };
            return Retire::Stay { helpers };
        }
        Retire::Retired
    }

    /// Enlists a drainer for each queued item beyond the one the caller takes next, while
    /// fewer than `max_drainers` are enlisted; how many it enlisted.
    fn enlist_helpers(&self) -> usize {
        let others = self.queue.len().saturating_sub(1);
        (0..others).take_while(|_| self.try_enlist()).count()
    }

    /// Enlists one more drainer unless `max_drainers` are; `true` if it did (the caller then
    /// is, or starts, that drainer).
    ///
    /// Relaxed: the compare-exchange reads the latest count, which keeps it within
    /// `max_drainers`; callers that rely on a fresh count read it after a `SeqCst` fence.
    pub(crate) fn try_enlist(&self) -> bool {
        let mut enlisted = self.drainers.load(Ordering::Relaxed);
        loop {
            if enlisted >= self.max_drainers {
                return false;
            }
            match self.drainers.compare_exchange_weak(
                enlisted,
                enlisted + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => enlisted = now,
            }
        }
    }

    /// Drainers enlisted now (for the models' checks). Relaxed, as every access of the
    /// protocol: a check must not order anything the protocol does not.
    #[cfg(all(test, loom))]
    pub(crate) fn drainers(&self) -> usize {
        self.drainers.load(Ordering::Relaxed)
    }

    /// Whether a drainer spins on the queue now (for the models' schedules). Relaxed, as
    /// [`drainers`](Self::drainers).
    #[cfg(all(test, loom))]
    pub(crate) fn is_spinning(&self) -> bool {
        self.spinning.load(Ordering::Relaxed)
    }

    /// Whether the queue is empty now (for the models' checks, and for a waiter deciding
    /// whether its block needs a stand-in, `stand_in.rs`).
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
