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
//! The queue is bounded like the pool's own queues: while a submitting thread's last sample
//! of the queue length (see `Sample` in `ready_queue.rs`) found `BACKLOG_PER_THREAD` ops per
//! worker already queued, its submits hand the op back, and the engine runs it on the
//! submitting thread (as the pool ran a job inline when a worker's queue or its injector was
//! full). This keeps a completion that releases a huge batch (or a pusher far ahead of the
//! workers) from queueing all of it before any of it runs.
//!
//! # No op is stranded
//!
//! The queue-and-drainers protocol (push, fence, enlist; retire, fence, re-check) is
//! [`ReadyQueue`] in `ready_queue.rs`, generic over the item so that the loom models in
//! `loom_tests.rs` drive the same code; this block only spawns the drainers it asks for and
//! runs the ops it hands back.

use std::sync::Arc;

use depengine_cpu::WorkerBlock;
use depengine_graph::ReadyOp;

use crate::inner::Inner;
use crate::ready_queue::{ReadyQueue, Retire, Submit, run_overflow};
use crate::record::{BlockKey, OpRecord};

/// Queued ops per worker thread beyond which a submit hands its op back (the pool's default
/// per-worker queue capacity).
const BACKLOG_PER_THREAD: usize = 1024;

pub(crate) struct QueuedBlock {
    block: WorkerBlock,
    /// Drainers: at most `block.num_threads()`; backlog: `BACKLOG_PER_THREAD` times that.
    ready: ReadyQueue<ReadyOp<OpRecord>>,
}

impl QueuedBlock {
    pub(crate) fn new(block: WorkerBlock) -> Self {
        let threads = block.num_threads();
        QueuedBlock {
            ready: ReadyQueue::new(threads, threads.saturating_mul(BACKLOG_PER_THREAD)),
            block,
        }
    }

    /// Queues a ready op and spawns a drainer if the queue enlisted one (see the module
    /// documentation); or, while the queue is over its backlog, runs the op on the calling
    /// thread.
    #[inline]
    pub(crate) fn submit(&self, inner: &Arc<Inner>, key: BlockKey, op: ReadyOp<OpRecord>) {
        match self.ready.submit(op) {
            Submit::Queued { enlist: false } => {}
            Submit::Queued { enlist: true } => {
                let inner = Arc::clone(inner);
                self.block.spawn(move || inner.drain(key));
            }
            Submit::RunInline(op) => run_overflow(|| inner.execute(op)),
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
