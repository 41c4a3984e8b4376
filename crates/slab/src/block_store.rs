//! [`BlockStore`]: blocks of [`BLOCK_BYTES`] bytes, taken by one thread and given back by
//! another, recycled through a slab.
//!
//! The graph stores what the caller pushes with each op in the op's slot; the engine keeps a
//! closure there when it fits in a word. A larger closure needs storage of its own for as long
//! as the op lives, and a heap allocation per op is the wrong shape for it: the pushing thread
//! allocates, a worker frees, so an allocator's per-thread caches never serve either side (a
//! `free` of another thread's chunk takes the arena's lock the pusher's `malloc` takes too, and
//! both touch a line the other core wrote). That is the pattern the op slots already have, and
//! the slab already recycles them well: a lock-free free list in two stacks, the freed one taken
//! by the allocator in batches (`slab.rs`, "Free list: two stacks" and "Recycling in batches"),
//! so its line crosses between the cores once per batch, not once per op. A block store is that
//! slab over plain blocks of bytes, with the same trim after a burst.
//!
//! A block is named by a [`BlockId`], which its holder owns: [`with_bytes`](BlockStore::with_bytes)
//! needs the id, [`give_back`](BlockStore::give_back) consumes it. The store hands out raw
//! pointers only, valid while the id is held; every access through them is the holder's, so a
//! trim, which frees storage only while every block is back (the slab's count of users), never
//! frees a block under its holder.
//!
//! Orderings: the slab's. A `give_back` is a `Release` push of the block onto the freed stack,
//! and the `take` that hands it out again took that stack with an `Acquire` read-modify-write
//! (or popped it from the stack that take installed), so whatever the last holder did with the
//! bytes happens before the next holder's first access. The model
//! `block_store_publishes_a_block_given_back_to_its_next_holder` checks it.

use std::fmt;
use std::mem::MaybeUninit;
// Not the loom facade's: a counter that only makes each store's tag unique synchronizes nothing.
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use depengine_sync::UnsafeCell;

use crate::slab::{Keep, Slab, Slot};

/// Bytes in a block: with the slab's link, a block's entry is 128 bytes (two cache lines).
pub const BLOCK_BYTES: usize = 120;

/// The alignment of a block's bytes.
pub const BLOCK_ALIGN: usize = align_of::<u64>();

/// Buckets a trim always keeps: 32 + 64 + 128 blocks, 28 KiB.
const KEEP_BUCKETS: usize = 3;

/// The bytes of one block.
struct Block(UnsafeCell<MaybeUninit<[u64; BLOCK_BYTES / size_of::<u64>()]>>);

#[allow(
    unsafe_code,
    reason = "the bytes are reached only through raw pointers"
)]
// SAFETY: the store never reads or writes a block's bytes: it hands a raw pointer to them to
// the holder of the block's id (`with_bytes`), whose dereferences are its own `unsafe`, argued
// by holding the id; the bytes are plain words, which any thread may read or write.
unsafe impl Sync for Block {}

impl Default for Block {
    fn default() -> Self {
        Block(UnsafeCell::new(MaybeUninit::uninit()))
    }
}

impl Slot for Block {
    type Header = ();

    /// A free block's bytes are plain bytes: nothing to drop.
    #[cfg(not(loom))]
    const FREE_NEEDS_DROP: bool = false;

    /// Taken by the pusher and given back by the workers, one of each per op, as op slots are.
    const RECYCLE_BATCH: u64 = if cfg!(loom) { 1 } else { 32 };
}

/// A block taken from a [`BlockStore`]: its holder's until given back. Not `Clone`: one holder
/// per block.
///
/// # Examples
///
/// ```
/// use depengine_slab::{BlockId, BlockStore};
///
/// let store = BlockStore::new();
/// let first: BlockId = store.take().expect("an empty store has room");
/// let second = store.take().expect("an empty store has room");
/// // Each id names bytes of its own.
/// let first_bytes = store.with_bytes(&first, |bytes| bytes);
/// assert_ne!(first_bytes, store.with_bytes(&second, |bytes| bytes));
/// assert_eq!(store.in_use(), 2);
/// store.give_back(first);
/// store.give_back(second);
/// assert_eq!(store.in_use(), 0);
/// ```
#[must_use = "a block that is not given back stays taken"]
pub struct BlockId {
    index: u32,
    /// The tag of the store it was taken from: an id given to another store is refused.
    store: u32,
}

impl fmt::Debug for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlockId({} of store {})", self.index, self.store)
    }
}

/// The tags of the stores made so far.
static STORES: AtomicU32 = AtomicU32::new(0);

/// Blocks of [`BLOCK_BYTES`] bytes (aligned to [`BLOCK_ALIGN`]) for storage that one thread
/// takes and another gives back; see the module documentation.
///
/// # Example
///
/// ```
/// use depengine_slab::BlockStore;
///
/// let store = BlockStore::new();
/// let block = store.take().expect("an empty store has room");
/// // SAFETY: the block is held, and a block's bytes (`BLOCK_BYTES`, 120) hold a `u64`, aligned.
/// store.with_bytes(&block, |bytes| unsafe { bytes.write(42) });
/// let block = std::thread::scope(|s| {
///     s.spawn(|| {
///         // SAFETY: as above; the write happened before the spawn.
///         let value = store.with_bytes(&block, |bytes| unsafe { bytes.read() });
///         assert_eq!(value, 42);
///         block
///     })
///     .join()
///     .unwrap()
/// });
/// store.give_back(block);
/// assert_eq!(store.in_use(), 0);
/// ```
pub struct BlockStore {
    slab: Slab<Block>,
    /// This store's tag, in each id it hands out.
    tag: u32,
}

impl BlockStore {
    /// An empty store: it allocates storage as blocks are taken.
    pub fn new() -> Self {
        BlockStore {
            slab: Slab::new(),
            tag: STORES.fetch_add(1, Relaxed),
        }
    }

    /// Takes a block, recycling a given-back one when possible. `None` when the store holds
    /// its most blocks (2^30 - 1), all taken.
    #[inline]
    pub fn take(&self) -> Option<BlockId> {
        let index = self.slab.alloc()?;
        Some(BlockId {
            index,
            store: self.tag,
        })
    }

    /// Calls `f` with a pointer to the block's first word: its [`BLOCK_BYTES`] bytes start
    /// there, aligned to [`BLOCK_ALIGN`]. The pointer is valid while `block` is held; what the
    /// bytes hold is the holder's business (a block just taken holds whatever its last holder
    /// left).
    ///
    /// # Panics
    ///
    /// If `block` was taken from another store.
    #[inline]
    pub fn with_bytes<R>(&self, block: &BlockId, f: impl FnOnce(*mut u64) -> R) -> R {
        let slot = self.check(block);
        slot.0.with_mut(|words| f(words.cast()))
    }

    /// Gives `block` back: the next [`take`](Self::take) may hand it out again.
    #[inline]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "the id is consumed on purpose: a block given back is no longer held"
    )]
    ///
    /// # Panics
    ///
    /// If `block` was taken from another store (which may still hand out that index).
    pub fn give_back(&self, block: BlockId) {
        self.check(&block);
        self.slab.free(block.index);
    }

    /// The block `block` names, which must be this store's.
    #[inline]
    fn check(&self, block: &BlockId) -> &Block {
        match self.slab.get(block.index) {
            Some(slot) if block.store == self.tag => slot,
            _ => panic!("{block:?} was taken from another block store"),
        }
    }

    /// Blocks taken and not given back. Exact only while no other thread uses the store.
    pub fn in_use(&self) -> usize {
        self.slab.in_use()
    }

    /// Blocks the store holds storage for, taken or not.
    pub fn blocks(&self) -> usize {
        self.slab.slots()
    }

    /// Gives the storage of a burst back to the allocator, and the free pages to the system
    /// ([`Slab::trim_to_system`]): only while every block is back, keeping what the recent
    /// bursts used and at least the first 224 blocks. Whether storage was freed.
    #[allow(unsafe_code, reason = "the slab's trim: see the SAFETY comment")]
    pub fn trim(&self) -> bool {
        // SAFETY: the store's only reference into a block lives inside `with_bytes`, for a
        // caller that holds the block's id; the slab counts a held block as a user, and a trim
        // frees nothing while it counts one.
        unsafe {
            self.slab.trim_to_system(Keep::RecentUse {
                at_least: KEEP_BUCKETS,
            })
        }
    }
}

impl Default for BlockStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for BlockStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockStore")
            .field("blocks", &self.blocks())
            .field("in_use", &self.in_use())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
#[allow(unsafe_code, reason = "the tests write and read the blocks' bytes")]
mod tests {
    use super::*;

    #[test]
    fn a_block_entry_is_two_cache_lines() {
        assert_eq!(size_of::<crate::slab::Entry<Block>>(), 128);
        assert_eq!(align_of::<Block>(), BLOCK_ALIGN);
    }

    #[test]
    fn an_id_of_another_store_is_refused() {
        let (mine, other) = (BlockStore::new(), BlockStore::new());
        let (block, theirs) = (mine.take().unwrap(), other.take().unwrap());
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            other.give_back(block);
        }));
        assert!(refused.is_err());
        // The other store's own block is still taken, and still its holder's.
        assert_eq!(other.in_use(), 1);
        other.give_back(theirs);
        assert_eq!(other.in_use(), 0);
    }

    #[test]
    fn given_back_blocks_are_taken_again_and_a_burst_goes_back() {
        // Beyond the 224 blocks a trim keeps; smaller under Miri.
        let (burst_len, rounds) = if cfg!(miri) {
            (300, 500)
        } else {
            (2000, 10_000)
        };
        let store = BlockStore::new();
        let burst: Vec<BlockId> = (0..burst_len).map(|_| store.take().unwrap()).collect();
        for (i, block) in burst.iter().enumerate() {
            // SAFETY: held; a `usize` fits, aligned.
            store.with_bytes(block, |words| unsafe { words.cast::<usize>().write(i) });
        }
        for (i, block) in burst.iter().enumerate() {
            // SAFETY: as above, written just before.
            let read = store.with_bytes(block, |words| unsafe { words.cast::<usize>().read() });
            assert_eq!(read, i, "each block keeps its own bytes");
        }
        assert_eq!(store.in_use(), burst_len);
        assert!(!store.trim(), "nothing goes back while blocks are taken");
        let grown = store.blocks();
        assert!(grown >= burst_len);
        for block in burst {
            store.give_back(block);
        }
        assert_eq!(store.in_use(), 0);
        // Steady use after the burst recycles: the store does not grow.
        for _ in 0..rounds {
            let block = store.take().unwrap();
            store.give_back(block);
        }
        assert_eq!(store.blocks(), grown);
        assert!(
            store.trim(),
            "a first burst's storage goes back once every block is back"
        );
        assert!(store.blocks() < burst_len);
        let block = store.take().unwrap();
        store.give_back(block);
    }
}
