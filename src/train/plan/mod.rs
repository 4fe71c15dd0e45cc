//! The planned run: everything a run will do that does not depend on its random draws.
//!
//! From the spec and the number of training examples alone: the number of steps, the
//! evaluation steps, η_t, σ_t, the sampling rate and, for every step, the [`DpEvent`] it releases.
//! The noise multiplier is calibrated here when the budget is given as ε, with the configured
//! accountant, over exactly the events the run will record. `dpx account --config` prints this
//! plan; a test checks that a real run's ledger equals [`TrainingPlan::planned_ledger`].
//!
//! This file owns the steps, η_t, the clipping policy and the evaluation and epoch steps;
//! `privacy.rs` owns σ_t, calibration and the events.

use super::influence::Influence;
use crate::config::NormSource;
use crate::config::spec::{
    ClipSpec, Every, ExperimentSpec, LrSchedule as SpecLr, NoiseMechanism, OptimizerSpec, Sampler,
};
use crate::optim::Optimizer;
use crate::optim::lr::LrSchedule;
use crate::privacy::accountant::{PrivacyReport, new_accountant};
use crate::privacy::clip::dcsgd::{DcsgdParams, DcsgdRule};
use crate::privacy::clip::{ClipPolicy, LayerSplit, adaclip, decay, quantile};
use crate::privacy::event::{DpEvent, EventLedger};
use crate::privacy::schedule::ScheduleSummary;

use super::TrainError;

mod privacy;

pub use privacy::{BandMfPlan, PrivacyPlan, Rounds, statistics_events};
use privacy::{bandmf_plan, sampled};

/// A planned run.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingPlan {
    /// Training examples n.
    pub n_train: usize,
    /// Steps the run takes (fewer than `planned_steps` when `privacy.stop_when_spent` ends it).
    pub steps: u64,
    /// Steps from `train.steps` or ⌈epochs · n / batch⌉.
    pub planned_steps: u64,
    /// n / batch: steps in one epoch (fractional).
    pub steps_per_epoch: f64,
    /// When to evaluate (besides step 0 and the last step).
    pub eval_every: Every,
    pub sampler: Sampler,
    /// q = batch / n.
    pub sample_rate: f64,
    /// The divisor of the noisy sum: the expected batch size (Poisson) or the batch size.
    pub expected_batch_size: f64,
    pub lr: LrSchedule,
    pub optimizer: Optimizer,
    /// AdaGrad-norm step sizes from the clean (pre-noise) clipped gradient, as the ADP-SGD paper
    /// does: not private, and the plan marks ε as not guaranteed.
    pub clean_norm: bool,
    /// The clip norm of the first step: C for `flat`, C_0 for the policies that adapt it, 1 (the
    /// sensitivity) for `automatic`; `None` for `adaclip` (its scale is per coordinate) and for
    /// no clipping (non-private runs only).
    pub clip_norm: Option<f64>,
    /// The clipping policy's parameters (`clip.policy` and its table).
    pub clip: ClipPolicy,
    /// `None` for a non-private run.
    pub privacy: Option<PrivacyPlan>,
    /// `noise.mechanism = "bandmf"`: the banded strategy (`None`: independent noise).
    pub bandmf: Option<BandMfPlan>,
    /// One event per round of steps instead of one per step (BandMF's cyclic Poisson sampling,
    /// fixed-order batches); `None`: every step is its own event.
    pub rounds: Option<Rounds>,
}

fn lr_schedule(spec: &ExperimentSpec, n_train: usize, total: u64) -> LrSchedule {
    let learning_rate = spec.train.learning_rate;
    match spec.train.lr_schedule {
        SpecLr::Constant => LrSchedule::Constant { learning_rate },
        SpecLr::Step { factor, every } => LrSchedule::Step {
            learning_rate,
            step_size: spec.period_in_steps(every, n_train),
            gamma: factor,
        },
        SpecLr::Exponential { factor, every } => {
            // η_0 · factor^(t / P) = η_0 · (factor^(1/P))^t
            let period = spec.period_in_steps(every, n_train) as f64;
            LrSchedule::Exponential {
                learning_rate,
                gamma: factor.powf(1.0 / period),
            }
        }
        SpecLr::Cosine {
            final_learning_rate,
        } => LrSchedule::Cosine {
            learning_rate,
            min_learning_rate: final_learning_rate,
            total_steps: total,
        },
        SpecLr::InvSqrt { a, c } => LrSchedule::InvSqrt {
            learning_rate,
            a,
            c,
        },
        SpecLr::SqrtToZero {
            final_learning_rate,
        } => LrSchedule::SqrtToZero {
            learning_rate,
            end_learning_rate: final_learning_rate,
            total_steps: total,
        },
    }
}

/// The privacy room's policy for a validated `[clip]` spec; `total_steps` is T (for `decay`).
pub fn clip_policy(spec: &ClipSpec, total_steps: u64) -> ClipPolicy {
    use crate::config::kinds::{AdaclipInitialStd, AdaclipVarianceScale, LayerSplitKind};
    match *spec {
        ClipSpec::None => ClipPolicy::None,
        ClipSpec::Flat { clip_norm } => ClipPolicy::Flat { clip_norm },
        ClipSpec::PerLayer { clip_norm, split } => ClipPolicy::PerLayer {
            clip_norm,
            split: match split {
                LayerSplitKind::Equal => LayerSplit::Equal,
                LayerSplitKind::BySize => LayerSplit::BySize,
            },
        },
        ClipSpec::Decay {
            clip_norm,
            final_ratio,
        } => ClipPolicy::Decay(decay::DecayParams {
            clip_norm,
            final_ratio,
            total_steps,
        }),
        ClipSpec::Automatic { gamma } => ClipPolicy::Automatic { gamma },
        ClipSpec::Quantile {
            initial_clip_norm,
            target_quantile,
            learning_rate,
            count_noise_std,
        } => ClipPolicy::Quantile(quantile::QuantileParams {
            initial_clip_norm,
            target_quantile,
            learning_rate,
            count_noise_std,
        }),
        ClipSpec::Adaclip {
            gamma,
            beta1,
            beta2,
            h1,
            h2,
            initial_std,
            variance_scale,
        } => ClipPolicy::AdaClip(adaclip::AdaClipParams {
            gamma,
            beta1,
            beta2,
            h1,
            h2,
            initial_std: match initial_std {
                AdaclipInitialStd::Paper => adaclip::InitialStd::Paper,
                AdaclipInitialStd::SqrtH2 => adaclip::InitialStd::SqrtH2,
            },
            variance_scale: match variance_scale {
                AdaclipVarianceScale::PerExample => adaclip::VarianceScale::PerExample,
                AdaclipVarianceScale::BatchMean => adaclip::VarianceScale::BatchMean,
            },
        }),
        ClipSpec::Dcsgd {
            initial_clip_norm,
            percentile,
            bins,
            histogram_noise_multiplier,
            initial_range,
        } => ClipPolicy::Dcsgd(DcsgdParams {
            rule: match percentile {
                Some(percentile) => DcsgdRule::Percentile { percentile },
                None => DcsgdRule::ExpectedError,
            },
            initial_clip_norm,
            initial_range,
            bins,
            histogram_noise_multiplier,
        }),
    }
}

impl TrainingPlan {
    /// Plan `spec` on `n_train` training examples (after preprocessing). A schedule estimated from
    /// the data (`influence_quadratic`) needs [`TrainingPlan::with_influence`].
    pub fn new(spec: &ExperimentSpec, n_train: usize) -> Result<Self, TrainError> {
        Self::with_influence(spec, n_train, None)
    }

    /// [`TrainingPlan::new`] with the noise influence estimated from the training data
    /// ([`super::influence::estimate`]), for `noise.schedule = "influence_quadratic"` and
    /// `"influence_retrained"` (and their `_exp` fits).
    pub fn with_influence(
        spec: &ExperimentSpec,
        n_train: usize,
        influence: Option<&Influence>,
    ) -> Result<Self, TrainError> {
        let planned_steps = spec.planned_steps(n_train);
        let batch = spec.train.sampler.batch_size();
        let sample_rate = spec.sample_rate(n_train).min(1.0);
        let clip = clip_policy(&spec.clip, planned_steps);
        let clip_norm = match spec.clip {
            ClipSpec::None | ClipSpec::Adaclip { .. } => None,
            ClipSpec::Flat { clip_norm }
            | ClipSpec::PerLayer { clip_norm, .. }
            | ClipSpec::Decay { clip_norm, .. } => Some(clip_norm),
            ClipSpec::Automatic { .. } => Some(1.0),
            ClipSpec::Quantile {
                initial_clip_norm, ..
            }
            | ClipSpec::Dcsgd {
                initial_clip_norm, ..
            } => Some(initial_clip_norm),
        };
        let optimizer = match spec.train.optimizer {
            OptimizerSpec::Sgd => Optimizer::Sgd,
            OptimizerSpec::Momentum { momentum } => Optimizer::Momentum {
                momentum,
                nesterov: false,
            },
            OptimizerSpec::BiasCorrectedMomentum { beta } => {
                Optimizer::BiasCorrectedMomentum { beta }
            }
            OptimizerSpec::AdagradNorm {
                b0_sq,
                nu,
                beta,
                beta_period,
                ..
            } => Optimizer::AdagradNorm {
                b0_sq,
                nu,
                beta,
                beta_period,
            },
            OptimizerSpec::Adam {
                beta1,
                beta2,
                stability_constant,
            } => Optimizer::Adam {
                beta1,
                beta2,
                stability_constant,
            },
        };
        let clean_norm = matches!(
            spec.train.optimizer,
            OptimizerSpec::AdagradNorm {
                norm_source: NormSource::Clean,
                ..
            }
        );
        let bandmf = match spec.privacy.as_ref().map(|p| p.mechanism) {
            Some(NoiseMechanism::BandMf { bands }) => Some(bandmf_plan(
                spec,
                &optimizer,
                bands,
                planned_steps,
                sample_rate,
                n_train,
            )?),
            _ => None,
        };
        let rounds = match (spec.train.sampler, &bandmf) {
            (Sampler::FixedOrder { batch_size }, _) => Some(Rounds::FixedOrder {
                period: (n_train / batch_size.max(1)).max(1) as u64,
            }),
            (Sampler::BallsInBins { .. }, _) => spec
                .train
                .sampler
                .steps_per_epoch(n_train)
                .map(|period| Rounds::BallsInBins { period }),
            (_, Some(m)) => m
                .group_sample_rate
                .map(|sample_rate| Rounds::CyclicPoisson {
                    period: m.bands,
                    sample_rate,
                }),
            _ => None,
        };
        let mut plan = TrainingPlan {
            n_train,
            steps: planned_steps,
            planned_steps,
            steps_per_epoch: match spec.train.sampler.steps_per_epoch(n_train) {
                Some(t) => t as f64,
                None => n_train as f64 / batch.max(1) as f64,
            },
            eval_every: spec.train.eval_every,
            sampler: spec.train.sampler,
            sample_rate,
            expected_batch_size: batch as f64,
            lr: lr_schedule(spec, n_train, planned_steps),
            optimizer,
            clean_norm,
            clip_norm,
            clip,
            privacy: None,
            bandmf,
            rounds,
        };
        if let Some(p) = &spec.privacy {
            plan.privacy = Some(plan.plan_privacy(spec, p, influence)?);
        }
        Ok(plan)
    }

    /// σ_t at step `t` (`None` for a non-private run).
    pub fn noise_multiplier_at(&self, t: u64) -> Option<f64> {
        self.privacy
            .as_ref()
            .map(|p| p.sigmas.get(t as usize).copied().unwrap_or(f64::NAN))
    }

    /// First, last, smallest and largest σ_t over the steps the run takes (`None` when
    /// non-private).
    pub fn schedule_summary(&self) -> Option<ScheduleSummary> {
        let p = self.privacy.as_ref()?;
        ScheduleSummary::of(&p.sigmas[..(self.steps as usize).min(p.sigmas.len())])
    }

    /// The event of step `t` given the releases the clipping policy made in it. With rounds
    /// ([`Rounds`]), the round's event at its first step and `NoOp` at the others.
    pub fn step_event(&self, t: u64, releases: Vec<DpEvent>) -> DpEvent {
        match &self.rounds {
            None => sampled(self.sampler, self.n_train, self.sample_rate, releases),
            Some(r) if t.is_multiple_of(r.period()) => r.event(releases),
            Some(_) => DpEvent::NoOp,
        }
    }

    /// The releases the clipping policy makes at step `t`, before sampling (the gradient and any
    /// statistic, e.g. DC-SGD's histogram).
    pub fn planned_releases(&self, t: u64) -> Vec<DpEvent> {
        match self.noise_multiplier_at(t) {
            // The split was checked when the plan was made (`check_split`).
            Some(sigma) => self
                .clip
                .planned_releases(sigma)
                .unwrap_or_else(|_| vec![DpEvent::gaussian(sigma)]),
            None => vec![DpEvent::NonPrivate],
        }
    }

    /// A seed's ledger before its first step: the releases made before training (the private
    /// data statistics), empty otherwise.
    pub fn initial_ledger(&self) -> EventLedger {
        let mut ledger = EventLedger::new();
        for event in self.privacy.iter().flat_map(|p| &p.prefix) {
            ledger.record(event.clone());
        }
        ledger
    }

    /// The ledger of the first `steps` steps of the plan (after [`Self::initial_ledger`]).
    pub fn planned_ledger(&self, steps: u64) -> EventLedger {
        let mut ledger = self.initial_ledger();
        for t in 0..steps.min(self.steps) {
            ledger.record(self.step_event(t, self.planned_releases(t)));
        }
        ledger
    }

    /// The step at which epoch `k` ends: ⌈k · n / batch⌉ (the rounding of `planned_steps`), at
    /// most the run's length.
    pub fn epoch_end(&self, k: u64) -> u64 {
        // Balls-in-bins epochs are t = ⌈n/B⌉ steps long.
        if let Some(t) = self.sampler.steps_per_epoch(self.n_train) {
            return k.saturating_mul(t).min(self.steps);
        }
        let batch = self.expected_batch_size.round().max(1.0) as u128;
        let end = (k as u128 * self.n_train as u128).div_ceil(batch);
        u64::try_from(end).unwrap_or(u64::MAX).min(self.steps)
    }

    /// The steps at which epochs end, 1, 2, …, up to the last step (which ends the last, possibly
    /// partial, epoch).
    pub fn epoch_ends(&self) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        let mut k = 1;
        loop {
            let end = self.epoch_end(k);
            if out.last() != Some(&end) {
                out.push(end);
            }
            if end >= self.steps {
                break;
            }
            k += 1;
        }
        out
    }

    /// The steps after which a run evaluates: 0, then every `eval_every` steps or at the end of
    /// every `eval_every` epochs, and the last step.
    pub fn eval_steps(&self) -> Vec<u64> {
        let mut out = vec![0];
        match self.eval_every {
            Every::Steps(s) => {
                let s = s.max(1);
                out.extend((1..=self.steps / s).map(|k| k * s));
            }
            Every::Epochs(e) => {
                let e = e.max(1);
                let mut k = e;
                while self.epoch_end(k) < self.steps {
                    out.push(self.epoch_end(k));
                    k += e;
                }
            }
        }
        if out.last() != Some(&self.steps) {
            out.push(self.steps);
        }
        out.dedup();
        out
    }

    /// ε after the events of `ledger`, under the plan's accountant (`None` when non-private).
    pub fn epsilon_of(
        &self,
        ledger: &EventLedger,
    ) -> Option<Result<PrivacyReport, crate::privacy::accountant::AccountingError>> {
        let p = self.privacy.as_ref()?;
        Some((|| {
            let mut acc = new_accountant(p.accountant, &p.options)?;
            acc.compose(&ledger.to_event(), 1)?;
            acc.epsilon(p.delta)
        })())
    }
}
