//! [`BlockKey`]: which CPU worker block an op runs on.

/// A worker block an op runs on, for keeping a released successor on the worker that
/// released it (see `EngineState::execute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockKey {
    Pooled,
    PooledCopy,
    Cpu(u32),
    /// The priority block (`CpuPrioritized` ops of `ThreadedPerDevice`), whose workers run
    /// tokens that pop its heap rather than the ops themselves: a successor is kept as its
    /// token (`PriorityBlock::push_next`), and no op's `block_key` is this one.
    Priority,
}
