//! `wait_for_var` inside an op that would never return: a cycle through the waiting op's vars,
//! on one thread or through waits on several, ends in `WaitDeadlock` instead of a hang; waits
//! that only look similar still wait. And waits that occupy every worker of the block the
//! awaited ops need: a stand-in thread runs those ops.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use crate::common::{self, KINDS, engine, held_async_op, within};
use depengine::{Engine, EngineConfig, EngineError, EngineKind, FnProperty, Var};

const THREADED: [EngineKind; 2] = [EngineKind::ThreadedPooled, EngineKind::ThreadedPerDevice];

/// Pushes an op reading `from` and writing `to`, which stores `value` into `out`.
fn push_copy(engine: &Engine, from: Var, to: Var, out: &Arc<AtomicU64>, value: u64) {
    let out = Arc::clone(out);
    engine
        .op("copy")
        .reads([from])
        .writes([to])
        .push_sync(move |_| {
            out.store(value, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
}

/// Pushes a sync op that reads `reads` and writes `writes`, runs `body` as its function, and
/// returns what `body` returned (once the op has run it).
fn inside_op<T: Send + 'static>(
    engine: &Engine,
    reads: &[Var],
    writes: &[Var],
    body: impl FnOnce(&Engine) -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let inner = engine.clone();
    engine
        .op("waits inside")
        .reads(reads)
        .writes(writes)
        .push_sync(move |_| {
            tx.send(body(&inner)).unwrap();
            Ok(())
        })
        .unwrap();
    rx.recv().unwrap()
}

/// An op writing `a` pushes a child that reads `a` (so it waits for the op) and writes `b`,
/// then waits for `b`.
#[test]
fn waiting_for_a_child_that_depends_on_the_op_is_an_error() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
            let child_ran = Arc::new(AtomicU64::new(0));
            let ran = Arc::clone(&child_ran);
            let (waited, before) = inside_op(&engine, &[], &[a], move |inner| {
                push_copy(inner, a, b, &ran, 1);
                let waited = inner.wait_for_var(b);
                // The child has not run: it waits for this op.
                (waited, ran.load(Ordering::SeqCst))
            });
            assert!(
                matches!(waited, Err(EngineError::WaitDeadlock { var, .. }) if var == b),
                "{kind}: {waited:?}"
            );
            assert_eq!(before, 0, "{kind}");
            // The withdrawn wait is harmless: everything completes.
            engine.wait_for_var(b).unwrap();
            assert_eq!(child_ran.load(Ordering::SeqCst), 1, "{kind}");
            engine.wait_for_all().unwrap();
            assert_eq!(engine.stats().waiting_ops, 0, "{kind}");
        });
    }
}

/// The ops in the cycle were pushed by another thread, before the wait, through a third var.
#[test]
fn a_cycle_through_ops_pushed_before_the_wait_is_an_error() {
    for kind in THREADED {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let [a, b, c] = [(); 3].map(|()| engine.new_var().unwrap());
            let out = Arc::new(AtomicU64::new(0));
            let (go, wait) = mpsc::channel::<()>();
            let (tx, rx) = mpsc::channel();
            {
                let inner = engine.clone();
                engine
                    .op("waits for c")
                    .writes([a])
                    .push_sync(move |_| {
                        wait.recv().unwrap();
                        tx.send(inner.wait_for_var(c)).unwrap();
                        Ok(())
                    })
                    .unwrap();
            }
            // a -> b -> c: the write of c waits for the op through b.
            push_copy(&engine, a, b, &out, 1);
            push_copy(&engine, b, c, &out, 2);
            go.send(()).unwrap();
            let waited = rx.recv().unwrap();
            assert!(
                matches!(waited, Err(EngineError::WaitDeadlock { var, .. }) if var == c),
                "{kind}: {waited:?}"
            );
            engine.wait_for_all().unwrap();
            assert_eq!(out.load(Ordering::SeqCst), 2, "{kind}");
        });
    }
}

/// Two ops, running at once on two workers, each wait for a var whose pending writer depends
/// on the other op: neither wait can return. At least one gets the error; once its op returns,
/// the other wait either returns too or got the error as well.
#[test]
fn a_cycle_through_two_blocked_waits_is_an_error() {
    for kind in THREADED {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let [a, b, c, d] = [(); 4].map(|()| engine.new_var().unwrap());
            let out = Arc::new(AtomicU64::new(0));
            let both_run = Arc::new(Barrier::new(3));
            let (tx, rx) = mpsc::channel();
            for (holds, waits_for) in [(a, d), (b, c)] {
                let (inner, both_run, tx) = (engine.clone(), Arc::clone(&both_run), tx.clone());
                engine
                    .op("waits")
                    .writes([holds])
                    .push_sync(move |_| {
                        both_run.wait();
                        // Until both copies below are pushed.
                        both_run.wait();
                        tx.send(inner.wait_for_var(waits_for)).unwrap();
                        Ok(())
                    })
                    .unwrap();
            }
            both_run.wait();
            push_copy(&engine, a, c, &out, 1);
            push_copy(&engine, b, d, &out, 2);
            both_run.wait();
            let waited = [rx.recv().unwrap(), rx.recv().unwrap()];
            assert!(
                waited
                    .iter()
                    .any(|w| matches!(w, Err(EngineError::WaitDeadlock { .. }))),
                "{kind}: {waited:?}"
            );
            assert!(
                waited
                    .iter()
                    .all(|w| matches!(w, Ok(()) | Err(EngineError::WaitDeadlock { .. }))),
                "{kind}: {waited:?}"
            );
            engine.wait_for_all().unwrap();
        });
    }
}

/// An op that reads `a` waits for an op that also reads `a` (and writes `b`): reads do not
/// wait for each other, so this wait returns.
#[test]
fn waits_that_only_look_like_cycles_return() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let [a, b] = [(); 2].map(|()| engine.new_var().unwrap());
            let out = Arc::new(AtomicU64::new(0));
            let (waited, seen) = inside_op(&engine, &[a], &[], move |inner| {
                push_copy(inner, a, b, &out, 1);
                let waited = inner.wait_for_var(b);
                (waited, out.load(Ordering::SeqCst))
            });
            assert!(waited.is_ok(), "{kind}: {waited:?}");
            assert_eq!(seen, 1, "{kind}");
            engine.wait_for_all().unwrap();
        });
    }
}

/// An async op that completed inside its function no longer holds its vars: it may wait for
/// ops queued behind its successor on them, and for those vars themselves.
#[test]
fn an_async_op_that_completed_can_wait_for_ops_that_needed_its_vars() {
    for kind in THREADED {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let [a, v] = [(); 2].map(|()| engine.new_var().unwrap());
            let out = Arc::new(AtomicU64::new(0));
            let (go, wait) = mpsc::channel::<()>();
            let (tx, rx) = mpsc::channel();
            {
                let (inner, out) = (engine.clone(), Arc::clone(&out));
                engine
                    .op("completes, then waits")
                    .writes([a])
                    .push_async(move |_, done| {
                        wait.recv().unwrap();
                        // Lets the slow write below run, on the other worker.
                        done.ok();
                        // Reads `a`: it waits for the slow write, not for this op.
                        push_copy(&inner, a, v, &out, 1);
                        let waited = inner.wait_for_var(v);
                        // This op's own var, which it no longer holds.
                        tx.send(waited.and_then(|()| inner.wait_for_var(a)))
                            .unwrap();
                    })
                    .unwrap();
            }
            engine
                .op("slow write")
                .writes([a])
                .push_sync(|_| {
                    thread::sleep(Duration::from_millis(50));
                    Ok(())
                })
                .unwrap();
            go.send(()).unwrap();
            let waited = rx.recv().unwrap();
            assert!(waited.is_ok(), "{kind}: {waited:?}");
            assert_eq!(out.load(Ordering::SeqCst), 1, "{kind}");
            engine.wait_for_all().unwrap();
        });
    }
}

/// An async op that handed its completion to another thread may wait for ops that need its
/// vars: that thread completes it meanwhile. (The engine cannot tell who holds a completion,
/// so the cycle check leaves async ops out.)
#[test]
fn an_async_op_that_handed_its_completion_away_can_wait_for_ops_that_need_its_vars() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let [a, b] = [(); 2].map(|()| engine.new_var().unwrap());
            let out = Arc::new(AtomicU64::new(0));
            let (tx, rx) = mpsc::channel();
            {
                let (inner, out) = (engine.clone(), Arc::clone(&out));
                engine
                    .op("hands its completion away, then waits")
                    .writes([a])
                    .push_async(move |_, done| {
                        push_copy(&inner, a, b, &out, 1);
                        let completer = thread::spawn(move || {
                            thread::sleep(Duration::from_millis(20));
                            done.ok();
                        });
                        tx.send(inner.wait_for_var(b)).unwrap();
                        completer.join().unwrap();
                    })
                    .unwrap();
            }
            let waited = rx.recv().unwrap();
            assert!(waited.is_ok(), "{kind}: {waited:?}");
            assert_eq!(out.load(Ordering::SeqCst), 1, "{kind}");
            engine.wait_for_all().unwrap();
        });
    }
}

/// A withdrawn wait takes nothing: the failure of the op it waited for stays on the var for
/// the next wait.
#[test]
fn a_withdrawn_wait_leaves_the_vars_failure_in_place() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let [a, b] = [(); 2].map(|()| engine.new_var().unwrap());
            let waited = inside_op(&engine, &[], &[a], move |inner| {
                inner
                    .op("fails")
                    .reads([a])
                    .writes([b])
                    .push_sync(|_| Err("child failed".into()))
                    .unwrap();
                inner.wait_for_var(b)
            });
            assert!(
                matches!(waited, Err(EngineError::WaitDeadlock { .. })),
                "{kind}: {waited:?}"
            );
            match engine.wait_for_var(b) {
                Err(EngineError::OpFailed(failure)) => {
                    assert_eq!(failure.op_name(), "fails", "{kind}");
                }
                other => panic!("{kind}: {other:?}"),
            }
            engine.wait_for_var(b).unwrap();
            // Reported by the wait above already.
            engine.wait_for_all().unwrap();
        });
    }
}

/// An op that pushes a child and waits for it, the child doing the same down to `depth`: each
/// level stores its depth into `deepest` once its child returned.
fn push_nested(engine: &Engine, var: Var, depth: u64, deepest: &Arc<AtomicU64>) {
    push_nested_as(engine, FnProperty::Normal, var, depth, deepest);
}

/// As `push_nested`, every op with property `prop`.
fn push_nested_as(
    engine: &Engine,
    prop: FnProperty,
    var: Var,
    depth: u64,
    deepest: &Arc<AtomicU64>,
) {
    let (inner, deepest) = (engine.clone(), Arc::clone(deepest));
    engine
        .op("nested")
        .writes([var])
        .prop(prop)
        .push_sync(move |_| {
            if depth > 1 {
                let child = inner.new_var()?;
                push_nested_as(&inner, prop, child, depth - 1, &deepest);
                inner.wait_for_var(child)?;
                inner.delete_var(child, || ())?;
            }
            deepest.fetch_max(depth, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
}

/// One worker: the op waiting for its child occupies it, and so does each child waiting for
/// its own; stand-in threads run them.
#[test]
fn an_op_on_the_only_worker_can_wait_for_ops_queued_behind_it() {
    for kind in THREADED {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 1);
            let var = engine.new_var().unwrap();
            let deepest = Arc::new(AtomicU64::new(0));
            push_nested(&engine, var, 4, &deepest);
            engine.wait_for_var(var).unwrap();
            assert_eq!(deepest.load(Ordering::SeqCst), 4, "{kind}");
            engine.wait_for_all().unwrap();
            assert_eq!(engine.stats().live_vars, 1, "{kind}");
        });
    }
}

/// The same on the CPU priority block, with one thread.
#[test]
fn a_prioritized_op_can_wait_for_prioritized_ops_queued_behind_it() {
    within(60, "priority block", || {
        let engine = Engine::new(
            EngineConfig::default()
                .kind(EngineKind::ThreadedPerDevice)
                .cpu_priority_threads(1),
        )
        .unwrap();
        let var = engine.new_var().unwrap();
        let deepest = Arc::new(AtomicU64::new(0));
        push_nested_as(&engine, FnProperty::CpuPrioritized, var, 3, &deepest);
        engine.wait_for_var(var).unwrap();
        assert_eq!(deepest.load(Ordering::SeqCst), 3);
        engine.wait_for_all().unwrap();
    });
}

/// More ops waiting for their children than workers.
#[test]
fn more_waiting_ops_than_workers_do_not_starve_their_block() {
    for kind in THREADED {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let deepest = Arc::new(AtomicU64::new(0));
            let vars: Vec<Var> = (0..6).map(|_| engine.new_var().unwrap()).collect();
            for &var in &vars {
                push_nested(&engine, var, 2, &deepest);
            }
            engine.wait_for_all().unwrap();
            assert_eq!(deepest.load(Ordering::SeqCst), 2, "{kind}");
            for var in vars {
                engine.delete_var(var, || ()).unwrap();
            }
            engine.wait_for_all().unwrap();
            assert_eq!(engine.stats().live_vars, 0, "{kind}");
        });
    }
}

/// Many ops on one worker, each waiting for a var that only the test releases: stand-ins take
/// the waiting ops' places one after another, but never more than the engine's bound at once,
/// and all of them complete once the var is released.
#[test]
fn stand_ins_are_bounded() {
    const WAITERS: usize = 200;
    // `MAX_STAND_INS` in `stand_in.rs`, plus the worker itself.
    const MAX_THREADS: usize = 64 + 1;
    for kind in THREADED {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 1);
            let gate = engine.new_var().unwrap();
            let done = held_async_op(&engine, gate);
            let threads = Arc::new(Mutex::new(HashSet::new()));
            for _ in 0..WAITERS {
                let (inner, threads) = (engine.clone(), Arc::clone(&threads));
                engine
                    .op("waits for the gate")
                    .push_sync(move |_| {
                        threads.lock().unwrap().insert(thread::current().id());
                        inner.wait_for_var(gate)?;
                        Ok(())
                    })
                    .unwrap();
            }
            // Long enough for the bound to be reached: a stand-in per millisecond at most.
            thread::sleep(Duration::from_millis(300));
            let started = threads.lock().unwrap().len();
            assert!(started > 1, "{kind}: no stand-in started");
            assert!(started <= MAX_THREADS, "{kind}: {started} threads");
            done.ok();
            engine.wait_for_all().unwrap();
            let used = threads.lock().unwrap().len();
            assert!(used <= MAX_THREADS, "{kind}: {used} threads");
        });
    }
}

/// Waits inside ops racing pushes, completions and each other, on 1, 2 and 4 workers. Every
/// answer is known: ops that wait for a var of the first group (all of whose ops were pushed
/// before them) must get `Ok`; ops that push a child depending on their own var and wait for
/// it must get `WaitDeadlock`.
#[test]
fn concurrent_waits_get_exactly_the_cycles_there_are() {
    let (first, second) = if cfg!(debug_assertions) {
        (1_000, 300)
    } else {
        (10_000, 3_000)
    };
    for kind in THREADED {
        for workers in [1, 2, 4] {
            within(120, &format!("{kind} x{workers}"), move || {
                let engine = engine(kind, workers);
                let old: Vec<Var> = (0..16).map(|_| engine.new_var().unwrap()).collect();
                let new: Vec<Var> = (0..16).map(|_| engine.new_var().unwrap()).collect();
                let wrong = Arc::new(Mutex::new(Vec::<String>::new()));
                let mut rng = common::Rng(u64::try_from(workers).unwrap());
                for _ in 0..first {
                    let (r, w) = (old[rng.below(16)], old[rng.below(16)]);
                    let reads: &[Var] = if r == w { &[] } else { &[r] };
                    engine
                        .op("first")
                        .reads(reads)
                        .writes([w])
                        .push_sync(|_| {
                            // Long enough that the waits below find these ops pending.
                            let start = std::time::Instant::now();
                            while start.elapsed() < Duration::from_micros(20) {
                                std::hint::spin_loop();
                            }
                            Ok(())
                        })
                        .unwrap();
                }
                for i in 0..second {
                    let own = new[rng.below(16)];
                    let target = old[rng.below(16)];
                    let cycle = i % 3 == 0;
                    let (inner, wrong) = (engine.clone(), Arc::clone(&wrong));
                    engine
                        .op("second")
                        .writes([own])
                        .push_sync(move |_| {
                            let waited = if cycle {
                                let child = inner.new_var().unwrap();
                                inner
                                    .op("child")
                                    .reads([own])
                                    .writes([child])
                                    .push_sync(|_| Ok(()))
                                    .unwrap();
                                let waited = inner.wait_for_var(child);
                                inner.delete_var(child, || ()).unwrap();
                                waited
                            } else {
                                inner.wait_for_var(target)
                            };
                            match (cycle, &waited) {
                                (true, Err(EngineError::WaitDeadlock { .. })) | (false, Ok(())) => {
                                }
                                _ => wrong
                                    .lock()
                                    .unwrap()
                                    .push(format!("cycle {cycle}: {waited:?}")),
                            }
                            Ok(())
                        })
                        .unwrap();
                }
                engine.wait_for_all().unwrap();
                let wrong = wrong.lock().unwrap();
                assert!(
                    wrong.is_empty(),
                    "{kind} x{workers}: {} wrong, e.g. {:?}",
                    wrong.len(),
                    wrong.first()
                );
                for var in old.into_iter().chain(new) {
                    engine.delete_var(var, || ()).unwrap();
                }
                engine.wait_for_all().unwrap();
                assert_eq!(engine.stats().live_vars, 0, "{kind} x{workers}");
            });
        }
    }
}

/// What a value's `Drop` saw of its engine: the outcome of its calls, and whether the op that
/// released it was still counted pending.
type DropReport = Result<u64, String>;

/// A value that owns a clone of its engine (a model holding the engine it trains on) and whose
/// `Drop` uses it as a user's might: waits for every op, makes a value, pushes an op on it,
/// reads it and takes it back; then drops its clone, the engine's last handle in some tests.
struct CallsEngine {
    engine: Option<Engine>,
    report: mpsc::Sender<DropReport>,
}

impl CallsEngine {
    fn new(engine: &Engine) -> (Self, mpsc::Receiver<DropReport>) {
        let (report, reports) = mpsc::channel();
        let value = CallsEngine {
            engine: Some(engine.clone()),
            report,
        };
        (value, reports)
    }
}

impl Drop for CallsEngine {
    fn drop(&mut self) {
        let engine = self.engine.take().expect("dropped once");
        let calls = || -> Result<u64, EngineError> {
            engine.wait_for_all()?;
            let scratch = engine.data(1_u64)?;
            engine
                .op("inside a value's drop")
                .write(&scratch)
                .push_sync(|_, x| *x += 1)?;
            let read = *engine.read(&scratch)?;
            let taken = engine.take(scratch).map_err(|error| error.to_string());
            Ok(read + taken.expect("the value's own data"))
        };
        let outcome = calls().map_err(|error| error.to_string());
        drop(engine);
        let _ = self.report.send(outcome);
    }
}

/// The drop's report, within a timeout that turns a hang into a failure.
fn dropped(reports: &mpsc::Receiver<DropReport>, what: &str) {
    match reports.recv_timeout(Duration::from_secs(30)) {
        Ok(outcome) => assert_eq!(outcome, Ok(4), "{what}"),
        Err(error) => panic!("{what}: the value's drop did not finish ({error})"),
    }
}

/// Issue 44's reproduction: the value holds the engine's last handle when its own last handle
/// drops (its var idle), on the dropping thread.
#[test]
fn a_value_that_owns_its_engine_is_released_with_its_last_handle() {
    struct Model {
        _engine: Engine,
        w: Vec<f32>,
    }
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine =
                Engine::new(EngineConfig::default().kind(kind).cpu_worker_threads(1)).unwrap();
            let d = engine
                .data(Model {
                    _engine: engine.clone(),
                    w: vec![1.0; 16],
                })
                .unwrap();
            engine
                .op("train")
                .write(&d)
                .push_sync(|_, m| m.w.iter_mut().for_each(|x| *x *= 2.0))
                .unwrap();
            engine.wait_for_all().unwrap();
            drop(engine);
            drop(d);
        });
    }
}

/// Every path a value's release takes, with a `Drop` that calls the engine (which would hang if
/// the release ran before its op was counted done, under a lock of the engine, or on a worker
/// whose block it then starves) and, last, drops the engine's last handle.
#[test]
fn a_value_s_drop_may_call_its_engine_on_every_path_of_its_release() {
    for kind in KINDS {
        within(120, &format!("{kind}"), move || {
            // The var idle: released by the thread that drops the last handle.
            let engine = common::engine(kind, 1);
            let (value, reports) = CallsEngine::new(&engine);
            let data = engine.data(value).unwrap();
            drop(engine);
            drop(data);
            dropped(&reports, &format!("{kind}: idle var"));

            // By the completion of its last op, on a worker, with another op queued behind it
            // on the block (one worker: the drop's waits need a stand-in).
            let engine = common::engine(kind, 1);
            let (value, reports) = CallsEngine::new(&engine);
            let data = engine.data(value).unwrap();
            let gate = engine.new_var().unwrap();
            let open = held_async_op(&engine, gate);
            engine
                .op("gated")
                .write(&data)
                .reads([gate])
                .push_sync(|_, _| {})
                .unwrap();
            engine.op("behind").reads([gate]).push_sync(|_| {}).unwrap();
            drop(data);
            open.ok();
            dropped(&reports, &format!("{kind}: op completion"));
            engine.wait_for_all().unwrap();

            // By an async op's completion, on a thread of the user's.
            let (value, reports) = CallsEngine::new(&engine);
            let data = engine.data(value).unwrap();
            let (send, held) = mpsc::channel();
            engine
                .op("async")
                .write(&data)
                .push_async(move |_, held| send.send(held).unwrap())
                .unwrap();
            let held = held.recv().unwrap();
            drop(data);
            thread::spawn(move || held.ok()).join().unwrap();
            dropped(&reports, &format!("{kind}: async completion"));

            // By a guard's drop, on this thread: the guard holds a var deleted by hand, whose
            // callback drops the value.
            let (value, reports) = CallsEngine::new(&engine);
            let held = engine.data(0_u8).unwrap();
            let guard = engine.write(&held).unwrap();
            engine.delete_var(held.var(), move || drop(value)).unwrap();
            drop(guard);
            dropped(&reports, &format!("{kind}: guard"));

            // By a deletion by hand (`delete_var`'s callback), whose var an op still holds.
            let (value, reports) = CallsEngine::new(&engine);
            let var = engine.new_var().unwrap();
            let done = held_async_op(&engine, var);
            engine.delete_var(var, move || drop(value)).unwrap();
            done.ok();
            dropped(&reports, &format!("{kind}: delete_var callback"));

            // At the engine's teardown: the value holds the last handle, its op in flight.
            let (value, reports) = CallsEngine::new(&engine);
            let data = engine.data(value).unwrap();
            let gate = engine.new_var().unwrap();
            let open = held_async_op(&engine, gate);
            engine
                .op("in flight")
                .write(&data)
                .reads([gate])
                .push_sync(|_, _| {})
                .unwrap();
            drop(engine);
            drop(data);
            open.ok();
            dropped(&reports, &format!("{kind}: teardown"));
        });
    }
}

/// `wait_for_all` and its future return once the values whose ops they waited for are
/// dropped, also when a drop is slow and runs on another thread after its op was counted done.
#[test]
fn wait_for_all_waits_for_the_values_released_after_their_ops() {
    struct Slow(Arc<AtomicU64>);
    impl Drop for Slow {
        fn drop(&mut self) {
            thread::sleep(Duration::from_millis(50));
            self.0.store(1, Ordering::SeqCst);
        }
    }
    for kind in KINDS {
        for future in [false, true] {
            let engine = common::engine(kind, 2);
            let dropped = Arc::new(AtomicU64::new(0));
            let data = engine.data(Slow(Arc::clone(&dropped))).unwrap();
            let gate = engine.new_var().unwrap();
            let open = held_async_op(&engine, gate);
            engine
                .op("last")
                .write(&data)
                .reads([gate])
                .push_sync(|_, _| {})
                .unwrap();
            drop(data);
            let opener = thread::spawn(move || open.ok());
            if future {
                futures::executor::block_on(engine.wait_for_all_async()).unwrap();
            } else {
                engine.wait_for_all().unwrap();
            }
            assert_eq!(
                dropped.load(Ordering::SeqCst),
                1,
                "{kind}, future: {future}"
            );
            opener.join().unwrap();
        }
    }
}

/// A value released by an op that a worker ran inline, nested in the completion of another
/// (a burst: more ops released onto its block than its queue holds): its `Drop`, which waits
/// for every op, runs once that outer completion is counted done too.
#[test]
fn a_value_released_inside_a_burst_waits_for_the_outer_completion() {
    for kind in THREADED {
        within(120, &format!("{kind}"), move || {
            let engine = common::engine(kind, 1);
            let gate = engine.new_var().unwrap();
            let (open, opened) = mpsc::channel::<()>();
            engine
                .op("gate")
                .writes([gate])
                .push_sync(move |_| opened.recv().unwrap())
                .unwrap();
            let (value, reports) = CallsEngine::new(&engine);
            let data = engine.data(value).unwrap();
            for op in 0..2000 {
                let builder = engine.op("released at once").reads([gate]);
                if op == 1500 {
                    builder.write(&data).push_sync(|_, _| {}).unwrap();
                } else {
                    builder.push_sync(|_| {}).unwrap();
                }
            }
            drop(data);
            open.send(()).unwrap();
            dropped(&reports, &format!("{kind}: burst"));
            engine.wait_for_all().unwrap();
        });
    }
}
