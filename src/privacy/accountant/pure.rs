//! The pure ε-DP accountant (room: `privacy::accountant`): basic composition with amplification by
//! subsampling, for the Laplace-based accelerated methods (docs/methods/accelerated.md §2).
//! Must not: accept Gaussian releases (they are not pure DP).
//!
//! # Maths
//! - Laplace with scale b (relative to the add/remove L1 sensitivity Δ) is (k/b)-DP with k = 1
//!   under add/remove-one and k = 2 under replace-one, where a replacement moves the query by up
//!   to 2Δ (Dwork and Roth 2014, Thm. 3.6; [`NeighbouringRelation::sensitivity_factor`]).
//! - Basic composition: ε values add (Dwork and Roth 2014, Thm. 3.16), δ = 0.
//! - Poisson sampling with rate q, add/remove one: ln(1 + q(e^ε − 1)) (Balle, Barthe, Gaboardi
//!   2018, "Privacy amplification by subsampling", Thm. 8).
//! - Sampling m of n without replacement, replace one: ln(1 + (m/n)(e^ε − 1)) (the same paper,
//!   Thm. 9; docs/methods/accelerated.md §2 eq. 11).

use crate::privacy::accountant::checks::{check_scale, describe};
use crate::privacy::accountant::{Accountant, AccountantKind, AccountingError, PrivacyReport};
use crate::privacy::event::{DpEvent, NeighbouringRelation};

/// ε of `eps`-DP amplified by sampling with probability (or fraction) `q`: ln(1 + q(e^ε − 1)).
pub fn amplified_epsilon(q: f64, eps: f64) -> f64 {
    if q == 0.0 {
        return 0.0;
    }
    if eps.is_infinite() {
        return f64::INFINITY;
    }
    (q * eps.exp_m1()).ln_1p()
}

/// The pure ε-DP accountant.
#[derive(Debug, Clone)]
pub struct PureAccountant {
    relation: NeighbouringRelation,
    epsilon: f64,
}

impl PureAccountant {
    /// A new pure-DP accountant.
    pub fn new(relation: NeighbouringRelation) -> Self {
        Self {
            relation,
            epsilon: 0.0,
        }
    }

    fn unsupported(&self, event: &DpEvent, why: &str) -> AccountingError {
        AccountingError::Unsupported {
            accountant: AccountantKind::Pure,
            event: format!("{} ({why})", describe(event)),
        }
    }

    /// ε of one occurrence of `event`, without mutation (∞ for non-private).
    fn epsilon_of(&self, event: &DpEvent) -> Result<f64, AccountingError> {
        match event {
            DpEvent::NoOp => Ok(0.0),
            DpEvent::NonPrivate => Ok(f64::INFINITY),
            DpEvent::Laplace { scale } => {
                check_scale(*scale)?;
                // distance k = 1 (add/remove) or 2 (replace-one) in units of the sensitivity
                Ok(if *scale == 0.0 {
                    f64::INFINITY
                } else {
                    self.relation.sensitivity_factor() / scale
                })
            }
            DpEvent::Gaussian { .. } => Err(self.unsupported(
                event,
                "the Gaussian mechanism is not pure DP; use the rdp or pld accountant",
            )),
            DpEvent::PoissonSampled {
                sample_rate,
                event: inner,
            } => {
                let q = *sample_rate;
                if q.is_nan() || !(0.0..=1.0).contains(&q) {
                    return Err(AccountingError::InvalidParameter {
                        name: "sample_rate",
                        value: q,
                        expected: "a number in [0, 1]",
                    });
                }
                let eps = self.epsilon_of(inner)?;
                if self.relation != NeighbouringRelation::AddOrRemoveOne {
                    return Err(
                        self.unsupported(event, "Poisson sampling needs add/remove-one neighbours")
                    );
                }
                Ok(amplified_epsilon(q, eps))
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
                if *dataset_size == 0 || batch_size > dataset_size {
                    return Err(AccountingError::InvalidParameter {
                        name: "batch_size",
                        value: *batch_size as f64,
                        expected: "a batch size no larger than a non-empty dataset",
                    });
                }
                let eps = self.epsilon_of(inner)?;
                if self.relation != NeighbouringRelation::ReplaceOne {
                    return Err(self.unsupported(
                        event,
                        "sampling without replacement is analysed under replace-one neighbours only",
                    ));
                }
                Ok(amplified_epsilon(
                    *batch_size as f64 / *dataset_size as f64,
                    eps,
                ))
            }
            DpEvent::SelfComposed { event, count } => {
                let eps = self.epsilon_of(event)?;
                Ok(if *count == 0 {
                    0.0
                } else {
                    eps * *count as f64
                })
            }
            DpEvent::Composed(events) => {
                let mut total = 0.0;
                for e in events {
                    total += self.epsilon_of(e)?;
                }
                Ok(total)
            }
        }
    }
}

impl Accountant for PureAccountant {
    fn kind(&self) -> AccountantKind {
        AccountantKind::Pure
    }

    fn check(&self, event: &DpEvent) -> Result<(), AccountingError> {
        self.epsilon_of(event).map(|_| ())
    }

    fn compose(&mut self, event: &DpEvent, count: u64) -> Result<(), AccountingError> {
        let eps = self.epsilon_of(event)?;
        if count > 0 {
            self.epsilon += eps * count as f64;
        }
        Ok(())
    }

    fn epsilon(&self, delta: f64) -> Result<PrivacyReport, AccountingError> {
        if delta.is_nan() || !(0.0..=1.0).contains(&delta) {
            return Err(AccountingError::InvalidParameter {
                name: "delta",
                value: delta,
                expected: "a number in [0, 1]",
            });
        }
        Ok(PrivacyReport {
            epsilon: self.epsilon,
            delta,
            accountant: AccountantKind::Pure,
            order: None,
            notes: vec!["pure DP: holds with delta = 0".into()],
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
        Ok(if epsilon >= self.epsilon { 0.0 } else { 1.0 })
    }
}
