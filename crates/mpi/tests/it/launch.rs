//! Runs a test's body under `mpirun`: the test starts a job of this test binary, filtered to
//! itself, for each rank count; each rank finds its name in `DEPENGINE_MPI_TEST` and runs the
//! body. A rank that fails makes `mpirun` end the job with an error, which fails the test.

use std::process::Command;
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
    if std::env::var(RANK_OF).is_ok_and(|running| running == name) {
        let engine = Engine::new(EngineConfig::default().cpu_worker_threads(workers)).unwrap();
        let comm = Comm::world(&engine).unwrap();
        body(&engine, &comm);
        engine.wait_for_all().unwrap();
        drop(comm);
        return;
    }
    if Command::new("mpirun").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("DEPENGINE_REQUIRE_MPI").is_none(),
            "DEPENGINE_REQUIRE_MPI is set, and mpirun is missing"
        );
        eprintln!("skipping {name}: no mpirun (Debian: openmpi-bin, libopenmpi-dev)");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let _one_job = ONE_JOB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for &ranks in counts {
        let mut job = Command::new("mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "-np"])
            .arg(ranks.to_string())
            .arg(&exe)
            .args(["--exact", name, "--nocapture", "--test-threads=1", "-q"])
            .env(RANK_OF, name)
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = job.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > JOB_LIMIT {
                let _ = job.kill();
                panic!("{name} on {ranks} ranks: no result within {JOB_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{name} on {ranks} ranks: {status}");
    }
}
