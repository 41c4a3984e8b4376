//! [`change_in_place`]: a boxed value moved through a function and back into its own box, so
//! that an op's state that changes step by step (`run/device.rs`) costs one allocation.
//!
//! Safe Rust moves a value out of a box only by freeing the box (`*boxed`); a box whose value
//! is out and not yet back is a `Box<MaybeUninit<T>>`, which is what this holds in between.

use std::mem::MaybeUninit;

/// `boxed`, its value replaced by `change(value)` in the same allocation. Should `change`
/// panic, the value is dropped by its unwinding (it owns it) and the box is freed, without a
/// second drop.
#[expect(
    clippy::unnecessary_box_returns,
    reason = "the box is the point: the value stays in its allocation"
)]
pub(crate) fn change_in_place<T>(boxed: Box<T>, change: impl FnOnce(T) -> T) -> Box<T> {
    let raw = Box::into_raw(boxed);
    // SAFETY: `raw` comes from `Box::into_raw`, so it is valid, aligned and initialized; the
    // value is read out once, and the allocation is not used as a `T` again until
    // `Box::write` below puts a value back.
    let value = unsafe { raw.read() };
    // SAFETY: the same allocation, given back to a box as a `MaybeUninit<T>`, which has `T`'s
    // layout: freeing that box drops no value (the one read out is owned by `value`).
    let slot = unsafe { Box::from_raw(raw.cast::<MaybeUninit<T>>()) };
    Box::write(slot, change(value))
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::change_in_place;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>, u32);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_new_value_is_in_the_same_box_and_each_value_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let boxed = Box::new(Counted(Arc::clone(&drops), 1));
        let before: *const Counted = &raw const *boxed;
        let changed = change_in_place(boxed, |old| Counted(Arc::clone(&old.0), old.1 + 1));
        assert_eq!(&raw const *changed, before);
        assert_eq!(changed.1, 2);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the old value, once");
        drop(changed);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_change_that_panics_drops_the_value_once_and_frees_the_box() {
        let drops = Arc::new(AtomicUsize::new(0));
        let boxed = Box::new(Counted(Arc::clone(&drops), 1));
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            change_in_place(boxed, |_old| panic!("the change failed"))
        }));
        assert!(unwound.is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
