//! [`GraphStats`]: counters for leak checks.

/// A snapshot of a graph's memory accounting, from [`Graph::stats`](crate::Graph::stats).
///
/// The counts are exact while no other thread uses the graph; taken concurrently they are a
/// best-effort snapshot.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use depengine_graph::{Failure, Graph, GraphStats, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// assert_eq!(graph.stats().live_vars, 0);
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[x], "write x", &mut ready)?;
/// graph.push(&[x], &[], "read x", &mut ready)?;
/// let stats: GraphStats = graph.stats();
/// assert_eq!((stats.live_vars, stats.live_op_blocks, stats.failed_vars), (1, 1, 0));
///
/// let failure: Failure = Arc::new(std::fmt::Error);
/// graph.complete(ready.pop().unwrap(), Err(failure), &mut ready)?;
/// graph.complete(ready.pop().unwrap(), Ok(()), &mut ready)?;
/// let stats = graph.stats();
/// // The read no longer waits, and the failed write left its failure on `x`.
/// assert_eq!((stats.live_op_blocks, stats.failed_vars), (0, 1));
/// assert!(stats.var_slots >= stats.live_vars);
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
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
