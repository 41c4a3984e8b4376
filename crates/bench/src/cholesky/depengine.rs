//! depengine on the tile graph (`tile_dag.rs`): `depengine-perdevice` with `threads` workers,
//! `depengine-1worker` with one, for the speed-up.

use std::time::Instant;

use depengine::{Data, Engine, FnProperty};

use crate::engine::per_device_engine;
use faer::Mat;

use super::matrix::{LowerTiles, TileLayout, assemble};
use super::tile_dag::push_cholesky;
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

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
