//! The kernels the backend's tests and bench launch, in CUDA C, and their compilation by NVRTC
//! (no GPU needed: NVRTC is a compiler library).
//!
//! Two forms: PTX for a virtual architecture ([`compile`]), which checks the source anywhere,
//! and a CUBIN of machine code for one device's architecture ([`compile_for`], [`load`]), which
//! is what the tests and the bench load. A driver compiles PTX when it loads it and refuses PTX
//! newer than itself (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`: NVRTC 12.8's PTX on a 12.2 driver),
//! while machine code from a newer 12.x NVRTC loads on any 12.x driver (CUDA's minor version
//! compatibility covers machine code, not PTX).
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

use std::ffi::{CStr, CString};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx_with_opts, result, sys};

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

/// Compiles [`SOURCE`] to a CUBIN, the machine code of the GPUs of compute capability
/// `major.minor` (`sm_90` for an H100), ready for `CudaContext::load_module(Ptx::from_binary(..))`.
///
/// # Errors
///
/// As [`compile`]; an architecture this NVRTC does not know is [`CudaError::Compile`].
pub fn compile_for(major: i32, minor: i32) -> Result<Vec<u8>, CudaError> {
    if !nvrtc_present() {
        return Err(CudaError::NoNvrtc {
            tried: candidates("nvrtc"),
        });
    }
    let failed = |call: &str, error: result::NvrtcError| CudaError::Compile {
        message: format!("{call}: {error:?}"),
    };
    let source = CString::new(SOURCE).map_err(|error| CudaError::Compile {
        message: error.to_string(),
    })?;
    let program = Program(
        result::create_program(&source, None).map_err(|e| failed("nvrtcCreateProgram", e))?,
    );
    let options = [format!("--gpu-architecture=sm_{major}{minor}")];
    // SAFETY: `program.0` was created above and is destroyed only by `Program`'s drop, after
    // this function's last use of it; the options are plain strings.
    if let Err(error) = unsafe { result::compile_program(program.0, &options) } {
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(program.0) }
            .ok()
            .and_then(|log| {
                // `c_char` as the byte it is; the log ends at its first NUL, if it has one.
                let bytes: Vec<u8> = log.iter().map(|&c| c.to_ne_bytes()[0]).collect();
                CStr::from_bytes_until_nul(&bytes)
                    .ok()
                    .map(|text| text.to_string_lossy().trim().to_owned())
            })
            .filter(|log| !log.is_empty());
        return Err(CudaError::Compile {
            message: log.unwrap_or_else(|| format!("{error:?}")),
        });
    }
    let mut size = 0;
    // SAFETY: as above, on a compiled program; `size` is a valid place for the result.
    unsafe { sys::nvrtcGetCUBINSize(program.0, &raw mut size) }
        .result()
        .map_err(|e| failed("nvrtcGetCUBINSize", e))?;
    let mut cubin = vec![0_u8; size];
    // SAFETY: as above; `cubin` holds the `size` bytes NVRTC writes.
    unsafe { sys::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr().cast()) }
        .result()
        .map_err(|e| failed("nvrtcGetCUBIN", e))?;
    Ok(cubin)
}

/// Compiles the kernels for `context`'s device ([`compile_for`] its compute capability) and
/// loads them into it. A device newer than this NVRTC knows gets the PTX of [`compile`]
/// instead, which its driver compiles at load.
///
/// # Errors
///
/// As [`compile_for`]; a driver call that fails is [`CudaError::Driver`].
pub fn load(context: &Arc<CudaContext>) -> Result<Arc<CudaModule>, CudaError> {
    let driver = |call| move |source| CudaError::Driver { call, source };
    // cudarc's calls first return an error some other call stored on the context: no error of
    // this load's (`stray.rs`).
    crate::stray::report(context, context.ordinal() as u32);
    let (major, minor) = context
        .compute_capability()
        .map_err(driver("cuDeviceGetAttribute"))?;
    let code = match compile_for(major, minor) {
        Ok(cubin) => Ptx::from_binary(cubin),
        Err(CudaError::Compile { .. }) => Ptx::from_src(compile()?),
        Err(error) => return Err(error),
    };
    context
        .load_module(code)
        .map_err(driver("cuModuleLoadData"))
}

/// An NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by `result::create_program` and destroyed only here, once.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}
