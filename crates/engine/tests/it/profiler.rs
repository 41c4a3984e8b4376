//! The profiler (what it records, when, in which mode), its outputs, and the `tracing` spans.
#![allow(clippy::doc_markdown, reason = "tests: MXNet named in docs")]

use std::sync::Mutex;
use std::time::Duration;

use crate::common::{Buffer, KINDS, engine};
use depengine::{
    Engine, EngineConfig, EngineError, EngineKind, PROFILER_OUTPUT, ProfileMode, ProfiledOutcome,
};

fn ok(_: depengine::RunContext) {}

#[test]
fn every_kind_records_each_op_once_with_its_name() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (x, y) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        engine.profiler().start();
        for _ in 0..5 {
            engine.op("write x").writes([x]).push_sync(ok).unwrap();
        }
        for _ in 0..3 {
            engine
                .op("read x")
                .reads([x])
                .writes([y])
                .push_sync(ok)
                .unwrap();
        }
        engine.wait_for_all().unwrap();
        let profile = engine.profiler().take();
        assert_eq!(profile.len(), 8, "{kind:?}");
        let summary = profile.summary();
        let calls: Vec<(&str, usize)> = summary.iter().map(|s| (s.name.as_str(), s.runs)).collect();
        assert!(
            calls.contains(&("write x", 5)) && calls.contains(&("read x", 3)),
            "{kind:?}: {calls:?}"
        );
        for op in profile.ops() {
            assert!(op.start() <= op.end(), "{kind:?}");
            assert_eq!(op.outcome(), ProfiledOutcome::Completed);
            assert!(!op.thread_name().is_empty());
        }
        assert!(engine.profiler().take().is_empty(), "take drains");
    }
}

#[test]
fn writes_to_one_var_never_overlap_in_the_profile() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let var = engine.new_var().unwrap();
    engine.profiler().start();
    for _ in 0..50 {
        engine
            .op("write")
            .writes([var])
            .push_sync(|_| {
                std::thread::sleep(Duration::from_micros(50));
                Ok(())
            })
            .unwrap();
    }
    engine.wait_for_all().unwrap();
    let mut ops = engine.profiler().take().ops().to_vec();
    assert_eq!(ops.len(), 50);
    ops.sort_by_key(depengine::OpProfile::start);
    for pair in ops.windows(2) {
        assert!(
            pair[0].end() <= pair[1].start(),
            "writes of one var ran together"
        );
    }
    for op in &ops {
        assert!(op.duration() >= Duration::from_micros(50));
    }
}

#[test]
fn a_stopped_profiler_records_nothing() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let var = engine.new_var().unwrap();
    let push = |name: &'static str| engine.op(name).writes([var]).push_sync(ok).unwrap();
    push("before start");
    engine.wait_for_all().unwrap();
    assert!(!engine.profiler().is_running());
    engine.profiler().start();
    push("while running");
    engine.wait_for_all().unwrap();
    engine.profiler().stop();
    push("after stop");
    engine.wait_for_all().unwrap();
    let profile = engine.profiler().take();
    let names: Vec<&str> = profile
        .ops()
        .iter()
        .map(depengine::OpProfile::name)
        .collect();
    assert_eq!(names, ["while running"]);
}

/// A 2-worker engine whose profiler runs from the start and records marked ops only.
fn marked_engine() -> Engine {
    Engine::new(
        EngineConfig::default()
            .cpu_worker_threads(2)
            .profiler_autostart(true)
            .profiler_mode(ProfileMode::Marked),
    )
    .unwrap()
}

#[test]
fn marked_mode_records_only_marked_ops() {
    let engine = marked_engine();
    assert!(engine.profiler().is_running());
    assert_eq!(engine.profiler().mode(), ProfileMode::Marked);
    let var = engine.new_var().unwrap();
    engine.op("plain").writes([var]).push_sync(ok).unwrap();
    engine
        .op("marked")
        .writes([var])
        .profiled()
        .push_sync(ok)
        .unwrap();
    let marked = engine
        .operator("marked operator")
        .writes([var])
        .profiled()
        .build_sync(ok)
        .unwrap();
    let plain = engine
        .operator("plain operator")
        .writes([var])
        .build_sync(ok)
        .unwrap();
    engine.push(&marked, depengine::Context::cpu(0), 0).unwrap();
    engine.push(&plain, depengine::Context::cpu(0), 0).unwrap();
    engine.wait_for_all().unwrap();
    let profile = engine.profiler().take();
    let names: Vec<&str> = profile
        .ops()
        .iter()
        .map(depengine::OpProfile::name)
        .collect();
    assert_eq!(names, ["marked", "marked operator"]);

    engine.profiler().set_mode(ProfileMode::All);
    engine.op("plain").writes([var]).push_sync(ok).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(engine.profiler().take().len(), 1);
}

#[test]
fn failed_skipped_and_async_ops_are_recorded_with_their_outcome() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let (a, b, c) = (
        engine.new_var().unwrap(),
        engine.new_var().unwrap(),
        engine.new_var().unwrap(),
    );
    engine.profiler().start();
    engine
        .op("fails")
        .writes([a])
        .push_sync(|_| Err("broken".into()))
        .unwrap();
    engine
        .op("skipped")
        .reads([a])
        .writes([b])
        .push_sync(ok)
        .unwrap();
    engine
        .op("async")
        .writes([c])
        .push_async(|_, done| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                done.ok();
            });
        })
        .unwrap();
    engine
        .op("dropped")
        .reads([c])
        .push_async(|_, done| drop(done))
        .unwrap();
    assert!(engine.wait_for_all().is_err(), "the failure is reported");
    let profile = engine.profiler().take();
    let outcome = |name: &str| {
        let op = profile.ops().iter().find(|op| op.name() == name).unwrap();
        (op.outcome(), op.duration())
    };
    assert_eq!(outcome("fails").0, ProfiledOutcome::Failed);
    assert_eq!(
        outcome("skipped"),
        (ProfiledOutcome::Skipped, Duration::ZERO)
    );
    let (async_outcome, async_duration) = outcome("async");
    assert_eq!(async_outcome, ProfiledOutcome::Completed);
    assert!(
        async_duration >= Duration::from_millis(5),
        "ends when its completion does"
    );
    assert_eq!(outcome("dropped").0, ProfiledOutcome::Failed);
    let summary = profile.summary();
    let failed: usize = summary.iter().map(|s| s.failed).sum();
    let skipped: usize = summary.iter().map(|s| s.skipped).sum();
    assert_eq!((failed, skipped), (2, 1));
}

#[test]
fn panics_async_operators_and_late_completions_are_recorded() {
    for kind in KINDS {
        let engine = engine(kind, 2);
        let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        engine.profiler().start();
        engine
            .op("panics")
            .writes([a])
            .push_sync(|_| panic!("boom"))
            .unwrap();
        assert!(
            engine.wait_for_var(a).is_err(),
            "{kind:?}: the panic is reported"
        );
        let (started_tx, started) = std::sync::mpsc::channel();
        let started_tx = Mutex::new(started_tx);
        let operator = engine
            .operator("async operator")
            .writes([b])
            .build_async(move |_, done| {
                let _ = started_tx.lock().unwrap().send(());
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(2));
                    done.ok();
                });
            })
            .unwrap();
        engine
            .push(&operator, depengine::Context::cpu(0), 0)
            .unwrap();
        started.recv().unwrap();
        // Stopping while the async op is in flight does not lose it: it started while running.
        engine.profiler().stop();
        engine.wait_for_all().unwrap();
        let profile = engine.profiler().take();
        let find = |name: &str| profile.ops().iter().find(|op| op.name() == name).cloned();
        let panicked = find("panics").expect("the panicking op is recorded");
        assert_eq!(panicked.outcome(), ProfiledOutcome::Failed, "{kind:?}");
        let operator = find("async operator").expect("the async operator run is recorded");
        assert_eq!(operator.outcome(), ProfiledOutcome::Completed, "{kind:?}");
        assert!(operator.duration() >= Duration::from_millis(2), "{kind:?}");
        assert_eq!(profile.len(), 2, "{kind:?}");
    }
}

#[test]
fn marked_mode_records_a_marked_op_that_is_skipped() {
    let engine = marked_engine();
    let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
    engine
        .op("fails")
        .writes([a])
        .push_sync(|_| Err("x".into()))
        .unwrap();
    engine
        .op("marked dependent")
        .reads([a])
        .writes([b])
        .profiled()
        .push_sync(ok)
        .unwrap();
    assert!(engine.wait_for_all().is_err());
    let profile = engine.profiler().take();
    let recorded: Vec<(&str, ProfiledOutcome)> = profile
        .ops()
        .iter()
        .map(|op| (op.name(), op.outcome()))
        .collect();
    assert_eq!(recorded, [("marked dependent", ProfiledOutcome::Skipped)]);
}

#[test]
fn the_last_drop_writes_what_nobody_took_to_the_output() {
    let dir = std::env::temp_dir().join(format!("depengine-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    let engine = Engine::new(
        EngineConfig::default()
            .cpu_worker_threads(2)
            .profiler_autostart(true)
            .profiler_output(&path),
    )
    .unwrap();
    let var = engine.new_var().unwrap();
    engine.op("taken").writes([var]).push_sync(ok).unwrap();
    engine.wait_for_all().unwrap();
    assert_eq!(engine.profiler().take().len(), 1);
    for _ in 0..3 {
        engine.op("left").writes([var]).push_sync(ok).unwrap();
    }
    let clone = engine.clone();
    drop(engine);
    let written = std::fs::metadata(&path)
        .expect("created when the engine started")
        .len();
    assert_eq!(written, 0, "only the last clone writes");
    drop(clone);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("valid JSON");
    let names: Vec<&str> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["left", "left", "left"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A path the engine cannot write fails `Engine::new`, naming the path and what set it (the
/// field, or the environment variable), instead of a profile silently lost at the end.
#[test]
fn an_output_that_cannot_be_written_fails_the_engine_start() {
    let dir = std::env::temp_dir().join(format!("depengine-unwritable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("no such directory").join("trace.json");
    for (path, what) in [(&missing, "a missing directory"), (&dir, "a directory")] {
        let error = Engine::new(EngineConfig::default().profiler_output(path))
            .expect_err("the output cannot be created");
        assert!(
            matches!(&error, EngineError::ProfilerOutput { setting, path: named, .. }
                if *setting == "EngineConfig::profiler_output" && named == path),
            "{what}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("EngineConfig::profiler_output")
                && message.contains(&format!("\"{}\"", path.display())),
            "{what}: {message}"
        );
    }
    let from_env = EngineConfig::from_lookup(|name| {
        (name == PROFILER_OUTPUT).then(|| missing.to_string_lossy().into_owned())
    })
    .unwrap();
    let error = Engine::new(from_env.clone()).expect_err("the output cannot be created");
    assert!(
        matches!(
            &error,
            EngineError::ProfilerOutput {
                setting: PROFILER_OUTPUT,
                ..
            }
        ),
        "{error:?}"
    );
    // Set again in code: the error names the field.
    let error = Engine::new(from_env.profiler_output(dir.join("elsewhere").join("t.json")))
        .expect_err("the output cannot be created");
    assert!(
        error.to_string().contains("EngineConfig::profiler_output"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A write that fails at the end (`/dev/full`: opening works, writing does not) is the error of
/// the last clone's `shutdown`; an earlier clone's shutdown does not write.
#[cfg(target_os = "linux")]
#[test]
fn the_last_shutdown_returns_a_profile_it_could_not_write() {
    let engine = Engine::new(
        EngineConfig::default()
            .cpu_worker_threads(1)
            .profiler_autostart(true)
            .profiler_output("/dev/full"),
    )
    .unwrap();
    let var = engine.new_var().unwrap();
    engine.op("recorded").writes([var]).push_sync(ok).unwrap();
    let clone = engine.clone();
    engine
        .shutdown()
        .expect("not the last clone: nothing written yet");
    let error = clone.shutdown().expect_err("the profile cannot be written");
    assert!(
        matches!(&error, EngineError::ProfilerOutput { setting: "EngineConfig::profiler_output", path, .. }
            if path.as_os_str() == "/dev/full"),
        "{error:?}"
    );
    assert!(error.to_string().contains("/dev/full"), "{error}");
}

/// From a drop, which has no caller, the failure is a warning (here to the thread's
/// subscriber; without one, to stderr: `tests/it/warnings.rs`).
#[cfg(target_os = "linux")]
#[test]
fn a_drop_that_cannot_write_the_profile_warns() {
    let buffer = Buffer::default();
    let subscriber = buffer.warn_subscriber();
    tracing::subscriber::with_default(subscriber, || {
        let engine = Engine::new(
            EngineConfig::default()
                .kind(EngineKind::Naive)
                .profiler_autostart(true)
                .profiler_output("/dev/full"),
        )
        .unwrap();
        let var = engine.new_var().unwrap();
        engine.op("recorded").writes([var]).push_sync(ok).unwrap();
        drop(engine);
    });
    let log = buffer.log();
    assert!(
        log.contains("depengine::profiler")
            && log.contains("cannot write the profile to \"/dev/full\""),
        "{log}"
    );
}

#[test]
fn the_chrome_trace_is_json_with_one_event_per_op() {
    let engine = engine(EngineKind::ThreadedPerDevice, 2);
    let var = engine.new_var().unwrap();
    engine.profiler().start();
    for name in ["first", "quote \" and \\ backslash", "third"] {
        engine.op(name).writes([var]).push_sync(ok).unwrap();
    }
    engine.wait_for_all().unwrap();
    let profile = engine.profiler().take();
    let mut trace = Vec::new();
    profile.write_chrome_trace(&mut trace).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&trace).expect("valid JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let ops: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(ops.len(), 3);
    assert!(ops.iter().any(|e| e["name"] == "quote \" and \\ backslash"));
    for (op, recorded) in ops.iter().zip(profile.ops()) {
        let ts = op["ts"].as_f64().unwrap();
        let dur = op["dur"].as_f64().unwrap();
        assert!(
            (ts - recorded.start().as_secs_f64() * 1e6).abs() < 0.01,
            "{op}"
        );
        assert!(
            (dur - recorded.duration().as_secs_f64() * 1e6).abs() < 0.01,
            "{op}"
        );
        assert_eq!(op["args"]["outcome"], "completed");
        assert_eq!(op["args"]["property"], "Normal");
    }
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "process_name" && e["args"]["name"] == "cpu(0)")
    );
    assert!(events.iter().any(|e| e["name"] == "thread_name"));
    let table = profile.to_string();
    assert!(
        table.contains("first") && table.contains("third"),
        "{table}"
    );
}
