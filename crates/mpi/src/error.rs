//! [`MpiError`]: what starting a communicator, pushing one of its ops, or running one can fail
//! with.

use depengine::EngineError;

/// An error of `depengine-mpi`: returned by [`Comm::world`](crate::Comm::world),
/// [`Comm::split`](crate::Comm::split) and a push,
/// or the failure of an op (its source, as [`OpFailure::cause`](depengine::OpFailure::cause)
/// shows it).
///
/// ```
/// use depengine_mpi::MpiError;
///
/// let error = MpiError::NoSuchRank { rank: 5, size: 2 };
/// assert_eq!(error.to_string(), "rank 5 is not in the communicator of 2 ranks");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MpiError {
    /// MPI was initialized already in this process (a second [`Comm::world`](crate::Comm::world),
    /// or another library): depengine-mpi initializes it once, on its communication thread.
    #[error(
        "MPI is initialized already in this process: depengine-mpi initializes it once, on its \
         communication thread (one Comm::world per process)"
    )]
    AlreadyInitialized,
    /// The MPI library gives a thread level below `MPI_THREAD_FUNNELED`, which the communication
    /// thread needs (it makes every MPI call, while the engine's threads run beside it).
    #[error("MPI provides the thread level {provided}, below MPI_THREAD_FUNNELED")]
    ThreadLevel {
        /// The level MPI provides.
        provided: &'static str,
    },
    /// The communication thread could not start, or stopped before reporting.
    #[error("the MPI communication thread could not start: {0}")]
    ThreadStart(String),
    /// A rank outside the communicator.
    #[error("rank {rank} is not in the communicator of {size} ranks")]
    NoSuchRank {
        /// The rank asked for.
        rank: usize,
        /// The ranks there are.
        size: usize,
    },
    /// A buffer longer than MPI counts (`i32::MAX` elements).
    #[error("a buffer of {len} elements is longer than MPI's counts allow (i32::MAX)")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// A reduce-scatter's input whose length is not a multiple of the number of ranks.
    #[error("a reduce-scatter's input of {len} elements does not split into {size} equal blocks")]
    UnevenBlocks {
        /// The input's length.
        len: usize,
        /// The ranks.
        size: usize,
    },
    /// An op of the communicator was skipped (a failed input) or failed before its call, which
    /// stopped the communicator (`comm.rs`): returned by [`Comm::wait`](crate::Comm::wait), and
    /// the failure of the ops pushed after it until then.
    #[error("the communicator is stopped: {0}")]
    Stopped(String),
    /// An allreduce by the caller's function ([`Comm::allreduce_by`](crate::Comm::allreduce_by))
    /// after the world's first split ([`Comm::split`](crate::Comm::split)): the function is
    /// lent to MPI for a blocking call only, and blocking calls on several communicators of
    /// one thread could wait for each other across ranks.
    #[error("an allreduce by the caller's function is made only before the world's first split")]
    UserReduceAfterSplit,
    /// The communicator's thread is gone (the communicator was dropped) before the op's call
    /// started.
    #[error("the communicator was dropped before this op's call started")]
    Closed,
    /// MPI returned an error for the op's call or its completion.
    #[error("MPI error {code}: {message}")]
    Mpi {
        /// MPI's error code.
        code: i32,
        /// `MPI_Error_string`'s text for it.
        message: String,
    },
    /// The function of a [`UserReduce`](crate::UserReduce) panicked during the op's call (its
    /// message), or MPI called it where it could not be found.
    #[error("the reduction's function failed: {0}")]
    ReduceFailed(String),
    /// NCCL cannot be used: on some rank, no CUDA driver, no such device, or no NCCL library
    /// (this rank's reason, or that another rank cannot).
    #[error("NCCL is not usable: {reason}")]
    NoNccl {
        /// Why.
        reason: String,
    },
    /// NCCL returned an error (its result code, and what was being done).
    #[error("NCCL error: {0}")]
    Nccl(String),
    /// A buffer of another length than the op needs.
    #[error("a buffer of {len} elements where {expected} are needed")]
    Lengths {
        /// Its length.
        len: usize,
        /// The length needed.
        expected: usize,
    },
    /// The engine refused the push.
    #[error(transparent)]
    Engine(#[from] EngineError),
}
