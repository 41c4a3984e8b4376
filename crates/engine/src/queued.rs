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
//! block's `threads`) only when the ops queued outnumber the drainers enlisted: a second
//! worker woken for a queue that one worker keeps empty only takes a core from the pushing
//! thread (the engine typically runs `threads` workers *and* a pusher), and on a machine with
//! as many cores as workers that halves the push rate. A drainer that finds the queue empty
//! spins on it for a few microseconds before retiring, if no other drainer is already
//! spinning: a pusher that is still pushing queues the next op within a few hundred
//! nanoseconds, and a drainer still enlisted takes it without a task spawn and a wake-up.
//!
//! The queue is bounded like the pool's own queues: while a submitting thread's last sample
//! of the queue length (see [`Sample`]) found `BACKLOG_PER_THREAD` ops per worker already
//! queued, its submits hand the op back, and the engine runs it on the submitting thread (as the pool ran a job inline when a worker's queue or its injector was full). This
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};

use crossbeam_deque::{Injector, Steal};
use depengine_cpu::WorkerBlock;
use depengine_graph::ReadyOp;

use crate::inner::Inner;
use crate::record::{BlockKey, OpRecord};

/// Queued ops per worker thread beyond which a submit hands its op back (the pool's default
/// per-worker queue capacity).
const BACKLOG_PER_THREAD: usize = 1024;

/// How many times a drainer that found the queue empty looks again before it retires.
const RETIRE_LOOKS: usize = 128;

/// Spin-loop hints between two looks (a few hundred nanoseconds): polling the queue's indices
/// back to back would keep pulling the line the submitter writes next.
const PAUSES_PER_LOOK: usize = 8;

/// A submitting thread reads the queue's length on one submit in this many (a power of two).
const SAMPLE_EVERY: u32 = 8;

thread_local! {
    /// Whether this thread runs an op handed back by a full queue; such a run never gets one
    /// handed back again (so a chain of them cannot grow the stack).
    static RUNNING_OVERFLOW: Cell<bool> = const { Cell::new(false) };
    /// Submits by this thread, for sampling the queue length.
    static SUBMITS: Cell<u32> = const { Cell::new(0) };
    /// Whether the last queue length this thread sampled was over its queue's backlog: its
    /// submits run their ops inline until the next sample says otherwise.
    static OVER_BACKLOG: Cell<bool> = const { Cell::new(false) };
}

/// Sampling of the queue length by submitting threads.
///
/// Reading the length reads the queue's head index, which every pop writes: a cache miss for
/// the submitter and, worse, a line the next pop must take back, so the drainers' pops miss
/// too (`perf annotate` of the `independent` workload put 45% of the drainer's time on the
/// head's `compare_exchange` while every submit read the length). One submit in
/// `SAMPLE_EVERY` per thread reads it; the backlog check and the second drainer's
/// enlistment act on that sample (the flag is per thread, shared by every queue the thread
/// submits to: it only steers how soon a busy queue stops growing).
struct Sample;

impl Sample {
    #[inline]
    fn next() -> bool {
        let submits = SUBMITS.get().wrapping_add(1);
        SUBMITS.set(submits);
        submits.is_multiple_of(SAMPLE_EVERY)
    }
}

pub(crate) struct QueuedBlock {
    block: WorkerBlock,
    /// `BACKLOG_PER_THREAD` times the block's threads.
    backlog: usize,
    ready: Injector<ReadyOp<OpRecord>>,
    /// Drainers enlisted (spawned or running, not retired); at most `block.num_threads()`.
    drainers: AtomicUsize,
    /// Whether a drainer spins on the empty queue before retiring (at most one does).
    spinning: AtomicBool,
}

impl QueuedBlock {
    pub(crate) fn new(block: WorkerBlock) -> Self {
        QueuedBlock {
            backlog: block.num_threads().saturating_mul(BACKLOG_PER_THREAD),
            block,
            ready: Injector::new(),
            drainers: AtomicUsize::new(0),
            spinning: AtomicBool::new(false),
        }
    }

    /// Queues a ready op and enlists a drainer if the queue needs one (see the module
    /// documentation); or, while the queue is over its backlog, runs the op on the calling
    /// thread.
    #[inline]
    pub(crate) fn submit(&self, inner: &Arc<Inner>, key: BlockKey, op: ReadyOp<OpRecord>) {
        let sample = Sample::next();
        let queued = sample.then(|| self.ready.len());
        if let Some(queued) = queued {
            OVER_BACKLOG.set(queued >= self.backlog);
        }
        if OVER_BACKLOG.get() && !RUNNING_OVERFLOW.get() {
            RUNNING_OVERFLOW.set(true);
            inner.execute(op);
            RUNNING_OVERFLOW.set(false);
            return;
        }
        self.ready.push(op);
        fence(Ordering::SeqCst);
        if self.wants_drainer(queued.map(|queued| queued + 1)) && self.try_enlist() {
            let inner = Arc::clone(inner);
            self.block.spawn(move || inner.drain(key));
        }
    }

    /// Whether a submit should enlist a drainer: always when none is enlisted (the guarantee
    /// that no op is stranded); another one only when this submit sampled the queue length
    /// (`queued`) and the ops queued outnumber the drainers enlisted, i.e. the enlisted ones
    /// cannot keep up. Waking a second worker for a queue that one worker keeps empty only
    /// takes a core from the pushing thread.
    #[inline]
    fn wants_drainer(&self, queued: Option<usize>) -> bool {
        let enlisted = self.drainers.load(Ordering::SeqCst);
        enlisted == 0
            || queued.is_some_and(|queued| enlisted < self.block.num_threads() && queued > enlisted)
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
    ///
    /// The first drainer to find the queue empty spins on it for a while before retiring
    /// (the others retire at once): a pusher that is still pushing usually queues the next op
    /// within a few hundred nanoseconds, and a drainer that is still enlisted takes it
    /// without a new task being spawned and a worker woken.
    pub(crate) fn retire(&self) -> bool {
        if !self.spinning.swap(true, Ordering::Acquire) {
            let mut found = false;
            for _ in 0..RETIRE_LOOKS {
                for _ in 0..PAUSES_PER_LOOK {
                    std::hint::spin_loop();
                }
                if !self.ready.is_empty() {
                    found = true;
                    break;
                }
            }
            self.spinning.store(false, Ordering::Release);
            if found {
                return true;
            }
        }
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
