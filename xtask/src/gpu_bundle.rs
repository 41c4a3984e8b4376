//! `cargo xtask gpu-bundle DIR`: the GPU tests and the `gpu` bench group, built here, in a
//! folder to run on a machine with a GPU but without a Rust toolchain or a registry.
//!
//! It builds, in release mode, the tests of `depengine-cuda`, the engine's test binary built
//! with `--features cuda` (of which only the modules that a GPU changes run there: `gpu`, `api`,
//! `names`, `device`) and `depengine-bench` (without its `mpi` group, so that no MPI library need
//! be there); copies each binary, stripped, into `DIR/bin` (with
//! `NAME.filters` beside a test binary of which only some tests run); compresses NVRTC (the
//! library the kernels compile with, from `target/cuda/nvrtc`, where `.ci/run` installs it)
//! into `DIR/nvrtc`; and writes `DIR/run.sh`. There, `bash DIR/run.sh [LOGS]` unpacks NVRTC,
//! runs every test binary with `DEPENGINE_REQUIRE_GPU=1` (a skipped GPU test fails) and three
//! rounds of the bench group, both systems alternating (and the chains again with two compute
//! workers), and leaves `machine.txt`, `tests.txt`
//! and `bench.txt` in `LOGS` (default `DIR/logs`). `docs/cuda.md` records what ran where.

use std::fs;
use std::path::{Path, PathBuf};

use crate::ci::{ENGINE_CUDA_BUILD, ENGINE_CUDA_TESTS};
use crate::cmd::{Cmd, Result};

/// Where `.ci/run` installs `nvidia-cuda-nvrtc-cu12` 12.8 (from `PyPI`).
const NVRTC_LIB: &str = "target/cuda/nvrtc/nvidia/cuda_nvrtc/lib";

/// The NVRTC files the kernels need at run time.
const NVRTC_FILES: [&str; 2] = ["libnvrtc.so.12", "libnvrtc-builtins.so.12.8"];

/// The test builds: cargo arguments after `test --release --no-run`, and the test name filters
/// their binaries run with (none: every test).
const TEST_BUILDS: [(&[&str], &[&str]); 2] = [
    (&["-p", "depengine-cuda"], &[]),
    (&ENGINE_CUDA_BUILD, &ENGINE_CUDA_TESTS),
];

const RUN_SH: &str = r#"#!/bin/bash
# Written by `cargo xtask gpu-bundle`: depengine's GPU tests and the `gpu` bench group.
# Usage: bash run.sh [LOGS]   (default: logs/ beside this script)
set -u
here=$(cd "$(dirname "$0")" && pwd)
logs=${1:-$here/logs}
mkdir -p "$logs"
lib=$(mktemp -d)
for packed in "$here"/nvrtc/*.xz; do
    xz -dc "$packed" > "$lib/$(basename "${packed%.xz}")" || exit 1
done
ln -sf libnvrtc.so.12 "$lib/libnvrtc.so"
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEPENGINE_REQUIRE_GPU=1 RUST_BACKTRACE=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } \
    > "$logs/machine.txt" 2>&1
failed=0
: > "$logs/tests.txt"
for test in "$here"/bin/*.test; do
    name=$(basename "$test" .test)
    # The tests of the binary to run: those its NAME.filters names, or all of them.
    filters=()
    if [ -f "$here/bin/$name.filters" ]; then
        read -ra filters < "$here/bin/$name.filters"
    fi
    echo "=== $name ${filters[*]:-}" | tee -a "$logs/tests.txt"
    if ! timeout 300 "$test" --test-threads=1 --nocapture ${filters[@]+"${filters[@]}"} \
        >> "$logs/tests.txt" 2>&1; then
        echo "FAILED: $name" | tee -a "$logs/tests.txt"
        failed=1
    fi
done
grep -E "^test result|^FAILED" "$logs/tests.txt"
: > "$logs/bench.txt"
for round in 1 2 3; do
    for system in depengine-cuda raw-cuda; do
        echo "--- round $round: $system" >> "$logs/bench.txt"
        timeout 120 "$here/bin/depengine-bench" gpu --system "$system" --ops 20000 \
            >> "$logs/bench.txt" 2>&1 || failed=1
    done
    echo "--- round $round: depengine-cuda --gpu-workers 2" >> "$logs/bench.txt"
    timeout 120 "$here/bin/depengine-bench" gpu --system depengine-cuda --gpu-workers 2 \
        --ops 20000 --workloads kernel_chain,kernel_chain_streams,kernel5_chain \
        >> "$logs/bench.txt" 2>&1 || failed=1
done
cat "$logs/bench.txt"
exit $failed
"#;

pub(crate) fn main(mut args: impl Iterator<Item = String>) -> Result {
    let dir = PathBuf::from(args.next().ok_or("gpu-bundle needs a folder to write")?);
    if let Some(extra) = args.next() {
        return Err(format!("gpu-bundle: unexpected argument `{extra}`"));
    }
    let nvrtc = Path::new(NVRTC_LIB);
    if !nvrtc.join(NVRTC_FILES[0]).exists() {
        return Err(format!(
            "no NVRTC in {NVRTC_LIB}: python3 -m pip install --no-deps --target \
             target/cuda/nvrtc \"nvidia-cuda-nvrtc-cu12==12.8.*\""
        ));
    }
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).map_err(|e| format!("creating {}: {e}", bin.display()))?;
    for (build, filters) in TEST_BUILDS {
        for (name, executable) in test_binaries(build)? {
            strip_into(&executable, &bin.join(format!("{name}.test")))?;
            if !filters.is_empty() {
                let list = bin.join(format!("{name}.filters"));
                fs::write(&list, filters.join(" ") + "\n")
                    .map_err(|e| format!("writing {}: {e}", list.display()))?;
            }
        }
    }
    // Without the `mpi` group, so that the binary loads on a machine without an MPI library.
    Cmd::cargo()
        .args([
            "build",
            "--release",
            "-p",
            "depengine-bench",
            "--no-default-features",
        ])
        .run()?;
    strip_into(
        Path::new("target/release/depengine-bench"),
        &bin.join("depengine-bench"),
    )?;
    let packed = dir.join("nvrtc");
    fs::create_dir_all(&packed).map_err(|e| format!("creating {}: {e}", packed.display()))?;
    for file in NVRTC_FILES {
        Cmd::new("xz")
            .args(["-T0", "-6", "-c"])
            .arg(nvrtc.join(file))
            .run_into(&packed.join(format!("{file}.xz")))?;
    }
    let script = dir.join("run.sh");
    fs::write(&script, RUN_SH).map_err(|e| format!("writing {}: {e}", script.display()))?;
    println!(
        "gpu-bundle: {} is ready; on the GPU machine: bash {}/run.sh [LOGS]",
        dir.display(),
        dir.display()
    );
    Ok(())
}

/// Builds the tests of `build` (release, not run) and returns each test binary as
/// `(package.target, path)`, from cargo's JSON messages.
fn test_binaries(build: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let captured = Cmd::cargo()
        .args(["test", "--release", "--no-run", "--message-format=json"])
        .args(build)
        .capture(std::time::Duration::from_hours(1))?;
    if !captured.status.is_some_and(|status| status.success()) {
        return Err(format!("building the tests failed:\n{}", captured.stderr));
    }
    let mut binaries = Vec::new();
    for line in captured.stdout.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(executable), Some(target), Some(package)) = (
            message["executable"].as_str(),
            message["target"]["name"].as_str(),
            message["package_id"].as_str(),
        ) else {
            continue;
        };
        if message["profile"]["test"].as_bool() != Some(true) {
            continue;
        }
        // `path+file:///.../crates/cuda#depengine-cuda@0.1.0`: the name between `#` and `@`.
        let package = package
            .rsplit_once('#')
            .map_or(package, |(_, rest)| rest.split('@').next().unwrap_or(rest));
        binaries.push((format!("{package}.{target}"), PathBuf::from(executable)));
    }
    if binaries.is_empty() {
        return Err(format!("cargo built no test binary for {build:?}"));
    }
    Ok(binaries)
}

/// Copies `from` to `to` without its symbols and debug information.
fn strip_into(from: &Path, to: &Path) -> Result {
    Cmd::new("strip").arg("-o").arg(to).arg(from).run()
}
