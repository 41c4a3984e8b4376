//! `depengine-bench`: the Rust side of `cargo xtask bench`.
//!
//! One invocation runs every workload of one group once, for one system, and prints
//! `RESULT <workload> <value> <unit>` lines (see `README.md` beside this crate for the protocol).
//! `xtask` repeats invocations, interleaves systems and takes medians.

mod args;
mod cholesky;
mod engine;
mod gpu;
mod graph;
#[cfg(feature = "mpi")]
mod mpi;
mod other_threads;
mod pool;
mod standin_device;
mod taskbench;

use std::process::ExitCode;

use args::Args;

fn main() -> ExitCode {
    let mut words = std::env::args().skip(1);
    let Some(group) = words.next() else {
        eprintln!(
            "usage: depengine-bench <pool|graph|engine|taskbench|cholesky|gpu|mpi> --system <name> [flags]\n       depengine-bench <gpu|mpi> --probe"
        );
        return ExitCode::from(2);
    };
    let words: Vec<String> = words.collect();
    // `gpu --probe`, `mpi --probe`: whether the group can run here (`SKIP <reason>` if not).
    if words.iter().any(|word| word == "--probe") {
        match group.as_str() {
            "gpu" => gpu::probe(),
            #[cfg(feature = "mpi")]
            "mpi" => mpi::probe(),
            #[cfg(not(feature = "mpi"))]
            "mpi" => println!("SKIP depengine-bench was built without its `mpi` feature"),
            _ => {}
        }
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(words.into_iter()) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("depengine-bench: {message}");
            return ExitCode::from(2);
        }
    };
    let outcome = match group.as_str() {
        "pool" => pool::run(&args),
        "graph" => graph::run(&args),
        "engine" => engine::run(&args),
        "taskbench" => taskbench::run(&args),
        "cholesky" => cholesky::run(&args),
        "gpu" => gpu::run(&args),
        #[cfg(feature = "mpi")]
        "mpi" => mpi::run(&args),
        #[cfg(not(feature = "mpi"))]
        "mpi" => Err("built without the `mpi` feature".to_owned()),
        other => Err(format!(
            "unknown group `{other}` (expected pool, graph, engine, taskbench, cholesky, gpu or mpi)"
        )),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("depengine-bench {group}: {message}");
            ExitCode::FAILURE
        }
    }
}
