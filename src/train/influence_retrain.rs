//! The noise influence q_t of a run estimated by retraining on its own training data (room:
//! `train`, which owns the data, the model and the step's wiring): the `influence_retrained`
//! noise schedules, the dynamic-noise paper's `dyn` and `exp` for losses without an analytic
//! influence (Hong, Wang, Zhou, "On dynamic noise influence in differential private learning",
//! §3 for the estimate, Lemma 4.1 for the schedule; docs/methods/dynamic_noise.md §1.2(h)).
//!
//! # The estimate (the paper's §3)
//! Fix σ_i = σ̄ (the calibrated uniform multiplier at the run's budget) for every step i ≠ t, sweep
//! σ_t over `points` values evenly spaced in [σ_min, σ_max] (the paper: 20 to 200), train, and fit
//! the final training loss to c₂ σ_t² + c₀ by least squares; q_t ≈ c₂. The loss is random, so each
//! value is repeated. dpx's repeats share their noise across the sweep (common random numbers:
//! repeat r's noise vector ν_s of step s is the same at every σ_t, scaled) and come in antithetic
//! pairs (ν_t and −ν_t at the swept step), which removes the term odd in ν_t: on a quadratic
//! loss the pair's mean is exactly c₀ + c₂σ_t² (module tests). c₂ is the mean over repeats of the
//! per-repeat least-squares slope against σ_t² (in a balanced sweep, the pooled fit's slope), and
//! its relative standard error is their standard deviation over √repeats, divided by c₂.
//!
//! Cost: every repeat trains one uniform trajectory of T steps and branches from it at each
//! estimated step t (the steps before t are the same for every σ_t), so an estimate is
//! repeats × (T + 2·points·Σ_t (T − t)) full-batch steps: O(steps × points × repeats) runs of T
//! steps. `noise.retrain_steps` estimates q_t at that many steps evenly spaced from 0 to T − 1 and
//! interpolates ln q_t linearly between them.
//!
//! Estimates c₂ ≤ 0 (sampling error, or a non-convex loss) are raised to the smallest positive
//! estimate (Lemma 4.1 needs q_t > 0) and counted in a warning; none positive is refused.
//!
//! Scope: full-batch steps (every example in every step), flat clipping, independent noise,
//! `sgd`, `momentum` or `bias_corrected_momentum`, any learning-rate schedule, the parameters
//! themselves as the output. The config refuses the other optimizers, clipping policies,
//! mechanisms, augmentation, `model.init_from` and `train.ema_decay` (exit 2, naming the key);
//! this module refuses samplers that are not full batch.
//!
//! Privacy: the losses of the private training data decide every σ_t without noise, so the run
//! needs `data.allow_nonprivate_statistics = true` and its ε is marked not guaranteed, as for
//! `influence_quadratic` (and as in the paper, which does not privatise its estimate).
//!
//! Randomness: the estimate's own ChaCha12 streams from `noise.retrain_seed` (never the run's
//! seeds): the initialisation of repeat r, and one noise stream per (repeat, step). Its runs are
//! sequential and every kernel is thread-count independent, so the schedule is the same for any
//! number of threads.

use std::sync::Arc;

use ndarray::{Array1, ArrayView2};
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

use super::TrainError;
use super::plan::TrainingPlan;
use super::seed::{STREAM_INIT, STREAM_NOISE, stream_seed};
use crate::config::spec::{ExperimentSpec, NoiseSchedule, RetrainEstimate, Sampler};
use crate::config::{ConfigError, Location};
use crate::data::Dataset;
use crate::model::Model;
use crate::optim::OptimizerState;
use crate::privacy::clip::{ClipState, StepContext};
use crate::privacy::mechanism::GaussianSource;
use crate::privacy::schedule::NoiseShape;
use crate::privacy::schedule::influence::{fit_exponential, influence_shape};

/// Most full-batch steps one estimate may train (a MNIST 3-vs-5 logistic step on 1,000 examples
/// takes about 1 ms on one core: the limit is hours, not days).
pub const MAX_RETRAIN_STEPS: u64 = 20_000_000;

/// The stream id the estimate's seeds are derived from (beside a run seed's streams, `seed.rs`).
const STREAM_RETRAIN: u64 = 0x5245_5452;

/// The schedule estimated by retraining, with what a user should know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrainedInfluence {
    /// The noise shape s_0 … s_{T−1} (`dyn`, or its fitted exponential).
    pub shape: NoiseShape,
    /// The 0-based steps at which q_t was estimated.
    pub estimated_steps: Vec<u64>,
    /// c₂ at those steps, before any was raised to the smallest positive one.
    pub estimates: Vec<f64>,
    /// The relative standard error of each c₂ over the repeats (NaN with one repeat).
    pub relative_se: Vec<f64>,
    /// q_t at every step: the estimates (raised where ≤ 0), interpolated in logarithms.
    pub influence: Vec<f64>,
    /// How many estimates were ≤ 0 and raised.
    pub raised: usize,
    /// σ̄, the uniform multiplier of the other steps.
    pub uniform_noise_multiplier: f64,
    /// The fraction of per-example gradients longer than the clip norm along the uniform
    /// trajectories (the paper reports about 80% for the logistic loss).
    pub clipped_fraction: f64,
    /// Full-batch steps trained.
    pub steps_trained: u64,
}

impl RetrainedInfluence {
    /// What the plan says about this schedule (ε not guaranteed; the estimate's quality).
    pub fn warnings(&self, name: &str) -> Vec<String> {
        let mut w = vec![format!(
            "noise.schedule = {name} is estimated by retraining on the private training data without noise (data.allow_nonprivate_statistics = true); epsilon does not cover it and is not guaranteed"
        )];
        let mut se: Vec<f64> = self
            .relative_se
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        se.sort_by(f64::total_cmp);
        let median = se.get(se.len() / 2).copied().unwrap_or(f64::NAN);
        let max = se.last().copied().unwrap_or(f64::NAN);
        w.push(format!(
            "noise.schedule = {name}: q_t estimated at {} steps ({} full-batch steps trained, uniform sigma {:.4}); relative standard error of the fits median {median:.3}, max {max:.3}; {:.1}% of the per-example gradients clipped along the uniform runs; {} of {} estimates <= 0 raised to the smallest positive one",
            self.estimated_steps.len(),
            self.steps_trained,
            self.uniform_noise_multiplier,
            100.0 * self.clipped_fraction,
            self.raised,
            self.estimates.len(),
        ));
        w
    }
}

/// A Gaussian source that flips the sign of another's draws (the antithetic half of a pair).
struct Signed<'a> {
    inner: &'a mut ChaCha12Rng,
    sign: f64,
}

impl GaussianSource for Signed<'_> {
    fn standard_normal(&mut self) -> f64 {
        self.sign * self.inner.standard_normal()
    }

    fn add_scaled_normals(&mut self, out: &mut [f64], scale: f64) {
        self.inner.add_scaled_normals(out, self.sign * scale);
    }
}

/// The state of one trajectory between steps.
#[derive(Clone)]
struct State {
    params: Array1<f32>,
    optimizer: OptimizerState,
    clip: ClipState,
}

/// One estimate's fixed inputs: the model, the full training set and the uniform plan.
struct Retrainer<'a> {
    model: &'a Model,
    x: ArrayView2<'a, f32>,
    labels: &'a [usize],
    plan: TrainingPlan,
    steps: u64,
    sigma: f64,
    refuse: &'a dyn Fn(String) -> TrainError,
    /// (clipped, seen) per-example gradients along the uniform trajectories.
    clipped: (u64, u64),
    trained: u64,
}

impl Retrainer<'_> {
    /// The noise stream of step `t` of the repeat seeded `repeat_seed`: the same draws whatever σ_t.
    fn noise(repeat_seed: u64, t: u64) -> ChaCha12Rng {
        let mut rng = ChaCha12Rng::seed_from_u64(stream_seed(repeat_seed, STREAM_NOISE));
        rng.set_stream(t);
        rng
    }

    /// One full-batch private step t at multiplier `sigma`, its noise multiplied by `sign`, as
    /// `run.rs` takes it (clip and noise by the plan's policy, the sum over the expected batch
    /// size, the L2 gradient after the noise, the optimizer's update).
    fn step(
        &mut self,
        s: &mut State,
        repeat_seed: u64,
        t: u64,
        sigma: f64,
        sign: f64,
        count: bool,
    ) -> Result<(), TrainError> {
        let grads = self
            .model
            .per_sample(s.params.view(), self.x, self.labels)
            .map_err(|e| (self.refuse)(format!("retraining step {t}: {e}")))?;
        let ctx = StepContext {
            step: t,
            noise_multiplier: sigma,
            expected_batch_size: self.plan.expected_batch_size,
        };
        let mut rng = Self::noise(repeat_seed, t);
        let release = self
            .plan
            .clip
            .privatize(
                &mut s.clip,
                &grads,
                &ctx,
                &mut Signed {
                    inner: &mut rng,
                    sign,
                },
            )
            .map_err(|e| (self.refuse)(format!("retraining step {t}: {e}")))?;
        if count {
            self.clipped.0 += release.clipped_count_nonprivate as u64;
            self.clipped.1 += release.batch_size_nonprivate as u64;
        }
        let mut g = release.release.sum;
        g.mapv_inplace(|v| v / self.plan.expected_batch_size);
        self.model.add_l2_gradient(s.params.view(), &mut g);
        self.model.mask_frozen(&mut g);
        self.plan.optimizer.step_with_norm(
            &mut s.params,
            g.view(),
            self.plan.lr.at(t),
            &mut s.optimizer,
            None,
        );
        self.trained += 1;
        Ok(())
    }

    /// From `s` before step `t`: step t at `sigma` (noise × `sign`), the rest at σ̄; the final
    /// training loss.
    fn branch(
        &mut self,
        mut s: State,
        repeat_seed: u64,
        t: u64,
        sigma: f64,
        sign: f64,
    ) -> Result<f64, TrainError> {
        self.step(&mut s, repeat_seed, t, sigma, sign, false)?;
        for u in t + 1..self.steps {
            self.step(&mut s, repeat_seed, u, self.sigma, 1.0, false)?;
        }
        let (loss, _) = self
            .model
            .evaluate(s.params.view(), self.x, self.labels)
            .map_err(|e| (self.refuse)(e.to_string()))?;
        if !loss.is_finite() {
            return Err((self.refuse)(format!(
                "the final training loss of a retraining run with noise multiplier {sigma} at step {t} is not finite: lower noise.retrain_sigma_max"
            )));
        }
        Ok(loss)
    }
}

/// `count` steps evenly spaced over 0 … steps − 1, rounded, first and last included.
pub fn estimated_steps(steps: u64, count: Option<u64>) -> Vec<u64> {
    let k = count.map_or(steps, |c| c.min(steps));
    if k <= 1 || steps <= 1 {
        return vec![0];
    }
    let mut out: Vec<u64> = (0..k)
        .map(|i| ((i as f64) * (steps - 1) as f64 / (k - 1) as f64).round() as u64)
        .collect();
    out.dedup();
    out
}

/// The per-repeat least-squares slope of the loss against σ_t² (`losses[r][p]`, each the mean of
/// an antithetic pair) and the σ_t values: the mean slope and its relative standard error.
pub fn fit_quadratic(sigmas: &[f64], losses: &[Vec<f64>]) -> (f64, f64) {
    let x: Vec<f64> = sigmas.iter().map(|s| s * s).collect();
    let mx = x.iter().sum::<f64>() / x.len() as f64;
    let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
    let slopes: Vec<f64> = losses
        .iter()
        .map(|y| {
            let my = y.iter().sum::<f64>() / y.len() as f64;
            x.iter()
                .zip(y)
                .map(|(a, b)| (a - mx) * (b - my))
                .sum::<f64>()
                / sxx
        })
        .collect();
    let r = slopes.len() as f64;
    let mean = slopes.iter().sum::<f64>() / r;
    if slopes.len() < 2 {
        return (mean, f64::NAN);
    }
    let var = slopes.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (r - 1.0);
    (mean, (var / r).sqrt() / mean.abs())
}

/// ln q_t at every step from the estimates at `at` (positive), linear in t between them.
pub fn interpolate_ln(at: &[u64], q: &[f64], steps: u64) -> Vec<f64> {
    let ln: Vec<f64> = q.iter().map(|v| v.ln()).collect();
    (0..steps)
        .map(|t| {
            let i = at.partition_point(|&a| a <= t);
            match (i.checked_sub(1), at.get(i)) {
                (Some(lo), Some(&hi_t)) => {
                    let lo_t = at[lo];
                    let w = (t - lo_t) as f64 / (hi_t - lo_t) as f64;
                    ln[lo] + w * (ln[i] - ln[lo])
                }
                (Some(lo), None) => ln[lo],
                (None, _) => ln[0],
            }
        })
        .collect()
}

/// The `influence_retrained` schedule of `spec`, estimated by retraining `model` on `train`, or
/// `None` when the run uses another schedule. The config has already checked the optimizer, the
/// clipping policy, the mechanism and the opt-out (`config::spec`).
pub fn retrained_influence(
    spec: &ExperimentSpec,
    model: &Model,
    train: &Dataset,
) -> Result<Option<RetrainedInfluence>, TrainError> {
    let Some(p) = &spec.privacy else {
        return Ok(None);
    };
    let NoiseSchedule::InfluenceRetrained {
        fit_exponential: fit,
        estimate,
    } = p.noise_schedule
    else {
        return Ok(None);
    };
    let name = p.noise_schedule.kind().name();
    let refuse_at = |key: &str, reason: String| {
        TrainError::Config(ConfigError::DataMismatch {
            at: Location::file(&spec.source),
            key: key.into(),
            reason,
        })
    };
    let refuse = |reason: String| refuse_at("noise.schedule", reason);
    let n = train.len();
    let full_batch = match spec.train.sampler {
        Sampler::Poisson { .. } | Sampler::Shuffle { .. } | Sampler::FixedSize { .. } => {
            spec.sample_rate(n) >= 1.0
        }
        _ => false,
    };
    if !full_batch {
        return Err(refuse_at(
            "train.sampler",
            format!(
                "noise.schedule = \"{name}\" retrains the paper's full-batch gradient descent: every example in every step (train.sampler = \"poisson\" with train.expected_batch_size = {n}, the training-set size)"
            ),
        ));
    }
    let steps = spec.planned_steps(n);
    let at = estimated_steps(steps, estimate.steps);
    let RetrainEstimate {
        sigma_min,
        sigma_max,
        points,
        repeats,
        seed,
        ..
    } = estimate;
    let branch_steps: u64 = at.iter().map(|&t| steps - t).sum();
    let total = (repeats as u64)
        .saturating_mul(steps.saturating_add((2 * points as u64).saturating_mul(branch_steps)));
    if total > MAX_RETRAIN_STEPS {
        return Err(refuse(format!(
            "the estimate would train {total} full-batch steps, over the limit of {MAX_RETRAIN_STEPS}: lower noise.retrain_steps, noise.retrain_points or noise.retrain_repeats"
        )));
    }
    // σ̄: the run's budget spent uniformly (the same plan with a constant schedule).
    let mut uniform = spec.clone();
    if let Some(up) = &mut uniform.privacy {
        up.noise_schedule = NoiseSchedule::Constant;
    }
    let plan = TrainingPlan::new(&uniform, n)?;
    let sigma = plan
        .noise_multiplier_at(0)
        .filter(|s| s.is_finite())
        .ok_or_else(|| refuse("the uniform noise multiplier of this budget is undefined".into()))?;
    let sigmas: Vec<f64> = (0..points)
        .map(|i| sigma_min + (sigma_max - sigma_min) * i as f64 / (points - 1) as f64)
        .collect();
    let num_params = model.num_params();
    let mut r = Retrainer {
        model,
        x: train.features.view(),
        labels: &train.labels,
        clipped: (0, 0),
        trained: 0,
        steps,
        sigma,
        refuse: &refuse,
        plan,
    };
    // losses[repeat][k][point]: the mean of the antithetic pair.
    let mut losses = Vec::with_capacity(repeats);
    let base_seed = stream_seed(seed, STREAM_RETRAIN);
    for rep in 0..repeats {
        let mut mine = vec![vec![0.0; points]; at.len()];
        let repeat_seed = stream_seed(base_seed, rep as u64);
        let mut s = State {
            params: model.init_params(stream_seed(repeat_seed, STREAM_INIT)),
            optimizer: r.plan.optimizer.init_state(num_params),
            clip: r.plan.clip.init_state(num_params),
        };
        let mut next = 0;
        for t in 0..steps {
            if at.get(next) == Some(&t) {
                for (pi, &sig) in sigmas.iter().enumerate() {
                    let plus = r.branch(s.clone(), repeat_seed, t, sig, 1.0)?;
                    let minus = r.branch(s.clone(), repeat_seed, t, sig, -1.0)?;
                    mine[next][pi] = 0.5 * (plus + minus);
                }
                next += 1;
            }
            r.step(&mut s, repeat_seed, t, sigma, 1.0, true)?;
        }
        losses.push(mine);
    }
    let (estimates, relative_se): (Vec<f64>, Vec<f64>) = (0..at.len())
        .map(|k| {
            let at_k: Vec<Vec<f64>> = losses
                .iter()
                .map(|l: &Vec<Vec<f64>>| l[k].clone())
                .collect();
            fit_quadratic(&sigmas, &at_k)
        })
        .unzip();
    let Some(smallest) = estimates
        .iter()
        .copied()
        .filter(|&c| c > 0.0)
        .reduce(f64::min)
    else {
        return Err(refuse(format!(
            "no estimated influence is positive (the final loss did not grow with sigma_t at any of the {} steps): raise noise.retrain_repeats or noise.retrain_sigma_max",
            at.len()
        )));
    };
    let raised = estimates.iter().filter(|&&c| c <= 0.0).count();
    let q: Vec<f64> = estimates.iter().map(|&c| c.max(smallest)).collect();
    let ln_q = interpolate_ln(&at, &q, steps);
    let dyn_shape = influence_shape(&ln_q);
    let (values, fitted_decay) = if fit {
        let (decay, fitted) = fit_exponential(&dyn_shape);
        (fitted, Some(decay))
    } else {
        (dyn_shape, None)
    };
    Ok(Some(RetrainedInfluence {
        shape: NoiseShape::InfluenceRetrained {
            values: Arc::from(values),
            fitted_decay,
        },
        estimated_steps: at,
        estimates,
        relative_se,
        influence: ln_q.iter().map(|v| v.exp()).collect(),
        raised,
        uniform_noise_multiplier: sigma,
        clipped_fraction: r.clipped.0 as f64 / r.clipped.1.max(1) as f64,
        steps_trained: r.trained,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimated_steps_span_the_run() {
        assert_eq!(estimated_steps(100, Some(10)).first(), Some(&0));
        assert_eq!(estimated_steps(100, Some(10)).last(), Some(&99));
        assert_eq!(estimated_steps(100, Some(10)).len(), 10);
        assert_eq!(estimated_steps(5, Some(10)), vec![0, 1, 2, 3, 4]);
        assert_eq!(estimated_steps(5, None), vec![0, 1, 2, 3, 4]);
        assert_eq!(estimated_steps(1, Some(10)), vec![0]);
    }

    #[test]
    fn the_fit_recovers_a_quadratic_and_its_spread() {
        let sigmas = [20.0, 110.0, 200.0];
        let exact: Vec<Vec<f64>> = [0.5, 1.5]
            .iter()
            .map(|c0| sigmas.iter().map(|s| c0 + 3e-4 * s * s).collect())
            .collect();
        let (c2, se) = fit_quadratic(&sigmas, &exact);
        assert!((c2 - 3e-4).abs() < 1e-15 && se.abs() < 1e-9, "{c2} {se}");
        // Slopes 2e-4 and 4e-4: mean 3e-4, SE = sd/√2 = 1e-4 (relative 1/3).
        let spread: Vec<Vec<f64>> = [2e-4, 4e-4]
            .iter()
            .map(|c| sigmas.iter().map(|s| 1.0 + c * s * s).collect())
            .collect();
        let (c2, se) = fit_quadratic(&sigmas, &spread);
        assert!((c2 - 3e-4).abs() < 1e-15 && (se - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn the_interpolation_is_linear_in_logarithms() {
        let ln = interpolate_ln(&[0, 4], &[1.0, 16.0], 5);
        let want = [0.0, 0.25, 0.5, 0.75, 1.0].map(|w: f64| w * 16f64.ln());
        for (a, b) in ln.iter().zip(want) {
            assert!((a - b).abs() < 1e-12);
        }
        assert_eq!(interpolate_ln(&[0], &[2.0], 3), vec![2f64.ln(); 3]);
    }
}
