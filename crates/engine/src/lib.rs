//! `depengine`: the facade of depengine, an MXNet-style dependency engine.
//!
//! The facade over `depengine-graph` (when an op may run), `depengine-cpu` and `depengine-pool`
//! (where it runs) and `depengine-device` (the seam to device backends); the crate graph is in
//! `docs/architecture.md`.
//!
//! Push ops that declare what they read and write; each runs as soon as its dependencies
//! allow: reads concurrently, writes alone, everything on one value in push order,
//! independent ops in parallel. What ops name is typed data the engine owns ([`Data<T>`],
//! whose values their functions receive as `&T` and `&mut T`, with no lock), or plain
//! [`Var`]s that order ops whose data lives elsewhere; both mix in one op.
//!
//! ```
//! use depengine::{Engine, EngineConfig};
//!
//! let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
//! let a = engine.data_named("a", 0_u64)?;
//! let b = engine.data_named("b", 0_u64)?;
//!
//! engine.op("init a").write(&a).push_sync(|_, a| *a = 20)?;
//! engine.op("b = a + 22").read(&a).write(&b).push_async(|_, mut held| {
//!     // An async op may complete from another thread; its data goes with it.
//!     std::thread::spawn(move || {
//!         let (a, b) = held.refs();
//!         *b = *a + 22;
//!         held.ok();
//!     });
//! })?;
//! assert_eq!(*engine.read(&b)?, 42); // waits for the writes pushed before
//!
//! // A failure travels to dependents and is reported by the reads and waits.
//! engine.op("fails").write(&a).push_sync(|_, _| {
//!     std::fs::read("/no/such/file")?; // `?` takes an error of any type
//!     Ok(())
//! })?;
//! engine.op("skipped").read(&a).write(&b).push_sync(|_, _| {
//!     unreachable!("a dependent of failed data does not run")
//! })?;
//! let error = engine.read(&b).unwrap_err();
//! assert!(error.to_string().contains("op `fails` failed"), "{error}");
//! # Ok::<(), depengine::EngineError>(())
//! ```
//!
//! # Typed data
//!
//! [`Engine::data`] moves a value in; [`OpBuilder::read`] and [`OpBuilder::write`] name it in
//! an op ([`TypedOp`]); [`Engine::read`], [`Engine::write`], [`Engine::read_async`] and
//! [`Engine::take`] reach it from outside every op. The value is released after its last
//! handle and the ops pushed on it. Why `&mut T` needs no lock, also across async completion,
//! failures, panics, deletion and shutdown, is argued in `src/data/cell.rs` (and
//! `docs/engine.md`, "Typed data").
//!
//! # Engine kinds ([`EngineKind`])
//!
//! - `Naive`: each op runs inline on the thread that makes it ready, one at a time (with one
//!   pusher of sync ops: on the pushing thread, before `push` returns, in push order).
//! - `ThreadedPooled`: one shared worker block for normal ops, one for copy ops.
//! - `ThreadedPerDevice` (default): a lazily started worker block per CPU device id, one
//!   priority block (shared by all devices) for `CpuPrioritized` ops, GPU compute and copy
//!   executors from the [`DeviceBackend`] (a GPU op without one is an error at push time), and
//!   `Async` ops that are ready at push time run on the pushing thread.
//!
//! # Failure rules
//!
//! Following MXNet 1.9's exception propagation:
//!
//! 1. An op fails when its function returns `Err`, panics, or (async) drops its [`Completion`]
//!    unused. Its failure ([`OpFailure`]) is stored on every var it **writes**.
//! 2. A ready op any of whose vars (read or written) holds a failure does not run its function:
//!    it completes at once with that same failure (where several hold one: the first of its
//!    reads, then writes, in the order they were named), which is stored on the vars it writes. The
//!    failure thus reaches every op that depends on the failed op's outputs, transitively.
//! 3. [`Engine::wait_for_var`]`(v)` waits for every op pushed on `v` before it, then returns
//!    the failure `v` holds (`Err(EngineError::OpFailed)`) and **clears it on `v`** (ops pushed
//!    after the wait started see `v` clear; other vars keep theirs).
//! 4. [`Engine::wait_for_all`] waits for every pushed op, then returns the first original
//!    failure (in completion order) recorded since the previous `wait_for_all` that no
//!    `wait_for_var` returned yet, and **clears the failures of every var** a failed or
//!    skipped op wrote since then: a `wait_for_var` after a `wait_for_all` returns `Ok`, and a
//!    second `wait_for_all` returns `Ok` unless new failures happened.
//! 5. A successful write to a var clears its failure (only possible once the failure was
//!    cleared, since rule 2 skips writes to a failed var).
//!
//! [`Engine::wait_for_var_async`] and [`Engine::wait_for_all_async`] are the twins of the two
//! waits for async code: futures ([`WaitForVar`], [`WaitForAll`]) with the same outcomes under
//! the same rules, which block no thread and work with any executor.
//!
//! Differences from MXNet: MXNet shares one exception slot between all vars of a failure, so a
//! `WaitForVar` clears it on all of them; here it clears only the var waited on (the others'
//! data is just as invalid). The engine stays usable after any failure.
//!
//! # Misuse
//!
//! Typed errors ([`EngineError`]), nothing pushed: a var twice or in both lists, a deleted or
//! foreign var, a push (or a new var) after shutdown, a GPU op without a backend,
//! `wait_for_var` from inside an op on a var that op reads or writes, `wait_for_all` from
//! inside an op. Errors name the op being pushed and each var by the name it was created with
//! ([`Engine::new_var_named`]): `` op `update`: var "weights" (#0.1) is both read and
//! written by one op ``.
//!
//! A `wait_for_var` inside an op that would never return gets
//! [`EngineError::WaitDeadlock`]: an op pushed on the var before the wait depends, through any
//! chain of ops (and of other ops blocked in such waits), on a var the waiting op holds. A wait
//! inside an op that keeps a worker busy while the ops it waits for are queued on the same
//! block (one worker, or as many nested waits as workers) gets a stand-in thread that runs them
//! (at most 64 per engine at once).
//!
//! Sync ops run only on their route's workers (on `Naive`, the thread that makes them ready),
//! never on a pusher that got far ahead: a pusher may hold a lock its ops take. A panic in a
//! [`Engine::delete_var`] callback is caught and reported by the next `wait_for_all`. What the
//! engine cannot detect, and hangs: a cycle through a wait outside every op, through another
//! engine or through an async op that has not completed (whoever holds its [`Completion`] may
//! complete it), waits inside ops on a device executor that occupy all of its threads, and
//! more than 64 nested or concurrent waits inside ops on the CPU blocks. A wait blocked for
//! [`EngineConfig::stall_warning`] (10 s by default) warns, naming what it waits for: a `WARN`
//! event (target `depengine::stall`) if a `tracing` subscriber wants it, else a line on
//! stderr, so that no hang is silent.
//!
//! # Bulk execution
//!
//! With [`EngineConfig::bulk_size`] (or `DEPENGINE_BULK_SIZE`), consecutive sync ops that one
//! thread pushes run as one scheduled unit, a *segment* of at most that many ops (MXNet's
//! `MXNET_EXEC_BULK_EXEC_*`), with the dependency and failure semantics of ops pushed alone:
//! in push order, each op checked for failures on its own vars and recorded by the profiler
//! under its own name. A segment is in the dependency graph from its first op on; a later op
//! of the same thread joins it when it is a `push_sync` op in the same context and priority
//! on vars of the segment's first op, in conflict with the segment's last op (so that it depends
//! on every op of the segment, as when pushed alone), with nothing
//! else pushed to the engine in between. Every op is in the graph when its push returns, so
//! nothing waits for a flush: a thread may push ops and then wait for them by any means.
//!
//! ```
//! use depengine::{Engine, EngineConfig};
//! use std::sync::{Arc, Mutex};
//!
//! let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2).bulk_size(64))?;
//! let weights = engine.new_var()?;
//! let value = Arc::new(Mutex::new(0_u64));
//! for step in 1..=100 {
//!     // Each writes `weights`: up to 64 of them run as one segment.
//!     let value = Arc::clone(&value);
//!     engine.op("update").writes([weights]).push_sync(move |_| {
//!         *value.lock().unwrap() += step;
//!     })?;
//! }
//! engine.wait_for_var(weights)?;
//! assert_eq!(*value.lock().unwrap(), 5050);
//! # Ok::<(), depengine::EngineError>(())
//! ```
//!
//! # Plans: capture once, replay many
//!
//! [`Engine::capture`] records ops without running them (their functions `Fn`) and computes
//! their dependencies once; each [`Engine::replay`] of the [`Plan`] runs them as if they were
//! pushed at that point, failure rules included, released by counters instead of the var
//! queues. Plans hold CPU and GPU ops, on plain vars and typed data ([`TypedCaptureOp`]); a
//! GPU op runs where a pushed one does, each replay, and its dependents wait for its work.
//!
//! # Profiling
//!
//! [`Engine::profiler`] records where and when each op ran (MXNet's profiler): a per-name
//! summary and a Chrome trace ([`Profile`]). Each op's function also runs in a `tracing` span
//! (`TRACE`, target `depengine::op`), and own failures are `DEBUG` events (target
//! `depengine::failure`).
//!
//! # Shutdown
//!
//! [`Engine::shutdown`] or dropping the last clone: later pushes fail with
//! [`EngineError::ShutDown`], every pushed op completes, then (last clone) the worker threads
//! are joined. If the last clone is dropped by an op (its closure held it), nothing can wait
//! for that op: the threads finish the queued work and exit on their own. One bound: a drop
//! stalled on GPU work that makes no progress (a hung kernel) gives up after
//! [`EngineConfig::device_hang_limit`], with a warning, and leaves the threads behind.
//!
//! `docs/engine.md` in the repository has the full design.

#![deny(unsafe_code)]
#![allow(
    clippy::doc_markdown,
    reason = "the docs name MXNet and its classes, which are not items of this crate"
)]

mod api;
mod config;
mod context;
#[allow(
    unsafe_code,
    reason = "the typed data's cell: its safety argument is data/cell.rs"
)]
mod data;
mod error;
mod failure;
mod name;
mod op;
mod plan;
mod profile;
mod route;
mod run;
mod thread;
mod wait;
mod warn;

#[cfg(all(test, loom))]
mod loom_tests;

pub use config::{
    BULK_SIZE, CPU_MAX_SPIN_US, CPU_PRIORITY_NTHREADS, CPU_WORKER_NTHREADS, ConfigError,
    DEFAULT_DEVICE_HANG_LIMIT, DEFAULT_MAX_PENDING, DEFAULT_MAX_PENDING_WAIT, ENGINE_TYPE,
    EngineConfig, EngineKind, GPU_COPY_NTHREADS, GPU_WORKER_NTHREADS, MAX_BULK_SIZE, MAX_CPU_SPIN,
    MAX_PENDING, MAX_PENDING_WAIT_US, PIN_WORKERS, PROFILER_AUTOSTART, PROFILER_MODE,
    PROFILER_OUTPUT, STALL_WARNING_SECS,
};
pub use context::{Context, DeviceType, FnProperty, RunContext};
pub use data::access::{Access, AccessList, Append, MAX_ACCESSES, ReadAccess, WriteAccess};
pub use data::guard::{ReadGuard, WriteGuard};
pub use data::handle::Data;
pub use data::held::Held;
pub use data::read_future::ReadData;
pub use data::typed_capture::TypedCaptureOp;
pub use data::typed_op::TypedOp;
pub use data::{DataRefused, TakeError};
pub use depengine_device::{
    BackendError, DeviceBackend, DeviceCompletion, DeviceError, DeviceOp, DeviceTask, Executor,
    Fence, Recording, Task, TaskRun,
};

/// The CUDA backend (`depengine-cuda`), with the `cuda` feature: GPU ops run on its compute
/// and copy workers, and find their stream with [`RunContext::cuda`].
#[cfg(feature = "cuda")]
pub mod cuda {
    pub use depengine_cuda::{CudaBackend, CudaError, CudaRun, Driver, cudarc, kernels, memory};
}
pub use api::async_wait::{WaitForAll, WaitForVar};
pub use api::capture::{Capture, CaptureOp};
pub use api::op_builder::OpBuilder;
pub use api::operator::{Operator, OperatorBuilder};
pub use api::profiler_handle::Profiler;
pub use api::{Engine, EngineStats};
pub use depengine_graph::Var;
/// The most threads a block of workers may have: each thread count of an [`EngineConfig`] is at
/// most this (a larger one is [`ConfigError::TooManyThreads`]).
pub use depengine_pool::MAX_THREADS;
pub use error::{EngineError, Result};
pub use failure::{BoxError, FailureCause, OpFailure};
pub use op::plan::Plan;
pub use op::record::Completion;
pub use op::result::IntoOpResult;
pub use profile::recorder::ProfileMode;
pub use profile::report::{OpProfile, OpSummary, Profile, ProfiledOutcome};
