//! depengine on the tile graph (`tile_dag.rs`): `depengine-perdevice` with `threads` workers,
//! `depengine-1worker` with one, for the speed-up; `depengine-replay`, the factorization captured
//! once per size and replayed over each new matrix.

use std::time::Instant;

use depengine::{Data, Engine, FnProperty, Plan};

use crate::engine::per_device_engine;
use faer::Mat;

use super::matrix::{LowerTiles, TileLayout, assemble};
use super::tile_dag::{capture_cholesky, push_cholesky};
use super::{Factored, System};

pub(crate) struct Depengine {
    engine: Engine,
}

impl Depengine {
    /// A `ThreadedPerDevice` engine whose priority block (where the tile ops run) has
    /// `threads` threads (`crate::engine::per_device_engine`).
    pub(crate) fn new(threads: usize) -> Result<Self, String> {
        let engine = per_device_engine(threads, FnProperty::CpuPrioritized)?;
        Ok(Depengine { engine })
    }
}

impl System for Depengine {
    fn factor(&mut self, layout: TileLayout) -> Result<Factored, String> {
        let engine = &self.engine;
        let tiles: LowerTiles<Data<Mat<f64>>> = LowerTiles::try_new(layout, |i, j| {
            engine.data(layout.tile_of_matrix(i, j)).map_err(err)
        })?;
        let start = Instant::now();
        push_cholesky(engine, layout, &tiles).map_err(err)?;
        engine.wait_for_all().map_err(err)?;
        let seconds = start.elapsed().as_secs_f64();
        let tiles = tiles
            .into_vec()
            .into_iter()
            .map(|tile| engine.take(tile).map_err(err))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Factored {
            seconds,
            factor: assemble(layout, tiles),
        })
    }

    fn engine(&self) -> Option<&Engine> {
        Some(&self.engine)
    }
}

/// The factorization captured once per size: each `factor` writes the new matrix into the
/// tiles (untimed, as the other systems make theirs), then times one replay.
pub(crate) struct DepengineReplay {
    engine: Engine,
    /// The tiles of the last size and the plan that factors them.
    captured: Option<Captured>,
}

/// A size's tiles and the plan that factors them.
struct Captured {
    n: usize,
    tiles: LowerTiles<Data<Mat<f64>>>,
    plan: Plan,
}

impl DepengineReplay {
    /// A `ThreadedPerDevice` engine whose CPU block (where a plan's ops run) has `threads`
    /// threads.
    pub(crate) fn new(threads: usize) -> Result<Self, String> {
        let engine = per_device_engine(threads, FnProperty::Normal)?;
        Ok(DepengineReplay {
            engine,
            captured: None,
        })
    }
}

impl System for DepengineReplay {
    fn factor(&mut self, layout: TileLayout) -> Result<Factored, String> {
        let engine = &self.engine;
        let Captured { tiles, plan, .. } = &*match &mut self.captured {
            Some(captured) if captured.n == layout.n => captured,
            slot => {
                let tiles: LowerTiles<Data<Mat<f64>>> = LowerTiles::try_new(layout, |i, j| {
                    engine.data(layout.tile_of_matrix(i, j)).map_err(err)
                })?;
                let plan = capture_cholesky(engine, layout, &tiles).map_err(err)?;
                slot.insert(Captured {
                    n: layout.n,
                    tiles,
                    plan,
                })
            }
        };
        // The new matrix, written into the tiles by ops the replay waits for.
        for (i, j) in layout.lower() {
            engine
                .op("load tile")
                .write(tiles.get(i, j))
                .push_sync(move |_, tile| *tile = layout.tile_of_matrix(i, j))
                .map_err(err)?;
        }
        engine.wait_for_all().map_err(err)?;
        let start = Instant::now();
        engine.replay(plan).map_err(err)?;
        engine.wait_for_all().map_err(err)?;
        let seconds = start.elapsed().as_secs_f64();
        let tiles = layout
            .lower()
            .map(|(i, j)| Ok(engine.read(tiles.get(i, j)).map_err(err)?.clone()))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Factored {
            seconds,
            factor: assemble(layout, tiles),
        })
    }

    fn engine(&self) -> Option<&Engine> {
        Some(&self.engine)
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
