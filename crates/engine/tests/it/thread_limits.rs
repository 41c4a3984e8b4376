//! Thread counts: an absurd one is a typed error that names what the user set (the
//! environment variable, or the `EngineConfig` field set in code), never an attempt to start
//! 100000 threads; and an engine of many workers shuts down in linear time.

use std::time::{Duration, Instant};

use crate::common::isolated::{run_child, scenario, test_name};
use depengine::{
    CPU_PRIORITY_NTHREADS, CPU_WORKER_NTHREADS, ConfigError, Engine, EngineConfig, EngineError,
    EngineKind, GPU_COPY_NTHREADS, GPU_WORKER_NTHREADS, MAX_THREADS,
};

const KINDS: [EngineKind; 3] = [
    EngineKind::Naive,
    EngineKind::ThreadedPooled,
    EngineKind::ThreadedPerDevice,
];

/// Each thread count's setter, its field as errors name it, and its environment variable.
type Setter = fn(EngineConfig, usize) -> EngineConfig;
const THREAD_COUNTS: [(Setter, &str, &str); 4] = [
    (
        EngineConfig::cpu_worker_threads,
        "EngineConfig::cpu_worker_threads",
        CPU_WORKER_NTHREADS,
    ),
    (
        EngineConfig::cpu_priority_threads,
        "EngineConfig::cpu_priority_threads",
        CPU_PRIORITY_NTHREADS,
    ),
    (
        EngineConfig::gpu_worker_threads,
        "EngineConfig::gpu_worker_threads",
        GPU_WORKER_NTHREADS,
    ),
    (
        EngineConfig::gpu_copy_threads,
        "EngineConfig::gpu_copy_threads",
        GPU_COPY_NTHREADS,
    ),
];

/// `DEPENGINE_CPU_WORKER_NTHREADS=100000` in the real environment (in a child process,
/// `common::isolated`: the environment is process-wide), and each thread-count variable through
/// `from_lookup`.
#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn an_absurd_thread_count_in_the_environment_names_the_variable() {
    let test = test_name!(an_absurd_thread_count_in_the_environment_names_the_variable);
    if scenario(test).as_deref() == Some("absurd") {
        let error = Engine::from_env().expect_err("100000 threads are refused");
        assert!(
            matches!(
                &error,
                EngineError::Config(ConfigError::TooManyThreads {
                    setting: CPU_WORKER_NTHREADS,
                    requested: 100_000,
                    max: MAX_THREADS,
                })
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("DEPENGINE_CPU_WORKER_NTHREADS=100000")
                && message.contains(&MAX_THREADS.to_string()),
            "the error names the variable, its value and the limit: {message}"
        );
        return;
    }
    // Fails unless the child ran this test and passed.
    run_child(test, "absurd", &[(CPU_WORKER_NTHREADS, "100000")]);

    for (_, field, variable) in THREAD_COUNTS {
        let error = EngineConfig::from_lookup(|name| (name == variable).then(|| "100000".into()))
            .expect_err("100000 threads are refused");
        assert_eq!(
            error,
            ConfigError::TooManyThreads {
                setting: variable,
                requested: 100_000,
                max: MAX_THREADS,
            }
        );
        assert!(!error.to_string().contains(field), "{error}");
    }
}

/// The same count set in code: `Engine::new` refuses it, naming the field, not a variable the
/// user never set. For every kind (the naive engine starts no thread, but its configuration is
/// checked all the same).
#[test]
fn an_absurd_thread_count_set_in_code_names_the_field() {
    for kind in KINDS {
        for (set, field, variable) in THREAD_COUNTS {
            let config = set(EngineConfig::default().kind(kind), 100_000);
            let error = Engine::new(config).expect_err("100000 threads are refused");
            assert!(
                matches!(
                    &error,
                    EngineError::Config(ConfigError::TooManyThreads {
                        setting,
                        requested: 100_000,
                        max: MAX_THREADS,
                    }) if *setting == field
                ),
                "{kind}, {field}: {error:?}"
            );
            let message = error.to_string();
            assert!(
                message.contains(field) && !message.contains(variable),
                "{kind}: the error names the field, not the variable: {message}"
            );
        }
    }
}

#[test]
fn a_zero_thread_count_set_in_code_names_the_field() {
    for (set, field, variable) in THREAD_COUNTS {
        let error = Engine::new(set(EngineConfig::default(), 0)).expect_err("zero threads");
        assert!(
            matches!(
                &error,
                EngineError::Config(ConfigError::Invalid { variable: named, .. }) if *named == field
            ),
            "{field}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains(field) && !message.contains(variable),
            "{message}"
        );
    }
}

/// `MAX_THREADS` itself is accepted (the naive and per-device engines start no block before
/// the first op, so nothing starts 4096 threads here), one more is not.
#[test]
fn the_largest_thread_count_is_accepted() {
    for kind in [EngineKind::Naive, EngineKind::ThreadedPerDevice] {
        let mut config = EngineConfig::default().kind(kind);
        for (set, _, _) in THREAD_COUNTS {
            config = set(config, MAX_THREADS);
        }
        Engine::new(config).expect("MAX_THREADS threads are accepted");
    }
    let one_more = EngineConfig::default().cpu_worker_threads(MAX_THREADS + 1);
    assert!(matches!(
        Engine::new(one_more),
        Err(EngineError::Config(ConfigError::TooManyThreads { .. }))
    ));
}

/// Dropping an engine of 512 workers (after they ran ops and went idle) takes well under a
/// second: the pool's shutdown is linear in its worker count (tens of milliseconds here; a
/// quadratic one takes 1.4 to 2.2 s at 512 workers). Timed in optimized builds only.
#[test]
#[cfg_attr(debug_assertions, ignore = "timed: run with --release")]
fn an_engine_of_many_workers_shuts_down_quickly() {
    let workers = 512;
    let engine = Engine::new(
        EngineConfig::default()
            .kind(EngineKind::ThreadedPooled)
            .cpu_worker_threads(workers),
    )
    .expect("512 workers start");
    let vars: Vec<_> = (0..workers)
        .map(|_| engine.new_var().expect("a var"))
        .collect();
    for var in &vars {
        engine
            .op("touch")
            .writes([*var])
            .push_sync(|_| Ok(()))
            .expect("the op is pushed");
    }
    engine.wait_for_all().expect("the ops succeed");
    std::thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    drop(engine);
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "dropping an engine of {workers} workers took {took:?}"
    );
}
