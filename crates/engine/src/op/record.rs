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

/// Where a ready op goes, resolved at push time (so a bad context is a push error). The device
/// id is the op's context's (so a route is one byte, and the record 56: see `OpRecord`).
#[derive(Clone, Copy)]
pub(crate) enum Route {
    /// Run on the thread that made it ready (`Naive`).
    Inline,
    /// `ThreadedPooled`'s shared block.
    Pooled,
    /// `ThreadedPooled`'s copy block.
    PooledCopy,
    /// `ThreadedPerDevice`'s block of the CPU device of the op's context.
    Cpu,
    /// The CPU priority block.
    Priority,
    /// A device backend's executor for the GPU of the op's context: its copy executor if
    /// `copy`, else its compute executor. The executor itself is looked up at dispatch (it was
    /// created when the route was resolved), which keeps the route, and every queued op, small.
    Device { copy: bool },
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

/// The graph payload of one op: 56 bytes, so that with the graph's dependency list a parked
/// op's slot is 112 bytes (see `docs/graph.md`).
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
    /// The worker block of the op's route, if it is one whose workers run ops in any order
    /// (not the priority block, not a device executor, not inline).
    #[inline]
    pub(crate) fn block_key(&self) -> Option<BlockKey> {
        match self.route {
            Route::Pooled => Some(BlockKey::Pooled),
            Route::PooledCopy => Some(BlockKey::PooledCopy),
            Route::Cpu => Some(BlockKey::Cpu(self.context.device_id())),
            _ => None,
        }
    }

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

    /// The record crosses between cores with every op and is stored in every parked op's
    /// slot: 56 bytes (with the graph's 40-byte dependency list, a ready op is 104 bytes and a
    /// parked op's slot 112, link included).
    #[test]
    fn op_record_is_56_bytes() {
        assert_eq!(size_of::<Route>(), 1);
        assert_eq!(size_of::<OpRecord>(), 56);
        assert_eq!(size_of::<depengine_graph::ReadyOp<OpRecord>>(), 104);
    }
}
