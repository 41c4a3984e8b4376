//! Host waits for the work of a stream, and queries of it, that wait even when the context
//! holds an error stored by some other call.
//!
//! cudarc stores the failures of calls that cannot return one (its `Drop`s of events, buffers
//! and pinned memory, from any thread) on the context (`CudaContext::record_err`), and every
//! safe call first binds the context to the thread, which returns that stored error, clearing
//! it, *before doing anything*. Its `CudaEvent::synchronize` and `CudaStream::synchronize`
//! therefore return at once when such an error is there. Trusted, that would complete an op
//! whose work is still running: its CPU dependents released, its buffers maybe dropped under
//! the kernel. So these waits take the stored error, make the context current themselves and
//! wait through the driver, and only then report: the stored error first (it is an error of
//! the context the op's work ran in), else the wait's own.

use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaStream, DriverError, result};

use crate::current::MadeCurrent;
use crate::event::Event;

/// Waits until the work before `event` on its stream is done.
pub(crate) fn event(event: &Event) -> Result<(), DriverError> {
    let stored = event.context().check_err();
    // Waited for even if the context could not be made current: the wait is what matters.
    let current = MadeCurrent::new(event.context());
    // SAFETY: `event` is borrowed, so alive, and it was created in the context made current
    // above (the wait is made where the event's context is current, as cudarc's own does).
    let waited = unsafe { result::event::synchronize(event.cu_event()) };
    stored.and(current.map(drop)).and(waited)
}

/// Whether the work before `event` on its stream is done, without waiting. Once it is, an
/// error stored on the context is reported, as [`event`] reports it; while the work runs, the
/// stored error is left where it is, for the query that finds the work done.
pub(crate) fn query(event: &Event) -> Result<bool, DriverError> {
    let context = event.context();
    // Queried even if the context could not be made current: a failure to make it current
    // must not pass for work done (its error is reported once the work is).
    let current = MadeCurrent::new(context);
    // SAFETY: `event` is alive, and was created in the context made current above.
    let queried = unsafe { result::event::query(event.cu_event()) };
    let current = current.map(drop);
    match queried {
        Err(DriverError(CUresult::CUDA_ERROR_NOT_READY)) => Ok(false),
        done => context.check_err().and(current).and(done).map(|()| true),
    }
}

/// Waits until the work launched so far on `stream` is done.
pub(crate) fn stream(stream: &CudaStream) -> Result<(), DriverError> {
    let stored = stream.context().check_err();
    let current = MadeCurrent::new(stream.context());
    // SAFETY: `stream` is borrowed, so alive, and belongs to the context made current above.
    let waited = unsafe { result::stream::synchronize(stream.cu_stream()) };
    stored.and(current.map(drop)).and(waited)
}
