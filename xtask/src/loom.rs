//! `cargo xtask loom`: the loom models of the concurrent crates.
//!
//! Under `--cfg loom` `depengine-pool`, `depengine-slab`, `depengine-graph` and `depengine`
//! compile only their loom models as tests, and `depengine-sync`, which all of them (and
//! `depengine-cpu`) take their primitives from, switches to loom's; it has no models of its own
//! (the tests of its lock helpers run in the normal build). The models build with the `loom`
//! profile (optimized, but without the release profile's link-time optimization, and with debug
//! assertions on) into `target/loom`, so that the changed `RUSTFLAGS` do not invalidate the
//! normal build.
//!
//! After the run, a table lists every model with the interleavings loom explored (loom's
//! "Completed in N iterations", which `LOOM_LOG=loom::model=info` makes it log, and which the
//! models built on `loom::model::Builder` print themselves). A model that explores a single
//! interleaving checks nothing concurrent: the run fails on one (see `docs/loom.md`).

use std::time::{Duration, Instant};

use crate::cmd::{Cmd, Result};

/// The models must stay cheap enough for CI: this is the budget for the whole run.
const BUDGET: Duration = Duration::from_mins(10);

/// Preemption bound used unless `LOOM_MAX_PREEMPTIONS` is already set.
const DEFAULT_MAX_PREEMPTIONS: &str = "2";

/// What loom (or a model's own counter) prints when a model is done.
const COMPLETED: &str = "Completed in ";

/// Runs the loom models; extra arguments go to `cargo test` (e.g. a test name filter).
pub(crate) fn run(extra: impl Iterator<Item = String>) -> Result {
    let preemptions = std::env::var("LOOM_MAX_PREEMPTIONS")
        .unwrap_or_else(|_| DEFAULT_MAX_PREEMPTIONS.to_owned());
    let extra: Vec<String> = extra.collect();
    let started = Instant::now();
    let cargo = || {
        Cmd::cargo()
            .env("RUSTFLAGS", "--cfg loom")
            .env("LOOM_MAX_PREEMPTIONS", &preemptions)
            .env("LOOM_LOG", "loom::model=info")
            .args(["test", "--profile", "loom", "--lib", "--tests"])
            .args([
                "-p",
                "depengine-pool",
                "-p",
                "depengine-slab",
                "-p",
                "depengine-graph",
                "-p",
                "depengine",
            ])
            .args(["--target-dir", "target/loom"])
    };
    // Built first with its progress on the terminal; the run's output is captured for the
    // table and printed when it ends.
    cargo().arg("--no-run").run()?;
    let built = started.elapsed();
    println!("loom: running the models (their output follows when they are done)");
    let remaining = BUDGET.saturating_sub(built) + Duration::from_mins(1);
    let captured = cargo()
        .args(&extra)
        .args(["--", "--show-output"])
        .capture(remaining)?;
    print!("{}", captured.stdout);
    eprint!("{}", captured.stderr);
    let elapsed = started.elapsed();
    println!(
        "loom: built in {:.0} s, done in {:.0} s",
        built.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    match captured.status {
        None => {
            return Err(format!(
                "loom ran out of its {} s budget: shrink the models or lower \
                 LOOM_MAX_PREEMPTIONS",
                BUDGET.as_secs()
            ));
        }
        Some(status) if !status.success() => {
            return Err(format!("the loom models failed ({status})"));
        }
        Some(_) => {}
    }
    let explored = interleavings(&captured.stdout);
    let width = explored
        .iter()
        .map(|(model, _)| model.len())
        .max()
        .unwrap_or(0);
    println!("\n{:<width$} interleavings", "loom model");
    for (model, counts) in &explored {
        let counts: Vec<String> = counts.iter().map(u64::to_string).collect();
        println!("{model:<width$} {:>13}", counts.join(" + "));
    }
    let single: Vec<&str> = explored
        .iter()
        .filter(|(_, counts)| counts.iter().any(|&count| count <= 1))
        .map(|(model, _)| model.as_str())
        .collect();
    if !single.is_empty() {
        return Err(format!(
            "these models explore a single interleaving, so they check nothing concurrent: {}",
            single.join(", ")
        ));
    }
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

/// The tests in libtest's `--show-output` report (`---- name stdout ----` sections) and the
/// interleavings each of their models explored (a test may check several), sorted by name.
fn interleavings(report: &str) -> Vec<(String, Vec<u64>)> {
    let mut models: Vec<(String, Vec<u64>)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in report.lines() {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|rest| rest.strip_suffix(" stdout ----"))
        {
            models.push((name.to_owned(), Vec::new()));
            current = Some(models.len() - 1);
        } else if let Some(at) = line.find(COMPLETED)
            && let Some(model) = current
        {
            let count = line[at + COMPLETED.len()..]
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(count) = count {
                models[model].1.push(count);
            }
        } else if line.starts_with("successes:") || line.starts_with("failures:") {
            current = None;
        }
    }
    // Tests that are not models (no count) are left out.
    models.retain(|(_, counts)| !counts.is_empty());
    models.sort();
    models
}

#[cfg(test)]
mod tests {
    use super::interleavings;

    #[test]
    fn counts_come_from_each_test_section() {
        let report = "\
successes:

---- loom_tests::a stdout ----
\u{1b}[32m INFO\u{1b}[0m loom::model: Completed in 34 iterations

---- loom_tests::b stdout ----
Completed in 1 iterations
Completed in 2 iterations

---- prefetch::tests::any_address_is_fine stdout ----

successes:
    loom_tests::a
    loom_tests::b
";
        assert_eq!(
            interleavings(report),
            [
                ("loom_tests::a".to_owned(), vec![34]),
                ("loom_tests::b".to_owned(), vec![1, 2])
            ]
        );
    }
}
