//! Latches: one-shot "done" flags a single thread waits on, spinning first, then parked.
//!
//! A latch usually lives in the waiter's stack frame (a `join` job, a `scope`), so the
//! thread that sets it must not touch it after the waiter may have returned. Hence the
//! protocol below: the setter's *last* access to the latch is the store of `SET`, and
//! the handle it unparks afterwards is its own clone; and the setter reaches the latch
//! through a raw pointer, never a `&Latch` argument, which would have to outlive the
//! call (see `Latch::set`).
//!
//! ```text
//!            waiter: store handle, CAS
//!   UNSET ───────────────────────────► SLEEPING
//!     │                                   │ setter: clone handle, store SET, unpark clone
//!     │ setter: CAS                       ▼
//!     └────────────────────────────────► SET
//! ```

use depengine_sync::{AtomicU8, AtomicUsize, Backoff, UnsafeCell, thread};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

const UNSET: u8 = 0;
const SLEEPING: u8 = 1;
const SET: u8 = 2;

/// A one-shot flag with one waiter.
pub(crate) struct Latch {
    state: AtomicU8,
    /// The parked waiter. Written by the waiter before it publishes `SLEEPING`; read by
    /// the setter only after it saw `SLEEPING`, while the waiter cannot leave.
    sleeper: UnsafeCell<Option<thread::Thread>>,
}

// SAFETY: `sleeper` is accessed under the state protocol above: written only by the
// waiter before its Release CAS to SLEEPING, read only by the setter after an Acquire
// load of SLEEPING, and the waiter does not touch it again until the state is SET.
unsafe impl Sync for Latch {}

impl Latch {
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicU8::new(UNSET),
            sleeper: UnsafeCell::new(None),
        }
    }

    /// Whether the latch is set. Acquire: what the setter did before `set` is visible.
    /// (Needed where `probe` alone ends the wait, as in `Shared::wait_until`; after a
    /// park, `unpark` also synchronizes with `park`, so the loom model of `install`,
    /// which always parks under loom, does not fail with this load `Relaxed`.)
    #[inline]
    pub(crate) fn probe(&self) -> bool {
        self.state.load(Acquire) == SET
    }

    /// Sets the latch `this` points at and wakes its waiter, if parked. After the store of
    /// `SET` the latch may already be freed; `set` touches it no more.
    ///
    /// A raw pointer, not `&self`: the waiter may return and free the latch (its stack
    /// frame) as soon as it sees `SET`, while this call still runs, and a reference argument
    /// must stay valid until its function returns (Miri reports the deallocation of a
    /// protected `&Latch`, whose padding is not interior-mutable). Only references to the
    /// atomic state (interior-mutable throughout) and, while the waiter cannot leave, to the
    /// sleeper slot are made.
    ///
    /// # Safety
    ///
    /// `this` points at a latch that stays alive until its state is `SET` (its waiter waits
    /// for that), and that nobody else sets.
    pub(crate) unsafe fn set(this: *const Self) {
        // SAFETY: the latch is alive until `SET` is stored (the caller's contract); the
        // reference covers the atomic alone and is not used after that store.
        let state = unsafe { &(*this).state };
        let mut current = state.load(Acquire);
        loop {
            match current {
                UNSET => match state.compare_exchange(UNSET, SET, AcqRel, Acquire) {
                    Ok(_) => return,
                    Err(actual) => current = actual,
                },
                SLEEPING => {
                    // SAFETY: the Acquire load of SLEEPING synchronizes with the waiter's
                    // Release CAS, after which the waiter only parks until SET, so the
                    // latch is alive and its sleeper slot is no longer written.
                    let sleeper =
                        unsafe { &(*this).sleeper }.with(|cell| unsafe { (*cell).clone() });
                    // Release: pairs with `probe`'s Acquire (see there why the loom model
                    // does not fail with this store `Relaxed`: the unpark below also
                    // orders the setter's work before the parked waiter's return).
                    state.store(SET, Release);
                    if let Some(thread) = sleeper {
                        thread.unpark();
                    }
                    return;
                }
                _ => return,
            }
        }
    }

    /// Waits until the latch is set: spins with backoff, then parks.
    pub(crate) fn wait(&self) {
        let backoff = Backoff::new();
        while !backoff.is_completed() {
            if self.probe() {
                return;
            }
            backoff.snooze();
        }
        // SAFETY: only the waiter writes `sleeper`, and only before publishing
        // SLEEPING; the setter reads it only after seeing SLEEPING.
        self.sleeper
            .with_mut(|cell| unsafe { *cell = Some(thread::current()) });
        if self
            .state
            .compare_exchange(UNSET, SLEEPING, AcqRel, Acquire)
            .is_err()
        {
            return; // set meanwhile
        }
        while !self.probe() {
            thread::park();
        }
    }
}

/// A latch set when a counter drops to zero: "all of these are done".
pub(crate) struct CountLatch {
    pending: AtomicUsize,
    latch: Latch,
}

impl CountLatch {
    /// A latch that needs `count` calls to [`count_down`](Self::count_down).
    pub(crate) fn new(count: usize) -> Self {
        Self {
            pending: AtomicUsize::new(count),
            latch: Latch::new(),
        }
    }

    pub(crate) fn increment(&self) {
        // Relaxed: the count only grows while it is held above zero by the caller.
        self.pending
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts the latch `this` points at one down; the last one sets the latch. A raw
    /// pointer, as for [`Latch::set`]: the waiter may free the latch once it is set.
    ///
    /// # Safety
    ///
    /// `this` points at a count latch that stays alive until it is set (its waiter waits
    /// for that), counted down at most as many times as it was counted up.
    pub(crate) unsafe fn count_down(this: *const Self) {
        // SAFETY: alive until set (the caller's contract): this decrement comes first.
        let pending = unsafe { &(*this).pending };
        // AcqRel: the last decrement acquires every earlier one's work and releases it
        // to the waiter through the latch.
        if pending.fetch_sub(1, AcqRel) == 1 {
            // SAFETY: the count reached zero here, so nobody else sets the latch, which
            // stays alive until it is set.
            unsafe { Latch::set(&raw const (*this).latch) };
        }
    }

    /// The latch set when the count reaches zero.
    pub(crate) fn latch(&self) -> &Latch {
        &self.latch
    }

    pub(crate) fn wait(&self) {
        self.latch.wait();
    }
}
