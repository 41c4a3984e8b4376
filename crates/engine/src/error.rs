//! [`EngineError`]: every way a call into the engine can fail.
//!
//! An error names what the user knows: a var by the name it was created with
//! (`Engine::new_var_named`), `var "weights" (#0.1)`, or by its slot and generation, `var #0.1`;
//! a push's error names the op, op `name`. The graph reports vars by handle only; the handle's
//! methods fill the names in ([`EngineError::named`]) on the error path, so names cost an op
//! nothing.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use depengine_device::{BackendError, DeviceError};
use depengine_graph::{GraphError, Var};

use crate::config::ConfigError;
use crate::context::Context;
use crate::failure::OpFailure;
use crate::profile::recorder::OutputFailure;

/// `Result` with [`EngineError`].
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, EngineError, Result};
///
/// /// Pushes `steps` ops on a new var and waits for them.
/// fn run_chain(engine: &Engine, steps: u32) -> Result<u32> {
///     let var = engine.new_var()?;
///     for _ in 0..steps {
///         engine.op("step").writes([var]).push_sync(|_| {})?;
///     }
///     engine.wait_for_var(var)?;
///     Ok(steps)
/// }
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// assert_eq!(run_chain(&engine, 3)?, 3);
/// engine.clone().shutdown()?;
/// assert!(matches!(run_chain(&engine, 1), Err(EngineError::ShutDown)));
/// // The error type is a parameter, `EngineError` unless given.
/// let parsed: Result<u32, std::num::ParseIntError> = "7".parse();
/// assert_eq!(parsed, Ok(7));
/// # Ok::<(), EngineError>(())
/// ```
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// What went wrong. Misuse is reported before anything changes: a rejected push pushed nothing.
///
/// The variants about a var carry its name (`var_name`, if it was created with
/// [`Engine::new_var_named`](crate::Engine::new_var_named)), and those of a push the op's name
/// (`op`); they are `#[non_exhaustive]`: match them with `{ var, .. }`.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig, EngineError};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let weights = engine.new_var_named("weights")?;
/// engine.delete_var(weights, || {})?;
/// match engine.op("update").writes([weights]).push_sync(|_| {}) {
///     Err(EngineError::DeletedVar { var, var_name, op, .. }) => {
///         assert_eq!(var, weights);
///         assert_eq!(var_name.as_deref(), Some("weights"));
///         assert_eq!(op.as_deref(), Some("update"));
///     }
///     other => panic!("expected a deleted var, got {other:?}"),
/// }
/// # Ok::<(), EngineError>(())
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The same var twice in the reads, or twice in the writes, of one op.
    #[error(
        "{}{} is listed twice in the same access list of one op",
        OpPrefix(.op),
        VarLabel(*.var, .var_name)
    )]
    #[non_exhaustive]
    DuplicateVar {
        /// The repeated var.
        var: Var,
        /// Its name.
        var_name: Option<Arc<str>>,
        /// The op (or operator) being pushed or built.
        op: Option<String>,
    },
    /// The same var in the reads and the writes of one op.
    #[error(
        "{}{} is both read and written by one op (list it only as a write)",
        OpPrefix(.op),
        VarLabel(*.var, .var_name)
    )]
    #[non_exhaustive]
    ReadWriteConflict {
        /// The var in both lists.
        var: Var,
        /// Its name.
        var_name: Option<Arc<str>>,
        /// The op (or operator) being pushed or built.
        op: Option<String>,
    },
    /// The var was deleted (its deletion may still be pending), or the handle is stale.
    #[error("{}{} was deleted", OpPrefix(.op), VarLabel(*.var, .var_name))]
    #[non_exhaustive]
    DeletedVar {
        /// The deleted var.
        var: Var,
        /// Its name.
        var_name: Option<Arc<str>>,
        /// The op being pushed, if a push named the var.
        op: Option<String>,
    },
    /// The var belongs to another engine. (Its name is that engine's: not shown.)
    #[error("{}{} belongs to another engine", OpPrefix(.op), VarLabel(*.var, &None))]
    #[non_exhaustive]
    ForeignVar {
        /// The foreign var.
        var: Var,
        /// The op being pushed, if a push named the var.
        op: Option<String>,
    },
    /// Typed data ([`Data`](crate::Data)) of another engine. (Its name is that engine's: not
    /// shown.)
    #[error("{}the data of {} belongs to another engine", OpPrefix(.op), VarLabel(*.var, &None))]
    #[non_exhaustive]
    ForeignData {
        /// The data's var.
        var: Var,
        /// The op being pushed, if a push named the data.
        op: Option<String>,
    },
    /// [`Engine::take`](crate::Engine::take) of data that has other handles.
    #[error("the data has other handles: taking its value needs the last one")]
    DataShared,
    /// A data guard ([`Engine::read`](crate::Engine::read), `write`, `read_async`, `take`)
    /// from inside an op of the engine: an op reaches data through its own accesses.
    #[error(
        "data is reached from inside an op through the op's own accesses (`.read(&data)`, \
         `.write(&data)`), not through a guard"
    )]
    DataInsideOp,
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
    /// `wait_for_var` from inside an op on a var that op reads or writes (a replayed op: on a
    /// var of its plan, which its replay holds): it would wait for the op itself (or for a
    /// write queued behind it), a deadlock.
    #[error(
        "waiting for {} from inside an op that uses it would deadlock",
        VarLabel(*.var, .var_name)
    )]
    #[non_exhaustive]
    WaitOnOwnVar {
        /// The var.
        var: Var,
        /// Its name.
        var_name: Option<Arc<str>>,
    },
    /// `wait_for_var` from inside an op, where an op pushed on the var before the wait
    /// depends, directly or through other ops (and other blocked waits), on a var that the
    /// waiting op (or an op it runs nested in) holds: the wait would never return. The wait is
    /// withdrawn; the op may return this error or carry on.
    #[error(
        "waiting for {} from inside an op would deadlock: an op pushed on it before the wait \
         depends on a var the waiting op holds",
        VarLabel(*.var, .var_name)
    )]
    #[non_exhaustive]
    WaitDeadlock {
        /// The var.
        var: Var,
        /// Its name.
        var_name: Option<Arc<str>>,
    },
    /// `wait_for_all` from inside an op: it would wait for that op, a deadlock.
    #[error("wait_for_all from inside an op would deadlock")]
    WaitAllInsideOp,
    /// An op failed; see [`OpFailure`] and the failure rules in the crate documentation.
    #[error(transparent)]
    OpFailed(#[from] OpFailure),
    /// A GPU op was pushed to an engine without a device backend.
    #[error(
        "{}{context} needs a device backend, and this engine has none",
        OpPrefix(.op)
    )]
    #[non_exhaustive]
    NoDeviceBackend {
        /// The op's context.
        context: Context,
        /// The op being pushed.
        op: Option<String>,
    },
    /// The device backend could not provide workers for the context.
    #[error("{}{context}: {source}", OpPrefix(.op))]
    #[non_exhaustive]
    Backend {
        /// The op's context.
        context: Context,
        /// The backend's error.
        source: BackendError,
        /// The op being pushed.
        op: Option<String>,
    },
    /// A GPU op pushed on a device that an earlier op's fault left lost
    /// ([`DeviceError::Lost`](depengine_device::DeviceError::Lost)): the first such fault.
    #[error("{}{context}: refused, {fault}", OpPrefix(.op))]
    #[non_exhaustive]
    DeviceLost {
        /// The op's context.
        context: Context,
        /// The fault that lost the device.
        fault: DeviceError,
        /// The op being pushed.
        op: Option<String>,
    },
    /// A device id beyond what the engine supports.
    #[error("{}{context}: device ids must be below {limit}", OpPrefix(.op))]
    #[non_exhaustive]
    DeviceIdOutOfRange {
        /// The op's context.
        context: Context,
        /// The first unsupported id.
        limit: u32,
        /// The op being pushed.
        op: Option<String>,
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
    /// The closure of [`Engine::capture`](crate::Engine::capture) returned this error (one
    /// other than an [`EngineError`], which is returned as it is): there is no plan.
    #[error("the capture of plan `{plan}` failed: {source}")]
    #[non_exhaustive]
    CaptureFailed {
        /// The plan's name.
        plan: String,
        /// What the closure returned.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// The plan was captured by another engine.
    #[error("plan `{plan}` belongs to another engine")]
    #[non_exhaustive]
    ForeignPlan {
        /// The plan's name.
        plan: String,
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

impl EngineError {
    /// A var listed twice in one access list (`op`: the op or operator).
    pub(crate) fn duplicate_var(var: Var) -> Self {
        EngineError::DuplicateVar {
            var,
            var_name: None,
            op: None,
        }
    }

    /// A var in both access lists of one op.
    pub(crate) fn read_write_conflict(var: Var) -> Self {
        EngineError::ReadWriteConflict {
            var,
            var_name: None,
            op: None,
        }
    }

    /// A `wait_for_var(var)` inside an op that uses `var`.
    pub(crate) fn wait_on_own_var(var: Var) -> Self {
        EngineError::WaitOnOwnVar {
            var,
            var_name: None,
        }
    }

    /// A `wait_for_var(var)` inside an op that would never return.
    pub(crate) fn wait_deadlock(var: Var) -> Self {
        EngineError::WaitDeadlock {
            var,
            var_name: None,
        }
    }

    /// A GPU op on an engine without a device backend.
    pub(crate) fn no_device_backend(context: Context) -> Self {
        EngineError::NoDeviceBackend { context, op: None }
    }

    /// A device id beyond `limit`.
    pub(crate) fn device_id_out_of_range(context: Context, limit: u32) -> Self {
        EngineError::DeviceIdOutOfRange {
            context,
            limit,
            op: None,
        }
    }

    /// A GPU op refused on the lost device of `context`, lost by `fault`.
    pub(crate) fn device_lost(context: Context, fault: DeviceError) -> Self {
        EngineError::DeviceLost {
            context,
            fault,
            op: None,
        }
    }

    /// The backend's failure to provide executors for `context`.
    pub(crate) fn backend(context: Context, source: BackendError) -> Self {
        EngineError::Backend {
            context,
            source,
            op: None,
        }
    }

    /// This error with the names the user knows filled in: each var's, from `var_name` (the
    /// engine's names; not asked for a foreign var, whose name is another engine's), and, for
    /// the errors of a push, the name of the op `op` (the op or operator being pushed or
    /// built). Called on the error path only.
    pub(crate) fn named(
        mut self,
        var_name: impl Fn(Var) -> Option<Arc<str>>,
        op: Option<&str>,
    ) -> Self {
        match &mut self {
            EngineError::DuplicateVar {
                var,
                var_name: name,
                op: op_name,
            }
            | EngineError::ReadWriteConflict {
                var,
                var_name: name,
                op: op_name,
            }
            | EngineError::DeletedVar {
                var,
                var_name: name,
                op: op_name,
            } => {
                *name = var_name(*var);
                *op_name = op.map(str::to_owned);
            }
            EngineError::WaitOnOwnVar {
                var,
                var_name: name,
            }
            | EngineError::WaitDeadlock {
                var,
                var_name: name,
            } => *name = var_name(*var),
            EngineError::ForeignVar { op: op_name, .. }
            | EngineError::ForeignData { op: op_name, .. }
            | EngineError::NoDeviceBackend { op: op_name, .. }
            | EngineError::Backend { op: op_name, .. }
            | EngineError::DeviceLost { op: op_name, .. }
            | EngineError::DeviceIdOutOfRange { op: op_name, .. } => {
                *op_name = op.map(str::to_owned);
            }
            _ => {}
        }
        self
    }
}

impl From<GraphError> for EngineError {
    fn from(error: GraphError) -> Self {
        match error {
            GraphError::DuplicateVar { var } => EngineError::duplicate_var(var),
            GraphError::ReadWriteConflict { var } => EngineError::read_write_conflict(var),
            GraphError::DeletedVar { var } => EngineError::DeletedVar {
                var,
                var_name: None,
                op: None,
            },
            GraphError::ForeignVar { var } => EngineError::ForeignVar { var, op: None },
            GraphError::CapacityExhausted { what } => EngineError::CapacityExhausted { what },
            other => EngineError::Graph(other),
        }
    }
}

/// A var as errors and warnings show it: `var "weights" (#0.1)` with a name, `var #0.1`
/// without (slot index and generation: the graph's id, which tells engines apart, says
/// nothing to the user).
pub(crate) struct VarLabel<'a>(pub(crate) Var, pub(crate) &'a Option<Arc<str>>);

impl fmt::Display for VarLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let VarLabel(var, name) = self;
        match name {
            Some(name) => write!(f, "var {name:?} (#{}.{})", var.index(), var.generation()),
            None => write!(f, "var #{}.{}", var.index(), var.generation()),
        }
    }
}

/// `op `name`: ` before the message of a push's error; nothing without an op.
struct OpPrefix<'a>(&'a Option<String>);

impl fmt::Display for OpPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(op) => write!(f, "op `{op}`: "),
            None => Ok(()),
        }
    }
}
