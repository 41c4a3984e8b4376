//! [`TypedCaptureOp`]: a captured op that names typed data, whose function receives the data's
//! references on each replay (`plan.op("axpy").read(&x).write(&y).push_sync(|_, (x, y)| ..)`),
//! as [`TypedOp`](crate::TypedOp) does for a pushed op.

use std::borrow::Borrow;
use std::fmt;

use depengine_graph::Var;

use crate::api::capture::CaptureOp;
use crate::context::{Context, RunContext};
use crate::data::access::{
    Access, AccessList, Append, ReadAccess, WriteAccess, plan_async_op, plan_op,
};
use crate::data::handle::Data;
use crate::data::held::Held;
use crate::error::{EngineError, Result};
use crate::op::result::IntoOpResult;

/// A captured op that names typed data ([`Data<T>`]): from [`CaptureOp::read`] or
/// [`CaptureOp::write`], extended by more `read`s and `write`s (up to
/// [`MAX_ACCESSES`](crate::MAX_ACCESSES)) and by the untyped capture's methods. Its function
/// (`Fn`: it runs once per replay) receives the references in the order the data were named.
///
/// ```
/// use depengine::{Engine, EngineConfig};
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let (x, y) = (engine.data(vec![1.0_f32; 8])?, engine.data(vec![0.0_f32; 8])?);
/// let plan = engine.capture("axpy", |plan| {
///     plan.op("axpy").read(&x).write(&y).push_sync(|_, (x, y)| {
///         for (y, x) in y.iter_mut().zip(x) {
///             *y += 2.0 * x;
///         }
///     })?;
///     Ok(())
/// })?;
/// for _ in 0..3 {
///     engine.replay(&plan)?;
/// }
/// assert_eq!(*engine.read(&y)?, vec![6.0; 8]);
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// Its references live as long as the function runs, no longer:
///
/// ```compile_fail,E0521
/// # let engine = depengine::Engine::new(depengine::EngineConfig::default())?;
/// # let data = engine.data(0_u64)?;
/// let (sender, receiver) = std::sync::mpsc::channel::<&'static u64>();
/// let sender = std::sync::Mutex::new(sender);
/// engine.capture("leak", |plan| {
///     plan.op("leak").read(&data).push_sync(move |_, value| sender.lock().unwrap().send(value).unwrap())?;
///     Ok(())
/// })?;
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[must_use = "a captured op is recorded only by push_sync or push_async"]
pub struct TypedCaptureOp<'c, L> {
    /// The capture, whose lists hold the op's plain vars and then its data's, each appended to
    /// the reads or the writes as named: the function finds its data's cells there on each
    /// replay (`access.rs`, `Cells`).
    op: CaptureOp<'c>,
    accesses: L,
}

impl<'c> CaptureOp<'c> {
    /// Names `data` as a read: the op's function receives `&T` on each replay (see
    /// [`OpBuilder::read`](crate::OpBuilder::read)).
    pub fn read<T: Send + Sync + 'static>(
        self,
        data: &Data<T>,
    ) -> TypedCaptureOp<'c, ReadAccess<T>> {
        TypedCaptureOp::first(self, data, ReadAccess::new(data.cell()))
    }

    /// Names `data` as a write: the op's function receives `&mut T` on each replay.
    pub fn write<T: Send + 'static>(self, data: &Data<T>) -> TypedCaptureOp<'c, WriteAccess<T>> {
        TypedCaptureOp::first(self, data, WriteAccess::new(data.cell()))
    }

    /// Appends `data`'s var, accessed by `A`; data of another engine refuses the op.
    fn add_data<T: Send + 'static, A: Access>(&mut self, data: &Data<T>) {
        let var = data.var();
        self.add_var(var, A::WRITE);
        if !data.belongs_to(self.engine().id()) {
            self.refuse(EngineError::ForeignData { var, op: None });
        }
    }
}

impl<'c, A: Access> TypedCaptureOp<'c, A> {
    /// The captured op of `op` whose first data is `data`, reached by `access`.
    fn first<T: Send + 'static>(mut op: CaptureOp<'c>, data: &Data<T>, access: A) -> Self {
        op.add_data::<T, A>(data);
        TypedCaptureOp {
            op,
            accesses: access,
        }
    }
}

impl<'c, L: AccessList> TypedCaptureOp<'c, L> {
    /// Names `data` as a read too.
    pub fn read<T: Send + Sync + 'static>(self, data: &Data<T>) -> TypedCaptureOp<'c, L::Output>
    where
        L: Append<ReadAccess<T>>,
    {
        self.then(data, ReadAccess::new(data.cell()))
    }

    /// Names `data` as a write too.
    pub fn write<T: Send + 'static>(self, data: &Data<T>) -> TypedCaptureOp<'c, L::Output>
    where
        L: Append<WriteAccess<T>>,
    {
        self.then(data, WriteAccess::new(data.cell()))
    }

    fn then<T, N>(mut self, data: &Data<T>, access: N) -> TypedCaptureOp<'c, L::Output>
    where
        T: Send + 'static,
        N: Access,
        L: Append<N>,
    {
        self.op.add_data::<T, N>(data);
        TypedCaptureOp {
            op: self.op,
            accesses: self.accesses.append(access),
        }
    }

    /// Plain vars the op reads, beside its data (replacing the plain reads given before).
    pub fn reads<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.op.replace_before(false, L::READS, vars);
        self
    }

    /// Plain vars the op writes, beside its data (replacing the plain writes given before).
    pub fn writes<I>(mut self, vars: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<Var>,
    {
        self.op.replace_before(true, L::WRITES, vars);
        self
    }

    /// Where it runs ([`CaptureOp::on`]).
    pub fn on(mut self, context: Context) -> Self {
        self.op = self.op.on(context);
        self
    }

    /// The priority its function sees ([`CaptureOp::priority`]).
    pub fn priority(mut self, priority: i32) -> Self {
        self.op = self.op.priority(priority);
        self
    }

    /// Marks it for the profiler ([`CaptureOp::profiled`]).
    pub fn profiled(mut self) -> Self {
        self.op = self.op.profiled();
        self
    }

    /// Records the op: `func` receives the data's references (`&T` for reads, `&mut T` for
    /// writes) on each replay. As [`CaptureOp::push_sync`] otherwise.
    ///
    /// # Errors
    ///
    /// As [`CaptureOp::push_sync`], and [`EngineError::ForeignData`] for data of another
    /// engine.
    pub fn push_sync<F, R>(self, func: F) -> Result<()>
    where
        F: for<'a> Fn(RunContext, L::Refs<'a>) -> R + Send + Sync + 'static,
        R: IntoOpResult,
    {
        self.op.record(plan_op::<L, _, _>(func))
    }

    /// Records an async op: on each replay `func` receives a [`Held`] token, which carries the
    /// data's references and completes the op (as [`TypedOp::push_async`]'s does), possibly
    /// from another thread after `func` returned. As [`CaptureOp::push_async`] otherwise.
    ///
    /// ```
    /// use depengine::{Engine, EngineConfig};
    ///
    /// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
    /// let total = engine.data(0_u64)?;
    /// let plan = engine.capture("add elsewhere", |plan| {
    ///     plan.op("add").write(&total).push_async(|_, mut held| {
    ///         std::thread::spawn(move || {
    ///             *held.refs() += 1;
    ///             held.ok();
    ///         });
    ///     })?;
    ///     Ok(())
    /// })?;
    /// for _ in 0..3 {
    ///     engine.replay(&plan)?;
    /// }
    /// assert_eq!(*engine.read(&total)?, 3);
    /// # Ok::<(), depengine::EngineError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`push_sync`](Self::push_sync).
    ///
    /// [`TypedOp::push_async`]: crate::TypedOp::push_async
    pub fn push_async<F>(self, func: F) -> Result<()>
    where
        F: Fn(RunContext, Held<L>) + Send + Sync + 'static,
    {
        self.op
            .record(plan_async_op::<L, _>(move |run, accesses, completion| {
                func(run, Held::new(accesses, completion));
            }))
    }
}

impl<L> fmt::Debug for TypedCaptureOp<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedCaptureOp")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}
