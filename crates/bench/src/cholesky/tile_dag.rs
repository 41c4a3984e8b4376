//! The tiled Cholesky as depengine ops: every tile a typed data the engine owns, every kernel
//! (`kernels.rs`) an op that names the tiles it reads and the one it writes. The engine
//! derives the task graph from those accesses; this file only pushes the ops of a
//! right-looking factorization in its sequential order.
//!
//! Priorities follow the critical path. The diagonal step `k + 1` waits for `POTRF(k)`, then
//! `TRSM(k + 1, k)`, then `SYRK(k + 1, k)`: the chain that runs down the diagonal. An op's
//! priority is `2 · tiles − i − j` for the tile `(i, j)` it writes, so that a tile nearer the
//! top-left corner, which an earlier diagonal step needs, comes first: `POTRF(k)` is above
//! every op that writes a tile right of or below it, and the chain `POTRF(k)`,
//! `TRSM(k + 1, k)`, `SYRK(k + 1, k)`, `POTRF(k + 1)` steps down one at a time.
//!
//! The ops are `CpuPrioritized`: depengine runs those on its priority block, highest priority
//! first (a `Normal` op goes to a work-stealing worker block, which has no priority order).
//! They are marked for the profiler (`OpBuilder::profiled`): in `ProfileMode::Marked` it
//! records the factorization's kernels and none of the other ops the harness pushes (the
//! `take`s of the tiles), which is how `--timeline` (`timeline.rs`) profiles them.

use depengine::{BoxError, Capture, Data, Engine, EngineError, FnProperty, Plan};
use faer::Mat;

use super::kernels::{gemm, potrf, syrk, trsm};
use super::matrix::{LowerTiles, TileLayout};

/// One kernel of the factorization, on tiles by coordinates (`potrf(k)` writes `(k, k)`;
/// `trsm(i, k)` reads `(k, k)`, writes `(i, k)`; `syrk(i, k)` reads `(i, k)`, writes `(i, i)`;
/// `gemm(i, j, k)` reads `(i, k)` and `(j, k)`, writes `(i, j)`).
#[derive(Clone, Copy)]
enum Kernel {
    Potrf { k: usize },
    Trsm { i: usize, k: usize },
    Syrk { i: usize, k: usize },
    Gemm { i: usize, j: usize, k: usize },
}

/// The kernels of a right-looking factorization of `count × count` tiles, in its sequential
/// order, each with its priority (`2 · count − i − j` for the tile `(i, j)` it writes).
fn kernels(count: usize) -> impl Iterator<Item = (Kernel, i32)> {
    let priority = move |i: usize, j: usize| i32::try_from(2 * count - i - j).unwrap_or(i32::MAX);
    (0..count).flat_map(move |k| {
        let potrf = std::iter::once((Kernel::Potrf { k }, priority(k, k)));
        let trsms = (k + 1..count).map(move |i| (Kernel::Trsm { i, k }, priority(i, k)));
        let updates = (k + 1..count).flat_map(move |i| {
            std::iter::once((Kernel::Syrk { i, k }, priority(i, i)))
                .chain((k + 1..i).map(move |j| (Kernel::Gemm { i, j, k }, priority(i, j))))
        });
        potrf.chain(trsms).chain(updates)
    })
}

/// Pushes the factorization of the matrix whose lower tiles are `tiles`, in place: each tile
/// `(i, j)` ends as tile `(i, j)` of `L`. Returns once every op is pushed; a tile's value is
/// the factor's once every op pushed on it ran (`Engine::wait_for_all`, `Engine::take`). A
/// diagonal tile that is not positive definite fails its `POTRF` op, which the engine's
/// waits report, and the ops that depend on it are skipped.
///
/// # Errors
///
/// When the engine refuses a push (shut down, a tile of another engine).
pub(crate) fn push_cholesky(
    engine: &Engine,
    layout: TileLayout,
    tiles: &LowerTiles<Data<Mat<f64>>>,
) -> Result<(), EngineError> {
    for (kernel, priority) in kernels(layout.count()) {
        let op = |name: &'static str| {
            engine
                .op(name)
                .prop(FnProperty::CpuPrioritized)
                .priority(priority)
                .profiled()
        };
        match kernel {
            Kernel::Potrf { k } => op("potrf")
                .write(tiles.get(k, k))
                .push_sync(|_, a| potrf(a).map_err(BoxError::from))?,
            Kernel::Trsm { i, k } => op("trsm")
                .read(tiles.get(k, k))
                .write(tiles.get(i, k))
                .push_sync(|_, (l, a)| trsm(l, a))?,
            Kernel::Syrk { i, k } => op("syrk")
                .read(tiles.get(i, k))
                .write(tiles.get(i, i))
                .push_sync(|_, (a, c)| syrk(a, c))?,
            Kernel::Gemm { i, j, k } => op("gemm")
                .read(tiles.get(i, k))
                .read(tiles.get(j, k))
                .write(tiles.get(i, j))
                .push_sync(|_, (a, b, c)| gemm(a, b, c))?,
        }
    }
    Ok(())
}

/// The same factorization captured once as a plan (`Engine::capture`): each replay factors
/// whatever `tiles` hold then. A plan's ops run on the CPU workers, which take no priority
/// order: the priorities reach the functions only.
///
/// # Errors
///
/// When the engine refuses the capture.
pub(crate) fn capture_cholesky(
    engine: &Engine,
    layout: TileLayout,
    tiles: &LowerTiles<Data<Mat<f64>>>,
) -> Result<Plan, EngineError> {
    engine.capture("cholesky", |plan: &mut Capture<'_>| {
        for (kernel, priority) in kernels(layout.count()) {
            match kernel {
                Kernel::Potrf { k } => plan
                    .op("potrf")
                    .priority(priority)
                    .profiled()
                    .write(tiles.get(k, k))
                    .push_sync(|_, a| potrf(a).map_err(BoxError::from))?,
                Kernel::Trsm { i, k } => plan
                    .op("trsm")
                    .priority(priority)
                    .profiled()
                    .read(tiles.get(k, k))
                    .write(tiles.get(i, k))
                    .push_sync(|_, (l, a)| trsm(l, a))?,
                Kernel::Syrk { i, k } => plan
                    .op("syrk")
                    .priority(priority)
                    .profiled()
                    .read(tiles.get(i, k))
                    .write(tiles.get(i, i))
                    .push_sync(|_, (a, c)| syrk(a, c))?,
                Kernel::Gemm { i, j, k } => plan
                    .op("gemm")
                    .priority(priority)
                    .profiled()
                    .read(tiles.get(i, k))
                    .read(tiles.get(j, k))
                    .write(tiles.get(i, j))
                    .push_sync(|_, (a, b, c)| gemm(a, b, c))?,
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use depengine::{Engine, EngineConfig, EngineError};
    use faer::Mat;

    use super::push_cholesky;
    use crate::cholesky::matrix::{LowerTiles, TileLayout};

    /// A matrix that is not positive definite (`−I`) fails the first `POTRF`, and the wait
    /// says so, naming the op: no factor is reported.
    #[test]
    fn a_matrix_that_is_not_positive_definite_fails_the_wait() {
        let engine = Engine::new(EngineConfig::default().cpu_priority_threads(2)).unwrap();
        let layout = TileLayout::new(24, 8).unwrap();
        let tiles = LowerTiles::try_new(layout, |i, j| {
            let side = (layout.len(i), layout.len(j));
            let tile = if i == j {
                -Mat::<f64>::identity(side.0, side.1)
            } else {
                Mat::zeros(side.0, side.1)
            };
            engine.data(tile).map_err(EngineError::from)
        })
        .unwrap();
        push_cholesky(&engine, layout, &tiles).unwrap();
        match engine.wait_for_all() {
            Err(EngineError::OpFailed(failure)) => assert_eq!(failure.op_name(), "potrf"),
            other => panic!("expected the potrf to fail, got {other:?}"),
        }
    }
}
