//! GPU executors obtained from the device backend, one compute and one copy executor per GPU,
//! created on first use and cached.

use std::sync::Arc;
use std::time::Duration;

use depengine_device::{DeviceBackend, DeviceError, Executor};
use depengine_sync::{AtomicUsize, OnceLock, Ordering};

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
    /// Per GPU id, the fault that lost the device ([`DeviceError::Lost`]): set once, by the
    /// thread that completes the faulted op; read by every push of a GPU op.
    lost: Box<[OnceLock<DeviceError>]>,
    /// Device ops handed to an executor (`run/device.rs`, `run/replay/device.rs` count them), and
    /// those whose work it reported done: for the shutdown that gives up on a hung device
    /// (`api/blocking.rs`), which the reports also show progress to.
    handed: AtomicUsize,
    reported: AtomicUsize,
    /// `EngineConfig::device_hang_limit`.
    hang_limit: Option<Duration>,
    compute_threads: usize,
    copy_threads: usize,
}

impl GpuExecutors {
    pub(crate) fn new(
        backend: Option<Arc<dyn DeviceBackend>>,
        compute_threads: usize,
        copy_threads: usize,
        hang_limit: Option<Duration>,
    ) -> Self {
        let lazies = || (0..MAX_GPUS).map(|_| Lazy::new()).collect();
        GpuExecutors {
            backend,
            compute: lazies(),
            copy: lazies(),
            lost: (0..MAX_GPUS).map(|_| OnceLock::new()).collect(),
            handed: AtomicUsize::new(0),
            reported: AtomicUsize::new(0),
            hang_limit,
            compute_threads,
            copy_threads,
        }
    }

    /// The route of a GPU op: the copy executor for copies, the compute executor otherwise
    /// (created here on first use, so that a context the backend cannot serve is a push error);
    /// refused on a lost device.
    pub(crate) fn route(&self, context: Context, property: FnProperty) -> Result<Route> {
        if self.backend.is_none() {
            return Err(EngineError::no_device_backend(context));
        }
        if let Some(fault) = self
            .lost
            .get(context.device_id() as usize)
            .and_then(OnceLock::get)
        {
            return Err(EngineError::device_lost(context, fault.clone()));
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
            .ok_or_else(|| EngineError::device_id_out_of_range(context, MAX_GPUS))?;
        match cell.get() {
            Some(executor) => Ok(executor),
            None => self.create(cell, context, copy),
        }
    }

    /// Notes what the device of `context` reported for an op's work: a
    /// [`DeviceError::Lost`] loses the device (the first such fault is kept), so that later GPU
    /// ops on it are refused at push. Ops already pushed run on and fail with the device.
    pub(crate) fn note_outcome(
        &self,
        context: Context,
        outcome: &std::result::Result<(), DeviceError>,
    ) {
        if let Err(fault @ DeviceError::Lost { .. }) = outcome
            && let Some(lost) = self.lost.get(context.device_id() as usize)
        {
            let _ = lost.set(fault.clone());
        }
    }

    /// Counts a device op handed to its executor. Relaxed, as `work_reported`: the counts are
    /// read only to tell a stalled shutdown whether device work is what it waits for, and
    /// whether that work moves.
    pub(crate) fn work_handed(&self) {
        self.handed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a device op whose work its executor reported done (or that it dropped).
    pub(crate) fn work_reported(&self) {
        self.reported.fetch_add(1, Ordering::Relaxed);
    }

    /// Device ops handed to an executor and not reported done.
    pub(crate) fn in_flight(&self) -> usize {
        let reported = self.reported.load(Ordering::Relaxed);
        self.handed.load(Ordering::Relaxed).saturating_sub(reported)
    }

    /// Device ops handed to an executor so far.
    pub(crate) fn handed(&self) -> usize {
        self.handed.load(Ordering::Relaxed)
    }

    /// Device ops whose work was reported done so far: progress even where no op completes
    /// (a replay completes once, after all of its GPU ops).
    pub(crate) fn reported(&self) -> usize {
        self.reported.load(Ordering::Relaxed)
    }

    /// How long a shutdown waits for device work that makes no progress.
    pub(crate) fn hang_limit(&self) -> Option<Duration> {
        self.hang_limit
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
            return Err(EngineError::no_device_backend(context));
        };
        let id = context.device_id();
        cell.get_or_try_init(|| {
            if copy {
                backend.copy(id, self.copy_threads)
            } else {
                backend.compute(id, self.compute_threads)
            }
            .map_err(|source| EngineError::backend(context, source))
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use depengine_device::{BackendError, Task};

    use super::*;

    /// Runs tasks at once.
    struct Inline;

    impl Executor for Inline {
        fn execute(&self, _priority: i32, task: Task) {
            task();
        }
    }

    /// A backend that fails the first request for an executor it gets.
    #[derive(Default)]
    struct FailsFirst {
        asked: AtomicUsize,
    }

    impl DeviceBackend for FailsFirst {
        fn name(&self) -> &'static str {
            "fails-first"
        }
        fn compute(&self, device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
            if self.asked.fetch_add(1, Ordering::Relaxed) == 0 {
                return Err(BackendError::NoSuchDevice {
                    backend: self.name().to_owned(),
                    device,
                });
            }
            Ok(Arc::new(Inline))
        }
        fn copy(&self, device: u32, threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
            self.compute(device, threads)
        }
    }

    /// The lookup a dispatch makes creates the executor if need be, fails with the backend's
    /// error (and tries again next time) if it cannot, and then finds it without asking.
    #[test]
    fn executor_is_created_once_or_fails_with_the_backends_error() {
        let backend = Arc::new(FailsFirst::default());
        let gpus = GpuExecutors::new(Some(backend.clone()), 1, 1, None);
        let gpu = Context::gpu(3);
        assert!(matches!(
            gpus.executor(gpu, false),
            Err(EngineError::Backend { .. })
        ));
        let first = Arc::clone(gpus.executor(gpu, false).unwrap());
        let again = gpus.executor(gpu, false).unwrap();
        assert!(Arc::ptr_eq(&first, again), "created once");
        assert_eq!(backend.asked.load(Ordering::Relaxed), 2);
        assert!(matches!(
            gpus.executor(Context::gpu(MAX_GPUS), true),
            Err(EngineError::DeviceIdOutOfRange { .. })
        ));
        let none = GpuExecutors::new(None, 1, 1, None);
        assert!(matches!(
            none.executor(gpu, true),
            Err(EngineError::NoDeviceBackend { .. })
        ));
        assert!(matches!(
            none.route(gpu, FnProperty::Normal),
            Err(EngineError::NoDeviceBackend { .. })
        ));
    }
}
