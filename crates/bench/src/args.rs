//! Command-line flags shared by every group, and the `RESULT` line they print.

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
    /// Run only these workloads; empty means all.
    pub(crate) workloads: Vec<String>,
}

impl Args {
    pub(crate) fn parse(mut argv: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut args = Args {
            system: String::new(),
            threads: 2,
            tasks: 1_000_000,
            depth: 20,
            rounds: 1000,
            idle: Duration::from_secs(1),
            ops: 200_000,
            workloads: Vec::new(),
        };
        while let Some(flag) = argv.next() {
            let mut value = || argv.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--system" => args.system = value()?,
                "--threads" => args.threads = number(&flag, &value()?)?,
                "--tasks" => args.tasks = number(&flag, &value()?)?,
                "--depth" => args.depth = number(&flag, &value()?)?,
                "--rounds" => args.rounds = number(&flag, &value()?)?,
                "--idle-ms" => args.idle = Duration::from_millis(number(&flag, &value()?)?),
                "--ops" => args.ops = number(&flag, &value()?)?,
                "--workloads" => {
                    args.workloads = value()?.split(',').map(str::to_owned).collect();
                }
                other => return Err(format!("unknown flag `{other}`")),
            }
        }
        if args.system.is_empty() {
            return Err("--system is required".to_owned());
        }
        if args.threads == 0 {
            return Err("--threads must be at least 1".to_owned());
        }
        Ok(args)
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
