//! [`QueuedBlock`]: a CPU worker block fed through an engine-side queue of ready ops.
//!
//! Handing each ready op to the pool as its own task cost an `Arc` clone of the engine state
//! (a cache line shared by the pusher and every worker) and a heap-allocated job per op (the
//! task closure, an `Arc` and a `ReadyOp`, is larger than the pool's inline job). Instead,
//! ready ops go (unboxed) into a lock-free MPMC queue, and up to `threads` *drainer* tasks,
//! each holding one `Arc` of the engine, pop and run them until the queue is empty.
//!
//! # How many drainers
//!
//! A submit that finds no drainer enlisted always enlists one. It enlists another (up to the
//! block's `threads`) when no enlisted drainer spins on the queue, i.e. every one of them is
//! running an op, which may be long: independent ops must run in parallel, not queue behind
//! it. A drainer that finds the queue empty spins on it for a few microseconds before
//! retiring, if no other drainer is already spinning: a pusher that is still pushing queues
//! the next op within a few hundred nanoseconds, and a drainer still enlisted takes it without
//! a task spawn and a wake-up. Submits made while a drainer spins count on it; so a spinner
//! that stays enlists a helper for each further op queued. A stream of small ops thus costs
//! about one drainer spawn per spin episode, not one per op.
//!
//! The queue is unbounded, as the graph's parked ops are: a submit never blocks and never runs
//! the op itself. (Until 2026-11-22 a submitter that sampled more than 1024 ops per worker
//! queued ran the op on its own thread, as the pool runs a job inline when its queues are
//! full. That broke the engine's contract: a sync op ran on the pushing thread, outside its
//! context's workers, and a pusher holding a lock that its ops take deadlocked.)
//!
//! # No op is stranded
//!
//! The queue-and-drainers protocol (push, fence, enlist; retire, fence, re-check) is
//! [`ReadyQueue`] in `ready_queue.rs`, generic over the item so that the loom models in
//! `loom_tests.rs` drive the same code; this block only spawns the drainers it asks for.

use std::sync::Arc;

use depengine_cpu::WorkerBlock;
use depengine_graph::ReadyOp;

use crate::inner::Inner;
use crate::ready_queue::{ReadyQueue, Retire};
use crate::record::{BlockKey, OpRecord};

pub(crate) struct QueuedBlock {
    block: WorkerBlock,
    /// Drainers: at most `block.num_threads()`.
    ready: ReadyQueue<ReadyOp<OpRecord>>,
}

impl QueuedBlock {
    pub(crate) fn new(block: WorkerBlock) -> Self {
        let threads = block.num_threads();
        QueuedBlock {
            ready: ReadyQueue::new(threads),
            block,
        }
    }

    /// Queues a ready op and spawns a drainer if the queue enlisted one (see the module
    /// documentation).
    #[inline]
    pub(crate) fn submit(&self, inner: &Arc<Inner>, key: BlockKey, op: ReadyOp<OpRecord>) {
        if self.ready.submit(op) {
            let inner = Arc::clone(inner);
            self.block.spawn(move || inner.drain(key));
        }
    }

    /// The next queued op, if any.
    #[inline]
    pub(crate) fn pop(&self) -> Option<ReadyOp<OpRecord>> {
        self.ready.pop()
    }

    /// Called by a drainer that found the queue empty. `true`: the queue is not empty after
    /// all and the drainer stays enlisted (having started the helper drainers the queue
    /// enlisted); `false`: it retired (see [`ReadyQueue::retire`]).
    pub(crate) fn retire(&self, inner: &Arc<Inner>, key: BlockKey) -> bool {
        match self.ready.retire() {
            Retire::Retired => false,
            Retire::Stay { helpers } => {
                for _ in 0..helpers {
                    let inner = Arc::clone(inner);
                    self.block.spawn(move || inner.drain(key));
                }
                true
            }
        }
    }
}
