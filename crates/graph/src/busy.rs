//! [`BusyVar`] and [`Holder`]: what [`Graph::busy_vars`](crate::Graph::busy_vars) reports of
//! each var with running or waiting requests (a data type, built by the graph).

use std::num::NonZeroU32;

use crate::op::{OpId, PendingOp};
use crate::var::Var;

/// What holds a busy var now: the requests it granted that have not completed.
///
/// The graph knows how many and of which kind. It knows which op only while that op waits for
/// another var (granted here, held back there): once an op is dispatched it has left the graph
/// and its op slot is recycled; and running reads are only counted.
///
/// # Examples
///
/// ```
/// use depengine_graph::{Graph, Holder, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// let (a, b, c) = (graph.new_var()?, graph.new_var()?, graph.new_var()?);
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[a], "runs, holds a", &mut ready)?;
/// graph.push(&[a], &[b], "granted b, waits for a", &mut ready)?;
/// graph.push(&[c], &[], "reads c", &mut ready)?;
/// graph.push(&[c], &[], "reads c too", &mut ready)?;
///
/// let holder = |var| graph.busy_vars().into_iter().find(|busy| busy.var == var).unwrap().holder;
/// // The dispatched write has left the graph; the parked one is still named.
/// assert_eq!(holder(a), Holder::Write { op: None });
/// let parked = graph.pending_ops(a)?[0].id;
/// assert_eq!(holder(b), Holder::Write { op: Some(parked) });
/// assert!(matches!(holder(c), Holder::Reads(reads) if reads.get() == 2));
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// A write was granted and has not completed.
    Write {
        /// The op it was granted to, while that op still waits for another var; `None` once
        /// the op was dispatched (it runs).
        op: Option<OpId>,
    },
    /// This many reads are running.
    Reads(NonZeroU32),
    /// Nothing runs, and this many launched ops have not completed
    /// ([`Graph::launch`](crate::Graph::launch)): the requests waiting for completion wait for
    /// them.
    Launched(NonZeroU32),
}

/// One var with running or waiting requests, as listed by
/// [`Graph::busy_vars`](crate::Graph::busy_vars): what holds it and what waits for it.
///
/// # Examples
///
/// ```
/// use depengine_graph::{Access, BusyVar, Graph, Holder, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// let (x, idle) = (graph.new_var()?, graph.new_var()?);
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[x], "write x", &mut ready)?;
/// graph.push(&[x], &[], "read x", &mut ready)?;
/// graph.delete_var(x, || {})?.call_if_reclaimed();
///
/// // Only `x` is busy: `idle` has nothing running or waiting.
/// let busy: Vec<BusyVar> = graph.busy_vars();
/// assert_eq!(busy.len(), 1);
/// assert_ne!(busy[0].var, idle);
/// assert_eq!(busy[0].var, x);
/// assert_eq!(busy[0].holder, Holder::Write { op: None });
/// assert_eq!(busy[0].waiting.len(), 1);
/// assert_eq!(busy[0].waiting[0].access, Access::Read);
/// assert!(busy[0].deleted, "the deletion waits for both ops");
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BusyVar {
    /// The var (its current handle).
    pub var: Var,
    /// The running requests that hold it.
    pub holder: Holder,
    /// The ops waiting on it, in queue (push) order.
    pub waiting: Vec<PendingOp>,
    /// Whether [`Graph::delete_var`](crate::Graph::delete_var) was called and the deletion
    /// waits for these requests.
    pub deleted: bool,
}
