//! [`QueuedBlock`]: a CPU worker block fed through an engine-side queue of ready ops.
//!
//! Handing each ready op to the pool as its own task cost an `Arc` clone of the engine state
//! (a cache line shared by the pusher and every worker) and a heap-allocated job per op (the
//! task closure, an `Arc` and a `ReadyOp`, is larger than the pool's inline job). Instead,
//! ready ops go (unboxed) into a lock-free MPMC queue, and up to `threads` *drainer* tasks,
//! each holding one `Arc` of the engine, pop and run them until the queue is empty. A submit
//! spawns a drainer only when fewer than `threads` are enlisted.
//!
//! The queue is bounded like the pool's own queues: a submit that finds `BACKLOG_PER_THREAD`
//! ops per worker already queued hands the op back, and the engine runs it on the submitting
//! thread (as the pool ran a job inline when a worker's queue or its injector was full). This
//! keeps a completion that releases a huge batch (or a pusher far ahead of the workers) from
//! queueing all of it before any of it runs.
//!
//! # No op is stranded
//!
//! A submitter pushes the op, issues a `SeqCst` fence, then reads `drainers`; a drainer that
//! found the queue empty decrements `drainers` (`SeqCst`), issues a `SeqCst` fence, then
//! re-checks the queue. By the fences' total order, either the submitter reads the decremented
//! count (and enlists a new drainer, or sees another one enlisted since, which checks the queue
//! after enlisting), or the drainer sees the op (and re-enlists itself, unless `threads`
//! drainers are enlisted again, each of which will drain the queue before retiring).

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering, fence};

use crossbeam_deque::{Injector, Steal};
use depengine_cpu::WorkerBlock;
use depengine_graph::ReadyOp;

use crate::inner::Inner;
use crate::record::{BlockKey, OpRecord};

/// Queued ops per worker thread beyond which a submit hands its op back (the pool's default
/// per-worker queue capacity).
const BACKLOG_PER_THREAD: usize = 1024;

thread_local! {
    /// Whether this thread runs an op handed back by a full queue; such a run never gets one
    /// handed back again (so a chain of them cannot grow the stack).
    static RUNNING_OVERFLOW: Cell<bool> = const { Cell::new(false) };
}

pub(crate) struct QueuedBlock {
    block: WorkerBlock,
    /// `BACKLOG_PER_THREAD` times the block's threads.
    backlog: usize,
    ready: Injector<ReadyOp<OpRecord>>,
    /// Drainers enlisted (spawned or running, not retired); at most `block.num_threads()`.
    drainers: AtomicUsize,
}

impl QueuedBlock {
    pub(crate) fn new(block: WorkerBlock) -> Self {
        QueuedBlock {
            backlog: block.num_threads().saturating_mul(BACKLOG_PER_THREAD),
            block,
            ready: Injector::new(),
            drainers: AtomicUsize::new(0),
        }
    }

    /// Queues a ready op and spawns a drainer (on the block) if fewer than its threads are
    /// enlisted; or, if the queue is full, runs the op on the calling thread.
    #[inline]
    pub(crate) fn submit(&self, inner: &Arc<Inner>, key: BlockKey, op: ReadyOp<OpRecord>) {
        if self.ready.len() >= self.backlog && !RUNNING_OVERFLOW.get() {
            RUNNING_OVERFLOW.set(true);
            inner.execute(op);
            RUNNING_OVERFLOW.set(false);
            return;
        }
        self.ready.push(op);
        fence(Ordering::SeqCst);
        if self.try_enlist() {
            let inner = Arc::clone(inner);
            self.block.spawn(move || inner.drain(key));
        }
    }

    /// The next queued op, if any.
    #[inline]
    pub(crate) fn pop(&self) -> Option<ReadyOp<OpRecord>> {
        loop {
            match self.ready.steal() {
                Steal::Success(op) => return Some(op),
                Steal::Empty => return None,
                Steal::Retry => std::hint::spin_loop(),
            }
        }
    }

    /// Called by a drainer that found the queue empty. `true`: the queue is not empty after
    /// all and the drainer stays enlisted; `false`: it retired.
    pub(crate) fn retire(&self) -> bool {
        self.drainers.fetch_sub(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.ready.is_empty() {
            return false;
        }
        self.try_enlist()
    }

    /// Enlists one more drainer unless the block's threads all are.
    fn try_enlist(&self) -> bool {
        let max = self.block.num_threads();
        let mut enlisted = self.drainers.load(Ordering::SeqCst);
        loop {
            if enlisted >= max {
                return false;
            }
            match self.drainers.compare_exchange_weak(
                enlisted,
                enlisted + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => enlisted = now,
            }
        }
    }
}
