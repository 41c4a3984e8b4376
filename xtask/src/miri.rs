//! `cargo xtask miri`: the tests of the crates with `unsafe` code, and the engine's tests that
//! reach that code, under miri (nightly).
//!
//! `MIRIFLAGS` is left to the caller, e.g. `MIRIFLAGS=-Zmiri-many-seeds cargo xtask miri`. The
//! toolchain is `nightly`, or `$MIRI_TOOLCHAIN` (CI pins a dated nightly there, see `.ci/run`).

use crate::cmd::{Cmd, Result};

/// `+` and the toolchain Miri runs on.
fn toolchain() -> String {
    let name = std::env::var("MIRI_TOOLCHAIN").unwrap_or_else(|_| "nightly".to_owned());
    format!("+{name}")
}

/// Whether `cargo +<toolchain> miri` is installed.
pub(crate) fn available() -> bool {
    Cmd::cargo()
        .args([toolchain().as_str(), "miri", "--version"])
        .succeeds()
}

/// The engine's tests that take its routes into the pool's and the graph's `unsafe` code, at
/// their small Miri sizes: a chain on one var (pushes through the `Incoming` ring, drainers,
/// `wait_for_var`'s write through the ring), reads and writes interleaved on the workers, and
/// async ops completed from foreign threads. `depengine` itself has no `unsafe` code
/// (`#![forbid(unsafe_code)]`); its whole suite under Miri would take hours.
const ENGINE_TESTS: &[&str] = &[
    "ops_on_one_var_run_in_push_order",
    "reads_see_the_write_before_them",
    "async_ops_complete_from_other_threads",
];

/// Runs the tests under miri; extra arguments go to `cargo miri test` (e.g. a test name filter).
pub(crate) fn run(extra: impl Iterator<Item = String>) -> Result {
    if !available() {
        return Err("miri is not installed; install it with \
                    `rustup +nightly component add miri rust-src` (or `rustup toolchain install \
                    nightly --component miri,rust-src`)"
            .to_owned());
    }
    let extra: Vec<String> = extra.collect();
    // The crates with `unsafe` code (graph's is its op slot, `op_cell.rs`, its prefetch hint and
    // its allocation-counting test; the pool's its queues, jobs and latches).
    Cmd::cargo()
        .args([toolchain().as_str(), "miri", "test"])
        .args(["-p", "depengine-pool", "-p", "depengine-graph"])
        .args(&extra)
        .run()?;
    if !extra.is_empty() {
        // A filter names tests of the two crates above.
        return Ok(());
    }
    Cmd::cargo()
        .args([toolchain().as_str(), "miri", "test"])
        .args(["-p", "depengine", "--test", "api", "--"])
        .args(ENGINE_TESTS)
        .run()
}
