//! GPU executors obtained from the device backend, one compute and one copy executor per GPU,
//! created on first use and cached.

use std::sync::Arc;

use depengine_device::{DeviceBackend, Executor};

use crate::context::{Context, FnProperty};
use crate::error::{EngineError, Result};
use crate::op::record::Route;
use crate::route::lazy::Lazy;

/// GPU ids the engine supports.
pub(crate) const MAX_GPUS: u32 = 64;

pub(crate) struct GpuExecutors {
    backend: Option<Arc<dyn DeviceBackend>>,
    compute: Box<[Lazy<Arc<dyn Executor>>]>,
    copy: Box<[Lazy<Arc<dyn Executor>>]>,
    compute_threads: usize,
    copy_threads: usize,
}

impl GpuExecutors {
    pub(crate) fn new(
        backend: Option<Arc<dyn DeviceBackend>>,
        compute_threads: usize,
        copy_threads: usize,
    ) -> Self {
        let lazies = || (0..MAX_GPUS).map(|_| Lazy::new()).collect();
        GpuExecutors {
            backend,
            compute: lazies(),
            copy: lazies(),
            compute_threads,
            copy_threads,
        }
    }

    /// The route of a GPU op: the copy executor for copies, the compute executor otherwise.
    pub(crate) fn route(&self, context: Context, property: FnProperty) -> Result<Route> {
        let Some(backend) = &self.backend else {
            return Err(EngineError::NoDeviceBackend { context });
        };
        let id = context.device_id();
        let (cells, copy) = if property.is_copy() {
            (&self.copy, true)
        } else {
            (&self.compute, false)
        };
        let cell = cells
            .get(id as usize)
            .ok_or(EngineError::DeviceIdOutOfRange {
                context,
                limit: MAX_GPUS,
            })?;
        cell.get_or_try_init(|| {
            if copy {
                backend.copy(id, self.copy_threads)
            } else {
                backend.compute(id, self.compute_threads)
            }
            .map_err(|source| EngineError::Backend { context, source })
        })?;
        Ok(Route::Device { copy })
    }

    /// The executor of a resolved [`Route::Device`] (created when the route was resolved).
    #[inline]
    pub(crate) fn executor(&self, gpu: u32, copy: bool) -> Option<&Arc<dyn Executor>> {
        let cells = if copy { &self.copy } else { &self.compute };
        cells.get(gpu as usize).and_then(Lazy::get)
    }
}
