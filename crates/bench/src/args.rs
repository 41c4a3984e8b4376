//! Command-line flags shared by every group, and the `RESULT` line they print.

use std::path::PathBuf;
use std::time::Duration;

/// Flags of one invocation; sizes default to the full (non-`--quick`) benchmark.
#[derive(Debug, Clone)]
pub(crate) struct Args {
    /// The system under test, e.g. `depengine-pool`, `rayon`.
    pub(crate) system: String,
    pub(crate) threads: usize,
    pub(crate) tasks: u64,
    pub(crate) depth: u32,
    pub(crate) rounds: u64,
    pub(crate) idle: Duration,
    pub(crate) ops: u64,
    /// The bulk size of the `depengine-bulk` engine system (`--bulk`, default 64).
    pub(crate) bulk: usize,
    /// The `gpu` group's compute workers per GPU (`--gpu-workers`, default 1).
    pub(crate) gpu_workers: usize,
    /// Run only these workloads; empty means all.
    pub(crate) workloads: Vec<String>,
    /// The `taskbench` group's grid and kernel.
    pub(crate) grid: GridFlags,
    /// The `cholesky` group's sizes and tile.
    pub(crate) cholesky: CholeskyFlags,
}

impl Args {
    pub(crate) fn parse(mut words: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut parsed = Args {
            system: String::new(),
            threads: 2,
            tasks: 1_000_000,
            depth: 20,
            rounds: 1000,
            idle: Duration::from_secs(1),
            ops: 200_000,
            bulk: 64,
            gpu_workers: 1,
            workloads: Vec::new(),
            grid: GridFlags::default(),
            cholesky: CholeskyFlags::default(),
        };
        while let Some(flag) = words.next() {
            let mut value = || words.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--system" => parsed.system = value()?,
                "--threads" => parsed.threads = number(&flag, &value()?)?,
                "--tasks" => parsed.tasks = number(&flag, &value()?)?,
                "--depth" => parsed.depth = number(&flag, &value()?)?,
                "--rounds" => parsed.rounds = number(&flag, &value()?)?,
                "--idle-ms" => parsed.idle = Duration::from_millis(number(&flag, &value()?)?),
                "--ops" => parsed.ops = number(&flag, &value()?)?,
                "--bulk" => parsed.bulk = number(&flag, &value()?)?,
                "--gpu-workers" => parsed.gpu_workers = number(&flag, &value()?)?,
                "--width" => parsed.grid.width = number(&flag, &value()?)?,
                "--kernel" => parsed.grid.kernel = value()?,
                "--output" => parsed.grid.output = number(&flag, &value()?)?,
                "--radix" => parsed.grid.radix = number(&flag, &value()?)?,
                "--max-iterations" => parsed.grid.max_iterations = number(&flag, &value()?)?,
                "--scale" => parsed.grid.scale = number(&flag, &value()?)?,
                "--max-steps" => parsed.grid.max_steps = number(&flag, &value()?)?,
                "--sizes" => {
                    parsed.cholesky.sizes = value()?
                        .split(',')
                        .map(|size| number(&flag, size))
                        .collect::<Result<_, _>>()?;
                }
                "--tile" => parsed.cholesky.tile = number(&flag, &value()?)?,
                "--timeline" => parsed.cholesky.timeline = Some(value()?.into()),
                "--workloads" => {
                    parsed.workloads = value()?.split(',').map(str::to_owned).collect();
                }
                other => return Err(format!("unknown flag `{other}`")),
            }
        }
        if parsed.system.is_empty() {
            return Err("--system is required".to_owned());
        }
        if parsed.threads == 0 || parsed.gpu_workers == 0 {
            return Err("--threads and --gpu-workers must be at least 1".to_owned());
        }
        Ok(parsed)
    }

    /// Whether `workload` was selected (all are, when `--workloads` is absent).
    pub(crate) fn wants(&self, workload: &str) -> bool {
        self.workloads.is_empty() || self.workloads.iter().any(|w| w == workload)
    }
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{flag}: `{text}` is not a valid number"))
}

/// Prints one measurement in the protocol's format.
pub(crate) fn report(workload: &str, value: f64, unit: &str) {
    println!("RESULT {workload} {value:.3} {unit}");
}

/// Wall time per item in nanoseconds.
pub(crate) fn ns_per(elapsed: Duration, items: u64) -> f64 {
    elapsed.as_secs_f64() * 1e9 / items.max(1) as f64
}

/// The `taskbench` group's grid and kernel (`crates/bench/README.md`, "The `taskbench`
/// group").
#[derive(Clone, Debug)]
pub(crate) struct GridFlags {
    /// Points per step; 0: as many as threads.
    pub(crate) width: usize,
    /// The kernel's name (`compute_bound`, `busy_wait`), parsed by the group.
    pub(crate) kernel: String,
    /// Bytes per tile.
    pub(crate) output: usize,
    pub(crate) radix: usize,
    /// The coarsest grain, in kernel iterations.
    pub(crate) max_iterations: u64,
    /// `2^scale` iterations of work per run, spread over the steps.
    pub(crate) scale: u32,
    pub(crate) max_steps: u64,
}

impl Default for GridFlags {
    fn default() -> Self {
        GridFlags {
            width: 0,
            kernel: "compute_bound".to_owned(),
            output: 16,
            radix: 3,
            max_iterations: 1 << 16,
            scale: 24,
            max_steps: 10_000,
        }
    }
}

/// The `cholesky` group's sizes and tile (`crates/bench/README.md`, "The `cholesky` group").
#[derive(Clone, Debug)]
pub(crate) struct CholeskyFlags {
    /// Matrix sizes (`--sizes 1024,2048`), each run in turn.
    pub(crate) sizes: Vec<usize>,
    /// Tile side (`--tile`); a size it does not divide has a smaller last tile.
    pub(crate) tile: usize,
    /// Where to write the ops of one more factorization of the first size, profiled
    /// (`--timeline PATH`; depengine's systems only).
    pub(crate) timeline: Option<PathBuf>,
}

impl Default for CholeskyFlags {
    fn default() -> Self {
        CholeskyFlags {
            sizes: vec![1024, 2048, 4096],
            tile: 256,
            timeline: None,
        }
    }
}
