//! [`Injector`]: the queue for work submitted from outside the pool.
//!
//! `spawn` from a thread that is not a worker goes here rather than to a worker's
//! `RunQueue`: crossbeam-deque's `Injector` is a lock-free unbounded MPMC queue, so an
//! outside submitter never contends with thieves for a `RunQueue`'s back lock (`docs/decisions.md`,
//! "Outside spawns go to one injector"). The queue itself is unbounded; the pool runs an outside
//! spawn inline only past `threads x queue capacity` queued jobs, unless built `never_inline`.
//!
//! Normally [`Injector`] is a thin wrapper around `crossbeam_deque::Injector`. Under
//! loom the crossbeam type cannot be explored (it does not use `depengine-sync`), so a
//! model of its synchronization stands in for it: the same atomic accesses with the
//! same orderings on a head and a tail index, and nothing else that synchronizes (a
//! lock there would order a push against `is_empty` by itself and hide a missing fence
//! in the pool's sleep protocol).
//!
//! # The loom model
//!
//! Crossbeam's queue is a linked list of blocks of slots; a `head` and a `tail` index (with a
//! block pointer each) say which slots are taken and which are claimed. The model keeps the
//! indices and one array of slots: each push gets a fresh slot, no slot is reused, so nothing
//! models the block allocation and reclamation (whose extra atomics only order the freeing of
//! blocks, not items against each other or against `is_empty`). Each step mirrors one
//! crossbeam access (0.8.8), with the same ordering:
//!
//! - `push`: load `tail` (Acquire); claim the index with a compare-exchange of `tail`
//!   (`SeqCst`, failure `Acquire`), retrying on failure; write the slot; set its written flag
//!   with a `Release` read-modify-write (crossbeam's `slot.state.fetch_or(WRITE, Release)`).
//! - `steal`: load `head` (Acquire); `fence(SeqCst)`; load `tail` (Relaxed); equal means
//!   empty; move `head` with a compare-exchange (`SeqCst`, failure `Acquire`), a lost race
//!   being crossbeam's `Steal::Retry`; wait until the slot's written flag is set (Acquire,
//!   crossbeam's `wait_write`); move the item out. (Crossbeam skips the fence and the tail
//!   load when head and tail are in different blocks, which the model never is.)
//! - `is_empty`: load `head`, then `tail`, both `SeqCst`.
//! - `len`: load `tail`, `head`, and `tail` again, all `SeqCst`, retrying until both `tail`
//!   loads agree.
//!
//! The item's cell is guarded only by the written flag (writer to reader), and each slot has
//! one writer and one reader, chosen by the two compare-exchanges: nothing else orders a push
//! against a steal or a check.

use std::fmt;

/// An unbounded multi-producer multi-consumer FIFO queue: crossbeam-deque's
/// `Injector`, with a `steal` that retries lost races itself.
///
/// # Guarantees
/// - Every pushed item is stolen at most once; once a push has returned, `steal` finds
///   the item (or a later one) unless another thread took it.
/// - [`is_empty`](Self::is_empty) and [`len`](Self::len) count a push in flight as
///   present: once a push ordered before the check returned (by happens-before, or by
///   `SeqCst` on both sides), they never report the queue empty.
///
/// Under `--cfg loom` it is a model of crossbeam's synchronization, holding at most
/// `Injector::MODEL_CAPACITY` pushes in its lifetime.
///
/// # Examples
///
/// ```
/// use depengine_pool::Injector;
///
/// let queue = Injector::new();
/// queue.push(1);
/// queue.push(2);
/// assert_eq!(queue.len(), 2);
/// assert_eq!(queue.steal(), Some(1)); // oldest first
/// assert_eq!(queue.steal(), Some(2));
/// assert!(queue.is_empty());
/// assert_eq!(queue.steal(), None);
/// ```
#[cfg(not(loom))]
pub struct Injector<T>(crossbeam_deque::Injector<T>);

#[cfg(not(loom))]
impl<T> Injector<T> {
    /// Creates an empty queue.
    pub fn new() -> Self {
        Self(crossbeam_deque::Injector::new())
    }

    /// Appends `item` at the tail.
    pub fn push(&self, item: T) {
        self.0.push(item);
    }

    /// Takes the oldest item, if any. Retries when it loses a race with another
    /// consumer, so `None` means the queue was seen empty.
    pub fn steal(&self) -> Option<T> {
        loop {
            match self.0.steal() {
                crossbeam_deque::Steal::Success(item) => return Some(item),
                crossbeam_deque::Steal::Empty => return None,
                // Lost a race with another consumer: try again.
                crossbeam_deque::Steal::Retry => depengine_sync::spin_hint(),
            }
        }
    }

    /// The number of queued items, pushes in flight included (racy, like any length
    /// of a concurrent queue).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the queue holds no item. Never reports empty once a push has returned
    /// (see the type's guarantees): the tail index moves before the item is written,
    /// so an in-flight push counts.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Under loom: a model of the synchronization of crossbeam-deque 0.8.8's `Injector` (the
/// module documentation gives the correspondence, access by access).
#[cfg(loom)]
pub struct Injector<T> {
    /// Index of the oldest item not yet claimed by a steal.
    head: depengine_sync::AtomicUsize,
    /// Index of the next slot a push claims.
    tail: depengine_sync::AtomicUsize,
    slots: Box<[ModelSlot<T>]>,
}

/// One slot of the loom model: written once by the push that claimed its index, read
/// once by the steal that claimed it.
#[cfg(loom)]
struct ModelSlot<T> {
    /// Crossbeam's `WRITE` bit of the slot state.
    written: depengine_sync::AtomicBool,
    item: depengine_sync::UnsafeCell<Option<T>>,
}

// SAFETY: the model moves each `T` from the pushing thread to the stealing thread, one
// thread per slot access at a time (see the model's docs), as crossbeam's does.
#[cfg(loom)]
unsafe impl<T: Send> Send for Injector<T> {}
// SAFETY: as above.
#[cfg(loom)]
unsafe impl<T: Send> Sync for Injector<T> {}

#[cfg(loom)]
impl<T> Injector<T> {
    /// How many pushes one model queue accepts in its lifetime (slots are not reused);
    /// a model that pushes more panics.
    pub const MODEL_CAPACITY: usize = 8;

    /// Creates an empty queue.
    pub fn new() -> Self {
        Self {
            head: depengine_sync::AtomicUsize::new(0),
            tail: depengine_sync::AtomicUsize::new(0),
            slots: (0..Self::MODEL_CAPACITY)
                .map(|_| ModelSlot {
                    written: depengine_sync::AtomicBool::new(false),
                    item: depengine_sync::UnsafeCell::new(None),
                })
                .collect(),
        }
    }

    /// Appends `item` at the tail.
    pub fn push(&self, item: T) {
        use std::sync::atomic::Ordering::{Acquire, Release, SeqCst};
        let mut tail = self.tail.load(Acquire);
        loop {
            match self.tail.compare_exchange(tail, tail + 1, SeqCst, Acquire) {
                Ok(_) => break,
                Err(actual) => {
                    tail = actual;
                    depengine_sync::spin_hint();
                }
            }
        }
        let slot = &self.slots[tail];
        // SAFETY: the compare-exchange above gave this index to this push alone, and
        // no steal reads the slot before the written flag below is set.
        slot.item.with_mut(|cell| unsafe { *cell = Some(item) });
        slot.written.fetch_or(true, Release);
    }

    /// Takes the oldest item, if any. Retries when it loses a race with another
    /// consumer, so `None` means the queue was seen empty.
    pub fn steal(&self) -> Option<T> {
        use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
        loop {
            let head = self.head.load(Acquire);
            depengine_sync::fence(SeqCst);
            if head == self.tail.load(Relaxed) {
                return None;
            }
            if self
                .head
                .compare_exchange(head, head + 1, SeqCst, Acquire)
                .is_err()
            {
                // Crossbeam's `Steal::Retry`.
                depengine_sync::spin_hint();
                continue;
            }
            let slot = &self.slots[head];
            while !slot.written.load(Acquire) {
                depengine_sync::spin_hint();
            }
            // SAFETY: the compare-exchange on `head` gave this index to this steal
            // alone, and the Acquire load of the written flag synchronizes with the
            // push's Release, after which the push no longer touches the slot.
            return slot.item.with_mut(|cell| unsafe { (*cell).take() });
        }
    }

    /// The number of queued items, pushes in flight included.
    pub fn len(&self) -> usize {
        use std::sync::atomic::Ordering::SeqCst;
        loop {
            let tail = self.tail.load(SeqCst);
            let head = self.head.load(SeqCst);
            if self.tail.load(SeqCst) == tail {
                return tail - head;
            }
        }
    }

    /// Whether the queue holds no item; an in-flight push counts.
    pub fn is_empty(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let head = self.head.load(SeqCst);
        head == self.tail.load(SeqCst)
    }
}

impl<T> Default for Injector<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for Injector<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injector")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}
