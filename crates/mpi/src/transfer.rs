//! [`Transfer`]: an op's MPI call as the op hands it to the communication thread: the
//! non-blocking call to start ([`Call`]) and how to complete the op once MPI is done; and
//! [`Buffer`], the data such a call names.
//!
//! The ownership rule every transfer keeps: the memory a call's buffers name is data its op
//! holds until `finish` completes it, and the communication thread calls `finish` only once
//! MPI completed the request (`MPI_Test`), or the call did not start. So MPI never touches a
//! buffer after its op completed, and no other op reaches the data while MPI may.

use std::ffi::{c_int, c_void};

use mpi::datatype::Equivalence;
use mpi::ffi::{self, MPI_Comm, MPI_Datatype, MPI_Request};
use mpi::raw::AsRaw;

use crate::error::MpiError;
use crate::reduce::Reduce;

unsafe extern "C" {
    /// `MPI_IN_PLACE`, from `in_place.c` (the build script compiles it against `mpi.h`).
    static depengine_mpi_in_place: *mut c_void;
}

/// Completes the op, with the outcome of its call.
pub(crate) type Finish = Box<dyn FnOnce(Result<(), MpiError>) + Send>;

/// An op's MPI call (see the module documentation).
pub(crate) struct Transfer {
    pub(crate) call: Call,
    pub(crate) finish: Finish,
}

/// A non-blocking MPI call: its arguments but the communicator, the request and scratch
/// memory. Ranks are checked against the communicator, and tags are at most `u16::MAX`
/// (below MPI's smallest `MPI_TAG_UB`), when the op is pushed.
pub(crate) enum Call {
    /// `MPI_Iallreduce` of `buffer` into itself, sent from a copy (Open MPI's non-blocking
    /// collectives are slower in place); or, with nothing else in flight, a blocking
    /// `MPI_Allreduce` in place (`run_alone`).
    Allreduce { buffer: Buffer, reduce: Reduce },
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
    /// Makes the call to completion on `comm`, if it is one that does better so when nothing
    /// else is in flight (an allreduce: MPI's blocking collectives use tuned algorithms that
    /// its non-blocking ones lack); MPI's error code. Nothing waits behind it that it could
    /// need: the calls before it have started, and those after it start after it in MPI's
    /// order anyway.
    pub(crate) fn run_alone(&self, comm: MPI_Comm) -> Option<c_int> {
        let Call::Allreduce { buffer, reduce } = self else {
            return None;
        };
        // SAFETY: `buffer` is data the op holds until the call returns (the module's rule);
        // `MPI_IN_PLACE` is `in_place.c`'s; `comm` is the communication thread's.
        Some(unsafe {
            ffi::MPI_Allreduce(
                depengine_mpi_in_place,
                buffer.ptr,
                buffer.count,
                buffer.datatype,
                reduce.operation().as_raw(),
                comm,
            )
        })
    }

    /// Starts the call on `comm`, setting `request`; MPI's error code (0: started). `scratch`
    /// is memory the call may use until it completes (an allreduce's copy of its input).
    pub(crate) fn start(
        self,
        comm: MPI_Comm,
        request: &mut MPI_Request,
        scratch: &mut Vec<u8>,
    ) -> c_int {
        let source = if let Call::Allreduce { buffer, .. } = &self {
            scratch.clear();
            // SAFETY: the buffer's `bytes` bytes are the data the op holds (the module's rule).
            scratch.extend_from_slice(unsafe {
                std::slice::from_raw_parts(buffer.ptr.cast::<u8>(), buffer.bytes)
            });
            scratch.as_ptr().cast::<c_void>()
        } else {
            std::ptr::null()
        };
        // SAFETY: for each call, the buffers stay valid, and unused by anything else, until the
        // request completes (the module's ownership rule; `scratch` is kept with the request
        // by the caller); `comm` is the communication thread's communicator; each count and
        // datatype describe their buffer (`Buffer::of`).
        unsafe {
            match self {
                Call::Allreduce { buffer, reduce } => ffi::MPI_Iallreduce(
                    source,
                    buffer.ptr,
                    buffer.count,
                    buffer.datatype,
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

/// A buffer an MPI call reads or writes: where the elements are, how many (and bytes), and
/// their MPI type.
#[derive(Clone, Copy)]
pub(crate) struct Buffer {
    ptr: *mut c_void,
    count: c_int,
    bytes: usize,
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
            bytes: size_of_val(slice),
            datatype: T::equivalent_datatype().as_raw(),
        })
    }

    /// `slice`, for a call that writes it.
    pub(crate) fn of_mut<T: Equivalence>(slice: &mut [T]) -> Result<Self, MpiError> {
        Ok(Buffer {
            ptr: slice.as_mut_ptr().cast(),
            count: count(slice.len())?,
            bytes: size_of_val(slice),
            datatype: T::equivalent_datatype().as_raw(),
        })
    }
}

/// `len` as an MPI count.
pub(crate) fn count(len: usize) -> Result<c_int, MpiError> {
    c_int::try_from(len).map_err(|_| MpiError::TooLong { len })
}
