//! [`Completer`]: the thread that completes a stream's ops, in stream order, when their
//! events fire.
//!
//! A GPU worker runs an op's function (which launches work on the worker's stream), records an
//! event on the stream, and hands the event with the op's completion to its stream's
//! completer; then it takes its next op. The completer waits for the oldest event (a
//! blocking-sync event: the thread sleeps in the driver rather than spinning) and completes
//! its op, which releases the op's dependents. A stream runs its work in order, so its events
//! fire in the order they were recorded: waiting for the oldest first delays no op.
//!
//! The engine never makes a GPU worker wait for the device (a blocking cudarc call inside an
//! op's function, such as a copy from pageable host memory, still waits), and no CUDA host
//! callback runs engine code (a host callback may not call CUDA, and the completion of an op
//! may dispatch a GPU op).

use std::collections::VecDeque;
use std::sync::Arc as StdArc;
use std::thread::JoinHandle;

use cudarc::driver::sys::CUresult;
use depengine_device::{DeviceCompletion, DeviceError};
use depengine_sync::{Arc, Condvar, Mutex, lock, wait};

use crate::event::Event;
use crate::host_wait;

/// Ops whose work is launched, oldest first, and whether the worker side is gone.
#[derive(Default)]
struct Launched {
    ops: VecDeque<(StdArc<Event>, DeviceCompletion)>,
    closed: bool,
}

/// What the completer thread and the worker share.
#[derive(Default)]
struct Shared {
    launched: Mutex<Launched>,
    /// Signaled when an op is launched or the worker side closes.
    changed: Condvar,
}

/// A stream's completer: see the module documentation. Dropping it completes every op handed
/// to it (waiting for their events), then joins the thread.
pub(crate) struct Completer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Completer {
    /// Starts the completer thread of the stream of worker `name`.
    pub(crate) fn start(name: &str) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let thread = std::thread::Builder::new()
            .name(format!("{name}-done"))
            .spawn({
                let shared = Arc::clone(&shared);
                move || complete_launched(&shared)
            })?;
        Ok(Completer {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands over an op whose work was launched before `event` was recorded (and which shares
    /// it with its fence, `fence.rs`).
    pub(crate) fn launched(&self, event: StdArc<Event>, completion: DeviceCompletion) {
        lock(&self.shared.launched)
            .ops
            .push_back((event, completion));
        self.shared.changed.notify_one();
    }
}

impl std::fmt::Debug for Completer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completer")
            .field("launched", &lock(&self.shared.launched).ops.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        lock(&self.shared.launched).closed = true;
        self.shared.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            // A panic there (in an op's completion) was already reported by the panic hook.
            let _ = thread.join();
        }
    }
}

/// The completer thread: completes the oldest launched op once its event fired, until the
/// worker side is closed and nothing is left.
fn complete_launched(shared: &Shared) {
    loop {
        let (event, completion) = {
            let mut launched = lock(&shared.launched);
            loop {
                if let Some(op) = launched.ops.pop_front() {
                    break op;
                }
                if launched.closed {
                    return;
                }
                launched = wait(&shared.changed, launched);
            }
        };
        let outcome = host_wait::event(&event).map_err(device_error);
        drop(event);
        // The completion runs engine code and users' `Drop`s (a value released with its var):
        // a panic there must not end this thread, which later ops of the stream wait on. It was
        // reported by the panic hook.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            completion.complete(outcome);
        }));
    }
}

/// A CUDA error as a device op's failure; a sticky one as the loss of the device.
pub(crate) fn device_error(error: cudarc::driver::DriverError) -> DeviceError {
    let (backend, message) = ("cuda".to_owned(), error.to_string());
    if is_sticky(error.0) {
        DeviceError::Lost { backend, message }
    } else {
        DeviceError::Failed { backend, message }
    }
}

/// Whether `code` is one of the errors after which, as the CUDA documentation says of each,
/// the context is in an inconsistent state and every later call returns the same error.
fn is_sticky(code: CUresult) -> bool {
    matches!(
        code,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_that_ruin_the_context_are_sticky_others_are_not() {
        assert!(is_sticky(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(is_sticky(CUresult::CUDA_ERROR_LAUNCH_FAILED));
        assert!(!is_sticky(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        assert!(!is_sticky(CUresult::CUDA_ERROR_INVALID_VALUE));
    }
}
