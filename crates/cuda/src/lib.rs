//! `depengine-cuda`: depengine's CUDA backend, through [cudarc](https://docs.rs/cudarc).
//!
//! ```text
//!                    depengine          the facade
//!          ┌─────────────┴─────────────┐
//!          │                     depengine-cpu         depengine-cuda  ◄── this crate
//!          │                   ┌───────┴───────┐              │
//!          │                   │               └──────┬───────┘
//!   depengine-graph     depengine-pool         depengine-device
//! ```
//!
//! The CUDA driver (`libcuda`) and NVRTC (`libnvrtc`) are loaded when first used, not linked:
//! the crate builds on any machine, with no CUDA toolkit, and a machine without them gets a
//! typed error ([`CudaError::NoDriver`], [`CudaError::NoNvrtc`]) instead of cudarc's panic.
//! The bindings are cudarc's for CUDA 12.8; a driver of that version or later loads them.
//!
//! What the crate provides so far:
//!
//! - [`Driver::probe`]: whether a driver and devices are there, without a panic on a machine
//!   that has neither;
//! - [`kernels`]: the CUDA C source of the kernels the backend's tests and bench launch, and
//!   their compilation to PTX by NVRTC, which needs no GPU.
//!
//! The executors (compute and copy workers, each with its stream) and the completion of GPU
//! ops by CUDA events are not built yet; `docs/cuda.md` has the design and its state.
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

mod driver;
mod error;
pub mod kernels;

pub use driver::Driver;
pub use error::CudaError;
