//! What the engine stores with each op in the dependency graph.

use std::sync::Arc;

use crate::context::{Context, FnProperty, RunContext};
use crate::failure::{BoxError, FailureCause, OpFailure};
use crate::name::OpName;
use crate::op::completion::Completion;
use crate::op::operator::OperatorDef;
use crate::profile::recorder::ProfiledOp;
use crate::wait::deadlock::WaitLatch;

/// A one-shot sync op function.
pub(crate) type SyncFn = Box<dyn FnOnce(RunContext) -> Result<(), BoxError> + Send>;
/// A one-shot async op function.
pub(crate) type AsyncFn = Box<dyn FnOnce(RunContext, Completion) + Send>;

/// What runs when the op is executed.
pub(crate) enum OpFn {
    Sync(SyncFn),
    Async(AsyncFn),
    /// A push of a reusable operator.
    Operator(Arc<OperatorDef>),
    /// `wait_for_var`'s write: never executed, handled at dispatch.
    Wait(Arc<WaitLatch>),
}

/// Where a ready op goes, resolved at push time (so a bad context is a push error).
#[derive(Clone, Copy)]
pub(crate) enum Route {
    /// Run on the thread that made it ready (`Naive`).
    Inline,
    /// `ThreadedPooled`'s shared block.
    Pooled,
    /// `ThreadedPooled`'s copy block.
    PooledCopy,
    /// `ThreadedPerDevice`'s block of CPU device `id`.
    Cpu(u32),
    /// The CPU priority block.
    Priority,
    /// A device backend's executor for GPU `gpu`: its copy executor if `copy`, else its
    /// compute executor. The executor itself is looked up at dispatch (it was created when
    /// the route was resolved), which keeps the route, and every queued op, small.
    Device { gpu: u32, copy: bool },
    /// Handled at dispatch (`wait_for_var`).
    Wait,
}

/// A worker block an op runs on, for keeping a released successor on the worker that
/// released it (see `Inner::execute_task`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKey {
    Pooled,
    PooledCopy,
    Cpu(u32),
}

impl Route {
    /// The worker block of this route, if it is one whose workers run ops in any order
    /// (not the priority block, not a device executor, not inline).
    #[inline]
    pub(crate) fn block_key(self) -> Option<BlockKey> {
        match self {
            Route::Pooled => Some(BlockKey::Pooled),
            Route::PooledCopy => Some(BlockKey::PooledCopy),
            Route::Cpu(id) => Some(BlockKey::Cpu(id)),
            _ => None,
        }
    }
}

/// The graph payload of one op.
pub(crate) struct OpRecord {
    pub(crate) name: OpName,
    pub(crate) func: Option<OpFn>,
    pub(crate) context: Context,
    pub(crate) property: FnProperty,
    pub(crate) priority: i32,
    pub(crate) route: Route,
    /// Marked for a profiler in [`ProfileMode::Marked`](crate::ProfileMode::Marked).
    pub(crate) profiled: bool,
}

impl OpRecord {
    /// The latch of a `wait_for_var` op.
    pub(crate) fn wait_latch(&self) -> Option<&Arc<WaitLatch>> {
        match &self.func {
            Some(OpFn::Wait(latch)) => Some(latch),
            _ => None,
        }
    }

    /// The failure of this op with `cause`.
    pub(crate) fn failure(&self, cause: FailureCause) -> OpFailure {
        OpFailure::new(self.name.to_cow(), cause)
    }

    /// What the profiler records of this op.
    pub(crate) fn profiled_op(&self) -> ProfiledOp<'_> {
        ProfiledOp {
            name: &self.name,
            context: self.context,
            property: self.property,
            priority: self.priority,
        }
    }

    pub(crate) fn run_context(&self) -> RunContext {
        RunContext {
            context: self.context,
            priority: self.priority,
            property: self.property,
        }
    }
}

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use super::*;

    /// The record crosses between cores with every op: it is kept to one cache line (with the
    /// graph's 40-byte dependency list, a ready op is 112 bytes and a parked op's slot two lines).
    #[test]
    fn op_record_is_one_cache_line() {
        assert_eq!(size_of::<OpRecord>(), 64);
        assert_eq!(size_of::<depengine_graph::ReadyOp<OpRecord>>(), 112);
    }
}
