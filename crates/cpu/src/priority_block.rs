//! [`PriorityBlock`]: a worker block that runs its tasks highest priority first.
//!
//! The threads are a [`ThreadPool`]'s (their queues, sleeping and shutdown are the pool's);
//! what the pool does not have is an order by priority, so the tasks wait in a
//! `Mutex<BinaryHeap>` (FIFO among equal priorities, by a sequence number) and each push hands
//! the pool a *token*: a pool task that pops the heap's highest-priority task and runs it.
//! There are never fewer tokens queued or running than tasks in the heap, so no task is
//! stranded; a token that finds the heap empty (a stand-in ran its task, see
//! [`PriorityBlock::run_queued`]) returns at once. Dropping the block runs every token, so
//! every accepted task runs before the threads are joined.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;

use depengine_device::{Executor, Task};
use depengine_pool::ThreadPool;
use depengine_sync::{Arc, Mutex, lock};

use crate::{BlockError, BlockOptions};

struct Entry {
    priority: i32,
    seq: u64,
    task: Task,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Max-heap order: higher priority first, then the older (smaller) sequence number.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The tasks waiting for a token, by priority.
///
/// Locked with [`depengine_sync::lock`], which ignores poisoning: no task runs under this lock
/// (a token pops an entry and releases the lock before running it), and each critical section
/// is a heap operation that leaves the heap consistent.
#[derive(Default)]
struct Heap {
    entries: BinaryHeap<Entry>,
    next_seq: u64,
}

impl Heap {
    /// Pops the highest-priority task and runs it on the calling thread; `false` if there was
    /// none. A panicking task must not take the thread (and the tasks behind it) down.
    fn run_one(heap: &Mutex<Heap>) -> bool {
        let Some(entry) = lock(heap).entries.pop() else {
            return false;
        };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(entry.task));
        true
    }
}

/// A worker block that runs the highest-priority task first (MXNet's
/// `ThreadWorkerBlock<kPriorityQueue>`), on a [`ThreadPool`] (see the module documentation).
///
/// # Examples
///
/// ```
/// use depengine_cpu::PriorityBlock;
/// use std::sync::mpsc;
///
/// let block = PriorityBlock::new("urgent", 1).expect("threads start");
/// let (tx, rx) = mpsc::channel();
/// block.push(10, Box::new(move || tx.send("ran").unwrap()));
/// assert_eq!(rx.recv().unwrap(), "ran");
/// ```
pub struct PriorityBlock {
    name: String,
    heap: Arc<Mutex<Heap>>,
    pool: ThreadPool,
}

impl PriorityBlock {
    /// Starts `threads` workers named `<name>-<i>`.
    ///
    /// # Errors
    ///
    /// [`BlockError::ZeroThreads`] for `threads == 0`, [`BlockError::TooManyThreads`] above
    /// [`depengine_pool::MAX_THREADS`] (the same bound as a worker block's),
    /// [`BlockError::Spawn`] if a thread could not start (the started ones are shut down).
    pub fn new(name: &str, threads: usize) -> Result<Self, BlockError> {
        Self::with_options(name, threads, BlockOptions::default())
    }

    /// As [`new`](Self::new), with `options` (hooks that give the workers per-thread state,
    /// pinning), as [`WorkerBlock::with_options`](crate::WorkerBlock::with_options) takes them.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn with_options(
        name: &str,
        threads: usize,
        options: BlockOptions,
    ) -> Result<Self, BlockError> {
        let pool = options
            .pool_builder(name, threads)?
            .build()
            .map_err(|error| BlockError::from_pool(name, error))?;
        Ok(PriorityBlock {
            name: name.to_owned(),
            heap: Arc::default(),
            pool,
        })
    }

    /// Queues `task`; workers run higher priorities first, equal priorities in push order.
    pub fn push(&self, priority: i32, task: Task) {
        let heap = self.queue(priority, task);
        self.pool.spawn(move || {
            Heap::run_one(&heap);
        });
    }

    /// As [`push`](Self::push), and, called by one of the block's workers whose slot for its
    /// next task is free, the token that runs the heap's top task waits there, for this worker
    /// to take as soon as its current task returns (`ThreadPool::spawn_next`): no other worker
    /// is woken for it. For a task released at the end of the current task, which this worker
    /// would take next anyway: a woken sleeper would find nothing to do, and its wake-up (a
    /// futex call, a few microseconds on this machine) would delay this worker.
    pub fn push_next(&self, priority: i32, task: Task) {
        let heap = self.queue(priority, task);
        self.pool.spawn_next(move || {
            Heap::run_one(&heap);
        });
    }

    /// Puts `task` in the heap; returns the heap for its token.
    fn queue(&self, priority: i32, task: Task) -> Arc<Mutex<Heap>> {
        {
            let mut heap = lock(&self.heap);
            let seq = heap.next_seq;
            heap.next_seq += 1;
            heap.entries.push(Entry {
                priority,
                seq,
                task,
            });
        }
        Arc::clone(&self.heap)
    }

    /// Whether the calling thread is one of this block's workers.
    ///
    /// ```
    /// use depengine_cpu::PriorityBlock;
    ///
    /// let block = PriorityBlock::new("copies", 1).unwrap();
    /// assert!(!block.is_current());
    /// ```
    #[inline]
    pub fn is_current(&self) -> bool {
        self.pool.current_thread_index().is_some()
    }

    /// Whether tasks are queued (not yet taken by a worker).
    pub fn has_queued(&self) -> bool {
        !lock(&self.heap).entries.is_empty()
    }

    /// Runs queued tasks on the calling thread, as a worker would (highest priority first, a
    /// panicking task caught), until none is left; returns how many ran. Lets a thread stand
    /// in for a worker that blocks inside a task while tasks it waits for are queued here.
    pub fn run_queued(&self) -> usize {
        let mut ran = 0;
        while Heap::run_one(&self.heap) {
            ran += 1;
        }
        ran
    }

    /// The number of worker threads.
    pub fn num_threads(&self) -> usize {
        self.pool.num_threads()
    }

    /// The block's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Queues the task by `priority` ([`PriorityBlock::push`]).
impl Executor for PriorityBlock {
    fn execute(&self, priority: i32, task: Task) {
        self.push(priority, task);
    }
}

impl fmt::Debug for PriorityBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityBlock")
            .field("name", &self.name)
            .field("threads", &self.num_threads())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::PriorityBlock;
    use crate::BlockError;
    use std::sync::mpsc;
    use std::sync::{Arc, Barrier, Mutex};

    /// The start hook runs on each worker before its first task: per-thread state that the
    /// tasks find (the CUDA backend's copy workers keep their streams so).
    #[test]
    fn each_worker_starts_with_its_hook() {
        thread_local! {
            static INDEX: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
        }
        let options = crate::BlockOptions {
            on_start: Some(Box::new(|index| INDEX.with(|cell| cell.set(Some(index))))),
            ..crate::BlockOptions::default()
        };
        let block = PriorityBlock::with_options("prio-hooks", 2, options).unwrap();
        let (tx, rx) = mpsc::channel();
        for priority in 0..8 {
            let tx = tx.clone();
            block.push(
                priority,
                Box::new(move || tx.send(INDEX.with(std::cell::Cell::get)).unwrap()),
            );
        }
        for _ in 0..8 {
            let index = rx.recv().unwrap().expect("the hook ran first");
            assert!(index < 2, "{index}");
        }
    }

    #[test]
    fn higher_priority_first_fifo_among_equals() {
        let block = PriorityBlock::new("prio-test", 1).unwrap();
        // Hold the only worker until every task is queued.
        let gate = Arc::new(Barrier::new(2));
        let held = Arc::clone(&gate);
        block.push(
            i32::MAX,
            Box::new(move || {
                held.wait();
            }),
        );
        let order = Arc::new(Mutex::new(Vec::new()));
        for (label, priority) in [(0, 1), (1, 5), (2, 1), (3, -3), (4, 5)] {
            let order = Arc::clone(&order);
            block.push(
                priority,
                Box::new(move || order.lock().unwrap().push(label)),
            );
        }
        gate.wait();
        drop(block);
        assert_eq!(*order.lock().unwrap(), [1, 4, 0, 2, 3]);
    }

    #[test]
    fn survives_a_panicking_task_and_drains_on_drop() {
        let block = PriorityBlock::new("prio-panic", 2).unwrap();
        assert_eq!(block.num_threads(), 2);
        block.push(0, Box::new(|| panic!("task panic (expected in this test)")));
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            block.push(i % 7, Box::new(move || tx.send(i).unwrap()));
        }
        drop(block);
        drop(tx);
        assert_eq!(rx.iter().count(), 100);
    }

    #[test]
    fn another_thread_can_run_the_queued_tasks() {
        let block = PriorityBlock::new("prio-stand-in", 1).unwrap();
        // The only worker blocks until a task queued behind it has run.
        let (ran_tx, ran_rx) = mpsc::channel::<()>();
        block.push(0, Box::new(move || ran_rx.recv().unwrap()));
        let order = Arc::new(Mutex::new(Vec::new()));
        for (label, priority) in [(0, 1), (1, 5)] {
            let order = Arc::clone(&order);
            block.push(
                priority,
                Box::new(move || order.lock().unwrap().push(label)),
            );
        }
        let ran_tx = Mutex::new(Some(ran_tx));
        block.push(-1, Box::new(move || drop(ran_tx.lock().unwrap().take())));
        // The worker may or may not have taken the first task yet; either way, this thread
        // runs what is queued, and the blocked task returns.
        while block.has_queued() {
            block.run_queued();
        }
        drop(block);
        assert_eq!(*order.lock().unwrap(), [1, 0]);
    }

    #[test]
    fn zero_threads_is_an_error() {
        assert!(matches!(
            PriorityBlock::new("zero", 0),
            Err(BlockError::ZeroThreads { .. })
        ));
    }

    #[test]
    fn more_than_max_threads_is_an_error() {
        let requested = depengine_pool::MAX_THREADS + 1;
        assert!(matches!(
            PriorityBlock::new("many", requested),
            Err(BlockError::TooManyThreads { requested: got, max, .. })
                if got == requested && max == depengine_pool::MAX_THREADS
        ));
    }
}
