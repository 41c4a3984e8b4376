//! The matrix every system factors, its tiles, and the check of a factor.
//!
//! Entry `(i, j)` of the `n × n` matrix is a function of `(i, j)` alone (`entry`), so that a
//! tile is made without the whole matrix and the C++ peers make the same matrix
//! (`crates/bench/README.md`, "The `cholesky` group"): off the diagonal a value in
//! `[-0.5, 0.5)` from a hash of the pair, symmetric; on it `n` plus such a value. Each row's
//! off-diagonal entries add up to less than `(n - 1) / 2` in absolute value, below its
//! diagonal entry, so the matrix is symmetric positive definite (Gershgorin) and well
//! conditioned: a correct factor leaves a relative residual near the rounding unit.

use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, Mat, MatRef, Par};

use crate::taskbench::splitmix64;

/// Entry `(i, j)` of the `n × n` test matrix.
pub(crate) fn entry(n: usize, i: usize, j: usize) -> f64 {
    let (low, high) = if i <= j { (i, j) } else { (j, i) };
    let noise = unit(splitmix64(((high as u64) << 32) ^ low as u64)) - 0.5;
    if i == j { n as f64 + noise } else { noise }
}

/// The whole test matrix.
pub(crate) fn full(n: usize) -> Mat<f64> {
    Mat::from_fn(n, n, |i, j| entry(n, i, j))
}

/// The top 53 bits of `bits` as a value in `[0, 1)`.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1_u64 << 53) as f64)
}

/// How an `n × n` matrix splits into square tiles of side `tile`: `count` tiles a side, the
/// last one smaller when `tile` does not divide `n`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TileLayout {
    pub(crate) n: usize,
    pub(crate) tile: usize,
}

impl TileLayout {
    /// The layout, or why there is none (`n` or `tile` zero).
    pub(crate) fn new(n: usize, tile: usize) -> Result<Self, String> {
        if n == 0 {
            return Err("the matrix size must be at least 1".to_owned());
        }
        if tile == 0 {
            return Err("--tile must be at least 1".to_owned());
        }
        Ok(TileLayout { n, tile })
    }

    /// Tiles a side.
    pub(crate) fn count(self) -> usize {
        self.n.div_ceil(self.tile)
    }

    /// The first row (or column) of tile row `i`.
    pub(crate) fn start(self, i: usize) -> usize {
        i * self.tile
    }

    /// The rows (or columns) of tile row `i`.
    pub(crate) fn len(self, i: usize) -> usize {
        self.tile.min(self.n - self.start(i))
    }

    /// Tile `(i, j)` of the test matrix.
    pub(crate) fn tile_of_matrix(self, i: usize, j: usize) -> Mat<f64> {
        let (row, col) = (self.start(i), self.start(j));
        Mat::from_fn(self.len(i), self.len(j), |r, c| {
            entry(self.n, row + r, col + c)
        })
    }

    /// The tiles `(i, j)` with `i >= j`, row by row (the order of [`LowerTiles`]).
    pub(crate) fn lower(self) -> impl Iterator<Item = (usize, usize)> {
        (0..self.count()).flat_map(|i| (0..=i).map(move |j| (i, j)))
    }
}

/// One value per tile of the lower triangle, `(i, j)` with `i >= j`, stored row by row.
pub(crate) struct LowerTiles<T> {
    tiles: Vec<T>,
}

impl<T> LowerTiles<T> {
    /// Makes tile `(i, j)` of each with `make(i, j)`, in [`TileLayout::lower`] order.
    pub(crate) fn try_new<E>(
        layout: TileLayout,
        mut make: impl FnMut(usize, usize) -> Result<T, E>,
    ) -> Result<Self, E> {
        let tiles = layout
            .lower()
            .map(|(i, j)| make(i, j))
            .collect::<Result<_, E>>()?;
        Ok(LowerTiles { tiles })
    }

    /// Tile `(i, j)`, `i >= j`.
    pub(crate) fn get(&self, i: usize, j: usize) -> &T {
        debug_assert!(i >= j, "tile ({i}, {j}) is above the diagonal");
        &self.tiles[i * (i + 1) / 2 + j]
    }

    /// The tiles, in [`TileLayout::lower`] order.
    pub(crate) fn into_vec(self) -> Vec<T> {
        self.tiles
    }
}

/// The whole lower factor `L` from its tiles (`tiles`, in [`TileLayout::lower`] order); zero
/// above the diagonal.
pub(crate) fn assemble(layout: TileLayout, tiles: Vec<Mat<f64>>) -> Mat<f64> {
    let mut factor = Mat::zeros(layout.n, layout.n);
    for ((i, j), tile) in layout.lower().zip(tiles) {
        factor
            .as_mut()
            .submatrix_mut(
                layout.start(i),
                layout.start(j),
                layout.len(i),
                layout.len(j),
            )
            .copy_from(&tile);
    }
    factor
}

/// `‖A − L Lᵀ‖_F / ‖A‖_F` for the test matrix `A` and the lower triangle of `factor` (what is
/// above its diagonal is not read); `L Lᵀ` computed with `par`.
pub(crate) fn relative_residual(factor: MatRef<'_, f64>, par: Par) -> f64 {
    let n = factor.nrows();
    assert_eq!(n, factor.ncols(), "a factor is square");
    let mut product = Mat::<f64>::zeros(n, n);
    triangular::matmul(
        product.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        factor,
        BlockStructure::TriangularLower,
        factor.transpose(),
        BlockStructure::TriangularUpper,
        1.0,
        par,
    );
    // Both norms over the whole symmetric matrix from its lower half: an entry below the
    // diagonal stands for two.
    let (mut error, mut norm) = (0.0_f64, 0.0_f64);
    for j in 0..n {
        for i in j..n {
            let weight = if i == j { 1.0 } else { 2.0 };
            let a = entry(n, i, j);
            let difference = a - product[(i, j)];
            error += weight * difference * difference;
            norm += weight * a * a;
        }
    }
    (error / norm).sqrt()
}

#[cfg(test)]
mod tests {
    use super::{TileLayout, entry, relative_residual, splitmix64};
    use faer::{Mat, Par};

    #[test]
    fn splitmix64_is_the_published_function() {
        // The first output of the reference generator seeded with 0 (state += gamma, then mix):
        // the C++ peers make the same matrix.
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }

    /// Entries the C++ peers' `cholesky::entry` gives too (`cpp/cholesky_common.hpp`), bit for
    /// bit: every system factors the same matrix.
    #[test]
    fn entries_are_those_of_the_cpp_peers() {
        assert_eq!(entry(100, 3, 5).to_bits(), 0x3fdd_0789_ebf5_3e1e); // 0.45358512919207949
        assert_eq!(entry(100, 7, 7).to_bits(), 0x4059_1386_a9be_2d0a); // 100.30509418079251
        assert_eq!(entry(4096, 4095, 0).to_bits(), 0xbfda_6aee_245f_0b28); // -0.41277650405770538
    }

    #[test]
    fn the_matrix_is_symmetric_and_diagonally_dominant() {
        let n = 50;
        for i in 0..n {
            let off: f64 = (0..n)
                .filter(|&j| j != i)
                .map(|j| entry(n, i, j).abs())
                .sum();
            assert!(off < entry(n, i, i), "row {i}");
            for j in 0..n {
                assert_eq!(entry(n, i, j).to_bits(), entry(n, j, i).to_bits());
            }
        }
    }

    #[test]
    fn tiles_cover_the_matrix_with_a_smaller_last_one() {
        let layout = TileLayout::new(10, 4).unwrap();
        assert_eq!(layout.count(), 3);
        assert_eq!((0..3).map(|i| layout.len(i)).collect::<Vec<_>>(), [4, 4, 2]);
        assert_eq!(layout.lower().count(), 6);
        assert!(TileLayout::new(10, 0).is_err());
    }

    /// The check tells a factor from a wrong one: the identity is far from a factor of the
    /// test matrix.
    #[test]
    fn a_wrong_factor_has_a_large_residual() {
        let wrong = Mat::<f64>::identity(40, 40);
        assert!(relative_residual(wrong.as_ref(), Par::Seq) > 0.5);
    }
}
