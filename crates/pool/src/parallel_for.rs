//! `parallel_for`: split `0..n` into blocks sized from a per-item cost, run them on
//! the pool and on the calling thread, return when all are done.
//!
//! # Algorithm outline
//!
//! 1. **Block sizing** ([`BlockPlan`]). A block should cost at least
//!    [`TARGET_BLOCK_NS`], so that scheduling it (tens to hundreds of nanoseconds) is
//!    noise; there should be at most [`MAX_BLOCKS_PER_THREAD`] blocks per thread, so
//!    that the bookkeeping stays bounded while slow threads can still be compensated.
//!    Among the block sizes allowed by those two bounds, prefer one whose block count
//!    fills the threads evenly: `blocks / (ceil(blocks / threads) * threads)` is the
//!    fraction of thread time doing useful work in the last wave.
//! 2. **Dynamic claiming.** Blocks are not assigned: every participant (up to
//!    `threads` helper tasks, plus the caller) claims the next block index from one
//!    atomic counter until none remain. A caller that finds the workers asleep simply
//!    runs the blocks itself instead of waiting for them to wake up.
//! 3. **Waiting.** Each finished block counts a latch down; the caller waits on it
//!    (spinning briefly, then parked; a worker caller helps with other work first).
//!    Helpers that arrive after the last block was claimed find nothing and leave:
//!    the caller never waits for them, only for claimed blocks.

use crate::ThreadPool;
use crate::job::{JobRef, Panic};
use crate::latch::CountLatch;
use depengine_sync::{Arc, AtomicUsize, Mutex, lock};
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;

/// The cost a block should reach for its scheduling overhead to be negligible.
pub const TARGET_BLOCK_NS: f64 = 20_000.0;

/// The most blocks per thread a plan makes.
pub const MAX_BLOCKS_PER_THREAD: usize = 4;

/// How `0..n` is cut into blocks.
///
/// # Examples
///
/// ```
/// use depengine_pool::BlockPlan;
///
/// // 10 items of 1 ms each over 4 threads: 4 blocks, one per thread, the last one shorter.
/// let n = 10;
/// let plan = BlockPlan::new(n, 1e6, 4);
/// assert_eq!(plan, BlockPlan { block_size: 3, blocks: 4 });
/// let ranges: Vec<_> = (0..plan.blocks).map(|index| plan.block(index, n)).collect();
/// assert_eq!(ranges, [0..3, 3..6, 6..9, 9..10]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPlan {
    /// Items per block (the last block may be shorter).
    pub block_size: usize,
    /// Number of blocks: `ceil(n / block_size)`.
    pub blocks: usize,
}

impl BlockPlan {
    /// Plans `n` items costing about `cost_per_item_ns` each over `threads` threads.
    ///
    /// A cost that is not a positive number counts as zero: the work is trivial and
    /// runs as one block.
    ///
    /// ```
    /// use depengine_pool::BlockPlan;
    ///
    /// // Cheap items: one block, run inline.
    /// assert_eq!(BlockPlan::new(1000, 1.0, 4).blocks, 1);
    /// // Expensive items: one per block, a multiple of the thread count.
    /// assert_eq!(BlockPlan::new(4, 1e6, 2), BlockPlan { block_size: 1, blocks: 4 });
    /// ```
    pub fn new(n: usize, cost_per_item_ns: f64, threads: usize) -> Self {
        if n == 0 {
            return Self {
                block_size: 1,
                blocks: 0,
            };
        }
        let threads = threads.max(1);
        let cost = if cost_per_item_ns.is_finite() && cost_per_item_ns > 0.0 {
            cost_per_item_ns
        } else {
            0.0
        };
        // Smallest block that reaches the target cost (all of `n` if it never does).
        let min_by_cost = if cost == 0.0 {
            n
        } else {
            let items = (TARGET_BLOCK_NS / cost).ceil();
            if items >= n as f64 {
                n
            } else {
                // In range: `items` is positive (both operands are) and below `n`.
                #[expect(clippy::cast_sign_loss, reason = "items > 0")]
                let items = items as usize;
                items.max(1)
            }
        };
        let min_by_count = n.div_ceil(threads * MAX_BLOCKS_PER_THREAD);
        let smallest = min_by_cost.max(min_by_count);
        if threads == 1 || smallest >= n {
            return Self {
                block_size: n,
                blocks: 1,
            };
        }
        // Try coarser blocks (fewer of them) while that improves how evenly the last
        // wave fills the threads; stop once there would be fewer blocks than threads.
        let mut best = Self::with_size(n, smallest);
        let mut best_efficiency = efficiency(best.blocks, threads);
        let mut size = smallest;
        while best_efficiency < 1.0 {
            let blocks = n.div_ceil(size);
            // The next size that actually changes the block count.
            size = n.div_ceil(blocks - 1).max(size + 1);
            let candidate = Self::with_size(n, size);
            if candidate.blocks < threads {
                break;
            }
            let candidate_efficiency = efficiency(candidate.blocks, threads);
            if candidate_efficiency > best_efficiency {
                best = candidate;
                best_efficiency = candidate_efficiency;
            }
        }
        best
    }

    fn with_size(n: usize, block_size: usize) -> Self {
        Self {
            block_size,
            blocks: n.div_ceil(block_size),
        }
    }

    /// The items of block `index`.
    pub fn block(&self, index: usize, n: usize) -> Range<usize> {
        let start = index * self.block_size;
        start..(start + self.block_size).min(n)
    }
}

/// Fraction of thread time used in the waves needed to run `blocks` blocks.
fn efficiency(blocks: usize, threads: usize) -> f64 {
    blocks as f64 / (blocks.div_ceil(threads) * threads) as f64
}

/// The body, with its lifetime erased; see the SAFETY argument in `parallel_for`.
type Body<'a> = dyn Fn(Range<usize>) + Sync + 'a;

/// State shared by the caller and the helper tasks of one `parallel_for`.
struct Blocks {
    plan: BlockPlan,
    n: usize,
    next: AtomicUsize,
    finished: CountLatch,
    body: *const Body<'static>,
    panic: Mutex<Option<Panic>>,
}

// SAFETY: `body` points at a `Sync` closure, called through `&` only; the rest is
// atomics and a mutex.
unsafe impl Send for Blocks {}
// SAFETY: as above.
unsafe impl Sync for Blocks {}

impl Blocks {
    /// Claims and runs blocks until none are left.
    fn run(&self) {
        loop {
            // Relaxed: the counter only hands out distinct indices; the results are
            // published through the latch.
            let index = self.next.fetch_add(1, Relaxed);
            if index >= self.plan.blocks {
                return;
            }
            // SAFETY: a claimed index is below `blocks`, so `parallel_for` has not
            // returned (it waits for every claimed block) and the body is alive.
            let body = unsafe { &*self.body };
            let range = self.plan.block(index, self.n);
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| body(range))) {
                let mut first = lock(&self.panic);
                if first.is_none() {
                    *first = Some(payload);
                }
            }
            // SAFETY: `self` is in an `Arc` this helper holds, so the latch outlives the
            // call; each claimed block counts down once, and `finished` counts them all.
            unsafe { CountLatch::count_down(&raw const self.finished) };
        }
    }
}

impl ThreadPool {
    /// Calls `body` on blocks covering `0..n`, in parallel, and returns when all have
    /// run. `cost_per_item_ns` estimates one item's cost and sizes the blocks (see
    /// [`BlockPlan`]); cheap work runs inline as a single block.
    ///
    /// The caller runs blocks too. A panic in `body` resumes here, after every block
    /// has run.
    ///
    /// # Examples
    ///
    /// ```
    /// use depengine_pool::ThreadPool;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// let pool = ThreadPool::new(2).unwrap();
    /// let sum = AtomicU64::new(0);
    /// pool.parallel_for(1000, 1_000.0, |range| {
    ///     let part: u64 = range.map(|i| i as u64).sum();
    ///     sum.fetch_add(part, Ordering::Relaxed);
    /// });
    /// assert_eq!(sum.into_inner(), 999 * 1000 / 2);
    /// ```
    pub fn parallel_for<F>(&self, n: usize, cost_per_item_ns: f64, body: F)
    where
        F: Fn(Range<usize>) + Sync,
    {
        let plan = BlockPlan::new(n, cost_per_item_ns, self.num_threads());
        if plan.blocks <= 1 {
            if n > 0 {
                body(0..n);
            }
            return;
        }
        let body: &Body<'_> = &body;
        // Lifetime erasure: the pointer is dereferenced only by `Blocks::run` after
        // claiming a block index below `plan.blocks`, and we do not return until all
        // `plan.blocks` claimed blocks have finished (the latch below), so every
        // dereference happens while `body` is alive. Late helpers see an exhausted
        // counter and never touch it.
        // SAFETY: see above; only the lifetime changes, not the type or layout.
        let body = unsafe { std::mem::transmute::<&Body<'_>, &'static Body<'static>>(body) };
        let body: *const Body<'static> = body;
        let blocks = Arc::new(Blocks {
            plan,
            n,
            next: AtomicUsize::new(0),
            finished: CountLatch::new(plan.blocks),
            body,
            panic: Mutex::new(None),
        });
        let helpers = (plan.blocks - 1).min(self.num_threads());
        for _ in 0..helpers {
            let blocks = Arc::clone(&blocks);
            self.shared
                .inject_job(JobRef::boxed_static(move || blocks.run()));
        }
        blocks.run();
        match self.shared.current_index() {
            Some(index) => self.shared.wait_until(index, blocks.finished.latch()),
            None => blocks.finished.wait(),
        }
        if let Some(payload) = lock(&blocks.panic).take() {
            panic::resume_unwind(payload);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_every_item_exactly_once() {
        for n in [0, 1, 2, 3, 7, 64, 1000, 12_345] {
            for cost in [0.0, 1.0, 100.0, 5_000.0, 1e6, f64::NAN, -3.0] {
                for threads in 1..=8 {
                    let plan = BlockPlan::new(n, cost, threads);
                    let mut covered = 0;
                    for block in 0..plan.blocks {
                        let range = plan.block(block, n);
                        assert_eq!(range.start, covered, "n={n} cost={cost} t={threads}");
                        assert!(!range.is_empty());
                        covered = range.end;
                    }
                    assert_eq!(covered, n, "n={n} cost={cost} threads={threads}");
                    assert!(plan.blocks <= threads * MAX_BLOCKS_PER_THREAD || plan.blocks <= 1);
                }
            }
        }
    }

    #[test]
    fn cheap_work_is_one_block_and_costly_work_fills_threads() {
        assert_eq!(BlockPlan::new(1_000, 1.0, 4).blocks, 1);
        assert_eq!(BlockPlan::new(4, 1e6, 2).blocks, 4);
        // 10 expensive items on 4 threads: 10 blocks would leave a wave 50% idle;
        // blocks of 3 (4 blocks) fill all threads.
        let plan = BlockPlan::new(10, 1e6, 4);
        assert!(efficiency(plan.blocks, 4) > 0.999, "{plan:?}");
        // Each block reaches the target cost when the work allows it.
        let plan = BlockPlan::new(100_000, 100.0, 2);
        assert!(plan.block_size as f64 * 100.0 >= TARGET_BLOCK_NS);
    }
}
