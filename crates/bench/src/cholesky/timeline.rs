//! `--timeline PATH`: one more factorization of the first size, untimed, with depengine's
//! profiler recording every op; the ops go to `PATH` for the report's timeline chart
//! (`xtask/src/bench/charts/timeline.rs` reads them).
//!
//! The file is one JSON object:
//!
//! ```json
//! {"system": "depengine-perdevice", "n": 512, "tile": 128, "threads": 2,
//!  "ops": [{"thread": "depengine-cpu-priority-0", "op": "potrf",
//!           "start_us": 1523.4, "end_us": 2310.9}, ...]}
//! ```
//!
//! an entry of `ops` per op of the factorization, in the order they started: the worker
//! thread its function ran on, its name in the tile graph (`potrf`, `trsm`, `syrk`, `gemm`),
//! and when it started and completed, in microseconds since the engine started.
//!
//! The profiler runs for this factorization only: the timed ones run with it stopped, and this
//! one comes after the timed run of its size.

use std::path::Path;

use depengine::{Engine, Profile, ProfileMode};

use super::matrix::TileLayout;
use super::{Factored, System};

/// Factors `layout` on `system` with `engine`'s profiler (the system's engine) recording the
/// ops marked for it, which are the tile graph's (`tile_dag.rs`): the factor, and those ops.
pub(super) fn factor_profiled(
    engine: &Engine,
    system: &mut dyn System,
    layout: TileLayout,
) -> Result<(Factored, Profile), String> {
    let profiler = engine.profiler();
    // Only this factorization's ops: nothing recorded before (the profiler was stopped, but
    // `DEPENGINE_PROFILER_AUTOSTART` may have started it), and none of the harness's own.
    drop(profiler.take());
    let mode = profiler.mode();
    profiler.set_mode(ProfileMode::Marked);
    profiler.start();
    let factored = system.factor(layout);
    // Every op has completed: `factor` waited for all of them.
    profiler.stop();
    profiler.set_mode(mode);
    let profile = profiler.take();
    Ok((factored?, profile))
}

/// What the file says about the run, besides its ops.
pub(super) struct TimelineRun<'a> {
    pub(super) system: &'a str,
    pub(super) layout: TileLayout,
    pub(super) threads: usize,
}

/// The file's JSON (see the module's docs).
pub(super) fn to_json(run: &TimelineRun<'_>, profile: &Profile) -> serde_json::Value {
    let mut ops: Vec<_> = profile.ops().iter().collect();
    ops.sort_by_key(|op| (op.start(), op.thread_index()));
    let ops: Vec<serde_json::Value> = ops
        .into_iter()
        .map(|op| {
            serde_json::json!({
                "thread": op.thread_name(),
                "op": op.name(),
                "start_us": op.start().as_secs_f64() * 1e6,
                "end_us": op.end().as_secs_f64() * 1e6,
            })
        })
        .collect();
    serde_json::json!({
        "system": run.system,
        "n": run.layout.n,
        "tile": run.layout.tile,
        "threads": run.threads,
        "ops": ops,
    })
}

/// Writes the timeline to `path` (`--timeline`).
pub(super) fn write(path: &Path, run: &TimelineRun<'_>, profile: &Profile) -> Result<(), String> {
    let text = serde_json::to_string_pretty(&to_json(run, profile))
        .map_err(|error| format!("--timeline: cannot format the timeline: {error}"))?;
    std::fs::write(path, text + "\n")
        .map_err(|error| format!("--timeline: cannot write {}: {error}", path.display()))
}
