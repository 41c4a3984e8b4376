//! Collectives and point-to-point transfers over MPI as depengine ops.
//!
//! `MXNet`'s engine was in-process too: its users who outgrew one machine kept one engine per
//! process and moved data with a communication library, each transfer an op with read and
//! write vars, so that communication overlaps the compute that does not depend on it. This
//! crate does that over MPI (rsmpi, over the system's MPI library): a [`Comm`] pushes
//! `allreduce`, `broadcast`, `allgather`, `reduce_scatter`, `send`, `recv` and `barrier` on an
//! engine's typed data as async ops, which one communication thread starts as MPI's
//! non-blocking calls (an allreduce, as MPI's tuned blocking call) and completes when MPI does.
//! No compute worker blocks on MPI (on the naive engine, which runs every op on the thread that
//! releases it, the ops a completion releases run on the communication thread).
//!
//! ```
//! use depengine::{Engine, EngineConfig};
//! use depengine_mpi::{Comm, Reduce};
//!
//! let engine = Engine::new(EngineConfig::default().cpu_worker_threads(2))?;
//! let comm = Comm::world(&engine)?; // `mpirun -np N` starts N ranks; alone, one
//! let local = engine.data(vec![comm.rank() as u64])?;
//! let all = engine.data(Vec::new())?;
//! comm.allgather(&local, &all)?;
//! assert_eq!(*engine.read(&all)?, (0..comm.size() as u64).collect::<Vec<_>>());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Layout: `comm.rs` (the ops, and how their order is kept), `thread.rs` (the communication
//! thread), `transfer.rs` (an op's call, and the rule that keeps its buffers valid),
//! `combine.rs` (a reduction by the caller's function), `element.rs`, `reduce.rs`, `error.rs`;
//! `nccl.rs` (with the `nccl` feature: `NcclComm`, collectives on GPU buffers through NCCL).
//! Design and use on a cluster: `docs/distributed.md`.

#![deny(unsafe_code)]

#[allow(
    unsafe_code,
    reason = "a user-defined MPI operation: its C callback and the function it calls"
)]
mod combine;
mod comm;
mod element;
mod error;
#[cfg(feature = "nccl")]
#[allow(
    unsafe_code,
    reason = "NCCL's communicator shared by the ops of one rank, and its library's presence"
)]
mod nccl;
mod reduce;
#[allow(
    unsafe_code,
    reason = "MPI's C calls on the communication thread: initialization, tests, error strings"
)]
mod thread;
#[allow(
    unsafe_code,
    reason = "buffers handed to MPI's C calls: their rule is transfer.rs's"
)]
mod transfer;

pub use comm::Comm;
pub use element::Element;
pub use error::MpiError;
#[cfg(feature = "nccl")]
pub use nccl::NcclComm;
pub use reduce::{Reduce, UserReduce};
