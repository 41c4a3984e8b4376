//! The per-var dependency queue: MXNet's `ThreadedVar` state machine, without the locking.
//!
//! # Algorithm outline
//!
//! A var's state is three things (the graph keeps it under the var's mutex):
//!
//! - `running_reads`: how many granted reads have not completed. Running reads are *not* in the
//!   queue, exactly as in MXNet (`num_pending_reads_`).
//! - `queue`: a FIFO of requests that are waiting, in push order. Its front is a write (MXNet's
//!   `pending_write_`): reads only ever wait behind a write, or, once ops launch (below),
//!   behind a launched write, at the front.
//! - `head_running`: whether that front write was granted. A running write stays at the front of
//!   the queue until it completes, so everything pushed after it waits behind it.
//!
//! ```text
//!             append read            append write           complete read        complete write
//!  idle  ──────────────────► reading ─────────────► reading+queued ─────────► writing ─────► ...
//!  (0 reads, empty queue)    (n reads)               (front write waits       (front write
//!                                                     for n reads)             granted)
//! ```
//!
//! The four transitions:
//!
//! 1. **append read**: if the queue is empty (no write running or waiting), the read is granted at
//!    once and `running_reads += 1`; otherwise it is queued at the back, behind the last write.
//! 2. **append write**: queued at the back; if the queue was empty and no read runs, it is
//!    granted at once and becomes the running front (`head_running`).
//! 3. **complete read**: `running_reads -= 1`; when it reaches zero and a write waits at the front,
//!    that write is granted. A read of a long run that transition 4, 5 or 6 granted was given a
//!    credit instead of a count, in a word beside the lock ([`ReadCredits`]): its completion
//!    takes one without the lock, and only the taker of the last one locks the var to see
//!    whether the reads ended (`read_credits.rs`). The count of running reads is
//!    `running_reads` plus the credits left.
//! 4. **complete write**: the running front is popped; then the run of reads that follows it is
//!    popped and granted together (a run of [`CREDITED_RUN`] or more with a credit each); if the
//!    next front is a write and no read was released, that write is granted.
//!
//! Consequences, which the property tests check against a sequential model: everything on one
//! var happens in push order; a read is granted only once every earlier write completed, and never
//! while a later write runs; a write is granted only once every earlier op completed, and runs
//! alone (with launched ops: "completed" reads "launched or completed" for a request that waits
//! for launch).
//!
//! "Granting" an op here only means this var no longer holds it back: the caller is handed the op
//! id (through the `release` callback for transitions 3 and 4, or the [`Grant`] result for 1 and
//! 2) and decrements the op's wait counter; the op is ready once every var granted it.
//!
//! # Launched ops
//!
//! An op whose work goes on after it returns (a GPU op: its kernels run on a stream after the
//! function that launched them returned) can *launch* instead of completing: the ops that wait
//! for launch ([`Waits::Launch`]: ops that order themselves behind the launched work, a GPU op
//! making its stream wait for the launched op's event) may start at once, the others only once
//! the launched op completes. Two more counts say how many launched ops on the var have not
//! completed, reads and writes (in the cold part, with a hot flag: a var that never saw a launch
//! does not touch it), and two more transitions move them:
//!
//! 5. **launch** a granted request: the count of its access goes up, then the request completes
//!    as in transition 3 or 4, so that the ops behind it are granted as far as the counts allow;
//! 6. **complete a launched request**: its count goes down, and the front of the FIFO is granted
//!    if the counts now allow it.
//!
//! Transitions 1 to 4 grant a request that waits for launch as before; one that waits for
//! completion also needs the counts at zero that it conflicts with: no launched write for a
//! read, neither for a write. Otherwise it waits at the front of the FIFO, and everything pushed
//! after it waits behind it, so the FIFO keeps push order: the front can now be a read, which the
//! launched writes hold back, with reads granted before it still running. A launched op was
//! granted, so it came before every request still waiting: the counts only ever hold a request
//! back behind ops pushed before it.
//!
//! # Layout
//!
//! The whole state is built to share one 64-byte cache line with the var's mutex and the graph's
//! per-var fields (see `graph.rs`): a var is touched by the pushing thread and by the completing
//! threads, on different cores, so every extra line a touch needs is an extra cross-core transfer.
//! The FIFO's first [`RING`] requests live inline, in a fixed ring of packed 4-byte entries
//! (op index in the low 30 bits, the access in the top bit, what the op waits for in the next).
//! Longer FIFOs spill over into a `VecDeque` in the *cold part*, a box allocated the first time
//! the var needs it and kept for reuse; the counts of launched ops live there, and the owner of
//! the queue keeps its own rare state there too (`C`: the graph's failure and deletion callback),
//! so a var has one out-of-line pointer in all.
//!
//! Order across the two parts: the ring always holds the front of the FIFO and the spill its
//! back, and the ring is never empty while the spill holds entries. Appending goes to the ring
//! while it has room and nothing is spilled, otherwise to the back of the spill; popping the last
//! entry of the ring refills it with up to [`RING`] entries from the spill's front at once (so
//! draining a long FIFO touches the cold part once per `RING` pops, not on each, and that line
//! is not bounced between the pushing and the completing core on every op). The hot `flags`
//! say whether the spill holds anything and whether launched ops are counted, so a var
//! whose FIFO fits the ring, and that saw no launch, never touches the cold part.
//!
//! Memory: a spill of up to [`KEEP_SPILL`] entries of capacity keeps it when it drains, so in
//! steady state appending and releasing allocate nothing; a spill that a burst grew beyond
//! that is freed as soon as it drains (once per burst and var), so the burst's memory goes
//! back once its ops were released.

use std::collections::VecDeque;

use crate::read_credits::ReadCredits;
use crate::var::{Access, Waits};

/// Op id recorded for a write that was granted when it was pushed (such ops get no slot).
pub(crate) const NO_OP: u32 = u32::MAX;

/// Requests held inline (a power of two).
pub(crate) const RING: usize = 8;

/// The shortest run of reads that `advance` gives credits to (`read_credits.rs`): the ring's
/// length. A shorter run counts in `running_reads`, its reads completing under the lock. For a
/// run of one or two reads the credits cost more than the locks they save: an atomic add, and
/// a compare-exchange per read on another line than the locked one (`docs/decisions.md`, "Read
/// credits, for runs of 8 reads or more"). Two under loom, where the models' runs are two reads
/// long.
const CREDITED_RUN: u32 = if cfg!(loom) { 2 } else { 8 };

/// Spill capacity (entries of 4 bytes) a drained spill keeps: enough that a queue that often
/// spills a little does not reallocate, small enough that idle vars stay cheap.
pub(crate) const KEEP_SPILL: usize = 64;

/// The access bit of a packed entry.
const WRITE_BIT: u32 = 1 << 31;
/// The bit of a packed entry set for a request that waits for launch ([`Waits::Launch`]).
const LAUNCH_BIT: u32 = 1 << 30;
/// The op part of a packed entry; [`NO_OP`] packs to this value. Op slot indices are below it
/// (the slab hands out at most `2^30 - 1` slots).
const OP_MASK: u32 = LAUNCH_BIT - 1;

/// One request in a var's FIFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waiter {
    /// The op slot index of the waiting op ([`NO_OP`] for a write granted at push).
    pub(crate) op: u32,
    pub(crate) access: Access,
    /// What the op waits for from the launched ops on the var.
    pub(crate) waits: Waits,
}

impl Waiter {
    pub(crate) fn pack(self) -> u32 {
        debug_assert!(self.op == NO_OP || self.op < OP_MASK);
        let access = match self.access {
            Access::Read => 0,
            Access::Write => WRITE_BIT,
        };
        let waits = match self.waits {
            Waits::Completion => 0,
            Waits::Launch => LAUNCH_BIT,
        };
        (self.op & OP_MASK) | access | waits
    }

    pub(crate) fn unpack(packed: u32) -> Waiter {
        let op = match packed & OP_MASK {
            OP_MASK => NO_OP,
            op => op,
        };
        let access = if packed & WRITE_BIT == 0 {
            Access::Read
        } else {
            Access::Write
        };
        let waits = if packed & LAUNCH_BIT == 0 {
            Waits::Completion
        } else {
            Waits::Launch
        };
        Waiter { op, access, waits }
    }
}

/// Launched ops on a var that have not completed (transitions 5 and 6), by access.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaunchedCounts {
    pub(crate) reads: u32,
    pub(crate) writes: u32,
}

impl LaunchedCounts {
    /// Whether these launched ops hold back a request that waits for their completion.
    fn hold_back(self, access: Access) -> bool {
        match access {
            Access::Read => self.writes > 0,
            Access::Write => self.reads > 0 || self.writes > 0,
        }
    }

    fn count(&mut self, access: Access) -> &mut u32 {
        match access {
            Access::Read => &mut self.reads,
            Access::Write => &mut self.writes,
        }
    }
}

/// `VarQueue::flags` bit: the spill holds entries (then the ring is not empty).
const SPILLED: u8 = 1;
/// `VarQueue::flags` bit: the cold part counts launched ops that have not completed.
const LAUNCHED: u8 = 2;
/// `VarQueue::flags` bit: credits were given to a run of reads (`read_credits.rs`) and may be
/// left.
const CREDITED: u8 = 4;

/// The result of appending a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// The var does not hold the op back.
    Granted,
    /// The op waits in this var's queue; a later completion releases it.
    Queued,
}

/// The out-of-line part of a var: the FIFO's spill-over, the launched ops, and the owner's rare
/// state.
#[derive(Debug, Default)]
pub(crate) struct Cold<C> {
    /// The back of the FIFO once the ring is full (packed entries).
    spill: VecDeque<u32>,
    /// Launched ops that have not completed.
    launched: LaunchedCounts,
    /// The owner's rare state.
    pub(crate) extra: C,
}

/// The dependency state of one var. See the module documentation.
#[derive(Debug)]
pub(crate) struct VarQueue<C> {
    /// The spill-over and `C`, allocated on first use and kept.
    cold: Option<Box<Cold<C>>>,
    /// Running reads that took no credit (see `read_credits.rs`: the var's running reads are
    /// these and its credits left).
    running_reads: u32,
    /// The front of the FIFO: `len` packed entries from `head`, wrapping.
    ring: [u32; RING],
    head: u8,
    len: u8,
    head_running: bool,
    /// What the hot paths must look at beyond the ring: what the cold part holds
    /// ([`SPILLED`], [`LAUNCHED`]), and whether the var's credits may be left ([`CREDITED`]).
    flags: u8,
}

impl<C> Default for VarQueue<C> {
    fn default() -> Self {
        VarQueue {
            cold: None,
            running_reads: 0,
            ring: [0; RING],
            head: 0,
            len: 0,
            head_running: false,
            flags: 0,
        }
    }
}

impl<C> VarQueue<C> {
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn front(&self) -> Option<Waiter> {
        (self.len > 0).then(|| Waiter::unpack(self.ring[usize::from(self.head)]))
    }

    /// Whether the spill holds entries.
    fn spilled(&self) -> bool {
        self.flags & SPILLED != 0
    }

    fn set_spilled(&mut self, spilled: bool) {
        if spilled {
            self.flags |= SPILLED;
        } else {
            self.flags &= !SPILLED;
        }
    }

    /// The launched ops on the var that have not completed.
    pub(crate) fn launched(&self) -> LaunchedCounts {
        match &self.cold {
            Some(cold) if self.flags & LAUNCHED != 0 => cold.launched,
            _ => LaunchedCounts::default(),
        }
    }

    /// Whether `request`, at the front of the FIFO (or appended to an empty one), may start as
    /// far as the launched ops are concerned.
    fn launched_allow(&self, request: Waiter) -> bool {
        request.waits == Waits::Launch
            || self.flags & LAUNCHED == 0
            || !self.launched().hold_back(request.access)
    }

    fn push_back(&mut self, waiter: Waiter)
    where
        C: Default,
    {
        let packed = waiter.pack();
        if !self.spilled() && usize::from(self.len) < RING {
            let at = (usize::from(self.head) + usize::from(self.len)) % RING;
            self.ring[at] = packed;
            self.len += 1;
        } else {
            self.cold_or_default().spill.push_back(packed);
            self.set_spilled(true);
        }
    }

    fn pop_front(&mut self) {
        if self.len == 0 {
            return;
        }
        self.head = ((usize::from(self.head) + 1) % RING) as u8;
        self.len -= 1;
        if self.len == 0
            && self.spilled()
            && let Some(cold) = self.cold.as_mut()
        {
            // Refill the whole ring at once, so the thread draining a long FIFO touches the cold
            // part once per `RING` pops rather than on each.
            self.head = 0;
            for (slot, packed) in self
                .ring
                .iter_mut()
                .zip(cold.spill.drain(..RING.min(cold.spill.len())))
            {
                *slot = packed;
                self.len += 1;
            }
            let spilled = !cold.spill.is_empty();
            if !spilled && cold.spill.capacity() > KEEP_SPILL {
                // A burst's spill, drained: give its memory back, all of it (a small buffer
                // reallocated now would land among the burst's freed memory and keep a page of
                // it resident; the next spill allocates afresh).
                cold.spill = VecDeque::new();
            }
            self.set_spilled(spilled);
        }
    }

    /// The cold part, allocating it on first use.
    fn cold_or_default(&mut self) -> &mut Cold<C>
    where
        C: Default,
    {
        self.cold.get_or_insert_with(Box::default)
    }

    /// The owner's rare state, if the cold part was ever allocated.
    pub(crate) fn extra(&self) -> Option<&C> {
        self.cold.as_ref().map(|c| &c.extra)
    }

    /// As [`extra`](Self::extra), mutably.
    pub(crate) fn extra_mut(&mut self) -> Option<&mut C> {
        self.cold.as_mut().map(|c| &mut c.extra)
    }

    /// The owner's rare state, allocating the cold part on first use.
    pub(crate) fn extra_or_default(&mut self) -> &mut C
    where
        C: Default,
    {
        &mut self.cold_or_default().extra
    }

    /// The var's credits left (see `read_credits.rs`), without touching their word unless some
    /// were given.
    fn credits_left(&self, credits: &ReadCredits) -> u32 {
        if self.flags & CREDITED == 0 {
            0
        } else {
            credits.left()
        }
    }

    /// Whether no read runs: none without a credit, and no credit left (forgetting the credits
    /// once none is left, so that the next look does not touch their word).
    fn reads_ended(&mut self, credits: &ReadCredits) -> bool {
        if self.running_reads > 0 {
            return false;
        }
        if self.credits_left(credits) > 0 {
            return false;
        }
        self.flags &= !CREDITED;
        true
    }

    /// Whether appending a request with `access` that `waits` for launch or completion would
    /// have to wait now.
    pub(crate) fn would_wait(
        &mut self,
        credits: &ReadCredits,
        access: Access,
        waits: Waits,
    ) -> bool {
        let busy = match access {
            Access::Read => !self.is_empty(),
            Access::Write => !self.is_empty() || !self.reads_ended(credits),
        };
        busy || !self.launched_allow(Waiter {
            op: NO_OP,
            access,
            waits,
        })
    }

    /// Transition 1 or 2: appends `request`. A read granted here takes no credit.
    pub(crate) fn append(&mut self, request: Waiter) -> Grant
    where
        C: Default,
    {
        match request.access {
            Access::Read => {
                if self.is_empty() && self.launched_allow(request) {
                    self.running_reads += 1;
                    Grant::Granted
                } else {
                    self.push_back(request);
                    Grant::Queued
                }
            }
            Access::Write => {
                // The credits' flag, not their word: a push looked at the word just before
                // (`would_wait`, which forgets the credits once none is left), and must append
                // as it decided then, even if the last credit was taken since. A flag still set
                // with no credit left means that the read that took the last one is on its way
                // to the lock, and grants this write there (`read_credits.rs`).
                let ready = self.is_empty()
                    && self.running_reads == 0
                    && self.flags & CREDITED == 0
                    && self.launched_allow(request);
                self.push_back(request);
                if ready {
                    self.head_running = true;
                    Grant::Granted
                } else {
                    Grant::Queued
                }
            }
        }
    }

    /// Grants what the front of the FIFO may start now, calling `release` with each op: the run
    /// of reads there, as far as the launched ops allow (a run of [`CREDITED_RUN`] or more each
    /// given a credit, `read_credits.rs`), then a write if no read runs. Called whenever the
    /// front may have become free: a write left it (transition 4), the last read completed (3),
    /// a launched op completed (6).
    fn advance(&mut self, credits: &ReadCredits, release: &mut impl FnMut(u32)) {
        if self.head_running {
            return;
        }
        let mut run = 0;
        while let Some(front) = self.front() {
            if !self.launched_allow(front) {
                break;
            }
            match front.access {
                Access::Read => {
                    self.pop_front();
                    run += 1;
                    release(front.op);
                }
                Access::Write => {
                    if run == 0 && self.reads_ended(credits) {
                        self.head_running = true;
                        release(front.op);
                    }
                    break;
                }
            }
        }
        // Given before the lock is released, hence before any of the run can complete: the
        // graph dispatches what `release` names only once the var is unlocked.
        if run >= CREDITED_RUN {
            credits.give(run);
            self.flags |= CREDITED;
        } else {
            self.running_reads += run;
        }
    }

    /// Transition 3 under the var's lock: a granted read completed. It takes a credit if one is
    /// left, else counts itself done in `running_reads`; if that ended the reads, calls `release`
    /// with what it unblocks: a write, or reads that the launched ops held back no more.
    ///
    /// Returns `false` (and changes nothing) if no read was running: the caller broke the
    /// protocol.
    pub(crate) fn complete_read(
        &mut self,
        credits: &ReadCredits,
        mut release: impl FnMut(u32),
    ) -> bool {
        // Without the flag no credit is left (credits are given only with it, and it is cleared
        // only once none is): the word need not be looked at again.
        if self.flags & CREDITED == 0 || !credits.take_locked() {
            if self.running_reads == 0 {
                return false;
            }
            self.running_reads -= 1;
        }
        if self.reads_ended(credits) {
            self.advance(credits, &mut release);
        }
        true
    }

    /// Transition 3 under the var's lock, for a read that took the last credit without it
    /// (`read_credits.rs`): if no read is left, calls `release` with what that unblocks, as
    /// [`complete_read`](Self::complete_read) does.
    pub(crate) fn last_credit_taken(
        &mut self,
        credits: &ReadCredits,
        mut release: impl FnMut(u32),
    ) {
        if self.reads_ended(credits) {
            self.advance(credits, &mut release);
        }
    }

    /// Transition 4: the running write completed. Calls `release` with each read of the run that
    /// follows it, or with the next write.
    ///
    /// Returns `false` (and changes nothing) if no write was running.
    pub(crate) fn complete_write(
        &mut self,
        credits: &ReadCredits,
        mut release: impl FnMut(u32),
    ) -> bool {
        if !self.head_running {
            return false;
        }
        self.pop_front();
        self.head_running = false;
        self.advance(credits, &mut release);
        true
    }

    /// Completes a granted request with `access` under the var's lock (transition 3 or 4).
    pub(crate) fn complete(
        &mut self,
        credits: &ReadCredits,
        access: Access,
        release: impl FnMut(u32),
    ) -> bool {
        match access {
            Access::Read => self.complete_read(credits, release),
            Access::Write => self.complete_write(credits, release),
        }
    }

    /// Transition 5: launches a granted request with `access`: counts it as launched, then
    /// completes it as transition 3 or 4 does, calling `release` with what may start now.
    ///
    /// Returns `false` (and changes nothing) if no request with `access` was granted.
    pub(crate) fn launch(
        &mut self,
        credits: &ReadCredits,
        access: Access,
        release: impl FnMut(u32),
    ) -> bool
    where
        C: Default,
    {
        let granted = match access {
            Access::Read => self.running_reads > 0 || self.credits_left(credits) > 0,
            Access::Write => self.head_running,
        };
        if !granted {
            return false;
        }
        *self.cold_or_default().launched.count(access) += 1;
        self.flags |= LAUNCHED;
        self.complete(credits, access, release)
    }

    /// Transition 6: a launched request with `access` completed. Calls `release` with the ops
    /// at the front of the FIFO that may start now.
    ///
    /// Returns `false` (and changes nothing) if no launched request with `access` was counted.
    pub(crate) fn complete_launched(
        &mut self,
        credits: &ReadCredits,
        access: Access,
        mut release: impl FnMut(u32),
    ) -> bool {
        let Some(cold) = self.cold.as_mut().filter(|_| self.flags & LAUNCHED != 0) else {
            return false;
        };
        let count = cold.launched.count(access);
        if *count == 0 {
            return false;
        }
        *count -= 1;
        if cold.launched == LaunchedCounts::default() {
            self.flags &= !LAUNCHED;
        }
        self.advance(credits, &mut release);
        true
    }

    /// No request is running, launched or waiting.
    pub(crate) fn is_idle(&self, credits: &ReadCredits) -> bool {
        self.running_reads == 0
            && self.credits_left(credits) == 0
            && self.is_empty()
            && self.flags & LAUNCHED == 0
    }

    /// How many reads run (a snapshot: reads may complete meanwhile without the lock).
    pub(crate) fn running_reads(&self, credits: &ReadCredits) -> u32 {
        self.running_reads + self.credits_left(credits)
    }

    pub(crate) fn write_running(&self) -> bool {
        self.head_running
    }

    /// The op recorded for the running write, if a write runs: the slot of the op, or
    /// [`NO_OP`] for an op on one var granted at push (an op on several vars names the slot it
    /// took, where it parked or not).
    pub(crate) fn running_write_op(&self) -> Option<u32> {
        self.front().filter(|_| self.head_running).map(|w| w.op)
    }

    /// Every request in the FIFO (the running write included), in push order.
    fn queued(&self) -> impl Iterator<Item = Waiter> + '_ {
        let ring =
            (0..usize::from(self.len)).map(move |i| self.ring[(usize::from(self.head) + i) % RING]);
        let spill = self
            .cold
            .iter()
            .filter(|_| self.spilled())
            .flat_map(|c| c.spill.iter().copied());
        ring.chain(spill).map(Waiter::unpack)
    }

    /// The requests still waiting (not the running write), in push order.
    pub(crate) fn waiting(&self) -> impl Iterator<Item = Waiter> + '_ {
        self.queued().skip(usize::from(self.head_running))
    }

    /// The last request waiting, if any: the back of the FIFO, unless that is the running write.
    pub(crate) fn last_waiting(&self) -> Option<Waiter> {
        if self.waiting_len() == 0 {
            return None;
        }
        let spilled = self.cold.as_ref().filter(|_| self.spilled());
        let last = match spilled.and_then(|cold| cold.spill.back()) {
            Some(&last) => last,
            None => self.ring[(usize::from(self.head) + usize::from(self.len) - 1) % RING],
        };
        Some(Waiter::unpack(last))
    }

    pub(crate) fn waiting_len(&self) -> usize {
        let spill = match &self.cold {
            Some(cold) if self.spilled() => cold.spill.len(),
            _ => 0,
        };
        usize::from(self.len) + spill - usize::from(self.head_running)
    }

    /// Drops spare spill capacity beyond `keep` entries (used when a var slot is reclaimed, so a
    /// var that once had a long queue does not pin that memory forever). The cold part itself
    /// is kept.
    pub(crate) fn trim(&mut self, keep: usize) {
        if let Some(cold) = self.cold.as_mut()
            && cold.spill.capacity() > keep
        {
            cold.spill.shrink_to(keep);
        }
    }

    /// The spill's capacity (0 without a cold part), for tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn spill_capacity(&self) -> usize {
        self.cold.as_ref().map_or(0, |c| c.spill.capacity())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A request of `op` that waits for completion.
    fn request(op: u32, access: Access) -> Waiter {
        Waiter {
            op,
            access,
            waits: Waits::Completion,
        }
    }

    fn read(op: u32) -> Waiter {
        request(op, Access::Read)
    }

    fn write(op: u32) -> Waiter {
        request(op, Access::Write)
    }

    /// A request of `op` that waits for launch.
    fn on_launch(op: u32, access: Access) -> Waiter {
        Waiter {
            op,
            access,
            waits: Waits::Launch,
        }
    }

    /// A queue and the read credits beside it, as a var slot holds them; every read completes
    /// under the lock here (the completions without it are `read_credits.rs`' and the loom
    /// models').
    #[derive(Default)]
    struct TestVar {
        queue: VarQueue<()>,
        credits: ReadCredits,
    }

    impl TestVar {
        fn append(&mut self, request: Waiter) -> Grant {
            self.queue.append(request)
        }

        fn would_wait(&mut self, access: Access, waits: Waits) -> bool {
            self.queue.would_wait(&self.credits, access, waits)
        }

        fn complete(&mut self, access: Access, release: impl FnMut(u32)) -> bool {
            self.queue.complete(&self.credits, access, release)
        }

        fn complete_read(&mut self, release: impl FnMut(u32)) -> bool {
            self.queue.complete_read(&self.credits, release)
        }

        fn complete_write(&mut self, release: impl FnMut(u32)) -> bool {
            self.queue.complete_write(&self.credits, release)
        }

        fn launch(&mut self, access: Access, release: impl FnMut(u32)) -> bool {
            self.queue.launch(&self.credits, access, release)
        }

        fn complete_launched(&mut self, access: Access, release: impl FnMut(u32)) -> bool {
            self.queue.complete_launched(&self.credits, access, release)
        }

        fn running_reads(&self) -> u32 {
            self.queue.running_reads(&self.credits)
        }

        fn is_idle(&self) -> bool {
            self.queue.is_idle(&self.credits)
        }
    }

    impl std::ops::Deref for TestVar {
        type Target = VarQueue<()>;

        fn deref(&self) -> &VarQueue<()> {
            &self.queue
        }
    }

    impl std::ops::DerefMut for TestVar {
        fn deref_mut(&mut self) -> &mut VarQueue<()> {
            &mut self.queue
        }
    }

    fn released(f: impl FnOnce(&mut dyn FnMut(u32)) -> bool) -> (bool, Vec<u32>) {
        let mut out = Vec::new();
        let ok = f(&mut |op| out.push(op));
        (ok, out)
    }

    #[test]
    fn read_on_idle_var_is_granted() {
        let mut q = TestVar::default();
        assert!(!q.would_wait(Access::Read, Waits::Completion));
        assert_eq!(q.append(read(1)), Grant::Granted);
        assert_eq!(q.append(read(2)), Grant::Granted);
        assert_eq!(q.running_reads(), 2);
        assert_eq!(q.waiting_len(), 0);
        assert!(!q.is_idle());
    }

    #[test]
    fn write_on_idle_var_is_granted_and_stays_at_head() {
        let mut q = TestVar::default();
        assert!(!q.would_wait(Access::Write, Waits::Completion));
        assert_eq!(q.append(write(1)), Grant::Granted);
        assert!(q.write_running());
        assert_eq!(q.waiting_len(), 0);
        assert!(q.would_wait(Access::Read, Waits::Completion));
        assert!(q.would_wait(Access::Write, Waits::Completion));
    }

    #[test]
    fn write_waits_for_running_reads() {
        let mut q = TestVar::default();
        q.append(read(1));
        q.append(read(2));
        assert!(q.would_wait(Access::Write, Waits::Completion));
        assert_eq!(q.append(write(3)), Grant::Queued);
        // A read pushed after the write waits behind it.
        assert_eq!(q.append(read(4)), Grant::Queued);
        let (ok, out) = released(|r| q.complete_read(r));
        assert!(ok);
        assert!(out.is_empty(), "one read still runs");
        let (ok, out) = released(|r| q.complete_read(r));
        assert!(ok);
        assert_eq!(out, vec![3]);
        assert!(q.write_running());
        assert_eq!(q.waiting().map(|w| w.op).collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn complete_write_releases_following_run_of_reads() {
        let mut q = TestVar::default();
        q.append(write(1));
        q.append(read(2));
        q.append(read(3));
        q.append(write(4));
        q.append(read(5));
        let (ok, out) = released(|r| q.complete_write(r));
        assert!(ok);
        assert_eq!(out, vec![2, 3]);
        assert_eq!(q.running_reads(), 2);
        assert!(!q.write_running());
        assert_eq!(q.waiting_len(), 2);
        q.complete_read(|_| unreachable!());
        let (_, out) = released(|r| q.complete_read(r));
        assert_eq!(out, vec![4]);
        let (_, out) = released(|r| q.complete_write(r));
        assert_eq!(out, vec![5]);
        let (_, out) = released(|r| q.complete_read(r));
        assert!(out.is_empty());
        assert!(q.is_idle());
    }

    #[test]
    fn complete_write_releases_next_write() {
        let mut q = TestVar::default();
        q.append(write(1));
        assert_eq!(q.append(write(2)), Grant::Queued);
        let (_, out) = released(|r| q.complete_write(r));
        assert_eq!(out, vec![2]);
        assert!(q.write_running());
        let (_, out) = released(|r| q.complete_write(r));
        assert!(out.is_empty());
        assert!(q.is_idle());
    }

    #[test]
    fn completing_what_is_not_running_is_refused() {
        let mut q = TestVar::default();
        assert!(!q.complete_read(|_| unreachable!()));
        assert!(!q.complete_write(|_| unreachable!()));
        q.append(read(1));
        assert!(!q.complete_write(|_| unreachable!()));
        q.append(write(2));
        // The write waits: completing "it" is refused, the read still runs.
        assert!(!q.complete_write(|_| unreachable!()));
        assert_eq!(q.running_reads(), 1);
    }

    #[test]
    fn a_launched_write_lets_only_the_ops_that_wait_for_launch_start() {
        let mut q = TestVar::default();
        assert_eq!(q.append(write(1)), Grant::Granted);
        assert_eq!(q.append(on_launch(2, Access::Read)), Grant::Queued);
        assert_eq!(q.append(read(3)), Grant::Queued);
        assert_eq!(q.append(on_launch(4, Access::Write)), Grant::Queued);
        let (ok, out) = released(|r| q.launch(Access::Write, r));
        assert!(ok);
        // The read that waits for launch starts; the one behind it waits for the write's
        // completion, and the write behind both waits for it.
        assert_eq!(out, vec![2]);
        assert_eq!(
            q.launched(),
            LaunchedCounts {
                reads: 0,
                writes: 1
            }
        );
        assert!(
            q.would_wait(Access::Read, Waits::Launch),
            "behind a waiting read"
        );
        let (_, out) = released(|r| q.complete_read(r));
        assert!(out.is_empty(), "read 3 still waits for the launched write");
        let (ok, out) = released(|r| q.complete_launched(Access::Write, r));
        assert!(ok);
        assert_eq!(out, vec![3]);
        assert_eq!(q.launched(), LaunchedCounts::default());
        let (_, out) = released(|r| q.complete_read(r));
        assert_eq!(out, vec![4]);
        let (_, out) = released(|r| q.complete_write(r));
        assert!(out.is_empty());
        assert!(q.is_idle());
    }

    #[test]
    fn a_write_that_waits_for_completion_waits_for_launched_reads_too() {
        let mut q = TestVar::default();
        q.append(on_launch(1, Access::Read));
        q.append(on_launch(2, Access::Read));
        let (_, out) = released(|r| q.launch(Access::Read, r));
        assert!(out.is_empty());
        // Launched reads hold back no read, and a write that waits for launch only until they
        // launched.
        assert!(!q.would_wait(Access::Read, Waits::Completion));
        assert!(q.would_wait(Access::Write, Waits::Completion));
        assert!(
            q.would_wait(Access::Write, Waits::Launch),
            "read 2 still runs"
        );
        let (_, out) = released(|r| q.launch(Access::Read, r));
        assert!(out.is_empty());
        assert!(!q.would_wait(Access::Write, Waits::Launch));
        assert_eq!(q.append(write(3)), Grant::Queued);
        assert!(!q.is_idle());
        let (_, out) = released(|r| q.complete_launched(Access::Read, r));
        assert!(out.is_empty(), "one launched read left");
        let (_, out) = released(|r| q.complete_launched(Access::Read, r));
        assert_eq!(out, vec![3]);
        assert!(q.write_running());
    }

    #[test]
    fn a_read_held_back_by_a_launch_keeps_push_order() {
        let mut q = TestVar::default();
        q.append(on_launch(1, Access::Write));
        let (_, out) = released(|r| q.launch(Access::Write, r));
        assert!(out.is_empty());
        // An empty FIFO, but the launched write holds the read back: it waits at the front, and
        // a read that waits for launch queues behind it rather than passing it.
        assert_eq!(q.append(read(2)), Grant::Queued);
        assert_eq!(q.append(on_launch(3, Access::Read)), Grant::Queued);
        assert_eq!(q.waiting_len(), 2);
        let (_, out) = released(|r| q.complete_launched(Access::Write, r));
        assert_eq!(out, vec![2, 3]);
        assert_eq!(q.running_reads(), 2);
    }

    #[test]
    fn launching_or_completing_what_is_not_there_is_refused() {
        let mut q = TestVar::default();
        assert!(!q.launch(Access::Read, |_| unreachable!()));
        assert!(!q.complete_launched(Access::Write, |_| unreachable!()));
        q.append(write(1));
        assert!(!q.launch(Access::Read, |_| unreachable!()));
        assert!(q.launch(Access::Write, |_| unreachable!()));
        assert!(!q.complete_launched(Access::Read, |_| unreachable!()));
        assert!(q.complete_launched(Access::Write, |_| unreachable!()));
        assert!(q.is_idle());
    }

    #[test]
    fn requests_that_wait_for_launch_pack_their_bit() {
        for waiter in [
            on_launch(7, Access::Read),
            on_launch(OP_MASK - 1, Access::Write),
            on_launch(NO_OP, Access::Write),
            write(NO_OP),
            read(0),
        ] {
            assert_eq!(Waiter::unpack(waiter.pack()), waiter);
        }
    }

    #[test]
    fn a_drained_spill_gives_its_memory_back() {
        let mut q = TestVar::default();
        q.append(write(0));
        for op in 1..1000 {
            q.append(request(op, Access::Write));
        }
        assert!(q.spill_capacity() >= 1000 - RING);
        for _ in 0..1000 {
            q.complete(Access::Write, |_| {});
        }
        assert!(q.is_idle());
        assert!(q.spill_capacity() <= KEEP_SPILL);
        // A small spill keeps its capacity: no reallocation in a steady state.
        q.append(write(0));
        for op in 1..40 {
            q.append(request(op, Access::Write));
        }
        let capacity = q.spill_capacity();
        for _ in 0..40 {
            q.complete(Access::Write, |_| {});
        }
        assert_eq!(q.spill_capacity(), capacity);
    }

    #[test]
    fn trim_drops_spare_capacity() {
        let mut q = TestVar::default();
        q.append(write(0));
        for op in 1..100 {
            q.append(request(op, Access::Write));
        }
        for _ in 0..100 {
            q.complete(Access::Write, |_| {});
        }
        assert!(q.is_idle());
        q.trim(4);
        assert!(q.spill_capacity() < 100);
    }

    /// A simple FIFO model of the same state machine, to check the ring + spill against.
    #[derive(Default)]
    struct Model {
        running_reads: u32,
        head_running: bool,
        queue: std::collections::VecDeque<(u32, Access)>,
    }

    impl Model {
        fn append(&mut self, op: u32, access: Access) -> Grant {
            match access {
                Access::Read if self.queue.is_empty() => {
                    self.running_reads += 1;
                    Grant::Granted
                }
                Access::Read => {
                    self.queue.push_back((op, access));
                    Grant::Queued
                }
                Access::Write => {
                    let ready = self.queue.is_empty() && self.running_reads == 0;
                    self.queue.push_back((op, access));
                    self.head_running |= ready;
                    if ready { Grant::Granted } else { Grant::Queued }
                }
            }
        }

        fn complete(&mut self, access: Access) -> Vec<u32> {
            let mut out = Vec::new();
            match access {
                Access::Read => {
                    self.running_reads -= 1;
                    if self.running_reads == 0
                        && let Some(&(op, _)) = self.queue.front()
                    {
                        self.head_running = true;
                        out.push(op);
                    }
                }
                Access::Write => {
                    self.queue.pop_front();
                    self.head_running = false;
                    while let Some(&(op, Access::Read)) = self.queue.front() {
                        self.queue.pop_front();
                        self.running_reads += 1;
                        out.push(op);
                    }
                    if self.running_reads == 0
                        && let Some(&(op, _)) = self.queue.front()
                    {
                        self.head_running = true;
                        out.push(op);
                    }
                }
            }
            out
        }
    }

    fn check_same(q: &TestVar, m: &Model) {
        assert_eq!(q.running_reads(), m.running_reads);
        assert_eq!(q.write_running(), m.head_running);
        let waiting: Vec<(u32, Access)> = q.waiting().map(|w| (w.op, w.access)).collect();
        let expected: Vec<(u32, Access)> = m
            .queue
            .iter()
            .copied()
            .skip(usize::from(m.head_running))
            .collect();
        assert_eq!(waiting, expected);
        assert_eq!(q.waiting_len(), expected.len());
        assert_eq!(q.is_idle(), m.running_reads == 0 && m.queue.is_empty());
    }

    /// Fill far past the ring with mixed reads and writes, drain, refill: same grants and
    /// releases as the plain FIFO model, in the same order.
    #[test]
    fn ring_spills_and_refills_in_fifo_order() {
        let mut q = TestVar::default();
        let mut m = Model::default();
        let mut op = 0u32;
        for round in 0..3 {
            // A write first so everything after it queues, then a mixed pattern well past RING.
            for i in 0..(4 * RING as u32 + round) {
                let access = if i % 3 == 0 || i % 7 == 5 {
                    Access::Write
                } else {
                    Access::Read
                };
                assert_eq!(q.append(request(op, access)), m.append(op, access));
                op += 1;
                check_same(&q, &m);
            }
            assert!(q.waiting_len() > RING, "the spill was used");
            // Drain: complete whatever runs until the var is idle.
            loop {
                let access = if m.head_running {
                    Access::Write
                } else if m.running_reads > 0 {
                    Access::Read
                } else {
                    break;
                };
                let (ok, out) = released(|r| q.complete(access, r));
                assert!(ok);
                assert_eq!(out, m.complete(access));
                check_same(&q, &m);
            }
            assert!(q.is_idle());
            assert!(!q.spilled());
        }
    }

    /// A run as long as `CREDITED_RUN` gets credits: its reads complete by taking them, and the
    /// write behind the run waits for the last; a shorter run counts in `running_reads`.
    #[test]
    fn a_long_run_of_reads_is_credited_and_a_short_one_counted() {
        for run in [CREDITED_RUN - 1, CREDITED_RUN] {
            let mut q = TestVar::default();
            assert_eq!(q.append(write(0)), Grant::Granted);
            for op in 1..=run {
                assert_eq!(q.append(read(op)), Grant::Queued);
            }
            assert_eq!(q.append(write(99)), Grant::Queued);
            let (_, out) = released(|r| q.complete_write(r));
            assert_eq!(out, (1..=run).collect::<Vec<_>>());
            assert_eq!(q.running_reads(), run);
            let credited = run >= CREDITED_RUN;
            assert_eq!(q.credits.left(), if credited { run } else { 0 });
            assert_eq!(q.queue.running_reads, if credited { 0 } else { run });
            for _ in 1..run {
                let (ok, out) = released(|r| q.complete_read(r));
                assert!(ok && out.is_empty(), "the write waits for the last read");
            }
            let (_, out) = released(|r| q.complete_read(r));
            assert_eq!(out, [99]);
            assert_eq!((q.running_reads(), q.credits.left()), (0, 0));
        }
    }

    #[test]
    fn granted_write_at_push_packs_no_op() {
        let mut q = TestVar::default();
        assert_eq!(q.append(write(NO_OP)), Grant::Granted);
        assert_eq!(q.front().map(|w| w.op), Some(NO_OP));
        let max = OP_MASK - 1;
        assert_eq!(q.append(read(max)), Grant::Queued);
        assert_eq!(q.waiting().collect::<Vec<_>>(), vec![read(max)]);
    }

    #[test]
    fn short_fifos_never_allocate_the_cold_part() {
        let mut q = TestVar::default();
        q.append(write(0));
        for op in 1..RING as u32 {
            q.append(request(op, Access::Read));
        }
        assert!(q.cold.is_none());
        q.append(read(99));
        assert!(q.cold.is_some() && q.spilled());
    }
}
