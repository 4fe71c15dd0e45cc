//! Losses on a model's output: per-example values and their gradients with respect to the logits.
//!
//! Part of the model room. Each loss is computed per example in f64 from f32 logits and returns
//! the f32 gradient `∂ℓ_i/∂z_i`, which seeds the backward pass. No reduction over the batch happens
//! here: callers sum (non-private gradient) or keep per-example values (per-sample gradients).

use ndarray::{Array1, Array2, ArrayView2, Axis};
use rayon::prelude::*;

use super::spec::LossKind;

/// Rows per task of the pool (a row's loss is a few hundred nanoseconds: finer tasks cost more to
/// hand out than they save). Each row is computed alone, so the results do not depend on it.
const ROWS_PER_TASK: usize = 32;

/// Per-example losses `[B]` (f64) and the gradient of each example's loss with respect to its own
/// logits `[B, k]` (f32).
///
/// - Softmax cross-entropy: `ℓ = logsumexp(z) − z_y` with `logsumexp(z) = m + ln Σ_j e^{z_j − m}`,
///   `m = max_j z_j` (the max shift keeps every exponent ≤ 0); `∂ℓ/∂z = softmax(z) − e_y`.
/// - Binary logistic: `s = 2y − 1`, `ℓ = softplus(−s z) = max(−s z, 0) + ln(1 + e^{−|s z|})`;
///   `∂ℓ/∂z = −s · σ(−s z)`.
/// - Squared: `ℓ = ½ Σ_j (z_j − t_j)²`; `∂ℓ/∂z = z − t`.
///
/// Labels must already be checked against the number of classes.
pub fn loss_and_dlogits(
    kind: LossKind,
    logits: ArrayView2<'_, f32>,
    labels: &[usize],
) -> (Array1<f64>, Array2<f32>) {
    let (batch, k) = logits.dim();
    let mut losses = Array1::<f64>::zeros(batch);
    let mut grad = Array2::<f32>::zeros((batch, k));
    let losses_slice = losses
        .as_slice_mut()
        .unwrap_or_else(|| unreachable!("a fresh array is contiguous"));
    losses_slice
        .par_iter_mut()
        .zip(grad.axis_iter_mut(Axis(0)).into_par_iter())
        .zip(logits.axis_iter(Axis(0)).into_par_iter())
        .zip(labels.par_iter())
        .with_min_len(ROWS_PER_TASK)
        .for_each(|(((loss, mut g), z), &y)| match kind {
            LossKind::SoftmaxCrossEntropy => {
                let m = z.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                let mut sum = 0.0f64;
                for &v in z.iter() {
                    sum += (v as f64 - m).exp();
                }
                let lse = m + sum.ln();
                *loss = lse - z[y] as f64;
                for (j, (gj, &zj)) in g.iter_mut().zip(z.iter()).enumerate() {
                    let p = (zj as f64 - lse).exp();
                    *gj = (p - if j == y { 1.0 } else { 0.0 }) as f32;
                }
            }
            LossKind::BinaryLogistic => {
                let s = if y == 1 { 1.0 } else { -1.0 };
                let t = -s * z[0] as f64;
                *loss = t.max(0.0) + (-t.abs()).exp().ln_1p();
                g[0] = (-s * logistic(t)) as f32;
            }
            LossKind::Squared => {
                let mut l = 0.0f64;
                for (j, (gj, &zj)) in g.iter_mut().zip(z.iter()).enumerate() {
                    let t = if k == 1 {
                        y as f64
                    } else if j == y {
                        1.0
                    } else {
                        0.0
                    };
                    let r = zj as f64 - t;
                    l += 0.5 * r * r;
                    *gj = r as f32;
                }
                *loss = l;
            }
        });
    (losses, grad)
}

/// The predicted class of each example: argmax of the logits (first maximum), or for one output
/// `z > 0` (logistic) / `z > ½` (squared loss on 0/1 labels).
pub fn predictions(kind: LossKind, logits: ArrayView2<'_, f32>) -> Vec<usize> {
    logits
        .axis_iter(Axis(0))
        .map(|z| {
            if z.len() == 1 {
                let threshold = if kind == LossKind::Squared { 0.5 } else { 0.0 };
                usize::from(z[0] > threshold)
            } else {
                let mut best = 0;
                for (j, &v) in z.iter().enumerate() {
                    if v > z[best] {
                        best = j;
                    }
                }
                best
            }
        })
        .collect()
}

/// σ(t) = 1 / (1 + e^{−t}) in f64, stable for large |t|.
fn logistic(t: f64) -> f64 {
    if t >= 0.0 {
        1.0 / (1.0 + (-t).exp())
    } else {
        let e = t.exp();
        e / (1.0 + e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn cross_entropy_is_stable_for_huge_logits() {
        // logsumexp(1000, 0) − 0 = 1000 + ln(1 + e^{-1000}) = 1000 (exactly in f64).
        let z = array![[1000.0f32, 0.0]];
        let (l, g) = loss_and_dlogits(LossKind::SoftmaxCrossEntropy, z.view(), &[1]);
        assert_eq!(l[0], 1000.0);
        assert!((g[[0, 0]] - 1.0).abs() < 1e-7 && (g[[0, 1]] + 1.0).abs() < 1e-7);
    }

    #[test]
    fn cross_entropy_of_equal_logits_is_ln_k() {
        // Uniform softmax over 10 classes: ℓ = ln 10.
        let z = Array2::<f32>::zeros((1, 10));
        let (l, _) = loss_and_dlogits(LossKind::SoftmaxCrossEntropy, z.view(), &[3]);
        assert!((l[0] - 10f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn binary_logistic_matches_closed_form() {
        // ℓ(z=2, y=1) = ln(1 + e^{-2}); ℓ(z=2, y=0) = ln(1 + e^{2}); huge margin: ℓ(−800, 0) = 0.
        let z = array![[2.0f32], [2.0], [-800.0]];
        let (l, g) = loss_and_dlogits(LossKind::BinaryLogistic, z.view(), &[1, 0, 0]);
        assert!((l[0] - (1.0 + (-2f64).exp()).ln()).abs() < 1e-12);
        assert!((l[1] - (1.0 + 2f64.exp()).ln()).abs() < 1e-12);
        assert_eq!(l[2], 0.0);
        // ∂ℓ/∂z at (2, y=1) = −σ(−2).
        assert!((g[[0, 0]] as f64 + 1.0 / (1.0 + 2f64.exp())).abs() < 1e-7);
    }

    #[test]
    fn squared_loss_uses_one_hot_targets() {
        // z = (0.5, 0.5), y = 0: ½((−0.5)² + 0.5²) = 0.25.
        let z = array![[0.5f32, 0.5]];
        let (l, g) = loss_and_dlogits(LossKind::Squared, z.view(), &[0]);
        assert!((l[0] - 0.25).abs() < 1e-12);
        assert_eq!(g, array![[-0.5f32, 0.5]]);
    }
}
