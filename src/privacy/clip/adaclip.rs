//! AdaCliP (Pichapati, Suresh, Yu, Reddi, Kumar, "AdaCliP: Adaptive clipping for private SGD",
//! 2019; method notes in docs/methods/adaclip.md): a coordinate-wise affine transform before clipping, so the
//! noise is shaped like the gradients' spread.
//!
//! Part of the privacy room. With state m (centre) and s (per-coordinate std estimate), one step
//! is, in the central-DP form of docs/methods/adaclip.md §1.5:
//!
//! ```text
//! b    = √(s/γ) · √(Σ_j s_j)                               Thm 1 (Alg. 1 has γ = 1)
//! w_k  = (g_k − m)/b ;  ŵ_k = w_k / max(1, ‖w_k‖)          clip at 1: sensitivity 1 in w-space
//! W    = Σ_k ŵ_k + N(0, σ² I)                              one draw on the sum (Abadi convention)
//! sum  = B·m + b ⊙ W                                        B the expected batch size
//! g̃    = sum / B = m + b ⊙ W / B                           what the optimizer sees
//! v    = clamp(B·(g̃ − m)² − b²σ²/B, h1, h2)                per_example scale (§1.5)
//!      | clamp((g̃ − m)² − b²σ²/B², h1, h2)                 batch_mean scale
//! s²  ← β2 s² + (1 − β2) v ;  m ← β1 m + (1 − β1) g̃        Eqs. (4)-(5), read as in §1.4
//! ```
//!
//! Privacy: b and m are functions of earlier released g̃ only (post-processing), so each step is
//! the Gaussian mechanism on Σ_k ŵ_k with sensitivity 1 and multiplier σ: the event is
//! `Gaussian(σ)`, exactly DP-SGD's (docs/methods/adaclip.md §2; no split of σ). The inverse transform adds
//! B·m with the *expected* B: adding |B_t|·m would move the release by ‖m‖ when one example is
//! added, which no noise covers. The statistics never see per-example gradients (pitfall P3).
//!
//! When every s_i sits at the cap √h2, b_i = √(d·h2/γ) = C for all i and AdaCliP is DP-SGD with
//! flat clip norm C centred at m (pitfall P7; tested). Needs the materialised `[B, P]` per-sample
//! gradients (the transform precedes the norm, P1): refused over the memory limit.
//! Numerics (P6): m, s, b, w and norms are f64.

use ndarray::{Array1, Axis};
use serde::Serialize;

use super::{ClipError, Release, StepContext, StepRelease};
use crate::grad::PerSampleGradients;
use crate::privacy::event::DpEvent;
use crate::privacy::mechanism::{GaussianSource, add_gaussian_noise};

/// `clip.adaclip.initial_std`: s_0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InitialStd {
    /// s_0 = √(h1·h2) (Alg. 1 as printed).
    Paper,
    /// s_0 = √h2 (every coordinate at the cap: the first step is DP-SGD at C = √(d·h2/γ)).
    SqrtH2,
}

/// `clip.adaclip.variance_scale`: which variance v estimates (docs/methods/adaclip.md §1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VarianceScale {
    /// The per-example variance: v = B(g̃ − m)² − b²σ²/B (the paper's B = 1 derivation).
    PerExample,
    /// The variance of the batch mean: v = (g̃ − m)² − b²σ²/B².
    BatchMean,
}

/// `clip.adaclip`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AdaClipParams {
    /// γ > 0, the bound on E‖w‖² (paper: 1).
    pub gamma: f64,
    /// β1 in [0, 1) of the centre's EMA (paper: 0.99).
    pub beta1: f64,
    /// β2 in [0, 1) of the variance's EMA (paper: 0.9).
    pub beta2: f64,
    /// h1 > 0, the variance floor (paper: 1e-12).
    pub h1: f64,
    /// h2 > h1, the variance cap (paper: tuned, values not reported).
    pub h2: f64,
    pub initial_std: InitialStd,
    pub variance_scale: VarianceScale,
}

/// m_t and s_t, one entry per parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaClipState {
    /// m: the centre a_t.
    pub mean: Array1<f64>,
    /// s: the per-coordinate std estimate (s_i in [√h1, √h2] after the first update).
    pub std: Array1<f64>,
}

impl AdaClipParams {
    /// m_0 = 0, s_0 per `initial_std`.
    pub fn init_state(&self, num_params: usize) -> AdaClipState {
        let s0 = match self.initial_std {
            InitialStd::Paper => (self.h1 * self.h2).sqrt(),
            InitialStd::SqrtH2 => self.h2.sqrt(),
        };
        AdaClipState {
            mean: Array1::zeros(num_params),
            std: Array1::from_elem(num_params, s0),
        }
    }

    /// b = √(s/γ)·√(Σ s) (Thm 1).
    pub fn scales(&self, std: &Array1<f64>) -> Array1<f64> {
        let total: f64 = std.sum();
        std.mapv(|s| (s / self.gamma).sqrt() * total.sqrt())
    }

    /// One step: transform, clip, noise, inverse transform; then update `state` from the release.
    pub fn step<R: GaussianSource + ?Sized>(
        &self,
        state: &mut AdaClipState,
        grads: &dyn PerSampleGradients,
        ctx: &StepContext,
        rng: &mut R,
    ) -> Result<StepRelease, ClipError> {
        let sigma = ctx.noise_multiplier;
        let big_b = ctx.expected_batch_size;
        let p = state.mean.len();
        let b = self.scales(&state.std);
        let matrix = grads.materialize()?;
        let mut w_sum = Array1::<f64>::zeros(p);
        let mut w = vec![0.0f64; p];
        let mut clipped = 0;
        for (index, row) in matrix.axis_iter(Axis(0)).enumerate() {
            let mut sq = 0.0;
            for j in 0..p {
                let x = (row[j] as f64 - state.mean[j]) / b[j];
                w[j] = x;
                sq += x * x;
            }
            let norm = sq.sqrt();
            if !norm.is_finite() {
                return Err(ClipError::NonFiniteNorm { index, norm });
            }
            let scale = if norm > 1.0 {
                clipped += 1;
                1.0 / norm
            } else {
                1.0
            };
            for j in 0..p {
                w_sum[j] += scale * w[j];
            }
        }
        add_gaussian_noise(w_sum.view_mut(), sigma, 1.0, rng)?;
        let mut sum = Array1::<f64>::zeros(p);
        for j in 0..p {
            sum[j] = big_b * state.mean[j] + b[j] * w_sum[j];
        }
        // Statistics from the released g̃ = sum / B only.
        for j in 0..p {
            let g = sum[j] / big_b;
            let dev = g - state.mean[j];
            let noise_var = b[j] * b[j] * sigma * sigma;
            let v = match self.variance_scale {
                VarianceScale::PerExample => big_b * dev * dev - noise_var / big_b,
                VarianceScale::BatchMean => dev * dev - noise_var / (big_b * big_b),
            };
            let v = if v.is_nan() {
                self.h2
            } else {
                v.clamp(self.h1, self.h2)
            };
            let s2 = self.beta2 * state.std[j] * state.std[j] + (1.0 - self.beta2) * v;
            state.std[j] = s2.sqrt();
            state.mean[j] = self.beta1 * state.mean[j] + (1.0 - self.beta1) * g;
        }
        let rms_b = (b.iter().map(|x| x * x).sum::<f64>() / p.max(1) as f64).sqrt();
        Ok(StepRelease {
            release: Release {
                sum,
                events: vec![DpEvent::gaussian(sigma)],
            },
            clip_norm: Some(rms_b),
            noise_std: sigma * rms_b,
            clipped_fraction_private: None,
            clipped_count_nonprivate: clipped,
            batch_size_nonprivate: matrix.nrows(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grad::GradError;
    use crate::privacy::clip::explicit::ExplicitGradients;
    use crate::privacy::clip::flat::privatize_flat;
    use ndarray::{Array2, array};
    use rand::SeedableRng;

    fn params(h2: f64, gamma: f64) -> AdaClipParams {
        AdaClipParams {
            gamma,
            beta1: 0.99,
            beta2: 0.9,
            h1: 1e-12,
            h2,
            initial_std: InitialStd::SqrtH2,
            variance_scale: VarianceScale::PerExample,
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
    fn at_the_cap_adaclip_is_dp_sgd_with_c_sqrt_d_h2_over_gamma() {
        // docs/methods/adaclip.md P7: every s_i = √h2 ⇒ b_i = √(d·h2/γ) = C, m = 0 ⇒ the release is
        // Σ clip_C(g_k) + N(0, σ²C²) with the same noise draws.
        let d = 6;
        let (h2, gamma, sigma) = (0.5, 2.0, 1.3);
        let c = (d as f64 * h2 / gamma).sqrt();
        let g = ExplicitGradients::new(Array2::from_shape_fn((5, d), |(i, j)| {
            ((i * 7 + j * 3) % 11) as f32 - 5.0 + 0.25 * i as f32
        }));
        let p = params(h2, gamma);
        let mut state = p.init_state(d);
        let b = p.scales(&state.std);
        assert!(b.iter().all(|x| (x - c).abs() < 1e-12 * c));
        let mut rng_a = rand_chacha::ChaCha12Rng::seed_from_u64(42);
        let ada = p
            .step(&mut state, &g, &ctx(sigma, 5.0), &mut rng_a)
            .unwrap();
        let mut rng_f = rand_chacha::ChaCha12Rng::seed_from_u64(42);
        let flat = privatize_flat(&g, c, sigma, &mut rng_f).unwrap();
        assert_eq!(ada.release.events, flat.events);
        for (a, f) in ada.release.sum.iter().zip(&flat.sum) {
            assert!((a - f).abs() < 1e-9 * (1.0 + f.abs()), "{a} vs {f}");
        }
        assert!((ada.clip_norm.unwrap() - c).abs() < 1e-12);
    }

    #[test]
    fn a_worst_case_example_moves_the_w_sum_by_at_most_one() {
        // In g-space the release is B·m + b ⊙ W; the sensitivity lives in W-space: ‖ΔW‖ ≤ 1.
        // Recover W = (sum − B·m)/b from noiseless steps on the same state.
        let p = AdaClipParams {
            initial_std: InitialStd::Paper,
            ..params(1e-2, 1.0)
        };
        let mut template = p.init_state(3);
        template.mean = array![0.5, -1.0, 0.0];
        template.std = array![1e-6, 0.1, 0.05];
        let base = array![[0.1f32, -0.2, 0.3], [3.0, 4.0, 0.0]];
        let b = p.scales(&template.std);
        for outlier in [
            [1e6f32, -1e6, 1e6],
            [0.5, -1.0, 0.0],
            [0.5001, -1.0, 0.0],
            [0.0, 0.0, 1e-3],
        ] {
            let mut with = base.clone();
            with.push_row(ndarray::ArrayView1::from(&outlier)).unwrap();
            let w_of = |m: Array2<f32>| {
                let mut st = template.clone();
                let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
                let s = p
                    .step(
                        &mut st,
                        &ExplicitGradients::new(m),
                        &ctx(0.0, 2.0),
                        &mut rng,
                    )
                    .unwrap();
                (&s.release.sum - &(&template.mean * 2.0)) / &b
            };
            let dw = &w_of(with) - &w_of(base.clone());
            let moved = dw.iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!(moved <= 1.0 + 1e-9, "{outlier:?}: {moved}");
        }
    }

    #[test]
    fn statistics_follow_eqs_4_and_5_from_the_release() {
        // One coordinate, σ = 0, B = 2, m = 0, s = √h2 = 1 (γ = 1, d = 1: b = 1). Gradients 0.2
        // and 0.4: w = g, unclipped, W = 0.6, sum = 0.6, g̃ = 0.3.
        // per_example: v = clamp(2·0.09, h1, h2 = 1) = 0.18; s² = 0.9·1 + 0.1·0.18 = 0.918;
        // m = 0.01·0.3 = 0.003.
        let p = AdaClipParams {
            h2: 1.0,
            ..params(1.0, 1.0)
        };
        let mut st = p.init_state(1);
        let g = ExplicitGradients::new(array![[0.2f32], [0.4]]);
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
        let s = p.step(&mut st, &g, &ctx(0.0, 2.0), &mut rng).unwrap();
        assert!((s.release.sum[0] - 0.6).abs() < 1e-7);
        assert!(
            (st.std[0] * st.std[0] - 0.918).abs() < 1e-7,
            "{}",
            st.std[0]
        );
        assert!((st.mean[0] - 0.003).abs() < 1e-9);
        assert_eq!(s.clipped_count_nonprivate, 0);
    }

    #[test]
    fn refuses_over_the_memory_limit() {
        let mut g = ExplicitGradients::new(Array2::zeros((4, 10)));
        g.limit_bytes = 100;
        let p = params(1.0, 1.0);
        let mut st = p.init_state(10);
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
        assert!(matches!(
            p.step(&mut st, &g, &ctx(1.0, 4.0), &mut rng),
            Err(ClipError::Grad(GradError::MemoryLimit { .. }))
        ));
    }
}
