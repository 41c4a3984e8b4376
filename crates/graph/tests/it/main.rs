//! depengine-graph's integration tests, in one test binary (`cargo test -p depengine-graph --test
//! it`), a module per subject. Its loom models are in `src/loom_tests.rs`: under `--cfg loom`
//! this binary is empty.
#![cfg(not(loom))]

mod memory;
mod model;
mod stress;
