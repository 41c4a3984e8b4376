//! Latches: one-shot "done" flags a single thread waits on, spinning first, then parked.
//!
//! A latch usually lives in the waiter's stack frame (a `join` job, a `scope`), so the
//! thread that sets it must not touch it after the waiter may have returned. Hence the
//! protocol below: the setter's *last* access to the latch is the store of `SET`, and
//! the handle it unparks afterwards is its own clone.
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

    /// Sets the latch and wakes its waiter, if parked. After this call the latch may
    /// already be freed; `set` itself touches it no more after its final store.
    pub(crate) fn set(&self) {
        let mut state = self.state.load(Acquire);
        loop {
            match state {
                UNSET => match self.state.compare_exchange(UNSET, SET, AcqRel, Acquire) {
                    Ok(_) => return,
                    Err(actual) => state = actual,
                },
                SLEEPING => {
                    // SAFETY: the Acquire load of SLEEPING synchronizes with the waiter's
                    // Release CAS, after which the waiter only parks until SET.
                    let sleeper = self.sleeper.with(|cell| unsafe { (*cell).clone() });
                    // Release: pairs with `probe`'s Acquire (see there why the loom model
                    // does not fail with this store `Relaxed`: the unpark below also
                    // orders the setter's work before the parked waiter's return).
                    self.state.store(SET, Release);
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

    /// Counts one down; the last one sets the latch.
    pub(crate) fn count_down(&self) {
        // AcqRel: the last decrement acquires every earlier one's work and releases it
        // to the waiter through the latch.
        if self.pending.fetch_sub(1, AcqRel) == 1 {
            self.latch.set();
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
