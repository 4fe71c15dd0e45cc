//! The privacy side of a planned run: the noise multipliers σ_t (calibrated to ε with the
//! configured accountant, or as given), the event of every step (sampling, rounds of
//! random allocation, fixed-order epochs and BandMF's b-min-separated sampling), the releases
//! of the data statistics made before training, and the banded strategy of BandMF noise.

use super::TrainingPlan;
use crate::config::spec::{Budget, ClipSpec, ExperimentSpec, NoiseSchedule, Sampler};
use crate::config::{ConfigError, Location, Standardize};
use crate::optim::Optimizer;
use crate::privacy::accountant::{AccountantKind, AccountantOptions, new_accountant};
use crate::privacy::bandmf::{self, BandedStrategy, Workload};
use crate::privacy::calibrate::{self, Target};
use crate::privacy::event::{DpEvent, EventLedger};
use crate::privacy::schedule::{self, NoiseShape};
use crate::train::TrainError;
use crate::train::influence::Influence;

/// The privacy side of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivacyPlan {
    /// The scale κ of the schedule, σ_t = κ·s_t (calibrated, or as given); σ for `constant`.
    pub noise_multiplier: f64,
    /// The shape s_t.
    pub schedule: NoiseShape,
    /// σ_t for every planned step: exactly what the run uses and the ledger records.
    pub sigmas: Vec<f64>,
    /// `noise.round_digits`: σ_t rounded down to this many significant digits.
    pub round_digits: Option<u32>,
    pub delta: f64,
    pub accountant: AccountantKind,
    pub options: AccountantOptions,
    /// The ε the run is calibrated to or stops at (`None` when σ is given and ε only reported).
    pub target_epsilon: Option<f64>,
    /// Whether σ was calibrated from `privacy.epsilon`.
    pub calibrated: bool,
    /// False when an assumption of the accountant fails (see `warnings`).
    pub epsilon_guaranteed: bool,
    /// Why the guarantee is weakened, one line each.
    pub warnings: Vec<String>,
    /// Releases made before the first step, which every seed's ledger starts with: the two
    /// Gaussian releases of `data.standardize = "private"` and the one of the private PCA
    /// ([`statistics_events`]).
    pub prefix: Vec<DpEvent>,
}

/// The releases of the data statistics, in the order they are made. `data.standardize =
/// "private"`: the noisy sums of clipped per-example means and of clipped per-example second
/// moments, each a Gaussian mechanism of multiplier `data.standardize_noise_multiplier` on the
/// whole training set (no sampling; add/remove-one sensitivity = its clip norm, as each example
/// adds one clipped vector); none for every other standardisation.
///
/// Then the release of the private PCA (`data.pca_noise_multiplier`): the upper triangle of the
/// unit-normalised rows' second-moment matrix, one Gaussian mechanism of that multiplier on the
/// whole training set (add/remove-one L2 sensitivity 1; `data::private_pca`).
pub fn statistics_events(spec: &ExperimentSpec) -> Vec<DpEvent> {
    let mut events = match spec.data.private_standardization {
        Some(p) => vec![DpEvent::gaussian(p.noise_multiplier); 2],
        None => Vec::new(),
    };
    if let Some(p) = spec.data.private_pca {
        events.push(DpEvent::gaussian(p.noise_multiplier));
    }
    events
}

/// Banded matrix-factorization noise (`privacy::bandmf`) with b-min-separated Poisson sampling
/// (Choquette-Choo et al. 2023, arXiv 2306.08153, cyclic Poisson sampling and its amplification theorem): every example belongs to
/// one of b groups (an independent uniform draw per example), step t Poisson-samples group
/// t mod b at rate `group_sample_rate` = b·q (so a step's expected batch is still q·n), and an
/// example can take part at most once per round of b consecutive steps, in steps ≥ b apart. With
/// a strategy whose columns have norm ≤ 1, the run is dominated by ⌈T/b⌉ rounds of the
/// Poisson-subsampled Gaussian at that rate and the run's noise multiplier: the plan records
/// that event at the first step of each round (t mod b = 0), which counts each round's possible
/// participation no later than it happens, and `NoOp` at the other steps.
#[derive(Debug, Clone, PartialEq)]
pub struct BandMfPlan {
    /// b.
    pub bands: u64,
    pub strategy: BandedStrategy,
    /// The workload the strategy was optimised for (prefix sums, or momentum β).
    pub workload: Workload,
    /// b·q: the Poisson rate inside an example's group (`None` with fixed-order batches).
    pub group_sample_rate: Option<f64>,
    /// The strategy's expected squared workload error relative to DP-SGD's at equal noise
    /// multiplier (`BandedStrategy::error_ratio`).
    pub error_ratio: f64,
}

/// One step's releases as one event: the release itself, or their composition.
fn one_event(releases: Vec<DpEvent>) -> DpEvent {
    if releases.len() == 1 {
        releases.into_iter().next().unwrap_or(DpEvent::NoOp)
    } else {
        DpEvent::Composed(releases)
    }
}

/// Wrap one step's releases in the sampling event of `sampler`.
pub(super) fn sampled(
    sampler: Sampler,
    n_train: usize,
    sample_rate: f64,
    releases: Vec<DpEvent>,
) -> DpEvent {
    let inner = one_event(releases);
    match sampler {
        // A shuffled epoch is accounted as Poisson sampling at the same rate: the usual
        // practice, whose guarantee does not hold (the plan marks it so).
        Sampler::Poisson { .. } | Sampler::Shuffle { .. } => {
            if sample_rate >= 1.0 {
                inner
            } else {
                DpEvent::poisson_sampled(sample_rate, inner)
            }
        }
        Sampler::FixedSize { batch_size } => {
            if batch_size >= n_train {
                inner
            } else {
                DpEvent::sampled_without_replacement(n_train as u64, batch_size as u64, inner)
            }
        }
        // No amplification: the release itself, once per epoch ([`Rounds::FixedOrder`]).
        Sampler::FixedOrder { .. } => inner,
        // One random allocation per epoch ([`Rounds::BallsInBins`]).
        Sampler::BallsInBins { .. } => {
            DpEvent::random_allocation(sampler.steps_per_epoch(n_train).unwrap_or(1), inner)
        }
    }
}

/// Runs whose examples take part at most once per round of consecutive steps are accounted one
/// event per round, recorded at the round's first step (`NoOp` at the others): counting a round's
/// possible participation at its start never counts late, so ε at every step is an upper bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rounds {
    /// BandMF under b-min-separated Poisson sampling ([`BandMfPlan`]): rounds of b steps, each
    /// `PoissonSampled(sample_rate, release)` with the rate inside a group, b·q.
    CyclicPoisson { period: u64, sample_rate: f64 },
    /// `train.sampler = "fixed_order"`: epochs of m = ⌊n / B⌋ steps in which every example is in
    /// exactly one batch (or none), each the unsampled release. With BandMF (b ≤ m) the strategy's
    /// columns for one example's participations, m ≥ b steps apart, are orthogonal, so each epoch
    /// still adds at most one release of sensitivity C (docs/accounting.md).
    FixedOrder { period: u64 },
    /// `train.sampler = "balls_in_bins"`: epochs of t = ⌈n / B⌉ steps, each example in exactly one
    /// of them (uniformly, independently): one `RandomAllocation(t, release)` per epoch.
    BallsInBins { period: u64 },
}

impl Rounds {
    /// Steps per round.
    pub fn period(&self) -> u64 {
        match *self {
            Rounds::CyclicPoisson { period, .. }
            | Rounds::FixedOrder { period }
            | Rounds::BallsInBins { period } => period,
        }
    }

    /// Rounds started by the end of step `steps − 1`: ⌈steps / period⌉.
    pub fn count(&self, steps: u64) -> u64 {
        steps.div_ceil(self.period())
    }

    /// One round's event around a step's releases.
    pub fn event(&self, releases: Vec<DpEvent>) -> DpEvent {
        let inner = one_event(releases);
        match *self {
            Rounds::CyclicPoisson { sample_rate, .. } if sample_rate < 1.0 => {
                DpEvent::poisson_sampled(sample_rate, inner)
            }
            Rounds::BallsInBins { period } => DpEvent::random_allocation(period, inner),
            _ => inner,
        }
    }
}

/// The banded strategy of `noise.bands` bands for the run's steps and optimizer (module
/// `privacy::bandmf`; the momentum workload for momentum optimizers, prefix sums otherwise; a
/// learning-rate schedule is not part of the workload), and the rate inside a group.
pub(super) fn bandmf_plan(
    spec: &ExperimentSpec,
    optimizer: &Optimizer,
    bands: usize,
    steps: u64,
    sample_rate: f64,
    n_train: usize,
) -> Result<BandMfPlan, TrainError> {
    let config_error = |expected: String, found: String| {
        TrainError::Config(ConfigError::OutOfRange {
            at: Location::file(&spec.source),
            key: "noise.bands".into(),
            expected,
            found,
        })
    };
    // A run shorter than b steps uses T bands (the strategy is capped the same way).
    let bands = bands
        .min(usize::try_from(steps).unwrap_or(usize::MAX))
        .max(1);
    let group_sample_rate = match spec.train.sampler {
        Sampler::FixedOrder { batch_size } => {
            let batches = n_train / batch_size.max(1);
            if bands > batches {
                return Err(config_error(
                    format!(
                        "at most {batches} bands (the batches per epoch, ⌊n / batch_size⌋): an example's participations, one batch cycle apart, must be at least b steps apart for the banded sensitivity"
                    ),
                    bands.to_string(),
                ));
            }
            None
        }
        _ => {
            let rate = sample_rate * bands as f64;
            if rate > 1.0 {
                return Err(config_error(
                    format!(
                        "at most n / batch = {:.1} bands: b-min-separated sampling draws each step from one of b groups of about n / b examples, at rate b·q, which must not exceed 1",
                        1.0 / sample_rate
                    ),
                    format!("{bands} (b·q = {rate:.4})"),
                ));
            }
            Some(rate)
        }
    };
    let workload = match *optimizer {
        Optimizer::Momentum { momentum, .. } => Workload::Momentum { momentum },
        Optimizer::BiasCorrectedMomentum { beta } => Workload::Momentum { momentum: beta },
        _ => Workload::PrefixSum,
    };
    let optimized = bandmf::optimize(steps, bands, workload)
        .map_err(|e| config_error("a banded strategy for this run".into(), e.to_string()))?;
    let error_ratio = optimized
        .strategy
        .error_ratio(workload, usize::try_from(steps).unwrap_or(usize::MAX));
    Ok(BandMfPlan {
        bands: optimized.strategy.bands() as u64,
        strategy: optimized.strategy,
        workload,
        group_sample_rate,
        error_ratio,
    })
}

impl TrainingPlan {
    /// The shape s_t of the configured schedule over this plan's steps.
    fn noise_shape(
        &self,
        spec: &ExperimentSpec,
        schedule: &NoiseSchedule,
        influence: Option<&Influence>,
    ) -> Result<NoiseShape, TrainError> {
        let n = self.n_train;
        let steps = self.planned_steps;
        Ok(match schedule {
            NoiseSchedule::Constant => NoiseShape::Constant,
            NoiseSchedule::Adp { power } => NoiseShape::Adp {
                power: *power,
                lr: self.lr.clone(),
                base_learning_rate: spec.train.learning_rate,
            },
            NoiseSchedule::AdpAdagrad { b0_sq, c_alpha } => NoiseShape::AdpAdagrad {
                b0_sq: *b0_sq,
                c_alpha: *c_alpha,
            },
            NoiseSchedule::Exponential { decay } => NoiseShape::Exponential { decay: *decay },
            NoiseSchedule::Step { factor, every } => NoiseShape::Step {
                factor: *factor,
                period: spec.period_in_steps(*every, n),
            },
            NoiseSchedule::TimeDecay { decay } => NoiseShape::TimeDecay { decay: *decay },
            NoiseSchedule::Polynomial {
                end_ratio,
                power,
                every,
            } => NoiseShape::Polynomial {
                end_ratio: *end_ratio,
                power: *power,
                period: spec.period_in_steps(*every, n),
            },
            NoiseSchedule::InfluenceGd { gamma } => NoiseShape::InfluenceGd {
                gamma: *gamma,
                steps,
            },
            NoiseSchedule::InfluenceMomentum { gamma, beta } => {
                NoiseShape::influence_momentum(*gamma, *beta, steps)
            }
            NoiseSchedule::File { values, .. } => NoiseShape::Values {
                values: values.clone(),
            },
            NoiseSchedule::InfluenceQuadratic { .. } | NoiseSchedule::InfluenceRetrained { .. } => {
                match influence {
                    Some(i) => i.shape().clone(),
                    None => {
                        return Err(TrainError::Config(ConfigError::DataMismatch {
                            at: Location::file(&spec.source),
                            key: "noise.schedule".into(),
                            reason: format!(
                                "\"{}\" is estimated from the training data, which this plan was not given",
                                schedule.kind().name()
                            ),
                        }));
                    }
                }
            }
        })
    }

    pub(super) fn plan_privacy(
        &mut self,
        spec: &ExperimentSpec,
        p: &crate::config::spec::PrivacySpec,
        influence: Option<&Influence>,
    ) -> Result<PrivacyPlan, TrainError> {
        let path = spec.source.clone();
        let options = AccountantOptions {
            relation: p.neighbouring,
            ..AccountantOptions::default()
        };
        let factory = || new_accountant(p.accountant, &options);
        let (sampler, n, q) = (self.sampler, self.n_train, self.sample_rate);
        let steps = self.planned_steps;
        let shape = self.noise_shape(spec, &p.noise_schedule, influence)?;
        shape.check(steps).map_err(|e| {
            TrainError::Config(ConfigError::OutOfRange {
                at: Location::file(&path),
                key: "noise.schedule".into(),
                expected: format!(
                    "a \"{}\" noise schedule with a finite positive noise multiplier at every one of the {steps} steps",
                    shape.name()
                ),
                found: e.to_string(),
            })
        })?;
        let shape_values = shape.values(steps);
        let round_digits = p.round_digits;
        // σ_t = κ·s_t, rounded down when asked (conservative).
        let sigmas_for = |kappa: f64, upto: u64| -> Vec<f64> {
            shape_values[..upto as usize]
                .iter()
                .map(|s| {
                    let sigma = kappa * s;
                    match round_digits {
                        Some(d) => schedule::round_down_significant(sigma, d),
                        None => sigma,
                    }
                })
                .collect()
        };
        let constant = matches!(shape, NoiseShape::Constant) && round_digits.is_none();
        // The releases of one step at σ (the policy's statistic included). Where σ is too large
        // for the policy's split, the plain Gaussian of multiplier σ, which is the same privacy
        // cost: calibration stays monotone, and the split is refused below with a clear message.
        let policy = self.clip.clone();
        let releases = move |sigma: f64| -> Vec<DpEvent> {
            policy
                .planned_releases(sigma)
                .unwrap_or_else(|_| vec![DpEvent::gaussian(sigma)])
        };
        let prefix = statistics_events(spec);
        let rounds = self.rounds;
        let run_event = |kappa: f64, upto: u64| -> DpEvent {
            let mut ledger = EventLedger::new();
            for event in &prefix {
                ledger.record(event.clone());
            }
            if let Some(r) = &rounds {
                // Constant σ (checked in config::spec): ⌈upto / period⌉ rounds.
                ledger.record(r.event(releases(kappa)).self_composed(r.count(upto)));
            } else if constant {
                ledger.record(sampled(sampler, n, q, releases(kappa)).self_composed(upto));
            } else {
                for sigma in sigmas_for(kappa, upto) {
                    ledger.record(sampled(sampler, n, q, releases(sigma)));
                }
            }
            ledger.to_event()
        };
        let accounting = |source| TrainError::Accounting {
            path: path.clone(),
            source,
        };
        // Refuse, before any training, an event the accountant cannot analyse.
        let one = match &self.rounds {
            Some(r) => r.event(releases(1.0)),
            None => sampled(sampler, n, q, releases(1.0)),
        };
        factory()
            .map_err(accounting)?
            .check(&one)
            .map_err(accounting)?;

        let mut warnings = Vec::new();
        if let Sampler::Shuffle { .. } = sampler {
            warnings.push(format!(
                "train.sampler = shuffle: the {} accountant assumes Poisson sampling; epsilon is not guaranteed for shuffled batches (train.sampler = \"balls_in_bins\" batches by epoch with a guarantee)",
                p.accountant
            ));
        }
        let d = &spec.data;
        if matches!(
            d.standardize,
            Standardize::PerFeature | Standardize::PerChannel
        ) {
            warnings.push(
                "data.standardize fits its statistics on the private training data without noise (data.allow_nonprivate_statistics = true); epsilon does not cover them and is not guaranteed (use data.standardize = \"fixed\" with public constants)".to_string(),
            );
        }
        if d.nonprivate_pca() {
            warnings.push(
                "data.pca_components fits its projection on the private training data without noise (data.allow_nonprivate_statistics = true); epsilon does not cover it and is not guaranteed".to_string(),
            );
        }
        if let Some(i) = influence {
            warnings.extend(i.warnings(p.noise_schedule.kind().name()));
        }
        if self.clean_norm {
            warnings.push(
                "train.adagrad_norm.norm_source = clean: the step sizes use the gradient before noise, which is not private; epsilon is not guaranteed (use \"noisy\")".to_string(),
            );
        }
        if p.delta >= 1.0 / n as f64 {
            warnings.push(format!(
                "privacy.delta = {} is at least 1/n = {:.3e}: a mechanism that publishes a random example meets it; choose delta well below 1/n",
                p.delta,
                1.0 / n as f64
            ));
        }
        let calibration = |source| TrainError::Calibration {
            path: path.clone(),
            source,
        };
        // Each arm also returns the accountant's report for the whole run when it computed one.
        let (noise_multiplier, target_epsilon, calibrated, known_report) = match p.budget {
            Budget::NoiseMultiplier { noise_multiplier } => (noise_multiplier, None, false, None),
            Budget::Calibrated { epsilon } => {
                let target = Target {
                    epsilon,
                    delta: p.delta,
                };
                let cal = if constant {
                    calibrate::calibrate_noise_multiplier(
                        &factory,
                        &|s| run_event(s, steps),
                        target,
                    )
                } else {
                    calibrate::calibrate_scale(&factory, &|k| run_event(k, steps), target)
                }
                .map_err(calibration)?;
                (cal.value, Some(epsilon), true, Some(cal.report))
            }
            Budget::UntilSpent {
                noise_multiplier,
                epsilon,
            } => {
                let target = Target {
                    epsilon,
                    delta: p.delta,
                };
                let report = if constant {
                    let cal = calibrate::calibrate_steps(
                        &factory,
                        &|t| run_event(noise_multiplier, t),
                        target,
                    )
                    .map_err(calibration)?;
                    self.steps = cal.steps.min(steps);
                    (cal.steps <= steps).then_some(cal.report)
                } else {
                    // The schedule is defined over the planned steps only: train them all when
                    // they fit the budget, else the longest prefix that does.
                    let whole = calibrate::epsilon_of(
                        &factory,
                        &run_event(noise_multiplier, steps),
                        p.delta,
                    )
                    .map_err(accounting)?;
                    if whole.epsilon > epsilon {
                        let cal = calibrate::calibrate_steps(
                            &factory,
                            &|t| run_event(noise_multiplier, t.min(steps)),
                            target,
                        )
                        .map_err(calibration)?;
                        self.steps = cal.steps.min(steps);
                        (cal.steps <= steps).then_some(cal.report)
                    } else {
                        Some(whole)
                    }
                };
                (noise_multiplier, Some(epsilon), false, report)
            }
        };
        let sigmas = sigmas_for(noise_multiplier, steps);
        self.check_split(spec, &sigmas[..(self.steps as usize).min(sigmas.len())], p)?;
        // A run may only call its ε guaranteed when the accountant proves an upper bound for
        // these events (GDP's central limit theorem on subsampled steps does not).
        let report = match known_report {
            Some(r) => r,
            None => {
                calibrate::epsilon_of(&factory, &run_event(noise_multiplier, self.steps), p.delta)
                    .map_err(accounting)?
            }
        };
        if !report.upper_bound {
            warnings.push(format!(
                "privacy.accountant = {}: its epsilon for this run is not a proven upper bound ({}); epsilon is not guaranteed (use \"rdp\" or \"pld\")",
                p.accountant,
                report.notes.join("; ")
            ));
        }
        Ok(PrivacyPlan {
            noise_multiplier,
            schedule: shape,
            sigmas,
            round_digits,
            delta: p.delta,
            accountant: p.accountant,
            options,
            target_epsilon,
            calibrated,
            epsilon_guaranteed: warnings.is_empty(),
            warnings,
            prefix,
        })
    }

    /// Refuse, before training, a policy whose statistic's noise multiplier does not exceed every
    /// σ_t: its split σ_grad = (σ^−2 − σ_stat^−2)^(−1/2) would not exist.
    fn check_split(
        &self,
        spec: &ExperimentSpec,
        sigmas: &[f64],
        p: &crate::config::spec::PrivacySpec,
    ) -> Result<(), TrainError> {
        let Some((statistic, stat)) = self.clip.statistic() else {
            return Ok(());
        };
        let largest = sigmas.iter().copied().fold(0.0, f64::max);
        if sigmas
            .iter()
            .all(|&s| self.clip.check_noise_multiplier(s).is_ok())
        {
            return Ok(());
        }
        let (key, found) = match spec.clip {
            ClipSpec::Quantile {
                count_noise_std, ..
            } => (
                "clip.quantile.count_noise_std",
                format!("{count_noise_std} (a count noise multiplier 2·σ_b = {stat})"),
            ),
            _ => (
                match spec.clip.kind() {
                    crate::config::kinds::ClipPolicyKind::DcsgdP => {
                        "clip.dcsgd_p.histogram_noise_multiplier"
                    }
                    _ => "clip.dcsgd_e.histogram_noise_multiplier",
                },
                stat.to_string(),
            ),
        };
        let budget = match p.budget {
            Budget::Calibrated { epsilon } => {
                format!("calibrated from privacy.epsilon = {epsilon}")
            }
            Budget::NoiseMultiplier { .. } | Budget::UntilSpent { .. } => {
                "noise.noise_multiplier".to_string()
            }
        };
        Err(TrainError::Config(ConfigError::OutOfRange {
            at: Location::file(&spec.source),
            key: key.into(),
            expected: format!(
                "the {statistic} needs a larger noise multiplier than the budget allows: above the run's largest noise multiplier {largest} ({budget}); otherwise the {statistic} alone would spend more than the whole budget"
            ),
            found,
        }))
    }
}
