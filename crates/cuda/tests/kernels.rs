//! Our kernels compile to PTX with NVRTC, a real compile that needs no GPU; skipped, with the
//! reason printed, where no NVRTC library loads (`.ci/run` installs one from the Python package index).

use depengine_cuda::{CudaError, kernels};

#[test]
fn the_kernels_compile_to_ptx() {
    match kernels::compile() {
        Ok(ptx) => {
            for name in kernels::NAMES {
                assert!(
                    ptx.contains(&format!(".entry {name}")),
                    "{name} missing:\n{ptx}"
                );
            }
            assert!(
                ptx.contains(".target sm_70"),
                "PTX for {}:\n{ptx}",
                kernels::ARCH
            );
        }
        Err(CudaError::NoNvrtc { tried }) => {
            eprintln!("skipped: no NVRTC library loads (tried {tried})");
            assert!(!kernels::nvrtc_present());
        }
        Err(other) => panic!("{other}"),
    }
}
