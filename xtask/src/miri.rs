//! `cargo xtask miri`: the tests of the crates with `unsafe` code, under miri (nightly).
//!
//! `MIRIFLAGS` is left to the caller, e.g. `MIRIFLAGS=-Zmiri-many-seeds cargo xtask miri`.

use crate::cmd::{Cmd, Result};

/// Whether `cargo +nightly miri` is installed.
pub(crate) fn available() -> bool {
    Cmd::cargo()
        .args(["+nightly", "miri", "--version"])
        .succeeds()
}

/// Runs the tests under miri; extra arguments go to `cargo miri test` (e.g. a test name filter).
pub(crate) fn run(extra: impl Iterator<Item = String>) -> Result {
    if !available() {
        return Err("miri is not installed; install it with \
                    `rustup +nightly component add miri rust-src` (or `rustup toolchain install \
                    nightly --component miri,rust-src`)"
            .to_owned());
    }
    Cmd::cargo()
        .args(["+nightly", "miri", "test"])
        // The crates with `unsafe` code (graph's is its op slot, `op_cell.rs`, and its
        // allocation-counting test); depengine and depengine-cpu are `#![forbid(unsafe_code)]`.
        .args(["-p", "depengine-pool", "-p", "depengine-graph"])
        .args(extra)
        .run()
}
