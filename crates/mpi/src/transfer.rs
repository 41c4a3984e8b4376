//! [`Transfer`]: an op's MPI call as the op hands it to the communication thread: the
//! non-blocking call to start ([`Call`]) and how to complete the op once MPI is done; and
//! [`Buffer`], the data such a call names.
//!
//! The ownership rule every transfer keeps: the memory a call's buffers name is data its op
//! holds until `finish` completes it, and the communication thread calls `finish` only once
//! MPI completed the request (`MPI_Test`), or the call did not start. So MPI never touches a
//! buffer after its op completed, and no other op reaches the data while MPI may.

use std::ffi::{c_int, c_void};

use mpi::ffi::{self, MPI_Comm, MPI_Datatype, MPI_Request};
use mpi::raw::AsRaw;

use crate::combine::Combine;
use crate::element::Element;
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

/// An MPI call: its arguments but the communicator and the request. Ranks are checked against the communicator, and tags are at most `u16::MAX`
/// (below MPI's smallest `MPI_TAG_UB`), when the op is pushed.
pub(crate) enum Call {
    /// `MPI_Allreduce` of `buffer` in place, blocking or not (see `Call::make`).
    Allreduce { buffer: Buffer, reduce: Reduce },
    /// The same, by the caller's function (`combine.rs`).
    AllreduceBy { buffer: Buffer, combine: Combine },
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

/// What making a call did.
pub(crate) enum Made {
    /// A non-blocking call: MPI's error code; 0: started, and the request set.
    Started(c_int),
    /// A blocking call, made to completion: MPI's error code.
    Done(c_int),
    /// A call that returned, but whose op fails with this error.
    Failed(MpiError),
}

impl Call {
    /// Makes the call on `comm`: starts a non-blocking one, setting `request`, or makes a
    /// blocking one. An allreduce is blocking where `blocking` allows it (on the world, until
    /// its first split: `Lane::blocking`): MPI's blocking collectives use tuned algorithms that
    /// its non-blocking ones lack (up to 2x faster here from 1 MiB on), and every rank makes the
    /// same kind of call (MPI matches no blocking collective with a non-blocking one). While it
    /// blocks, the requests in flight progress (MPI progresses them while a call blocks), and
    /// the calls after it in the communicator's order start after it, as after any blocking
    /// MPI call. A reduction by the caller's function is lent to MPI for a blocking call only
    /// (`combine.rs`): elsewhere its op fails with [`MpiError::UserReduceAfterSplit`].
    pub(crate) fn make(self, comm: MPI_Comm, blocking: bool, request: &mut MPI_Request) -> Made {
        // SAFETY: for each call, the buffers stay valid, and unused by anything else, until the
        // request completes or the blocking call returns (the module's ownership rule); `comm`
        // is the communication thread's communicator; each count and datatype describe their
        // buffer (`Buffer::of`); `MPI_IN_PLACE` is `in_place.c`'s.
        unsafe {
            Made::Started(match self {
                Call::Allreduce { buffer, reduce } if blocking => {
                    return Made::Done(ffi::MPI_Allreduce(
                        depengine_mpi_in_place,
                        buffer.ptr,
                        buffer.count,
                        buffer.datatype,
                        reduce.operation().as_raw(),
                        comm,
                    ));
                }
                Call::Allreduce { buffer, reduce } => ffi::MPI_Iallreduce(
                    depengine_mpi_in_place,
                    buffer.ptr,
                    buffer.count,
                    buffer.datatype,
                    reduce.operation().as_raw(),
                    comm,
                    request,
                ),
                Call::AllreduceBy { .. } if !blocking => {
                    return Made::Failed(MpiError::UserReduceAfterSplit);
                }
                Call::AllreduceBy { buffer, combine } => {
                    let call = combine.with_operation(|operation| {
                        ffi::MPI_Allreduce(
                            depengine_mpi_in_place,
                            buffer.ptr,
                            buffer.count,
                            buffer.datatype,
                            operation,
                            comm,
                        )
                    });
                    return match call {
                        Ok(code) => Made::Done(code),
                        Err(error) => Made::Failed(error),
                    };
                }
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
            })
        }
    }
}

/// A buffer an MPI call reads or writes: where the elements are, how many, and their MPI
/// type.
#[derive(Clone, Copy)]
pub(crate) struct Buffer {
    ptr: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
}

// SAFETY: a `Buffer` is only an address, a count and a predefined datatype's handle (a
// constant of the MPI library, `element.rs`); it moves from the op that made it to the communication thread, which
// alone passes it to MPI (`Call::start`), under the module's ownership rule.
unsafe impl Send for Buffer {}

impl Buffer {
    /// `slice`, for a call that reads it.
    pub(crate) fn of<T: Element>(slice: &[T]) -> Result<Self, MpiError> {
        Ok(Buffer {
            ptr: slice.as_ptr().cast_mut().cast(),
            count: count(slice.len())?,
            datatype: T::equivalent_datatype().as_raw(),
        })
    }

    /// `slice`, for a call that writes it.
    pub(crate) fn of_mut<T: Element>(slice: &mut [T]) -> Result<Self, MpiError> {
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
