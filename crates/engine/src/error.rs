//! [`EngineError`]: every way a call into the engine can fail.

use std::path::PathBuf;
use std::sync::Arc;

use depengine_device::BackendError;
use depengine_graph::{GraphError, Var};

use crate::config::ConfigError;
use crate::context::Context;
use crate::failure::OpFailure;
use crate::profile::recorder::OutputFailure;

/// `Result` with [`EngineError`].
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// What went wrong. Misuse is reported before anything changes: a rejected push pushed nothing.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The same var twice in the reads, or twice in the writes, of one op.
    #[error("{var} is listed twice in the same access list of one op")]
    DuplicateVar {
        /// The repeated var.
        var: Var,
    },
    /// The same var in the reads and the writes of one op.
    #[error("{var} is both read and written by one op (list it only as a write)")]
    ReadWriteConflict {
        /// The var in both lists.
        var: Var,
    },
    /// The var was deleted (its deletion may still be pending), or the handle is stale.
    #[error("{var} was deleted")]
    DeletedVar {
        /// The deleted var.
        var: Var,
    },
    /// The var belongs to another engine.
    #[error("{var} belongs to another engine")]
    ForeignVar {
        /// The foreign var.
        var: Var,
    },
    /// The engine ran out of var or op slots.
    #[error("the engine has no free {what} slot left")]
    CapacityExhausted {
        /// `"var"` or `"op"`.
        what: &'static str,
    },
    /// Any other error of the dependency graph.
    #[error("dependency graph: {0}")]
    Graph(GraphError),
    /// The engine was shut down: it takes no new ops, and creates no new vars.
    #[error("the engine was shut down")]
    ShutDown,
    /// `wait_for_var` from inside an op on a var that op reads or writes: it would wait for the
    /// op itself (or for a write queued behind it), a deadlock.
    #[error("waiting for {var} from inside an op that uses it would deadlock")]
    WaitOnOwnVar {
        /// The var.
        var: Var,
    },
    /// `wait_for_var` from inside an op, where an op pushed on the var before the wait
    /// depends, directly or through other ops (and other blocked waits), on a var that the
    /// waiting op (or an op it runs nested in) holds: the wait would never return. The wait is
    /// withdrawn; the op may return this error or carry on.
    #[error(
        "waiting for {var} from inside an op would deadlock: an op pushed on it before the \
         wait depends on a var the waiting op holds"
    )]
    WaitDeadlock {
        /// The var.
        var: Var,
    },
    /// `wait_for_all` from inside an op: it would wait for that op, a deadlock.
    #[error("wait_for_all from inside an op would deadlock")]
    WaitAllInsideOp,
    /// An op failed; see [`OpFailure`] and the failure rules in the crate documentation.
    #[error(transparent)]
    OpFailed(#[from] OpFailure),
    /// A GPU op was pushed to an engine without a device backend.
    #[error("{context} needs a device backend, and this engine has none")]
    NoDeviceBackend {
        /// The op's context.
        context: Context,
    },
    /// The device backend could not provide workers for the context.
    #[error("{context}: {source}")]
    Backend {
        /// The op's context.
        context: Context,
        /// The backend's error.
        source: BackendError,
    },
    /// A device id beyond what the engine supports.
    #[error("{context}: device ids must be below {limit}")]
    DeviceIdOutOfRange {
        /// The op's context.
        context: Context,
        /// The first unsupported id.
        limit: u32,
    },
    /// Worker threads could not start.
    #[error("could not start workers: {message}")]
    WorkerStart {
        /// Why.
        message: String,
    },
    /// The operator was deleted.
    #[error("operator `{name}` was deleted")]
    OperatorDeleted {
        /// The operator's name.
        name: String,
    },
    /// The operator was created by another engine.
    #[error("operator `{name}` belongs to another engine")]
    ForeignOperator {
        /// The operator's name.
        name: String,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The profiler's output file cannot be written: [`Engine::new`] could not create or
    /// open it, or (from the last clone's [`Engine::shutdown`]) writing the profile failed.
    ///
    /// [`Engine::new`]: crate::Engine::new
    /// [`Engine::shutdown`]: crate::Engine::shutdown
    #[error("cannot write the profile to \"{}\" ({setting}): {source}", .path.display())]
    ProfilerOutput {
        /// What set the path: [`PROFILER_OUTPUT`](crate::PROFILER_OUTPUT) or
        /// `EngineConfig::profiler_output`.
        setting: &'static str,
        /// The path.
        path: PathBuf,
        /// Why it cannot be written.
        source: Arc<std::io::Error>,
    },
}

impl From<OutputFailure> for EngineError {
    fn from(failure: OutputFailure) -> Self {
        EngineError::ProfilerOutput {
            setting: failure.setting,
            path: failure.path,
            source: Arc::new(failure.error),
        }
    }
}

impl From<GraphError> for EngineError {
    fn from(error: GraphError) -> Self {
        match error {
            GraphError::DuplicateVar { var } => EngineError::DuplicateVar { var },
            GraphError::ReadWriteConflict { var } => EngineError::ReadWriteConflict { var },
            GraphError::DeletedVar { var } => EngineError::DeletedVar { var },
            GraphError::ForeignVar { var } => EngineError::ForeignVar { var },
            GraphError::CapacityExhausted { what } => EngineError::CapacityExhausted { what },
            other => EngineError::Graph(other),
        }
    }
}
