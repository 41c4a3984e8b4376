//! [`Launches`]: a replay's sync GPU ops that release each other at their launch, as pushed
//! ones do (`run/device.rs`): the fence each launch reported, and per op a join of its own part
//! (its device work done, or its skip) with the predecessors it was released behind.
//!
//! A sync GPU op behind another (`Edge::at_launch`) is released when that one's work was
//! launched, and its work is ordered behind that one's fence on the device; but it is finished
//! (its dependents released, the replay counting it) only once those predecessors are finished
//! too, so that a failure their device reports reaches it as it would have skipped it, and no
//! op behind it sees its vars before the work it was ordered behind is done. Whichever comes
//! last, its own part or its last predecessor's finish, finishes it: a counter per op starts at
//! its predecessors along such edges plus one, and the thread that takes it to zero finishes
//! the op with the part held for it.
//!
//! A failure that a predecessor which launched passes on is kept here
//! ([`pass_on`](Launches::pass_on)), not in the op's failure slot: the op may have run, and its
//! own failure, if it has one, wins, as a pushed op's does; released after it, the op skips on
//! it (`run/replay/device.rs`).
//!
//! Subtle: a predecessor passes its failure on before it counts the join down, and the own
//! part is stored before its count-down; the count-down is `AcqRel` (`ReleaseCounts`, whose
//! loom model `replay_dependent_sees_every_dependency` checks it), so the finisher sees both.

use depengine_device::{Fence, Fences};
use depengine_sync::{Mutex, OnceLock, lock};

use crate::failure::OpFailure;
use crate::plan::release_counts::ReleaseCounts;

/// A replay's launches (see the module documentation), holding parts of type `P`.
pub(crate) struct Launches<P> {
    /// Per op, the fence its launch reported.
    fences: Box<[OnceLock<Fence>]>,
    /// Per op, its predecessors along at-launch edges not finished, plus its own part.
    joins: ReleaseCounts,
    /// Per op, its own part, done while a predecessor is not finished.
    parts: Box<[Mutex<Option<Box<P>>>]>,
    /// Per op, the failure a predecessor that released it at its launch passed on.
    passed_on: Box<[OnceLock<OpFailure>]>,
}

impl<P> Launches<P> {
    /// The launches of a replay whose ops have `preds` (`PlanDeps::launch_preds`).
    pub(crate) fn new(preds: &[Box<[u32]>]) -> Self {
        let joins = preds
            .iter()
            .map(|list| u32::try_from(list.len()).map_or(u32::MAX, |n| n.saturating_add(1)));
        Launches {
            fences: preds.iter().map(|_| OnceLock::new()).collect(),
            joins: ReleaseCounts::new(joins),
            parts: preds.iter().map(|_| Mutex::new(None)).collect(),
            passed_on: preds.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    /// `op`'s work was launched, behind `fence`.
    pub(crate) fn launched(&self, op: u32, fence: Fence) {
        let _ = self.fences[op as usize].set(fence);
    }

    /// The fences of `preds` (an op's predecessors along at-launch edges) that launched: what
    /// its work waits for; inline for a few (no allocation per op of a chain).
    pub(crate) fn fences_of(&self, preds: &[u32]) -> Fences {
        preds
            .iter()
            .filter_map(|&pred| self.fences[pred as usize].get().cloned())
            .collect()
    }

    /// `op`'s own part is done, and held: `true` when the caller finishes the op now (its
    /// predecessors are finished, [`take_part`](Self::take_part)), `false` when the last of
    /// them will.
    pub(crate) fn own_done(&self, op: u32, part: P) -> bool {
        *lock(&self.parts[op as usize]) = Some(Box::new(part));
        self.joins.release(op)
    }

    /// A predecessor that released `op` at its launch failed: `failure` is `op`'s unless it
    /// has one of its own (the first passed on is kept).
    pub(crate) fn pass_on(&self, op: u32, failure: &OpFailure) {
        let _ = self.passed_on[op as usize].set(failure.clone());
    }

    /// The failure passed on to `op` along an at-launch edge, if any.
    pub(crate) fn passed_on(&self, op: u32) -> Option<&OpFailure> {
        self.passed_on[op as usize].get()
    }

    /// A predecessor of `op` along an at-launch edge finished (after passing its failure on):
    /// `true` when the caller finishes `op` now.
    pub(crate) fn upstream_done(&self, op: u32) -> bool {
        self.joins.release(op)
    }

    /// `op`'s part, held by [`own_done`](Self::own_done), for the thread that finishes it.
    pub(crate) fn take_part(&self, op: u32) -> Option<P> {
        lock(&self.parts[op as usize]).take().map(|part| *part)
    }
}
