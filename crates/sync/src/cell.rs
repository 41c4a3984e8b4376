//! [`UnsafeCell`] with loom's closure API in both modes.
//!
//! Under loom, loom's own cell, which tracks every access and fails the model on a data race.
//! Otherwise a thin wrapper of `std`'s cell with the same `with` / `with_mut` accessors (tokio's
//! `loom/std/unsafe_cell.rs` does the same), so code written against it compiles in both modes.

#[cfg(loom)]
pub use loom::cell::UnsafeCell;

/// `std`'s `UnsafeCell` behind loom's closure API: code reaches the value only inside `with`
/// (shared) and `with_mut` (exclusive), which under `--cfg loom` lets loom check each access.
/// Obtaining the raw pointers is safe; dereferencing them is the caller's `unsafe`, which must
/// argue that no conflicting access can happen at the same time.
///
/// ```
/// use depengine_sync::UnsafeCell;
///
/// let cell = UnsafeCell::new(1_u32);
/// // SAFETY: nothing else accesses `cell` here.
/// cell.with_mut(|value| unsafe { *value += 41 });
/// // SAFETY: as above.
/// assert_eq!(cell.with(|value| unsafe { *value }), 42);
/// ```
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// A cell holding `value`.
    pub const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// The value, out of the cell.
    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }

    /// Calls `f` with a shared pointer to the value. Reading through it must not race with a
    /// write through [`with_mut`](Self::with_mut).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a mutable pointer to the value. Writing through it must not race with any
    /// other access.
    #[inline]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
