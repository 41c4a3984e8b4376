//! rayon on a grid, where each pattern fits it: `trivial` as one parallel loop over every
//! task, `no_comm` as a parallel loop over the points (each running its steps in order), and
//! every other pattern a step at a time (a parallel loop over the points per step, whose end
//! is a barrier: a schedule valid for any pattern whose tasks read only the step before).

use std::hint::black_box;
use std::time::Instant;

use rayon::prelude::*;
use smallvec::SmallVec;

use super::pattern::Pattern;
use super::tile::{Tile, run_task};
use super::{Grid, MAX_INPUTS, System};

pub(crate) struct Rayon {
    pool: rayon::ThreadPool,
}

impl Rayon {
    pub(crate) fn new(threads: usize) -> Result<Self, String> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Rayon { pool })
    }
}

impl System for Rayon {
    fn run(&mut self, grid: &Grid) -> Result<f64, String> {
        let mut fields: [Vec<Tile>; 2] =
            std::array::from_fn(|_| (0..grid.width).map(|_| Tile::new(grid.output)).collect());
        let start = Instant::now();
        self.pool.install(|| -> Result<(), String> {
            match grid.pattern {
                Pattern::Trivial => {
                    (0..grid.tasks()).into_par_iter().for_each(|task| {
                        let step = task / grid.width as u64;
                        let point = (task % grid.width as u64) as usize;
                        black_box(grid.task(step, point, &mut Vec::new()).run_kernel());
                    });
                    Ok(())
                }
                Pattern::NoComm => {
                    let [even, odd] = &mut fields;
                    even.par_iter_mut()
                        .zip(odd.par_iter_mut())
                        .enumerate()
                        .try_for_each(|(point, (even, odd))| {
                            let mut scratch = Vec::new();
                            for step in 0..grid.steps {
                                let task = grid.task(step, point, &mut scratch);
                                let (output, input) = if step % 2 == 0 {
                                    (&mut *even, &*odd)
                                } else {
                                    (&mut *odd, &*even)
                                };
                                let inputs: SmallVec<[&Tile; MAX_INPUTS]> =
                                    task.deps.iter().map(|_| input).collect();
                                run_task(&task, &inputs, output)?;
                            }
                            Ok(())
                        })
                }
                _ => {
                    for step in 0..grid.steps {
                        let [even, odd] = &mut fields;
                        let (outputs, inputs) = if step % 2 == 0 {
                            (even, &*odd)
                        } else {
                            (odd, &*even)
                        };
                        outputs.par_iter_mut().enumerate().try_for_each_init(
                            Vec::new,
                            |scratch, (point, output)| {
                                let task = grid.task(step, point, scratch);
                                let tiles: SmallVec<[&Tile; MAX_INPUTS]> =
                                    task.deps.iter().map(|&dep| &inputs[dep]).collect();
                                run_task(&task, &tiles, output)
                            },
                        )?;
                    }
                    Ok(())
                }
            }
        })?;
        Ok(start.elapsed().as_secs_f64())
    }
}
