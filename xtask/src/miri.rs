//! `cargo xtask miri`: the tests of the crates with `unsafe` code, and the engine's tests that
//! reach that code, under miri (nightly).
//!
//! `MIRIFLAGS` is left to the caller, e.g. `MIRIFLAGS=-Zmiri-many-seeds cargo xtask miri`. The
//! toolchain is `nightly`, or `$MIRI_TOOLCHAIN` (CI pins a dated nightly there, see `.ci/run`).

use std::path::Path;
use std::time::Instant;

use crate::cmd::{Cmd, Result};

/// `+` and the toolchain Miri runs on.
fn toolchain() -> String {
    let name = std::env::var("MIRI_TOOLCHAIN").unwrap_or_else(|_| "nightly".to_owned());
    format!("+{name}")
}

/// Whether `cargo +<toolchain> miri` is installed.
pub(crate) fn available() -> bool {
    Cmd::cargo()
        .args([toolchain().as_str(), "miri", "--version"])
        .succeeds()
}

/// The engine's tests that take its routes into the pool's and the graph's `unsafe` code, at
/// their small Miri sizes: a chain on one var (pushes through the `Incoming` ring, drainers,
/// `wait_for_var`'s write through the ring), reads and writes interleaved on the workers, async
/// ops completed from foreign threads, and waits inside an op, which read the op's vars through
/// its frame (`thread/frame.rs`), a replayed op's included. `depengine`'s own `unsafe` code,
/// its typed data (`data/`), its op functions stored in their records (`op/sync_fn.rs`) and the
/// frames, runs under these, [`DATA_TESTS`] and `sync_fn`'s unit test, chosen so that the Miri
/// run fits CI. Full names in the engine's test binary (`tests/it/api.rs`, `tests/it/replay.rs`).
const ENGINE_TESTS: &[&str] = &[
    "api::ops_on_one_var_run_in_push_order",
    "api::reads_see_the_write_before_them",
    "api::async_ops_complete_from_other_threads",
    "api::waiting_inside_an_op_on_its_own_vars_is_an_error",
    "replay::a_failed_op_skips_its_dependents_and_fails_only_what_it_writes",
    "replay::a_wait_inside_a_replayed_op_on_the_plans_vars_is_refused",
];

/// The engine's typed-data tests (`tests/it/data.rs`) that take every role of `data/cell.rs`: ops
/// reading and writing on the workers (finding their cells on their vars, also as the ops of a
/// bulk segment), an async op's `Held` completed from a thread, guards, a future given up,
/// `take`, the release of a value after its last handle (also where the engine is gone, or the
/// var was deleted by hand), and typed ops of a plan, async ones included.
/// (`tests/it/random_data.rs` takes the same roles at random, too slowly for Miri.)
const DATA_TESTS: &[&str] = &[
    "data::ops_read_and_write_typed_values_in_push_order",
    "data::typed_accesses_are_matched_to_their_data_beside_plain_vars",
    "data::an_async_op_completes_its_held_data_from_another_thread",
    "data::guards_hold_the_data_against_ops",
    "data::a_read_future_dropped_before_it_resolves_releases_the_data",
    "data::take_needs_the_last_handle_and_returns_a_failed_value_with_its_failure",
    "data::the_value_is_dropped_once_after_the_last_handle_and_its_ops",
    "data::values_outliving_the_engine_or_deleted_by_hand_are_dropped",
    "replay::typed_plans_equal_a_plain_loop_on_every_engine_kind",
    "replay::a_long_chain_of_async_ops_completed_inline_runs_on_every_engine_kind",
];

/// Runs the tests under miri; extra arguments go to `cargo miri test` (e.g. a test name filter)
/// of the crates with `unsafe` code, doc examples included.
///
/// Without them, everything runs in two lanes, one per core of a CI machine: Miri interprets a
/// program on one thread, so two processes take half the time. Each lane has its own target
/// folder, as cargo holds a folder's lock while its tests run; the second lane's output is
/// printed once both are done. Doc examples are left out: they show the API, and the tests
/// below take the `unsafe` code's paths.
pub(crate) fn run(extra: impl Iterator<Item = String>) -> Result {
    if !available() {
        return Err("miri is not installed; install it with \
                    `rustup +nightly component add miri rust-src` (or `rustup toolchain install \
                    nightly --component miri,rust-src`)"
            .to_owned());
    }
    let extra: Vec<String> = extra.collect();
    if !extra.is_empty() {
        return miri_test(UNSAFE_CRATES).args(&extra).run();
    }
    // The sysroot Miri builds on first use, once, before two processes could both build it.
    Cmd::cargo()
        .args([toolchain().as_str(), "miri", "setup"])
        .run()?;
    let log = Path::new("target").join("miri-lane.log");
    let _ = std::fs::remove_file(&log);
    let started = Instant::now();
    let second = std::thread::spawn({
        let log = log.clone();
        move || {
            let ran = second_lane().into_iter().try_for_each(|test| {
                test.env("CARGO_TARGET_DIR", "target/miri-lane")
                    .run_logged(&log)
            });
            (ran, started.elapsed())
        }
    });
    let first = engine_tests();
    println!(
        "--- the first Miri lane took {} s",
        started.elapsed().as_secs()
    );
    let (second, took) = second.join().unwrap_or_else(|_| {
        (
            Err("the second Miri lane panicked".to_owned()),
            started.elapsed(),
        )
    });
    println!(
        "--- the second Miri lane took {} s ({}):",
        took.as_secs(),
        log.display()
    );
    match std::fs::read_to_string(&log) {
        Ok(text) => print!("{text}"),
        Err(error) => println!("cannot read it: {error}"),
    }
    first.and(second)
}

/// The crates with `unsafe` code (the slab's is its buckets, block store and prefetch hint;
/// graph's its op slot, `op_cell.rs`, and its allocation-counting test; the pool's its queues,
/// jobs and latches).
const UNSAFE_CRATES: &[&str] = &["depengine-pool", "depengine-slab", "depengine-graph"];

/// `cargo miri test` of `crates`.
fn miri_test(crates: &[&str]) -> Cmd {
    let cmd = Cmd::cargo().args([toolchain().as_str(), "miri", "test"]);
    crates.iter().fold(cmd, |cmd, name| cmd.args(["-p", name]))
}

/// The second lane: the pool's and the slab's tests and the graph's integration tests, about as
/// long as the first (CI's log shows each lane's time).
fn second_lane() -> [Cmd; 2] {
    [
        miri_test(&["depengine-pool", "depengine-slab"]).arg("--tests"),
        miri_test(&["depengine-graph"]).args(["--test", "it"]),
    ]
}

/// The first lane: the graph's unit tests and the engine's (the lists above, and the op
/// function stored in its record).
fn engine_tests() -> Result {
    miri_test(&["depengine-graph"]).arg("--lib").run()?;
    // One run of the engine's test binary for both lists.
    miri_test(&["depengine"])
        .args(["--test", "it", "--", "--exact"])
        .args(ENGINE_TESTS)
        .args(DATA_TESTS)
        .run()?;
    // The op function stored in its record (`op/sync_fn.rs`), inline, in a block and boxed,
    // called and dropped unrun; the tests above call it on every route.
    miri_test(&["depengine"])
        .args(["--lib", "--", "op::sync_fn"])
        .run()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{DATA_TESTS, ENGINE_TESTS};

    /// Each name is a test of the engine's test binary (`MODULE::NAME`, a function of
    /// `tests/it/MODULE.rs`): a name that matches no test runs none, and passes.
    #[test]
    fn the_engine_tests_exist() {
        let it = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/engine/tests/it");
        for name in ENGINE_TESTS.iter().chain(DATA_TESTS) {
            let (module, function) = name.split_once("::").expect("MODULE::NAME");
            let source = std::fs::read_to_string(it.join(format!("{module}.rs"))).unwrap();
            assert!(
                source.contains(&format!("#[test]\nfn {function}() {{")),
                "no test `{function}` in tests/it/{module}.rs"
            );
        }
    }
}
