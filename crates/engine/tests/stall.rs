//! A wait that stays blocked is not silent: after `EngineConfig::stall_warning` it emits a
//! `WARN` event naming what it waits for, and it still returns once the wait is over.
#![cfg(not(loom))]

mod common;

use std::thread;
use std::time::Duration;

use common::{Buffer, KINDS, held_async_op, within};
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
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(buffer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, wait);
    buffer.log()
}

#[test]
fn a_blocked_wait_for_var_warns_and_names_the_ops_it_waits_for() {
    for kind in KINDS {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, Some(Duration::from_millis(20)));
            let (var, completer) = held_for(&engine, Duration::from_millis(150));
            let log = logged(|| engine.wait_for_var(var).unwrap());
            completer.join().unwrap();
            assert!(log.contains("depengine::stall"), "{kind}: {log}");
            assert!(log.contains("has been blocked for"), "{kind}: {log}");
            assert!(
                log.contains("on the var, a write running, 1 op(s) waiting (first: wait_for_var)"),
                "{kind}: {log}"
            );
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
            assert!(log.contains("1 op(s) pending"), "{kind}: {log}");
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
