//! A plan's GPU ops recorded as device graphs (`Capture::record_gpu_work`), on a stand-in
//! device that records as a CUDA stream captures: while it records a task, the "kernels" its
//! functions launch are kept instead of run; it then runs them, and each later task of the same
//! recording runs the kept kernels without calling a function.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use depengine::{
    BackendError, BoxError, Context, DeviceBackend, DeviceTask, Engine, EngineConfig, EngineKind,
    Executor, Fence, Plan, Task, Var,
};

/// Work a GPU op's function launches on the stand-in device.
type Kernel = Arc<dyn Fn() + Send + Sync>;

thread_local! {
    /// The kernels launched while the stand-in records, on this thread (CUDA's thread-local
    /// capture mode); `None` when it does not record.
    static RECORDING: RefCell<Option<Vec<Kernel>>> = const { RefCell::new(None) };
}

/// Launches `kernel` on the stand-in device: kept while it records, else run now (the device is
/// done with it at once).
fn launch(kernel: impl Fn() + Send + Sync + 'static) {
    let kernel: Kernel = Arc::new(kernel);
    let kept = RECORDING.with(|recording| match &mut *recording.borrow_mut() {
        Some(kernels) => {
            kernels.push(Arc::clone(&kernel));
            true
        }
        None => false,
    });
    if !kept {
        kernel();
    }
}

/// A device that records the work of recorded tasks, and counts what it was handed.
#[derive(Default)]
struct RecordingDevice {
    /// Device tasks handed to it.
    tasks: AtomicUsize,
    /// Of those, the ones that launched what was recorded before.
    replayed: AtomicUsize,
    /// Whether it reports each op launched (with a fence) before completing it, as a CUDA
    /// stream's executor does: the GPU ops behind it are released at the launch.
    launches: bool,
}

impl Executor for RecordingDevice {
    fn execute(&self, _priority: i32, task: Task) {
        task();
    }

    fn execute_device(&self, task: DeviceTask) {
        self.tasks.fetch_add(1, Ordering::SeqCst);
        let Some(recording) = task.recording().cloned() else {
            return task.run().complete(Ok(()));
        };
        let mut completion = if let Some(kernels) = recording.get::<Vec<Kernel>>() {
            self.replayed.fetch_add(1, Ordering::SeqCst);
            let completion = task.launch_recorded();
            for kernel in kernels {
                kernel();
            }
            completion
        } else {
            RECORDING.with(|recording| *recording.borrow_mut() = Some(Vec::new()));
            let completion = task.run();
            let kernels = RECORDING.with(|recording| recording.borrow_mut().take().unwrap());
            if !completion.function_failed() {
                for kernel in &kernels {
                    kernel();
                }
                recording.set(kernels).ok().unwrap();
            }
            completion
        };
        if self.launches {
            completion.launched(Fence::new(()));
        }
        completion.complete(Ok(()));
    }
}

/// A device that records nothing: the trait's `execute_device`, which runs every task.
struct PlainDevice;

impl Executor for PlainDevice {
    fn execute(&self, _priority: i32, task: Task) {
        task();
    }
}

/// A backend of one executor for compute and copies.
struct Backend(Arc<dyn Executor>);

impl DeviceBackend for Backend {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn compute(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(self.0.clone())
    }
    fn copy(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(self.0.clone())
    }
}

fn engine() -> (Engine, Arc<RecordingDevice>) {
    let device = Arc::new(RecordingDevice::default());
    (
        engine_on(EngineKind::ThreadedPerDevice, device.clone()),
        device,
    )
}

fn engine_on(kind: EngineKind, device: Arc<dyn Executor>) -> Engine {
    let config = EngineConfig::default()
        .kind(kind)
        .cpu_worker_threads(2)
        .device_backend(Arc::new(Backend(device)));
    Engine::new(config).unwrap()
}

/// The plan of one step: a CPU op writes the step's number into `input`'s host value, `links`
/// GPU ops each launch `x = 3x + 1` on `buffer`'s device value (the first after copying the
/// input in), and a CPU op appends the device value to `seen`. With `recorded`, the GPU ops are
/// recorded as a graph.
struct Step {
    plan: Plan,
    /// Calls of the GPU ops' functions.
    calls: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<u64>>>,
}

fn step(engine: &Engine, [input, buffer, output]: [Var; 3], links: usize, recorded: bool) -> Step {
    let (host, device) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (calls, seen, steps) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(AtomicU64::new(0)),
    );
    let plan = engine
        .capture("step", |plan| {
            if recorded {
                // SAFETY: the kernels' buffers (`Arc`s) live as long as they do.
                unsafe { plan.record_gpu_work() };
            }
            let to = Arc::clone(&host);
            plan.op("fill").writes([input]).push_sync(move |_| {
                to.store(steps.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
            })?;
            for link in 0..links {
                let (calls, host, device) =
                    (Arc::clone(&calls), Arc::clone(&host), Arc::clone(&device));
                let op = plan.op(format!("link {link}")).on(Context::gpu(0));
                let op = if link == 0 {
                    op.reads([input]).writes([buffer])
                } else {
                    op.writes([buffer])
                };
                op.push_sync(move |_| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    if link == 0 {
                        let (host, device) = (Arc::clone(&host), Arc::clone(&device));
                        launch(move || device.store(host.load(Ordering::SeqCst), Ordering::SeqCst));
                    }
                    let device = Arc::clone(&device);
                    launch(move || {
                        let x = device.load(Ordering::SeqCst);
                        device.store(3 * x + 1, Ordering::SeqCst);
                    });
                })?;
            }
            let (from, seen) = (Arc::clone(&device), Arc::clone(&seen));
            plan.op("read")
                .reads([buffer])
                .writes([output])
                .push_sync(move |_| {
                    seen.lock().unwrap().push(from.load(Ordering::SeqCst));
                })?;
            Ok::<(), BoxError>(())
        })
        .unwrap();
    Step { plan, calls, seen }
}

/// What `links` steps of `x = 3x + 1` from each of `0..replays` give.
fn expected(replays: u64, links: usize) -> Vec<u64> {
    (0..replays)
        .map(|start| (0..links).fold(start, |x, _| 3 * x + 1))
        .collect()
}

fn vars(engine: &Engine) -> [Var; 3] {
    [(); 3].map(|()| engine.new_var().unwrap())
}

#[test]
fn recorded_gpu_ops_are_called_once_and_their_work_launched_once_per_replay() {
    const LINKS: usize = 5;
    const REPLAYS: u64 = 20;
    let (engine, device) = engine();
    let vars = vars(&engine);
    let step = step(&engine, vars, LINKS, true);
    assert_eq!(step.plan.len(), LINKS + 2, "every captured op counted");
    for _ in 0..REPLAYS {
        engine.replay(&step.plan).unwrap();
    }
    engine.wait_for_all().unwrap();
    assert_eq!(*step.seen.lock().unwrap(), expected(REPLAYS, LINKS));
    assert_eq!(
        step.calls.load(Ordering::SeqCst),
        LINKS,
        "called at the first replay only"
    );
    // One task per replay: the graph, recorded at the first, launched by the others.
    assert_eq!(device.tasks.load(Ordering::SeqCst), REPLAYS as usize);
    assert_eq!(device.replayed.load(Ordering::SeqCst), REPLAYS as usize - 1);
}

#[test]
fn without_recording_each_replay_calls_every_gpu_function() {
    const LINKS: usize = 5;
    const REPLAYS: u64 = 20;
    let (engine, device) = engine();
    let vars = vars(&engine);
    let step = step(&engine, vars, LINKS, false);
    for _ in 0..REPLAYS {
        engine.replay(&step.plan).unwrap();
    }
    engine.wait_for_all().unwrap();
    assert_eq!(*step.seen.lock().unwrap(), expected(REPLAYS, LINKS));
    assert_eq!(step.calls.load(Ordering::SeqCst), LINKS * REPLAYS as usize);
    assert_eq!(
        device.tasks.load(Ordering::SeqCst),
        LINKS * REPLAYS as usize
    );
    assert_eq!(device.replayed.load(Ordering::SeqCst), 0);
}

/// Captures, recorded: GPU op `a` writing `first`, GPU op `b` reading `input` and writing
/// `second` (failing while `fail_b` is set), each launching a count of its runs on the device.
/// Returns the plan and the device's counts of `a`'s and `b`'s work.
fn two_links(
    engine: &Engine,
    [input, first, second]: [Var; 3],
    fail_b: &Arc<std::sync::atomic::AtomicBool>,
) -> (Plan, [Arc<AtomicUsize>; 2]) {
    let counts = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let plan = engine
        .capture("two links", |plan| {
            // SAFETY: the kernels' counters (`Arc`s) live as long as they do.
            unsafe { plan.record_gpu_work() };
            let count = Arc::clone(&counts[0]);
            plan.op("a")
                .on(Context::gpu(0))
                .writes([first])
                .push_sync(move |_| {
                    let count = Arc::clone(&count);
                    launch(move || {
                        count.fetch_add(1, Ordering::SeqCst);
                    });
                })?;
            let (count, fail) = (Arc::clone(&counts[1]), Arc::clone(fail_b));
            plan.op("b")
                .on(Context::gpu(0))
                .reads([input])
                .writes([second])
                .push_sync(move |_| -> Result<(), BoxError> {
                    let count = Arc::clone(&count);
                    launch(move || {
                        count.fetch_add(1, Ordering::SeqCst);
                    });
                    if fail.load(Ordering::SeqCst) {
                        return Err("b failed".into());
                    }
                    Ok(())
                })?;
            Ok::<(), BoxError>(())
        })
        .unwrap();
    (plan, counts)
}

#[test]
fn a_failed_function_fails_the_whole_graph_and_its_recording_is_not_kept() {
    let (engine, device) = engine();
    let [input, first, second] = vars(&engine);
    let fail_b = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (plan, counts) = two_links(&engine, [input, first, second], &fail_b);
    assert_eq!(plan.len(), 2);
    engine.replay(&plan).unwrap();
    // `a` succeeded, but its graph failed as one: what it wrote holds `b`'s failure, and none of
    // the work launched was run (a capture is not run).
    for var in [first, second] {
        let error = engine.wait_for_var(var).unwrap_err().to_string();
        assert!(error.contains("b failed"), "{error}");
    }
    let work = |counts: &[Arc<AtomicUsize>; 2]| counts.each_ref().map(|c| c.load(Ordering::SeqCst));
    assert_eq!(work(&counts), [0, 0]);
    // Recorded again by the next replay, which runs it; the one after launches that recording.
    fail_b.store(false, Ordering::SeqCst);
    engine.replay(&plan).unwrap();
    engine.replay(&plan).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(work(&counts), [2, 2]);
    assert_eq!(device.tasks.load(Ordering::SeqCst), 3);
    assert_eq!(device.replayed.load(Ordering::SeqCst), 1);
}

#[test]
fn a_failure_on_a_var_one_op_of_a_graph_reads_skips_the_whole_graph() {
    let (engine, device) = engine();
    let [input, first, second] = vars(&engine);
    let fail_b = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (plan, counts) = two_links(&engine, [input, first, second], &fail_b);
    engine
        .op("fail input")
        .writes([input])
        .push_sync(|_| -> Result<(), BoxError> { Err("input failed".into()) })
        .unwrap();
    engine.replay(&plan).unwrap();
    for var in [first, second] {
        let error = engine.wait_for_var(var).unwrap_err().to_string();
        assert!(error.contains("input failed"), "{error}");
    }
    assert_eq!(counts.each_ref().map(|c| c.load(Ordering::SeqCst)), [0, 0]);
    assert_eq!(
        device.tasks.load(Ordering::SeqCst),
        0,
        "a skipped graph reached its device"
    );
}

#[test]
fn an_op_between_gpu_ops_ends_their_graph() {
    const REPLAYS: usize = 10;
    let (engine, device) = engine();
    let [a, b, c] = vars(&engine);
    let plan = engine
        .capture("split", |plan| {
            // SAFETY: the ops launch nothing.
            unsafe { plan.record_gpu_work() };
            plan.op("gpu 1")
                .on(Context::gpu(0))
                .writes([a])
                .push_sync(|_| {})?;
            plan.op("gpu 2")
                .on(Context::gpu(0))
                .writes([a])
                .push_sync(|_| {})?;
            plan.op("cpu").reads([a]).writes([b]).push_sync(|_| {})?;
            plan.op("gpu 3")
                .on(Context::gpu(0))
                .reads([b])
                .writes([c])
                .push_sync(|_| {})?;
            // On another device: a graph of its own.
            plan.op("gpu 4")
                .on(Context::gpu(1))
                .reads([c])
                .push_sync(|_| {})?;
            Ok::<(), BoxError>(())
        })
        .unwrap();
    for _ in 0..REPLAYS {
        engine.replay(&plan).unwrap();
    }
    engine.wait_for_all().unwrap();
    assert_eq!(device.tasks.load(Ordering::SeqCst), 3 * REPLAYS);
    assert_eq!(device.replayed.load(Ordering::SeqCst), 3 * (REPLAYS - 1));
}

#[test]
fn where_nothing_records_each_replay_calls_the_functions_in_capture_order() {
    const LINKS: usize = 4;
    const REPLAYS: u64 = 10;
    for (kind, device) in [
        (
            EngineKind::ThreadedPerDevice,
            Arc::new(PlainDevice) as Arc<dyn Executor>,
        ),
        (EngineKind::Naive, Arc::new(RecordingDevice::default())),
    ] {
        let engine = engine_on(kind, device);
        let vars = vars(&engine);
        let step = step(&engine, vars, LINKS, true);
        for _ in 0..REPLAYS {
            engine.replay(&step.plan).unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(
            *step.seen.lock().unwrap(),
            expected(REPLAYS, LINKS),
            "{kind:?}"
        );
        assert_eq!(step.calls.load(Ordering::SeqCst), LINKS * REPLAYS as usize);
    }
}

#[test]
fn graphs_released_at_each_others_launch_pass_a_failure_on_across_devices() {
    const REPLAYS: usize = 5;
    let device = Arc::new(RecordingDevice {
        launches: true,
        ..RecordingDevice::default()
    });
    let engine = engine_on(EngineKind::ThreadedPerDevice, device.clone());
    let [a, b, c] = vars(&engine);
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let value = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let plan = engine
        .capture("across devices", |plan| {
            // SAFETY: the kernels' value (an `Arc`) lives as long as they do.
            unsafe { plan.record_gpu_work() };
            // Graph 1 on GPU 0: sets the value to 1, then fails while `fail` is set.
            let (to, failing) = (Arc::clone(&value), Arc::clone(&fail));
            plan.op("set")
                .on(Context::gpu(0))
                .writes([a])
                .push_sync(move |_| {
                    let to = Arc::clone(&to);
                    launch(move || to.store(1, Ordering::SeqCst));
                })?;
            plan.op("check").on(Context::gpu(0)).writes([a]).push_sync(
                move |_| -> Result<(), BoxError> {
                    if failing.load(Ordering::SeqCst) {
                        return Err("check failed".into());
                    }
                    Ok(())
                },
            )?;
            // Graph 2 on GPU 1, released at graph 1's launch; graph 3 on GPU 0 at graph 2's.
            let to = Arc::clone(&value);
            plan.op("double")
                .on(Context::gpu(1))
                .reads([a])
                .writes([b])
                .push_sync(move |_| {
                    let to = Arc::clone(&to);
                    launch(move || {
                        to.fetch_add(to.load(Ordering::SeqCst), Ordering::SeqCst);
                    });
                })?;
            let to = Arc::clone(&value);
            plan.op("add one")
                .on(Context::gpu(0))
                .reads([b])
                .writes([c])
                .push_sync(move |_| {
                    let to = Arc::clone(&to);
                    launch(move || {
                        to.fetch_add(1, Ordering::SeqCst);
                    });
                })?;
            let (from, seen) = (Arc::clone(&value), Arc::clone(&seen));
            plan.op("read").reads([c]).push_sync(move |_| {
                seen.lock().unwrap().push(from.load(Ordering::SeqCst));
            })?;
            Ok::<(), BoxError>(())
        })
        .unwrap();
    engine.replay(&plan).unwrap();
    // Graph 1 failed as one: the graphs behind it skip, and `c` holds its failure (reported
    // here; `wait_for_all` clears it from `a` and `b` too).
    let error = engine.wait_for_var(c).unwrap_err().to_string();
    assert!(error.contains("check failed"), "{error}");
    engine.wait_for_all().unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(
        device.tasks.load(Ordering::SeqCst),
        1,
        "a skipped graph reached its device"
    );
    fail.store(false, Ordering::SeqCst);
    for _ in 0..REPLAYS {
        engine.replay(&plan).unwrap();
    }
    engine.wait_for_all().unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![3; REPLAYS]);
    // Three graphs a replay; graph 1 recorded at its second run, the others at their first.
    assert_eq!(device.tasks.load(Ordering::SeqCst), 1 + 3 * REPLAYS);
    assert_eq!(device.replayed.load(Ordering::SeqCst), 3 * (REPLAYS - 1));
}
