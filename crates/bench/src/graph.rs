//! `graph` group: the cost of depengine-graph's push + complete (see issue 3).

use crate::args::Args;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    Err(format!("graph benchmarks are not written yet (system {})", args.system))
}
