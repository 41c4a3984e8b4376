//! `cargo xtask ci`: every check CI runs, in the order `.ci/run` runs them (keep the two in sync).

use crate::cmd::{Cmd, Result};
use crate::{bench, loom, miri};

/// Runs the checks, stopping at the first failure. `--no-bench` leaves out the bench smoke run.
pub(crate) fn main(mut args: impl Iterator<Item = String>) -> Result {
    let mut with_bench = true;
    if let Some(arg) = args.next() {
        match arg.as_str() {
            "--no-bench" => with_bench = false,
            other => {
                return Err(format!(
                    "ci: unknown argument `{other}` (expected --no-bench)"
                ));
            }
        }
    }
    if let Some(extra) = args.next() {
        return Err(format!("ci: unexpected argument `{extra}`"));
    }

    Cmd::cargo().args(["fmt", "--all", "--", "--check"]).run()?;
    Cmd::cargo()
        .args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
        .run()?;
    Cmd::cargo().args(["test", "--workspace"]).run()?;
    // The stress tests at the sizes, which only optimized builds use, and the memory
    // test at its full burst.
    Cmd::cargo()
        .args([
            "test",
            "--release",
            "-p",
            "depengine",
            "--test",
            "random",
            "--test",
            "hazards",
            "--test",
            "deadlock",
            "--test",
            "memory_returned",
        ])
        .run()?;
    Cmd::cargo()
        .args([
            "test",
            "--release",
            "-p",
            "depengine-pool",
            "--test",
            "stress",
        ])
        .run()?;
    loom::run(std::iter::empty())?;
    if with_bench {
        // A smoke test of every harness: a failing C++ peer is skipped, a failing Rust system
        // (our own binary) fails the run.
        bench::run(&bench::Options::smoke())?;
    }
    if miri::available() {
        miri::run(std::iter::empty())?;
    } else {
        println!("skipping miri: `cargo +nightly miri` (or `$MIRI_TOOLCHAIN`) is not installed");
    }
    Ok(())
}
