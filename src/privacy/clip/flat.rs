//! Flat clipping (Abadi et al. 2016, "Deep learning with differential privacy", Alg. 1): scale
//! each example's whole gradient to L2 norm at most C, sum, add Gaussian noise of std σ·C.
//!
//! Part of the privacy room; sees per-sample gradients only through
//! [`crate::grad::PerSampleGradients`]. The clipped sum is Σ_i w_i g_i with
//! w_i = min(1, C / ‖g_i‖), formed by `weighted_sum` (no `[B, P]` matrix). Adding or removing
//! one example changes the sum by w_i g_i, of norm ≤ C: the L2 sensitivity is C under
//! add/remove-one (2C under replace-one, which the accountant's neighbouring relation accounts
//! for; the event's `noise_multiplier` is always relative to C).

use ndarray::Array1;

use super::{ClipError, Release, StepRelease};
use crate::grad::PerSampleGradients;
use crate::privacy::event::DpEvent;
use crate::privacy::mechanism::{GaussianSource, add_gaussian_noise};

/// Clipping weights w_i = min(1, C / ‖g_i‖) (1 for a zero gradient). A non-finite norm is an
/// error: its example cannot be scaled to norm C.
pub fn flat_clip_weights(norms: &Array1<f64>, clip_norm: f64) -> Result<Array1<f64>, ClipError> {
    if !(clip_norm.is_finite() && clip_norm > 0.0) {
        return Err(ClipError::InvalidClipNorm { clip_norm });
    }
    norms
        .iter()
        .enumerate()
        .map(|(index, &norm)| {
            if !norm.is_finite() {
                Err(ClipError::NonFiniteNorm { index, norm })
            } else if norm > clip_norm {
                Ok(clip_norm / norm)
            } else {
                Ok(1.0)
            }
        })
        .collect()
}

/// The clipped, un-noised sum Σ_i min(1, C/‖g_i‖) g_i.
pub fn clipped_sum(
    grads: &dyn PerSampleGradients,
    clip_norm: f64,
) -> Result<Array1<f64>, ClipError> {
    let weights = flat_clip_weights(&grads.norms(), clip_norm)?;
    Ok(grads.weighted_sum(&weights))
}

/// One private release of DP-SGD with flat clipping: the clipped sum plus N(0, (σ·C)² I), and the
/// event `Gaussian { noise_multiplier: σ }` (the caller wraps it in its sampling event).
pub fn privatize_flat<R: GaussianSource + ?Sized>(
    grads: &dyn PerSampleGradients,
    clip_norm: f64,
    noise_multiplier: f64,
    rng: &mut R,
) -> Result<Release, ClipError> {
    let mut sum = clipped_sum(grads, clip_norm)?;
    add_gaussian_noise(sum.view_mut(), noise_multiplier, clip_norm, rng)?;
    Ok(Release {
        sum,
        events: vec![DpEvent::gaussian(noise_multiplier)],
    })
}

/// One step of flat clipping at `clip_norm` (also `decay`'s, at C_t) for [`super::ClipPolicy`]:
/// the release of [`privatize_flat`] plus what the step used.
pub fn step_flat<R: GaussianSource + ?Sized>(
    grads: &dyn PerSampleGradients,
    clip_norm: f64,
    noise_multiplier: f64,
    rng: &mut R,
) -> Result<StepRelease, ClipError> {
    let norms = grads.norms();
    let weights = flat_clip_weights(&norms, clip_norm)?;
    let clipped = norms.iter().filter(|&&n| n > clip_norm).count();
    let sum = grads.weighted_sum(&weights);
    StepRelease::gaussian_sum(sum, noise_multiplier, clip_norm, clipped, norms.len(), rng)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grad::GradError;
    use ndarray::{Array2, array};
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;
    use std::ops::Range;

    /// Per-sample gradients given as an explicit matrix (the test's own oracle).
    struct Explicit(Array2<f32>);

    impl PerSampleGradients for Explicit {
        fn batch_size(&self) -> usize {
            self.0.nrows()
        }
        fn num_params(&self) -> usize {
            self.0.ncols()
        }
        fn groups(&self) -> Vec<(String, Range<usize>)> {
            vec![("all".into(), 0..self.0.ncols())]
        }
        fn norms(&self) -> Array1<f64> {
            self.0
                .rows()
                .into_iter()
                .map(|r| r.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt())
                .collect()
        }
        fn group_norms(&self) -> Array2<f64> {
            self.norms().insert_axis(ndarray::Axis(1))
        }
        fn weighted_sum(&self, w: &Array1<f64>) -> Array1<f64> {
            let mut out = Array1::<f64>::zeros(self.0.ncols());
            for (r, &wi) in self.0.rows().into_iter().zip(w) {
                out.zip_mut_with(&r, |o, &v| *o += wi * v as f64);
            }
            out
        }
        fn group_weighted_sum(&self, w: &Array2<f64>) -> Array1<f64> {
            self.weighted_sum(&w.column(0).to_owned())
        }
        fn materialize(&self) -> Result<Array2<f32>, GradError> {
            Ok(self.0.clone())
        }
    }

    #[test]
    fn weights_clip_only_large_gradients() {
        let w = flat_clip_weights(&array![0.0, 0.5, 1.0, 4.0], 1.0).unwrap();
        assert_eq!(w, array![1.0, 1.0, 1.0, 0.25]);
        assert!(matches!(
            flat_clip_weights(&array![1.0, f64::NAN], 1.0),
            Err(ClipError::NonFiniteNorm { index: 1, .. })
        ));
        assert!(matches!(
            flat_clip_weights(&array![1.0], 0.0),
            Err(ClipError::InvalidClipNorm { .. })
        ));
    }

    #[test]
    fn a_worst_case_example_moves_the_clipped_sum_by_at_most_c() {
        // Sensitivity (Abadi et al. 2016, §3.1): removing any one example, however large its
        // gradient, changes Σ_i min(1, C/‖g_i‖) g_i by at most C in L2.
        let c = 0.7;
        let base = array![[0.1f32, -0.2, 0.3], [3.0, 4.0, 0.0], [0.0, 0.0, 0.0]];
        for outlier in [
            [1e6f32, -1e6, 1e6],
            [0.3, 0.0, 0.0],
            [-5.0, 2.0, 1e-3],
            [f32::MAX / 4.0, 0.0, 0.0],
        ] {
            let mut with = base.clone();
            with.push_row(ndarray::ArrayView1::from(&outlier)).unwrap();
            let a = clipped_sum(&Explicit(with), c).unwrap();
            let b = clipped_sum(&Explicit(base.clone()), c).unwrap();
            let moved = (&a - &b).iter().map(|v| v * v).sum::<f64>().sqrt();
            assert!(
                moved <= c * (1.0 + 1e-12),
                "outlier {outlier:?} moved the sum by {moved} > {c}"
            );
        }
    }

    #[test]
    fn release_adds_noise_of_std_sigma_c_and_records_the_gaussian_event() {
        let grads = Explicit(Array2::zeros((2, 100_000)));
        let mut rng = ChaCha12Rng::seed_from_u64(9);
        let release = privatize_flat(&grads, 2.0, 1.5, &mut rng).unwrap();
        assert_eq!(
            release.events,
            vec![DpEvent::Gaussian {
                noise_multiplier: 1.5
            }]
        );
        // Sum of zero gradients is zero, so the release is pure noise of std σ·C = 3; the sample
        // std over 1e5 draws has standard error 3/√(2e5) ≈ 0.0067: ±0.04 is 6 standard errors.
        let n = release.sum.len() as f64;
        let std = (release.sum.iter().map(|v| v * v).sum::<f64>() / n).sqrt();
        assert!((std - 3.0).abs() < 0.04, "std {std}");
    }
}
