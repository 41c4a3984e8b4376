//! The backend's executors: without a driver, asking for a device's workers is a typed error
//! naming why (the engine reports it to the pusher of a GPU op); with a driver, a device the
//! driver does not report is `NoSuchDevice`, and a device op on the compute workers completes
//! only once the kernel it launched has run (skipped, saying why, without a GPU or NVRTC).

use std::sync::mpsc;
use std::time::Duration;

use cudarc::driver::{LaunchConfig, PushKernelArg};
use depengine_cuda::{CudaBackend, CudaRun, Driver, kernels};
use depengine_device::{BackendError, DeviceBackend, DeviceCompletion, DeviceTask};

#[test]
fn without_a_driver_a_devices_workers_are_a_typed_error() {
    if Driver::probe().is_ok() {
        return eprintln!("skipped: this machine has a CUDA driver");
    }
    let backend = CudaBackend::new();
    for result in [backend.compute(0, 2), backend.copy(0, 2)] {
        match result {
            Err(BackendError::Unavailable {
                backend,
                device: 0,
                message,
            }) => {
                assert_eq!(backend, "cuda");
                assert!(message.contains("no CUDA driver"), "{message}");
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("workers without a driver"),
        }
    }
}

#[test]
fn a_device_op_completes_after_its_kernel_ran() {
    let driver = match Driver::probe() {
        Ok(driver) => driver,
        Err(reason) => return skip(&reason.to_string()),
    };
    if !kernels::nvrtc_present() {
        return skip("no NVRTC to compile the kernels");
    }
    let backend = CudaBackend::new();
    let beyond = u32::try_from(driver.device_count()).unwrap();
    assert!(matches!(
        backend.compute(beyond, 1),
        Err(BackendError::NoSuchDevice { device, .. }) if device == beyond
    ));
    let executor = backend.compute(0, 2).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let (ran_tx, ran_rx) = mpsc::channel();
    executor.execute_device(DeviceTask::new(0, move || {
        let run = CudaRun::current().expect("a GPU worker");
        ran_tx.send(run.worker()).unwrap();
        let module = kernels::load(run.context()).unwrap();
        let spin = module.load_function("spin").unwrap();
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `spin` takes one `long long` and touches no memory.
        unsafe {
            run.stream()
                .launch_builder(&spin)
                .arg(&100_000_000_i64)
                .launch(one)
                .unwrap();
        }
        // The kernel is queued, not done: the op completes later, on the completion thread,
        // once the work launched so far (`launched`) has finished. The module stays loaded
        // until then.
        let launched = run.stream().record_event(None).unwrap();
        DeviceCompletion::new(move |outcome| {
            let finished = launched.is_complete();
            drop(module);
            done_tx.send((outcome, finished)).unwrap();
        })
    }));
    let worker = ran_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(worker < 2);
    let (outcome, finished) = done_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(outcome, Ok(()));
    assert!(
        finished,
        "the op completed before the kernel it launched had run"
    );
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
