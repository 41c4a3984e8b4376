//! [`MadeCurrent`]: a context made current on the calling thread for the driver calls that need
//! it, and the caller's context made current again after them.
//!
//! The driver's calls on an event or a stream act in the calling thread's current context. The
//! calls this crate makes outside its own threads (an event destroyed by whichever thread drops
//! it last, a host wait on a failure path) would otherwise leave the thread in the GPU's context:
//! a user's thread that dropped the engine, or a worker of another GPU, would find its own
//! context replaced.

use cudarc::driver::sys::CUcontext;
use cudarc::driver::{CudaContext, DriverError, result};

/// `context` current on this thread until dropped; then the one current before it, if there
/// was one. A thread that had none keeps `context` (this crate's completion threads, which
/// need it for every call, make it current once).
#[must_use = "the context is current only while this lives"]
pub(crate) struct MadeCurrent {
    /// What to make current again: `None` when `context` was current already, or nothing was.
    restore: Option<CUcontext>,
}

impl MadeCurrent {
    /// Makes `context` current on this thread.
    pub(crate) fn new(context: &CudaContext) -> Result<Self, DriverError> {
        let previous = result::ctx::get_current()?;
        if previous == Some(context.cu_ctx()) {
            return Ok(MadeCurrent { restore: None });
        }
        // SAFETY: `context` is borrowed, so alive, and its handle valid while it is: a retained
        // primary context, which cudarc releases only when the last `Arc` to it goes.
        unsafe { result::ctx::set_current(context.cu_ctx()) }?;
        Ok(MadeCurrent { restore: previous })
    }
}

impl Drop for MadeCurrent {
    fn drop(&mut self) {
        if let Some(previous) = self.restore {
            // SAFETY: `previous` was current on this thread when `new` ran, and the calls made
            // since release no context, so it is still valid. A failure leaves the GPU's
            // context current, as cudarc's own binds do.
            let _ = unsafe { result::ctx::set_current(previous) };
        }
    }
}
