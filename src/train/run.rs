//! One seed of one experiment: the private step loop, evaluation and the seed's summary.
//!
//! One private step (see `ARCHITECTURE.md`):
//!
//! ```text
//! σ_t, η_t  = plan (pure functions of t)
//! batch     = sampler.next(rng_sampling)              Poisson by default; may be empty
//! grads     = model.per_sample(params, batch)         norms and weighted sums, no [B, P] matrix
//! release   = plan.clip.privatize(state, grads, σ_t, rng_noise)   the policy; state → next step
//! g         = release.sum / expected_batch_size       never the realised batch size
//! g        += λ θ                                     L2 penalty: data-independent, after noise
//! optimizer.step(params, g, η_t)
//! ledger.record(sampling(release.events))
//! ```
//!
//! Randomness: four independent ChaCha12 streams (initialisation, sampling, noise) derived from the
//! seed, so a seed's result never depends on thread count or on other seeds. With
//! `privacy.secure_noise = true` the noise stream alone is replaced by an OS-seeded ChaCha20
//! source (`privacy::secure_rng`): such runs are not reproducible.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ndarray::{Array1, Array2, Axis};
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

use super::TrainError;
use super::metrics::{MetricsRow, SeedStatus, SummaryRow};
use super::prepare::Experiment;
use crate::config::spec::Sampler as SpecSampler;
use crate::data::Dataset;
use crate::data::sampler::{FixedSizeSampler, PoissonSampler, Sampler, ShuffleSampler};
use crate::grad::{GradError, PerSampleGradients};
use crate::privacy::clip::{ClipError, StepContext};
use crate::privacy::event::{DpEvent, EventLedger};
use crate::privacy::mechanism::GaussianSource;
use crate::privacy::secure_rng::{SecureGaussian, SecureRngError};

/// Stream ids of a seed's random streams.
pub const STREAM_INIT: u64 = 1;
pub const STREAM_SAMPLING: u64 = 2;
pub const STREAM_NOISE: u64 = 3;

/// A ChaCha12 generator for stream `stream` of run seed `seed`.
pub fn stream_rng(seed: u64, stream: u64) -> ChaCha12Rng {
    let mut rng = ChaCha12Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// Receives progress while a seed trains (the CLI draws bars from it). Must not affect results.
pub trait Observer: Sync {
    /// Called after every step with the number of steps done.
    fn on_step(&self, _seed: u64, _steps_done: u64, _total: u64) {}
    /// Called after every evaluation.
    fn on_eval(&self, _seed: u64, _row: &MetricsRow, _total: u64) {}
}

/// An observer that ignores everything.
pub struct Silent;
impl Observer for Silent {}

/// A finished seed: its evaluation rows, summary and the events it released.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedResult {
    pub rows: Vec<MetricsRow>,
    pub summary: SummaryRow,
    pub ledger: EventLedger,
}

/// How a call to [`train_seed`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SeedEnd {
    Finished(Box<SeedResult>),
    /// `cancel` was set before the seed finished; nothing of it is kept.
    Interrupted,
}

/// The per-sample gradients of an empty (Poisson) batch: all sums are zero vectors.
struct EmptyBatch {
    num_params: usize,
    groups: Vec<(String, std::ops::Range<usize>)>,
}

impl PerSampleGradients for EmptyBatch {
    fn batch_size(&self) -> usize {
        0
    }
    fn num_params(&self) -> usize {
        self.num_params
    }
    fn groups(&self) -> Vec<(String, std::ops::Range<usize>)> {
        self.groups.clone()
    }
    fn norms(&self) -> Array1<f64> {
        Array1::zeros(0)
    }
    fn group_norms(&self) -> Array2<f64> {
        Array2::zeros((0, self.groups.len()))
    }
    fn weighted_sum(&self, _weights: &Array1<f64>) -> Array1<f64> {
        Array1::zeros(self.num_params)
    }
    fn group_weighted_sum(&self, _weights: &Array2<f64>) -> Array1<f64> {
        Array1::zeros(self.num_params)
    }
    fn materialize(&self) -> Result<Array2<f32>, GradError> {
        Ok(Array2::zeros((0, self.num_params)))
    }
}

fn make_sampler(spec: SpecSampler, n: usize, sample_rate: f64) -> Result<Sampler, TrainError> {
    Ok(match spec {
        SpecSampler::Poisson { .. } => Sampler::Poisson(PoissonSampler::new(n, sample_rate)?),
        SpecSampler::Shuffle { batch_size } => {
            Sampler::Shuffle(ShuffleSampler::new(n, batch_size)?)
        }
        SpecSampler::FixedSize { batch_size } => {
            Sampler::FixedSize(FixedSizeSampler::new(n, batch_size)?)
        }
    })
}

struct Evaluator<'a> {
    exp: &'a Experiment,
}

impl Evaluator<'_> {
    fn on(
        &self,
        params: &Array1<f32>,
        ds: &Dataset,
    ) -> Result<(f64, f64), crate::model::ModelError> {
        self.exp
            .model
            .evaluate(params.view(), ds.features.view(), &ds.labels)
    }
}

/// Train one seed of `exp`. Progress goes to `observer`; `cancel` stops it between steps.
pub fn train_seed(
    exp: &Experiment,
    seed: u64,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Result<SeedEnd, TrainError> {
    if let Some(acc) = &exp.accelerated {
        return super::accelerated::train_seed(exp, acc, seed, observer, cancel);
    }
    let started = Instant::now();
    let plan = &exp.plan;
    let model = &exp.model;
    let train = &exp.data.train;
    let n = train.len();
    let step_err = |step: u64, reason: String| TrainError::Step { seed, step, reason };

    let mut params = model.init_params(stream_seed(seed, STREAM_INIT));
    let mut opt_state = plan.optimizer.init_state(params.len());
    let mut sampler = make_sampler(plan.sampler, n, plan.sample_rate)?;
    let mut rng_sampling = stream_rng(seed, STREAM_SAMPLING);
    let mut rng_noise = noise_source(exp, seed).map_err(|e| step_err(0, e.to_string()))?;
    let mut ledger = EventLedger::new();
    let eval = Evaluator { exp };

    let eval_steps = plan.eval_steps();
    let mut next_eval = eval_steps.iter().copied().skip(1).peekable();
    let mut rows = Vec::with_capacity(eval_steps.len());
    let mut indices = Vec::new();
    let (mut loss_sum, mut loss_count) = (0.0f64, 0usize);
    let mut status = SeedStatus::Completed;
    let total = plan.steps;

    let delta = plan.privacy.as_ref().map(|p| p.delta);
    let mut clip_state = plan.clip.init_state(model.num_params());
    let mut window = ClipWindow::default();
    let row_at = |step: u64,
                  params: &Array1<f32>,
                  ledger: &EventLedger,
                  train_loss: Option<f64>,
                  batch_size: Option<usize>,
                  window: &ClipWindow|
     -> Result<MetricsRow, TrainError> {
        let t_last = step.saturating_sub(1);
        let (test_loss, test_accuracy) = eval
            .on(params, &exp.data.test)
            .map_err(|e| step_err(step, e.to_string()))?;
        let (validation_loss, validation_accuracy) = match &exp.data.validation {
            Some(v) => {
                let (l, a) = eval
                    .on(params, v)
                    .map_err(|e| step_err(step, e.to_string()))?;
                (Some(l), Some(a))
            }
            None => (None, None),
        };
        let (train_set_loss, train_set_accuracy) = if exp.spec.train.eval_train_set {
            let (l, a) = eval
                .on(params, train)
                .map_err(|e| step_err(step, e.to_string()))?;
            (Some(l), Some(a))
        } else {
            (None, None)
        };
        let epsilon = match plan.epsilon_of(ledger) {
            None => None,
            Some(r) => Some(r.map_err(|e| step_err(step, e.to_string()))?.epsilon),
        };
        let sigma = plan.noise_multiplier_at(t_last);
        // Before any step: the first step's clip norm and gradient noise.
        let (clip_norm, noise_std) = match window.last {
            Some((c, std)) => (c, sigma.map(|_| std)),
            None => (
                plan.clip_norm,
                sigma
                    .zip(plan.clip_norm)
                    .map(|(s, c)| plan.clip.gradient_noise_multiplier(s).unwrap_or(s) * c),
            ),
        };
        Ok(MetricsRow {
            seed,
            step,
            epoch: step as f64 / plan.steps_per_epoch,
            lr: plan.lr.at(t_last),
            noise_multiplier: sigma,
            noise_std,
            clip_norm,
            batch_size,
            epsilon,
            delta,
            train_loss,
            test_loss,
            test_accuracy,
            validation_loss,
            validation_accuracy,
            clipped_fraction_private: (window.private_steps > 0)
                .then(|| window.private_sum / window.private_steps as f64),
            clipped_fraction_nonprivate: (window.examples > 0)
                .then(|| window.clipped as f64 / window.examples as f64),
            objective: None,
            excess_risk: None,
            laplace_scale: None,
            step_epsilon: None,
            step_size: None,
            momentum: None,
            stage: None,
            train_set_loss,
            train_set_accuracy,
        })
    };

    let first = row_at(0, &params, &ledger, None, None, &window)?;
    observer.on_eval(seed, &first, total);
    rows.push(first);

    let groups = model.groups().to_vec();
    for t in 0..total {
        if cancel.load(Ordering::Relaxed) {
            return Ok(SeedEnd::Interrupted);
        }
        let sigma = plan.noise_multiplier_at(t);
        let lr = plan.lr.at(t);
        sampler.next_batch_into(&mut rng_sampling, &mut indices);
        let batch_size = indices.len();

        let x;
        let y: Vec<usize>;
        let batch_grads;
        let grads: &dyn PerSampleGradients = if indices.is_empty() {
            batch_grads = None;
            &EmptyBatch {
                num_params: model.num_params(),
                groups: groups.clone(),
            }
        } else {
            x = train.features.select(Axis(0), &indices);
            y = indices.iter().map(|&i| train.labels[i]).collect();
            batch_grads = Some(
                model
                    .per_sample(params.view(), x.view(), &y)
                    .map_err(|e| step_err(t, e.to_string()))?,
            );
            match &batch_grads {
                Some(g) => g,
                None => unreachable!("just set"),
            }
        };
        if let Some(g) = &batch_grads {
            let losses = g.losses();
            let s = losses.sum();
            if !s.is_finite() {
                status = SeedStatus::Diverged;
                break;
            }
            loss_sum += s;
            loss_count += losses.len();
        }

        // The paper's non-private AdaGrad-norm mode: ‖ḡ‖² of the clipped mean before noise.
        let clean_norm_sq = match (plan.clean_norm, plan.clip_norm) {
            (true, Some(c)) => {
                let w = grads
                    .norms()
                    .mapv(|n| if n > c { c / n } else { 1.0 } / plan.expected_batch_size);
                Some(grads.weighted_sum(&w).iter().map(|v| v * v).sum::<f64>())
            }
            _ => None,
        };
        // The clipping policy: clip, sum, noise, any statistic it releases, and its state's
        // update for the next step. A non-private run passes σ = 0 (no noise) and records
        // NonPrivate.
        let ctx = StepContext {
            step: t,
            noise_multiplier: sigma.unwrap_or(0.0),
            expected_batch_size: plan.expected_batch_size,
        };
        let step = match plan
            .clip
            .privatize(&mut clip_state, grads, &ctx, &mut rng_noise)
        {
            Ok(step) => step,
            Err(ClipError::NonFiniteNorm { .. }) => {
                status = SeedStatus::Diverged;
                break;
            }
            Err(e) => return Err(step_err(t, e.to_string())),
        };
        window.record(&step);
        let releases = match sigma {
            Some(_) => step.release.events,
            None => vec![DpEvent::NonPrivate],
        };
        let mut g = step.release.sum;
        ledger.record(plan.step_event(releases));
        g.mapv_inplace(|v| v / plan.expected_batch_size);
        model.add_l2_gradient(params.view(), &mut g);
        if g.iter().any(|v| !v.is_finite()) {
            status = SeedStatus::Diverged;
            break;
        }
        plan.optimizer
            .step_with_norm(&mut params, g.view(), lr, &mut opt_state, clean_norm_sq);
        observer.on_step(seed, t + 1, total);

        if next_eval.peek() == Some(&(t + 1)) {
            next_eval.next();
            if params.iter().any(|v| !v.is_finite()) {
                status = SeedStatus::Diverged;
                break;
            }
            let train_loss = (loss_count > 0).then(|| loss_sum / loss_count as f64);
            let row = row_at(
                t + 1,
                &params,
                &ledger,
                train_loss,
                Some(batch_size),
                &window,
            )?;
            if !(row.test_loss.is_finite()) {
                status = SeedStatus::Diverged;
                break;
            }
            observer.on_eval(seed, &row, total);
            rows.push(row);
            loss_sum = 0.0;
            loss_count = 0;
            window.reset();
        }
    }

    let last = rows
        .last()
        .cloned()
        .ok_or_else(|| step_err(0, "no evaluation".into()))?;
    let best = rows
        .iter()
        .map(|r| r.test_accuracy)
        .fold(f64::NEG_INFINITY, f64::max);
    let report = match plan.epsilon_of(&ledger) {
        None => None,
        Some(r) => Some(r.map_err(|e| step_err(last.step, e.to_string()))?),
    };
    let privacy = plan.privacy.as_ref();
    let summary = SummaryRow {
        seed,
        status,
        steps: last.step,
        epochs: last.epoch,
        final_test_accuracy: last.test_accuracy,
        best_test_accuracy: best,
        final_test_loss: last.test_loss,
        final_train_loss: last.train_loss,
        final_validation_accuracy: last.validation_accuracy,
        epsilon: report.as_ref().map(|r| r.epsilon),
        delta,
        order: report.as_ref().and_then(|r| r.order),
        accountant: privacy.map(|p| p.accountant.name().to_string()),
        noise_multiplier: privacy.map(|p| p.noise_multiplier),
        epsilon_guaranteed: privacy.is_some_and(|p| p.epsilon_guaranteed),
        noise_mode: match (privacy, &rng_noise) {
            (None, _) => "none".into(),
            (Some(_), NoiseSource::Seeded(_)) => "seeded".into(),
            (Some(_), NoiseSource::Secure(_)) => "secure".into(),
        },
        final_train_set_loss: last.train_set_loss,
        seconds: started.elapsed().as_secs_f64(),
        final_excess_risk: None,
        optimum_objective: None,
        smoothness: None,
        epsilon_rdp: None,
        rdp_delta: None,
    };
    Ok(SeedEnd::Finished(Box::new(SeedResult {
        rows,
        summary,
        ledger,
    })))
}

/// What the clipping policy did over the steps since the previous evaluation row.
#[derive(Default)]
struct ClipWindow {
    /// (C_t, noise std) of the last step.
    last: Option<(Option<f64>, f64)>,
    /// Sum and count of the policy's private clipped-fraction estimates.
    private_sum: f64,
    private_steps: u64,
    /// Examples clipped and examples seen (the non-private diagnostic).
    clipped: usize,
    examples: usize,
}

impl ClipWindow {
    fn record(&mut self, step: &crate::privacy::clip::StepRelease) {
        self.last = Some((step.clip_norm, step.noise_std));
        if let Some(f) = step.clipped_fraction_private {
            self.private_sum += f;
            self.private_steps += 1;
        }
        if step.clip_norm.is_some() {
            self.clipped += step.clipped_count_nonprivate;
            self.examples += step.batch_size_nonprivate;
        }
    }

    /// Start a new window; the last step's C and noise stay for the next row.
    fn reset(&mut self) {
        *self = ClipWindow {
            last: self.last,
            ..ClipWindow::default()
        };
    }
}

/// A seed's noise: the reproducible noise stream of its seed, or (`privacy.secure_noise = true`)
/// an OS-seeded cryptographic source that no seed reproduces.
pub(crate) enum NoiseSource {
    Seeded(ChaCha12Rng),
    Secure(SecureGaussian),
}

impl GaussianSource for NoiseSource {
    fn standard_normal(&mut self) -> f64 {
        match self {
            NoiseSource::Seeded(r) => r.standard_normal(),
            NoiseSource::Secure(r) => r.standard_normal(),
        }
    }

    fn add_scaled_normals(&mut self, out: &mut [f64], scale: f64) {
        match self {
            NoiseSource::Seeded(r) => r.add_scaled_normals(out, scale),
            NoiseSource::Secure(r) => r.add_scaled_normals(out, scale),
        }
    }
}

fn noise_source(exp: &Experiment, seed: u64) -> Result<NoiseSource, SecureRngError> {
    if exp.spec.privacy.as_ref().is_some_and(|p| p.secure_noise) {
        Ok(NoiseSource::Secure(SecureGaussian::from_os()?))
    } else {
        Ok(NoiseSource::Seeded(stream_rng(seed, STREAM_NOISE)))
    }
}

/// A 64-bit seed for stream `stream` of run seed `seed` (SplitMix64 of their combination), for
/// APIs that take a plain `u64` seed.
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
