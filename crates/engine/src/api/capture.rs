//! [`Capture`] and [`CaptureOp`]: how a plan is recorded, and [`Engine::capture`] and
//! [`Engine::replay`].

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::sync::Arc;

use depengine_graph::Var;

use crate::api::Engine;
use crate::config::EngineKind;
use crate::context::{Context, FnProperty, RunContext};
use crate::error::{EngineError, Result};
use crate::failure::BoxError;
use crate::name::OpName;
use crate::op::gpu_graphs;
use crate::op::plan::{Plan, PlanFn, PlanInner, PlanOp, RootGroup, Target};
use crate::op::record::{Completion, Route};
use crate::op::result::IntoOpResult;
use crate::plan::chain::Chain;
use crate::plan::deps::PlanDeps;
use crate::run::EngineState;

/// The most ops one plan holds: ops are numbered by `u32`, with one counter past them
/// (`run/replay/`).
const MAX_PLAN_OPS: usize = u32::MAX as usize - 1;

/// The ops of a plan being captured, as [`Engine::capture`]'s closure receives it.
///
/// # Examples
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let var = engine.new_var()?;
/// let plan = engine.capture("twice", |plan| {
///     plan.op("first").writes([var]).push_sync(|_| {})?;
///     plan.op("second").writes([var]).push_sync(|_| {})?;
///     Ok(())
/// })?;
/// assert_eq!(plan.len(), 2);
/// # Ok::<(), depengine::EngineError>(())
/// ```
pub struct Capture<'e> {
    engine: &'e Engine,
    ops: Vec<PlanOp>,
    /// Whether its sync GPU ops are recorded as device graphs (`record_gpu_work`).
    record_gpu_work: bool,
}

impl Capture<'_> {
    /// Describes one op of the plan: as [`Engine::op`], its function run once per replay.
    pub fn op(&mut self, name: impl Into<Cow<'static, str>>) -> CaptureOp<'_> {
        CaptureOp {
            ops: &mut self.ops,
            engine: self.engine,
            name: OpName::from(name.into()),
            reads: Vec::new(),
            writes: Vec::new(),
            context: Context::cpu(0),
            priority: 0,
            profiled: false,
            refused: None,
        }
    }
}

impl Capture<'_> {
    /// Records the work of the plan's sync GPU ops as device graphs (CUDA graphs): the ops
    /// captured one after another on one device's executor, up to any other op, make one graph.
    /// The replay that records a graph (the first) calls its functions with a capture stream in
    /// place of their worker's, which records what they launch there instead of running it;
    /// it and every later replay then launch the recorded work once, and the later ones call
    /// none of the functions. Without it, each replay calls every function, and pays each op's
    /// launches.
    ///
    /// What changes for the ops of a graph:
    /// - their functions run at the replay that records them: the first, and again at the next
    ///   replay after a recording that failed (a function's failure, a capture or launch error),
    ///   and once per replay recording beside another (replays of a plan that writes no var
    ///   may overlap); what they do on the host, and a kernel's arguments, are those of then;
    /// - a graph is one op of the plan (named `graph FIRST..LAST` for the profiler): a failure
    ///   of one of its functions, of its recording, or of its work fails every var its ops
    ///   write, and a failure on any var it uses skips it whole;
    /// - work they launch other than on their worker's stream (`RunContext::cuda()`'s) is not
    ///   recorded: it runs when they run only;
    /// - where nothing is recorded, the functions run at each replay, in capture order, still as
    ///   one op: on an executor that does not record (a stand-in device), on the naive engine
    ///   (its GPU ops run inline), and on the CUDA backend with cudarc's event tracking on
    ///   (`CudaBackend::new()`: its waits would break a capture; turn it off with
    ///   `CudaBackend::without_event_tracking`);
    /// - a call that waits for the device inside a recorded function (a synchronize, a copy to
    ///   pageable host memory) breaks the capture: the graph's op fails, at each replay.
    ///
    /// # Safety
    ///
    /// Each replay launches the work recorded at the first, with the device addresses the
    /// functions gave it then, without calling them, on whichever worker of the device runs the
    /// replay. So, for as long as the plan lives:
    /// - every buffer that work uses (device memory, pinned host memory) stays allocated at that
    ///   address: a buffer the functions took from typed data is not replaced nor dropped;
    /// - the functions allocate and free nothing on the stream they are given (an allocation
    ///   there becomes the graph's own memory, which the buffer would then point into), and hand
    ///   nothing the work uses to `CudaRun::drop_after_completion` (it would be freed after the
    ///   first replay);
    /// - the work uses no resource of the worker that recorded it beyond the ops' data (a
    ///   library handle's workspace, a scratch buffer of the worker): another worker may launch
    ///   it beside that worker's own work.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # #[cfg(feature = "cuda")]
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    ///
    /// use depengine::cuda::CudaBackend;
    /// use depengine::{Context, Engine, EngineConfig};
    ///
    /// // SAFETY: the buffers are used only inside ops that name their data.
    /// let backend = unsafe { CudaBackend::without_event_tracking() };
    /// let engine = Engine::new(EngineConfig::default().device_backend(Arc::new(backend)))?;
    /// let x = engine.data(None::<depengine::cuda::cudarc::driver::CudaSlice<f32>>)?;
    /// engine.op("allocate").on(Context::gpu(0)).write(&x).push_sync(|run, x| {
    ///     *x = Some(run.cuda().ok_or("no GPU worker")?.stream().alloc_zeros::<f32>(256)?);
    ///     Ok::<(), depengine::BoxError>(())
    /// })?;
    /// let step = engine.capture("step", |plan| {
    ///     // SAFETY: `x`'s buffer is allocated above and never replaced while the plan lives;
    ///     // the functions only launch on their stream.
    ///     unsafe { plan.record_gpu_work() };
    ///     for k in 0..10 {
    ///         plan.op(format!("kernel {k}")).on(Context::gpu(0)).write(&x).push_sync(
    ///             |run, x| -> Result<(), depengine::BoxError> {
    ///                 let cuda = run.cuda().ok_or("no GPU worker")?;
    ///                 // ... launch a kernel on `cuda.stream()` that updates `x` ...
    ///                 # let _ = (cuda, x);
    ///                 Ok(())
    ///             },
    ///         )?;
    ///     }
    ///     Ok(())
    /// })?;
    /// for _ in 0..100 {
    ///     engine.replay(&step)?; // one graph launch each, the functions called at the first
    /// }
    /// engine.wait_for_all()?;
    /// # Ok(())
    /// # }
    /// # #[cfg(not(feature = "cuda"))]
    /// # fn main() {}
    /// ```
    #[allow(
        unsafe_code,
        reason = "a contract on the caller's buffers: the method itself does nothing unsafe"
    )]
    pub unsafe fn record_gpu_work(&mut self) {
        self.record_gpu_work = true;
    }
}

impl fmt::Debug for Capture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture")
            .field("ops", &self.ops.len())
            .finish_non_exhaustive()
    }
}

/// One op of a plan being captured; from [`Capture::op`]. Nothing is recorded until
/// [`push_sync`](Self::push_sync) or [`push_async`](Self::push_async).
///
/// # Examples
///
/// ```
/// use depengine::{Context, Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let (input, output) = (engine.new_var()?, engine.new_var()?);
/// let plan = engine.capture("copy", |plan| {
///     plan.op("copy").reads([input]).writes([output]).on(Context::cpu(0)).push_sync(|_| {})?;
///     Ok(())
/// })?;
/// engine.replay(&plan)?;
/// engine.wait_for_var(output)?;
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "a captured op is recorded only by push_sync or push_async"]
pub struct CaptureOp<'c> {
    ops: &'c mut Vec<PlanOp>,
    engine: &'c Engine,
    name: OpName,
    reads: Vec<Var>,
    writes: Vec<Var>,
    context: Context,
    priority: i32,
    profiled: bool,
    /// Why `record` refuses the op (data of another engine).
    refused: Option<EngineError>,
}

impl<'c> CaptureOp<'c> {
    /// The vars the op reads, replacing any given before.
    pub fn reads<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.reads = vars.into_iter().map(|var| *var.borrow()).collect();
        self
    }

    /// The vars the op writes, replacing any given before.
    pub fn writes<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.writes = vars.into_iter().map(|var| *var.borrow()).collect();
        self
    }

    /// Where it runs (default `Context::cpu(0)`). A GPU op runs where a pushed one does (a
    /// worker of its device's executor; inline on the naive engine); a sync one is done when
    /// the device is done with the work its function launched there, an async one when its
    /// `Completion` is, and its dependents in the plan wait for that.
    pub fn on(mut self, context: Context) -> Self {
        self.context = context;
        self
    }

    /// The priority its function sees in [`RunContext`] (default 0).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Marks the op for the profiler: recorded in [`ProfileMode::Marked`] too, as
    /// [`OpBuilder::profiled`](crate::OpBuilder::profiled) marks a pushed op.
    ///
    /// [`ProfileMode::Marked`]: crate::ProfileMode::Marked
    pub fn profiled(mut self) -> Self {
        self.profiled = true;
        self
    }

    /// Records the op in the plan (nothing runs): `func` runs once per replay, when the plan's
    /// ops before it on its vars are done. `Err` or a panic fails the op as a pushed op's would.
    ///
    /// # Errors
    ///
    /// As [`OpBuilder::push_sync`](crate::OpBuilder::push_sync) for the same lists and context
    /// (`DuplicateVar`, `ReadWriteConflict`, `DeletedVar`, `ForeignVar`, a CPU block that
    /// cannot start, a device the backend cannot open or that was lost);
    /// [`EngineError::CapacityExhausted`] past `u32::MAX - 1` ops. Nothing is recorded.
    pub fn push_sync<F, R>(self, func: F) -> Result<()>
    where
        F: Fn(RunContext) -> R + Send + Sync + 'static,
        R: IntoOpResult,
    {
        self.record(PlanFn::Sync(Box::new(move |run, _| {
            func(run).into_op_result()
        })))
    }

    /// Records an async op in the plan: on each replay `func` receives a [`Completion`], and
    /// the op is done when it completes, possibly from another thread after `func` returned
    /// (as [`OpBuilder::push_async`](crate::OpBuilder::push_async)); the plan's ops after it
    /// on its vars wait for it, and the replay holds the plan's vars until it is done.
    ///
    /// ```
    /// use depengine::{Engine, EngineConfig};
    ///
    /// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
    /// let (fetched, used) = (engine.new_var()?, engine.new_var()?);
    /// let plan = engine.capture("fetch and use", |plan| {
    ///     plan.op("fetch").writes([fetched]).push_async(|_, done| {
    ///         std::thread::spawn(move || done.ok()); // completed elsewhere, later
    ///     })?;
    ///     plan.op("use").reads([fetched]).writes([used]).push_sync(|_| {})?;
    ///     Ok(())
    /// })?;
    /// engine.replay(&plan)?;
    /// engine.wait_for_var(used)?;
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`push_sync`](Self::push_sync).
    pub fn push_async<F>(self, func: F) -> Result<()>
    where
        F: Fn(RunContext, Completion) + Send + Sync + 'static,
    {
        self.record(PlanFn::Async(Box::new(move |run, _, done| {
            func(run, Completion::of_plan_op(done));
        })))
    }

    /// Records the op with `func` (see [`push_sync`](Self::push_sync)), or refuses it with
    /// `refused` (data of another engine, `data/typed_capture.rs`).
    pub(crate) fn record(self, func: PlanFn) -> Result<()> {
        let state = self.engine.state();
        let named = |error| state.named(error, Some(self.name.as_str()));
        if let Some(error) = self.refused {
            return Err(named(error));
        }
        if self.ops.len() >= MAX_PLAN_OPS {
            return Err(EngineError::CapacityExhausted { what: "op" });
        }
        check_lists(state, &self.reads, &self.writes).map_err(named)?;
        let target = match state
            .route(self.context, FnProperty::Normal)
            .map_err(named)?
        {
            Route::Inline => Target::Inline,
            Route::Device { copy } => Target::Device { copy },
            route => route
                .block_key(self.context)
                .map_or(Target::Inline, Target::Block),
        };
        self.ops.push(PlanOp {
            name: self.name,
            func,
            run: RunContext {
                context: self.context,
                priority: self.priority,
                property: FnProperty::Normal,
            },
            target,
            profiled: self.profiled,
            reads: self.reads.into(),
            writes: self.writes.into(),
        });
        Ok(())
    }

    /// Appends `var` to the writes (`writes`) or the reads: a typed op's data, last.
    pub(crate) fn add_var(&mut self, var: Var, writes: bool) {
        if writes {
            self.writes.push(var);
        } else {
            self.reads.push(var);
        }
    }

    /// Replaces the reads (`writes`: the writes) but the last `keep` with `vars`: a typed op's
    /// plain vars, before its data's.
    pub(crate) fn replace_before<I>(&mut self, writes: bool, keep: usize, vars: I)
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        let list = if writes {
            &mut self.writes
        } else {
            &mut self.reads
        };
        let kept = list.split_off(list.len().saturating_sub(keep));
        list.clear();
        list.extend(vars.into_iter().map(|var| *var.borrow()));
        list.extend(kept);
    }

    /// Refuses the op at `record` with `error`, unless an error came first.
    pub(crate) fn refuse(&mut self, error: EngineError) {
        self.refused.get_or_insert(error);
    }

    /// The engine capturing.
    pub(crate) fn engine(&self) -> &'c Engine {
        self.engine
    }
}

/// The errors a push of an op on `reads` and `writes` would return for its lists.
fn check_lists(state: &EngineState, reads: &[Var], writes: &[Var]) -> Result<()> {
    let twice = |list: &[Var]| {
        (1..list.len()).find_map(|i| list[..i].contains(&list[i]).then_some(list[i]))
    };
    if let Some(var) = twice(reads).or_else(|| twice(writes)) {
        return Err(EngineError::duplicate_var(var));
    }
    if let Some(&var) = reads.iter().find(|var| writes.contains(var)) {
        return Err(EngineError::read_write_conflict(var));
    }
    reads
        .iter()
        .chain(writes)
        .try_for_each(|&var| state.check_var(var))
}

impl fmt::Debug for CaptureOp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureOp")
            .field("name", &self.name)
            .field("reads", &self.reads)
            .field("writes", &self.writes)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Captures a plan: `build` describes its ops with [`Capture::op`], as it would push them
    /// with [`Engine::op`]; nothing runs. Replay it with [`replay`](Self::replay). `build`'s
    /// error ends the capture: an [`EngineError`] it passes on is returned as it is.
    ///
    /// # Errors
    ///
    /// [`EngineError::CaptureFailed`] when `build` returns an error other than an
    /// [`EngineError`] (there is no plan); an `EngineError` it returns (those of
    /// [`CaptureOp::push_sync`] it passes on), as it is.
    pub fn capture<F>(&self, name: impl Into<Cow<'static, str>>, build: F) -> Result<Plan>
    where
        F: FnOnce(&mut Capture<'_>) -> std::result::Result<(), BoxError>,
    {
        let name: Arc<str> = Arc::from(name.into().as_ref());
        let mut capture = Capture {
            engine: self,
            ops: Vec::new(),
            record_gpu_work: false,
        };
        if let Err(error) = build(&mut capture) {
            return Err(match error.downcast::<EngineError>() {
                Ok(error) => *error,
                Err(error) => EngineError::CaptureFailed {
                    plan: name.to_string(),
                    source: Arc::from(error),
                },
            });
        }
        let captured = capture.ops.len();
        let ops = if capture.record_gpu_work {
            gpu_graphs::group(capture.ops)
        } else {
            capture.ops
        };
        let mut deps = PlanDeps::of(ops.iter().map(|op| (&op.reads[..], &op.writes[..])));
        let ops: Box<[PlanOp]> = ops.into();
        // A sync GPU op behind another is released at that one's launch, as when pushed.
        let launches = |op: &PlanOp| {
            matches!(op.target, Target::Device { .. })
                && matches!(op.func, PlanFn::Sync(_) | PlanFn::DeviceGraph(_))
        };
        deps.mark_launches(|from, to| launches(&ops[from as usize]) && launches(&ops[to as usize]));
        let mut roots: Vec<(Target, Vec<u32>)> = Vec::new();
        for &root in &*deps.roots {
            let target = ops[root as usize].target;
            match roots.iter_mut().find(|(place, _)| *place == target) {
                Some((_, group)) => group.push(root),
                None => roots.push((target, vec![root])),
            }
        }
        Ok(Plan {
            inner: Arc::new(PlanInner {
                replay_name: OpName::from(Cow::Owned(format!("replay {name}"))),
                // Its first CPU op's: the replay's op is not a device's.
                context: ops
                    .iter()
                    .map(|op| op.run.context)
                    .find(|context| !context.is_gpu())
                    .unwrap_or(Context::cpu(0)),
                name,
                engine: self.state().id(),
                roots: roots
                    .into_iter()
                    .map(|(target, ops)| RootGroup {
                        target,
                        ops: ops.into(),
                    })
                    .collect(),
                devices: {
                    let mut devices: Vec<Context> = Vec::new();
                    for op in &*ops {
                        if op.run.context.is_gpu() && !devices.contains(&op.run.context) {
                            devices.push(op.run.context);
                        }
                    }
                    devices.into()
                },
                inline: self.state().workers().kind() == EngineKind::Naive,
                ops,
                captured,
                deps,
                chain: Chain::default(),
            }),
        })
    }

    /// Replays `plan`: its ops run as if pushed here, in capture order, as one op on the
    /// plan's vars (the ops pushed before it on those vars run first; those pushed after wait
    /// for it). Each var the plan writes ends with the outcome of the plan's last op that
    /// wrote it. Replays may be queued back to back: on a threaded engine, a replay of a plan
    /// that writes a var, pushed when nothing waits on the plan's vars behind its last pushed
    /// replay, is queued on that one and runs after it on the vars it holds, without the vars
    /// given back between the two.
    ///
    /// # Errors
    ///
    /// [`EngineError::ForeignPlan`] for a plan of another engine; a push's errors, such as
    /// [`EngineError::DeletedVar`] for a var of the plan deleted since the capture, and
    /// [`EngineError::DeviceLost`] for a device of its GPU ops lost since.
    pub fn replay(&self, plan: &Plan) -> Result<()> {
        let inner = &plan.inner;
        if inner.engine != self.state().id() {
            return Err(EngineError::ForeignPlan {
                plan: inner.name.to_string(),
            });
        }
        self.state().push_replay(inner)
    }
}
