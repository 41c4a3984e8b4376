//! [`CudaError`]: why CUDA cannot be used, or which CUDA call failed.

/// Why CUDA cannot be used here, or which CUDA call failed and how.
///
/// ```
/// use depengine_cuda::CudaError;
///
/// let error = CudaError::DeviceOutOfRange { device: 3, count: 1 };
/// assert_eq!(error.to_string(), "CUDA device 3 does not exist (1 device(s) found)");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// No CUDA driver library could be loaded.
    #[error("no CUDA driver: none of {tried} could be loaded (an NVIDIA driver installs libcuda)")]
    NoDriver {
        /// The library names tried.
        tried: String,
    },
    /// The driver loaded, but it reports no device.
    #[error("the CUDA driver reports no device")]
    NoDevice,
    /// A device id beyond the devices the driver reports.
    #[error("CUDA device {device} does not exist ({count} device(s) found)")]
    DeviceOutOfRange {
        /// The requested device.
        device: usize,
        /// The devices found.
        count: usize,
    },
    /// No NVRTC library could be loaded, so kernels cannot be compiled.
    #[error(
        "no NVRTC library: none of {tried} could be loaded (PyPI's nvidia-cuda-nvrtc-cu12 ships \
         one: put its nvidia/cuda_nvrtc/lib folder on LD_LIBRARY_PATH)"
    )]
    NoNvrtc {
        /// The library names tried.
        tried: String,
    },
    /// A CUDA driver call failed.
    #[error("{call} failed: {source}")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// An allocation of `len` values of `size` bytes each does not fit in memory at all.
    #[error("{len} values of {size} bytes do not fit in memory")]
    TooLarge {
        /// The values asked for.
        len: usize,
        /// The size of one value.
        size: usize,
    },
    /// A copy between buffers of different lengths.
    #[error("a copy of {src} values into a buffer of {dst}")]
    LengthMismatch {
        /// The values of the source.
        src: usize,
        /// The values the destination holds.
        dst: usize,
    },
    /// A copy on a GPU worker of one device with a device buffer of another.
    #[error("a device buffer of GPU {buffer} copied on a worker of GPU {worker}")]
    WrongDevice {
        /// The buffer's device.
        buffer: usize,
        /// The worker's device.
        worker: u32,
    },
    /// A stream of another CUDA context than the GPU worker's (its device's primary context).
    #[error("a stream of another CUDA context than GPU {worker}'s")]
    ForeignStream {
        /// The worker's device.
        worker: u32,
    },
    /// NVRTC could not compile the kernels.
    #[error("NVRTC could not compile the kernels: {message}")]
    Compile {
        /// NVRTC's log (or, when compiling did not get that far, the failing NVRTC call).
        message: String,
    },
}

/// The library names cudarc tries for `library` (`cuda`, `nvrtc`), for messages.
pub(crate) fn candidates(library: &str) -> String {
    cudarc::get_lib_name_candidates(library).join(", ")
}
