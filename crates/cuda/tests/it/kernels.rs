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

/// The machine code the tests and the bench load: a CUBIN (an ELF image) for an H100's
/// `sm_90` and a V100's `sm_70`, each with the kernels' names in its symbols; an architecture
/// NVRTC does not know is a compile error, not a panic.
#[test]
fn the_kernels_compile_to_machine_code_for_a_device_architecture() {
    for (major, minor) in [(9, 0), (7, 0)] {
        match kernels::compile_for(major, minor) {
            Ok(cubin) => {
                assert_eq!(
                    &cubin[..4],
                    b"\x7fELF",
                    "sm_{major}{minor}: not an ELF image"
                );
                for name in kernels::NAMES {
                    assert!(
                        cubin
                            .windows(name.len())
                            .any(|bytes| bytes == name.as_bytes()),
                        "sm_{major}{minor}: {name} missing"
                    );
                }
            }
            Err(CudaError::NoNvrtc { tried }) => {
                eprintln!("skipped: no NVRTC library loads (tried {tried})");
                return;
            }
            Err(other) => panic!("sm_{major}{minor}: {other}"),
        }
    }
    match kernels::compile_for(1, 0) {
        Err(CudaError::Compile { message }) => assert!(!message.is_empty()),
        Err(CudaError::NoNvrtc { .. }) => {}
        other => panic!("sm_10: {other:?}"),
    }
}
