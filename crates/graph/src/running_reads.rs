//! The count of a var's running reads, split so that a read completes without the var's lock:
//! [`ReadCount`], the reads granted, kept by the lock holders under the var's mutex, and
//! [`ReadsDone`], the reads completed, an atomic word on a line of its own.
//!
//! # Algorithm outline
//!
//! A read that completes usually has nothing to hand on: other reads of the var still run, or
//! nothing waits behind the reads. Only the *last* running read, and only when a write waits for
//! the reads to end (or the var was deleted and waits to be reclaimed), has work to do under the
//! var's lock: grant that write (transition 3 of `var_queue.rs`), or reclaim the var. So:
//!
//! - a **lock holder** that grants a read adds one to `granted`, a plain count under the lock
//!   ([`ReadCount::grant`]): a push of a read costs no atomic instruction and no other line;
//! - a **completing read** adds one to the `done` word, without the lock
//!   ([`ReadsDone::complete`]); that word has a line of its own, so a completion does not take
//!   the var's locked line away from a pusher in the middle of its critical section;
//! - a **lock holder** whose write would start but for the running reads, or that deletes a var
//!   whose reads run, *calls* the last read back ([`ReadCount::call_last`]): it adds
//!   `2^32 - granted` to `done`, so that the completion that ends the last running read brings
//!   the word to exactly zero, past `u32::MAX`. Only that completion reads `u32::MAX` before
//!   its own add: it takes the lock and [answers](ReadCount::answer), granting the write or
//!   reclaiming the var.
//!
//! ```text
//!  not called:   done = completed                     (completed <= granted < 2^30)
//!  called:       done = 2^32 - running                (running = granted - completed >= 1)
//!  last completion reads 2^32 - 1, leaves 0 = the count settled at zero
//! ```
//!
//! While nothing is called, `done` only counts, and `granted - done` is the number of running
//! reads. Whenever a lock holder finds every granted read completed (`call_last`'s add reads
//! `done == granted`), the add itself leaves the word at zero and `granted` is set to zero: the
//! count is *settled*, and a var that is only written never touches `done` (`granted` stays 0).
//! The `CALLED` bit of `granted` says that a call waits for its answer.
//!
//! # Why no completion is lost
//!
//! The call and each completion are read-modify-writes of one word, so they are ordered:
//!
//! - every completion first: the call's add reads `done == granted`, knows that no read will
//!   answer, and the caller grants the write (or reclaims) itself, under the lock it holds;
//! - the call first: the completions after it count up from `2^32 - running`, and exactly one,
//!   the last, reads `u32::MAX`. Until it answers, `CALLED` stays set, and a lock holder that finds
//!   it set treats the reads as running (`call_last` returns `true`): the write stays queued for
//!   that answer (a push asks twice, in `would_wait` and in `append`, and both must agree).
//!
//! Reads are granted only while nothing is called (a called var has a write waiting at its front,
//! and reads queue behind it), so `granted` does not move while the word counts towards zero.
//!
//! # Memory orderings
//!
//! A write granted after reads must not start before they ended: the reads' accesses to the
//! var's data must happen before the write's, and before a deleted var's data is given back.
//! Each completion adds with `Release`, and every read-modify-write of the word continues the
//! release sequences of those before it. Whoever finds the reads ended and goes on to grant a
//! write or reclaim the var reads the word with `Acquire` first, taking in every read's end: the
//! call's add (`Acquire`), or, for the last completion, its own add (`AcqRel`), after which it
//! answers and grants without looking at the word again. The grant then hands the op over with
//! the graph's usual edges (the op slot's grant, the pool's queue).
//!
//! The loom models of `loom_tests.rs` that read the data on the reads' threads and write it where
//! the write starts (or in the deletion's callback) fail with either weakened: the completion's
//! `Acquire` half (`a_write_queued_behind_reads_is_granted_by_the_last_one`) and the call's
//! `Acquire` (`a_write_pushed_as_the_last_read_completes_starts_after_it`).
//!
//! The rest is `Relaxed`: the rebase in `grant` (an add that keeps the release sequences going;
//! only lock holders do it, while nothing is called), and the loads of `running` and `is_idle`,
//! which are snapshots for diagnostics, or follow a `call_last` that settled the count.

use depengine_sync::{AtomicU32, Ordering};

/// The bit of `ReadCount` that says a call waits for its answer.
const CALLED: u32 = 1 << 31;

/// `granted` at which `grant` subtracts the reads completed so far from both counts, so that a
/// var read forever without a write (never settled) keeps `done` below `2^30` outside a call,
/// far from `u32::MAX`. Low in unit tests, so that they reach it.
const REBASE_AT: u32 = if cfg!(all(test, not(loom))) {
    64
} else {
    1 << 30
};

/// The reads of a var that completed: an atomic word, beside the var's mutex on a line of its
/// own (aligned to a line here, so the var slot, itself aligned to lines, gives it one). See the
/// module documentation.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct ReadsDone(AtomicU32);

/// What a completing read left to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadDone {
    /// Other reads still run, or the reads ended with nothing waiting for them: nothing to do.
    Nothing,
    /// This was the last running read and a lock holder called it back: take the var's lock
    /// and [`answer`](ReadCount::answer).
    LastCalled,
}

impl ReadsDone {
    /// Counts a granted read completed (any thread, with or without the var's lock).
    #[inline]
    pub(crate) fn complete(&self) -> ReadDone {
        // AcqRel: Release publishes this read's end; Acquire takes in the others', for the
        // write that the last one grants (see the module documentation).
        if self.0.fetch_add(1, Ordering::AcqRel) == u32::MAX {
            ReadDone::LastCalled
        } else {
            ReadDone::Nothing
        }
    }
}

/// The reads of a var that were granted since the count was last settled, and whether the last
/// of them was called back: under the var's lock, beside the FIFO. See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ReadCount(u32);

impl ReadCount {
    fn granted(self) -> u32 {
        self.0 & !CALLED
    }

    /// A call waits for the last read's answer: no read may be granted until it comes.
    pub(crate) fn called(self) -> bool {
        self.0 & CALLED != 0
    }

    /// Counts a granted read (lock held, nothing called).
    #[inline]
    pub(crate) fn grant(&mut self, done: &ReadsDone) {
        debug_assert!(!self.called(), "a read granted while a call waits");
        self.0 += 1;
        if self.0 >= REBASE_AT {
            self.rebase(done);
        }
    }

    /// Subtracts the reads completed so far from both counts (lock held, nothing called):
    /// `granted - done` stays the number of running reads.
    #[cold]
    fn rebase(&mut self, done: &ReadsDone) {
        let completed = done.0.load(Ordering::Relaxed);
        done.0.fetch_sub(completed, Ordering::Relaxed);
        self.0 -= completed;
    }

    /// Whether reads run (lock held); if they do, the last of them is called back
    /// ([`ReadDone::LastCalled`]). `true` again until that read [`answer`](Self::answer)s, even
    /// once every read completed: the last is then on its way to the lock. `false` settles the
    /// count at zero.
    #[inline]
    pub(crate) fn call_last(&mut self, done: &ReadsDone) -> bool {
        if self.called() {
            return true;
        }
        if self.0 == 0 {
            return false;
        }
        self.call(done)
    }

    /// `call_last` with reads granted since the count was settled.
    fn call(&mut self, done: &ReadsDone) -> bool {
        let granted = self.0;
        // Acquire: if every read completed, the caller grants (or reclaims) next, after them.
        let completed = done.0.fetch_add(granted.wrapping_neg(), Ordering::Acquire);
        if completed == granted {
            // No read saw the call; the add left the word at zero: settled.
            self.0 = 0;
            return false;
        }
        self.0 |= CALLED;
        true
    }

    /// The last read came back under the lock (it read `u32::MAX`, leaving the word at zero):
    /// the call is answered and the count settled at zero.
    #[inline]
    pub(crate) fn answer(&mut self) {
        debug_assert!(self.called(), "an answer without a call");
        self.0 = 0;
    }

    /// How many reads run (lock held; a snapshot, for diagnostics).
    pub(crate) fn running(self, done: &ReadsDone) -> u32 {
        let word = done.0.load(Ordering::Relaxed);
        if self.called() {
            // 2^32 - running, or 0 once the last one completed.
            word.wrapping_neg()
        } else {
            self.granted().wrapping_sub(word)
        }
    }

    /// How many reads still hold the var (lock held; a snapshot, for diagnostics): the running
    /// ones, or the last one, called back and on its way to answer.
    pub(crate) fn holding(self, done: &ReadsDone) -> u32 {
        match self.running(done) {
            0 if self.called() => 1,
            running => running,
        }
    }

    /// No read runs and none is called (lock held). Exact after a `call_last` that returned
    /// `false` (the count is then settled); otherwise a snapshot.
    pub(crate) fn is_idle(self, done: &ReadsDone) -> bool {
        !self.called() && self.running(done) == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_called_read_answers() {
        let done = ReadsDone::default();
        let mut count = ReadCount::default();
        assert!(!count.call_last(&done), "no read runs");
        count.grant(&done);
        count.grant(&done);
        count.grant(&done);
        assert_eq!(done.complete(), ReadDone::Nothing);
        assert_eq!(count.running(&done), 2);
        assert!(count.call_last(&done));
        assert!(count.call_last(&done), "a call stays until answered");
        assert_eq!(count.running(&done), 2);
        assert_eq!(done.complete(), ReadDone::Nothing);
        assert_eq!(count.holding(&done), 1);
        assert_eq!(done.complete(), ReadDone::LastCalled);
        assert!(count.call_last(&done), "the last read is on its way");
        assert_eq!((count.running(&done), count.holding(&done)), (0, 1));
        assert!(!count.is_idle(&done));
        count.answer();
        assert!(count.is_idle(&done));
        assert!(!count.call_last(&done));
    }

    #[test]
    fn a_call_after_the_last_completion_settles_the_count() {
        let done = ReadsDone::default();
        let mut count = ReadCount::default();
        count.grant(&done);
        count.grant(&done);
        assert_eq!(done.complete(), ReadDone::Nothing);
        assert_eq!(done.complete(), ReadDone::Nothing);
        assert!(count.is_idle(&done));
        assert!(!count.call_last(&done));
        assert_eq!((count.0, done.0.load(Ordering::Relaxed)), (0, 0), "settled");
    }

    #[test]
    fn reads_granted_past_the_rebase_still_count() {
        let done = ReadsDone::default();
        let mut count = ReadCount::default();
        for round in 0..(3 * REBASE_AT) {
            count.grant(&done);
            if round % 2 == 1 {
                assert_eq!(done.complete(), ReadDone::Nothing);
                assert_eq!(done.complete(), ReadDone::Nothing);
            }
            assert!(count.0 < REBASE_AT);
        }
        assert_eq!(count.running(&done), 0);
        count.grant(&done);
        assert!(count.call_last(&done));
        assert_eq!(done.complete(), ReadDone::LastCalled);
        count.answer();
        assert!(count.is_idle(&done));
    }
}
