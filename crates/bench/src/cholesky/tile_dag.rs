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

use depengine::{BoxError, Data, Engine, EngineError, FnProperty};
use faer::Mat;

use super::kernels::{gemm, potrf, syrk, trsm};
use super::matrix::{LowerTiles, TileLayout};

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
    let count = layout.count();
    let priority = |i: usize, j: usize| i32::try_from(2 * count - i - j).unwrap_or(i32::MAX);
    let op = |name: &'static str, i: usize, j: usize| {
        engine
            .op(name)
            .prop(FnProperty::CpuPrioritized)
            .priority(priority(i, j))
            .profiled()
    };
    for k in 0..count {
        op("potrf", k, k)
            .write(tiles.get(k, k))
            .push_sync(|_, a| potrf(a).map_err(BoxError::from))?;
        for i in k + 1..count {
            op("trsm", i, k)
                .read(tiles.get(k, k))
                .write(tiles.get(i, k))
                .push_sync(|_, (l, a)| trsm(l, a))?;
        }
        for i in k + 1..count {
            op("syrk", i, i)
                .read(tiles.get(i, k))
                .write(tiles.get(i, i))
                .push_sync(|_, (a, c)| syrk(a, c))?;
            for j in k + 1..i {
                op("gemm", i, j)
                    .read(tiles.get(i, k))
                    .read(tiles.get(j, k))
                    .write(tiles.get(i, j))
                    .push_sync(|_, (a, b, c)| gemm(a, b, c))?;
            }
        }
    }
    Ok(())
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
