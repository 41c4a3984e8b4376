//! [`RunningReads`]: the count of a var's granted reads that have not completed, which a read
//! completes without the var's lock.
//!
//! # Algorithm outline
//!
//! A read that completes usually has nothing to hand on: other reads of the var still run, or
//! nothing waits behind the reads. Only the *last* running read, and only when a write waits for
//! the reads to end (or the var was deleted and waits to be reclaimed), has work to do under
//! the var's lock: grant that write (transition 3 of `var_queue.rs`), or reclaim the var. So the
//! count lives beside the var's mutex, in one word with a `CALLED` bit, and:
//!
//! - a **lock holder** that grants a read adds one ([`grant`](RunningReads::grant));
//! - a **completing read** subtracts one, without the lock ([`complete`](RunningReads::complete)),
//!   and takes the lock only if it brought the count to zero with `CALLED` set;
//! - a **lock holder** whose write would start but for the running reads, or that deletes a
//!   var whose reads run, sets `CALLED` ([`call_last`](RunningReads::call_last)), asking the
//!   last of them to come back under the lock; the one that does clears it
//!   ([`answer`](RunningReads::answer)) and does the work.
//!
//! Only lock holders add to the count and set or clear `CALLED`; completing reads only subtract.
//! So under the lock the count can fall but never rise, and `CALLED` does not change.
//!
//! ```text
//!   31     30                              0
//! ┌────────┬───────────────────────────────┐
//! │ CALLED │  running reads                │
//! └────────┴───────────────────────────────┘
//! ```
//!
//! # Why no completion is lost
//!
//! The call and the last completion are read-modify-writes of one word, so one of them comes
//! first in its modification order:
//!
//! - the last completion first: `call_last`'s `fetch_or` reads a count of zero, so it knows that
//!   no read will answer; it takes the call back and the caller grants the write (or reclaims)
//!   itself, under the lock it holds;
//! - the call first: the completion that brings the count to zero reads `CALLED` and takes the
//!   lock. `CALLED` stays set until it answers, and a lock holder that finds it set treats the
//!   reads as running (`call_last` returns `true`), so the write stays queued for that answer.
//!   A read that completes under the lock (a launch, transition 5) answers at once.
//!
//! # Memory orderings
//!
//! A write granted after reads must not start before they ended: the reads' accesses to the
//! var's data must happen before the write's, and before a deleted var's data is given back.
//! Each completion subtracts with `Release`, and every read-modify-write of the word continues
//! the release sequences of those before it. Whoever finds the count at zero and goes on to
//! grant a write or reclaim the var does so after `call_last`, whose `Acquire` load (or
//! `Acquire` `fetch_or`, when the reads end between the two) reads the last completion or a
//! read-modify-write after it, and so takes in every read's end: the last read, called back,
//! answers and grants through the queue's `advance`, which calls `call_last`; a reclaim goes
//! through `idle_once_deleted` in `graph.rs`, which calls it too. The grant then hands the op
//! over with the graph's usual edges (the op slot's grant, the pool's queue).
//!
//! The models of `loom_tests.rs` that read the data on the reads' threads and write it where
//! the write starts (or in the deletion's callback) fail with each of these weakened to
//! `Relaxed`: the completion's `fetch_sub` (all four), `call_last`'s load
//! (`a_write_queued_behind_reads_is_granted_by_the_last_one`,
//! `a_write_pushed_as_the_last_read_completes_starts_after_it`,
//! `a_launched_completion_grants_a_write_as_the_last_read_ends`), and its `fetch_or` (the
//! last: a push calls twice, in `would_wait` and in `append`, and the second load orders it,
//! so only an advance shows it).
//!
//! `grant` is `Relaxed`: the read's op reaches its thread through the graph's hand-over, which
//! orders the increment before the read's own completion; the count itself publishes nothing.
//! `answer` and `is_zero` are `Relaxed` under the lock (`is_zero` follows a `call_last`), and
//! `running` and `holding` are snapshots for diagnostics.

use depengine_sync::{AtomicU32, Ordering};

/// The bit of a lock holder waiting for the last running read (see the module documentation).
const CALLED: u32 = 1 << 31;
/// The count of running reads.
const COUNT: u32 = CALLED - 1;

/// The granted, not yet completed reads of one var. See the module documentation, and the
/// unit test `only_the_last_called_read_locks` for the calls in order.
#[derive(Debug, Default)]
pub(crate) struct RunningReads(AtomicU32);

/// What a completing read left to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadDone {
    /// Other reads still run, or the last one ended with nothing waiting for it: nothing to do.
    Nothing,
    /// The last running read ended and a lock holder called it: take the var's lock and
    /// [`answer`](RunningReads::answer).
    LastCalled,
}

impl RunningReads {
    /// Counts a granted read (var lock held).
    #[inline]
    pub(crate) fn grant(&self) {
        let previous = self.0.fetch_add(1, Ordering::Relaxed);
        debug_assert!(previous & COUNT < COUNT, "running reads overflow");
    }

    /// Counts a granted read as completed (any thread, with or without the var's lock).
    #[inline]
    pub(crate) fn complete(&self) -> ReadDone {
        // Release: publishes this read's end to the lock holder that grants a write (or
        // reclaims the var) once the count is zero, through `call_last` (see the module
        // documentation).
        let previous = self.0.fetch_sub(1, Ordering::Release);
        debug_assert!(previous & COUNT != 0, "more completed reads than granted");
        if previous == CALLED | 1 {
            ReadDone::LastCalled
        } else {
            ReadDone::Nothing
        }
    }

    /// Whether reads run (var lock held); if so, the last of them comes back under the lock
    /// ([`ReadDone::LastCalled`]). `true` again until that read [`answer`](Self::answer)s,
    /// even once the count is zero: the read is then on its way to the lock.
    #[inline]
    pub(crate) fn call_last(&self) -> bool {
        // Acquire: a count of zero lets the caller grant a write, after the reads it read the
        // end of.
        let now = self.0.load(Ordering::Acquire);
        if now & CALLED != 0 {
            return true;
        }
        if now == 0 {
            return false;
        }
        self.call_while_running()
    }

    /// `call_last` once reads were seen running: sets `CALLED`, unless they ended meanwhile.
    #[cold]
    fn call_while_running(&self) -> bool {
        // Acquire, as `call_last`'s load: if the reads ended meanwhile, the caller grants.
        let previous = self.0.fetch_or(CALLED, Ordering::Acquire);
        if previous & COUNT != 0 {
            return true;
        }
        // No read saw the call (every completion came before it): nobody will answer.
        self.answer();
        false
    }

    /// Clears `CALLED`: the last read came back, or the call was taken back (var lock held).
    #[inline]
    pub(crate) fn answer(&self) {
        self.0.fetch_and(COUNT, Ordering::Relaxed);
    }

    /// No read runs and none was called (var lock held). `Relaxed`: a caller that acts on it
    /// (reclaims the var) called [`call_last`](Self::call_last) first, whose `Acquire` load
    /// ordered the reads' ends before.
    #[inline]
    pub(crate) fn is_zero(&self) -> bool {
        self.0.load(Ordering::Relaxed) == 0
    }

    /// How many reads run (a snapshot, for diagnostics).
    pub(crate) fn running(&self) -> u32 {
        self.0.load(Ordering::Relaxed) & COUNT
    }

    /// How many reads still hold the var (a snapshot, for diagnostics): the running ones, or
    /// the last one, called back and on its way to answer.
    pub(crate) fn holding(&self) -> u32 {
        match self.0.load(Ordering::Relaxed) {
            CALLED => 1,
            word => word & COUNT,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_called_read_locks() {
        let reads = RunningReads::default();
        assert!(!reads.call_last(), "no read runs");
        reads.grant();
        reads.grant();
        assert_eq!(reads.complete(), ReadDone::Nothing);
        assert!(reads.call_last());
        assert!(reads.call_last(), "a call stays until answered");
        assert_eq!(reads.running(), 1);
        assert_eq!(reads.complete(), ReadDone::LastCalled);
        assert!(reads.call_last(), "the last read is on its way");
        assert!(!reads.is_zero());
        reads.answer();
        assert!(reads.is_zero());
        assert!(!reads.call_last());
    }

    #[test]
    fn the_last_read_not_called_does_nothing() {
        let reads = RunningReads::default();
        reads.grant();
        assert_eq!(reads.complete(), ReadDone::Nothing);
        assert!(reads.is_zero());
    }
}
