//! [`TypedOp`]: an op builder that names typed data, whose function receives the data's
//! references (`engine.op("axpy").read(&x).write(&y).push_sync(|_, (x, y)| ...)`).

use std::borrow::Borrow;
use std::fmt;

use depengine_graph::Var;

use crate::context::{Context, FnProperty, RunContext};
use crate::data::access::{AccessList, Append, ReadAccess, WriteAccess, sync_op};
use crate::data::handle::Data;
use crate::data::held::Held;
use crate::engine::op_builder::OpBuilder;
use crate::error::{EngineError, Result};
use crate::op::record::OpFn;
use crate::op::result::IntoOpResult;

/// An op that names typed data ([`Data<T>`]): from [`OpBuilder::read`] or
/// [`OpBuilder::write`], extended by more `read`s and `write`s (up to
/// [`MAX_ACCESSES`](crate::MAX_ACCESSES)) and by the untyped builder's methods (plain vars,
/// context, priority, ...). The op's function receives the references in the order the data
/// were named: one reference alone, or a tuple.
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let (x, y) = (engine.data(vec![1.0_f32; 8])?, engine.data(vec![2.0_f32; 8])?);
/// let done = engine.new_var()?; // a plain var, mixed in
/// engine
///     .op("axpy")
///     .read(&x)
///     .write(&y)
///     .writes([done])
///     .push_sync(|_, (x, y)| {
///         for (y, x) in y.iter_mut().zip(x) {
///             *y += 3.0 * x;
///         }
///     })?;
/// assert_eq!(*engine.read(&y)?, vec![5.0; 8]);
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// The references live as long as the op's function runs, no longer:
///
/// ```compile_fail,E0521
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// # let data = engine.data(0_u64)?;
/// let (sender, receiver) = std::sync::mpsc::channel::<&'static u64>();
/// engine.op("leak").read(&data).push_sync(move |_, value| sender.send(value).unwrap())?;
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// Reading data on several workers at once needs `T: Sync`:
///
/// ```compile_fail,E0277
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let cell = engine.data(std::cell::Cell::new(0_u64))?; // `Send`, not `Sync`
/// engine.op("peek").read(&cell).push_sync(|_, cell| cell.get())?;
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// (A write is fine: `engine.op("set").write(&cell).push_sync(|_, cell| cell.set(1))`.)
#[must_use = "an op builder pushes nothing until push_sync or push_async"]
pub struct TypedOp<'e, L> {
    op: OpBuilder<'e>,
    accesses: L,
    /// The first data named that belongs to another engine (reported at push).
    foreign: Option<Var>,
}

impl<'e> OpBuilder<'e> {
    /// Names `data` as a read: the op's function receives `&T`, while other ops may read it
    /// too (hence `T: Sync`).
    pub fn read<T: Send + Sync + 'static>(self, data: &Data<T>) -> TypedOp<'e, ReadAccess<T>> {
        let foreign = self.foreign(data);
        TypedOp {
            op: self,
            accesses: ReadAccess::new(data.cell(), data.var()),
            foreign,
        }
    }

    /// Names `data` as a write: the op's function receives `&mut T`, and runs alone on it.
    pub fn write<T: Send + 'static>(self, data: &Data<T>) -> TypedOp<'e, WriteAccess<T>> {
        let foreign = self.foreign(data);
        TypedOp {
            op: self,
            accesses: WriteAccess::new(data.cell(), data.var()),
            foreign,
        }
    }

    /// `data`'s var, if it belongs to another engine.
    fn foreign<T: Send + 'static>(&self, data: &Data<T>) -> Option<Var> {
        (!data.belongs_to(self.engine().id())).then(|| data.var())
    }
}

impl<'e, L: AccessList> TypedOp<'e, L> {
    /// Names `data` as a read too (see [`OpBuilder::read`]).
    pub fn read<T: Send + Sync + 'static>(self, data: &Data<T>) -> TypedOp<'e, L::Output>
    where
        L: Append<ReadAccess<T>>,
    {
        let foreign = self.foreign.or_else(|| self.op.foreign(data));
        TypedOp {
            op: self.op,
            accesses: self
                .accesses
                .append(ReadAccess::new(data.cell(), data.var())),
            foreign,
        }
    }

    /// Names `data` as a write too (see [`OpBuilder::write`]).
    pub fn write<T: Send + 'static>(self, data: &Data<T>) -> TypedOp<'e, L::Output>
    where
        L: Append<WriteAccess<T>>,
    {
        let foreign = self.foreign.or_else(|| self.op.foreign(data));
        TypedOp {
            op: self.op,
            accesses: self
                .accesses
                .append(WriteAccess::new(data.cell(), data.var())),
            foreign,
        }
    }

    /// Plain vars the op reads, beside its data ([`OpBuilder::reads`]).
    pub fn reads<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.op = self.op.reads(vars);
        self
    }

    /// Plain vars the op writes, beside its data ([`OpBuilder::writes`]).
    pub fn writes<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.op = self.op.writes(vars);
        self
    }

    /// Where it runs ([`OpBuilder::on`]).
    pub fn on(mut self, context: Context) -> Self {
        self.op = self.op.on(context);
        self
    }

    /// Its priority ([`OpBuilder::priority`]).
    pub fn priority(mut self, priority: i32) -> Self {
        self.op = self.op.priority(priority);
        self
    }

    /// Its property ([`OpBuilder::prop`]).
    pub fn prop(mut self, property: FnProperty) -> Self {
        self.op = self.op.prop(property);
        self
    }

    /// Marks it for the profiler ([`OpBuilder::profiled`]).
    pub fn profiled(mut self) -> Self {
        self.op = self.op.profiled();
        self
    }

    /// Pushes an op that is done when `func` returns; `func` receives the data's references
    /// (`&T` for reads, `&mut T` for writes). Returns and fails as
    /// [`OpBuilder::push_sync`].
    ///
    /// # Errors
    ///
    /// As [`OpBuilder::push_sync`], and [`EngineError::ForeignData`] for data of another
    /// engine.
    pub fn push_sync<F, R>(self, func: F) -> Result<()>
    where
        F: for<'a> FnOnce(RunContext, L::Refs<'a>) -> R + Send + 'static,
        R: IntoOpResult,
    {
        let TypedOp {
            mut op,
            accesses,
            foreign,
        } = self;
        accesses.vars(&mut |var, writes| op.add_var(var, writes));
        let func = OpFn::Sync(sync_op(accesses, func));
        push(op, foreign, func)
    }

    /// Pushes an op that is done when it completes its [`Held`] token (which carries the
    /// data's references), possibly from another thread after `func` returned.
    ///
    /// # Errors
    ///
    /// As [`push_sync`](Self::push_sync).
    pub fn push_async<F>(self, func: F) -> Result<()>
    where
        F: FnOnce(RunContext, Held<L>) + Send + 'static,
    {
        let TypedOp {
            mut op,
            accesses,
            foreign,
        } = self;
        accesses.vars(&mut |var, writes| op.add_var(var, writes));
        let func = OpFn::Async(Box::new(move |run, completion| {
            func(run, Held::new(accesses, completion));
        }));
        push(op, foreign, func)
    }
}

/// Pushes `op` with `func`, unless it names data of another engine (`foreign`).
fn push(op: OpBuilder<'_>, foreign: Option<Var>, func: OpFn) -> Result<()> {
    match foreign {
        Some(var) => Err(op.refuse(EngineError::ForeignData { var, op: None })),
        None => op.push(func),
    }
}

impl<L> fmt::Debug for TypedOp<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedOp")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}
