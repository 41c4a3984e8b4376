//! A tiled Cholesky factorization: the classic task graph of dense linear algebra, scheduled
//! by depengine from the data each op reads and writes.
//!
//! The `n × n` symmetric positive definite matrix `A` is cut into square tiles; each tile of
//! its lower triangle becomes a `Data<Mat<f64>>` the engine owns. The factorization `A = L Lᵀ`
//! is pushed as it would run sequentially, one op per tile kernel, each a call into faer on
//! one thread; the engine runs ops whose tiles are ready side by side:
//!
//! ```text
//! for k in 0..tiles:
//!     POTRF  L[k][k] = chol(A[k][k])                 reads -        writes (k, k)
//!     TRSM   L[i][k] = A[i][k] L[k][k]⁻ᵀ    i > k     reads (k, k)   writes (i, k)
//!     SYRK   A[i][i] -= L[i][k] L[i][k]ᵀ    i > k     reads (i, k)   writes (i, i)
//!     GEMM   A[i][j] -= L[i][k] L[j][k]ᵀ    i > j > k reads (i, k) (j, k) writes (i, j)
//! ```
//!
//! Priorities follow the critical path, the chain `POTRF(k)`, `TRSM(k+1, k)`, `SYRK(k+1, k)`,
//! `POTRF(k+1)` down the diagonal: an op writing tile `(i, j)` has priority `2·tiles − i − j`,
//! so tiles nearer the top-left corner, which earlier diagonal steps need, come first. The ops
//! are `CpuPrioritized`, which depengine runs on its priority block, highest priority first.
//!
//! Then the same factorization is captured once as a plan (`Engine::capture`) and replayed over
//! new matrices, each loaded into the tiles by ops before its replay: the tile graph's
//! dependencies are computed once, and each replay releases its ops by counters.
//!
//! The run checks itself: each factor's relative residual `‖A − L Lᵀ‖_F / ‖A‖_F` must be below
//! `1e-12`, else the example exits with an error.
//!
//! Run: `cargo run --release -p depengine --example cholesky -- [n] [tile] [replays]` (default
//! 512, 128 and 3; a tile that does not divide `n` leaves a narrower last tile).

use std::error::Error;
use std::time::Instant;

use depengine::{BoxError, Data, Engine, EngineConfig, EngineError, FnProperty};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{
    LltRegularization, cholesky_in_place, cholesky_in_place_scratch,
};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Accum, Mat, Par, Spec};

/// The largest relative residual a factor may leave.
const TOLERANCE: f64 = 1e-12;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let n = parse(args.next(), "n", 512)?;
    let tile = parse(args.next(), "tile", 128)?;
    let replays = match args.next() {
        None => 3,
        arg => parse(arg, "replays", 1)?,
    };
    let layout = Layout { n, tile };
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    let engine = Engine::new(
        EngineConfig::default()
            .cpu_priority_threads(workers)
            .cpu_worker_threads(workers),
    )?;

    // One engine-owned value per tile of the lower triangle, tile (i, j) at i (i + 1) / 2 + j.
    let tiles = layout
        .lower()
        .map(|(i, j)| {
            let tile = layout.tile_of_matrix(0, i, j);
            engine
                .data_named(format!("A[{i}][{j}]"), tile)
                .map_err(EngineError::from)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tile_at = |i: usize, j: usize| &tiles[i * (i + 1) / 2 + j];
    let count = layout.count();
    let priority = |i: usize, j: usize| i32::try_from(2 * count - i - j).unwrap_or(i32::MAX);

    // Pushed: each op on its tiles, `CpuPrioritized`, as a sequential loop would call it.
    let start = Instant::now();
    for kernel in kernels(count) {
        let (name, i, j) = kernel.written();
        let op = engine
            .op(name)
            .prop(FnProperty::CpuPrioritized)
            .priority(priority(i, j));
        match kernel {
            Kernel::Potrf { k } => op.write(tile_at(k, k)).push_sync(|_, a| potrf(a))?,
            Kernel::Trsm { i, k } => op
                .read(tile_at(k, k))
                .write(tile_at(i, k))
                .push_sync(|_, (l, a)| trsm(l, a))?,
            Kernel::Syrk { i, k } => op
                .read(tile_at(i, k))
                .write(tile_at(i, i))
                .push_sync(|_, (a, c)| syrk(a, c))?,
            Kernel::Gemm { i, j, k } => op
                .read(tile_at(i, k))
                .read(tile_at(j, k))
                .write(tile_at(i, j))
                .push_sync(|_, (a, b, c)| gemm(a, b, c))?,
        }
    }
    // Returns the first op failure: a POTRF that met a tile that is not positive definite.
    engine.wait_for_all()?;
    report(
        &engine,
        layout,
        &tiles,
        0,
        "pushed",
        start.elapsed().as_secs_f64(),
    )?;

    // Replayed: the same ops captured once as a plan, then for each new matrix its tiles are
    // loaded by ops and the plan replayed over them (plan ops run on the CPU workers, in the
    // order their tiles allow; their priority is what their functions see).
    let plan = engine.capture("cholesky", |plan| {
        for kernel in kernels(count) {
            let (name, i, j) = kernel.written();
            let op = plan.op(name).priority(priority(i, j));
            match kernel {
                Kernel::Potrf { k } => op.write(tile_at(k, k)).push_sync(|_, a| potrf(a))?,
                Kernel::Trsm { i, k } => op
                    .read(tile_at(k, k))
                    .write(tile_at(i, k))
                    .push_sync(|_, (l, a)| trsm(l, a))?,
                Kernel::Syrk { i, k } => op
                    .read(tile_at(i, k))
                    .write(tile_at(i, i))
                    .push_sync(|_, (a, c)| syrk(a, c))?,
                Kernel::Gemm { i, j, k } => op
                    .read(tile_at(i, k))
                    .read(tile_at(j, k))
                    .write(tile_at(i, j))
                    .push_sync(|_, (a, b, c)| gemm(a, b, c))?,
            }
        }
        Ok(())
    })?;
    for matrix in 1..=replays as u64 {
        for (tile, (i, j)) in tiles.iter().zip(layout.lower()) {
            engine
                .op("load")
                .write(tile)
                .push_sync(move |_, a| *a = layout.tile_of_matrix(matrix, i, j))?;
        }
        engine.wait_for_all()?;
        let start = Instant::now();
        engine.replay(&plan)?;
        engine.wait_for_all()?;
        let seconds = start.elapsed().as_secs_f64();
        report(&engine, layout, &tiles, matrix, "replayed", seconds)?;
    }
    Ok(())
}

/// Prints a factorization of matrix `matrix` that took `seconds`, checking its factor `tiles`.
fn report(
    engine: &Engine,
    layout: Layout,
    tiles: &[Data<Mat<f64>>],
    matrix: u64,
    how: &str,
    seconds: f64,
) -> Result<(), Box<dyn Error>> {
    let factor = tiles
        .iter()
        .map(|tile| engine.read(tile).map(|tile| tile.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let residual = relative_residual(layout, matrix, &factor);
    let n = layout.n;
    let size = n as f64;
    let gflops = size * size * size / 3.0 / seconds / 1e9;
    println!(
        "cholesky {how:>8}: matrix {matrix}, n {n}, tile {}: {:.3} ms, {gflops:.2} GFLOP/s, \
         residual {residual:.2e}",
        layout.tile,
        seconds * 1e3
    );
    // A NaN residual compares false, so it fails too.
    if residual < TOLERANCE {
        Ok(())
    } else {
        Err(format!("relative residual {residual:e} is not below {TOLERANCE:e}").into())
    }
}

/// One tile kernel of the factorization, by the tiles it names (see the module docs).
#[derive(Clone, Copy)]
enum Kernel {
    Potrf { k: usize },
    Trsm { i: usize, k: usize },
    Syrk { i: usize, k: usize },
    Gemm { i: usize, j: usize, k: usize },
}

impl Kernel {
    /// Its name and the tile it writes.
    fn written(self) -> (&'static str, usize, usize) {
        match self {
            Kernel::Potrf { k } => ("potrf", k, k),
            Kernel::Trsm { i, k } => ("trsm", i, k),
            Kernel::Syrk { i, .. } => ("syrk", i, i),
            Kernel::Gemm { i, j, .. } => ("gemm", i, j),
        }
    }
}

/// The kernels of a factorization of `count × count` tiles, in sequential order.
fn kernels(count: usize) -> impl Iterator<Item = Kernel> {
    (0..count).flat_map(move |k| {
        let trsms = (k + 1..count).map(move |i| Kernel::Trsm { i, k });
        let updates =
            (k + 1..count).flat_map(move |i| {
                std::iter::once(Kernel::Syrk { i, k })
                    .chain((k + 1..i).map(move |j| Kernel::Gemm { i, j, k }))
            });
        std::iter::once(Kernel::Potrf { k })
            .chain(trsms)
            .chain(updates)
    })
}

/// The command-line argument `what`, or `default` when absent.
fn parse(arg: Option<String>, what: &str, default: usize) -> Result<usize, String> {
    let value = match arg {
        None => default,
        Some(text) => text
            .parse()
            .map_err(|_| format!("{what}: `{text}` is not a positive integer"))?,
    };
    if value == 0 {
        return Err(format!("{what} must be at least 1"));
    }
    Ok(value)
}

// --- The tile kernels: one faer call each, on one thread (the engine is the parallelism). ---

/// POTRF: the diagonal tile becomes its Cholesky factor (upper half zeroed).
fn potrf(a: &mut Mat<f64>) -> Result<(), BoxError> {
    let par = Par::Seq;
    let mut scratch = MemBuffer::new(cholesky_in_place_scratch::<f64>(
        a.nrows(),
        par,
        Spec::default(),
    ));
    let regularization = LltRegularization::default();
    let stack = MemStack::new(&mut scratch);
    cholesky_in_place(a.as_mut(), regularization, par, stack, Spec::default())
        .map_err(|error| format!("a diagonal tile is not positive definite: {error}"))?;
    for j in 1..a.ncols() {
        for i in 0..j {
            a[(i, j)] = 0.0;
        }
    }
    Ok(())
}

/// TRSM: `a ← a l⁻ᵀ`, solved as `l aᵀ = (old a)ᵀ`.
fn trsm(l: &Mat<f64>, a: &mut Mat<f64>) {
    solve_lower_triangular_in_place(l.as_ref(), a.as_mut().transpose_mut(), Par::Seq);
}

/// SYRK: `c ← c − a aᵀ`, lower half.
fn syrk(a: &Mat<f64>, c: &mut Mat<f64>) {
    triangular::matmul(
        c.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Add,
        a.as_ref(),
        BlockStructure::Rectangular,
        a.transpose(),
        BlockStructure::Rectangular,
        -1.0,
        Par::Seq,
    );
}

/// GEMM: `c ← c − a bᵀ`.
fn gemm(a: &Mat<f64>, b: &Mat<f64>, c: &mut Mat<f64>) {
    matmul(
        c.as_mut(),
        Accum::Add,
        a.as_ref(),
        b.transpose(),
        -1.0,
        Par::Seq,
    );
}

// --- The matrix, its tiles, and the check. ---

/// Entry `(i, j)` of test matrix `matrix`: symmetric, a value in `[-0.5, 0.5)` from a hash of
/// the pair and the matrix number, plus `n` on the diagonal. Each row's other entries add up to less than its diagonal
/// one, so the matrix is positive definite (and well conditioned).
fn entry(n: usize, matrix: u64, i: usize, j: usize) -> f64 {
    let (low, high) = (i.min(j) as u64, i.max(j) as u64);
    // splitmix64's finalizer on the pair and the matrix; its top 53 bits as a value in [0, 1).
    let mut z = ((high << 32) ^ low ^ matrix.rotate_right(8)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let noise = (z >> 11) as f64 / (1_u64 << 53) as f64 - 0.5;
    if i == j { n as f64 + noise } else { noise }
}

/// An `n × n` matrix in square tiles of side `tile` (the last ones narrower).
#[derive(Clone, Copy)]
struct Layout {
    n: usize,
    tile: usize,
}

impl Layout {
    fn count(self) -> usize {
        self.n.div_ceil(self.tile)
    }

    fn start(self, i: usize) -> usize {
        i * self.tile
    }

    fn len(self, i: usize) -> usize {
        self.tile.min(self.n - self.start(i))
    }

    /// The tiles `(i, j)`, `i >= j`, row by row.
    fn lower(self) -> impl Iterator<Item = (usize, usize)> {
        (0..self.count()).flat_map(|i| (0..=i).map(move |j| (i, j)))
    }

    /// Tile `(i, j)` of test matrix `matrix`.
    fn tile_of_matrix(self, matrix: u64, i: usize, j: usize) -> Mat<f64> {
        let (row, col) = (self.start(i), self.start(j));
        Mat::from_fn(self.len(i), self.len(j), |r, c| {
            entry(self.n, matrix, row + r, col + c)
        })
    }
}

/// `‖A − L Lᵀ‖_F / ‖A‖_F` for test matrix `matrix`, with `L` given as its lower tiles in
/// [`Layout::lower`] order.
fn relative_residual(layout: Layout, matrix: u64, factor: &[Mat<f64>]) -> f64 {
    let n = layout.n;
    let mut l = Mat::<f64>::zeros(n, n);
    for ((i, j), tile) in layout.lower().zip(factor) {
        l.as_mut()
            .submatrix_mut(
                layout.start(i),
                layout.start(j),
                layout.len(i),
                layout.len(j),
            )
            .copy_from(tile);
    }
    // The lower half of L Lᵀ.
    let mut product = Mat::<f64>::zeros(n, n);
    triangular::matmul(
        product.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        l.as_ref(),
        BlockStructure::TriangularLower,
        l.transpose(),
        BlockStructure::TriangularUpper,
        1.0,
        Par::Seq,
    );
    // Both norms over the whole symmetric matrix: an entry below the diagonal stands for two.
    let (mut error, mut norm) = (0.0, 0.0);
    for j in 0..n {
        for i in j..n {
            let weight = if i == j { 1.0 } else { 2.0 };
            let a = entry(n, matrix, i, j);
            error += weight * (a - product[(i, j)]).powi(2);
            norm += weight * a * a;
        }
    }
    f64::sqrt(error / norm)
}
