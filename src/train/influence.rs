//! The noise influence of a run estimated from its training data (room: `train`, which owns the
//! data): [`Influence`], what the plan takes from either estimate, and the analytic one here — the
//! Hessian of the squared loss of a linear model and its eigenvalues, turned into the
//! `influence_quadratic` noise schedules by [`crate::privacy::schedule::influence`] (Hong, Wang,
//! Zhou, "On dynamic noise influence in differential private learning": the `dyn` and `exp`
//! schedules of its squared-loss experiments; docs/methods/dynamic_noise.md §1.2(g)).
//!
//! For F(θ) = (1/n) Σ_i ½ ‖W x_i + b − t_i‖² + (λ₂/2)‖θ‖² the Hessian is block diagonal, one block
//! per output, each H = X̃ᵀX̃/n + λ₂ I with X̃ = [X, 1] (the bias as a feature of value 1). Every
//! output has the same eigenvalues, which scales q_t and leaves the schedule's shape unchanged,
//! so the eigenvalues of one block are enough.
//!
//! Privacy: H is a statistic of the private training data, fitted without noise, that decides
//! every σ_t. The config refuses it in a private run unless `data.allow_nonprivate_statistics`
//! accepts it, and the plan then marks ε not guaranteed (as the paper, which does not privatise its
//! influence estimate).

use std::sync::Arc;

use ndarray::{Array2, Axis};

use crate::config::spec::{ClipSpec, ExperimentSpec, NoiseSchedule};
use crate::config::{ConfigError, Location};
use crate::data::Dataset;
use crate::privacy::schedule::NoiseShape;
use crate::privacy::schedule::influence::{
    fit_exponential, influence_shape, ln_quadratic_influence,
};

use super::TrainError;
use super::influence_retrain::{RetrainedInfluence, retrained_influence};
use crate::model::Model;

/// Most features (before the bias column) whose Hessian is decomposed: the eigenvalues cost
/// O(d³) per Jacobi sweep, measured 0.5 s at d = 256 and 8 s at d = 512 on one core (44 s at
/// 1,025, so larger inputs are refused: reduce them with `data.pca_components`).
pub const MAX_INFLUENCE_FEATURES: usize = 512;

/// Most steps × eigenvalues the influence is evaluated at (one logarithm and exponential each).
pub const MAX_INFLUENCE_TERMS: u64 = 1_000_000_000;

/// The schedule estimated from the data, with what a user should know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct QuadraticInfluence {
    /// The noise shape s_0 … s_{T−1} (`dyn`, or its fitted exponential).
    pub shape: NoiseShape,
    /// λ_max of the Hessian, and η·λ_max (< 2, checked).
    pub largest_eigenvalue: f64,
    pub learning_rate_times_largest: f64,
    /// The fraction of training examples whose gradient at θ = 0 is longer than the clip norm
    /// (‖t_i‖·‖x̃_i‖ > C): the analytic influence assumes no clipping. `None` without flat
    /// clipping.
    pub clipped_at_zero: Option<f64>,
}

/// A noise schedule estimated from the training data: the analytic influence of the squared
/// loss (here) or the influence estimated by retraining ([`super::influence_retrain`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Influence {
    Quadratic(QuadraticInfluence),
    Retrained(RetrainedInfluence),
}

impl Influence {
    /// The noise shape s_0 … s_{T−1}.
    pub fn shape(&self) -> &NoiseShape {
        match self {
            Influence::Quadratic(i) => &i.shape,
            Influence::Retrained(i) => &i.shape,
        }
    }

    /// What the plan warns about the schedule `name` (its ε is never guaranteed).
    pub fn warnings(&self, name: &str) -> Vec<String> {
        match self {
            Influence::Quadratic(i) => {
                let mut w = vec![format!(
                    "noise.schedule = {name} is fitted to the eigenvalues of the private training data's Hessian without noise (data.allow_nonprivate_statistics = true); epsilon does not cover them and is not guaranteed"
                )];
                if let Some(f) = i.clipped_at_zero.filter(|&f| f > 0.5) {
                    w.push(format!(
                        "noise.schedule = {name}: {:.0}% of the per-example gradients at θ = 0 are longer than clip.clip_norm; the analytic influence assumes no clipping (Hong et al.), so the schedule may not be the optimal one for this run",
                        100.0 * f
                    ));
                }
                w
            }
            Influence::Retrained(i) => i.warnings(name),
        }
    }
}

/// Whether the plan of `spec` depends on the whole training split (its noise schedule is
/// estimated from it).
pub fn needs_training_data(spec: &ExperimentSpec) -> bool {
    spec.privacy.as_ref().is_some_and(|p| {
        matches!(
            p.noise_schedule,
            NoiseSchedule::InfluenceQuadratic { .. } | NoiseSchedule::InfluenceRetrained { .. }
        )
    })
}

/// The schedule of `spec` estimated from `train` (with `model`, for retraining), or `None` when
/// its schedule does not depend on the data.
pub fn estimate(
    spec: &ExperimentSpec,
    model: &Model,
    train: &Dataset,
) -> Result<Option<Influence>, TrainError> {
    if let Some(q) = quadratic_influence(spec, train)? {
        return Ok(Some(Influence::Quadratic(q)));
    }
    Ok(retrained_influence(spec, model, train)?.map(Influence::Retrained))
}

/// The `influence_quadratic` schedule of `spec` on `train`, or `None` when the run uses another
/// schedule. The config has already checked the model (linear, squared loss), the optimizer (sgd)
/// and the learning rate (constant).
pub fn quadratic_influence(
    spec: &ExperimentSpec,
    train: &Dataset,
) -> Result<Option<QuadraticInfluence>, TrainError> {
    let Some(p) = &spec.privacy else {
        return Ok(None);
    };
    let NoiseSchedule::InfluenceQuadratic {
        fit_exponential: fit,
    } = p.noise_schedule
    else {
        return Ok(None);
    };
    let refuse = |reason: String| {
        TrainError::Config(ConfigError::DataMismatch {
            at: Location::file(&spec.source),
            key: "noise.schedule".into(),
            reason,
        })
    };
    let (n, d) = train.features.dim();
    if d > MAX_INFLUENCE_FEATURES {
        return Err(refuse(format!(
            "\"influence_quadratic\" decomposes the {d}-feature Hessian of the data; at most {MAX_INFLUENCE_FEATURES} features are supported (reduce them with data.pca_components)"
        )));
    }
    if n == 0 {
        return Err(refuse(
            "no training examples to estimate the influence".into(),
        ));
    }
    let steps = spec.planned_steps(n);
    if steps.saturating_mul(d as u64 + 1) > MAX_INFLUENCE_TERMS {
        return Err(refuse(format!(
            "the analytic influence of {steps} steps over {} eigenvalues is more than {MAX_INFLUENCE_TERMS} terms: use fewer steps or features",
            d + 1
        )));
    }
    let eigenvalues = hessian_eigenvalues(train, spec.model.l2);
    let eta = spec.train.learning_rate;
    let ln_q =
        ln_quadratic_influence(&eigenvalues, eta, steps).map_err(|e| refuse(e.to_string()))?;
    let dyn_shape = influence_shape(&ln_q);
    let shape = if fit {
        let (decay, fitted) = fit_exponential(&dyn_shape);
        NoiseShape::InfluenceQuadratic {
            values: Arc::from(fitted),
            fitted_decay: Some(decay),
        }
    } else {
        NoiseShape::InfluenceQuadratic {
            values: Arc::from(dyn_shape),
            fitted_decay: None,
        }
    };
    let largest = eigenvalues.iter().copied().fold(0.0, f64::max);
    let clipped_at_zero = match spec.clip {
        ClipSpec::Flat { clip_norm } => Some(clipped_at_zero(train, clip_norm)),
        _ => None,
    };
    Ok(Some(QuadraticInfluence {
        shape,
        largest_eigenvalue: largest,
        learning_rate_times_largest: eta * largest,
        clipped_at_zero,
    }))
}

/// The eigenvalues of X̃ᵀX̃/n + l2·I (X̃ = [X, 1]), ascending.
pub fn hessian_eigenvalues(train: &Dataset, l2: f64) -> Vec<f64> {
    let (n, d) = train.features.dim();
    let mut x = Array2::<f64>::ones((n, d + 1));
    x.slice_mut(ndarray::s![.., ..d])
        .assign(&train.features.mapv(f64::from));
    let mut h = x.t().dot(&x) / n.max(1) as f64;
    h.diag_mut().mapv_inplace(|v| v + l2);
    crate::eigen::symmetric_eigenvalues(h)
}

/// The fraction of examples with ‖t_i‖·‖x̃_i‖ > `clip_norm`: their squared-loss gradient at θ = 0,
/// (W x + b − t) x̃ᵀ = −t x̃ᵀ, would be clipped (t the one-hot label; for one output, the 0/1
/// label itself).
fn clipped_at_zero(train: &Dataset, clip_norm: f64) -> f64 {
    let binary = train.num_classes <= 2;
    let over = train
        .features
        .axis_iter(Axis(0))
        .zip(&train.labels)
        .filter(|&(row, &y)| {
            let target = if binary { y as f64 } else { 1.0 };
            let norm = (1.0 + row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>()).sqrt();
            target * norm > clip_norm
        })
        .count();
    over as f64 / train.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn the_hessian_has_the_bias_column_and_the_penalty() {
        // Features 0 and 2 (n = 2): X̃ = [[0, 1], [2, 1]], X̃ᵀX̃/2 = [[2, 1], [1, 1]].
        let train = Dataset {
            features: array![[0.0f32], [2.0]],
            labels: vec![0, 1],
            sample_shape: vec![1],
            num_classes: 2,
        };
        let got = hessian_eigenvalues(&train, 0.5);
        let r = (0.25f64 + 1.0).sqrt();
        let want = [1.5 - r + 0.5, 1.5 + r + 0.5];
        assert!((got[0] - want[0]).abs() < 1e-14 && (got[1] - want[1]).abs() < 1e-14);
        // Label 1's gradient at 0 is ‖(2, 1)‖ = 2.236 long; label 0's is 0.
        assert_eq!(clipped_at_zero(&train, 2.0), 0.5);
        assert_eq!(clipped_at_zero(&train, 2.5), 0.0);
    }
}
