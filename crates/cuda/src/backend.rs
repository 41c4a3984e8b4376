//! [`CudaBackend`]: the `DeviceBackend` that runs depengine's GPU ops on CUDA devices.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use depengine_device::{BackendError, DeviceBackend, Executor};
use depengine_sync::{Mutex, lock};

use crate::device::GpuDevice;
use crate::driver::Driver;
use crate::error::CudaError;
use crate::executor::{Kind, StreamExecutor};
use crate::peer;

/// depengine's CUDA backend: per GPU, compute workers and copy workers, each with a
/// non-blocking stream of its own, and ops completed when the events recorded after them have
/// fired (the crate documentation has the whole path).
///
/// Making one never fails and touches no driver: the driver is probed, and a device opened,
/// when the engine first asks for a device's executors (at the first push of an op on that
/// device). Without a driver, or for a device the driver does not report, that request fails
/// with a [`BackendError`] naming why, which the engine reports to the pusher:
///
/// ```
/// use depengine_cuda::CudaBackend;
/// use depengine_device::{BackendError, DeviceBackend};
///
/// let backend = CudaBackend::new();
/// assert_eq!(backend.name(), "cuda");
/// match backend.compute(0, 1) {
///     Ok(_executor) => println!("device 0 has its compute workers"),
///     Err(BackendError::Unavailable { message, .. }) => println!("no CUDA here: {message}"),
///     Err(error) => println!("{error}"),
/// }
/// ```
pub struct CudaBackend {
    /// The devices opened so far, by id. Locked only when an executor is made (at most twice
    /// per device in an engine, which caches them).
    devices: Mutex<HashMap<u32, Arc<GpuDevice>>>,
    track_events: bool,
    /// Whether a GPU op's stream waits for the fences of the launched ops it was released
    /// behind (off only to show the race the waits prevent).
    fence_waits: bool,
}

impl CudaBackend {
    /// A backend that leaves cudarc's per-buffer event tracking on: cudarc records an event
    /// for each use of a buffer and makes a stream that uses it next wait for that event. The
    /// engine already orders the ops that name a buffer's var, so those events are redundant
    /// there, but they keep sound any use of a buffer outside the engine's ops.
    pub fn new() -> Self {
        CudaBackend {
            devices: Mutex::new(HashMap::new()),
            track_events: true,
            fence_waits: true,
        }
    }

    /// A backend that turns cudarc's per-buffer event tracking off on the devices it opens:
    /// the engine alone orders the uses of the buffers made through them (buffers made through
    /// another `CudaContext` of the same device keep their tracking).
    ///
    /// # Safety
    /// Every use of a buffer made through this backend's contexts (each launch, copy and drop)
    /// must be ordered by the engine: made by a sync GPU op that names the buffer's var (a
    /// write for a write), on that op's stream ([`CudaRun::stream`](crate::CudaRun::stream)),
    /// or outside any op once the ops that use it completed: a GPU op starts its work after the
    /// work of the ops before it (its stream waits for their events), a CPU op after that work
    /// finished, so these uses never overlap on the device. Not allowed for such buffers:
    /// - work launched on any other stream;
    /// - an async GPU op (`push_async`), which completes whatever its stream still runs;
    /// - dropping a buffer inside an op whose stream did not make it (cudarc frees a buffer on
    ///   the stream that allocated it); hand it to
    ///   [`CudaRun::drop_after_completion`](crate::CudaRun::drop_after_completion) instead.
    pub unsafe fn without_event_tracking() -> Self {
        CudaBackend {
            devices: Mutex::new(HashMap::new()),
            track_events: false,
            fence_waits: true,
        }
    }

    /// This backend, with the waits that order a GPU op's work behind the launched ops it
    /// depends on switched off: a GPU op released at another's launch starts its work at once,
    /// racing with that op's. For showing that race, which the GPU tests do (its results
    /// differ from the CPU's); never for real work.
    ///
    /// # Safety
    ///
    /// GPU ops then read and write buffers while the work of the ops before them still uses
    /// them: only buffers of plain numbers, whose wrong values are the point, may be used, and
    /// only with cudarc's event tracking off ([`without_event_tracking`](Self::without_event_tracking)),
    /// since tracking would order the uses itself.
    #[must_use]
    pub unsafe fn without_fence_waits(mut self) -> Self {
        self.fence_waits = false;
        self
    }

    /// Device `id`, opened on first use.
    fn device(&self, id: u32) -> Result<Arc<GpuDevice>, BackendError> {
        let unavailable = |error: CudaError| BackendError::Unavailable {
            backend: self.name().to_owned(),
            device: id,
            message: error.to_string(),
        };
        let driver = Driver::probe().map_err(unavailable)?;
        if driver.check_device(id as usize).is_err() {
            return Err(BackendError::NoSuchDevice {
                backend: self.name().to_owned(),
                device: id,
            });
        }
        let mut devices = lock(&self.devices);
        if let Some(device) = devices.get(&id) {
            return Ok(Arc::clone(device));
        }
        let device = Arc::new(GpuDevice::open(id, self.track_events).map_err(unavailable)?);
        peer::link(&*device, devices.values());
        devices.insert(id, Arc::clone(&device));
        Ok(device)
    }

    fn executor(
        &self,
        id: u32,
        kind: Kind,
        threads: usize,
    ) -> Result<Arc<dyn Executor>, BackendError> {
        let device = self.device(id)?;
        Ok(Arc::new(StreamExecutor::start(
            &device,
            kind,
            threads,
            self.fence_waits,
        )?))
    }
}

impl Default for CudaBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut opened: Vec<u32> = lock(&self.devices).keys().copied().collect();
        opened.sort_unstable();
        f.debug_struct("CudaBackend")
            .field("opened", &opened)
            .field("track_events", &self.track_events)
            .field("fence_waits", &self.fence_waits)
            .finish()
    }
}

impl DeviceBackend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn compute(&self, device: u32, threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        self.executor(device, Kind::Compute, threads)
    }

    fn copy(&self, device: u32, threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        self.executor(device, Kind::Copy, threads)
    }
}
