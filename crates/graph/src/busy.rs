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
