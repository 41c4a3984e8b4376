//! Read/write dependency tracking for depengine: the layer that decides when an op may run.
//!
//! depengine is layered like MXNet's engine. This crate sits under the facade (`depengine`),
//! beside `depengine-pool`, which only the facade joins to it: the graph decides when an op may
//! run, the facade hands it to the executors. The crate graph: `docs/architecture.md`.
//!
//! This crate runs nothing itself. The caller pushes ops that declare the [`Var`]s they read and
//! write; the graph hands each op to a [`Dispatch`]er the caller supplies, exactly once, as soon as
//! its dependencies allow, and the caller hands the [`ReadyOp`] back to [`Graph::complete`] once it
//! ran. The semantics are MXNet's `ThreadedVar` / `VersionedVarBlock` / `OprBlock`:
//!
//! - reads of a var run concurrently with each other, a write runs alone;
//! - everything on one var happens in push order: a read pushed after a write sees that write, a
//!   write pushed after reads waits for all of them;
//! - deleting a var is deferred until every op already pushed on it completed.
//!
//! Beyond MXNet: stale and foreign var handles are detected ([`GraphError`]), bad input changes
//! nothing, a failed op records its failure on the vars it wrote (the engine decides what to do
//! with it), the graph reports per-var state for stall reports and memory counters for leak
//! checks, and a var may carry one word of its owner's ([`Graph::new_attached_var`]), which the
//! functions of its ops read back (the engine's typed data keeps its value's pointer there).
//! The module `var_queue` documents the per-var state machine; `docs/graph.md` in the
//! repository has the full design and the concurrency argument.
//!
//! # Example
//!
//! ```
//! use depengine_graph::{Graph, ReadyOp};
//!
//! let graph: Graph<&str> = Graph::new();
//! let a = graph.new_var()?;
//! let b = graph.new_var()?;
//!
//! let mut ready: Vec<ReadyOp<&str>> = Vec::new();
//! graph.push(&[], &[a], "write a", &mut ready)?;
//! graph.push(&[a], &[b], "read a, write b", &mut ready)?;
//! graph.push(&[a], &[], "read a", &mut ready)?;
//! // Only the write runs: both reads of `a` wait for it.
//! assert_eq!(ready.len(), 1);
//!
//! let op = ready.pop().unwrap();
//! let payload = graph.complete(op, Ok(()), &mut ready)?;
//! assert_eq!(payload, "write a");
//! // Completing the write released both reads, which run concurrently.
//! let mut names: Vec<&str> = ready.iter().map(|op| *op.payload()).collect();
//! names.sort_unstable();
//! assert_eq!(names, ["read a", "read a, write b"]);
//!
//! for op in std::mem::take(&mut ready) {
//!     graph.complete(op, Ok(()), &mut ready)?;
//! }
//! assert!(ready.is_empty());
//! assert_eq!(graph.stats().live_op_blocks, 0);
//! # Ok::<(), depengine_graph::GraphError>(())
//! ```

// The only `unsafe` code is the parked-op cell in `op_cell`, which opts in below, and the graph's
// call of the op slab's trim (`depengine-slab`).
#![deny(unsafe_code)]
#![allow(
    clippy::doc_markdown,
    reason = "the docs name MXNet and its classes, which are not items of this crate"
)]

mod blocked;
mod busy;
mod deletion;
mod error;
mod graph;
mod incoming;
mod op;
// The lock-free hand-over of parked ops; its module documentation has the ownership protocol.
#[allow(unsafe_code)]
mod op_cell;
mod read_credits;
mod stats;
mod var;
mod var_queue;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use blocked::Visit;
pub use busy::{BusyVar, Holder};
pub use deletion::{Deletion, OnDeleted};
pub use error::GraphError;
pub use graph::{Failure, Graph};
pub use op::{Dispatch, LaunchedOp, OpId, PendingOp, ReadyOp};
pub use stats::GraphStats;
pub use var::{Access, Var, VarStatus, Waits};
