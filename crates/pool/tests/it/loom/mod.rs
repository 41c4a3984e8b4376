//! The pool's loom models (`cargo xtask loom`; `docs/loom.md` names the ordering each one
//! guards): the `RunQueue`, the `EventCount`, whole pools, and the hand-offs the engine builds
//! on.

mod common;
mod event_count;
mod handoff;
mod pool;
mod run_queue;
