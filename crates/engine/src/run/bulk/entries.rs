//! [`GraphEntries`]: on an engine that bulks, a count of the entries into its dependency graph,
//! which tells a pushing thread whether anything entered the graph since it pushed its open
//! segment.
//!
//! An op that joins a segment runs right after the ops already in it, as if pushed right after
//! them. That is where an op pushed alone would go only if nothing entered the graph meanwhile
//! on its vars: an op pushed by another thread (or by an op), a `wait_for_var`'s wait op, a
//! `delete_var`. Such an entry that happened before the join (through a channel, say: the user
//! can tell) must stay ahead of the joining op; so a join is refused once the count shows any
//! entry since the segment's own.
//!
//! # Protocol
//!
//! - Every entry into the graph (a push of any op, segments included, a wait op, a deletion)
//!   counts itself *after* it entered: [`entered`](GraphEntries::entered), `Release`.
//! - A thread about to push a segment reads the count *before* the push
//!   ([`before_segment`](GraphEntries::before_segment), `Acquire`); after the push it counts
//!   the segment's own entry. Ops may join while the count is that value plus one.
//! - A join reads the count ([`now`](GraphEntries::now), `Relaxed`) and compares.
//!
//! # Why an entry ordered after the segment is seen
//!
//! Let X be an entry that the graph orders after the segment S on some var (X's request is
//! behind S's in that var's queue), and whose push happens-before a join into S. X counts
//! itself after it entered, and the join happens after X's push returned, so X's count
//! happens-before the join's read, which therefore reads X's count or a later one (coherence).
//! It remains that X's count comes after the value S's pusher read before pushing S. Suppose it
//! did not: the read before S read X's count or a later count, which continues X's release
//! sequence (every count is a read-modify-write), so X's count happens-before that read
//! (`Release` → `Acquire`), and X's push happens-before S's. A push that happens-before another
//! on a var is ahead of it in the var's queue (a locked push leaves its request under the
//! var's lock; one through the var's ring is seen by the next lock holder's merge, or comes
//! earlier in the ring), which contradicts X being behind S. So the join reads at least two
//! counts past the value read before S (X's and S's own) and is refused.
//!
//! Without the `Acquire`/`Release` pair, the read before S could see X's count while S's push
//! misses X's request (S merging the var's ring before X's reservation becomes visible to it):
//! message passing through the count, with a stale read of the ring. The model
//! `a_join_is_refused_after_an_entry_behind_the_segment` (`loom_tests.rs`) checks the
//! protocol with the real graph.
//!
//! An entry concurrent with the join (no happens-before either way) may or may not be seen;
//! either answer is an order some unbulked run could have had. The count costs a pusher one
//! read-modify-write on a line all pushers of the engine write, on engines that bulk only.

use depengine_sync::{AtomicU64, CachePadded, Ordering};

/// The entries into one engine's graph, counted (see the module documentation).
///
/// Threads: every thread that pushes to the engine (ops, waits, deletions) counts; the thread
/// that pushes a segment reads the count before, and each join reads it.
pub(crate) struct GraphEntries {
    count: CachePadded<AtomicU64>,
}

impl GraphEntries {
    pub(crate) fn new() -> Self {
        GraphEntries {
            count: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// An entry into the graph, counted once it has entered.
    #[inline]
    pub(crate) fn entered(&self) {
        // Release: an `Acquire` read that sees this count (or a later one) happens-after this
        // entry (see the module documentation).
        self.count.fetch_add(1, Ordering::Release);
    }

    /// The count before a segment's push; ops may join the segment while the count is this
    /// plus one (its own entry).
    #[inline]
    pub(crate) fn before_segment(&self) -> u64 {
        // Acquire: see `entered`.
        self.count.load(Ordering::Acquire)
    }

    /// The count now, for a join to compare.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        // Relaxed: an entry whose push happens-before the join is seen by coherence; the
        // join reads no data through the count.
        self.count.load(Ordering::Relaxed)
    }
}
