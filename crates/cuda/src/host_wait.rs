//! Host waits for the work of a stream, and queries of it, through the driver's own calls: each
//! reports its own `CUresult` and nothing else.
//!
//! cudarc stores the failures of calls that cannot return one (its `Drop`s of events, buffers
//! and pinned memory, from any thread) on the context (`CudaContext::record_err`), and every
//! safe call first binds the context to the thread, which returns that stored error, clearing
//! it, *before doing anything*. Its `CudaEvent::synchronize` and `CudaStream::synchronize`
//! therefore return at once when such an error is there: trusted, that would complete an op
//! whose work still runs (its CPU dependents released, its buffers maybe dropped under the
//! kernel), and fail it with an error of no call of its own. These calls make the context
//! current themselves and leave a stored error where it is (`stray.rs` reports it).

use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaStream, DriverError, result};

use crate::current::MadeCurrent;
use crate::event::Event;

/// Waits until the work before `event` on its stream is done.
pub(crate) fn event(event: &Event) -> Result<(), DriverError> {
    // Waited for even if the context could not be made current: the wait is what matters.
    let current = MadeCurrent::new(event.context());
    // SAFETY: `event` is borrowed, so alive, and it was created in the context made current
    // above (the wait is made where the event's context is current, as cudarc's own does).
    let waited = unsafe { result::event::synchronize(event.cu_event()) };
    current.map(drop).and(waited)
}

/// Whether the work before `event` on its stream is done, without waiting.
pub(crate) fn query(event: &Event) -> Result<bool, DriverError> {
    // Queried even if the context could not be made current: a failure to make it current
    // must not pass for work done (its error is reported once the work is).
    let current = MadeCurrent::new(event.context());
    // SAFETY: `event` is alive, and was created in the context made current above.
    let queried = unsafe { result::event::query(event.cu_event()) };
    let current = current.map(drop);
    match queried {
        Err(DriverError(CUresult::CUDA_ERROR_NOT_READY)) => Ok(false),
        done => current.and(done).map(|()| true),
    }
}

/// Waits until the work launched so far on `stream` is done.
pub(crate) fn stream(stream: &CudaStream) -> Result<(), DriverError> {
    let current = MadeCurrent::new(stream.context());
    // SAFETY: `stream` is borrowed, so alive, and belongs to the context made current above.
    let waited = unsafe { result::stream::synchronize(stream.cu_stream()) };
    current.map(drop).and(waited)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cudarc::driver::DriverError;
    use cudarc::driver::sys::CUresult;

    use super::query;
    use crate::event::EventPool;
    use crate::gpu_or_skip::context_or_skip;

    #[test]
    fn an_error_another_call_stored_fails_no_record_wait_or_query() {
        let Some(context) = context_or_skip() else {
            return;
        };
        let stream = context.new_stream().unwrap();
        let pool = EventPool::new(Arc::clone(&context));
        let stored = || {
            context.record_err::<()>(Err(DriverError(CUresult::CUDA_ERROR_INVALID_VALUE)));
        };
        stored();
        let recorded = pool
            .record(&stream)
            .expect("a record takes no stored error");
        super::event(&recorded).expect("a wait takes no stored error");
        assert!(query(&recorded).expect("nor does a query"));
        super::stream(&stream).expect("nor a stream's wait");
        assert!(
            context.check_err().is_err(),
            "the stored error was taken by the engine's calls"
        );
        stored();
        crate::stray::report(&context, 0);
        context.check_err().expect("the report took it");
    }
}
