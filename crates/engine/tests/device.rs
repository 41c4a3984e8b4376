//! GPU ops on a device executor that completes them later (`Executor::execute_device`): an op
//! is finished, and releases what depends on it, only when its executor says the device is
//! done, with the device's outcome. A stand-in device holds each op's completion until the
//! test releases it, as a CUDA stream's completion thread holds it until the op's event fires.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use depengine::{
    BackendError, Context, DeviceBackend, DeviceCompletion, DeviceError, DeviceTask, Engine,
    EngineConfig, EngineKind, Executor, Task,
};

/// A device whose work is done when the test says so: `execute_device` runs the op's
/// function at once (on the dispatching thread) and keeps its completion.
#[derive(Default)]
struct HeldDevice {
    held: Mutex<Vec<DeviceCompletion>>,
    arrived: Condvar,
}

impl HeldDevice {
    /// Waits until `count` completions are held, and takes them.
    fn take(&self, count: usize) -> Vec<DeviceCompletion> {
        let held = self.held.lock().unwrap();
        let (mut held, timeout) = self
            .arrived
            .wait_timeout_while(held, Duration::from_secs(10), |held| held.len() < count)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "{} of {count} ops launched",
            held.len()
        );
        held.drain(..).collect()
    }
}

impl Executor for HeldDevice {
    fn execute(&self, _priority: i32, task: Task) {
        task();
    }

    fn execute_device(&self, task: DeviceTask) {
        let completion = task.run();
        self.held.lock().unwrap().push(completion);
        self.arrived.notify_all();
    }
}

struct Backend(Arc<HeldDevice>);

impl DeviceBackend for Backend {
    fn name(&self) -> &'static str {
        "held"
    }
    fn compute(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(self.0.clone())
    }
    fn copy(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(self.0.clone())
    }
}

fn engine() -> (Engine, Arc<HeldDevice>) {
    let device = Arc::new(HeldDevice::default());
    let config = EngineConfig::default()
        .kind(EngineKind::ThreadedPerDevice)
        .device_backend(Arc::new(Backend(Arc::clone(&device))));
    (Engine::new(config).unwrap(), device)
}

/// Pushes a GPU op writing `var` and a CPU op reading it; returns the CPU op's flag.
fn gpu_then_cpu(engine: &Engine, var: depengine::Var) -> Arc<AtomicBool> {
    engine
        .op("gpu-write")
        .on(Context::gpu(0))
        .writes([var])
        .push_sync(|_| Ok(()))
        .unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    engine
        .op("cpu-read")
        .reads([var])
        .push_sync(move |_| flag.store(true, Ordering::SeqCst))
        .unwrap();
    ran
}

#[test]
fn a_gpu_op_releases_its_dependents_when_the_device_is_done() {
    let (engine, device) = engine();
    let var = engine.new_var().unwrap();
    let ran = gpu_then_cpu(&engine, var);
    let mut held = device.take(1);
    // The function returned long ago; the device is not done: the reader waits.
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !ran.load(Ordering::SeqCst),
        "a dependent ran before the device was done"
    );
    held.pop().unwrap().complete(Ok(()));
    engine.wait_for_all().unwrap();
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn a_device_failure_fails_the_op_and_passes_to_its_dependents() {
    let (engine, device) = engine();
    let var = engine.new_var().unwrap();
    let ran = gpu_then_cpu(&engine, var);
    device
        .take(1)
        .pop()
        .unwrap()
        .complete(Err(DeviceError::Failed {
            backend: "held".to_owned(),
            message: "CUDA_ERROR_ILLEGAL_ADDRESS".to_owned(),
        }));
    let error = engine.wait_for_var(var).unwrap_err().to_string();
    assert!(error.contains("gpu-write"), "{error}");
    assert!(error.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{error}");
    assert!(
        !ran.load(Ordering::SeqCst),
        "the reader of a failed var ran"
    );
}

#[test]
fn a_completion_the_device_drops_fails_the_op() {
    let (engine, device) = engine();
    let var = engine.new_var().unwrap();
    let _ran = gpu_then_cpu(&engine, var);
    drop(device.take(1));
    let error = engine.wait_for_var(var).unwrap_err().to_string();
    assert!(error.contains("without completing it"), "{error}");
}

#[test]
fn the_functions_own_failure_outlives_a_device_success() {
    let (engine, device) = engine();
    let var = engine.new_var().unwrap();
    engine
        .op("gpu-fails")
        .on(Context::gpu(0))
        .writes([var])
        .push_sync(|_| Err::<(), depengine::BoxError>("launch refused".into()))
        .unwrap();
    // The op stays pending until the device is done with what it might have launched.
    let mut held = device.take(1);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(engine.stats().pending_ops, 1);
    held.pop().unwrap().complete(Ok(()));
    let error = engine.wait_for_var(var).unwrap_err().to_string();
    assert!(error.contains("launch refused"), "{error}");
}

/// An executor that drops every device task unrun.
struct DropsTasks;

impl Executor for DropsTasks {
    fn execute(&self, _priority: i32, task: Task) {
        drop(task);
    }
    fn execute_device(&self, task: DeviceTask) {
        drop(task);
    }
}

struct DroppingBackend;

impl DeviceBackend for DroppingBackend {
    fn name(&self) -> &'static str {
        "drops"
    }
    fn compute(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(Arc::new(DropsTasks))
    }
    fn copy(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(Arc::new(DropsTasks))
    }
}

#[test]
fn a_task_the_executor_drops_unrun_fails_its_op() {
    let engine = Engine::new(
        EngineConfig::default()
            .kind(EngineKind::ThreadedPerDevice)
            .device_backend(Arc::new(DroppingBackend)),
    )
    .unwrap();
    let var = engine.new_var().unwrap();
    let ran = gpu_then_cpu(&engine, var);
    let error = engine.wait_for_var(var).unwrap_err().to_string();
    assert!(error.contains("gpu-write"), "{error}");
    assert!(!ran.load(Ordering::SeqCst));
}
