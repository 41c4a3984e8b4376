//! What the unit tests that need a GPU share: the device, or the reason they skip.

use std::sync::Arc;

use cudarc::driver::CudaContext;

use crate::Driver;

/// A context on device 0, or `None` (with the reason printed) where there is no GPU; with
/// `DEPENGINE_REQUIRE_GPU` set, a failure instead.
pub(crate) fn context_or_skip() -> Option<Arc<CudaContext>> {
    let reason = match Driver::probe() {
        Ok(driver) if driver.device_count() > 0 => match CudaContext::new(0) {
            Ok(context) => return Some(context),
            Err(error) => error.to_string(),
        },
        Ok(_) => "the CUDA driver reports no device".to_owned(),
        Err(error) => error.to_string(),
    };
    assert!(
        std::env::var_os("DEPENGINE_REQUIRE_GPU").is_none(),
        "DEPENGINE_REQUIRE_GPU is set, but there is no GPU: {reason}"
    );
    eprintln!("skipped: {reason}");
    None
}
