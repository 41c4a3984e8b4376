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

/// The device backend's executors, per GPU id one for compute and one for copies.
///
/// Threads: a pusher of a GPU op creates its executor (under the cell's lock, on first use);
/// the thread that dispatches a ready GPU op (a pusher, or the thread that completed what the
/// op waited for) reads it, lock-free.
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

    /// The route of a GPU op: the copy executor for copies, the compute executor otherwise
    /// (created here on first use, so that a context the backend cannot serve is a push error).
    pub(crate) fn route(&self, context: Context, property: FnProperty) -> Result<Route> {
        if self.backend.is_none() {
            return Err(EngineError::NoDeviceBackend { context });
        }
        let copy = property.is_copy();
        self.executor(context, copy)?;
        Ok(Route::Device { copy })
    }

    /// The executor of GPU ops of `context` (its copy executor if `copy`), created if this is
    /// the first use. The dispatch of an op routed to it finds it created, by the op's
    /// [`route`](Self::route).
    ///
    /// # Errors
    ///
    /// [`EngineError::NoDeviceBackend`], [`EngineError::DeviceIdOutOfRange`],
    /// [`EngineError::Backend`] (the backend could not create it).
    #[inline]
    pub(crate) fn executor(&self, context: Context, copy: bool) -> Result<&Arc<dyn Executor>> {
        let id = context.device_id();
        let cells = if copy { &self.copy } else { &self.compute };
        let cell = cells
            .get(id as usize)
            .ok_or(EngineError::DeviceIdOutOfRange {
                context,
                limit: MAX_GPUS,
            })?;
        match cell.get() {
            Some(executor) => Ok(executor),
            None => self.create(cell, context, copy),
        }
    }

    /// Creates the executor of `cell` (see `executor`).
    #[cold]
    fn create<'a>(
        &'a self,
        cell: &'a Lazy<Arc<dyn Executor>>,
        context: Context,
        copy: bool,
    ) -> Result<&'a Arc<dyn Executor>> {
        let Some(backend) = &self.backend else {
            return Err(EngineError::NoDeviceBackend { context });
        };
        let id = context.device_id();
        cell.get_or_try_init(|| {
            if copy {
                backend.copy(id, self.copy_threads)
            } else {
                backend.compute(id, self.compute_threads)
            }
            .map_err(|source| EngineError::Backend { context, source })
        })
    }
}
