//! The optimizer room: update rules applied to a finished (already private) gradient, and
//! learning-rate schedules.
//!
//! Walls: an optimizer sees only the released gradient and its own state; it never sees
//! per-sample gradients or data, so everything it does is post-processing of a private release.
//! Rules are immutable values and state is explicit (after burn's `Optimizer::step`): the same
//! rule can drive several seeds, and `lr` arrives per step from a schedule in [`lr`].
//!
//! Every rule is element-wise (`elementwise.rs`): from [`PAR_MIN_PARAMS`] parameters on, the
//! update runs on the rayon pool, each chunk compiled for AVX-512 where the CPU has it (each
//! element computed alone, by the same operations, so the bits depend neither on the thread count
//! nor on the CPU); AdaGrad-norm's ‖g‖² stays one serial sum in index order.

pub mod accelerated;
pub mod certificate;
pub(crate) mod elementwise;
pub mod lr;

use ndarray::{Array1, ArrayView1};

use elementwise::{each2, each3, each4};
use serde::Serialize;

/// Parameter count from which element-wise updates over the parameter vector run in parallel
/// (below it a hand-off to the pool costs more than the pass). The results do not depend on it.
pub const PAR_MIN_PARAMS: usize = 1 << 16;

/// Run `$f` over the lockstep `Zip` `$zip` of `$n` elements: in parallel from
/// [`PAR_MIN_PARAMS`] on, else on this thread. Used by every element-wise pass over the
/// parameter vector (the optimizer rules here, the scaling and the parameter average of
/// `train`).
macro_rules! each_param {
    ($n:expr, $zip:expr, $f:expr) => {{
        let n: usize = $n;
        let zip = $zip;
        if n >= $crate::optim::PAR_MIN_PARAMS {
            zip.par_for_each($f)
        } else {
            zip.for_each($f)
        }
    }};
}
pub(crate) use each_param;

/// An update rule θ ← θ − η·u(g, state).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Optimizer {
    /// Plain SGD: θ ← θ − η g.
    Sgd,
    /// SGD with momentum in PyTorch's form: v ← μ v + g; θ ← θ − η v
    /// (dampening 0; `nesterov` uses g + μ v as the step direction, as `torch.optim.SGD`).
    Momentum { momentum: f64, nesterov: bool },
    /// Bias-corrected momentum of the dynamic-noise paper (Hong et al., Alg. 1 with
    /// φ(m_t, g_t); docs/methods/dynamic_noise.md §1.1): v ← β v + (1 − β) g (v starts at 0),
    /// m = v / (1 − β^k) at the k-th step (k = 1, 2, …), θ ← θ − η m. So m = g at the first step.
    BiasCorrectedMomentum { beta: f64 },
    /// AdaGrad-norm step sizes (Ward et al. 2019; ADP-SGD paper S5', docs/methods/adp_sgd.md §1.2):
    /// b_{k+1}² = b_k² + max(β_k ‖g‖², ν), β_k = max(β / ((k mod P) + 1), 1) (β_k = β without a
    /// period), θ ← θ − (η / b_{k+1}) g. ‖g‖ is the released (noisy) gradient's norm unless the
    /// caller passes another (see [`Optimizer::step_with_norm`]).
    AdagradNorm {
        b0_sq: f64,
        nu: f64,
        beta: f64,
        beta_period: Option<u64>,
    },
    /// Adam (Kingma & Ba 2015, Alg. 1; the form of PyTorch's `torch.optim.Adam`, no weight
    /// decay): m ← β1 m + (1 − β1) g, v ← β2 v + (1 − β2) g², m̂ = m/(1 − β1^k),
    /// v̂ = v/(1 − β2^k) at the k-th step (k = 1, 2, …), θ ← θ − η m̂/(√v̂ + ε̂), ε̂ =
    /// `stability_constant`. On a released gradient it is post-processing (DC-SGD's main optimizer).
    Adam {
        beta1: f64,
        beta2: f64,
        stability_constant: f64,
    },
}

/// The mutable state of an [`Optimizer`] for one parameter vector.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OptimizerState {
    /// Momentum buffer (empty until the first step of a rule that needs it).
    pub velocity: Vec<f64>,
    /// Steps taken so far.
    pub steps: u64,
    /// b_k² of AdaGrad-norm.
    pub b_sq: f64,
    /// Adam's second-moment estimate v (its first moment is `velocity`).
    pub second_moment: Vec<f64>,
}

impl Optimizer {
    /// A fresh state for `num_params` parameters.
    pub fn init_state(&self, num_params: usize) -> OptimizerState {
        match self {
            Optimizer::Sgd => OptimizerState::default(),
            Optimizer::Momentum { .. } | Optimizer::BiasCorrectedMomentum { .. } => {
                OptimizerState {
                    velocity: vec![0.0; num_params],
                    ..OptimizerState::default()
                }
            }
            Optimizer::AdagradNorm { b0_sq, .. } => OptimizerState {
                b_sq: *b0_sq,
                ..OptimizerState::default()
            },
            Optimizer::Adam { .. } => OptimizerState {
                velocity: vec![0.0; num_params],
                second_moment: vec![0.0; num_params],
                ..OptimizerState::default()
            },
        }
    }

    /// The AdaGrad-norm rule needs ‖g‖² of a gradient other than the released one only in the
    /// paper's non-private "clean" mode; every other rule ignores it.
    pub fn uses_norm(&self) -> bool {
        matches!(self, Optimizer::AdagradNorm { .. })
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
        self.step_with_norm(params, grad, lr, state, None);
    }

    /// [`step`](Self::step) where AdaGrad-norm uses `norm_sq` (when given) in place of ‖grad‖².
    /// Passing anything but a function of released values breaks the privacy guarantee.
    pub fn step_with_norm(
        &self,
        params: &mut Array1<f32>,
        grad: ArrayView1<f64>,
        lr: f64,
        state: &mut OptimizerState,
        norm_sq: Option<f64>,
    ) {
        debug_assert_eq!(params.len(), grad.len());
        let k = state.steps;
        state.steps += 1;
        let n = params.len();
        let Some(p) = params.as_slice_mut() else {
            unreachable!("an owned parameter vector is contiguous")
        };
        let g = grad.as_standard_layout();
        let Some(g) = g.as_slice() else {
            unreachable!("a standard-layout vector is contiguous")
        };
        match *self {
            Optimizer::BiasCorrectedMomentum { beta } => {
                if state.velocity.len() != n {
                    state.velocity = vec![0.0; n];
                }
                let correction = 1.0 - beta.powf((k + 1) as f64);
                each3(
                    p,
                    g,
                    &mut state.velocity,
                    |p: &mut f32, &g: &f64, v: &mut f64| {
                        *v = beta * *v + (1.0 - beta) * g;
                        let m = if correction > 0.0 { *v / correction } else { g };
                        *p = (*p as f64 - lr * m) as f32;
                    },
                );
            }
            Optimizer::AdagradNorm {
                nu,
                beta,
                beta_period,
                ..
            } => {
                let beta_k = match beta_period {
                    Some(period) => (beta / ((k % period.max(1)) + 1) as f64).max(1.0),
                    None => beta,
                };
                let g_sq = norm_sq.unwrap_or_else(|| g.iter().map(|g| g * g).sum());
                state.b_sq += (beta_k * g_sq).max(nu);
                let step = lr / state.b_sq.sqrt();
                each2(p, g, |p: &mut f32, &g: &f64| {
                    *p = (*p as f64 - step * g) as f32
                });
            }
            Optimizer::Sgd => each2(p, g, |p: &mut f32, &g: &f64| {
                *p = (*p as f64 - lr * g) as f32
            }),
            Optimizer::Adam {
                beta1,
                beta2,
                stability_constant,
            } => {
                if state.velocity.len() != n {
                    state.velocity = vec![0.0; n];
                }
                if state.second_moment.len() != n {
                    state.second_moment = vec![0.0; n];
                }
                let c1 = 1.0 - beta1.powf((k + 1) as f64);
                let c2 = 1.0 - beta2.powf((k + 1) as f64);
                each4(
                    p,
                    g,
                    &mut state.velocity,
                    &mut state.second_moment,
                    |p: &mut f32, &g: &f64, m: &mut f64, v: &mut f64| {
                        *m = beta1 * *m + (1.0 - beta1) * g;
                        *v = beta2 * *v + (1.0 - beta2) * g * g;
                        let m_hat = *m / c1;
                        let v_hat = *v / c2;
                        *p = (*p as f64 - lr * m_hat / (v_hat.sqrt() + stability_constant)) as f32;
                    },
                );
            }
            Optimizer::Momentum { momentum, nesterov } => {
                if state.velocity.len() != n {
                    state.velocity = vec![0.0; n];
                }
                each3(
                    p,
                    g,
                    &mut state.velocity,
                    |p: &mut f32, &g: &f64, v: &mut f64| {
                        *v = momentum * *v + g;
                        let dir = if nesterov { g + momentum * *v } else { *v };
                        *p = (*p as f64 - lr * dir) as f32;
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, s};

    /// Every rule over a vector long enough for the parallel pass, on a two-thread pool, gives
    /// the bits the serial pass gives on the vector's two halves (each under the threshold), over
    /// several steps with state.
    #[test]
    fn the_parallel_update_equals_the_serial_one_bit_for_bit() {
        let n = PAR_MIN_PARAMS + 4_321;
        let half = n / 2;
        assert!(half < PAR_MIN_PARAMS);
        let rules = [
            Optimizer::Sgd,
            Optimizer::Momentum {
                momentum: 0.9,
                nesterov: false,
            },
            Optimizer::Momentum {
                momentum: 0.9,
                nesterov: true,
            },
            Optimizer::BiasCorrectedMomentum { beta: 0.8 },
            Optimizer::AdagradNorm {
                b0_sq: 1e-2,
                nu: 1e-4,
                beta: 1.0,
                beta_period: None,
            },
            Optimizer::Adam {
                beta1: 0.9,
                beta2: 0.999,
                stability_constant: 1e-8,
            },
        ];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a two-thread pool");
        for rule in rules {
            let mut whole = Array1::from_shape_fn(n, |i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5);
            let mut parts = [
                whole.slice(s![..half]).to_owned(),
                whole.slice(s![half..]).to_owned(),
            ];
            let mut state = rule.init_state(n);
            let mut part_states = [rule.init_state(half), rule.init_state(n - half)];
            for step in 0..3u32 {
                let grad = Array1::from_shape_fn(n, |i| {
                    ((i as u32 ^ step).wrapping_mul(2_654_435_761) >> 16) as f64 * 1e-5 - 0.3
                });
                let norm_sq: f64 = grad.iter().map(|g| g * g).sum();
                pool.install(|| {
                    rule.step_with_norm(&mut whole, grad.view(), 0.1, &mut state, Some(norm_sq))
                });
                let (a, b) = grad.view().split_at(ndarray::Axis(0), half);
                for ((part, st), g) in parts.iter_mut().zip(&mut part_states).zip([a, b]) {
                    rule.step_with_norm(part, g, 0.1, st, Some(norm_sq));
                }
            }
            let serial: Vec<u32> = parts.iter().flatten().map(|v| v.to_bits()).collect();
            let parallel: Vec<u32> = whole.iter().map(|v| v.to_bits()).collect();
            assert!(serial == parallel, "{rule:?}: parallel update differs");
        }
    }

    #[test]
    fn sgd_step() {
        let opt = Optimizer::Sgd;
        let mut st = opt.init_state(2);
        let mut p = array![1.0f32, -1.0];
        opt.step(&mut p, array![0.5, -0.5].view(), 0.1, &mut st);
        assert_eq!(p, array![0.95f32, -0.95]);
    }

    #[test]
    fn bias_corrected_momentum_matches_the_paper() {
        // docs/methods/dynamic_noise.md §1.1: m_2 = g_1; then v = 0.9*0.1*1 + 0.1*3 = 0.39 (after v_1 = 0.1),
        // m = 0.39 / (1 - 0.81) = 2.0526315789473686 (hand computation).
        let opt = Optimizer::BiasCorrectedMomentum { beta: 0.9 };
        let mut st = opt.init_state(1);
        let mut p = array![0.0f32];
        opt.step(&mut p, array![1.0].view(), 1.0, &mut st);
        assert!((p[0] + 1.0).abs() < 1e-7);
        opt.step(&mut p, array![3.0].view(), 1.0, &mut st);
        assert!((p[0] + 1.0 + 0.39 / 0.19).abs() < 1e-6, "{}", p[0]);
    }

    #[test]
    fn adagrad_norm_accumulates_the_squared_norm() {
        // b_1^2 = 20 + max(1 * 25, 1e-5) = 45; step 1/sqrt(45) * g with g = (3, 4).
        // Then beta_k restarts: period 2, k = 1 -> beta/2 = 0.5 -> max(0.5, 1) = 1.
        let opt = Optimizer::AdagradNorm {
            b0_sq: 20.0,
            nu: 1e-5,
            beta: 1.0,
            beta_period: Some(2),
        };
        let mut st = opt.init_state(2);
        let mut p = array![0.0f32, 0.0];
        opt.step(&mut p, array![3.0, 4.0].view(), 1.0, &mut st);
        assert_eq!(st.b_sq, 45.0);
        assert!((p[0] as f64 + 3.0 / 45f64.sqrt()).abs() < 1e-6);
        // A tiny gradient adds nu; the clean-norm override replaces ||g||^2.
        opt.step(&mut p, array![0.0, 0.0].view(), 1.0, &mut st);
        assert_eq!(st.b_sq, 45.0 + 1e-5);
        opt.step_with_norm(&mut p, array![0.0, 0.0].view(), 1.0, &mut st, Some(2.0));
        assert_eq!(st.b_sq, 45.0 + 1e-5 + 2.0);
        // With beta = 512 and period 195, beta_k at k = 3 is 512/4 = 128.
        let big = Optimizer::AdagradNorm {
            b0_sq: 0.0,
            nu: 0.0,
            beta: 512.0,
            beta_period: Some(195),
        };
        let mut st = big.init_state(1);
        let mut q = array![0.0f32];
        for _ in 0..3 {
            big.step(&mut q, array![0.0].view(), 1.0, &mut st);
        }
        big.step(&mut q, array![1.0].view(), 1.0, &mut st);
        assert_eq!(st.b_sq, 128.0);
    }

    #[test]
    fn adam_matches_the_bias_corrected_recurrence() {
        // Kingma & Ba Alg. 1 by hand, β = (0.9, 0.999), ε̂ = 1e-8, η = 0.1.
        // Step 1, g = 2: m = 0.2, v = 0.004, m̂ = 2, v̂ = 4: Δ = 0.1·2/(2 + 1e-8).
        // Step 2, g = −1: m = 0.18 − 0.1 = 0.08, v = 0.003996 + 0.001 = 0.004996,
        // m̂ = 0.08/0.19, v̂ = 0.004996/0.001999.
        let opt = Optimizer::Adam {
            beta1: 0.9,
            beta2: 0.999,
            stability_constant: 1e-8,
        };
        let mut st = opt.init_state(1);
        let mut p = array![0.0f32];
        opt.step(&mut p, array![2.0].view(), 0.1, &mut st);
        let d1 = 0.1 * 2.0 / (2.0 + 1e-8);
        assert!((p[0] as f64 + d1).abs() < 1e-7, "{}", p[0]);
        opt.step(&mut p, array![-1.0].view(), 0.1, &mut st);
        let m_hat = 0.08 / (1.0 - 0.81);
        let v_hat: f64 = 0.004996 / (1.0 - 0.999f64 * 0.999);
        let d2 = 0.1 * m_hat / (v_hat.sqrt() + 1e-8);
        assert!(
            (p[0] as f64 - (-d1 - d2)).abs() < 1e-6,
            "{} vs {}",
            p[0],
            -d1 - d2
        );
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
