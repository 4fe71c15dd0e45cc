//! The audit room: an empirical lower bound on ε by canaries, for `dpx audit CONFIG`.
//!
//! Method: one-run auditing (Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1)
//! Training Run", NeurIPS 2023), white-box, with Dirac gradient canaries (their §7):
//!
//! 1. m canaries, each included in the training set independently with probability 1/2
//!    (stream [`STREAM_CANARY_INCLUSION`] of the audit run's seed). An included canary is one
//!    more example: Poisson-sampled at rate q at every step like any other (its own stream,
//!    [`STREAM_CANARY_SAMPLING`]); its per-sample gradient is 2C·e_j on its own coordinate j at
//!    the steps it is active and zero elsewhere (layout in [`canary`]).
//! 2. Training is the real DP-SGD step of `dpx run` (`train::run`): the same plan (steps, σ_t,
//!    η_t, q, C, optimizer), the same data sampler and streams, the same per-sample gradients
//!    of the real data and model, the same clipping and noise (`privacy::clip::flat`, so the
//!    canary is clipped to C like any example), the same events in the ledger. With no canaries
//!    the audit's model is bit-for-bit the model `dpx run` trains for that seed (a test).
//! 3. The auditor sees every released noisy sum (the white-box threat model of DP-SGD's proof)
//!    and, as DP allows an adversary to, knows every non-canary example and which of them were
//!    sampled at each step: it subtracts their clipped sum, leaving at canary i's coordinate
//!    x_t = b_t + σ_t z_t (in units of C), with b_t = 1 if canary i was included and sampled.
//!    (Poisson sampling is independent per example, and the accountant's bound for the sampled
//!    Gaussian holds conditionally on the other examples' batch, so this knowledge is covered
//!    by the guarantee being audited.)
//! 4. Score: the log-likelihood ratio of "included" against "excluded" over the canary's active
//!    steps, Σ_t ln(1 − q + q·exp((x_t − 1/2)/σ_t²)) (Neyman–Pearson; with σ_t = 0, x_t itself).
//!    The auditor guesses "included" for the k₊ highest scores and "excluded" for the k₋ lowest.
//! 5. v correct of r = k₊ + k₋ guesses become ε_lower by Theorem 5.2 of the paper, computed
//!    exactly ([`bound`]) at the plan's δ: with probability ≥ `confidence`, the mechanism is not
//!    (ε, δ)-DP for any ε < ε_lower. ε_lower > ε (the accountant's) would show a privacy bug.
//!
//! Several independent runs pool their guesses: the runs together are one mechanism that is
//! (ε, δ)-DP with respect to each of their m·runs canaries, so the pooled counts are audited
//! the same way (one more, tighter line).
//!
//! A control switches the noise off ([`AuditNoise::Off`]) while everything else stays: the
//! audit must then find ε_lower far above the claim. It audits the un-noised mechanism; the ε
//! printed beside it remains the accountant's ε for the configured noise.
//!
//! Limits: one-run auditing is known to be loose (ε_lower is far below ε for realistic
//! budgets) and cannot certify more than about ln(r) whatever the leakage; only Poisson
//! sampling with flat clipping is audited (the accountant's guarantee assumes it).

pub mod bound;
pub mod canary;

use std::path::PathBuf;

use ndarray::Array1;
use rand::Rng;

use crate::config::spec::{ClipSpec, Sampler as SpecSampler};
use crate::data::sampler::PoissonSampler;
use crate::grad::PerSampleGradients;
use crate::privacy::accountant::PrivacyReport;
use crate::privacy::clip::ClipError;
use crate::privacy::clip::flat::{clipped_sum, privatize_flat};
use crate::privacy::event::{DpEvent, EventLedger};
use crate::privacy::secure_rng::SecureGaussian;
use crate::privacy::special::log_add_exp;
use crate::train::TrainError;
use crate::train::prepare::Experiment;
use crate::train::seed::{NoiseSource, STREAM_NOISE, STREAM_SAMPLING, stream_rng};
use bound::{BoundError, epsilon_lower_bound};
use canary::{CanaryLayout, WithCanaries};

/// Stream id of the canaries' inclusion coins (distinct from a run's init, sampling, noise).
pub const STREAM_CANARY_INCLUSION: u64 = 101;
/// Stream id of the included canaries' Poisson sampling.
pub const STREAM_CANARY_SAMPLING: u64 = 102;

/// Whether the audited mechanism adds its noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditNoise {
    /// The configured noise (σ_t of the plan, seeded or secure as configured).
    Configured,
    /// No noise at all: the control, whose ε_lower must exceed the claim.
    Off,
}

/// What one audit run does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AuditOptions {
    /// Number of canaries m.
    pub canaries: usize,
    /// k₊: canaries guessed "included" (the highest scores).
    pub guess_included: usize,
    /// k₋: canaries guessed "excluded" (the lowest scores).
    pub guess_excluded: usize,
    /// 1 − β: the probability with which ε_lower is a valid lower bound.
    pub confidence: f64,
    pub noise: AuditNoise,
}

/// What can stop an audit.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The config describes a run this audit cannot audit.
    #[error("{}: {reason}", path.display())]
    Unsupported { path: PathBuf, reason: String },
    /// The options contradict each other.
    #[error("{reason}")]
    Options { reason: String },
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Bound(#[from] BoundError),
    /// Training produced a NaN or infinite loss, gradient or parameter.
    #[error("audit seed {seed}: training diverged at step {step} (NaN or infinite values)")]
    Diverged { seed: u64, step: u64 },
}

impl AuditError {
    /// True when the user's input (config or flags) is at fault.
    pub fn is_bad_input(&self) -> bool {
        match self {
            AuditError::Unsupported { .. } | AuditError::Options { .. } => true,
            AuditError::Train(e) => e.is_bad_input(),
            AuditError::Bound(_) | AuditError::Diverged { .. } => false,
        }
    }
}

/// One audit run: one training run with canaries, its guesses and its bound.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryRun {
    pub seed: u64,
    pub canaries: usize,
    /// How many canaries the coins included.
    pub included: usize,
    /// K: each canary is active at one step in K.
    pub slots: u64,
    /// r = k₊ + k₋.
    pub guesses: usize,
    /// v: correct guesses.
    pub correct: usize,
    pub epsilon_lower: f64,
    /// Test accuracy and loss of the model trained with the canaries.
    pub final_test_accuracy: f64,
    pub final_test_loss: f64,
    /// `seeded`, `secure` or `off` (the control).
    pub noise_mode: &'static str,
    /// The events the run recorded (equal to the plan's when the noise is on).
    pub ledger: EventLedger,
}

/// Check that `exp` is a run this audit can audit and that `opts` fit it.
pub fn check(exp: &Experiment, opts: &AuditOptions) -> Result<(), AuditError> {
    let path = exp.spec.source.clone();
    let unsupported = |reason: &str| AuditError::Unsupported {
        path: path.clone(),
        reason: reason.to_string(),
    };
    if exp.plan.privacy.is_none() {
        return Err(unsupported(
            "privacy: the experiment is not private (no [privacy] budget): there is no ε to audit",
        ));
    }
    if !matches!(exp.spec.train.sampler, SpecSampler::Poisson { .. }) {
        return Err(unsupported(
            "train.sampler: dpx audit audits Poisson sampling only (the sampling the accountant's ε assumes); set train.sampler = \"poisson\"",
        ));
    }
    if !matches!(exp.spec.clip, ClipSpec::Flat { .. }) {
        return Err(unsupported(
            "clip.policy: dpx audit audits flat clipping only",
        ));
    }
    if exp.plan.bandmf.is_some() {
        return Err(unsupported(
            "noise.mechanism: dpx audit audits independent noise only (its canary test assumes each step's noise is fresh); remove noise.mechanism = \"bandmf\"",
        ));
    }
    if exp.spec.train.augmentation.is_some() {
        return Err(unsupported(
            "train.augmentation: dpx audit trains on the examples as they are; remove [train.augmentation] to audit the same mechanism (the views change the gradients, not the release)",
        ));
    }
    if opts.guess_included + opts.guess_excluded > opts.canaries {
        return Err(AuditError::Options {
            reason: format!(
                "--guess-included {} plus --guess-excluded {} exceed --canaries {}",
                opts.guess_included, opts.guess_excluded, opts.canaries
            ),
        });
    }
    if !(opts.confidence > 0.0 && opts.confidence < 1.0) {
        return Err(AuditError::Options {
            reason: format!("--confidence must be in (0, 1), found {}", opts.confidence),
        });
    }
    Ok(())
}

/// The accountant's ε (and its order, for RDP) for the whole planned run: the claim audited.
pub fn claimed_epsilon(exp: &Experiment) -> Result<PrivacyReport, AuditError> {
    let plan = &exp.plan;
    match plan.epsilon_of(&plan.planned_ledger(plan.steps)) {
        Some(report) => report.map_err(|source| {
            AuditError::Train(TrainError::Accounting {
                path: exp.spec.source.clone(),
                source,
            })
        }),
        None => Err(AuditError::Unsupported {
            path: exp.spec.source.clone(),
            reason: "privacy: the experiment is not private: there is no ε to audit".into(),
        }),
    }
}

/// The per-step contribution to a canary's score of the residual `x` (in units of C) at noise
/// multiplier `sigma` and sample rate `q`: ln(1 − q + q·exp((x − 1/2)/σ²)), the log-likelihood
/// ratio of "sampled with probability q" against "absent" for N(b, σ²) observations; `x`
/// itself when σ = 0.
pub fn step_score(x: f64, sigma: f64, q: f64) -> f64 {
    if sigma > 0.0 {
        log_add_exp((-q).ln_1p(), q.ln() + (x - 0.5) / (sigma * sigma))
    } else {
        x
    }
}

/// Guess from the scores: "included" for the `k_in` highest, "excluded" for the `k_out`
/// lowest (ties broken by canary index). Returns (guesses, correct).
pub fn guess(scores: &[f64], included: &[bool], k_in: usize, k_out: usize) -> (usize, usize) {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let k_in = k_in.min(order.len());
    let k_out = k_out.min(order.len() - k_in);
    let right_in = order[..k_in].iter().filter(|&&i| included[i]).count();
    let right_out = order[order.len() - k_out..]
        .iter()
        .filter(|&&i| !included[i])
        .count();
    (k_in + k_out, right_in + right_out)
}

/// Train one run of `exp` with canaries (seed `seed`), score and guess them, and bound ε.
pub fn audit_seed(
    exp: &Experiment,
    seed: u64,
    opts: &AuditOptions,
) -> Result<CanaryRun, AuditError> {
    check(exp, opts)?;
    let plan = &exp.plan;
    let model = &exp.model;
    let train = &exp.data.train;
    let privacy = plan.privacy.as_ref().ok_or_else(|| AuditError::Options {
        reason: "not a private run".into(),
    })?;
    let clip_norm = plan.clip_norm.ok_or_else(|| AuditError::Unsupported {
        path: exp.spec.source.clone(),
        reason: "clip.clip_norm: a private run needs a clip norm".into(),
    })?;
    let q = plan.sample_rate;
    let step_err = |step: u64, reason: String| TrainError::Step { seed, step, reason };
    let diverged = |step: u64| AuditError::Diverged { seed, step };

    // The canaries: coins, layout, their own sampler.
    let num_params = model.num_params();
    let layout = CanaryLayout::new(opts.canaries, num_params);
    let mut coins = stream_rng(seed, STREAM_CANARY_INCLUSION);
    let included: Vec<bool> = (0..opts.canaries).map(|_| coins.random_bool(0.5)).collect();
    let members: Vec<usize> = (0..opts.canaries).filter(|&i| included[i]).collect();
    let canary_sampler = PoissonSampler::new(members.len(), q).map_err(TrainError::from)?;
    let mut rng_canaries = stream_rng(seed, STREAM_CANARY_SAMPLING);
    let mut scores = vec![0.0f64; opts.canaries];

    // The run itself, as `train::run::train_seed` does it (its set-up and step phases).
    let data_sampler = PoissonSampler::new(train.len(), q).map_err(TrainError::from)?;
    let mut params = exp.initial_params(seed);
    let mut opt_state = plan.optimizer.init_state(params.len());
    let mut rng_sampling = stream_rng(seed, STREAM_SAMPLING);
    let mut noise = if privacy_secure(exp) {
        NoiseSource::Secure(SecureGaussian::from_os().map_err(|e| step_err(0, e.to_string()))?)
    } else {
        NoiseSource::Seeded(stream_rng(seed, STREAM_NOISE))
    };
    let mut ledger = plan.initial_ledger();
    let groups = model.groups().to_vec();
    let mut indices = Vec::new();
    let mut sampled_members = Vec::new();
    let mut coordinates = Vec::new();

    for t in 0..plan.steps {
        let sigma = plan
            .noise_multiplier_at(t)
            .unwrap_or(privacy.noise_multiplier);
        let lr = plan.lr.at(t);
        data_sampler.next_batch_into(&mut rng_sampling, &mut indices);
        canary_sampler.next_batch_into(&mut rng_canaries, &mut sampled_members);
        coordinates.clear();
        coordinates.extend(
            sampled_members
                .iter()
                .map(|&k| members[k])
                .filter(|&i| layout.active(i, t))
                .map(|i| layout.coordinate(i)),
        );

        let x;
        let data_grads = if indices.is_empty() {
            None
        } else {
            x = crate::data::gather_rows(train.features.view(), &indices);
            let y: Vec<usize> = indices.iter().map(|&i| train.labels[i]).collect();
            let g = model
                .per_sample(params.view(), x.view(), &y)
                .map_err(|e| step_err(t, e.to_string()))?;
            if !g.losses().sum().is_finite() {
                return Err(diverged(t));
            }
            Some(g)
        };
        let data: Option<&dyn PerSampleGradients> =
            data_grads.as_ref().map(|g| g as &dyn PerSampleGradients);
        let batch = WithCanaries {
            data,
            coordinates: &coordinates,
            magnitude: 2.0 * clip_norm,
            num_params,
            groups: &groups,
        };

        let clean_norm_sq = if plan.clean_norm {
            let w = batch.norms().mapv(|n| {
                (if n > clip_norm { clip_norm / n } else { 1.0 }) / plan.expected_batch_size
            });
            Some(batch.weighted_sum(&w).iter().map(|v| v * v).sum::<f64>())
        } else {
            None
        };
        let clip_failed = |e: ClipError| match e {
            ClipError::NonFiniteNorm { .. } => diverged(t),
            e => AuditError::Train(step_err(t, e.to_string())),
        };
        let (mut g, releases, sigma_seen) = match opts.noise {
            AuditNoise::Configured => {
                let release =
                    privatize_flat(&batch, clip_norm, sigma, &mut noise).map_err(clip_failed)?;
                (release.sum, release.events, sigma)
            }
            AuditNoise::Off => (
                clipped_sum(&batch, clip_norm).map_err(clip_failed)?,
                vec![DpEvent::NonPrivate],
                0.0,
            ),
        };

        // The auditor's view: the release minus the clipped sum of the known data batch.
        let known = match data {
            Some(d) => clipped_sum(d, clip_norm).map_err(clip_failed)?,
            None => Array1::zeros(num_params),
        };
        for i in layout.active_at(t) {
            let j = layout.coordinate(i);
            let x = (g[j] - known[j]) / clip_norm;
            scores[i] += step_score(x, sigma_seen, q);
        }

        ledger.record(plan.step_event(t, releases));
        g.mapv_inplace(|v| v / plan.expected_batch_size);
        model.add_l2_gradient(params.view(), &mut g);
        model.mask_frozen(&mut g);
        if g.iter().any(|v| !v.is_finite()) {
            return Err(diverged(t));
        }
        plan.optimizer
            .step_with_norm(&mut params, g.view(), lr, &mut opt_state, clean_norm_sq);
    }
    if params.iter().any(|v| !v.is_finite()) {
        return Err(diverged(plan.steps));
    }
    let test = &exp.data.test;
    let (final_test_loss, final_test_accuracy) = model
        .evaluate(params.view(), test.features.view(), &test.labels)
        .map_err(|e| step_err(plan.steps, e.to_string()))?;

    let (guesses, correct) = guess(&scores, &included, opts.guess_included, opts.guess_excluded);
    let epsilon_lower = epsilon_lower_bound(
        opts.canaries as u64,
        guesses as u64,
        correct as u64,
        privacy.delta,
        opts.confidence,
    )?;
    Ok(CanaryRun {
        seed,
        canaries: opts.canaries,
        included: members.len(),
        slots: layout.slots,
        guesses,
        correct,
        epsilon_lower,
        final_test_accuracy,
        final_test_loss,
        noise_mode: match (opts.noise, &noise) {
            (AuditNoise::Off, _) => "off",
            (AuditNoise::Configured, NoiseSource::Seeded(_)) => "seeded",
            (AuditNoise::Configured, NoiseSource::Secure(_)) => "secure",
        },
        ledger,
    })
}

fn privacy_secure(exp: &Experiment) -> bool {
    exp.spec.privacy.as_ref().is_some_and(|p| p.secure_noise)
}

/// ε_lower of several runs pooled: their guesses together, audited as one mechanism over all
/// their canaries (each canary affects one run only).
pub fn pooled_epsilon_lower(
    runs: &[CanaryRun],
    delta: f64,
    confidence: f64,
) -> Result<f64, AuditError> {
    let canaries: u64 = runs.iter().map(|r| r.canaries as u64).sum();
    let guesses: u64 = runs.iter().map(|r| r.guesses as u64).sum();
    let correct: u64 = runs.iter().map(|r| r.correct as u64).sum();
    Ok(epsilon_lower_bound(
        canaries, guesses, correct, delta, confidence,
    )?)
}
