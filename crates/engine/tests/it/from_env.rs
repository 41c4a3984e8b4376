//! `Engine::from_env` reads the real process environment. The environment is process-wide, so
//! the test re-runs itself in child processes, each with its own variables set.

use crate::common::isolated::{run_child, scenario, test_name};
use depengine::{Engine, EngineKind};

#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn from_env_reads_the_process_environment() {
    let test = test_name!(from_env_reads_the_process_environment);
    match scenario(test).as_deref() {
        Some("good") => {
            let engine = Engine::from_env().expect("a valid environment");
            assert_eq!(engine.kind(), EngineKind::Naive);
            return;
        }
        Some("bad") => {
            let error = Engine::from_env()
                .expect_err("an invalid engine type")
                .to_string();
            assert!(
                error.contains("DEPENGINE_ENGINE_TYPE") && error.contains("ThreadedPerDevice"),
                "the error names the variable and the accepted values: {error}"
            );
            return;
        }
        Some(other) => panic!("no scenario `{other}`"),
        None => {}
    }
    let run = |mode: &str, engine_type: &str| {
        run_child(
            test,
            mode,
            &[
                ("DEPENGINE_ENGINE_TYPE", engine_type),
                ("DEPENGINE_CPU_WORKER_NTHREADS", "3"),
            ],
        );
    };
    run("good", "Naive");
    run("bad", "Bogus");
}
