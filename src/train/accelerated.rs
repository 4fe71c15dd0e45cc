//! The accelerated DP methods of Kuru, Birbil, Gürbüzbalaban and Yıldırım (2020) as a dpx run
//! (`[accelerated]` in the experiment file; method notes docs/methods/accelerated.md): the plan (step sizes,
//! momenta, MASG stages, per-step budgets ε_t, Laplace scales, the steps T' actually run, the
//! event of every step), F* of the problem, and the step loop of one seed.
//!
//! Room: `train` (wiring only). The objective and gradients come from
//! [`crate::model::binary_logistic`], the update rules and the gradient point from
//! [`crate::optim::accelerated`], the budgets from [`crate::privacy::noise_dividing`], the noise
//! from [`crate::privacy::mechanism::add_laplace_noise`] (the one place its scale is formed).
//!
//! One private step t:
//!
//! ```text
//! p       = plan.schedule[t]                       α_t, β_t, stage, restart
//! y       = state.gradient_point(method, p)        x_t, or z_t for NAG / MASG
//! B_t     = m of n without replacement              (all n rows in order when m = n)
//! g       = (1/m) Σ_{i∈B_t} clip₁(∇ℓ(y; u_i, z_i))  loss part only; clip₁ only for l1_clip
//! g      += Laplace(b_t)^d,  b_t = scale_t · S1/m   privacy::mechanism
//! ledger += [SampledWithoutReplacement(n, m,)] Laplace(scale_t)
//! g      += μ y                                     the penalty: data-independent, after noise
//! state.step(method, g, p)                          x_{t+1}
//! ```
//!
//! With `--checkpoint-every` a seed saves its iterates (x_t, x_{t−1}, the EMA), the sampling and
//! noise streams' positions, the ledger and the rows so far (`train::checkpoint`), and a resumed
//! seed continues bit for bit.
//!
//! F* (for the excess risk F(x_t) − F* on every evaluation row) is computed by Newton's method to
//! ‖∇F‖ ≤ 1e−12 and cached in `<data dir>/cache/binary_logistic_optimum/<md5>.txt`, where the MD5
//! is that of the training features (as f64), labels and μ: one file per dataset and μ.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ndarray::Array1;

use super::TrainError;
use super::checkpoint::{self, Checkpointing, Iterates, NoiseState, SeedState};
use super::metrics::{MetricsRow, SeedStatus, SummaryRow};
use super::prepare::{Experiment, PreparedData};
use super::seed::{Observer, STREAM_NOISE, STREAM_SAMPLING, SeedEnd, SeedResult, stream_rng};
use crate::config::kinds::{AcceleratedMethodKind, BoundConstantsKind, LaplaceParameterKind};
use crate::config::spec::{
    AcceleratedSpec, ExperimentSpec, MomentumSpec, SensitivitySpec, SmoothnessSpec,
};
use crate::config::{ConfigError, Location};
use crate::data::sampler::FixedSizeSampler;
use crate::model::binary_logistic::{BinaryLogistic, Smoothness};
use crate::optim::accelerated::{
    AcceleratedMethod, AcceleratedState, MasgStages, MomentumRule, ProblemConstants, StepParams,
    step_schedule,
};
use crate::privacy::accountant::{
    AccountantKind, AccountantOptions, AccountingError, new_accountant,
};
use crate::privacy::event::{DpEvent, EventLedger, NeighbouringRelation};
use crate::privacy::mechanism::add_laplace_noise;
use crate::privacy::noise_dividing::{
    BoundConstants, BoundInputs, ScoreInputs, cube_root_split, laplace_scale_for, uniform_split,
};

/// The planned accelerated run: everything that does not depend on random draws.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceleratedPlan {
    pub method: AcceleratedMethod,
    pub constants: ProblemConstants,
    /// Steps T of the config.
    pub planned_steps: u64,
    /// Steps run: T' with `select_steps`, else T.
    pub steps: u64,
    /// α_t, β_t, stage and restart of every step run.
    pub schedule: Vec<StepParams>,
    /// ε_t of every step run (Σ = ε).
    pub step_epsilons: Vec<f64>,
    /// The Laplace scale of every step relative to the batch mean's L1 sensitivity S1/m, as
    /// drawn (and recorded): 1/ε0_t, or 1/(√2 ε0_t) with `laplace_parameter = std_compat`.
    pub scales: Vec<f64>,
    /// S1.
    pub l1_sensitivity: f64,
    /// L1 clip norm of the loss gradients (`None`: bounded features, no clipping).
    pub l1_clip_norm: Option<f64>,
    pub dataset_size: u64,
    pub batch_size: u64,
    /// The target ε.
    pub epsilon: f64,
    /// δ of the RDP ε reported beside the pure ε.
    pub rdp_delta: f64,
    /// x_0.
    pub init_value: f64,
    /// ln score(τ) of the T' choice for τ = 1..T (Remark 4.1; empty without `select_steps`).
    pub log_scores: Vec<f64>,
    /// False when an assumption of the guarantee fails (see `warnings`).
    pub epsilon_guaranteed: bool,
    pub warnings: Vec<String>,
}

impl AcceleratedPlan {
    /// Plan `acc` on the training problem `train` (n = `train.len()`).
    pub fn new(
        spec: &ExperimentSpec,
        acc: &AcceleratedSpec,
        train: &BinaryLogistic,
    ) -> Result<Self, TrainError> {
        let at = || Location::file(&spec.source);
        let n = train.len();
        let m = spec.train.sampler.batch_size().min(n).max(1);
        let planned_steps = spec.planned_steps(n);
        let mu = train.l2();
        let mut warnings = Vec::new();
        let smoothness = match acc.smoothness {
            SmoothnessSpec::Gram => {
                warnings.push("accelerated.smoothness = \"gram\": L is computed from the training data outside the privacy budget (as the paper does); give L as a number for a guarantee".to_string());
                train.smoothness(Smoothness::Gram)
            }
            SmoothnessSpec::Logistic => {
                warnings.push("accelerated.smoothness = \"logistic\": L is computed from the training data outside the privacy budget; give L as a number for a guarantee".to_string());
                train.smoothness(Smoothness::Logistic)
            }
            SmoothnessSpec::Value(l) => l,
        };
        if smoothness < mu {
            return Err(TrainError::Config(ConfigError::OutOfRange {
                at: at(),
                key: "accelerated.smoothness".into(),
                expected: format!("L ≥ μ = model.l2 = {mu}"),
                found: smoothness.to_string(),
            }));
        }
        let constants = ProblemConstants {
            smoothness,
            strong_convexity: mu,
        };
        let method = match acc.method {
            AcceleratedMethodKind::Gd => AcceleratedMethod::Gd,
            AcceleratedMethodKind::HeavyBall => AcceleratedMethod::HeavyBall,
            AcceleratedMethodKind::HeavyBallEma => AcceleratedMethod::HeavyBallEma,
            AcceleratedMethodKind::Nesterov => AcceleratedMethod::Nesterov,
            AcceleratedMethodKind::Masg => AcceleratedMethod::Masg,
        };
        let momentum = match acc.momentum {
            MomentumSpec::StronglyConvex => MomentumRule::StronglyConvex,
            MomentumSpec::Value(momentum) => MomentumRule::Value { momentum },
        };
        let stages = MasgStages {
            p: acc.masg_p,
            n1: acc.masg_first_stage,
        };
        let mut schedule = step_schedule(
            method,
            acc.step_constant,
            momentum,
            constants,
            stages,
            planned_steps,
        );
        let budget = |e: crate::privacy::noise_dividing::BudgetError| {
            TrainError::Config(ConfigError::OutOfRange {
                at: at(),
                key: "accelerated".into(),
                expected: "a budget split the noise-dividing mechanism can form".into(),
                found: e.to_string(),
            })
        };
        let l1_sensitivity = acc.sensitivity.l1_sensitivity();
        let mut log_scores = Vec::new();
        let step_epsilons = if acc.noise_dividing {
            let alphas: Vec<f64> = schedule.iter().map(|p| p.alpha).collect();
            let stage_ids: Vec<u32> = schedule.iter().map(|p| p.stage).collect();
            let bound = BoundInputs {
                alphas: &alphas,
                stages: &stage_ids,
                mu,
                smoothness,
                constants: match acc.bound_constants {
                    BoundConstantsKind::Paper => BoundConstants::Paper,
                    BoundConstantsKind::Code => BoundConstants::Code,
                },
            };
            let steps = if acc.select_steps {
                let score = ScoreInputs {
                    e0: acc.initial_error,
                    dim: train.dim(),
                    l1_sensitivity,
                    n: n as f64,
                    epsilon: acc.epsilon,
                };
                log_scores = bound.log_scores(&score).map_err(budget)?;
                bound.select_steps(&score).map_err(budget)?
            } else {
                planned_steps
            };
            schedule.truncate(steps as usize);
            let (_, logs) = BoundInputs {
                alphas: &alphas[..steps as usize],
                stages: &stage_ids[..steps as usize],
                ..bound
            }
            .log_weights()
            .map_err(budget)?;
            cube_root_split(acc.epsilon, &logs).map_err(budget)?
        } else {
            uniform_split(acc.epsilon, planned_steps).map_err(budget)?
        };
        let factor = match acc.laplace_parameter {
            LaplaceParameterKind::Scale => 1.0,
            LaplaceParameterKind::StdCompat => {
                warnings.push("accelerated.laplace_parameter = \"std_compat\": the noise is drawn with scale b/√2 as in the authors' code, so the epsilon spent (reported) exceeds accelerated.epsilon".to_string());
                std::f64::consts::FRAC_1_SQRT_2
            }
        };
        let scales = step_epsilons
            .iter()
            .map(|e| laplace_scale_for(*e, n as u64, m as u64).map(|s| s * factor))
            .collect::<Result<Vec<f64>, _>>()
            .map_err(budget)?;
        let l1_clip_norm = match acc.sensitivity {
            SensitivitySpec::FeatureBound { .. } => None,
            SensitivitySpec::L1Clip { l1_clip_norm } => Some(l1_clip_norm),
        };
        let mut plan = AcceleratedPlan {
            method,
            constants,
            planned_steps,
            steps: schedule.len() as u64,
            schedule,
            step_epsilons,
            scales,
            l1_sensitivity,
            l1_clip_norm,
            dataset_size: n as u64,
            batch_size: m as u64,
            epsilon: acc.epsilon,
            rdp_delta: acc.rdp_delta,
            init_value: acc.init_value,
            log_scores,
            epsilon_guaranteed: warnings.is_empty(),
            warnings,
        };
        plan.keep_within_budget(factor == 1.0).map_err(|found| {
            TrainError::Config(ConfigError::OutOfRange {
                at: at(),
                key: "accelerated.epsilon".into(),
                expected: "a budget whose per-step Laplace scales are finite and positive".into(),
                found,
            })
        })?;
        Ok(plan)
    }

    /// Refuse a plan whose accounted ε is not finite (a budget so large that the per-step
    /// inversion overflows), and — when the noise is drawn at the planned scale — widen every
    /// scale by a few ulps until the accounted ε (Σ ε_t in floating point) is at most the budget,
    /// so rounding never writes more than `accelerated.epsilon` (0.30000000000000004 for 0.3).
    fn keep_within_budget(&mut self, exact_scales: bool) -> Result<(), String> {
        let spent = |p: &Self| {
            p.epsilon_of(&p.planned_ledger(p.steps))
                .map_err(|e| e.to_string())
        };
        let mut eps = spent(self)?;
        if !eps.is_finite() || self.scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(format!(
                "{} (the accounted epsilon would be {eps})",
                self.epsilon
            ));
        }
        if !exact_scales {
            return Ok(());
        }
        for _ in 0..64 {
            if eps <= self.epsilon {
                return Ok(());
            }
            for s in &mut self.scales {
                *s *= 1.0 + 4.0 * f64::EPSILON;
            }
            eps = spent(self)?;
        }
        Err(format!(
            "{} (rounding keeps the accounted epsilon at {eps})",
            self.epsilon
        ))
    }

    /// The event of a step whose Laplace mechanism has relative scale `scale`.
    ///
    /// `scale` is relative to the paper's sensitivity S1/m, which is already the replace-one
    /// distance (S1 = 2 × one example's L1 bound, the two examples' gradients pointing apart).
    /// Events carry noise relative to the add/remove sensitivity (one example's bound, S1/(2m)),
    /// and accountants apply the replace-one distance 2 themselves
    /// (`NeighbouringRelation::sensitivity_factor`), so the event's scale is 2·`scale`: the same
    /// noise b_t, the same ε_t = 1/`scale`.
    pub fn event_for(&self, scale: f64) -> DpEvent {
        let lap = DpEvent::laplace(scale * NeighbouringRelation::ReplaceOne.sensitivity_factor());
        if self.batch_size >= self.dataset_size {
            lap
        } else {
            DpEvent::sampled_without_replacement(self.dataset_size, self.batch_size, lap)
        }
    }

    /// The ledger of the first `steps` steps of the plan.
    pub fn planned_ledger(&self, steps: u64) -> EventLedger {
        let mut ledger = EventLedger::new();
        for s in self.scales.iter().take(steps as usize) {
            ledger.record(self.event_for(*s));
        }
        ledger
    }

    fn options() -> AccountantOptions {
        AccountantOptions {
            relation: NeighbouringRelation::ReplaceOne,
            ..AccountantOptions::default()
        }
    }

    /// Pure ε (basic composition with SWOR amplification) of `ledger`.
    pub fn epsilon_of(&self, ledger: &EventLedger) -> Result<f64, AccountingError> {
        let mut acc = new_accountant(AccountantKind::Pure, &Self::options())?;
        acc.compose(&ledger.to_event(), 1)?;
        Ok(acc.epsilon(0.0)?.epsilon)
    }

    /// ε at `rdp_delta` of the same events under the RDP accountant (Laplace RDP, Mironov 2017
    /// Prop. 6; on a batch sampled without replacement, the bound of Wang, Balle and
    /// Kasiviswanathan 2019, Thm. 9), or the reason it cannot be computed.
    pub fn rdp_epsilon_of(&self, ledger: &EventLedger) -> Result<f64, AccountingError> {
        let mut acc = new_accountant(AccountantKind::Rdp, &Self::options())?;
        acc.compose(&ledger.to_event(), 1)?;
        Ok(acc.epsilon(self.rdp_delta)?.epsilon)
    }

    /// b_t = scale_t · S1/m, the absolute Laplace scale of step t.
    pub fn laplace_scale_at(&self, t: usize) -> f64 {
        self.scales[t] * self.l1_sensitivity / self.batch_size as f64
    }
}

/// The accelerated side of an experiment: the problems, F* and the plan.
#[derive(Debug, Clone)]
pub struct AcceleratedExperiment {
    pub train: BinaryLogistic,
    pub test: BinaryLogistic,
    /// ‖u_i‖₁ of every training example (for L1 clipping).
    pub feature_l1_norms: Vec<f64>,
    /// F* of the training problem.
    pub optimum_objective: f64,
    /// Where F* came from (computed, or read from the cache file).
    pub optimum_note: String,
    pub plan: AcceleratedPlan,
}

impl AcceleratedExperiment {
    /// Check the data against `acc`, compute (or read) F* and plan the run.
    pub fn build(
        spec: &ExperimentSpec,
        acc: &AcceleratedSpec,
        data: &PreparedData,
        data_dir: &Path,
    ) -> Result<Self, TrainError> {
        let mismatch = |key: &str, reason: String| {
            TrainError::Config(ConfigError::DataMismatch {
                at: Location::file(&spec.source),
                key: key.into(),
                reason,
            })
        };
        if data.train.num_classes > 2 || data.train.labels.iter().any(|&l| l > 1) {
            return Err(mismatch(
                "accelerated",
                format!(
                    "binary logistic regression needs labels 0/1; the data has {} classes",
                    data.train.num_classes
                ),
            ));
        }
        let mu = spec.model.l2;
        let train = BinaryLogistic::new(data.train.features.view(), &data.train.labels, mu);
        let test = BinaryLogistic::new(data.test.features.view(), &data.test.labels, mu);
        let feature_l1_norms = train.feature_l1_norms();
        if let SensitivitySpec::FeatureBound { feature_l1_bound } = acc.sensitivity
            && let Some((i, v)) = feature_l1_norms
                .iter()
                .enumerate()
                .find(|(_, v)| v.is_nan() || **v > feature_l1_bound)
        {
            return Err(mismatch(
                "accelerated.feature_l1_bound",
                format!(
                    "training example {i} has ‖u‖₁ = {v}, above the declared bound {feature_l1_bound} (raise the bound, or clip with accelerated.sensitivity = \"l1_clip\")"
                ),
            ));
        }
        let (optimum_objective, optimum_note) = optimum_objective(&train, data_dir);
        let plan = AcceleratedPlan::new(spec, acc, &train)?;
        Ok(AcceleratedExperiment {
            train,
            test,
            feature_l1_norms,
            optimum_objective,
            optimum_note,
            plan,
        })
    }
}

/// The cache file of F* for `problem`: `<data_dir>/cache/binary_logistic_optimum/<md5>.txt`.
pub fn optimum_cache_path(problem: &BinaryLogistic, data_dir: &Path) -> PathBuf {
    data_dir
        .join("cache")
        .join("binary_logistic_optimum")
        .join(format!("{}.txt", fingerprint(problem)))
}

/// MD5 (hex) of the problem: a version tag, n, d, μ, the features (f64, little endian, row
/// major) and the labels.
pub fn fingerprint(problem: &BinaryLogistic) -> String {
    let f = problem.features();
    let mut bytes = Vec::with_capacity(32 + 8 * (f.len() + problem.len()));
    bytes.extend_from_slice(b"binary_logistic/v1");
    bytes.extend_from_slice(&(problem.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&(problem.dim() as u64).to_le_bytes());
    bytes.extend_from_slice(&problem.l2().to_le_bytes());
    for v in f.iter() {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    for z in problem.signs() {
        bytes.extend_from_slice(&z.to_le_bytes());
    }
    // Reading from memory cannot fail.
    crate::data::fetch::md5_hex(bytes.as_slice()).unwrap_or_default()
}

/// F* of `problem`, read from the cache when present and valid, else computed (Newton to
/// ‖∇F‖ ≤ 1e−12) and cached. The note says which, and where.
pub fn optimum_objective(problem: &BinaryLogistic, data_dir: &Path) -> (f64, String) {
    let path = optimum_cache_path(problem, data_dir);
    // The cache is a few lines: anything larger is not ours, and is recomputed.
    if let Ok(text) = crate::text_file::read_text_capped(&path, 64 * 1024, "F* cache file")
        && let Some(v) = text
            .lines()
            .find_map(|l| l.strip_prefix("optimum_objective = "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
    {
        return (v, format!("F* read from {}", path.display()));
    }
    let opt = problem.minimise(1e-12);
    let text = format!(
        "# F* of the binary logistic problem (dpx; Newton's method)\noptimum_objective = {:?}\ngradient_norm = {:?}\niterations = {}\n",
        opt.objective, opt.gradient_norm, opt.iterations
    );
    let stored = path
        .parent()
        .map(|p| std::fs::create_dir_all(p).is_ok())
        .unwrap_or(false)
        && crate::report::atomic::write_atomic(&path, text.as_bytes()).is_ok();
    let note = if stored {
        format!(
            "F* computed ({} Newton steps, gradient norm {:.1e}) and cached in {}",
            opt.iterations,
            opt.gradient_norm,
            path.display()
        )
    } else {
        format!(
            "F* computed ({} Newton steps); could not cache it in {}",
            opt.iterations,
            path.display()
        )
    };
    (opt.objective, note)
}

/// Train one seed of an accelerated experiment.
pub fn train_seed(
    exp: &Experiment,
    acc: &AcceleratedExperiment,
    seed: u64,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Result<SeedEnd, TrainError> {
    train_seed_checkpointed(exp, acc, seed, observer, cancel, None, None)
}

/// [`train_seed`] that writes checkpoints as `checkpoints` says and, given `resume` (a
/// checkpoint of this seed), continues from it: the iterates, the sampling and noise streams'
/// positions, the ledger and the rows so far (`train::checkpoint`).
pub fn train_seed_checkpointed(
    exp: &Experiment,
    acc: &AcceleratedExperiment,
    seed: u64,
    observer: &dyn Observer,
    cancel: &AtomicBool,
    checkpoints: Option<&Checkpointing>,
    resume: Option<SeedState>,
) -> Result<SeedEnd, TrainError> {
    let started = Instant::now();
    let plan = &acc.plan;
    let problem = &acc.train;
    let n = problem.len();
    let m = plan.batch_size as usize;
    let d = problem.dim();
    let mu = problem.l2();
    let step_err = |step: u64, reason: String| TrainError::Step { seed, step, reason };
    let sampler = FixedSizeSampler::new(n, m)?;
    let mut rng_sampling = stream_rng(seed, STREAM_SAMPLING);
    let mut rng_noise = stream_rng(seed, STREAM_NOISE);
    let mut state = AcceleratedState::new(Array1::from_elem(d, plan.init_value));
    let mut ledger = EventLedger::new();
    let mut rows_buf: Vec<usize> = Vec::with_capacity(m);
    let all_rows: Vec<usize> = (0..n).collect();
    let total = plan.steps;
    let mut out_rows = Vec::new();
    let mut seconds_before = 0.0;
    let mut status = SeedStatus::Completed;

    let row_at =
        |step: u64, x: &Array1<f64>, ledger: &EventLedger| -> Result<MetricsRow, TrainError> {
            let objective = problem.objective(x.view());
            let epsilon = plan
                .epsilon_of(ledger)
                .map_err(|e| step_err(step, e.to_string()))?;
            // The values of the last step taken; at step 0 those of the first step (as `lr`).
            let last = (step as usize).saturating_sub(1);
            let p = plan.schedule.get(last).copied();
            Ok(MetricsRow {
                seed,
                step,
                epoch: step as f64 * m as f64 / n as f64,
                lr: p.map_or(0.0, |p| p.alpha),
                noise_multiplier: None,
                noise_std: None,
                clip_norm: plan.l1_clip_norm,
                batch_size: (step > 0).then_some(m),
                epsilon: Some(epsilon),
                delta: Some(0.0),
                train_loss: Some(problem.mean_loss(x.view())),
                test_loss: acc.test.mean_loss(x.view()),
                test_accuracy: acc.test.accuracy(x.view()),
                validation_loss: None,
                validation_accuracy: None,
                clipped_fraction_private: None,
                clipped_fraction_nonprivate: None,
                train_set_loss: None,
                train_set_accuracy: None,
                ema_test_loss: None,
                ema_test_accuracy: None,
                ema_validation_accuracy: None,
                gradient_error_nonprivate: None,
                objective: Some(objective),
                excess_risk: Some(objective - acc.optimum_objective),
                laplace_scale: p.map(|_| plan.laplace_scale_at(last)),
                step_epsilon: p.map(|_| plan.step_epsilons[last]),
                step_size: p.map(|p| p.alpha),
                momentum: p.map(|p| p.beta),
                stage: p.map(|p| p.stage),
            })
        };

    let start = match resume {
        None => {
            let first = row_at(0, &state.x, &ledger)?;
            observer.on_eval(seed, &first, total);
            out_rows.push(first);
            0
        }
        Some(saved) => {
            checkpoint::validate(exp, seed, &saved)
                .map_err(|e| step_err(saved.step, format!("checkpoint: {e}")))?;
            let (Some(it), NoiseState::Seeded { word_pos }) = (saved.iterates, saved.noise) else {
                return Err(step_err(saved.step, "checkpoint: no iterates".into()));
            };
            state.x = Array1::from(it.x);
            state.x_prev = Array1::from(it.x_prev);
            state.ema = Array1::from(it.ema);
            state.steps = it.steps;
            rng_sampling.set_word_pos(saved.sampling_word_pos);
            rng_noise.set_word_pos(word_pos);
            ledger = saved.ledger;
            out_rows = saved.rows;
            seconds_before = saved.seconds;
            observer.on_step(seed, saved.step, total);
            saved.step
        }
    };
    let mut next_eval = eval_steps(exp, total)
        .into_iter()
        .filter(|&s| s > start)
        .peekable();
    // The seed's state after `step` steps, for a checkpoint.
    let save = |c: &Checkpointing,
                step: u64,
                state: &AcceleratedState,
                rng_sampling: &rand_chacha::ChaCha12Rng,
                rng_noise: &rand_chacha::ChaCha12Rng,
                ledger: &EventLedger,
                rows: &[MetricsRow]|
     -> Result<(), TrainError> {
        let snapshot = SeedState {
            step,
            seconds: seconds_before + started.elapsed().as_secs_f64(),
            params: Vec::new(),
            optimizer: Default::default(),
            clip: crate::privacy::clip::ClipState::Stateless,
            shuffle: None,
            sampling_word_pos: rng_sampling.get_word_pos(),
            augment_word_pos: 0,
            ema: None,
            snapshots: Vec::new(),
            noise: NoiseState::Seeded {
                word_pos: rng_noise.get_word_pos(),
            },
            ledger: ledger.clone(),
            rows: rows.to_vec(),
            window: Default::default(),
            loss_sum: 0.0,
            loss_count: 0,
            iterates: Some(Iterates {
                x: state.x.to_vec(),
                x_prev: state.x_prev.to_vec(),
                ema: state.ema.to_vec(),
                steps: state.steps,
            }),
            correlated_noise: None,
        };
        let bytes = checkpoint::encode(&snapshot, c.resolved_config, seed);
        (c.sink.save(seed, &bytes))
            .map_err(|e| step_err(step, format!("writing a checkpoint: {e}")))
    };
    for t in start as usize..total as usize {
        if cancel.load(Ordering::Relaxed) {
            if let Some(c) = checkpoints.filter(|c| c.on_interrupt && t as u64 > start) {
                save(
                    c,
                    t as u64,
                    &state,
                    &rng_sampling,
                    &rng_noise,
                    &ledger,
                    &out_rows,
                )?;
            }
            return Ok(SeedEnd::Interrupted);
        }
        let p = plan.schedule[t];
        let y = state.gradient_point(plan.method, &p).to_owned();
        let rows: &[usize] = if m >= n {
            &all_rows
        } else {
            sampler.next_batch_into(&mut rng_sampling, &mut rows_buf);
            &rows_buf
        };
        let mut coef = problem.coefficients(y.view(), rows);
        if let Some(c) = plan.l1_clip_norm {
            for (k, &i) in rows.iter().enumerate() {
                let norm = coef[k].abs() * acc.feature_l1_norms[i];
                if norm > c {
                    coef[k] *= c / norm;
                }
            }
        }
        let mut g = problem.weighted_feature_sum(rows, &coef);
        g.mapv_inplace(|v| v / m as f64);
        let scale = plan.scales[t];
        // The same b_t = scale_t·S1/m, formed from the event's scale (relative to the add/remove
        // sensitivity S1/(2m); see `AcceleratedPlan::event_for`): powers of two, exact bits.
        let event = plan.event_for(scale);
        let k = NeighbouringRelation::ReplaceOne.sensitivity_factor();
        add_laplace_noise(
            g.view_mut(),
            scale * k,
            plan.l1_sensitivity / k / m as f64,
            &mut rng_noise,
        )
        .map_err(|e| step_err(t as u64, e.to_string()))?;
        ledger.record(event);
        g.scaled_add(mu, &y);
        state.step(plan.method, g.view(), &p);
        observer.on_step(seed, t as u64 + 1, total);
        if state.x.iter().any(|v| !v.is_finite()) {
            status = SeedStatus::Diverged;
            break;
        }
        if next_eval.peek() == Some(&(t as u64 + 1)) {
            next_eval.next();
            let row = row_at(t as u64 + 1, &state.x, &ledger)?;
            observer.on_eval(seed, &row, total);
            out_rows.push(row);
        }
        let done = t as u64 + 1;
        if let Some(c) = checkpoints
            && c.every.is_some_and(|every| done.is_multiple_of(every))
            && done < total
        {
            save(
                c,
                done,
                &state,
                &rng_sampling,
                &rng_noise,
                &ledger,
                &out_rows,
            )?;
        }
    }

    let last = out_rows
        .last()
        .cloned()
        .ok_or_else(|| step_err(0, "no evaluation".into()))?;
    let best = out_rows
        .iter()
        .map(|r| r.test_accuracy)
        .fold(f64::NEG_INFINITY, f64::max);
    let epsilon = plan
        .epsilon_of(&ledger)
        .map_err(|e| step_err(last.step, e.to_string()))?;
    let summary = SummaryRow {
        seed,
        status,
        steps: last.step,
        epochs: last.epoch,
        final_test_accuracy: last.test_accuracy,
        best_test_accuracy: best,
        final_test_loss: last.test_loss,
        final_train_loss: last.train_loss,
        final_validation_accuracy: None,
        epsilon: Some(epsilon),
        delta: Some(0.0),
        order: None,
        accountant: Some(AccountantKind::Pure.name().to_string()),
        noise_multiplier: None,
        epsilon_guaranteed: plan.epsilon_guaranteed,
        noise_mode: "seeded".into(),
        final_train_set_loss: None,
        seconds: seconds_before + started.elapsed().as_secs_f64(),
        final_excess_risk: last.excess_risk,
        optimum_objective: Some(acc.optimum_objective),
        smoothness: Some(plan.constants.smoothness),
        epsilon_rdp: plan.rdp_epsilon_of(&ledger).ok(),
        rdp_delta: Some(plan.rdp_delta),
        final_ema_test_accuracy: None,
        mean_gradient_error_nonprivate: None,
    };
    Ok(SeedEnd::Finished(Box::new(SeedResult {
        rows: out_rows,
        summary,
        ledger,
        params: None,
        ema_params: None,
        snapshots: Vec::new(),
    })))
}

/// Evaluation steps: 0, every `train.eval_every` steps (epochs count as ⌈n/m⌉ steps), the last.
pub(crate) fn eval_steps(exp: &Experiment, total: u64) -> Vec<u64> {
    use crate::config::spec::Every;
    let acc = exp.accelerated.as_ref();
    let per_epoch = acc
        .map(|a| a.plan.dataset_size.div_ceil(a.plan.batch_size.max(1)))
        .unwrap_or(1);
    let every = match exp.spec.train.eval_every {
        Every::Steps(s) => s.max(1),
        Every::Epochs(e) => e.max(1).saturating_mul(per_epoch),
    };
    let mut out: Vec<u64> = (0..=total / every).map(|k| k * every).collect();
    if out.last() != Some(&total) {
        out.push(total);
    }
    out
}
