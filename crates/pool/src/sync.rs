//! The synchronization facade: std types normally, loom's under `--cfg loom`.
//!
//! Every atomic, lock, cell and thread the pool touches comes from here, so the loom
//! models in `tests/loom_*.rs` explore the real code, not a copy of it. The API is the
//! common subset of std and loom; `UnsafeCell` follows loom's closure-based accessors.

#[cfg(loom)]
pub(crate) use loom::{
    sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, fence},
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread, thread_local,
};

#[cfg(not(loom))]
pub(crate) use std::{
    sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, fence},
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread, thread_local,
};

/// Locks `mutex`, ignoring poisoning: every critical section in this crate leaves
/// the protected state consistent before it can panic, so a poisoned lock holds
/// valid data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Waits on `condvar`, ignoring poisoning for the reason given at [`lock`].
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match condvar.wait(guard) {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// One step of a spin loop. Under loom a spin loop must yield, or the model
/// checker would explore the spinning thread forever.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Exponential backoff for spin-then-park loops: crossbeam's under std, a plain
/// yield per step under loom.
#[cfg(not(loom))]
pub(crate) use crossbeam_utils::Backoff;

#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    steps: std::cell::Cell<u32>,
}

#[cfg(loom)]
impl Backoff {
    pub(crate) fn new() -> Self {
        Self::default()
    }
    pub(crate) fn snooze(&self) {
        self.steps.set(self.steps.get() + 1);
        loom::thread::yield_now();
    }
    /// Always done: under loom, spinning only multiplies the interleavings to explore
    /// without adding behaviours (a spin that finds nothing is followed by the parking
    /// path anyway), so spin-then-park loops park at once.
    pub(crate) fn is_completed(&self) -> bool {
        let _ = self.steps.get();
        true
    }
}

/// An `UnsafeCell` with loom's closure-based access, so loom can check every
/// access for data races.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
