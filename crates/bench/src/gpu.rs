//! `gpu` group: GPU ops through the engine (`depengine-cuda`, the CUDA backend) against the
//! same launches made directly with cudarc (`raw-cuda`), on device 0. Workloads (see
//! `README.md` beside this crate):
//!
//! - `kernel_chain`: `--ops` launches of a tiny kernel (a scale of 256 floats), each depending
//!   on the one before, on one stream: per op, the engine's overhead over a launch (`us/op`).
//!   Through the engine each is an op writing one buffer; it is released when the one before
//!   it launched, and its stream orders it.
//! - `kernel_chain_streams`: the same chain with its links alternating between a compute and a
//!   copy stream, so that every link waits for an event of the other stream (`us/op`). Raw:
//!   an event recorded after each launch, which the other stream waits for.
//! - `kernel_chain_cpu`, `kernel_chain_pusher_cpu`: the CPU time `kernel_chain` costs per op,
//!   of the process's other threads (the engine's workers and completion threads) and of the
//!   pushing thread (`us/op`, each thread's own clock).
//! - `graph_chain`: the same chain's kernels as a plan of `GRAPH_LINKS` links captured once with
//!   its GPU work recorded as a CUDA graph (`Capture::record_gpu_work`), replayed until `--ops`
//!   kernels ran: per kernel (`us/op`). Raw: the launches of `kernel_chain`.
//! - `empty_chain` (engine only): the chain of ops launching nothing: the engine's cost alone.
//! - `kernel5_chain`, `kernel5_busy`: a chain of kernels of about 5 µs each (a spin, calibrated
//!   on the device), `us/op`, and the share of the time the device is busy with them (`ratio`:
//!   the kernels' own time, measured back to back on one stream, over the chain's).
//! - `latency_cpu`: from the push of a GPU op (one scale) to the start of a CPU op reading its
//!   data, median of 101 (`us`); raw: the launch, then a stream synchronize.
//! - `--gpu-workers N`: the engine's compute workers per GPU (default 1).
//! - `overlap`: 8 copies of 64 MiB from pinned host memory to the device, each followed by a
//!   kernel of about the copy's length on the batch, against the copies and the kernels run
//!   apart: `(copies + kernels - both) / min(copies, kernels)` (`ratio`, 1 = the shorter part
//!   entirely hidden). Through the engine the copies are `CopyToGpu` ops and the kernels
//!   compute ops; raw, two streams and an event per batch.
//!
//! Without a CUDA driver, a device or NVRTC, `depengine-bench gpu --probe` prints `SKIP` with
//! the reason, and `xtask` skips the group.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use depengine::cuda::cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use depengine::cuda::{CudaBackend, Driver, kernels};
use depengine::{BoxError, Context, Data, Engine, EngineConfig, EngineKind, FnProperty};

use crate::args::{Args, report};
use crate::other_threads::{OtherThreads, own_cpu_time};

/// Floats the chain's kernel scales.
const CHAIN_FLOATS: usize = 256;
/// Floats per batch of `overlap`: 64 MiB.
const BATCH: usize = 16 << 20;
/// Batches of `overlap`.
const BATCHES: usize = 8;
/// The length of a kernel of `kernel5_chain`.
const SHORT_KERNEL: Duration = Duration::from_micros(5);
/// Links of the plan `graph_chain` replays.
const GRAPH_LINKS: usize = 100;
/// Samples of `latency_cpu`.
const LATENCY_SAMPLES: usize = 101;

/// What one link of a chain launches on its stream, on the chain's buffer.
type Launch = Arc<dyn Fn(&CudaStream, &mut CudaSlice<f32>) -> Result<(), BoxError> + Send + Sync>;

/// Launches `x *= 1` (`function`: `scale_f32`) on `stream`.
fn launch_scale(
    function: &CudaFunction,
    stream: &CudaStream,
    x: &mut CudaSlice<f32>,
) -> Result<(), BoxError> {
    let n = u32::try_from(x.len())?;
    // SAFETY: `scale_f32` reads and writes the `n` floats of `x`.
    unsafe {
        stream
            .launch_builder(function)
            .arg(x)
            .arg(&1.0_f32)
            .arg(&n)
            .launch(LaunchConfig::for_num_elems(n))?;
    }
    Ok(())
}

/// Launches a kernel that spins `cycles` clock cycles (`function`: `spin`) on `stream`.
fn launch_spin(function: &CudaFunction, stream: &CudaStream, cycles: i64) -> Result<(), BoxError> {
    // SAFETY: `spin` takes one `long long` and touches no memory.
    unsafe {
        stream
            .launch_builder(function)
            .arg(&cycles)
            .launch(LaunchConfig::for_num_elems(1))?;
    }
    Ok(())
}

/// A chain's time per op, and the CPU time it cost per op, each in microseconds.
struct Chain {
    wall: f64,
    /// Of the process's other threads (the engine's).
    others_cpu: f64,
    /// Of the thread that pushed (or launched).
    pusher_cpu: f64,
}

impl Chain {
    /// Times `run`, which runs `ops` links.
    fn measure(ops: usize, run: impl FnOnce() -> Result<(), BoxError>) -> Result<Self, BoxError> {
        let others = OtherThreads::now();
        let (others_before, own_before) = (others.cpu_times(), own_cpu_time());
        let start = Instant::now();
        run()?;
        let elapsed = start.elapsed();
        let own = own_cpu_time().saturating_sub(own_before);
        let used = OtherThreads::used_since(&others_before, &others.cpu_times());
        let per_op = |time: Duration| time.as_secs_f64() * 1e6 / ops.max(1) as f64;
        Ok(Chain {
            wall: per_op(elapsed),
            others_cpu: per_op(used),
            pusher_cpu: per_op(own),
        })
    }
}

/// `depengine-bench gpu --probe`: prints `SKIP <reason>` where the group cannot run.
pub(crate) fn probe() {
    if let Err(reason) = usable() {
        println!("SKIP {reason}");
    }
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    if let Err(reason) = usable() {
        return Err(format!("cannot run here: {reason}"));
    }
    let device = Device::open().map_err(|error| error.to_string())?;
    let ops = usize::try_from(args.ops).map_err(|error| error.to_string())?;
    match args.system.as_str() {
        "depengine-cuda" => engine_workloads(args, &device, ops).map_err(|e| e.to_string()),
        "raw-cuda" => raw_workloads(args, &device, ops).map_err(|e| e.to_string()),
        other => Err(format!(
            "unknown gpu system `{other}` (expected depengine-cuda or raw-cuda)"
        )),
    }
}

/// Why the group cannot run here, if it cannot.
fn usable() -> Result<(), String> {
    let driver = Driver::probe().map_err(|error| error.to_string())?;
    if driver.device_count() == 0 {
        return Err("the CUDA driver reports no device".to_owned());
    }
    if !kernels::nvrtc_present() {
        return Err("no NVRTC to compile the kernels".to_owned());
    }
    Ok(())
}

/// Device 0's context and the kernels loaded into it.
struct Device {
    context: Arc<CudaContext>,
    scale: CudaFunction,
    spin: CudaFunction,
}

impl Device {
    fn open() -> Result<Self, BoxError> {
        let context = CudaContext::new(0)?;
        // SAFETY: every use of the buffers made here is ordered by the harness itself: the
        // raw workloads join their streams where a buffer passes from one to the other and
        // synchronize both at the end of each timing; the engine's ops are ordered by the
        // engine (its backend turns tracking off the same way). Tracking would add two event
        // waits and a record to every raw launch, which the engine's launches do not pay.
        unsafe { context.disable_event_tracking() };
        let module = kernels::load(&context)?;
        Ok(Device {
            scale: module.load_function("scale_f32")?,
            spin: module.load_function("spin")?,
            context,
        })
    }

    /// Launches `x *= 1` on `stream`.
    fn scale(&self, stream: &CudaStream, x: &mut CudaSlice<f32>) -> Result<(), BoxError> {
        launch_scale(&self.scale, stream, x)
    }

    /// Launches a kernel that spins `cycles` clock cycles, then `x *= 1`, on `stream`.
    fn compute(
        &self,
        stream: &CudaStream,
        x: &mut CudaSlice<f32>,
        cycles: i64,
    ) -> Result<(), BoxError> {
        launch_spin(&self.spin, stream, cycles)?;
        self.scale(stream, x)
    }

    /// The spin cycles of a kernel of about `SHORT_KERNEL`, and how long one lasts run back
    /// to back on one stream (the device's time per kernel, the launches hidden behind it).
    fn short_kernel(&self) -> Result<(i64, Duration), BoxError> {
        let stream = self.context.new_stream()?;
        let time = |cycles: i64, count: u32| -> Result<Duration, BoxError> {
            let start = Instant::now();
            for _ in 0..count {
                launch_spin(&self.spin, &stream, cycles)?;
            }
            stream.synchronize()?;
            Ok(start.elapsed() / count)
        };
        time(1000, 10)?;
        let probe = time(PROBE_CYCLES, 10)?;
        let cycles = cycles_for(SHORT_KERNEL, PROBE_CYCLES, probe).max(1);
        Ok((cycles, time(cycles, 1000)?))
    }

    /// The chain's launches: a scale, and a 5 µs spin of `cycles`.
    fn launches(&self, cycles: i64) -> (Launch, Launch) {
        let scale = self.scale.clone();
        let spin = self.spin.clone();
        (
            Arc::new(move |stream, x| launch_scale(&scale, stream, x)),
            Arc::new(move |stream, _| launch_spin(&spin, stream, cycles)),
        )
    }

    /// Pinned host memory of `BATCH` floats.
    fn pinned(&self) -> Result<PinnedHostSlice<f32>, BoxError> {
        // SAFETY: filled before any copy reads it.
        let mut pinned = unsafe { self.context.alloc_pinned::<f32>(BATCH)? };
        pinned.as_mut_slice()?.fill(1.0);
        Ok(pinned)
    }
}

/// `(copies + kernels - both) / min(copies, kernels)`.
fn overlap_ratio(copies: Duration, kernels: Duration, both: Duration) -> f64 {
    (copies + kernels).saturating_sub(both).as_secs_f64() / copies.min(kernels).as_secs_f64()
}

/// The cycles that make a kernel last about `target`, from one that spun `probe_cycles` for
/// `probe`.
fn cycles_for(target: Duration, probe_cycles: i64, probe: Duration) -> i64 {
    (probe_cycles as f64 * target.as_secs_f64() / probe.as_secs_f64()) as i64
}

const PROBE_CYCLES: i64 = 2_000_000;

// --- Through the engine. -------------------------------------------------------------------

fn engine_workloads(args: &Args, device: &Device, ops: usize) -> Result<(), BoxError> {
    // SAFETY: the buffers below are used only inside ops that name their data, on those ops'
    // streams (the contract of `without_event_tracking`).
    let backend = unsafe { CudaBackend::without_event_tracking() };
    let engine = Engine::new(
        EngineConfig::default()
            .kind(EngineKind::ThreadedPerDevice)
            .gpu_worker_threads(args.gpu_workers)
            .gpu_copy_threads(1)
            .device_backend(Arc::new(backend)),
    )?;
    let (cycles, kernel) = device.short_kernel()?;
    let (scale, spin) = device.launches(cycles);
    if args.wants("kernel_chain") {
        let chain = engine_chain(&engine, ops, false, &scale)?;
        report("kernel_chain", chain.wall, "us/op");
        report("kernel_chain_cpu", chain.others_cpu, "us/op");
        report("kernel_chain_pusher_cpu", chain.pusher_cpu, "us/op");
    }
    if args.wants("kernel_chain_streams") {
        let chain = engine_chain(&engine, ops, true, &scale)?;
        report("kernel_chain_streams", chain.wall, "us/op");
    }
    if args.wants("graph_chain") {
        let chain = engine_graph_chain(&engine, ops, &scale)?;
        report("graph_chain", chain.wall, "us/op");
    }
    if args.wants("empty_chain") {
        let nothing: Launch = Arc::new(|_, _| Ok(()));
        let chain = engine_chain(&engine, ops, false, &nothing)?;
        report("empty_chain", chain.wall, "us/op");
    }
    if args.wants("kernel5_chain") {
        let chain = engine_chain(&engine, ops, false, &spin)?;
        report("kernel5_chain", chain.wall, "us/op");
        report("kernel5_busy", busy(kernel, &chain), "ratio");
    }
    if args.wants("latency_cpu") {
        report("latency_cpu", engine_latency(&engine, &scale)?, "us");
    }
    if args.wants("overlap") {
        report("overlap", engine_overlap(&engine, device)?, "ratio");
    }
    Ok(())
}

/// The share of a chain's time the device spends in its kernels, each lasting `kernel`.
fn busy(kernel: Duration, chain: &Chain) -> f64 {
    kernel.as_secs_f64() * 1e6 / chain.wall
}

/// The chain's buffer, allocated by a GPU op.
fn chain_buffer(engine: &Engine) -> Result<Data<Option<CudaSlice<f32>>>, BoxError> {
    let x = engine.data_named("x", None::<CudaSlice<f32>>)?;
    engine
        .op("allocate")
        .on(Context::gpu(0))
        .write(&x)
        .push_sync(|run, x| -> Result<(), BoxError> {
            let cuda = run.cuda().ok_or("not on a GPU worker")?;
            *x = Some(cuda.stream().alloc_zeros::<f32>(CHAIN_FLOATS)?);
            Ok(())
        })?;
    Ok(x)
}

/// Pushes one link of a chain on `x`: a GPU op that launches `launch`, on the copy stream if
/// `copy`.
fn push_link(
    engine: &Engine,
    x: &Data<Option<CudaSlice<f32>>>,
    launch: &Launch,
    copy: bool,
) -> Result<(), BoxError> {
    let property = if copy {
        FnProperty::CopyToGpu
    } else {
        FnProperty::Normal
    };
    let launch = Arc::clone(launch);
    engine
        .op("link")
        .on(Context::gpu(0))
        .prop(property)
        .write(x)
        .push_sync(move |run, x| -> Result<(), BoxError> {
            let cuda = run.cuda().ok_or("not on a GPU worker")?;
            launch(cuda.stream(), x.as_mut().ok_or("x unset")?)
        })?;
    Ok(())
}

/// `ops` chained links on one buffer through the engine (alternating streams if `streams`),
/// from the first push to the last completion, after a warm-up chain.
fn engine_chain(
    engine: &Engine,
    ops: usize,
    streams: bool,
    launch: &Launch,
) -> Result<Chain, BoxError> {
    let x = chain_buffer(engine)?;
    let chain = |count: usize| -> Result<(), BoxError> {
        for i in 0..count {
            push_link(engine, &x, launch, streams && i % 2 == 1)?;
        }
        engine.wait_for_all()?;
        Ok(())
    };
    chain(ops / 10 + 1)?;
    let measured = Chain::measure(ops, || chain(ops))?;
    // The buffer goes once the ops on it completed.
    drop(x);
    Ok(measured)
}

/// `ops` chained kernels (rounded up to whole replays) as replays of a plan of `GRAPH_LINKS`
/// links recorded as a CUDA graph, from the first replay to the last completion, after a
/// warm-up (whose first replay records).
fn engine_graph_chain(engine: &Engine, ops: usize, launch: &Launch) -> Result<Chain, BoxError> {
    let x = chain_buffer(engine)?;
    engine.wait_for_all()?;
    let plan = engine.capture("graph chain", |plan| {
        // SAFETY: `x`'s buffer is allocated above and never replaced; it is dropped after the
        // plan, below.
        unsafe { plan.record_gpu_work() };
        for _ in 0..GRAPH_LINKS {
            let launch = Arc::clone(launch);
            plan.op("link").on(Context::gpu(0)).write(&x).push_sync(
                move |run, x| -> Result<(), BoxError> {
                    let cuda = run.cuda().ok_or("not on a GPU worker")?;
                    launch(cuda.stream(), x.as_mut().ok_or("x unset")?)
                },
            )?;
        }
        Ok(())
    })?;
    let replays = ops.div_ceil(GRAPH_LINKS).max(1);
    let chain = |count: usize| -> Result<(), BoxError> {
        for _ in 0..count {
            engine.replay(&plan)?;
        }
        engine.wait_for_all()?;
        Ok(())
    };
    chain(replays / 10 + 1)?;
    let measured = Chain::measure(replays * GRAPH_LINKS, || chain(replays))?;
    drop(plan);
    drop(x);
    Ok(measured)
}

/// From the push of a GPU link to the start of a CPU op reading its buffer: the median of
/// `LATENCY_SAMPLES`, in microseconds.
fn engine_latency(engine: &Engine, launch: &Launch) -> Result<f64, BoxError> {
    let x = chain_buffer(engine)?;
    engine.wait_for_all()?;
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for _ in 0..LATENCY_SAMPLES {
        let started = Arc::new(OnceLock::new());
        let start = Instant::now();
        push_link(engine, &x, launch, false)?;
        let seen = Arc::clone(&started);
        engine.op("cpu-reader").read(&x).push_sync(move |_, _x| {
            let _ = seen.set(Instant::now());
        })?;
        engine.wait_for_all()?;
        let at = *started.get().ok_or("the CPU op did not run")?;
        samples.push(at.duration_since(start));
    }
    drop(x);
    Ok(median_us(&mut samples))
}

/// The median of `samples`, in microseconds.
fn median_us(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |median| median.as_secs_f64() * 1e6)
}

/// The copy/compute overlap through the engine: copies are `CopyToGpu` ops, kernels compute
/// ops, each batch typed data.
fn engine_overlap(engine: &Engine, device: &Device) -> Result<f64, BoxError> {
    let source = engine.data_named("pinned", Some(device.pinned()?))?;
    let mut batches: Vec<Data<Option<CudaSlice<f32>>>> = Vec::with_capacity(BATCHES);
    for i in 0..BATCHES {
        batches.push(engine.data_named(format!("batch{i}"), None)?);
    }
    for batch in &batches {
        engine
            .op("allocate")
            .on(Context::gpu(0))
            .write(batch)
            .push_sync(|run, batch| -> Result<(), BoxError> {
                let cuda = run.cuda().ok_or("not on a GPU worker")?;
                *batch = Some(cuda.stream().alloc_zeros::<f32>(BATCH)?);
                Ok(())
            })?;
    }
    let time = |copy: bool, cycles: Option<i64>| -> Result<Duration, BoxError> {
        let start = Instant::now();
        for batch in &batches {
            if copy {
                engine
                    .op("copy")
                    .on(Context::gpu(0))
                    .prop(FnProperty::CopyToGpu)
                    .read(&source)
                    .write(batch)
                    .push_sync(|run, (source, batch)| -> Result<(), BoxError> {
                        let cuda = run.cuda().ok_or("not on a GPU worker")?;
                        let source = source.as_ref().ok_or("no source")?;
                        let batch = batch.as_mut().ok_or("batch unset")?;
                        cuda.stream().memcpy_htod(source, batch)?;
                        Ok(())
                    })?;
            }
            if let Some(cycles) = cycles {
                let spin = device.spin.clone();
                let scale = device.scale.clone();
                engine
                    .op("compute")
                    .on(Context::gpu(0))
                    .write(batch)
                    .push_sync(move |run, batch| -> Result<(), BoxError> {
                        let cuda = run.cuda().ok_or("not on a GPU worker")?;
                        let batch = batch.as_mut().ok_or("batch unset")?;
                        let n = u32::try_from(batch.len())?;
                        // SAFETY: `spin` touches no memory; `scale_f32` reads and writes the
                        // `n` floats of `batch`.
                        unsafe {
                            cuda.stream()
                                .launch_builder(&spin)
                                .arg(&cycles)
                                .launch(LaunchConfig::for_num_elems(1))?;
                            cuda.stream()
                                .launch_builder(&scale)
                                .arg(batch)
                                .arg(&1.0_f32)
                                .arg(&n)
                                .launch(LaunchConfig::for_num_elems(n))?;
                        }
                        Ok(())
                    })?;
            }
        }
        engine.wait_for_all()?;
        Ok(start.elapsed())
    };
    time(true, Some(1000))?;
    let copies = time(true, None)?;
    let probe = time(false, Some(PROBE_CYCLES))?;
    let cycles = cycles_for(copies, PROBE_CYCLES, probe);
    let kernels = time(false, Some(cycles))?;
    let both = time(true, Some(cycles))?;
    Ok(overlap_ratio(copies, kernels, both))
}

// --- Raw cudarc. ---------------------------------------------------------------------------

fn raw_workloads(args: &Args, device: &Device, ops: usize) -> Result<(), BoxError> {
    let (cycles, kernel) = device.short_kernel()?;
    let (scale, spin) = device.launches(cycles);
    if args.wants("kernel_chain") {
        let chain = raw_chain(device, ops, false, &scale)?;
        report("kernel_chain", chain.wall, "us/op");
        report("kernel_chain_cpu", chain.others_cpu, "us/op");
        report("kernel_chain_pusher_cpu", chain.pusher_cpu, "us/op");
    }
    if args.wants("graph_chain") {
        // The same kernels launched one by one: what the graph saves.
        let chain = raw_chain(device, ops, false, &scale)?;
        report("graph_chain", chain.wall, "us/op");
    }
    if args.wants("kernel_chain_streams") {
        let chain = raw_chain(device, ops, true, &scale)?;
        report("kernel_chain_streams", chain.wall, "us/op");
    }
    if args.wants("kernel5_chain") {
        let chain = raw_chain(device, ops, false, &spin)?;
        report("kernel5_chain", chain.wall, "us/op");
        report("kernel5_busy", busy(kernel, &chain), "ratio");
    }
    if args.wants("latency_cpu") {
        report("latency_cpu", raw_latency(device, &scale)?, "us");
    }
    if args.wants("overlap") {
        report("overlap", raw_overlap(device)?, "ratio");
    }
    Ok(())
}

/// `ops` links launched on one stream (alternating between two, each waiting for an event of
/// the other, if `streams`), then a synchronize.
fn raw_chain(
    device: &Device,
    ops: usize,
    streams: bool,
    launch: &Launch,
) -> Result<Chain, BoxError> {
    let first = device.context.new_stream()?;
    let second = device.context.new_stream()?;
    let mut x = first.alloc_zeros::<f32>(CHAIN_FLOATS)?;
    first.synchronize()?;
    let mut chain = |count: usize| -> Result<(), BoxError> {
        for i in 0..count {
            let (stream, other) = if streams && i % 2 == 1 {
                (&second, &first)
            } else {
                (&first, &second)
            };
            if streams && i > 0 {
                stream.join(other)?;
            }
            launch(stream, &mut x)?;
        }
        first.synchronize()?;
        second.synchronize()?;
        Ok(())
    };
    chain(ops / 10 + 1)?;
    Chain::measure(ops, || chain(ops))
}

/// From a launch to the host's knowing it is done (a stream synchronize): the median of
/// `LATENCY_SAMPLES`, in microseconds.
fn raw_latency(device: &Device, launch: &Launch) -> Result<f64, BoxError> {
    let stream = device.context.new_stream()?;
    let mut x = stream.alloc_zeros::<f32>(CHAIN_FLOATS)?;
    stream.synchronize()?;
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for _ in 0..LATENCY_SAMPLES {
        let start = Instant::now();
        launch(&stream, &mut x)?;
        stream.synchronize()?;
        samples.push(start.elapsed());
    }
    Ok(median_us(&mut samples))
}

/// The copy/compute overlap on two streams: each batch's kernel waits for its copy's event.
fn raw_overlap(device: &Device) -> Result<f64, BoxError> {
    let copy_stream = device.context.new_stream()?;
    let compute_stream = device.context.new_stream()?;
    let source = device.pinned()?;
    let mut batches: Vec<CudaSlice<f32>> = (0..BATCHES)
        .map(|_| compute_stream.alloc_zeros::<f32>(BATCH))
        .collect::<Result<_, _>>()?;
    compute_stream.synchronize()?;
    let mut time = |copy: bool, cycles: Option<i64>| -> Result<Duration, BoxError> {
        let start = Instant::now();
        for batch in &mut batches {
            // Each batch is copied once per timing, and the timings end with both streams
            // synchronized: a copy waits for no kernel.
            if copy {
                copy_stream.memcpy_htod(&source, batch)?;
            }
            if let Some(cycles) = cycles {
                if copy {
                    compute_stream.join(&copy_stream)?;
                }
                device.compute(&compute_stream, batch, cycles)?;
            }
        }
        copy_stream.synchronize()?;
        compute_stream.synchronize()?;
        Ok(start.elapsed())
    };
    time(true, Some(1000))?;
    let copies = time(true, None)?;
    let probe = time(false, Some(PROBE_CYCLES))?;
    let cycles = cycles_for(copies, PROBE_CYCLES, probe);
    let kernels = time(false, Some(cycles))?;
    let both = time(true, Some(cycles))?;
    Ok(overlap_ratio(copies, kernels, both))
}
