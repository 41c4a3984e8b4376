//! Captured plans replayed: random plans (sync and async ops, CPU and GPU ops on a stand-in
//! device, with injected failures) replayed many times, interleaved with dynamic ops on the
//! same data from several threads, equal a sequential run in push order on every engine kind;
//! failures, panics and misuse.
#![allow(
    clippy::doc_markdown,
    clippy::unreadable_literal,
    reason = "tests: seeds"
)]

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, RwLock};

use crate::common::{KINDS, RandomOp as Op, engine, mix, random_workload as workload};
use depengine::{
    BackendError, BoxError, Context, DeviceBackend, DeviceCompletion, DeviceError, DeviceTask,
    Engine, EngineConfig, EngineError, EngineKind, Executor, Fence, Plan, Task, Var,
};

thread_local! {
    /// Whether this thread is a `StreamDevice`'s.
    static ON_STREAM: Cell<bool> = const { Cell::new(false) };
    /// Set by a function running on a `StreamDevice`: its work is to fail on the device.
    static FAULT: Cell<bool> = const { Cell::new(false) };
}

/// A stand-in GPU device: one thread, its stream, runs the functions of its tasks in order,
/// reports each launched (if it `launches`), and completes them once no task is queued (as a
/// completion thread batches the ops whose events fired; every other batch last first, as
/// streams of several workers would), each with a device failure if its function set `FAULT`.
struct StreamDevice(mpsc::Sender<DeviceTask>);

impl StreamDevice {
    fn start(launches: bool) -> Self {
        let (tasks, queued) = mpsc::channel::<DeviceTask>();
        std::thread::spawn(move || {
            ON_STREAM.set(true);
            let mut done: Vec<(DeviceCompletion, bool)> = Vec::new();
            let mut batches = 0_u64;
            let mut complete = |done: &mut Vec<(DeviceCompletion, bool)>| {
                batches += 1;
                if batches.is_multiple_of(2) {
                    done.reverse();
                }
                for (completion, fault) in done.drain(..) {
                    completion.complete(if fault {
                        Err(DeviceError::Failed {
                            backend: "stream".to_owned(),
                            message: "injected device fault".to_owned(),
                        })
                    } else {
                        Ok(())
                    });
                }
            };
            loop {
                let task = match queued.try_recv() {
                    Ok(task) => task,
                    Err(TryRecvError::Empty) => {
                        complete(&mut done);
                        match queued.recv() {
                            Ok(task) => task,
                            Err(_) => break,
                        }
                    }
                    Err(TryRecvError::Disconnected) => break,
                };
                let mut completion = task.run();
                if launches {
                    // One stream runs its tasks in order: a launch needs no fence of its own.
                    completion.launched(Fence::new(()));
                }
                done.push((completion, FAULT.replace(false)));
            }
            complete(&mut done);
        });
        StreamDevice(tasks)
    }
}

impl Executor for StreamDevice {
    fn execute(&self, _priority: i32, task: Task) {
        task();
    }

    fn execute_device(&self, task: DeviceTask) {
        // The thread outlives every sender; were it gone, the task drops and fails its op.
        let _ = self.0.send(task);
    }
}

/// Makes a `StreamDevice` per executor asked for, reporting launches if `.0`.
struct Streams(bool);

impl DeviceBackend for Streams {
    fn name(&self) -> &'static str {
        "stream"
    }
    fn compute(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(Arc::new(StreamDevice::start(self.0)))
    }
    fn copy(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        Ok(Arc::new(StreamDevice::start(self.0)))
    }
}

/// `common::engine` with the `Streams` device backend, reporting launches if `launches`.
fn engine_with_streams(kind: EngineKind, threads: usize, launches: bool) -> Engine {
    Engine::new(
        EngineConfig::default()
            .kind(kind)
            .cpu_worker_threads(threads)
            .cpu_priority_threads(threads)
            .gpu_copy_threads(threads)
            .device_backend(Arc::new(Streams(launches))),
    )
    .expect("engine starts")
}

fn output(op: &Op, inputs: u64, k: usize) -> u64 {
    mix(inputs, op.id.wrapping_mul(31).wrapping_add(k as u64))
}

/// The sequential model of one op (rules 1 and 2).
fn model(op: &Op, values: &mut [u64], failed: &mut [bool]) {
    if op.reads.iter().chain(&op.writes).any(|&v| failed[v]) || op.fails {
        for &w in &op.writes {
            failed[w] = true;
        }
        return;
    }
    let inputs = op.reads.iter().fold(op.id, |acc, &r| mix(acc, values[r]));
    for (k, &w) in op.writes.iter().enumerate() {
        values[w] = output(op, inputs, k);
    }
}

/// What an op does to the shared values: the model's function, with `try_` locks so that any
/// overlap the engine allowed by mistake fails the op.
fn apply(op: &Op, values: &[RwLock<u64>]) -> Result<(), BoxError> {
    if op.fails {
        return Err(format!("injected failure of op {}", op.id).into());
    }
    let mut inputs = op.id;
    for &r in &op.reads {
        let value = values[r].try_read().map_err(|_| "read raced a write")?;
        inputs = mix(inputs, *value);
    }
    for (k, &w) in op.writes.iter().enumerate() {
        let mut value = values[w].try_write().map_err(|_| "write raced")?;
        *value = output(op, inputs, k);
    }
    Ok(())
}

fn lists(op: &Op, vars: &[Var]) -> (Vec<Var>, Vec<Var>) {
    (
        op.reads.iter().map(|&i| vars[i]).collect(),
        op.writes.iter().map(|&i| vars[i]).collect(),
    )
}

/// `apply` as a GPU op's function: on a `StreamDevice` (the naive engine runs GPU ops inline),
/// the injected failure of an op of even id is the device's (`FAULT`), not the function's.
fn apply_on_device(op: &Op, values: &[RwLock<u64>]) -> Result<(), BoxError> {
    if op.fails && ON_STREAM.get() && op.id.is_multiple_of(2) {
        FAULT.set(true);
        return Ok(());
    }
    apply(op, values)
}

/// Captures `ops` on `vars` (the model's `values`): a third of them async (every other one
/// completing on a thread of its own after its function returned, the others within it, on
/// the GPU); half on the GPU.
fn capture_random(
    engine: &Engine,
    ops: &[Op],
    vars: &[Var],
    values: &Arc<Vec<RwLock<u64>>>,
) -> Plan {
    engine
        .capture("random", |plan| {
            for op in ops {
                let (reads, writes) = lists(op, vars);
                let (op, values) = (op.clone(), Arc::clone(values));
                let context = match op.id % 6 {
                    1..=3 => Context::gpu(0),
                    _ => Context::cpu(0),
                };
                let planned = plan.op("planned").on(context).reads(reads).writes(writes);
                match op.id % 6 {
                    0 => planned.push_async(move |_, done| {
                        let (op, values) = (op.clone(), Arc::clone(&values));
                        std::thread::spawn(move || done.complete(apply(&op, &values)));
                    })?,
                    3 => planned.push_async(move |_, done| done.complete(apply(&op, &values)))?,
                    1 | 2 => planned.push_sync(move |_| apply_on_device(&op, &values))?,
                    _ => planned.push_sync(move |_| apply(&op, &values))?,
                }
            }
            Ok(())
        })
        .unwrap()
}

/// Replays a random plan `replays` times on `kind` with `workers` workers, a random dynamic op
/// pushed between replays; with `pushers` more threads pushing dynamic ops on vars of their
/// own. Half of the plan's ops, and every other op between replays, are GPU ops on a
/// `StreamDevice`. Checks every var against the sequential model.
fn check(kind: EngineKind, workers: usize, seed: u64, fail_rate: u64) {
    const VARS: usize = 12;
    const OWN_VARS: usize = 6;
    const PUSHERS: usize = 2;
    // Every other seed on a device that reports launches (GPU ops released at a launch).
    let engine = engine_with_streams(kind, workers, seed.is_multiple_of(2));
    let n_vars = VARS + PUSHERS * OWN_VARS;
    let vars: Vec<Var> = (0..n_vars).map(|_| engine.new_var().unwrap()).collect();
    let values: Arc<Vec<RwLock<u64>>> =
        Arc::new((0..n_vars).map(|i| RwLock::new(i as u64)).collect());
    let plan_ops = workload(seed, 20, VARS, 1_000_000, fail_rate);
    let dynamic = workload(seed ^ 0x5555, 8, VARS, 2_000_000, fail_rate);
    let plan = capture_random(&engine, &plan_ops, &vars, &values);
    assert_eq!(plan.len(), plan_ops.len());
    let others: Vec<Vec<Op>> = (0..PUSHERS)
        .map(|p| {
            let mut ops = workload(seed + 1 + p as u64, 200, OWN_VARS, 3_000_000, 0);
            for op in &mut ops {
                for v in op.reads.iter_mut().chain(op.writes.iter_mut()) {
                    *v += VARS + p * OWN_VARS;
                }
            }
            ops
        })
        .collect();
    let mut expected: Vec<u64> = (0..n_vars as u64).collect();
    let mut failed = vec![false; n_vars];
    std::thread::scope(|s| {
        for ops in &others {
            let (engine, vars, values) = (&engine, &vars, &values);
            s.spawn(move || {
                for op in ops {
                    let (reads, writes) = lists(op, vars);
                    let (op, values) = (op.clone(), Arc::clone(values));
                    engine
                        .op("other")
                        .reads(reads)
                        .writes(writes)
                        .push_sync(move |_| apply(&op, &values))
                        .unwrap();
                }
            });
        }
        for round in 0..9 {
            engine.replay(&plan).unwrap();
            for op in &plan_ops {
                model(op, &mut expected, &mut failed);
            }
            // Every third replay is followed by the next at once, which is queued on it
            // (`plan/chain.rs`) unless it has ended, and finds the failures it left.
            if round % 3 == 1 {
                continue;
            }
            let op = &dynamic[round % dynamic.len()];
            let (reads, writes) = lists(op, &vars);
            let (op2, values) = (op.clone(), Arc::clone(&values));
            let context = if round % 2 == 0 {
                Context::gpu(0)
            } else {
                Context::cpu(0)
            };
            engine
                .op("between")
                .on(context)
                .reads(reads)
                .writes(writes)
                .push_sync(move |_| apply_on_device(&op2, &values))
                .unwrap();
            model(op, &mut expected, &mut failed);
        }
    });
    for ops in &others {
        for op in ops {
            model(op, &mut expected, &mut failed);
        }
    }
    for (i, &var) in vars.iter().enumerate() {
        let got = engine.wait_for_var(var);
        assert_eq!(
            got.is_err(),
            failed[i],
            "{kind}/{workers}/{seed}: var {i}: {got:?}"
        );
        if got.is_ok() {
            assert_eq!(
                *values[i].read().unwrap(),
                expected[i],
                "{kind}/{workers}/{seed}: var {i}"
            );
        }
    }
    let _ = engine.wait_for_all();
    engine.wait_for_all().unwrap();
}

#[test]
fn replays_equal_a_sequential_run_on_every_engine_kind() {
    for kind in KINDS {
        for workers in [1, 2, 4] {
            for seed in 0..6 {
                check(kind, workers, 0xABCD + seed, 0);
            }
        }
    }
}

#[test]
fn failures_inside_replays_follow_the_rules_on_every_engine_kind() {
    for kind in KINDS {
        for seed in 0..8 {
            check(kind, 2, 0xFA11 + seed, 8);
        }
    }
}

#[test]
fn a_failed_op_skips_its_dependents_and_fails_only_what_it_writes() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let [a, b, c, d] = [(); 4].map(|()| engine.new_var().unwrap());
        let ran = Arc::new(AtomicU32::new(0));
        let (ran1, ran2) = (Arc::clone(&ran), Arc::clone(&ran));
        let plan = engine
            .capture("fails", |plan| {
                plan.op("bad")
                    .reads([a])
                    .writes([b])
                    .push_sync(|_| Err::<(), _>("broken".into()))?;
                plan.op("after bad")
                    .reads([b])
                    .writes([c])
                    .push_sync(move |_| {
                        ran1.fetch_add(1, Ordering::Relaxed);
                    })?;
                plan.op("independent").writes([d]).push_sync(move |_| {
                    ran2.fetch_add(10, Ordering::Relaxed);
                })?;
                plan.op("panics")
                    .writes([a])
                    .push_sync(|_| panic!("in a plan"))?;
                Ok(())
            })
            .unwrap();
        engine.replay(&plan).unwrap();
        let failure = |var| match engine.wait_for_var(var) {
            Err(EngineError::OpFailed(failure)) => failure.op_name().to_owned(),
            other => panic!("{kind}: expected a failure, got {other:?}"),
        };
        assert_eq!(failure(b), "bad");
        assert_eq!(
            failure(c),
            "bad",
            "{kind}: the skipped op passes the failure on"
        );
        assert_eq!(failure(a), "panics");
        engine.wait_for_var(d).unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 10, "{kind}");
        // Each var's failure was taken by its wait: the next replay runs everything again but
        // the failing ops, and an op on a var failed before the replay skips.
        engine
            .op("fail d")
            .writes([d])
            .push_sync(|_| Err::<(), _>("d broken".into()))
            .unwrap();
        engine.replay(&plan).unwrap();
        assert_eq!(failure(d), "fail d", "{kind}: skipped, d keeps its failure");
        assert_eq!(failure(c), "bad");
        assert_eq!(ran.load(Ordering::Relaxed), 10, "{kind}");
        let _ = engine.wait_for_all();
    }
}

/// An async op of a plan is done when its completion is, from whichever thread: its
/// dependents wait for that, and a completion failed, dropped or panicked on fails it by the
/// rules; typed async ops reach their data through the token until it completes.
#[test]
fn async_ops_in_a_plan_complete_from_any_thread_and_fail_by_the_rules() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let [failed, dropped, panicked, after] = [(); 4].map(|()| engine.new_var().unwrap());
        let total = engine.data(0_u64).unwrap();
        let seen = engine.data(Vec::<u64>::new()).unwrap();
        let ran_after = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&ran_after);
        let plan = engine
            .capture("async", |plan| {
                // Adds 1 on another thread, well after the function returned.
                plan.op("add later")
                    .write(&total)
                    .push_async(|_, mut held| {
                        std::thread::spawn(move || {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                            *held.refs() += 1;
                            held.ok();
                        });
                    })?;
                plan.op("record")
                    .read(&total)
                    .write(&seen)
                    .push_sync(|_, (total, seen)| seen.push(*total))?;
                plan.op("fails").writes([failed]).push_async(|_, done| {
                    std::thread::spawn(move || done.fail("remote error"));
                })?;
                plan.op("after fails")
                    .reads([failed])
                    .writes([after])
                    .push_sync(move |_| {
                        counted.fetch_add(1, Ordering::Relaxed);
                    })?;
                plan.op("drops")
                    .writes([dropped])
                    .push_async(|_, done| drop(done))?;
                plan.op("panics")
                    .writes([panicked])
                    .push_async(|_, _done| panic!("in an async plan op"))?;
                Ok(())
            })
            .unwrap();
        for _ in 0..3 {
            engine.replay(&plan).unwrap();
        }
        assert_eq!(*engine.read(&seen).unwrap(), [1, 2, 3], "{kind}");
        let failure = |var| match engine.wait_for_var(var) {
            Err(EngineError::OpFailed(failure)) => {
                (failure.op_name().to_owned(), failure.to_string())
            }
            other => panic!("{kind}: expected a failure, got {other:?}"),
        };
        assert_eq!(failure(failed).0, "fails");
        assert_eq!(failure(after).0, "fails", "{kind}: its dependent skipped");
        assert_eq!(ran_after.load(Ordering::Relaxed), 0, "{kind}");
        let (name, message) = failure(dropped);
        assert_eq!(name, "drops");
        assert!(message.contains("dropped"), "{kind}: {message}");
        let (name, message) = failure(panicked);
        assert_eq!(name, "panics");
        assert!(message.contains("panicked"), "{kind}: {message}");
        let _ = engine.wait_for_all();
    }
}

/// A long chain of async ops, each completed inside its function, runs on every engine kind:
/// on the naive engine the dependents a completion releases wait in the replay's queue rather
/// than on the stack (without it this chain overflows a worker's stack).
#[test]
fn a_long_chain_of_async_ops_completed_inline_runs_on_every_engine_kind() {
    const LINKS: u64 = if cfg!(miri) { 20 } else { 50_000 };
    for kind in KINDS {
        let engine = engine(kind, 2);
        let total = engine.data(0_u64).unwrap();
        let plan = engine
            .capture("chain", |plan| {
                for link in 0..LINKS {
                    plan.op("link")
                        .write(&total)
                        .push_async(move |_, mut held| {
                            let total = held.refs();
                            *total = total.wrapping_mul(3).wrapping_add(link);
                            held.ok();
                        })?;
                }
                Ok(())
            })
            .unwrap();
        engine.replay(&plan).unwrap();
        let expected = (0..LINKS).fold(0_u64, |t, link| t.wrapping_mul(3).wrapping_add(link));
        assert_eq!(*engine.read(&total).unwrap(), expected, "{kind}");
    }
}

#[test]
fn misuse_is_a_typed_error() {
    let engine = engine(EngineKind::ThreadedPerDevice, 1);
    let other = crate::common::engine(EngineKind::ThreadedPerDevice, 1);
    let var = engine.new_var().unwrap();
    let plan = engine
        .capture("one", |plan| {
            plan.op("op").writes([var]).push_sync(|_| {})?;
            Ok(())
        })
        .unwrap();
    let foreign = other.replay(&plan);
    assert!(
        matches!(&foreign, Err(EngineError::ForeignPlan { plan, .. }) if plan == "one"),
        "{foreign:?}"
    );
    // A capture closure's own error: no plan, the error as its source.
    let refused = engine.capture("bad", |_| Err("no".into()));
    match refused {
        Err(error @ EngineError::CaptureFailed { .. }) => {
            let source = std::error::Error::source(&error).map(ToString::to_string);
            assert_eq!(source.as_deref(), Some("no"));
        }
        other => panic!("{other:?}"),
    }
    // The lists a push refuses, refused at capture, naming the op; a foreign var too.
    let lists = |reads: Vec<Var>, writes: Vec<Var>| {
        engine.capture("lists", move |plan| {
            plan.op("bad lists")
                .reads(reads)
                .writes(writes)
                .push_sync(|_| {})?;
            Ok(())
        })
    };
    let twice = lists(vec![], vec![var, var]);
    assert!(
        matches!(&twice, Err(EngineError::DuplicateVar { op: Some(op), .. }) if op == "bad lists"),
        "{twice:?}"
    );
    let both = lists(vec![var], vec![var]);
    assert!(
        matches!(both, Err(EngineError::ReadWriteConflict { .. })),
        "{both:?}"
    );
    let stranger = other.new_var().unwrap();
    let foreign_var = lists(vec![stranger], vec![]);
    assert!(
        matches!(foreign_var, Err(EngineError::ForeignVar { .. })),
        "{foreign_var:?}"
    );
    // A GPU op in a plan: refused as its push is (no device backend, or the CUDA backend
    // without a driver; accepted alike where a GPU is).
    let gpu = engine.capture("gpu", |plan| {
        plan.op("kernel")
            .on(Context::gpu(0))
            .writes([var])
            .push_sync(|_| {})?;
        Ok(())
    });
    let pushed = engine
        .op("kernel")
        .on(Context::gpu(0))
        .writes([var])
        .push_sync(|_| {});
    match (&gpu, &pushed) {
        (Err(captured), Err(pushed)) => assert_eq!(
            std::mem::discriminant(captured),
            std::mem::discriminant(pushed),
            "{captured:?} against {pushed:?}"
        ),
        _ => assert_eq!(gpu.is_ok(), pushed.is_ok(), "{gpu:?} against {pushed:?}"),
    }
    // A var of the plan deleted since the capture, and at capture.
    engine.delete_var(var, || ()).unwrap();
    assert!(matches!(
        engine.replay(&plan),
        Err(EngineError::DeletedVar { .. })
    ));
    let deleted = lists(vec![], vec![var]);
    assert!(
        matches!(deleted, Err(EngineError::DeletedVar { .. })),
        "{deleted:?}"
    );
    engine.wait_for_all().unwrap();
}

/// Replayed ops run on the blocks of their contexts, and independent ones side by side: two
/// roots that meet at a barrier finish on two workers.
#[test]
fn replayed_ops_run_on_their_devices_and_in_parallel() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let vars: Vec<Var> = (0..4).map(|_| engine.new_var().unwrap()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let tx = Arc::new(tx);
    let plan = engine
        .capture("devices", |plan| {
            for (i, &var) in vars.iter().enumerate() {
                let device = (i % 2) as u32;
                let (tx, barrier) = (Arc::clone(&tx), Arc::clone(&barrier));
                plan.op("placed")
                    .on(Context::cpu(device))
                    .writes([var])
                    .push_sync(move |_| {
                        if i < 2 {
                            // Ops 0 and 1, on two devices, wait for each other.
                            barrier.wait();
                        }
                        let thread = std::thread::current().name().map(str::to_owned);
                        tx.lock().unwrap().send((device, thread)).unwrap();
                    })?;
            }
            Ok(())
        })
        .unwrap();
    engine.replay(&plan).unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let Ok(got) = rx.recv_timeout(std::time::Duration::from_secs(20)) else {
            std::mem::forget(engine);
            panic!("replayed roots did not run side by side: {seen:?}");
        };
        seen.push(got);
    }
    for (device, thread) in &seen {
        let thread = thread.as_deref().unwrap_or_default();
        assert!(
            thread.starts_with(&format!("depengine-cpu{device}")),
            "an op of cpu({device}) ran on {thread}"
        );
    }
    // Two independent roots on one device's two workers meet at a barrier too.
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let tx = Arc::new(std::sync::Mutex::new(tx));
    let pair = engine
        .capture("pair", |plan| {
            for &var in &vars[..2] {
                let (tx, barrier) = (Arc::clone(&tx), Arc::clone(&barrier));
                plan.op("meets").writes([var]).push_sync(move |_| {
                    barrier.wait();
                    tx.lock().unwrap().send(()).unwrap();
                })?;
            }
            Ok(())
        })
        .unwrap();
    engine.replay(&pair).unwrap();
    for _ in 0..2 {
        if rx.recv_timeout(std::time::Duration::from_secs(20)).is_err() {
            std::mem::forget(engine);
            panic!("two independent replayed ops did not run side by side");
        }
    }
    engine.wait_for_all().unwrap();
}

#[test]
fn a_replay_keeps_its_plan_alive_and_replays_queue_back_to_back() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let var = engine.new_var().unwrap();
    let count = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&count);
    let plan = engine
        .capture("count", |plan| {
            plan.op("add").writes([var]).push_sync(move |_| {
                counted.fetch_add(1, Ordering::Relaxed);
            })?;
            Ok(())
        })
        .unwrap();
    for _ in 0..100 {
        engine.replay(&plan).unwrap();
    }
    drop(plan);
    engine.wait_for_var(var).unwrap();
    assert_eq!(count.load(Ordering::Relaxed), 100);
    // An empty plan replays as an op on no var.
    let empty = engine.capture("empty", |_| Ok(())).unwrap();
    assert!(empty.is_empty());
    engine.replay(&empty).unwrap();
    engine.wait_for_all().unwrap();
}

/// Replays queued on the last pushed one of their plan (`plan/chain.rs`): the first replay's
/// gate op holds it running while two more are pushed, with nothing between them, and they
/// queue (no op waits in the graph). Each finds what a pushed replay would: the failure the
/// one before left on `v` (without it, replay 2's ops on `v` run) and the failure `r` held
/// before the first (without it, replays 2 and 3 run "read r"); a dynamic op pushed after
/// them runs after all three.
#[test]
fn replays_queued_on_the_last_pushed_one_carry_its_failures_on() {
    for kind in [EngineKind::ThreadedPerDevice, EngineKind::ThreadedPooled] {
        let engine = engine(kind, 2);
        let [gate, v, x, r] = [(); 4].map(|()| engine.new_var().unwrap());
        engine
            .op("fail r")
            .writes([r])
            .push_sync(|_| Err(BoxError::from("r failed")))
            .unwrap();
        let (entered, held) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(1)));
        let runs: Arc<RwLock<Vec<&str>>> = Arc::default();
        let record = |name: &'static str| {
            let runs = Arc::clone(&runs);
            move || runs.write().unwrap().push(name)
        };
        let plan = {
            let (entered, held, gated) = (Arc::clone(&entered), Arc::clone(&held), record("gate"));
            let (read_v, read_r) = (record("read v"), record("read r"));
            let wrote = Arc::clone(&runs);
            engine
                .capture("chained", |plan| {
                    plan.op("gate").writes([gate]).push_sync(move |_| {
                        entered.fetch_add(1, Ordering::SeqCst);
                        let since = std::time::Instant::now();
                        while held.load(Ordering::SeqCst) == 1 && since.elapsed().as_secs() < 10 {
                            std::thread::yield_now();
                        }
                        gated();
                    })?;
                    // The first op on `v` reads it: it skips while `v` holds the failure the
                    // replay before left.
                    plan.op("read v")
                        .reads([v])
                        .writes([x])
                        .push_sync(move |_| read_v())?;
                    plan.op("write v").writes([v]).push_sync(move |_| {
                        let mut runs = wrote.write().unwrap();
                        runs.push("write v");
                        // Fails in the first replay only.
                        if runs.iter().filter(|&&run| run == "write v").count() == 1 {
                            Err(BoxError::from("first write fails"))
                        } else {
                            Ok(())
                        }
                    })?;
                    // Writes nothing: only `r`'s failure from before the chain skips it.
                    plan.op("read r").reads([r]).push_sync(move |_| read_r())?;
                    Ok(())
                })
                .unwrap()
        };
        engine.replay(&plan).unwrap();
        while entered.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        engine.replay(&plan).unwrap();
        engine.replay(&plan).unwrap();
        let stats = engine.stats();
        assert_eq!(
            (stats.pending_ops, stats.waiting_ops),
            (3, 0),
            "{kind}: queued"
        );
        let after = record("after");
        engine
            .op("after")
            .reads([gate])
            .push_sync(move |_| after())
            .unwrap();
        // Replay 1's ops on `v` run beside its gate: let them end before the gate opens.
        let since = std::time::Instant::now();
        while !runs.read().unwrap().contains(&"write v") && since.elapsed().as_secs() < 10 {
            std::thread::yield_now();
        }
        held.store(0, Ordering::SeqCst);
        engine.wait_for_var(gate).unwrap();
        assert_eq!(entered.load(Ordering::SeqCst), 3, "{kind}");
        // Replay 1's write failed: `v` holds its failure, so replays 2 and 3 skip both ops on
        // it (a write of a failed var skips too), and `x` fails with them; `r` keeps its own.
        for var in [v, x, r] {
            assert!(engine.wait_for_var(var).is_err(), "{kind}");
        }
        let _ = engine.wait_for_all();
        assert_eq!(
            *runs.read().unwrap(),
            ["read v", "write v", "gate", "gate", "gate", "after"],
            "{kind}"
        );
    }
}

#[test]
fn the_profiler_sees_each_replayed_op_by_name() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (x, y) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        let plan = engine
            .capture("step", |plan| {
                plan.op("forward").writes([x]).push_sync(|_| {})?;
                plan.op("backward")
                    .reads([x])
                    .writes([y])
                    .push_sync(|_| {})?;
                Ok(())
            })
            .unwrap();
        engine.profiler().start();
        for _ in 0..3 {
            engine.replay(&plan).unwrap();
        }
        engine.wait_for_all().unwrap();
        let profile = engine.profiler().take();
        let summary = profile.summary();
        let runs: Vec<(&str, usize)> = summary.iter().map(|s| (s.name.as_str(), s.runs)).collect();
        assert!(
            runs.contains(&("forward", 3)) && runs.contains(&("backward", 3)),
            "{kind:?}: {runs:?}"
        );
        // In `Marked` mode, only the ops captured `profiled`.
        let marked = engine
            .capture("marked", |plan| {
                plan.op("marked").writes([x]).profiled().push_sync(|_| {})?;
                plan.op("unmarked").writes([y]).push_sync(|_| {})?;
                Ok(())
            })
            .unwrap();
        engine.profiler().set_mode(depengine::ProfileMode::Marked);
        engine.replay(&marked).unwrap();
        engine.wait_for_all().unwrap();
        let profile = engine.profiler().take();
        let names: Vec<&str> = profile
            .ops()
            .iter()
            .map(depengine::OpProfile::name)
            .collect();
        assert_eq!(names, ["marked"], "{kind:?}");
    }
}

#[test]
fn a_wait_inside_a_replayed_op_on_the_plans_vars_is_refused() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (x, y) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        let waiter = engine.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let plan = engine
            .capture("waits", |plan| {
                plan.op("first").writes([x]).push_sync(|_| {})?;
                plan.op("waits on y").reads([x]).push_sync(move |_| {
                    let outcome = waiter.wait_for_var(y);
                    tx.lock().unwrap().send(format!("{outcome:?}")).unwrap();
                })?;
                plan.op("writes y").writes([y]).push_sync(|_| {})?;
                Ok(())
            })
            .unwrap();
        engine.replay(&plan).unwrap();
        let Ok(outcome) = rx.recv_timeout(std::time::Duration::from_secs(20)) else {
            // Deadlocked: leave the engine (whose shutdown would wait forever) and fail.
            std::mem::forget(engine);
            panic!("{kind:?}: the wait inside the replayed op never returned");
        };
        assert!(outcome.contains("WaitOnOwnVar"), "{kind:?}: {outcome}");
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn a_pending_replay_is_one_entry_named_after_its_plan() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let x = engine.new_var().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    engine
        .op("holder")
        .writes([x])
        .push_async(move |_, done| tx.send(done).unwrap())
        .unwrap();
    let held = rx.recv().unwrap();
    let plan = engine
        .capture("training step", |plan| {
            plan.op("forward").reads([x]).push_sync(|_| {})?;
            plan.op("update").writes([x]).push_sync(|_| {})?;
            Ok(())
        })
        .unwrap();
    engine.replay(&plan).unwrap();
    let mut out = Vec::new();
    engine.dump_pending(&mut out).unwrap();
    let dot = String::from_utf8(out).unwrap();
    assert_eq!(dot.matches("replay training step").count(), 1, "{dot}");
    assert!(!dot.contains("forward") && !dot.contains("update"), "{dot}");
    held.ok();
    engine.wait_for_all().unwrap();
}

/// Typed data in a plan: each replayed op reaches its values as `&T` / `&mut T`, replays
/// interleave with typed ops pushed between them, and the values equal a plain loop's.
#[test]
fn typed_plans_equal_a_plain_loop_on_every_engine_kind() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let input = engine.data(0_u64).unwrap();
        let (a, b, sum) = (
            engine.data(1_u64).unwrap(),
            engine.data(2_u64).unwrap(),
            engine.data(0_u64).unwrap(),
        );
        let done = engine.new_var().unwrap();
        let plan = engine
            .capture("typed", |plan| {
                plan.op("a").read(&input).write(&a).push_sync(|_, (x, a)| {
                    *a = a.wrapping_mul(3).wrapping_add(*x);
                })?;
                plan.op("b").read(&input).write(&b).push_sync(|_, (x, b)| {
                    *b = b.wrapping_mul(5).wrapping_add(*x);
                })?;
                plan.op("sum")
                    .read(&a)
                    .read(&b)
                    .write(&sum)
                    .writes([done])
                    .push_sync(|_, (a, b, sum)| *sum = sum.wrapping_add(a ^ b))?;
                Ok(())
            })
            .unwrap();
        let (mut ea, mut eb, mut esum) = (1_u64, 2_u64, 0_u64);
        let steps = if cfg!(miri) { 4 } else { 50 };
        for step in 0..steps {
            engine
                .op("input")
                .write(&input)
                .push_sync(move |_, x| *x = step)
                .unwrap();
            engine.replay(&plan).unwrap();
            ea = ea.wrapping_mul(3).wrapping_add(step);
            eb = eb.wrapping_mul(5).wrapping_add(step);
            esum = esum.wrapping_add(ea ^ eb);
        }
        engine.wait_for_var(done).unwrap();
        assert_eq!(*engine.read(&sum).unwrap(), esum, "{kind:?}");
        assert_eq!(
            (*engine.read(&a).unwrap(), *engine.read(&b).unwrap()),
            (ea, eb)
        );
        // Data of another engine is refused at capture; data dropped since, at replay.
        let other = crate::common::engine(kind, 1);
        let stranger = other.data(0_u64).unwrap();
        let foreign = engine.capture("foreign", |plan| {
            plan.op("reads a stranger")
                .read(&stranger)
                .push_sync(|_, _| {})?;
            Ok(())
        });
        assert!(
            matches!(foreign, Err(EngineError::ForeignData { .. })),
            "{foreign:?}"
        );
        drop(a);
        engine.wait_for_all().unwrap();
        assert!(matches!(
            engine.replay(&plan),
            Err(EngineError::DeletedVar { .. })
        ));
        engine.wait_for_all().unwrap();
    }
}
