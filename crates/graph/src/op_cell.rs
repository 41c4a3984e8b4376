//! The op slot (MXNet's `OprBlock`): where an op that has to wait is parked, and the lock-free
//! hand-over of that op from the thread that pushed it to the thread that makes it ready.
//!
//! This is the crate's only `unsafe` code: the parked op lives in an [`UnsafeCell`] (loom's under
//! `--cfg loom`, so loom checks every access below), and who may touch it is decided by the
//! slot's atomic `state` instead of a mutex.
//!
//! # State
//!
//! `state` packs two fields: the low 31 bits count the vars still holding the op back (the
//! *wait count*; an op lists fewer than 2^31 - 1 vars), bit 31 (`PINNED`) is set while
//! [`Graph::inspect_op`](crate::Graph::inspect_op) reads the payload. `generation` is bumped
//! each time the op leaves the slot and is part of [`OpId`](crate::OpId). Both are 32 bits, so
//! that with the engine's op record a slot (link included) is 112 bytes: see `docs/graph.md`.
//!
//! # Ownership protocol
//!
//! The cell (and `generation`) has exactly one owner at a time, or, while the wait count is
//! non-zero, is read-only:
//!
//! 1. **Pusher.** A slot fresh from the op slab's free list is owned by the thread that popped it
//!    (the free list hands each slot to one thread); so is the graph's spare slot, one a push
//!    on several vars took and did not need, by the next such push (the push lock hands it
//!    over, with what its earlier owners wrote). Holding the lock of the first var that
//!    holds the op back, the pusher appends the slot index to its queue and calls
//!    [`OpSlot::park`]: it writes the payload into the cell, then stores the wait count with
//!    `Release`. From then on the cell is read-only until the count returns to zero. An op on
//!    one var is parked with count 1. An op on several vars appends to its vars one at a time,
//!    each under that var's lock alone, so it counts, besides every var from that first one on
//!    (each grants it once, at append or later), one *hold* of its own: the count cannot reach
//!    zero while the pusher still appends. Once it has appended everywhere, the pusher gives
//!    back its hold and the grants of the later vars that did not hold the op back, in one
//!    [`OpSlot::release_hold`] (`Release`, as a grant: a var granted at append passes on what
//!    its last writer did, which the pusher acquired with that var's lock). Whoever brings the
//!    count to zero, the pusher included, is the owner. An op on a single var whose `Incoming` ring is open (`incoming.rs`) is
//!    parked (count 1) *before* it is published, without the var's lock: the ring entry's
//!    `Release` store publishes it, and the lock holder that merges the entry loads it with
//!    `Acquire` before it can grant the op. If the ring refuses the entry, nothing ever named the
//!    slot, and the pusher grants the op itself and takes it back.
//! 2. **Releasers.** Each var that grants the op (a decision taken under that var's lock, when
//!    the request leaves its queue) then calls [`OpSlot::grant`], under the lock or right after
//!    releasing it: a `fetch_sub(1, Release)`. The count is decremented exactly as often as it
//!    was set to (each var grants a request once, and a hold is given back once), so exactly
//!    one decrement brings it to 0; that thread becomes the owner. A releaser cannot have run
//!    before the pusher's stores: it locked a var after the pusher appended there, at or after
//!    parking, so the pusher's unlock (`Release`) happens-before its lock (`Acquire`),
//!    which is sequenced before its grant (or, through the `Incoming` ring, the entry's
//!    `Release`/`Acquire` pair). Until that last grant the op stays parked, so a releaser that
//!    grants after unlocking still names a slot the op occupies. The grant publishes nothing
//!    of the cell (the owner acquires it in `take`, role 3); its `Release` orders the grant's
//!    own access to the slot before the owner's `take`, so before the slot is freed, and
//!    possibly given back by a trim of the op slab (depengine-slab).
//! 3. **Owner.** After releasing its var lock, the owner calls [`OpSlot::take`]: it waits until
//!    `state` is 0 (an inspector may still hold the pin, see below), loaded with `Acquire` (the
//!    value it reads continues the release sequences of the pusher's `Release` store and of the
//!    last unpin, since every other change of `state` is a read-modify-write), bumps
//!    `generation`, moves the op out of the cell (leaving it empty), and returns the slot to the
//!    free list, whose `Release` push publishes these writes to the next pusher's `Acquire` pop.
//! 4. **Inspectors** read the payload only while they hold the pin: a compare-exchange that sets
//!    `PINNED` only if the wait count is non-zero and no other inspector holds it (`Acquire`:
//!    it reads from the pusher's `Release` store or from a read-modify-write in its release
//!    sequence, so the payload and `generation` written before it are visible). Pinned, the op
//!    cannot be taken (the owner waits for `state == 0`, and once the count is 0 nobody can pin
//!    again), so the payload and `generation` stay put. The pin is dropped with a `Release`
//!    `fetch_and`, which the owner's `Acquire` wait synchronises with (the unpin heads a release
//!    sequence that the later grants continue), so the owner's writes to the cell follow the
//!    inspector's reads. Pins are exclusive, so at most one thread ever holds a `&T`: `T: Send` suffices,
//!    as with a mutex.
//!
//! `pending_ops` reads `generation` (`Relaxed`) under the lock of a var the op still waits on: the
//! op cannot leave the slot while that lock is held, and the owner's last store to `generation`
//! happens-before the pusher's append through the free list (or the push lock, for the spare)
//! and the var lock.
//!
//! The cell holds the op only while the wait count is non-zero, and between the grant that
//! brings it to zero and the owner's `take`: a `MaybeUninit`, which also makes an all-zero slot
//! a valid empty one (the slab allocates the op slots' buckets zeroed, so that the memory of
//! slots never used is never touched). A slot dropped with an op still parked (the graph
//! dropped while ops wait: no grant can be in flight, the graph is borrowed mutably) drops the
//! op with it.
//!
//! The methods are safe to call but sound only under this protocol, which `graph.rs` follows:
//! `park` only on a slot just allocated, `take` only by the thread whose `grant` returned `true`.
//! The module is private to the crate.

use std::fmt;
use std::mem::MaybeUninit;

use depengine_sync::{AtomicU32, Ordering, UnsafeCell, yield_now};

#[cfg(not(loom))]
use depengine_slab::Entry;
use depengine_slab::Slot;

use crate::op::Parked;

/// The wait-count part of `state`: the vars an op waits for, and its pusher's hold.
pub(crate) const COUNT: u32 = !PINNED;
/// Set while an inspector reads the parked payload.
const PINNED: u32 = 1 << 31;

/// One op slot, used only by ops that had to wait. See the module documentation.
pub(crate) struct OpSlot<T> {
    /// Wait count (low 31 bits) and the inspector pin.
    state: AtomicU32,
    /// Bumped each time the slot is emptied; part of [`OpId`](crate::OpId).
    generation: AtomicU32,
    /// The parked op: present and owned as the module documentation describes.
    parked: UnsafeCell<MaybeUninit<Parked<T>>>,
}

// SAFETY: the cell is only written by its single owner (pusher before the `Release` store of the
// wait count, owner after the count reached zero and the pin is released) and only read by one
// pinned inspector at a time while the count is non-zero, with the orderings documented above;
// values of `T` move between threads through it, hence `T: Send`. No `&T` is ever shared between
// two threads at once, so `T: Sync` is not needed (as for `Mutex<T>`).
unsafe impl<T: Send> Sync for OpSlot<T> {}

impl<T> Default for OpSlot<T> {
    fn default() -> Self {
        OpSlot {
            state: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            parked: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

impl<T> Slot for OpSlot<T> {
    type Header = ();

    /// A free op slot holds no op: its wait count is zero, and its `Drop` does nothing. (Under
    /// loom the slots are dropped one by one, as loom's atomics expect.)
    #[cfg(not(loom))]
    const FREE_NEEDS_DROP: bool = false;

    /// The pusher allocates op slots and the workers free them, one of each per op: a batch
    /// keeps the line of the freed stack from crossing between them on every op (see
    /// "Recycling in batches" in depengine-slab's `slab.rs`). One under loom, where the models
    /// count the slots the op slab grows by.
    const RECYCLE_BATCH: u64 = if cfg!(loom) { 1 } else { 32 };

    #[cfg(not(loom))]
    fn bucket(len: usize) -> Box<[Entry<Self>]> {
        // SAFETY: all-zero bytes are a fresh op slot: `state` and `generation` at 0 (plain
        // atomics of 32 bits: no wait count, no pin, generation 0) and the cell, a
        // `MaybeUninit`, empty; and they are the header, `()`.
        unsafe { Entry::zeroed_bucket(len) }
    }
}

impl<T> Drop for OpSlot<T> {
    fn drop(&mut self) {
        // Relaxed: we have the slot to ourselves (`&mut`).
        if self.state.load(Ordering::Relaxed) & COUNT != 0 {
            self.parked.with_mut(|cell| {
                // SAFETY: a non-zero wait count means an op is parked (`park` wrote it before it
                // stored the count, and only `take`, after the count reached zero, moves it out).
                unsafe { (*cell).assume_init_drop() };
            });
        }
    }
}

impl<T> fmt::Debug for OpSlot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpSlot")
            .field("state", &self.state)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

/// Drops the inspector pin, also when the inspecting closure panics (a pin left behind would
/// make the op's owner wait forever).
struct Pin<'a>(&'a AtomicU32);

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        // Release: orders our reads of the cell before the owner's `Acquire` wait for 0.
        self.0.fetch_and(!PINNED, Ordering::Release);
    }
}

impl<T> OpSlot<T> {
    /// Parks `parked` in this slot, held back by `waits` vars and holds (> 0).
    ///
    /// Protocol: the caller got this slot from the op slab's `alloc` (or as the graph's spare,
    /// under the push lock) and has not parked anything in it since, and either holds the lock
    /// of the var whose queue it now waits in, no var having queued it before, or has not
    /// published the slot index yet (the `Incoming` ring, see the module documentation).
    pub(crate) fn park(&self, parked: Parked<T>, waits: u32) {
        debug_assert!(
            waits > 0 && waits <= COUNT,
            "a parked op waits for 1 to COUNT vars and holds"
        );
        self.parked.with_mut(|cell| {
            // SAFETY: we own the slot (fresh from the free list, or the spare): its wait count
            // is 0, so no inspector can pin it (a pin needs a non-zero count, even if a var
            // that granted the op at append names the slot already) and no releaser can
            // decrement it (none can find this slot waiting in a var's queue before we unlock
            // the var or publish the ring entry naming it), and the previous owner's writes
            // were published by the free list's Release push / our Acquire pop (or, for the
            // spare, by the push lock). The cell is empty (the last owner took its op), so
            // nothing is overwritten without being dropped.
            unsafe { (*cell).write(parked) };
        });
        // Release: publishes the cell write to inspectors that pin the slot (releasers are
        // ordered by the var locks as well).
        self.state.store(waits, Ordering::Release);
    }

    /// One var granted the op (decided under that var's lock; called under it or after releasing
    /// it). `true` for exactly one caller, the one whose grant was the last: it now owns the slot
    /// and must [`take`](Self::take) it.
    pub(crate) fn grant(&self) -> bool {
        // Release, for two things. The owner runs the op, which must see what every granting
        // thread did before its grant (the op it completed: a write to the op's data), and the
        // owner's `take` acquires the last value of this counter, in the release sequence of
        // every grant (each later change is a read-modify-write): depengine's model
        // `data_is_handed_over_by_the_graph` fails without it. And the grant's own access to
        // the slot then happens before the owner's `take`, hence before the owner frees the
        // slot, which a trim of the op slab may give back to the allocator (depengine-slab). The
        // cell itself is published by the park's Release store and the last unpin, not here.
        let previous = self.state.fetch_sub(1, Ordering::Release);
        debug_assert!(previous & COUNT != 0, "more grants than the op waited for");
        previous & COUNT == 1
    }

    /// The pusher of an op on several vars gives back its hold and the `granted_at_append`
    /// grants of the vars it appended to after parking that did not hold the op back (role 1).
    /// `true` if that brought the count to zero: the pusher owns the slot and must
    /// [`take`](Self::take) it.
    pub(crate) fn release_hold(&self, granted_at_append: u32) -> bool {
        let grants = granted_at_append + 1;
        // Release, as `grant`: whoever takes the op runs it after the writers of the vars that
        // granted it at append, whose completions the pusher acquired with those vars' locks
        // (the model `a_var_granted_at_append_hands_its_data_to_the_op` fails without it).
        let previous = self.state.fetch_sub(grants, Ordering::Release);
        debug_assert!(
            previous & COUNT >= grants,
            "more grants than the op waited for"
        );
        previous & COUNT == grants
    }

    /// Takes the op out of the slot and bumps its generation. Only for the thread whose
    /// [`grant`](Self::grant) returned `true`; it frees the slot afterwards.
    pub(crate) fn take(&self) -> Parked<T> {
        // Acquire: an inspector may still hold the pin it took while the count was non-zero; its
        // Release unpin orders its reads before our writes. No new pin can be taken at count 0.
        while self.state.load(Ordering::Acquire) != 0 {
            yield_now();
        }
        // Relaxed: we are the only writer; readers are ordered as the module documentation says.
        let generation = self.generation.load(Ordering::Relaxed);
        self.generation
            .store(generation.wrapping_add(1), Ordering::Relaxed);
        self.parked.with_mut(|cell| {
            // SAFETY: we own the slot: the wait count reached 0 with our grant (so no releaser and
            // no pusher touches it), and no inspector holds the pin (state is 0, acquired above).
            // The op is there: it was parked before the count was stored, and only this take,
            // the one of the thread whose grant reached zero, moves it out (the slot is then
            // freed, and refilled only by a new `park`).
            unsafe { (*cell).assume_init_read() }
        })
    }

    /// The slot's generation. Exact while the caller holds the lock of a var the parked op still
    /// waits on (see the module documentation).
    pub(crate) fn generation(&self) -> u32 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Calls `f` with the parked op (payload and dependency list) if it still waits and has
    /// generation `generation`. The op cannot be taken out while `f` runs.
    pub(crate) fn inspect<R>(&self, generation: u32, f: impl FnOnce(&Parked<T>) -> R) -> Option<R> {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & COUNT == 0 {
                return None;
            }
            if state & PINNED != 0 {
                // Another inspector reads it: pins are exclusive (see the Sync impl).
                yield_now();
                state = self.state.load(Ordering::Relaxed);
                continue;
            }
            // Acquire: see the module documentation (publication of the payload and generation).
            match self.state.compare_exchange_weak(
                state,
                state | PINNED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(current) => state = current,
            }
        }
        let _pin = Pin(&self.state);
        if self.generation.load(Ordering::Relaxed) != generation {
            return None;
        }
        self.parked.with(|cell| {
            // SAFETY: we hold the exclusive pin on a slot whose wait count is non-zero: the op is
            // parked, the pusher finished writing it before its Release store that our Acquire
            // pin read from, and the owner cannot write before we unpin.
            let parked = unsafe { (*cell).assume_init_ref() };
            Some(f(parked))
        })
    }
}
