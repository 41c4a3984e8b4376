//! Command-line flags shared by every group, and the `RESULT` line they print.

use std::time::Duration;

use crate::cholesky::CholeskyFlags;
use crate::taskbench::{GridFlags, Kernel};

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
                "--width" => parsed.grid.width = number(&flag, &value()?)?,
                "--kernel" => parsed.grid.kernel = Kernel::parse(&value()?)?,
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
        if parsed.threads == 0 {
            return Err("--threads must be at least 1".to_owned());
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
