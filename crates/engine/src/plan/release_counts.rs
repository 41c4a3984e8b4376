//! [`ReleaseCounts`]: per op of a replay, how many of its dependencies are still to finish.
//!
//! Each finishing op counts down each dependent's counter; the one that takes a counter to zero
//! runs (or queues) that dependent. An op with a single dependency is released by it without a
//! count-down (`Edge::sole`): it then sees what that one wrote through the hand-over (the same
//! thread, or the pool's queue). Subtle: the count-down is `AcqRel`. Its release half
//! publishes what the finishing op wrote (the user's data, the failure it passes on); its
//! acquire half, on the read-modify-write that reaches zero, takes in every earlier count-down
//! of that counter (they form one release sequence), so the dependent sees what all its
//! dependencies wrote, whichever of them finished last. The loom model
//! `replay_dependent_sees_every_dependency` checks it, and fails with `Release` alone.
//! Each replay has counters of its own: nothing is reset, so two replays cannot race on one.

use depengine_sync::{AtomicU32, Ordering};

/// Per op, the dependencies still to finish (see the module documentation).
pub(crate) struct ReleaseCounts(Box<[AtomicU32]>);

impl ReleaseCounts {
    /// Counters starting at `counts`.
    pub(crate) fn new(counts: impl IntoIterator<Item = u32>) -> Self {
        ReleaseCounts(counts.into_iter().map(AtomicU32::new).collect())
    }

    /// One dependency of `op` finished; `true` when it was the last, and the caller releases
    /// `op`.
    #[inline]
    pub(crate) fn release(&self, op: u32) -> bool {
        self.release_many(op, 1)
    }

    /// `finished` dependencies of `op` finished (counted together, one write of the shared
    /// line instead of `finished`); `true` when they were the last.
    #[inline]
    pub(crate) fn release_many(&self, op: u32, finished: u32) -> bool {
        self.0[op as usize].fetch_sub(finished, Ordering::AcqRel) == finished
    }
}
