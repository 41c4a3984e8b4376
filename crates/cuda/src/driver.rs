//! [`Driver`]: finding the CUDA driver and its devices without a panic.
//!
//! cudarc loads `libcuda` on its first driver call and panics when it cannot; so the probe
//! first tries to load the library itself (`is_culib_present`), and only then calls the driver.

use std::sync::OnceLock;

use cudarc::driver::result;

use crate::error::{CudaError, candidates};

/// The CUDA driver, initialized, with at least one device.
///
/// # Examples
///
/// ```
/// use depengine_cuda::{CudaError, Driver};
///
/// if let Ok(driver) = Driver::probe() {
///     assert!(driver.device_count() >= 1);
///     assert!(matches!(
///         driver.check_device(driver.device_count()),
///         Err(CudaError::DeviceOutOfRange { .. })
///     ));
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Driver {
    devices: usize,
}

impl Driver {
    /// Loads and initializes the driver and counts its devices; the outcome of the first call
    /// is kept for the process (the driver is initialized once).
    ///
    /// # Errors
    ///
    /// [`CudaError::NoDriver`] when no driver library loads, [`CudaError::NoDevice`] when the
    /// driver has no device, [`CudaError::Driver`] when `cuInit` or `cuDeviceGetCount` fails.
    pub fn probe() -> Result<Driver, CudaError> {
        static PROBED: OnceLock<Result<usize, Probe>> = OnceLock::new();
        match PROBED.get_or_init(probe) {
            Ok(devices) => Ok(Driver { devices: *devices }),
            Err(failure) => Err(failure.error()),
        }
    }

    /// The devices the driver reports (at least one).
    pub fn device_count(&self) -> usize {
        self.devices
    }

    /// Checks that device `device` exists.
    ///
    /// # Errors
    ///
    /// [`CudaError::DeviceOutOfRange`] otherwise.
    pub fn check_device(&self, device: usize) -> Result<(), CudaError> {
        if device < self.devices {
            Ok(())
        } else {
            Err(CudaError::DeviceOutOfRange {
                device,
                count: self.devices,
            })
        }
    }
}

/// A failed probe, kept to be reported again on every later call.
#[derive(Debug, Clone, Copy)]
enum Probe {
    NoDriver,
    NoDevice,
    Failed {
        call: &'static str,
        error: cudarc::driver::sys::CUresult,
    },
}

impl Probe {
    fn error(self) -> CudaError {
        match self {
            Probe::NoDriver => CudaError::NoDriver {
                tried: candidates("cuda"),
            },
            Probe::NoDevice => CudaError::NoDevice,
            Probe::Failed { call, error } => CudaError::Driver {
                call,
                source: cudarc::driver::DriverError(error),
            },
        }
    }
}

fn probe() -> Result<usize, Probe> {
    // SAFETY: loading a shared library runs its initializers; libcuda's are the driver's own,
    // which any use of CUDA runs, and the library is unloaded again at once.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Probe::NoDriver);
    }
    let failed = |call| {
        move |error: cudarc::driver::DriverError| Probe::Failed {
            call,
            error: error.0,
        }
    };
    result::init().map_err(failed("cuInit"))?;
    let count = result::device::get_count().map_err(failed("cuDeviceGetCount"))?;
    match usize::try_from(count) {
        Ok(0) | Err(_) => Err(Probe::NoDevice),
        Ok(devices) => Ok(devices),
    }
}
