//! The facade's own synchronization: counting pending ops for `wait_for_all` ([`IdleCounter`])
//! and the one-shot [`Latch`] a `wait_for_var` blocks on.
//!
//! # `IdleCounter` protocol
//!
//! `pending` counts pushed ops not yet completed. The hot path takes no lock: a push increments
//! it, a completion decrements it and, only when it reaches zero, looks at `waiters`. A waiter
//! registers in `waiters` and re-checks `pending` while holding the mutex, then sleeps on the
//! condvar (releasing the mutex atomically). Both sides use `SeqCst` (a Dekker handshake):
//! either the waiter sees `pending == 0`, or the completer sees `waiters > 0`, takes the mutex
//! (so the waiter is already asleep or has not yet checked) and notifies. No wake-up is lost.
//! The loom models in `loom_tests.rs` check this.

use crate::sync::{AtomicUsize, Condvar, Mutex, Ordering, lock, wait};

/// Counts pending ops; lets threads wait until none is left.
pub(crate) struct IdleCounter {
    pending: AtomicUsize,
    waiters: AtomicUsize,
    mutex: Mutex<()>,
    idle: Condvar,
}

impl IdleCounter {
    pub(crate) fn new() -> Self {
        IdleCounter {
            pending: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            mutex: Mutex::new(()),
            idle: Condvar::new(),
        }
    }

    /// One more pending op.
    #[inline]
    pub(crate) fn add(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    /// One pending op completed; wakes the waiters if it was the last.
    #[inline]
    pub(crate) fn done(&self) {
        if self.pending.fetch_sub(1, Ordering::SeqCst) == 1
            && self.waiters.load(Ordering::SeqCst) > 0
        {
            drop(lock(&self.mutex));
            self.idle.notify_all();
        }
    }

    /// Ops pushed and not completed.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Blocks until no op is pending.
    pub(crate) fn wait_idle(&self) {
        let mut guard = lock(&self.mutex);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        while self.pending.load(Ordering::SeqCst) != 0 {
            guard = wait(&self.idle, guard);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
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
