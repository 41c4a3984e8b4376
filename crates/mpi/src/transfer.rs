//! [`Transfer`]: an op's MPI call as the op hands it to the communication thread: the
//! non-blocking call to start ([`Call`]) and how to complete the op once MPI is done; and
//! [`Buffer`], the data such a call names.
//!
//! The ownership rule every transfer keeps: the memory its call's buffers name is owned or
//! held by its `finish` (the op's `Held` token, which holds the op's data until it completes,
//! and any copy made for the call), and the communication thread calls `finish` only once MPI
//! has completed the request (`MPI_Test`), or the start failed. So MPI never touches a buffer
//! after its op completed, and no op reaches the data while MPI may.

use std::ffi::{c_int, c_void};

use mpi::datatype::Equivalence;
use mpi::ffi::{self, MPI_Comm, MPI_Datatype, MPI_Request};
use mpi::raw::AsRaw;

use crate::error::MpiError;
use crate::reduce::Reduce;

/// Completes the op, with the outcome of its call.
pub(crate) type Finish = Box<dyn FnOnce(Result<(), MpiError>) + Send>;

/// An op's MPI call (see the module documentation).
pub(crate) struct Transfer {
    pub(crate) call: Call,
    pub(crate) finish: Finish,
}

/// A non-blocking MPI call: its arguments but the communicator and the request. Ranks are
/// checked against the communicator and tags are MPI's (at most `u16::MAX`, below MPI's
/// smallest `MPI_TAG_UB`) when the op is pushed.
pub(crate) enum Call {
    /// `MPI_Iallreduce` from `from` into `into`, their lengths equal.
    Allreduce {
        from: Buffer,
        into: Buffer,
        reduce: Reduce,
    },
    /// `MPI_Ibcast` of `buffer` from `root`.
    Broadcast { buffer: Buffer, root: c_int },
    /// `MPI_Iallgather` of `from` into `into`, which holds the communicator's size times
    /// `from`'s count.
    Allgather { from: Buffer, into: Buffer },
    /// `MPI_Ireduce_scatter_block` of `from` into `into`, blocks of `into`'s count.
    ReduceScatter {
        from: Buffer,
        into: Buffer,
        reduce: Reduce,
    },
    /// `MPI_Isend` of `buffer` to `to`.
    Send {
        buffer: Buffer,
        to: c_int,
        tag: c_int,
    },
    /// `MPI_Irecv` into `buffer` from `from`.
    Recv {
        buffer: Buffer,
        from: c_int,
        tag: c_int,
    },
    /// `MPI_Ibarrier`.
    Barrier,
}

impl Call {
    /// Starts the call on `comm`, setting `request`; MPI's error code (0: started).
    pub(crate) fn start(self, comm: MPI_Comm, request: &mut MPI_Request) -> c_int {
        // SAFETY: for each call, the buffers stay valid, and unused by anything else, until the
        // request completes (the module's ownership rule); `comm` is the communication
        // thread's communicator; each count and datatype describe their buffer (`Buffer::of`).
        unsafe {
            match self {
                Call::Allreduce { from, into, reduce } => ffi::MPI_Iallreduce(
                    from.ptr,
                    into.ptr,
                    into.count,
                    into.datatype,
                    reduce.operation().as_raw(),
                    comm,
                    request,
                ),
                Call::Broadcast { buffer, root } => ffi::MPI_Ibcast(
                    buffer.ptr,
                    buffer.count,
                    buffer.datatype,
                    root,
                    comm,
                    request,
                ),
                Call::Allgather { from, into } => ffi::MPI_Iallgather(
                    from.ptr,
                    from.count,
                    from.datatype,
                    into.ptr,
                    from.count,
                    into.datatype,
                    comm,
                    request,
                ),
                Call::ReduceScatter { from, into, reduce } => ffi::MPI_Ireduce_scatter_block(
                    from.ptr,
                    into.ptr,
                    into.count,
                    into.datatype,
                    reduce.operation().as_raw(),
                    comm,
                    request,
                ),
                Call::Send { buffer, to, tag } => ffi::MPI_Isend(
                    buffer.ptr,
                    buffer.count,
                    buffer.datatype,
                    to,
                    tag,
                    comm,
                    request,
                ),
                Call::Recv { buffer, from, tag } => ffi::MPI_Irecv(
                    buffer.ptr,
                    buffer.count,
                    buffer.datatype,
                    from,
                    tag,
                    comm,
                    request,
                ),
                Call::Barrier => ffi::MPI_Ibarrier(comm, request),
            }
        }
    }
}

/// A buffer an MPI call reads or writes: where the elements are, how many, and their MPI type.
#[derive(Clone, Copy)]
pub(crate) struct Buffer {
    ptr: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
}

// SAFETY: a `Buffer` is only an address, a count and a predefined datatype's handle (a global
// of the MPI library); it moves from the op that made it to the communication thread, which
// alone passes it to MPI (`Call::start`), under the module's ownership rule.
unsafe impl Send for Buffer {}

impl Buffer {
    /// `slice`, for a call that reads it.
    pub(crate) fn of<T: Equivalence>(slice: &[T]) -> Result<Self, MpiError> {
        Ok(Buffer {
            ptr: slice.as_ptr().cast_mut().cast(),
            count: count(slice.len())?,
            datatype: T::equivalent_datatype().as_raw(),
        })
    }

    /// `slice`, for a call that writes it.
    pub(crate) fn of_mut<T: Equivalence>(slice: &mut [T]) -> Result<Self, MpiError> {
        Ok(Buffer {
            ptr: slice.as_mut_ptr().cast(),
            count: count(slice.len())?,
            datatype: T::equivalent_datatype().as_raw(),
        })
    }
}

/// `len` as an MPI count.
pub(crate) fn count(len: usize) -> Result<c_int, MpiError> {
    c_int::try_from(len).map_err(|_| MpiError::TooLong { len })
}
