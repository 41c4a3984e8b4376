//! [`MadeCurrent`]: a context made current on the calling thread for the driver calls that need
//! it, and the caller's own context, if it had one, made current again after them.
//!
//! The driver's calls on an event or a stream act in the calling thread's current context. The
//! calls this crate makes outside its own threads (an event destroyed by whichever thread drops
//! it last, a host wait on a failure path) would otherwise leave the thread in the GPU's context:
//! a worker of another GPU, or a user's thread with a context of its own, would find it
//! replaced. A thread that had none keeps the GPU's, as after cudarc's own binds.

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
            // SAFETY: `previous` was current on this thread when `new` ran, and the calls this
            // guard covers release no context; keeping it alive meanwhile is the caller's part,
            // as it had it current. A failure leaves the GPU's context current, as cudarc's
            // own binds do.
            let _ = unsafe { result::ctx::set_current(previous) };
        }
    }
}
