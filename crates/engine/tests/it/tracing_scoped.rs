//! An op's `tracing` span and its failure log, seen by a subscriber scoped to the pushing
//! thread. In a process of its own (`common::isolated`): tracing-core keeps one interest per
//! callsite for all of a process's dispatchers, so the `op` span's callsite, registered by other
//! tests' threads, may stay disabled for this test's scoped subscriber.

use crate::common::isolated::{alone, test_name};
use crate::common::{Buffer, engine};
use depengine::EngineKind;

#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn ops_run_in_tracing_spans_and_failures_are_logged() {
    if !alone(test_name!(ops_run_in_tracing_spans_and_failures_are_logged)) {
        return;
    }
    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(buffer.clone())
        .finish();
    // The naive engine runs each op on the pushing thread, where this subscriber is the default.
    tracing::subscriber::with_default(subscriber, || {
        let engine = engine(EngineKind::Naive, 1);
        let var = engine.new_var().unwrap();
        engine
            .op("traced op")
            .writes([var])
            .push_sync(|_| {
                tracing::info!("inside the op");
                Ok(())
            })
            .unwrap();
        engine
            .op("failing op")
            .writes([var])
            .push_sync(|_| Err("no luck".into()))
            .unwrap();
        assert!(engine.wait_for_all().is_err());
    });
    let log = buffer.log();
    let inside = log
        .lines()
        .find(|l| l.contains("inside the op"))
        .expect(&log);
    assert!(inside.contains("op{name=\"traced op\"}"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("close") && l.contains("traced op")),
        "{log}"
    );
    let failed = log.lines().find(|l| l.contains("op failed")).expect(&log);
    assert!(
        failed.contains("DEBUG") && failed.contains("no luck"),
        "{log}"
    );
}
