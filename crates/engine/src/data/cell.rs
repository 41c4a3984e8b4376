//! [`DataCell`]: the value of a [`Data<T>`](crate::Data), reached without a lock, and the
//! protocol that says who may reach it when. This module and `access.rs` hold the crate's
//! `unsafe` code; each `unsafe` there names the role below that it relies on.
//!
//! The value lives in a heap cell. The handles own it together (their shared part,
//! `handle.rs`); every op on the data reaches it through a raw pointer, a [`CellPtr`], so that
//! an op costs no reference count (an `Arc` clone and drop per access would bounce its counter
//! between the pusher's and the worker's cores, a cache miss on every op). The data's var
//! carries the pointer from the moment it is made (`Graph::new_attached_var`): a sync op's
//! function finds it there when it runs (`access.rs`), an async op captures it when pushed
//! (`held.rs`). Either way the op was pushed through a handle of the data, on its var.
//!
//! # Roles
//!
//! Every access to the value is made in one of four roles, and each role is an op of the
//! dependency graph holding the data's var, or comes after the last such op:
//!
//! 1. **Reader** (`&T`): the function of an op that names the data as a read
//!    (`TypedOp::read`), while it runs (sync) or until its [`Held`](crate::Held) is consumed
//!    (async), or a [`ReadGuard`](crate::ReadGuard) while it lives. Each holds the var as a
//!    read op, granted by the graph only while no write of the var runs. Readers overlap only
//!    with readers, and `T: Sync` is required for them.
//! 2. **Writer** (`&mut T`): likewise for a write op, a [`WriteGuard`](crate::WriteGuard), or
//!    `Engine::take`'s hold. The graph runs a write of a var alone: no reader, no other writer.
//!    The graph refuses an op that names one var twice (`DuplicateVar`) or in both lists
//!    (`ReadWriteConflict`), so one op never gets two references to one value, one of them
//!    `&mut`.
//! 3. **Hand-over** between ops: the graph orders every op on a var after the ops pushed on it
//!    before (reads among themselves aside). The completion of one op (or, for a sync GPU op,
//!    its launch, after its function returned) releases the var under the var's lock, and the
//!    next op is granted under the same lock (or takes over its slot with an acquire:
//!    `op_cell.rs` in depengine-graph), so everything the earlier op did to the value
//!    happens-before the later op's access. The ops of a bulk segment
//!    (`run/bulk/`) run one after the other on the thread that runs the segment, which holds
//!    every var they name (a written one as a write) until the last of them returned: between
//!    them the hand-over is that thread's program order. Nothing here adds an ordering of its
//!    own; the loom model `data_is_handed_over_by_the_graph` checks the hand-over with loom's
//!    cell, which fails the model on any unordered access.
//! 4. **Release** (the value dropped or moved out, the cell freed): only when no op can reach
//!    the cell any more, which is one of
//!    - the deletion of the var, pushed by the drop of the last handle: every op that reaches
//!      the cell was pushed through a handle, before that drop, so the graph runs the deletion
//!      after all of them (`Graph::delete_var` calls back once the ops pushed before it
//!      completed). A typed op's builder borrows the handles it names until it pushes
//!      (`TypedOp`'s lifetime), so no op can be pushed on the data after its last handle is
//!      gone;
//!    - `Engine::take`, with the last handle, from inside its write hold (no op was pushed
//!      after it: no handle is left to push one), or, on a shut-down engine, once the engine is
//!      idle (no op is pushed after a shutdown);
//!    - the engine's state dropping (`RetiredCells`), for a cell whose deletion could not be
//!      pushed; every op of the engine is gone by then (a running op holds the state: a
//!      worker, or an async op's `Completion`);
//!    - the drop of the last handle when the engine's state is already gone, for the same
//!      reason.
//!
//! Failures and panics change nothing above: a skipped op (a failed var) drops its function
//! unrun; a panicking op unwinds out of its access before it completes; an async op's `Held`
//! dropped unused completes the op (with a failure) when it drops, after its references are
//! gone.

use std::marker::PhantomData;
use std::ptr::NonNull;

use depengine_sync::UnsafeCell;

/// The heap cell of one data value.
pub(crate) struct DataCell<T> {
    value: UnsafeCell<T>,
}

/// A pointer to a [`DataCell`]: what handles and ops hold. Copy, and it frees nothing on its
/// own: the release (role 4) is an explicit call.
///
/// Invariant in `T`, and so is every type that holds one (`Data`, the accesses, `Held`, the
/// guards, the read future): they give `&mut T`, and a holder of `T = &'static str` seen as
/// one of `&'a str` would store a short-lived reference where a `'static` one is read later.
/// The marker says so whatever the cell holds (its `UnsafeCell` is invariant too).
pub(crate) struct CellPtr<T>(NonNull<DataCell<T>>, PhantomData<fn(T) -> T>);

/// A cell pointer for a reader (role 1): it gives `&T` on whichever thread holds it, while
/// other threads may hold `&T` too.
pub(crate) struct SharedCell<T>(pub(crate) CellPtr<T>);

/// A cell pointer for the writer (role 2): it gives the one `&mut T` on the thread that holds
/// it (and `&T` through a shared borrow of its holder).
pub(crate) struct ExclusiveCell<T>(pub(crate) CellPtr<T>);

/// The cell pointer of the handles (`handle.rs`), which own the value together: they let any
/// thread push ops that get `&mut T`, and the value is dropped on whichever thread releases it
/// (role 4).
pub(crate) struct OwnedCell<T>(pub(crate) CellPtr<T>);

// The auto traits of the types that carry cell pointers (accesses, guards, the read future,
// handles) come from these three, and from their other fields unchanged.
//
// SAFETY: `&T` may cross threads and be shared when `T: Sync` (`Send` too, which every value
// of a `Data<T>` is).
unsafe impl<T: Send + Sync> Send for SharedCell<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for SharedCell<T> {}
// SAFETY: the one `&mut T` may move to another thread when `T: Send`.
unsafe impl<T: Send> Send for ExclusiveCell<T> {}
// SAFETY: a shared borrow of the holder gives `&T` only: `T: Sync`.
unsafe impl<T: Sync> Sync for ExclusiveCell<T> {}
// SAFETY: through a handle (owned or shared), any thread may push ops that get `&mut T`, or
// drop the value: `T: Send`. Reads, which share `&T` between threads, require `T: Sync` where
// they are named (`SharedCell`).
unsafe impl<T: Send> Send for OwnedCell<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for OwnedCell<T> {}

impl<T> Clone for CellPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for CellPtr<T> {}

impl<T> CellPtr<T> {
    /// Moves `value` into a new cell.
    pub(crate) fn new(value: T) -> Self {
        let cell = Box::new(DataCell {
            value: UnsafeCell::new(value),
        });
        CellPtr(NonNull::from(Box::leak(cell)), PhantomData)
    }

    /// The pointer, untyped: what the data's var carries (`Graph::new_attached_var`).
    pub(crate) fn erased(self) -> NonNull<()> {
        self.0.cast()
    }

    /// The pointer [`erased`](Self::erased) gave.
    ///
    /// # Safety
    ///
    /// `erased` is from a `CellPtr<T>` of this `T`.
    pub(crate) unsafe fn from_erased(erased: NonNull<()>) -> Self {
        CellPtr(erased.cast(), PhantomData)
    }

    /// Calls `f` with a shared reference to the value (under loom, the whole call is the
    /// access loom checks).
    ///
    /// # Safety
    ///
    /// The caller is a reader (role 1) for `'a`, which `f`'s run covers: no writer can access
    /// the value meanwhile, and the cell is not released (role 4).
    #[inline]
    pub(crate) unsafe fn with<'a, R>(self, f: impl FnOnce(&'a T) -> R) -> R
    where
        T: 'a,
    {
        // SAFETY: the cell is alive (the caller's role; see above).
        let cell = unsafe { self.0.as_ref() };
        // SAFETY: a reader's access: no `&mut` to the value exists meanwhile.
        cell.value.with(|value| f(unsafe { &*value }))
    }

    /// Calls `f` with the exclusive reference to the value (under loom, the whole call is the
    /// access loom checks).
    ///
    /// # Safety
    ///
    /// The caller is the writer (role 2) for `'a`, which `f`'s run covers: no other access
    /// meanwhile, and the cell is not released.
    #[inline]
    pub(crate) unsafe fn with_mut<'a, R>(self, f: impl FnOnce(&'a mut T) -> R) -> R
    where
        T: 'a,
    {
        // SAFETY: the cell is alive (the caller's role).
        let cell = unsafe { self.0.as_ref() };
        // SAFETY: the writer's access: no other reference to the value exists meanwhile.
        cell.value.with_mut(|value| f(unsafe { &mut *value }))
    }

    /// A shared reference to the value, for as long as the caller chooses.
    ///
    /// # Safety
    ///
    /// The caller is a reader for all of `'a` (an async op's `Held` or a guard, whose borrow
    /// `'a` is): no writer can access the value during `'a`, and the cell lives through it.
    #[inline]
    pub(crate) unsafe fn get<'a>(self) -> &'a T
    where
        T: 'a,
    {
        // SAFETY: the cell is alive through `'a` (the caller's role).
        let cell = unsafe { self.0.as_ref() };
        // SAFETY: as `with`, for the whole of `'a`.
        cell.value.with(|value| unsafe { &*value })
    }

    /// The exclusive reference to the value, for as long as the caller chooses.
    ///
    /// # Safety
    ///
    /// The caller is the writer for all of `'a`: no other access during `'a`, and the cell
    /// lives through it.
    #[inline]
    pub(crate) unsafe fn get_mut<'a>(self) -> &'a mut T
    where
        T: 'a,
    {
        // SAFETY: the cell is alive through `'a` (the caller's role).
        let cell = unsafe { self.0.as_ref() };
        // SAFETY: as `with_mut`, for the whole of `'a`.
        cell.value.with_mut(|value| unsafe { &mut *value })
    }

    /// Moves the value out and frees the cell.
    ///
    /// # Safety
    ///
    /// Role 4: no op can reach the cell any more, and no other release happens (the pointer is
    /// not used again).
    pub(crate) unsafe fn into_inner(self) -> T {
        // SAFETY: the cell came from `Box::leak` in `new` and is released once (the caller's
        // role).
        let cell = unsafe { Box::from_raw(self.0.as_ptr()) };
        cell.value.into_inner()
    }

    /// Drops the value and frees the cell.
    ///
    /// # Safety
    ///
    /// As [`into_inner`](Self::into_inner).
    pub(crate) unsafe fn release(self) {
        // SAFETY: the caller's.
        drop(unsafe { self.into_inner() });
    }
}
