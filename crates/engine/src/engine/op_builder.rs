//! [`OpBuilder`]: `engine.op("name").reads(&[a]).writes([b]).on(ctx).priority(p).push_sync(f)`.
//!
//! The builder owns its var lists, so that it can be kept in a variable and changed step by
//! step (`op = op.reads(&vars)`, with `vars` a temporary). Up to [`INLINE_VARS`] vars per list
//! are held inline: pushing an op on a handful of vars allocates nothing here (nor in the graph,
//! up to 4 vars in all; see `Graph::push`).

use std::borrow::{Borrow, Cow};
use std::fmt;

use depengine_graph::Var;
use smallvec::SmallVec;

use crate::context::{Context, FnProperty, RunContext};
use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::name::OpName;
use crate::op::completion::Completion;
use crate::op::record::{OpFn, OpRecord, SyncFn};
use crate::op::result::IntoOpResult;

/// Vars a list of the builder holds without allocating.
const INLINE_VARS: usize = 4;

/// One of the builder's var lists.
type VarList = SmallVec<[Var; INLINE_VARS]>;

/// Describes one op to push; from [`Engine::op`]. Nothing happens until a `push_*` method.
///
/// The var lists are the builder's own (any `IntoIterator` of vars or of `&Var`: `&[a, b]`,
/// `[a, b]`, `&vec`, `vec`, an iterator), so a builder can be kept and extended in steps:
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let inputs = vec![engine.new_var()?, engine.new_var()?];
/// let output = engine.new_var()?;
/// let mut op = engine.op("sum");
/// if !inputs.is_empty() {
///     op = op.reads(&inputs[..1]).reads(inputs.clone()); // the last call wins
/// }
/// op.writes([output]).push_sync(|_| {})?;
/// engine.wait_for_var(output)?;
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "an op builder pushes nothing until push_sync or push_async"]
pub struct OpBuilder<'e> {
    engine: &'e Engine,
    name: Cow<'static, str>,
    reads: VarList,
    writes: VarList,
    context: Context,
    priority: i32,
    property: FnProperty,
    profiled: bool,
}

impl<'e> OpBuilder<'e> {
    #[inline]
    pub(crate) fn new(engine: &'e Engine, name: Cow<'static, str>) -> Self {
        OpBuilder {
            engine,
            name,
            reads: VarList::new(),
            writes: VarList::new(),
            context: Context::cpu(0),
            priority: 0,
            property: FnProperty::Normal,
            profiled: false,
        }
    }

    /// The vars the op reads (concurrently with other reads), replacing any given before.
    #[inline]
    pub fn reads<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        fill(&mut self.reads, vars);
        self
    }

    /// The vars the op writes (alone, in push order), replacing any given before.
    #[inline]
    pub fn writes<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        fill(&mut self.writes, vars);
        self
    }

    /// Where it runs (default `Context::cpu(0)`).
    #[inline]
    pub fn on(mut self, context: Context) -> Self {
        self.context = context;
        self
    }

    /// Its priority among ready ops in priority queues (higher first; default 0).
    #[inline]
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Its property (default `Normal`).
    #[inline]
    pub fn prop(mut self, property: FnProperty) -> Self {
        self.property = property;
        self
    }

    /// Marks the op for the profiler: recorded in [`ProfileMode::Marked`] too (MXNet's
    /// `profiling` argument of `Push`). In [`ProfileMode::All`] every op is recorded anyway.
    ///
    /// [`ProfileMode::Marked`]: crate::ProfileMode::Marked
    /// [`ProfileMode::All`]: crate::ProfileMode::All
    #[inline]
    pub fn profiled(mut self) -> Self {
        self.profiled = true;
        self
    }

    /// Pushes an op that is done when `func` returns. `func` returns `()` or
    /// `Result<(), BoxError>` ([`IntoOpResult`], [`BoxError`](crate::BoxError)): `|_| {}`, `|_| Ok(())`, or
    /// `|_| { fallible()?; Ok(()) }` with any error type. `Err` or a panic fails the op.
    ///
    /// # Errors
    ///
    /// Misuse (bad var lists, deleted or foreign vars, a GPU context without a backend, a shut
    /// down engine): nothing is pushed and `func` is dropped.
    #[inline]
    pub fn push_sync<F, R>(self, func: F) -> Result<()>
    where
        F: FnOnce(RunContext) -> R + Send + 'static,
        R: IntoOpResult,
    {
        let func = OpFn::Sync(SyncFn::new(move |run| func(run).into_op_result()));
        self.push(func)
    }

    /// Pushes an op that is done when it completes its [`Completion`] token, possibly from
    /// another thread, after `func` returned.
    ///
    /// # Errors
    ///
    /// As [`push_sync`](Self::push_sync).
    #[inline]
    pub fn push_async<F>(self, func: F) -> Result<()>
    where
        F: FnOnce(RunContext, Completion) + Send + 'static,
    {
        self.push(OpFn::Async(Box::new(func)))
    }

    /// The engine it pushes to.
    pub(crate) fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// Appends `var` to the writes (`writes`) or the reads: a typed op's data, as named.
    #[inline]
    pub(crate) fn add_var(&mut self, var: Var, writes: bool) {
        if writes {
            self.writes.push(var);
        } else {
            self.reads.push(var);
        }
    }

    /// Replaces the reads (`writes`: the writes) but the last `keep`, which stay last: a typed
    /// op's plain vars replaced before its data's.
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
        debug_assert!(keep <= list.len(), "keeps only vars appended to this list");
        let kept: VarList = list.drain(list.len() - keep..).collect();
        fill(list, vars);
        list.extend(kept);
    }

    /// `error`, refusing this op's push, with the op's (and its vars') names.
    #[cold]
    pub(crate) fn refuse(&self, error: EngineError) -> EngineError {
        self.engine.state().named(error, Some(&self.name))
    }

    #[inline]
    pub(crate) fn push(self, func: OpFn) -> Result<()> {
        let state = self.engine.state();
        // Kept for a push's errors (a literal is copied; an owned name costs a reference count
        // update): the graph drops the record of an op it refuses.
        let name = OpName::from(self.name);
        let named = |error| state.named(error, Some(name.as_str()));
        let route = state.route(self.context, self.property).map_err(named)?;
        let record = OpRecord {
            name: name.clone(),
            func: Some(func),
            context: self.context,
            property: self.property,
            priority: self.priority,
            route,
            profiled: self.profiled,
        };
        state
            .push_record(&self.reads, &self.writes, record)
            .map_err(named)
    }
}

/// Replaces `list` with `vars`, in place: the builder's list is written where it lies (a list
/// built apart and moved in cost a store-forwarding stall per push, `docs/bench-history.md`).
#[inline]
fn fill<I>(list: &mut VarList, vars: I)
where
    I: IntoIterator,
    I::Item: Borrow<Var>,
{
    list.clear();
    list.extend(vars.into_iter().map(|var| *var.borrow()));
}

impl fmt::Debug for OpBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpBuilder")
            .field("name", &self.name)
            .field("reads", &self.reads)
            .field("writes", &self.writes)
            .field("context", &self.context)
            .field("priority", &self.priority)
            .field("property", &self.property)
            .field("profiled", &self.profiled)
            .finish_non_exhaustive()
    }
}
