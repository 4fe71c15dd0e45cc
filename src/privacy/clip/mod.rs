//! Clipping policies: bound each example's contribution, sum, and add noise through
//! [`crate::privacy::mechanism`].
//!
//! Part of the privacy room. A policy sees per-sample gradients only through
//! [`crate::grad::PerSampleGradients`] (never the model) and returns a [`Release`]: the noisy sum
//! and the [`DpEvent`]s it spent. The caller divides the sum by the expected batch size and wraps
//! the events in its sampling event (e.g. `PoissonSampled(q, Gaussian(σ))`).
//!
//! A policy is two values (values in, values out; no hidden state):
//!
//! - [`ClipPolicy`]: its immutable parameters, built once from the plan;
//! - [`ClipState`]: what evolves across steps (the quantile policy's C_t, DC-SGD's C_t and R_t,
//!   AdaCliP's m_t and s_t). It is updated **only** from what the step released (the noisy sum,
//!   the noisy count, the noisy histogram), so the update is post-processing and costs nothing.
//!
//! [`ClipPolicy::privatize`] runs one step: clip with the state's parameters, sum, add the
//! gradient noise, release any statistic the policy needs (each with its own noise and its own
//! event), then update the state for the next step (never re-clipping the current batch).
//! [`ClipPolicy::planned_releases`] gives the same events from σ_t alone, so the plan (and
//! calibration, and `dpx account --config`) sees exactly what a run records.
//!
//! **Noise split.** A policy that releases a statistic beside the gradient spends part of the
//! step's noise multiplier σ_t on it. Two Gaussian releases on the same batch, with multipliers
//! σ_grad and σ_stat, are one Gaussian mechanism on the concatenated vector with
//! σ^−2 = σ_grad^−2 + σ_stat^−2 (DC-SGD Thm 2; Andrew et al. 2021 Thm 1), so the gradient gets
//! σ_grad = (σ^−2 − σ_stat^−2)^(−1/2) ([`split_noise_multiplier`]) and the step costs exactly a
//! Gaussian of multiplier σ. That needs σ_stat > σ: otherwise the statistic alone would spend more
//! than the step's budget, and [`ClipPolicy::check_noise_multiplier`] refuses before training.
//!
//! Policies:
//! - [`flat`]: flat (all-layer) clipping of Abadi et al. 2016.
//! - [`per_layer`]: one clip norm per parameter group, C_k with Σ_k C_k² = C².
//! - [`decay`]: flat clipping with C_t = C_0·ρ^(t/T) (Du et al. 2021).
//! - [`automatic`]: g/(‖g‖ + γ), sensitivity 1 (Bu et al., AUTO-S).
//! - [`quantile`]: adaptive C_t toward a target quantile of the norms (Andrew et al. 2021).
//! - [`adaclip`]: coordinate-wise transform, clip, noise, inverse transform (Pichapati et al. 2019).
//! - [`dcsgd`]: C_t from a DP histogram of the norms (Wei et al. 2025, DC-SGD-P and DC-SGD-E).
//! - [`explicit`]: per-sample gradients given as a matrix (tests and examples).

use ndarray::Array1;
use serde::Serialize;

use super::event::DpEvent;
use super::mechanism::{GaussianSource, MechanismError};
use crate::grad::{GradError, PerSampleGradients};

pub mod adaclip;
pub mod automatic;
pub mod dcsgd;
pub mod decay;
pub mod explicit;
pub mod flat;
pub mod per_layer;
pub mod quantile;

/// What a clipping policy releases in one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    /// The noisy sum of clipped per-sample gradients. Shape `[P]`.
    pub sum: Array1<f64>,
    /// The private releases made, in order, before sampling is accounted for.
    pub events: Vec<DpEvent>,
}

/// Errors of a clipping policy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClipError {
    #[error("clip_norm must be finite and positive, found {clip_norm}")]
    InvalidClipNorm { clip_norm: f64 },
    #[error(
        "the gradient of example {index} in the batch has a non-finite norm ({norm}); the model \
         has diverged (try a smaller learning rate)"
    )]
    NonFiniteNorm { index: usize, norm: f64 },
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
    /// The statistic's own noise multiplier does not exceed the step's: the split is impossible.
    #[error(
        "the {statistic} needs a noise multiplier above the step's noise multiplier {noise_multiplier} \
         (it has {statistic_noise_multiplier}): alone it would spend more than the step's budget"
    )]
    NoiseSplit {
        statistic: &'static str,
        noise_multiplier: f64,
        statistic_noise_multiplier: f64,
    },
    /// Per-sample gradients could not be materialised (AdaCliP).
    #[error(transparent)]
    Grad(#[from] GradError),
    /// The policy's state no longer matches the policy (a caller error).
    #[error("clipping state of the wrong kind for the {policy} policy")]
    StateMismatch { policy: &'static str },
}

/// σ_grad = (σ^−2 − σ_stat^−2)^(−1/2): the gradient's share of a step whose total noise multiplier
/// is `noise_multiplier` (σ) when a statistic is released beside it with multiplier
/// `statistic_noise_multiplier` (σ_stat) (DC-SGD Thm 2, σ_T = (σ^−2 − σ_H^−2)^(−1/2); Andrew et al.
/// 2021 Thm 1 with σ_stat = 2σ_b). σ = 0 (a non-private run) gives 0.
///
/// ```
/// use dpx::privacy::clip::split_noise_multiplier;
/// // DC-SGD's MNIST row (docs/methods/dc_sgd.md §2): σ = 1.129, σ_H = 5 gives σ_T ≈ 1.158.
/// let t = split_noise_multiplier(1.129, 5.0, "histogram").unwrap();
/// assert!((t - 1.158).abs() < 1e-3);
/// ```
pub fn split_noise_multiplier(
    noise_multiplier: f64,
    statistic_noise_multiplier: f64,
    statistic: &'static str,
) -> Result<f64, ClipError> {
    if noise_multiplier == 0.0 {
        return Ok(0.0);
    }
    if !(noise_multiplier.is_finite() && noise_multiplier > 0.0) {
        return Err(MechanismError::InvalidNoiseMultiplier { noise_multiplier }.into());
    }
    if !(statistic_noise_multiplier.is_finite() && statistic_noise_multiplier > noise_multiplier) {
        return Err(ClipError::NoiseSplit {
            statistic,
            noise_multiplier,
            statistic_noise_multiplier,
        });
    }
    let rest = noise_multiplier.powi(-2) - statistic_noise_multiplier.powi(-2);
    Ok(rest.powf(-0.5))
}

/// How `per_layer` divides the clip norm C among the K parameter groups (Σ_k C_k² = C²).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerSplit {
    /// C_k = C/√K.
    Equal,
    /// C_k = C·√(P_k/P), P_k the group's parameter count.
    BySize,
}

/// A clipping policy's immutable parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum ClipPolicy {
    /// No clipping: the plain sum (non-private runs only).
    None,
    /// Flat clipping at `clip_norm` (Abadi et al. 2016).
    Flat { clip_norm: f64 },
    /// Per-group clip norms C_k, Σ_k C_k² = `clip_norm`², noise σ·C on every coordinate.
    PerLayer { clip_norm: f64, split: LayerSplit },
    /// C_t = C_0·ρ^(t/T) (Du et al. 2021).
    Decay(decay::DecayParams),
    /// g/(‖g‖ + γ) (Bu et al.).
    Automatic { gamma: f64 },
    /// Adaptive quantile clipping (Andrew et al. 2021).
    Quantile(quantile::QuantileParams),
    /// AdaCliP (Pichapati et al. 2019).
    AdaClip(adaclip::AdaClipParams),
    /// DC-SGD-P or DC-SGD-E (Wei et al. 2025).
    Dcsgd(dcsgd::DcsgdParams),
}

/// What evolves across the steps of one run.
#[derive(Debug, Clone, PartialEq)]
pub enum ClipState {
    /// The policy keeps nothing between steps.
    Stateless,
    /// The current clip norm C_t (quantile).
    ClipNorm(f64),
    /// C_t and the histogram range R_t (DC-SGD).
    Dcsgd(dcsgd::DcsgdState),
    /// m_t and s_t (AdaCliP).
    AdaClip(adaclip::AdaClipState),
}

/// The public facts of one step a policy needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepContext {
    /// 0-based step t.
    pub step: u64,
    /// σ_t, the step's total noise multiplier; 0 in a non-private run (no noise at all).
    pub noise_multiplier: f64,
    /// The divisor of the noisy sum (public): the expected batch size for Poisson sampling.
    pub expected_batch_size: f64,
}

/// One step of a policy: the release and what it used.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRelease {
    pub release: Release,
    /// The L2 sensitivity of the gradient sum this step: C_t (1 for `automatic`; for AdaCliP the
    /// flat C of equal noise power, ‖b‖/√P). `None` without clipping.
    pub clip_norm: Option<f64>,
    /// Std of the noise added to each coordinate of the gradient sum (RMS over coordinates for
    /// AdaCliP): σ_grad·C_t. 0 in a non-private run.
    pub noise_std: f64,
    /// The policy's private estimate of the fraction of examples clipped (post-processing of the
    /// released count or histogram), where it has one.
    pub clipped_fraction_private: Option<f64>,
    /// Examples actually clipped: a diagnostic computed from the raw norms, NOT private.
    pub clipped_count_nonprivate: usize,
    /// Examples in the batch (NOT private under Poisson sampling; for the diagnostic only).
    pub batch_size_nonprivate: usize,
}

impl StepRelease {
    /// The release of a policy whose only statistic is the clipped gradient sum: adds
    /// N(0, (noise_multiplier·sensitivity)² I) to `sum` through `privacy::mechanism` and records
    /// the one event `Gaussian(noise_multiplier)`. `sensitivity` is the sum's L2 sensitivity
    /// (C_t; 1 for `automatic`), reported as `clip_norm`.
    pub(crate) fn gaussian_sum<R: GaussianSource + ?Sized>(
        mut sum: Array1<f64>,
        noise_multiplier: f64,
        sensitivity: f64,
        clipped_count_nonprivate: usize,
        batch_size_nonprivate: usize,
        rng: &mut R,
    ) -> Result<Self, ClipError> {
        let noise_std = super::mechanism::add_gaussian_noise(
            sum.view_mut(),
            noise_multiplier,
            sensitivity,
            rng,
        )?;
        Ok(StepRelease {
            release: Release {
                sum,
                events: vec![DpEvent::gaussian(noise_multiplier)],
            },
            clip_norm: Some(sensitivity),
            noise_std,
            clipped_fraction_private: None,
            clipped_count_nonprivate,
            batch_size_nonprivate,
        })
    }
}

impl ClipPolicy {
    /// The policy's name as in `clip.policy`.
    pub fn name(&self) -> &'static str {
        match self {
            ClipPolicy::None => "none",
            ClipPolicy::Flat { .. } => "flat",
            ClipPolicy::PerLayer { .. } => "per_layer",
            ClipPolicy::Decay(_) => "decay",
            ClipPolicy::Automatic { .. } => "automatic",
            ClipPolicy::Quantile(_) => "quantile",
            ClipPolicy::AdaClip(_) => "adaclip",
            ClipPolicy::Dcsgd(p) => p.rule.name(),
        }
    }

    /// The state before the first step, for a model of `num_params` parameters.
    pub fn init_state(&self, num_params: usize) -> ClipState {
        match self {
            ClipPolicy::None
            | ClipPolicy::Flat { .. }
            | ClipPolicy::PerLayer { .. }
            | ClipPolicy::Decay(_)
            | ClipPolicy::Automatic { .. } => ClipState::Stateless,
            ClipPolicy::Quantile(p) => ClipState::ClipNorm(p.initial_clip_norm),
            ClipPolicy::AdaClip(p) => ClipState::AdaClip(p.init_state(num_params)),
            ClipPolicy::Dcsgd(p) => ClipState::Dcsgd(p.init_state()),
        }
    }

    /// Whether the policy needs the materialised `[B, P]` per-sample gradient matrix.
    pub fn materializes(&self) -> bool {
        matches!(self, ClipPolicy::AdaClip(_))
    }

    /// The statistic released beside the gradient and its noise multiplier, if any.
    pub fn statistic(&self) -> Option<(&'static str, f64)> {
        match self {
            ClipPolicy::Quantile(p) => Some((
                "noisy count of unclipped examples",
                p.count_noise_multiplier(),
            )),
            ClipPolicy::Dcsgd(p) => {
                Some(("histogram of gradient norms", p.histogram_noise_multiplier))
            }
            ClipPolicy::None
            | ClipPolicy::Flat { .. }
            | ClipPolicy::PerLayer { .. }
            | ClipPolicy::Decay(_)
            | ClipPolicy::Automatic { .. }
            | ClipPolicy::AdaClip(_) => None,
        }
    }

    /// The gradient's noise multiplier at a step of total multiplier σ (σ itself unless the policy
    /// splits the noise).
    pub fn gradient_noise_multiplier(&self, noise_multiplier: f64) -> Result<f64, ClipError> {
        match self.statistic() {
            Some((name, stat)) => split_noise_multiplier(noise_multiplier, stat, name),
            None => Ok(noise_multiplier),
        }
    }

    /// Refuse a total noise multiplier σ the policy cannot split (its statistic's multiplier must
    /// exceed σ).
    pub fn check_noise_multiplier(&self, noise_multiplier: f64) -> Result<(), ClipError> {
        self.gradient_noise_multiplier(noise_multiplier).map(|_| ())
    }

    /// The events one private step releases at total noise multiplier σ > 0, before sampling:
    /// exactly what [`privatize`](Self::privatize) returns.
    pub fn planned_releases(&self, noise_multiplier: f64) -> Result<Vec<DpEvent>, ClipError> {
        let grad = self.gradient_noise_multiplier(noise_multiplier)?;
        Ok(match self.statistic() {
            Some((_, stat)) => vec![DpEvent::gaussian(grad), DpEvent::gaussian(stat)],
            None => vec![DpEvent::gaussian(grad)],
        })
    }

    /// One step: clip, sum, add noise, release the policy's statistic, update `state` from the
    /// released values only. With `ctx.noise_multiplier = 0` nothing is noised (a non-private
    /// run; the caller records it as such).
    pub fn privatize<R: GaussianSource + ?Sized>(
        &self,
        state: &mut ClipState,
        grads: &dyn PerSampleGradients,
        ctx: &StepContext,
        rng: &mut R,
    ) -> Result<StepRelease, ClipError> {
        let sigma = ctx.noise_multiplier;
        let batch = grads.batch_size();
        match (self, state) {
            (ClipPolicy::None, _) => {
                let ones = Array1::<f64>::ones(batch);
                Ok(StepRelease {
                    release: Release {
                        sum: grads.weighted_sum(&ones),
                        events: vec![DpEvent::NonPrivate],
                    },
                    clip_norm: None,
                    noise_std: 0.0,
                    clipped_fraction_private: None,
                    clipped_count_nonprivate: 0,
                    batch_size_nonprivate: batch,
                })
            }
            (ClipPolicy::Flat { clip_norm }, _) => flat::step_flat(grads, *clip_norm, sigma, rng),
            (ClipPolicy::PerLayer { clip_norm, split }, _) => {
                per_layer::step_per_layer(grads, *clip_norm, *split, sigma, rng)
            }
            (ClipPolicy::Decay(p), _) => {
                flat::step_flat(grads, p.clip_norm_at(ctx.step), sigma, rng)
            }
            (ClipPolicy::Automatic { gamma }, _) => {
                automatic::step_automatic(grads, *gamma, sigma, rng)
            }
            (ClipPolicy::Quantile(p), ClipState::ClipNorm(c)) => p.step(c, grads, ctx, rng),
            (ClipPolicy::AdaClip(p), ClipState::AdaClip(s)) => p.step(s, grads, ctx, rng),
            (ClipPolicy::Dcsgd(p), ClipState::Dcsgd(s)) => p.step(s, grads, ctx, rng),
            (policy, _) => Err(ClipError::StateMismatch {
                policy: policy.name(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_spends_exactly_the_total_noise_multiplier() {
        // σ^−2 = σ_grad^−2 + σ_stat^−2 (DC-SGD Thm 2): recombining gives σ back.
        for (sigma, stat) in [(1.129, 5.0), (0.5, 0.6), (3.0, 12.0), (0.8, 10.0)] {
            let grad = split_noise_multiplier(sigma, stat, "x").unwrap();
            assert!(grad > sigma);
            let back = (grad.powi(-2) + stat.powi(-2)).powf(-0.5);
            assert!(
                (back - sigma).abs() <= 1e-12 * sigma,
                "{sigma} {stat} {back}"
            );
        }
        // docs/methods/dc_sgd.md §2 table (σ_H = 5): CIFAR10 ε=1: 1.449 -> 1.514; ε=2: 0.966 -> 0.984;
        // MNIST ε=2: 0.841 -> 0.854.
        for (sigma, expected) in [(1.449, 1.514), (0.966, 0.984), (0.841, 0.854)] {
            let grad = split_noise_multiplier(sigma, 5.0, "histogram").unwrap();
            assert!(
                (grad - expected).abs() < 1e-3,
                "{sigma}: {grad} vs {expected}"
            );
        }
        // Andrew et al. Thm 1: the count's multiplier is 2σ_b.
        let q = quantile::QuantileParams {
            initial_clip_norm: 1.0,
            target_quantile: 0.5,
            learning_rate: 0.2,
            count_noise_std: 12.8,
        };
        let grad = ClipPolicy::Quantile(q)
            .gradient_noise_multiplier(1.0)
            .unwrap();
        assert!((grad - (1.0 - (25.6f64).powi(-2)).powf(-0.5)).abs() < 1e-15);
        assert_eq!(split_noise_multiplier(0.0, 5.0, "x").unwrap(), 0.0);
    }

    #[test]
    fn no_example_moves_a_release_by_more_than_the_sensitivity_the_policy_declares() {
        // For every policy through the common interface: adding one worst-case example moves
        // the (noise-free) gradient sum by at most the clip_norm the step reports, which is the
        // sensitivity the noise is scaled to.
        use crate::privacy::clip::explicit::ExplicitGradients;
        use ndarray::{Array2, array};
        use rand::SeedableRng;
        let policies = [
            ClipPolicy::Flat { clip_norm: 0.7 },
            ClipPolicy::PerLayer {
                clip_norm: 0.7,
                split: LayerSplit::BySize,
            },
            ClipPolicy::Decay(decay::DecayParams {
                clip_norm: 2.0,
                final_ratio: 0.1,
                total_steps: 100,
            }),
            ClipPolicy::Automatic { gamma: 0.01 },
            ClipPolicy::Quantile(quantile::QuantileParams {
                initial_clip_norm: 0.3,
                target_quantile: 0.5,
                learning_rate: 0.2,
                count_noise_std: 1.0,
            }),
            ClipPolicy::Dcsgd(dcsgd::DcsgdParams {
                rule: dcsgd::DcsgdRule::Percentile { percentile: 0.5 },
                initial_clip_norm: 0.4,
                initial_range: 1.0,
                bins: 10,
                histogram_noise_multiplier: 5.0,
            }),
        ];
        let groups = vec![("a".to_string(), 0..2), ("b".to_string(), 2..3)];
        let base = array![[0.1f32, -0.2, 0.3], [3.0, 4.0, -2.0]];
        for policy in &policies {
            for outlier in [[1e6f32, -1e6, 1e6], [0.0, 0.0, 1e9], [0.05, 0.0, 0.0]] {
                let mut with = base.clone();
                with.push_row(ndarray::ArrayView1::from(&outlier)).unwrap();
                let run = |m: Array2<f32>| {
                    let g = ExplicitGradients::with_groups(m, groups.clone());
                    let mut state = policy.init_state(3);
                    let ctx = StepContext {
                        step: 50,
                        noise_multiplier: 0.0,
                        expected_batch_size: 3.0,
                    };
                    let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
                    policy.privatize(&mut state, &g, &ctx, &mut rng).unwrap()
                };
                let (a, b) = (run(with), run(base.clone()));
                let c = b.clip_norm.unwrap();
                let moved = (&a.release.sum - &b.release.sum)
                    .iter()
                    .map(|x| x * x)
                    .sum::<f64>()
                    .sqrt();
                assert!(
                    moved <= c * (1.0 + 1e-12),
                    "{}: {outlier:?} moved {moved} > {c}",
                    policy.name()
                );
            }
        }
    }

    #[test]
    fn a_statistic_noisier_budget_is_refused() {
        assert!(matches!(
            split_noise_multiplier(5.0, 5.0, "histogram"),
            Err(ClipError::NoiseSplit { .. })
        ));
        assert!(matches!(
            split_noise_multiplier(6.0, 5.0, "histogram"),
            Err(ClipError::NoiseSplit { .. })
        ));
        assert!(split_noise_multiplier(f64::NAN, 5.0, "histogram").is_err());
    }
}
