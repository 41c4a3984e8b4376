//! [`SyncFn`]: a sync op's function, stored in the op's record when it is small, boxed
//! otherwise.
//!
//! Most op functions capture a pointer or two (an `Arc`, a reference) or nothing. A
//! `Box<dyn FnOnce>` allocates for every closure that captures anything: a `malloc` on the
//! pusher, a `free` on the worker (an allocator's per-thread caches do not help when one
//! thread allocates and another frees) and one more cache line to carry between the cores,
//! about as much as the rest of an empty op costs (`docs/bench-history.md`, "Engine: typed
//! data"). A closure of at most [`INLINE_BYTES`] bytes, aligned to at most 8, is stored
//! in the record instead, which crosses between the cores anyway; a larger one is boxed, and
//! the record holds the box's pointer.
//!
//! One word inline: a closure that captures one pointer (an `Arc`, a reference) and nothing
//! else. With it the `SyncFn` is 16 bytes, as a `Box<dyn FnOnce>` is, and the record stays at
//! 56 bytes (`record.rs`); two words would make it 64, and every op's slot 120. A typed op's
//! function captures no pointer for its accesses: it finds its data through the op's vars
//! ([`OpVars`], which every call receives), so it is inline whenever the user's closure is
//! (`data/access.rs`).
//!
//! The record holds the bytes and a pointer to a static table of two functions made for the
//! closure's type: one moves the closure out and calls it, one drops it. The table says
//! which of the two layouts the bytes have, so nothing else is stored.

use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};

use crate::context::RunContext;
use crate::failure::BoxError;
use crate::op::vars::OpVars;

/// Bytes of a closure stored in the record.
pub(crate) const INLINE_BYTES: usize = 8;

/// Where the closure (or the pointer to its box) lives: a closure stored inline is written at
/// the start, which the alignment of `usize` (8) makes suitable for any closure of alignment
/// up to 8.
type Storage = MaybeUninit<[usize; INLINE_BYTES / size_of::<usize>()]>;

/// What the function returns.
type Outcome = Result<(), BoxError>;

/// The functions made for one closure type `F` and its layout in `Storage`.
struct Table {
    /// Moves the closure out of the storage and calls it.
    call: unsafe fn(*mut Storage, RunContext, &dyn OpVars) -> Outcome,
    /// Drops the closure in the storage.
    drop: unsafe fn(*mut Storage),
}

/// A sync op's function: `FnOnce(RunContext, &dyn OpVars) -> Result<(), BoxError> + Send`,
/// inline in the record when small.
pub(crate) struct SyncFn {
    table: &'static Table,
    storage: Storage,
}

// SAFETY: `SyncFn::new` takes only `Send` closures, and the storage holds nothing else.
unsafe impl Send for SyncFn {}

/// Where `SyncFn::new` put a closure, and how to take it back out: the table's two functions
/// are the same for both places, calling or dropping what `take` returns.
trait Place: Sized {
    /// The closure, or its box: callable once; dropping it drops what the closure captured.
    type Taken: FnOnce(RunContext, &dyn OpVars) -> Outcome;

    const TABLE: Table = Table {
        call: call::<Self>,
        drop: drop_taken::<Self>,
    };

    /// Takes the closure out of `storage`.
    ///
    /// # Safety
    ///
    /// `storage` holds what `SyncFn::new` wrote there for this place, not taken yet; it is not
    /// used again.
    unsafe fn take(storage: *mut Storage) -> Self::Taken;
}

/// A closure `F` stored in the record.
struct Inline<F>(PhantomData<F>);

/// A closure `F` stored in a box, whose pointer is in the record.
struct Boxed<F>(PhantomData<F>);

impl<F: FnOnce(RunContext, &dyn OpVars) -> Outcome> Place for Inline<F> {
    type Taken = F;

    unsafe fn take(storage: *mut Storage) -> F {
        // SAFETY: the caller's: an `F` at the start of the storage (aligned, see `Storage`),
        // moved out once.
        unsafe { storage.cast::<F>().read() }
    }
}

impl<F: FnOnce(RunContext, &dyn OpVars) -> Outcome> Place for Boxed<F> {
    type Taken = Box<F>;

    unsafe fn take(storage: *mut Storage) -> Box<F> {
        // SAFETY: the caller's: the box's pointer, from `Box::into_raw`, taken once.
        unsafe { Box::from_raw(storage.cast::<*mut F>().read()) }
    }
}

/// The table's `call`: takes the closure out and calls it.
///
/// # Safety
///
/// As [`Place::take`].
unsafe fn call<P: Place>(storage: *mut Storage, run: RunContext, vars: &dyn OpVars) -> Outcome {
    // SAFETY: the caller's.
    let func = unsafe { P::take(storage) };
    func(run, vars)
}

/// The table's `drop`: takes the closure out and drops it.
///
/// # Safety
///
/// As [`Place::take`].
unsafe fn drop_taken<P: Place>(storage: *mut Storage) {
    // SAFETY: the caller's.
    drop(unsafe { P::take(storage) });
}

impl SyncFn {
    /// Stores `func`: inline if it fits, else in a box.
    #[inline]
    pub(crate) fn new<F>(func: F) -> Self
    where
        F: FnOnce(RunContext) -> Outcome + Send + 'static,
    {
        // The same size as `func`: what fits inline still does.
        Self::with_vars(move |run, _: &dyn OpVars| func(run))
    }

    /// Stores `func`, which also receives the vars of the op it runs for: inline if it fits,
    /// else in a box.
    #[inline]
    pub(crate) fn with_vars<F>(func: F) -> Self
    where
        F: FnOnce(RunContext, &dyn OpVars) -> Outcome + Send + 'static,
    {
        let mut storage = Storage::uninit();
        let table = if size_of::<F>() <= INLINE_BYTES && align_of::<F>() <= align_of::<usize>() {
            // SAFETY: `F` fits at the start of the storage, aligned (checked above).
            unsafe { storage.as_mut_ptr().cast::<F>().write(func) };
            &<Inline<F> as Place>::TABLE
        } else {
            let boxed = Box::into_raw(Box::new(func));
            // SAFETY: a pointer fits in the storage, aligned.
            unsafe { storage.as_mut_ptr().cast::<*mut F>().write(boxed) };
            &<Boxed<F> as Place>::TABLE
        };
        SyncFn { table, storage }
    }

    /// Calls the function, consuming it.
    ///
    /// # Safety
    ///
    /// `vars` are the vars of the op (or the member of a bulk segment) this function was pushed
    /// with, in the order it named them, and that op holds them for the whole call: a typed
    /// op's function makes its references from the cells it finds there (`data/access.rs`).
    #[inline]
    pub(crate) unsafe fn call(self, run: RunContext, vars: &dyn OpVars) -> Outcome {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the table was made for what `with_vars` stored; `this` is not dropped, so
        // the closure is moved out (or its box taken) exactly once, here. What the closure
        // needs of `vars`, the caller's contract gives.
        unsafe { (this.table.call)(&raw mut this.storage, run, vars) }
    }
}

impl Drop for SyncFn {
    fn drop(&mut self) {
        // SAFETY: a `SyncFn` that drops was not called (`call` skips the drop): the closure
        // is still there, dropped once, here.
        unsafe { (self.table.drop)(&raw mut self.storage) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::context::{Context, FnProperty};
    use crate::op::vars::NoVars;

    fn run() -> RunContext {
        RunContext {
            context: Context::cpu(0),
            priority: 0,
            property: FnProperty::Normal,
        }
    }

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn small_and_large_closures_are_called_or_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let small = Counted(Arc::clone(&drops));
        let large = (Counted(Arc::clone(&drops)), [7_u64; 8]);
        let small_fn = SyncFn::new(move |_| {
            drop(small);
            Ok(())
        });
        let large_fn = SyncFn::new(move |_| {
            let (counted, values) = large;
            assert_eq!(values[7], 7);
            drop(counted);
            Err("large".into())
        });
        // SAFETY: an untyped function, which looks at no var; none are named.
        let small = unsafe { small_fn.call(run(), &NoVars) };
        assert!(small.is_ok());
        // SAFETY: as above.
        let large = unsafe { large_fn.call(run(), &NoVars) };
        assert_eq!(large.unwrap_err().to_string(), "large");
        assert_eq!(drops.load(Ordering::Relaxed), 2);

        let unrun_small = Counted(Arc::clone(&drops));
        let unrun_large = (Counted(Arc::clone(&drops)), [0_u64; 8]);
        drop(SyncFn::new(move |_| {
            drop(unrun_small);
            Ok(())
        }));
        drop(SyncFn::new(move |_| {
            drop(unrun_large);
            Ok(())
        }));
        assert_eq!(drops.load(Ordering::Relaxed), 4);
    }
}
