//! [`PriorityBlock`]: dedicated threads serving one priority queue.
//!
//! Workers pop the highest-priority task (FIFO among equal priorities, by a sequence number)
//! from a `Mutex<BinaryHeap>` and sleep on a condvar when it is empty. Dropping the block lets
//! the workers drain the heap, then joins them: no accepted task is lost.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;

use depengine_device::{Executor, Task};
use depengine_pool::MAX_THREADS;
use depengine_sync::{Arc, Condvar, Mutex, lock, thread, wait};

use crate::BlockError;

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

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Entry>,
    next_seq: u64,
    done: bool,
}

#[derive(Default)]
struct Shared {
    /// Locked with [`depengine_sync::lock`], which ignores poisoning: no task runs under this
    /// lock (a worker pops an entry and releases the lock before running it), and each critical
    /// section is a heap operation or a flag write that leaves the queue consistent.
    queue: Mutex<Queue>,
    available: Condvar,
}

impl Shared {
    fn worker(&self) {
        let mut queue = lock(&self.queue);
        loop {
            if let Some(entry) = queue.heap.pop() {
                drop(queue);
                // A panicking task must not take the worker (and the tasks behind it) down.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(entry.task));
                queue = lock(&self.queue);
            } else if queue.done {
                return;
            } else {
                queue = wait(&self.available, queue);
            }
        }
    }
}

/// Threads serving one priority queue (MXNet's `ThreadWorkerBlock<kPriorityQueue>`).
pub struct PriorityBlock {
    name: String,
    shared: Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
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
        if threads == 0 {
            return Err(BlockError::ZeroThreads {
                name: name.to_owned(),
            });
        }
        if threads > MAX_THREADS {
            return Err(BlockError::TooManyThreads {
                name: name.to_owned(),
                requested: threads,
                max: MAX_THREADS,
            });
        }
        let mut block = PriorityBlock {
            name: name.to_owned(),
            shared: Arc::new(Shared::default()),
            threads: Vec::with_capacity(threads),
        };
        for index in 0..threads {
            let shared = Arc::clone(&block.shared);
            let spawned = thread::Builder::new()
                .name(format!("{name}-{index}"))
                .spawn(move || shared.worker());
            match spawned {
                Ok(handle) => block.threads.push(handle),
                Err(error) => {
                    return Err(BlockError::Spawn {
                        name: name.to_owned(),
                        message: error.to_string(),
                    });
                }
            }
        }
        Ok(block)
    }

    /// Queues `task`; workers run higher priorities first, equal priorities in push order.
    pub fn push(&self, priority: i32, task: Task) {
        let mut queue = lock(&self.shared.queue);
        let seq = queue.next_seq;
        queue.next_seq += 1;
        queue.heap.push(Entry {
            priority,
            seq,
            task,
        });
        drop(queue);
        self.shared.available.notify_one();
    }

    /// Whether tasks are queued (not yet taken by a worker).
    pub fn has_queued(&self) -> bool {
        !lock(&self.shared.queue).heap.is_empty()
    }

    /// Runs queued tasks on the calling thread, as a worker would (highest priority first, a
    /// panicking task caught), until none is left; returns how many ran. Lets a thread stand
    /// in for a worker that blocks inside a task while tasks it waits for are queued here.
    pub fn run_queued(&self) -> usize {
        let mut ran = 0;
        loop {
            let Some(entry) = lock(&self.shared.queue).heap.pop() else {
                return ran;
            };
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(entry.task));
            ran += 1;
        }
    }

    /// The number of worker threads.
    pub fn num_threads(&self) -> usize {
        self.threads.len()
    }

    /// The block's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for PriorityBlock {
    fn drop(&mut self) {
        lock(&self.shared.queue).done = true;
        self.shared.available.notify_all();
        let me = thread::current().id();
        for handle in self.threads.drain(..) {
            // Dropped by one of its own tasks: that worker exits once the task returns.
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
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
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::PriorityBlock;
    use crate::BlockError;
    use std::sync::mpsc;
    use std::sync::{Arc, Barrier, Mutex};

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
