//! A growable array of slots with stable addresses and a lock-free free list, which gives its
//! memory back after a burst.
//!
//! The graph's vars and waiting ops live in slabs, named by `u32` indices, and so do the block
//! store's blocks (`block_store.rs`). A slab never moves a slot: slots live in buckets of
//! doubling size (32, 64, 128, ...), each allocated on first use and published through an
//! [`AtomicPtr`], so looking a slot up is two loads and never takes a lock, while the slab can
//! still grow from `&self`. Freed slots are recycled through the free list,
//! which is what keeps the steady state free of allocation. A slot type chooses how its
//! buckets are made ([`Slot`]): the op slots' are allocated zeroed, so that a bucket's memory
//! is only resident once its slots are used ([`Entry::zeroed_bucket`]). It also chooses what
//! each entry keeps beside the slot's link (`Slot::Header`): the var slots keep their
//! attachment there.
//!
//! # Free list: two stacks
//!
//! Free slots sit on two Treiber stacks threaded through the slots' `next` fields, each head on
//! a cache line of its own: [`free`](Slab::free) pushes onto `returned`, [`alloc`](Slab::alloc)
//! pops from `free`, and an `alloc` that finds `free` empty takes the whole of `returned` at once
//! (one read-modify-write), keeps its top slot and installs the rest as `free`. In the engine,
//! ops are allocated by the pushing thread and freed by the workers; with one stack, both sides
//! wrote its head for every op, so each alloc and each free missed on a line the other core had
//! just written. With two, the pusher pulls `returned`'s line over once per batch of freed
//! slots.
//!
//! `free`'s head packs a 32-bit tag next to the top index; every pop and install bumps the tag,
//! so a pop that read a stale `next` (because the top was popped and pushed back meanwhile: ABA)
//! fails its compare-exchange and retries. The tag would have to wrap around (2^32 operations)
//! between a pop's load and its compare-exchange for ABA to slip through. `returned` needs no
//! tag: it is only pushed onto and taken whole, never popped.
//!
//! # Recycling in batches
//!
//! Taking `returned` whenever `free` is empty would make that batch one slot long whenever the
//! two sides keep pace (a pusher allocating one op per op a worker frees, as in a chain): each
//! take would find the slot freed since the last one, and both lines would cross between the
//! cores on every op again. So an `alloc` that finds `free` empty takes `returned` only once
//! a batch of allocations ([`Slot::RECYCLE_BATCH`]) has begun since the last take that found
//! slots (a count kept on the allocators' line, `taken_at`, against `entered`), and grows the
//! slab by a slot otherwise (or when `returned` is empty; and takes when the slab is full). A
//! batch then holds what the other side freed over at least that many allocations, and the line
//! of `returned` crosses once per batch. The op slots, which the pusher allocates and the
//! workers free, one of each per op, recycle in batches of 32 (`docs/decisions.md`, "Op slots
//! recycled in batches of 32"); the var slots, made and deleted far less often, one at a time,
//! which keeps their slab at its peak use.
//!
//! A batch costs at most its size in slots beyond the peak use: when an `alloc` grows, `free`
//! is empty, so every slot is in use or on `returned`, which holds only slots freed since the
//! last take; those were in use at that take or allocated since, fewer than a batch's count of
//! times.
//!
//! While an `alloc` holds the chain it took (between the take and the install), another
//! `alloc` can find both stacks empty and grow the slab by a slot: the slab may hold up to one
//! slot more than its peak use per thread allocating at such a moment, never more.
//!
//! The `next` field of a slot in use is free for its owner; the graph threads the list of ops made
//! ready by one completion through it. A fresh slot's `next` is written before it is read.
//!
//! # Trimming: memory back after a burst
//!
//! [`trim`](Slab::trim) detaches the buckets beyond the first few, and forgets their slots,
//! when nobody uses the slab: every slot is free and no thread is inside `alloc`, `free` or a
//! [`pin`](Slab::pin). The caller drops the detached buckets ([`Detached`]) once the trim is
//! over, so that threads waiting to allocate wait for the rebuild of the free list only, not
//! for the memory to go back to the system. Who is inside is counted on the two lines the slab
//! already writes:
//!
//! - `entered` (beside `free`'s head, the allocators' line) counts the `alloc`s and pins
//!   begun, ever. An `alloc` stays counted until its slot is freed: a slot in use is a user.
//! - the high half of `returned` (the freers' line) counts the `free`s and unpins, ever. A
//!   `free` bumps it in the compare-exchange that pushes the slot (no extra atomic).
//!
//! A trim sets `TRIMMING` in `entered` with a read-modify-write, then loads `returned`: if the
//! counts are equal, every user it counted has left, and every later one (whose increment
//! follows the trim's in `entered`'s modification order, so it sees `TRIMMING`) waits until the
//! trim clears the bit. It cannot be fooled by a user counted in one number and not the other:
//! a user leaves only after it entered, and one that entered after the trim's increment has not
//! left (it waits), so the leaves the trim counts are of users it counted entering. Orderings:
//! each leave is a `Release` read-modify-write of `returned` (publishing the user's last
//! accesses to the slots), the trim's load is `Acquire`, so the users' accesses happen before
//! the trim frees or rewrites anything; the trim clears the bit with `Release` and a waiting
//! user reloads it with `Acquire`, so the trim's changes (buckets freed, the free list rebuilt)
//! happen before that user's accesses. A slot is thus only ever touched by a user: the thread
//! that holds it (allocated, not yet freed) or one that pins the slab. That is the contract of
//! `trim`, an `unsafe fn`: [`get`](Slab::get) and its siblings hand out references that a trim
//! would free under a thread that holds neither.
//!
//! Forgetting the slots of freed buckets restarts their contents when the slab grows back into
//! them: fresh slots, as on first use.
//!
//! How much a trim keeps is its caller's choice ([`Keep`]). The graph keeps by use: a program
//! that pushes bursts of about the same size, waiting for each, should not give the memory back
//! after every burst and fault it in again for the next (`docs/decisions.md`, "A trim keeps
//! what repeated bursts use"), while a burst larger than
//! the ones before it should go back once it completed. What a burst used is read off the count
//! of allocations, which `entered` keeps anyway: the allocations since the last such trim (at
//! most the slots the slab holds), which for a burst of ops that all wait at once is the slots
//! it used. A trim that keeps by use keeps enough for the fewer of the slots this burst used
//! and of those the bursts before it used (`recent`, the larger of the last burst's use and
//! half the value before it). The first burst's storage goes back; a second as large keeps it;
//! a larger one gives back what it grew beyond the earlier ones, and one more than `OUTGROWN`
//! (4) times as large gives all of it back, as after a first burst (a one-off: keeping even the
//! earlier bursts' share would leave a program that warmed up with a small burst holding that
//! share after a huge one); a smaller one gives back what it did not use. (Ops that wait and
//! complete as they go count every allocation, and keep what the slab grew to, which their peak
//! needed.) A trim that runs while the next burst has begun, between two of its ops, sees part
//! of that burst as the whole: it keeps less, and the burst grows back.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr;

use depengine_sync::{AtomicPtr, AtomicU32, AtomicU64, CachePadded, Ordering, yield_now};

/// "No slot": the end of the free list, and an index no slot has (the graph ends its lists of
/// ready ops, threaded through the links of their slots, with it).
///
/// ```
/// use depengine_slab::{NIL, Slab, Slot};
///
/// #[derive(Default)]
/// struct Value(u64);
///
/// impl Slot for Value {
///     type Header = ();
/// }
///
/// let slab: Slab<Value> = Slab::new();
/// let index = slab.alloc().unwrap();
/// assert_ne!(index, NIL);
/// assert!(slab.get(NIL).is_none());
/// ```
pub const NIL: u32 = u32::MAX;

/// log2 of the first bucket's size. Small under loom to keep models small.
#[cfg(not(loom))]
const FIRST_SHIFT: u32 = 5;
#[cfg(loom)]
const FIRST_SHIFT: u32 = 2;

/// Most slots a slab can hold: `2^30 - 1`, so every index fits the 30 bits the graph's packed
/// queue entries have for it, with one value to spare for their `NO_OP`.
const MAX_SLOTS: u32 = (1 << 30) - 1;

/// Buckets needed to cover `MAX_SLOTS` slots.
const BUCKETS: usize = (32 - FIRST_SHIFT) as usize;

/// The cache-line size the prefetch hints assume.
const LINE: usize = 64;

/// Set in `entered` while a trim runs.
const TRIMMING: u64 = 1 << 63;

/// The index half of `returned`.
const INDEX: u64 = 0xFFFF_FFFF;

/// One leave in the high half of `returned`.
const LEFT: u64 = 1 << 32;

/// One slot of a bucket: its link, the slot type's header beside it, and its value. A slot type
/// names it only to make its own buckets ([`Slot::bucket`]); [`size_of`] gives what a slot
/// costs.
///
/// ```
/// use depengine_slab::{Entry, Slot};
///
/// #[derive(Default)]
/// struct Value(u64);
///
/// impl Slot for Value {
///     type Header = ();
/// }
///
/// // The 4-byte link, padding, the value.
/// assert_eq!(size_of::<Entry<Value>>(), 16);
/// ```
pub struct Entry<S: Slot> {
    next: AtomicU32,
    header: S::Header,
    value: S,
}

impl<S: Slot> Entry<S> {
    /// `len` entries of all-zero bytes, allocated zeroed: the pages of the bucket become
    /// resident only as its slots are used. For a slot type whose fresh slot that is
    /// ([`Slot::bucket`]).
    ///
    /// # Safety
    ///
    /// All-zero bytes are a valid `S` and a valid `S::Header`. (The link takes any value: a
    /// fresh slot's link is written before it is read.)
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// use depengine_slab::{Entry, Slab, Slot};
    ///
    /// #[derive(Default)]
    /// struct Counter(AtomicU64);
    ///
    /// impl Slot for Counter {
    ///     type Header = ();
    ///
    ///     fn bucket(len: usize) -> Box<[Entry<Self>]> {
    ///         // SAFETY: all-zero bytes are an `AtomicU64` at 0, a fresh `Counter`, and a `()`.
    ///         unsafe { Entry::zeroed_bucket(len) }
    ///     }
    /// }
    ///
    /// let slab: Slab<Counter> = Slab::new();
    /// let index = slab.alloc().unwrap();
    /// assert_eq!(slab.get(index).unwrap().0.load(Ordering::Relaxed), 0);
    /// ```
    pub unsafe fn zeroed_bucket(len: usize) -> Box<[Entry<S>]> {
        let zeroed = Box::<[Entry<S>]>::new_zeroed_slice(len);
        // SAFETY: an entry is its link, an `AtomicU32`, for which all-zero bytes are a valid
        // value, its header and its slot, for which they are by the caller's contract.
        unsafe { zeroed.assume_init() }
    }
}

/// What a slab holds: what it keeps beside each slot's link, and how a bucket of fresh slots
/// is made. A fresh slot is `Default::default()`; a freed slot keeps its value, which the next
/// holder finds as it was left.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use depengine_slab::{Slab, Slot};
///
/// /// A counter per slot, made and freed by different threads, recycled in batches of 16.
/// #[derive(Default)]
/// struct Counter(AtomicU64);
///
/// impl Slot for Counter {
///     type Header = ();
///     const FREE_NEEDS_DROP: bool = false;
///     const RECYCLE_BATCH: u64 = 16;
/// }
///
/// let slab: Slab<Counter> = Slab::new();
/// let index = slab.alloc().expect("an empty slab has room");
/// slab.get(index).unwrap().0.fetch_add(1, Ordering::Relaxed);
/// slab.free(index);
/// ```
pub trait Slot: Default {
    /// Kept beside the link ([`header`](Slab::header)), `()` for nothing: a slot value aligned
    /// to a cache line leaves the rest of the link's line free, and a word written when the
    /// slot is handed out and then only read (the var slots' attachment) costs nothing there.
    type Header: Default;

    /// Whether a free slot, or its header, may still own something its `Drop` releases.
    /// `false` lets a trim free the buckets it detached without visiting each slot, which would
    /// read every page of a zeroed bucket, the ones its slots never used included, back into
    /// memory; the headers are not dropped either (what a free slot still owned would leak).
    const FREE_NEEDS_DROP: bool = true;

    /// Allocations after a take of `returned` before an `alloc` that finds `free` empty takes
    /// it again rather than growing (see "Recycling in batches" in the module documentation).
    /// 1 takes whenever `free` is empty.
    const RECYCLE_BATCH: u64 = 1;

    /// `len` fresh entries (by default each `S::default()`, with an unset link); a slot type
    /// whose all-zero bytes are a fresh slot may return [`Entry::zeroed_bucket`] instead. The
    /// slab panics on a bucket of another length.
    fn bucket(len: usize) -> Box<[Entry<Self>]> {
        (0..len)
            .map(|_| Entry {
                next: AtomicU32::new(NIL),
                header: Self::Header::default(),
                value: Self::default(),
            })
            .collect()
    }
}

/// A growable array of slots of type `S` with stable addresses and a lock-free free list, which
/// gives its memory back after a burst ([`trim_to_system`](Self::trim_to_system)). Slots are
/// named by `u32` indices; a slot is its holder's from [`alloc`](Self::alloc) to
/// [`free`](Self::free), and another thread may look at it only under a [`pin`](Self::pin).
/// `free` and [`link`](Self::link) are for the slot's holder: freeing a slot one does not
/// hold, or twice, corrupts the free list (a slot handed out twice, or a list that never
/// ends), never the slab's memory. The protocols (the free list in two stacks, recycling in
/// batches, trimming) are in the source of `slab.rs`, its module documentation.
///
/// # Example
///
/// ```
/// use depengine_slab::{Keep, Slab, Slot};
///
/// #[derive(Default)]
/// struct Value(u64);
///
/// impl Slot for Value {
///     type Header = ();
/// }
///
/// let slab: Slab<Value> = Slab::new();
/// let burst: Vec<u32> = (0..1000).map(|_| slab.alloc().expect("room")).collect();
/// assert_eq!(slab.in_use(), 1000);
/// for index in burst {
///     slab.free(index);
/// }
/// // Freed slots are recycled: the slab does not grow.
/// let index = slab.alloc().unwrap();
/// slab.free(index);
/// assert_eq!(slab.slots(), 1000);
/// // SAFETY: this thread alone uses the slab, and holds no reference into it.
/// assert!(unsafe { slab.trim_to_system(Keep::RecentUse { at_least: 1 }) });
/// assert!(slab.slots() < 1000, "a first burst's storage goes back");
/// ```
pub struct Slab<S: Slot> {
    /// Bucket `b` holds `32 << b` entries (`4 << b` under loom); null until first used.
    buckets: [AtomicPtr<Entry<S>>; BUCKETS],
    /// Slots handed out so far (the next fresh index).
    len: AtomicU32,
    /// The allocators' line.
    free: CachePadded<FreeHead>,
    /// Head of the stack `free` pushes onto: `leaves << 32 | index` (see the module
    /// documentation for the count of leaves).
    returned: CachePadded<AtomicU64>,
    /// For the trims that keep by use (see "Trimming" in the module documentation), which alone
    /// touch these, one at a time: the slots the bursts before the last one used, the older
    /// halved at each such trim...
    recent: AtomicU32,
    /// ...and the count of allocations (`entered`'s) at the last one.
    trimmed_at: AtomicU64,
    /// The slab owns its slots and headers, made on the thread that grows it and dropped on the
    /// one that drops it, and hands out shared references to them: see the `Send` and `Sync`
    /// impls below.
    owns: PhantomData<*const (S, S::Header)>,
}

// SAFETY: moving the slab moves its slots and headers, which it owns and drops, to the new
// thread: `Send` values.
unsafe impl<S: Slot + Send> Send for Slab<S> where S::Header: Send {}

// SAFETY: a shared slab hands `&S` and `&S::Header` out to every thread that shares it (`Sync`
// values), and makes slots on whichever thread grows it while another may drop them (`Send`
// values); its own state is atomics.
unsafe impl<S: Slot + Send + Sync> Sync for Slab<S> where S::Header: Send + Sync {}

/// The allocators' side of the free list.
struct FreeHead {
    /// Head of the stack `alloc` pops from: `tag << 32 | index`.
    top: AtomicU64,
    /// Allocs and pins begun, ever (the low 63 bits), and `TRIMMING`.
    entered: AtomicU64,
    /// `entered`'s count at the last take of `returned` that found slots (see "Recycling in
    /// batches" in the module documentation).
    taken_at: AtomicU64,
}

/// A trim that keeps by use gives everything back after a burst that used more than this many
/// times what the bursts before it did (see "Trimming" in the module documentation).
const OUTGROWN: u32 = 4;

/// How much of its storage a trim ([`Slab::trim_to_system`]) keeps.
///
/// ```
/// use depengine_slab::{Keep, Slab, Slot};
/// # #[derive(Default)]
/// # struct Value(u64);
/// # impl Slot for Value {
/// #     type Header = ();
/// # }
///
/// let slab: Slab<Value> = Slab::new();
/// let index = slab.alloc().unwrap();
/// slab.free(index);
/// // Nothing beyond the first bucket: nothing to give back.
/// // SAFETY: this thread alone uses the slab, and holds no reference into it.
/// assert!(!unsafe { slab.trim_to_system(Keep::RecentUse { at_least: 1 }) });
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Keep {
    /// The first `n` buckets (for the tests and models of the trim itself).
    #[cfg(test)]
    Buckets(usize),
    /// At least the first `at_least` buckets, and enough for the slots that both the burst
    /// since the last such trim and the bursts before it used (see "Trimming" in the module
    /// documentation).
    RecentUse {
        /// Buckets kept whatever the use: the first holds 32 slots, each next one twice as
        /// many as the one before.
        at_least: usize,
    },
}

/// Bucket and offset of `index`.
fn locate(index: u32) -> (usize, usize) {
    let shifted = u64::from(index) + (1 << FIRST_SHIFT);
    let bucket = shifted.ilog2() - FIRST_SHIFT;
    let offset = shifted - (1 << (bucket + FIRST_SHIFT));
    (bucket as usize, offset as usize)
}

/// Entries in bucket `bucket`.
fn bucket_len(bucket: usize) -> usize {
    1 << (bucket as u32 + FIRST_SHIFT)
}

/// Slots in the first `buckets` buckets.
fn capacity(buckets: usize) -> u32 {
    let buckets = buckets.min(BUCKETS);
    ((1_u64 << (buckets as u32 + FIRST_SHIFT)) - (1 << FIRST_SHIFT)).min(u64::from(MAX_SLOTS))
        as u32
}

impl<S: Slot> Slab<S> {
    /// An empty slab: it allocates its buckets as slots are taken.
    pub fn new() -> Self {
        Slab {
            buckets: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            len: AtomicU32::new(0),
            free: CachePadded::new(FreeHead {
                top: AtomicU64::new(u64::from(NIL)),
                entered: AtomicU64::new(0),
                taken_at: AtomicU64::new(0),
            }),
            returned: CachePadded::new(AtomicU64::new(u64::from(NIL))),
            recent: AtomicU32::new(0),
            trimmed_at: AtomicU64::new(0),
            owns: PhantomData,
        }
    }

    fn entry(&self, index: u32) -> Option<&Entry<S>> {
        if index >= MAX_SLOTS {
            return None;
        }
        let (bucket, offset) = locate(index);
        // Acquire: pairs with the Release install in `grow`, so the bucket's entries are
        // initialized for us.
        let first = self.buckets[bucket].load(Ordering::Acquire);
        if first.is_null() {
            return None;
        }
        // SAFETY: a non-null bucket pointer points to the first of `bucket_len(bucket)` entries,
        // installed by `grow` and freed only by `trim`, which the callers exclude by its contract
        // (they hold the slot or pin the slab; see the module documentation); `offset` is below
        // that length (`locate`).
        Some(unsafe { &*first.add(offset) })
    }

    /// The slot at `index`, if its bucket exists. For a thread that holds the slot (allocated
    /// it and has not freed it) or pins the slab, which a trim counts on
    /// ([`trim_to_system`](Self::trim_to_system)).
    pub fn get(&self, index: u32) -> Option<&S> {
        self.entry(index).map(|e| &e.value)
    }

    /// A hint: starts moving every cache line of slot `index` into this core's caches (see
    /// `prefetch.rs`). As [`get`](Self::get): for a holder of the slot, or a user (an
    /// allocation in progress, a pin).
    pub fn prefetch(&self, index: u32) {
        if let Some(entry) = self.entry(index) {
            // Entries are not line-aligned: a 112-byte entry spans two or three lines, from
            // the line of its first byte to that of its last.
            let start = std::ptr::from_ref(entry).cast::<u8>();
            let first_line = start.wrapping_sub(start.addr() % LINE);
            let end = start.addr() + size_of::<Entry<S>>();
            let mut line = first_line;
            while line.addr() < end {
                crate::prefetch::prefetch_line(line);
                line = line.wrapping_add(LINE);
            }
        }
    }

    /// The header of slot `index` (`Slot::Header`), if its bucket exists. As
    /// [`get`](Self::get): for a holder of the slot.
    pub fn header(&self, index: u32) -> Option<&S::Header> {
        self.entry(index).map(|e| &e.header)
    }

    /// The header and the slot at `index`, if its bucket exists: [`header`](Self::header) and
    /// [`get`](Self::get) in one lookup.
    pub fn get_with_header(&self, index: u32) -> Option<(&S::Header, &S)> {
        self.entry(index).map(|e| (&e.header, &e.value))
    }

    /// The link field of a slot in use (see the module documentation), for its holder.
    pub fn link(&self, index: u32) -> Option<&AtomicU32> {
        self.entry(index).map(|e| &e.next)
    }

    /// Takes a free slot, recycling one when possible. `None` when the slab is full.
    pub fn alloc(&self) -> Option<u32> {
        let entered = self.enter();
        let index = self.pop(entered);
        if index.is_none() {
            self.leave();
        }
        index
    }

    /// `alloc`, counted as a user already (`entered`: the count of users begun, this one
    /// included).
    fn pop(&self, entered: u64) -> Option<u32> {
        // Acquire: pairs with the Release of the install that put the top slot on the list, so
        // its `next` store below is visible.
        let mut head = self.free.top.load(Ordering::Acquire);
        loop {
            let top = head as u32;
            if top == NIL {
                // Relaxed: a heuristic on the allocators' own line; either choice is safe.
                let since = entered.wrapping_sub(self.free.taken_at.load(Ordering::Relaxed));
                return if since >= S::RECYCLE_BATCH {
                    self.take_returned(entered).or_else(|| self.grow())
                } else {
                    self.grow().or_else(|| self.take_returned(entered))
                };
            }
            // Relaxed: the Acquire load of `head` ordered this; if the slot was popped and pushed
            // again since, `next` may be stale, but then the tag changed and the CAS fails.
            let next = self.entry(top)?.next.load(Ordering::Relaxed);
            let new = next_tag(head) | u64::from(next);
            // Success Relaxed: it reads the very head (same tag) that our Acquire load, or the
            // Acquire failure below, already read, so the install that put the slot there (and
            // the last owner's writes, see `free`) is already ordered before us. Failure
            // Acquire: the retry reads the new top's `next`.
            match self.free.top.compare_exchange_weak(
                head,
                new,
                Ordering::Relaxed,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // The next `alloc` takes `next`, which a `free` on another core wrote last:
                    // ask for it now (see `prefetch.rs`). We are a user, so no trim frees it.
                    if next != NIL {
                        self.prefetch(next);
                    }
                    return Some(top);
                }
                Err(current) => head = current,
            }
        }
    }

    /// Takes every slot freed since the last take: keeps the top one for the caller and installs
    /// the rest as the `free` stack. `None` if nothing was freed.
    fn take_returned(&self, entered: u64) -> Option<u32> {
        // Sets the index half to `NIL` and keeps the count of leaves. Acquire: pairs with the
        // Release pushes, so every `next` link of the chain is visible.
        let top = self.returned.fetch_or(INDEX, Ordering::Acquire) as u32;
        if top == NIL {
            return None;
        }
        self.free.taken_at.store(entered, Ordering::Relaxed);
        // Relaxed: ordered by the read-modify-write above; the chain is ours alone until
        // installed.
        let rest = self.entry(top)?.next.load(Ordering::Relaxed);
        if rest != NIL {
            self.install(rest);
            // As in `pop`: the next `alloc` takes `rest`.
            self.prefetch(rest);
        }
        Some(top)
    }

    /// Pushes the chain starting at `chain` (owned by the caller) onto the `free` stack.
    fn install(&self, chain: u32) {
        // Found only if `free` is not empty (another allocator installed meanwhile: rare).
        let mut tail = None;
        let mut head = self.free.top.load(Ordering::Relaxed);
        loop {
            let top = head as u32;
            if top != NIL || tail.is_some() {
                let last = *tail.get_or_insert_with(|| self.chain_tail(chain));
                if let Some(entry) = self.entry(last) {
                    entry.next.store(top, Ordering::Relaxed);
                }
            }
            // Release: publishes the chain's links (acquired by our take, or written by us) to
            // the Acquire pops.
            match self.free.top.compare_exchange_weak(
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
        // its pointer.
        let index = self
            .len
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < MAX_SLOTS).then_some(n + 1)
            })
            .ok()?;
        let (bucket, _) = locate(index);
        // Acquire: as in `entry`.
        if self.buckets[bucket].load(Ordering::Acquire).is_null() {
            let fresh = S::bucket(bucket_len(bucket));
            // Every access to the bucket assumes its length.
            assert_eq!(
                fresh.len(),
                bucket_len(bucket),
                "`Slot::bucket` made a wrong length"
            );
            let fresh = Box::into_raw(fresh).cast::<Entry<S>>();
            // Release: publishes the entries to every `entry` that loads the pointer. Failure
            // Relaxed: we only drop our own copy. Two threads growing into the same new bucket
            // at once each make one; the second frees its own.
            if self.buckets[bucket]
                .compare_exchange(ptr::null_mut(), fresh, Ordering::Release, Ordering::Relaxed)
                .is_err()
            {
                // SAFETY: `fresh` came from `Box::into_raw` of a slice of this length just
                // above, and was never published.
                drop(unsafe {
                    Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, bucket_len(bucket)))
                });
            }
        }
        Some(index)
    }

    /// Returns slot `index` to the free list. The caller must hold it (got it from
    /// [`alloc`](Self::alloc) and not freed it since): a trim counts on it.
    pub fn free(&self, index: u32) {
        let Some(entry) = self.entry(index) else {
            return;
        };
        let mut head = self.returned.load(Ordering::Relaxed);
        loop {
            entry.next.store(head as u32, Ordering::Relaxed);
            // Counts the leave (see the module documentation). Release: publishes the `next`
            // store (and the caller's last writes to the slot) to the allocator that takes the
            // stack, and to a trim that counts this leave.
            match self.returned.compare_exchange_weak(
                head,
                (head & !INDEX).wrapping_add(LEFT) | u64::from(index),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Counts the calling thread as a user (see the module documentation); waits while a trim
    /// runs. Returns the count of users begun, this one included.
    fn enter(&self) -> u64 {
        // Acquire: if a trim ran before (its Release clear precedes this increment in
        // `entered`'s modification order), what it changed happens before our accesses. A trim
        // that has not begun yet needs nothing of this increment but its place in that order;
        // one that has is waited for below.
        let mut entered = self.free.entered.fetch_add(1, Ordering::Acquire);
        let begun = (entered & !TRIMMING) + 1;
        while entered & TRIMMING != 0 {
            yield_now();
            // Acquire: pairs with the trim's Release clear, so what it changed happens before
            // our accesses.
            entered = self.free.entered.load(Ordering::Acquire);
        }
        begun
    }

    /// Counts one user gone (see `free`, which counts its own).
    fn leave(&self) {
        // Release: as in `free`.
        self.returned.fetch_add(LEFT, Ordering::Release);
    }

    /// Keeps trims away while alive: for a thread that looks at slots it does not hold (the
    /// graph's `inspect_op`).
    pub fn pin(&self) -> TrimGuard<'_, S> {
        self.enter();
        TrimGuard(self)
    }

    /// Slots handed out so far (in use or free).
    pub fn slots(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    /// Slots in use (allocated and not freed), plus pins. Exact only while no other thread
    /// allocates, frees or pins.
    pub fn in_use(&self) -> usize {
        let left = (self.returned.load(Ordering::Relaxed) >> 32) as u32;
        let entered = self.free.entered.load(Ordering::Relaxed) as u32;
        entered.wrapping_sub(left) as usize
    }

    /// Detaches the buckets beyond those `keep` keeps and forgets their slots, if nobody uses
    /// the slab (see the module documentation). Dropping what it returns frees them. Cheap
    /// when the slab holds no more than `keep`'s minimum (one load).
    ///
    /// # Safety
    ///
    /// As [`trim_to_system`](Self::trim_to_system).
    pub(crate) unsafe fn trim(&self, keep: Keep) -> Detached<S> {
        let mut detached = Detached(Vec::new());
        let at_least = match keep {
            #[cfg(test)]
            Keep::Buckets(buckets) => buckets,
            Keep::RecentUse { at_least } => at_least,
        };
        if self.len.load(Ordering::Relaxed) <= capacity(at_least) {
            return detached;
        }
        // Acquire: a trim that ran before this one (its Release clear) happens before ours.
        let entered = self.free.entered.fetch_or(TRIMMING, Ordering::Acquire);
        if entered & TRIMMING != 0 {
            // Another trim runs.
            return detached;
        }
        // Acquire: pairs with the Release leaves, so every access of a user counted here
        // happens before what the trim does next.
        let left = (self.returned.load(Ordering::Acquire) >> 32) as u32;
        if entered as u32 == left {
            let keep = match keep {
                #[cfg(test)]
                Keep::Buckets(buckets) => Some(buckets),
                Keep::RecentUse { at_least } => self.recently_used(at_least, entered & !TRIMMING),
            };
            // Checked again now that it is ours: another trim may have run since the first look.
            if let Some(keep) = keep.map(capacity)
                && self.len.load(Ordering::Relaxed) > keep
            {
                self.rebuild(keep, &mut detached);
            }
        }
        // Release: publishes the rebuilt slab to the users that waited (their Acquire reload).
        self.free.entered.fetch_and(!TRIMMING, Ordering::Release);
        detached
    }

    /// Gives the storage of a burst back: if nobody uses the slab (every slot free, no thread
    /// inside [`alloc`](Self::alloc) or [`free`](Self::free), no [`pin`](Self::pin) held),
    /// frees the buckets beyond those `keep` keeps, forgets their slots (the slab grows back
    /// into fresh ones), and asks the allocator to return the free pages to the system
    /// (`heap.rs`). Whether it freed anything. Cheap when the slab holds no more than `keep`'s
    /// minimum (one load). Threads that allocate meanwhile wait while the free list is rebuilt,
    /// not while the memory goes back. The protocol: "Trimming" in `slab.rs`.
    ///
    /// # Safety
    ///
    /// Every thread that holds a reference from [`get`](Self::get), [`header`](Self::header),
    /// [`get_with_header`](Self::get_with_header) or [`link`](Self::link), or calls
    /// [`prefetch`](Self::prefetch) (or is about to use an index), holds that slot (allocated
    /// and not freed) or a [`pin`](Self::pin); and every [`free`](Self::free) freed a slot its
    /// caller held.
    pub unsafe fn trim_to_system(&self, keep: Keep) -> bool {
        // SAFETY: the caller's.
        let detached = unsafe { self.trim(keep) };
        if detached.is_empty() {
            return false;
        }
        drop(detached);
        crate::heap::release_free_pages();
        true
    }

    /// The buckets a trim that keeps by use keeps, with the slab to itself (`entered`: the count
    /// of allocations now): at least `at_least`, and enough for the fewer of the slots used since
    /// the last such trim and of those the bursts before it used (`recent`); `None` (keep
    /// everything, and remember nothing) if no slot was handed out since. `Relaxed`: `recent`
    /// and `trimmed_at` are the trims' alone, one at a time, under `TRIMMING`.
    fn recently_used(&self, at_least: usize, entered: u64) -> Option<usize> {
        let allocated = entered.wrapping_sub(self.trimmed_at.swap(entered, Ordering::Relaxed));
        if allocated == 0 {
            return None;
        }
        let used = allocated.min(u64::from(self.len.load(Ordering::Relaxed))) as u32;
        let before = self.recent.load(Ordering::Relaxed);
        self.recent.store(used.max(before / 2), Ordering::Relaxed);
        // A burst more than `OUTGROWN` times the recent ones is not a repeat of them: all of it
        // goes back, as after a first burst.
        let wanted = if before.saturating_mul(OUTGROWN) >= used {
            used.min(before)
        } else {
            0
        };
        Some(
            (at_least..BUCKETS)
                .find(|&b| capacity(b) >= wanted)
                .unwrap_or(BUCKETS),
        )
    }

    /// `trim`'s work, with the slab to itself: every slot is free. Keeps the first `keep`
    /// slots (a bucket boundary), moves the buckets beyond into `detached`.
    fn rebuild(&self, keep: u32, detached: &mut Detached<S>) {
        for (bucket, first) in self.buckets.iter().enumerate() {
            if capacity(bucket) < keep {
                continue;
            }
            let first = first.swap(ptr::null_mut(), Ordering::Relaxed);
            if !first.is_null() {
                // SAFETY: the bucket was installed by `grow` from a `Box` of this length, and no
                // reference into it is left (the trim's contract and its count of users).
                detached.0.push(unsafe {
                    Box::from_raw(ptr::slice_from_raw_parts_mut(first, bucket_len(bucket)))
                });
            }
        }
        let len = self.len.load(Ordering::Relaxed).min(keep);
        self.len.store(len, Ordering::Relaxed);
        // Every slot left is free: chain them in index order, lowest on top.
        for index in 0..len {
            if let Some(entry) = self.entry(index) {
                let next = if index + 1 < len { index + 1 } else { NIL };
                entry.next.store(next, Ordering::Relaxed);
            }
        }
        let top = if len == 0 { NIL } else { 0 };
        let head = self.free.top.load(Ordering::Relaxed);
        self.free
            .top
            .store(next_tag(head) | u64::from(top), Ordering::Relaxed);
        self.returned.fetch_or(INDEX, Ordering::Relaxed);
    }

    /// Slots on the two free stacks. Exact only while no other thread uses the slab.
    #[cfg(test)]
    pub(crate) fn free_count(&self) -> usize {
        let bound = self.slots();
        let mut count = 0;
        for top in [
            self.free.top.load(Ordering::Acquire) as u32,
            self.returned.load(Ordering::Acquire) as u32,
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

impl<S: Slot> Default for Slab<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Slot> Drop for Slab<S> {
    fn drop(&mut self) {
        for (bucket, first) in self.buckets.iter().enumerate() {
            let first = first.load(Ordering::Relaxed);
            if !first.is_null() {
                // SAFETY: as in `rebuild`; we are the last user (`&mut self`).
                drop(unsafe {
                    Box::from_raw(ptr::slice_from_raw_parts_mut(first, bucket_len(bucket)))
                });
            }
        }
    }
}

/// Buckets a trim detached: dropping this frees them. Every slot in them is free (the trim's
/// condition), so for a slot type whose free slots own nothing (`Slot::FREE_NEEDS_DROP` false)
/// the buckets are freed without a visit to each slot.
#[must_use = "dropping it frees the memory a trim detached"]
pub(crate) struct Detached<S: Slot>(Vec<Box<[Entry<S>]>>);

impl<S: Slot> Detached<S> {
    /// Whether the trim detached anything.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<S: Slot> Drop for Detached<S> {
    #[allow(
        unsafe_code,
        reason = "frees a bucket without dropping its slots: see SAFETY"
    )]
    fn drop(&mut self) {
        if S::FREE_NEEDS_DROP {
            // The `Vec`'s own drop visits every slot.
            return;
        }
        debug_assert!(
            !std::mem::needs_drop::<S::Header>(),
            "a slot type whose free slots own nothing has headers that own nothing"
        );
        for bucket in self.0.drain(..) {
            let entries = Box::into_raw(bucket) as *mut [ManuallyDrop<Entry<S>>];
            // SAFETY: `ManuallyDrop<Entry<S>>` has the layout of `Entry<S>` (it is
            // `repr(transparent)`), so this is the same allocation with the same layout, which
            // `Box::into_raw` just gave up. Leaving the slots undropped leaks nothing: they are
            // all free (`rebuild` detaches buckets only when every slot is), and a free slot of
            // this type owns nothing (`FREE_NEEDS_DROP`); the links and headers are plain values.
            drop(unsafe { Box::from_raw(entries) });
        }
    }
}

/// A pin of a slab ([`Slab::pin`]): trims wait until it is dropped.
///
/// ```
/// use depengine_slab::{Keep, Slab, Slot};
/// # #[derive(Default)]
/// # struct Value(u64);
/// # impl Slot for Value {
/// #     type Header = ();
/// # }
///
/// let slab: Slab<Value> = Slab::new();
/// let burst: Vec<u32> = (0..100).map(|_| slab.alloc().unwrap()).collect();
/// for index in burst {
///     slab.free(index);
/// }
/// let keep = Keep::RecentUse { at_least: 1 };
/// {
///     let _pin = slab.pin();
///     // A slot this thread does not hold, looked at under the pin: no trim frees it meanwhile.
///     assert!(slab.get(99).is_some());
///     // SAFETY: this thread holds no reference into the slab but under its pin.
///     assert!(!unsafe { slab.trim_to_system(keep) }, "pinned");
/// }
/// // SAFETY: as above, with no reference left.
/// assert!(unsafe { slab.trim_to_system(keep) });
/// ```
#[must_use = "a pin keeps trims away only while it is held"]
pub struct TrimGuard<'a, S: Slot>(&'a Slab<S>);

impl<S: Slot> Drop for TrimGuard<'_, S> {
    fn drop(&mut self) {
        // Release: as in `Slab::leave`.
        self.0.returned.fetch_add(LEFT, Ordering::Release);
    }
}

/// The tag half of a new free-list head following `head`.
fn next_tag(head: u64) -> u64 {
    ((head >> 32).wrapping_add(1)) << 32
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    impl Slot for u8 {
        type Header = ();
    }

    /// Counts its drops; its free slots own nothing, so a trim frees its buckets undropped.
    #[derive(Default)]
    struct Counted;

    static COUNTED_DROPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    impl Drop for Counted {
        fn drop(&mut self) {
            COUNTED_DROPS.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Slot for Counted {
        type Header = ();
        const FREE_NEEDS_DROP: bool = false;
    }

    /// The buckets a trim detaches from a slab whose free slots own nothing are freed without
    /// a drop of each slot (under Miri: with their memory freed, nothing leaked); those it
    /// keeps are dropped with the slab.
    #[test]
    fn detached_buckets_of_slots_that_own_nothing_are_freed_undropped() {
        let slab: Slab<Counted> = Slab::new();
        let n: u32 = if cfg!(miri) { 100 } else { 1000 };
        let held: Vec<u32> = (0..n).map(|_| slab.alloc().unwrap()).collect();
        for index in held {
            slab.free(index);
        }
        // SAFETY: this thread alone uses the slab, and holds no reference into it.
        let detached = unsafe { slab.trim(Keep::Buckets(1)) };
        assert!(!detached.is_empty());
        let before = COUNTED_DROPS.load(Ordering::Relaxed);
        drop(detached);
        assert_eq!(
            COUNTED_DROPS.load(Ordering::Relaxed),
            before,
            "no slot dropped"
        );
        drop(slab);
        assert_eq!(
            COUNTED_DROPS.load(Ordering::Relaxed),
            before + capacity(1) as usize,
            "the kept bucket's slots, dropped with the slab"
        );
    }

    #[test]
    fn locate_covers_buckets_contiguously() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(31), (0, 31));
        assert_eq!(locate(32), (1, 0));
        assert_eq!(locate(95), (1, 63));
        assert_eq!(locate(96), (2, 0));
        let (bucket, _) = locate(MAX_SLOTS - 1);
        assert!(bucket < BUCKETS);
        assert_eq!(capacity(0), 0);
        assert_eq!(capacity(1), 32);
        assert_eq!(capacity(3), 32 + 64 + 128);
        assert_eq!(locate(capacity(3)), (3, 0));
    }

    /// A slot recycled in batches of 8.
    #[derive(Default)]
    struct Batched;

    impl Slot for Batched {
        type Header = ();
        const RECYCLE_BATCH: u64 = 8;
    }

    #[test]
    fn alloc_recycles_freed_slots_lifo() {
        let slab: Slab<u8> = Slab::new();
        let a = slab.alloc().unwrap();
        let b = slab.alloc().unwrap();
        assert_ne!(a, b);
        assert_eq!(slab.in_use(), 2);
        slab.free(a);
        assert_eq!(slab.free_count(), 1);
        assert_eq!(slab.in_use(), 1);
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
    fn alloc_recycles_freed_slots_in_batches() {
        let slab: Slab<Batched> = Slab::new();
        let batch = Batched::RECYCLE_BATCH as u32;
        // The first allocations: a batch's worth since the (never made) last take.
        let held: Vec<u32> = (0..batch).map(|_| slab.alloc().unwrap()).collect();
        assert_eq!(held, (0..batch).collect::<Vec<_>>());
        assert_eq!(slab.in_use(), batch as usize);
        let (a, b) = (held[0], held[1]);
        slab.free(a);
        assert_eq!(slab.free_count(), 1);
        assert_eq!(slab.in_use(), batch as usize - 1);
        assert_eq!(
            slab.alloc(),
            Some(a),
            "taken: a batch began since the last take"
        );
        slab.free(b);
        slab.free(a);
        // Only one allocation since that take: the slab grows rather than taking `b` and `a`
        // back one at a time...
        for fresh in batch..2 * batch - 1 {
            assert_eq!(slab.alloc(), Some(fresh));
        }
        assert_eq!(slab.free_count(), 2);
        // ...until a batch's worth began since, then takes both, last freed first.
        assert_eq!(slab.alloc(), Some(a));
        assert_eq!(slab.alloc(), Some(b));
        assert_eq!(slab.slots(), 2 * batch as usize - 1);
    }

    /// One thread allocates as another frees, keeping pace (a pusher and a worker on a chain):
    /// the slab holds at most a batch more than the peak use.
    #[test]
    fn recycling_in_batches_grows_at_most_a_batch_beyond_the_peak() {
        let slab: Slab<Batched> = Slab::new();
        let mut held = std::collections::VecDeque::new();
        let backlog = 3;
        for _ in 0..(if cfg!(miri) { 200 } else { 10_000 }) {
            held.push_back(slab.alloc().unwrap());
            if held.len() > backlog {
                slab.free(held.pop_front().unwrap());
            }
        }
        let peak = backlog + 1;
        assert!(
            slab.slots() <= peak + Batched::RECYCLE_BATCH as usize,
            "{} slots for a peak of {peak}",
            slab.slots()
        );
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

    /// A trim frees the buckets beyond the ones kept once every slot is free, and the slab
    /// grows back into them; it does nothing while a slot is in use or a pin is held.
    #[test]
    fn trim_gives_back_what_a_burst_grew() {
        let slab: Slab<u8> = Slab::new();
        let n: u32 = if cfg!(miri) { 200 } else { 5000 };
        let held: Vec<u32> = (0..n).map(|_| slab.alloc().unwrap()).collect();
        let trim = |slab: &Slab<u8>| {
            // SAFETY: this thread alone uses the slab, and holds no reference into it.
            !unsafe { slab.trim(Keep::Buckets(2)) }.is_empty()
        };
        assert!(!trim(&slab), "slots in use");
        for &index in &held {
            slab.free(index);
        }
        {
            let _pin = slab.pin();
            assert!(!trim(&slab), "pinned");
        }
        assert!(trim(&slab));
        assert_eq!(slab.slots(), capacity(2) as usize);
        assert_eq!(slab.free_count(), capacity(2) as usize);
        assert!(slab.get(capacity(2)).is_none(), "the bucket is gone");
        assert!(!trim(&slab), "nothing beyond what is kept");
        // The kept slots come back lowest first, then the slab grows again.
        let again: Vec<u32> = (0..n).map(|_| slab.alloc().unwrap()).collect();
        assert_eq!(&again[..3], &[0, 1, 2]);
        let mut sorted = again.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), n as usize, "a slot handed out twice");
        assert_eq!(slab.in_use(), n as usize);
    }

    /// A trim that keeps by use gives a burst's storage back the first time, keeps it once a
    /// second burst needed as much, and gives back what a larger burst after them grew.
    #[test]
    fn trim_keeps_what_bursts_in_a_row_used() {
        let slab: Slab<u8> = Slab::new();
        let n: u32 = if cfg!(miri) { 300 } else { 3000 };
        let burst = |slots: u32| {
            let held: Vec<u32> = (0..slots).map(|_| slab.alloc().unwrap()).collect();
            for index in held {
                slab.free(index);
            }
            // SAFETY: this thread alone uses the slab, and holds no reference into it.
            !unsafe { slab.trim(Keep::RecentUse { at_least: 1 }) }.is_empty()
        };
        assert!(burst(n), "the first burst's storage goes back");
        assert_eq!(slab.slots(), capacity(1) as usize);
        assert!(!burst(n), "as much again: kept");
        let kept = slab.slots();
        assert!(kept >= n as usize, "{kept} slots kept for bursts of {n}");
        assert!(!burst(n), "and kept for the next");
        assert_eq!(slab.slots(), kept, "without growing");
        assert!(burst(3 * n), "what a larger burst grew goes back");
        // Down to the buckets that hold what the bursts before it used.
        let back = slab.slots();
        assert!(
            back >= n as usize && back < 2 * n as usize,
            "{back} slots kept"
        );
        // A trim without a slot handed out since the last one keeps everything.
        // SAFETY: as above.
        assert!(unsafe { slab.trim(Keep::RecentUse { at_least: 1 }) }.is_empty());
        assert_eq!(slab.slots(), back);
        // `recent` is now 3n: a burst of 13n outgrew it, and everything goes back.
        assert!(burst(13 * n), "a one-off burst");
        assert_eq!(slab.slots(), capacity(1) as usize);
        // Kept again by two bursts of n, then given back by a smaller one.
        burst(n);
        assert!(!burst(n));
        assert!(slab.slots() >= n as usize);
        assert!(burst(10), "a smaller burst gives back what it did not use");
        assert_eq!(slab.slots(), capacity(1) as usize);
    }

    /// Threads allocate, pin and free while another trims: no slot is handed out twice, and
    /// under Miri no freed bucket is touched.
    #[test]
    fn trims_race_with_users() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;

        let slab: Arc<Slab<u8>> = Arc::new(Slab::new());
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        let users: Vec<_> = (0..2)
            .map(|_| {
                let (slab, stop) = (Arc::clone(&slab), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    for round in 0..rounds {
                        for _ in 0..(round % 7) * 10 {
                            held.push(slab.alloc().unwrap());
                        }
                        for &index in &held {
                            // The value is the holder's to write.
                            assert!(slab.get(index).is_some());
                        }
                        {
                            // A slot of a bucket a trim frees, looked at under a pin.
                            let _pin = slab.pin();
                            if let Some(link) = slab.link(100) {
                                let _ = link.load(std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                        for index in held.drain(..) {
                            slab.free(index);
                        }
                    }
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                })
            })
            .collect();
        let mut trims = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: the users above hold or pin every slot they look at.
            if !unsafe { slab.trim(Keep::Buckets(1)) }.is_empty() {
                trims += 1;
            }
            std::thread::yield_now();
        }
        for user in users {
            user.join().unwrap();
        }
        assert_eq!(slab.in_use(), 0);
        assert_eq!(slab.free_count(), slab.slots());
        let _ = trims;
    }
}
