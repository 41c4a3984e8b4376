//! A growable array of slots with stable addresses and a lock-free free list.
//!
//! Vars and waiting ops live in slabs and are named by `u32` indices. A slab never moves a slot:
//! slots live in buckets of doubling size (32, 64, 128, ...), each allocated once and published
//! through a [`OnceLock`], so looking a slot up is two loads and never takes a lock, while the slab
//! can still grow from `&self`. Buckets are never freed before the slab is dropped; freed slots
//! are recycled through the free list instead, which is what keeps the steady state free of
//! allocation.
//!
//! # Free list: two stacks
//!
//! Free slots sit on two Treiber stacks threaded through the slots' `next` fields, each head on
//! a cache line of its own: [`free`](Slab::free) pushes onto `returned`, [`alloc`](Slab::alloc)
//! pops from `free`, and an `alloc` that finds `free` empty takes the whole of `returned` at once
//! (one swap), keeps its top slot and installs the rest as `free`. In the engine, ops are
//! allocated by the pushing thread and freed by the workers; with one stack, both sides wrote
//! its head for every op, so each alloc and each free missed on a line the other core had just
//! written. With two, the pusher pulls `returned`'s line over once per batch of freed slots.
//!
//! `free`'s head packs a 32-bit tag next to the top index; every pop and install bumps the tag,
//! so a pop that read a stale `next` (because the top was popped and pushed back meanwhile: ABA)
//! fails its compare-exchange and retries. The tag would have to wrap around (2^32 operations)
//! between a pop's load and its compare-exchange for ABA to slip through. `returned` needs no
//! tag: it is only pushed onto and swapped out whole, never popped.
//!
//! While an `alloc` holds the chain it swapped out (between the swap and the install), another
//! `alloc` can find both stacks empty and grow the slab by a slot: the slab may hold up to one
//! slot more than its peak use per thread allocating at such a moment, never more.
//!
//! The `next` field of a slot in use is free for its owner; the graph threads the list of ops made
//! ready by one completion through it.

use depengine_sync::{AtomicU32, AtomicU64, CachePadded, OnceLock, Ordering};

/// "No slot": the end of the free list (and of the graph's ready lists).
pub(crate) const NIL: u32 = u32::MAX;

/// log2 of the first bucket's size. Small under loom to keep models small.
#[cfg(not(loom))]
const FIRST_SHIFT: u32 = 5;
#[cfg(loom)]
const FIRST_SHIFT: u32 = 2;

/// Most slots a slab can hold: `2^31 - 1`, so every index fits the 31 bits a var's packed queue
/// entry has for it, with one value to spare for `NO_OP`.
const MAX_SLOTS: u32 = (1 << 31) - 1;

/// Buckets needed to cover `MAX_SLOTS` slots.
const BUCKETS: usize = (32 - FIRST_SHIFT) as usize;

/// One slot: its value and its link. Aligned to a cache line, so that a slot shares no line with
/// its neighbours: the slab hands neighbouring slots to ops that different threads push and
/// complete at the same time.
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Entry<S> {
    next: AtomicU32,
    value: S,
}

/// See the module documentation.
pub(crate) struct Slab<S> {
    buckets: [OnceLock<Box<[Entry<S>]>>; BUCKETS],
    /// Slots handed out so far (the next fresh index).
    len: AtomicU32,
    /// Head of the stack `alloc` pops from: `tag << 32 | index`.
    free: CachePadded<AtomicU64>,
    /// Head of the stack `free` pushes onto (an index).
    returned: CachePadded<AtomicU32>,
}

/// Bucket and offset of `index`.
fn locate(index: u32) -> (usize, usize) {
    let shifted = u64::from(index) + (1 << FIRST_SHIFT);
    let bucket = shifted.ilog2() - FIRST_SHIFT;
    let offset = shifted - (1 << (bucket + FIRST_SHIFT));
    (bucket as usize, offset as usize)
}

impl<S: Default> Slab<S> {
    pub(crate) fn new() -> Self {
        Slab {
            buckets: std::array::from_fn(|_| OnceLock::new()),
            len: AtomicU32::new(0),
            free: CachePadded::new(AtomicU64::new(u64::from(NIL))),
            returned: CachePadded::new(AtomicU32::new(NIL)),
        }
    }

    fn entry(&self, index: u32) -> Option<&Entry<S>> {
        if index >= MAX_SLOTS {
            return None;
        }
        let (bucket, offset) = locate(index);
        self.buckets[bucket].get().map(|b| &b[offset])
    }

    /// The slot at `index`, if it was ever handed out.
    pub(crate) fn get(&self, index: u32) -> Option<&S> {
        self.entry(index).map(|e| &e.value)
    }

    /// A hint: starts moving every cache line of slot `index` into this core's caches (see
    /// `prefetch.rs`).
    pub(crate) fn prefetch(&self, index: u32) {
        if let Some(entry) = self.entry(index) {
            let start: *const Entry<S> = entry;
            for offset in (0..size_of::<Entry<S>>()).step_by(64) {
                crate::prefetch::prefetch_line(start.cast::<u8>().wrapping_add(offset));
            }
        }
    }

    /// The link field of a slot in use (see the module documentation).
    pub(crate) fn link(&self, index: u32) -> Option<&AtomicU32> {
        self.entry(index).map(|e| &e.next)
    }

    /// Takes a free slot, recycling one when possible. `None` when the slab is full.
    pub(crate) fn alloc(&self) -> Option<u32> {
        // Acquire: pairs with the Release of the install that put the top slot on the list, so
        // its `next` store below is visible.
        let mut head = self.free.load(Ordering::Acquire);
        loop {
            let top = head as u32;
            if top == NIL {
                return self.take_returned().or_else(|| self.grow());
            }
            // Relaxed: the Acquire load of `head` ordered this; if the slot was popped and pushed
            // again since, `next` may be stale, but then the tag changed and the CAS fails.
            let next = self.entry(top)?.next.load(Ordering::Relaxed);
            let new = next_tag(head) | u64::from(next);
            // Success Relaxed: it reads the very head (same tag) that our Acquire load, or the
            // Acquire failure below, already read, so the install that put the slot there (and
            // the last owner's writes, see `free`) is already ordered before us. Failure
            // Acquire: the retry reads the new top's `next`.
            match self
                .free
                .compare_exchange_weak(head, new, Ordering::Relaxed, Ordering::Acquire)
            {
                Ok(_) => return Some(top),
                Err(current) => head = current,
            }
        }
    }

    /// Takes every slot freed since the last take: keeps the top one for the caller and installs
    /// the rest as the `free` stack. `None` if nothing was freed.
    fn take_returned(&self) -> Option<u32> {
        // Acquire: pairs with the Release pushes, so every `next` link of the chain is visible.
        let top = self.returned.swap(NIL, Ordering::Acquire);
        if top == NIL {
            return None;
        }
        // Relaxed: ordered by the swap above; the chain is ours alone until installed.
        let rest = self.entry(top)?.next.load(Ordering::Relaxed);
        if rest != NIL {
            self.install(rest);
        }
        Some(top)
    }

    /// Pushes the chain starting at `chain` (owned by the caller) onto the `free` stack.
    fn install(&self, chain: u32) {
        // Found only if `free` is not empty (another allocator installed meanwhile: rare).
        let mut tail = None;
        let mut head = self.free.load(Ordering::Relaxed);
        loop {
            let top = head as u32;
            if top != NIL || tail.is_some() {
                let last = *tail.get_or_insert_with(|| self.chain_tail(chain));
                if let Some(entry) = self.entry(last) {
                    entry.next.store(top, Ordering::Relaxed);
                }
            }
            // Release: publishes the chain's links (acquired by our swap, or written by us) to
            // the Acquire pops.
            match self.free.compare_exchange_weak(
                head,
                next_tag(head) | u64::from(chain),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// The last slot of a chain the caller owns.
    fn chain_tail(&self, mut at: u32) -> u32 {
        while let Some(next) = self.link(at).map(|l| l.load(Ordering::Relaxed))
            && next != NIL
        {
            at = next;
        }
        at
    }

    /// Hands out a fresh index, allocating its bucket on first use.
    fn grow(&self) -> Option<u32> {
        // Relaxed: the counter only has to hand out distinct indices; the bucket is published by
        // its OnceLock.
        let index = self
            .len
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < MAX_SLOTS).then_some(n + 1)
            })
            .ok()?;
        let (bucket, _) = locate(index);
        self.buckets[bucket].get_or_init(|| {
            let size = 1usize << (bucket as u32 + FIRST_SHIFT);
            (0..size)
                .map(|_| Entry {
                    next: AtomicU32::new(NIL),
                    value: S::default(),
                })
                .collect()
        });
        Some(index)
    }

    /// Returns slot `index` to the free list. The caller must own it (got it from
    /// [`alloc`](Self::alloc) and not freed it since).
    pub(crate) fn free(&self, index: u32) {
        let Some(entry) = self.entry(index) else {
            return;
        };
        let mut head = self.returned.load(Ordering::Relaxed);
        loop {
            entry.next.store(head, Ordering::Relaxed);
            // Release: publishes the `next` store (and the caller's last writes to the slot) to
            // the allocator that swaps the stack out.
            match self.returned.compare_exchange_weak(
                head,
                index,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Slots handed out so far (in use or free).
    pub(crate) fn slots(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    /// Slots on the two free stacks. Exact only while no other thread allocates or frees.
    pub(crate) fn free_count(&self) -> usize {
        let bound = self.slots();
        let mut count = 0;
        for top in [
            self.free.load(Ordering::Acquire) as u32,
            self.returned.load(Ordering::Acquire),
        ] {
            let mut at = top;
            while at != NIL && count < bound {
                count += 1;
                at = self.link(at).map_or(NIL, |l| l.load(Ordering::Relaxed));
            }
        }
        count
    }
}

/// The tag half of a new free-list head following `head`.
fn next_tag(head: u64) -> u64 {
    ((head >> 32).wrapping_add(1)) << 32
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn locate_covers_buckets_contiguously() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(31), (0, 31));
        assert_eq!(locate(32), (1, 0));
        assert_eq!(locate(95), (1, 63));
        assert_eq!(locate(96), (2, 0));
        let (bucket, _) = locate(MAX_SLOTS - 1);
        assert!(bucket < BUCKETS);
    }

    #[test]
    fn alloc_recycles_freed_slots_lifo() {
        let slab: Slab<u8> = Slab::new();
        let a = slab.alloc().unwrap();
        let b = slab.alloc().unwrap();
        assert_ne!(a, b);
        slab.free(a);
        assert_eq!(slab.free_count(), 1);
        assert_eq!(slab.alloc(), Some(a));
        slab.free(b);
        slab.free(a);
        assert_eq!(slab.alloc(), Some(a));
        assert_eq!(slab.alloc(), Some(b));
        assert_eq!(slab.slots(), 2);
        assert!(slab.get(1).is_some());
        assert!(slab.get(MAX_SLOTS).is_none());
    }

    #[test]
    fn grows_across_buckets() {
        let slab: Slab<u8> = Slab::new();
        let n = if cfg!(miri) { 100 } else { 1000 };
        for i in 0..n {
            assert_eq!(slab.alloc(), Some(i));
        }
        for i in 0..n {
            assert!(slab.get(i).is_some());
        }
        assert_eq!(slab.free_count(), 0);
    }
}
