//! [`SyncFn`]: a sync op's function, stored in the op's record when it is small, in a block of
//! the closure store when it fits one, boxed otherwise.
//!
//! Most op functions capture a pointer or two (an `Arc`, a reference) or nothing. A
//! `Box<dyn FnOnce>` allocates for every closure that captures anything: a `malloc` on the
//! pusher, a `free` on the worker (an allocator's per-thread caches do not help when one
//! thread allocates and another frees) and one more cache line to carry between the cores
//! (`docs/decisions.md`, "One word of closure inline in the op record", "Larger closures in
//! recycled 120-byte blocks"). So a closure has
//! one of three places:
//!
//! - **Inline**, at most [`INLINE_BYTES`] bytes aligned to at most 8: in the record, which
//!   crosses between the cores anyway.
//! - **In a block** of the closure store, at most [`BLOCK_BYTES`] bytes aligned to at most
//!   [`BLOCK_ALIGN`]: a [`BlockStore`] (`depengine-slab`) recycles the blocks between the
//!   pusher and the workers in batches, as the graph's op slots are recycled, without a lock
//!   and without growing once the steady state is reached. The record holds the block's id; the
//!   call moves the closure out and gives the block back before it runs the closure. One store
//!   serves every engine of the process, so a closure's block outlives any one engine's state;
//!   its storage goes back to the allocator after a burst (`trim_closure_blocks`, at an
//!   engine's idle moments).
//! - **Boxed**, larger (or should the store be full): the record holds the box's pointer.
//!
//! One word inline: a closure that captures one pointer (an `Arc`, a reference) and nothing
//! else. With it the `SyncFn` is 16 bytes, as a `Box<dyn FnOnce>` is, and the record stays at
//! 56 bytes (`record.rs`); two words would make it 64, and every op's slot 120. A typed op's
//! function captures no pointer for its accesses: it finds its data through the op's vars
//! ([`OpVars`], which every call receives), so it is inline whenever the user's closure is
//! (`data/access.rs`).
//!
//! The record holds the bytes and a pointer to a static table of two functions made for the
//! closure's type and place: one moves the closure out and calls it, one drops it. The table
//! says which of the three layouts the bytes have, so nothing else is stored.
//!
//! Under loom every closure too large to be inline is boxed: the store's atomics are loom's
//! there, which a process-wide static cannot hold across models, and depengine-slab's models check
//! the store itself.

use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};

#[cfg(not(loom))]
use depengine_slab::{BLOCK_ALIGN, BLOCK_BYTES, BlockId, BlockStore};

use crate::context::RunContext;
use crate::failure::BoxError;
use crate::op::vars::OpVars;

/// Bytes of a closure stored in the record.
pub(crate) const INLINE_BYTES: usize = 8;

// A block id is stored where an inline closure would be.
#[cfg(not(loom))]
const _: () =
    assert!(size_of::<BlockId>() <= INLINE_BYTES && align_of::<BlockId>() <= align_of::<usize>());

/// The blocks of the closures stored in one (see the module documentation).
#[cfg(not(loom))]
static CLOSURE_BLOCKS: std::sync::LazyLock<BlockStore> = std::sync::LazyLock::new(BlockStore::new);

/// Gives the storage of a burst of block-stored closures back to the allocator, if every block
/// is back (`BlockStore::trim`). Called where the engine trims its graph.
pub(crate) fn trim_closure_blocks() {
    #[cfg(not(loom))]
    if let Some(store) = std::sync::LazyLock::get(&CLOSURE_BLOCKS) {
        store.trim();
    }
}

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
    /// The place's name, for the tests.
    #[cfg(all(test, not(loom)))]
    place: &'static str,
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

    /// The place's name, for the tests.
    #[cfg(all(test, not(loom)))]
    const NAME: &'static str;

    const TABLE: Table = Table {
        call: call::<Self>,
        drop: drop_taken::<Self>,
        #[cfg(all(test, not(loom)))]
        place: Self::NAME,
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

/// A closure `F` stored in a block of `CLOSURE_BLOCKS`, whose id is in the record.
#[cfg(not(loom))]
struct InBlock<F>(PhantomData<F>);

/// A closure `F` stored in a box, whose pointer is in the record.
struct Boxed<F>(PhantomData<F>);

impl<F: FnOnce(RunContext, &dyn OpVars) -> Outcome> Place for Inline<F> {
    type Taken = F;
    #[cfg(all(test, not(loom)))]
    const NAME: &'static str = "inline";

    unsafe fn take(storage: *mut Storage) -> F {
        // SAFETY: the caller's: an `F` at the start of the storage (aligned, see `Storage`),
        // moved out once.
        unsafe { storage.cast::<F>().read() }
    }
}

#[cfg(not(loom))]
impl<F: FnOnce(RunContext, &dyn OpVars) -> Outcome> Place for InBlock<F> {
    type Taken = F;
    #[cfg(all(test, not(loom)))]
    const NAME: &'static str = "block";

    #[inline]
    unsafe fn take(storage: *mut Storage) -> F {
        // SAFETY: the caller's: the id of the block `with_vars` wrote an `F` into, taken once.
        let block = unsafe { storage.cast::<BlockId>().read() };
        // SAFETY: the block holds an `F` at the start of its bytes (it fits, aligned: checked
        // by `with_vars`), written by `with_vars` and moved out once, here; we hold the block.
        let func = CLOSURE_BLOCKS.with_bytes(&block, |bytes| unsafe { bytes.cast::<F>().read() });
        CLOSURE_BLOCKS.give_back(block);
        func
    }
}

impl<F: FnOnce(RunContext, &dyn OpVars) -> Outcome> Place for Boxed<F> {
    type Taken = Box<F>;
    #[cfg(all(test, not(loom)))]
    const NAME: &'static str = "boxed";

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
    /// Stores `func`: inline if it fits, else in a block if it fits one, else in a box.
    #[inline]
    pub(crate) fn new<F>(func: F) -> Self
    where
        F: FnOnce(RunContext) -> Outcome + Send + 'static,
    {
        // The same size as `func`: what fits inline still does.
        Self::with_vars(move |run, _: &dyn OpVars| func(run))
    }

    /// Stores `func`, which also receives the vars of the op it runs for: inline if it fits,
    /// else in a block if it fits one, else in a box.
    #[inline]
    pub(crate) fn with_vars<F>(func: F) -> Self
    where
        F: FnOnce(RunContext, &dyn OpVars) -> Outcome + Send + 'static,
    {
        let mut storage = Storage::uninit();
        if size_of::<F>() <= INLINE_BYTES && align_of::<F>() <= align_of::<usize>() {
            // SAFETY: `F` fits at the start of the storage, aligned (checked above).
            unsafe { storage.as_mut_ptr().cast::<F>().write(func) };
            return SyncFn {
                table: &<Inline<F> as Place>::TABLE,
                storage,
            };
        }
        #[cfg(not(loom))]
        if size_of::<F>() <= BLOCK_BYTES
            && align_of::<F>() <= BLOCK_ALIGN
            && let Some(block) = CLOSURE_BLOCKS.take()
        {
            // SAFETY: we hold the block, and `F` fits at the start of its bytes, aligned
            // (checked above).
            CLOSURE_BLOCKS.with_bytes(&block, |bytes| unsafe { bytes.cast::<F>().write(func) });
            // SAFETY: a block id fits in the storage, aligned (asserted beside `INLINE_BYTES`).
            unsafe { storage.as_mut_ptr().cast::<BlockId>().write(block) };
            return SyncFn {
                table: &<InBlock<F> as Place>::TABLE,
                storage,
            };
        }
        let boxed = Box::into_raw(Box::new(func));
        // SAFETY: a pointer fits in the storage, aligned.
        unsafe { storage.as_mut_ptr().cast::<*mut F>().write(boxed) };
        SyncFn {
            table: &<Boxed<F> as Place>::TABLE,
            storage,
        }
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

    /// One closure of each place: inline (a pointer), in a block (72 bytes), boxed (264).
    fn closures(drops: &Arc<AtomicUsize>) -> [SyncFn; 3] {
        let small = Counted(Arc::clone(drops));
        let medium = (Counted(Arc::clone(drops)), [7_u64; 8]);
        let large = (Counted(Arc::clone(drops)), [9_u64; 32]);
        [
            SyncFn::new(move |_| {
                drop(small);
                Ok(())
            }),
            SyncFn::new(move |_| {
                let (counted, values) = medium;
                assert_eq!(values[7], 7);
                drop(counted);
                Err("medium".into())
            }),
            SyncFn::new(move |_| {
                let (counted, values) = large;
                assert_eq!(values[31], 9);
                drop(counted);
                Err("large".into())
            }),
        ]
    }

    #[test]
    fn closures_of_each_place_are_called_or_dropped_once() {
        assert_eq!(size_of::<SyncFn>(), 16);
        let drops = Arc::new(AtomicUsize::new(0));
        let [small, medium, large] = closures(&drops);
        assert_eq!(
            [small.table.place, medium.table.place, large.table.place],
            ["inline", "block", "boxed"]
        );
        // SAFETY: untyped functions, which look at no var; none are named.
        let outcomes = unsafe {
            [
                small.call(run(), &NoVars),
                medium.call(run(), &NoVars),
                large.call(run(), &NoVars),
            ]
        };
        assert!(outcomes[0].is_ok());
        assert_eq!(outcomes[1].as_ref().unwrap_err().to_string(), "medium");
        assert_eq!(outcomes[2].as_ref().unwrap_err().to_string(), "large");
        assert_eq!(drops.load(Ordering::Relaxed), 3);

        drop(closures(&drops));
        assert_eq!(drops.load(Ordering::Relaxed), 6);
    }

    /// Closures in blocks, made by one thread and run or dropped by another, as the pusher and
    /// the workers do: each is called or dropped once. (The store's recycling has the graph's
    /// tests: this process's other tests use the same store meanwhile.)
    #[test]
    fn block_stored_closures_cross_threads_and_are_called_or_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let (sender, receiver) = std::sync::mpsc::sync_channel::<SyncFn>(64);
        let runner = std::thread::spawn(move || {
            let mut ran = 0;
            for (i, func) in receiver.into_iter().enumerate() {
                if i % 3 == 0 {
                    drop(func);
                } else {
                    // SAFETY: an untyped function; no var is named.
                    let _ = unsafe { func.call(run(), &NoVars) };
                    ran += 1;
                }
            }
            ran
        });
        let rounds: usize = if cfg!(miri) { 50 } else { 20_000 };
        for _ in 0..rounds {
            let [_, medium, _] = closures(&drops);
            sender.send(medium).unwrap();
        }
        drop(sender);
        let ran = runner.join().unwrap();
        assert_eq!(ran, rounds - rounds.div_ceil(3));
        assert_eq!(drops.load(Ordering::Relaxed), 3 * rounds);
    }
}
