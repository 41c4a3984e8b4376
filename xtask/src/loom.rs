//! `cargo xtask loom`: the loom models of the concurrent crates.
//!
//! Under `--cfg loom` `depengine-pool`, `depengine-graph` and `depengine` compile only their loom models as
//! tests. They build into `target/loom` so that the changed `RUSTFLAGS` do not invalidate the
//! normal build.

use std::time::{Duration, Instant};

use crate::cmd::{Cmd, Result};

/// The models must stay cheap enough for CI: this is the budget for the whole run.
const BUDGET: Duration = Duration::from_mins(10);

/// Preemption bound used unless `LOOM_MAX_PREEMPTIONS` is already set.
const DEFAULT_MAX_PREEMPTIONS: &str = "2";

/// Runs the loom models; extra arguments go to `cargo test` (e.g. a test name filter).
pub(crate) fn run(extra: impl Iterator<Item = String>) -> Result {
    let preemptions = std::env::var("LOOM_MAX_PREEMPTIONS")
        .unwrap_or_else(|_| DEFAULT_MAX_PREEMPTIONS.to_owned());
    let started = Instant::now();
    Cmd::cargo()
        .env("RUSTFLAGS", "--cfg loom")
        .env("LOOM_MAX_PREEMPTIONS", &preemptions)
        .args(["test", "--release", "--lib", "--tests"])
        .args([
            "-p",
            "depengine-pool",
            "-p",
            "depengine-graph",
            "-p",
            "depengine",
        ])
        .args(["--target-dir", "target/loom"])
        .args(extra)
        .run()?;
    let elapsed = started.elapsed();
    println!("loom: done in {:.0} s", elapsed.as_secs_f64());
    if elapsed > BUDGET {
        return Err(format!(
            "loom took {:.0} s, over its {} s budget: shrink the models or lower \
             LOOM_MAX_PREEMPTIONS",
            elapsed.as_secs_f64(),
            BUDGET.as_secs()
        ));
    }
    Ok(())
}
