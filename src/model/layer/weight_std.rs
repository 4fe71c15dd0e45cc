//! Weight standardisation (Qiao et al. 2019, "Micro-Batch Training with Batch-Channel
//! Normalization and Weight Standardization", arXiv:1903.10520, eq. 1–2) and its backward map
//! (room: `model`).
//!
//! Forward (eq. 2): each row o of a weight matrix W `[rows, n]` (a convolution's
//! `[C_out, kh·kw·C_in]`, n its fan-in) is replaced by
//! `Ŵ_o = (W_o − μ_o) / s_o`, with `μ_o = mean_j W_oj`, the biased variance
//! `σ_o² = mean_j (W_oj − μ_o)²` and `s_o = √(σ_o² + ε)`, ε = [`EPS`]; the layer then computes
//! with Ŵ (eq. 1, `y = Ŵ ∗ x`). The stored parameter is the raw W (as PyTorch's weight-standardised
//! convolutions store it); the bias is not standardised. Ŵ depends on the parameters only, never on
//! the data, so per-example gradients stay per-example.
//!
//! Backward: with `c = W_o − μ_o` (so `Σ_j c_j = 0`), `∂σ²/∂W_j = (2/n) c_j` and
//! `∂s/∂W_j = c_j / (n s)`, hence `∂Ŵ_k/∂W_j = (δ_kj − 1/n)/s − c_k c_j / (n s³)`, and for
//! `g = ∂L/∂Ŵ_o`:
//!
//! ```text
//! ∂L/∂W_o = J_oᵀ g = (g − mean(g) − Ŵ_o · mean(g ⊙ Ŵ_o)) / s_o
//! ```
//!
//! exactly, ε included (Ŵ_o is c/s with the same s). The map is linear in g and depends on the
//! parameters only: an example's W-gradient is J applied to its Ŵ-gradient, and a weighted sum of
//! W-gradients is J applied to the weighted sum of Ŵ-gradients (one application per batch).
//!
//! Norms: per-example norms of W-gradients are not those of Ŵ-gradients. Expanding
//! `‖g − m·1 − a·Ŵ_o‖²` with `m = mean(g)`, `a = mean(g ⊙ Ŵ_o)`, `Σ g = n m`, `Σ g ⊙ Ŵ_o = n a`:
//!
//! ```text
//! ‖J_oᵀ g‖² = (‖g‖² − n m² + a² Q_o − 2 n a² + 2 m a S_o) / s_o²,   Q_o = ‖Ŵ_o‖², S_o = Σ_j Ŵ_oj
//! ```
//!
//! In exact arithmetic `S_o = 0` but `Q_o = n σ_o² / (σ_o² + ε)`, not n: the short form
//! `‖g‖² − n m² − n a²` is off by `n a² ε / (σ_o² + ε)`, which matters for small weights (a wide
//! fan-in at PyTorch's initialisation has σ² = 1/(3n)). [`Standardized::squared_norm`] uses the
//! Q_o and S_o of the Ŵ the layer actually computes with, so the identity is exact for it. In
//! floating point it subtracts nearly equal terms when g lies close to span{1, Ŵ_o} (for a
//! fan-in of 2 it always does: ‖J_oᵀ g‖ is then of order ε‖g‖/σ³), so the convolution forms its
//! norms by applying J_oᵀ to each example's materialised gradient, and uses the identity only as
//! a cross-check (its forced ghost method).

use ndarray::{Array2, ArrayView2, Axis};
use rayon::prelude::*;

/// ε added to each row's variance (as group normalisation's).
pub const EPS: f64 = 1e-5;

/// A weight matrix standardised row by row, with what its backward map and norms need.
#[derive(Debug, Clone)]
pub struct Standardized {
    /// Ŵ `[rows, n]`.
    weight: Array2<f32>,
    /// 1 / s_o per row.
    inv_std: Vec<f64>,
    /// Q_o = ‖Ŵ_o‖² per row (of the f32 values).
    sum_sq: Vec<f64>,
    /// S_o = Σ_j Ŵ_oj per row (of the f32 values).
    sum: Vec<f64>,
}

impl Standardized {
    /// Standardise each row of `w` (eq. 2); statistics in f64, Ŵ rounded to f32. Rows are
    /// independent, so the bits do not depend on the thread count.
    pub fn new(w: ArrayView2<'_, f32>) -> Self {
        let (rows, n) = w.dim();
        let mut weight = Array2::<f32>::zeros((rows, n));
        let stats: Vec<(f64, f64, f64)> = weight
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(w.axis_iter(Axis(0)).into_par_iter())
            .map(|(mut hat, raw)| {
                let mean = raw.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
                let var = raw
                    .iter()
                    .map(|&v| (v as f64 - mean) * (v as f64 - mean))
                    .sum::<f64>()
                    / n as f64;
                let inv = 1.0 / (var + EPS).sqrt();
                hat.zip_mut_with(&raw, |h, &v| *h = ((v as f64 - mean) * inv) as f32);
                let q = hat.iter().map(|&v| v as f64 * v as f64).sum::<f64>();
                let s = hat.iter().map(|&v| v as f64).sum::<f64>();
                (inv, q, s)
            })
            .collect();
        Standardized {
            weight,
            inv_std: stats.iter().map(|s| s.0).collect(),
            sum_sq: stats.iter().map(|s| s.1).collect(),
            sum: stats.iter().map(|s| s.2).collect(),
        }
    }

    /// Ŵ `[rows, n]`.
    pub fn weight(&self) -> ArrayView2<'_, f32> {
        self.weight.view()
    }

    /// 1 / s_o for each row.
    pub fn inv_std(&self) -> &[f64] {
        &self.inv_std
    }

    /// `g ← Jᵀ g` row by row, in place, for `g` = ∂L/∂Ŵ `[rows, n]` row-major (f64).
    pub fn backward_f64(&self, g: &mut [f64]) {
        let n = self.weight.ncols();
        for (o, row) in g.chunks_exact_mut(n).enumerate() {
            let hat = self.weight.row(o);
            let m = row.iter().sum::<f64>() / n as f64;
            let a = row
                .iter()
                .zip(hat.iter())
                .map(|(&x, &h)| x * h as f64)
                .sum::<f64>()
                / n as f64;
            let inv = self.inv_std[o];
            row.iter_mut()
                .zip(hat.iter())
                .for_each(|(x, &h)| *x = (*x - m - h as f64 * a) * inv);
        }
    }

    /// [`Standardized::backward_f64`] on f32 values (computed in f64, rounded once). This runs on
    /// every example's materialised gradient, so the two row sums use eight independent f64
    /// accumulators (a fixed order: the bits do not depend on the thread count) that the
    /// compiler can vectorise, instead of one serial chain of additions.
    pub fn backward_f32(&self, g: &mut [f32]) {
        let n = self.weight.ncols();
        let Some(hat) = self.weight.as_slice() else {
            unreachable!("Ŵ is a fresh standard-layout array")
        };
        for (o, (row, hat)) in g.chunks_exact_mut(n).zip(hat.chunks_exact(n)).enumerate() {
            let (sum_g, sum_gw) = row_sums(row, hat);
            let (m, a) = (sum_g / n as f64, sum_gw / n as f64);
            let inv = self.inv_std[o];
            row.iter_mut()
                .zip(hat)
                .for_each(|(x, &h)| *x = ((*x as f64 - m - h as f64 * a) * inv) as f32);
        }
    }

    /// ‖J_oᵀ g‖² of row o from `sq` = ‖g‖², `sum_g` = Σ g and `sum_gw` = Σ g ⊙ Ŵ_o (the identity
    /// of the module doc, exact for this Ŵ). With `sq = 0` it is the part that is not
    /// ‖g‖² / s_o², for callers that form Σ_o ‖g_o‖² / s_o² at once.
    pub fn squared_norm(&self, o: usize, sq: f64, sum_g: f64, sum_gw: f64) -> f64 {
        let n = self.weight.ncols() as f64;
        let (m, a) = (sum_g / n, sum_gw / n);
        let inv = self.inv_std[o];
        (sq - n * m * m + a * a * self.sum_sq[o] - 2.0 * n * a * a + 2.0 * m * a * self.sum[o])
            * inv
            * inv
    }
}

/// (Σ g, Σ g ⊙ ŵ) of one row in f64, in eight lanes summed pairwise at the end.
fn row_sums(g: &[f32], hat: &[f32]) -> (f64, f64) {
    const LANES: usize = 8;
    let (mut s, mut d) = ([0.0f64; LANES], [0.0f64; LANES]);
    let (gc, hc) = (g.chunks_exact(LANES), hat.chunks_exact(LANES));
    let (g_tail, h_tail) = (gc.remainder(), hc.remainder());
    for (gb, hb) in gc.zip(hc) {
        for j in 0..LANES {
            let x = gb[j] as f64;
            s[j] += x;
            d[j] += x * hb[j] as f64;
        }
    }
    for (j, (&x, &h)) in g_tail.iter().zip(h_tail).enumerate() {
        s[j] += x as f64;
        d[j] += x as f64 * h as f64;
    }
    let pairwise =
        |v: [f64; LANES]| ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
    (pairwise(s), pairwise(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random(rows: usize, n: usize, scale: f32, seed: u64) -> Array2<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((rows, n), |_| scale * rng.random_range(-1.0..1.0f32) + 0.1)
    }

    /// Ŵ in f64 straight from eq. 2 (an independent implementation).
    fn standardise_f64(w: &[f64]) -> Vec<f64> {
        let n = w.len() as f64;
        let mean = w.iter().sum::<f64>() / n;
        let var = w.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        w.iter().map(|v| (v - mean) / (var + EPS).sqrt()).collect()
    }

    #[test]
    fn rows_have_mean_zero_and_unit_variance() {
        // σ² = 1/3 ≫ ε: variance 1 to ~3e-5; tiny weights (σ² ~ ε): exactly σ²/(σ² + ε).
        for (scale, seed) in [(1.0f32, 1u64), (0.004, 2)] {
            let w = random(5, 27, scale, seed);
            let st = Standardized::new(w.view());
            for (o, (hat, raw)) in st.weight().rows().into_iter().zip(w.rows()).enumerate() {
                let n = hat.len() as f64;
                let mean = hat.iter().map(|&v| v as f64).sum::<f64>() / n;
                let var = hat.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
                let raw_mean = raw.iter().map(|&v| v as f64).sum::<f64>() / n;
                let raw_var = raw
                    .iter()
                    .map(|&v| (v as f64 - raw_mean).powi(2))
                    .sum::<f64>()
                    / n;
                assert!(mean.abs() < 1e-7, "row {o}: mean {mean}");
                let want = raw_var / (raw_var + EPS);
                assert!((var - want).abs() < 1e-6, "row {o}: var {var} vs {want}");
                if scale == 1.0 {
                    assert!((var - 1.0).abs() < 1e-4, "row {o}: var {var}");
                }
                assert!((st.sum_sq[o] - n * var).abs() < 1e-5 * n);
            }
        }
    }

    #[test]
    fn the_backward_map_is_the_derivative_of_the_standardisation() {
        // Central differences of f(W) = Σ_k g_k Ŵ_k(W) in f64, against Jᵀ g.
        for (scale, seed) in [(1.0f32, 3u64), (0.005, 4)] {
            let w = random(3, 12, scale, seed);
            let g = random(3, 12, 1.0, seed + 10).mapv(|v| v as f64);
            let st = Standardized::new(w.view());
            let mut jg = g.clone();
            st.backward_f64(jg.as_slice_mut().unwrap());
            for o in 0..3 {
                let row: Vec<f64> = w.row(o).iter().map(|&v| v as f64).collect();
                let f = |r: &[f64]| -> f64 {
                    standardise_f64(r)
                        .iter()
                        .zip(g.row(o))
                        .map(|(a, b)| a * b)
                        .sum()
                };
                for j in 0..12 {
                    let h = 1e-6 * scale as f64;
                    let (mut p, mut m) = (row.clone(), row.clone());
                    p[j] += h;
                    m[j] -= h;
                    let fd = (f(&p) - f(&m)) / (2.0 * h);
                    let tol = 1e-5 * fd.abs().max(jg[[o, j]].abs()).max(1.0);
                    assert!(
                        (fd - jg[[o, j]]).abs() <= tol,
                        "[{o},{j}]: {fd} vs {}",
                        jg[[o, j]]
                    );
                }
            }
            // The f32 form agrees with the f64 form.
            let mut g32 = g.mapv(|v| v as f32);
            st.backward_f32(g32.as_slice_mut().unwrap());
            for (a, b) in g32.iter().zip(jg.iter()) {
                assert!((*a as f64 - b).abs() <= 1e-6 * b.abs().max(1.0));
            }
        }
    }

    #[test]
    fn the_norm_identity_is_exact_with_epsilon() {
        // Small weights (σ² ~ ε) make Q_o = n σ²/(σ² + ε) far from n: the identity with the
        // actual Q_o matches the explicit norm; the short form ‖g‖² − n m² − n a² does not.
        let w = random(4, 18, 0.003, 5);
        let g = random(4, 18, 1.0, 6).mapv(|v| v as f64);
        let st = Standardized::new(w.view());
        let mut jg = g.clone();
        st.backward_f64(jg.as_slice_mut().unwrap());
        let mut short_form_error = 0.0f64;
        for o in 0..4 {
            let explicit: f64 = jg.row(o).iter().map(|v| v * v).sum();
            let sq: f64 = g.row(o).iter().map(|v| v * v).sum();
            let sum_g: f64 = g.row(o).sum();
            let sum_gw: f64 = g
                .row(o)
                .iter()
                .zip(st.weight().row(o))
                .map(|(&a, &h)| a * h as f64)
                .sum();
            let via = st.squared_norm(o, sq, sum_g, sum_gw);
            assert!(
                (via - explicit).abs() <= 1e-9 * explicit,
                "row {o}: {via} vs {explicit}"
            );
            // The split form used by the ghost path: Σ‖g‖²/s² added separately.
            let split = sq * st.inv_std[o].powi(2) + st.squared_norm(o, 0.0, sum_g, sum_gw);
            assert!((split - explicit).abs() <= 1e-9 * explicit);
            let n = 18.0;
            let short = (sq - sum_g * sum_g / n - sum_gw * sum_gw / n) * st.inv_std[o].powi(2);
            short_form_error = short_form_error.max((short - explicit).abs() / explicit);
        }
        assert!(short_form_error > 1e-3, "{short_form_error}");
    }
}
