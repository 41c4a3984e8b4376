//! The errors the graph reports for bad input.
//!
//! Every error is returned *before* any state changes: a rejected call leaves the graph exactly as
//! it was.

use crate::var::Var;

/// What went wrong with a call into a [`Graph`](crate::Graph).
///
/// # Examples
///
/// ```
/// use depengine_graph::{Graph, GraphError, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// let err = graph.push(&[x, x], &[], "reads x twice", &mut ready).unwrap_err();
/// assert_eq!(err, GraphError::DuplicateVar { var: x });
/// // A rejected push changes nothing: no op ran, none waits.
/// assert!(ready.is_empty());
/// assert_eq!(graph.var_status(x)?.pending(), 0);
///
/// match graph.push(&[x], &[x], "reads and writes x", &mut ready) {
///     Err(GraphError::ReadWriteConflict { var }) => assert_eq!(var, x),
///     other => panic!("expected a conflict, got {other:?}"),
/// }
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The same var appears twice in the reads, or twice in the writes, of one push.
    #[error("{var} is listed twice in the same access list of one op")]
    DuplicateVar {
        /// The repeated var.
        var: Var,
    },
    /// The same var appears both in the reads and in the writes of one push.
    #[error("{var} is both read and written by one op (list it only as a write)")]
    ReadWriteConflict {
        /// The var in both lists.
        var: Var,
    },
    /// The var was deleted (its deletion may still be pending), or the handle is stale: the slot
    /// it named has since been reclaimed.
    #[error("{var} was deleted")]
    DeletedVar {
        /// The deleted or stale var.
        var: Var,
    },
    /// The var belongs to another graph instance.
    #[error("{var} belongs to another graph")]
    ForeignVar {
        /// The foreign var.
        var: Var,
    },
    /// A [`ReadyOp`](crate::ReadyOp) was completed on a graph other than the one that made it ready.
    #[error("the completed op belongs to another graph")]
    ForeignOp,
    /// The graph ran out of slots (more than 2^30 - 1 live vars or waiting ops at once).
    #[error("the graph has no free {what} slot left")]
    CapacityExhausted {
        /// `"var"` or `"op"`.
        what: &'static str,
    },
}
