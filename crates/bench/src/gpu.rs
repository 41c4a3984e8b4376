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
//! - `overlap`: 8 copies of 64 MiB from pinned host memory to the device, each followed by a
//!   kernel of about the copy's length on the batch, against the copies and the kernels run
//!   apart: `(copies + kernels - both) / min(copies, kernels)` (`ratio`, 1 = the shorter part
//!   entirely hidden). Through the engine the copies are `CopyToGpu` ops and the kernels
//!   compute ops; raw, two streams and an event per batch.
//!
//! Without a CUDA driver, a device or NVRTC, `depengine-bench gpu --probe` prints `SKIP` with
//! the reason, and `xtask` skips the group.

use std::sync::Arc;
use std::time::{Duration, Instant};

use depengine::cuda::cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use depengine::cuda::{CudaBackend, Driver, kernels};
use depengine::{BoxError, Context, Data, Engine, EngineConfig, EngineKind, FnProperty};

use crate::args::{Args, report};

/// Floats the chain's kernel scales.
const CHAIN_FLOATS: usize = 256;
/// Floats per batch of `overlap`: 64 MiB.
const BATCH: usize = 16 << 20;
/// Batches of `overlap`.
const BATCHES: usize = 8;

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
        let n = u32::try_from(x.len())?;
        // SAFETY: `scale_f32` reads and writes the `n` floats of `x`.
        unsafe {
            stream
                .launch_builder(&self.scale)
                .arg(x)
                .arg(&1.0_f32)
                .arg(&n)
                .launch(LaunchConfig::for_num_elems(n))?;
        }
        Ok(())
    }

    /// Launches a kernel that spins `cycles` clock cycles, then `x *= 1`, on `stream`.
    fn compute(
        &self,
        stream: &CudaStream,
        x: &mut CudaSlice<f32>,
        cycles: i64,
    ) -> Result<(), BoxError> {
        // SAFETY: `spin` takes one `long long` and touches no memory.
        unsafe {
            stream
                .launch_builder(&self.spin)
                .arg(&cycles)
                .launch(LaunchConfig::for_num_elems(1))?;
        }
        self.scale(stream, x)
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
            .gpu_worker_threads(1)
            .gpu_copy_threads(1)
            .device_backend(Arc::new(backend)),
    )?;
    if args.wants("kernel_chain") {
        report(
            "kernel_chain",
            engine_chain(&engine, device, ops, false)?,
            "us/op",
        );
    }
    if args.wants("kernel_chain_streams") {
        let per_op = engine_chain(&engine, device, ops, true)?;
        report("kernel_chain_streams", per_op, "us/op");
    }
    if args.wants("overlap") {
        report("overlap", engine_overlap(&engine, device)?, "ratio");
    }
    Ok(())
}

/// `ops` chained scales of one buffer through the engine (alternating streams if `streams`):
/// microseconds per op, from the first push to the last completion, after a warm-up chain.
fn engine_chain(
    engine: &Engine,
    device: &Device,
    ops: usize,
    streams: bool,
) -> Result<f64, BoxError> {
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
    let chain = |count: usize| -> Result<Duration, BoxError> {
        let start = Instant::now();
        for i in 0..count {
            let property = if streams && i % 2 == 1 {
                FnProperty::CopyToGpu
            } else {
                FnProperty::Normal
            };
            let scale = device.scale.clone();
            engine
                .op("scale")
                .on(Context::gpu(0))
                .prop(property)
                .write(&x)
                .push_sync(move |run, x| -> Result<(), BoxError> {
                    let cuda = run.cuda().ok_or("not on a GPU worker")?;
                    let x = x.as_mut().ok_or("x unset")?;
                    let n = u32::try_from(x.len())?;
                    // SAFETY: `scale_f32` reads and writes the `n` floats of `x`.
                    unsafe {
                        cuda.stream()
                            .launch_builder(&scale)
                            .arg(x)
                            .arg(&1.0_f32)
                            .arg(&n)
                            .launch(LaunchConfig::for_num_elems(n))?;
                    }
                    Ok(())
                })?;
        }
        engine.wait_for_all()?;
        Ok(start.elapsed())
    };
    chain(ops / 10 + 1)?;
    let elapsed = chain(ops)?;
    // The buffer goes once the ops on it completed.
    drop(x);
    Ok(elapsed.as_secs_f64() * 1e6 / ops.max(1) as f64)
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
    if args.wants("kernel_chain") {
        report("kernel_chain", raw_chain(device, ops, false)?, "us/op");
    }
    if args.wants("kernel_chain_streams") {
        report(
            "kernel_chain_streams",
            raw_chain(device, ops, true)?,
            "us/op",
        );
    }
    if args.wants("overlap") {
        report("overlap", raw_overlap(device)?, "ratio");
    }
    Ok(())
}

/// `ops` scales of one buffer launched on one stream (alternating between two, each waiting
/// for an event of the other, if `streams`), then a synchronize: microseconds per op.
fn raw_chain(device: &Device, ops: usize, streams: bool) -> Result<f64, BoxError> {
    let first = device.context.new_stream()?;
    let second = device.context.new_stream()?;
    let mut x = first.alloc_zeros::<f32>(CHAIN_FLOATS)?;
    first.synchronize()?;
    let mut chain = |count: usize| -> Result<Duration, BoxError> {
        let start = Instant::now();
        for i in 0..count {
            let (stream, other) = if streams && i % 2 == 1 {
                (&second, &first)
            } else {
                (&first, &second)
            };
            if streams && i > 0 {
                stream.join(other)?;
            }
            device.scale(stream, &mut x)?;
        }
        first.synchronize()?;
        second.synchronize()?;
        Ok(start.elapsed())
    };
    chain(ops / 10 + 1)?;
    let elapsed = chain(ops)?;
    Ok(elapsed.as_secs_f64() * 1e6 / ops.max(1) as f64)
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
