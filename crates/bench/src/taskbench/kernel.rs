//! The task kernels (`README.md`, "Kernels").

use std::time::{Duration, Instant};

/// What a task computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// 64 FLOPs per iteration on 32 `f64` values.
    ComputeBound,
    /// Spins for 10 ns per iteration.
    BusyWait,
}

/// FLOPs per iteration of `ComputeBound`.
const FLOPS_PER_ITERATION: f64 = 64.0;

impl Kernel {
    pub(crate) fn parse(name: &str) -> Result<Self, String> {
        match name {
            "compute_bound" => Ok(Kernel::ComputeBound),
            "busy_wait" => Ok(Kernel::BusyWait),
            other => Err(format!(
                "--kernel: `{other}` is not a kernel (compute_bound or busy_wait)"
            )),
        }
    }

    /// Runs `iterations` iterations for the task seeded with `seed`; the result goes into the
    /// task's tile, so the work cannot be optimized away. Never inlined: every system and
    /// pattern runs the same machine code.
    #[inline(never)]
    pub(crate) fn run(self, iterations: u64, seed: f64) -> f64 {
        match self {
            Kernel::ComputeBound => {
                let mut values = [0.0_f64; 32];
                for (k, value) in values.iter_mut().enumerate() {
                    *value = seed + k as f64;
                }
                for _ in 0..iterations {
                    for value in &mut values {
                        *value = *value * 0.999_999_9 + 1e-7;
                    }
                }
                values.iter().sum()
            }
            Kernel::BusyWait => {
                let start = Instant::now();
                let length = Duration::from_nanos(10 * iterations);
                while start.elapsed() < length {
                    std::hint::spin_loop();
                }
                seed
            }
        }
    }

    /// The work of one iteration, in the units of [`unit`](Self::unit) (times 10^9).
    pub(crate) fn work_per_iteration(self) -> f64 {
        match self {
            Kernel::ComputeBound => FLOPS_PER_ITERATION,
            Kernel::BusyWait => 1.0,
        }
    }

    /// The unit of a rate of work.
    pub(crate) fn unit(self) -> &'static str {
        match self {
            Kernel::ComputeBound => "GFLOP/s",
            Kernel::BusyWait => "Gunit/s",
        }
    }
}
