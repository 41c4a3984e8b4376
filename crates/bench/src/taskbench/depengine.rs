//! depengine on a grid: one typed data tile per point and field, one typed op per task that
//! reads its input tiles and writes its own; the main thread pushes every task, then waits.

use std::hint::black_box;
use std::time::Instant;

use depengine::{BoxError, Data, Engine, FnProperty};

use crate::engine::per_device_engine;

use super::tile::{Tile, run_task};
use super::{Grid, System};

pub(crate) struct Depengine {
    engine: Engine,
}

impl Depengine {
    /// A `ThreadedPerDevice` engine with `threads` CPU workers
    /// (`crate::engine::per_device_engine`).
    pub(crate) fn new(threads: usize) -> Result<Self, String> {
        let engine = per_device_engine(threads, FnProperty::Normal)?;
        Ok(Depengine { engine })
    }
}

impl System for Depengine {
    fn run(&mut self, grid: &Grid) -> Result<f64, String> {
        let engine = &self.engine;
        let field = || -> Result<Vec<Data<Tile>>, String> {
            (0..grid.width)
                .map(|_| engine.data(Tile::new(grid.output)).map_err(err))
                .collect()
        };
        let fields = if grid.pattern.has_data() {
            [field()?, field()?]
        } else {
            [Vec::new(), Vec::new()]
        };
        let mut scratch = Vec::new();
        let start = Instant::now();
        for step in 0..grid.steps {
            for point in 0..grid.width {
                let task = grid.task(step, point, &mut scratch);
                if grid.pattern.has_data() {
                    let output = &fields[(step % 2) as usize][point];
                    let inputs = &fields[((step + 1) % 2) as usize];
                    push_task(engine, task, inputs, output)?;
                } else {
                    engine
                        .op("task")
                        .push_sync(move |_| {
                            black_box(task.run_kernel());
                        })
                        .map_err(err)?;
                }
            }
        }
        engine.wait_for_all().map_err(err)?;
        Ok(start.elapsed().as_secs_f64())
    }
}

/// Pushes `task`: it reads the tiles of `inputs` its deps name and writes `output`. A typed
/// op's accesses are a tuple whose length is part of its type, hence an arm per input count.
fn push_task(
    engine: &Engine,
    task: super::Task,
    inputs: &[Data<Tile>],
    output: &Data<Tile>,
) -> Result<(), String> {
    fn body(task: &super::Task, inputs: &[&Tile], output: &mut Tile) -> Result<(), BoxError> {
        run_task(task, inputs, output).map_err(BoxError::from)
    }
    /// `op` reading the tiles `inputs[dep]` of the deps listed, writing `output`.
    macro_rules! typed {
        ($op:expr, [$($dep:ident),*]) => {
            $op$(.read(&inputs[$dep]))*
                .write(output)
                .push_sync(move |_, ($($dep,)* out)| body(&task, &[$($dep),*], out))
        };
    }
    let op = engine.op("task");
    let pushed = match *task.deps.as_slice() {
        [] => op
            .write(output)
            .push_sync(move |_, out| body(&task, &[], out)),
        [d0] => typed!(op, [d0]),
        [d0, d1] => typed!(op, [d0, d1]),
        [d0, d1, d2] => typed!(op, [d0, d1, d2]),
        [d0, d1, d2, d3] => typed!(op, [d0, d1, d2, d3]),
        [d0, d1, d2, d3, d4] => typed!(op, [d0, d1, d2, d3, d4]),
        [d0, d1, d2, d3, d4, d5] => typed!(op, [d0, d1, d2, d3, d4, d5]),
        [d0, d1, d2, d3, d4, d5, d6] => typed!(op, [d0, d1, d2, d3, d4, d5, d6]),
        _ => {
            return Err(format!(
                "task {:?} reads more tiles than a typed op names",
                task.deps
            ));
        }
    };
    pushed.map_err(err)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
