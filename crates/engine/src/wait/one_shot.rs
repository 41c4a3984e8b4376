//! [`OneShot`]: the one-shot hand-over a `wait_for_var` waits on, blocking (`wait`) or as a
//! future (`poll_take`, for `wait_for_var_async`).
//!
//! # Protocol
//!
//! Everything lives under one mutex: the state (open, claimed, set, taken, abandoned) and the
//! waker of a waiting future. The setter (`release_wait`, on whatever thread releases the
//! wait op) first `claim`s the one-shot, unless the waiter `abandon`ed it (then it takes nothing
//! that belongs to the waiter), then `set`s it: it stores the value and takes the waker under
//! the mutex, and after dropping it notifies the condvar (if a waiter sleeps on it) and wakes
//! the waker.
//!
//! # Why no wake-up is lost
//!
//! A blocking waiter checks the state and sleeps on the condvar while it holds the mutex (the
//! condvar releases it atomically), the classic pattern; it says so in `sleeping`, under the
//! mutex, and the setter notifies the condvar only if it finds it set: a waiter that was not
//! asleep when the setter stored the value finds the value when it next takes the mutex. A
//! waiter first looks for the value a few times (`Backoff`: spinning, then yielding) before it
//! sleeps: a wait that ends within microseconds costs no futex call on either side.
//!
//! A future's `poll_take` checks the state *and* stores its waker in one critical section. The
//! setter's critical section (value in, waker out) is ordered with it by the mutex: if it comes
//! first, the poll finds the value; if it comes second, it finds the waker the poll stored (the
//! newest one: each poll replaces a waker that would not wake the same task) and wakes it once the
//! mutex is dropped (so a waker that polls inline cannot deadlock on the one-shot). A poll between
//! the two (a spurious one, or a re-poll by another task) stores its waker before the setter takes
//! it, so the waker woken is always that of the latest poll, as `Future` requires. The model
//! `one_shot_poll_never_misses_the_set` in `loom_tests.rs` checks it; splitting the poll's check
//! and its registration into two critical sections makes it fail.

use std::task::{Context, Poll, Waker};

use depengine_sync::{Backoff, Condvar, Mutex, lock, wait, wait_timeout};

/// A one-shot carrying a value from the thread that sets it to the one thread (or
/// future) waiting.
///
/// The waiter may give up (`abandon`) as long as the setter has not `claim`ed the one-shot: the
/// setter claims it before the side effects that belong to the waiter (`wait_for_var` taking
/// the var's failure), so a waiter that gave up takes nothing, and one that cannot give up any
/// more waits for a value that is on its way.
///
/// Threads: the waiter (a thread in `wait`, or whoever polls the future) and the setter (the
/// thread that releases the wait op), each under the mutex.
pub(crate) struct OneShot<T> {
    inner: Mutex<Inner<T>>,
    set: Condvar,
}

struct Inner<T> {
    state: OneShotState<T>,
    /// The waker of the last poll that found the one-shot not set; taken by `set`.
    waker: Option<Waker>,
    /// Whether a blocking waiter sleeps on the condvar: only then does `set` notify it.
    sleeping: bool,
}

enum OneShotState<T> {
    /// Nothing yet: the waiter may still abandon.
    Open,
    /// The setter committed to setting it.
    Claimed,
    Set(T),
    /// The value was taken.
    Taken,
    /// The waiter gave up; the setter does nothing.
    Abandoned,
}

impl<T> OneShot<T> {
    pub(crate) fn new() -> Self {
        OneShot {
            inner: Mutex::new(Inner {
                state: OneShotState::Open,
                waker: None,
                sleeping: false,
            }),
            set: Condvar::new(),
        }
    }

    /// Commits to setting the one-shot: `false` if the waiter abandoned it.
    pub(crate) fn claim(&self) -> bool {
        let mut inner = lock(&self.inner);
        match inner.state {
            OneShotState::Open => {
                inner.state = OneShotState::Claimed;
                true
            }
            OneShotState::Abandoned => false,
            OneShotState::Claimed | OneShotState::Set(_) | OneShotState::Taken => true,
        }
    }

    /// Sets the one-shot (the first value wins) and wakes the waiter; does nothing if the waiter
    /// abandoned it.
    pub(crate) fn set(&self, value: T) {
        // A value refused (abandoned, or set already) is dropped.
        let _ = self.offer(value);
    }

    /// Sets the one-shot and wakes the waiter, unless the waiter abandoned it (or a value was set
    /// first): then `value` comes back, for the caller to dispose of (a hold's grant must
    /// still complete its op: `data/hold.rs`).
    pub(crate) fn offer(&self, value: T) -> Result<(), T> {
        let mut inner = lock(&self.inner);
        if !matches!(inner.state, OneShotState::Open | OneShotState::Claimed) {
            return Err(value);
        }
        inner.state = OneShotState::Set(value);
        // Taken in the same critical section as the value is stored (see the module docs).
        let waker = inner.waker.take();
        let sleeping = inner.sleeping;
        drop(inner);
        if sleeping {
            self.set.notify_all();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// Takes the value if the one-shot is set, without waiting (after a failed `abandon`).
    pub(crate) fn try_take(&self) -> Option<T> {
        Self::take(&mut lock(&self.inner))
    }

    /// Whether nothing happened to the one-shot yet: not claimed, set or abandoned.
    pub(crate) fn is_open(&self) -> bool {
        matches!(lock(&self.inner).state, OneShotState::Open)
    }

    /// Whether the one-shot is set (its value not yet taken).
    pub(crate) fn is_set(&self) -> bool {
        matches!(lock(&self.inner).state, OneShotState::Set(_))
    }

    /// Gives up waiting: `true` unless the setter claimed (or set) the one-shot already, in which
    /// case the caller must `wait` for the value (or, a future dropped, leave it).
    pub(crate) fn abandon(&self) -> bool {
        let mut inner = lock(&self.inner);
        inner.waker = None;
        match inner.state {
            OneShotState::Open | OneShotState::Abandoned => {
                inner.state = OneShotState::Abandoned;
                true
            }
            OneShotState::Claimed | OneShotState::Set(_) | OneShotState::Taken => false,
        }
    }

    /// Takes the value if the one-shot is set.
    fn take(inner: &mut Inner<T>) -> Option<T> {
        match std::mem::replace(&mut inner.state, OneShotState::Taken) {
            OneShotState::Set(value) => Some(value),
            other => {
                inner.state = other;
                None
            }
        }
    }

    /// The future's side of [`wait`](Self::wait): the value (once) if the one-shot is set, else
    /// `Pending`, with `cx`'s waker stored for `set` to wake, in the same critical section as
    /// the check (see the module docs). Not after `abandon` returned `true`.
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<T> {
        let mut inner = lock(&self.inner);
        debug_assert!(
            !matches!(inner.state, OneShotState::Abandoned),
            "polling an abandoned one_shot"
        );
        if let Some(value) = Self::take(&mut inner) {
            inner.waker = None;
            return Poll::Ready(value);
        }
        match &mut inner.waker {
            // The same task polled again: its waker is still the right one.
            Some(waker) if waker.will_wake(cx.waker()) => {}
            // First poll, or polled by another task: the waker of the latest poll is woken.
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// As [`wait`](Self::wait), giving up after about `timeout` (or earlier, on a spurious
    /// wake-up): `None` if the one-shot is not set by then.
    pub(crate) fn wait_timeout(&self, timeout: std::time::Duration) -> Option<T> {
        // A look without waiting (the naive engine's, between the ops it runs) neither spins
        // nor sleeps.
        if timeout.is_zero() {
            return self.try_take();
        }
        let mut inner = self.look();
        if !matches!(inner.state, OneShotState::Set(_)) {
            inner.sleeping = true;
            inner = wait_timeout(&self.set, inner, timeout).0;
            inner.sleeping = false;
        }
        Self::take(&mut inner)
    }

    /// Blocks until the one-shot is set; returns its value (once). Not after `abandon` returned
    /// `true` (nothing would set it).
    pub(crate) fn wait(&self) -> T {
        let mut inner = self.look();
        debug_assert!(
            !matches!(inner.state, OneShotState::Abandoned),
            "waiting on an abandoned one_shot"
        );
        loop {
            if let Some(value) = Self::take(&mut inner) {
                return value;
            }
            inner.sleeping = true;
            inner = wait(&self.set, inner);
            inner.sleeping = false;
        }
    }

    /// The locked state once the one-shot is set, or once a few looks (spinning, then
    /// yielding the core) found it not set.
    fn look(&self) -> depengine_sync::MutexGuard<'_, Inner<T>> {
        let backoff = Backoff::new();
        loop {
            let inner = lock(&self.inner);
            if matches!(inner.state, OneShotState::Set(_)) || backoff.is_completed() {
                return inner;
            }
            drop(inner);
            backoff.snooze();
        }
    }
}
