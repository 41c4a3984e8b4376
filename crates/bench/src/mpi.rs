//! `mpi` group: an allreduce (sum of `f64`) through the engine (`depengine-mpi`: an op pushed
//! on a `Comm`, then `Comm::wait`) against a direct blocking `MPI_Allreduce` (`mpi-blocking`,
//! rsmpi's `all_reduce_into`), on 2 ranks of this machine, for 4 KiB to 64 MiB (`us/op`).
//!
//! An invocation starts `mpirun -np 2` of itself; rank 0 prints the results. Without `mpirun`,
//! `depengine-bench mpi --probe` prints `SKIP` with the reason, and `xtask` skips the group.

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
        return launch();
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
