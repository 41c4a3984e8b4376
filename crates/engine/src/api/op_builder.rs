//! [`OpBuilder`]: `engine.op("name").reads(&[a]).writes([b]).on(ctx).priority(p).push_sync(f)`.
//!
//! The builder owns its var lists, so that it can be kept in a variable and changed step by
//! step (`op = op.reads(&vars)`, with `vars` a temporary). Both lists share one buffer, reads
//! first, holding up to [`INLINE_VARS`] vars in all without allocating: pushing an op on a
//! handful of vars allocates nothing here (nor in the graph, up to 4 vars in all; see
//! `Graph::push`). The builder is moved at every step of the chain, so it is kept small: 120
//! bytes, which the compiler moves with a few vector moves instead of a call to `memcpy`
//! (`docs/decisions.md`, "A small op builder").

use std::borrow::{Borrow, Cow};
use std::fmt;

use depengine_graph::Var;
use smallvec::SmallVec;

use crate::api::Engine;
use crate::context::{Context, FnProperty, RunContext};
use crate::error::{EngineError, Result};
use crate::name::OpName;
use crate::op::record::Completion;
use crate::op::record::{OpFn, OpRecord, SyncFn};
use crate::op::result::IntoOpResult;

/// Vars (reads and writes together) the builder holds without allocating.
const INLINE_VARS: usize = 5;

/// The builder's reads and writes, in one buffer: the reads, then the writes.
#[derive(Default)]
struct VarLists {
    vars: SmallVec<[Var; INLINE_VARS]>,
    /// How many of `vars` are reads.
    reads: usize,
}

impl VarLists {
    fn reads(&self) -> &[Var] {
        &self.vars[..self.reads]
    }

    fn writes(&self) -> &[Var] {
        &self.vars[self.reads..]
    }

    /// Replaces the reads (`writes`: the writes) but the last `keep` with `vars`, which go
    /// before the kept ones.
    #[inline]
    fn replace<I>(&mut self, writes: bool, keep: usize, vars: I)
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        let (start, end) = if writes {
            (self.reads, self.vars.len())
        } else {
            (0, self.reads)
        };
        debug_assert!(keep <= end - start, "keeps only vars appended to this list");
        let end = end - keep;
        let before = self.vars.len();
        if end == before {
            // The list's end is the buffer's (the writes, or reads before any write): the new
            // vars are written where they go, one `push` each (`extend` first reserves for the
            // iterator's size hint: more instructions for the one or two vars of most ops).
            self.vars.truncate(start);
            for var in vars {
                self.vars.push(*var.borrow());
            }
        } else {
            let tail: SmallVec<[Var; INLINE_VARS]> = self.vars.drain(end..).collect();
            self.vars.truncate(start);
            self.vars.extend(vars.into_iter().map(|var| *var.borrow()));
            self.vars.extend(tail);
        }
        if !writes {
            // The writes moved by as many vars as the reads grew (or shrank).
            self.reads = self.reads + self.vars.len() - before;
        }
    }

    /// Appends `var` to the writes (`writes`) or the reads.
    #[inline]
    fn push(&mut self, var: Var, writes: bool) {
        if writes {
            self.vars.push(var);
        } else {
            self.vars.insert(self.reads, var);
            self.reads += 1;
        }
    }
}

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
    name: OpName,
    vars: VarLists,
    context: Context,
    priority: i32,
    property: FnProperty,
    profiled: bool,
}

impl<'e> OpBuilder<'e> {
    #[inline]
    pub(crate) fn new(engine: &'e Engine, name: Cow<'static, str>) -> Self {
        Self::named(engine, OpName::from(name))
    }

    /// A builder of an op named `name`.
    #[inline]
    pub(crate) fn named(engine: &'e Engine, name: OpName) -> Self {
        OpBuilder {
            engine,
            name,
            vars: VarLists::default(),
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
        self.vars.replace(false, 0, vars);
        self
    }

    /// The vars the op writes (alone, in push order), replacing any given before.
    #[inline]
    pub fn writes<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.vars.replace(true, 0, vars);
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
        self.vars.push(var, writes);
    }

    /// Replaces the reads (`writes`: the writes) but the last `keep`, which stay last: a typed
    /// op's plain vars replaced before its data's.
    pub(crate) fn replace_before<I>(&mut self, writes: bool, keep: usize, vars: I)
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.vars.replace(writes, keep, vars);
    }

    /// `error`, refusing this op's push, with the op's (and its vars') names.
    #[cold]
    pub(crate) fn refuse(&self, error: EngineError) -> EngineError {
        self.engine.state().named(error, Some(self.name.as_str()))
    }

    #[inline]
    pub(crate) fn push(self, func: OpFn) -> Result<()> {
        let state = self.engine.state();
        // Kept for a push's errors (a literal is copied; an owned name costs a reference count
        // update): the graph drops the record of an op it refuses.
        let name = self.name;
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
            .push_record(self.vars.reads(), self.vars.writes(), record)
            .map_err(named)
    }
}

impl fmt::Debug for OpBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpBuilder")
            .field("name", &self.name)
            .field("reads", &self.vars.reads())
            .field("writes", &self.vars.writes())
            .field("context", &self.context)
            .field("priority", &self.priority)
            .field("property", &self.property)
            .field("profiled", &self.profiled)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{OpBuilder, VarLists};
    use depengine_graph::{Graph, Var};

    fn vars(n: usize) -> Vec<Var> {
        let graph = Graph::<(), ()>::new();
        (0..n).map(|_| graph.new_var().unwrap()).collect()
    }

    #[test]
    fn the_builder_stays_below_a_memcpy_call() {
        assert!(std::mem::size_of::<OpBuilder<'static>>() <= 120);
    }

    #[test]
    fn reads_and_writes_share_one_buffer_in_any_order() {
        let v = vars(9);
        let mut lists = VarLists::default();
        lists.replace(true, 0, &v[0..2]);
        lists.replace(false, 0, &v[2..5]);
        assert_eq!((lists.reads(), lists.writes()), (&v[2..5], &v[0..2]));
        // Replacing the reads with fewer, then more, moves the writes along.
        lists.replace(false, 0, &v[5..6]);
        assert_eq!((lists.reads(), lists.writes()), (&v[5..6], &v[0..2]));
        lists.replace(false, 0, &v[3..9]);
        assert_eq!((lists.reads(), lists.writes()), (&v[3..9], &v[0..2]));
        lists.replace(true, 0, &v[..0]);
        assert_eq!((lists.reads(), lists.writes()), (&v[3..9], &[][..]));
        lists.replace(false, 0, &v[..0]);
        assert_eq!((lists.reads(), lists.writes()), (&[][..], &[][..]));
    }

    #[test]
    fn appended_vars_stay_last_when_the_plain_ones_are_replaced() {
        let v = vars(8);
        let mut lists = VarLists::default();
        lists.replace(false, 0, &v[0..1]);
        lists.replace(true, 0, &v[1..2]);
        // A typed op's data: a read and a write, after the plain vars of each list.
        lists.push(v[2], false);
        lists.push(v[3], true);
        assert_eq!(lists.reads(), [v[0], v[2]]);
        assert_eq!(lists.writes(), [v[1], v[3]]);
        lists.replace(false, 1, &v[4..6]);
        lists.replace(true, 1, &v[6..8]);
        assert_eq!(lists.reads(), [v[4], v[5], v[2]]);
        assert_eq!(lists.writes(), [v[6], v[7], v[3]]);
        lists.replace(false, 1, &v[..0]);
        assert_eq!(lists.reads(), [v[2]]);
        assert_eq!(lists.writes(), [v[6], v[7], v[3]]);
    }
}
