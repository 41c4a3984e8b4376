//! The API, the failure rules, misuse errors and shutdown, on every engine kind.
#![allow(
    clippy::many_single_char_names,
    clippy::doc_markdown,
    clippy::unreadable_literal,
    reason = "tests: short var names, MXNet named in docs, seeds"
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::common::{self, KINDS, engine};
use depengine::{
    BackendError, Completion, Context, DeviceBackend, Engine, EngineConfig, EngineError,
    EngineKind, Executor, FailureCause, FnProperty,
};
use depengine_cpu::WorkerBlock;

#[test]
fn ops_on_one_var_run_in_push_order() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let v = engine.new_var().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let ops = if cfg!(miri) { 12 } else { 200 };
        for i in 0..ops {
            let log = Arc::clone(&log);
            engine
                .op("append")
                .writes([v])
                .push_sync(move |_| {
                    log.lock().unwrap().push(i);
                    Ok(())
                })
                .unwrap();
        }
        engine.wait_for_var(v).unwrap();
        assert_eq!(*log.lock().unwrap(), (0..ops).collect::<Vec<_>>(), "{kind}");
    }
}

#[test]
fn reads_see_the_write_before_them() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let v = engine.new_var().unwrap();
        let value = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let rounds = if cfg!(miri) { 3 } else { 20 };
        for round in 1..=rounds {
            let value2 = Arc::clone(&value);
            engine
                .op("write")
                .writes([v])
                .push_sync(move |_| {
                    value2.store(round, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
            for _ in 0..3 {
                let (value, seen) = (Arc::clone(&value), Arc::clone(&seen));
                engine
                    .op("read")
                    .reads([v])
                    .push_sync(move |_| {
                        seen.lock()
                            .unwrap()
                            .push((round, value.load(Ordering::Relaxed)));
                        Ok(())
                    })
                    .unwrap();
            }
        }
        engine.wait_for_all().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3 * rounds);
        assert!(seen.iter().all(|(round, got)| round == got), "{kind}");
    }
}

#[test]
fn async_ops_complete_from_other_threads() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let v = engine.new_var().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let ops = if cfg!(miri) { 6 } else { 50 };
        for _ in 0..ops {
            let count = Arc::clone(&count);
            engine
                .op("async")
                .writes([v])
                .prop(FnProperty::Async)
                .push_async(move |_, done| {
                    std::thread::spawn(move || {
                        count.fetch_add(1, Ordering::Relaxed);
                        done.ok();
                    });
                })
                .unwrap();
        }
        engine.wait_for_var(v).unwrap();
        assert_eq!(count.load(Ordering::Relaxed), ops, "{kind}");
    }
}

#[test]
fn ready_async_ops_run_on_the_pusher_in_per_device() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let v = engine.new_var().unwrap();
    let me = std::thread::current().id();
    let (tx, rx) = mpsc::channel();
    engine
        .op("async")
        .writes([v])
        .prop(FnProperty::Async)
        .push_async(move |_, done| {
            tx.send(std::thread::current().id()).unwrap();
            done.ok();
        })
        .unwrap();
    assert_eq!(rx.recv().unwrap(), me);
    engine.wait_for_all().unwrap();
}

/// A `wait_for_var` returns once the op it waited for released every var, not only the one
/// waited on: an `Async` op pushed on them as it returns is ready, and runs on the pushing
/// thread. The ops are completed by a thread on this one's core, which the waiter, woken, would
/// preempt before the completion released the op's other var.
#[test]
fn a_wait_returns_with_every_var_of_the_op_it_waited_for_released() {
    let engine = engine(EngineKind::ThreadedPerDevice, 1);
    let [waited, other] = [(); 2].map(|()| engine.new_var().unwrap());
    let core = core_affinity::get_core_ids().and_then(|cores| cores.first().copied());
    let pin = move || {
        if let Some(core) = core {
            core_affinity::set_for_current(core);
        }
    };
    pin();
    let (completions, completer) = mpsc::channel::<Completion>();
    let thread = std::thread::spawn(move || {
        pin();
        for done in completer {
            done.ok();
        }
    });
    let me = std::thread::current().id();
    let rounds = if cfg!(miri) { 4 } else { 300 };
    for round in 0..rounds {
        let (ran, ran_on) = mpsc::channel();
        let completions = completions.clone();
        engine
            .op("async")
            .reads([waited])
            .writes([other])
            .prop(FnProperty::Async)
            .push_async(move |_, done| {
                ran.send(std::thread::current().id()).unwrap();
                completions.send(done).unwrap();
            })
            .unwrap();
        assert_eq!(ran_on.recv().unwrap(), me, "round {round}");
        engine.wait_for_var(waited).unwrap();
    }
    drop(completions);
    thread.join().unwrap();
    engine.wait_for_all().unwrap();
}

/// A completion that releases two waits wakes each waiter before an op runs that the second
/// wait's completion releases: here, on the naive engine, an op queued behind the second wait
/// runs nested in that completion, and waits for both waiters to have woken.
#[test]
fn released_waiters_are_woken_before_an_op_the_waits_release_runs() {
    let engine = engine(EngineKind::Naive, 1);
    // `a` first: the graph releases an op's vars by index.
    let [a, b] = [(); 2].map(|()| engine.new_var().unwrap());
    let (completions, completion) = mpsc::channel::<Completion>();
    engine
        .op("held")
        .writes([a, b])
        .push_async(move |_, done| completions.send(done).unwrap())
        .unwrap();
    let done = completion.recv().unwrap();
    let (woke, waiters_woke) = mpsc::channel();
    let waiters: Vec<_> = [a, b]
        .map(|var| {
            let (wait, woke) = (engine.wait_for_var_async(var), woke.clone());
            std::thread::spawn(move || {
                futures::executor::block_on(wait).unwrap();
                let _ = woke.send(var);
            })
        })
        .into();
    let (saw, seen) = mpsc::channel();
    engine
        .op("behind the second wait")
        .writes([b])
        .push_sync(move |_| {
            let both = (0..2).all(|_| waiters_woke.recv_timeout(Duration::from_secs(10)).is_ok());
            saw.send(both).unwrap();
        })
        .unwrap();
    std::thread::spawn(move || done.ok()).join().unwrap();
    assert!(seen.recv().unwrap(), "a waiter was not woken");
    for waiter in waiters {
        waiter.join().unwrap();
    }
    engine.wait_for_all().unwrap();
}

#[test]
fn rule_1_and_2_failures_land_on_writes_and_propagate() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let [a, b, c, d] = [(); 4].map(|()| engine.new_var().unwrap());
        let ran = Arc::new(AtomicUsize::new(0));
        engine
            .op("bad")
            .reads([d])
            .writes([a])
            .push_sync(|_| Err("boom".into()))
            .unwrap();
        let r = Arc::clone(&ran);
        engine
            .op("dependent")
            .reads([a])
            .writes([b])
            .push_sync(move |_| {
                r.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        let r = Arc::clone(&ran);
        engine
            .op("transitive")
            .reads([b])
            .writes([c])
            .push_sync(move |_| {
                r.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        let r = Arc::clone(&ran);
        engine
            .op("unrelated")
            .reads([d])
            .push_sync(move |_| {
                r.fetch_add(100, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        for var in [a, b, c] {
            match engine.wait_for_var(var) {
                Err(EngineError::OpFailed(failure)) => {
                    assert_eq!(failure.op_name(), "bad", "{kind}");
                    assert!(failure.to_string().contains("boom"));
                }
                other => panic!("{kind}: {other:?}"),
            }
        }
        // Read-only var of the failed op: untouched.
        engine.wait_for_var(d).unwrap();
        assert_eq!(
            ran.load(Ordering::Relaxed),
            100,
            "{kind}: dependents must not run"
        );
        // Rule 3: wait_for_var cleared each var it reported.
        engine.wait_for_var(a).unwrap();
        // Rule 4: the root was reported by wait_for_var already.
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn rule_3_a_cleared_var_is_usable_again() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let v = engine.new_var().unwrap();
        engine
            .op("bad")
            .writes([v])
            .push_sync(|_| Err("first".into()))
            .unwrap();
        assert!(matches!(
            engine.wait_for_var(v),
            Err(EngineError::OpFailed(_))
        ));
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        engine
            .op("good")
            .writes([v])
            .push_sync(move |_| {
                r.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        engine.wait_for_var(v).unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 1, "{kind}");
        // Reported by wait_for_var: wait_for_all does not report it again.
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn rule_4_wait_for_all_reports_the_first_failure_once_and_clears_vars() {
    for kind in KINDS {
        let engine = engine(kind, 1);
        let [a, b] = [(); 2].map(|()| engine.new_var().unwrap());
        engine
            .op("first")
            .writes([a])
            .push_sync(|_| Err("one".into()))
            .unwrap();
        engine.wait_for_var(a).unwrap_err();
        engine
            .op("second")
            .writes([a])
            .push_sync(|_| Err("two".into()))
            .unwrap();
        engine
            .op("third")
            .reads([a])
            .writes([b])
            .push_sync(|_| Err("never runs".into()))
            .unwrap();
        match engine.wait_for_all() {
            Err(EngineError::OpFailed(failure)) => assert_eq!(failure.op_name(), "second"),
            other => panic!("{kind}: {other:?}"),
        }
        // Cleared everywhere, and reported once.
        engine.wait_for_var(a).unwrap();
        engine.wait_for_var(b).unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(engine.stats().failed_vars, 0);
    }
}

#[test]
fn panics_and_dropped_completions_are_failures() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let [a, b, c] = [(); 3].map(|()| engine.new_var().unwrap());
        engine
            .op("panics")
            .writes([a])
            .push_sync(|_| panic!("op panic (expected in this test)"))
            .unwrap();
        engine
            .op("drops")
            .writes([b])
            .push_async(|_, done| drop(done))
            .unwrap();
        engine
            .op("panics async")
            .writes([c])
            .push_async(|_, _done| panic!("async op panic (expected in this test)"))
            .unwrap();
        let cause = |var| match engine.wait_for_var(var) {
            Err(EngineError::OpFailed(failure)) => match failure.cause() {
                FailureCause::Panic(m) => format!("panic: {m}"),
                FailureCause::CompletionDropped => "dropped".to_owned(),
                FailureCause::Error(e) => format!("error: {e}"),
                _ => "other".to_owned(),
            },
            other => panic!("{kind}: {other:?}"),
        };
        assert!(cause(a).contains("expected in this test"), "{kind}");
        assert_eq!(cause(b), "dropped", "{kind}");
        assert!(cause(c).starts_with("panic"), "{kind}");
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn misuse_is_a_typed_error_and_pushes_nothing() {
    for kind in KINDS {
        let engine = engine(kind, 1);
        let [a, b] = [(); 2].map(|()| engine.new_var().unwrap());
        let ok = |_| Ok(());
        assert!(matches!(
            engine.op("x").reads([a, a]).push_sync(ok),
            Err(EngineError::DuplicateVar { .. })
        ));
        assert!(matches!(
            engine.op("x").reads([a]).writes([a]).push_sync(ok),
            Err(EngineError::ReadWriteConflict { .. })
        ));
        let other = common::engine(kind, 1);
        let foreign = other.new_var().unwrap();
        assert!(matches!(
            engine.op("x").writes([foreign]).push_sync(ok),
            Err(EngineError::ForeignVar { .. })
        ));
        let deleted = Arc::new(AtomicUsize::new(0));
        let d = Arc::clone(&deleted);
        engine
            .delete_var(b, move || {
                d.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        assert!(matches!(
            engine.op("x").writes([b]).push_sync(ok),
            Err(EngineError::DeletedVar { .. })
        ));
        assert!(matches!(
            engine.delete_var(b, || ()),
            Err(EngineError::DeletedVar { .. })
        ));
        // Without a device backend (with the `cuda` feature, the CUDA backend on a machine
        // without a GPU), a GPU op is refused at push.
        #[cfg(not(feature = "cuda"))]
        assert!(matches!(
            engine.op("gpu").on(Context::gpu(0)).push_sync(ok),
            Err(EngineError::NoDeviceBackend { .. })
        ));
        assert_eq!(deleted.load(Ordering::Relaxed), 1);
        assert_eq!(engine.stats().pending_ops, 0, "{kind}");
        let _ = a;
    }
}

/// An op naming a stale handle beside the current var of its slot reports the stale one as
/// deleted (not as a duplicate), in either list and order, as an operator does at its push.
#[test]
fn a_stale_handle_beside_its_slots_current_var_is_deleted_not_duplicate() {
    for kind in KINDS {
        let engine = engine(kind, 1);
        let stale = engine.new_var().unwrap();
        engine.delete_var(stale, || ()).unwrap();
        let live = engine.new_var().unwrap();
        assert_eq!(live.index(), stale.index(), "the slot is reused");
        let ok = |_| Ok(());
        let is_stale = |result: depengine::Result<()>| match result {
            Err(EngineError::DeletedVar { var, .. }) => var == stale,
            _ => false,
        };
        assert!(is_stale(engine.op("x").reads([stale, live]).push_sync(ok)));
        assert!(is_stale(engine.op("x").writes([live, stale]).push_sync(ok)));
        assert!(is_stale(
            engine.op("x").reads([live]).writes([stale]).push_sync(ok)
        ));
        let operator = engine
            .operator("x")
            .reads([stale])
            .writes([live])
            .build_sync(ok)
            .unwrap();
        assert!(is_stale(engine.push(&operator, Context::cpu(0), 0)));
        assert_eq!(engine.stats().pending_ops, 0, "{kind}");
    }
}

#[test]
fn waiting_inside_an_op_on_its_own_vars_is_an_error() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let [a, b, c] = [(); 3].map(|()| engine.new_var().unwrap());
        let (tx, rx) = mpsc::channel();
        let inside = engine.clone();
        engine
            .op("waits")
            .reads([b])
            .writes([a])
            .push_sync(move |_| {
                let own_write = inside.wait_for_var(a);
                let own_read = inside.wait_for_var(b);
                let all = inside.wait_for_all();
                let other = inside.wait_for_var(c);
                tx.send((own_write, own_read, all, other)).unwrap();
                Ok(())
            })
            .unwrap();
        let (own_write, own_read, all, other) = rx.recv().unwrap();
        assert!(
            matches!(own_write, Err(EngineError::WaitOnOwnVar { .. })),
            "{kind}"
        );
        assert!(
            matches!(own_read, Err(EngineError::WaitOnOwnVar { .. })),
            "{kind}"
        );
        assert!(matches!(all, Err(EngineError::WaitAllInsideOp)), "{kind}");
        assert!(other.is_ok(), "{kind}");
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn shutdown_completes_everything_and_refuses_pushes() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let v = engine.new_var().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let ran = Arc::clone(&ran);
            engine
                .op("work")
                .writes([v])
                .push_sync(move |_| {
                    ran.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
        }
        let clone = engine.clone();
        engine.shutdown().unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 100, "{kind}");
        assert!(clone.is_shut_down());
        assert!(matches!(
            clone.op("late").writes([v]).push_sync(|_| Ok(())),
            Err(EngineError::ShutDown)
        ));
    }
}

/// A var of a shut-down engine could never be used: creating one is refused too (through any
/// clone), while the vars made before can still be waited for and deleted.
#[test]
fn a_shut_down_engine_creates_no_vars() {
    for kind in KINDS {
        let engine = engine(kind, 1);
        let v = engine.new_var().unwrap();
        let clone = engine.clone();
        engine.shutdown().unwrap();
        assert!(
            matches!(clone.new_var(), Err(EngineError::ShutDown)),
            "{kind}"
        );
        clone.wait_for_var(v).unwrap();
        clone.delete_var(v, || {}).unwrap();
        assert_eq!(clone.stats().live_vars, 0, "{kind}");
    }
}

#[test]
fn dropping_the_engine_runs_every_op_and_leaks_nothing() {
    for kind in KINDS {
        let token = Arc::new(());
        let ran = Arc::new(AtomicUsize::new(0));
        {
            let engine = engine(kind, 2);
            let vars: Vec<_> = (0..16).map(|_| engine.new_var().unwrap()).collect();
            for i in 0..500 {
                let (token, ran) = (Arc::clone(&token), Arc::clone(&ran));
                let w = vars[i % 16];
                let r = vars[(i * 7 + 3) % 16];
                let reads: &[_] = if r == w { &[] } else { &[r] };
                engine
                    .op("work")
                    .reads(reads)
                    .writes([w])
                    .push_sync(move |_| {
                        drop(token);
                        ran.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    })
                    .unwrap();
            }
            for &var in &vars {
                engine.delete_var(var, || ()).unwrap();
            }
            engine.wait_for_all().unwrap();
            let stats = engine.stats();
            assert_eq!(
                (stats.pending_ops, stats.live_vars, stats.waiting_ops),
                (0, 0, 0),
                "{kind}"
            );
        }
        assert_eq!(ran.load(Ordering::Relaxed), 500);
        assert_eq!(
            Arc::strong_count(&token),
            1,
            "{kind}: every op closure was dropped"
        );
    }
}

#[test]
fn reusable_operators() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let v = engine.new_var().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&count);
        let op = engine
            .operator("incr")
            .writes([v])
            .build_sync(move |_| {
                c.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        for p in 0..10 {
            engine.push(&op, Context::cpu(0), p).unwrap();
        }
        let again = op.clone();
        engine.delete_operator(op).unwrap();
        assert!(matches!(
            engine.push(&again, Context::cpu(0), 0),
            Err(EngineError::OperatorDeleted { .. })
        ));
        engine.wait_for_var(v).unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 10, "{kind}");
        assert!(matches!(
            engine
                .operator("bad")
                .reads([v])
                .writes([v])
                .build_sync(|_| Ok(())),
            Err(EngineError::ReadWriteConflict { .. })
        ));
        let async_op = engine
            .operator("async")
            .writes([v])
            .build_async(|_, done| done.fail("async operator failed"))
            .unwrap();
        engine.push(&async_op, Context::cpu(0), 0).unwrap();
        assert!(engine.wait_for_var(v).is_err());
    }
}

#[test]
fn cpu_prioritized_ops_run_in_priority_order() {
    let engine = Engine::new(
        EngineConfig::default()
            .kind(EngineKind::ThreadedPerDevice)
            .cpu_worker_threads(1)
            .cpu_priority_threads(1),
    )
    .unwrap();
    let gate_var = engine.new_var().unwrap();
    let (hold_tx, hold_rx) = mpsc::channel::<()>();
    // Occupy the only priority worker until every op is queued.
    engine
        .op("hold")
        .writes([gate_var])
        .prop(FnProperty::CpuPrioritized)
        .priority(1000)
        .push_sync(move |_| {
            hold_rx.recv().unwrap();
            Ok(())
        })
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    for p in [1, 5, 3, 9, -2] {
        let var = engine.new_var().unwrap();
        let order = Arc::clone(&order);
        engine
            .op("prio")
            .writes([var])
            .prop(FnProperty::CpuPrioritized)
            .priority(p)
            .push_sync(move |_| {
                order.lock().unwrap().push(p);
                Ok(())
            })
            .unwrap();
    }
    hold_tx.send(()).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(*order.lock().unwrap(), [9, 5, 3, 1, -2]);
}

/// A stand-in device backend running "GPU" ops on CPU worker blocks.
struct FakeGpu {
    compute: Arc<WorkerBlock>,
    copy: Arc<WorkerBlock>,
    asked: AtomicUsize,
}

impl DeviceBackend for FakeGpu {
    fn name(&self) -> &'static str {
        "fake-gpu"
    }
    fn compute(&self, device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        if device == 0 {
            Ok(self.compute.clone())
        } else {
            Err(BackendError::NoSuchDevice {
                backend: "fake-gpu".to_owned(),
                device,
            })
        }
    }
    fn copy(&self, _device: u32, _threads: usize) -> Result<Arc<dyn Executor>, BackendError> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        Ok(self.copy.clone())
    }
}

#[test]
fn gpu_ops_go_to_the_device_backend() {
    let backend = Arc::new(FakeGpu {
        compute: Arc::new(WorkerBlock::new("fake-gpu-compute", 1).unwrap()),
        copy: Arc::new(WorkerBlock::new("fake-gpu-copy", 1).unwrap()),
        asked: AtomicUsize::new(0),
    });
    for kind in [EngineKind::ThreadedPooled, EngineKind::ThreadedPerDevice] {
        let engine = Engine::new(
            EngineConfig::default()
                .kind(kind)
                .cpu_worker_threads(1)
                .device_backend(backend.clone()),
        )
        .unwrap();
        let v = engine.new_var().unwrap();
        let (tx, rx) = mpsc::channel();
        for prop in [FnProperty::Normal, FnProperty::CopyToGpu] {
            let tx = tx.clone();
            engine
                .op("gpu")
                .writes([v])
                .on(Context::gpu(0))
                .prop(prop)
                .push_sync(move |_| {
                    tx.send(std::thread::current().name().map(str::to_owned))
                        .unwrap();
                    Ok(())
                })
                .unwrap();
        }
        engine.wait_for_var(v).unwrap();
        let names: Vec<_> = rx.try_iter().map(Option::unwrap).collect();
        assert!(names[0].starts_with("fake-gpu-compute"), "{names:?}");
        assert!(names[1].starts_with("fake-gpu-copy"), "{names:?}");
        assert!(matches!(
            engine.op("gpu1").on(Context::gpu(1)).push_sync(|_| Ok(())),
            Err(EngineError::Backend { .. })
        ));
    }
}

#[test]
fn engine_is_send_sync_clone() {
    fn assert_traits<T: Send + Sync + Clone>() {}
    assert_traits::<Engine>();
}

/// Pushes `n` ops that each wait (10 s at most) until all run: they meet only if the engine
/// runs them in parallel. `stagger`: each is pushed only once the one before runs.
fn meet(engine: &Engine, property: FnProperty, n: usize, stagger: bool) -> depengine::Result<()> {
    let met = Arc::new((Mutex::new(0_usize), std::sync::Condvar::new()));
    let (started_tx, started) = mpsc::channel();
    for _ in 0..n {
        let met = Arc::clone(&met);
        let started_tx = started_tx.clone();
        engine.op("meet").prop(property).push_sync(move |_| {
            let _ = started_tx.send(());
            let (count, changed) = &*met;
            let mut count = count.lock().unwrap();
            *count += 1;
            changed.notify_all();
            let timeout = std::time::Duration::from_secs(10);
            let (_count, wait) = changed
                .wait_timeout_while(count, timeout, |count| *count < n)
                .unwrap();
            if wait.timed_out() {
                Err("the other ops never ran alongside this one".into())
            } else {
                Ok(())
            }
        })?;
        if stagger {
            started.recv().unwrap();
        }
    }
    engine.wait_for_all()
}

#[test]
fn independent_ops_run_in_parallel() {
    for (kind, workers) in [
        (EngineKind::ThreadedPooled, 2),
        (EngineKind::ThreadedPerDevice, 2),
        (EngineKind::ThreadedPerDevice, 4),
    ] {
        let engine = engine(kind, workers);
        let properties: &[FnProperty] = if kind == EngineKind::ThreadedPerDevice {
            &[FnProperty::Normal, FnProperty::CpuPrioritized]
        } else {
            &[FnProperty::Normal]
        };
        for &property in properties {
            for round in 0..20 {
                // Right after the engine went idle (a drainer may still be spinning), after a
                // burst of small ops still draining, and with each op pushed while the ones
                // before already run.
                if round % 3 == 1 {
                    for _ in 0..50 {
                        engine.op("small").push_sync(|_| Ok(())).unwrap();
                    }
                }
                let stagger = round % 3 == 2;
                meet(&engine, property, workers, stagger).unwrap_or_else(|e| {
                    panic!("{kind:?} x{workers} {property:?} round {round}: {e}")
                });
            }
        }
    }
}
