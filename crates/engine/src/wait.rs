//! The facade's own synchronization: counting pending ops for `wait_for_all` ([`IdleCounter`])
//! and the one-shot [`Latch`] a `wait_for_var` blocks on.
//!
//! # `IdleCounter` protocol
//!
//! One atomic word holds the number of pending ops (times two) and a `WAITER` bit. The hot path
//! takes no lock: a push adds two, a completion subtracts two and, only when it takes the count
//! to zero *and* the `WAITER` bit is set, takes the mutex and notifies. A waiter, holding the
//! mutex, sets the bit with a read-modify-write and re-checks the count before sleeping on the
//! condvar (which releases the mutex atomically). Both sides are read-modify-writes of the
//! same word, so they are totally ordered (no reliance on `SeqCst`): either the waiter's
//! `fetch_or` comes first and the completer sees the bit (and the mutex makes it wait until the
//! waiter sleeps), or the completion comes first and the waiter reads a zero count. No wake-up
//! is lost; the loom models in `loom_tests.rs` check this (an earlier version with two atomics
//! and a `SeqCst` handshake failed them: loom does not model `SeqCst` as a total order).

use crate::sync::{AtomicUsize, Condvar, Mutex, Ordering, lock, wait};

/// The waiter bit of `IdleCounter::state`.
const WAITER: usize = 1;
/// One pending op in `IdleCounter::state`.
const ONE: usize = 2;

/// A value alone on its cache lines (two, for the adjacent-line prefetcher).
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Counts pending ops; lets threads wait until none is left.
pub(crate) struct IdleCounter {
    /// `pending * ONE | WAITER?`.
    /// Written by every push and every completion: kept off the lines of the engine's
    /// read-mostly fields.
    state: Padded<AtomicUsize>,
    /// Threads inside `wait_idle`.
    waiters: Mutex<usize>,
    idle: Condvar,
}

impl IdleCounter {
    pub(crate) fn new() -> Self {
        IdleCounter {
            state: Padded(AtomicUsize::new(0)),
            waiters: Mutex::new(0),
            idle: Condvar::new(),
        }
    }

    /// One more pending op.
    #[inline]
    pub(crate) fn add(&self) {
        self.state.fetch_add(ONE, Ordering::Relaxed);
    }

    /// One pending op completed; wakes the waiters if it was the last.
    #[inline]
    pub(crate) fn done(&self) {
        // Release: the op's effects happen-before a waiter that reads the zero count.
        let old = self.state.fetch_sub(ONE, Ordering::AcqRel);
        if old & !WAITER == ONE && old & WAITER != 0 {
            drop(lock(&self.waiters));
            self.idle.notify_all();
        }
    }

    /// Ops pushed and not completed.
    pub(crate) fn pending(&self) -> usize {
        self.state.load(Ordering::Acquire) / ONE
    }

    /// Blocks until no op is pending.
    pub(crate) fn wait_idle(&self) {
        let mut waiters = lock(&self.waiters);
        *waiters += 1;
        self.state.fetch_or(WAITER, Ordering::AcqRel);
        while self.state.load(Ordering::Acquire) / ONE != 0 {
            waiters = wait(&self.idle, waiters);
        }
        *waiters -= 1;
        if *waiters == 0 {
            self.state.fetch_and(!WAITER, Ordering::AcqRel);
        }
    }
}

/// A one-shot latch carrying a value from the thread that sets it to the one thread waiting.
pub(crate) struct Latch<T> {
    value: Mutex<Option<T>>,
    set: Condvar,
}

impl<T> Latch<T> {
    pub(crate) fn new() -> Self {
        Latch {
            value: Mutex::new(None),
            set: Condvar::new(),
        }
    }

    /// Sets the latch (the first value wins) and wakes the waiter.
    pub(crate) fn set(&self, value: T) {
        let mut slot = lock(&self.value);
        if slot.is_none() {
            *slot = Some(value);
        }
        drop(slot);
        self.set.notify_all();
    }

    /// Blocks until the latch is set; returns its value.
    pub(crate) fn wait(&self) -> T {
        let mut slot = lock(&self.value);
        loop {
            if let Some(value) = slot.take() {
                return value;
            }
            slot = wait(&self.set, slot);
        }
    }
}
