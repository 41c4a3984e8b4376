//! The kernels the backend's tests and bench launch, in CUDA C, and their compilation to PTX by
//! NVRTC (no GPU needed: NVRTC is a compiler library).
//!
//! ```
//! use depengine_cuda::{CudaError, kernels};
//!
//! match kernels::compile() {
//!     Ok(ptx) => assert!(ptx.contains(".entry add_f32")),
//!     Err(CudaError::NoNvrtc { .. }) => println!("no NVRTC here: kernels not compiled"),
//!     Err(error) => panic!("{error}"),
//! }
//! ```

use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use crate::error::{CudaError, candidates};

/// The kernels' names, as `extern "C"` entries of [`SOURCE`].
pub const NAMES: [&str; 3] = ["add_f32", "scale_f32", "spin"];

/// The kernels' CUDA C source.
///
/// - `add_f32(a, b, out, n)`: `out[i] = a[i] + b[i]`;
/// - `scale_f32(x, factor, n)`: `x[i] *= factor`;
/// - `spin(cycles)`: one thread per block spins for `cycles` clock cycles (a kernel of known
///   length, for overlap and dependency tests).
pub const SOURCE: &str = r#"
extern "C" __global__ void add_f32(const float* a, const float* b, float* out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

extern "C" __global__ void scale_f32(float* x, float factor, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] *= factor;
    }
}

extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
"#;

/// The virtual architecture the PTX targets: `compute_70` (Volta), which every GPU a CUDA 12
/// driver supports can run (the driver compiles PTX for the GPU at load).
pub const ARCH: &str = "compute_70";

/// Whether an NVRTC library can be loaded.
pub fn nvrtc_present() -> bool {
    // SAFETY: loading a shared library runs its initializers; libnvrtc's are the compiler's
    // own, which any use of it runs, and the library is unloaded again at once.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compiles [`SOURCE`] to PTX text.
///
/// # Errors
///
/// [`CudaError::NoNvrtc`] when no NVRTC library loads; [`CudaError::Compile`], with NVRTC's
/// log, when the source does not compile.
pub fn compile() -> Result<String, CudaError> {
    if !nvrtc_present() {
        return Err(CudaError::NoNvrtc {
            tried: candidates("nvrtc"),
        });
    }
    let options = CompileOptions {
        arch: Some(ARCH),
        ..CompileOptions::default()
    };
    let ptx = compile_ptx_with_opts(SOURCE, options).map_err(|error| CudaError::Compile {
        message: match error {
            CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => format!("{other:?}"),
        },
    })?;
    Ok(ptx.to_src())
}
