//! [`Deletion`]: what [`Graph::delete_var`](crate::Graph::delete_var) did with a var's callback,
//! and [`OnDeleted`], the callback a later reclaim hands to the dispatcher.
//!
//! The graph never calls a deleted var's callback itself. A callback runs its owner's code (the
//! engine's typed data drops a value there, and a value's `Drop` may call the engine again), so
//! the caller decides when: the caller of `delete_var` for an idle var
//! ([`Deletion::Reclaimed`]), the [`Dispatch`](crate::Dispatch)er of the completion that made a
//! busy one idle ([`Dispatch::reclaimed`](crate::Dispatch::reclaimed)).

/// The callback of a deleted var whose deletion waited for ops: handed to the
/// [`Dispatch`](crate::Dispatch)er of the completion after which the var was reclaimed.
pub type OnDeleted = Box<dyn FnOnce() + Send>;

/// What [`Graph::delete_var`](crate::Graph::delete_var) did.
///
/// # Examples
///
/// ```
/// use depengine_graph::{Deletion, Graph, ReadyOp};
///
/// let graph: Graph<&str> = Graph::new();
/// let (idle, busy) = (graph.new_var()?, graph.new_var()?);
/// // An idle var is reclaimed at once; its callback comes back to the caller.
/// let Deletion::Reclaimed(callback) = graph.delete_var(idle, || println!("idle"))? else {
///     unreachable!("nothing was pushed on `idle`");
/// };
/// callback();
///
/// // A busy var waits for its ops; the last one's completion hands the callback over.
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[busy], "write", &mut ready)?;
/// assert!(matches!(graph.delete_var(busy, || {})?, Deletion::Pending));
/// graph.complete(ready.pop().unwrap(), Ok(()), &mut ready)?; // `Vec` calls it at once
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug)]
#[must_use = "an idle var's callback comes back here: call it (`call_if_reclaimed`) or drop it"]
pub enum Deletion<F> {
    /// The var was idle and is reclaimed: the callback, for the caller to call.
    Reclaimed(F),
    /// Ops pushed on the var are pending: the completion of the last of them hands the
    /// callback to its dispatcher.
    Pending,
}

impl<F: FnOnce()> Deletion<F> {
    /// Calls the callback now if the var was reclaimed already: for a caller whose callback
    /// may run on this thread, within the call.
    pub fn call_if_reclaimed(self) {
        if let Deletion::Reclaimed(callback) = self {
            callback();
        }
    }
}
