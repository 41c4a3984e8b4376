//! Where a ready op runs: the worker blocks of each engine kind and the device executors.

pub(crate) mod devices;
pub(crate) mod lazy;
pub(crate) mod naive;
pub(crate) mod per_device;
pub(crate) mod pooled;
pub(crate) mod queued;
pub(crate) mod ready_queue;

use std::sync::Arc;

use depengine_graph::ReadyOp;

use crate::op::record::{BlockKey, OpRecord};

/// The engine as a block's workers see it (`run::Inner` implements it): the route starts
/// drainers and hands ops back, the engine runs them.
pub(crate) trait BlockEngine: Send + Sync + 'static {
    /// The engine's id.
    fn engine_id(&self) -> u64;

    /// A drainer task of block `key` (`queued.rs`): runs its queued ops until the queue is
    /// empty, then retires.
    fn drain(self: Arc<Self>, key: BlockKey);

    /// Runs (or skips) `op` and completes it, on this thread.
    fn execute(self: &Arc<Self>, op: ReadyOp<OpRecord>);
}
