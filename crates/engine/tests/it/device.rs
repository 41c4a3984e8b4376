//! GPU ops on a device executor that completes them later (`Executor::execute_device`): an op
//! is finished, and releases what depends on it, only when its executor says the device is
//! done, with the device's outcome. A stand-in device holds each op's completion until the
//! test releases it, as a CUDA stream's completion thread holds it until the op's event fires.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use depengine::{
    BackendError, BoxError, Context, DeviceBackend, DeviceCompletion, DeviceError, DeviceTask,
    Engine, EngineConfig, EngineError, EngineKind, Executor, FnProperty, Task,
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
    engine_with_hang_limit(Some(depengine::DEFAULT_DEVICE_HANG_LIMIT))
}

/// As `engine`, with `EngineConfig::device_hang_limit` set to `limit`.
fn engine_with_hang_limit(limit: Option<Duration>) -> (Engine, Arc<HeldDevice>) {
    let device = Arc::new(HeldDevice::default());
    let config = EngineConfig::default()
        .kind(EngineKind::ThreadedPerDevice)
        .device_backend(Arc::new(Backend(Arc::clone(&device))))
        .device_hang_limit(limit);
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

/// Drops `engine` on a thread of its own; the receiver hears when the drop returned.
fn drop_elsewhere(engine: Engine) -> std::sync::mpsc::Receiver<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(engine);
        let _ = tx.send(());
    });
    rx
}

#[test]
fn the_drop_gives_up_on_device_work_that_never_ends_and_the_rest_may_finish_later() {
    let (engine, device) = engine_with_hang_limit(Some(Duration::from_millis(200)));
    let var = engine.new_var().unwrap();
    let ran = gpu_then_cpu(&engine, var);
    // A hung kernel: the device never reports the op done.
    let mut held = device.take(1);
    let dropped = drop_elsewhere(engine);
    assert_eq!(
        dropped.recv_timeout(Duration::from_secs(20)),
        Ok(()),
        "the drop hung on device work that never ends"
    );
    assert!(!ran.load(Ordering::SeqCst));
    // Should the work end after all, what waited behind it runs on the workers left behind.
    held.pop().unwrap().complete(Ok(()));
    for _ in 0..2000 {
        if ran.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the CPU op behind the late device work never ran");
}

#[test]
fn the_drop_waits_for_a_replay_whose_gpu_ops_keep_finishing_past_the_hang_limit() {
    const LINKS: usize = 6;
    let (engine, device) = engine_with_hang_limit(Some(Duration::from_secs(1)));
    let var = engine.new_var().unwrap();
    let plan = engine
        .capture("slow", |plan| {
            for _ in 0..LINKS {
                plan.op("link")
                    .on(Context::gpu(0))
                    .writes([var])
                    .push_sync(|_| Ok(()))?;
            }
            Ok(())
        })
        .unwrap();
    engine.replay(&plan).unwrap();
    let dropped = drop_elsewhere(engine);
    // The replay completes once, after its last op: its ops' reports are the progress.
    for _ in 0..LINKS {
        let mut held = device.take(1);
        std::thread::sleep(Duration::from_millis(250));
        assert!(
            dropped.try_recv().is_err(),
            "the drop gave up on device work that kept finishing"
        );
        held.pop().unwrap().complete(Ok(()));
    }
    assert_eq!(dropped.recv_timeout(Duration::from_secs(20)), Ok(()));
}

#[test]
fn without_device_work_in_flight_the_drop_waits_for_a_stalled_op() {
    let (engine, _device) = engine_with_hang_limit(Some(Duration::from_millis(50)));
    let var = engine.new_var().unwrap();
    let go = push_blocked(&engine, Context::cpu(0), var);
    go.started();
    let dropped = drop_elsewhere(engine);
    still_waiting(&dropped, "the drop gave up on a CPU op");
    go.open();
    assert_eq!(dropped.recv_timeout(Duration::from_secs(20)), Ok(()));
}

/// The gate of an op pushed by `push_blocked`: its function blocks until `open`.
struct Gate {
    go: std::sync::mpsc::Sender<()>,
    started: std::sync::mpsc::Receiver<()>,
}

impl Gate {
    /// Waits until the function runs (and blocks).
    fn started(&self) {
        self.started
            .recv_timeout(Duration::from_secs(10))
            .expect("the blocked op's function never started");
    }

    /// Lets the function return.
    fn open(&self) {
        self.go.send(()).expect("the blocked op's function is gone");
    }
}

/// Pushes an op on `context` writing `var`, whose function blocks until its gate opens.
fn push_blocked(engine: &Engine, context: Context, var: depengine::Var) -> Gate {
    let (go, gate) = std::sync::mpsc::channel::<()>();
    let (start, started) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new((gate, start));
    engine
        .op("blocked")
        .on(context)
        .writes([var])
        .push_sync(move |_| {
            let (gate, start) = &*gate.lock().unwrap();
            let _ = start.send(());
            let _ = gate.recv();
        })
        .unwrap();
    Gate { go, started }
}

/// Asserts that the drop `dropped` tells of is still waiting far past the hang limit.
fn still_waiting(dropped: &std::sync::mpsc::Receiver<()>, otherwise: &str) {
    assert!(
        dropped.recv_timeout(Duration::from_millis(500)).is_err(),
        "{otherwise}"
    );
}

#[test]
fn a_gpu_op_whose_function_blocks_on_the_host_is_not_given_up_on() {
    let (engine, device) = engine_with_hang_limit(Some(Duration::from_millis(50)));
    let var = engine.new_var().unwrap();
    // The first op holds its worker until the GPU op is queued behind it: pushed on a free
    // var, the GPU op would be dispatched, and block, on this thread.
    let first_go = push_blocked(&engine, Context::cpu(0), var);
    // Dispatched by the CPU worker that completes the first op, whose thread the stand-in
    // device runs the function on: it blocks there, on the host.
    let go = push_blocked(&engine, Context::gpu(0), var);
    first_go.open();
    go.started();
    let dropped = drop_elsewhere(engine);
    still_waiting(
        &dropped,
        "the drop gave up on a function running on the host",
    );
    go.open();
    device.take(1).pop().unwrap().complete(Ok(()));
    assert_eq!(dropped.recv_timeout(Duration::from_secs(20)), Ok(()));
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

/// A backend whose executors, compute and copy alike, `make` makes.
struct BackendOf<F> {
    name: &'static str,
    make: F,
}

impl<F: Fn() -> Arc<dyn Executor> + Send + Sync> DeviceBackend for BackendOf<F> {
    fn name(&self) -> &str {
        self.name
    }
    fn compute(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok((self.make)())
    }
    fn copy(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok((self.make)())
    }
}

/// A per-device engine whose GPU executors `make` makes.
fn engine_of(
    name: &'static str,
    make: impl Fn() -> Arc<dyn Executor> + Send + Sync + 'static,
) -> Engine {
    let backend = BackendOf { name, make };
    let config = EngineConfig::default()
        .kind(EngineKind::ThreadedPerDevice)
        .device_backend(Arc::new(backend));
    Engine::new(config).unwrap()
}

/// An engine whose executors drop every device task unrun.
fn dropping_engine() -> Engine {
    engine_of("drops", || Arc::new(DropsTasks))
}

#[test]
fn a_task_the_executor_drops_unrun_fails_its_op() {
    let engine = dropping_engine();
    let var = engine.new_var().unwrap();
    let ran = gpu_then_cpu(&engine, var);
    let error = engine.wait_for_var(var).unwrap_err().to_string();
    assert!(error.contains("gpu-write"), "{error}");
    assert!(!ran.load(Ordering::SeqCst));
}

/// An executor whose `execute_device` panics, dropping the task as it unwinds (a backend's bug).
struct PanicsDevice;

impl Executor for PanicsDevice {
    fn execute(&self, _priority: i32, task: Task) {
        task();
    }
    fn execute_device(&self, task: DeviceTask) {
        let _task = task;
        panic!("a backend's bug");
    }
}

#[test]
fn a_backend_whose_execute_device_panics_fails_its_ops_and_every_replay_ends() {
    let engine = engine_of("panics", || Arc::new(PanicsDevice));
    let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
    let ran = gpu_then_cpu(&engine, a);
    let error = engine.wait_for_var(a).unwrap_err().to_string();
    assert!(error.contains("gpu-write"), "{error}");
    assert!(!ran.load(Ordering::SeqCst));
    let plan = engine
        .capture("two gpu ops", |plan| {
            plan.op("first")
                .on(Context::gpu(0))
                .writes([a])
                .push_sync(|_| {})?;
            plan.op("second")
                .on(Context::gpu(0))
                .reads([a])
                .writes([b])
                .push_sync(|_| {})?;
            plan.op("third")
                .on(Context::gpu(0))
                .writes([a])
                .push_sync(|_| {})?;
            Ok::<(), BoxError>(())
        })
        .unwrap();
    // Each replay's GPU ops are handed over from one queue: a panic left in it would hold it.
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = engine.clone();
    std::thread::spawn(move || {
        for _ in 0..3 {
            waiter.replay(&plan).unwrap();
            let _ = tx.send(waiter.wait_for_var(a).is_err() && waiter.wait_for_var(b).is_err());
        }
    });
    for _ in 0..3 {
        let failed = rx.recv_timeout(Duration::from_secs(30));
        assert_eq!(
            failed,
            Ok(true),
            "a replay did not end, or its ops did not fail"
        );
    }
}

/// Captures a plan: a CPU op writing `input`, a GPU op reading it and writing `output`, a CPU
/// op reading `output`; returns the plan, the GPU op's count of runs and the last op's.
fn cpu_gpu_cpu_plan(
    engine: &Engine,
    input: depengine::Var,
    output: depengine::Var,
) -> (depengine::Plan, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (gpu_ran, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (gpu_counted, counted) = (Arc::clone(&gpu_ran), Arc::clone(&ran));
    let plan = engine
        .capture("cpu-gpu-cpu", |plan| {
            plan.op("cpu-write").writes([input]).push_sync(|_| {})?;
            plan.op("gpu-step")
                .on(Context::gpu(0))
                .reads([input])
                .writes([output])
                .push_sync(move |_| {
                    gpu_counted.fetch_add(1, Ordering::SeqCst);
                })?;
            plan.op("cpu-read").reads([output]).push_sync(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            })?;
            Ok(())
        })
        .unwrap();
    (plan, gpu_ran, ran)
}

#[test]
fn a_replayed_gpu_op_releases_its_dependents_when_the_device_is_done() {
    let (engine, device) = engine();
    let (input, output) = (engine.new_var().unwrap(), engine.new_var().unwrap());
    let (plan, _, ran) = cpu_gpu_cpu_plan(&engine, input, output);
    for replay in 0..3 {
        engine.replay(&plan).unwrap();
        let mut held = device.take(1);
        // The function returned; the device is not done: the plan's reader waits.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            replay,
            "ran before the device was done"
        );
        held.pop().unwrap().complete(Ok(()));
        engine.wait_for_var(output).unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), replay + 1);
    }
}

#[test]
fn a_device_failure_of_a_replayed_gpu_op_fails_what_it_writes_and_skips_its_dependents() {
    let (engine, device) = engine();
    let (input, output) = (engine.new_var().unwrap(), engine.new_var().unwrap());
    let (plan, _, ran) = cpu_gpu_cpu_plan(&engine, input, output);
    engine.replay(&plan).unwrap();
    device
        .take(1)
        .pop()
        .unwrap()
        .complete(Err(kernel_fault().unwrap_err()));
    let error = engine.wait_for_var(output).unwrap_err().to_string();
    assert!(error.contains("gpu-step"), "{error}");
    assert!(error.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{error}");
    engine.wait_for_var(input).unwrap();
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "a dependent of a failed op ran"
    );
}

#[test]
fn a_replayed_gpu_op_whose_task_the_executor_drops_fails_and_the_replay_ends() {
    let engine = dropping_engine();
    let (input, output) = (engine.new_var().unwrap(), engine.new_var().unwrap());
    let (plan, gpu_ran, ran) = cpu_gpu_cpu_plan(&engine, input, output);
    engine.replay(&plan).unwrap();
    let error = engine.wait_for_var(output).unwrap_err().to_string();
    assert!(error.contains("gpu-step"), "{error}");
    assert!(error.contains("dropped"), "{error}");
    assert_eq!(
        gpu_ran.load(Ordering::SeqCst),
        0,
        "the dropped task's function ran"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn a_skipped_replayed_gpu_op_is_done_at_once_without_its_device() {
    let (engine, device) = engine();
    let (input, output) = (engine.new_var().unwrap(), engine.new_var().unwrap());
    let plan = engine
        .capture("fail-then-gpu", |plan| {
            plan.op("cpu-fails")
                .writes([input])
                .push_sync(|_| Err::<(), BoxError>("injected".into()))?;
            plan.op("gpu-skipped")
                .on(Context::gpu(0))
                .reads([input])
                .writes([output])
                .push_sync(|_| Ok(()))?;
            Ok(())
        })
        .unwrap();
    engine.replay(&plan).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| done.send(engine.wait_for_var(output)).unwrap());
        let waited = finished.recv_timeout(Duration::from_secs(10));
        // Were the op handed to the device, it would wait for the test to complete it.
        let held = std::mem::take(&mut *device.held.lock().unwrap());
        let handed = held.len();
        for completion in held {
            completion.complete(Ok(()));
        }
        assert_eq!(handed, 0, "a skipped op went to the device");
        let error = waited
            .expect("the skipped op's var")
            .unwrap_err()
            .to_string();
        assert!(error.contains("injected"), "{error}");
    });
}

/// A device whose executor runs each task, and completes it, inside `execute_device`, on the
/// calling thread: the trait's default over an inline `execute`.
struct InlineDevice;

impl Executor for InlineDevice {
    fn execute(&self, _priority: i32, task: Task) {
        task();
    }
}

/// An engine whose executors run and complete each device task inside `execute_device`.
fn inline_engine() -> Engine {
    engine_of("inline", || Arc::new(InlineDevice))
}

/// Captures `links` GPU ops writing `var`, one after another; returns the plan and their count
/// of runs.
fn gpu_chain_plan(
    engine: &Engine,
    var: depengine::Var,
    links: usize,
) -> (depengine::Plan, Arc<AtomicUsize>) {
    let ran = Arc::new(AtomicUsize::new(0));
    let plan = engine
        .capture("chain", |plan| {
            for _ in 0..links {
                let ran = Arc::clone(&ran);
                plan.op("link")
                    .on(Context::gpu(0))
                    .writes([var])
                    .push_sync(move |_| {
                        ran.fetch_add(1, Ordering::Relaxed);
                    })?;
            }
            Ok(())
        })
        .unwrap();
    (plan, ran)
}

#[test]
fn a_long_chain_of_replayed_gpu_ops_completed_inside_execute_device_keeps_the_stack_flat() {
    const LINKS: usize = 100_000;
    let engine = inline_engine();
    let var = engine.new_var().unwrap();
    let (plan, ran) = gpu_chain_plan(&engine, var, LINKS);
    engine.replay(&plan).unwrap();
    engine.wait_for_var(var).unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), LINKS);
}

#[test]
fn chained_replays_of_a_gpu_plan_completed_inside_execute_device_keep_the_stack_flat() {
    const REPLAYS: usize = 10_000;
    let engine = inline_engine();
    let var = engine.new_var().unwrap();
    let (plan, ran) = gpu_chain_plan(&engine, var, 1);
    // Every replay but the first is queued on the one before (`plan/chain.rs`): the first
    // waits behind an op that holds the var until all are pushed.
    let (open, gate) = std::sync::mpsc::channel::<()>();
    engine
        .op("gate")
        .writes([var])
        .push_sync(move |_| {
            let _ = gate.recv();
        })
        .unwrap();
    for _ in 0..REPLAYS {
        engine.replay(&plan).unwrap();
    }
    open.send(()).unwrap();
    engine.wait_for_var(var).unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), REPLAYS);
}

#[test]
fn a_replay_of_a_plan_on_a_lost_device_is_refused_as_its_push_would_be() {
    let (engine, device) = engine();
    let (input, output) = (engine.new_var().unwrap(), engine.new_var().unwrap());
    let (plan, gpu_ran, _) = cpu_gpu_cpu_plan(&engine, input, output);
    engine.replay(&plan).unwrap();
    device.take(1).pop().unwrap().complete(Err(lost()));
    let error = engine.wait_for_var(output).unwrap_err().to_string();
    assert!(error.contains("the device is lost"), "{error}");
    let refused = engine.replay(&plan).unwrap_err();
    assert!(
        refused.to_string().contains("replay cpu-gpu-cpu"),
        "{refused}"
    );
    assert!(
        matches!(&refused, EngineError::DeviceLost { fault, .. } if *fault == lost()),
        "{refused:?}"
    );
    engine.wait_for_all().unwrap();
    assert_eq!(gpu_ran.load(Ordering::SeqCst), 1);
}

/// A device that reports launches, as a CUDA backend does: `execute_device` records the fences
/// a task came with, runs its function at once (on the dispatching thread), reports the op
/// launched with a fence naming the op (its launch order), and keeps its completion until the
/// test releases it.
#[derive(Default)]
struct LaunchingDevice {
    state: Mutex<Launches>,
    arrived: Condvar,
}

#[derive(Default)]
struct Launches {
    /// Per launched op (by launch order): the launch orders of the fences its task came with.
    fences: Vec<Vec<usize>>,
    /// The completions of launched ops not released yet, with their launch order.
    held: Vec<(usize, DeviceCompletion)>,
    /// The launch orders of the ops whose launch was reported (then held, or dropped), in the
    /// order of the reports: an op's launch may release ops that report theirs first.
    reported: Vec<usize>,
    /// The launch orders of the ops whose completion said their function failed.
    functions_failed: Vec<usize>,
    /// The test panicked (`DeviceHandle`): completions are no longer held.
    closed: bool,
}

impl LaunchingDevice {
    /// Waits until ops `0..=order` (in launch order) launched and their completions are held,
    /// and returns the fences of every op launched so far.
    fn launched(&self, order: usize) -> Vec<Vec<usize>> {
        let state = self.state.lock().unwrap();
        let (state, timeout) = self
            .arrived
            .wait_timeout_while(state, Duration::from_secs(10), |s| {
                (0..=order).any(|op| !s.reported.contains(&op))
            })
            .unwrap();
        assert!(!timeout.timed_out(), "{} ops launched", state.fences.len());
        state.fences.clone()
    }

    /// Releases the completion of op `order` with `outcome`.
    fn complete(&self, order: usize, outcome: Result<(), DeviceError>) {
        let completion = {
            let mut state = self.state.lock().unwrap();
            let at = state
                .held
                .iter()
                .position(|(held, _)| *held == order)
                .expect("a launched op");
            state.held.swap_remove(at).1
        };
        completion.complete(outcome);
    }
}

impl Executor for LaunchingDevice {
    fn execute(&self, _priority: i32, task: Task) {
        task();
    }

    fn execute_device(&self, task: DeviceTask) {
        let fences = task
            .fences()
            .iter()
            .map(|fence| *fence.downcast_ref::<usize>().expect("a fence of ours"))
            .collect();
        let order = {
            let mut state = self.state.lock().unwrap();
            state.fences.push(fences);
            state.fences.len() - 1
        };
        let mut completion = task.run();
        if completion.function_failed() {
            self.state.lock().unwrap().functions_failed.push(order);
        }
        // Unlocked: the launch releases the device ops behind this one, which come back here.
        completion.launched(depengine::Fence::new(order));
        let mut state = self.state.lock().unwrap();
        state.reported.push(order);
        if state.closed {
            drop(state);
            // Unlocked too: the failure of the dropped completion releases ops behind it.
            drop(completion);
            return;
        }
        state.held.push((order, completion));
        drop(state);
        self.arrived.notify_all();
    }
}

struct Launching(Arc<LaunchingDevice>);

impl DeviceBackend for Launching {
    fn name(&self) -> &'static str {
        "launching"
    }
    fn compute(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(self.0.clone())
    }
    fn copy(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(self.0.clone())
    }
}

/// The test's handle on its launching device. Should the test panic while the device holds
/// completions, dropping the handle (before the engine: it comes second in the pair) drops
/// them and every later one, failing their ops (`DeviceError::Dropped`), so that the engine's
/// drop, which waits for every op, does not turn the failed assertion into a hang.
struct DeviceHandle(Arc<LaunchingDevice>);

impl std::ops::Deref for DeviceHandle {
    type Target = LaunchingDevice;
    fn deref(&self) -> &LaunchingDevice {
        &self.0
    }
}

impl Drop for DeviceHandle {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let held = {
                let mut state = self
                    .0
                    .state
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                state.closed = true;
                std::mem::take(&mut state.held)
            };
            // Unlocked: each dropped completion fails its op, which may release more.
            drop(held);
        }
    }
}

fn launching_engine() -> (Engine, DeviceHandle) {
    let device = Arc::new(LaunchingDevice::default());
    let config = EngineConfig::default()
        .kind(EngineKind::ThreadedPerDevice)
        .device_backend(Arc::new(Launching(Arc::clone(&device))));
    (Engine::new(config).unwrap(), DeviceHandle(device))
}

/// Pushes a GPU op named `name` that reads `reads` and writes `writes`.
fn gpu_op(
    engine: &Engine,
    name: &'static str,
    reads: &[depengine::Var],
    writes: &[depengine::Var],
) {
    engine
        .op(name)
        .on(Context::gpu(0))
        .reads(reads.iter().copied())
        .writes(writes.iter().copied())
        .push_sync(|_| Ok(()))
        .unwrap();
}

/// Pushes a CPU op reading `var`; returns its flag.
fn cpu_read(engine: &Engine, var: depengine::Var) -> Arc<AtomicBool> {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    engine
        .op("cpu-read")
        .reads([var])
        .push_sync(move |_| flag.store(true, Ordering::SeqCst))
        .unwrap();
    ran
}

/// Gives a wrongly released CPU op the time to run.
fn settle() {
    std::thread::sleep(Duration::from_millis(20));
}

#[test]
fn gpu_ops_behind_a_launched_op_start_at_once_after_its_fence_and_cpu_ops_wait_for_all() {
    let (engine, device) = launching_engine();
    let [x, y] = [engine.new_var().unwrap(), engine.new_var().unwrap()];
    gpu_op(&engine, "a", &[], &[x]);
    gpu_op(&engine, "b", &[x], &[y]);
    let ran = cpu_read(&engine, y);
    // `b` launched while `a` is not done, ordered behind `a`'s fence.
    assert_eq!(device.launched(1), [vec![], vec![0]]);
    settle();
    assert!(!ran.load(Ordering::SeqCst));
    device.complete(0, Ok(()));
    settle();
    assert!(!ran.load(Ordering::SeqCst), "b's work is not done");
    device.complete(1, Ok(()));
    engine.wait_for_all().unwrap();
    assert!(ran.load(Ordering::SeqCst));
}

/// Captures `a` (GPU, writes `x`), `b` (GPU, reads `x`, writes `y`; its function fails if
/// `b_fails`), and a CPU op reading `y`; returns the plan and the CPU op's flag.
fn launching_plan(
    engine: &Engine,
    x: depengine::Var,
    y: depengine::Var,
    b_fails: bool,
) -> (depengine::Plan, Arc<AtomicBool>) {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let plan = engine
        .capture("launching", |plan| {
            plan.op("a")
                .on(Context::gpu(0))
                .writes([x])
                .push_sync(|_| Ok(()))?;
            plan.op("b")
                .on(Context::gpu(0))
                .reads([x])
                .writes([y])
                .push_sync(move |_| {
                    if b_fails {
                        return Err::<(), BoxError>("b's own".into());
                    }
                    Ok(())
                })?;
            plan.op("cpu-read")
                .reads([y])
                .push_sync(move |_| flag.store(true, Ordering::SeqCst))?;
            Ok(())
        })
        .unwrap();
    (plan, ran)
}

#[test]
fn a_replayed_gpu_op_behind_another_starts_at_its_launch_and_finishes_after_it() {
    let (engine, device) = launching_engine();
    let [x, y] = [engine.new_var().unwrap(), engine.new_var().unwrap()];
    let (plan, ran) = launching_plan(&engine, x, y, false);
    engine.replay(&plan).unwrap();
    // `b` launched while `a` is not done, ordered behind `a`'s fence.
    assert_eq!(device.launched(1), [vec![], vec![0]]);
    // `b`'s work is done first: it is finished only once `a` is, and the reader waits.
    device.complete(1, Ok(()));
    settle();
    assert!(
        !ran.load(Ordering::SeqCst),
        "b finished before the work it ran behind"
    );
    device.complete(0, Ok(()));
    engine.wait_for_var(y).unwrap();
    engine.wait_for_all().unwrap();
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn a_device_failure_of_a_replayed_gpu_op_reaches_the_gpu_op_released_at_its_launch() {
    let (engine, device) = launching_engine();
    let [x, y] = [engine.new_var().unwrap(), engine.new_var().unwrap()];
    let (plan, ran) = launching_plan(&engine, x, y, false);
    engine.replay(&plan).unwrap();
    device.launched(1);
    device.complete(1, Ok(()));
    device.complete(0, kernel_fault());
    let error = engine.wait_for_var(y).unwrap_err().to_string();
    assert!(error.contains("`a`"), "b passes a's failure on: {error}");
    assert!(
        !ran.load(Ordering::SeqCst),
        "the reader of a failed var ran"
    );
    engine.wait_for_var(x).unwrap_err();
}

#[test]
fn a_replayed_gpu_op_released_at_a_launch_keeps_its_own_failure() {
    let (engine, device) = launching_engine();
    let [x, y] = [engine.new_var().unwrap(), engine.new_var().unwrap()];
    let (plan, _) = launching_plan(&engine, x, y, true);
    engine.replay(&plan).unwrap();
    device.launched(1);
    // `a`'s device fails after `b` ran and failed on its own: `b` keeps its own failure.
    device.complete(0, kernel_fault());
    device.complete(1, Ok(()));
    let error = engine.wait_for_var(y).unwrap_err().to_string();
    assert!(error.contains("b's own"), "{error}");
    engine.wait_for_var(x).unwrap_err();
}

#[test]
fn a_replayed_gpu_op_released_after_its_launched_input_failed_skips() {
    let (engine, device) = launching_engine();
    let [x, c, y] = [(); 3].map(|()| engine.new_var().unwrap());
    let (open, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let (c_done, d_ran) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (c_flag, d_flag) = (Arc::clone(&c_done), Arc::clone(&d_ran));
    let plan = engine
        .capture("late input", |plan| {
            plan.op("x")
                .on(Context::gpu(0))
                .writes([x])
                .push_sync(|_| Ok(()))?;
            plan.op("c").writes([c]).push_sync(move |_| {
                let _ = gate.lock().unwrap().recv();
                c_flag.store(true, Ordering::SeqCst);
            })?;
            plan.op("d")
                .on(Context::gpu(0))
                .reads([x, c])
                .writes([y])
                .push_sync(move |_| d_flag.store(true, Ordering::SeqCst))?;
            Ok(())
        })
        .unwrap();
    engine.replay(&plan).unwrap();
    // `x` launched (`d` waits for `c` too), then its device fails: `x` is finished (the
    // report finishes it on this thread).
    device.launched(0);
    device.complete(0, kernel_fault());
    // Released now by `c`, `d` finds its input failed and skips.
    open.send(()).unwrap();
    while !c_done.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    settle();
    // (Were `d` handed to the device, the handle's drop fails it when this panics.)
    assert!(!d_ran.load(Ordering::SeqCst), "d ran on a failed input");
    let error = engine.wait_for_var(y).unwrap_err().to_string();
    assert!(error.contains("`x`"), "{error}");
}

#[test]
fn a_write_launches_after_the_reads_before_it_and_waits_for_their_fences() {
    let (engine, device) = launching_engine();
    let [x, y] = [engine.new_var().unwrap(), engine.new_var().unwrap()];
    gpu_op(&engine, "read x", &[x], &[]);
    gpu_op(&engine, "read x, y", &[x, y], &[]);
    gpu_op(&engine, "write x", &[], &[x]);
    gpu_op(&engine, "read y", &[y], &[]);
    // The reads start with no fence; the write after both of theirs; the last read of `y`,
    // beside a launched read, with none.
    let fences = device.launched(3);
    assert_eq!(fences[..2], [Vec::<usize>::new(), Vec::new()]);
    let write = fences.iter().position(|f| f.len() == 2).expect("the write");
    assert_eq!(fences[write], [0, 1]);
    for order in 0..4 {
        device.complete(order, Ok(()));
    }
    engine.wait_for_all().unwrap();
}

#[test]
fn a_device_failure_after_the_launch_reaches_the_cpu_ops_behind() {
    let (engine, device) = launching_engine();
    let x = engine.new_var().unwrap();
    gpu_op(&engine, "kernel", &[], &[x]);
    gpu_op(&engine, "next kernel", &[x], &[]);
    let ran = cpu_read(&engine, x);
    device.launched(1);
    device.complete(
        0,
        Err(DeviceError::Failed {
            backend: "launching".to_owned(),
            message: "CUDA_ERROR_ILLEGAL_ADDRESS".to_owned(),
        }),
    );
    device.complete(1, Ok(()));
    let error = engine.wait_for_var(x).unwrap_err().to_string();
    assert!(error.contains("kernel"), "{error}");
    assert!(error.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{error}");
    assert!(
        !ran.load(Ordering::SeqCst),
        "the reader of a failed var ran"
    );
}

#[test]
fn waits_and_deletions_wait_for_the_launched_work() {
    let (engine, device) = launching_engine();
    let x = engine.new_var().unwrap();
    gpu_op(&engine, "kernel", &[], &[x]);
    device.launched(0);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            engine.wait_for_var(x).unwrap();
            done_tx.send(()).unwrap();
        });
        assert!(
            done_rx.recv_timeout(Duration::from_millis(50)).is_err(),
            "wait_for_var returned before the launched work was done"
        );
        assert_eq!(engine.stats().pending_ops, 1);
        device.complete(0, Ok(()));
        done_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    });
    engine.wait_for_all().unwrap();
}

#[test]
fn an_op_whose_function_failed_does_not_launch() {
    let (engine, device) = launching_engine();
    let x = engine.new_var().unwrap();
    engine
        .op("refused")
        .on(Context::gpu(0))
        .writes([x])
        .push_sync(|_| Err::<(), depengine::BoxError>("launch refused".into()))
        .unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    engine
        .op("behind")
        .on(Context::gpu(0))
        .reads([x])
        .push_sync(move |_| flag.store(true, Ordering::SeqCst))
        .unwrap();
    device.launched(0);
    settle();
    assert_eq!(
        device.launched(0).len(),
        1,
        "released behind a failed function"
    );
    // So that an executor recording work keeps none of what it launched.
    let functions_failed = device.state.lock().unwrap().functions_failed.clone();
    assert_eq!(functions_failed, [0]);
    device.complete(0, Ok(()));
    // The op behind is skipped (its var failed): its function never runs.
    let error = engine.wait_for_var(x).unwrap_err().to_string();
    assert!(error.contains("launch refused"), "{error}");
    device.complete(1, Ok(()));
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn an_async_gpu_op_waits_for_the_completion_of_the_launched_ops_before_it() {
    let (engine, device) = launching_engine();
    let x = engine.new_var().unwrap();
    gpu_op(&engine, "kernel", &[], &[x]);
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    engine
        .op("async reader")
        .on(Context::gpu(0))
        .reads([x])
        .push_async(move |_, done| {
            flag.store(true, Ordering::SeqCst);
            done.ok();
        })
        .unwrap();
    device.launched(0);
    settle();
    // Its work is not what it launches on a stream: it is not released at the launch.
    assert!(
        !ran.load(Ordering::SeqCst),
        "the async GPU op ran at the launch of the op before it"
    );
    device.complete(0, Ok(()));
    device.launched(1);
    device.complete(1, Ok(()));
    engine.wait_for_all().unwrap();
    assert!(ran.load(Ordering::SeqCst));
}

fn kernel_fault() -> Result<(), DeviceError> {
    Err(DeviceError::Failed {
        backend: "launching".to_owned(),
        message: "CUDA_ERROR_ILLEGAL_ADDRESS".to_owned(),
    })
}

/// The failure `var` holds (`wait_for_var`'s error).
fn failure_of(engine: &Engine, var: depengine::Var) -> depengine::OpFailure {
    match engine.wait_for_var(var) {
        Err(depengine::EngineError::OpFailed(failure)) => failure,
        other => panic!("{other:?}"),
    }
}

/// Gives the ops behind launched op 0 the time to complete too early, checks that the
/// `pending` ops still are, then fails op 0's work.
fn fail_the_first_launch_once(engine: &Engine, device: &LaunchingDevice, pending: usize) {
    settle();
    assert_eq!(
        engine.stats().pending_ops,
        pending,
        "an op behind the launched op completed before its outcome was known"
    );
    device.complete(0, kernel_fault());
}

/// The failure `root` holds, which each of `vars` holds too, passed on: the same failure.
fn passed_on_from(
    engine: &Engine,
    root: depengine::Var,
    vars: &[depengine::Var],
) -> depengine::OpFailure {
    let root = failure_of(engine, root);
    for &var in vars {
        let passed_on = failure_of(engine, var);
        assert!(passed_on.same_failure(&root), "{passed_on} is not {root}");
    }
    root
}

/// A launched op's work fails after the GPU ops behind it were released at its launch and
/// their own work succeeded (as on another device, where CUDA's errors do not follow): they
/// complete with its failure, as they would have been skipped with it had they waited for its
/// completion, and so do the ops behind them, whichever of them the device finishes first.
#[test]
fn a_device_failure_passes_to_the_gpu_ops_released_at_the_launch_of_the_failed_op() {
    for failed_first in [true, false] {
        let (engine, device) = launching_engine();
        let [x, y, z] = std::array::from_fn(|_| engine.new_var().unwrap());
        gpu_op(&engine, "kernel", &[], &[x]);
        gpu_op(&engine, "next kernel", &[x], &[y]);
        gpu_op(&engine, "last kernel", &[y], &[z]);
        let ran = cpu_read(&engine, z);
        assert_eq!(device.launched(2), [vec![], vec![0], vec![1]]);
        if failed_first {
            device.complete(0, kernel_fault());
            device.complete(1, Ok(()));
            device.complete(2, Ok(()));
        } else {
            device.complete(2, Ok(()));
            device.complete(1, Ok(()));
            fail_the_first_launch_once(&engine, &device, 4);
        }
        let root = passed_on_from(&engine, x, &[y, z]);
        assert!(
            root.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
            "{root}"
        );
        assert!(
            !ran.load(Ordering::SeqCst),
            "the reader of a failed var ran"
        );
        engine.wait_for_all().unwrap();
    }
}

/// A GPU op released behind a launched write completes with the device's own outcome once
/// that write succeeded, and a failure of its own work stays its own.
#[test]
fn an_op_behind_a_successful_launched_write_keeps_its_own_outcome() {
    let (engine, device) = launching_engine();
    let [x, y] = std::array::from_fn(|_| engine.new_var().unwrap());
    gpu_op(&engine, "kernel", &[], &[x]);
    gpu_op(&engine, "next kernel", &[x], &[y]);
    device.launched(1);
    device.complete(1, kernel_fault());
    device.complete(0, Ok(()));
    engine.wait_for_var(x).unwrap();
    let own = failure_of(&engine, y);
    assert_eq!(own.op_name(), "next kernel");
    assert!(
        own.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
        "{own}"
    );
}

/// A backend whose compute workers report launches, as a CUDA stream's do, and whose copy
/// workers do not (they complete their ops as CPU workers do, when the device is done).
struct LaunchingCompute(Arc<LaunchingDevice>, Arc<HeldDevice>);

impl DeviceBackend for LaunchingCompute {
    fn name(&self) -> &'static str {
        "launching compute"
    }
    fn compute(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(self.0.clone())
    }
    fn copy(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(self.1.clone())
    }
}

/// The op released at a failed op's launch runs on an executor that reports no launch: it too
/// completes only once that op's outcome is known, and with its failure.
#[test]
fn a_device_failure_passes_to_an_op_released_at_its_launch_that_does_not_launch() {
    let launching = Arc::new(LaunchingDevice::default());
    let copies = Arc::new(HeldDevice::default());
    let backend = LaunchingCompute(Arc::clone(&launching), Arc::clone(&copies));
    let engine = Engine::new(
        EngineConfig::default()
            .kind(EngineKind::ThreadedPerDevice)
            .device_backend(Arc::new(backend)),
    )
    .unwrap();
    let device = DeviceHandle(launching);
    let [x, y] = std::array::from_fn(|_| engine.new_var().unwrap());
    gpu_op(&engine, "kernel", &[], &[x]);
    engine
        .op("copy")
        .on(Context::gpu(0))
        .prop(FnProperty::CopyToGpu)
        .reads([x])
        .writes([y])
        .push_sync(|_| Ok(()))
        .unwrap();
    device.launched(0);
    // Released at the kernel's launch; its own work done first.
    for copy in copies.take(1) {
        copy.complete(Ok(()));
    }
    fail_the_first_launch_once(&engine, &device, 2);
    passed_on_from(&engine, x, &[y]);
    engine.wait_for_all().unwrap();
}

/// A fault that loses the device.
fn lost() -> DeviceError {
    DeviceError::Lost {
        backend: "stand-in".to_owned(),
        message: "CUDA_ERROR_ILLEGAL_ADDRESS".to_owned(),
    }
}

/// Pushes a GPU op on device `id` writing `var`: `Ok` with the `DeviceLost` error that refused
/// it, or `Err` with what happened instead (then the op went to the device: the caller releases
/// it before failing the test, so that the engine's drop does not wait for it).
fn refused(engine: &Engine, id: u32, var: depengine::Var) -> Result<EngineError, String> {
    let pushed = engine
        .op("after the fault")
        .on(Context::gpu(id))
        .writes([var])
        .push_sync(|_| Ok(()));
    match pushed {
        Err(error @ EngineError::DeviceLost { .. }) => Ok(error),
        other => Err(format!(
            "a GPU op on a lost device was not refused: {other:?}"
        )),
    }
}

/// Asserts that `error` is a `DeviceLost` of the op "after the fault", naming `fault`.
fn assert_lost_by(error: &EngineError, fault: &DeviceError) {
    let text = error.to_string();
    assert!(
        text.contains("after the fault") && text.contains("the device is lost"),
        "{text}"
    );
    assert!(matches!(error, EngineError::DeviceLost { fault: found, .. } if found == fault));
}

/// A launched op whose work loses the device fails (and passes its failure on, as any device
/// failure); from then on a GPU op on that device is refused at push with `DeviceLost`, naming
/// the fault, while a GPU op on another device and the CPU ops go on.
#[test]
fn a_lost_device_refuses_later_gpu_ops_and_the_rest_goes_on() {
    let (engine, device) = launching_engine();
    let [x, y, z] = [(); 3].map(|()| engine.new_var().unwrap());
    gpu_op(&engine, "faults", &[], &[x]);
    device.launched(0);
    device.complete(0, Err(lost()));
    let error = engine.wait_for_var(x).unwrap_err().to_string();
    assert!(error.contains("the device is lost"), "{error}");

    match refused(&engine, 0, y) {
        Ok(error) => assert_lost_by(&error, &lost()),
        // The launching device's handle releases what it holds if the test panics.
        Err(message) => panic!("{message}"),
    }
    engine
        .op("another device")
        .on(Context::gpu(1))
        .writes([y])
        .push_sync(|_| Ok(()))
        .unwrap();
    device.launched(1);
    device.complete(1, Ok(()));
    let ran = cpu_read(&engine, z);
    engine.wait_for_var(y).unwrap();
    engine.wait_for_var(z).unwrap();
    assert!(ran.load(Ordering::SeqCst));
    // Still lost: the first fault stays.
    match refused(&engine, 0, z) {
        Ok(error) => assert_lost_by(&error, &lost()),
        Err(message) => panic!("{message}"),
    }
}

/// The same on a device that reports no launch: its op completes with the fault, and the
/// device refuses later GPU ops; a plain device failure loses nothing.
#[test]
fn a_fault_of_an_op_that_did_not_launch_loses_the_device_too() {
    let (engine, device) = engine();
    let [x, y] = [(); 2].map(|()| engine.new_var().unwrap());
    let _ran = gpu_then_cpu(&engine, x);
    device
        .take(1)
        .pop()
        .unwrap()
        .complete(Err(DeviceError::Failed {
            backend: "held".to_owned(),
            message: "out of memory".to_owned(),
        }));
    assert!(engine.wait_for_var(x).is_err());
    let _ran = gpu_then_cpu(&engine, y);
    device.take(1).pop().unwrap().complete(Err(lost()));
    assert!(engine.wait_for_var(y).is_err());
    match refused(&engine, 0, x) {
        Ok(error) => assert_lost_by(&error, &lost()),
        Err(message) => {
            device.take(1).pop().unwrap().complete(Ok(()));
            panic!("{message}");
        }
    }
}
