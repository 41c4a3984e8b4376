//! `wait_for_var_async` and `wait_for_all_async`: the futures resolve as their blocking twins
//! return (failures taken and cleared alike), with a minimal executor
//! (`futures::executor::block_on`) and with tokio's, and no thread blocks while they are
//! pending.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::common::{KINDS, engine, held_async_op, within};
use depengine::{Engine, EngineError, EngineKind, Var};
use futures::executor::block_on;

/// Polls `future` once with a waker that wakes nobody.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    std::pin::Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
}

fn failed_op_name(outcome: Result<(), EngineError>) -> String {
    match outcome {
        Err(EngineError::OpFailed(failure)) => failure.op_name().to_owned(),
        other => panic!("expected an op failure, got {other:?}"),
    }
}

/// A var and an op that writes it after 20 ms, setting the flag returned.
fn push_slow_writer(engine: &Engine) -> (Var, Arc<AtomicBool>) {
    let var = engine.new_var().unwrap();
    let written = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&written);
    engine
        .op("slow")
        .writes([var])
        .push_sync(move |_| {
            std::thread::sleep(Duration::from_millis(20));
            flag.store(true, Ordering::Relaxed);
        })
        .unwrap();
    (var, written)
}

#[test]
fn block_on_awaits_a_var_written_by_a_slow_op() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (var, written) = push_slow_writer(&engine);
        block_on(engine.wait_for_var_async(var)).unwrap();
        assert!(written.load(Ordering::Relaxed), "{kind}");
    }
}

#[test]
fn a_failed_writer_is_returned_once_and_cleared() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        engine
            .op("bad")
            .writes([var])
            .push_sync(|_| Err("boom".into()))
            .unwrap();
        assert_eq!(
            failed_op_name(block_on(engine.wait_for_var_async(var))),
            "bad"
        );
        // Cleared, as `wait_for_var` clears it; reported, so `wait_for_all` has nothing.
        block_on(engine.wait_for_var_async(var)).unwrap();
        assert_eq!(engine.stats().failed_vars, 0, "{kind}");
        block_on(engine.wait_for_all_async()).unwrap();
    }
}

#[test]
fn wait_for_all_async_waits_for_many_ops_and_reports_as_wait_for_all() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let vars: Vec<_> = (0..8).map(|_| engine.new_var().unwrap()).collect();
        let ran = Arc::new(AtomicUsize::new(0));
        for op in 0..500 {
            let ran = Arc::clone(&ran);
            engine
                .op("count")
                .writes([vars[op % vars.len()]])
                .push_sync(move |_| {
                    ran.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
        }
        engine
            .op("bad")
            .writes([vars[0]])
            .push_sync(|_| Err("boom".into()))
            .unwrap();
        assert_eq!(failed_op_name(block_on(engine.wait_for_all_async())), "bad");
        assert_eq!(ran.load(Ordering::Relaxed), 500, "{kind}");
        let stats = engine.stats();
        assert_eq!((stats.pending_ops, stats.failed_vars), (0, 0), "{kind}");
        // Taken: the next wait, of either kind, returns nothing.
        block_on(engine.wait_for_all_async()).unwrap();
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn a_var_wait_dropped_before_its_release_leaves_the_failure_on_the_var() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        let held = held_async_op(&engine, var);
        let mut wait = engine.wait_for_var_async(var);
        assert!(poll_once(&mut wait).is_pending(), "{kind}");
        drop(wait);
        held.fail("boom");
        // The abandoned wait op completed and took nothing: the next wait gets the failure.
        assert_eq!(failed_op_name(engine.wait_for_var(var)), "held", "{kind}");
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn a_var_wait_dropped_after_its_release_leaves_the_failure_to_wait_for_all() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        let held = held_async_op(&engine, var);
        let wait = engine.wait_for_var_async(var);
        // Completing the held op releases the wait op at once: it takes the failure.
        held.fail("boom");
        drop(wait);
        engine.wait_for_var(var).unwrap();
        // Returned by no wait: `wait_for_all` returns it.
        assert_eq!(failed_op_name(engine.wait_for_all()), "held", "{kind}");
    }
}

#[test]
fn an_all_wait_dropped_before_the_engine_is_idle_leaves_everything_in_place() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        let held = held_async_op(&engine, var);
        let mut wait = engine.wait_for_all_async();
        assert!(poll_once(&mut wait).is_pending(), "{kind}");
        drop(wait);
        held.fail("boom");
        assert_eq!(failed_op_name(engine.wait_for_all()), "held", "{kind}");
    }
}

#[test]
fn waits_inside_an_op_are_refused_as_their_blocking_twins_refuse_them() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        let inner = engine.clone();
        let outcomes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&outcomes);
        engine
            .op("waits")
            .writes([var])
            .push_sync(move |_| {
                let mut seen = seen.lock().unwrap();
                seen.push(block_on(inner.wait_for_all_async()));
                seen.push(block_on(inner.wait_for_var_async(var)));
            })
            .unwrap();
        engine.wait_for_all().unwrap();
        let outcomes = outcomes.lock().unwrap();
        assert!(
            matches!(outcomes[0], Err(EngineError::WaitAllInsideOp)),
            "{kind}: {outcomes:?}"
        );
        assert!(
            matches!(outcomes[1], Err(EngineError::WaitOnOwnVar { .. })),
            "{kind}: {outcomes:?}"
        );
    }
}

#[test]
fn a_wait_that_cannot_start_returns_its_error_from_the_future() {
    let engine = engine(EngineKind::ThreadedPooled, 1);
    let var = engine.new_var().unwrap();
    engine.delete_var(var, || {}).unwrap();
    assert!(matches!(
        block_on(engine.wait_for_var_async(var)),
        Err(EngineError::DeletedVar { .. })
    ));
}

/// Many tasks await one var held by an async op: all resolve once it completes, and exactly
/// one of them (the first wait op released) takes the failure.
async fn many_awaits_on_one_var(kind: EngineKind) {
    let engine = engine(kind, 2);
    let var = engine.new_var().unwrap();
    let held = held_async_op(&engine, var);
    let waits: Vec<_> = (0..64)
        .map(|_| tokio::spawn(engine.wait_for_var_async(var)))
        .collect();
    held.fail("boom");
    let mut failed = 0;
    for wait in waits {
        match wait.await.unwrap() {
            Ok(()) => {}
            Err(EngineError::OpFailed(failure)) => {
                assert_eq!(failure.op_name(), "held");
                failed += 1;
            }
            Err(other) => panic!("{kind}: {other}"),
        }
    }
    assert_eq!(failed, 1, "{kind}");
    engine.wait_for_all_async().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_multi_thread_many_awaits_on_one_var() {
    for kind in KINDS {
        many_awaits_on_one_var(kind).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn tokio_current_thread_many_awaits_on_one_var() {
    for kind in KINDS {
        many_awaits_on_one_var(kind).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_awaits_a_slow_writer_and_the_idle_engine() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (var, written) = push_slow_writer(&engine);
        let all = tokio::spawn(engine.wait_for_all_async());
        engine.wait_for_var_async(var).await.unwrap();
        assert!(written.load(Ordering::Relaxed), "{kind}");
        all.await.unwrap().unwrap();
    }
}

/// On a current-thread runtime, one task awaits a var and the engine idle while another task
/// on the same thread keeps running and only then completes the op they wait for: were the
/// awaits blocking the thread, that task would never run (a hang, caught by `within`).
#[test]
fn awaiting_blocks_no_thread() {
    within(20, "awaits on a current-thread runtime", || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        for kind in KINDS {
            let engine = engine(kind, 2);
            let var = engine.new_var().unwrap();
            let held = held_async_op(&engine, var);
            runtime.block_on(async {
                let waits = {
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        engine.wait_for_var_async(var).await?;
                        engine.wait_for_all_async().await
                    })
                };
                let ticks = tokio::spawn(async move {
                    let mut ticks = 0;
                    for _ in 0..10 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        ticks += 1;
                    }
                    held.ok();
                    ticks
                });
                assert_eq!(ticks.await.unwrap(), 10, "{kind}");
                waits.await.unwrap().unwrap();
            });
        }
    });
}
