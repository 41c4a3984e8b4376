//! `cargo xtask`: the project's automation, in Rust so that it runs wherever cargo does.
//!
//! Every subcommand prints each command it runs (`$ cargo test ...`) before running it and exits
//! non-zero when one fails. Commands run from the workspace root.

mod bench;
mod ci;
mod cmd;
mod gpu_bundle;
mod loom;
mod miri;
mod soak;

use std::path::Path;
use std::process::ExitCode;

/// The subcommands: name, arguments and the one line `--help` prints.
const COMMANDS: &[(&str, &str, &str)] = &[
    (
        "bench",
        "[--only GROUP] [--quick] [--runs N] [--threads N]",
        "every group's systems side by side; summary, target/bench/report.{md,json}, charts",
    ),
    (
        "bench-ab",
        "<git rev> [pool|graph|engine] [--system S] [--workloads a,b] [--rounds N]",
        "the working tree's bench against <git rev>'s, interleaved: per-round ratios",
    ),
    (
        "loom",
        "[test filter]",
        "loom models of pool, slab, graph and engine; interleavings per model",
    ),
    (
        "miri",
        "[test filter]",
        "tests of depengine-pool, -slab and -graph, and engine tests, under nightly miri",
    ),
    (
        "gpu-bundle",
        "DIR",
        "GPU tests and the gpu bench, built here, with NVRTC and run.sh, for a GPU machine",
    ),
    (
        "soak",
        "[--ops N] [--seconds S] [--seed N]",
        "every engine kind under random ops and injected faults, checked against a model",
    ),
    (
        "ci",
        "[--no-bench]",
        "everything CI runs: fmt, clippy, tests, stress tests, examples, loom, bench smoke, miri",
    ),
];

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root");
    if let Err(error) = std::env::set_current_dir(root) {
        eprintln!(
            "xtask: cannot enter the workspace root {}: {error}",
            root.display()
        );
        return ExitCode::FAILURE;
    }

    let mut args = std::env::args().skip(1);
    let command = args.next();
    let outcome = match command.as_deref() {
        Some("bench") => bench::main(args),
        Some("bench-ab") => bench::ab::main(args),
        Some("loom") => loom::run(args),
        Some("miri") => miri::run(args),
        Some("soak") => soak::run(args),
        Some("ci") => ci::main(args),
        Some("gpu-bundle") => gpu_bundle::main(args),
        Some("help" | "--help" | "-h") => {
            print_help();
            Ok(())
        }
        None => {
            eprintln!("xtask: no command given\n");
            print_help();
            return ExitCode::from(2);
        }
        Some(other) => Err(format!(
            "unknown command `{other}` (see `cargo xtask --help`)"
        )),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn print_help() {
    println!("usage: cargo xtask <command> [args]\n\ncommands:");
    for (name, args, description) in COMMANDS {
        println!("  {name:<5} {args:<52} {description}");
    }
}
