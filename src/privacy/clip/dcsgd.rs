//! DC-SGD: dynamic clipping from a DP histogram of the per-sample gradient norms (Wei, Li, Chen,
//! Chen, "DC-SGD: Differentially private SGD with dynamic clipping through gradient norm
//! distribution estimation", arXiv 2503.22988; method notes in docs/methods/dc_sgd.md).
//!
//! Part of the privacy room. At step t, with clip norm C_t and histogram range R_t:
//!
//! ```text
//! sum  = Σ_i min(1, C_t/‖g_i‖) g_i + N(0, (σ_T·C_t)² I)          sensitivity C_t       (Eq. 1-2)
//! H[k] = #{i : min(b−1, ⌊b‖g_i‖/R_t⌋) = k} + N(0, σ_H²)         sensitivity 1, b bins (Alg. 2)
//! C_{t+1}, R_{t+1} = Adaptive_P or Adaptive_E (H̃, C_t, R_t)      post-processing        (Alg. 3, 4)
//! ```
//!
//! Norms are the unclipped norms at θ_t; overflow goes to the last bin (the paper's `max` is a
//! typo for `min`, docs/methods/dc_sgd.md pitfall 1); bin k is represented by its midpoint m_k = (k + ½)R_t/b.
//! Adding or removing one example changes one count by one, so the histogram is a Gaussian
//! mechanism of multiplier σ_H (noise in count units, not σ_H·C: pitfall 3). Theorem 2: the two
//! releases cost one Gaussian of multiplier σ when σ_T = (σ^−2 − σ_H^−2)^(−1/2); σ_H ≤ σ is
//! refused. The new C applies from the next step; the current batch is never re-clipped
//! (pitfall 2).
//!
//! - **P** (percentile, Alg. 3): C_{t+1} is the midpoint of the first bin where the cumulative
//!   noisy count reaches p·S' (S' = Σ_k H̃\[k\]; p the fraction left unclipped), R_{t+1} = 2C_{t+1}.
//! - **E** (expected error, Eq. 4, Alg. 4): C_{t+1} minimises
//!   Ê(C) = σ_T² C² d / B² + (1/S') Σ_k H̃\[k\] max(m_k − C, 0)² over {0.1c, …, 2.0c}, re-centring c
//!   while the minimum is on the boundary (at most [`MAX_RECENTRE`] times: noisy counts can keep
//!   it moving, pitfall 6); R doubles when H̃\[b−1\] ≥ S'/2, halves when Σ_{k ≥ b/2} H̃\[k\] ≤ S'/b.
//!   d is the number of trainable parameters, B the expected batch size (pitfall 4).
//! - S' ≤ 0 (noise can make it so) keeps C_t and R_t (pitfall 6).

use ndarray::Array1;
use serde::Serialize;

use super::flat::flat_clip_weights;
use super::{ClipError, Release, StepContext, StepRelease, split_noise_multiplier};
use crate::grad::PerSampleGradients;
use crate::privacy::event::DpEvent;
use crate::privacy::mechanism::{GaussianSource, add_gaussian_noise};

/// Cap on E's re-centring loop.
pub const MAX_RECENTRE: usize = 20;

/// How the next threshold is chosen from the histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum DcsgdRule {
    /// DC-SGD-P: the `percentile` p (fraction left unclipped) of the noisy histogram.
    Percentile { percentile: f64 },
    /// DC-SGD-E: the minimiser of the estimated expected squared error.
    ExpectedError,
}

impl DcsgdRule {
    /// `dcsgd_p` or `dcsgd_e`.
    pub fn name(&self) -> &'static str {
        match self {
            DcsgdRule::Percentile { .. } => "dcsgd_p",
            DcsgdRule::ExpectedError => "dcsgd_e",
        }
    }
}

/// `clip.dcsgd_p` / `clip.dcsgd_e`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DcsgdParams {
    pub rule: DcsgdRule,
    /// C_0.
    pub initial_clip_norm: f64,
    /// R_0 (paper: 1 for P, b for E).
    pub initial_range: f64,
    /// b, the number of bins (paper: 20).
    pub bins: usize,
    /// σ_H (paper: 5).
    pub histogram_noise_multiplier: f64,
}

/// C_t and R_t.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DcsgdState {
    pub clip_norm: f64,
    pub range: f64,
}

/// The bin of a norm: min(b − 1, ⌊b·G/R⌋) (Alg. 2 with the typo fixed).
pub fn bin_of(norm: f64, range: f64, bins: usize) -> usize {
    let x = (bins as f64 * norm / range).floor();
    if x >= (bins - 1) as f64 {
        bins - 1
    } else if x > 0.0 {
        x as usize
    } else {
        0
    }
}

/// The exact (noise-free) histogram H of `norms` over [0, R) in `bins` bins, overflow in the last.
pub fn histogram_counts(
    norms: &Array1<f64>,
    range: f64,
    bins: usize,
) -> Result<Array1<f64>, ClipError> {
    let mut h = Array1::<f64>::zeros(bins);
    for (index, &norm) in norms.iter().enumerate() {
        if !norm.is_finite() {
            return Err(ClipError::NonFiniteNorm { index, norm });
        }
        h[bin_of(norm, range, bins)] += 1.0;
    }
    Ok(h)
}

/// m_k = (k + ½)·R/b.
pub fn midpoint(k: usize, range: f64, bins: usize) -> f64 {
    (k as f64 + 0.5) * range / bins as f64
}

/// Alg. 3: the midpoint of the first bin at which the cumulative count reaches p·S' (the last
/// bin's midpoint if it never does).
pub fn percentile_threshold(h: &Array1<f64>, range: f64, percentile: f64) -> f64 {
    let bins = h.len();
    let total: f64 = h.sum();
    let mut cumulative = 0.0;
    let mut c = midpoint(bins - 1, range, bins);
    for (k, &count) in h.iter().enumerate() {
        cumulative += count;
        c = midpoint(k, range, bins);
        if cumulative >= percentile * total {
            break;
        }
    }
    c
}

/// Ê(C) = σ_T² C² d / B² + (1/S') Σ_k H̃\[k\]·max(m_k − C, 0)² (Eq. 4).
pub fn estimated_error(
    h: &Array1<f64>,
    range: f64,
    clip_norm: f64,
    grad_noise_multiplier: f64,
    num_params: usize,
    expected_batch_size: f64,
) -> f64 {
    let bins = h.len();
    let total: f64 = h.sum();
    let variance = (grad_noise_multiplier * clip_norm).powi(2) * num_params as f64
        / (expected_batch_size * expected_batch_size);
    let bias: f64 = h
        .iter()
        .enumerate()
        .map(|(k, &count)| count * (midpoint(k, range, bins) - clip_norm).max(0.0).powi(2))
        .sum::<f64>()
        / total;
    variance + bias
}

/// Alg. 4's threshold: argmin of Ê over {0.1c, …, 2.0c}, re-centred while on the boundary (at
/// most [`MAX_RECENTRE`] times). Keeps `clip_norm` when S' ≤ 0.
pub fn expected_error_threshold(
    h: &Array1<f64>,
    range: f64,
    clip_norm: f64,
    grad_noise_multiplier: f64,
    num_params: usize,
    expected_batch_size: f64,
) -> f64 {
    if h.sum() <= 0.0 {
        return clip_norm;
    }
    let mut c = clip_norm;
    let mut best = c;
    for _ in 0..=MAX_RECENTRE {
        let mut best_i = 0;
        let mut best_e = f64::INFINITY;
        for i in 1..=20 {
            let cand = i as f64 * c / 10.0;
            let e = estimated_error(
                h,
                range,
                cand,
                grad_noise_multiplier,
                num_params,
                expected_batch_size,
            );
            if e < best_e {
                best_e = e;
                best_i = i;
            }
        }
        if best_i == 0 {
            // Every Ê was NaN (cannot happen with S' > 0 and finite counts): keep C_t.
            return clip_norm;
        }
        best = best_i as f64 * c / 10.0;
        if best_i == 1 || best_i == 20 {
            c = best;
            continue;
        }
        break;
    }
    best
}

/// Alg. 4's cautious range update: ×2 when the last bin holds half the mass, ×½ when the upper
/// half of the bins holds at most S'/b, else unchanged.
pub fn next_range_e(h: &Array1<f64>, range: f64) -> f64 {
    let bins = h.len();
    let total: f64 = h.sum();
    let upper: f64 = h.iter().skip(bins / 2).sum();
    if h[bins - 1] >= 0.5 * total {
        2.0 * range
    } else if upper <= total / bins as f64 {
        0.5 * range
    } else {
        range
    }
}

fn finite_positive(x: f64) -> f64 {
    x.clamp(f64::MIN_POSITIVE, f64::MAX)
}

impl DcsgdParams {
    /// C_0 and R_0.
    pub fn init_state(&self) -> DcsgdState {
        DcsgdState {
            clip_norm: self.initial_clip_norm,
            range: self.initial_range,
        }
    }

    /// The next (C, R) from the noisy histogram `h` of a step at (C_t, R_t) = `state`.
    pub fn next_state(
        &self,
        h: &Array1<f64>,
        state: DcsgdState,
        grad_noise_multiplier: f64,
        num_params: usize,
        expected_batch_size: f64,
    ) -> DcsgdState {
        if h.sum() <= 0.0 {
            return state;
        }
        match self.rule {
            DcsgdRule::Percentile { percentile } => {
                let c = percentile_threshold(h, state.range, percentile);
                DcsgdState {
                    clip_norm: finite_positive(c),
                    range: finite_positive(2.0 * c),
                }
            }
            DcsgdRule::ExpectedError => DcsgdState {
                clip_norm: finite_positive(expected_error_threshold(
                    h,
                    state.range,
                    state.clip_norm,
                    grad_noise_multiplier,
                    num_params,
                    expected_batch_size,
                )),
                range: finite_positive(next_range_e(h, state.range)),
            },
        }
    }

    /// One step at `state` = (C_t, R_t); leaves (C_{t+1}, R_{t+1}) in `state`.
    pub fn step<R: GaussianSource + ?Sized>(
        &self,
        state: &mut DcsgdState,
        grads: &dyn PerSampleGradients,
        ctx: &StepContext,
        rng: &mut R,
    ) -> Result<StepRelease, ClipError> {
        let DcsgdState {
            clip_norm: c,
            range,
        } = *state;
        let sigma = ctx.noise_multiplier;
        let grad_sigma =
            split_noise_multiplier(sigma, self.histogram_noise_multiplier, "histogram of norms")?;
        let norms = grads.norms();
        let weights = flat_clip_weights(&norms, c)?;
        let clipped = norms.iter().filter(|&&n| n > c).count();
        let mut sum = grads.weighted_sum(&weights);
        let noise_std = add_gaussian_noise(sum.view_mut(), grad_sigma, c, rng)?;
        let mut h = histogram_counts(&norms, range, self.bins)?;
        let hist_sigma = if sigma == 0.0 {
            0.0
        } else {
            self.histogram_noise_multiplier
        };
        add_gaussian_noise(h.view_mut(), hist_sigma, 1.0, rng)?;
        let total = h.sum();
        let private_fraction = (total > 0.0).then(|| {
            h.iter()
                .enumerate()
                .filter(|&(k, _)| midpoint(k, range, self.bins) > c)
                .map(|(_, &n)| n)
                .sum::<f64>()
                / total
        });
        *state = self.next_state(
            &h,
            *state,
            grad_sigma,
            grads.num_params(),
            ctx.expected_batch_size,
        );
        Ok(StepRelease {
            release: Release {
                sum,
                events: vec![
                    DpEvent::gaussian(grad_sigma),
                    DpEvent::gaussian(self.histogram_noise_multiplier),
                ],
            },
            clip_norm: Some(c),
            noise_std,
            clipped_fraction_private: private_fraction,
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

    #[test]
    fn histogram_binning_by_hand() {
        // R = 10, b = 5: bins [0,2), [2,4), [4,6), [6,8), [8,∞).
        // 0 -> 0; 1.99 -> 0; 2 -> 1; 5.5 -> 2; 7.999 -> 3; 8 -> 4; 10 -> 4 (overflow); 1e9 -> 4.
        let norms = array![0.0, 1.99, 2.0, 5.5, 7.999, 8.0, 10.0, 1e9];
        let h = histogram_counts(&norms, 10.0, 5).unwrap();
        assert_eq!(h, array![2.0, 1.0, 1.0, 1.0, 3.0]);
        assert_eq!(bin_of(f64::MAX, 1.0, 20), 19);
        assert_eq!(midpoint(0, 10.0, 5), 1.0);
        assert_eq!(midpoint(4, 10.0, 5), 9.0);
        assert!(matches!(
            histogram_counts(&array![f64::NAN], 1.0, 3),
            Err(ClipError::NonFiniteNorm { index: 0, .. })
        ));
    }

    #[test]
    fn percentile_rule_by_hand() {
        // H = [2, 1, 1, 1, 3], S' = 8, R = 10. p = 0.5: cumulative 2, 3, 4 ≥ 4 at k = 2 -> m_2 = 5.
        // p = 0.25: 2 ≥ 2 at k = 0 -> 1. p = 1: reaches 8 at k = 4 -> 9.
        let h = array![2.0, 1.0, 1.0, 1.0, 3.0];
        assert_eq!(percentile_threshold(&h, 10.0, 0.5), 5.0);
        assert_eq!(percentile_threshold(&h, 10.0, 0.25), 1.0);
        assert_eq!(percentile_threshold(&h, 10.0, 1.0), 9.0);
        // The P step sets R = 2C.
        let p = DcsgdParams {
            rule: DcsgdRule::Percentile { percentile: 0.5 },
            initial_clip_norm: 1.0,
            initial_range: 10.0,
            bins: 5,
            histogram_noise_multiplier: 5.0,
        };
        let next = p.next_state(&h, p.init_state(), 1.0, 10, 8.0);
        assert_eq!(
            next,
            DcsgdState {
                clip_norm: 5.0,
                range: 10.0
            }
        );
    }

    #[test]
    fn expected_error_by_hand() {
        // H = [0, 0, 0, 0, 4] (all norms in the last bin, midpoint 9), R = 10, S' = 4.
        // Ê(C) = σ²C²d/B² + (9 − C)² for C ≤ 9; with σ = 1, d = 4, B = 2: Ê = C² + (9 − C)²,
        // minimised at C = 4.5. Ê(4.5) = 20.25 + 20.25.
        let h = array![0.0, 0.0, 0.0, 0.0, 4.0];
        assert!((estimated_error(&h, 10.0, 4.5, 1.0, 4, 2.0) - 40.5).abs() < 1e-12);
        // The grid {0.1c..2c} from c = 3: 0.3, …, 6; 4.5 = 15·0.3 is on it.
        assert!((expected_error_threshold(&h, 10.0, 3.0, 1.0, 4, 2.0) - 4.5).abs() < 1e-12);
        // From c = 0.1 the minimum sits on the upper boundary (0.2) and is re-centred: 0.2, 0.4,
        // 0.8, 1.6, 3.2, then the grid 0.32..6.4 holds 4.48 (14·0.32) and 4.8: Ê is smaller at 4.48.
        let c = expected_error_threshold(&h, 10.0, 0.1, 1.0, 4, 2.0);
        assert!((c - 4.48).abs() < 1e-9, "{c}");
        // The range doubles (last bin ≥ S'/2).
        assert_eq!(next_range_e(&h, 10.0), 20.0);
        // All mass in bin 0 halves it: upper half (bins 2..4) = 0 ≤ S'/b.
        assert_eq!(next_range_e(&array![4.0, 0.0, 0.0, 0.0, 0.0], 10.0), 5.0);
        assert_eq!(next_range_e(&array![1.0, 1.0, 1.0, 1.0, 0.0], 10.0), 10.0);
        // S' ≤ 0 keeps C_t.
        assert_eq!(
            expected_error_threshold(&array![-1.0, 0.5], 1.0, 0.7, 1.0, 4, 2.0),
            0.7
        );
    }

    #[test]
    fn the_papers_synthetic_norms() {
        // docs/methods/dc_sgd.md §4 A (the paper's Figs 2-3): 256 norms from N(100, 20²). P with R = 150,
        // b = 20: C(p = 0.5) ≈ 100 and C(p = 0.9) ≈ 125.6, within the bin half-width R/(2b) =
        // 3.75 plus sampling error. E with σ_T = 1, B = 256, d = 1e5 (variance coefficient
        // 1.526·C²): population argmin C* ≈ 39.6, E's grid resolution 0.1·c, so C in [36, 44].
        use rand_distr::{Distribution, Normal};
        let normal = Normal::new(100.0, 20.0).unwrap();
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(2025);
        let norms: Array1<f64> = (0..256)
            .map(|_| f64::max(normal.sample(&mut rng), 0.0))
            .collect();
        let h = histogram_counts(&norms, 150.0, 20).unwrap();
        let median = percentile_threshold(&h, 150.0, 0.5);
        let p90 = percentile_threshold(&h, 150.0, 0.9);
        assert!((median - 100.0).abs() <= 3.75 + 4.0, "median {median}");
        assert!((p90 - 125.6).abs() <= 3.75 + 6.0, "p90 {p90}");
        let c = expected_error_threshold(&h, 150.0, 1.0, 1.0, 100_000, 256.0);
        assert!((36.0..=44.0).contains(&c), "E chose {c}");
    }

    #[test]
    fn a_worst_case_example_moves_the_sum_by_c_and_the_histogram_by_one() {
        let base = array![[0.1f32, -0.2], [3.0, 4.0], [0.0, 0.0]];
        let p = DcsgdParams {
            rule: DcsgdRule::ExpectedError,
            initial_clip_norm: 0.9,
            initial_range: 2.0,
            bins: 4,
            histogram_noise_multiplier: 5.0,
        };
        for outlier in [
            [1e6f32, -1e6],
            [0.1, 0.0],
            [0.0, 0.0],
            [f32::MAX / 2.0, 0.0],
        ] {
            let mut with = base.clone();
            with.push_row(ndarray::ArrayView1::from(&outlier)).unwrap();
            let run = |m: Array2<f32>| {
                let g = ExplicitGradients::new(m);
                let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
                let ctx = StepContext {
                    step: 0,
                    noise_multiplier: 0.0,
                    expected_batch_size: 3.0,
                };
                let s = p.step(&mut p.init_state(), &g, &ctx, &mut rng).unwrap();
                (s.release.sum, histogram_counts(&g.norms(), 2.0, 4).unwrap())
            };
            let (a, ha) = run(with);
            let (b, hb) = run(base.clone());
            let moved = (&a - &b).iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!(moved <= 0.9 * (1.0 + 1e-12), "{outlier:?}: {moved}");
            let hmoved = (&ha - &hb).iter().map(|x| x * x).sum::<f64>().sqrt();
            assert_eq!(hmoved, 1.0);
        }
    }

    #[test]
    fn a_step_releases_the_split_gradient_and_the_histogram() {
        let p = DcsgdParams {
            rule: DcsgdRule::Percentile { percentile: 0.9 },
            initial_clip_norm: 1.0,
            initial_range: 1.0,
            bins: 20,
            histogram_noise_multiplier: 5.0,
        };
        let g = ExplicitGradients::new(Array2::from_elem((4, 3), 0.1));
        let mut state = p.init_state();
        let ctx = StepContext {
            step: 0,
            noise_multiplier: 1.129,
            expected_batch_size: 4.0,
        };
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
        let s = p.step(&mut state, &g, &ctx, &mut rng).unwrap();
        let grad = split_noise_multiplier(1.129, 5.0, "h").unwrap();
        assert_eq!(
            s.release.events,
            vec![DpEvent::gaussian(grad), DpEvent::gaussian(5.0)]
        );
        assert!((s.noise_std - grad * 1.0).abs() < 1e-15);
        assert!(state.clip_norm > 0.0 && state.range > 0.0);
    }
}
