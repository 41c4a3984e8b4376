//! `depengine-cuda`: depengine's CUDA backend, through [cudarc](https://docs.rs/cudarc).
//!
//! It implements `depengine-device`'s traits on `depengine-cpu`'s blocks, and the facade
//! installs it with its `cuda` feature; the crate graph: `docs/architecture.md`.
//!
//! The CUDA driver (`libcuda`) and NVRTC (`libnvrtc`) are loaded when first used, not linked:
//! the crate builds on any machine, with no CUDA toolkit, and a machine without them gets a
//! typed error ([`CudaError::NoDriver`], [`CudaError::NoNvrtc`]) instead of cudarc's panic.
//! The bindings are cudarc's for CUDA 12.8; a driver of that version or later loads them.
//!
//! What the crate provides:
//!
//! - [`CudaBackend`], the `DeviceBackend` that `depengine`'s `cuda` feature installs: per GPU,
//!   compute workers (a `depengine-cpu` `WorkerBlock`) and copy workers (a `PriorityBlock`,
//!   highest priority first), each worker with a non-blocking stream of its own, made current
//!   for the op it runs ([`CudaRun::current`]);
//! - the path of a GPU op: its stream first waits (on the device) for events after the
//!   launched GPU ops it was released behind; its function launches work on the worker's
//!   stream and returns; the worker numbers the op on its stream, reports it launched with that
//!   place as its fence (the engine releases the GPU ops behind it then), and hands the op's
//!   completion to its stream's completion thread, with an event recorded after it unless a
//!   chain goes on on that worker; that thread completes the op (releasing its CPU dependents)
//!   once an event after it has fired. The engine never makes a worker wait for the device; a
//!   stream's ops complete in stream order;
//! - [`Driver::probe`]: whether a driver and devices are there, without a panic on a machine
//!   that has neither (the backend probes at the first request for a device's workers, and
//!   reports the reason as a `BackendError`);
//! - [`kernels`]: the CUDA C source of the kernels the tests launch, their compilation by
//!   NVRTC (to PTX, and to a device's machine code), which needs no GPU, and their loading
//!   into a device;
//! - [`memory`]: pinned host memory (`Context::cpu_pinned` data) and copies between it and
//!   device buffers queued on a GPU worker's stream ([`CudaRun::copy_to_device`],
//!   [`CudaRun::copy_to_host`]).
//!
//! `docs/cuda.md` has the design, what is not built yet, and what ran where.
//!
//! # Examples
//!
//! ```
//! use depengine_cuda::{CudaError, Driver};
//!
//! match Driver::probe() {
//!     Ok(driver) => println!("{} CUDA device(s)", driver.device_count()),
//!     Err(CudaError::NoDriver { .. }) => println!("no CUDA driver here"),
//!     Err(error) => println!("CUDA is not usable: {error}"),
//! }
//! ```

mod backend;
mod completer;
mod current;
mod device;
mod driver;
mod error;
mod event;
mod executor;
mod fence;
#[cfg(test)]
mod gpu_or_skip;
mod graph;
mod host_wait;
pub mod kernels;
pub mod memory;
mod peer;
mod run;
mod side_stream;
mod stray;
mod tail;

pub use backend::CudaBackend;
pub use driver::Driver;
pub use error::CudaError;
pub use run::CudaRun;

/// The cudarc version this crate is built on, for the types [`CudaRun`] hands out
/// (`cudarc::driver::CudaStream`, `CudaContext`, `CudaSlice`) and launching kernels.
pub use cudarc;
