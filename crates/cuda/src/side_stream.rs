//! [`CudaRun::stream_wait`]: work a GPU op queues on a stream beside its worker's (a library's,
//! such as NCCL's), ordered both ways on the device with the worker's recycled events.
//!
//! The op's inputs are ready when the work queued on its worker's stream so far is done, and
//! the op is done when its worker's stream passes an event recorded after it (`tail.rs`). So a
//! side stream waits for the worker's stream before its work, and the worker's stream waits for
//! the side stream after it: the op's completion then covers the side work, and no thread waits
//! for the device.
//!
//! In a recorded plan's function (`graph.rs`), the worker's stream is its capture stream: the
//! first wait makes the side stream join the capture, so its work becomes part of the graph,
//! and the second, which must come, joins it back (else the capture fails, and the op). A side
//! stream that other threads use would take their calls into the capture too.

use cudarc::driver::CudaStream;

use crate::error::CudaError;
use crate::fence;
use crate::run::CudaRun;

impl CudaRun {
    /// Makes the work queued on `waiting` from now on start, on the device, after the work
    /// queued on `on` so far. For an op that queues work on a stream of its own beside its
    /// worker's: `run.stream_wait(&side, run.stream())` before that work, `run.stream_wait(
    /// run.stream(), &side)` after it, and the op completes only once the side work is done.
    /// Both streams must be of the worker's context. The event comes from the worker's
    /// recycled pool: no event is made or destroyed. Where CUDA refuses the wait on the device
    /// (or the event), the calling thread waits for `on`'s work instead (warned), as the
    /// engine's own fence waits do. In a recorded plan's function, the side stream joins the
    /// capture: only one no other thread uses, and joined back.
    ///
    /// ```no_run
    /// use depengine_cuda::CudaRun;
    ///
    /// // Inside a GPU op's function:
    /// let run = CudaRun::current().expect("a GPU worker");
    /// let side = run.context().new_stream()?;
    /// run.stream_wait(&side, run.stream())?;
    /// // ... queue work on `side` ...
    /// run.stream_wait(run.stream(), &side)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`CudaError::ForeignStream`] if a stream is of another context; [`CudaError::Driver`] if
    /// neither the device nor the host could wait (nothing is ordered then).
    pub fn stream_wait(&self, waiting: &CudaStream, on: &CudaStream) -> Result<(), CudaError> {
        let own = self.context().cu_ctx();
        if waiting.context().cu_ctx() != own || on.context().cu_ctx() != own {
            return Err(CudaError::ForeignStream {
                worker: self.device(),
            });
        }
        // The event goes back to the pool when dropped: the wait enqueued on it keeps the
        // record made here (`event.rs`).
        let event = self.tail().events().record(on);
        fence::order_after(waiting, on, event.as_ref().map_err(|error| *error))
            .map(drop)
            .map_err(|source| CudaError::Driver {
                call: "waiting for a stream (cuStreamWaitEvent, else on the host)",
                source,
            })
    }
}
