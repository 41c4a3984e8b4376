//! The `taskbench` group: Task Bench's task graphs and METG(50%) (`README.md` beside this
//! crate, "The `taskbench` group", holds the definitions every system implements).
//!
//! For each pattern, each system runs the graph at halving grains and reports the efficiency
//! curve, METG(50%), the peak and the overhead per task; `metg.rs` computes them from the runs.

mod depengine;
mod kernel;
mod metg;
mod pattern;
mod rayon;
mod tile;

use smallvec::SmallVec;

use crate::args::{Args, GridFlags, report};
use kernel::Kernel;
use metg::{Curve, Run};
use pattern::Pattern;
pub(crate) use pattern::splitmix64;

/// The most tiles a task reads: a typed op names at most 8 data (`depengine::MAX_ACCESSES`),
/// one of them its output.
const MAX_INPUTS: usize = ::depengine::MAX_ACCESSES - 1;

/// One graph to run: a pattern on a grid at one grain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grid {
    pub(crate) pattern: Pattern,
    pub(crate) width: usize,
    pub(crate) steps: u64,
    pub(crate) radix: usize,
    pub(crate) kernel: Kernel,
    pub(crate) iterations: u64,
    pub(crate) output: usize,
}

impl Grid {
    /// Task `(step, point)`: its inputs and its kernel.
    pub(crate) fn task(&self, step: u64, point: usize, scratch: &mut Vec<usize>) -> Task {
        if step == 0 {
            scratch.clear();
        } else {
            self.pattern
                .deps(step, point, self.width, self.radix, scratch);
        }
        Task {
            step,
            point,
            deps: scratch.iter().copied().collect(),
            kernel: self.kernel,
            iterations: self.iterations,
        }
    }

    pub(crate) fn tasks(&self) -> u64 {
        self.steps * self.width as u64
    }
}

/// One task of a grid.
#[derive(Debug)]
pub(crate) struct Task {
    pub(crate) step: u64,
    pub(crate) point: usize,
    /// The points of step `step - 1` it reads, in increasing order.
    pub(crate) deps: SmallVec<[usize; MAX_INPUTS]>,
    kernel: Kernel,
    iterations: u64,
}

impl Task {
    /// Runs its kernel, seeded with `step + point`.
    pub(crate) fn run_kernel(&self) -> f64 {
        self.kernel
            .run(self.iterations, (self.step + self.point as u64) as f64)
    }
}

/// A system of the group: runs one grid and returns its wall time in seconds.
trait System {
    fn run(&mut self, grid: &Grid) -> Result<f64, String>;
}

/// `depengine-bench taskbench --system NAME`: every selected pattern's sweep.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    let flags = &args.grid;
    let kernel = Kernel::parse(&flags.kernel)?;
    let width = if flags.width == 0 {
        args.threads
    } else {
        flags.width
    };
    if flags.radix == 0 {
        return Err("--radix must be at least 1".to_owned());
    }
    let mut system: Box<dyn System> = match args.system.as_str() {
        "depengine-perdevice" => Box::new(depengine::Depengine::new(args.threads)?),
        "rayon" => Box::new(rayon::Rayon::new(args.threads)?),
        other => {
            return Err(format!(
                "unknown system `{other}` (expected depengine-perdevice or rayon)"
            ));
        }
    };
    let wanted = wanted_patterns(&args.workloads)?;
    let mut scratch = Vec::new();
    for pattern in wanted {
        let widest = (1..3)
            .map(|step| {
                (0..width)
                    .map(|point| {
                        pattern.deps(step, point, width, flags.radix, &mut scratch);
                        scratch.len()
                    })
                    .max()
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        if widest > MAX_INPUTS {
            return Err(format!(
                "{}: tasks of width {width} read {widest} tiles, more than the {MAX_INPUTS} \
                 a task may read",
                pattern.name()
            ));
        }
        let curve = sweep(system.as_mut(), pattern, width, flags, kernel, args.threads)?;
        report_curve(pattern, &curve, kernel);
    }
    Ok(())
}

/// The patterns `--workloads` selects (all if none is named): a workload names a pattern, or one
/// of its records (`stencil_1d.metg`), and the pattern runs; any other name is an error.
fn wanted_patterns(workloads: &[String]) -> Result<Vec<Pattern>, String> {
    fn pattern_of(name: &str) -> &str {
        name.split('.').next().unwrap_or(name)
    }
    if let Some(unknown) = workloads
        .iter()
        .find(|name| !Pattern::ALL.iter().any(|p| p.name() == pattern_of(name)))
    {
        return Err(format!(
            "--workloads: `{unknown}` is neither a taskbench pattern nor one of its records"
        ));
    }
    Ok(Pattern::ALL
        .into_iter()
        .filter(|p| workloads.is_empty() || workloads.iter().any(|w| pattern_of(w) == p.name()))
        .collect())
}

/// The kernel iterations of a sweep: the coarsest grain, halving down to 1, then 0.
fn grains(max_iterations: u64) -> impl Iterator<Item = u64> {
    std::iter::successors(Some(max_iterations.max(1)), |&i| (i > 1).then_some(i / 2))
        .chain(std::iter::once(0))
}

fn sweep(
    system: &mut dyn System,
    pattern: Pattern,
    width: usize,
    flags: &GridFlags,
    kernel: Kernel,
    threads: usize,
) -> Result<Curve, String> {
    let mut runs = Vec::new();
    for iterations in grains(flags.max_iterations) {
        let work = 1_u64 << flags.scale;
        let steps = (work / (width as u64 * iterations.max(1))).clamp(16, flags.max_steps.max(16));
        let grid = Grid {
            pattern,
            width,
            steps,
            radix: flags.radix,
            kernel,
            iterations,
            output: flags.output,
        };
        let wall = system
            .run(&grid)
            .map_err(|e| format!("{} at {iterations} iterations: {e}", pattern.name()))?;
        runs.push(Run {
            iterations,
            tasks: grid.tasks(),
            wall,
        });
    }
    Ok(Curve {
        runs,
        threads,
        work_per_iteration: kernel.work_per_iteration(),
    })
}

fn report_curve(pattern: Pattern, curve: &Curve, kernel: Kernel) {
    let name = pattern.name();
    if let Some(metg) = curve.metg() {
        report(&format!("{name}.metg"), metg, "us");
    }
    if let Some(overhead) = curve.overhead() {
        report(&format!("{name}.overhead"), overhead, "us");
    }
    report(&format!("{name}.peak"), curve.peak() / 1e9, kernel.unit());
    for run in &curve.runs {
        let grain = run.iterations;
        report(
            &format!("{name}.eff.{grain}"),
            curve.efficiency(run),
            "ratio",
        );
        report(
            &format!("{name}.gran.{grain}"),
            curve.granularity(run),
            "us",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{Grid, Kernel, Pattern, System, grains, wanted_patterns};

    /// Every pattern's graph runs to the end on each Rust system: every task found its inputs
    /// written by the right tasks (a misordering fails the run, `tile.rs`).
    #[test]
    fn every_pattern_runs_checked_on_each_system() {
        let mut systems: Vec<Box<dyn System>> = vec![
            Box::new(super::depengine::Depengine::new(2).unwrap()),
            Box::new(super::rayon::Rayon::new(2).unwrap()),
        ];
        for system in &mut systems {
            for pattern in Pattern::ALL {
                for width in [1, 2, 5] {
                    let grid = Grid {
                        pattern,
                        width,
                        steps: 40,
                        radix: 3,
                        kernel: Kernel::ComputeBound,
                        iterations: 3,
                        output: 24,
                    };
                    let wall = system.run(&grid).unwrap();
                    assert!(wall > 0.0);
                }
            }
        }
    }

    #[test]
    fn workloads_name_patterns_or_their_records() {
        let names = |list: &[&str]| list.iter().map(|&n| n.to_owned()).collect::<Vec<_>>();
        let picked = wanted_patterns(&names(&["stencil_1d.metg", "fft", "fft.overhead"])).unwrap();
        let picked: Vec<&str> = picked.iter().map(|p| p.name()).collect();
        assert_eq!(picked, ["stencil_1d", "fft"]);
        assert_eq!(wanted_patterns(&[]).unwrap().len(), Pattern::ALL.len());
        let error = wanted_patterns(&names(&["stencil"])).unwrap_err();
        assert!(error.contains("`stencil`"), "{error}");
    }

    #[test]
    fn a_sweep_halves_down_to_one_then_zero() {
        assert_eq!(grains(8).collect::<Vec<_>>(), [8, 4, 2, 1, 0]);
        assert_eq!(grains(1).collect::<Vec<_>>(), [1, 0]);
    }
}
