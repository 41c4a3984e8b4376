//! [`Plan`]: ops captured once ([`Engine::capture`](crate::Engine::capture)) and replayed
//! many times ([`Engine::replay`](crate::Engine::replay)) at the cost of a static graph.
//!
//! A capture (`api/capture.rs`) records each op with its vars and its function (`Fn`: it runs
//! once per replay) and computes the plan's dependencies once (`plan/deps.rs`). A replay is one
//! op of the engine on the plan's vars (those it only reads as reads, the others as writes),
//! whose payload is the plan: it waits for the ops pushed before it on those vars, and the ops
//! pushed after wait for it. When it runs, the plan's ops are released by counters straight
//! onto the CPU workers, or their device's executor for a GPU op (`run/replay/`), and it
//! completes each var it writes with the outcome of the plan's last writer of that var.

use std::fmt;
use std::sync::Arc;

use depengine_device::Recording;
use depengine_graph::Var;

use crate::context::{Context, RunContext};
use crate::failure::{BoxError, FailureCause, OpFailure};
use crate::name::OpName;
use crate::op::block_key::BlockKey;
use crate::op::vars::OpVars;
use crate::plan::chain::Chain;
use crate::plan::deps::PlanDeps;
use crate::profile::recorder::Started;

/// The function of a captured op: called once per replay, with the op's vars (where a typed
/// op finds its data's cells, `data/access.rs`).
pub(crate) enum PlanFn {
    /// Done when it returns.
    Sync(Box<SyncPlanFn>),
    /// Done when it completes the `Completion` made of its `PlanOpDone`, possibly after it
    /// returned.
    Async(Box<AsyncPlanFn>),
    /// Sync GPU ops recorded as one device graph (`op/gpu_graphs.rs`): done when the device
    /// is done with their work.
    DeviceGraph(Box<GpuGraph>),
}

/// Sync GPU ops of a plan captured one after another on one device executor, replayed as one
/// op whose work the executor records at its first run and launches again at each later one.
pub(crate) struct GpuGraph {
    /// The ops, in capture order.
    pub(crate) members: Box<[GraphMember]>,
    /// What the executor recorded of their work.
    pub(crate) recording: Arc<Recording>,
}

/// A captured sync function.
pub(crate) type SyncPlanFn = dyn Fn(RunContext, &dyn OpVars) -> Result<(), BoxError> + Send + Sync;
/// A captured async function.
pub(crate) type AsyncPlanFn = dyn Fn(RunContext, &dyn OpVars, PlanOpDone) + Send + Sync;

/// What a replayed async op completes: op `op` of a replay. The
/// [`Completion`](crate::Completion) its function receives is made of it
/// (`Completion::of_plan_op`); dropped before that (a panic on the way), it fails the op, as
/// a dropped `Completion` does, so that the replay still ends.
pub(crate) struct PlanOpDone {
    /// `None` once taken into a `Completion`.
    pub(crate) replay: Option<Arc<dyn FinishPlanOp>>,
    pub(crate) op: u32,
    /// When its function started, if the profiler records it.
    pub(crate) started: Option<Started>,
}

impl Drop for PlanOpDone {
    fn drop(&mut self) {
        if let Some(replay) = self.replay.take() {
            let cause = if std::thread::panicking() {
                FailureCause::Panic("the op panicked before completing".to_owned())
            } else {
                FailureCause::CompletionDropped
            };
            let failure = OpFailure::new(replay.plan_op_name(self.op).to_cow(), cause);
            replay.finish_plan_op(self.op, self.started.take(), Err(failure));
        }
    }
}

/// Where a replayed async op's completion goes: its replay (`run/replay/`), a trait object
/// so that what an op is (this module) does not depend on how a replay runs (`run/`).
pub(crate) trait FinishPlanOp: Send + Sync {
    /// Completes the plan's op `op` with `outcome` (recording it for the profiler if it
    /// `started` a profiled run), releasing its dependents in the plan.
    fn finish_plan_op(
        self: Arc<Self>,
        op: u32,
        started: Option<Started>,
        outcome: Result<(), OpFailure>,
    );

    /// The name of the plan's op `op`.
    fn plan_op_name(&self, op: u32) -> &OpName;
}

/// A plan of ops captured by [`Engine::capture`](crate::Engine::capture), replayed by
/// [`Engine::replay`](crate::Engine::replay) on the engine that captured it. Cloning it is
/// cheap (a reference count); a replay keeps it alive until it completes.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let (a, b) = (engine.new_var()?, engine.new_var()?);
/// let runs = Arc::new(AtomicU32::new(0));
/// let counted = Arc::clone(&runs);
/// let plan = engine.capture("step", |plan| {
///     plan.op("produce").writes([a]).push_sync(|_| {})?;
///     plan.op("consume").reads([a]).writes([b]).push_sync(move |_| {
///         counted.fetch_add(1, Ordering::Relaxed);
///     })?;
///     Ok(())
/// })?;
/// for _ in 0..3 {
///     engine.replay(&plan)?;
/// }
/// engine.wait_for_var(b)?;
/// assert_eq!(runs.load(Ordering::Relaxed), 3);
/// assert_eq!(plan.len(), 2);
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[derive(Clone)]
pub struct Plan {
    pub(crate) inner: Arc<PlanInner>,
}

/// What a plan holds.
pub(crate) struct PlanInner {
    pub(crate) name: Arc<str>,
    /// The name of its replays' op: `replay <name>`.
    pub(crate) replay_name: OpName,
    /// Where its replays' op runs: its first CPU op's context.
    pub(crate) context: Context,
    /// The GPU contexts its ops run on, each once: a replay is refused as a push on one would
    /// be (a device lost since the capture).
    pub(crate) devices: Box<[Context]>,
    /// The engine that captured it (`EngineState::id`).
    pub(crate) engine: u64,
    pub(crate) ops: Box<[PlanOp]>,
    /// How many ops were captured (`ops` holds a device graph's as one).
    pub(crate) captured: usize,
    pub(crate) deps: PlanDeps,
    /// The roots (`PlanDeps::roots`), by where they run.
    pub(crate) roots: Box<[RootGroup]>,
    /// Captured on the naive engine: its CPU ops run on the threads that release them, from
    /// its replays' inline queue (`run/replay/`); else each runs on a block.
    pub(crate) inline: bool,
    /// Its last pushed replay, on which replays queue (`plan/chain.rs`).
    pub(crate) chain: Chain,
}

/// The roots of a plan that run in one place.
pub(crate) struct RootGroup {
    pub(crate) target: Target,
    pub(crate) ops: Box<[u32]>,
}

/// Where a captured op runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// On a CPU block.
    Block(BlockKey),
    /// On the thread that releases it (the naive engine's ops, GPU ones included).
    Inline,
    /// On its device's executor (the copy executor if `copy`): a GPU op, done when the
    /// device is done with the work its function launched.
    Device { copy: bool },
}

/// A sync GPU op of a [`GpuGraph`].
pub(crate) struct GraphMember {
    pub(crate) name: OpName,
    pub(crate) func: Box<SyncPlanFn>,
    pub(crate) run: RunContext,
    /// Its reads and writes, as named.
    pub(crate) reads: Box<[Var]>,
    pub(crate) writes: Box<[Var]>,
}

/// One captured op.
pub(crate) struct PlanOp {
    pub(crate) name: OpName,
    pub(crate) func: PlanFn,
    pub(crate) run: RunContext,
    pub(crate) target: Target,
    /// Marked for the profiler (`ProfileMode::Marked`).
    pub(crate) profiled: bool,
    /// Its reads and writes, as named (a typed op's data last, `data/typed_capture.rs`).
    pub(crate) reads: Box<[Var]>,
    pub(crate) writes: Box<[Var]>,
}

impl Plan {
    /// The name it was captured with.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// How many ops it holds, as captured (each op of a device graph counted).
    pub fn len(&self) -> usize {
        self.inner.captured
    }

    /// Whether it holds no op.
    pub fn is_empty(&self) -> bool {
        self.inner.ops.is_empty()
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("name", &self.inner.name)
            .field("ops", &self.inner.captured)
            .field("reads", &self.inner.deps.reads)
            .field("writes", &self.inner.deps.writes)
            .finish()
    }
}
