//! The profiler: where and when each op ran, as a per-name table and as a Chrome trace.
//!
//! ```text
//! cargo run --release -p depengine --example profiler [-- trace.json]
//! ```
//!
//! The program fits `y = w * x` to data where `w` is 3, by gradient descent, as a small DAG
//! of named ops per step:
//!
//! ```text
//! load batch ──┬─► gradient half 0 ──┬─► sum gradient ─► update weight
//!              └─► gradient half 1 ──┘                        │
//!   (both halves also read the weight, which the update writes; the next step's
//!    load batch waits until both halves have read the batch)
//! ```
//!
//! The first steps are recorded and taken with `engine.profiler().take()`, which prints a
//! summary table; the records of the later steps, which nobody takes, are written by the
//! engine itself as a Chrome trace when it shuts down, to the path set with
//! `EngineConfig::profiler_output` (the file given as the argument, or one in the temporary
//! directory). Open it in `chrome://tracing` or <https://ui.perfetto.dev>: one row per worker
//! thread, where the two gradient halves of a step run at the same time when both workers are
//! free. The program then reads the trace back and checks it.
//!
//! A program built on `Engine::from_env` gets the same without changing its code:
//! `DEPENGINE_PROFILER_AUTOSTART=1 DEPENGINE_PROFILER_OUTPUT=trace.json`.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use depengine::{Engine, EngineConfig, Var};

/// Points per batch; each gradient half takes half of them.
const BATCH: usize = 20_000;
/// The weight the data was generated with, which the descent finds.
const TRUE_WEIGHT: f64 = 3.0;
/// Steps whose profile is taken and summarized, then steps left for the trace file.
const SUMMARIZED_STEPS: usize = 10;
const TRACED_STEPS: usize = 10;
/// The names of the ops of one step, in push order.
const OP_NAMES: [&str; 5] = [
    "load batch",
    "gradient half 0",
    "gradient half 1",
    "sum gradient",
    "update weight",
];

fn main() -> Result<(), Box<dyn Error>> {
    let trace_path = std::env::args().nth(1).map_or_else(
        || std::env::temp_dir().join("depengine-profiler-example.json"),
        PathBuf::from,
    );
    // The output file is created here, so that a path that cannot be written fails now, not
    // after the run.
    let engine = Engine::new(
        EngineConfig::default()
            .cpu_worker_threads(2)
            .profiler_output(&trace_path),
    )?;
    let model = Model::new(&engine)?;

    // The profiler records only while it runs (it is off by default; `profiler_autostart`
    // starts it with the engine).
    engine.profiler().start();
    for step in 0..SUMMARIZED_STEPS {
        model.push_step(&engine, step)?;
    }
    // `take` hands over the ops completed so far: wait for them all first.
    engine.wait_for_all()?;
    let profile = engine.profiler().take();
    println!("the first {SUMMARIZED_STEPS} steps, summarized (times in microseconds):\n{profile}");
    for name in OP_NAMES {
        let summary = profile
            .summary()
            .into_iter()
            .find(|summary| summary.name == name)
            .unwrap_or_else(|| panic!("op `{name}` is missing from the profile"));
        assert_eq!(
            (summary.runs, summary.failed, summary.skipped),
            (SUMMARIZED_STEPS, 0, 0),
            "op `{name}`: every step ran it once, successfully"
        );
    }

    for step in SUMMARIZED_STEPS..SUMMARIZED_STEPS + TRACED_STEPS {
        model.push_step(&engine, step)?;
    }
    // The last clone's shutdown waits for every op, then writes what the profiler recorded and
    // nobody took; a trace it cannot write is its error.
    engine.shutdown()?;

    let weight = *model.weight.lock().unwrap();
    println!("fitted weight: {weight:.9} (the data's: {TRUE_WEIGHT})");
    assert!(
        (weight - TRUE_WEIGHT).abs() < 1e-6,
        "the steps ran in dependency order and the descent converged: {weight}"
    );

    check_trace(&trace_path)?;
    println!(
        "Chrome trace of the last {TRACED_STEPS} steps: {}\n\
         (open it in chrome://tracing or https://ui.perfetto.dev)",
        trace_path.display()
    );
    println!("\nprofiler example: every check passed");
    Ok(())
}

/// The model's data, each field guarded by the var of the same name: the engine orders the
/// ops that touch a field, the lock is there for Rust's sharing rules.
struct Model {
    batch_var: Var,
    halves_vars: [Var; 2],
    gradient_var: Var,
    weight_var: Var,
    /// `(x, y)` points with `y = TRUE_WEIGHT * x`.
    batch: Mutex<Vec<(f64, f64)>>,
    /// Each half's sum of `d/dw (w * x - y)^2`.
    halves: [Mutex<f64>; 2],
    /// The mean gradient over the batch.
    gradient: Mutex<f64>,
    weight: Mutex<f64>,
}

impl Model {
    fn new(engine: &Engine) -> depengine::Result<Arc<Self>> {
        Ok(Arc::new(Model {
            batch_var: engine.new_var_named("batch")?,
            halves_vars: [
                engine.new_var_named("half 0")?,
                engine.new_var_named("half 1")?,
            ],
            gradient_var: engine.new_var_named("gradient")?,
            weight_var: engine.new_var_named("weight")?,
            batch: Mutex::new(Vec::new()),
            halves: [Mutex::new(0.0), Mutex::new(0.0)],
            gradient: Mutex::new(0.0),
            weight: Mutex::new(0.0),
        }))
    }

    /// Pushes the five ops of one descent step; returns at once (the engine runs them).
    fn push_step(self: &Arc<Self>, engine: &Engine, step: usize) -> depengine::Result<()> {
        let model = Arc::clone(self);
        engine
            .op(OP_NAMES[0])
            .writes([self.batch_var])
            .push_sync(move |_| {
                // The grid of x in [0, 1), shuffled differently each step (the halves differ).
                let batch = (0..BATCH)
                    .map(|i| {
                        let x = ((i * 7919 + step * 104_729) % BATCH) as f64 / BATCH as f64;
                        (x, TRUE_WEIGHT * x)
                    })
                    .collect();
                *model.batch.lock().unwrap() = batch;
            })?;
        for half in 0..2 {
            let model = Arc::clone(self);
            engine
                .op(OP_NAMES[1 + half])
                .reads([self.batch_var, self.weight_var])
                .writes([self.halves_vars[half]])
                .push_sync(move |_| {
                    let weight = *model.weight.lock().unwrap();
                    let batch = model.batch.lock().unwrap();
                    let points = &batch[half * BATCH / 2..(half + 1) * BATCH / 2];
                    let sum = points
                        .iter()
                        .map(|&(x, y)| 2.0 * (weight * x - y) * x)
                        .sum();
                    // Not held across the sum above: the other half reads the batch meanwhile.
                    drop(batch);
                    *model.halves[half].lock().unwrap() = sum;
                })?;
        }
        let model = Arc::clone(self);
        engine
            .op(OP_NAMES[3])
            .reads(self.halves_vars)
            .writes([self.gradient_var])
            .push_sync(move |_| {
                let sum = *model.halves[0].lock().unwrap() + *model.halves[1].lock().unwrap();
                *model.gradient.lock().unwrap() = sum / BATCH as f64;
            })?;
        let model = Arc::clone(self);
        engine
            .op(OP_NAMES[4])
            .reads([self.gradient_var])
            .writes([self.weight_var])
            .push_sync(move |_| {
                // The mean of x^2 is about 1/3: a learning rate of 1 shrinks the error by about
                // three each step.
                *model.weight.lock().unwrap() -= *model.gradient.lock().unwrap();
            })
    }
}

/// Reads the trace back: JSON in Chrome's `traceEvents` format, one complete event (`"ph":
/// "X"`) per op of the traced steps, each completed, with a start and a duration.
fn check_trace(path: &Path) -> Result<(), Box<dyn Error>> {
    let text = std::fs::read(path)?;
    let trace: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|error| format!("{} is not JSON: {error}", path.display()))?;
    let events = trace["traceEvents"]
        .as_array()
        .ok_or("the trace has no `traceEvents` array")?;
    let ops: Vec<&serde_json::Value> = events.iter().filter(|event| event["ph"] == "X").collect();
    assert_eq!(
        ops.len(),
        TRACED_STEPS * OP_NAMES.len(),
        "one event per op of the traced steps (the taken ones are not in the file)"
    );
    for name in OP_NAMES {
        let count = ops.iter().filter(|event| event["name"] == name).count();
        assert_eq!(count, TRACED_STEPS, "op `{name}` once per traced step");
    }
    for event in &ops {
        assert_eq!(event["args"]["outcome"], "completed", "{event}");
        assert!(
            event["ts"].as_f64().is_some() && event["dur"].as_f64().is_some(),
            "every op has a start and a duration: {event}"
        );
    }
    // Metadata events name the rows: the context (`cpu(0)`) and the worker threads.
    assert!(
        events
            .iter()
            .any(|event| event["name"] == "process_name" && event["args"]["name"] == "cpu(0)"),
        "the trace names its context"
    );
    assert!(
        events.iter().any(|event| event["name"] == "thread_name"),
        "the trace names its threads"
    );
    Ok(())
}
