//! `pool` group: depengine-pool, `SimplePool` and rayon on the four pool workloads.

use crate::args::Args;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    Err(format!("pool benchmarks are not written yet (system {})", args.system))
}
