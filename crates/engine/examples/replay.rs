//! Capture once, replay many: a small training loop whose step is captured as a plan and
//! replayed, its input written by an ordinary op before each replay.
//!
//! ```text
//! cargo run --release -p depengine --example replay
//! ```
//!
//! The step fits `y = w * x` to a batch by gradient descent, in four ops on five values the
//! engine owns (typed data: each op receives `&T` / `&mut T`, with no lock): the forward pass,
//! the loss's gradient, the loss for the log, and the update. The plan's ops name
//! their vars, so the engine computes, once, that the gradient and the log (both read the
//! predictions) may run together, as may the log and the update, and the rest in order. Each step's batch comes from an op pushed before
//! the replay: the replay waits for it (it reads the batch's var), and the next batch waits for
//! the replay. The weights after N replays must equal a plain loop's, bit for bit.

use std::error::Error;
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

fn forward(w: f64, batch: &[(f64, f64)]) -> Vec<f64> {
    batch.iter().map(|&(x, _)| w * x).collect()
}

fn gradient(batch: &[(f64, f64)], predictions: &[f64]) -> f64 {
    let sum: f64 = batch
        .iter()
        .zip(predictions)
        .map(|(&(x, y), &p)| 2.0 * (p - y) * x)
        .sum();
    sum / BATCH as f64
}

fn loss(batch: &[(f64, f64)], predictions: &[f64]) -> f64 {
    let sum: f64 = batch
        .iter()
        .zip(predictions)
        .map(|(&(_, y), &p)| (p - y) * (p - y))
        .sum();
    sum / BATCH as f64
}

fn main() -> Result<(), Box<dyn Error>> {
    let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
    // The model's state, owned by the engine: each op below receives `&T` / `&mut T`.
    let input = engine.data_named("batch", Vec::<(f64, f64)>::new())?;
    let predictions = engine.data_named("predictions", Vec::<f64>::new())?;
    let grad = engine.data_named("gradient", 0.0_f64)?;
    let weight = engine.data_named("weight", 0.0_f64)?;
    let losses = engine.data_named("losses", Vec::<f64>::new())?;

    // The step, captured once: nothing runs here.
    let step = engine.capture("training step", |plan| {
        plan.op("forward")
            .read(&input)
            .read(&weight)
            .write(&predictions)
            .push_sync(|_, (batch, w, predictions)| *predictions = forward(*w, batch))?;
        plan.op("gradient")
            .read(&input)
            .read(&predictions)
            .write(&grad)
            .push_sync(|_, (batch, predictions, g)| *g = gradient(batch, predictions))?;
        plan.op("log loss")
            .read(&input)
            .read(&predictions)
            .write(&losses)
            .push_sync(|_, (batch, predictions, losses)| losses.push(loss(batch, predictions)))?;
        plan.op("update")
            .read(&grad)
            .write(&weight)
            .push_sync(|_, (g, w)| *w -= RATE * g)?;
        Ok(())
    })?;
    println!("captured `{}`: {} ops", step.name(), step.len());

    let start = Instant::now();
    for n in 0..STEPS {
        // This step's input, written by an op that the replay waits for.
        engine
            .op("load batch")
            .write(&input)
            .push_sync(move |_, x| *x = batch(n))?;
        engine.replay(&step)?;
    }
    let w = *engine.read(&weight)?;
    let elapsed = start.elapsed();
    let losses = engine.take(losses)?;

    // The same steps in a plain loop.
    let (mut expected, mut expected_losses) = (0.0_f64, Vec::new());
    for n in 0..STEPS {
        let batch = batch(n);
        let predictions = forward(expected, &batch);
        let g = gradient(&batch, &predictions);
        expected_losses.push(loss(&batch, &predictions));
        expected -= RATE * g;
    }
    assert_eq!(
        w.to_bits(),
        expected.to_bits(),
        "replayed weight {w} against {expected}"
    );
    assert_eq!(losses, expected_losses);
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
