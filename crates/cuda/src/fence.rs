//! [`StreamFence`]: the fence a GPU worker reports once an op's work was launched, and the waits
//! that order the work of the ops released behind it.
//!
//! After an op's function returns, its worker records an event on its stream: the fence. The
//! engine releases the GPU ops behind the op at once (`depengine-device`'s
//! `DeviceCompletion::launched`), each with the fences of the launched ops it depends on; before
//! running such an op, its worker makes its own stream wait for each fence's event
//! (`cuStreamWaitEvent`: the device waits, not the host). A fence recorded on the worker's own
//! stream needs no wait: a stream runs its work in order.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_wait_flags;
use cudarc::driver::{CudaStream, DriverError, result};
use depengine_device::Fence;

use crate::event::Event;
use crate::host_wait;

/// The fence of a launched GPU op: an event recorded on the stream its work was launched on,
/// after that work.
pub(crate) struct StreamFence {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) event: Arc<Event>,
}

impl StreamFence {
    /// The engine's fence for `event`, recorded on `stream`.
    pub(crate) fn fence(stream: &Arc<CudaStream>, event: &Arc<Event>) -> Fence {
        Fence::new(StreamFence {
            stream: Arc::clone(stream),
            event: Arc::clone(event),
        })
    }
}

/// Makes `stream`'s next work start after each of `fences` recorded on another stream. A wait
/// that fails becomes a host wait for the event, on this failure path only, so the order
/// holds; its error is put back on the context, where the op's completion finds it and fails
/// (`host_wait.rs`): cudarc's `wait` returns, before waiting, an error some other call stored
/// there, which would otherwise be lost (the context keeps one error: the host wait's own, if
/// any, is of the same context, and a sticky one fails that completion's wait again). The
/// failure of the work behind a fence reaches the ops behind it through the engine, which
/// completes them with it (`docs/cuda.md`, failures), whether or not their own work fails too
/// (it does on the same device: CUDA's errors are sticky within a context). Fences of another
/// backend carry no order this backend knows: there are none, as an engine has one backend.
pub(crate) fn wait_for(stream: &Arc<CudaStream>, fences: &[Fence]) {
    for fence in fences {
        let Some(point) = fence.downcast_ref::<StreamFence>() else {
            continue;
        };
        if Arc::ptr_eq(&point.stream, stream) {
            continue;
        }
        if let Err(error) = device_wait(stream, &point.event) {
            let _ = host_wait::event(&point.event);
            stream.context().record_err::<()>(Err(error));
        }
    }
}

/// Makes `stream`'s next work wait (on the device) for `event`. Returns, before waiting, an
/// error some other call stored on the context, as cudarc's own `CudaStream::wait` does.
fn device_wait(stream: &CudaStream, event: &Event) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: both are alive (borrowed); the stream belongs to the context made current above,
    // and the event may belong to another (a fence of another GPU), which `cuStreamWaitEvent`
    // allows.
    unsafe {
        result::stream::wait_event(
            stream.cu_stream(),
            event.cu_event(),
            CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
}
