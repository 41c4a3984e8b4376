//! `depengine-cpu`: where depengine runs ready CPU ops.
//!
//! This crate sits on `depengine-pool` (its worker blocks are pools) and on `depengine-device`,
//! whose [`Executor`] it implements for both of its blocks: the facade routes ready CPU ops to
//! them through that trait, as it routes GPU ops to the executors of a `DeviceBackend`
//! (`depengine-cuda`'s GPU workers are this crate's blocks, each worker with a stream of its own
//! given by the blocks' start hooks, [`BlockOptions`]). The crate graph: `docs/architecture.md`.
//!
//! - [`WorkerBlock`]: a block of CPU workers on a [`depengine_pool::ThreadPool`] (MXNet's
//!   `ThreadWorkerBlock<kWorkerQueue>`). Besides closures it carries values of an owner's item
//!   type unboxed (the facade's ready ops); a task or item submitted from one of the block's own
//!   workers goes to the front of that worker's queue, or into its next-task slot
//!   (`spawn_next`/`submit_next`: an op released by a completion runs next on the same core),
//!   and no task ever runs on the thread that submits it (but see `submit_or_run_with`). Start and
//!   exit hooks give the workers per-thread state.
//! - [`PriorityBlock`]: a pool whose tasks run highest priority first, FIFO among equals
//!   (MXNet's `ThreadWorkerBlock<kPriorityQueue>`, which serves `CpuPrioritized` ops): a heap of
//!   tasks, and a pool token per task that runs the heap's top one.
//!
//! This crate knows nothing of ops or vars: it runs closures, and items its owner defines.
//!
//! ```
//! use depengine_cpu::{PriorityBlock, WorkerBlock};
//! use depengine_device::Executor;
//! use std::sync::mpsc;
//!
//! let block = WorkerBlock::new("example", 2)?;
//! let (tx, rx) = mpsc::channel();
//! block.spawn(move || tx.send(6 * 7).unwrap());
//! assert_eq!(rx.recv().unwrap(), 42);
//!
//! let priority = PriorityBlock::new("example-prio", 1)?;
//! let (tx, rx) = mpsc::channel();
//! priority.execute(10, Box::new(move || tx.send("ran").unwrap()));
//! assert_eq!(rx.recv().unwrap(), "ran");
//! # Ok::<(), depengine_cpu::BlockError>(())
//! ```
//!
//! [`Executor`]: depengine_device::Executor

#![forbid(unsafe_code)]
#![allow(
    clippy::doc_markdown,
    reason = "the docs name MXNet and its classes, which are not items of this crate"
)]

mod priority_block;
mod worker_block;

pub use priority_block::PriorityBlock;
pub use worker_block::{BlockOptions, WorkerBlock, WorkerHook};

/// Why a block of workers could not start.
///
/// # Examples
///
/// ```
/// use depengine_cpu::{BlockError, WorkerBlock};
///
/// match WorkerBlock::new("empty", 0) {
///     Err(BlockError::ZeroThreads { name }) => assert_eq!(name, "empty"),
///     other => panic!("expected ZeroThreads, got {other:?}"),
/// }
/// // Too many threads fails before any thread starts, and names the block.
/// let error = WorkerBlock::new("huge", depengine_pool::MAX_THREADS + 1).unwrap_err();
/// assert!(matches!(error, BlockError::TooManyThreads { ref name, .. } if name == "huge"));
/// assert!(error.to_string().starts_with("worker block `huge` has at most"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// A block needs at least one thread.
    #[error("worker block `{name}` needs at least one thread")]
    ZeroThreads {
        /// The block's name.
        name: String,
    },
    /// More threads than a block may have ([`depengine_pool::MAX_THREADS`]).
    #[error("worker block `{name}` has at most {max} threads, {requested} were requested")]
    TooManyThreads {
        /// The block's name.
        name: String,
        /// The thread count asked for.
        requested: usize,
        /// [`depengine_pool::MAX_THREADS`].
        max: usize,
    },
    /// The operating system refused to start a thread.
    #[error("worker block `{name}` could not start a thread: {message}")]
    Spawn {
        /// The block's name.
        name: String,
        /// The operating system's (or the pool's) error.
        message: String,
    },
}

impl BlockError {
    /// The error of block `name` whose pool could not start.
    pub(crate) fn from_pool(name: &str, error: depengine_pool::BuildError) -> Self {
        match error {
            depengine_pool::BuildError::TooManyThreads { requested, max } => {
                BlockError::TooManyThreads {
                    name: name.to_owned(),
                    requested,
                    max,
                }
            }
            other => BlockError::Spawn {
                name: name.to_owned(),
                message: other.to_string(),
            },
        }
    }
}
