//! The typed accesses of an op: [`ReadAccess`] and [`WriteAccess`] (one per data the op
//! names), the list of them an op carries ([`AccessList`]: one access, or a tuple of up to
//! [`MAX_ACCESSES`]), and how a list grows by one ([`Append`]).
//!
//! An access is the cell's pointer alone (8 bytes). A sync op's function does not capture its
//! accesses: it makes them again when it runs, from the op's vars ([`Cells`]), each data's
//! var carrying its cell's pointer (`Engine::data`, `Graph::new_attached_var`). So its record
//! holds the user's closure alone, inline when that is small (`op/sync_fn.rs`), however many
//! data the op names. An async op's function, boxed anyway, captures them (`held.rs`).
//!
//! An op's function receives its list's references ([`AccessList::Refs`]): `&T` for a read,
//! `&mut T` for a write, in the order the builder named them, as one value (a single
//! reference) or a tuple. The references borrow from the op's run: the function's type is
//! `for<'a> FnOnce(RunContext, L::Refs<'a>)`, so no reference can leave it.

use std::ptr::NonNull;

use depengine_graph::Access as VarAccess;

use crate::context::RunContext;
use crate::data::cell::{CellPtr, ExclusiveCell, SharedCell};
use crate::op::plan::PlanFn;
use crate::op::record::{Completion, SyncFn};
use crate::op::result::IntoOpResult;
use crate::op::vars::OpVars;

pub use crate::op::vars::MAX_ACCESSES;

/// The sealed-trait pattern: a public trait with a supertrait that no other crate can name,
/// so that no other crate can implement it. The access traits are sealed because their hidden
/// methods make references from cells: an outside implementation could pick references that
/// outlive the op (`Refs = &'static mut T`).
mod sealed {
    pub trait Sealed {}
}

/// A read of a [`Data<T>`](crate::Data) by an op: its function gets `&T`. Built by
/// [`TypedOp::read`](crate::TypedOp::read); only its type shows in signatures.
///
/// # Examples
///
/// ```
/// use depengine::{Data, Engine, EngineConfig, ReadAccess, TypedOp};
///
/// // An op that reads `values`: its function receives `&Vec<u32>`.
/// fn sum<'e>(
///     engine: &'e Engine,
///     values: &'e Data<Vec<u32>>,
/// ) -> TypedOp<'e, ReadAccess<Vec<u32>>> {
///     engine.op("sum").read(values)
/// }
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let values = engine.data(vec![1, 2, 3])?;
/// let (sender, receiver) = std::sync::mpsc::channel();
/// sum(&engine, &values).push_sync(move |_, values: &Vec<u32>| {
///     sender.send(values.iter().sum::<u32>()).unwrap();
/// })?;
/// assert_eq!(receiver.recv().unwrap(), 6);
/// # Ok::<(), depengine::EngineError>(())
/// ```
pub struct ReadAccess<T> {
    cell: SharedCell<T>,
}

/// A write of a [`Data<T>`](crate::Data) by an op: its function gets `&mut T`. Built by
/// [`TypedOp::write`](crate::TypedOp::write); only its type shows in signatures.
///
/// # Examples
///
/// ```
/// use depengine::{Data, Engine, EngineConfig, TypedOp, WriteAccess};
///
/// // An op that writes `values`: its function receives `&mut Vec<u32>`, and runs alone on it.
/// fn clear<'e>(
///     engine: &'e Engine,
///     values: &'e Data<Vec<u32>>,
/// ) -> TypedOp<'e, WriteAccess<Vec<u32>>> {
///     engine.op("clear").write(values)
/// }
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let values = engine.data(vec![1, 2, 3])?;
/// clear(&engine, &values).push_sync(|_, values: &mut Vec<u32>| values.clear())?;
/// assert!(engine.read(&values)?.is_empty());
/// # Ok::<(), depengine::EngineError>(())
/// ```
pub struct WriteAccess<T> {
    cell: ExclusiveCell<T>,
}

impl<T> ReadAccess<T> {
    pub(crate) fn new(cell: CellPtr<T>) -> Self {
        ReadAccess {
            cell: SharedCell(cell),
        }
    }
}

impl<T> WriteAccess<T> {
    pub(crate) fn new(cell: CellPtr<T>) -> Self {
        WriteAccess {
            cell: ExclusiveCell(cell),
        }
    }
}

impl<T> sealed::Sealed for ReadAccess<T> {}
impl<T> sealed::Sealed for WriteAccess<T> {}

/// One typed access of an op ([`ReadAccess`] or [`WriteAccess`]). Sealed.
///
/// # Examples
///
/// Code generic over an op's one data, read or written: [`Access::Ref`] is what its function
/// receives (`&T` for a [`ReadAccess<T>`], `&mut T` for a [`WriteAccess<T>`]).
///
/// ```
/// use depengine::{Access, Engine, EngineConfig, TypedOp};
///
/// // Pushes `op` with a function that does not need the run's context.
/// fn push<A: Access>(
///     op: TypedOp<'_, A>,
///     func: impl for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
/// ) -> depengine::Result<()> {
///     op.push_sync(move |_, value| func(value))
/// }
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let count = engine.data(41_u64)?;
/// push(engine.op("increment").write(&count), |count: &mut u64| *count += 1)?;
/// let (sender, receiver) = std::sync::mpsc::channel();
/// push(engine.op("report").read(&count), move |count: &u64| sender.send(*count).unwrap())?;
/// assert_eq!(receiver.recv().unwrap(), 42);
/// # Ok::<(), depengine::EngineError>(())
/// ```
pub trait Access: sealed::Sealed + Send + 'static {
    /// What the op's function receives: `&'a T` or `&'a mut T`.
    type Ref<'a>;

    /// Whether the op names its data as a write (else as a read).
    #[doc(hidden)]
    const WRITE: bool;

    /// The access to the cell at `cell`.
    ///
    /// # Safety
    ///
    /// `cell` is the pointer of a live cell of this access's value type (`CellPtr::erased`).
    #[doc(hidden)]
    unsafe fn from_cell(cell: NonNull<()>) -> Self;

    /// Calls `f` with the reference.
    ///
    /// # Safety
    ///
    /// Only from the op's function while the op holds its vars (`cell.rs`, roles 1 and 2).
    #[doc(hidden)]
    unsafe fn with<'s, R>(&'s mut self, f: impl FnOnce(Self::Ref<'s>) -> R) -> R;

    /// The reference, for as long as `self` is borrowed.
    ///
    /// # Safety
    ///
    /// As `with`, for the whole borrow: from an async op's `Held`, which completes the op
    /// only when it is consumed or dropped, after the borrow.
    #[doc(hidden)]
    unsafe fn get(&mut self) -> Self::Ref<'_>;
}

impl<T: Send + Sync + 'static> Access for ReadAccess<T> {
    type Ref<'a> = &'a T;

    const WRITE: bool = false;

    #[inline]
    unsafe fn from_cell(cell: NonNull<()>) -> Self {
        // SAFETY: the caller's: a cell of `T`.
        ReadAccess::new(unsafe { CellPtr::from_erased(cell) })
    }

    #[inline]
    unsafe fn with<'s, R>(&'s mut self, f: impl FnOnce(&'s T) -> R) -> R {
        // SAFETY: the caller runs the op that holds the var as a read (role 1); the cell lives
        // until the var's deletion, which the graph runs after this op (role 4).
        unsafe { self.cell.0.with(f) }
    }

    #[inline]
    unsafe fn get(&mut self) -> &T {
        // SAFETY: as in `with`, for the borrow of `self` (the caller's contract).
        unsafe { self.cell.0.get() }
    }
}

impl<T: Send + 'static> Access for WriteAccess<T> {
    type Ref<'a> = &'a mut T;

    const WRITE: bool = true;

    #[inline]
    unsafe fn from_cell(cell: NonNull<()>) -> Self {
        // SAFETY: the caller's: a cell of `T`.
        WriteAccess::new(unsafe { CellPtr::from_erased(cell) })
    }

    #[inline]
    unsafe fn with<'s, R>(&'s mut self, f: impl FnOnce(&'s mut T) -> R) -> R {
        // SAFETY: the caller runs the op that holds the var as its one write (role 2); the cell
        // lives until the var's deletion, after this op (role 4).
        unsafe { self.cell.0.with_mut(f) }
    }

    #[inline]
    unsafe fn get(&mut self) -> &mut T {
        // SAFETY: as in `with`, for the borrow of `self` (the caller's contract).
        unsafe { self.cell.0.get_mut() }
    }
}

/// The typed accesses of one op: one [`Access`], or a tuple of 2 to [`MAX_ACCESSES`] of them.
/// Sealed: built by [`TypedOp`](crate::TypedOp)'s `read` and `write`.
///
/// # Examples
///
/// Code generic over an op's data, however many: [`AccessList::Refs`] is what its function
/// receives, one reference or a tuple of them in the order named.
///
/// ```
/// use depengine::{AccessList, Engine, EngineConfig, TypedOp};
///
/// // Pushes `op` and waits for it (and every op pushed before).
/// fn run_now<L: AccessList>(
///     engine: &Engine,
///     op: TypedOp<'_, L>,
///     func: impl for<'a> FnOnce(L::Refs<'a>) + Send + 'static,
/// ) -> depengine::Result<()> {
///     op.push_sync(move |_, refs| func(refs))?;
///     engine.wait_for_all()
/// }
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let (values, total) = (engine.data(vec![1_u64, 2, 3])?, engine.data(0_u64)?);
/// run_now(&engine, engine.op("scale").write(&values), |values| {
///     values.iter_mut().for_each(|v| *v *= 10);
/// })?;
/// // Two accesses: a tuple `(&Vec<u64>, &mut u64)`.
/// run_now(&engine, engine.op("sum").read(&values).write(&total), |(values, total)| {
///     *total = values.iter().sum();
/// })?;
/// assert_eq!(*engine.read(&total)?, 60);
/// # Ok::<(), depengine::EngineError>(())
/// ```
///
/// No other crate can implement it:
///
/// ```compile_fail,E0277
/// struct Forged;
/// impl depengine::AccessList for Forged {
///     type Refs<'a> = &'static mut u64; // would outlive the op
///     // ...
/// }
/// ```
pub trait AccessList: sealed::Sealed + Send + 'static {
    /// What the op's function receives: the one reference, or a tuple of them, in the order
    /// the accesses were named.
    type Refs<'a>;

    /// How many of the accesses are reads.
    #[doc(hidden)]
    const READS: usize;

    /// How many of the accesses are writes.
    #[doc(hidden)]
    const WRITES: usize;

    /// The accesses again, from the cells the op's vars carry; `None` if a var carries none.
    ///
    /// # Safety
    ///
    /// `cells` finds the cells of the data this list was built for, in its order: from the op
    /// this list's function runs for, while it runs (see [`sync_op`]).
    #[doc(hidden)]
    unsafe fn from_cells(cells: &mut Cells<'_>) -> Option<Self>
    where
        Self: Sized;

    /// Calls `f` with the references.
    ///
    /// # Safety
    ///
    /// As [`Access::with`].
    #[doc(hidden)]
    unsafe fn with_refs<R>(&mut self, f: impl for<'a> FnOnce(Self::Refs<'a>) -> R) -> R;

    /// The references, for as long as `self` is borrowed.
    ///
    /// # Safety
    ///
    /// As [`Access::get`].
    #[doc(hidden)]
    unsafe fn refs(&mut self) -> Self::Refs<'_>;
}

impl<A: Access> AccessList for A {
    type Refs<'a> = A::Ref<'a>;

    const READS: usize = !A::WRITE as usize;

    const WRITES: usize = A::WRITE as usize;

    #[inline]
    unsafe fn from_cells(cells: &mut Cells<'_>) -> Option<Self> {
        let cell = cells.next(A::WRITE)?;
        // SAFETY: the caller's: the cell of this access's data.
        Some(unsafe { A::from_cell(cell) })
    }

    #[inline]
    unsafe fn with_refs<R>(&mut self, f: impl for<'a> FnOnce(Self::Refs<'a>) -> R) -> R {
        // SAFETY: the caller's contract is `with`'s.
        unsafe { self.with(f) }
    }

    #[inline]
    unsafe fn refs(&mut self) -> Self::Refs<'_> {
        // SAFETY: the caller's contract is `get`'s.
        unsafe { self.get() }
    }
}

/// An access list that takes one more access `N`: `Output` is the list with `N` last. Sealed,
/// as [`AccessList`] is.
///
/// # Examples
///
/// The bound of [`TypedOp::read`](crate::TypedOp::read) and
/// [`TypedOp::write`](crate::TypedOp::write), for code that adds data to an op it is given:
///
/// ```
/// use depengine::{Append, Data, Engine, EngineConfig, TypedOp, WriteAccess};
///
/// // Adds the log as the op's last write: its function gets `&mut Vec<String>` last.
/// fn logged<'e, L>(op: TypedOp<'e, L>, log: &'e Data<Vec<String>>) -> TypedOp<'e, L::Output>
/// where
///     L: Append<WriteAccess<Vec<String>>>,
/// {
///     op.write(log)
/// }
///
/// let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
/// let (x, log) = (engine.data(1_u64)?, engine.data(Vec::new())?);
/// logged(engine.op("double").write(&x), &log).push_sync(|_, (x, log)| {
///     *x *= 2;
///     log.push(format!("x = {x}"));
/// })?;
/// assert_eq!(*engine.read(&log)?, ["x = 2"]);
/// # Ok::<(), depengine::EngineError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "an op takes at most 8 typed accesses (depengine::MAX_ACCESSES)",
    label = "this op already names 8 data"
)]
pub trait Append<N: Access>: AccessList + sealed::Sealed {
    /// The list with `N` appended.
    type Output: AccessList;

    /// Appends `next`.
    #[doc(hidden)]
    fn append(self, next: N) -> Self::Output;
}

impl<A: Access, N: Access> Append<N> for A {
    type Output = (A, N);

    #[inline]
    fn append(self, next: N) -> (A, N) {
        (self, next)
    }
}

/// `Sealed` and `AccessList` for a tuple of accesses.
macro_rules! access_tuple {
    ($($name:ident)+) => {
        impl<$($name: Access),+> sealed::Sealed for ($($name,)+) {}

        #[allow(non_snake_case, reason = "one binding per type parameter, named after it")]
        impl<$($name: Access),+> AccessList for ($($name,)+) {
            type Refs<'a> = ($($name::Ref<'a>,)+);

            const READS: usize = 0 $(+ !$name::WRITE as usize)+;

            const WRITES: usize = 0 $(+ $name::WRITE as usize)+;

            #[inline]
            unsafe fn from_cells(cells: &mut Cells<'_>) -> Option<Self> {
                // In the order named: a tuple's fields are evaluated left to right.
                // SAFETY: the caller's: each cell is that of its access's data.
                Some(($(unsafe { $name::from_cell(cells.next($name::WRITE)?) },)+))
            }

            #[inline]
            unsafe fn with_refs<R>(&mut self, f: impl for<'a> FnOnce(Self::Refs<'a>) -> R) -> R {
                let ($($name,)+) = self;
                // SAFETY: the caller's contract is each access's `with`.
                unsafe { access_tuple!(@nest f; [] $($name)+) }
            }

            #[inline]
            unsafe fn refs(&mut self) -> Self::Refs<'_> {
                let ($($name,)+) = self;
                // SAFETY: the caller's contract is each access's `get`.
                unsafe { ($($name.get(),)+) }
            }
        }
    };
    // Nests one `with` per access, innermost last, and calls `f` with all the references.
    (@nest $f:ident; [$($done:ident)*] $next:ident $($rest:ident)*) => {
        $next.with(|$next| access_tuple!(@nest $f; [$($done)* $next] $($rest)*))
    };
    (@nest $f:ident; [$($done:ident)*]) => {
        $f(($($done,)*))
    };
}

/// `Append` for a tuple of accesses: `($($name),+)` takes `N` last.
macro_rules! append_tuple {
    ($($name:ident)+) => {
        #[allow(non_snake_case, reason = "one binding per type parameter, named after it")]
        impl<$($name: Access,)+ N: Access> Append<N> for ($($name,)+) {
            type Output = ($($name,)+ N);

            #[inline]
            fn append(self, next: N) -> Self::Output {
                let ($($name,)+) = self;
                ($($name,)+ next)
            }
        }
    };
}

access_tuple!(A B);
access_tuple!(A B C);
access_tuple!(A B C D);
access_tuple!(A B C D E);
access_tuple!(A B C D E F);
access_tuple!(A B C D E F G);
access_tuple!(A B C D E F G H);
append_tuple!(A B);
append_tuple!(A B C);
append_tuple!(A B C D);
append_tuple!(A B C D E);
append_tuple!(A B C D E F);
append_tuple!(A B C D E F G);

/// Finds a typed op's cells among the vars of the op being run. The builder appends the op's
/// data after its plain vars, each to its reads or its writes in the order named
/// (`typed_op.rs`): a list of `R` reads and `W` writes finds its cells on the last `R` reads
/// and the last `W` writes, in order.
pub struct Cells<'a> {
    vars: &'a dyn OpVars,
    /// Data reads not found yet: the next one is the op's `reads`-th last read.
    reads: usize,
    /// Likewise for the writes.
    writes: usize,
}

impl<'a> Cells<'a> {
    fn new(vars: &'a dyn OpVars, reads: usize, writes: usize) -> Self {
        Cells {
            vars,
            reads,
            writes,
        }
    }

    /// The cell of the next data read (or write, if `write`) in the order named.
    #[inline]
    fn next(&mut self, write: bool) -> Option<NonNull<()>> {
        let (left, access) = if write {
            (&mut self.writes, VarAccess::Write)
        } else {
            (&mut self.reads, VarAccess::Read)
        };
        *left = left.checked_sub(1)?;
        self.vars.attachment(access, *left)
    }
}

/// A typed op's function found no cell on a var where its data's should be: an internal error
/// of depengine's (each var of a typed op's data carries its cell from the moment it is made,
/// and `Cells` looks only where the builder put those vars). The op fails with it rather than
/// reading through a null pointer. It cannot tell a wrong var that carries a cell.
#[derive(Debug, thiserror::Error)]
#[error("internal error in depengine: a var of this typed op's data carries no cell")]
struct CellNotFound;

/// The function of a captured typed op (`typed_capture.rs`): as [`sync_op`]'s, run once per
/// replay with the vars of the op its replay runs (`run/replay/`, `PlanOpVars`).
pub(crate) fn plan_op<L, F, R>(func: F) -> PlanFn
where
    L: AccessList,
    F: for<'a> Fn(RunContext, L::Refs<'a>) -> R + Send + Sync + 'static,
    R: IntoOpResult,
{
    PlanFn::Sync(Box::new(move |run, vars| {
        let mut cells = Cells::new(vars, L::READS, L::WRITES);
        // SAFETY: `vars` are those of the captured op, named as `typed_capture.rs` appended
        // them (its data's last, in order), and each data var was made with its data's cell; the
        // replay holds every var of its plan while this runs (role 4 of `cell.rs`).
        let Some(mut accesses) = (unsafe { L::from_cells(&mut cells) }) else {
            return Err(CellNotFound.into());
        };
        // SAFETY: the replay runs this op only when the plan's ops before it on its vars are
        // done and none after it on them has started: a write alone, reads side by side (roles
        // 1 and 2 of `cell.rs`), as the graph orders pushed ops.
        unsafe { accesses.with_refs(|refs| func(run, refs)) }.into_op_result()
    }))
}

/// The function of a captured async typed op: makes its accesses as `plan_op` does and gives
/// them to `func` with the op's completion, which it must keep with them (`Held`): the
/// references they give stay valid until it completes the op, since the replay releases the
/// plan's ops after it on its vars, and its vars, only then (roles 1, 2 and 4 of `cell.rs`).
pub(crate) fn plan_async_op<L, F>(func: F) -> PlanFn
where
    L: AccessList,
    F: Fn(RunContext, L, Completion) + Send + Sync + 'static,
{
    PlanFn::Async(Box::new(move |run, vars, done| {
        let completion = Completion::of_plan_op(done);
        let mut cells = Cells::new(vars, L::READS, L::WRITES);
        // SAFETY: as in `plan_op`.
        match unsafe { L::from_cells(&mut cells) } {
            Some(accesses) => func(run, accesses, completion),
            None => completion.fail(CellNotFound),
        }
    }))
}

/// The function of a sync typed op: makes its accesses, of list type `L`, from the op's vars
/// when it runs (`Cells`) and calls `func` with their references. It captures `func` alone.
pub(crate) fn sync_op<L, F, R>(func: F) -> SyncFn
where
    L: AccessList,
    F: for<'a> FnOnce(RunContext, L::Refs<'a>) -> R + Send + 'static,
    R: IntoOpResult,
{
    SyncFn::with_vars(move |run, vars| {
        let mut cells = Cells::new(vars, L::READS, L::WRITES);
        // SAFETY: `vars` are those of the op this function was pushed with (`SyncFn::call`),
        // which holds them while it runs. `L` was built with the op's data, in the order
        // that `typed_op.rs` appended their vars (`Cells`), and each of those vars was made
        // with its data's cell (`Engine::data`): each cell found is one of the type its
        // access names, alive while the op holds its var (role 4 of `cell.rs`).
        let Some(mut accesses) = (unsafe { L::from_cells(&mut cells) }) else {
            return Err(CellNotFound.into());
        };
        // SAFETY: this is the op's function, which the engine runs only while the op holds the
        // vars its accesses name (roles 1 and 2 of `cell.rs`).
        unsafe { accesses.with_refs(|refs| func(run, refs)) }.into_op_result()
    })
}
