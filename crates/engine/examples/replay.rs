//! Capture once, replay many: a small training loop whose step is captured as a plan and
//! replayed, its input written by an ordinary op before each replay.
//!
//! ```text
//! cargo run --release -p depengine --example replay
//! ```
//!
//! The step fits `y = w * x` to a batch by gradient descent, in four ops on five vars: the
//! forward pass, the loss's gradient, the loss for the log, and the update. The plan's ops name
//! their vars, so the engine computes, once, that the gradient and the log (both read the
//! predictions) may run together, as may the log and the update, and the rest in order. Each step's batch comes from an op pushed before
//! the replay: the replay waits for it (it reads the batch's var), and the next batch waits for
//! the replay. The weights after N replays must equal a plain loop's, bit for bit.

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use depengine::{Engine, EngineConfig};

/// Samples per batch.
const BATCH: usize = 256;
/// Training steps.
const STEPS: usize = 2000;
/// Learning rate.
const RATE: f64 = 0.05;
/// The weight the batches are drawn from.
const TRUE_W: f64 = 3.0;

/// The model's state, each part behind the var that orders its users.
#[derive(Default)]
struct State {
    batch: Mutex<Vec<(f64, f64)>>,
    predictions: Mutex<Vec<f64>>,
    gradient: Mutex<f64>,
    weight: Mutex<f64>,
    losses: Mutex<Vec<f64>>,
}

/// Batch `step`: `x` in [-1, 1), `y = TRUE_W * x` plus a little deterministic noise.
fn batch(step: usize) -> Vec<(f64, f64)> {
    (0..BATCH)
        .map(|i| {
            let x = ((step * BATCH + i) % 997) as f64 / 498.5 - 1.0;
            let noise = (((step * 31 + i * 17) % 101) as f64 - 50.0) * 1e-4;
            (x, TRUE_W * x + noise)
        })
        .collect()
}

fn forward(state: &State) {
    let w = *state.weight.lock().unwrap();
    let batch = state.batch.lock().unwrap();
    *state.predictions.lock().unwrap() = batch.iter().map(|&(x, _)| w * x).collect();
}

fn gradient(state: &State) {
    let batch = state.batch.lock().unwrap();
    let predictions = state.predictions.lock().unwrap();
    let sum: f64 = batch
        .iter()
        .zip(predictions.iter())
        .map(|(&(x, y), &p)| 2.0 * (p - y) * x)
        .sum();
    *state.gradient.lock().unwrap() = sum / BATCH as f64;
}

fn log_loss(state: &State) {
    let batch = state.batch.lock().unwrap();
    let predictions = state.predictions.lock().unwrap();
    let loss: f64 = batch
        .iter()
        .zip(predictions.iter())
        .map(|(&(_, y), &p)| (p - y) * (p - y))
        .sum();
    state.losses.lock().unwrap().push(loss / BATCH as f64);
}

fn update(state: &State) {
    let gradient = *state.gradient.lock().unwrap();
    *state.weight.lock().unwrap() -= RATE * gradient;
}

fn main() -> Result<(), Box<dyn Error>> {
    let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
    let [x, predictions, gradient_var, weight, loss] =
        ["batch", "predictions", "gradient", "weight", "loss"]
            .map(|name| engine.new_var_named(name));
    let (x, predictions, gradient_var, weight, loss) =
        (x?, predictions?, gradient_var?, weight?, loss?);
    let state = Arc::new(State::default());

    // The step, captured once: nothing runs here.
    let step = engine.capture("training step", |plan| {
        let s = Arc::clone(&state);
        plan.op("forward")
            .reads([x, weight])
            .writes([predictions])
            .push_sync(move |_| forward(&s))?;
        let s = Arc::clone(&state);
        plan.op("gradient")
            .reads([x, predictions])
            .writes([gradient_var])
            .push_sync(move |_| gradient(&s))?;
        let s = Arc::clone(&state);
        plan.op("log loss")
            .reads([x, predictions])
            .writes([loss])
            .push_sync(move |_| log_loss(&s))?;
        let s = Arc::clone(&state);
        plan.op("update")
            .reads([gradient_var])
            .writes([weight])
            .push_sync(move |_| update(&s))?;
        Ok(())
    })?;
    println!("captured `{}`: {} ops", step.name(), step.len());

    let start = Instant::now();
    for n in 0..STEPS {
        // This step's input, written by an op that the replay waits for.
        let s = Arc::clone(&state);
        engine
            .op("load batch")
            .writes([x])
            .push_sync(move |_| *s.batch.lock().unwrap() = batch(n))?;
        engine.replay(&step)?;
    }
    engine.wait_for_all()?;
    let elapsed = start.elapsed();

    // The same steps in a plain loop.
    let reference = State::default();
    for n in 0..STEPS {
        *reference.batch.lock().unwrap() = batch(n);
        forward(&reference);
        gradient(&reference);
        log_loss(&reference);
        update(&reference);
    }
    let (w, expected) = (
        *state.weight.lock().unwrap(),
        *reference.weight.lock().unwrap(),
    );
    let losses = state.losses.lock().unwrap();
    assert_eq!(
        w.to_bits(),
        expected.to_bits(),
        "replayed weight {w} against {expected}"
    );
    assert_eq!(*losses, *reference.losses.lock().unwrap());
    assert!((w - TRUE_W).abs() < 1e-2, "the fit went wrong: w = {w}");
    println!(
        "{STEPS} replays in {:.1} ms ({:.2} µs per step): w = {w:.6}, loss {:.2e} -> {:.2e}; \
         equal to the plain loop",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_secs_f64() * 1e6 / STEPS as f64,
        losses[0],
        losses[losses.len() - 1],
    );
    engine.shutdown()?;
    Ok(())
}
