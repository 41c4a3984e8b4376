//! The `tracing` spans of ops run on worker threads, seen by a global subscriber. In a process
//! of its own (`common::isolated`): a global default can be set once per process, and it would
//! see every other test's ops.

use crate::common::isolated::{alone, test_name};
use crate::common::{Buffer, KINDS, engine};

#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn a_global_subscriber_sees_the_spans_of_every_kind() {
    if !alone(test_name!(a_global_subscriber_sees_the_spans_of_every_kind)) {
        return;
    }
    let buffer = Buffer::default();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_thread_names(true)
        .with_writer(buffer.clone())
        .init();
    for kind in KINDS {
        let engine = engine(kind, 2);
        let var = engine.new_var().unwrap();
        let name = format!("op of {kind:?}");
        engine
            .op(name.clone())
            .writes([var])
            .push_sync(|_| {
                tracing::info!("inside");
                Ok(())
            })
            .unwrap();
        engine
            .op("async")
            .writes([var])
            .push_async(|_, done| {
                tracing::info!("inside async");
                done.ok();
            })
            .unwrap();
        engine.wait_for_all().unwrap();
        let log = buffer.log();
        let inside = log
            .lines()
            .find(|l| l.contains("inside") && l.contains(&name))
            .unwrap_or_else(|| panic!("{kind:?}: no span around the op:\n{log}"));
        assert!(inside.contains(&format!("op{{name=\"{name}\"}}")), "{log}");
        if kind != depengine::EngineKind::Naive {
            assert!(inside.contains("depengine"), "on a worker thread: {inside}");
        }
        assert!(
            log.lines()
                .any(|l| l.contains("inside async") && l.contains("op{name=\"async\"}")),
            "{log}"
        );
        buffer.0.lock().unwrap().clear();
    }
}
