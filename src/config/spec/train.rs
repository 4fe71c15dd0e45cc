//! `[train]` (room: `config::spec`): length, sampling, optimizer, learning-rate schedule,
//! evaluation cadence and threads, and their checks.

use super::*;

/// `[train]`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainSpec {
    pub length: TrainLength,
    pub sampler: Sampler,
    pub optimizer: OptimizerSpec,
    /// `train.learning_rate`: η_0 > 0.
    pub learning_rate: f64,
    pub lr_schedule: LrSchedule,
    /// `train.eval_every_epochs` / `train.eval_every_steps`.
    pub eval_every: Every,
    pub threads: Threads,
    /// `train.eval_train_set`: also evaluate on the whole training set at every evaluation.
    pub eval_train_set: bool,
    /// `train.eval_gradient_error`: record ‖Σ_i g_i − s̃_t‖/B, the distance between the raw
    /// batch gradient and the released one (a non-private diagnostic).
    pub eval_gradient_error: bool,
    /// `train.ema_decay`: keep an exponential moving average of the parameters with this decay
    /// (in (0, 1)), evaluated beside them. Post-processing: free in privacy.
    pub ema_decay: Option<f64>,
    /// `[train.augmentation]`: K augmented views per example, gradients averaged before clipping.
    pub augmentation: Option<Augmentation>,
}

/// `[train.augmentation]`: augmentation multiplicity (De et al. 2022, "Unlocking
/// high-accuracy differentially private image classification through scale", arXiv:2204.13650,
/// Sec. 3.1): each example of a batch is seen as `multiplicity` random views (a random crop of the
/// image padded by `crop_padding` zero pixels on each side, then a horizontal flip with
/// probability 1/2), and the example's gradient is the mean of its views' gradients, clipped once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Augmentation {
    /// K ≥ 1 views per example.
    pub multiplicity: usize,
    /// Zero padding before the random crop back to the image's size (0: no crop).
    pub crop_padding: usize,
    pub horizontal_flip: bool,
}

/// Largest augmentation multiplicity (De et al. use up to 32; the batch's forward pass grows
/// with it).
pub const MAX_AUGMENTATION_MULTIPLICITY: usize = 256;

/// `train.epochs` or `train.steps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainLength {
    Epochs(u64),
    Steps(u64),
}

/// A period counted in epochs or in steps (evaluation, learning-rate decay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    Epochs(u64),
    Steps(u64),
}

/// `train.sampler` with its batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampler {
    /// Sample rate q = expected_batch_size / n; noisy sums are divided by expected_batch_size.
    Poisson {
        expected_batch_size: usize,
    },
    Shuffle {
        batch_size: usize,
    },
    FixedSize {
        batch_size: usize,
    },
    FixedOrder {
        batch_size: usize,
    },
    /// Each epoch every example in one of ⌈n / batch_size⌉ batches, uniformly and independently;
    /// noisy sums are divided by batch_size.
    BallsInBins {
        batch_size: usize,
    },
}

impl Sampler {
    /// The kind of sampler.
    pub fn kind(&self) -> SamplerKind {
        match self {
            Sampler::Poisson { .. } => SamplerKind::Poisson,
            Sampler::Shuffle { .. } => SamplerKind::Shuffle,
            Sampler::FixedSize { .. } => SamplerKind::FixedSize,
            Sampler::FixedOrder { .. } => SamplerKind::FixedOrder,
            Sampler::BallsInBins { .. } => SamplerKind::BallsInBins,
        }
    }

    /// The (expected, for Poisson) batch size: the divisor of the noisy gradient sum.
    pub fn batch_size(&self) -> usize {
        match *self {
            Sampler::Poisson {
                expected_batch_size,
            } => expected_batch_size,
            Sampler::Shuffle { batch_size }
            | Sampler::FixedSize { batch_size }
            | Sampler::FixedOrder { batch_size }
            | Sampler::BallsInBins { batch_size } => batch_size,
        }
    }

    /// Steps in one pass over `n_train` examples, when the sampler has whole epochs of its own:
    /// ⌈n / B⌉ bins for balls-in-bins (so an epoch's mean batch n/t is at most B). `None` for the
    /// others, whose epochs are n / B steps.
    pub fn steps_per_epoch(&self, n_train: usize) -> Option<u64> {
        match *self {
            Sampler::BallsInBins { batch_size } => {
                Some((n_train.div_ceil(batch_size.max(1))).max(1) as u64)
            }
            _ => None,
        }
    }

    /// The TOML key holding the batch size for this sampler.
    pub fn batch_key(&self) -> &'static str {
        match self {
            Sampler::Poisson { .. } => "train.expected_batch_size",
            Sampler::Shuffle { .. }
            | Sampler::FixedSize { .. }
            | Sampler::FixedOrder { .. }
            | Sampler::BallsInBins { .. } => "train.batch_size",
        }
    }
}

/// `train.optimizer` with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptimizerSpec {
    Sgd,
    /// v ← μ·v + g; θ ← θ − η_t·v (PyTorch's SGD momentum, dampening 0). μ in [0, 1).
    Momentum {
        momentum: f64,
    },
    /// v ← β v + (1 − β) g, θ ← θ − η_t v/(1 − β^k) (dynamic-noise paper). β in [0, 1).
    BiasCorrectedMomentum {
        beta: f64,
    },
    /// AdaGrad-norm: θ ← θ − (η_t / b_{k+1}) g, b_{k+1}² = b_k² + max(β_k ‖g‖², ν).
    AdagradNorm {
        b0_sq: f64,
        nu: f64,
        beta: f64,
        beta_period: Option<u64>,
        norm_source: NormSource,
    },
    /// Adam with bias correction (Kingma & Ba 2015, Alg. 1; PyTorch's `torch.optim.Adam`):
    /// m ← β1 m + (1 − β1) g, v ← β2 v + (1 − β2) g², θ ← θ − η m̂/(√v̂ + ε̂).
    Adam {
        beta1: f64,
        beta2: f64,
        stability_constant: f64,
    },
}

impl OptimizerSpec {
    /// The kind of optimizer.
    pub fn kind(&self) -> OptimizerKind {
        match self {
            OptimizerSpec::Sgd => OptimizerKind::Sgd,
            OptimizerSpec::Momentum { .. } => OptimizerKind::Momentum,
            OptimizerSpec::BiasCorrectedMomentum { .. } => OptimizerKind::BiasCorrectedMomentum,
            OptimizerSpec::AdagradNorm { .. } => OptimizerKind::AdagradNorm,
            OptimizerSpec::Adam { .. } => OptimizerKind::Adam,
        }
    }
}

/// `[train.lr_schedule]`: η_t as a pure function of the 0-based step t, with η_0 =
/// `train.learning_rate`, T the planned number of steps and E the steps per epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LrSchedule {
    /// η_t = η_0.
    Constant,
    /// η_t = η_0 · factor^⌊t / P⌋ with P the period in steps (`every` converted with E).
    Step { factor: f64, every: Every },
    /// η_t = η_0 · factor^(t / P): the continuous version of `Step`.
    Exponential { factor: f64, every: Every },
    /// η_t = η_end + (η_0 − η_end)·(1 + cos(π t / T)) / 2.
    Cosine { final_learning_rate: f64 },
    /// η_t = η_0 / √(a + c·t) (ADP-SGD paper, schedules S1/S4: a = 20 or 2, c = 1).
    InvSqrt { a: f64, c: f64 },
    /// η_t = η_0 − (η_0 − η_end)·√(t / T) (ADP-SGD paper, schedule S2), so η_T = η_end.
    SqrtToZero { final_learning_rate: f64 },
}

impl LrSchedule {
    /// The kind of schedule.
    pub fn kind(&self) -> LrScheduleKind {
        match self {
            LrSchedule::Constant => LrScheduleKind::Constant,
            LrSchedule::Step { .. } => LrScheduleKind::Step,
            LrSchedule::Exponential { .. } => LrScheduleKind::Exponential,
            LrSchedule::Cosine { .. } => LrScheduleKind::Cosine,
            LrSchedule::InvSqrt { .. } => LrScheduleKind::InvSqrt,
            LrSchedule::SqrtToZero { .. } => LrScheduleKind::SqrtToZero,
        }
    }
}

/// `train.threads`: worker threads for the seeds (results never depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// All available cores.
    Auto,
    Count(usize),
}

impl Checker<'_> {
    pub(super) fn train(&self, t: &RawTrain) -> R<TrainSpec> {
        let length = match (t.epochs, t.steps) {
            (Some(_), Some(_)) => {
                return Err(self.conflict(
                    "train.steps",
                    "train.epochs",
                    "give either `train.epochs` or `train.steps`, not both",
                ));
            }
            (Some(e), None) => TrainLength::Epochs(self.int("train.epochs", e, 1, 1_000_000)?),
            (None, Some(s)) => {
                TrainLength::Steps(self.int("train.steps", s, 1, MAX_STEPS as i64)?)
            }
            (None, None) => {
                return Err(self.missing("train.epochs", "give `train.epochs` or `train.steps`"));
            }
        };
        let kind = t.sampler.unwrap_or(SamplerKind::Poisson);
        let batch = |key: &str, v: i64| self.size(key, v, 1, 100_000_000);
        let sampler = match kind {
            SamplerKind::Poisson => {
                self.at_most_one(
                    "train.batch_size",
                    &t.batch_size,
                    "train.expected_batch_size",
                    &t.expected_batch_size,
                )?;
                let expected_batch_size = match (t.expected_batch_size, t.batch_size) {
                    (Some(b), _) => batch("train.expected_batch_size", b)?,
                    (None, Some(b)) => batch("train.batch_size", b)?,
                    (None, None) => {
                        return Err(self.missing(
                            "train.expected_batch_size",
                            "Poisson sampling needs an expected batch size",
                        ));
                    }
                };
                Sampler::Poisson {
                    expected_batch_size,
                }
            }
            SamplerKind::Shuffle
            | SamplerKind::FixedSize
            | SamplerKind::FixedOrder
            | SamplerKind::BallsInBins => {
                self.absent("train.expected_batch_size", &t.expected_batch_size, || {
                    format!(
                        "only used with sampler = \"poisson\"; use `train.batch_size` with \"{}\"",
                        kind.name()
                    )
                })?;
                let b = t.batch_size.ok_or_else(|| {
                    self.missing("train.batch_size", "the sampler needs a batch size")
                })?;
                let batch_size = batch("train.batch_size", b)?;
                match kind {
                    SamplerKind::Shuffle => Sampler::Shuffle { batch_size },
                    SamplerKind::FixedOrder => Sampler::FixedOrder { batch_size },
                    SamplerKind::BallsInBins => Sampler::BallsInBins { batch_size },
                    _ => Sampler::FixedSize { batch_size },
                }
            }
        };
        let opt_kind = t.optimizer.unwrap_or(OptimizerKind::Sgd);
        if !matches!(
            opt_kind,
            OptimizerKind::Momentum | OptimizerKind::BiasCorrectedMomentum
        ) {
            self.absent("train.momentum", &t.momentum, || {
                "only used with optimizer = \"momentum\" or \"bias_corrected_momentum\"".into()
            })?;
        }
        if opt_kind != OptimizerKind::AdagradNorm {
            self.absent("train.adagrad_norm", &t.adagrad_norm, || {
                "only used with optimizer = \"adagrad_norm\"".into()
            })?;
        }
        if opt_kind != OptimizerKind::Adam {
            self.absent("train.adam", &t.adam, || {
                "only used with optimizer = \"adam\"".into()
            })?;
        }
        let momentum = || {
            self.float(
                "train.momentum",
                t.momentum.unwrap_or(0.9),
                "a number in [0, 1)",
                |x| (0.0..1.0).contains(&x),
            )
        };
        let optimizer = match opt_kind {
            OptimizerKind::Sgd => OptimizerSpec::Sgd,
            OptimizerKind::Momentum => OptimizerSpec::Momentum {
                momentum: momentum()?,
            },
            OptimizerKind::BiasCorrectedMomentum => {
                OptimizerSpec::BiasCorrectedMomentum { beta: momentum()? }
            }
            OptimizerKind::AdagradNorm => {
                let a = t.adagrad_norm.clone().unwrap_or_default();
                OptimizerSpec::AdagradNorm {
                    b0_sq: self.positive("train.adagrad_norm.b0_sq", a.b0_sq.unwrap_or(20.0))?,
                    nu: self.positive("train.adagrad_norm.nu", a.nu.unwrap_or(1e-5))?,
                    beta: self.positive("train.adagrad_norm.beta", a.beta.unwrap_or(1.0))?,
                    beta_period: a
                        .beta_period
                        .map(|p| self.int("train.adagrad_norm.beta_period", p, 1, i64::MAX))
                        .transpose()?,
                    norm_source: a.norm_source.unwrap_or(NormSource::Noisy),
                }
            }
            OptimizerKind::Adam => {
                let a = t.adam.clone().unwrap_or_default();
                let beta = |key: &str, v: f64| {
                    self.float(key, v, "a number in [0, 1)", |x| (0.0..1.0).contains(&x))
                };
                OptimizerSpec::Adam {
                    beta1: beta("train.adam.beta1", a.beta1.unwrap_or(0.9))?,
                    beta2: beta("train.adam.beta2", a.beta2.unwrap_or(0.999))?,
                    stability_constant: self.positive(
                        "train.adam.stability_constant",
                        a.stability_constant.unwrap_or(1e-8),
                    )?,
                }
            }
        };
        let learning_rate = t.learning_rate.ok_or_else(|| {
            self.missing("train.learning_rate", "give the (initial) learning rate")
        })?;
        let learning_rate = self.positive("train.learning_rate", learning_rate)?;
        let lr_schedule = self.lr_schedule(t.lr_schedule.as_ref(), learning_rate)?;
        let eval_every = self
            .every(
                "train.eval_every_epochs",
                t.eval_every_epochs,
                "train.eval_every_steps",
                t.eval_every_steps,
            )?
            .unwrap_or(Every::Epochs(1));
        let threads = match &t.threads {
            None | Some(RawThreads::Auto(_)) => Threads::Auto,
            Some(RawThreads::Count(n)) => {
                Threads::Count(self.size("train.threads", *n, 1, 1024)?)
            }
        };
        Ok(TrainSpec {
            length,
            sampler,
            optimizer,
            learning_rate,
            lr_schedule,
            eval_every,
            threads,
            eval_train_set: t.eval_train_set.unwrap_or(false),
            eval_gradient_error: t.eval_gradient_error.unwrap_or(false),
            ema_decay: t
                .ema_decay
                .map(|d| {
                    self.float("train.ema_decay", d, "a number in (0, 1)", |x| {
                        x > 0.0 && x < 1.0
                    })
                })
                .transpose()?,
            augmentation: t
                .augmentation
                .as_ref()
                .map(|a| {
                    Ok::<_, ConfigError>(Augmentation {
                        multiplicity: self.size(
                            "train.augmentation.multiplicity",
                            a.multiplicity.unwrap_or(1),
                            1,
                            MAX_AUGMENTATION_MULTIPLICITY,
                        )?,
                        crop_padding: self.size(
                            "train.augmentation.crop_padding",
                            a.crop_padding.unwrap_or(4),
                            0,
                            64,
                        )?,
                        horizontal_flip: a.horizontal_flip.unwrap_or(true),
                    })
                })
                .transpose()?,
        })
    }

    /// At most one of a pair of `*_epochs` / `*_steps` keys, each ≥ 1.
    pub(super) fn every(
        &self,
        ke: &str,
        e: Option<i64>,
        ks: &str,
        s: Option<i64>,
    ) -> R<Option<Every>> {
        self.at_most_one(ke, &e, ks, &s)?;
        Ok(match (e, s) {
            (Some(e), _) => Some(Every::Epochs(self.int(ke, e, 1, i64::MAX)?)),
            (None, Some(s)) => Some(Every::Steps(self.int(ks, s, 1, i64::MAX)?)),
            (None, None) => None,
        })
    }

    pub(super) fn lr_schedule(&self, s: Option<&RawLrSchedule>, lr: f64) -> R<LrSchedule> {
        let empty = RawLrSchedule::default();
        let s = s.unwrap_or(&empty);
        let kind = s.kind.unwrap_or(LrScheduleKind::Constant);
        let k = |name: &str| format!("train.lr_schedule.{name}");
        let why = || {
            format!(
                "not a parameter of the \"{}\" learning-rate schedule",
                kind.name()
            )
        };
        let uses_factor = matches!(kind, LrScheduleKind::Step | LrScheduleKind::Exponential);
        let uses_final = matches!(kind, LrScheduleKind::Cosine | LrScheduleKind::SqrtToZero);
        let uses_ac = kind == LrScheduleKind::InvSqrt;
        if !uses_factor {
            self.absent(&k("factor"), &s.factor, why)?;
            self.absent(&k("every_epochs"), &s.every_epochs, why)?;
            self.absent(&k("every_steps"), &s.every_steps, why)?;
        }
        if !uses_final {
            self.absent(&k("final_learning_rate"), &s.final_learning_rate, why)?;
        }
        if !uses_ac {
            self.absent(&k("a"), &s.a, why)?;
            self.absent(&k("c"), &s.c, why)?;
        }
        let final_lr = || {
            self.float(
                &k("final_learning_rate"),
                s.final_learning_rate.unwrap_or(0.0),
                "a number in [0, train.learning_rate]",
                |x| (0.0..=lr).contains(&x),
            )
        };
        let decay = || -> R<(f64, Every)> {
            let factor = s.factor.ok_or_else(|| ConfigError::Missing {
                at: self.at(),
                key: k("factor"),
                reason: "the decay factor per period, in (0, 1]",
            })?;
            let factor = self.float(&k("factor"), factor, "a number in (0, 1]", |x| {
                x > 0.0 && x <= 1.0
            })?;
            let every = self
                .every(
                    &k("every_epochs"),
                    s.every_epochs,
                    &k("every_steps"),
                    s.every_steps,
                )?
                .ok_or_else(|| ConfigError::Missing {
                    at: self.at(),
                    key: k("every_epochs"),
                    reason: "give the decay period as `every_epochs` or `every_steps`",
                })?;
            Ok((factor, every))
        };
        Ok(match kind {
            LrScheduleKind::Constant => LrSchedule::Constant,
            LrScheduleKind::Step => {
                let (factor, every) = decay()?;
                LrSchedule::Step { factor, every }
            }
            LrScheduleKind::Exponential => {
                let (factor, every) = decay()?;
                LrSchedule::Exponential { factor, every }
            }
            LrScheduleKind::Cosine => LrSchedule::Cosine {
                final_learning_rate: final_lr()?,
            },
            LrScheduleKind::SqrtToZero => LrSchedule::SqrtToZero {
                final_learning_rate: final_lr()?,
            },
            LrScheduleKind::InvSqrt => {
                let a = s.a.ok_or_else(|| ConfigError::Missing {
                    at: self.at(),
                    key: k("a"),
                    reason: "η_t = η_0/√(a + c·t) needs a > 0",
                })?;
                let c = s.c.ok_or_else(|| ConfigError::Missing {
                    at: self.at(),
                    key: k("c"),
                    reason: "η_t = η_0/√(a + c·t) needs c ≥ 0",
                })?;
                LrSchedule::InvSqrt {
                    a: self.positive(&k("a"), a)?,
                    c: self.float(&k("c"), c, "a finite number ≥ 0", |x| x >= 0.0)?,
                }
            }
        })
    }
}
