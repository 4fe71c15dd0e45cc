//! The privacy cost of choosing hyperparameters on the private data by *random stopping*
//! (Liu & Talwar 2019, "Private selection from private candidates", STOC; the "LT" charge of
//! DC-SGD's Table II, Wei et al., arXiv 2503.22988, Thm. 1 and §V-A).
//!
//! The tuner repeats: draw a candidate configuration, train it (one (ε₁, δ₁)-DP run), keep the
//! best so far; after each run it stops with probability γ, and it always stops after
//! T = (1/γ)·ln(1/δ₂) runs. Releasing the best run is then (ε′, δ′)-DP with
//!
//!   ε′ = 3ε₁ + 3√(2δ₁),   δ′ = 3√(2δ₁)·T + δ₂          (DC-SGD, Thm. 1, as the paper states it).
//!
//! Liu & Talwar's own statement has √(2δ₁)·T in δ′; the factor 3 of the DC-SGD paper only makes
//! δ′ larger, so the per-run δ₁ derived here from a target δ′ is smaller than needed, and the
//! charge is conservative either way. DC-SGD's setting (§V-A): δ₂ = 1e-20 and γ = 1/(2G) for a
//! grid of G configurations (2G runs expected, so the tuner sees almost every point).
//!
//! Inverting for a target (ε′, δ′): δ₁ = ((δ′ − δ₂)/(3T))²/2 and ε₁ = (ε′ − 3√(2δ₁))/3, about a
//! 3× smaller ε at δ₁ ≈ 1e-17. Each run is then calibrated to (ε₁, δ₁) by any accountant.
//!
//! Owns: these formulas only. The accountants compute a run's (ε₁, δ₁); `dpx account
//! --tuning-charge random-stopping` wires them (cli::account).

/// DC-SGD's δ₂ (§V-A, following Papernot & Steinke): the probability that the hard limit T is hit.
pub const DEFAULT_DELTA2: f64 = 1e-20;

/// Liu–Talwar random stopping for a grid of `runs` = G configurations, with γ = 1/(2G) and
/// δ₂ = [`DEFAULT_DELTA2`], as DC-SGD's tuning-cost tables use it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomStopping {
    /// γ: the stopping probability after each run.
    pub gamma: f64,
    /// δ₂.
    pub delta2: f64,
}

/// Why a target cannot be charged by random stopping.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectionError {
    #[error("delta {delta:e} is not above the random-stopping delta2 {delta2:e}")]
    DeltaTooSmall { delta: f64, delta2: f64 },
    #[error(
        "epsilon {epsilon} leaves no budget per run under random stopping (needs more than 3 * sqrt(2 * delta1) = {floor:e})"
    )]
    EpsilonTooSmall { epsilon: f64, floor: f64 },
}

impl RandomStopping {
    /// The DC-SGD setting for a grid of `runs` configurations: γ = 1/(2G), δ₂ = 1e-20.
    pub fn for_grid(runs: u64) -> Self {
        Self {
            gamma: 1.0 / (2.0 * runs.max(1) as f64),
            delta2: DEFAULT_DELTA2,
        }
    }

    /// T = (1/γ)·ln(1/δ₂): the most runs the tuner may make.
    pub fn max_runs(&self) -> f64 {
        (1.0 / self.delta2).ln() / self.gamma
    }

    /// The (ε′, δ′) of releasing the best run when each run is (ε₁, δ₁)-DP (Thm. 1).
    pub fn total(&self, epsilon1: f64, delta1: f64) -> (f64, f64) {
        let r = (2.0 * delta1).sqrt();
        (
            3.0 * epsilon1 + 3.0 * r,
            3.0 * r * self.max_runs() + self.delta2,
        )
    }

    /// The per-run δ₁ whose total δ′ is `delta` (the largest δ₁ with δ′ ≤ `delta`).
    pub fn per_run_delta(&self, delta: f64) -> Result<f64, SelectionError> {
        if delta.is_nan() || delta <= self.delta2 {
            return Err(SelectionError::DeltaTooSmall {
                delta,
                delta2: self.delta2,
            });
        }
        let r = (delta - self.delta2) / (3.0 * self.max_runs());
        let mut delta1 = r * r / 2.0;
        // Rounding may put δ′ a hair above the target: step down until it is not.
        while self.total(0.0, delta1).1 > delta {
            delta1 = f64::from_bits(delta1.to_bits() - 1);
        }
        Ok(delta1)
    }

    /// The per-run target (ε₁, δ₁) for a total (ε′, δ′) = (`epsilon`, `delta`): any run that is
    /// (ε₁, δ₁)-DP makes the tuner's release (ε′, δ′)-DP.
    pub fn per_run_target(&self, epsilon: f64, delta: f64) -> Result<(f64, f64), SelectionError> {
        let delta1 = self.per_run_delta(delta)?;
        let floor = 3.0 * (2.0 * delta1).sqrt();
        if epsilon.is_nan() || epsilon <= floor {
            return Err(SelectionError::EpsilonTooSmall { epsilon, floor });
        }
        let mut epsilon1 = (epsilon - floor) / 3.0;
        while self.total(epsilon1, delta1).0 > epsilon {
            epsilon1 = f64::from_bits(epsilon1.to_bits() - 1);
        }
        Ok((epsilon1, delta1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inversion_meets_the_target_and_is_tight() {
        for g in [1u64, 9, 10, 45, 90, 1000] {
            let lt = RandomStopping::for_grid(g);
            for (eps, delta) in [(1.0, 1e-5), (2.0, 1.0 / 60000.0), (8.0, 1e-6)] {
                let (e1, d1) = lt.per_run_target(eps, delta).unwrap();
                let (e, d) = lt.total(e1, d1);
                assert!(
                    e <= eps && d <= delta,
                    "G {g}: ({e}, {d}) over ({eps}, {delta})"
                );
                assert!(e > eps * (1.0 - 1e-12) && d > delta * (1.0 - 1e-9));
            }
        }
    }

    #[test]
    fn dc_sgd_settings_give_a_three_fold_epsilon_and_tiny_per_run_delta() {
        // DC-SGD §V-A: G = 10, γ = 1/20, δ₂ = 1e-20, δ′ = 1/60000: T = 20·ln(1e20) = 921.03,
        // δ₁ = ((1/60000 − 1e-20)/(3T))²/2 ≈ 1.8e-17, and ε₁ ≈ ε′/3.
        let lt = RandomStopping::for_grid(10);
        assert!((lt.max_runs() - 20.0 * 1e20f64.ln()).abs() < 1e-9);
        let (e1, d1) = lt.per_run_target(2.0, 1.0 / 60000.0).unwrap();
        let expected = ((1.0 / 60000.0 - 1e-20) / (3.0 * lt.max_runs())).powi(2) / 2.0;
        assert!((d1 / expected - 1.0).abs() < 1e-12, "{d1} vs {expected}");
        assert!((1.7e-17..1.9e-17).contains(&d1), "{d1}");
        assert!((e1 - 2.0 / 3.0).abs() < 1e-7, "{e1}");
        // More configurations, smaller δ₁.
        let (_, d90) = RandomStopping::for_grid(90)
            .per_run_target(2.0, 1.0 / 60000.0)
            .unwrap();
        assert!(d90 < d1 / 50.0);
    }

    #[test]
    fn unreachable_targets_are_errors() {
        let lt = RandomStopping::for_grid(10);
        assert!(matches!(
            lt.per_run_target(1.0, 1e-21),
            Err(SelectionError::DeltaTooSmall { .. })
        ));
        assert!(matches!(
            lt.per_run_target(1e-12, 1e-5),
            Err(SelectionError::EpsilonTooSmall { .. })
        ));
        assert!(lt.per_run_target(f64::NAN, 1e-5).is_err());
    }
}
