//! [`GraphStats`]: counters for leak checks.

/// A snapshot of a graph's memory accounting, from [`Graph::stats`](crate::Graph::stats).
///
/// The counts are exact while no other thread uses the graph; taken concurrently they are a
/// best-effort snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct GraphStats {
    /// Vars created and not yet reclaimed (a var whose deletion is pending still counts).
    pub live_vars: usize,
    /// Var slots ever allocated (live, or free for reuse). Never shrinks.
    pub var_slots: usize,
    /// Op blocks holding a waiting op. Zero once every pushed op became ready.
    pub live_op_blocks: usize,
    /// Op blocks free for reuse.
    pub pooled_op_blocks: usize,
    /// Vars currently holding a failure.
    pub failed_vars: usize,
}
