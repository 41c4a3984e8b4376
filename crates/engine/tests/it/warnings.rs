//! Warnings reach the user without a `tracing` subscriber: a stall warning and a profile the
//! last drop could not write go to stderr. Each scenario runs in a child process
//! (`common::isolated`), whose stderr the parent reads: no subscriber is installed there (nor
//! any other test's), and the parent's test harness does not capture a child's stderr.

use std::thread;
use std::time::Duration;

use crate::common::held_async_op;
use crate::common::isolated::{run_child, scenario, test_name};
use depengine::{Engine, EngineConfig, EngineKind};

/// Runs `test` (this file's test of that name) as a child in `scenario`; returns its stderr.
fn stderr_of(test: &str, scenario: &str) -> String {
    run_child(test, scenario, &[]).stderr
}

#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn a_stalled_wait_warns_on_stderr_without_a_subscriber() {
    let test = test_name!(a_stalled_wait_warns_on_stderr_without_a_subscriber);
    if scenario(test).as_deref() == Some("stall") {
        let engine = Engine::new(
            EngineConfig::default()
                .cpu_worker_threads(1)
                .stall_warning(Some(Duration::from_millis(20))),
        )
        .unwrap();
        let var = engine.new_var_named("weights").unwrap();
        let done = held_async_op(&engine, var);
        engine.op("update").writes([var]).push_sync(|_| {}).unwrap();
        let completer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(150));
            done.ok();
        });
        engine.wait_for_var(var).unwrap();
        completer.join().unwrap();
        return;
    }
    let stderr = stderr_of(test, "stall");
    assert!(
        stderr.contains("depengine: warning: wait_for_var(var \"weights\" (#0.")
            && stderr.contains("has been blocked for")
            && stderr.contains("it is held by a running write")
            && stderr.contains("queued ahead of this wait: `update` (write)"),
        "{stderr}"
    );
}

#[cfg(target_os = "linux")]
#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn a_profile_the_last_drop_cannot_write_is_reported_on_stderr() {
    let test = test_name!(a_profile_the_last_drop_cannot_write_is_reported_on_stderr);
    if scenario(test).as_deref() == Some("profile") {
        let engine = Engine::new(
            EngineConfig::default()
                .kind(EngineKind::ThreadedPerDevice)
                .profiler_autostart(true)
                .profiler_output("/dev/full"),
        )
        .unwrap();
        let var = engine.new_var().unwrap();
        engine
            .op("recorded")
            .writes([var])
            .push_sync(|_| {})
            .unwrap();
        drop(engine);
        return;
    }
    let stderr = stderr_of(test, "profile");
    assert!(
        stderr.contains(
            "depengine: warning: cannot write the profile to \"/dev/full\" \
             (EngineConfig::profiler_output)"
        ),
        "{stderr}"
    );
}
