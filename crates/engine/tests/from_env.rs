//! `Engine::from_env` reads the real process environment. The environment is process-wide, so
//! the test re-runs itself in child processes, each with its own variables set.
#![cfg(not(loom))]

use std::process::Command;

use depengine::{Engine, EngineKind};

/// Set in the child processes: which check to run.
const CHILD: &str = "DEPENGINE_TEST_FROM_ENV_CHILD";
const TEST: &str = "from_env_reads_the_process_environment";

#[test]
fn from_env_reads_the_process_environment() {
    match std::env::var(CHILD).as_deref() {
        Ok("good") => {
            let engine = Engine::from_env().expect("a valid environment");
            assert_eq!(engine.kind(), EngineKind::Naive);
            return;
        }
        Ok("bad") => {
            let error = Engine::from_env()
                .expect_err("an invalid engine type")
                .to_string();
            assert!(
                error.contains("DEPENGINE_ENGINE_TYPE") && error.contains("ThreadedPerDevice"),
                "the error names the variable and the accepted values: {error}"
            );
            return;
        }
        _ => {}
    }
    let run = |mode: &str, engine_type: &str| {
        let exe = std::env::current_exe().expect("the test binary");
        let output = Command::new(exe)
            .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD, mode)
            .env("DEPENGINE_ENGINE_TYPE", engine_type)
            .env("DEPENGINE_CPU_WORKER_NTHREADS", "3")
            .output()
            .expect("the child runs");
        assert!(
            output.status.success(),
            "child `{mode}` failed:\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
        // The child ran the test (the filter matched it), not zero tests.
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("1 passed"), "child `{mode}`:\n{stdout}");
    };
    run("good", "Naive");
    run("bad", "Bogus");
}
