//! The typed accesses of an op: [`ReadAccess`] and [`WriteAccess`] (one per data the op
//! names), the list of them an op carries ([`AccessList`]: one access, or a tuple of up to
//! [`MAX_ACCESSES`]), and how a list grows by one ([`Append`]).
//!
//! An access is the cell's pointer alone (8 bytes): the op's function captures its accesses,
//! and two of them with a function that captures nothing fit in the op's record
//! (`op/sync_fn.rs`). The vars go to the graph apart (`typed_op.rs`).
//!
//! An op's function receives its list's references ([`AccessList::Refs`]): `&T` for a read,
//! `&mut T` for a write, in the order the builder named them, as one value (a single
//! reference) or a tuple. The references borrow from the op's run: the function's type is
//! `for<'a> FnOnce(RunContext, L::Refs<'a>)`, so no reference can leave it.

use crate::context::RunContext;
use crate::data::cell::{CellPtr, ExclusiveCell, SharedCell};
use crate::op::record::SyncFn;
use crate::op::result::IntoOpResult;

/// The most typed accesses one op takes: its access list is a tuple of at most this many.
pub const MAX_ACCESSES: usize = 8;

mod sealed {
    pub trait Sealed {}
}

/// A read of a [`Data<T>`](crate::Data) by an op: its function gets `&T`. Built by
/// [`TypedOp::read`](crate::TypedOp::read); only its type shows in signatures.
pub struct ReadAccess<T> {
    cell: SharedCell<T>,
}

/// A write of a [`Data<T>`](crate::Data) by an op: its function gets `&mut T`. Built by
/// [`TypedOp::write`](crate::TypedOp::write); only its type shows in signatures.
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
pub trait Access: sealed::Sealed + Send + 'static {
    /// What the op's function receives: `&'a T` or `&'a mut T`.
    type Ref<'a>;

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
pub trait AccessList: Send + 'static {
    /// What the op's function receives: the one reference, or a tuple of them, in the order
    /// the accesses were named.
    type Refs<'a>;

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

/// An access list that takes one more access `N`: `Output` is the list with `N` last.
#[diagnostic::on_unimplemented(
    message = "an op takes at most 8 typed accesses (depengine::MAX_ACCESSES)",
    label = "this op already names 8 data"
)]
pub trait Append<N: Access>: AccessList {
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

/// `AccessList` for a tuple of accesses, and `Append` for it unless it is the longest.
macro_rules! access_tuple {
    ($($name:ident)+) => {
        #[allow(non_snake_case, reason = "one binding per type parameter, named after it")]
        impl<$($name: Access),+> AccessList for ($($name,)+) {
            type Refs<'a> = ($($name::Ref<'a>,)+);

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

/// The function of a sync typed op: calls `func` with the references of `accesses`.
pub(crate) fn sync_op<L, F, R>(mut accesses: L, func: F) -> SyncFn
where
    L: AccessList,
    F: for<'a> FnOnce(RunContext, L::Refs<'a>) -> R + Send + 'static,
    R: IntoOpResult,
{
    SyncFn::new(move |run| {
        // SAFETY: this is the op's function, which the engine runs only while the op holds the
        // vars its accesses name (roles 1 and 2 of `cell.rs`).
        unsafe { accesses.with_refs(|refs| func(run, refs)) }.into_op_result()
    })
}
