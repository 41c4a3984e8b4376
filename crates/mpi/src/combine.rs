//! An allreduce by the caller's own function ([`UserReduce`]): MPI calls back a C function
//! (`MPI_Op_create`), which has no argument for the Rust closure, so the communication thread
//! lends the closure to a thread-local slot for the duration of its blocking `MPI_Allreduce`,
//! and the C function calls what it finds there.
//!
//! Subtle: this relies on MPI calling the function on the thread that makes the call. With the
//! thread level the communication thread asks for (`MPI_THREAD_FUNNELED`), only that thread
//! enters MPI, and a blocking call's reduction runs inside it; if the slot is empty (a library
//! that reduced on a thread of its own), the function leaves the elements as they are and the
//! op fails with [`MpiError::ReduceFailed`].

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::Arc;

use mpi::ffi::{self, MPI_Datatype, MPI_Op};

use crate::element::Element;
use crate::error::MpiError;
use crate::reduce::UserReduce;

/// The caller's function with the element type erased: `(incoming, accumulated, len)`.
type Erased = dyn Fn(*mut c_void, *mut c_void, usize) + Send + Sync;

/// A [`UserReduce`] ready for the communication thread: its function, type-erased.
pub(crate) struct Combine {
    function: Arc<Erased>,
    commutative: bool,
}

impl Combine {
    /// `reduce`, for an allreduce of `T`s.
    pub(crate) fn of<T: Element>(reduce: &UserReduce<T>) -> Self {
        let combine = reduce.function();
        let function = move |incoming: *mut c_void, accumulated: *mut c_void, len: usize| {
            // SAFETY: MPI hands the op's function `len` elements of the allreduce's datatype,
            // `T`'s (`Buffer::of_mut`), in two buffers it owns for the call: one to read, one
            // to update, which do not overlap.
            let (incoming, accumulated) = unsafe {
                (
                    std::slice::from_raw_parts(incoming.cast::<T>().cast_const(), len),
                    std::slice::from_raw_parts_mut(accumulated.cast::<T>(), len),
                )
            };
            combine(incoming, accumulated);
        };
        Combine {
            function: Arc::new(function),
            commutative: reduce.is_commutative(),
        }
    }

    /// Runs `call` with an MPI operation made of this function (created before, freed after;
    /// the function lent to this thread meanwhile), returning `call`'s MPI error code. An
    /// error creating the operation is returned as its code; a panic of the function (caught:
    /// it must not unwind into MPI) as [`MpiError::ReduceFailed`].
    pub(crate) fn with_operation(
        &self,
        call: impl FnOnce(MPI_Op) -> c_int,
    ) -> Result<c_int, MpiError> {
        let mut operation = MaybeUninit::<MPI_Op>::uninit();
        // SAFETY: `trampoline` has `MPI_User_function`'s signature; MPI sets `operation`.
        let created = unsafe {
            ffi::MPI_Op_create(
                Some(trampoline),
                c_int::from(self.commutative),
                operation.as_mut_ptr(),
            )
        };
        if created != 0 {
            return Ok(created);
        }
        // SAFETY: `MPI_Op_create` succeeded, so it set the handle.
        let mut operation = unsafe { operation.assume_init() };
        LENT.set(Some(NonNull::from(&*self.function)));
        let code = call(operation);
        LENT.set(None);
        // SAFETY: the operation was created above and no call uses it any more (the blocking
        // call returned).
        unsafe { ffi::MPI_Op_free(&raw mut operation) };
        match PANICKED.take() {
            Some(message) => Err(MpiError::ReduceFailed(message)),
            None => Ok(code),
        }
    }
}

thread_local! {
    /// The function of the operation in the current call (see the module documentation).
    static LENT: Cell<Option<NonNull<Erased>>> = const { Cell::new(None) };
    /// Why the function failed during the current call, if it did.
    static PANICKED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The C function of every user operation: calls the function lent to this thread.
unsafe extern "C" fn trampoline(
    incoming: *mut c_void,
    accumulated: *mut c_void,
    len: *mut c_int,
    _datatype: *mut MPI_Datatype,
) {
    // SAFETY: MPI passes a valid count.
    let len = usize::try_from(unsafe { *len }).unwrap_or(0);
    let Some(function) = LENT.get() else {
        PANICKED.set(Some("MPI called the reduction outside its call".to_owned()));
        return;
    };
    // SAFETY: the slot holds the function only while `with_operation` runs the call, which
    // borrows the `Combine` that owns it.
    let function = unsafe { function.as_ref() };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| function(incoming, accumulated, len))) {
        PANICKED.set(Some(panic_message(payload.as_ref())));
    }
}

/// A panic's message, if it has one.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "the reduction panicked".to_owned())
}
