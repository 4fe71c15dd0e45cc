//! The zero-concentrated-DP accountant (room: `privacy::accountant`), in two labelled flavours:
//! `zcdp` (standard or tight conversion) and `zcdp-paper` (the dynamic-noise paper's own budget).
//! Owns ρ accumulation and the zCDP → (ε, δ) conversions. Must not: analyse subsampling (zCDP has
//! no sound generic amplification; use `rdp` or `pld` for minibatches).
//!
//! # Maths
//! - Gaussian with noise multiplier σ: ρ = k²/(2σ²)-zCDP (Bun and Steinke 2016, Prop. 1.6),
//!   where k = 1 under add/remove-one and k = 2 under replace-one (a replacement moves the query
//!   by twice its sensitivity; `NeighbouringRelation::sensitivity_factor`); ρ adds under
//!   composition (Lemma 1.7), so a schedule gives ρ = Σ_t k²/(2σ_t²).
//! - Laplace with scale b is (k/b)-DP, hence (k²/(2b²))-zCDP (Bun and Steinke 2016, Prop. 1.4).
//! - Standard conversion: ε = ρ + 2√(ρ ln(1/δ)) (Bun and Steinke 2016, Prop. 1.3; the
//!   dynamic-noise paper's Lemma B.3). Inverse: δ = exp(−(ε − ρ)²/(4ρ)) for ε ≥ ρ.
//! - Tight conversion: Canonne, Kamath, Steinke 2020 ("The Discrete Gaussian for Differential
//!   Privacy"), Cor. 13: δ = inf_{α>1} e^{(α−1)(αρ−ε)}/(α−1) · (1 − 1/α)^α; equivalently
//!   ε = min_{α>1} αρ + ln(1 − 1/α) − (ln δ + ln α)/(α − 1), whose minimiser solves
//!   ρ(α−1)² + ln δ + ln α = 0 (unique: the left side increases in α).
//! - The paper's budget (docs/methods/dynamic_noise.md §2): ρ(ε, δ) = (√(ε + L) − √L)², L = ln(1/δ).

use crate::privacy::accountant::checks::{check_gaussians, check_noise_multiplier, describe};
use crate::privacy::accountant::{
    Accountant, AccountantKind, AccountingError, PrivacyReport, ZcdpConversion,
};
use crate::privacy::event::{DpEvent, NeighbouringRelation};

/// ε from ρ-zCDP by the standard conversion ρ + 2√(ρ ln(1/δ)).
pub fn zcdp_epsilon_standard(rho: f64, delta: f64) -> f64 {
    if rho == 0.0 {
        return 0.0;
    }
    rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt()
}

/// δ(ε) from ρ-zCDP by the standard conversion (inverse of [`zcdp_epsilon_standard`]).
pub fn zcdp_delta_standard(rho: f64, epsilon: f64) -> f64 {
    if rho == 0.0 {
        return 0.0;
    }
    if epsilon <= rho {
        return 1.0;
    }
    (-(epsilon - rho).powi(2) / (4.0 * rho)).exp().min(1.0)
}

/// Bisection for the root of an increasing function on (lo, ∞), doubling the upper end first.
fn increasing_root(f: impl Fn(f64) -> f64, lo: f64) -> f64 {
    let mut hi = lo + 1.0;
    while f(hi) < 0.0 && hi < 1e300 {
        hi = lo + 2.0 * (hi - lo);
    }
    let mut a = lo;
    let mut b = hi;
    for _ in 0..300 {
        let m = 0.5 * (a + b);
        if m <= a || m >= b {
            break;
        }
        if f(m) < 0.0 {
            a = m;
        } else {
            b = m;
        }
    }
    0.5 * (a + b)
}

/// ε from ρ-zCDP by the tight conversion (Canonne, Kamath, Steinke 2020, Cor. 13), never larger
/// than the standard one; clamped at 0.
pub fn zcdp_epsilon_tight(rho: f64, delta: f64) -> f64 {
    if rho == 0.0 {
        return 0.0;
    }
    if rho.is_infinite() {
        return f64::INFINITY;
    }
    let ln_delta = delta.ln();
    let eps_at = |a: f64| a * rho + (-1.0 / a).ln_1p() - (ln_delta + a.ln()) / (a - 1.0);
    let alpha = increasing_root(|a| rho * (a - 1.0).powi(2) + ln_delta + a.ln(), 1.0);
    let tight = if alpha > 1.0 {
        eps_at(alpha)
    } else {
        f64::INFINITY
    };
    tight.min(zcdp_epsilon_standard(rho, delta)).max(0.0)
}

/// δ(ε) from ρ-zCDP by the tight conversion (Canonne, Kamath, Steinke 2020, Cor. 13).
pub fn zcdp_delta_tight(rho: f64, epsilon: f64) -> f64 {
    if rho == 0.0 {
        return 0.0;
    }
    if rho.is_infinite() {
        return 1.0;
    }
    let log_delta_at =
        |a: f64| (a - 1.0) * (a * rho - epsilon) + a * (-1.0 / a).ln_1p() - (a - 1.0).ln();
    let alpha = increasing_root(
        |a| (2.0 * a - 1.0) * rho - epsilon + (-1.0 / a).ln_1p(),
        1.0,
    );
    let tight = if alpha > 1.0 {
        log_delta_at(alpha).exp()
    } else {
        1.0
    };
    tight.min(zcdp_delta_standard(rho, epsilon)).min(1.0)
}

/// The dynamic-noise paper's zCDP budget for a target (ε, δ): ρ = (√(ε + L) − √L)², L = ln(1/δ)
/// (inverse of the standard conversion; docs/methods/dynamic_noise.md §2).
pub fn paper_rho_budget(epsilon: f64, delta: f64) -> f64 {
    let l = (1.0 / delta).ln();
    ((epsilon + l).sqrt() - l.sqrt()).powi(2)
}

/// The zCDP accountant for full-batch Gaussian (and Laplace) steps.
#[derive(Debug, Clone)]
pub struct ZcdpAccountant {
    relation: NeighbouringRelation,
    conversion: ZcdpConversion,
    paper: bool,
    rho: f64,
    non_private: bool,
}

impl ZcdpAccountant {
    /// The `zcdp` accountant with the given conversion.
    pub fn new(relation: NeighbouringRelation, conversion: ZcdpConversion) -> Self {
        Self {
            relation,
            conversion,
            paper: false,
            rho: 0.0,
            non_private: false,
        }
    }

    /// The `zcdp-paper` accountant: Gaussian steps only, the paper's standard conversion.
    pub fn paper(relation: NeighbouringRelation) -> Self {
        Self {
            relation,
            conversion: ZcdpConversion::Standard,
            paper: true,
            rho: 0.0,
            non_private: false,
        }
    }

    /// The total ρ composed so far.
    pub fn rho(&self) -> f64 {
        self.rho
    }

    fn kind_(&self) -> AccountantKind {
        if self.paper {
            AccountantKind::ZcdpPaper
        } else {
            AccountantKind::Zcdp
        }
    }

    fn unsupported(&self, event: &DpEvent, why: &str) -> AccountingError {
        AccountingError::Unsupported {
            accountant: self.kind_(),
            event: format!("{} ({why})", describe(event)),
        }
    }

    /// (ρ added, non-private) for `event` taken `mult` times, without mutation.
    fn rho_of(&self, event: &DpEvent, mult: f64) -> Result<(f64, bool), AccountingError> {
        // A neighbouring change moves the query by k = 1 (add/remove) or 2 (replace-one) times
        // its sensitivity: ρ = k²/(2σ²) (Bun and Steinke 2016, Prop. 1.6).
        let k = self.relation.sensitivity_factor();
        match event {
            DpEvent::NoOp => Ok((0.0, false)),
            DpEvent::NonPrivate => Ok((0.0, true)),
            DpEvent::Gaussian { noise_multiplier } => {
                check_noise_multiplier(*noise_multiplier)?;
                if *noise_multiplier == 0.0 {
                    Ok((0.0, true))
                } else {
                    Ok((
                        mult * k * k / (2.0 * noise_multiplier * noise_multiplier),
                        false,
                    ))
                }
            }
            DpEvent::Laplace { scale } => {
                if self.paper {
                    return Err(
                        self.unsupported(event, "the paper's bound covers Gaussian steps only")
                    );
                }
                crate::privacy::accountant::checks::check_scale(*scale)?;
                if *scale == 0.0 {
                    Ok((0.0, true))
                } else {
                    // (k/b)-DP implies (k/b)²/2-zCDP (Bun and Steinke 2016, Prop. 1.4)
                    Ok((mult * k * k / (2.0 * scale * scale), false))
                }
            }
            DpEvent::PoissonSampled {
                sample_rate,
                event: inner,
            } => {
                check_gaussians(inner)?;
                if *sample_rate == 0.0 {
                    Ok((0.0, false))
                } else if *sample_rate == 1.0 {
                    self.rho_of(inner, mult)
                } else {
                    Err(self.unsupported(
                        event,
                        "zCDP has no sound amplification by subsampling; use the rdp or pld accountant",
                    ))
                }
            }
            DpEvent::RandomAllocation { .. } => Err(self.unsupported(
                event,
                "random allocation (balls-in-bins batches) is analysed by the rdp and pld accountants only",
            )),
            DpEvent::SampledWithoutReplacement {
                dataset_size,
                batch_size,
                event: inner,
            } => {
                check_gaussians(inner)?;
                if *batch_size == 0 {
                    Ok((0.0, false))
                } else if batch_size == dataset_size {
                    self.rho_of(inner, mult)
                } else {
                    Err(self.unsupported(
                        event,
                        "zCDP has no sound amplification by subsampling; use the rdp accountant",
                    ))
                }
            }
            DpEvent::SelfComposed { event, count } => self.rho_of(event, mult * *count as f64),
            DpEvent::Composed(events) => {
                let mut total = (0.0, false);
                for e in events {
                    let (r, np) = self.rho_of(e, mult)?;
                    total.0 += r;
                    total.1 |= np;
                }
                Ok(total)
            }
        }
    }
}

impl Accountant for ZcdpAccountant {
    fn kind(&self) -> AccountantKind {
        self.kind_()
    }

    fn check(&self, event: &DpEvent) -> Result<(), AccountingError> {
        self.rho_of(event, 1.0).map(|_| ())
    }

    fn compose(&mut self, event: &DpEvent, count: u64) -> Result<(), AccountingError> {
        let (rho, non_private) = self.rho_of(event, count as f64)?;
        self.rho += rho;
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
            match self.conversion {
                ZcdpConversion::Standard => zcdp_epsilon_standard(self.rho, delta),
                ZcdpConversion::Tight => zcdp_epsilon_tight(self.rho, delta),
            }
        };
        if self.paper {
            notes.push(
                "the dynamic-noise paper's zCDP bound (rho + 2 sqrt(rho ln(1/delta))), for reproductions".into(),
            );
        }
        notes.push(format!("rho = {}", self.rho));
        Ok(PrivacyReport {
            epsilon,
            delta,
            accountant: self.kind_(),
            order: None,
            notes,
            upper_bound: true,
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
        Ok(match self.conversion {
            ZcdpConversion::Standard => zcdp_delta_standard(self.rho, epsilon),
            ZcdpConversion::Tight => zcdp_delta_tight(self.rho, epsilon),
        })
    }
}
