//! `engine` group: the depengine facade against the naive engine, a serial loop and rayon.
//!
//! Workloads, each over `--ops` N ops (`ns/op` = wall time / N unless noted):
//!
//! - `push_depsK` (K = 0, 1, 2, 4): time to push N empty ops reading K vars each (the ops run
//!   meanwhile; only the push loop is timed).
//! - `drain`: N empty ops parked behind one var, then released at once on a one-worker engine
//!   without a pending bound: the time that worker takes to run them all.
//! - `backlog`: N empty ops with no vars, pushed from outside while the only worker of a
//!   one-worker engine is held by an op, then released: the time that worker takes to run them
//!   all (the worker's own path for ops queued from outside, with no pusher beside it);
//!   `push_queued`: the time per push of those ops (the pusher's own path for an op that is
//!   ready at once, with no worker beside it).
//! - `push_parked`: on the same engine, N/3 empty ops pushed behind an op that holds their one
//!   var (each writes it, so each waits), three times, waiting for each burst: the time per
//!   push of the last burst (the pusher's own path for an op that waits, with no worker beside
//!   it, into the storage that such bursts keep once they outgrow the 992 op slots a trim
//!   always keeps: N of 3000 or more); `chain_backlog`: the time per op that the worker takes
//!   to run that last burst once the holding op completes (the worker's own path for a chain:
//!   each completion releases the next op and keeps it for itself, with no pusher beside it).
//!   `backlog`, `push_queued`, `push_parked` and `chain_backlog` are not run on the naive
//!   engine, which runs the holding op on the pusher.
//! - `independent`: N empty ops with no vars, pushed then waited for.
//! - `chain`: N empty ops writing the same var.
//! - `random_empty`: each op reads 2 and writes 1 of 1024 vars (seeded), empty.
//! - `chain_typed`, `random_empty_typed`: the same ops on typed data (`Data<u64>`) instead of
//!   vars, each function reaching its values through `&u64` / `&mut u64` (a chain op adds one
//!   to its value; a random op writes the sum of the two it reads): the cost of typed data
//!   against the untyped ops above.
//! - `chain_shared`, `random_empty_shared`: the same again, the way data is reached without
//!   typed data: each value in an `Arc<Mutex<u64>>` beside a var, the op's closure holding
//!   clones of its values' `Arc`s and locking each.
//! - `chain_priority_overhead`: N/100 `CpuPrioritized` ops writing the same var, each spinning
//!   100 µs (long enough for the idle workers to stop spinning and sleep): (wall time − the
//!   ops' spinning) / (N/100), in µs, the cost of handing a priority op to the next;
//! - `random_1us`: the same graph, each op spinning 1 µs; `random_1us_overhead` is
//!   (measured − ideal) / N, ideal = max(total work / workers, critical path), an op's work
//!   being what a spin costs here, measured before the run (a little over 1 µs: the spin stops
//!   at the first clock reading past it): with as many threads spinning at once as the engine
//!   has workers for the total work, alone along the critical path.
//! - `replay_chain`, `replay_random_empty`, `replay_random_1us`: the first `PLAN_OPS` ops of
//!   `chain` and of the random graph captured once as a plan (`Engine::capture`), replayed
//!   back to back until N ops ran (`Engine::replay`): the cost of a static graph beside its
//!   dynamic twin; `replay_random_1us_overhead` against the plan's own bound, as above.
//! - `device_chain`, `device_random_empty`: `chain` and `random_empty` as GPU ops on a stand-in
//!   device (`standin_device.rs`) whose one worker reports each op launched, then complete, as
//!   soon as its function returns: the engine's own cost of a GPU op (its fences registered,
//!   the ops behind it released at its launch, its completion) beside a CPU op's, no driver in
//!   it. Not on the naive engine.
//! - `latency`: push-to-start of one op on an idle engine, one op every 2 ms (past the
//!   workers' shortest spin window, so the first ops find them asleep; from the third on, a
//!   worker that learned the period searches through it, see `crates/pool/src/spin_window.rs`),
//!   median of 101 samples (`us`).
//! - `parked_bytes`: resident memory (RSS) each parked op adds: N empty ops, each reading a
//!   gate var and writing one of 1024 vars (2 deps), pushed behind a closed gate on an engine
//!   of their own, without a pending bound (the gate is opened only after the last push); RSS
//!   growth over the pushes / N (`B/op`). Linux only (`/proc/self/statm`).
//! - `burst_peak`, `burst_retained`: N `random_1us` ops pushed as fast as possible (generated
//!   as they are pushed: the harness holds nothing per op; 1 µs each, so that the pusher runs
//!   ahead of the workers) on an engine of their own with the default configuration, after a
//!   warm-up burst of N/100 ops; `burst_peak` is the RSS growth at the burst's peak (sampled
//!   every 4096 pushes, `MB`), `burst_retained` the RSS once the burst completed
//!   (`wait_for_all` returned, and the RSS stopped falling: the engine gives the memory back
//!   on the worker that completed the last op), relative to the RSS before it (`%`: 0 means
//!   all of it was given back). Linux only.
//!
//! Systems: `depengine-perdevice` (`ThreadedPerDevice`), `depengine-bulk` (`ThreadedPerDevice`
//! with bulk execution: segments of `--bulk N` ops, 64 by default; `chain` bulks, `random_empty`
//! hardly does, see `docs/engine.md`), `depengine-pooled` (`ThreadedPooled`), `naive` (Naive),
//! `serial` (a plain loop; no engine), `rayon` (independent only). The engines take the
//! `DEPENGINE_*` environment variables that are set (`DEPENGINE_MAX_PENDING`, say), except for
//! the kind and the worker count, which the flags set, and, for `depengine-bulk`, the bulk size.

use std::sync::{Barrier, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use std::sync::Arc;

use depengine::{
    Completion, Context, Data, Engine, EngineConfig, EngineKind, FnProperty, Plan, Var,
};

use crate::args::{Args, ns_per, report};
use crate::standin_device::StandinBackend;

const RANDOM_VARS: usize = 1024;
/// The workloads on the random graph.
const RANDOM_GRAPH_WORKLOADS: [&str; 9] = [
    "random_empty",
    "random_1us",
    "random_1us_overhead",
    "device_random_empty",
    "random_empty_typed",
    "random_empty_shared",
    "replay_random_empty",
    "replay_random_1us",
    "replay_random_1us_overhead",
];
/// Where the ops of the CPU workloads run.
const CPU: Context = Context::cpu(0);
const SPIN: Duration = Duration::from_micros(1);
const LATENCY_SAMPLES: usize = 101;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    // Before any engine's workers are there to share the cores with.
    if [
        "random_1us",
        "random_1us_overhead",
        "replay_random_1us",
        "replay_random_1us_overhead",
    ]
    .iter()
    .any(|workload| args.wants(workload))
    {
        eprintln!(
            "a spin_1us costs {:.1} ns here alone, {:.1} ns with {} threads spinning",
            spin_cost_ns(1),
            spin_cost_ns(args.threads),
            args.threads
        );
    }
    run_system(args)
}

/// Runs the workloads of `args.system`.
fn run_system(args: &Args) -> Result<(), String> {
    match args.system.as_str() {
        "serial" => return serial(args),
        "rayon" => return rayon_independent(args),
        _ => {}
    }
    let setup = Setup::of(args)?;
    let n = usize::try_from(args.ops).map_err(|e| e.to_string())?;
    // First, while the heap holds nothing of the other workloads.
    if args.wants("parked_bytes")
        && let Some(bytes) = parked_bytes(setup, n)?
    {
        report("parked_bytes", bytes, "B/op");
    }
    if (args.wants("burst_peak") || args.wants("burst_retained"))
        && let Some(burst) = burst(setup, n)?
    {
        if args.wants("burst_peak") {
            report("burst_peak", burst.peak_mb, "MB");
        }
        if args.wants("burst_retained") {
            report("burst_retained", burst.retained_percent, "%");
        }
    }
    let engine = setup.engine()?;
    warm_up(&engine, FnProperty::Normal)?;
    for deps in [0, 1, 2, 4] {
        let name = format!("push_deps{deps}");
        if args.wants(&name) {
            report(&name, push_deps(&engine, n, deps)?, "ns/op");
        }
    }
    one_worker(args, setup, n)?;
    if args.wants("independent") {
        report("independent", independent(&engine, n)?, "ns/op");
    }
    chains(args, &engine, n)?;
    let graph = if RANDOM_GRAPH_WORKLOADS
        .iter()
        .any(|workload| args.wants(workload))
    {
        RandomGraph::new(n)
    } else {
        RandomGraph::new(0)
    };
    if args.wants("random_empty") {
        report(
            "random_empty",
            random(&engine, &graph, false, CPU)?,
            "ns/op",
        );
    }
    if args.wants("random_empty_typed") {
        report(
            "random_empty_typed",
            random_typed(&engine, &graph)?,
            "ns/op",
        );
    }
    if args.wants("random_empty_shared") {
        report(
            "random_empty_shared",
            random_shared(&engine, &graph)?,
            "ns/op",
        );
    }
    // Who runs the ops, for the bounds of the `_overhead` figures.
    let workers = if setup.kind == EngineKind::Naive {
        1
    } else {
        args.threads
    };
    if args.wants("random_1us") || args.wants("random_1us_overhead") {
        let measured = random(&engine, &graph, true, CPU)?;
        report("random_1us", measured, "ns/op");
        let ideal = graph.ideal_ns(n, workers) / n.max(1) as f64;
        report("random_1us_overhead", measured - ideal, "ns/op");
    }
    if args.wants("replay_chain") {
        report("replay_chain", replay_chain(&engine, n)?, "ns/op");
    }
    if args.wants("replay_random_empty") {
        report(
            "replay_random_empty",
            replay_random(&engine, &graph, false)?,
            "ns/op",
        );
    }
    if args.wants("replay_random_1us") || args.wants("replay_random_1us_overhead") {
        let measured = replay_random(&engine, &graph, true)?;
        report("replay_random_1us", measured, "ns/op");
        let plan = PLAN_OPS.min(n.max(1));
        let ideal = graph.ideal_ns(plan, workers) / plan as f64;
        report("replay_random_1us_overhead", measured - ideal, "ns/op");
    }
    if args.wants("latency") {
        report("latency", latency(&engine)?, "us");
    }
    drop(engine);
    device_ops(args, setup, n, &graph)
}

/// The `device_` workloads, on an engine of their own whose GPU 0 is a stand-in device.
fn device_ops(args: &Args, setup: Setup, n: usize, graph: &RandomGraph) -> Result<(), String> {
    let wanted = ["device_chain", "device_random_empty"];
    if setup.kind == EngineKind::Naive || !wanted.iter().any(|workload| args.wants(workload)) {
        return Ok(());
    }
    let backend = StandinBackend::new()?;
    let engine = Engine::new(
        setup
            .config()?
            .gpu_worker_threads(1)
            .gpu_copy_threads(1)
            .device_backend(Arc::new(backend)),
    )
    .map_err(err)?;
    warm_up(&engine, FnProperty::Normal)?;
    let gpu = Context::gpu(0);
    if args.wants("device_chain") {
        report("device_chain", chain(&engine, n, gpu)?, "ns/op");
    }
    if args.wants("device_random_empty") {
        report(
            "device_random_empty",
            random(&engine, graph, false, gpu)?,
            "ns/op",
        );
    }
    Ok(())
}

/// Ops of the plan the `replay_*` workloads capture.
const PLAN_OPS: usize = 1000;

/// Replays `plan` until `n` ops ran (at least once): ns per op.
fn replay_until(engine: &Engine, plan: &Plan, n: usize) -> Result<f64, String> {
    let replays = (n / plan.len().max(1)).max(1);
    let start = Instant::now();
    for _ in 0..replays {
        engine.replay(plan).map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    Ok(ns_per(start.elapsed(), (replays * plan.len()) as u64))
}

fn replay_chain(engine: &Engine, n: usize) -> Result<f64, String> {
    let var = engine.new_var().map_err(err)?;
    let plan = engine
        .capture("chain", |plan| {
            for _ in 0..PLAN_OPS.min(n.max(1)) {
                plan.op("chain").writes([var]).push_sync(|_| {})?;
            }
            Ok(())
        })
        .map_err(err)?;
    let ns = replay_until(engine, &plan, n)?;
    release(engine, vec![var])?;
    Ok(ns)
}

fn replay_random(engine: &Engine, graph: &RandomGraph, spin: bool) -> Result<f64, String> {
    let pool = vars(engine, RANDOM_VARS)?;
    let plan = engine
        .capture("random", |plan| {
            for ([r0, r1], w) in graph.iter().take(PLAN_OPS) {
                let op = plan
                    .op("random")
                    .reads([pool[r0], pool[r1]])
                    .writes([pool[w]]);
                if spin {
                    op.push_sync(|_| spin_1us())?;
                } else {
                    op.push_sync(|_| {})?;
                }
            }
            Ok(())
        })
        .map_err(err)?;
    let ns = replay_until(engine, &plan, graph.ops.len())?;
    release(engine, pool)?;
    Ok(ns)
}

/// The engines a system runs the workloads on.
#[derive(Clone, Copy)]
struct Setup {
    kind: EngineKind,
    /// Workers per block.
    threads: usize,
    /// The bulk size, if the system sets it (`depengine-bulk`).
    bulk: Option<usize>,
}

impl Setup {
    /// The setup of the engine system `args` names.
    fn of(args: &Args) -> Result<Self, String> {
        let (kind, bulk) = match args.system.as_str() {
            "depengine-perdevice" => (EngineKind::ThreadedPerDevice, None),
            "depengine-bulk" => (EngineKind::ThreadedPerDevice, Some(args.bulk)),
            "depengine-pooled" => (EngineKind::ThreadedPooled, None),
            "naive" => (EngineKind::Naive, None),
            other => {
                return Err(format!(
                    "unknown system `{other}` (expected depengine-perdevice, depengine-bulk, \
                     depengine-pooled, naive, serial or rayon)"
                ));
            }
        };
        Ok(Setup {
            kind,
            threads: args.threads,
            bulk,
        })
    }

    /// An engine of this setup, configured otherwise by the `DEPENGINE_*` environment
    /// variables that are set (`DEPENGINE_MAX_PENDING`, for instance).
    fn engine(self) -> Result<Engine, String> {
        Engine::new(self.config()?).map_err(err)
    }

    /// As `engine`, with pushers never held back, however many ops are pending.
    fn unbounded_engine(self) -> Result<Engine, String> {
        Engine::new(self.config()?.max_pending(None)).map_err(err)
    }

    fn config(self) -> Result<EngineConfig, String> {
        let config = EngineConfig::from_env()
            .map_err(err)?
            .kind(self.kind)
            .cpu_worker_threads(self.threads);
        Ok(match self.bulk {
            Some(ops) => config.bulk_size(ops),
            None => config,
        })
    }
}

/// The engine of the other groups' depengine systems: `ThreadedPerDevice`, configured by the
/// `DEPENGINE_*` variables that are set, with `threads` workers in the block that ops of
/// `property` run on (the priority block for `CpuPrioritized`, the CPU block otherwise),
/// warmed up there.
pub(crate) fn per_device_engine(threads: usize, property: FnProperty) -> Result<Engine, String> {
    let config = EngineConfig::from_env()
        .map_err(err)?
        .kind(EngineKind::ThreadedPerDevice);
    let config = match property {
        FnProperty::CpuPrioritized => config.cpu_priority_threads(threads),
        _ => config.cpu_worker_threads(threads),
    };
    let engine = Engine::new(config).map_err(err)?;
    warm_up(&engine, property)?;
    Ok(engine)
}

/// Starts the engine's block that ops of `property` run on (its threads start with the first
/// op routed to it), so that no workload's time includes starting threads, whichever runs
/// first. The other groups' depengine systems start theirs with it too.
pub(crate) fn warm_up(engine: &Engine, property: FnProperty) -> Result<(), String> {
    engine
        .op("warm-up")
        .prop(property)
        .push_sync(|_| Ok(()))
        .map_err(err)?;
    engine.wait_for_all().map_err(err)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn vars(engine: &Engine, n: usize) -> Result<Vec<Var>, String> {
    (0..n).map(|_| engine.new_var().map_err(err)).collect()
}

fn release(engine: &Engine, vars: Vec<Var>) -> Result<(), String> {
    engine.wait_for_all().map_err(err)?;
    for var in vars {
        engine.delete_var(var, || ()).map_err(err)?;
    }
    Ok(())
}

fn push_deps(engine: &Engine, n: usize, deps: usize) -> Result<f64, String> {
    let pool = vars(engine, 64)?;
    let lists: Vec<Vec<Var>> = (0..64)
        .map(|i| (0..deps).map(|j| pool[(i + j * 7) % 64]).collect())
        .collect();
    let start = Instant::now();
    for i in 0..n {
        engine
            .op("push")
            .reads(&lists[i % 64])
            .push_sync(|_| Ok(()))
            .map_err(err)?;
    }
    let elapsed = start.elapsed();
    release(engine, pool)?;
    Ok(ns_per(elapsed, n as u64))
}

fn drain(engine: &Engine, n: usize) -> Result<f64, String> {
    let gate = engine.new_var().map_err(err)?;
    let open = push_gate(engine, gate)?;
    for _ in 0..n {
        engine
            .op("drain")
            .reads([gate])
            .push_sync(|_| Ok(()))
            .map_err(err)?;
    }
    let start = open()?;
    engine.wait_for_all().map_err(err)?;
    let elapsed = start.elapsed();
    release(engine, vec![gate])?;
    Ok(ns_per(elapsed, n as u64))
}

/// Opens a gate; returns when it opened.
type OpenGate = Box<dyn FnOnce() -> Result<Instant, String>>;

/// Pushes a write on `gate` that holds back every op pushed behind it until the returned
/// function opens it.
fn push_gate(engine: &Engine, gate: Var) -> Result<OpenGate, String> {
    if engine.kind() == EngineKind::Naive {
        // The naive engine runs the gate here, at once: an async op, completed from here when
        // the gate opens (the released ops then run here).
        let (tx, rx) = mpsc::channel::<Completion>();
        engine
            .op("gate")
            .writes([gate])
            .push_async(move |_, done| {
                let _ = tx.send(done);
            })
            .map_err(err)?;
        let token = rx.recv().map_err(err)?;
        return Ok(Box::new(move || {
            let start = Instant::now();
            token.ok();
            Ok(start)
        }));
    }
    // A sync op that holds a worker until the gate opens: its completion releases every op
    // behind it on that worker, once its function returned (as a chain of ops would).
    let (open_tx, open_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<Instant>();
    engine
        .op("gate")
        .writes([gate])
        .push_sync(move |_| {
            let _ = open_rx.recv();
            let _ = started_tx.send(Instant::now());
            Ok(())
        })
        .map_err(err)?;
    Ok(Box::new(move || {
        open_tx.send(()).map_err(err)?;
        started_rx.recv().map_err(err)
    }))
}

/// A workload measuring both halves of an op's path: ns per op of the pusher, then of the
/// worker.
type HalvesFn = fn(&Engine, usize) -> Result<(f64, f64), String>;

/// The workloads on an engine with one worker and no pending bound (every op parks behind a
/// gate this thread opens): `drain`, `backlog`, `push_queued`, `push_parked`, `chain_backlog`.
fn one_worker(args: &Args, setup: Setup, n: usize) -> Result<(), String> {
    let one_worker = || -> Result<Engine, String> {
        let one = Setup {
            threads: 1,
            ..setup
        }
        .unbounded_engine()?;
        warm_up(&one, FnProperty::Normal)?;
        Ok(one)
    };
    if args.wants("drain") {
        report("drain", drain(&one_worker()?, n)?, "ns/op");
    }
    let queued = args.wants("backlog") || args.wants("push_queued");
    let parked = args.wants("push_parked") || args.wants("chain_backlog");
    if setup.kind != EngineKind::Naive && (queued || parked) {
        let one = one_worker()?;
        // Each measures both halves in one run: the pusher's, then the worker's.
        let halves: [(bool, HalvesFn, [&str; 2]); 2] = [
            (queued, backlog, ["push_queued", "backlog"]),
            (parked, push_parked, ["push_parked", "chain_backlog"]),
        ];
        for (wanted, measure, names) in halves {
            if wanted {
                let (pushed, ran) = measure(&one, n)?;
                for (name, value) in names.into_iter().zip([pushed, ran]) {
                    if args.wants(name) {
                        report(name, value, "ns/op");
                    }
                }
            }
        }
    }
    Ok(())
}

/// `push_queued` and `backlog`, in ns/op.
fn backlog(engine: &Engine, n: usize) -> Result<(f64, f64), String> {
    let gate = engine.new_var().map_err(err)?;
    let open = push_gate(engine, gate)?;
    let start = Instant::now();
    for _ in 0..n {
        engine.op("backlog").push_sync(|_| Ok(())).map_err(err)?;
    }
    let pushed = start.elapsed();
    let start = open()?;
    engine.wait_for_all().map_err(err)?;
    let ran = start.elapsed();
    release(engine, vec![gate])?;
    Ok((ns_per(pushed, n as u64), ns_per(ran, n as u64)))
}

/// `push_parked` and `chain_backlog`, in ns per op of the last of three bursts.
fn push_parked(engine: &Engine, n: usize) -> Result<(f64, f64), String> {
    let gate = engine.new_var().map_err(err)?;
    let burst = (n / 3).max(1);
    let mut pushed = Duration::ZERO;
    let mut ran = Duration::ZERO;
    for _ in 0..3 {
        let open = push_gate(engine, gate)?;
        let start = Instant::now();
        for _ in 0..burst {
            engine
                .op("parked")
                .writes([gate])
                .push_sync(|_| Ok(()))
                .map_err(err)?;
        }
        pushed = start.elapsed();
        let start = open()?;
        engine.wait_for_all().map_err(err)?;
        ran = start.elapsed();
    }
    release(engine, vec![gate])?;
    Ok((ns_per(pushed, burst as u64), ns_per(ran, burst as u64)))
}

fn independent(engine: &Engine, n: usize) -> Result<f64, String> {
    let start = Instant::now();
    for _ in 0..n {
        engine
            .op("independent")
            .push_sync(|_| Ok(()))
            .map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    Ok(ns_per(start.elapsed(), n as u64))
}

fn chain(engine: &Engine, n: usize, on: Context) -> Result<f64, String> {
    let var = engine.new_var().map_err(err)?;
    let start = Instant::now();
    for _ in 0..n {
        engine
            .op("chain")
            .on(on)
            .writes([var])
            .push_sync(|_| Ok(()))
            .map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    let elapsed = start.elapsed();
    release(engine, vec![var])?;
    Ok(ns_per(elapsed, n as u64))
}

/// The `chain` workloads.
fn chains(args: &Args, engine: &Engine, n: usize) -> Result<(), String> {
    if args.wants("chain") {
        report("chain", chain(engine, n, CPU)?, "ns/op");
    }
    if args.wants("chain_typed") {
        report("chain_typed", chain_typed(engine, n)?, "ns/op");
    }
    if args.wants("chain_shared") {
        report("chain_shared", chain_shared(engine, n)?, "ns/op");
    }
    if args.wants("chain_priority_overhead") {
        report(
            "chain_priority_overhead",
            chain_priority_overhead(engine, (n / 100).max(1))?,
            "us",
        );
    }
    Ok(())
}

/// How long one `CpuPrioritized` op of a chain takes beyond its 100 µs of spinning, in µs.
fn chain_priority_overhead(engine: &Engine, n: usize) -> Result<f64, String> {
    const WORK: Duration = Duration::from_micros(100);
    let var = engine.new_var().map_err(err)?;
    let start = Instant::now();
    for _ in 0..n {
        engine
            .op("chain_priority")
            .writes([var])
            .prop(FnProperty::CpuPrioritized)
            .push_sync(|_| spin(WORK))
            .map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    let elapsed = start.elapsed();
    release(engine, vec![var])?;
    let spun = WORK.as_secs_f64() * n as f64;
    Ok((elapsed.as_secs_f64() - spun) * 1e6 / n as f64)
}

fn chain_typed(engine: &Engine, n: usize) -> Result<f64, String> {
    let data = engine.data(0_u64).map_err(err)?;
    let start = Instant::now();
    for _ in 0..n {
        engine
            .op("chain")
            .write(&data)
            .push_sync(|_, value| *value += 1)
            .map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    let elapsed = start.elapsed();
    let count = engine.take(data).map_err(err)?;
    if count != n as u64 {
        return Err(format!("chain_typed: {count} increments, expected {n}"));
    }
    Ok(ns_per(elapsed, n as u64))
}

/// A value reached without typed data: shared, behind a lock the engine's order leaves
/// uncontended.
type Shared = std::sync::Arc<std::sync::Mutex<u64>>;

fn chain_shared(engine: &Engine, n: usize) -> Result<f64, String> {
    let var = engine.new_var().map_err(err)?;
    let value = Shared::default();
    let start = Instant::now();
    for _ in 0..n {
        let value = Shared::clone(&value);
        engine
            .op("chain")
            .writes([var])
            .push_sync(move |_| *value.lock().unwrap() += 1)
            .map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    let elapsed = start.elapsed();
    release(engine, vec![var])?;
    let count = *value.lock().map_err(err)?;
    if count != n as u64 {
        return Err(format!("chain_shared: {count} increments, expected {n}"));
    }
    Ok(ns_per(elapsed, n as u64))
}

/// The seeded random ops: op i reads vars `r0`, `r1` and writes `w` (var indices below
/// `RANDOM_VARS`, pairwise distinct).
struct RandomOps {
    state: u64,
}

impl RandomOps {
    fn new() -> Self {
        RandomOps {
            state: 0x5EED_0FDE_9E4D_1E01,
        }
    }

    fn next_var(&mut self) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % RANDOM_VARS as u64) as usize
    }
}

impl Iterator for RandomOps {
    /// `([r0, r1], w)`.
    type Item = ([usize; 2], usize);

    fn next(&mut self) -> Option<Self::Item> {
        let w = self.next_var();
        let mut r0 = self.next_var();
        while r0 == w {
            r0 = self.next_var();
        }
        let mut r1 = self.next_var();
        while r1 == w || r1 == r0 {
            r1 = self.next_var();
        }
        Some(([r0, r1], w))
    }
}

/// The first N seeded random ops, stored (6 bytes an op, so that 10^7 ops stay small beside
/// what the engine holds): `[r0, r1, w]`.
struct RandomGraph {
    ops: Vec<[u16; 3]>,
}

impl RandomGraph {
    fn new(n: usize) -> Self {
        const _: () = assert!(RANDOM_VARS <= 1 << 16);
        let ops = RandomOps::new()
            .take(n)
            .map(|([r0, r1], w)| [r0 as u16, r1 as u16, w as u16])
            .collect();
        RandomGraph { ops }
    }

    fn iter(&self) -> impl Iterator<Item = ([usize; 2], usize)> + '_ {
        self.ops
            .iter()
            .map(|&[r0, r1, w]| ([usize::from(r0), usize::from(r1)], usize::from(w)))
    }

    /// max(total work / workers, critical path) in ns of the first `ops` ops, each costing
    /// what a `spin_1us` costs here ([`spin_cost_ns`]): with `workers` spinning at once in the
    /// work, alone along the path.
    fn ideal_ns(&self, ops: usize, workers: usize) -> f64 {
        // Unit-time ops with unlimited workers: an op starts after the last write of every var
        // it uses and, for its written var, after the reads since that write.
        let mut last_write = vec![0_u64; RANDOM_VARS];
        let mut last_read = vec![0_u64; RANDOM_VARS];
        let mut depth = 0;
        let ops = ops.min(self.ops.len());
        for (reads, w) in self.iter().take(ops) {
            let start = reads
                .iter()
                .map(|&r| last_write[r])
                .chain([last_write[w], last_read[w]])
                .max()
                .unwrap_or(0);
            let finish = start + 1;
            for &r in &reads {
                last_read[r] = last_read[r].max(finish);
            }
            last_write[w] = finish;
            last_read[w] = finish;
            depth = depth.max(finish);
        }
        let workers = workers.max(1);
        let work = ops as f64 * spin_cost_ns(workers) / workers as f64;
        work.max(depth as f64 * spin_cost_ns(1))
    }
}

fn spin_1us() {
    spin(SPIN);
}

/// What one `spin_1us` costs on this machine while `threads` threads spin at once, in ns: a
/// little over `SPIN`, as it stops at the first clock reading past it. The work of an op that
/// spins, for the bounds of the `_overhead` figures, which no scheduler can beat: spins side by
/// side on a virtual machine's cores can each cost more than one alone, and a bound that took
/// the lone cost would count that as the scheduler's. Measured once per process and thread
/// count: the median of 7 batches of 1000 spins on each thread, the threads started together.
fn spin_cost_ns(threads: usize) -> f64 {
    const SPINS: u32 = 1000;
    static COSTS: Mutex<Vec<(usize, f64)>> = Mutex::new(Vec::new());
    let mut costs = COSTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(_, cost)) = costs.iter().find(|&&(spinning, _)| spinning == threads) {
        return cost;
    }
    let start_together = Barrier::new(threads);
    let batches = || {
        start_together.wait();
        (0..7)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..SPINS {
                    spin_1us();
                }
                start.elapsed().as_nanos() as f64 / f64::from(SPINS)
            })
            .collect::<Vec<f64>>()
    };
    let mut batches: Vec<f64> = std::thread::scope(|scope| {
        let spinners: Vec<_> = (0..threads).map(|_| scope.spawn(batches)).collect();
        spinners
            .into_iter()
            .flat_map(|spinner| spinner.join().expect("a spinner panicked"))
            .collect()
    });
    batches.sort_by(f64::total_cmp);
    let cost = batches[batches.len() / 2];
    costs.push((threads, cost));
    cost
}

/// Spins for `time`.
fn spin(time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        std::hint::spin_loop();
    }
}

fn random(engine: &Engine, graph: &RandomGraph, spin: bool, on: Context) -> Result<f64, String> {
    let pool = vars(engine, RANDOM_VARS)?;
    let start = Instant::now();
    for ([r0, r1], w) in graph.iter() {
        let (reads, writes) = ([pool[r0], pool[r1]], [pool[w]]);
        let builder = engine.op("random").on(on).reads(reads).writes(writes);
        if spin {
            builder.push_sync(|_| {
                spin_1us();
                Ok(())
            })
        } else {
            builder.push_sync(|_| Ok(()))
        }
        .map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    let elapsed = start.elapsed();
    release(engine, pool)?;
    Ok(ns_per(elapsed, graph.ops.len() as u64))
}

fn random_typed(engine: &Engine, graph: &RandomGraph) -> Result<f64, String> {
    let pool: Vec<Data<u64>> = (0..RANDOM_VARS)
        .map(|i| engine.data(i as u64).map_err(err))
        .collect::<Result<_, _>>()?;
    let start = Instant::now();
    for ([r0, r1], w) in graph.iter() {
        engine
            .op("random")
            .read(&pool[r0])
            .read(&pool[r1])
            .write(&pool[w])
            .push_sync(|_, (a, b, w)| *w = a.wrapping_add(*b))
            .map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    let elapsed = start.elapsed();
    drop(pool);
    engine.wait_for_all().map_err(err)?;
    Ok(ns_per(elapsed, graph.ops.len() as u64))
}

fn random_shared(engine: &Engine, graph: &RandomGraph) -> Result<f64, String> {
    let pool = vars(engine, RANDOM_VARS)?;
    let values: Vec<Shared> = (0..RANDOM_VARS)
        .map(|i| Shared::new((i as u64).into()))
        .collect();
    let start = Instant::now();
    for ([r0, r1], w) in graph.iter() {
        let (a, b, c) = (
            Shared::clone(&values[r0]),
            Shared::clone(&values[r1]),
            Shared::clone(&values[w]),
        );
        engine
            .op("random")
            .reads([pool[r0], pool[r1]])
            .writes([pool[w]])
            .push_sync(move |_| {
                // One lock at a time: two ops that read the same two vars run at once, and
                // holding one value's lock while taking the other's could lock them in
                // opposite orders.
                let first = *a.lock().unwrap();
                let sum = first.wrapping_add(*b.lock().unwrap());
                *c.lock().unwrap() = sum;
            })
            .map_err(err)?;
    }
    engine.wait_for_all().map_err(err)?;
    let elapsed = start.elapsed();
    release(engine, pool)?;
    Ok(ns_per(elapsed, graph.ops.len() as u64))
}

/// This process's resident memory in bytes (`/proc/self/statm`); `None` where there is none.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: `sysconf` only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// `resident_bytes` once it has stopped falling for 50 ms: the worker that completed a
/// burst's last op gives its memory back after waking `wait_for_all` (sampled every 5 ms, for
/// at most 5 s).
fn settled_resident_bytes() -> Option<u64> {
    let mut last = resident_bytes()?;
    let mut steady = 0;
    for _ in 0..1000 {
        std::thread::sleep(Duration::from_millis(5));
        let now = resident_bytes()?;
        steady = if now < last { 0 } else { steady + 1 };
        last = now.min(last);
        if steady == 10 {
            break;
        }
    }
    Some(last)
}

/// The `parked_bytes` workload (see the module documentation); `None` without `/proc`.
fn parked_bytes(setup: Setup, n: usize) -> Result<Option<f64>, String> {
    if resident_bytes().is_none() || setup.kind == EngineKind::Naive {
        // The naive engine would run the gate, and every op, on this thread.
        return Ok(None);
    }
    let engine = setup.unbounded_engine()?;
    let pool = vars(&engine, RANDOM_VARS)?;
    let gate = engine.new_var().map_err(err)?;
    let open = push_gate(&engine, gate)?;
    let before = resident_bytes().ok_or("no /proc/self/statm")?;
    for i in 0..n {
        engine
            .op("parked")
            .reads([gate])
            .writes([pool[i % RANDOM_VARS]])
            .push_sync(|_| Ok(()))
            .map_err(err)?;
    }
    let after = resident_bytes().ok_or("no /proc/self/statm")?;
    open()?;
    let mut all = pool;
    all.push(gate);
    release(&engine, all)?;
    Ok(Some(after.saturating_sub(before) as f64 / n.max(1) as f64))
}

/// What a burst left resident (`burst`).
struct Burst {
    peak_mb: f64,
    retained_percent: f64,
}

/// The `burst_peak` / `burst_retained` workloads (see the module documentation); `None` without
/// `/proc`.
fn burst(setup: Setup, n: usize) -> Result<Option<Burst>, String> {
    if resident_bytes().is_none() {
        return Ok(None);
    }
    let engine = setup.engine()?;
    let pool = vars(&engine, RANDOM_VARS)?;
    let push = |ops: usize, peak: &mut u64| -> Result<(), String> {
        for (i, ([r0, r1], w)) in RandomOps::new().take(ops).enumerate() {
            engine
                .op("burst")
                .reads([pool[r0], pool[r1]])
                .writes([pool[w]])
                .push_sync(|_| {
                    spin_1us();
                    Ok(())
                })
                .map_err(err)?;
            if i % 4096 == 0 {
                *peak = (*peak).max(resident_bytes().unwrap_or(0));
            }
        }
        engine.wait_for_all().map_err(err)
    };
    let mut ignored = 0;
    push((n / 100).max(1), &mut ignored)?;
    let before = settled_resident_bytes().ok_or("no /proc/self/statm")?;
    let mut peak = before;
    push(n, &mut peak)?;
    let after = settled_resident_bytes().ok_or("no /proc/self/statm")?;

    release(&engine, pool)?;
    let mb = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    Ok(Some(Burst {
        peak_mb: mb(peak.saturating_sub(before)),
        retained_percent: (after as f64 / before as f64 - 1.0) * 100.0,
    }))
}

fn latency(engine: &Engine) -> Result<f64, String> {
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for _ in 0..LATENCY_SAMPLES {
        // Let the workers go idle first (past their shortest spin window).
        std::thread::sleep(Duration::from_millis(2));
        let (tx, rx) = mpsc::channel();
        let pushed = Instant::now();
        engine
            .op("latency")
            .push_sync(move |_| {
                let _ = tx.send(Instant::now());
                Ok(())
            })
            .map_err(err)?;
        let started = rx.recv().map_err(err)?;
        samples.push(started.duration_since(pushed).as_secs_f64() * 1e6);
    }
    engine.wait_for_all().map_err(err)?;
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

fn serial(args: &Args) -> Result<(), String> {
    let n = usize::try_from(args.ops).map_err(|e| e.to_string())?;
    if args.wants("independent") || args.wants("chain") || args.wants("random_empty") {
        let start = Instant::now();
        for i in 0..n {
            let task: Box<dyn FnOnce() + Send> = Box::new(move || {
                std::hint::black_box(i);
            });
            task();
        }
        let ns = ns_per(start.elapsed(), n as u64);
        for workload in ["independent", "chain", "random_empty"] {
            if args.wants(workload) {
                report(workload, ns, "ns/op");
            }
        }
    }
    if args.wants("random_1us") || args.wants("random_1us_overhead") {
        let graph = RandomGraph::new(n);
        let start = Instant::now();
        for _ in graph.iter() {
            spin_1us();
        }
        let measured = ns_per(start.elapsed(), n as u64);
        report("random_1us", measured, "ns/op");
        report(
            "random_1us_overhead",
            measured - graph.ideal_ns(n, 1) / n.max(1) as f64,
            "ns/op",
        );
    }
    Ok(())
}

fn rayon_independent(args: &Args) -> Result<(), String> {
    if !args.wants("independent") {
        return Ok(());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()
        .map_err(err)?;
    let n = args.ops;
    let start = Instant::now();
    pool.scope(|s| {
        for i in 0..n {
            s.spawn(move |_| {
                std::hint::black_box(i);
            });
        }
    });
    report("independent", ns_per(start.elapsed(), n), "ns/op");
    Ok(())
}
