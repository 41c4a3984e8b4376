//! Bulk execution (MXNet's `MXNET_EXEC_BULK_EXEC_*`): consecutive sync ops that one thread
//! pushes run as one scheduled unit, a *segment*, with the dependency and failure semantics of
//! ops pushed alone ([`EngineConfig::bulk_size`](crate::EngineConfig::bulk_size)).
//!
//! # Outline
//!
//! - **A segment is in the graph from its first op on.** The first op of a segment is pushed
//!   as one graph op, on its own vars, whose function is the segment ([`OpFn::Segment`]): the
//!   list of its *members* ([`Segment`], `op/segment.rs`). The pushing thread keeps it as its
//!   open segment (`thread/open_segment.rs`).
//! - **Ops join while it is open.** A later op of the same thread is appended to the open
//!   segment's list instead of being pushed, when it may join (below). Nothing of it enters
//!   the graph: no var lock, no queueing, no wake-up, and one completion for the segment.
//! - **The runner runs the members appended so far, until none is left.** The thread that runs
//!   the segment (a worker of its block, or the thread that makes it ready on the naive engine)
//!   takes the members appended so far, runs them in push order, takes again, and closes the
//!   segment when it finds none (`runner.rs`). An op that finds its segment closed is pushed
//!   another way.
//!
//! # Why nothing hangs
//!
//! Every op is in the graph when its push returns: as a segment, or as a member of a segment
//! that is in the graph and has not closed, whose runner will take it (the lock argument in
//! `op/segment.rs`). So an op pushed with bulk execution runs whatever its thread does next:
//! nothing waits for a flush. A thread that pushes ops and then blocks on a channel that the
//! last of them fills is fine. That is the reason for this design over MXNet's, which keeps a
//! segment on its thread until a size limit, an op of another kind or a wait flushes it, and
//! hangs there. A timer could bound the wait but not remove it. The other price of a deferred
//! flush is cross-thread order: an op that another thread pushes after being told of an op
//! held back would enter the graph ahead of it.
//!
//! The price here is that the segment's vars are fixed by its first op: an op may join only on
//! those vars. Chains of dependent ops on the same vars bulk (in-place updates, the
//! `chain` benchmark); a chain that writes a new var at each step does not.
//!
//! # When an op joins
//!
//! An op joins its thread's open segment when all of these hold (anything else is pushed as
//! before, and ends the open segment; a sync op may start a new one):
//!
//! 1. It is a `push_sync` op with `FnProperty::Normal`, in the segment's context and with its
//!    priority (so it would run on the same block, with the same `RunContext`).
//! 2. The segment holds fewer than `bulk_size` ops.
//! 3. Its vars are vars of the segment (a written one written by the segment), none twice.
//! 4. It is in conflict with the segment's last op: it writes a var that op uses, or reads one
//!    that op writes. That op is in conflict with the one before it, and so on: pushed alone,
//!    the op would have waited for each op of the segment anyway.
//! 5. Nothing entered the engine's graph since the segment did (`entries.rs`): no op pushed by
//!    another thread or by an op, no wait, no deletion.
//! 6. The engine is not shut down, and the segment has not closed.
//!
//! # Why the semantics are those of ops pushed alone
//!
//! - **Order.** By 5, an op that joins is placed where its push would have placed it: right
//!   after the segment's ops, ahead of everything pushed later. By 4, within the segment every
//!   op depends on every earlier one (directly on the one before it, through it on the
//!   others): running them one after the other in push order is the only order the vars
//!   allow. Ops pushed later on the segment's vars wait for the whole
//!   segment, and the segment runs only when every var of its first op is available: ordering
//!   becomes stricter, never looser. (A later op waits for members it does not conflict with;
//!   an op of the segment that blocks waiting for such a later op, by means the engine does
//!   not see, would hang where ops pushed alone would not.)
//! - **Failures, per op** (the rules of the crate documentation). Each member is checked for
//!   failures on its own vars, in its own order, as `Graph::op_failure` checks an op: what the
//!   vars held when the segment became ready, updated by each earlier member that wrote them. A
//!   member whose vars hold a failure is skipped and passes it to the vars it writes; a member
//!   that fails stores its failure on the vars it writes, and later members that do not use
//!   them run. Each own failure goes to the failure log when it happens, and the vars of
//!   failed and skipped members after the segment completed, as for ops alone. The segment
//!   completes with each written var's last outcome (`Graph::complete_each`).
//! - **Each member is an op** to the profiler (a record under its own name, skipped ones
//!   included), to `tracing` (its own span) and to the checks of waits inside ops, with one
//!   difference: while a member runs, its thread holds the vars of the whole segment (a
//!   `wait_for_var` inside it on one of them is `WaitOnOwnVar`, and the deadlock check of a
//!   wait on another var counts them as held).
//!
//! # Cost
//!
//! With `bulk_size` below 2 the engine holds no [`Bulk`]: a push pays one branch on that
//! `Option` (`EngineState::push_record`). With bulk execution, every entry into the graph
//! counts itself (one read-modify-write), a join costs a look at the thread's state, a read
//! of the count and a short lock of the segment, and the runner takes the members a batch at a
//! time.

mod entries;
mod runner;

use std::sync::Arc;

use depengine_graph::Var;

use crate::context::FnProperty;
use crate::error::Result;
use crate::op::record::{OpFn, OpRecord, Route};
use crate::op::segment::{Member, MemberVars, Segment};
use crate::run::EngineState;
use crate::thread::open_segment::{self, JoinRequest, Joining, OpenSegment};

pub(crate) use entries::GraphEntries;

/// An engine's bulk execution: how many ops a segment may hold, and the count of entries into
/// the graph that joins compare.
///
/// Threads: every pushing thread.
pub(crate) struct Bulk {
    /// `EngineConfig::bulk_size`, at least 2.
    max_ops: usize,
    entries: GraphEntries,
}

impl Bulk {
    /// Bulk execution with segments of at most `bulk_size` ops; `None` below 2 (every op
    /// alone).
    pub(crate) fn new(bulk_size: usize) -> Option<Box<Self>> {
        (bulk_size >= 2).then(|| {
            Box::new(Bulk {
                max_ops: bulk_size,
                entries: GraphEntries::new(),
            })
        })
    }

    /// Counts an entry into the graph other than an op's push (a wait op, a deletion).
    pub(crate) fn entered(&self) {
        self.entries.entered();
    }
}

impl EngineState {
    /// `push_record` on an engine that bulks: the op joins the thread's open segment, starts a
    /// segment, or is pushed alone (see the module documentation).
    pub(super) fn push_bulked(
        self: &Arc<Self>,
        bulk: &Bulk,
        reads: &[Var],
        writes: &[Var],
        mut record: OpRecord,
    ) -> Result<()> {
        let bulkable = record.property == FnProperty::Normal
            && !record.context.is_gpu()
            && matches!(record.route, Route::Inline | Route::Pooled | Route::Cpu);
        let func = match record.func.take() {
            Some(OpFn::Sync(func)) if bulkable => func,
            other => {
                record.func = other;
                return self.push_after_segment(bulk, reads, writes, record, None);
            }
        };
        let op = Joining {
            name: record.name.clone(),
            func,
            profiled: record.profiled,
        };
        let joined = if self.pending.is_shut_down() {
            Err(op)
        } else {
            let request = JoinRequest {
                engine: self.id,
                context: record.context,
                priority: record.priority,
                reads,
                writes,
                entries_now: bulk.entries.now(),
            };
            open_segment::try_join(&request, op)
        };
        let Err(op) = joined else {
            return Ok(());
        };
        // An op on no var could be joined by none (rule 4); one on more vars than a member
        // holds goes alone.
        let first = (!reads.is_empty() || !writes.is_empty())
            .then(|| MemberVars::first(reads.len(), writes.len()))
            .flatten();
        let Some(vars) = first else {
            record.func = Some(OpFn::Sync(op.func));
            return self.push_after_segment(bulk, reads, writes, record, None);
        };
        let segment = Arc::new(Segment::new(Member {
            name: op.name,
            func: op.func,
            profiled: op.profiled,
            vars,
        }));
        record.func = Some(OpFn::Segment(Arc::clone(&segment)));
        // Recorded under its members' names, each as the profiler asks.
        record.profiled = false;
        self.push_after_segment(bulk, reads, writes, record, Some(segment))
    }

    /// Pushes `record`, an op alone or the first op of `segment`, in place of the thread's
    /// open segment of this engine: that one is taken before the push (which may run ops on
    /// this thread, which may push ops in turn), dropped once the push succeeded, and put back
    /// if it failed (a refused push enters nothing, so ops may still join it). The push
    /// counts its entry; a new segment becomes the thread's open one.
    fn push_after_segment(
        self: &Arc<Self>,
        bulk: &Bulk,
        reads: &[Var],
        writes: &[Var],
        record: OpRecord,
        segment: Option<Arc<Segment>>,
    ) -> Result<()> {
        let previous = open_segment::take(self.id);
        let (context, priority) = (record.context, record.priority);
        let before = bulk.entries.before_segment();
        if let Err(error) = self.push_one(reads, writes, record) {
            open_segment::restore(previous);
            return Err(error);
        }
        bulk.entries.entered();
        match segment {
            Some(segment) => open_segment::open(
                OpenSegment::new(
                    self.id,
                    segment,
                    context,
                    priority,
                    before + 1,
                    bulk.max_ops,
                    reads,
                    writes,
                ),
                previous,
            ),
            None => drop(previous),
        }
        Ok(())
    }
}
