//! The optimizer room: update rules applied to a finished (already private) gradient, and
//! learning-rate schedules.
//!
//! Walls: an optimizer sees only the released gradient and its own state; it never sees
//! per-sample gradients or data, so everything it does is post-processing of a private release.
//! Rules are immutable values and state is explicit (after burn's `Optimizer::step`): the same
//! rule can drive several seeds, and `lr` arrives per step from a schedule in [`lr`].

pub mod lr;

use ndarray::{Array1, ArrayView1};
use serde::Serialize;

/// An update rule θ ← θ − η·u(g, state).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Optimizer {
    /// Plain SGD: θ ← θ − η g.
    Sgd,
    /// SGD with momentum in PyTorch's form: v ← μ v + g; θ ← θ − η v
    /// (dampening 0; `nesterov` uses g + μ v as the step direction, as `torch.optim.SGD`).
    Momentum { momentum: f64, nesterov: bool },
}

/// The mutable state of an [`Optimizer`] for one parameter vector.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OptimizerState {
    /// Momentum buffer (empty until the first step of a rule that needs it).
    pub velocity: Vec<f64>,
}

impl Optimizer {
    /// A fresh state for `num_params` parameters.
    pub fn init_state(&self, num_params: usize) -> OptimizerState {
        match self {
            Optimizer::Sgd => OptimizerState::default(),
            Optimizer::Momentum { .. } => OptimizerState {
                velocity: vec![0.0; num_params],
            },
        }
    }

    /// Apply one update to `params` with gradient `grad` and learning rate `lr`.
    ///
    /// # Shapes
    /// `params` and `grad` have the same length P.
    pub fn step(
        &self,
        params: &mut Array1<f32>,
        grad: ArrayView1<f64>,
        lr: f64,
        state: &mut OptimizerState,
    ) {
        debug_assert_eq!(params.len(), grad.len());
        match *self {
            Optimizer::Sgd => {
                for (p, g) in params.iter_mut().zip(grad.iter()) {
                    *p = (*p as f64 - lr * g) as f32;
                }
            }
            Optimizer::Momentum { momentum, nesterov } => {
                if state.velocity.len() != params.len() {
                    state.velocity = vec![0.0; params.len()];
                }
                for ((p, g), v) in params
                    .iter_mut()
                    .zip(grad.iter())
                    .zip(state.velocity.iter_mut())
                {
                    *v = momentum * *v + g;
                    let dir = if nesterov { g + momentum * *v } else { *v };
                    *p = (*p as f64 - lr * dir) as f32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn sgd_step() {
        let opt = Optimizer::Sgd;
        let mut st = opt.init_state(2);
        let mut p = array![1.0f32, -1.0];
        opt.step(&mut p, array![0.5, -0.5].view(), 0.1, &mut st);
        assert_eq!(p, array![0.95f32, -0.95]);
    }

    #[test]
    fn momentum_matches_torch_recurrence() {
        // torch.optim.SGD(momentum=0.9): v1 = g1, v2 = 0.9 v1 + g2; p -= lr v.
        let opt = Optimizer::Momentum {
            momentum: 0.9,
            nesterov: false,
        };
        let mut st = opt.init_state(1);
        let mut p = array![0.0f32];
        opt.step(&mut p, array![1.0].view(), 0.1, &mut st);
        assert!((p[0] + 0.1).abs() < 1e-7);
        opt.step(&mut p, array![1.0].view(), 0.1, &mut st);
        assert!((p[0] + 0.1 + 0.19).abs() < 1e-6);
    }
}
