//! The `cholesky` group: a tiled Cholesky factorization of a symmetric positive definite
//! matrix (`README.md` beside this crate, "The `cholesky` group").
//!
//! For each size, a system factors the same matrix (`matrix.rs`) untimed for [`WARM_UP`]
//! (at least once), then once timed; the harness checks that factor's relative residual
//! (`‖A − L Lᵀ‖_F / ‖A‖_F` below [`TOLERANCE`], else the run fails) and reports `n³ / 3` flops
//! over the factorization's wall time, in GFLOP/s. With `--timeline PATH`, a depengine system
//! then factors the first size once more, untimed, with the engine's profiler on, and writes
//! the ops' records to `PATH` (`timeline.rs`).

mod depengine;
mod faer;
mod kernels;
mod matrix;
mod tile_dag;
mod timeline;

use std::time::{Duration, Instant};

use ::faer::{Mat, Par};

use crate::args::{Args, report};
use matrix::{TileLayout, relative_residual};

/// The largest relative residual a factor may leave.
pub(crate) const TOLERANCE: f64 = 1e-12;

/// How long a system factors a size untimed before the timed run. One run is not enough
/// everywhere: libgomp's team at 1024 (tile 256) ran its first two or three factorizations of
/// a process at a third of its later rate here, its threads sharing one core at first.
pub(crate) const WARM_UP: Duration = Duration::from_millis(200);

/// A factorization and its time.
pub(crate) struct Factored {
    /// Wall time of the factorization alone (not making the matrix, not the check).
    seconds: f64,
    /// `L` in the lower triangle (what is above the diagonal is not read).
    factor: Mat<f64>,
}

/// A system of the group: factors the test matrix of `layout.n`.
trait System {
    fn factor(&mut self, layout: TileLayout) -> Result<Factored, String>;

    /// The engine the system runs its ops on, whose profiler records them (`--timeline`):
    /// depengine's systems only.
    fn engine(&self) -> Option<&::depengine::Engine> {
        None
    }
}

/// `depengine-bench cholesky --system NAME`: every size, factored and checked.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    let flags = &args.cholesky;
    let mut system: Box<dyn System> = match args.system.as_str() {
        "depengine-perdevice" => Box::new(depengine::Depengine::new(args.threads)?),
        "depengine-1worker" => Box::new(depengine::Depengine::new(1)?),
        "depengine-replay" => Box::new(depengine::DepengineReplay::new(args.threads)?),
        "faer" => Box::new(faer::Faer::new(args.threads)?),
        other => {
            return Err(format!(
                "unknown system `{other}` (expected depengine-perdevice, depengine-1worker, \
                 depengine-replay or faer)"
            ));
        }
    };
    // Refused before any work: a system without the profiler has no timeline to write.
    let mut pending_timeline = match (&flags.timeline, system.engine()) {
        (None, _) => None,
        (Some(path), Some(engine)) => Some((path, engine.clone())),
        (Some(_), None) => {
            return Err(format!(
                "--timeline: `{}` has no profiler (depengine-perdevice and depengine-1worker \
                 have)",
                args.system
            ));
        }
    };
    // The check, untimed, on as many threads as the run.
    let checker = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()
        .map_err(|e| e.to_string())?;
    // The factor's relative residual, or the error that fails the run.
    let residual_of = |n: usize, factored: &Factored| {
        let residual = checker
            .install(|| relative_residual(factored.factor.as_ref(), Par::rayon(args.threads)));
        check(n, residual).map(|()| residual)
    };
    for &n in &flags.sizes {
        let workload = format!("n{n}");
        if !args.wants(&workload) {
            continue;
        }
        let layout = TileLayout::new(n, flags.tile)?;
        // Untimed runs at the same size first (first touches of memory, the libraries'
        // buffers, where the OS puts the threads): the figure is the steady rate.
        let warming = Instant::now();
        while {
            system.factor(layout)?;
            warming.elapsed() < WARM_UP
        } {}
        let factored = system.factor(layout)?;
        let residual = residual_of(n, &factored)?;
        let gflops = flops(n) / factored.seconds / 1e9;
        eprintln!(
            "{} n {n} tile {}: {:.3} s, {gflops:.2} GFLOP/s, residual {residual:.2e}",
            args.system, flags.tile, factored.seconds
        );
        report(&workload, gflops, "GFLOP/s");
        // After the timed run, so that the profiler never runs during one.
        if let Some((path, engine)) = pending_timeline.take() {
            let (factored, profile) = timeline::factor_profiled(&engine, system.as_mut(), layout)?;
            residual_of(n, &factored)?;
            let run = timeline::TimelineRun {
                system: &args.system,
                layout,
                threads: args.threads,
            };
            timeline::write(path, &run, &profile)?;
            eprintln!(
                "{} n {n} tile {}: {} ops profiled, written to {}",
                args.system,
                flags.tile,
                profile.len(),
                path.display()
            );
        }
    }
    Ok(())
}

/// A Cholesky factorization's flops, by convention: `n³ / 3`.
fn flops(n: usize) -> f64 {
    let n = n as f64;
    n * n * n / 3.0
}

/// Fails the run when the factor is not one.
fn check(n: usize, residual: f64) -> Result<(), String> {
    // A NaN residual compares false, so it fails too.
    if residual < TOLERANCE {
        Ok(())
    } else {
        Err(format!(
            "n {n}: relative residual ‖A − L Lᵀ‖_F / ‖A‖_F = {residual:.3e}, above {TOLERANCE:e}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use ::faer::Par;

    use super::matrix::{TileLayout, relative_residual};
    use super::{System, check};
    use crate::args::Args;

    fn residual(system: &mut dyn System, n: usize, tile: usize) -> f64 {
        let factored = system.factor(TileLayout::new(n, tile).unwrap()).unwrap();
        relative_residual(factored.factor.as_ref(), Par::Seq)
    }

    /// The tile graph on depengine factors the matrix: n = 256 in 4 × 4 tiles of 64.
    #[test]
    fn the_tile_graph_factors_the_matrix() {
        let mut system = super::depengine::Depengine::new(2).unwrap();
        let residual = residual(&mut system, 256, 64);
        assert!(check(256, residual).is_ok(), "residual {residual:e}");
    }

    /// A size the tile does not divide: the last tile row and column are narrower (200 =
    /// 3 × 64 + 8), and a size smaller than one tile is a single POTRF.
    #[test]
    fn the_tile_graph_factors_a_size_the_tile_does_not_divide() {
        let mut system = super::depengine::Depengine::new(2).unwrap();
        for (n, tile) in [(200, 64), (37, 64), (130, 1 << 10), (65, 8)] {
            let residual = residual(&mut system, n, tile);
            assert!(
                check(n, residual).is_ok(),
                "n {n} tile {tile}: {residual:e}"
            );
        }
    }

    #[test]
    fn one_worker_and_faer_factor_the_matrix() {
        let mut one = super::depengine::Depengine::new(1).unwrap();
        let mut faer = super::faer::Faer::new(2).unwrap();
        for system in [&mut one as &mut dyn System, &mut faer] {
            let residual = residual(system, 192, 64);
            assert!(check(192, residual).is_ok(), "residual {residual:e}");
        }
    }

    /// `--timeline` writes a record per op of one factorization of the first size: n = 256
    /// in 4 × 4 tiles of 64 is 4 POTRF, 6 TRSM (one per tile below the diagonal), 6 SYRK
    /// and 4 GEMM (one per tile `(i, j)`, `i > j`, per step `k < j`).
    #[test]
    fn the_timeline_has_a_record_per_op_of_the_first_size() {
        let path = std::env::temp_dir().join(format!(
            "depengine-bench-timeline-{}.json",
            std::process::id()
        ));
        let flags = [
            "--system",
            "depengine-perdevice",
            "--threads",
            "2",
            "--sizes",
            "256,128",
            "--tile",
            "64",
            "--timeline",
            path.to_str().unwrap(),
        ];
        let args = Args::parse(flags.into_iter().map(str::to_owned)).unwrap();
        super::run(&args).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let timeline: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(timeline["system"], "depengine-perdevice");
        assert_eq!(
            (timeline["n"].as_u64(), timeline["tile"].as_u64()),
            (Some(256), Some(64))
        );
        let ops = timeline["ops"].as_array().unwrap();
        let count = |name: &str| ops.iter().filter(|op| op["op"] == name).count();
        let counts = [count("potrf"), count("trsm"), count("syrk"), count("gemm")];
        assert_eq!(counts, [4, 6, 6, 4], "{text}");
        assert_eq!(ops.len(), 20, "no other op: {text}");
        let mut last_start = 0.0;
        for op in ops {
            let thread = op["thread"].as_str().unwrap();
            assert!(thread.starts_with("depengine-cpu-priority"), "{thread}");
            let (start, end) = (
                op["start_us"].as_f64().unwrap(),
                op["end_us"].as_f64().unwrap(),
            );
            assert!(last_start <= start && start <= end, "{op}");
            last_start = start;
        }
    }

    #[test]
    fn a_system_without_the_profiler_refuses_a_timeline() {
        let path = std::env::temp_dir().join("depengine-bench-no-timeline.json");
        let flags = ["--system", "faer", "--sizes", "64", "--timeline"]
            .into_iter()
            .chain(path.to_str());
        let args = Args::parse(flags.map(str::to_owned)).unwrap();
        let error = super::run(&args).unwrap_err();
        assert!(
            error.starts_with("--timeline: `faer` has no profiler"),
            "{error}"
        );
        assert!(!path.exists());
    }

    #[test]
    fn a_large_or_nan_residual_fails_the_run() {
        assert!(check(8, 1e-3).is_err());
        assert!(check(8, f64::NAN).is_err());
    }
}
