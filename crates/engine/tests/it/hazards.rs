//! Hazards that must end in an error or in normal progress, never in a hang, a leak or a sync op
//! on the wrong thread: a pusher holding a lock its ops take, panicking callbacks and drops,
//! failures never collected by `wait_for_all`, engines dropped inside each other's ops, and
//! waits inside naive ops.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::common::{KINDS, engine, held_async_op, within};
use depengine::{EngineError, EngineKind, FailureCause};

const THREADED: [EngineKind; 2] = [EngineKind::ThreadedPooled, EngineKind::ThreadedPerDevice];

/// Spins for `micros` microseconds.
fn spin(micros: u64) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_micros(micros) {
        std::hint::spin_loop();
    }
}

/// A pusher far ahead of a single worker: every sync op still runs on a worker, never on the
/// pushing thread, however full the worker's queue.
#[test]
fn sync_ops_never_run_on_the_pushing_thread() {
    for kind in THREADED {
        let engine = engine(kind, 1);
        let pusher = thread::current().id();
        let on_pusher = Arc::new(AtomicUsize::new(0));
        for _ in 0..20_000 {
            let on_pusher = Arc::clone(&on_pusher);
            engine
                .op("slow")
                .push_sync(move |_| {
                    if thread::current().id() == pusher {
                        on_pusher.fetch_add(1, Ordering::Relaxed);
                    }
                    spin(2);
                    Ok(())
                })
                .unwrap();
        }
        engine.wait_for_all().unwrap();
        assert_eq!(on_pusher.load(Ordering::Relaxed), 0, "{kind}");
    }
}

/// The custom-op pattern of `MXNet`: the pusher holds a lock (there, the GIL) while it pushes
/// ops that take it.
#[test]
fn a_pusher_holding_a_lock_its_ops_take_does_not_deadlock() {
    for kind in THREADED {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 1);
            let lock = Arc::new(Mutex::new(0_u64));
            let held = lock.lock().unwrap();
            for _ in 0..5_000 {
                let lock = Arc::clone(&lock);
                engine
                    .op("locks")
                    .push_sync(move |_| {
                        *lock.lock().unwrap() += 1;
                        Ok(())
                    })
                    .unwrap();
            }
            drop(held);
            engine.wait_for_all().unwrap();
            assert_eq!(*lock.lock().unwrap(), 5_000);
        });
    }
}

/// An op that completes an async op while holding a lock: the many ops that completion releases
/// onto the op's own block (more than its queue's backlog) wait in the queue; none runs nested
/// inside the completing op, where it would take the lock again.
#[test]
fn ops_released_inside_an_op_function_never_run_nested_in_it() {
    for kind in THREADED {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 1);
            let gate = engine.new_var().unwrap();
            let token = held_async_op(&engine, gate);
            let lock = Arc::new(Mutex::new(0_u64));
            for _ in 0..5_000 {
                let lock = Arc::clone(&lock);
                engine
                    .op("behind the gate")
                    .reads([gate])
                    .push_sync(move |_| {
                        *lock.lock().map_err(|_| "poisoned")? += 1;
                        Ok(())
                    })
                    .unwrap();
            }
            {
                let lock = Arc::clone(&lock);
                engine
                    .op("opens the gate")
                    .push_sync(move |_| {
                        let held = lock.lock().map_err(|_| "poisoned")?;
                        token.ok();
                        drop(held);
                        Ok(())
                    })
                    .unwrap();
            }
            engine.wait_for_all().unwrap();
            assert_eq!(*lock.lock().unwrap(), 5_000, "{kind}");
        });
    }
}

/// Asserts that `result` is a panic of an op named `op` with message `message`.
fn assert_panic(result: depengine::Result<()>, op: &str, message: &str, kind: EngineKind) {
    match result {
        Err(EngineError::OpFailed(failure)) => {
            assert_eq!(failure.op_name(), op, "{kind}");
            assert!(
                matches!(failure.cause(), FailureCause::Panic(m) if m == message),
                "{kind}: {failure}"
            );
        }
        other => panic!("{kind}: expected the panic of `{op}`, got {other:?}"),
    }
}

#[test]
fn a_panicking_delete_callback_is_reported_and_hangs_nothing() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            // Deferred: the callback runs inside the completion of the var's last op, on the
            // completing thread.
            let (v, w) = (engine.new_var().unwrap(), engine.new_var().unwrap());
            let done = held_async_op(&engine, v);
            engine
                .delete_var(v, || panic!("deferred callback"))
                .unwrap();
            let after = Arc::new(AtomicBool::new(false));
            {
                let after = Arc::clone(&after);
                engine
                    .op("after")
                    .writes([w])
                    .push_sync(move |_| {
                        after.store(true, Ordering::Relaxed);
                        Ok(())
                    })
                    .unwrap();
            }
            done.ok();
            assert_panic(
                engine.wait_for_all(),
                "delete_var",
                "deferred callback",
                kind,
            );
            assert!(after.load(Ordering::Relaxed), "{kind}");
            // At once, on this thread: `delete_var` itself succeeds.
            let idle = engine.new_var().unwrap();
            engine
                .delete_var(idle, || panic!("immediate callback"))
                .unwrap();
            assert_panic(
                engine.wait_for_all(),
                "delete_var",
                "immediate callback",
                kind,
            );
            // The engine goes on.
            engine.op("next").writes([w]).push_sync(|_| Ok(())).unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(engine.stats().pending_ops, 0, "{kind}");
        });
    }
}

/// A value whose `Drop` panics.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        assert!(thread::panicking(), "drop of a skipped op's closure");
    }
}

#[test]
fn a_panicking_drop_of_a_skipped_ops_closure_hangs_nothing() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let (v, w) = (engine.new_var().unwrap(), engine.new_var().unwrap());
            engine
                .op("fails")
                .writes([v])
                .push_sync(|_| Err("first".into()))
                .unwrap();
            let captured = PanicsOnDrop;
            engine
                .op("skipped")
                .reads([v])
                .writes([w])
                .push_sync(move |_| {
                    let _keep = &captured;
                    Ok(())
                })
                .unwrap();
            let failure = match engine.wait_for_all() {
                Err(EngineError::OpFailed(failure)) => failure,
                other => panic!("{kind}: {other:?}"),
            };
            assert_eq!(failure.op_name(), "fails", "{kind}");
            assert_eq!(engine.stats().pending_ops, 0, "{kind}");
        });
    }
}

/// Failures handled with `wait_for_var` alone, never with `wait_for_all`: the failure log the
/// engine keeps for `wait_for_all` stays small.
#[test]
fn failures_never_collected_by_wait_for_all_do_not_accumulate() {
    let rounds = if cfg!(debug_assertions) {
        5_000
    } else {
        50_000
    };
    for kind in KINDS {
        let engine = engine(kind, 2);
        let v = engine.new_var().unwrap();
        for round in 0..rounds {
            engine
                .op("fails")
                .writes([v])
                .push_sync(|_| Err("again".into()))
                .unwrap();
            assert!(engine.wait_for_var(v).is_err(), "{kind} round {round}");
        }
        let logged = engine.stats().logged_failures;
        assert!(
            logged <= 256,
            "{kind}: {logged} entries after {rounds} failures"
        );
        // Every failure was returned by a `wait_for_var`: nothing left to report.
        engine.wait_for_all().unwrap();
        assert_eq!(engine.stats().logged_failures, 0, "{kind}");
    }
}

/// The last handle of engine `b`, dropped inside an op of engine `a`, still shuts `b` down:
/// its pending op runs before the drop returns.
#[test]
fn dropping_an_engine_inside_another_engines_op_shuts_it_down() {
    for a_kind in KINDS {
        for b_kind in THREADED {
            within(60, &format!("{a_kind} / {b_kind}"), move || {
                let a = engine(a_kind, 2);
                let b = engine(b_kind, 1);
                let ran = Arc::new(AtomicBool::new(false));
                {
                    let ran = Arc::clone(&ran);
                    b.op("slow")
                        .push_sync(move |_| {
                            thread::sleep(Duration::from_millis(50));
                            ran.store(true, Ordering::Relaxed);
                            Ok(())
                        })
                        .unwrap();
                }
                let seen = Arc::new(AtomicBool::new(false));
                {
                    let (ran, seen) = (Arc::clone(&ran), Arc::clone(&seen));
                    a.op("drops b")
                        .push_sync(move |_| {
                            drop(b);
                            seen.store(ran.load(Ordering::Relaxed), Ordering::Relaxed);
                            Ok(())
                        })
                        .unwrap();
                }
                a.wait_for_all().unwrap();
                assert!(
                    seen.load(Ordering::Relaxed),
                    "{a_kind} / {b_kind}: b's op had not run when its drop returned"
                );
            });
        }
    }
}

/// An op that pushes a child and waits for it: on `Naive` the child is queued behind the
/// waiting op on the same thread, and the wait runs it.
#[test]
fn an_op_can_wait_for_a_child_it_pushed() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, 2);
            let (parent, child) = (engine.new_var().unwrap(), engine.new_var().unwrap());
            let value = Arc::new(AtomicUsize::new(0));
            let seen = Arc::new(AtomicUsize::new(0));
            {
                let (inner, value, seen) = (engine.clone(), Arc::clone(&value), Arc::clone(&seen));
                engine
                    .op("parent")
                    .writes([parent])
                    .push_sync(move |_| {
                        let set = Arc::clone(&value);
                        inner.op("child").writes([child]).push_sync(move |_| {
                            set.store(7, Ordering::Relaxed);
                            Ok(())
                        })?;
                        inner.wait_for_var(child)?;
                        seen.store(value.load(Ordering::Relaxed), Ordering::Relaxed);
                        Ok(())
                    })
                    .unwrap();
            }
            engine.wait_for_all().unwrap();
            assert_eq!(seen.load(Ordering::Relaxed), 7, "{kind}");
        });
    }
}
