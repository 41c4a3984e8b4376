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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// The op reads the var; reads run concurrently with each other.
    Read,
    /// The op writes the var; a write runs alone.
    Write,
}

/// A snapshot of one var's dependency state, for stall reports and leak checks.
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
}

impl VarStatus {
    /// Ops pushed on this var that have not completed: running reads, the running write and the
    /// waiting requests.
    pub fn pending(&self) -> usize {
        self.running_reads as usize + usize::from(self.write_running) + self.waiting
    }
}
