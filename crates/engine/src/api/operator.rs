//! Reusable operators: an op function with its vars and property, created once and pushed many
//! times (MXNet's `NewOperator` / `Push` / `DeleteOperator`).

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use depengine_graph::Var;

use crate::api::Engine;
use crate::context::{FnProperty, RunContext};
use crate::error::{EngineError, Result};
use crate::op::record::Completion;
use crate::op::record::{OperatorDef, OperatorFn};
use crate::op::result::IntoOpResult;

/// A reusable operator, from [`Engine::operator`]. Cloning shares it; pushes hold it alive until
/// they complete, so [`Engine::delete_operator`] never frees it under a pending push.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// use depengine::{Context, Engine, EngineConfig, EngineError};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let var = engine.new_var()?;
/// let runs = Arc::new(AtomicU32::new(0));
/// let counter = Arc::clone(&runs);
/// let step = engine.operator("step").writes([var]).build_sync(move |_| {
///     counter.fetch_add(1, Ordering::Relaxed);
/// })?;
/// assert_eq!((step.name(), step.writes()), ("step", &[var][..]));
/// for _ in 0..3 {
///     engine.push(&step, Context::cpu(0), 0)?;
/// }
/// engine.wait_for_var(var)?;
/// assert_eq!(runs.load(Ordering::Relaxed), 3);
///
/// engine.delete_operator(step.clone())?;
/// assert!(step.is_deleted());
/// let refused = engine.push(&step, Context::cpu(0), 0);
/// assert!(matches!(refused, Err(EngineError::OperatorDeleted { name }) if name == "step"));
/// # Ok::<(), EngineError>(())
/// ```
#[derive(Clone)]
pub struct Operator {
    pub(crate) def: Arc<OperatorDef>,
}

impl Operator {
    /// The operator's name.
    pub fn name(&self) -> &str {
        self.def.name.as_str()
    }

    /// The vars it reads.
    pub fn reads(&self) -> &[Var] {
        &self.def.reads
    }

    /// The vars it writes.
    pub fn writes(&self) -> &[Var] {
        &self.def.writes
    }

    /// Whether it was deleted.
    pub fn is_deleted(&self) -> bool {
        // Relaxed: see `OperatorDef::deleted`.
        self.def.deleted.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operator")
            .field("name", &self.def.name)
            .field("reads", &self.def.reads)
            .field("writes", &self.def.writes)
            .field("property", &self.def.property)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Operator`]: `engine.operator("name").reads(..).writes(..).build_sync(f)`.
///
/// # Examples
///
/// ```
/// use depengine::{Context, Engine, EngineConfig, EngineError, FnProperty};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
/// let (input, output) = (engine.new_var()?, engine.new_var()?);
/// // The var lists are checked once, when the operator is built.
/// let bad = engine.operator("bad").reads([input]).writes([input]).build_sync(|_| {});
/// assert!(matches!(bad, Err(EngineError::ReadWriteConflict { var, .. }) if var == input));
///
/// let copy = engine
///     .operator("copy")
///     .reads([input])
///     .writes([output])
///     .prop(FnProperty::Async)
///     .build_async(|_, done| {
///         std::thread::spawn(move || done.ok()); // completes from another thread
///     })?;
/// assert_eq!((copy.reads(), copy.writes()), (&[input][..], &[output][..]));
/// engine.push(&copy, Context::cpu(0), 0)?;
/// engine.wait_for_var(output)?;
/// # Ok::<(), EngineError>(())
/// ```
#[must_use = "an operator builder does nothing until built"]
pub struct OperatorBuilder<'e> {
    engine: &'e Engine,
    name: Cow<'static, str>,
    reads: Vec<Var>,
    writes: Vec<Var>,
    property: FnProperty,
    profiled: bool,
}

impl<'e> OperatorBuilder<'e> {
    pub(crate) fn new(engine: &'e Engine, name: Cow<'static, str>) -> Self {
        OperatorBuilder {
            engine,
            name,
            reads: Vec::new(),
            writes: Vec::new(),
            property: FnProperty::Normal,
            profiled: false,
        }
    }

    /// The vars every push reads, replacing any given before (as [`OpBuilder::reads`]).
    ///
    /// [`OpBuilder::reads`]: crate::OpBuilder::reads
    pub fn reads<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.reads = vars.into_iter().map(|var| *var.borrow()).collect();
        self
    }

    /// The vars every push writes, replacing any given before.
    pub fn writes<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.writes = vars.into_iter().map(|var| *var.borrow()).collect();
        self
    }

    /// The operator's property.
    pub fn prop(mut self, property: FnProperty) -> Self {
        self.property = property;
        self
    }

    /// Marks every push of the operator for the profiler (see [`OpBuilder::profiled`]).
    ///
    /// [`OpBuilder::profiled`]: crate::OpBuilder::profiled
    pub fn profiled(mut self) -> Self {
        self.profiled = true;
        self
    }

    /// An operator running `func` synchronously on each push. `func` returns `()` or
    /// `Result<(), BoxError>`, as an op's function does ([`IntoOpResult`]).
    ///
    /// # Errors
    ///
    /// [`EngineError::DuplicateVar`] or [`EngineError::ReadWriteConflict`] for bad var lists.
    pub fn build_sync<F, R>(self, func: F) -> Result<Operator>
    where
        F: Fn(RunContext) -> R + Send + Sync + 'static,
        R: IntoOpResult,
    {
        self.build(OperatorFn::Sync(Box::new(move |run| {
            func(run).into_op_result()
        })))
    }

    /// An operator running `func` on each push, which completes the token (possibly later, from
    /// another thread).
    ///
    /// # Errors
    ///
    /// As [`build_sync`](Self::build_sync).
    pub fn build_async<F>(self, func: F) -> Result<Operator>
    where
        F: Fn(RunContext, Completion) + Send + Sync + 'static,
    {
        self.build(OperatorFn::Async(Box::new(func)))
    }

    fn build(self, func: OperatorFn) -> Result<Operator> {
        let state = self.engine.state();
        check_lists(&self.reads, &self.writes)
            .map_err(|error| state.named(error, Some(&self.name)))?;
        Ok(Operator {
            def: Arc::new(OperatorDef {
                engine: self.engine.id(),
                name: self.name.into(),
                reads: self.reads.into_boxed_slice(),
                writes: self.writes.into_boxed_slice(),
                property: self.property,
                profiled: self.profiled,
                func,
                deleted: AtomicBool::new(false),
            }),
        })
    }
}

/// Rejects a var listed twice or in both lists (the graph checks again at each push).
fn check_lists(reads: &[Var], writes: &[Var]) -> Result<()> {
    for (i, &var) in reads.iter().enumerate() {
        if reads[..i].contains(&var) {
            return Err(EngineError::duplicate_var(var));
        }
        if writes.contains(&var) {
            return Err(EngineError::read_write_conflict(var));
        }
    }
    for (i, &var) in writes.iter().enumerate() {
        if writes[..i].contains(&var) {
            return Err(EngineError::duplicate_var(var));
        }
    }
    Ok(())
}
