//! A sweep's runs, their efficiency and METG(50%) (`README.md`, "The sweep and METG").

/// One run of the graph at one grain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    /// Kernel iterations per task.
    pub(crate) iterations: u64,
    pub(crate) tasks: u64,
    /// Seconds from the first task made to the last one done.
    pub(crate) wall: f64,
}

/// The runs of one sweep, coarsest first.
pub(crate) struct Curve {
    pub(crate) runs: Vec<Run>,
    /// Cores the runs had (the worker threads).
    pub(crate) threads: usize,
    /// Work per kernel iteration (`Kernel::work_per_iteration`).
    pub(crate) work_per_iteration: f64,
}

impl Curve {
    /// Work per second of `run`.
    pub(crate) fn rate(&self, run: &Run) -> f64 {
        run.tasks as f64 * run.iterations as f64 * self.work_per_iteration / run.wall
    }

    /// The best rate of the sweep.
    pub(crate) fn peak(&self) -> f64 {
        self.runs
            .iter()
            .map(|run| self.rate(run))
            .fold(0.0, f64::max)
    }

    /// `run`'s rate over the peak.
    pub(crate) fn efficiency(&self, run: &Run) -> f64 {
        let peak = self.peak();
        if peak > 0.0 {
            self.rate(run) / peak
        } else {
            0.0
        }
    }

    /// Microseconds of one core per task: `wall * threads / tasks`.
    pub(crate) fn granularity(&self, run: &Run) -> f64 {
        run.wall * self.threads as f64 / run.tasks as f64 * 1e6
    }

    /// METG(50%) in microseconds: the finest run with work at or above 50% efficiency, and
    /// the next finer one (below), interpolated in log-granularity; the finest run's
    /// granularity if every run with work is at or above 50%. Found from the fine end, so that
    /// a coarse run that noise pulled below 50% does not end the curve. `None` if no run with
    /// work reaches 50%.
    pub(crate) fn metg(&self) -> Option<f64> {
        let working: Vec<&Run> = self.runs.iter().filter(|run| run.iterations > 0).collect();
        let above = working
            .iter()
            .rposition(|run| self.efficiency(run) >= 0.5)?;
        let (g1, e1) = (
            self.granularity(working[above]),
            self.efficiency(working[above]),
        );
        let Some(below) = working.get(above + 1) else {
            return Some(g1);
        };
        let (g2, e2) = (self.granularity(below), self.efficiency(below));
        Some(g1 * (g2 / g1).powf((e1 - 0.5) / (e1 - e2)))
    }

    /// The granularity of the run without work (the overhead per task), if there is one.
    pub(crate) fn overhead(&self) -> Option<f64> {
        self.runs
            .iter()
            .find(|run| run.iterations == 0)
            .map(|run| self.granularity(run))
    }
}

#[cfg(test)]
mod tests {
    use super::{Curve, Run};

    /// A system with `overhead` seconds per task on top of `iterations` ns of work, on
    /// `threads` cores that run tasks perfectly in parallel.
    fn curve(overhead: f64, threads: usize) -> Curve {
        let runs = [1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1, 0]
            .into_iter()
            .map(|iterations| {
                let tasks = 1000;
                let per_task = iterations as f64 * 1e-9 + overhead;
                Run {
                    iterations,
                    tasks,
                    wall: tasks as f64 * per_task / threads as f64,
                }
            })
            .collect();
        Curve {
            runs,
            threads,
            work_per_iteration: 1.0,
        }
    }

    #[test]
    fn metg_lies_where_the_overhead_equals_the_work() {
        // The peak (1024 iterations) is 1024 / 1124 of the work rate, so 50% efficiency is
        // at about 84 ns of work per task: a granularity of about 0.18 µs, between the runs
        // at 128 and 64 iterations.
        let curve = curve(100e-9, 2);
        let metg = curve.metg().unwrap();
        assert!((0.17..0.23).contains(&metg), "{metg}");
        let overhead = curve.overhead().unwrap();
        assert!((overhead - 0.1).abs() < 1e-9, "{overhead}");
        assert!((curve.efficiency(&curve.runs[0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_coarse_run_below_half_does_not_end_the_curve() {
        let mut curve = curve(100e-9, 2);
        let metg = curve.metg().unwrap();
        curve.runs[1].wall *= 3.0;
        assert_eq!(curve.metg(), Some(metg));
    }

    #[test]
    fn without_a_run_below_half_metg_is_the_finest_grain() {
        let curve = curve(0.0, 1);
        let finest = curve.granularity(&curve.runs[10]);
        assert_eq!(curve.metg(), Some(finest));
    }
}
