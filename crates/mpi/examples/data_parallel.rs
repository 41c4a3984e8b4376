//! Data-parallel training over MPI: a two-layer perceptron whose global batch is split across
//! the ranks, each rank's gradients summed by an allreduce op pushed as soon as
//! backpropagation produces them, so that the allreduce of the second layer's gradient runs
//! while the first layer's backpropagation computes (Horovod's and `MXNet`'s trick).
//!
//! Each rank runs one engine; the ops of a step are pushed in the order a sequential program
//! would run them, and the engine and the communicator order them by the data they read and
//! write. After the training, every rank's weights are checked against one process training
//! on the whole batch with plain loops (relative difference below `1e-9`: the allreduce adds
//! the ranks' partial sums in an order of its own, a rounding difference). Then the same steps
//! run with the allreduces pushed only after the whole backward pass; the example prints both
//! step times, the time those allreduces took, and the share of it the overlap hid (the time
//! it saved over that time; on a machine with no core to spare for the communication thread,
//! it can be negative).
//!
//! Run: `mpirun -np 2 target/release/examples/data_parallel [steps]` (as root, add
//! `--allow-run-as-root`; on fewer cores than ranks, `--oversubscribe`), after
//! `cargo build --release -p depengine-mpi --example data_parallel`. Alone, it is one rank.

#![allow(
    clippy::many_single_char_names,
    clippy::cast_precision_loss,
    reason = "the arithmetic's names are its formulas' (a, w, g, k, n); counts as floats"
)]

use std::error::Error;
use std::time::{Duration, Instant};

use depengine::{Data, Engine, EngineConfig};
use depengine_mpi::{Comm, Reduce};

/// Input, hidden and output widths, and the global batch.
const INPUT: usize = 64;
const HIDDEN: usize = 256;
const OUTPUT: usize = 64;
const BATCH: usize = 480;
const RATE: f64 = 0.05;
const TOLERANCE: f64 = 1e-9;

fn main() -> Result<(), Box<dyn Error>> {
    let steps = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 20,
    };
    let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
    let comm = Comm::world(&engine)?;
    let (rank, size) = (comm.rank(), comm.size());
    if !BATCH.is_multiple_of(size) {
        return Err(format!("{size} ranks do not split the batch of {BATCH}").into());
    }
    let rows = rank * BATCH / size..(rank + 1) * BATCH / size;

    let model = Model::new(&engine, rows.clone())?;
    let overlapped = model.train(&engine, &comm, steps, Overlap::Yes)?;
    let (w1, w2) = (
        engine.read(&model.w1)?.clone(),
        engine.read(&model.w2)?.clone(),
    );
    let (expected_w1, expected_w2) = reference(steps);
    let difference =
        relative_difference(&w1, &expected_w1).max(relative_difference(&w2, &expected_w2));
    if difference >= TOLERANCE {
        return Err(format!(
            "rank {rank}: weights differ from one process's by {difference:e} (>= {TOLERANCE:e})"
        )
        .into());
    }

    let model = Model::new(&engine, rows)?;
    let blocking = model.train(&engine, &comm, steps, Overlap::No)?;
    if rank == 0 {
        let per_step = |time: Duration| time.as_secs_f64() * 1e3 / steps as f64;
        // The share of the communication the overlap hid: the time it saved over the time
        // the allreduces took alone (negative where it cost more than it hid).
        let saved = blocking.total.as_secs_f64() - overlapped.total.as_secs_f64();
        let hidden = saved / blocking.communication.as_secs_f64().max(f64::MIN_POSITIVE);
        println!(
            "data_parallel: {size} ranks, {steps} steps, batch {BATCH}: {:.3} ms/step with the \
             allreduces overlapped, {:.3} ms/step with them after the backward pass, whose \
             allreduces took {:.3} ms/step: {:.0}% of the communication hidden; weights equal \
             one process's to {difference:.1e}",
            per_step(overlapped.total),
            per_step(blocking.total),
            per_step(blocking.communication),
            100.0 * hidden,
        );
    }
    Ok(())
}

/// When a step's allreduces are pushed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overlap {
    /// As soon as backpropagation produces each gradient.
    Yes,
    /// After the whole backward pass is done.
    No,
}

/// What a training run measured.
struct Timing {
    total: Duration,
    /// The time from pushing the allreduces to their completion (measured with `Overlap::No`
    /// only, where nothing else runs meanwhile).
    communication: Duration,
}

/// One rank's model, its shard of the batch and its activations, all engine data.
struct Model {
    x: Data<Vec<f64>>,
    y: Data<Vec<f64>>,
    w1: Data<Vec<f64>>,
    w2: Data<Vec<f64>>,
    h: Data<Vec<f64>>,
    out: Data<Vec<f64>>,
    d_out: Data<Vec<f64>>,
    d_h: Data<Vec<f64>>,
    g1: Data<Vec<f64>>,
    g2: Data<Vec<f64>>,
}

impl Model {
    fn new(engine: &Engine, rows: std::ops::Range<usize>) -> Result<Model, Box<dyn Error>> {
        let n = rows.len();
        let (x, y) = batch(rows);
        let (w1, w2) = initial_weights();
        Ok(Model {
            x: engine.data(x)?,
            y: engine.data(y)?,
            w1: engine.data(w1)?,
            w2: engine.data(w2)?,
            h: engine.data(vec![0.0; n * HIDDEN])?,
            out: engine.data(vec![0.0; n * OUTPUT])?,
            d_out: engine.data(vec![0.0; n * OUTPUT])?,
            d_h: engine.data(vec![0.0; n * HIDDEN])?,
            g1: engine.data(vec![0.0; INPUT * HIDDEN])?,
            g2: engine.data(vec![0.0; HIDDEN * OUTPUT])?,
        })
    }

    /// Pushes `steps` training steps and waits for them.
    fn train(
        &self,
        engine: &Engine,
        comm: &Comm,
        steps: usize,
        overlap: Overlap,
    ) -> Result<Timing, Box<dyn Error>> {
        comm.barrier()?;
        comm.wait()?;
        let start = Instant::now();
        let mut communication = Duration::ZERO;
        for _ in 0..steps {
            engine
                .op("forward 1")
                .read(&self.x)
                .read(&self.w1)
                .write(&self.h)
                .push_sync(|_, (x, w1, h)| forward(x, w1, h, INPUT, HIDDEN, true))?;
            engine
                .op("forward 2")
                .read(&self.h)
                .read(&self.w2)
                .write(&self.out)
                .push_sync(|_, (h, w2, out)| forward(h, w2, out, HIDDEN, OUTPUT, false))?;
            engine
                .op("loss gradient")
                .read(&self.out)
                .read(&self.y)
                .write(&self.d_out)
                .push_sync(|_, (out, y, d_out)| loss_gradient(out, y, d_out))?;
            engine
                .op("gradient 2")
                .read(&self.h)
                .read(&self.d_out)
                .write(&self.g2)
                .push_sync(|_, (h, d_out, g2)| weight_gradient(h, d_out, g2, HIDDEN, OUTPUT))?;
            if overlap == Overlap::Yes {
                comm.allreduce(&self.g2, Reduce::Sum)?;
            }
            engine
                .op("backpropagate")
                .read(&self.d_out)
                .read(&self.w2)
                .read(&self.h)
                .write(&self.d_h)
                .push_sync(|_, (d_out, w2, h, d_h)| backpropagate(d_out, w2, h, d_h))?;
            engine
                .op("gradient 1")
                .read(&self.x)
                .read(&self.d_h)
                .write(&self.g1)
                .push_sync(|_, (x, d_h, g1)| weight_gradient(x, d_h, g1, INPUT, HIDDEN))?;
            if overlap == Overlap::Yes {
                comm.allreduce(&self.g1, Reduce::Sum)?;
            } else {
                engine.wait_for_all()?;
                let pushed = Instant::now();
                comm.allreduce(&self.g2, Reduce::Sum)?;
                comm.allreduce(&self.g1, Reduce::Sum)?;
                comm.wait()?;
                communication += pushed.elapsed();
            }
            for (weights, gradient) in [(&self.w2, &self.g2), (&self.w1, &self.g1)] {
                engine
                    .op("update")
                    .read(gradient)
                    .write(weights)
                    .push_sync(|_, (g, w)| update(w, g))?;
            }
        }
        engine.wait_for_all()?;
        comm.wait()?;
        Ok(Timing {
            total: start.elapsed(),
            communication,
        })
    }
}

// --- The model's arithmetic: row-major matrices, plain loops. ---------------------------------

/// `out = a w` (`a`: rows × `k`, `w`: `k` × `n`), through a `ReLU` if `relu`.
fn forward(a: &[f64], w: &[f64], out: &mut [f64], k: usize, n: usize, relu: bool) {
    for (row, out) in a.chunks(k).zip(out.chunks_mut(n)) {
        out.fill(0.0);
        for (&a, w) in row.iter().zip(w.chunks(n)) {
            for (out, &w) in out.iter_mut().zip(w) {
                *out += a * w;
            }
        }
        if relu {
            for out in out {
                *out = out.max(0.0);
            }
        }
    }
}

/// The gradient of the mean squared error over the global batch, `(out − y) / BATCH`.
fn loss_gradient(out: &[f64], y: &[f64], d_out: &mut [f64]) {
    for ((d, &o), &y) in d_out.iter_mut().zip(out).zip(y) {
        *d = (o - y) / BATCH as f64;
    }
}

/// `g = aᵀ d` (`a`: rows × `k`, `d`: rows × `n`): this shard's part of a weight gradient.
fn weight_gradient(a: &[f64], d: &[f64], g: &mut [f64], k: usize, n: usize) {
    g.fill(0.0);
    for (a, d) in a.chunks(k).zip(d.chunks(n)) {
        for (&a, g) in a.iter().zip(g.chunks_mut(n)) {
            for (g, &d) in g.iter_mut().zip(d) {
                *g += a * d;
            }
        }
    }
}

/// `d_h = (d_out w2ᵀ) ⊙ [h > 0]`.
fn backpropagate(d_out: &[f64], w2: &[f64], h: &[f64], d_h: &mut [f64]) {
    for ((d_out, h), d_h) in d_out
        .chunks(OUTPUT)
        .zip(h.chunks(HIDDEN))
        .zip(d_h.chunks_mut(HIDDEN))
    {
        for ((d_h, &h), w2) in d_h.iter_mut().zip(h).zip(w2.chunks(OUTPUT)) {
            let sum: f64 = d_out.iter().zip(w2).map(|(d, w)| d * w).sum();
            *d_h = if h > 0.0 { sum } else { 0.0 };
        }
    }
}

/// A step of gradient descent.
fn update(w: &mut [f64], g: &[f64]) {
    for (w, &g) in w.iter_mut().zip(g) {
        *w -= RATE * g;
    }
}

/// One process training on the whole batch, for the check.
fn reference(steps: usize) -> (Vec<f64>, Vec<f64>) {
    let (x, y) = batch(0..BATCH);
    let (mut w1, mut w2) = initial_weights();
    let (mut h, mut out) = (vec![0.0; BATCH * HIDDEN], vec![0.0; BATCH * OUTPUT]);
    let (mut d_out, mut d_h) = (vec![0.0; BATCH * OUTPUT], vec![0.0; BATCH * HIDDEN]);
    let (mut g1, mut g2) = (vec![0.0; INPUT * HIDDEN], vec![0.0; HIDDEN * OUTPUT]);
    for _ in 0..steps {
        forward(&x, &w1, &mut h, INPUT, HIDDEN, true);
        forward(&h, &w2, &mut out, HIDDEN, OUTPUT, false);
        loss_gradient(&out, &y, &mut d_out);
        weight_gradient(&h, &d_out, &mut g2, HIDDEN, OUTPUT);
        backpropagate(&d_out, &w2, &h, &mut d_h);
        weight_gradient(&x, &d_h, &mut g1, INPUT, HIDDEN);
        update(&mut w2, &g2);
        update(&mut w1, &g1);
    }
    (w1, w2)
}

// --- Synthetic data. ---------------------------------------------------------------------------

/// A value in `[-0.5, 0.5)` from `seed` (splitmix64's finalizer).
fn noise(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1_u64 << 53) as f64 - 0.5
}

/// The batch's `rows`: inputs, and targets from a fixed nonlinear map of them.
fn batch(rows: std::ops::Range<usize>) -> (Vec<f64>, Vec<f64>) {
    let mut x = Vec::with_capacity(rows.len() * INPUT);
    let mut y = Vec::with_capacity(rows.len() * OUTPUT);
    for row in rows {
        let inputs: Vec<f64> = (0..INPUT)
            .map(|i| noise((row * INPUT + i) as u64))
            .collect();
        for o in 0..OUTPUT {
            let linear: f64 = inputs
                .iter()
                .enumerate()
                .map(|(i, v)| v * noise(1 << 40 | (o * INPUT + i) as u64))
                .sum();
            y.push(linear.sin());
        }
        x.extend(inputs);
    }
    (x, y)
}

/// The starting weights, the same on every rank.
fn initial_weights() -> (Vec<f64>, Vec<f64>) {
    let w1 = (0..INPUT * HIDDEN)
        .map(|i| 0.3 * noise(2 << 40 | i as u64))
        .collect();
    let w2 = (0..HIDDEN * OUTPUT)
        .map(|i| 0.2 * noise(3 << 40 | i as u64))
        .collect();
    (w1, w2)
}

/// The largest difference between `a` and `b`, relative to `b`'s largest magnitude.
fn relative_difference(a: &[f64], b: &[f64]) -> f64 {
    let scale = b
        .iter()
        .fold(0.0_f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    a.iter()
        .zip(b)
        .fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()))
        / scale
}
