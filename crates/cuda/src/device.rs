//! [`GpuDevice`]: one GPU as the backend holds it: its id and its primary context.

use std::sync::Arc;

use cudarc::driver::CudaContext;

use crate::error::CudaError;

/// One GPU: see the module documentation.
pub(crate) struct GpuDevice {
    ordinal: u32,
    context: Arc<CudaContext>,
}

impl GpuDevice {
    /// Opens device `ordinal` (which the driver reports) through its primary context.
    /// `track_events`: whether cudarc records an event for every use of a buffer made from now
    /// on (see `CudaBackend::without_event_tracking` for when it may be off).
    pub(crate) fn open(ordinal: u32, track_events: bool) -> Result<Self, CudaError> {
        let context = CudaContext::new(ordinal as usize).map_err(|source| CudaError::Driver {
            call: "cuDevicePrimaryCtxRetain",
            source,
        })?;
        if !track_events {
            // SAFETY: `CudaBackend::without_event_tracking`'s caller promised that every use
            // of a buffer made on this device from now on is ordered by the engine: made on the
            // stream of a sync GPU op naming the buffer's var (completed only when an event
            // recorded after its function returned has fired), or after such ops completed.
            // That is the order cudarc's per-buffer events would otherwise enforce.
            unsafe { context.disable_event_tracking() };
        }
        Ok(GpuDevice { ordinal, context })
    }

    pub(crate) fn ordinal(&self) -> u32 {
        self.ordinal
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }
}
