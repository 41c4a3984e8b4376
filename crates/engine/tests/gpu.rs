//! The CUDA backend through the engine (`--features cuda`).
//!
//! Without a CUDA driver (CI): CPU work runs, and a GPU op is refused at push with the reason.
//! With a GPU: a chain of kernels over two compute streams, each op spinning for about a
//! millisecond between an add and a scale, so that an op started before its predecessor's
//! work finished would read an unscaled sum, checked element by element against the same arithmetic on the CPU; and a
//! chain that alternates GPU and CPU ops, the buffers being typed data (`Data<Slot>`) that
//! the ops receive as `&`/`&mut`. cudarc's own per-buffer event tracking is off
//! (`CudaBackend::without_event_tracking`): only the engine orders the buffers' uses. Each
//! GPU test skips itself, printing why, where no device or no NVRTC is found.
#![cfg(all(feature = "cuda", not(loom)))]

use std::sync::{Arc, OnceLock};

use depengine::cuda::cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, LaunchConfig, PushKernelArg,
};
use depengine::cuda::cudarc::nvrtc::Ptx;
use depengine::cuda::{CudaBackend, Driver, kernels};
use depengine::{BoxError, Context, Engine, EngineConfig, EngineError, EngineKind, RunContext};

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

/// The kernels, loaded once into device 0's context (by the first op that needs them).
struct Kernels {
    _module: Arc<CudaModule>,
    add: CudaFunction,
    scale: CudaFunction,
    spin: CudaFunction,
}

fn kernels_on(run: &depengine::cuda::CudaRun) -> Result<&'static Kernels, BoxError> {
    static KERNELS: OnceLock<Kernels> = OnceLock::new();
    if let Some(kernels) = KERNELS.get() {
        return Ok(kernels);
    }
    let ptx = kernels::compile()?;
    let module = run.context().load_module(Ptx::from_src(ptx))?;
    let loaded = Kernels {
        add: module.load_function("add_f32")?,
        scale: module.load_function("scale_f32")?,
        spin: module.load_function("spin")?,
        _module: module,
    };
    Ok(KERNELS.get_or_init(|| loaded))
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
    let run = cuda(run)?;
    let kernels = kernels_on(&run)?;
    let stream = run.stream();
    let Slot { data, spare } = x;
    let (input, sum) = (
        data.as_ref().ok_or("x unset")?,
        spare.as_mut().ok_or("x unset")?,
    );
    let y = y.data.as_ref().ok_or("y unset")?;
    let n = N as u32;
    let config = LaunchConfig::for_num_elems(n);
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `spin` takes one `long long` and touches no memory; `add_f32` reads `n` floats
    // of `a` and `b` and writes `n` of `out`, three distinct buffers; `scale_f32` reads and
    // writes `n` floats of `x`. Every buffer holds `N` floats.
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
            .arg(&SPIN_CYCLES)
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
    Engine::new(
        EngineConfig::default()
            .kind(EngineKind::ThreadedPerDevice)
            .gpu_worker_threads(2)
            .device_backend(Arc::new(backend)),
    )
    .unwrap()
}

#[test]
fn a_chain_of_kernels_over_two_streams_matches_the_cpu() {
    let devices = match gpus() {
        Ok(devices) if devices > 0 => devices,
        Ok(_) => return eprintln!("skipped: the CUDA driver reports no device"),
        Err(reason) => return eprintln!("skipped: {reason}"),
    };
    eprintln!("{devices} CUDA device(s); running on device 0");
    let engine = gpu_engine();
    let x = engine.data_named("x", Slot::default()).unwrap();
    let y = engine.data_named("y", Slot::default()).unwrap();
    let host_y: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    {
        let host_y = host_y.clone();
        engine
            .op("upload")
            .on(Context::gpu(0))
            .write(&x)
            .write(&y)
            .push_sync(move |run, (x, y)| -> Result<(), BoxError> {
                upload(&run, x, &vec![1.0_f32; N])?;
                upload(&run, y, &host_y)
            })
            .unwrap();
    }
    let factors = [0.5_f32, 2.0, 0.25, 4.0, 0.5, 1.5, 0.75, 1.0];
    for (step, factor) in factors.into_iter().enumerate() {
        engine
            .op(format!("step{step}"))
            .on(Context::gpu(0))
            .read(&y)
            .write(&x)
            .push_sync(move |run, (y, x)| add_then_scale(&run, y, x, factor))
            .unwrap();
    }
    let expected: Vec<f32> = host_y
        .iter()
        .map(|&y| factors.iter().fold(1.0_f32, |x, &factor| (x + y) * factor))
        .collect();
    let got = download(&engine.read(&x).unwrap()).unwrap();
    assert_eq!(got.len(), N);
    for (i, (got, expected)) in got.iter().zip(&expected).enumerate() {
        assert!(
            (got - expected).abs() <= 1e-3 * expected.abs().max(1.0),
            "element {i}: {got} != {expected}"
        );
    }
}

#[test]
fn gpu_and_cpu_ops_alternate_on_one_buffer() {
    match gpus() {
        Ok(devices) if devices > 0 => {}
        Ok(_) => return eprintln!("skipped: the CUDA driver reports no device"),
        Err(reason) => return eprintln!("skipped: {reason}"),
    }
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
