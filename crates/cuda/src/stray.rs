//! [`report`]: an error that cudarc stored on a context, reported as a warning, failing no op.
//!
//! cudarc's `Drop`s (of buffers, events, pinned memory) cannot return their failure, so they
//! store it on the context, from whichever thread drops the value; the next safe cudarc call
//! there, on any thread, returns it as its own. Such a failure belongs to no op: a value is
//! dropped after the op that used it completed (`CudaRun::drop_after_completion`, a deleted
//! var's value). So the engine's own calls never take it (`host_wait.rs`, `event.rs`,
//! `fence.rs`), and a GPU worker takes it before each op's function runs, so that the cudarc
//! calls the function makes return their own errors. It is reported here, with the device.
//! A sticky fault is not lost so: every later query of the device's work reports it again,
//! failing the ops whose work it was.
//!
//! Subtle: a value dropped by another thread between this report and a cudarc call of the
//! function can still store its failure in time for that call; cudarc keeps one slot per
//! context, and only its own calls clear it.

use cudarc::driver::CudaContext;

/// Takes the error stored on `context`, if any, and reports it as a warning of device
/// `device`.
pub(crate) fn report(context: &CudaContext, device: u32) {
    if let Err(error) = context.check_err() {
        tracing::warn!(
            target: "depengine_cuda",
            device,
            %error,
            "a CUDA call that no op made failed (a drop of a buffer, event or pinned memory); \
             no op fails for it",
        );
    }
}
