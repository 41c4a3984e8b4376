//! The synchronisation primitives the crate is built on, switched to `loom`'s model-checked
//! versions under `--cfg loom` (the same pattern as tokio's `loom/` module).
//!
//! Everything that takes part in the concurrency protocol (the per-var mutex, the op wait
//! counters, the parked-op cells, the free lists) goes through this module so that loom explores its interleavings.
//! Two things deliberately stay on `std` under loom:
//!
//! - [`OnceLock`], which publishes a slab bucket, or a var's `Incoming` entries, exactly once.
//!   Its initialisers only allocate and construct objects (no loom operation is a scheduling
//!   point there), so loom can never switch threads inside them; loom has no `OnceLock` of its
//!   own.
//! - the process-wide counter handing out graph ids (see `graph.rs`), which is not shared
//!   state of any model.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread::yield_now;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread::yield_now;

/// `std`'s `UnsafeCell` behind loom's closure API (`with`, `with_mut`), so code written against
/// it is checked by loom under `--cfg loom` (the same wrapper as tokio's
/// `loom/std/unsafe_cell.rs`). Obtaining the raw pointers is safe; dereferencing them is the
/// caller's `unsafe`.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a shared pointer to the value.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a mutable pointer to the value.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

pub(crate) use std::sync::OnceLock;

/// Locks `mutex`, ignoring poisoning.
///
/// No critical section of this crate runs caller code, so a poisoned lock can only come from a
/// panic inside the crate's own short, non-panicking sections (or an allocation failure); the
/// state it protects is then still consistent, and the library must not turn that into a panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
