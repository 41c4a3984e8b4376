//! [`OpBuilder`]: `engine.op("name").reads(&[a]).writes(&[b]).on(ctx).priority(p).push_sync(f)`.

use std::borrow::Cow;
use std::fmt;

use depengine_graph::Var;

use crate::context::{Context, FnProperty, RunContext};
use crate::engine::Engine;
use crate::error::Result;
use crate::op::completion::Completion;
use crate::op::record::{OpFn, OpRecord};
use crate::op::result::IntoOpResult;

/// Describes one op to push; from [`Engine::op`]. Nothing happens until a `push_*` method.
#[must_use = "an op builder pushes nothing until push_sync or push_async"]
pub struct OpBuilder<'e, 'v> {
    engine: &'e Engine,
    name: Cow<'static, str>,
    reads: &'v [Var],
    writes: &'v [Var],
    context: Context,
    priority: i32,
    property: FnProperty,
    profiled: bool,
}

impl<'e, 'v> OpBuilder<'e, 'v> {
    pub(crate) fn new(engine: &'e Engine, name: Cow<'static, str>) -> Self {
        OpBuilder {
            engine,
            name,
            reads: &[],
            writes: &[],
            context: Context::cpu(0),
            priority: 0,
            property: FnProperty::Normal,
            profiled: false,
        }
    }

    /// The vars the op reads (concurrently with other reads).
    pub fn reads(mut self, vars: &'v [Var]) -> Self {
        self.reads = vars;
        self
    }

    /// The vars the op writes (alone, in push order).
    pub fn writes(mut self, vars: &'v [Var]) -> Self {
        self.writes = vars;
        self
    }

    /// Where it runs (default `Context::cpu(0)`).
    pub fn on(mut self, context: Context) -> Self {
        self.context = context;
        self
    }

    /// Its priority among ready ops in priority queues (higher first; default 0).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Its property (default `Normal`).
    pub fn prop(mut self, property: FnProperty) -> Self {
        self.property = property;
        self
    }

    /// Marks the op for the profiler: recorded in [`ProfileMode::Marked`] too (MXNet's
    /// `profiling` argument of `Push`). In [`ProfileMode::All`] every op is recorded anyway.
    ///
    /// [`ProfileMode::Marked`]: crate::ProfileMode::Marked
    /// [`ProfileMode::All`]: crate::ProfileMode::All
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
    pub fn push_sync<F, R>(self, func: F) -> Result<()>
    where
        F: FnOnce(RunContext) -> R + Send + 'static,
        R: IntoOpResult,
    {
        let func = OpFn::Sync(Box::new(move |run| func(run).into_op_result()));
        self.push(func)
    }

    /// Pushes an op that is done when it completes its [`Completion`] token, possibly from
    /// another thread, after `func` returned.
    ///
    /// # Errors
    ///
    /// As [`push_sync`](Self::push_sync).
    pub fn push_async<F>(self, func: F) -> Result<()>
    where
        F: FnOnce(RunContext, Completion) + Send + 'static,
    {
        self.push(OpFn::Async(Box::new(func)))
    }

    fn push(self, func: OpFn) -> Result<()> {
        let state = self.engine.state();
        let route = state.route(self.context, self.property)?;
        let record = OpRecord {
            name: self.name.into(),
            func: Some(func),
            context: self.context,
            property: self.property,
            priority: self.priority,
            route,
            profiled: self.profiled,
        };
        state.push_record(self.reads, self.writes, record)
    }
}

impl fmt::Debug for OpBuilder<'_, '_> {
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
