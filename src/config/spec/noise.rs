//! `[noise]` (room: `config::spec`): the noise mechanism, the noise-multiplier schedule, and
//! their checks.

use super::*;

/// `noise.mechanism` with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NoiseMechanism {
    /// Fresh Gaussian noise at every step (DP-SGD).
    #[default]
    Independent,
    /// Banded matrix factorization (`privacy::bandmf`): the noise of step t combines the fresh
    /// draws of steps t − bands + 1, …, t; examples are split into `bands` groups, and step t
    /// Poisson-samples group t mod `bands`.
    BandMf { bands: usize },
}

impl NoiseMechanism {
    /// The kind written in the TOML.
    pub fn kind(&self) -> NoiseMechanismKind {
        match self {
            NoiseMechanism::Independent => NoiseMechanismKind::Independent,
            NoiseMechanism::BandMf { .. } => NoiseMechanismKind::Bandmf,
        }
    }
}

/// The largest `noise.bands`: the noise state is (bands − 1) × P floats, and the banded
/// strategies of the literature use at most a few hundred bands.
pub const MAX_BANDS: usize = 4096;

/// How `influence_retrained` estimates q_t (the `noise.retrain_*` keys): the final training
/// loss of `repeats` full-batch runs (each with its noise vector ν_t and −ν_t) at `points` values
/// of σ_t evenly spaced in [`sigma_min`, `sigma_max`], the other steps at the uniform σ, at
/// `steps` steps t evenly spaced over the run (ln q_t interpolated linearly between them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrainEstimate {
    pub sigma_min: f64,
    pub sigma_max: f64,
    pub points: usize,
    pub repeats: usize,
    /// `None`: every step.
    pub steps: Option<u64>,
    /// The seed of the estimate's own random streams (initialisation and noise of its runs).
    pub seed: u64,
}

impl RetrainEstimate {
    /// The paper's sweep, σ_t from 20 to 200 (its §3), at 5 values, 4 antithetic noise pairs
    /// each, at 10 steps.
    pub const DEFAULT: RetrainEstimate = RetrainEstimate {
        sigma_min: 20.0,
        sigma_max: 200.0,
        points: 5,
        repeats: 4,
        steps: Some(10),
        seed: 0,
    };
}

/// Most σ_t values, noise pairs and estimated steps of `influence_retrained` (each multiplies the
/// number of training runs of the estimate).
pub const MAX_RETRAIN_POINTS: usize = 64;
pub const MAX_RETRAIN_REPEATS: usize = 1024;

/// `[noise]` schedule: σ_t = κ·s_t with s_t the shape and κ given or calibrated (the formulas
/// are in `privacy::schedule`; T is the planned number of steps).
#[derive(Debug, Clone, PartialEq)]
pub enum NoiseSchedule {
    /// s_t = 1: σ_t = κ at every step.
    Constant,
    /// ADP-SGD (docs/methods/adp_sgd.md §1.1): α_{t+1}² = (η_0/η_t)^p, s_t = α_{t+1}. `power` p in [0, 4].
    Adp { power: f64 },
    /// ADP-SGD with AdaGrad-norm (docs/methods/adp_sgd.md §1.2 S5): s_t = (b_0² + (t+1)·C)^{1/4}.
    AdpAdagrad { b0_sq: f64, c_alpha: f64 },
    /// s_t = e^{−decay·t}.
    Exponential { decay: f64 },
    /// s_t = factor^⌊t / P⌋.
    Step { factor: f64, every: Every },
    /// s_t = 1/(1 + decay·t).
    TimeDecay { decay: f64 },
    /// s_t = (1 − end_ratio)(1 − min(t, P)/P)^power + end_ratio.
    Polynomial {
        end_ratio: f64,
        power: f64,
        every: Every,
    },
    /// Influence-optimal for GD under PL (docs/methods/dynamic_noise.md §1.2(c)): s_t = γ^{(t+1−T)/4}.
    InfluenceGd { gamma: f64 },
    /// Influence-optimal for momentum (docs/methods/dynamic_noise.md §1.2(e)), β < γ.
    InfluenceMomentum { gamma: f64, beta: f64 },
    /// Influence-optimal for GD on the squared loss (Hong et al., Lemma 4.1 on the analytic
    /// influence q_t = Σ_j λ_j (1 − ηλ_j)^{2(T−1−t)}, λ the eigenvalues of the training data's
    /// Hessian; docs/methods/dynamic_noise.md §1.2(g)); with `fit_exponential`, the exponential
    /// decay least-squares fitted to it in logarithms (the paper's `exp`).
    InfluenceQuadratic { fit_exponential: bool },
    /// Lemma 4.1 on the influence q_t estimated by retraining on the training data (Hong et al.
    /// §3: the final training loss fitted to c₂σ_t² + c₀ over a sweep of σ_t, q_t ≈ c₂;
    /// docs/methods/dynamic_noise.md §1.2(h)); with `fit_exponential`, the paper's `exp`.
    InfluenceRetrained {
        fit_exponential: bool,
        estimate: RetrainEstimate,
    },
    /// Per-step values from `noise.path` or `noise.values` (σ_t = κ·value_t).
    File {
        path: Option<PathBuf>,
        values: std::sync::Arc<[f64]>,
    },
}

impl NoiseSchedule {
    /// The kind of schedule.
    pub fn kind(&self) -> NoiseScheduleKind {
        match self {
            NoiseSchedule::Constant => NoiseScheduleKind::Constant,
            NoiseSchedule::Adp { .. } => NoiseScheduleKind::Adp,
            NoiseSchedule::AdpAdagrad { .. } => NoiseScheduleKind::AdpAdagrad,
            NoiseSchedule::Exponential { .. } => NoiseScheduleKind::Exponential,
            NoiseSchedule::Step { .. } => NoiseScheduleKind::Step,
            NoiseSchedule::TimeDecay { .. } => NoiseScheduleKind::TimeDecay,
            NoiseSchedule::Polynomial { .. } => NoiseScheduleKind::Polynomial,
            NoiseSchedule::InfluenceGd { .. } => NoiseScheduleKind::InfluenceGd,
            NoiseSchedule::InfluenceMomentum { .. } => NoiseScheduleKind::InfluenceMomentum,
            NoiseSchedule::InfluenceQuadratic {
                fit_exponential: false,
            } => NoiseScheduleKind::InfluenceQuadratic,
            NoiseSchedule::InfluenceQuadratic {
                fit_exponential: true,
            } => NoiseScheduleKind::InfluenceQuadraticExp,
            NoiseSchedule::InfluenceRetrained {
                fit_exponential: false,
                ..
            } => NoiseScheduleKind::InfluenceRetrained,
            NoiseSchedule::InfluenceRetrained {
                fit_exponential: true,
                ..
            } => NoiseScheduleKind::InfluenceRetrainedExp,
            NoiseSchedule::File { .. } => NoiseScheduleKind::File,
        }
    }
}

impl Checker<'_> {
    pub(super) fn noise_mechanism(&self, n: &RawNoise) -> R<NoiseMechanism> {
        match n.mechanism.unwrap_or_default() {
            NoiseMechanismKind::Independent => {
                self.absent("noise.bands", &n.bands, || {
                    "only used with noise.mechanism = \"bandmf\"".to_string()
                })?;
                Ok(NoiseMechanism::Independent)
            }
            NoiseMechanismKind::Bandmf => {
                let bands = n.bands.ok_or_else(|| {
                    self.missing(
                        "noise.bands",
                        "noise.mechanism = \"bandmf\" needs the number of bands b (1 gives DP-SGD)",
                    )
                })?;
                let bands = self.size("noise.bands", bands, 1, MAX_BANDS)?;
                Ok(NoiseMechanism::BandMf { bands })
            }
        }
    }

    pub(super) fn noise_schedule(&self, n: &RawNoise) -> R<NoiseSchedule> {
        use NoiseScheduleKind as K;
        let kind = n.schedule.unwrap_or(K::Constant);
        let why = || format!("not a parameter of the \"{}\" noise schedule", kind.name());
        let uses = |keys: &[K]| keys.contains(&kind);
        if !uses(&[K::Adp, K::Polynomial]) {
            self.absent("noise.power", &n.power, why)?;
        }
        if !uses(&[K::AdpAdagrad]) {
            self.absent("noise.b0_sq", &n.b0_sq, why)?;
            self.absent("noise.c_alpha", &n.c_alpha, why)?;
        }
        if !uses(&[K::Exponential, K::TimeDecay]) {
            self.absent("noise.decay", &n.decay, why)?;
        }
        if !uses(&[K::Step]) {
            self.absent("noise.factor", &n.factor, why)?;
        }
        if !uses(&[K::Step, K::Polynomial]) {
            self.absent("noise.every_epochs", &n.every_epochs, why)?;
            self.absent("noise.every_steps", &n.every_steps, why)?;
        }
        if !uses(&[K::Polynomial]) {
            self.absent("noise.end_ratio", &n.end_ratio, why)?;
        }
        if !uses(&[K::InfluenceGd, K::InfluenceMomentum]) {
            self.absent("noise.gamma", &n.gamma, why)?;
        }
        if !uses(&[K::InfluenceMomentum]) {
            self.absent("noise.beta", &n.beta, why)?;
        }
        if !uses(&[K::File]) {
            self.absent("noise.path", &n.path, why)?;
            self.absent("noise.values", &n.values, why)?;
        }
        if !uses(&[K::InfluenceRetrained, K::InfluenceRetrainedExp]) {
            self.absent("noise.retrain_sigma_min", &n.retrain_sigma_min, why)?;
            self.absent("noise.retrain_sigma_max", &n.retrain_sigma_max, why)?;
            self.absent("noise.retrain_points", &n.retrain_points, why)?;
            self.absent("noise.retrain_repeats", &n.retrain_repeats, why)?;
            self.absent("noise.retrain_steps", &n.retrain_steps, why)?;
            self.absent("noise.retrain_seed", &n.retrain_seed, why)?;
        }
        let need = |key: &str, v: Option<f64>, reason: &'static str| -> R<f64> {
            v.ok_or_else(|| self.missing(key, reason))
        };
        let period = || -> R<Every> {
            self.every(
                "noise.every_epochs",
                n.every_epochs,
                "noise.every_steps",
                n.every_steps,
            )?
            .ok_or_else(|| {
                self.missing(
                    "noise.every_epochs",
                    "give the period as `noise.every_epochs` or `noise.every_steps`",
                )
            })
        };
        let gamma = || -> R<f64> {
            let g = need(
                "noise.gamma",
                n.gamma,
                "the influence-optimal schedules need γ = 1 − µ/M in (0, 1)",
            )?;
            self.float("noise.gamma", g, "a number in (0, 1)", |x| {
                x > 0.0 && x < 1.0
            })
        };
        Ok(match kind {
            K::Constant => NoiseSchedule::Constant,
            K::Adp => NoiseSchedule::Adp {
                power: self.float(
                    "noise.power",
                    n.power.unwrap_or(1.0),
                    "a number in [0, 4]",
                    |x| (0.0..=4.0).contains(&x),
                )?,
            },
            K::AdpAdagrad => NoiseSchedule::AdpAdagrad {
                b0_sq: self.positive(
                    "noise.b0_sq",
                    need(
                        "noise.b0_sq",
                        n.b0_sq,
                        "α_t = (b_0² + t·C)^{1/4} needs b_0² > 0",
                    )?,
                )?,
                c_alpha: self.positive(
                    "noise.c_alpha",
                    need(
                        "noise.c_alpha",
                        n.c_alpha,
                        "α_t = (b_0² + t·C)^{1/4} needs C > 0",
                    )?,
                )?,
            },
            K::Exponential | K::TimeDecay => {
                let decay = need("noise.decay", n.decay, "the decay rate k ≥ 0")?;
                let decay =
                    self.float("noise.decay", decay, "a finite number ≥ 0", |x| x >= 0.0)?;
                if kind == K::Exponential {
                    NoiseSchedule::Exponential { decay }
                } else {
                    NoiseSchedule::TimeDecay { decay }
                }
            }
            K::Step => {
                let factor = need("noise.factor", n.factor, "the factor per period, in (0, 1]")?;
                NoiseSchedule::Step {
                    factor: self.float("noise.factor", factor, "a number in (0, 1]", |x| {
                        x > 0.0 && x <= 1.0
                    })?,
                    every: period()?,
                }
            }
            K::Polynomial => {
                let end_ratio = need(
                    "noise.end_ratio",
                    n.end_ratio,
                    "σ_end/σ_0, the final fraction of the noise multiplier, in (0, 1]",
                )?;
                NoiseSchedule::Polynomial {
                    end_ratio: self.float(
                        "noise.end_ratio",
                        end_ratio,
                        "a number in (0, 1]",
                        |x| x > 0.0 && x <= 1.0,
                    )?,
                    power: self.float(
                        "noise.power",
                        n.power.unwrap_or(3.0),
                        "a finite number ≥ 0",
                        |x| x >= 0.0,
                    )?,
                    every: period()?,
                }
            }
            K::InfluenceGd => NoiseSchedule::InfluenceGd { gamma: gamma()? },
            K::InfluenceMomentum => {
                let gamma = gamma()?;
                let beta = need("noise.beta", n.beta, "the momentum β in [0, γ)")?;
                let beta = self.float("noise.beta", beta, "a number in [0, noise.gamma)", |x| {
                    (0.0..gamma).contains(&x)
                })?;
                NoiseSchedule::InfluenceMomentum { gamma, beta }
            }
            K::InfluenceQuadratic => NoiseSchedule::InfluenceQuadratic {
                fit_exponential: false,
            },
            K::InfluenceQuadraticExp => NoiseSchedule::InfluenceQuadratic {
                fit_exponential: true,
            },
            K::InfluenceRetrained | K::InfluenceRetrainedExp => NoiseSchedule::InfluenceRetrained {
                fit_exponential: kind == K::InfluenceRetrainedExp,
                estimate: self.retrain_estimate(n)?,
            },
            K::File => {
                self.at_most_one("noise.path", &n.path, "noise.values", &n.values)?;
                let (path, values) = match (&n.path, &n.values) {
                    (Some(p), _) => {
                        let path = PathBuf::from(p);
                        let text = crate::text_file::read_text_capped(
                            &path,
                            crate::text_file::MAX_SCHEDULE_BYTES,
                            "a noise schedule file",
                        )
                        .map_err(|e| {
                            self.range(
                                "noise.path",
                                "a readable file of per-step noise multipliers",
                                e.to_string(),
                            )
                        })?;
                        let values = crate::privacy::schedule::parse_values(&text).map_err(|e| {
                            self.range(
                                "noise.path",
                                "one noise multiplier > 0 per line (or a `noise_multiplier` CSV column)",
                                format!("{p}: {e}"),
                            )
                        })?;
                        (Some(path), values)
                    }
                    (None, Some(v)) => {
                        for &x in v {
                            self.positive("noise.values", x)?;
                        }
                        (None, v.clone())
                    }
                    (None, None) => {
                        return Err(self.missing(
                            "noise.path",
                            "the file schedule needs `noise.path` or `noise.values`",
                        ));
                    }
                };
                if values.is_empty() {
                    return Err(self.range(
                        "noise.values",
                        "at least one noise multiplier",
                        "none".into(),
                    ));
                }
                NoiseSchedule::File {
                    path,
                    values: values.into(),
                }
            }
        })
    }

    /// The `noise.retrain_*` keys of `influence_retrained` (defaults: [`RetrainEstimate::DEFAULT`]).
    fn retrain_estimate(&self, n: &RawNoise) -> R<RetrainEstimate> {
        let d = RetrainEstimate::DEFAULT;
        let sigma_min = self.positive(
            "noise.retrain_sigma_min",
            n.retrain_sigma_min.unwrap_or(d.sigma_min),
        )?;
        let sigma_max = self.float(
            "noise.retrain_sigma_max",
            n.retrain_sigma_max.unwrap_or(d.sigma_max),
            "a finite number > noise.retrain_sigma_min",
            |x| x > sigma_min,
        )?;
        let points = match n.retrain_points {
            Some(v) => self.size("noise.retrain_points", v, 2, MAX_RETRAIN_POINTS)?,
            None => d.points,
        };
        let repeats = match n.retrain_repeats {
            Some(v) => self.size("noise.retrain_repeats", v, 1, MAX_RETRAIN_REPEATS)?,
            None => d.repeats,
        };
        // 0 means every step; otherwise at least the first and the last.
        let steps = match n.retrain_steps {
            Some(0) => None,
            Some(v) => Some(self.int("noise.retrain_steps", v, 2, i64::MAX)?),
            None => d.steps,
        };
        let seed = match n.retrain_seed {
            Some(v) => self.int("noise.retrain_seed", v, 0, i64::MAX)?,
            None => d.seed,
        };
        Ok(RetrainEstimate {
            sigma_min,
            sigma_max,
            points,
            repeats,
            steps,
            seed,
        })
    }
}
