//! Per-step privacy budgets of the accelerated methods (Kuru et al. 2020; method notes
//! `docs/methods/accelerated.md` §2): the uniform split ε_t = ε/T, the noise-dividing mechanism ε_t ∝ a_{T,t}^{1/3}
//! (Prop. 4.2, eq. 31), the choice of the number of steps T' that minimises the error bound
//! (Remark 4.1), and the exact inversion of amplification by subsampling that turns a per-step
//! budget into a Laplace scale.
//!
//! Room: `privacy`. Owns the maths of budgets and bound weights; takes the step sizes, stages and
//! problem constants as plain numbers (it never imports `optim`, `model` or `train`). The scale it
//! returns is relative to the L1 sensitivity, as in [`crate::privacy::event::DpEvent::Laplace`];
//! the absolute noise scale is formed only in [`crate::privacy::mechanism::add_laplace_noise`].
//!
//! # Maths
//! - Sampling m of n without replacement, replace-one neighbours (Balle, Barthe, Gaboardi 2018,
//!   Thm. 9; paper eq. 11): a step whose Laplace mechanism is ε0-DP on the batch is
//!   ln(1 + (m/n)(e^{ε0} − 1))-DP. Inverted exactly: ε0 = ln(1 + (e^{ε_t} − 1)·n/m), computed as
//!   `ln_1p(exp_m1(ε_t)·n/m)` so that ε_t down to 1e−6 keeps its precision (§10.3). The split is
//!   made in ε-space first and each ε_t inverted: Σ ε_t = ε holds exactly even for m < n (the
//!   linear approximation of eq. 31 with n would overspend, §10.2).
//! - Bound weights (Thm. 4.1 for NAG, Thm. 4.3 for MASG), t = 1..τ, q_i = 1 − √(μ α_i):
//!   a_{τ,t} = 2^{s_τ − s_t} (Π_{i=t+1}^{τ} q_i) w(α_t), a_{τ,0} = 2^{s_τ − s_0} Π_{i=1}^{τ} q_i, with
//!   w(α) = α(1 + αL) in the paper and (α/2)(1 + αL) in the authors' code, and s_0 = s_1 in the
//!   paper, s_0 = 0 in the code ([`BoundConstants`]). Kept in log space: products of 1000 factors
//!   underflow.
//! - Cube-root split (eq. 31): ε_t = ε · a_{T,t}^{1/3} / Σ_j a_{T,j}^{1/3}.
//! - T' (Remark 4.1): argmin over τ = 1..T of a_{τ,0}·E_0 + d (S1/(nε))² (Σ_{t≤τ} a_{τ,t}^{1/3})³.
//!   The whole ε is then split over the T' steps.

use serde::Serialize;

use crate::privacy::special::log_add_exp;

/// Which constants the bound weights use (docs/methods/accelerated.md §3, "Choosing T").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundConstants {
    /// The paper's: w(α) = α(1 + αL), a_{τ,0} with 2^{s_τ − s_1}.
    Paper,
    /// The authors' code's: w(α) = (α/2)(1 + αL), a_{τ,0} with 2^{s_τ} (so even NAG gets a 2).
    Code,
}

/// The error-bound inputs of the T' choice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScoreInputs {
    /// E_0, the guess of the initial error (the paper uses 10).
    pub e0: f64,
    /// Dimension d.
    pub dim: usize,
    /// L1 sensitivity S1 of one example's gradient.
    pub l1_sensitivity: f64,
    /// The n of S1/(nε) (the paper's code uses the dataset size even when m < n).
    pub n: f64,
    /// The total budget ε.
    pub epsilon: f64,
}

/// The step sizes, stages and constants the bound weights are built from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundInputs<'a> {
    /// α_t of steps t = 1..T (index t − 1).
    pub alphas: &'a [f64],
    /// Stage s_t of steps t = 1..T (1 for single-stage methods).
    pub stages: &'a [u32],
    /// Strong convexity μ.
    pub mu: f64,
    /// Smoothness L.
    pub smoothness: f64,
    pub constants: BoundConstants,
}

/// Errors in budget inputs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    #[error("epsilon must be finite and positive, found {epsilon}")]
    InvalidEpsilon { epsilon: f64 },
    #[error("batch size {batch_size} must be in 1..={dataset_size}")]
    InvalidBatch { batch_size: u64, dataset_size: u64 },
    #[error(
        "step {step}: sqrt(mu * alpha) = {root} must be in (0, 1) for the error-bound weights (lower the step constant c)"
    )]
    InvalidContraction { step: usize, root: f64 },
    #[error("the error-bound weights need at least one step")]
    NoSteps,
}

impl BoundInputs<'_> {
    fn ln_q(&self, i: usize) -> Result<f64, BudgetError> {
        let root = (self.mu * self.alphas[i]).sqrt();
        if !(root > 0.0 && root < 1.0) {
            return Err(BudgetError::InvalidContraction { step: i + 1, root });
        }
        Ok((-root).ln_1p())
    }

    fn ln_w(&self, i: usize) -> f64 {
        let a = self.alphas[i];
        let w = a * (1.0 + a * self.smoothness);
        match self.constants {
            BoundConstants::Paper => w.ln(),
            BoundConstants::Code => (0.5 * w).ln(),
        }
    }

    fn s0(&self) -> u32 {
        match self.constants {
            BoundConstants::Paper => self.stages.first().copied().unwrap_or(1),
            BoundConstants::Code => 0,
        }
    }

    /// ln a_{τ,0} and ln a_{τ,t} for t = 1..τ, with τ = the number of steps given.
    pub fn log_weights(&self) -> Result<(f64, Vec<f64>), BudgetError> {
        let tau = self.alphas.len();
        if tau == 0 || self.stages.len() != tau {
            return Err(BudgetError::NoSteps);
        }
        let ln2 = std::f64::consts::LN_2;
        let s_tau = self.stages[tau - 1];
        // suffix[t] = Σ_{i=t+1}^{τ} ln q_i, t = 0..τ (1-based iterations; suffix[τ] = 0).
        let mut suffix = vec![0.0; tau + 1];
        for t in (0..tau).rev() {
            suffix[t] = suffix[t + 1] + self.ln_q(t)?;
        }
        let log_a0 = f64::from(s_tau.saturating_sub(self.s0())) * ln2 + suffix[0];
        let logs = (1..=tau)
            .map(|t| {
                f64::from(s_tau.saturating_sub(self.stages[t - 1])) * ln2
                    + suffix[t]
                    + self.ln_w(t - 1)
            })
            .collect();
        Ok((log_a0, logs))
    }

    /// ln score(τ) for τ = 1..T (index τ − 1), in O(T) by the recurrence
    /// ln Σ_{t≤τ+1} a_{τ+1,t}^{1/3} = logaddexp(ln Σ_{t≤τ} a_{τ,t}^{1/3} + (ln q_{τ+1} + Δs ln 2)/3,
    /// ln w(α_{τ+1})/3).
    pub fn log_scores(&self, score: &ScoreInputs) -> Result<Vec<f64>, BudgetError> {
        let t_max = self.alphas.len();
        if t_max == 0 || self.stages.len() != t_max {
            return Err(BudgetError::NoSteps);
        }
        let ln2 = std::f64::consts::LN_2;
        let noise =
            (score.dim as f64).ln() + 2.0 * (score.l1_sensitivity / (score.n * score.epsilon)).ln();
        let ln_e0 = score.e0.ln();
        let s0 = self.s0();
        let mut out = Vec::with_capacity(t_max);
        let mut ln_prod = 0.0; // Σ_{i≤τ} ln q_i
        let mut ln_sum = f64::NEG_INFINITY; // ln Σ_t a_{τ,t}^{1/3}
        let mut prev_stage = self.stages[0];
        for i in 0..t_max {
            let s = self.stages[i];
            let ln_q = self.ln_q(i)?;
            let jump = f64::from(s.saturating_sub(prev_stage)) * ln2;
            ln_sum = log_add_exp(ln_sum + (ln_q + jump) / 3.0, self.ln_w(i) / 3.0);
            ln_prod += ln_q;
            prev_stage = s;
            let ln_a0 = f64::from(s.saturating_sub(s0)) * ln2 + ln_prod;
            out.push(log_add_exp(ln_a0 + ln_e0, noise + 3.0 * ln_sum));
        }
        Ok(out)
    }

    /// T' = argmin_τ score(τ) (the first minimiser).
    pub fn select_steps(&self, score: &ScoreInputs) -> Result<u64, BudgetError> {
        let scores = self.log_scores(score)?;
        let mut best = 0;
        for (i, s) in scores.iter().enumerate() {
            if *s < scores[best] {
                best = i;
            }
        }
        Ok(best as u64 + 1)
    }
}

fn check_epsilon(epsilon: f64) -> Result<(), BudgetError> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(())
    } else {
        Err(BudgetError::InvalidEpsilon { epsilon })
    }
}

/// ε_t = ε/T for each of `steps` steps.
pub fn uniform_split(epsilon: f64, steps: u64) -> Result<Vec<f64>, BudgetError> {
    check_epsilon(epsilon)?;
    if steps == 0 {
        return Err(BudgetError::NoSteps);
    }
    Ok(vec![epsilon / steps as f64; steps as usize])
}

/// The cube-root split (eq. 31): ε_t = ε · a_t^{1/3} / Σ_j a_j^{1/3}, from ln a_t.
///
/// ```
/// use dpx::privacy::noise_dividing::cube_root_split;
/// // Weights 1 and 8: cube roots 1 and 2, so ε splits 1:2.
/// let eps = cube_root_split(3.0, &[0.0, 8f64.ln()]).unwrap();
/// assert!((eps[0] - 1.0).abs() < 1e-12 && (eps[1] - 2.0).abs() < 1e-12);
/// ```
pub fn cube_root_split(epsilon: f64, log_weights: &[f64]) -> Result<Vec<f64>, BudgetError> {
    check_epsilon(epsilon)?;
    if log_weights.is_empty() {
        return Err(BudgetError::NoSteps);
    }
    let ln_total = log_weights
        .iter()
        .fold(f64::NEG_INFINITY, |acc, l| log_add_exp(acc, l / 3.0));
    Ok(log_weights
        .iter()
        .map(|l| epsilon * (l / 3.0 - ln_total).exp())
        .collect())
}

/// ε0 of the Laplace mechanism on a batch of `batch_size` out of `dataset_size` such that the
/// subsampled step is exactly `step_epsilon`-DP: ln(1 + (e^{ε_t} − 1)·n/m) (the inverse of eq. 11).
pub fn batch_epsilon(
    step_epsilon: f64,
    dataset_size: u64,
    batch_size: u64,
) -> Result<f64, BudgetError> {
    check_epsilon(step_epsilon)?;
    if batch_size == 0 || batch_size > dataset_size {
        return Err(BudgetError::InvalidBatch {
            batch_size,
            dataset_size,
        });
    }
    if batch_size == dataset_size {
        return Ok(step_epsilon);
    }
    Ok((step_epsilon.exp_m1() * dataset_size as f64 / batch_size as f64).ln_1p())
}

/// The Laplace scale relative to the batch mean's L1 sensitivity S1/m, 1/ε0, for a step that
/// must spend exactly `step_epsilon`. The absolute scale is b_t = S1/(m ε0) (eq. 12).
pub fn laplace_scale_for(
    step_epsilon: f64,
    dataset_size: u64,
    batch_size: u64,
) -> Result<f64, BudgetError> {
    Ok(1.0 / batch_epsilon(step_epsilon, dataset_size, batch_size)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::accountant::pure::amplified_epsilon;

    #[test]
    fn amplification_inversion_round_trips() {
        for &(n, m) in &[
            (100_000u64, 1000u64),
            (100_000, 100_000),
            (20_000, 200),
            (10, 1),
        ] {
            for &eps in &[1e-6, 5e-4, 0.01, 0.3, 1.0, 4.0] {
                let e0 = batch_epsilon(eps, n, m).unwrap();
                let back = amplified_epsilon(m as f64 / n as f64, e0);
                assert!(
                    (back - eps).abs() <= 1e-12 * eps,
                    "n={n} m={m} eps={eps}: {back}"
                );
            }
        }
        // docs/methods/accelerated.md §2.6: S1 = 40, n = 1e5, m = 1e3, ε = 1, T = 100: ε0 = 0.696, b = 0.0575.
        let e0 = batch_epsilon(0.01, 100_000, 1000).unwrap();
        assert!((e0 - 0.696).abs() < 5e-4, "{e0}");
        let b = 40.0 / 1000.0 * laplace_scale_for(0.01, 100_000, 1000).unwrap();
        assert!((b - 0.0575).abs() < 5e-5, "{b}");
        assert!(batch_epsilon(1.0, 10, 11).is_err() && batch_epsilon(0.0, 10, 5).is_err());
    }

    fn nag_inputs(alphas: &[f64], stages: &[u32], constants: BoundConstants) -> (f64, Vec<f64>) {
        BoundInputs {
            alphas,
            stages,
            mu: 0.02,
            smoothness: 5.1028,
            constants,
        }
        .log_weights()
        .unwrap()
    }

    #[test]
    fn noise_dividing_budgets_sum_to_epsilon_and_grow() {
        let alphas = vec![1.0 / 5.1028; 136];
        let stages = vec![1; 136];
        let (_, logs) = nag_inputs(&alphas, &stages, BoundConstants::Code);
        let eps = cube_root_split(1.0, &logs).unwrap();
        let total: f64 = eps.iter().sum();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
        // ε_t grows by q^{-1/3} per step: the late steps get most of the budget.
        let q: f64 = 1.0 - (0.02f64 / 5.1028).sqrt();
        for w in eps.windows(2) {
            assert!((w[1] / w[0] - q.powf(-1.0 / 3.0)).abs() < 1e-12);
        }
        // docs/methods/accelerated.md §3: first/last ε_t = 0.0012/0.0225 for NAG-opt, c = 1, T' = 136.
        assert!(
            (eps[0] - 0.0012).abs() < 5e-5 && (eps[135] - 0.0225).abs() < 5e-4,
            "{} {}",
            eps[0],
            eps[135]
        );
        // Inverting every ε_t exactly keeps the sum, also when m < n.
        let spent: f64 = eps
            .iter()
            .map(|e| amplified_epsilon(0.01, 1.0 / laplace_scale_for(*e, 100_000, 1000).unwrap()))
            .sum();
        assert!((spent - 1.0).abs() < 1e-12, "{spent}");
        let uni: f64 = uniform_split(1.0, 7).unwrap().iter().sum();
        assert!((uni - 1.0).abs() < 1e-15);
    }

    #[test]
    fn the_step_choice_matches_the_authors_rule() {
        // docs/methods/accelerated.md §3 (recomputed with the code's rule, L = 5.1028, n = 1e5, ε = 1,
        // S1 = 40, d = 20, E_0 = 10): NAG-opt c = 1: T' = 100 (T = 100), 136 (T ≥ 200);
        // c = 0.1: T' = 100, 200, 396, 396.
        let score = ScoreInputs {
            e0: 10.0,
            dim: 20,
            l1_sensitivity: 40.0,
            n: 1e5,
            epsilon: 1.0,
        };
        let pick = |c: f64, t: usize| {
            let alphas = vec![c / 5.1028; t];
            let stages = vec![1; t];
            BoundInputs {
                alphas: &alphas,
                stages: &stages,
                mu: 0.02,
                smoothness: 5.1028,
                constants: BoundConstants::Code,
            }
            .select_steps(&score)
            .unwrap()
        };
        assert_eq!(pick(1.0, 100), 100);
        assert_eq!(pick(1.0, 200), 136);
        assert_eq!(pick(1.0, 1000), 136);
        assert_eq!(pick(0.1, 200), 200);
        assert_eq!(pick(0.1, 500), 396);
        // The O(T) recurrence equals the direct definition.
        let alphas: Vec<f64> = (0..50).map(|i| if i < 20 { 0.2 } else { 0.0125 }).collect();
        let stages: Vec<u32> = (0..50).map(|i| if i < 20 { 1 } else { 2 }).collect();
        for constants in [BoundConstants::Paper, BoundConstants::Code] {
            let full = BoundInputs {
                alphas: &alphas,
                stages: &stages,
                mu: 0.02,
                smoothness: 5.1028,
                constants,
            };
            let fast = full.log_scores(&score).unwrap();
            for tau in 1..=50 {
                let sub = BoundInputs {
                    alphas: &alphas[..tau],
                    stages: &stages[..tau],
                    ..full
                };
                let (a0, logs) = sub.log_weights().unwrap();
                let s: f64 = logs.iter().map(|l| (l / 3.0).exp()).sum();
                let direct = a0.exp() * 10.0 + 20.0 * (40.0f64 / 1e5).powi(2) * s.powi(3);
                assert!(
                    (fast[tau - 1].exp() / direct - 1.0).abs() < 1e-10,
                    "tau {tau}"
                );
            }
        }
    }
}
