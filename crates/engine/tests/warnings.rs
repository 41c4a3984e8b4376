//! Warnings reach the user without a `tracing` subscriber: a stall warning and a profile the
//! last drop could not write go to stderr. Each scenario runs in a child process (this test
//! binary again), whose stderr the parent reads: no subscriber is installed there, and the
//! parent's test harness does not capture a child's stderr.
#![cfg(not(loom))]

mod common;

use std::process::Command;
use std::thread;
use std::time::Duration;

use common::held_async_op;
use depengine::{Engine, EngineConfig, EngineKind};

/// Set in the child process: which scenario it runs.
const CHILD: &str = "DEPENGINE_TEST_WARNINGS_CHILD";

/// Runs `test` (this file's test of that name) as a child in `scenario`; returns its stderr.
fn stderr_of(test: &str, scenario: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary");
    let output = Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, scenario)
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{stderr}"
    );
    stderr
}

fn child_scenario() -> Option<String> {
    std::env::var(CHILD).ok()
}

#[test]
fn a_stalled_wait_warns_on_stderr_without_a_subscriber() {
    if child_scenario().as_deref() == Some("stall") {
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
    let stderr = stderr_of(
        "a_stalled_wait_warns_on_stderr_without_a_subscriber",
        "stall",
    );
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
fn a_profile_the_last_drop_cannot_write_is_reported_on_stderr() {
    if child_scenario().as_deref() == Some("profile") {
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
    let stderr = stderr_of(
        "a_profile_the_last_drop_cannot_write_is_reported_on_stderr",
        "profile",
    );
    assert!(
        stderr.contains(
            "depengine: warning: cannot write the profile to \"/dev/full\" \
             (EngineConfig::profiler_output)"
        ),
        "{stderr}"
    );
}
