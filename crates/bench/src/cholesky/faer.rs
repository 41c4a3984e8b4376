//! faer's own Cholesky (`llt`, in place) on the whole matrix, parallel on a rayon pool of
//! `threads` threads (`Par::rayon(threads)`). The tile size does not apply: faer blocks the
//! matrix itself.

use std::time::Instant;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{
    LltRegularization, cholesky_in_place, cholesky_in_place_scratch,
};
use faer::{Par, Spec};

use super::matrix::{TileLayout, full};
use super::{Factored, System};

pub(crate) struct Faer {
    pool: rayon::ThreadPool,
    threads: usize,
}

impl Faer {
    pub(crate) fn new(threads: usize) -> Result<Self, String> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Faer { pool, threads })
    }
}

impl System for Faer {
    fn factor(&mut self, layout: TileLayout) -> Result<Factored, String> {
        let n = layout.n;
        let par = Par::rayon(self.threads);
        let mut factor = full(n);
        let mut scratch = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Spec::default()));
        let seconds = self.pool.install(|| -> Result<f64, String> {
            let start = Instant::now();
            cholesky_in_place(
                factor.as_mut(),
                LltRegularization::default(),
                par,
                MemStack::new(&mut scratch),
                Spec::default(),
            )
            .map_err(|error| format!("faer's llt: {error}"))?;
            Ok(start.elapsed().as_secs_f64())
        })?;
        Ok(Factored { seconds, factor })
    }
}
