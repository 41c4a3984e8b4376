//! What the engine stores with each op in the dependency graph: a [`Payload`], the record of an
//! op to run ([`OpRecord`]) or the one-shot of a `wait_for_var` (released at dispatch, never run).
//! The dispatcher sorts a ready op by its payload (`ReadyOp::try_map`), so that what executes
//! an op takes a `ReadyOp<OpRecord>`, which cannot be a wait.
//!
//! Also here, since they and the record hold each other: the [`Completion`] an async op's
//! function takes (it holds the ready op; `completion.rs` completes it), and the shared part of
//! a reusable operator (MXNet's `NewOperator`: its function, vars and property, held by its
//! [`Operator`](crate::Operator) handles and by every pending push of it).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use depengine_graph::{ReadyOp, Var};

use crate::context::{Context, FnProperty, RunContext};
use crate::failure::{BoxError, FailureCause, OpFailure};
use crate::name::OpName;
pub(crate) use crate::op::block_key::BlockKey;
use crate::op::plan::{FinishPlanOp, PlanInner};
use crate::op::segment::Segment;
pub(crate) use crate::op::sync_fn::SyncFn;
use crate::plan::chain::ReplayLink;
use crate::profile::recorder::{ProfiledOp, Started};
use crate::wait::deadlock::WaitOneShot;

/// A one-shot async op function.
pub(crate) type AsyncFn = Box<dyn FnOnce(RunContext, Completion) + Send>;

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

/// Where an async op's completion goes: the engine that runs the op. A trait object, so that
/// what an op is (this module) does not depend on how the engine runs it (`run/`).
pub(crate) trait FinishAsync: Send + Sync {
    /// Completes `op` with `outcome` (recording it for the profiler if it `started` a profiled
    /// run), releasing its dependents.
    fn finish_async(
        self: Arc<Self>,
        op: ReadyOp<OpRecord>,
        started: Option<Started>,
        outcome: Result<(), OpFailure>,
    );
}

/// Completes an async op. Consumed by [`complete`](Self::complete) (or [`ok`](Self::ok),
/// [`fail`](Self::fail)), so an op completes at most once; dropped without completing, it
/// completes the op with [`FailureCause::CompletionDropped`] (or [`FailureCause::Panic`] when
/// dropped by a panic), so a forgotten completion is an error, never a hang. Only
/// `std::mem::forget` can leak it, and then waits on the op's vars never return.
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
///
/// use depengine::{Completion, Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let var = engine.new_var()?;
/// let (tx, rx) = mpsc::channel::<Completion>();
/// engine.op("download").writes([var]).push_async(move |_, done| tx.send(done).unwrap())?;
/// let done = rx.recv().unwrap(); // the op returned; it runs until `done` completes
/// assert_eq!(done.op_name(), "download");
///
/// // Completed once, from any thread: `ok`, `fail` or `complete`.
/// std::thread::spawn(move || done.fail("connection reset")).join().unwrap();
/// let error = engine.wait_for_var(var).unwrap_err();
/// assert_eq!(error.to_string(), "op `download` failed: connection reset");
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "an async op must complete its token (dropping it fails the op)"]
pub struct Completion {
    /// What it completes; `None` once completed.
    pub(super) target: Option<Completes>,
    /// When the op's function started, if the profiler records it.
    pub(super) started: Option<Started>,
}

/// The op a [`Completion`] completes.
pub(super) enum Completes {
    /// A pushed op, run by `engine`; `released` is its frame flag (`thread/frame.rs`), set
    /// before the op's vars are released, so that its function, if still running, no longer
    /// counts as holding them.
    Op {
        engine: Arc<dyn FinishAsync>,
        op: ReadyOp<OpRecord>,
        released: Arc<AtomicBool>,
    },
    /// An op of a replay, whose replay holds the plan's vars until all its ops are done.
    PlanOp {
        replay: Arc<dyn FinishPlanOp>,
        op: u32,
    },
}

/// What runs when the op is executed.
pub(crate) enum OpFn {
    Sync(SyncFn),
    Async(AsyncFn),
    /// A push of a reusable operator.
    Operator(Arc<OperatorDef>),
    /// A bulk segment: sync ops run one after the other (`run/bulk/mod.rs`).
    Segment(Arc<Segment>),
    /// A replay of a captured plan (`run/replay/`), and where replays queue behind it.
    Replay(Arc<PlanInner>, Arc<ReplayLink>),
}

impl OpFn {
    /// Whether the op's work is what its function launches before returning (a sync function,
    /// or a sync operator's): on a GPU, work on the worker's stream, which a stream wait orders
    /// behind launched ops. An async function's work is whatever its `Completion` says.
    pub(crate) fn is_sync(&self) -> bool {
        match self {
            OpFn::Sync(_) | OpFn::Segment(_) => true,
            OpFn::Async(_) | OpFn::Replay(..) => false,
            OpFn::Operator(operator) => matches!(operator.func, OperatorFn::Sync(_)),
        }
    }
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
}

impl Route {
    /// The CPU block an op of this route on `context` runs on, if one.
    #[inline]
    pub(crate) fn block_key(self, context: Context) -> Option<BlockKey> {
        match self {
            Route::Pooled => Some(BlockKey::Pooled),
            Route::PooledCopy => Some(BlockKey::PooledCopy),
            Route::Cpu => Some(BlockKey::Cpu(context.device_id())),
            _ => None,
        }
    }
}

/// What the graph stores with one op: 56 bytes (the wait's one-shot fits beside the record's
/// fields, in a value the record's own fields never take), so that with the graph's dependency
/// list a parked op's slot is 112 bytes (see `docs/graph.md`).
pub(crate) enum Payload {
    /// An op to run.
    Op(OpRecord),
    /// `wait_for_var`'s write of the var: released when it becomes ready, never run.
    Wait(Arc<WaitOneShot>),
}

impl Payload {
    /// The record of an op to run, or the one-shot of a wait (for `ReadyOp::try_map`).
    #[inline]
    pub(crate) fn into_op(self) -> Result<OpRecord, Arc<WaitOneShot>> {
        match self {
            Payload::Op(record) => Ok(record),
            Payload::Wait(one_shot) => Err(one_shot),
        }
    }

    /// The one-shot of a `wait_for_var` op.
    pub(crate) fn wait_one_shot(&self) -> Option<&Arc<WaitOneShot>> {
        match self {
            Payload::Wait(one_shot) => Some(one_shot),
            Payload::Op(_) => None,
        }
    }

    /// The op's name, for stall warnings.
    pub(crate) fn name(&self) -> &str {
        match self {
            Payload::Op(record) => record.name.as_str(),
            Payload::Wait(_) => "wait_for_var",
        }
    }
}

/// The record of an op to run: 56 bytes (see [`Payload`]).
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
        self.route.block_key(self.context)
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

    /// The segment this record stands for, taken out of it; `None` (the record unchanged) for
    /// any other op.
    pub(crate) fn take_segment(&mut self) -> Option<Arc<Segment>> {
        match self.func.take() {
            Some(OpFn::Segment(segment)) => Some(segment),
            other => {
                self.func = other;
                None
            }
        }
    }

    /// Whether this is the op of the replay `link`.
    pub(crate) fn is_replay(&self, link: &ReplayLink) -> bool {
        matches!(&self.func, Some(OpFn::Replay(_, own)) if std::ptr::eq(Arc::as_ptr(own), link))
    }

    /// The plan and link of a replay's op, taken out of the record.
    pub(crate) fn take_replay(&mut self) -> Option<(Arc<PlanInner>, Arc<ReplayLink>)> {
        match self.func.take() {
            Some(OpFn::Replay(plan, link)) => Some((plan, link)),
            other => {
                self.func = other;
                None
            }
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

    /// The record crosses between cores with every op and, as the payload, is stored in every
    /// parked op's slot: 56 bytes (with the graph's 40-byte dependency list, a ready op is 104
    /// bytes and a parked op's slot 112, link included: depengine-graph's
    /// `op_slot_of_a_56_byte_payload_is_112_bytes`). A wait's one-shot takes no room of its own.
    #[test]
    fn op_record_is_56_bytes() {
        assert_eq!(size_of::<Route>(), 1);
        assert_eq!(size_of::<OpRecord>(), 56);
        assert_eq!(size_of::<Payload>(), 56);
        assert_eq!(size_of::<depengine_graph::ReadyOp<OpRecord>>(), 104);
        assert_eq!(size_of::<depengine_graph::ReadyOp<Payload>>(), 104);
    }
}
