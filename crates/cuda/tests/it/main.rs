//! depengine-cuda's integration tests, in one test binary (`cargo test -p depengine-cuda --test
//! it`), a module per subject. Without a GPU (or without NVRTC) the tests that need one skip
//! themselves, saying why; `DEPENGINE_REQUIRE_GPU=1` makes a skip a failure.

mod backend;
mod discovery;
mod kernels;
mod memory;
