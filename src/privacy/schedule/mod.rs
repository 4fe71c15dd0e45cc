//! Noise schedules (room: `privacy::schedule`): the shape s_t of the noise multiplier over the
//! steps of a run, σ_t = κ·s_t, with κ given or calibrated by [`crate::privacy::calibrate`].
//! Owns only the shapes, each a pure function of the 0-based step t (and of values fixed before
//! training: the learning-rate schedule, the planned number of steps). Must not: depend on data
//! or on anything a run computes (a shape that did could not be accounted before training,
//! docs/methods/adp_sgd.md §6 item 6), nor account privacy itself.
//!
//! # Shapes (t is the 0-based step, T the planned number of steps)
//! - `Constant`: s_t = 1.
//! - `Adp` (Wu et al., arXiv 2110.07435, Alg. 3; docs/methods/adp_sgd.md §1.1-1.2): step t uses α_{t+1} with
//!   α_{t+1}² = b_{t+1} = η/η_t, generalised with a power p to α_{t+1}² = (η/η_t)^p, so
//!   s_t = (η_0/η_t)^{p/2}. p = 1 is ADP-SGD, p = 0 is DP-SGD. For η_t = η/√(a + c·t) (S1) and
//!   p = 1, s_t = (a + c·t)^{1/4}.
//! - `AdpAdagrad` (Prop. 5.2; docs/methods/adp_sgd.md §1.2 S5): α_t = (b_0² + t·C)^{1/4}, and step t uses
//!   α_{t+1}: s_t = (b_0² + (t+1)·C)^{1/4}.
//! - `Exponential`: s_t = e^{−k t} (σ_0 = κ; docs/methods/dynamic_noise.md §1.2(f), `exp`).
//! - `Step`: s_t = factor^⌊t / period⌋ (`step`).
//! - `TimeDecay`: s_t = 1/(1 + k t) (`time`).
//! - `Polynomial`: s_t = (1 − r)(1 − min(t, P)/P)^p + r with r = σ_end/σ_0 (`poly`).
//! - `InfluenceGd` (Hong et al., Thm 4.1 + 4.3; docs/methods/dynamic_noise.md §1.2(c)): σ_t² ∝ γ^{(t−T)/2}
//!   in the paper's 1-based t, so s_t = γ^{(t+1−T)/4} (s_{T−1} = 1). Calibrated under
//!   `zcdp-paper` this is exactly the closed form σ_t² = (γ^{−T/2} − 1)γ^{t/2}/(R(1 − √γ)).
//! - `InfluenceMomentum` (Thms 4.4-4.6; docs/methods/dynamic_noise.md §1.2(e)): the influence
//!   q_t = c_1 γ^{T+t} for t ≤ T̃ and q_t = γ^{2(T̃−1)}(γ^{T+1−t} − β^{2(T+1−t)})/(γ − β²) after,
//!   with T̃ = max{t : γ^{t−1} ≥ (1−β)/(1−β^t)} and c_1 = 2/(γ(γ − β²)) (paper's 1-based t);
//!   Lemma 4.1 gives σ_t² ∝ 1/√q_t, so s_t = (q_T/q_t)^{1/4}, computed in logarithms.
//! - `InfluenceQuadratic` (the paper's `dyn` and `exp` on the squared loss; [`influence`]):
//!   s_t = (q_{T−1}/q_t)^{1/4} with the analytic influence q_t = Σ_j λ_j (1 − ηλ_j)^{2(T−1−t)}
//!   of gradient descent on a quadratic with Hessian eigenvalues λ_j, or the exponential decay
//!   fitted to it. The eigenvalues are numbers handed over before training, like a file's values.
//! - `InfluenceRetrained` (the paper's `dyn` and `exp` on an influence estimated by retraining,
//!   its §3; `train::influence_retrain`): the same Lemma 4.1 shape s_t = (q_{T−1}/q_t)^{1/4},
//!   or its fitted exponential, from estimated q_t handed over before training.
//! - `Values`: s_t read from a list (a file of per-step noise multipliers).

pub mod influence;

use std::sync::Arc;

use serde::Serialize;

use crate::optim::lr::LrSchedule;

/// What a schedule cannot do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// A shape value is not a finite positive number.
    #[error("the noise shape at step {step} is {value}, expected a finite number > 0")]
    NotPositive { step: u64, value: f64 },
    /// A list of values is shorter than the run.
    #[error("the list has {len} noise multipliers but the run has {steps} steps")]
    TooShort { len: usize, steps: u64 },
    /// A line of a values file could not be read.
    #[error("line {line}: {reason}")]
    Parse { line: usize, reason: String },
    /// The file holds more values than the bound.
    #[error("more than {max} values")]
    TooLong { max: usize },
}

/// Most values a schedule file may hold.
pub const MAX_FILE_VALUES: usize = 100_000_000;

/// The shape s_t of a noise schedule (see the module documentation for the formulas).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoiseShape {
    Constant,
    Adp {
        /// p in α_{t+1}² = (η_0/η_t)^p.
        power: f64,
        /// The learning-rate schedule of the run (η_0 = `lr.at(0)` is not assumed; see `base`).
        lr: LrSchedule,
        /// η in α_{t+1}² = (η/η_t)^p: the base learning rate.
        base_learning_rate: f64,
    },
    AdpAdagrad {
        b0_sq: f64,
        c_alpha: f64,
    },
    Exponential {
        decay: f64,
    },
    Step {
        factor: f64,
        period: u64,
    },
    TimeDecay {
        decay: f64,
    },
    Polynomial {
        end_ratio: f64,
        power: f64,
        period: u64,
    },
    InfluenceGd {
        gamma: f64,
        steps: u64,
    },
    /// Build with [`NoiseShape::influence_momentum`] (it computes `phase_end`).
    InfluenceMomentum {
        gamma: f64,
        beta: f64,
        steps: u64,
        /// T̃ (1-based), see [`momentum_phase_end`].
        phase_end: u64,
    },
    /// Built from [`influence`] by the training room, which owns the data the eigenvalues come
    /// from: s_0 … s_{T−1}.
    InfluenceQuadratic {
        #[serde(skip)]
        values: Arc<[f64]>,
        /// k of the fitted exponential e^{−k t} (the `exp` variant); `None` for `dyn` itself.
        fitted_decay: Option<f64>,
    },
    /// Built by the training room from q_t estimated by retraining: s_0 … s_{T−1}.
    InfluenceRetrained {
        #[serde(skip)]
        values: Arc<[f64]>,
        /// k of the fitted exponential e^{−k t} (the `exp` variant); `None` for `dyn` itself.
        fitted_decay: Option<f64>,
    },
    Values {
        #[serde(skip)]
        values: Arc<[f64]>,
    },
}

/// T̃ of docs/methods/dynamic_noise.md §1.2(e): the largest (1-based) t with γ^{t−1} ≥ (1−β)/(1−β^t), or 0
/// when no t qualifies (searched up to `limit`).
pub fn momentum_phase_end(gamma: f64, beta: f64, limit: u64) -> u64 {
    let mut last = 0;
    for t in 1..=limit {
        let lhs = (t as f64 - 1.0) * gamma.ln();
        let rhs = (1.0 - beta).ln() - (1.0 - beta.powf(t as f64)).ln();
        if lhs >= rhs {
            last = t;
        } else if t > 1 {
            // γ^{t−1} falls and (1−β)/(1−β^t) falls to 1−β: once below, the left side falls
            // geometrically while the right side is bounded below by 1−β.
            if lhs < (1.0 - beta).ln() {
                break;
            }
        }
    }
    last
}

/// ln q_t of the momentum influence (1-based t), docs/methods/dynamic_noise.md §1.2(e).
fn ln_momentum_influence(gamma: f64, beta: f64, steps: u64, phase_end: u64, t: u64) -> f64 {
    let (lg, tf, big_t) = (gamma.ln(), t as f64, steps as f64);
    let gb = gamma - beta * beta;
    if t <= phase_end {
        // c_1 γ^{T+t}, c_1 = 2/(γ(γ − β²))
        (2.0 / (gamma * gb)).ln() + (big_t + tf) * lg
    } else {
        let k = big_t + 1.0 - tf;
        // γ^k − β^{2k} = γ^k (1 − (β²/γ)^k)
        let ratio = ((beta * beta).ln() - lg) * k;
        2.0 * (phase_end as f64 - 1.0) * lg + k * lg + (-ratio.exp()).ln_1p() - gb.ln()
    }
}

impl NoiseShape {
    /// s_t at the 0-based step `t`.
    pub fn at(&self, t: u64) -> f64 {
        let tf = t as f64;
        match self {
            NoiseShape::Constant => 1.0,
            NoiseShape::Adp {
                power,
                lr,
                base_learning_rate,
            } => (base_learning_rate / lr.at(t)).powf(0.5 * power),
            NoiseShape::AdpAdagrad { b0_sq, c_alpha } => (b0_sq + (tf + 1.0) * c_alpha).powf(0.25),
            NoiseShape::Exponential { decay } => (-decay * tf).exp(),
            NoiseShape::Step { factor, period } => factor.powf((t / (*period).max(1)) as f64),
            NoiseShape::TimeDecay { decay } => 1.0 / (1.0 + decay * tf),
            NoiseShape::Polynomial {
                end_ratio,
                power,
                period,
            } => {
                let p = (*period).max(1) as f64;
                (1.0 - end_ratio) * (1.0 - tf.min(p) / p).powf(*power) + end_ratio
            }
            NoiseShape::InfluenceGd { gamma, steps } => {
                gamma.powf((tf + 1.0 - *steps as f64) / 4.0)
            }
            NoiseShape::InfluenceMomentum {
                gamma,
                beta,
                steps,
                phase_end,
            } => {
                let ln_ref = ln_momentum_influence(*gamma, *beta, *steps, *phase_end, *steps);
                let ln_q = ln_momentum_influence(*gamma, *beta, *steps, *phase_end, t + 1);
                ((ln_ref - ln_q) / 4.0).exp()
            }
            NoiseShape::InfluenceQuadratic { values, .. }
            | NoiseShape::InfluenceRetrained { values, .. }
            | NoiseShape::Values { values } => values.get(t as usize).copied().unwrap_or(f64::NAN),
        }
    }

    /// The momentum influence-optimal shape for a `steps`-step run with γ in (0, 1) and
    /// β in [0, γ) (docs/methods/dynamic_noise.md §1.2(e); Thm 4.4 needs β < γ).
    pub fn influence_momentum(gamma: f64, beta: f64, steps: u64) -> Self {
        NoiseShape::InfluenceMomentum {
            gamma,
            beta,
            steps,
            phase_end: momentum_phase_end(gamma, beta, steps),
        }
    }

    /// s_0 … s_{steps−1}.
    pub fn values(&self, steps: u64) -> Vec<f64> {
        (0..steps).map(|t| self.at(t)).collect()
    }

    /// Check that s_t is finite and positive for every step of a `steps`-step run.
    pub fn check(&self, steps: u64) -> Result<(), ScheduleError> {
        if let NoiseShape::Values { values }
        | NoiseShape::InfluenceQuadratic { values, .. }
        | NoiseShape::InfluenceRetrained { values, .. } = self
            && (values.len() as u64) < steps
        {
            return Err(ScheduleError::TooShort {
                len: values.len(),
                steps,
            });
        }
        for (t, v) in self.values(steps).into_iter().enumerate() {
            if !(v.is_finite() && v > 0.0) {
                return Err(ScheduleError::NotPositive {
                    step: t as u64,
                    value: v,
                });
            }
        }
        Ok(())
    }

    /// The name as written in the TOML.
    pub fn name(&self) -> &'static str {
        match self {
            NoiseShape::Constant => "constant",
            NoiseShape::Adp { .. } => "adp",
            NoiseShape::AdpAdagrad { .. } => "adp_adagrad",
            NoiseShape::Exponential { .. } => "exponential",
            NoiseShape::Step { .. } => "step",
            NoiseShape::TimeDecay { .. } => "time_decay",
            NoiseShape::Polynomial { .. } => "polynomial",
            NoiseShape::InfluenceGd { .. } => "influence_gd",
            NoiseShape::InfluenceMomentum { .. } => "influence_momentum",
            NoiseShape::InfluenceQuadratic {
                fitted_decay: None, ..
            } => "influence_quadratic",
            NoiseShape::InfluenceQuadratic {
                fitted_decay: Some(_),
                ..
            } => "influence_quadratic_exp",
            NoiseShape::InfluenceRetrained {
                fitted_decay: None, ..
            } => "influence_retrained",
            NoiseShape::InfluenceRetrained {
                fitted_decay: Some(_),
                ..
            } => "influence_retrained_exp",
            NoiseShape::Values { .. } => "file",
        }
    }
}

/// First, last, smallest and largest σ_t of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScheduleSummary {
    pub first: f64,
    pub last: f64,
    pub min: f64,
    pub max: f64,
}

impl ScheduleSummary {
    /// The summary of `sigmas` (`None` when empty).
    pub fn of(sigmas: &[f64]) -> Option<Self> {
        let (&first, &last) = (sigmas.first()?, sigmas.last()?);
        let min = sigmas.iter().copied().fold(f64::INFINITY, f64::min);
        let max = sigmas.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Self {
            first,
            last,
            min,
            max,
        })
    }
}

/// Round σ down to `digits` significant decimal digits (a smaller σ is more privacy loss, so
/// accounting the rounded value over-estimates ε: conservative).
pub fn round_down_significant(sigma: f64, digits: u32) -> f64 {
    if !(sigma.is_finite() && sigma > 0.0) {
        return sigma;
    }
    let exponent = sigma.log10().floor() as i32 - (digits as i32 - 1);
    let unit = 10f64.powi(exponent);
    let r = (sigma / unit).floor() * unit;
    // Guard against the representation of r exceeding σ.
    if r > sigma { r - unit } else { r }
}

/// Parse per-step noise multipliers: one number per line, or a CSV whose header names a
/// `noise_multiplier` column (the last column is taken when there is no header). Blank lines
/// and lines starting with `#` are skipped.
pub fn parse_values(text: &str) -> Result<Vec<f64>, ScheduleError> {
    let mut column: Option<usize> = None;
    let mut out = Vec::new();
    let mut first_data = true;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if first_data {
            first_data = false;
            if fields.iter().any(|f| f.parse::<f64>().is_err()) {
                let idx = fields
                    .iter()
                    .position(|f| *f == "noise_multiplier")
                    .ok_or_else(|| ScheduleError::Parse {
                        line: i + 1,
                        reason: "a header must name a `noise_multiplier` column".into(),
                    })?;
                column = Some(idx);
                continue;
            }
        }
        let idx = column.unwrap_or(fields.len() - 1);
        let field = fields.get(idx).ok_or_else(|| ScheduleError::Parse {
            line: i + 1,
            reason: format!("no column {}", idx + 1),
        })?;
        let v: f64 = field.parse().map_err(|_| ScheduleError::Parse {
            line: i + 1,
            reason: format!("`{field}` is not a number"),
        })?;
        if !(v.is_finite() && v > 0.0) {
            return Err(ScheduleError::Parse {
                line: i + 1,
                reason: format!("noise multiplier {v} is not a finite number > 0"),
            });
        }
        if out.len() >= MAX_FILE_VALUES {
            return Err(ScheduleError::TooLong {
                max: MAX_FILE_VALUES,
            });
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
