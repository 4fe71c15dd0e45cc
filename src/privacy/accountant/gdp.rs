//! The Gaussian-DP accountant (room: `privacy::accountant`). Owns μ accumulation and the μ-GDP →
//! (ε, δ) duality. Must not: claim exactness for subsampled steps (the central limit theorem is an
//! approximation that can under-report ε; reports say "approximate").
//!
//! # Maths (Dong, Roth, Su 2019, "Gaussian Differential Privacy")
//! - A full-batch Gaussian with noise multiplier σ is exactly (k/σ)-GDP (k = 1 add/remove-one,
//!   k = 2 replace-one: `NeighbouringRelation::sensitivity_factor`); μ-GDP composes as
//!   μ = √(Σ μ_t²) (Cor. 3.3), so full-batch schedules are exact.
//! - A Poisson-subsampled Gaussian step contributes q²(e^{1/σ²} − 1) to μ² (the CLT of Thm. 3.6 /
//!   Cor. 5.4 in Bu, Dong, Long, Su 2020, as Opacus's `GaussianAccountant`): approximate.
//! - Duality (Cor. 2.13): δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2); ε(δ) by bisection, returning
//!   the upper end.

use crate::privacy::accountant::checks::{
    check_gaussians, describe, effective_gaussian_noise_multiplier,
};
use crate::privacy::accountant::{Accountant, AccountantKind, AccountingError, PrivacyReport};
use crate::privacy::event::{DpEvent, NeighbouringRelation};
use crate::privacy::special::log_normal_cdf;

/// δ(ε) of μ-GDP (Dong, Roth, Su 2019, Cor. 2.13).
pub fn gdp_delta(mu: f64, epsilon: f64) -> f64 {
    if mu == 0.0 {
        return 0.0;
    }
    if mu.is_infinite() {
        return 1.0;
    }
    let a = log_normal_cdf(-epsilon / mu + mu / 2.0);
    let b = epsilon + log_normal_cdf(-epsilon / mu - mu / 2.0);
    if b >= a {
        return 0.0;
    }
    (a.exp() * -(b - a).exp_m1()).clamp(0.0, 1.0)
}

/// The smallest ε with δ(ε) ≤ `delta` for μ-GDP, to 1e-12 relative (upper end returned).
pub fn gdp_epsilon(mu: f64, delta: f64) -> f64 {
    if mu == 0.0 {
        return 0.0;
    }
    if mu.is_infinite() {
        return f64::INFINITY;
    }
    if gdp_delta(mu, 0.0) <= delta {
        return 0.0;
    }
    let mut hi = 1.0;
    while gdp_delta(mu, hi) > delta {
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    let mut lo = 0.0;
    while hi - lo > 1e-12 * hi {
        let mid = 0.5 * (lo + hi);
        if gdp_delta(mu, mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// μ of T Poisson-subsampled Gaussian steps by the central limit theorem:
/// q·√(T(e^{1/σ²} − 1)) (as Opacus's `compute_mu_poisson`).
pub fn gdp_mu_poisson(sample_rate: f64, noise_multiplier: f64, steps: u64) -> f64 {
    sample_rate * (steps as f64 * noise_multiplier.powi(-2).exp_m1()).sqrt()
}

/// The GDP accountant: μ² accumulates; Poisson-subsampled steps use the CLT.
#[derive(Debug, Clone)]
pub struct GdpAccountant {
    relation: NeighbouringRelation,
    mu_squared: f64,
    approximate: bool,
    non_private: bool,
}

impl GdpAccountant {
    /// A new GDP accountant.
    pub fn new(relation: NeighbouringRelation) -> Self {
        Self {
            relation,
            mu_squared: 0.0,
            approximate: false,
            non_private: false,
        }
    }

    /// μ of everything composed so far.
    pub fn mu(&self) -> f64 {
        self.mu_squared.sqrt()
    }

    fn unsupported(&self, event: &DpEvent, why: &str) -> AccountingError {
        AccountingError::Unsupported {
            accountant: AccountantKind::Gdp,
            event: format!("{} ({why})", describe(event)),
        }
    }

    /// (μ² added, approximate, non-private) for `event` taken `mult` times, without mutation.
    fn contribution(
        &self,
        event: &DpEvent,
        mult: f64,
    ) -> Result<(f64, bool, bool), AccountingError> {
        match event {
            DpEvent::NoOp => Ok((0.0, false, false)),
            DpEvent::NonPrivate => Ok((0.0, false, true)),
            DpEvent::Gaussian { noise_multiplier } => {
                crate::privacy::accountant::checks::check_noise_multiplier(*noise_multiplier)?;
                if *noise_multiplier == 0.0 {
                    Ok((0.0, false, true))
                } else {
                    // μ = k/σ: a replacement moves the query by k = 2 sensitivities
                    let k = self.relation.sensitivity_factor();
                    Ok((mult * k * k / noise_multiplier.powi(2), false, false))
                }
            }
            DpEvent::Laplace { .. } => {
                Err(self.unsupported(event, "the Laplace mechanism is not Gaussian-DP"))
            }
            DpEvent::PoissonSampled {
                sample_rate,
                event: inner,
            } => {
                check_gaussians(inner)?;
                let q = *sample_rate;
                if q.is_nan() || !(0.0..=1.0).contains(&q) {
                    return Err(AccountingError::InvalidParameter {
                        name: "sample_rate",
                        value: q,
                        expected: "a number in [0, 1]",
                    });
                }
                if self.relation != NeighbouringRelation::AddOrRemoveOne {
                    return Err(
                        self.unsupported(event, "Poisson sampling needs add/remove-one neighbours")
                    );
                }
                let sigma = match effective_gaussian_noise_multiplier(inner) {
                    Ok(None) => return Ok((0.0, false, false)),
                    Ok(Some(s)) => s,
                    Err(bad) => {
                        return Err(self.unsupported(
                            bad,
                            "inside PoissonSampled only Gaussians are supported",
                        ));
                    }
                };
                if q == 0.0 {
                    Ok((0.0, false, false))
                } else if sigma == 0.0 {
                    Ok((0.0, false, true))
                } else if q == 1.0 {
                    Ok((mult / sigma.powi(2), false, false))
                } else {
                    Ok((mult * q * q * sigma.powi(-2).exp_m1(), true, false))
                }
            }
            DpEvent::SampledWithoutReplacement { .. } => Err(self.unsupported(
                event,
                "no GDP analysis of sampling without replacement is built in",
            )),
            DpEvent::RandomAllocation { .. } => Err(self.unsupported(
                event,
                "random allocation (balls-in-bins batches) is analysed by the rdp and pld accountants only",
            )),
            DpEvent::SelfComposed { event, count } => {
                self.contribution(event, mult * *count as f64)
            }
            DpEvent::Composed(events) => {
                let mut total = (0.0, false, false);
                for e in events {
                    let (m, a, np) = self.contribution(e, mult)?;
                    total.0 += m;
                    total.1 |= a;
                    total.2 |= np;
                }
                Ok(total)
            }
        }
    }
}

impl Accountant for GdpAccountant {
    fn kind(&self) -> AccountantKind {
        AccountantKind::Gdp
    }

    fn check(&self, event: &DpEvent) -> Result<(), AccountingError> {
        self.contribution(event, 1.0).map(|_| ())
    }

    fn compose(&mut self, event: &DpEvent, count: u64) -> Result<(), AccountingError> {
        let (m, approximate, non_private) = self.contribution(event, count as f64)?;
        self.mu_squared += m;
        self.approximate |= approximate && count > 0;
        self.non_private |= non_private;
        Ok(())
    }

    fn epsilon(&self, delta: f64) -> Result<PrivacyReport, AccountingError> {
        if delta.is_nan() || delta <= 0.0 || delta >= 1.0 {
            return Err(AccountingError::InvalidParameter {
                name: "delta",
                value: delta,
                expected: "a number in (0, 1)",
            });
        }
        let mut notes = Vec::new();
        let epsilon = if self.non_private {
            notes.push("a non-private release was composed".into());
            f64::INFINITY
        } else {
            gdp_epsilon(self.mu(), delta)
        };
        if self.approximate {
            notes.push(
                "approximate: central-limit GDP for subsampled steps, can under-report epsilon"
                    .into(),
            );
        }
        notes.push(format!("mu = {}", self.mu()));
        Ok(PrivacyReport {
            epsilon,
            delta,
            accountant: AccountantKind::Gdp,
            order: None,
            notes,
            upper_bound: !self.approximate,
        })
    }

    fn delta(&self, epsilon: f64) -> Result<f64, AccountingError> {
        if epsilon.is_nan() || epsilon < 0.0 {
            return Err(AccountingError::InvalidParameter {
                name: "epsilon",
                value: epsilon,
                expected: "a number >= 0",
            });
        }
        if self.non_private {
            return Ok(1.0);
        }
        Ok(gdp_delta(self.mu(), epsilon))
    }
}
