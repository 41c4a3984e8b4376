//! depengine-pool's integration tests, in one test binary (`cargo test -p depengine-pool --test
//! it`), a module per subject. Under `--cfg loom` only the loom models (`loom/`) are compiled,
//! and only there (`cargo xtask loom`).

#[cfg(not(loom))]
mod event_count;
#[cfg(loom)]
mod loom;
#[cfg(not(loom))]
mod run_queue;
#[cfg(not(loom))]
mod run_queue_model;
#[cfg(not(loom))]
mod simple_pool;
#[cfg(not(loom))]
mod stress;
#[cfg(not(loom))]
mod thread_pool;
