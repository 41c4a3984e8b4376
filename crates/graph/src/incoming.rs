//! [`Incoming`]: the lock-free side entrance of a var whose FIFO already has an op waiting.
//!
//! # Algorithm outline
//!
//! Once an op waits in a var's FIFO, every op pushed on that var after it waits too (FIFO
//! order). For an op that uses *only* that var (a chain of in-place updates, the drain of a
//! gate, `wait_for_var`'s write), the push then has nothing left to decide: the op only has to
//! be queued behind the others. Taking the var's mutex for that makes the pusher and the thread
//! completing the var's ops pull the var's cache line back and forth on every op. Instead the
//! pusher parks the op in its slot and stores its (packed) request in this small ring, whose word
//! has a line of its own: one compare-exchange on a word only pushers write, one store. (The 32
//! entries are allocated the first time the ring opens: most vars never need them.) The next
//! thread that locks the var and looks at its FIFO first *merges* the ring: it moves the
//! entries, oldest first, to the back of the FIFO, exactly where the pushes would have appended
//! them. A completion that leaves ops waiting merges it too, every few completions, so that a
//! pusher running ahead of a chain does not fill it and fall back on the lock (`settle` in
//! `graph.rs`).
//!
//! Ops on several vars never come in this way: they append to each var under its lock, in the
//! order the graph's push lock gives them (`Graph::push_each`), which is what keeps the FIFOs
//! of different vars in one consistent order (a cycle needs two ops that share two vars).
//!
//! The word also tells, without the lock, whether a handle still names a var that takes
//! pushes: its generation, and `DELETED` from `delete_var` on. A push on several vars checks
//! every handle there before it appends anywhere.
//!
//! # State word
//!
//! ```text
//!  63            32 31  30  17  16   15    8 7     0
//! ┌────────────────┬───┬──────┬────┬───────┬───────┐
//! │   generation   │DEL│unused│OPEN│ head  │ tail  │
//! └────────────────┴───┴──────┴────┴───────┴───────┘
//! ```
//!
//! - `tail`: entries reserved so far, `head`: entries merged so far (both modulo 256; at most
//!   [`CAPACITY`] apart). Entry `i` lives in `entries[i % CAPACITY]`.
//! - `OPEN`: the ring takes entries. Set and cleared only by holders of the var's lock, who keep a
//!   copy of it under the lock (`VarState::open`). **Invariant** (kept by `graph.rs`): while
//!   `OPEN` is set, the var's FIFO holds a waiting op, so an op pushed on the var waits, and a
//!   completion on the var is still to come, which merges the ring before the FIFO runs dry.
//! - `generation`: the var's generation; a push through a stale handle finds it changed.
//! - `DELETED` (`DEL`): set by `delete_var` (var lock held), cleared when the slot is re-armed
//!   for its next generation. [`is_current`](Incoming::is_current) reads it `Relaxed`: the only
//!   reader that acts on it, a push on several vars, holds the graph's push lock, which
//!   `delete_var` holds too, so the lock orders the mark and the read.
//!
//! # Who does what
//!
//! - **Pushers** (no lock): [`try_append`](Incoming::try_append) reserves entry `tail` with a
//!   compare-exchange that requires `OPEN`, the handle's generation and a free entry, then
//!   stores the entry with `Release` (publishing the parked op, which was written before).
//! - **Lock holders**: [`drain`](Incoming::drain) takes the entries from `head` to the `tail` it
//!   read (waiting, if needed, for a pusher between its reservation and its store: a few
//!   instructions, unless it was preempted), with `Acquire` loads, empties them, then advances
//!   `head`. [`try_close`](Incoming::try_close) clears `OPEN` only if no entry is reserved
//!   beyond `head` (a compare-exchange on the whole word, so a reservation and the close are
//!   ordered: either the reservation lands first and the close fails, to be retried after
//!   another drain, or the pusher sees the ring closed and takes the var's lock).
//!
//! # Memory orderings
//!
//! Three hand-overs go through the ring, and each needs its own edge:
//!
//! 1. **The parked op, pusher → drainer.** The pusher parks the op, then stores the entry with
//!    `Release`; the drain loads it with `Acquire`. The word plays no part.
//! 2. **An entry's last lap, drainer → next pusher of that entry.** When the ring wraps, the
//!    entry a drain just emptied is the next one a pusher reserves. The drain's `EMPTY` store
//!    and the next lap's request store are two writes of one atomic, and nothing else orders
//!    them: unless the drain's `EMPTY` happens before the pusher's store, the entry can end up
//!    `EMPTY` in its modification order *after* the request (on ARM or POWER; x86-64's stores
//!    and locked compare-exchanges hide it). The next drain would then wait forever for a
//!    request that was overwritten, holding the var's lock, and the op would be lost. So the
//!    drain moves `head` with `Release` (after its `EMPTY` stores and its `Acquire` loads of
//!    the entries) and the reservation's compare-exchange is `Acquire`. A reservation reads
//!    either a word in the release sequence of the last drain's `head` update (that update, or
//!    a read-modify-write after it: the other reservations, `try_close`, `open`) or, once the
//!    var was reclaimed, the word that `reset` stored with `Release` after that drain (the
//!    var's lock orders the two). Either way the drain's `EMPTY` stores (and its loads of the
//!    old requests) happen before the pusher's store. The model
//!    `ring_wraps_while_a_merge_frees_the_entry_a_push_reuses` (`loom_tests.rs`) loses the op
//!    with either ordering weakened to `Relaxed`.
//! 3. **The lock holders' own state.** `OPEN`, `head` and the generation change only under the
//!    var's lock, whose acquire and release order them between lock holders; a pusher reads
//!    them only to decide whether to reserve, and the compare-exchange re-checks the word it
//!    decided on. `open` and `try_close` are therefore `Relaxed` (read-modify-writes, which keep
//!    the release sequence of hand-over 2 going); `reset` is a plain store, `Release` for
//!    hand-over 2 alone.
//!
//! A failed reservation, `accepts` and the drain's load of the word are `Relaxed`: what they
//! read only steers a decision that the compare-exchange (or the lock) confirms.

use depengine_sync::{AtomicU32, AtomicU64, OnceLock, Ordering, yield_now};

/// Entries in the ring (a power of two dividing 256, so that `tail % CAPACITY` stays right when
/// the 8-bit counters wrap). A full ring sends the push the locked way, which merges it: with 32,
/// a pusher far ahead of a chain takes the var's lock once per 33 ops (`docs/decisions.md`,
/// "The `Incoming` ring"). Two under loom, so that a model fills and wraps the ring.
pub(crate) const CAPACITY: usize = if cfg!(loom) { 2 } else { 32 };

const TAIL_MASK: u64 = 0xFF;
/// `tail` and `head` together.
const COUNTERS: u64 = 0xFFFF;
const HEAD_SHIFT: u32 = 8;
const OPEN: u64 = 1 << 16;
const DELETED: u64 = 1 << 31;
const GENERATION_SHIFT: u32 = 32;

/// An entry not (yet, or no longer) holding a request. Never a packed request of a parked op:
/// those have an op index below `2^30 - 1` (and `EMPTY` has the index bits of `NO_OP`).
const EMPTY: u32 = u32::MAX;

fn tail(word: u64) -> u8 {
    (word & TAIL_MASK) as u8
}

fn head(word: u64) -> u8 {
    ((word >> HEAD_SHIFT) & TAIL_MASK) as u8
}

fn generation(word: u64) -> u32 {
    (word >> GENERATION_SHIFT) as u32
}

/// See the module documentation. On a cache line of its own, apart from the var's locked state
/// (the var slot's layout puts it there); the entries are allocated the first time the ring
/// opens (most vars never see a chain of single-var ops) and kept with the var slot.
#[derive(Default)]
pub(crate) struct Incoming {
    word: AtomicU64,
    entries: OnceLock<Box<[AtomicU32]>>,
}

impl Incoming {
    /// Whether a push through a handle of `generation` would find an entry now (a hint: the ring
    /// may close or fill before [`try_append`](Self::try_append)).
    #[inline]
    pub(crate) fn accepts(&self, generation: u32) -> bool {
        Self::room(self.word.load(Ordering::Relaxed), generation) && self.entries.get().is_some()
    }

    /// Whether a handle of `generation` names the var, and the var takes pushes. Exact while
    /// no `delete_var` can run (the caller holds the graph's push lock).
    #[inline]
    pub(crate) fn is_current(&self, generation: u32) -> bool {
        let word = self.word.load(Ordering::Relaxed);
        word & DELETED == 0 && self::generation(word) == generation
    }

    #[inline]
    fn room(word: u64, for_generation: u32) -> bool {
        word & OPEN != 0
            && generation(word) == for_generation
            && usize::from(tail(word).wrapping_sub(head(word))) < CAPACITY
    }

    /// Appends the packed request `entry` of an op already parked in its slot, if the ring is
    /// open for `generation` and has room. `false`: nothing changed; the caller takes the var's
    /// lock instead.
    pub(crate) fn try_append(&self, for_generation: u32, entry: u32) -> bool {
        debug_assert_ne!(entry, EMPTY);
        // Allocated before the ring first opened, and never dropped before the slot: checked
        // before reserving, so a reservation always has an entry to store into.
        let Some(entries) = self.entries.get() else {
            return false;
        };
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            if !Self::room(word, for_generation) {
                return false;
            }
            let reserved = tail(word);
            let next = (word & !TAIL_MASK) | u64::from(reserved.wrapping_add(1));
            // Acquire on success: the entry's last drain (its `EMPTY` store) happens before our
            // store below (hand-over 2 of the module documentation). Relaxed on failure: the
            // loop only retries.
            match self
                .word
                .compare_exchange_weak(word, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    // Release: publishes the parked op to the drain's Acquire load.
                    entries[usize::from(reserved) % CAPACITY].store(entry, Ordering::Release);
                    return true;
                }
                Err(current) => word = current,
            }
        }
    }

    /// Opens the ring (var lock held; the FIFO has a waiting op), allocating its entries the
    /// first time.
    pub(crate) fn open(&self) {
        self.entries
            .get_or_init(|| (0..CAPACITY).map(|_| AtomicU32::new(EMPTY)).collect());
        self.word.fetch_or(OPEN, Ordering::Relaxed);
    }

    /// Hands every reserved entry to `merge`, oldest first, and frees them (var lock held).
    /// Returns how many there were.
    pub(crate) fn drain(&self, mut merge: impl FnMut(u32)) -> usize {
        let word = self.word.load(Ordering::Relaxed);
        let (from, to) = (head(word), tail(word));
        let count = to.wrapping_sub(from);
        // Reserved entries imply allocated ones (see `try_append`).
        let Some(entries) = self.entries.get().filter(|_| count > 0) else {
            return 0;
        };
        for i in 0..count {
            let entry = &entries[usize::from(from.wrapping_add(i)) % CAPACITY];
            // Acquire: pairs with the pusher's Release store (the parked op is visible).
            let mut taken = entry.load(Ordering::Acquire);
            while taken == EMPTY {
                // Reserved, not yet stored: the pusher is between its two steps.
                yield_now();
                taken = entry.load(Ordering::Acquire);
            }
            // Relaxed: published to the entry's next pusher by the Release `head` update below
            // (hand-over 2 of the module documentation).
            entry.store(EMPTY, Ordering::Relaxed);
            merge(taken);
        }
        // Only lock holders move `head`; pushers may move `tail` meanwhile. Release: the entries
        // are free for their next lap only once their `EMPTY` stores (and the loads above)
        // happen before the pusher that reserves them (hand-over 2 of the module documentation).
        let head_bits = TAIL_MASK << HEAD_SHIFT;
        let _ = self
            .word
            .fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
                Some((word & !head_bits) | (u64::from(to) << HEAD_SHIFT))
            });
        usize::from(count)
    }

    /// Closes the ring if no entry is reserved beyond the merged ones (var lock held). `false`:
    /// a push got in; drain again and retry.
    pub(crate) fn try_close(&self) -> bool {
        let word = self.word.load(Ordering::Relaxed);
        if tail(word) != head(word) {
            return false;
        }
        self.word
            .compare_exchange(word, word & !OPEN, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Marks the var deleted (var lock held, the ring closed): [`is_current`](Self::is_current)
    /// is `false` from now on, for every handle.
    pub(crate) fn mark_deleted(&self) {
        debug_assert!(self.word.load(Ordering::Relaxed) & OPEN == 0);
        // Relaxed: a read-modify-write, which keeps hand-over 2's release sequence going; the
        // readers that act on the mark are ordered by the push lock (see the module docs).
        self.word.fetch_or(DELETED, Ordering::Relaxed);
    }

    /// Re-arms a closed, empty ring for the var's next `generation` (var lock held, at reclaim),
    /// which clears the deletion mark.
    pub(crate) fn reset(&self, generation: u32) {
        let word = self.word.load(Ordering::Relaxed);
        debug_assert!(word & OPEN == 0 && tail(word) == head(word));
        // Release: a plain store ends the release sequence of the last drain's `head` update, so
        // it starts its own for the next generation's pushers (hand-over 2 of the module
        // documentation).
        self.word.store(
            (u64::from(generation) << GENERATION_SHIFT) | (word & COUNTERS),
            Ordering::Release,
        );
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn closed_ring_refuses() {
        let ring = Incoming::default();
        assert!(!ring.accepts(0));
        assert!(!ring.try_append(0, 5));
    }

    #[test]
    fn entries_come_out_in_order_and_the_ring_fills() {
        let ring = Incoming::default();
        ring.open();
        for op in 0..CAPACITY as u32 {
            assert!(ring.try_append(0, op));
        }
        assert!(!ring.accepts(0), "full");
        assert!(!ring.try_append(0, 99));
        let mut merged = Vec::new();
        assert_eq!(ring.drain(|e| merged.push(e)), CAPACITY);
        assert_eq!(merged, (0..CAPACITY as u32).collect::<Vec<_>>());
        // The counters wrap around (256 laps of the 8-bit counters).
        for lap in 0..300_u32 {
            assert!(ring.try_append(0, lap));
            assert!(ring.try_append(0, lap + 1));
            let mut merged = Vec::new();
            ring.drain(|e| merged.push(e));
            assert_eq!(merged, [lap, lap + 1]);
        }
    }

    #[test]
    fn close_fails_while_entries_wait_and_generation_is_checked() {
        let ring = Incoming::default();
        ring.open();
        assert!(!ring.try_append(1, 7), "stale generation");
        assert!(ring.try_append(0, 7));
        assert!(!ring.try_close());
        assert_eq!(ring.drain(|_| ()), 1);
        assert!(ring.try_close());
        assert!(!ring.try_append(0, 8));
        assert!(ring.is_current(0) && !ring.is_current(1));
        ring.mark_deleted();
        assert!(!ring.is_current(0), "deleted");
        ring.reset(1);
        assert!(
            ring.is_current(1) && !ring.is_current(0),
            "the next generation"
        );
        assert!(!ring.accepts(1), "reset leaves the ring closed");
        ring.open();
        assert!(ring.accepts(1));
        assert!(!ring.accepts(0));
    }
}
