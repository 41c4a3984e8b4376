//! `cargo xtask soak [--ops N] [--seconds S] [...]`: the soak (`crates/soak`), built in release
//! and run with the given arguments (`cargo xtask soak --help` lists them).

use crate::cmd::{Cmd, Result};

/// The soak's size in CI: ops over all the engine kinds.
pub(crate) const CI_OPS: &str = "1000000";

/// Builds the soak in release and runs it with `args` (its own flags, see `crates/soak`).
pub(crate) fn run(args: impl Iterator<Item = String>) -> Result {
    Cmd::cargo()
        .args(["run", "--release", "-p", "depengine-soak", "--"])
        .args(args)
        .run()
}
