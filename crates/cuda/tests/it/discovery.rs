//! Finding the driver: on a machine without one, a typed error and no panic; on a machine with
//! one, its devices.

use depengine_cuda::{CudaError, Driver};

#[test]
fn the_probe_answers_without_a_panic() {
    match Driver::probe() {
        Err(CudaError::NoDriver { tried }) => {
            eprintln!("no CUDA driver here: checked the typed error");
            assert!(tried.contains("libcuda.so"), "{tried}");
            let message = Driver::probe().unwrap_err().to_string();
            assert!(message.contains("no CUDA driver"), "{message}");
        }
        Err(CudaError::NoDevice) => eprintln!("a CUDA driver without devices"),
        Err(other) => panic!("the driver loaded but failed: {other}"),
        Ok(driver) => {
            eprintln!("{} CUDA device(s)", driver.device_count());
            assert!(driver.device_count() >= 1);
            assert!(driver.check_device(0).is_ok());
            let beyond = driver.device_count();
            assert!(matches!(
                driver.check_device(beyond),
                Err(CudaError::DeviceOutOfRange { device, count }) if device == beyond && count == beyond
            ));
        }
    }
}
