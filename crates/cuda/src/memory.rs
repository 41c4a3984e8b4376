//! Host memory that the GPU copies from and to without staging, and the copies themselves.
//!
//! A copy between a device buffer and ordinary (pageable) host memory goes through a staging
//! buffer of the driver's, and the calling thread waits for it: on a GPU worker, that is a host
//! wait in the middle of an op. Page-locked ("pinned") host memory lets the copy engine read
//! and write it directly, so a copy is queued on a stream like a kernel and overlaps the
//! compute of other streams. [`pinned_zeros`] makes such memory (the storage of
//! `Context::cpu_pinned` data: ops on that context run on the CPU workers and use it as
//! ordinary memory once the copies that write it completed), and [`CudaRun::copy_to_device`]
//! and [`CudaRun::copy_to_host`] queue a copy on the worker's stream, checking the buffers
//! instead of panicking as cudarc's copies do on a length mismatch.

use std::sync::Arc;

use cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
use cudarc::driver::{CudaContext, CudaSlice, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};

use crate::driver::Driver;
use crate::error::CudaError;
use crate::run::CudaRun;

/// Page-locked host memory for `len` values of `T`, all bits zero, usable by the streams of
/// every device (allocated portable, on device `device`'s primary context, which must exist).
///
/// Hold it as typed data (`Data<PinnedHostSlice<T>>`): a GPU op copies it to a device buffer
/// with [`CudaRun::copy_to_device`], without waiting; a CPU op reads or writes it with
/// `PinnedHostSlice::as_slice` / `as_mut_slice` once the ops that copy into it completed
/// (the engine completes a GPU op only once its copies have finished).
///
/// ```
/// use depengine_cuda::{CudaError, memory};
///
/// match memory::pinned_zeros::<f32>(0, 1 << 20) {
///     Ok(pinned) => assert_eq!(pinned.len(), 1 << 20),
///     Err(CudaError::NoDriver { .. } | CudaError::NoDevice) => println!("no GPU here"),
///     Err(error) => panic!("{error}"),
/// }
/// ```
///
/// # Errors
///
/// As [`Driver::probe`] and [`Driver::check_device`]; [`CudaError::TooLarge`] when `len`
/// values of `T` do not fit in memory at all; [`CudaError::Driver`] when the driver cannot
/// retain the device's context or allocate the memory.
pub fn pinned_zeros<T: DeviceRepr + ValidAsZeroBits>(
    device: u32,
    len: usize,
) -> Result<PinnedHostSlice<T>, CudaError> {
    let too_large = CudaError::TooLarge {
        len,
        size: size_of::<T>(),
    };
    // cudarc panics on these; say so instead.
    let bytes = len
        .checked_mul(size_of::<T>())
        .ok_or_else(|| too_large.clone())?;
    if isize::try_from(bytes).is_err() {
        return Err(too_large);
    }
    Driver::probe()?.check_device(device as usize)?;
    let context = primary_context(device)?;
    // SAFETY: the memory is uninitialized until the `write_bytes` below, and nothing reads it
    // before: the slice is ours alone.
    let mut pinned = unsafe { context.alloc_pinned_with_flags::<T>(len, CU_MEMHOSTALLOC_PORTABLE) }
        .map_err(|source| CudaError::Driver {
            call: "cuMemHostAlloc",
            source,
        })?;
    let ptr = pinned.as_mut_ptr().map_err(|source| CudaError::Driver {
        call: "cuEventSynchronize",
        source,
    })?;
    // SAFETY: `ptr` points to `len` values of `T` that the allocation above owns; all-zero bits
    // are a valid `T` (`ValidAsZeroBits`).
    unsafe { std::ptr::write_bytes(ptr, 0, len) };
    Ok(pinned)
}

/// Device `device`'s primary context.
fn primary_context(device: u32) -> Result<Arc<CudaContext>, CudaError> {
    CudaContext::new(device as usize).map_err(|source| CudaError::Driver {
        call: "cuDevicePrimaryCtxRetain",
        source,
    })
}

impl CudaRun {
    /// Queues a copy of `src` into `dst` on this worker's stream and returns without waiting:
    /// the op completes once the copy (and the rest of its work) has finished. With `src` in
    /// pinned memory the copy engine reads it directly, beside the kernels of other streams.
    ///
    /// # Errors
    ///
    /// [`CudaError::LengthMismatch`] unless the two hold as many values; [`CudaError::WrongDevice`]
    /// unless `dst` is on this worker's device; [`CudaError::Driver`] if the copy cannot be
    /// queued.
    pub fn copy_to_device<T: DeviceRepr>(
        &self,
        src: &PinnedHostSlice<T>,
        dst: &mut CudaSlice<T>,
    ) -> Result<(), CudaError> {
        self.check_copy(src.len(), dst.len(), dst.ordinal())?;
        self.stream()
            .memcpy_htod(src, dst)
            .map_err(|source| CudaError::Driver {
                call: "cuMemcpyHtoDAsync",
                source,
            })
    }

    /// Queues a copy of `src` into `dst` (pinned host memory) on this worker's stream and
    /// returns without waiting: `dst` holds the values once the op completed. Read it in a CPU
    /// op ordered after this one, or after `wait_for_var`: a GPU op ordered after it starts
    /// when this one launched, and only the work it launches waits for the copy.
    ///
    /// # Errors
    ///
    /// As [`copy_to_device`](Self::copy_to_device), with `src` the buffer that must be on this
    /// worker's device.
    pub fn copy_to_host<T: DeviceRepr>(
        &self,
        src: &CudaSlice<T>,
        dst: &mut PinnedHostSlice<T>,
    ) -> Result<(), CudaError> {
        self.check_copy(src.len(), dst.len(), src.ordinal())?;
        self.stream()
            .memcpy_dtoh(src, dst)
            .map_err(|source| CudaError::Driver {
                call: "cuMemcpyDtoHAsync",
                source,
            })
    }

    /// Checks a copy of `src` values into `dst` values, whose device buffer is on device
    /// `ordinal`.
    fn check_copy(&self, src: usize, dst: usize, ordinal: usize) -> Result<(), CudaError> {
        if src != dst {
            return Err(CudaError::LengthMismatch { src, dst });
        }
        if ordinal != self.device() as usize {
            return Err(CudaError::WrongDevice {
                buffer: ordinal,
                worker: self.device(),
            });
        }
        Ok(())
    }
}
