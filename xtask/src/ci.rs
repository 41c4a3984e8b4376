//! `cargo xtask ci`: every check CI runs, in the order `.ci/run` runs them (keep the two in sync).

use std::path::Path;

use crate::cmd::{Cmd, Result};
use crate::{bench, loom, miri, soak};

/// The engine's test binary built with its `cuda` feature, as cargo arguments; the tests of it
/// that the feature changes are [`ENGINE_CUDA_TESTS`]. CI runs them without a GPU (the
/// no-driver path); `gpu-bundle` builds them for a GPU machine.
pub(crate) const ENGINE_CUDA_BUILD: [&str; 6] =
    ["-p", "depengine", "--features", "cuda", "--test", "it"];

/// The modules of the engine's test binary that its `cuda` feature changes, as test name
/// filters: its GPU tests, and those that push GPU ops or name devices.
pub(crate) const ENGINE_CUDA_TESTS: [&str; 4] = ["gpu::", "api::", "names::", "device::"];

/// The engine's stress tests, which take their issue's sizes (10^6 ops) in optimized builds
/// only, as test name filters of its test binary.
const ENGINE_STRESS_TESTS: [&str; 4] = ["random::", "random_data::", "hazards::", "deadlock::"];

/// The engine's memory test, as a test name filter: ignored in a plain `cargo test`, run alone
/// (`--include-ignored`) in debug and optimized builds, as nothing else loads the machine then
/// (`tests/it/memory_returned.rs`).
const ENGINE_MEMORY_TEST: [&str; 1] = ["memory_returned::"];

/// The pool's stress tests at their release sizes, as a test name filter of its test binary.
const POOL_STRESS_TESTS: [&str; 1] = ["stress::"];

/// How [`test_binary`] builds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Build {
    Debug,
    Release,
}

/// Runs the tests of `krate`'s test binary that `filters` name, ignored ones included (the
/// memory test is ignored in a plain `cargo test`).
fn test_binary(build: Build, krate: &str, filters: &[&str]) -> Result {
    Cmd::cargo()
        .arg("test")
        .args((build == Build::Release).then_some("--release"))
        .args(["-p", krate, "--test", "it", "--", "--include-ignored"])
        .args(filters)
        .run()
}

/// depengine-mpi with its `nccl` feature, as cargo arguments after the subcommand.
const MPI_NCCL: [&str; 4] = ["-p", "depengine-mpi", "--features", "nccl"];

/// Runs the checks, stopping at the first failure. `--no-bench` leaves out the bench smoke run.
pub(crate) fn main(mut args: impl Iterator<Item = String>) -> Result {
    let mut with_bench = true;
    if let Some(arg) = args.next() {
        match arg.as_str() {
            "--no-bench" => with_bench = false,
            other => {
                return Err(format!(
                    "ci: unknown argument `{other}` (expected --no-bench)"
                ));
            }
        }
    }
    if let Some(extra) = args.next() {
        return Err(format!("ci: unexpected argument `{extra}`"));
    }

    Cmd::cargo().args(["fmt", "--all", "--", "--check"]).run()?;
    Cmd::cargo()
        .args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
        .run()?;
    Cmd::cargo()
        .args([
            "clippy",
            "-p",
            "depengine",
            "--features",
            "cuda",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
        .run()?;
    // depengine-mpi with NCCL (GPU buffers): checked, and its tests run (without a GPU: every
    // rank's typed error).
    Cmd::cargo()
        .arg("clippy")
        .args(MPI_NCCL)
        .args(["--all-targets", "--", "-D", "warnings"])
        .run()?;
    // depengine-mpi's tests start mpirun jobs; with this set they fail, rather than skip,
    // without it.
    Cmd::cargo()
        .args(["test", "--workspace"])
        .env("DEPENGINE_REQUIRE_MPI", "1")
        .run()?;
    Cmd::cargo()
        .arg("test")
        .args(MPI_NCCL)
        .args(["--test", "it", "--", "nccl::"])
        .env("DEPENGINE_REQUIRE_MPI", "1")
        .run()?;
    Cmd::cargo().arg("test").args(MPI_NCCL).arg("--doc").run()?;
    test_binary(Build::Debug, "depengine", &ENGINE_MEMORY_TEST)?;
    // The CUDA backend through the engine: without a GPU, the no-driver path (the GPU tests
    // skip).
    Cmd::cargo()
        .arg("test")
        .args(ENGINE_CUDA_BUILD)
        .arg("--")
        .args(ENGINE_CUDA_TESTS)
        .run()?;
    // The stress tests at the sizes, which only optimized builds use, and the memory
    // test at its full burst.
    test_binary(Build::Release, "depengine", &ENGINE_STRESS_TESTS)?;
    test_binary(Build::Release, "depengine", &ENGINE_MEMORY_TEST)?;
    test_binary(Build::Release, "depengine-pool", &POOL_STRESS_TESTS)?;
    // Every engine kind under random ops and injected faults, checked against a model.
    soak::run(["--ops", soak::CI_OPS].map(String::from).into_iter())?;
    // The engine's examples, each of which checks its own result: every file in the examples
    // folder, so that a new example runs here without a change to this list.
    for name in engine_examples(Path::new(ENGINE_EXAMPLES))? {
        Cmd::cargo()
            .args(["run", "--release", "-p", "depengine", "--example", &name])
            .run()?;
    }
    // The data-parallel example over MPI, on 2 and 3 ranks: each rank checks its weights.
    Cmd::cargo()
        .args([
            "build",
            "--release",
            "-p",
            "depengine-mpi",
            "--example",
            "data_parallel",
        ])
        .run()?;
    for ranks in ["2", "3"] {
        Cmd::new("mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "-np", ranks])
            .arg("target/release/examples/data_parallel")
            .run()?;
    }
    loom::run(std::iter::empty())?;
    if with_bench {
        // A smoke test of every harness: a failing C++ peer is skipped, a failing Rust system
        // (our own binary) fails the run.
        bench::run(&bench::Options::smoke())?;
    }
    if miri::available() {
        miri::run(std::iter::empty())?;
    } else {
        println!("skipping miri: `cargo +nightly miri` (or `$MIRI_TOOLCHAIN`) is not installed");
    }
    Ok(())
}

/// Where the engine's examples live, from the workspace root.
const ENGINE_EXAMPLES: &str = "crates/engine/examples";

/// The names of the examples in `dir` (`NAME` for `NAME.rs`), sorted by name, the order of the
/// glob `.ci/run` loops over; an error if there are none (the glob then fails there too).
fn engine_examples(dir: &Path) -> Result<Vec<String>> {
    let unlisted = |error| format!("ci: cannot list {}: {error}", dir.display());
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unlisted)? {
        let path = entry.map_err(unlisted)?.path();
        if let Some(name) = example_name(&path) {
            names.push(name.to_owned());
        }
    }
    if names.is_empty() {
        return Err(format!("ci: no examples (`*.rs`) in {}", dir.display()));
    }
    names.sort();
    Ok(names)
}

/// `NAME` for a file `NAME.rs`; `None` for anything else.
fn example_name(path: &Path) -> Option<&str> {
    if path.extension()? != "rs" || !path.is_file() {
        return None;
    }
    path.file_stem()?.to_str()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{
        ENGINE_CUDA_TESTS, ENGINE_EXAMPLES, ENGINE_MEMORY_TEST, ENGINE_STRESS_TESTS,
        POOL_STRESS_TESTS, engine_examples,
    };

    #[test]
    fn the_engine_examples_are_found_sorted_by_name() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(ENGINE_EXAMPLES);
        let names = engine_examples(&dir).unwrap();
        for example in ["async_wait", "failure", "profiler"] {
            assert!(names.iter().any(|name| name == example), "{names:?}");
        }
        assert!(names.is_sorted(), "{names:?}");
        // xtask's own folder: a manifest and folders, no `.rs` file.
        let without_examples = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert!(engine_examples(without_examples).is_err());
        assert!(engine_examples(&without_examples.join("no such folder")).is_err());
    }

    /// Each filter names a module of its crate's test binary (`tests/it/NAME.rs`, declared in
    /// its `main.rs`): a filter that matches no test runs none, and passes.
    #[test]
    fn the_test_filters_name_modules_of_the_test_binaries() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
        let lists = [
            ("engine", &ENGINE_CUDA_TESTS[..]),
            ("engine", &ENGINE_STRESS_TESTS[..]),
            ("engine", &ENGINE_MEMORY_TEST[..]),
            ("pool", &POOL_STRESS_TESTS[..]),
        ];
        for (krate, filters) in lists {
            let it = crates.join(krate).join("tests/it");
            let main = std::fs::read_to_string(it.join("main.rs")).unwrap();
            for filter in filters {
                let module = filter.strip_suffix("::").expect("a module filter");
                assert!(
                    it.join(format!("{module}.rs")).is_file()
                        && main.contains(&format!("\nmod {module};\n")),
                    "{krate}: no test module `{module}` in {}",
                    it.display()
                );
            }
        }
    }
}
