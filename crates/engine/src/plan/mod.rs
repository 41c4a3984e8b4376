//! What a captured plan computes once and each replay counts down: its dependencies
//! (`deps.rs`, from the engine's read/write rules), the counters that release its ops
//! (`release_counts.rs`), its GPU ops released at each other's launch (`launches.rs`), and the
//! replays queued on its last pushed one (`chain.rs`).
//! The plan itself is an op's payload (`op/plan.rs`); capture and replay are the engine's
//! (`api/capture.rs`), a replay's run is `run/replay/`.

pub(crate) mod chain;
pub(crate) mod deps;
pub(crate) mod launches;
pub(crate) mod release_counts;
