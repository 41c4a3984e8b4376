//! The shared part of a reusable operator (MXNet's `NewOperator`): its function, vars and
//! property, held by its [`Operator`](crate::Operator) handles and by every pending push of it.

use std::sync::atomic::AtomicBool;

use depengine_graph::Var;

use crate::context::{FnProperty, RunContext};
use crate::failure::BoxError;
use crate::name::OpName;
use crate::op::completion::Completion;

/// A reusable sync function.
type SharedSyncFn = Box<dyn Fn(RunContext) -> Result<(), BoxError> + Send + Sync>;
/// A reusable async function.
type SharedAsyncFn = Box<dyn Fn(RunContext, Completion) + Send + Sync>;

/// An operator's function, run once per push.
pub(crate) enum OperatorFn {
    Sync(SharedSyncFn),
    Async(SharedAsyncFn),
}

/// What an operator is, shared by its handles and its pending pushes.
pub(crate) struct OperatorDef {
    pub(crate) engine: u64,
    pub(crate) name: OpName,
    /// Every push is marked for the profiler (see [`OperatorBuilder::profiled`](crate::OperatorBuilder::profiled)).
    pub(crate) profiled: bool,
    pub(crate) reads: Box<[Var]>,
    pub(crate) writes: Box<[Var]>,
    pub(crate) property: FnProperty,
    pub(crate) func: OperatorFn,
    /// Set once by `Engine::delete_operator`; later pushes of the operator fail.
    ///
    /// `Relaxed`: the flag publishes no data (the function is freed by the last `Arc`
    /// reference, whose count orders the drop). A push that happens-after the delete sees it
    /// by coherence, whatever the ordering; one concurrent with it may run under any
    /// ordering, as documented ("pushes already made still run").
    pub(crate) deleted: AtomicBool,
}
