//! The accelerated update rules of Kuru, Birbil, Gürbüzbalaban and Yıldırım, "Differentially
//! Private Accelerated Optimization Algorithms" (2020; method notes `docs/methods/accelerated.md` §3): gradient
//! descent, heavy ball (classic and its "smoothing"/EMA form), Nesterov's accelerated gradient with
//! the gradient taken at the look-ahead point, and the multi-stage MASG of Aybat et al. (2019).
//!
//! Room: `optim`. Owns the iterates x_t, x_{t−1} (and the EMA buffer) of one run, the point at which
//! the next gradient must be taken ([`AcceleratedState::gradient_point`]) and the per-step step
//! sizes α_t, momenta β_t and MASG stages ([`step_schedule`], pure functions of the problem
//! constants and the step). Must not: see data, per-sample gradients or noise; the gradient it is
//! given is already private.
//!
//! One step t (0-based) of a run, as the training loop drives it:
//!
//! ```text
//! p    = schedule[t]                      α_t, β_t, stage, restart (pure function of t)
//! y    = state.gradient_point(method, p)  x_t (GD, HB) or z_t = (1+β)x_t − βx_{t−1} (NAG, MASG)
//! g    = ∇F_B(y) + η_t                    formed by the caller (model + privacy rooms)
//! state.step(method, g, p)                x_{t+1}
//! ```
//!
//! f64 throughout: the paper's problem is 20-dimensional, and the identities tested here (the two
//! heavy-ball forms) are exact in real arithmetic.

use ndarray::{Array1, ArrayView1, Zip};
use serde::Serialize;

/// Which accelerated method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceleratedMethod {
    /// DP-GD: x_{t+1} = x_t − α g(x_t). (The paper's code runs it as NAG with β = 0.)
    Gd,
    /// DP-HB (eq. 9): x_{t+1} = x_t − α g(x_t) + β(x_t − x_{t−1}), x_{−1} = x_0.
    HeavyBall,
    /// DP-SHB, the "smoothing" form (eqs. 14–15): ū_t = β ū_{t−1} + (1 − β) g(x_t), ū_{−1} = 0,
    /// x_{t+1} = x_t − (α / (1 − β)) ū_t. The same iterates as [`Self::HeavyBall`].
    HeavyBallEma,
    /// DP-NAG (eq. 27): z_t = (1 + β)x_t − βx_{t−1}, x_{t+1} = z_t − α g(z_t).
    Nesterov,
    /// DP-MASG (eq. 33; Aybat et al. 2019): NAG in stages with α_k = c·2^{−2k}/L (k ≥ 2) and the
    /// momentum restarted (x_{t−1} := x_t) at the first step of every stage.
    Masg,
}

impl AcceleratedMethod {
    /// True when the gradient is taken at the look-ahead point z_t rather than at x_t.
    pub fn uses_lookahead(self) -> bool {
        matches!(self, AcceleratedMethod::Nesterov | AcceleratedMethod::Masg)
    }
}

/// The momentum rule β(α).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MomentumRule {
    /// β = (1 − √(αμ)) / (1 + √(αμ)): NAG's choice for μ-strongly convex F, which the authors' code
    /// also uses for heavy ball (docs/methods/accelerated.md §3).
    StronglyConvex,
    /// A fixed β.
    Value { momentum: f64 },
}

/// MASG stage lengths (docs/methods/accelerated.md §3, "DP-MASG").
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MasgStages {
    /// p of n_k = 2^k ⌈√κ ln(2^{p+2})⌉ (the paper uses p = 1).
    pub p: u32,
    /// n_1; `None` for the authors' code's ⌈2√κ ln √κ⌉ (at least 1).
    pub n1: Option<u64>,
}

impl MasgStages {
    /// n_1, the length of stage 1, for condition number κ = L/μ.
    pub fn first_stage(&self, kappa: f64) -> u64 {
        match self.n1 {
            Some(n1) => n1.max(1),
            None => {
                let s = kappa.sqrt();
                ((2.0 * s * s.ln()).ceil().max(1.0)) as u64
            }
        }
    }

    /// n_k for k ≥ 2: 2^k ⌈√κ ln(2^{p+2})⌉ (at least 1).
    pub fn stage_length(&self, k: u32, kappa: f64) -> u64 {
        let base = (kappa.sqrt() * (f64::from(self.p) + 2.0) * std::f64::consts::LN_2)
            .ceil()
            .max(1.0) as u64;
        base.saturating_mul(1u64 << k.min(62))
    }
}

/// The parameters of one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepParams {
    /// Step size α_t.
    pub alpha: f64,
    /// Momentum β_t (0 for GD).
    pub beta: f64,
    /// MASG stage s_t (1 for every other method).
    pub stage: u32,
    /// Restart the momentum before this step (x_{t−1} := x_t): the first step of a MASG stage.
    pub restart: bool,
}

/// The problem constants the step sizes come from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProblemConstants {
    /// Smoothness L of F.
    pub smoothness: f64,
    /// Strong-convexity modulus μ of F.
    pub strong_convexity: f64,
}

impl ProblemConstants {
    /// κ = L/μ.
    pub fn condition_number(&self) -> f64 {
        self.smoothness / self.strong_convexity
    }
}

/// β for step size α under `rule`.
pub fn momentum_for(rule: MomentumRule, alpha: f64, mu: f64) -> f64 {
    match rule {
        MomentumRule::StronglyConvex => {
            let r = (alpha * mu).sqrt();
            (1.0 - r) / (1.0 + r)
        }
        MomentumRule::Value { momentum } => momentum,
    }
}

/// α_t, β_t, stage and restart for each of `steps` steps, with base step α = c/L.
///
/// MASG: stage 1 has n_1 steps at α = c/L; stage k ≥ 2 has n_k steps at α = c·2^{−2k}/L; stages
/// are cut at `steps`; every stage after the first starts with a momentum restart.
pub fn step_schedule(
    method: AcceleratedMethod,
    c: f64,
    momentum: MomentumRule,
    constants: ProblemConstants,
    stages: MasgStages,
    steps: u64,
) -> Vec<StepParams> {
    let l = constants.smoothness;
    let mu = constants.strong_convexity;
    let alpha = c / l;
    let plain = |beta: f64| StepParams {
        alpha,
        beta,
        stage: 1,
        restart: false,
    };
    match method {
        AcceleratedMethod::Gd => vec![plain(0.0); steps as usize],
        AcceleratedMethod::HeavyBall
        | AcceleratedMethod::HeavyBallEma
        | AcceleratedMethod::Nesterov => {
            vec![plain(momentum_for(momentum, alpha, mu)); steps as usize]
        }
        AcceleratedMethod::Masg => {
            let kappa = constants.condition_number();
            let mut out = Vec::with_capacity(steps as usize);
            let mut stage = 1u32;
            let mut left = stages.first_stage(kappa);
            let mut alpha_k = alpha;
            let mut first = false;
            while (out.len() as u64) < steps {
                if left == 0 {
                    stage += 1;
                    left = stages.stage_length(stage, kappa);
                    alpha_k = c * 2f64.powi(-2 * stage as i32) / l;
                    first = true;
                }
                out.push(StepParams {
                    alpha: alpha_k,
                    beta: momentum_for(momentum, alpha_k, mu),
                    stage,
                    restart: first,
                });
                first = false;
                left -= 1;
            }
            out
        }
    }
}

/// The iterates of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceleratedState {
    /// x_t.
    pub x: Array1<f64>,
    /// x_{t−1} (x_{−1} = x_0).
    pub x_prev: Array1<f64>,
    /// ū_{t−1} of the EMA form (zero before the first step).
    pub ema: Array1<f64>,
    /// The point of the next gradient (x_t or z_t), filled by [`Self::gradient_point`].
    point: Array1<f64>,
    /// Steps taken.
    pub steps: u64,
}

impl AcceleratedState {
    /// A fresh state at x_0 (x_{−1} = x_0, so the first momentum term is zero).
    pub fn new(x0: Array1<f64>) -> Self {
        let d = x0.len();
        AcceleratedState {
            x_prev: x0.clone(),
            point: x0.clone(),
            x: x0,
            ema: Array1::zeros(d),
            steps: 0,
        }
    }

    /// The point at which the gradient of step `p` must be taken: z_t = (1 + β)x_t − βx_{t−1} for
    /// NAG and MASG (after the restart x_{t−1} := x_t when `p.restart`), x_t otherwise.
    pub fn gradient_point(
        &mut self,
        method: AcceleratedMethod,
        p: &StepParams,
    ) -> ArrayView1<'_, f64> {
        if p.restart {
            self.x_prev.assign(&self.x);
        }
        if method.uses_lookahead() {
            let b = p.beta;
            Zip::from(&mut self.point)
                .and(&self.x)
                .and(&self.x_prev)
                .for_each(|z, &x, &xp| *z = (1.0 + b) * x - b * xp);
        } else {
            self.point.assign(&self.x);
        }
        self.point.view()
    }

    /// Take step `p` with the (private) gradient `g`, taken at [`Self::gradient_point`].
    ///
    /// # Shapes
    /// `g` has the length of x.
    pub fn step(&mut self, method: AcceleratedMethod, g: ArrayView1<'_, f64>, p: &StepParams) {
        debug_assert_eq!(g.len(), self.x.len());
        let (a, b) = (p.alpha, p.beta);
        match method {
            AcceleratedMethod::Gd => {
                self.x_prev.assign(&self.x);
                Zip::from(&mut self.x).and(g).for_each(|x, &g| *x -= a * g);
            }
            AcceleratedMethod::HeavyBall => {
                Zip::from(&mut self.x)
                    .and(&mut self.x_prev)
                    .and(g)
                    .for_each(|x, xp, &g| {
                        let next = *x - a * g + b * (*x - *xp);
                        *xp = *x;
                        *x = next;
                    });
            }
            AcceleratedMethod::HeavyBallEma => {
                let step = a / (1.0 - b);
                Zip::from(&mut self.x)
                    .and(&mut self.x_prev)
                    .and(&mut self.ema)
                    .and(g)
                    .for_each(|x, xp, u, &g| {
                        *u = b * *u + (1.0 - b) * g;
                        *xp = *x;
                        *x -= step * *u;
                    });
            }
            AcceleratedMethod::Nesterov | AcceleratedMethod::Masg => {
                // x_{t+1} = z_t − α g(z_t); z_t is the last gradient point.
                Zip::from(&mut self.x)
                    .and(&mut self.x_prev)
                    .and(&self.point)
                    .and(g)
                    .for_each(|x, xp, &z, &g| {
                        *xp = *x;
                        *x = z - a * g;
                    });
            }
        }
        self.steps += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// The gradient of F(x) = ½ Σ_i h_i x_i² plus a fixed perturbation per step (a stand-in for
    /// the noise), so that both forms see the same gradient sequence as a function of x.
    fn grad(x: ArrayView1<f64>, t: u64) -> Array1<f64> {
        let h = [0.3, 2.0, 5.0];
        Array1::from_iter(
            x.iter()
                .zip(h)
                .enumerate()
                .map(|(i, (x, h))| h * x + ((t as f64 + 1.0) * (i as f64 + 0.7)).sin()),
        )
    }

    fn run(method: AcceleratedMethod, sched: &[StepParams]) -> Vec<Array1<f64>> {
        let mut st = AcceleratedState::new(array![10.0, 10.0, 10.0]);
        let mut out = vec![st.x.clone()];
        for (t, p) in sched.iter().enumerate() {
            let y = st.gradient_point(method, p).to_owned();
            let g = grad(y.view(), t as u64);
            st.step(method, g.view(), p);
            out.push(st.x.clone());
        }
        out
    }

    #[test]
    fn heavy_ball_and_its_smoothing_form_give_the_same_iterates() {
        let c = ProblemConstants {
            smoothness: 5.0,
            strong_convexity: 0.3,
        };
        let stages = MasgStages { p: 1, n1: None };
        let sched = step_schedule(
            AcceleratedMethod::HeavyBall,
            1.0,
            MomentumRule::StronglyConvex,
            c,
            stages,
            300,
        );
        assert!(sched[0].beta > 0.5, "β = {}", sched[0].beta);
        let a = run(AcceleratedMethod::HeavyBall, &sched);
        let b = run(AcceleratedMethod::HeavyBallEma, &sched);
        for (t, (xa, xb)) in a.iter().zip(&b).enumerate() {
            for (u, v) in xa.iter().zip(xb) {
                assert!(
                    (u - v).abs() <= 1e-12 * (1.0 + u.abs()),
                    "step {t}: {u} vs {v}"
                );
            }
        }
        // And the momentum matters: heavy ball is not gradient descent.
        let g = run(AcceleratedMethod::Gd, &sched);
        assert!((g[50][0] - a[50][0]).abs() > 1e-3);
    }

    #[test]
    fn nesterov_takes_the_gradient_at_the_lookahead_point() {
        let p = StepParams {
            alpha: 0.1,
            beta: 0.5,
            stage: 1,
            restart: false,
        };
        let mut st = AcceleratedState::new(array![1.0]);
        st.x = array![2.0];
        st.x_prev = array![1.0];
        // z = 1.5·2 − 0.5·1 = 2.5; x_next = 2.5 − 0.1·g.
        assert_eq!(st.gradient_point(AcceleratedMethod::Nesterov, &p)[0], 2.5);
        st.step(AcceleratedMethod::Nesterov, array![1.0].view(), &p);
        assert!((st.x[0] - 2.4).abs() < 1e-15);
        assert_eq!(st.x_prev[0], 2.0);
        // A restart makes z = x.
        let r = StepParams { restart: true, ..p };
        assert!((st.gradient_point(AcceleratedMethod::Masg, &r)[0] - 2.4).abs() < 1e-15);
        // Heavy ball takes it at x: x_next = 2 − 0.1·1 + 0.5·(2 − 1) = 2.4.
        let mut hb = AcceleratedState::new(array![1.0]);
        hb.x = array![2.0];
        assert_eq!(hb.gradient_point(AcceleratedMethod::HeavyBall, &p)[0], 2.0);
        hb.step(AcceleratedMethod::HeavyBall, array![1.0].view(), &p);
        assert!((hb.x[0] - 2.4).abs() < 1e-15);
    }

    #[test]
    fn masg_stages_match_the_papers_setting() {
        // docs/methods/accelerated.md §3: L ≈ 5.10, μ = 0.02, κ ≈ 255: n_1 = 89, n_2 = 136, n_3 = 272.
        let c = ProblemConstants {
            smoothness: 5.1028,
            strong_convexity: 0.02,
        };
        let stages = MasgStages { p: 1, n1: None };
        assert_eq!(stages.first_stage(c.condition_number()), 89);
        assert_eq!(stages.stage_length(2, c.condition_number()), 136);
        assert_eq!(stages.stage_length(3, c.condition_number()), 272);
        let s = step_schedule(
            AcceleratedMethod::Masg,
            1.0,
            MomentumRule::StronglyConvex,
            c,
            stages,
            1000,
        );
        assert_eq!(s.len(), 1000);
        assert_eq!(s[88].stage, 1);
        assert!(!s[88].restart);
        assert_eq!(s[89].stage, 2);
        assert!(s[89].restart && !s[90].restart);
        assert!((s[89].alpha - 1.0 / (16.0 * 5.1028)).abs() < 1e-15);
        assert_eq!(s[89 + 136].stage, 3);
        assert_eq!(s[999].stage, 4);
        assert!(s[89].beta > s[0].beta, "smaller α, larger β");
        // Figure 2: μ = 1, L = 20, K = 3 stages give T = 133 with n_1 = 13, C = 10.
        let f2 = ProblemConstants {
            smoothness: 20.0,
            strong_convexity: 1.0,
        };
        let st = MasgStages { p: 1, n1: Some(13) };
        assert_eq!(
            13 + st.stage_length(2, 20.0) + st.stage_length(3, 20.0),
            133
        );
        let _ = f2;
    }
}
