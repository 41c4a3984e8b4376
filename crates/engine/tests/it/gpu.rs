//! The CUDA backend through the engine (`--features cuda`).
//!
//! Without a CUDA driver (CI): CPU work runs, and a GPU op is refused at push with the reason.
//! With a GPU:
//!
//! - a chain of kernels whose links alternate between a compute and a copy stream, each op
//!   spinning for about a millisecond between an add and a scale, so that an op started
//!   before its predecessor's work finished would read an unscaled sum, checked element by
//!   element against the same arithmetic on the CPU; each link is released when the one
//!   before it launched, so only the stream waits for the fences order them, and with the
//!   waits switched off (`CudaBackend::without_fence_waits`) the same chain gives other
//!   numbers;
//! - the same chain's compute links as a plan recorded as a CUDA graph, replayed three times;
//! - the same chain on every GPU at once, if there are several;
//! - an error stored on the context as a failed `Drop` stores it, failing no op;
//! - work an op queues on a side stream, ordered both ways by `CudaRun::stream_wait` (without
//!   the wait back, the next op sees it unfinished);
//! - a chain that alternates GPU and CPU ops on one buffer;
//! - copies from pinned memory to the device (`CopyToGpu` ops) overlapping the compute of the
//!   batch before, measured against the copies and the compute run one after the other;
//! - a random mix of GPU and CPU ops on a few buffers against the same ops run in order on
//!   the CPU;
//! - pinned host data (`memory::pinned_zeros`) filled by a `cpu_pinned` op, copied to the
//!   device (`CudaRun::copy_to_device`), doubled there and copied back
//!   (`CudaRun::copy_to_host`), and a copy between buffers of different lengths failing its op
//!   with the typed error.
//!
//! The buffers are typed data (`Data<Slot>`) that the ops receive as `&`/`&mut`. cudarc's own
//! per-buffer event tracking is off (`CudaBackend::without_event_tracking`): only the engine
//! orders the buffers' uses. Each GPU test skips itself, printing why, where no device or no
//! NVRTC is found.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use depengine::cuda::cudarc::driver::sys::CUresult;
use depengine::cuda::cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};
use depengine::cuda::{CudaBackend, Driver, kernels, memory};
use depengine::{
    BoxError, Context, Data, Engine, EngineConfig, EngineError, EngineKind, FnProperty, RunContext,
};

/// Elements per buffer.
const N: usize = 1 << 20;
/// Cycles each op spins on its stream before its arithmetic (about a millisecond).
const SPIN_CYCLES: i64 = 2_000_000;

/// The device ids, or why the GPU tests skip.
fn gpus() -> Result<usize, String> {
    let driver = Driver::probe().map_err(|error| error.to_string())?;
    if !kernels::nvrtc_present() {
        return Err("no NVRTC to compile the kernels".to_owned());
    }
    Ok(driver.device_count())
}

#[test]
fn without_a_driver_cpu_work_runs_and_a_gpu_op_is_refused_at_push() {
    if Driver::probe().is_ok() {
        eprintln!("skipped: this machine has a CUDA driver (the GPU tests below cover it)");
        return;
    }
    let engine = Engine::new(EngineConfig::default().kind(EngineKind::ThreadedPerDevice)).unwrap();
    let var = engine.new_var().unwrap();
    engine.op("cpu").writes([var]).push_sync(|_| ()).unwrap();
    let error = engine
        .op("gpu")
        .on(Context::gpu(0))
        .writes([var])
        .push_sync(|_| ())
        .unwrap_err();
    assert!(matches!(error, EngineError::Backend { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("no CUDA driver"), "{message}");
    engine.wait_for_all().unwrap();
    assert_eq!(engine.stats().pending_ops, 0);
}

/// The kernels, loaded once into a device's context (by the first op there that needs them).
struct Kernels {
    _module: Arc<CudaModule>,
    add: CudaFunction,
    scale: CudaFunction,
    spin: CudaFunction,
}

fn kernels_on(run: &depengine::cuda::CudaRun) -> Result<&'static Kernels, BoxError> {
    static KERNELS: Mutex<Option<HashMap<u32, &'static Kernels>>> = Mutex::new(None);
    let mut loaded = KERNELS.lock().unwrap();
    let loaded = loaded.get_or_insert_with(HashMap::new);
    if let Some(kernels) = loaded.get(&run.device()) {
        return Ok(kernels);
    }
    let module = kernels::load(run.context())?;
    let kernels: &'static Kernels = Box::leak(Box::new(Kernels {
        add: module.load_function("add_f32")?,
        scale: module.load_function("scale_f32")?,
        spin: module.load_function("spin")?,
        _module: module,
    }));
    loaded.insert(run.device(), kernels);
    Ok(kernels)
}

/// A device buffer as typed data: ops receive it as `&Slot` or `&mut Slot` (the engine's
/// schedule is the proof of exclusivity, no lock) and launch on their worker's stream. `spare`
/// is a second buffer of the same size, so that `x = f(x)` writes elsewhere and swaps, and no
/// op frees a buffer that another stream may still be reading.
#[derive(Default)]
struct Slot {
    data: Option<CudaSlice<f32>>,
    spare: Option<CudaSlice<f32>>,
}

fn cuda(run: &RunContext) -> Result<depengine::cuda::CudaRun, BoxError> {
    run.cuda()
        .ok_or_else(|| "a GPU op ran on a thread that is no GPU worker".into())
}

/// Fills `slot` with `values`, and gives it a spare, on the op's stream.
fn upload(run: &RunContext, slot: &mut Slot, values: &[f32]) -> Result<(), BoxError> {
    let run = cuda(run)?;
    slot.data = Some(run.stream().clone_htod(values)?);
    slot.spare = Some(run.stream().alloc_zeros::<f32>(values.len())?);
    Ok(())
}

/// `x = (x + y) * factor` on the op's stream, spinning for `SPIN_CYCLES` between the add and
/// the scale.
fn add_then_scale(run: &RunContext, y: &Slot, x: &mut Slot, factor: f32) -> Result<(), BoxError> {
    add_spin_scale(run, y, x, factor, SPIN_CYCLES)
}

/// `x = (x + y) * factor` on the op's stream, spinning for `spin` cycles between the add and
/// the scale.
fn add_spin_scale(
    run: &RunContext,
    y: &Slot,
    x: &mut Slot,
    factor: f32,
    spin: i64,
) -> Result<(), BoxError> {
    let run = cuda(run)?;
    add_spin_scale_on(&run, run.stream(), y, x, factor, spin)
}

/// As [`add_spin_scale`], on `stream`, a stream of `run`'s device.
fn add_spin_scale_on(
    run: &depengine::cuda::CudaRun,
    stream: &CudaStream,
    y: &Slot,
    x: &mut Slot,
    factor: f32,
    spin: i64,
) -> Result<(), BoxError> {
    let kernels = kernels_on(run)?;
    let Slot { data, spare } = x;
    let (input, sum) = (
        data.as_ref().ok_or("x unset")?,
        spare.as_mut().ok_or("x unset")?,
    );
    let y = y.data.as_ref().ok_or("y unset")?;
    let n = u32::try_from(input.len())?;
    let config = LaunchConfig::for_num_elems(n);
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `spin` takes one `long long` and touches no memory; `add_f32` reads `n` floats
    // of `a` and `b` and writes `n` of `out`, three distinct buffers; `scale_f32` reads and
    // writes `n` floats of `x`. Every buffer of a slot holds `n` floats, as `upload` made them
    // (`y` as many as `x`: the tests make all their slots of one size).
    unsafe {
        stream
            .launch_builder(&kernels.add)
            .arg(input)
            .arg(y)
            .arg(&mut *sum)
            .arg(&n)
            .launch(config)?;
        // Between the two halves of the arithmetic: an op that read `x` before this one's
        // work finished would see the sum unscaled.
        stream
            .launch_builder(&kernels.spin)
            .arg(&spin)
            .launch(one)?;
        stream
            .launch_builder(&kernels.scale)
            .arg(&mut *sum)
            .arg(&factor)
            .arg(&n)
            .launch(config)?;
    }
    std::mem::swap(data, spare);
    Ok(())
}

/// Copies a slot's buffer to the host on a stream of its own (the ops on it have completed).
fn download(slot: &Slot) -> Result<Vec<f32>, BoxError> {
    let buffer = slot.data.as_ref().ok_or("not uploaded")?;
    Ok(buffer.context().default_stream().clone_dtoh(buffer)?)
}

fn gpu_engine() -> Engine {
    // SAFETY: the buffers of these tests are only used inside ops that name their vars, or
    // after `wait_for_var` on them (the contract of `without_event_tracking`).
    let backend = unsafe { CudaBackend::without_event_tracking() };
    engine_on(backend, 2)
}

/// An engine on `backend` with `threads` compute and `threads` copy workers per GPU.
fn engine_on(backend: CudaBackend, threads: usize) -> Engine {
    Engine::new(
        EngineConfig::default()
            .kind(EngineKind::ThreadedPerDevice)
            .gpu_worker_threads(threads)
            .gpu_copy_threads(threads)
            .device_backend(Arc::new(backend)),
    )
    .unwrap()
}

/// The GPUs, held by one test at a time: the overlap test times its copies and kernels, which
/// the work of tests running beside it on the same device would disturb.
struct Gpus {
    count: usize,
    _turn: MutexGuard<'static, ()>,
}

/// The GPUs, once no other GPU test holds them, or `None` (with the reason printed) where the
/// GPU tests skip.
fn devices_or_skip() -> Option<Gpus> {
    static TURN: Mutex<()> = Mutex::new(());
    match gpus() {
        Ok(count) if count > 0 => Some(Gpus {
            count,
            // A test that failed holding it leaves nothing half done.
            _turn: TURN.lock().unwrap_or_else(PoisonError::into_inner),
        }),
        Ok(_) => skip("the CUDA driver reports no device"),
        Err(reason) => skip(&reason),
    }
}

/// Skips a GPU test, saying why. With `DEPENGINE_REQUIRE_GPU` set (a run on a GPU machine)
/// it fails instead, so that a run whose GPU tests all skipped cannot pass for one where they
/// ran.
fn skip<T>(reason: &str) -> Option<T> {
    assert!(
        std::env::var_os("DEPENGINE_REQUIRE_GPU").is_none(),
        "DEPENGINE_REQUIRE_GPU is set, but the GPU tests cannot run: {reason}"
    );
    eprintln!("skipped: {reason}");
    None
}

/// The factors of the chain's links.
const FACTORS: [f32; 8] = [0.5, 2.0, 0.25, 4.0, 0.5, 1.5, 0.75, 1.0];

/// Makes slots `x` (all ones) and `y` (`i % 7`) on device `device`, uploaded by a GPU op:
/// returns them, and `y`'s values.
fn push_upload(engine: &Engine, device: u32) -> (Data<Slot>, Data<Slot>, Vec<f32>) {
    let x = engine
        .data_named(format!("x{device}"), Slot::default())
        .unwrap();
    let y = engine
        .data_named(format!("y{device}"), Slot::default())
        .unwrap();
    let host_y: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    let values = host_y.clone();
    engine
        .op("upload")
        .on(Context::gpu(device))
        .write(&x)
        .write(&y)
        .push_sync(move |run, (x, y)| -> Result<(), BoxError> {
            // Loaded here, not inside a plan's recorded function (a capture).
            kernels_on(&cuda(&run)?)?;
            upload(&run, x, &vec![1.0_f32; N])?;
            upload(&run, y, &values)
        })
        .unwrap();
    (x, y, host_y)
}

/// Pushes the chain on device `device`: an upload, then one `x = (x + y) * factor` op per
/// factor, the odd ones on the device's copy stream (`CopyToGpu`) and the even ones on its
/// compute stream, so that every link waits for an op of the other stream. Returns `x` and
/// what it must hold at the end.
fn push_chain(engine: &Engine, device: u32) -> (Data<Slot>, Vec<f32>) {
    let (x, y, host_y) = push_upload(engine, device);
    for (step, factor) in FACTORS.into_iter().enumerate() {
        let property = if step % 2 == 1 {
            FnProperty::CopyToGpu
        } else {
            FnProperty::Normal
        };
        engine
            .op(format!("step{step}"))
            .on(Context::gpu(device))
            .prop(property)
            .read(&y)
            .write(&x)
            .push_sync(move |run, (y, x)| add_then_scale(&run, y, x, factor))
            .unwrap();
    }
    let expected = host_y
        .iter()
        .map(|&y| FACTORS.iter().fold(1.0_f32, |x, &factor| (x + y) * factor))
        .collect();
    (x, expected)
}

/// The elements of `got` that differ from `expected` (a NaN differs from everything).
fn mismatches(got: &[f32], expected: &[f32]) -> usize {
    assert_eq!(got.len(), expected.len());
    got.iter()
        .zip(expected)
        .filter(|(got, expected)| {
            let close = (*got - *expected).abs() <= 1e-3 * expected.abs().max(1.0);
            !close
        })
        .count()
}

#[test]
fn a_chain_of_kernels_across_two_streams_matches_the_cpu() {
    let Some(gpus) = devices_or_skip() else {
        return;
    };
    eprintln!("{} CUDA device(s); running on device 0", gpus.count);
    let engine = gpu_engine();
    let (x, expected) = push_chain(&engine, 0);
    let got = download(&engine.read(&x).unwrap()).unwrap();
    assert_eq!(mismatches(&got, &expected), 0);
}

#[test]
fn an_error_a_drop_stored_on_the_context_fails_no_op() {
    let Some(_gpus) = devices_or_skip() else {
        return;
    };
    let engine = gpu_engine();
    let (x, y, host_y) = push_upload(&engine, 0);
    let context: Arc<Mutex<Option<Arc<CudaContext>>>> = Arc::default();
    let slot = Arc::clone(&context);
    engine
        .op("context")
        .on(Context::gpu(0))
        .read(&x)
        .push_sync(move |run, _x| -> Result<(), BoxError> {
            *slot.lock().unwrap() = Some(Arc::clone(cuda(&run)?.context()));
            Ok(())
        })
        .unwrap();
    engine.wait_for_all().unwrap();
    let context = context.lock().unwrap().take().unwrap();
    // What cudarc does, on any thread, when a buffer's free fails in its `Drop`.
    context.record_err::<()>(Err(DriverError(CUresult::CUDA_ERROR_INVALID_VALUE)));
    engine
        .op("step")
        .on(Context::gpu(0))
        .read(&y)
        .write(&x)
        .push_sync(move |run, (y, x)| add_then_scale(&run, y, x, 2.0))
        .unwrap();
    let got = download(&engine.read(&x).unwrap()).unwrap();
    let expected: Vec<f32> = host_y.iter().map(|&y| (1.0 + y) * 2.0).collect();
    assert_eq!(mismatches(&got, &expected), 0);
    context
        .check_err()
        .expect("the worker took the stored error");
}

/// `x = ((1 + y) * 2 + y) * 0.5`: the first step's kernels on a side stream of its op (with
/// the waits of `CudaRun::stream_wait` before them, and, if `join`, after them), the second on
/// the worker's stream. Returns how many elements differ from the CPU's arithmetic.
fn side_stream_mismatches(join: bool) -> usize {
    let engine = gpu_engine();
    let (x, y, host_y) = push_upload(&engine, 0);
    let kept: Arc<Mutex<Option<Arc<CudaStream>>>> = Arc::default();
    let keep = Arc::clone(&kept);
    engine
        .op("side")
        .on(Context::gpu(0))
        .read(&y)
        .write(&x)
        .push_sync(move |run, (y, x)| -> Result<(), BoxError> {
            let cuda = cuda(&run)?;
            let side = cuda.context().new_stream()?;
            cuda.stream_wait(&side, cuda.stream())?;
            add_spin_scale_on(&cuda, &side, y, x, 2.0, SPIN_CYCLES)?;
            if join {
                cuda.stream_wait(cuda.stream(), &side)?;
            }
            *keep.lock().unwrap() = Some(side);
            Ok(())
        })
        .unwrap();
    // On the worker's stream: started before the side work ended, it would see `x` unscaled.
    engine
        .op("after")
        .on(Context::gpu(0))
        .read(&y)
        .write(&x)
        .push_sync(move |run, (y, x)| add_then_scale(&run, y, x, 0.5))
        .unwrap();
    let got = download(&engine.read(&x).unwrap()).unwrap();
    // Unjoined, the side work may still run: its buffers must outlive it.
    let side = kept.lock().unwrap().take().expect("the side op ran");
    side.synchronize().unwrap();
    let expected: Vec<f32> = host_y
        .iter()
        .map(|&y| ((1.0 + y) * 2.0 + y) * 0.5)
        .collect();
    mismatches(&got, &expected)
}

#[test]
fn work_on_a_side_stream_ordered_by_stream_wait_is_the_ops() {
    let Some(_gpus) = devices_or_skip() else {
        return;
    };
    assert_eq!(side_stream_mismatches(true), 0);
    // Without the wait back, the next op's kernels run beside the side work.
    assert_ne!(
        side_stream_mismatches(false),
        0,
        "the side work was waited for anyway"
    );
}

#[test]
fn a_plan_recorded_as_a_cuda_graph_replays_the_chain() {
    const REPLAYS: usize = 3;
    let Some(_gpus) = devices_or_skip() else {
        return;
    };
    let engine = gpu_engine();
    let (x, y, host_y) = push_upload(&engine, 0);
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let plan = engine
        .capture("chain", |plan| {
            // SAFETY: the slots' buffers are made above and never replaced while the plan
            // lives, the steps allocate nothing; each step's swap runs once, at the recording
            // (checked below), and an even count of them leaves the result where the recorded
            // work puts it at every replay.
            unsafe { plan.record_gpu_work() };
            for (step, factor) in FACTORS.into_iter().enumerate() {
                let calls = Arc::clone(&calls);
                plan.op(format!("step{step}"))
                    .on(Context::gpu(0))
                    .read(&y)
                    .write(&x)
                    .push_sync(move |run, (y, x)| {
                        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        add_spin_scale(&run, y, x, factor, 1000)
                    })?;
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(FACTORS.len() % 2, 0, "the steps' swaps must cancel out");
    for _ in 0..REPLAYS {
        engine.replay(&plan).unwrap();
    }
    let expected: Vec<f32> = host_y
        .iter()
        .map(|&y| {
            (0..REPLAYS).fold(1.0_f32, |x, _| {
                FACTORS.iter().fold(x, |x, &factor| (x + y) * factor)
            })
        })
        .collect();
    let got = download(&engine.read(&x).unwrap()).unwrap();
    assert_eq!(mismatches(&got, &expected), 0);
    let called = calls.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(called, FACTORS.len(), "the steps were not recorded once");
    drop(plan);
}

#[test]
fn without_the_fence_waits_the_same_chain_races() {
    let Some(_gpus) = devices_or_skip() else {
        return;
    };
    // SAFETY: the buffers hold plain floats, whose wrong values are what this test looks
    // for, and cudarc's tracking is off; they are read on the host only after
    // `wait_for_var` (through `read`).
    let backend = unsafe { CudaBackend::without_event_tracking().without_fence_waits() };
    let engine = engine_on(backend, 2);
    let (x, expected) = push_chain(&engine, 0);
    let got = download(&engine.read(&x).unwrap()).unwrap();
    let wrong = mismatches(&got, &expected);
    eprintln!("without the waits: {wrong} of {N} elements differ from the CPU's");
    assert!(wrong > 0, "the chain ran in order without the fence waits");
}

#[test]
fn every_gpu_runs_a_chain_at_once() {
    let Some(gpus) = devices_or_skip() else {
        return;
    };
    let devices = gpus.count;
    if devices < 2 {
        return eprintln!("skipped: one CUDA device (the other tests cover it)");
    }
    let engine = gpu_engine();
    let chains: Vec<_> = (0..devices)
        .map(|device| push_chain(&engine, u32::try_from(device).unwrap()))
        .collect();
    for (device, (x, expected)) in chains.iter().enumerate() {
        let got = download(&engine.read(x).unwrap()).unwrap();
        assert_eq!(mismatches(&got, expected), 0, "device {device}");
    }
}

#[test]
fn gpu_and_cpu_ops_alternate_on_one_buffer() {
    let Some(_gpus) = devices_or_skip() else {
        return;
    };
    let engine = gpu_engine();
    let x = engine.data_named("x", Slot::default()).unwrap();
    let y = engine.data_named("y", Slot::default()).unwrap();
    engine
        .op("upload")
        .on(Context::gpu(0))
        .write(&x)
        .write(&y)
        .push_sync(|run, (x, y)| -> Result<(), BoxError> {
            upload(&run, x, &vec![0.0_f32; N])?;
            upload(&run, y, &vec![1.0_f32; N])
        })
        .unwrap();
    let host = engine.data_named("host", Vec::<f32>::new()).unwrap();
    let rounds = 6;
    for round in 0..rounds {
        engine
            .op(format!("gpu{round}"))
            .on(Context::gpu(0))
            .read(&y)
            .write(&x)
            .push_sync(|run, (y, x)| add_then_scale(&run, y, x, 1.0))
            .unwrap();
        // A CPU op reading what the GPU op wrote: it starts only once that work is done, so a
        // copy on a stream of its own sees it (a stale read would see the previous round's).
        engine
            .op(format!("cpu{round}"))
            .read(&x)
            .write(&host)
            .push_sync(move |_, (x, host)| -> Result<(), BoxError> {
                let copied = download(x)?;
                let expected = (round + 1) as f32;
                if copied.iter().any(|&value| (value - expected).abs() > 1e-6) {
                    return Err(format!("round {round}: a CPU op saw stale GPU data").into());
                }
                *host = copied;
                Ok(())
            })
            .unwrap();
    }
    engine.wait_for_all().unwrap();
    let host = engine.read(&host).unwrap();
    assert_eq!(host.len(), N);
    assert!(
        host.iter()
            .all(|&value| (value - rounds as f32).abs() <= 1e-6)
    );
}

/// Elements per batch of the overlap test: 64 MiB of floats, a copy of a millisecond or more
/// over the PCI Express bus.
const BATCH: usize = 16 << 20;
/// Batches of the overlap test.
const BATCHES: usize = 8;

/// Pushes a copy of `source` (pinned host memory) into each of `batches`, on the device's copy
/// stream, and, if `compute`, an op per batch on its compute stream that spins `cycles` then
/// scales the batch; returns the wall time until all of them completed.
fn time_batches(
    engine: &Engine,
    source: &Data<Option<PinnedHostSlice<f32>>>,
    batches: &[Data<Slot>],
    copy: bool,
    compute: Option<i64>,
) -> Duration {
    let start = Instant::now();
    for (i, batch) in batches.iter().enumerate() {
        if copy {
            engine
                .op(format!("copy{i}"))
                .on(Context::gpu(0))
                .prop(FnProperty::CopyToGpu)
                .read(source)
                .write(batch)
                .push_sync(|run, (source, batch)| -> Result<(), BoxError> {
                    let run = cuda(&run)?;
                    let source = source.as_ref().ok_or("no pinned source")?;
                    let data = batch.data.as_mut().ok_or("batch unset")?;
                    run.stream().memcpy_htod(source, data)?;
                    Ok(())
                })
                .unwrap();
        }
        if let Some(cycles) = compute {
            engine
                .op(format!("compute{i}"))
                .on(Context::gpu(0))
                .write(batch)
                .push_sync(move |run, batch| -> Result<(), BoxError> {
                    let run = cuda(&run)?;
                    let kernels = kernels_on(&run)?;
                    let data = batch.data.as_mut().ok_or("batch unset")?;
                    let n = u32::try_from(data.len())?;
                    let one = LaunchConfig::for_num_elems(1);
                    // SAFETY: `spin` takes one `long long` and touches no memory; `scale_f32`
                    // reads and writes the `n` floats of `data`.
                    unsafe {
                        run.stream()
                            .launch_builder(&kernels.spin)
                            .arg(&cycles)
                            .launch(one)?;
                        run.stream()
                            .launch_builder(&kernels.scale)
                            .arg(&mut *data)
                            .arg(&1.0_f32)
                            .arg(&n)
                            .launch(LaunchConfig::for_num_elems(n))?;
                    }
                    Ok(())
                })
                .unwrap();
        }
    }
    engine.wait_for_all().unwrap();
    start.elapsed()
}

#[test]
fn copies_to_the_device_overlap_the_compute_of_the_batch_before() {
    let Some(_gpus) = devices_or_skip() else {
        return;
    };
    // One compute and one copy stream: with two of each, which stream each batch's kernel
    // lands on decides the overlap (all on one stream while the other idles: 0.25 of the
    // shorter part where the pipeline reaches about 0.9).
    // SAFETY: as in `gpu_engine`.
    let backend = unsafe { CudaBackend::without_event_tracking() };
    let engine = engine_on(backend, 1);
    let source = engine
        .data_named("pinned", None::<PinnedHostSlice<f32>>)
        .unwrap();
    let batches: Vec<Data<Slot>> = (0..BATCHES)
        .map(|i| {
            engine
                .data_named(format!("batch{i}"), Slot::default())
                .unwrap()
        })
        .collect();
    engine
        .op("allocate")
        .on(Context::gpu(0))
        .write(&source)
        .push_sync(|run, source| -> Result<(), BoxError> {
            let run = cuda(&run)?;
            // SAFETY: the memory is filled below before any copy reads it.
            let mut pinned = unsafe { run.context().alloc_pinned::<f32>(BATCH)? };
            pinned.as_mut_slice()?.fill(1.0);
            *source = Some(pinned);
            Ok(())
        })
        .unwrap();
    for (i, batch) in batches.iter().enumerate() {
        engine
            .op(format!("allocate{i}"))
            .on(Context::gpu(0))
            .write(batch)
            .push_sync(|run, batch| -> Result<(), BoxError> {
                batch.data = Some(cuda(&run)?.stream().alloc_zeros::<f32>(BATCH)?);
                Ok(())
            })
            .unwrap();
    }
    engine.wait_for_all().unwrap();
    // Warm-up (module load, first launches), then the parts alone: the compute sized to take
    // about as long as the copies, then both, pipelined.
    time_batches(&engine, &source, &batches, true, Some(1000));
    let copies = time_batches(&engine, &source, &batches, true, None);
    let probe_cycles = 2_000_000_i64;
    let probe = time_batches(&engine, &source, &batches, false, Some(probe_cycles));
    let cycles = (probe_cycles as f64 * copies.as_secs_f64() / probe.as_secs_f64()) as i64;
    let compute = time_batches(&engine, &source, &batches, false, Some(cycles));
    let both = time_batches(&engine, &source, &batches, true, Some(cycles));
    let overlap =
        (copies + compute).saturating_sub(both).as_secs_f64() / copies.min(compute).as_secs_f64();
    eprintln!(
        "{BATCHES} batches of {} MiB: copies {copies:?}, compute {compute:?}, both {both:?}: \
         overlap {overlap:.2} (1 = the shorter part entirely hidden)",
        (BATCH * 4) >> 20
    );
    assert!(
        overlap > 0.5,
        "copies and compute overlapped by {overlap:.2}"
    );
}

/// Elements per buffer of the random test.
const MIXED: usize = 4096;

/// A step of the random test: `x[w] = (x[w] + x[r]) * factor` on the GPU (on the compute or
/// the copy stream), or `x[w] = x[w] * 0.5 + x[r]` on the CPU.
#[derive(Clone, Copy, Debug)]
enum Step {
    Gpu {
        r: usize,
        w: usize,
        factor: f32,
        copy_stream: bool,
    },
    Cpu {
        r: usize,
        w: usize,
    },
}

/// The steps of the random test, from a fixed seed.
fn random_steps(vars: usize, count: usize) -> Vec<Step> {
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move |bound: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % bound as u64) as usize
    };
    (0..count)
        .map(|_| {
            let r = next(vars);
            let w = (r + 1 + next(vars - 1)) % vars;
            if next(10) < 7 {
                let factor = [0.5_f32, 2.0, 1.0, 0.25][next(4)];
                Step::Gpu {
                    r,
                    w,
                    factor,
                    copy_stream: next(2) == 0,
                }
            } else {
                Step::Cpu { r, w }
            }
        })
        .collect()
}

#[test]
fn a_random_mix_of_gpu_and_cpu_ops_matches_running_them_in_order() {
    let Some(_gpus) = devices_or_skip() else {
        return;
    };
    let engine = gpu_engine();
    let vars = 6;
    let initial: Vec<Vec<f32>> = (0..vars)
        .map(|v| (0..MIXED).map(|i| ((i + v) % 5) as f32).collect())
        .collect();
    let slots: Vec<Data<Slot>> = (0..vars)
        .map(|v| engine.data_named(format!("v{v}"), Slot::default()).unwrap())
        .collect();
    for (slot, values) in slots.iter().zip(&initial) {
        let values = values.clone();
        engine
            .op("upload")
            .on(Context::gpu(0))
            .write(slot)
            .push_sync(move |run, slot| upload(&run, slot, &values))
            .unwrap();
    }
    let steps = random_steps(vars, 300);
    let mut model = initial;
    for (i, step) in steps.iter().copied().enumerate() {
        match step {
            Step::Gpu {
                r,
                w,
                factor,
                copy_stream,
            } => {
                let property = if copy_stream {
                    FnProperty::CopyToGpu
                } else {
                    FnProperty::Normal
                };
                engine
                    .op(format!("gpu{i}"))
                    .on(Context::gpu(0))
                    .prop(property)
                    .read(&slots[r])
                    .write(&slots[w])
                    .push_sync(move |run, (y, x)| add_spin_scale(&run, y, x, factor, 20_000))
                    .unwrap();
                let read = model[r].clone();
                for (x, y) in model[w].iter_mut().zip(read) {
                    *x = (*x + y) * factor;
                }
            }
            Step::Cpu { r, w } => {
                engine
                    .op(format!("cpu{i}"))
                    .read(&slots[r])
                    .write(&slots[w])
                    .push_sync(|_, (y, x)| -> Result<(), BoxError> {
                        let read = download(y)?;
                        let mut values = download(x)?;
                        for (x, y) in values.iter_mut().zip(read) {
                            *x = *x * 0.5 + y;
                        }
                        let data = x.data.as_mut().ok_or("x unset")?;
                        // A copy from pageable memory may return before the device has the
                        // values, and the default stream orders nothing of the workers':
                        // the op is done once the copy is.
                        let stream = data.context().default_stream();
                        stream.memcpy_htod(&values, data)?;
                        stream.synchronize()?;
                        Ok(())
                    })
                    .unwrap();
                let read = model[r].clone();
                for (x, y) in model[w].iter_mut().zip(read) {
                    *x = *x * 0.5 + y;
                }
            }
        }
    }
    for (v, slot) in slots.iter().enumerate() {
        let got = download(&engine.read(slot).unwrap()).unwrap();
        assert_eq!(mismatches(&got, &model[v]), 0, "var {v}");
    }
}

#[test]
fn pinned_data_goes_to_the_device_and_back_through_copy_ops() {
    let Some(_gpus) = devices_or_skip() else {
        return;
    };
    let engine = gpu_engine();
    let len = 1 << 16;
    let host_in = engine
        .data_named("in", memory::pinned_zeros::<f32>(0, len).unwrap())
        .unwrap();
    let host_out = engine
        .data_named("out", memory::pinned_zeros::<f32>(0, len).unwrap())
        .unwrap();
    let device = engine.data_named("device", Slot::default()).unwrap();
    engine
        .op("fill")
        .on(Context::cpu_pinned(0))
        .write(&host_in)
        .push_sync(|_, pinned| -> Result<(), BoxError> {
            for (i, value) in pinned.as_mut_slice()?.iter_mut().enumerate() {
                *value = i as f32;
            }
            Ok(())
        })
        .unwrap();
    engine
        .op("allocate")
        .on(Context::gpu(0))
        .write(&device)
        .push_sync(move |run, slot| upload(&run, slot, &vec![0.0_f32; len]))
        .unwrap();
    engine
        .op("to device")
        .on(Context::gpu(0))
        .prop(FnProperty::CopyToGpu)
        .read(&host_in)
        .write(&device)
        .push_sync(|run, (host, slot)| -> Result<(), BoxError> {
            let data = slot.data.as_mut().ok_or("unset")?;
            Ok(cuda(&run)?.copy_to_device(host, data)?)
        })
        .unwrap();
    engine
        .op("double")
        .on(Context::gpu(0))
        .write(&device)
        .push_sync(|run, slot| -> Result<(), BoxError> {
            let run = cuda(&run)?;
            let kernels = kernels_on(&run)?;
            let data = slot.data.as_mut().ok_or("unset")?;
            let n = u32::try_from(data.len())?;
            // SAFETY: `scale_f32` reads and writes the `n` floats of `data`.
            unsafe {
                run.stream()
                    .launch_builder(&kernels.scale)
                    .arg(&mut *data)
                    .arg(&2.0_f32)
                    .arg(&n)
                    .launch(LaunchConfig::for_num_elems(n))?;
            }
            Ok(())
        })
        .unwrap();
    engine
        .op("to host")
        .on(Context::gpu(0))
        .prop(FnProperty::CopyFromGpu)
        .read(&device)
        .write(&host_out)
        .push_sync(|run, (slot, host)| -> Result<(), BoxError> {
            let data = slot.data.as_ref().ok_or("unset")?;
            Ok(cuda(&run)?.copy_to_host(data, host)?)
        })
        .unwrap();
    let out = engine.read(&host_out).unwrap();
    let values = out.as_slice().unwrap();
    assert!(
        values
            .iter()
            .enumerate()
            .all(|(i, &value)| (value - 2.0 * i as f32).abs() <= f32::EPSILON * value.abs())
    );
    // A copy into a buffer of another length fails the op with a typed error, not a panic.
    engine
        .op("mismatch")
        .on(Context::gpu(0))
        .prop(FnProperty::CopyToGpu)
        .read(&host_in)
        .write(&device)
        .push_sync(move |run, (host, _slot)| -> Result<(), BoxError> {
            let run = cuda(&run)?;
            let mut short = run.stream().alloc_zeros::<f32>(len / 2)?;
            Ok(run.copy_to_device(host, &mut short)?)
        })
        .unwrap();
    let error = engine.wait_for_var(device.var()).unwrap_err().to_string();
    assert!(error.contains("a copy of"), "{error}");
}
