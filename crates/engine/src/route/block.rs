//! Starting a CPU worker block whose threads run the engine's ops.
//!
//! A block's ops are queued in its pool once, unboxed, as [`BlockOp`] items: the op alone, whose
//! record names its block (`EngineState::dispatch`); each worker runs them with the [`BlockRunner`] its start hook
//! gave it (see `thread/serving.rs`). The pool does the rest: per-worker queues, the injector for ops
//! from other threads, stealing, one spinning worker, sleeping on its event count, and the
//! released successor kept for the worker that released it (`ThreadPool::spawn_next`).

use std::sync::Arc;
use std::time::Duration;

use depengine_cpu::{BlockOptions, WorkerBlock};
use depengine_graph::ReadyOp;
use depengine_pool::Item;

use crate::error::{EngineError, Result};
use crate::op::record::{BlockKey, OpRecord};
use crate::thread::serving::{self, BlockRunner};

/// A CPU worker block of the engine: its pool queues the block's ready ops.
pub(crate) type CpuBlock = WorkerBlock<BlockOp>;

/// Whether a block's workers are pinned to cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pinning {
    /// Worker `i` on core `i % cores` (`EngineConfig::pin_workers`).
    Pinned,
    /// Where the OS puts them.
    Free,
}

/// How a block's workers run: where, and how long they search for work before they sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WorkerSetup {
    pub(crate) pinning: Pinning,
    /// `EngineConfig::cpu_max_spin`.
    pub(crate) max_spin: Duration,
}

/// A ready op queued on the CPU block of its route (`OpRecord::block_key`). The block is not
/// stored beside the op: the record names it, and the pool's queues and injector hold 112
/// bytes per op instead of 120 (`docs/decisions.md`, "The queued item is the ready op alone").
pub(crate) struct BlockOp(pub(crate) ReadyOp<OpRecord>);

impl Item for BlockOp {
    #[inline]
    fn run(self) {
        serving::run_block_op(self.0);
    }
}

/// Starts block `key` of engine `engine`: `threads` workers named `<name>-<i>`, each running
/// the block's ops with `runner` (which the workers hold until the block is shut down), set up
/// as `setup` says.
pub(crate) fn start(
    name: &str,
    threads: usize,
    setup: WorkerSetup,
    engine: u64,
    key: BlockKey,
    runner: Arc<dyn BlockRunner>,
) -> Result<CpuBlock> {
    let options = BlockOptions {
        on_start: Some(Box::new(move |_| {
            serving::enter_block(engine, key, Arc::clone(&runner));
        })),
        on_exit: Some(Box::new(|_| serving::leave_block())),
        pin_threads: setup.pinning == Pinning::Pinned,
        max_spin: Some(setup.max_spin),
    };
    WorkerBlock::with_options(name, threads, options).map_err(|error| EngineError::WorkerStart {
        message: error.to_string(),
    })
}
