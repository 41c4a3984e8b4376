//! depengine's integration tests, in one test binary (`cargo test -p depengine --test it`), a
//! module per subject; `cargo test -p depengine --test it -- MODULE::` runs one of them. The
//! tests that need a process to themselves (a global `tracing` subscriber, the environment,
//! the resident memory, a count of allocations) run alone in a child process
//! (`common::isolated`). The engine's loom models are in `src/loom_tests.rs`: under
//! `--cfg loom` this binary is empty.
#![cfg(not(loom))]

mod common;

mod api;
mod bulk;
mod data;
mod deadlock;
mod device;
mod dump_pending;
mod from_env;
mod futures;
#[cfg(feature = "cuda")]
mod gpu;
mod gpu_graphs;
mod hazards;
#[cfg(target_os = "linux")]
mod memory_returned;
mod names;
mod op_builder;
mod op_functions;
mod pending_bound;
mod profiler;
mod push_allocations;
mod random;
mod random_data;
mod replay;
mod routes;
mod stall;
mod thread_limits;
mod tracing;
mod tracing_scoped;
mod warnings;
