//! Automatic clipping, AUTO-S (Bu, Wang, Zha, Karypis, "Automatic clipping: differentially
//! private deep learning made easier and stronger", NeurIPS 2023, Eq. (4.1) with stability
//! constant γ): every per-sample gradient is normalised, g_i ← g_i/(‖g_i‖ + γ).
//!
//! Part of the privacy room. ‖g_i/(‖g_i‖ + γ)‖ = ‖g_i‖/(‖g_i‖ + γ) < 1 for γ > 0, so the L2
//! sensitivity of the sum is 1 and the noise is N(0, σ² I): the event is `Gaussian(σ)` with
//! sensitivity 1. There is no clip norm to tune; the learning rate absorbs the scale.

use ndarray::Array1;

use super::{ClipError, StepRelease};
use crate::grad::PerSampleGradients;
use crate::privacy::mechanism::GaussianSource;

/// Weights w_i = 1/(‖g_i‖ + γ).
pub fn automatic_weights(norms: &Array1<f64>, gamma: f64) -> Result<Array1<f64>, ClipError> {
    norms
        .iter()
        .enumerate()
        .map(|(index, &norm)| {
            if norm.is_finite() {
                Ok(1.0 / (norm + gamma))
            } else {
                Err(ClipError::NonFiniteNorm { index, norm })
            }
        })
        .collect()
}

/// One step: Σ_i g_i/(‖g_i‖ + γ) + N(0, σ² I), event `Gaussian(σ)`. The diagnostic counts the
/// examples scaled down (w_i < 1, i.e. ‖g_i‖ > 1 − γ).
pub fn step_automatic<R: GaussianSource + ?Sized>(
    grads: &dyn PerSampleGradients,
    gamma: f64,
    noise_multiplier: f64,
    rng: &mut R,
) -> Result<StepRelease, ClipError> {
    let norms = grads.norms();
    let weights = automatic_weights(&norms, gamma)?;
    let clipped = weights.iter().filter(|&&w| w < 1.0).count();
    let sum = grads.weighted_sum(&weights);
    StepRelease::gaussian_sum(sum, noise_multiplier, 1.0, clipped, norms.len(), rng)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::clip::explicit::ExplicitGradients;
    use ndarray::array;
    use rand::SeedableRng;

    #[test]
    fn a_worst_case_example_moves_the_sum_by_at_most_one() {
        let base = array![[0.1f32, -0.2], [3.0, 4.0]];
        for outlier in [
            [1e30f32, -1e30],
            [0.0, 0.0],
            [1e-3, 0.0],
            [f32::MAX / 2.0, 1.0],
        ] {
            let mut with = base.clone();
            with.push_row(ndarray::ArrayView1::from(&outlier)).unwrap();
            let run = |m| {
                let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
                step_automatic(&ExplicitGradients::new(m), 0.01, 0.0, &mut rng)
                    .unwrap()
                    .release
                    .sum
            };
            let d = &run(with) - &run(base.clone());
            let moved = d.iter().map(|x| x * x).sum::<f64>().sqrt();
            // < 1 exactly; 1e-12 allows the sum's rounding.
            assert!(moved <= 1.0 + 1e-12, "{outlier:?}: {moved}");
        }
    }

    #[test]
    fn normalises_by_norm_plus_gamma() {
        let g = ExplicitGradients::new(array![[3.0f32, 4.0]]);
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
        let s = step_automatic(&g, 0.5, 0.0, &mut rng).unwrap();
        assert!((s.release.sum[0] - 3.0 / 5.5).abs() < 1e-12);
        assert!((s.release.sum[1] - 4.0 / 5.5).abs() < 1e-12);
        assert_eq!(s.clip_norm, Some(1.0));
    }
}
