//! Quickstart: typed data the engine owns.
//!
//! `engine.data(value)` moves a value into the engine and returns a `Data<T>` handle. Ops
//! name the data they read and write; their functions receive `&T` and `&mut T`, with no
//! lock: the engine runs a write alone, reads of one value side by side, and every op on a
//! value in push order. Reading the result from outside waits for the writes before it.
//!
//! Here: two vectors filled in parallel, their element-wise sum, and its norm.
//!
//! Run: `cargo run --release -p depengine --example quickstart`

use depengine::{Engine, EngineConfig, EngineError};

/// The vectors' length.
const LEN: usize = 1 << 16;

fn main() -> Result<(), EngineError> {
    let engine = Engine::new(EngineConfig::default())?;

    // Three values the engine owns, named for errors and the profiler.
    let x = engine.data_named("x", vec![0.0_f64; LEN])?;
    let y = engine.data_named("y", vec![0.0_f64; LEN])?;
    let norm = engine.data_named("norm", 0.0_f64)?;

    // Two independent writes: they run in parallel, each with `&mut Vec<f64>`.
    engine.op("fill x").write(&x).push_sync(|_, x| {
        x.iter_mut()
            .zip(0_u32..)
            .for_each(|(v, i)| *v = f64::from(i));
    })?;
    engine
        .op("fill y")
        .write(&y)
        .push_sync(|_, y| y.fill(1.0))?;

    // Reads `x` and writes `y`: waits for both fills. Several data give a tuple.
    engine
        .op("y += x")
        .read(&x)
        .write(&y)
        .push_sync(|_, (x, y)| {
            y.iter_mut().zip(x).for_each(|(y, x)| *y += x);
        })?;
    engine
        .op("norm")
        .read(&y)
        .write(&norm)
        .push_sync(|_, (y, norm)| {
            *norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
        })?;

    // From outside: a guard that waits for the writes pushed before it.
    let computed = *engine.read(&norm)?;
    let n = f64::from(u32::try_from(LEN).expect("LEN fits in u32"));
    // sum over i of (i + 1)^2 = n (n + 1) (2n + 1) / 6
    let expected = (n * (n + 1.0) * (2.0 * n + 1.0) / 6.0).sqrt();
    assert!(
        (computed - expected).abs() <= 1e-9 * expected,
        "norm {computed}, expected {expected}"
    );
    println!("|x + 1| = {computed:.3}");

    // Take a value back (the last handle; waits for every op on it).
    let y = engine.take(y)?;
    assert!(
        y.iter()
            .zip(1_u32..)
            .all(|(&v, i)| (v - f64::from(i)).abs() < 0.5),
        "y = x + 1"
    );
    Ok(())
}
