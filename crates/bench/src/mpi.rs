//! `mpi` group: an allreduce (sum of `f64`) through the engine (`depengine-mpi`: an op pushed
//! on a `Comm`, then `Comm::wait`) against a direct blocking `MPI_Allreduce` (`mpi-blocking`,
//! rsmpi's `all_reduce_into`), on 2 ranks of this machine, for 4 KiB to 64 MiB (`us/op`); and
//! `data_parallel_step`, the step of `depengine-mpi`'s example `data_parallel` (`ms/step`): its
//! allreduces pushed as backpropagation produces each gradient (`depengine-mpi`, which also
//! reports `data_parallel_hidden`, the share of the communication that hid, as a `ratio`)
//! against the same step with them after the backward pass (`mpi-blocking`).
//!
//! An invocation starts `mpirun -np 2` of itself; rank 0 prints the results. The step is the
//! example's own run (`target/release/examples/data_parallel`, which `xtask` builds), started
//! with `mpirun -np 2` and read from the line it prints. Without `mpirun`, `depengine-bench mpi
//! --probe` prints `SKIP` with the reason, and `xtask` skips the group.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use depengine::{Engine, EngineConfig};
use depengine_mpi::{Comm, Reduce};
use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};

use crate::args::{Args, report};

/// The variable that tells an invocation it is a rank of the job it started.
const RANK_OF: &str = "DEPENGINE_BENCH_MPI_RANK";

/// The sizes reduced, in bytes, with their workload names.
const SIZES: &[(usize, &str)] = &[
    (4 << 10, "allreduce_4KiB"),
    (64 << 10, "allreduce_64KiB"),
    (1 << 20, "allreduce_1MiB"),
    (16 << 20, "allreduce_16MiB"),
    (64 << 20, "allreduce_64MiB"),
];

/// Bytes reduced per size at most (fewer rounds for the large sizes), but `MIN_ROUNDS`.
const BYTES_PER_SIZE: usize = 1 << 30;
const MIN_ROUNDS: usize = 8;

/// `depengine-bench mpi --probe`: prints `SKIP <reason>` where the group cannot run.
pub(crate) fn probe() {
    if Command::new("mpirun").arg("--version").output().is_err() {
        println!("SKIP no mpirun (Debian: openmpi-bin, libopenmpi-dev)");
    }
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    if std::env::var_os(RANK_OF).is_none() {
        if SIZES.iter().any(|&(_, workload)| wanted(args, workload)) {
            launch()?;
        }
        // A job of its own, not one inside the ranks' job.
        if ["data_parallel_step", "data_parallel_hidden"]
            .iter()
            .any(|workload| wanted(args, workload))
        {
            data_parallel_step(args)?;
        }
        return Ok(());
    }
    let rounds = usize::try_from(args.rounds).map_err(|error| error.to_string())?;
    match args.system.as_str() {
        "depengine-mpi" => through_the_engine(args, rounds).map_err(|error| error.to_string()),
        "mpi-blocking" => blocking(args, rounds),
        other => Err(format!(
            "unknown mpi system `{other}` (expected depengine-mpi or mpi-blocking)"
        )),
    }
}

/// Runs this invocation again as the 2 ranks of an `mpirun` job, whose rank 0 prints.
fn launch() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|error| error.to_string())?;
    let status = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .arg(exe)
        .args(std::env::args().skip(1))
        .env(RANK_OF, "1")
        .status()
        .map_err(|error| format!("mpirun did not start: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the mpirun job failed: {status}"))
    }
}

/// The example's figures: ms per step with the allreduces overlapped, and after the backward
/// pass; the share of the communication hidden, in %.
struct Step {
    overlapped: f64,
    after: f64,
    hidden: f64,
}

/// Runs the example `data_parallel` on 2 ranks (steps: `--rounds` / 10, 10 to 200) and reports
/// its step for `args.system`; without the example beside this binary (a copy of it, as
/// `bench-ab` runs), says so and reports nothing.
fn data_parallel_step(args: &Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|error| error.to_string())?;
    let example: PathBuf = exe
        .parent()
        .ok_or("the bench binary has no folder")?
        .join("examples")
        .join("data_parallel");
    if !example.is_file() {
        eprintln!(
            "no {} (cargo build --release -p depengine-mpi --example data_parallel): the \
             data_parallel step is not measured",
            example.display()
        );
        return Ok(());
    }
    let steps = (args.rounds / 10).clamp(10, 200);
    let output = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .arg(&example)
        .arg(steps.to_string())
        .output()
        .map_err(|error| format!("mpirun did not start: {error}"))?;
    let printed = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}; built by `cargo build --release -p depengine-mpi --example \
             data_parallel`): {printed}{}",
            example.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let step = parse_step(&printed).ok_or_else(|| format!("no step figures in: {printed}"))?;
    match args.system.as_str() {
        "depengine-mpi" => {
            report("data_parallel_step", step.overlapped, "ms/step");
            report("data_parallel_hidden", step.hidden / 100.0, "ratio");
        }
        _ => report("data_parallel_step", step.after, "ms/step"),
    }
    Ok(())
}

/// The figures of the example's line `... X ms/step with the allreduces overlapped, Y ms/step
/// with them after the backward pass, ...: Z% of the communication hidden; ...`.
fn parse_step(printed: &str) -> Option<Step> {
    let line = printed
        .lines()
        .find(|line| line.starts_with("data_parallel:"))?;
    // The number just before `marker`.
    let before = |marker: &str| -> Option<f64> {
        let head = &line[..line.find(marker)?];
        head.rsplit(|c: char| c.is_whitespace())
            .next()?
            .parse()
            .ok()
    };
    Some(Step {
        overlapped: before(" ms/step with the allreduces overlapped")?,
        after: before(" ms/step with them after the backward pass")?,
        hidden: before("% of the communication hidden")?,
    })
}

/// Rounds for a reduction of `bytes`.
fn rounds_for(bytes: usize, rounds: usize) -> usize {
    (BYTES_PER_SIZE / bytes).clamp(MIN_ROUNDS, rounds.max(MIN_ROUNDS))
}

/// Whether `workload` is asked for.
fn wanted(args: &Args, workload: &str) -> bool {
    args.workloads.is_empty() || args.workloads.iter().any(|w| w == workload)
}

fn through_the_engine(args: &Args, rounds: usize) -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::new(EngineConfig::default().cpu_worker_threads(1))?;
    let comm = Comm::world(&engine)?;
    for &(bytes, workload) in SIZES {
        if !wanted(args, workload) {
            continue;
        }
        let data = engine.data(vec![1.0_f64; bytes / 8])?;
        let rounds = rounds_for(bytes, rounds);
        comm.allreduce(&data, Reduce::Sum)?;
        comm.barrier()?;
        comm.wait()?;
        let start = Instant::now();
        for _ in 0..rounds {
            comm.allreduce(&data, Reduce::Sum)?;
            comm.wait()?;
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
        if comm.rank() == 0 {
            report(workload, us, "us/op");
        }
    }
    Ok(())
}

fn blocking(args: &Args, rounds: usize) -> Result<(), String> {
    let universe = mpi::initialize().ok_or("MPI is initialized already")?;
    let world = universe.world();
    for &(bytes, workload) in SIZES {
        if !wanted(args, workload) {
            continue;
        }
        let mut data = vec![1.0_f64; bytes / 8];
        let mut sum = vec![0.0_f64; bytes / 8];
        let rounds = rounds_for(bytes, rounds);
        world.all_reduce_into(&data[..], &mut sum[..], SystemOperation::sum());
        world.barrier();
        let start = Instant::now();
        for _ in 0..rounds {
            // In place, as the engine's op is: the sum becomes the next round's input.
            world.all_reduce_into(&data[..], &mut sum[..], SystemOperation::sum());
            std::mem::swap(&mut data, &mut sum);
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
        if world.rank() == 0 {
            report(workload, us, "us/op");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_step;

    #[test]
    fn the_examples_line_is_read() {
        let printed = "data_parallel: 2 ranks, 20 steps, batch 480: 6.069 ms/step with the \
                       allreduces overlapped, 4.984 ms/step with them after the backward pass, \
                       whose allreduces took 0.181 ms/step: -598% of the communication hidden; \
                       weights equal one process's to 3.5e-16\n";
        let step = parse_step(printed).unwrap();
        assert_eq!(
            (step.overlapped, step.after, step.hidden),
            (6.069, 4.984, -598.0)
        );
        assert!(parse_step("something else").is_none());
    }
}
