//! `RunQueue`: a fixed-capacity ring owned by one worker, Eigen-style.
//!
//! # Algorithm outline
//!
//! The queue is a power-of-two ring of slots. The *front* belongs to the owning worker:
//! it pushes and pops there without locks, so a worker's own spawns run LIFO (hot in
//! cache). The *back* belongs to thieves: any other thread may pop there (stealing the
//! oldest work), and those pops are serialized among themselves by `back_lock`. The
//! owner never takes the lock. Nobody but the owner pushes: work from outside the pool
//! goes to the pool's injector, not here.
//!
//! Each slot carries a small state machine that arbitrates every race between the two
//! ends:
//!
//! ```text
//!            owner's push (load Acquire, then store Release)
//!   EMPTY ───────────────────────────────────────────────────► READY
//!     ▲                                                          │
//!     └──── release (store, Release) ◄── BUSY ◄──────────────────┘
//!                                        take (CAS, Acquire)
//! ```
//!
//! Only the owner's push moves a slot out of `EMPTY`, so it needs no read-modify-write:
//! it checks that the slot at the front is `EMPTY` (else the ring is full), writes the
//! value and publishes it. Its `Acquire` load pairs with the `Release` that emptied the
//! slot, so the previous taker's read of the old value happens-before the new write. A
//! slot that a thief still holds (`BUSY`) or that holds an item (`READY`) reads as full.
//!
//! Both ends pop, and may race for the last item: a pop takes a slot with a
//! compare-exchange from `READY` to `BUSY`, so whichever end wins owns the value, and
//! the loser reports "empty". The winner reads the value while it holds the slot, then
//! empties it (or, a thief whose own queue refused the item, publishes it again). The
//! Acquire on the taking CAS pairs with the Release of the publication, which makes the
//! pusher's write of the value happen-before the read.
//!
//! One read-modify-write per push-and-pop pair, the pop's: a `join` pays for one locked
//! instruction in its queue, not two (`tree_join` in the pool bench, `docs/pool.md`).
//!
//! # The two indices
//!
//! `front` and `back` are positions modulo `2 * capacity` (so that a full ring and an
//! empty ring differ), packed with a modification counter in the upper bits:
//!
//! ```text
//!   63                      log2(2 * capacity)            0
//!   ┌───────────────────────┬─────────────────────────────┐
//!   │ modification counter  │ position (mod 2 * capacity) │
//!   └───────────────────────┴─────────────────────────────┘
//! ```
//!
//! Only the owner writes `front` and only lock holders write `back`, so both are stored
//! with plain `Relaxed` stores: their values never guard access to a slot (the slot
//! state does). The counter exists for [`RunQueue::len`], which reads `front` twice
//! around `back` and retries if `front` moved: a push followed by a pop at the front
//! leaves the position unchanged but bumps the counter, so the retry catches it.
//!
//! # Why `len` never under-counts
//!
//! Every operation moves its index *before* the pushed item becomes `READY`, and *after*
//! a popped item's slot is `EMPTY` again. A snapshot of the two indices therefore
//! counts items in flight as present: it may over-count, never report an empty queue
//! that holds work. The pool's sleep protocol relies on exactly that (see `worker.rs`).

use depengine_sync::{AtomicU8, AtomicU64, CachePadded, Mutex, UnsafeCell, lock};
use std::fmt;
use std::mem::MaybeUninit;

/// The default capacity of a [`RunQueue`], as in Eigen's thread pool.
pub const DEFAULT_CAPACITY: usize = 1024;

/// The largest capacity accepted; larger requests are clamped to it.
pub const MAX_CAPACITY: usize = 1 << 24;

const EMPTY: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;

struct Slot<T> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A bounded work queue: lock-free at the owner's front, mutex-serialized at the back.
///
/// *The owner* is the one thread that calls [`push_front`](Self::push_front) (an `unsafe
/// fn`: two pushers at once would write one slot's value together) and
/// [`pop_front`](Self::pop_front); any thread may call the back operations. Popping the
/// front from another thread is memory-safe (every pop takes its slot with a
/// compare-exchange) but breaks the queue's order, so don't.
///
/// # Examples
///
/// ```
/// use depengine_pool::RunQueue;
///
/// let queue = RunQueue::with_capacity(4);
/// // SAFETY: this thread is the only one that pushes (it owns the queue).
/// unsafe {
///     queue.push_front(0).unwrap();
///     queue.push_front(1).unwrap();
///     queue.push_front(2).unwrap();
/// }
/// assert_eq!(queue.len(), 3);
/// assert_eq!(queue.pop_front(), Some(2)); // the owner's end: newest first
/// assert_eq!(queue.pop_back(), Some(0)); // the thieves' end: oldest first
/// assert_eq!(queue.pop_front(), Some(1));
/// assert!(queue.is_empty());
/// ```
pub struct RunQueue<T> {
    /// Position of the next front push. Written by the owner only.
    front: CachePadded<AtomicU64>,
    /// Position of the oldest item. Written only with `back_lock` held.
    back: CachePadded<AtomicU64>,
    /// Serializes the back operations among non-owner threads.
    back_lock: Mutex<()>,
    slots: Box<[Slot<T>]>,
}

// SAFETY: a `RunQueue` hands each `T` from the thread that pushed it to the thread that
// pops it, so `T: Send` is required and sufficient; the slot protocol (module docs)
// guarantees that no two threads access one value at a time.
unsafe impl<T: Send> Send for RunQueue<T> {}
// SAFETY: as above: shared access only moves values between threads, one owner per
// value at a time, never hands out references to them.
unsafe impl<T: Send> Sync for RunQueue<T> {}

impl<T> RunQueue<T> {
    /// Creates a queue with [`DEFAULT_CAPACITY`] slots.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// Creates a queue holding at least `capacity` items: the capacity is rounded up to
    /// a power of two, at least 2 and at most [`MAX_CAPACITY`].
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.clamp(2, MAX_CAPACITY).next_power_of_two();
        let slots = (0..capacity)
            .map(|_| Slot {
                state: AtomicU8::new(EMPTY),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Self {
            front: CachePadded::new(AtomicU64::new(0)),
            back: CachePadded::new(AtomicU64::new(0)),
            back_lock: Mutex::new(()),
            slots,
        }
    }

    /// The number of items the queue can hold.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Pushes at the owner's end.
    ///
    /// # Errors
    ///
    /// Hands `item` back if the queue is full.
    ///
    /// # Safety
    ///
    /// No other thread calls `push_front` on this queue at the same time: one thread, the
    /// owner, pushes (a pool's worker onto its own queue). The push claims its slot with a
    /// load, not a read-modify-write (see the module documentation), so two concurrent
    /// pushes could both write the slot's value.
    pub unsafe fn push_front(&self, item: T) -> Result<(), T> {
        let front = self.front.load(Relaxed);
        let slot = self.slot(front);
        if !slot.claim_empty() {
            return Err(item);
        }
        self.front
            .store(self.step(front, Step::Forward, true), Relaxed);
        slot.publish(item);
        Ok(())
    }

    /// Pops the newest item at the owner's end.
    pub fn pop_front(&self) -> Option<T> {
        let front = self.front.load(Relaxed);
        let previous = self.step(front, Step::Backward, false);
        let slot = self.slot(previous);
        if !slot.claim_ready() {
            return None;
        }
        let item = slot.take();
        self.front.store(previous, Relaxed);
        Some(item)
    }

    /// Pops the oldest item, at the shared end.
    pub fn pop_back(&self) -> Option<T> {
        if self.is_empty() {
            // Not taking the lock on an empty queue keeps idle thieves off the
            // owner's cache lines; a racing push is caught by the caller's retry
            // protocol (the pool re-checks after announcing it is about to sleep).
            return None;
        }
        let _guard = lock(&self.back_lock);
        self.pop_back_locked()
    }

    /// Steals about half of the queue from the shared end, oldest first: pops up to
    /// `ceil(len / 2)` items (never more than `max`) and hands each to `sink`.
    ///
    /// `sink` may refuse an item by returning it (say, because its own queue is full):
    /// the item goes back where it was, at the back of this queue, and stealing stops.
    /// Returns how many items `sink` accepted.
    pub fn pop_back_half(&self, max: usize, mut sink: impl FnMut(T) -> Result<(), T>) -> usize {
        if self.is_empty() {
            return 0;
        }
        let _guard = lock(&self.back_lock);
        let wanted = self.len().div_ceil(2).min(max);
        let mut taken = 0;
        while taken < wanted {
            let back = self.back.load(Relaxed);
            let slot = self.slot(back);
            if !slot.claim_ready() {
                break;
            }
            match sink(slot.take_keeping_claim()) {
                Ok(()) => {
                    slot.state.store(EMPTY, Release);
                    self.back
                        .store(self.step(back, Step::Forward, true), Relaxed);
                    taken += 1;
                }
                Err(item) => {
                    // The slot is still ours (BUSY) and `back` still points at it.
                    slot.publish(item);
                    break;
                }
            }
        }
        taken
    }

    /// The number of items in the queue. Racing operations may make it over-count,
    /// but a queue that holds an item whose push has completed is never reported empty.
    pub fn len(&self) -> usize {
        // Acquire on the index loads synchronizes with nothing (the indices are stored
        // `Relaxed`, and no slot access depends on them); it only keeps the three loads
        // in program order on weakly ordered CPUs. The guarantee above rests on the
        // caller's ordering instead: a push that happens-before this call, or one
        // followed by a `SeqCst` fence that precedes a `SeqCst` fence before this call
        // (the pool's sleep protocol), has its index store visible to these loads.
        // The loom models pass with both loads `Relaxed`.
        let mut front = self.front.load(Acquire);
        loop {
            let back = self.back.load(Acquire);
            let again = self.front.load(Relaxed);
            if again != front {
                front = again;
                continue;
            }
            let size = (front.wrapping_sub(back) & self.position_mask()) as usize;
            // Indices read at different moments can look more than full; clamp.
            return size.min(self.capacity());
        }
    }

    /// Whether the queue holds no item; see [`len`](Self::len) for the guarantee.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn pop_back_locked(&self) -> Option<T> {
        let back = self.back.load(Relaxed);
        let slot = self.slot(back);
        if !slot.claim_ready() {
            return None;
        }
        let item = slot.take();
        self.back
            .store(self.step(back, Step::Forward, true), Relaxed);
        Some(item)
    }

    fn slot(&self, index: u64) -> &Slot<T> {
        // Capacity is a power of two, so the low bits pick the slot.
        &self.slots[(index as usize) & (self.slots.len() - 1)]
    }

    fn position_mask(&self) -> u64 {
        (2 * self.slots.len() as u64) - 1
    }

    /// Moves a packed index one position, keeping the counter or bumping it.
    fn step(&self, index: u64, step: Step, bump: bool) -> u64 {
        let mask = self.position_mask();
        let position = match step {
            Step::Forward => index.wrapping_add(1),
            Step::Backward => index.wrapping_sub(1),
        } & mask;
        let counter = index & !mask;
        let counter = if bump {
            counter.wrapping_add(mask + 1)
        } else {
            counter
        };
        counter | position
    }
}

#[derive(Clone, Copy)]
enum Step {
    Forward,
    Backward,
}

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

impl<T> Slot<T> {
    /// The owner's claim of the slot at the front: whether it is `EMPTY`, in which case
    /// the caller owns the value cell until it publishes. Nobody else moves a slot out
    /// of `EMPTY` (only the owner pushes), so a load decides it; it stays `EMPTY` (and
    /// no thief touches an `EMPTY` slot) until the owner's `publish`.
    fn claim_empty(&self) -> bool {
        // Acquire: pairs with the Release of `take` that emptied the slot, so the last
        // taker's read of the old value happens-before our write of the new one
        // (`owner_push_front_reuses_the_slot_a_thief_pops` in tests/it/loom/run_queue.rs
        // fails with Relaxed here).
        self.state.load(Acquire) == EMPTY
    }

    /// A pop's claim: moves the slot from `READY` to `BUSY`; on success the caller owns
    /// the value cell (the item in it). Both ends pop, so this takes a compare-exchange.
    fn claim_ready(&self) -> bool {
        // Cheap pre-check avoids a failing read-modify-write on contended lines. Acquire on
        // success: pairs with `publish`'s Release, so the pusher's write of the value
        // happens-before our read.
        self.state.load(Relaxed) == READY
            && self
                .state
                .compare_exchange(READY, BUSY, Acquire, Relaxed)
                .is_ok()
    }

    /// Writes `item` into a claimed slot and makes it `READY`.
    fn publish(&self, item: T) {
        // SAFETY: the caller owns the cell: it holds the slot in `BUSY` (it won the
        // taking CAS) or is the owner and found it `EMPTY` (`claim_empty`), so no other
        // thread accesses the cell until the Release store below.
        self.value.with_mut(|cell| unsafe { (*cell).write(item) });
        self.state.store(READY, Release);
    }

    /// Reads the value out of a slot claimed from `READY` and makes it `EMPTY`.
    fn take(&self) -> T {
        let item = self.take_keeping_claim();
        self.state.store(EMPTY, Release);
        item
    }

    /// Reads the value out of a slot claimed from `READY`; the slot stays `BUSY`.
    fn take_keeping_claim(&self) -> T {
        // `with_mut`, not `with`: moving the value out is a write to the cell (it ends
        // the value's life there), so loom must flag two concurrent move-outs.
        // SAFETY: the caller claimed the slot from READY, so it holds an initialized
        // value (published with Release, acquired by the claiming CAS) and no other
        // thread touches it while it is BUSY. The caller then either marks it EMPTY
        // (the value has moved out) or publishes a new value into it.
        self.value
            .with_mut(|cell| unsafe { (*cell).assume_init_read() })
    }
}

impl<T> Default for RunQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for RunQueue<T> {
    fn drop(&mut self) {
        for slot in &*self.slots {
            if slot.state.load(Relaxed) == READY {
                // SAFETY: `&mut self` rules out concurrent access, and READY means the
                // slot holds an initialized value that nobody has moved out.
                slot.value
                    .with_mut(|cell| unsafe { (*cell).assume_init_drop() });
            }
        }
    }
}

impl<T> fmt::Debug for RunQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunQueue")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}
