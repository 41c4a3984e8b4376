//! [`ReadCredits`]: the reads of a var that may complete without the var's lock.
//!
//! # Algorithm outline
//!
//! A read that completes usually hands nothing on: other reads of the var still run. Taking the
//! var's lock for each such completion is what `drain` spends its time on: one write, then a run
//! of 10^6 reads that its completion grants at once, each of which locks the var to count itself
//! done. So when a run of `CREDITED_RUN` (8) reads or more is granted together (the queue's
//! `advance`, after a write completed or launched, or a launched op completed: transitions 4, 5
//! and 6 of `var_queue.rs`), the lock holder gives the var one *credit* per read, in an atomic
//! word outside the locked state (in the var's slab head), instead of counting them in
//! `running_reads`:
//!
//! - a **completing read** takes a credit if one is left ([`take`](ReadCredits::take), a
//!   compare-exchange, no lock) and is done, unless it took the *last* one: then it takes the lock
//!   and does what the last running read would (transition 3: grant the write waiting at the
//!   front, reclaim a deleted var), if no read is left in `running_reads` either;
//! - a completing read that finds no credit takes the lock and counts itself done in
//!   `running_reads`, as every read does without credits;
//! - a **lock holder** that needs to know whether reads run (a write about to be granted, a var
//!   about to be reclaimed) adds the credits left ([`left`](ReadCredits::left)) to
//!   `running_reads`.
//!
//! A read does not know whether it was given a credit: any completing read may take one. That is
//! harmless, because only the sum counts: each completion takes one from exactly one of the two
//! counts, so `running_reads + credits` is always the number of running reads. A read that finds
//! no credit finds `running_reads` at one or more: the credits only fall between grants, so if
//! none is left for it, it is still counted in `running_reads`.
//!
//! Reads granted at their push (transition 1), and shorter runs, get no credit: a push of a read
//! stays a plain increment under the lock, and only the reads of a long run complete without the
//! lock (in `drain`, 10^6 of them: one lock where there were 10^6). For a run of one or two, the
//! credits (an atomic add, and a compare-exchange per read) cost more than the locks they save;
//! `CREDITED_RUN` is the ring's length, 8 (`docs/decisions.md`, "Read credits, for runs of 8
//! reads or more"). Counted in an atomic word too, the reads granted at their push would cost
//! every push of a read an atomic add, and the pusher the readers' atomic subtracts on the line
//! it locks (`docs/decisions.md`, "No count of running reads outside the lock").
//!
//! # The write pushed behind a run
//!
//! A push looks at the credits once (`would_wait`, which forgets them once none is left) and
//! appends as it decided then: `append` reads only the queue's flag that credits may be left.
//! The last credit may be taken between the two; the write then waits, with the flag set and no
//! credit left, for the read that took the last one, which is on its way to the lock and grants
//! it there. (Read twice from the word, a push could decide to wait and then be granted at the
//! append, and park for a grant that never comes: the model
//! `a_write_pushed_as_the_last_credited_read_completes_starts_after_it` found that.)
//!
//! # Why no grant is lost
//!
//! A write waiting at the front needs the last running read to notice. Credits only rise under
//! the lock, and are taken in one modification order, so each time they fall to zero exactly
//! one completion took the last; it then takes the lock, after whichever lock holder came
//! before it:
//!
//! - the last credit taken, then a lock holder reads `left() == 0` and, with `running_reads` at
//!   zero, grants the write itself. The taker, locking later, finds nothing to do: the write
//!   granted, or even completed and the var deleted and reclaimed (a retired slot is marked so,
//!   so that it is not reclaimed twice), or the slot reused by another var, whose queue it then
//!   advances only as far as that var's own counts allow;
//! - a lock holder reads a credit left and leaves the write waiting; the taker of that credit
//!   then takes the lock after it, finds both counts at zero and grants it;
//! - a read that found no credit completes under the lock, as before: the last of those grants
//!   the write if no credit is left, and otherwise the last credit's taker does.
//!
//! # Memory orderings
//!
//! A write granted after reads must not start before they ended, and a deleted var's data must
//! not be given back before: the reads' accesses must happen before. A completion that takes a
//! credit does so with `Release`; every take is a read-modify-write, so the takes form one
//! release sequence. A lock holder that goes on to grant a write or reclaim the var loads the
//! credits with `Acquire` first ([`left`](ReadCredits::left)), reading the last take or a later
//! one, and so takes in every read's end. Reads that complete under the lock publish their ends
//! through it, as before. The loom models of `loom_tests.rs` that read the var's data on the
//! reads' threads and write it where the write starts (or in a deletion's callback) fail with
//! either weakened to `Relaxed`: `a_run_of_reads_completes_without_the_lock_then_grants_the_write`,
//! `a_write_pushed_as_the_last_credited_read_completes_starts_after_it` and
//! `a_deleted_var_is_reclaimed_after_its_last_credited_read`.
//!
//! [`give`](ReadCredits::give) is `Relaxed`: the reads it counts reach their threads through the
//! graph's hand-over (the op slot's grant, the pool's queue), which orders the add before their
//! takes; the credits themselves publish nothing.

use depengine_sync::{AtomicU32, Ordering};

/// The reads of one var, granted in a run, that have not completed and whose completion has not
/// taken a credit yet. See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct ReadCredits(AtomicU32);

/// What a completing read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Credit {
    /// It took a credit, and others are left: nothing to do.
    Taken,
    /// It took the last credit: take the var's lock and see whether the reads have ended.
    TookLast,
    /// No credit was left: count the read done under the var's lock.
    NoneLeft,
}

impl ReadCredits {
    /// Gives `reads` credits, for reads granted in a run (var lock held).
    #[inline]
    pub(crate) fn give(&self, reads: u32) {
        if reads > 0 {
            let before = self.0.fetch_add(reads, Ordering::Relaxed);
            debug_assert!(before.checked_add(reads).is_some(), "credits overflow");
        }
    }

    /// Takes a credit for a completing read (any thread, without the var's lock).
    #[inline]
    pub(crate) fn take(&self) -> Credit {
        // Release: publishes this read's end to the lock holder that reads the credits at zero
        // (`left`) before it grants a write or reclaims the var.
        let taken = self
            .0
            .fetch_update(Ordering::Release, Ordering::Relaxed, |left| {
                left.checked_sub(1)
            });
        match taken {
            Ok(1) => Credit::TookLast,
            Ok(_) => Credit::Taken,
            Err(_) => Credit::NoneLeft,
        }
    }

    /// Takes a credit under the var's lock, for a read that completes there (a launch, or a read
    /// that found no credit without the lock): `false` if none was left (the read is then
    /// counted in `running_reads`).
    pub(crate) fn take_locked(&self) -> bool {
        self.take() != Credit::NoneLeft
    }

    /// The credits left (var lock held): with `Acquire`, so that at zero the caller may grant a
    /// write, or reclaim the var, after the ends of the reads that took them.
    #[inline]
    pub(crate) fn left(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_last_credit_is_taken_once() {
        let credits = ReadCredits::default();
        assert_eq!(credits.take(), Credit::NoneLeft);
        credits.give(0);
        assert_eq!(credits.left(), 0);
        credits.give(3);
        assert_eq!(credits.take(), Credit::Taken);
        assert_eq!(credits.take(), Credit::Taken);
        assert_eq!(credits.left(), 1);
        assert_eq!(credits.take(), Credit::TookLast);
        assert_eq!(credits.take(), Credit::NoneLeft);
        credits.give(1);
        assert!(credits.take_locked());
        assert!(!credits.take_locked());
    }
}
