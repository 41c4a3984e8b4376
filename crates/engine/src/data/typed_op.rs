//! [`TypedOp`]: an op builder that names typed data, whose function receives the data's
//! references (`engine.op("axpy").read(&x).write(&y).push_sync(|_, (x, y)| ...)`).

use std::borrow::Borrow;
use std::fmt;

use depengine_graph::Var;

use crate::context::{Context, FnProperty, RunContext};

use crate::api::op_builder::OpBuilder;
use crate::data::access::{Access, AccessList, Append, ReadAccess, WriteAccess, sync_op};
use crate::data::handle::Data;
use crate::data::held::Held;
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
///
/// A typed op borrows its data until it is pushed: the handle cannot be taken back
/// ([`Engine::take`](crate::Engine::take)) or dropped meanwhile, which would free the value
/// before the op runs:
///
/// ```compile_fail,E0505
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// let data = engine.data(vec![0_u8; 4])?;
/// let late = engine.op("late").write(&data);
/// let value = engine.take(data); // moves the handle the op borrows
/// late.push_sync(|_, values| values.fill(1))?;
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "an op builder pushes nothing until push_sync or push_async"]
pub struct TypedOp<'e, L> {
    /// The builder, whose lists hold the op's plain vars and then its data's, each appended
    /// to the reads or the writes as named: a sync op's function finds its data's cells there
    /// when it runs (`access.rs`, `Cells`), on the last `L::READS` reads and the last
    /// `L::WRITES` writes. `reads` and `writes` replace the plain vars before them.
    op: OpBuilder<'e>,
    accesses: L,
    /// The first data named that belongs to another engine (reported at push).
    foreign: Option<Var>,
}

impl<'e> OpBuilder<'e> {
    /// Names `data` as a read: the op's function receives `&T`, while other ops may read it
    /// too (hence `T: Sync`).
    pub fn read<T: Send + Sync + 'static>(self, data: &'e Data<T>) -> TypedOp<'e, ReadAccess<T>> {
        TypedOp::first(self, data, ReadAccess::new(data.cell()))
    }

    /// Names `data` as a write: the op's function receives `&mut T`, and runs alone on it.
    ///
    /// The reference lives as long as the function runs, no longer:
    ///
    /// ```compile_fail,E0521
    /// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
    /// # let data = engine.data(0_u64)?;
    /// let (sender, receiver) = std::sync::mpsc::channel::<&'static mut u64>();
    /// engine.op("leak").write(&data).push_sync(move |_, value| sender.send(value).unwrap())?;
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    pub fn write<T: Send + 'static>(self, data: &'e Data<T>) -> TypedOp<'e, WriteAccess<T>> {
        TypedOp::first(self, data, WriteAccess::new(data.cell()))
    }

    /// Appends `data`'s var, accessed by `A`, to the reads or the writes; `foreign` becomes it
    /// if it is the first var of another engine's data.
    #[inline]
    fn add_data<T: Send + 'static, A: Access>(
        &mut self,
        data: &Data<T>,
        foreign: &mut Option<Var>,
    ) {
        let var = data.var();
        self.add_var(var, A::WRITE);
        if foreign.is_none() && !data.belongs_to(self.engine().id()) {
            *foreign = Some(var);
        }
    }
}

impl<'e, A: Access> TypedOp<'e, A> {
    /// The typed op of `op` whose first data is `data`, reached by `access`.
    fn first<T: Send + 'static>(mut op: OpBuilder<'e>, data: &Data<T>, access: A) -> Self {
        let mut foreign = None;
        op.add_data::<T, A>(data, &mut foreign);
        TypedOp {
            op,
            accesses: access,
            foreign,
        }
    }
}

impl<'e, L: AccessList> TypedOp<'e, L> {
    /// Names `data` as a read too (see [`OpBuilder::read`]).
    pub fn read<T: Send + Sync + 'static>(self, data: &'e Data<T>) -> TypedOp<'e, L::Output>
    where
        L: Append<ReadAccess<T>>,
    {
        self.then(data, ReadAccess::new(data.cell()))
    }

    /// Names `data` as a write too (see [`OpBuilder::write`]).
    pub fn write<T: Send + 'static>(self, data: &'e Data<T>) -> TypedOp<'e, L::Output>
    where
        L: Append<WriteAccess<T>>,
    {
        self.then(data, WriteAccess::new(data.cell()))
    }

    /// This op with `data` named next, reached by `access`.
    fn then<T, N>(mut self, data: &Data<T>, access: N) -> TypedOp<'e, L::Output>
    where
        T: Send + 'static,
        N: Access,
        L: Append<N>,
    {
        self.op.add_data::<T, N>(data, &mut self.foreign);
        TypedOp {
            op: self.op,
            accesses: self.accesses.append(access),
            foreign: self.foreign,
        }
    }

    /// Plain vars the op reads, beside its data ([`OpBuilder::reads`]: replacing the plain
    /// reads given before).
    pub fn reads<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.op.replace_before(false, L::READS, vars);
        self
    }

    /// Plain vars the op writes, beside its data ([`OpBuilder::writes`]: replacing the plain
    /// writes given before).
    pub fn writes<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.op.replace_before(true, L::WRITES, vars);
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
        // The function makes its accesses again when it runs, from the op's vars
        // (`access.rs`): these were for the async path.
        let TypedOp { op, foreign, .. } = self;
        push(op, foreign, OpFn::Sync(sync_op::<L, _, _>(func)))
    }

    /// Pushes an op that is done when it completes its [`Held`] token (which carries the
    /// data's references), possibly from another thread after `func` returned.
    ///
    /// `func` runs on a worker, hence `Send`:
    ///
    /// ```compile_fail,E0277
    /// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
    /// # let data = engine.data(0_u64)?;
    /// let step = std::rc::Rc::new(1_u64); // not `Send`
    /// engine.op("add").write(&data).push_async(move |_, mut held| {
    ///     *held.refs() += *step;
    ///     held.ok();
    /// })?;
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`push_sync`](Self::push_sync).
    pub fn push_async<F>(self, func: F) -> Result<()>
    where
        F: FnOnce(RunContext, Held<L>) + Send + 'static,
    {
        let TypedOp {
            op,
            accesses,
            foreign,
        } = self;
        let func = OpFn::Async(Box::new(move |run, completion| {
            func(run, Held::new(accesses, completion));
        }));
        push(op, foreign, func)
    }
}

/// Pushes `op`, on its plain vars and its data's, with `func`, unless it names data of
/// another engine (`foreign`).
fn push(op: OpBuilder<'_>, foreign: Option<Var>, func: OpFn) -> Result<()> {
    if let Some(var) = foreign {
        return Err(op.refuse(EngineError::ForeignData { var, op: None }));
    }
    op.push(func)
}

impl<L> fmt::Debug for TypedOp<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedOp")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}
