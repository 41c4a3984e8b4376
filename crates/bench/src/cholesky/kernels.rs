//! The four tile kernels of a right-looking Cholesky factorization (lower triangle), each one
//! call into faer, single-threaded (`Par::Seq`): the task graph is what runs them in parallel.
//!
//! With `A = L Lᵀ` split into tiles, step `k` factors the diagonal tile, solves the tiles
//! below it against it, and subtracts their products from the trailing tiles:
//!
//! ```text
//! POTRF  A[k][k] = L[k][k] L[k][k]ᵀ               (the tile's own Cholesky factor)
//! TRSM   L[i][k] = A[i][k] L[k][k]⁻ᵀ       i > k
//! SYRK   A[i][i] -= L[i][k] L[i][k]ᵀ       i > k   (the lower half only)
//! GEMM   A[i][j] -= L[i][k] L[j][k]ᵀ       i > j > k
//! ```

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Accum, Mat, Par};

/// POTRF: replaces the diagonal tile `a` by its Cholesky factor `L` (lower triangular: the
/// upper half is zeroed, so that the tile holds `L` exactly).
///
/// # Errors
///
/// When `a` is not positive definite (a pivot that is not positive), naming the pivot.
pub(crate) fn potrf(a: &mut Mat<f64>) -> Result<(), String> {
    let mut scratch = MemBuffer::new(cholesky_in_place_scratch::<f64>(
        a.nrows(),
        Par::Seq,
        faer::Spec::default(),
    ));
    cholesky_in_place(
        a.as_mut(),
        faer::linalg::cholesky::llt::factor::LltRegularization::default(),
        Par::Seq,
        MemStack::new(&mut scratch),
        faer::Spec::default(),
    )
    .map_err(|error| format!("the diagonal tile is not positive definite: {error}"))?;
    for j in 1..a.ncols() {
        for i in 0..j.min(a.nrows()) {
            a[(i, j)] = 0.0;
        }
    }
    Ok(())
}

/// TRSM: `a ← a l⁻ᵀ`, `l` being a diagonal tile's factor (`a lᵀ = b` solved as `l aᵀ = bᵀ`).
pub(crate) fn trsm(l: &Mat<f64>, a: &mut Mat<f64>) {
    solve_lower_triangular_in_place(l.as_ref(), a.as_mut().transpose_mut(), Par::Seq);
}

/// SYRK: `c ← c − a aᵀ` on the lower half of the diagonal tile `c` (its upper half is not
/// touched).
pub(crate) fn syrk(a: &Mat<f64>, c: &mut Mat<f64>) {
    triangular::matmul(
        c.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Add,
        a.as_ref(),
        BlockStructure::Rectangular,
        a.transpose(),
        BlockStructure::Rectangular,
        -1.0,
        Par::Seq,
    );
}

/// GEMM: `c ← c − a bᵀ`.
pub(crate) fn gemm(a: &Mat<f64>, b: &Mat<f64>, c: &mut Mat<f64>) {
    matmul(
        c.as_mut(),
        Accum::Add,
        a.as_ref(),
        b.transpose(),
        -1.0,
        Par::Seq,
    );
}
