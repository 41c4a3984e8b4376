//! Runs a test's body under `mpirun`: the test starts a job of this test binary, filtered to
//! itself, for each rank count; each rank finds its name in `DEPENGINE_MPI_TEST` and runs the
//! body. A rank that fails makes `mpirun` end the job with an error, which fails the test.

use std::process::{Command, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use depengine::{Engine, EngineConfig};
use depengine_mpi::Comm;

/// The variable that tells a rank which test it runs.
const RANK_OF: &str = "DEPENGINE_MPI_TEST";

/// One job at a time: the ranks of concurrent jobs would share the machine's cores with each
/// other, and the tests that time an overlap would measure them.
static ONE_JOB: Mutex<()> = Mutex::new(());

/// How long one job may take before the test fails (and kills it).
const JOB_LIMIT: Duration = Duration::from_mins(2);

/// Runs `body` with an engine of `workers` CPU workers and the world communicator if this
/// process is a rank of test `name`'s job; else starts a job of each of `counts` ranks and
/// checks that it passed.
pub(crate) fn on_ranks(
    name: &str,
    counts: &[usize],
    workers: usize,
    body: impl FnOnce(&Engine, &Comm),
) {
    if run_rank(name, workers, body) {
        return;
    }
    for &ranks in counts {
        if let Some((status, _)) = run_job(name, ranks) {
            assert!(status.success(), "{name} on {ranks} ranks: {status}");
        }
    }
}

/// As [`on_ranks`], for a job of `ranks` ranks that must fail: returns how long it took, or
/// `None` where the test skips (no `mpirun`).
pub(crate) fn failing_job(
    name: &str,
    ranks: usize,
    workers: usize,
    body: impl FnOnce(&Engine, &Comm),
) -> Option<Duration> {
    if run_rank(name, workers, body) {
        return None;
    }
    let (status, took) = run_job(name, ranks)?;
    assert!(!status.success(), "{name} on {ranks} ranks: the job passed");
    Some(took)
}

/// Runs `body` if this process is a rank of test `name`'s job; whether it is.
fn run_rank(name: &str, workers: usize, body: impl FnOnce(&Engine, &Comm)) -> bool {
    if !std::env::var(RANK_OF).is_ok_and(|running| running == name) {
        return false;
    }
    let engine = Engine::new(EngineConfig::default().cpu_worker_threads(workers)).unwrap();
    let comm = Comm::world(&engine).unwrap();
    body(&engine, &comm);
    engine.wait_for_all().unwrap();
    drop(comm);
    true
}

/// Runs test `name` as a job of `ranks` ranks: how it ended, and how long it took; `None`
/// without `mpirun` (a skip, said on stderr; a failure under `DEPENGINE_REQUIRE_MPI`).
fn run_job(name: &str, ranks: usize) -> Option<(ExitStatus, Duration)> {
    if Command::new("mpirun").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("DEPENGINE_REQUIRE_MPI").is_none(),
            "DEPENGINE_REQUIRE_MPI is set, and mpirun is missing"
        );
        eprintln!("skipping {name}: no mpirun (Debian: openmpi-bin, libopenmpi-dev)");
        return None;
    }
    let exe = std::env::current_exe().unwrap();
    let _one_job = ONE_JOB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut job = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(ranks.to_string())
        .arg(&exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1", "-q"])
        .env(RANK_OF, name)
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = job.try_wait().unwrap() {
            return Some((status, started.elapsed()));
        }
        if started.elapsed() > JOB_LIMIT {
            let _ = job.kill();
            panic!("{name} on {ranks} ranks: no result within {JOB_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
