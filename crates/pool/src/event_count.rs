//! `EventCount`: lets idle threads sleep on "no work anywhere" without lost wake-ups.
//!
//! # Algorithm outline
//!
//! A thread about to sleep runs a three-step protocol; a thread that makes work
//! available runs a two-step one:
//!
//! ```text
//!   waiter `id`                              notifier
//!   ───────────                              ────────
//!   prewait(id)        // announce           publish work (e.g. push to a queue)
//!   if work is visible:                      notify(all)     // signal announced waiters
//!       cancel_wait(id) and go run it
//!   else:
//!       commit_wait(id)  // sleep, unless signaled since prewait
//! ```
//!
//! `prewait` and `notify` each place a `SeqCst` fence between their write and their
//! read (waiter: write "I wait", fence, read queues; notifier: write queue, fence, read
//! "who waits"). That is a Dekker handshake: at least one side sees the other's write.
//! Either the waiter sees the work and cancels, or the notifier sees the waiter and
//! signals it. (Both fences are explicit: loom models `SeqCst` read-modify-writes as
//! acquire/release only, but it does model `SeqCst` fences.)
//!
//! # State
//!
//! - `waiters`: how many threads are between `prewait` and the return of
//!   `cancel_wait`/`commit_wait`. `notify`'s fast path reads only this: zero means
//!   nobody to wake, for the cost of one fence and one load.
//! - `status[id]`, one per waiter, each on its own cache line:
//!
//! ```text
//!            prewait                 notify (CAS)
//!   IDLE ─────────────► WAITING ─────────────────────────► SIGNALED
//!    ▲                     │ commit_wait (CAS, under lock)     ▲   │
//!    │                     ▼                                   │   │ cancel/commit
//!    │                  PARKED ────────────────────────────────┘   │ returns
//!    │                          notify (CAS under lock + condvar)  │
//!    └─────────────────────────────────────────────────────────────┘
//! ```
//!
//! A notification goes to a specific waiter that had announced itself: `notify(false)`
//! signals one (preferring one that has not parked yet, which costs no system call),
//! `notify(true)` all of them. A notification signals only waiters whose status word
//! its scan reads as `WAITING` or `PARKED`, so a waiter that announces itself after
//! `notify` returned (or after the scan passed its status word) cannot take that
//! notification's signal. A waiter that announces itself *during* a `notify(false)`
//! scan, before the scan reaches its status word, can: it may be the one signaled,
//! although it announced after the notifier published its work and another waiter
//! was waiting all along. That is harmless when every waiter waits for the same
//! condition (as the pool's workers do: the late waiter re-checks after `prewait`, so
//! it sees the work itself); waiters with different conditions need `notify(true)`.
//! Stale entries are not a concern: Eigen's `EventCount` keeps waiters in a lock-free
//! stack where a stale entry could be mistaken for a current one, hence its per-waiter
//! epochs; here each waiter owns its status word and only the waiter resets it, so no
//! stale entry exists and no epoch is needed.
//!
//! # Why no wake-up is lost
//!
//! A waiter parks only by moving `WAITING → PARKED` while holding `sleepers`, and
//! notifiers wake parked waiters only while holding it, so a waiter that decided to
//! park is visible as `PARKED` before any notifier looks for parked waiters, and the
//! condition-variable wake-up cannot fall between its check and its sleep.

use depengine_sync::{AtomicU8, AtomicUsize, CachePadded, Condvar, Mutex, fence, lock, wait};
use std::fmt;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, SeqCst};

const IDLE: u8 = 0;
const WAITING: u8 = 1;
const PARKED: u8 = 2;
const SIGNALED: u8 = 3;

/// A condition variable for lock-free code: the waiter announces itself before its
/// final check, so a notification between check and sleep is never lost.
///
/// Each waiting thread uses its own waiter id in `0..waiters` (a pool uses the worker
/// index); ids are what notifications are delivered to.
///
/// # Examples
///
/// ```
/// use depengine_pool::EventCount;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let event = Arc::new(EventCount::new(1));
/// let ready = Arc::new(AtomicBool::new(false));
/// let waiter = {
///     let (event, ready) = (event.clone(), ready.clone());
///     std::thread::spawn(move || loop {
///         if ready.load(Ordering::Relaxed) {
///             return;
///         }
///         event.prewait(0);
///         if ready.load(Ordering::Relaxed) {
///             event.cancel_wait(0);
///             return;
///         }
///         event.commit_wait(0);
///     })
/// };
/// ready.store(true, Ordering::Relaxed);
/// event.notify(true);
/// waiter.join().unwrap();
/// ```
pub struct EventCount {
    /// Threads between `prewait` and the end of their wait.
    waiters: CachePadded<AtomicUsize>,
    /// One status word per waiter id (see the module docs).
    status: Box<[CachePadded<AtomicU8>]>,
    /// Guards every `PARKED` transition and the condition variables.
    sleepers: Mutex<()>,
    /// One condition variable per waiter id, all used with `sleepers`.
    wakeups: Box<[Condvar]>,
}

impl EventCount {
    /// Creates an event count for waiter ids `0..waiters`.
    pub fn new(waiters: usize) -> Self {
        Self {
            waiters: CachePadded::new(AtomicUsize::new(0)),
            status: (0..waiters)
                .map(|_| CachePadded::new(AtomicU8::new(IDLE)))
                .collect(),
            sleepers: Mutex::new(()),
            wakeups: (0..waiters).map(|_| Condvar::new()).collect(),
        }
    }

    /// The number of waiter ids.
    pub fn capacity(&self) -> usize {
        self.status.len()
    }

    /// Announces that waiter `id` is about to wait. The caller must then check its
    /// wait condition once more and call [`cancel_wait`](Self::cancel_wait) or
    /// [`commit_wait`](Self::commit_wait) with the same id.
    ///
    /// # Panics
    ///
    /// If `id` is not below [`capacity`](Self::capacity).
    pub fn prewait(&self, id: usize) {
        // Relaxed: published by the Release half of the increment below.
        self.status[id].store(WAITING, Relaxed);
        self.waiters.fetch_add(1, SeqCst);
        // The waiter's side of the Dekker handshake: the announcement above is ordered
        // before the caller's re-check of its condition (see the module docs).
        fence(SeqCst);
    }

    /// Withdraws a [`prewait`](Self::prewait): the condition held after all. A signal
    /// that arrived meanwhile is consumed: the caller is about to act anyway.
    pub fn cancel_wait(&self, id: usize) {
        // AcqRel: a consumed signal makes the notifier's work visible to us.
        self.status[id].swap(IDLE, AcqRel);
        self.waiters.fetch_sub(1, Relaxed);
    }

    /// Sleeps until signaled, unless a notification arrived since
    /// [`prewait`](Self::prewait).
    pub fn commit_wait(&self, id: usize) {
        let status = &self.status[id];
        if status
            .compare_exchange(SIGNALED, IDLE, AcqRel, Relaxed)
            .is_err()
        {
            let mut guard = lock(&self.sleepers);
            // Decide under the lock: a notifier wakes parked waiters only while holding
            // it, so it cannot look between this transition and the condvar wait.
            if status
                .compare_exchange(WAITING, PARKED, AcqRel, Acquire)
                .is_ok()
            {
                while status.load(Acquire) != SIGNALED {
                    guard = wait(&self.wakeups[id], guard);
                }
            }
            // Signaled (before or while parked).
            status.store(IDLE, Relaxed);
            drop(guard);
        }
        self.waiters.fetch_sub(1, Relaxed);
    }

    /// Signals one waiter (`all == false`) or every waiter (`all == true`) that has
    /// announced itself, if any.
    ///
    /// `notify(false)` picks a waiter that has not parked yet when there is one (no
    /// system call). Cheap when nobody waits: one fence and one load.
    pub fn notify(&self, all: bool) {
        // The notifier's side of the Dekker handshake: the caller's publication of work
        // is ordered before our read of the waiter count.
        fence(SeqCst);
        self.notify_fenced(all);
    }

    /// Whether a waiter is seen between `prewait` and its return: a hint for a notifier
    /// that can do without a wake-up (a waiter that has just announced itself may be
    /// missed; `notify` never misses one).
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine_pool::EventCount;
    ///
    /// let event = EventCount::new(1);
    /// assert!(!event.has_waiters());
    /// event.prewait(0);
    /// assert!(event.has_waiters());
    /// event.cancel_wait(0);
    /// assert!(!event.has_waiters());
    /// ```
    #[inline]
    pub fn has_waiters(&self) -> bool {
        // Relaxed: a hint (see above); nothing is read because of it.
        self.waiters.load(Relaxed) != 0
    }

    /// [`notify`](Self::notify) for a caller that has already issued a `SeqCst` fence
    /// between publishing its work and this call (a pool that checks other state under
    /// the same fence saves the second one).
    pub fn notify_fenced(&self, all: bool) {
        if self.waiters.load(Acquire) == 0 {
            return;
        }
        // First the waiters still checking their condition: a status flip is enough.
        for status in &*self.status {
            if status.load(Relaxed) == WAITING
                && status
                    .compare_exchange(WAITING, SIGNALED, AcqRel, Relaxed)
                    .is_ok()
                && !all
            {
                return;
            }
        }
        // Then the parked ones, under the lock they park with.
        let _guard = lock(&self.sleepers);
        for (id, status) in self.status.iter().enumerate() {
            if status.load(Relaxed) == PARKED
                && status
                    .compare_exchange(PARKED, SIGNALED, AcqRel, Relaxed)
                    .is_ok()
            {
                self.wakeups[id].notify_one();
                if !all {
                    return;
                }
            }
        }
    }
}

impl fmt::Debug for EventCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventCount")
            .field("waiters", &self.waiters.load(Relaxed))
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}
