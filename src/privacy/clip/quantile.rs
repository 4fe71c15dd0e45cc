//! Adaptive quantile clipping (Andrew, Thakkar, McMahan, Ramaswamy, "Differentially private
//! learning with adaptive clipping", NeurIPS 2021, Alg. 1 with the geometric update, in the
//! centralised setting DC-SGD runs it in, docs/methods/dc_sgd.md §1.6).
//!
//! Part of the privacy room. At step t, with clip norm C_t:
//!
//! ```text
//! sum   = Σ_i min(1, C_t/‖g_i‖) g_i + N(0, (σ_Δ·C_t)² I)            L2 sensitivity C_t
//! count = Σ_i (b_i − ½) + N(0, σ_b²),  b_i = 1[‖g_i‖ ≤ C_t]          L2 sensitivity ½
//! b̄     = count / B + ½                                              B the expected batch size
//! C_{t+1} = C_t · exp(−η_C (b̄ − γ))                                  geometric update, target γ
//! ```
//!
//! The centred bit b_i − ½ has sensitivity ½ under add/remove-one, so the count is a Gaussian
//! mechanism of multiplier 2σ_b (the event `Gaussian(2σ_b)`). Theorem 1 of Andrew et al.: the two
//! releases together cost one Gaussian of multiplier σ when
//! σ_Δ = (σ^−2 − (2σ_b)^−2)^(−1/2) (docs/methods/dc_sgd.md pitfall 8: the factor 2 is the bit's ½). Dividing by
//! the expected B (not the realised batch size, which is private under Poisson sampling) follows
//! TF-Privacy's `QuantileAdaptiveClipSumQuery`. The update uses only the noisy count, so it is
//! post-processing; C_{t+1} applies from the next step.

use ndarray::Array1;
use serde::Serialize;

use super::flat::flat_clip_weights;
use super::{ClipError, Release, StepContext, StepRelease, split_noise_multiplier};
use crate::grad::PerSampleGradients;
use crate::privacy::event::DpEvent;
use crate::privacy::mechanism::{GaussianSource, add_gaussian_noise};

/// `clip.quantile`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QuantileParams {
    /// C_0.
    pub initial_clip_norm: f64,
    /// γ in (0, 1): the target fraction of examples left unclipped.
    pub target_quantile: f64,
    /// η_C > 0 of the geometric update.
    pub learning_rate: f64,
    /// σ_b: std of the noise on the count (Andrew et al.: B/20 by default).
    pub count_noise_std: f64,
}

impl QuantileParams {
    /// The count's noise multiplier 2σ_b (its sensitivity is ½).
    pub fn count_noise_multiplier(&self) -> f64 {
        2.0 * self.count_noise_std
    }

    /// C_{t+1} = C_t·exp(−η_C(b̄ − γ)), kept a finite positive number.
    pub fn update(&self, clip_norm: f64, unclipped_fraction: f64) -> f64 {
        let next =
            clip_norm * (-self.learning_rate * (unclipped_fraction - self.target_quantile)).exp();
        next.clamp(f64::MIN_POSITIVE, f64::MAX)
    }

    /// One step at `*clip_norm` = C_t; leaves C_{t+1} in `clip_norm`.
    pub fn step<R: GaussianSource + ?Sized>(
        &self,
        clip_norm: &mut f64,
        grads: &dyn PerSampleGradients,
        ctx: &StepContext,
        rng: &mut R,
    ) -> Result<StepRelease, ClipError> {
        let c = *clip_norm;
        let sigma = ctx.noise_multiplier;
        let count_multiplier = if sigma == 0.0 {
            0.0
        } else {
            self.count_noise_multiplier()
        };
        let grad_sigma =
            split_noise_multiplier(sigma, self.count_noise_multiplier(), "noisy count")?;
        let norms = grads.norms();
        let weights = flat_clip_weights(&norms, c)?;
        let unclipped = norms.iter().filter(|&&n| n <= c).count();
        let clipped = norms.len() - unclipped;
        let mut sum = grads.weighted_sum(&weights);
        let noise_std = add_gaussian_noise(sum.view_mut(), grad_sigma, c, rng)?;
        // Σ_i (b_i − ½), sensitivity ½.
        let mut count = Array1::from_elem(1, unclipped as f64 - 0.5 * norms.len() as f64);
        add_gaussian_noise(count.view_mut(), count_multiplier, 0.5, rng)?;
        let unclipped_fraction = count[0] / ctx.expected_batch_size + 0.5;
        *clip_norm = self.update(c, unclipped_fraction);
        Ok(StepRelease {
            release: Release {
                sum,
                events: vec![
                    DpEvent::gaussian(grad_sigma),
                    DpEvent::gaussian(self.count_noise_multiplier()),
                ],
            },
            clip_norm: Some(c),
            noise_std,
            clipped_fraction_private: Some(1.0 - unclipped_fraction),
            clipped_count_nonprivate: clipped,
            batch_size_nonprivate: norms.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::clip::explicit::ExplicitGradients;
    use ndarray::{Array2, array};
    use rand::SeedableRng;

    fn params() -> QuantileParams {
        QuantileParams {
            initial_clip_norm: 1.0,
            target_quantile: 0.5,
            learning_rate: 0.2,
            count_noise_std: 1.0,
        }
    }

    fn ctx(sigma: f64, b: f64) -> StepContext {
        StepContext {
            step: 0,
            noise_multiplier: sigma,
            expected_batch_size: b,
        }
    }

    #[test]
    fn geometric_update_toward_the_target_quantile() {
        // Norms 0.5, 2, 3, 4 at C = 1: one unclipped, b̄ = 1/4 (noise off, B = 4), so
        // C_1 = exp(−0.2·(0.25 − 0.5)) = exp(0.05).
        let g = ExplicitGradients::new(array![[0.5f32], [2.0], [3.0], [4.0]]);
        let mut c = 1.0;
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
        let s = params().step(&mut c, &g, &ctx(0.0, 4.0), &mut rng).unwrap();
        assert!((c - 0.05f64.exp()).abs() < 1e-15);
        assert_eq!(s.clip_norm, Some(1.0));
        assert_eq!(s.clipped_count_nonprivate, 3);
        assert!((s.clipped_fraction_private.unwrap() - 0.75).abs() < 1e-15);
    }

    #[test]
    fn a_worst_case_example_moves_the_sum_by_c_and_the_count_by_half() {
        let base = array![[0.1f32, -0.2], [3.0, 4.0], [0.0, 0.0]];
        let p = params();
        for outlier in [
            [1e6f32, -1e6],
            [0.1, 0.0],
            [0.0, 0.0],
            [f32::MAX / 2.0, 0.0],
        ] {
            let mut with = base.clone();
            with.push_row(ndarray::ArrayView1::from(&outlier)).unwrap();
            let run = |m: Array2<f32>| {
                let mut c = 0.7;
                let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
                let s = p
                    .step(&mut c, &ExplicitGradients::new(m), &ctx(0.0, 3.0), &mut rng)
                    .unwrap();
                // The count itself, recovered from the noiseless b̄: (b̄ − ½)·B.
                let count = (1.0 - s.clipped_fraction_private.unwrap() - 0.5) * 3.0;
                (s.release.sum, count)
            };
            let (a, ca) = run(with);
            let (b, cb) = run(base.clone());
            let moved = (&a - &b).iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!(moved <= 0.7 * (1.0 + 1e-12), "{outlier:?}: {moved}");
            assert!(((ca - cb).abs() - 0.5).abs() < 1e-12, "{ca} {cb}");
        }
    }

    #[test]
    fn releases_two_gaussians_that_recombine_to_sigma() {
        let g = ExplicitGradients::new(Array2::zeros((2, 3)));
        let mut c = 1.0;
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
        let s = params().step(&mut c, &g, &ctx(1.2, 2.0), &mut rng).unwrap();
        match s.release.events.as_slice() {
            [
                DpEvent::Gaussian {
                    noise_multiplier: a,
                },
                DpEvent::Gaussian {
                    noise_multiplier: b,
                },
            ] => {
                assert_eq!(*b, 2.0);
                let total = (a.powi(-2) + b.powi(-2)).powf(-0.5);
                assert!((total - 1.2).abs() < 1e-12);
            }
            other => panic!("{other:?}"),
        }
    }
}
