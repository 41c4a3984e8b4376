//! [`Var`]: the handle that tags one piece of data, and the read-only views of a var's state.

use std::fmt;

/// A handle to one variable of a [`Graph`](crate::Graph): a tag for one piece of data that ops
/// read or write.
///
/// A `Var` is a small `Copy` value: the slot it names, the slot's generation when the var was
/// created, and the id of the graph it belongs to. Once the var is deleted and its slot reclaimed,
/// the slot's generation moves on, so the old handle is detected as stale
/// ([`GraphError::DeletedVar`](crate::GraphError::DeletedVar)) instead of aliasing whatever var
/// reuses the slot; a handle from another graph is detected by the graph id
/// ([`GraphError::ForeignVar`](crate::GraphError::ForeignVar)).
///
/// # Examples
///
/// ```
/// use depengine_graph::{Graph, GraphError, ReadyOp, Var};
///
/// let graph: Graph<&str> = Graph::new();
/// let x: Var = graph.new_var()?;
/// let copy = x;
/// assert_eq!(copy, x);
/// assert_ne!(graph.new_var()?, x);
/// assert!(x.to_string().starts_with(&format!("var#{}.{}", x.index(), x.generation())));
///
/// // Once deleted, every copy of the handle is refused.
/// graph.delete_var(x, || {})?.call_if_reclaimed();
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// let refused = graph.push(&[copy], &[], "read x", &mut ready);
/// assert_eq!(refused, Err(GraphError::DeletedVar { var: x }));
/// // A var of one graph means nothing to another.
/// let other: Graph<&str> = Graph::new();
/// let y = graph.new_var()?;
/// assert_eq!(other.var_status(y), Err(GraphError::ForeignVar { var: y }));
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Var {
    pub(crate) graph: u32,
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl Var {
    /// The slot index of this var inside its graph. Indices are reused after deletion (with a new
    /// generation), so the index alone does not identify a var over time.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The generation of the slot this handle was created for.
    pub fn generation(self) -> u32 {
        self.generation
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "var#{}.{} (graph {})",
            self.index, self.generation, self.graph
        )
    }
}

/// How an op uses a var.
///
/// # Examples
///
/// ```
/// use depengine_graph::{Access, Graph, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[x], &[], "read 1", &mut ready)?;
/// graph.push(&[x], &[], "read 2", &mut ready)?;
/// graph.push(&[], &[x], "write", &mut ready)?;
/// // Both reads run at once; the write waits for them.
/// assert_eq!(ready.len(), 2);
/// let waiting: Vec<Access> = graph.pending_ops(x)?.iter().map(|op| op.access).collect();
/// assert_eq!(waiting, [Access::Write]);
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// The op reads the var; reads run concurrently with each other.
    Read,
    /// The op writes the var; a write runs alone.
    Write,
}

/// What an op waits for from the earlier ops it conflicts with on a var: their completion, or
/// only their launch ([`Graph::launch`](crate::Graph::launch)).
///
/// An op whose work goes on after it returns (a GPU op, whose kernels run on a stream after
/// the function that launched them returned) launches rather than completes; an op that orders
/// itself behind the launched work by other means (a GPU op whose stream waits for the launched
/// op's event) waits for launch, every other op for completion.
///
/// ```
/// use depengine_graph::{Graph, ReadyOp, Waits};
///
/// let graph: Graph<&str> = Graph::new();
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push_with(Waits::Launch, &[], &[x], "kernel 1", &mut ready)?;
/// graph.push_with(Waits::Launch, &[x], &[], "kernel 2", &mut ready)?;
/// graph.push(&[x], &[], "host read", &mut ready)?;
/// let first = ready.pop().unwrap();
/// let launched = graph.launch(first, |_, &mut ()| {}, &mut ready)?;
/// // The second kernel may start behind the first one's work; the host read may not.
/// assert_eq!(ready.iter().map(|op| *op.payload()).collect::<Vec<_>>(), ["kernel 2"]);
/// graph.complete_launched(launched, Ok(()), |_, &mut ()| {}, &mut ready)?;
/// assert_eq!(ready.len(), 2);
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Waits {
    /// The op starts once the earlier ops it conflicts with have completed (the default).
    #[default]
    Completion,
    /// The op starts once the earlier ops it conflicts with have launched or completed.
    Launch,
}

/// A snapshot of one var's dependency state, for stall reports and leak checks.
///
/// # Examples
///
/// ```
/// use depengine_graph::{Graph, GraphError, ReadyOp, VarStatus};
///
/// let graph: Graph<&str> = Graph::new();
/// let x = graph.new_var()?;
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[x], "write", &mut ready)?;
/// graph.push(&[x], &[], "read", &mut ready)?;
/// graph.delete_var(x, || {})?.call_if_reclaimed();
///
/// let status: VarStatus = graph.var_status(x)?;
/// assert!(status.write_running && status.deleted && !status.failed);
/// assert_eq!((status.running_reads, status.waiting, status.pending()), (0, 1, 2));
///
/// // Completing the write runs the read; completing the read reclaims `x`.
/// graph.complete(ready.pop().unwrap(), Ok(()), &mut ready)?;
/// assert_eq!(graph.var_status(x)?.running_reads, 1);
/// graph.complete(ready.pop().unwrap(), Ok(()), &mut ready)?;
/// assert_eq!(graph.var_status(x), Err(GraphError::DeletedVar { var: x }));
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct VarStatus {
    /// Reads that were granted and have not completed yet.
    pub running_reads: u32,
    /// Whether a write was granted and has not completed yet.
    pub write_running: bool,
    /// Requests waiting in the var's FIFO (the running write, if any, is not counted here).
    pub waiting: usize,
    /// Whether [`Graph::delete_var`](crate::Graph::delete_var) was called and the deletion is
    /// waiting for the var's pending ops.
    pub deleted: bool,
    /// Whether the var currently holds a failure.
    pub failed: bool,
    /// Ops on this var that launched ([`Graph::launch`](crate::Graph::launch)) and have not
    /// completed.
    pub launched: u32,
}

impl VarStatus {
    /// Ops pushed on this var that have not completed: running reads, the running write, the
    /// launched ops and the waiting requests.
    pub fn pending(&self) -> usize {
        self.running_reads as usize
            + usize::from(self.write_running)
            + self.launched as usize
            + self.waiting
    }
}
