//! Pinned host memory: a size that cannot fit is a typed error everywhere; without a driver the
//! allocation says so (no panic); with a GPU, the memory is zeroed and its copies check their
//! buffers.

use depengine_cuda::{CudaError, Driver, memory};

#[test]
fn a_size_that_cannot_fit_is_an_error_not_a_panic() {
    let error = memory::pinned_zeros::<f64>(0, usize::MAX / 4).unwrap_err();
    assert!(
        matches!(error, CudaError::TooLarge { size: 8, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("do not fit"), "{error}");
}

#[test]
fn without_a_driver_pinned_memory_is_refused_with_the_reason() {
    if Driver::probe().is_ok() {
        return eprintln!("skipped: this machine has a CUDA driver (the test below covers it)");
    }
    let error = memory::pinned_zeros::<f32>(0, 16).unwrap_err();
    assert!(matches!(error, CudaError::NoDriver { .. }), "{error:?}");
}

#[test]
fn pinned_memory_is_zeroed_and_past_the_last_device_is_refused() {
    let driver = match Driver::probe() {
        Ok(driver) => driver,
        Err(reason) => return skip(&reason.to_string()),
    };
    let pinned = memory::pinned_zeros::<u32>(0, 1 << 16).unwrap();
    assert!(pinned.as_slice().unwrap().iter().all(|&value| value == 0));
    let past = u32::try_from(driver.device_count()).unwrap();
    assert!(matches!(
        memory::pinned_zeros::<u32>(past, 16),
        Err(CudaError::DeviceOutOfRange { .. })
    ));
}

/// Skips a GPU test, saying why; with `DEPENGINE_REQUIRE_GPU` set (a run on a GPU machine),
/// fails it instead.
fn skip(reason: &str) {
    assert!(
        std::env::var_os("DEPENGINE_REQUIRE_GPU").is_none(),
        "DEPENGINE_REQUIRE_GPU is set, but the GPU test cannot run: {reason}"
    );
    eprintln!("skipped: {reason}");
}
