//! Matrix products for the model room: `C = A·B + β·C` on f32 views, split across the current
//! rayon pool by output rows or columns.
//!
//! Part of the model room. Splitting only the *output* (never the reduction dimension) means each
//! output element is computed by the same sequence of multiply-adds whatever the number of
//! threads, so results are bit-identical for any pool size (tested in `tests/per_sample.rs`).
//! The backend is ndarray's `general_mat_mul` (the `matrixmultiply` crate, pure Rust with
//! run-time AVX2/FMA dispatch); see `results/bench/README.md` for its measured rate.

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

/// Below this many flops a product runs on the calling thread (splitting costs more than it saves).
const PARALLEL_MIN_FLOPS: usize = 2_000_000;

/// `c ← a·b + beta·c`.
///
/// # Shapes
/// `a`: `[m, k]`, `b`: `[k, n]`, `c`: `[m, n]` (any strides; transposed views are fine).
pub fn gemm(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    beta: f32,
    mut c: ArrayViewMut2<'_, f32>,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    debug_assert_eq!(b.nrows(), k);
    debug_assert_eq!(c.dim(), (m, n));
    let threads = rayon::current_num_threads();
    if threads <= 1 || 2 * m * n * k < PARALLEL_MIN_FLOPS || (m < 16 && n < 16) {
        general_mat_mul(1.0, &a, &b, beta, &mut c);
        return;
    }
    if m >= n {
        let chunk = m.div_ceil(threads).max(8);
        let parts: Vec<_> = a
            .axis_chunks_iter(Axis(0), chunk)
            .zip(c.axis_chunks_iter_mut(Axis(0), chunk))
            .collect();
        parts.into_par_iter().for_each(|(a_part, mut c_part)| {
            general_mat_mul(1.0, &a_part, &b, beta, &mut c_part);
        });
    } else {
        let chunk = n.div_ceil(threads).max(8);
        let parts: Vec<_> = b
            .axis_chunks_iter(Axis(1), chunk)
            .zip(c.axis_chunks_iter_mut(Axis(1), chunk))
            .collect();
        parts.into_par_iter().for_each(|(b_part, mut c_part)| {
            general_mat_mul(1.0, &a, &b_part, beta, &mut c_part);
        });
    }
}
