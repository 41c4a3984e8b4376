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
//! The queue is bounded for its own drainers only: while a drainer's last sample of the queue
//! length (see `Sample` in `ready_queue.rs`) found `BACKLOG_PER_THREAD` ops per worker already
//! queued, the ops its completions release onto this block are handed back and it runs them
//! itself, as if it had popped them. Never nested: an op run that way queues what it
//! releases. Never from inside an op's function either (an async op's completion called
//! there queues): the function may hold a lock the released ops take. A completion that
//! releases a huge batch thus starts running it at once instead of first queueing all of it
//! (the `drain` workload: 2x faster). Any other submitter (the pushing thread, an async
//! completion on a foreign thread, a worker of another block) always queues: a sync op runs
//! only on its block's workers: a pusher far ahead that ran sync ops itself would deadlock
//! when it holds a lock that its ops take.
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

use crate::op::record::{BlockKey, OpRecord};
use crate::route::BlockEngine;
use crate::route::ready_queue::{ReadyQueue, Retire, Submit, run_overflow};
use crate::thread::frame::in_op_function;
use crate::thread::serving::Served;

/// Queued ops per worker thread beyond which a drainer's submit hands its op back (the pool's
/// default per-worker queue capacity).
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
    /// documentation); or, on a drainer of this block while the queue is over its backlog,
    /// runs the op on the calling thread.
    #[inline]
    pub(crate) fn submit<E: BlockEngine>(
        &self,
        inner: &Arc<E>,
        key: BlockKey,
        op: ReadyOp<OpRecord>,
    ) {
        // Not from inside an op's function (an async op's completion called there): the
        // function may hold a lock the handed-back op would take.
        let drainer = Served::by_this_thread(inner.engine_id()) == Some(Served::Queued(key))
            && !in_op_function();
        match self.ready.submit(op, drainer) {
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

    /// Whether ops are queued now (for a blocked worker's stand-in, `stand_in.rs`).
    pub(crate) fn has_queued(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Called by a drainer that found the queue empty. `true`: the queue is not empty after
    /// all and the drainer stays enlisted (having started the helper drainers the queue
    /// enlisted); `false`: it retired (see [`ReadyQueue::retire`]).
    pub(crate) fn retire<E: BlockEngine>(&self, inner: &Arc<E>, key: BlockKey) -> bool {
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
