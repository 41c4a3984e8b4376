//! A wait that stays blocked is not silent: after `EngineConfig::stall_warning` it emits a
//! `WARN` event naming what it waits for, and it still returns once the wait is over.

use std::thread;
use std::time::Duration;

use crate::common::{Buffer, KINDS, held_async_op, within};
use depengine::{Engine, EngineConfig, EngineKind, Var};

fn engine(kind: EngineKind, stall_warning: Option<Duration>) -> Engine {
    Engine::new(
        EngineConfig::default()
            .kind(kind)
            .cpu_worker_threads(2)
            .stall_warning(stall_warning),
    )
    .unwrap()
}

/// A new var that an async op holds for `time`, and the thread that completes the op then.
fn held_for(engine: &Engine, time: Duration) -> (Var, thread::JoinHandle<()>) {
    let var = engine.new_var().unwrap();
    let done = held_async_op(engine, var);
    let completer = thread::spawn(move || {
        thread::sleep(time);
        done.ok();
    });
    (var, completer)
}

/// Runs `wait` with a subscriber on this thread; returns what it logged.
fn logged(wait: impl FnOnce()) -> String {
    let buffer = Buffer::default();
    let subscriber = buffer.warn_subscriber();
    tracing::subscriber::with_default(subscriber, wait);
    buffer.log()
}

#[test]
fn a_blocked_wait_for_var_warns_and_names_the_var_and_the_ops_it_waits_for() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, Some(Duration::from_millis(20)));
            let var = engine.new_var_named("weights").unwrap();
            let done = held_async_op(&engine, var);
            engine.op("update").writes([var]).push_sync(|_| {}).unwrap();
            engine.op("log").reads([var]).push_sync(|_| {}).unwrap();
            let completer = thread::spawn(move || {
                thread::sleep(Duration::from_millis(150));
                done.ok();
            });
            let log = logged(|| engine.wait_for_var(var).unwrap());
            completer.join().unwrap();
            let expected = format!(
                "wait_for_var(var \"weights\" (#{}.{})) has been blocked for",
                var.index(),
                var.generation()
            );
            assert!(log.contains("depengine::stall"), "{kind}: {log}");
            assert!(log.contains(&expected), "{kind}: {log}");
            assert!(
                log.contains(": it is held by a running write (an op whose function"),
                "{kind}: {log}"
            );
            assert!(
                log.contains("; queued ahead of this wait: `update` (write), `log` (read); Engine::dump_pending"),
                "{kind}: {log}"
            );
        });
    }
}

/// The op that holds the var is itself blocked in a wait inside its function: the warning
/// says which var that wait waits for.
#[test]
fn a_holder_blocked_in_a_wait_is_named_by_what_it_waits_for() {
    for kind in [EngineKind::ThreadedPooled, EngineKind::ThreadedPerDevice] {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, Some(Duration::from_millis(20)));
            let (outer, inner) = (
                engine.new_var_named("outer").unwrap(),
                engine.new_var_named("inner").unwrap(),
            );
            let done = held_async_op(&engine, inner);
            let (started_tx, started) = std::sync::mpsc::channel();
            let waiter = engine.clone();
            engine
                .op("waits inside")
                .writes([outer])
                .push_sync(move |_| {
                    started_tx.send(())?;
                    waiter.wait_for_var(inner)?;
                    Ok(())
                })
                .unwrap();
            started.recv().unwrap();
            let completer = thread::spawn(move || {
                thread::sleep(Duration::from_millis(150));
                done.ok();
            });
            let log = logged(|| engine.wait_for_var(outer).unwrap());
            completer.join().unwrap();
            let expected = format!(
                "it is held by a running write, an op blocked in wait_for_var(var \"inner\" \
                 (#{}.{})) inside its function",
                inner.index(),
                inner.generation()
            );
            assert!(log.contains(&expected), "{kind}: {log}");
        });
    }
}

#[test]
fn a_blocked_wait_for_all_warns_with_the_pending_count() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, Some(Duration::from_millis(20)));
            let (_var, completer) = held_for(&engine, Duration::from_millis(150));
            let log = logged(|| engine.wait_for_all().unwrap());
            completer.join().unwrap();
            assert!(
                log.contains("wait_for_all has been blocked for"),
                "{kind}: {log}"
            );
            assert!(
                log.contains("1 op(s) pending; Engine::dump_pending writes"),
                "{kind}: {log}"
            );
        });
    }
}

#[test]
fn no_warning_when_switched_off_or_not_due() {
    for (stall_warning, what) in [(None, "off"), (Some(Duration::from_secs(30)), "not due")] {
        let engine = engine(EngineKind::ThreadedPerDevice, stall_warning);
        let (var, completer) = held_for(&engine, Duration::from_millis(100));
        let log = logged(|| {
            engine.wait_for_var(var).unwrap();
            engine.wait_for_all().unwrap();
        });
        completer.join().unwrap();
        assert!(log.is_empty(), "{what}: {log}");
    }
}

/// An engine dropped while a leaked guard, read future or async token keeps an op pending
/// waits for it (the value may be in use), but not silently: every stall period its warning
/// says who holds what, with `dump_pending`'s picture; and it returns once the op completes.
#[test]
fn a_shutdown_blocked_by_a_held_op_warns_with_the_pending_picture() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, Some(Duration::from_millis(20)));
            let var = engine.new_var_named("leaked").unwrap();
            let done = held_async_op(&engine, var);
            engine.op("behind").writes([var]).push_sync(|_| {}).unwrap();
            let completer = thread::spawn(move || {
                thread::sleep(Duration::from_millis(150));
                done.ok();
            });
            let log = logged(|| drop(engine));
            completer.join().unwrap();
            assert!(
                log.contains("the engine's shutdown has been blocked for"),
                "{kind}: {log}"
            );
            assert!(log.contains("digraph pending {"), "{kind}: {log}");
            assert!(log.contains("label=\"leaked\""), "{kind}: {log}");
            assert!(log.contains("label=\"behind (op#"), "{kind}: {log}");
        });
    }
}
