//! depengine-mpi's tests. Each runs its body on every rank of `mpirun` jobs of 2 and 3 ranks,
//! which it starts itself (`launch.rs`); without `mpirun` it skips, saying why.

#![allow(
    clippy::cast_possible_wrap,
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::float_cmp,
    reason = "tests: rank numbers and small counts as values, which sums of them equal exactly"
)]

mod collectives;
mod launch;
#[cfg(feature = "nccl")]
mod nccl;
mod ordering;
mod split;
