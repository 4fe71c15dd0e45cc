//! PLD room, layer 4: the thin [`Accountant`] adapter over privacy-loss distributions.
//!
//! Owns [`PldAccountant`]: walks a [`DpEvent`] tree (exhaustively), turns it into a multiset of
//! mechanisms with counts, and composes their PLDs into its state. Composition is commutative,
//! so equal mechanisms anywhere in the tree (`SelfComposed` nodes, repeated entries of
//! `Composed`) are grouped and self-composed once by FFT power; T full-batch Gaussian steps
//! become one Gaussian with σ/√T before discretisation (exact, as dp_accounting does).
//!
//! Must not: hold maths (layers 1–3 do), or mutate on a failed check.

use std::collections::HashMap;

use super::distribution::{PrivacyLossDistribution, TAIL_MASS_TRUNCATION};
use super::mechanism::Noise;
use crate::privacy::accountant::{Accountant, AccountantKind, AccountingError, PrivacyReport};
use crate::privacy::event::{DpEvent, NeighbouringRelation};

/// The default grid step of the privacy-loss values (dp_accounting's default).
pub const DEFAULT_VALUE_DISCRETIZATION_INTERVAL: f64 = 1e-4;

/// A privacy accountant with privacy-loss distributions (Koskela, Jälkö, Honkela 2020; Google's
/// dp_accounting `PLDAccountant`): pessimistic connect-the-dots discretisation (Doroshenko et
/// al. 2022) of each mechanism, FFT composition, exact ε(δ) and δ(ε) of the discrete result.
/// Every reported ε and δ is an upper bound on the true one (up to floating-point rounding).
///
/// Supports Gaussian and Laplace releases, their Poisson-subsampled forms (nested Poisson
/// sampling multiplies the rates), `NoOp` and `NonPrivate`. Refuses sampling without
/// replacement, and Poisson-subsampled Laplace under replace-one.
///
/// Neighbouring relation: under add/remove-one, a subsampled mechanism is analysed in both
/// directions and the larger δ is reported. Under replace-one, noise is relative to the
/// add/remove sensitivity and a replacement moves the query by it in both directions (distance
/// 2), as in dp_accounting's `REPLACE_ONE`.
#[derive(Debug, Clone)]
pub struct PldAccountant {
    relation: NeighbouringRelation,
    interval: f64,
    pld: PrivacyLossDistribution,
    non_private: bool,
}

/// One mechanism of the multiset an event tree flattens to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mechanism {
    Gaussian {
        noise_multiplier: f64,
        sample_rate: f64,
    },
    Laplace {
        scale: f64,
        sample_rate: f64,
    },
}

impl Mechanism {
    fn key(&self) -> (u8, u64, u64) {
        match *self {
            Mechanism::Gaussian {
                noise_multiplier,
                sample_rate,
            } => (0, noise_multiplier.to_bits(), sample_rate.to_bits()),
            Mechanism::Laplace { scale, sample_rate } => {
                (1, scale.to_bits(), sample_rate.to_bits())
            }
        }
    }
}

/// What an event tree amounts to: distinct mechanisms with total counts, in first-seen order.
#[derive(Debug, Default)]
struct Plan {
    mechanisms: Vec<(Mechanism, u64)>,
    index: HashMap<(u8, u64, u64), usize>,
    non_private: bool,
}

impl Plan {
    fn add(&mut self, m: Mechanism, count: u64) -> Result<(), AccountingError> {
        if count == 0 {
            return Ok(());
        }
        match self.index.get(&m.key()) {
            Some(&i) => {
                let total = &mut self.mechanisms[i].1;
                *total = total.checked_add(count).ok_or_else(count_overflow)?;
            }
            None => {
                self.index.insert(m.key(), self.mechanisms.len());
                self.mechanisms.push((m, count));
            }
        }
        Ok(())
    }
}

fn count_overflow() -> AccountingError {
    AccountingError::Numerical("the total number of composed events overflows u64".to_string())
}

fn unsupported(event: &DpEvent, why: &str) -> AccountingError {
    AccountingError::Unsupported {
        accountant: AccountantKind::Pld,
        event: format!("{event:?} ({why})"),
    }
}

fn check_noise(name: &'static str, value: f64) -> Result<(), AccountingError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(AccountingError::InvalidParameter {
            name,
            value,
            expected: "a finite value ≥ 0",
        })
    }
}

impl PldAccountant {
    /// An accountant for `relation` with privacy losses discretised on a grid of step
    /// `value_discretization_interval` (callers use [`DEFAULT_VALUE_DISCRETIZATION_INTERVAL`],
    /// 1e-4). A step that is not finite and positive is reported by every `check`/`compose`.
    pub fn new(
        relation: NeighbouringRelation,
        value_discretization_interval: f64,
    ) -> PldAccountant {
        PldAccountant {
            relation,
            interval: value_discretization_interval,
            pld: PrivacyLossDistribution::identity(value_discretization_interval),
            non_private: false,
        }
    }

    /// The neighbouring relation fixed at construction.
    pub fn relation(&self) -> NeighbouringRelation {
        self.relation
    }

    /// The grid step of the privacy-loss values.
    pub fn value_discretization_interval(&self) -> f64 {
        self.interval
    }

    /// The composed privacy-loss distribution so far.
    pub fn distribution(&self) -> &PrivacyLossDistribution {
        &self.pld
    }

    fn check_interval(&self) -> Result<(), AccountingError> {
        if self.interval.is_finite() && self.interval > 0.0 && self.interval <= 1.0 {
            Ok(())
        } else {
            Err(AccountingError::InvalidParameter {
                name: "value_discretization_interval",
                value: self.interval,
                expected: "a value in (0, 1]",
            })
        }
    }

    /// Flatten `event` run `count` times into a plan, checking every sub-event.
    fn plan(&self, event: &DpEvent, count: u64) -> Result<Plan, AccountingError> {
        self.check_interval()?;
        let mut plan = Plan::default();
        self.walk(event, count, &mut plan)?;
        for (m, _) in &plan.mechanisms {
            let (noise, q) = noise_of(*m);
            PrivacyLossDistribution::grid_points(noise, q, self.relation, self.interval)?;
        }
        Ok(plan)
    }

    fn walk(&self, event: &DpEvent, count: u64, plan: &mut Plan) -> Result<(), AccountingError> {
        match event {
            DpEvent::NoOp => Ok(()),
            DpEvent::NonPrivate => {
                plan.non_private |= count > 0;
                Ok(())
            }
            DpEvent::Gaussian { .. } | DpEvent::Laplace { .. } => {
                self.sampled(event, 1.0, count, plan)
            }
            DpEvent::PoissonSampled {
                sample_rate,
                event: inner,
            } => {
                check_rate(*sample_rate)?;
                self.sampled(inner, *sample_rate, count, plan)
            }
            DpEvent::SampledWithoutReplacement { .. } => Err(unsupported(
                event,
                "sampling without replacement has no PLD analysis here; use Poisson sampling",
            )),
            DpEvent::SelfComposed {
                event: inner,
                count: c,
            } => {
                let total = count.checked_mul(*c).ok_or_else(count_overflow)?;
                self.walk(inner, total, plan)
            }
            DpEvent::Composed(events) => {
                for e in events {
                    self.walk(e, count, plan)?;
                }
                Ok(())
            }
        }
    }

    /// `event` under Poisson sampling at total rate `rate` (1 = full batch).
    fn sampled(
        &self,
        event: &DpEvent,
        rate: f64,
        count: u64,
        plan: &mut Plan,
    ) -> Result<(), AccountingError> {
        match event {
            DpEvent::NoOp => Ok(()),
            // A non-private release on a subsample: ε = ∞ is still an upper bound.
            DpEvent::NonPrivate => {
                plan.non_private |= rate > 0.0 && count > 0;
                Ok(())
            }
            DpEvent::Gaussian { noise_multiplier } => {
                check_noise("noise_multiplier", *noise_multiplier)?;
                if rate == 0.0 {
                    Ok(())
                } else if *noise_multiplier == 0.0 {
                    plan.non_private |= count > 0;
                    Ok(())
                } else {
                    plan.add(
                        Mechanism::Gaussian {
                            noise_multiplier: *noise_multiplier,
                            sample_rate: rate,
                        },
                        count,
                    )
                }
            }
            DpEvent::Laplace { scale } => {
                check_noise("scale", *scale)?;
                if self.relation == NeighbouringRelation::ReplaceOne && rate < 1.0 && rate > 0.0 {
                    return Err(unsupported(
                        event,
                        "Poisson-subsampled Laplace under replace-one",
                    ));
                }
                if rate == 0.0 {
                    Ok(())
                } else if *scale == 0.0 {
                    plan.non_private |= count > 0;
                    Ok(())
                } else {
                    plan.add(
                        Mechanism::Laplace {
                            scale: *scale,
                            sample_rate: rate,
                        },
                        count,
                    )
                }
            }
            // Independent Poisson thinnings compose: inclusion probability q₁q₂.
            DpEvent::PoissonSampled {
                sample_rate,
                event: inner,
            } => {
                check_rate(*sample_rate)?;
                self.sampled(inner, rate * sample_rate, count, plan)
            }
            DpEvent::SampledWithoutReplacement { .. }
            | DpEvent::SelfComposed { .. }
            | DpEvent::Composed(_) => Err(unsupported(
                event,
                "only a single Gaussian or Laplace release can be Poisson-subsampled",
            )),
        }
    }

    /// The PLD of mechanism `m` run `count` times.
    fn build(&self, m: Mechanism, count: u64) -> Result<PrivacyLossDistribution, AccountingError> {
        match m {
            // T full-batch Gaussian releases = one Gaussian with σ/√T (exact).
            Mechanism::Gaussian {
                noise_multiplier,
                sample_rate: 1.0,
            } => PrivacyLossDistribution::from_gaussian(
                noise_multiplier / (count as f64).sqrt(),
                1.0,
                self.relation,
                self.interval,
            ),
            _ => {
                let (noise, q) = noise_of(m);
                let one = match noise {
                    Noise::Gaussian { noise_multiplier } => PrivacyLossDistribution::from_gaussian(
                        noise_multiplier,
                        q,
                        self.relation,
                        self.interval,
                    )?,
                    Noise::Laplace { scale } => PrivacyLossDistribution::from_laplace(
                        scale,
                        q,
                        self.relation,
                        self.interval,
                    )?,
                };
                one.self_compose(count, TAIL_MASS_TRUNCATION)
            }
        }
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "upper bound: pessimistic (connect-the-dots) discretisation of the privacy loss on a \
             grid of {}, tails truncated pessimistically",
            self.interval
        )]
    }
}

fn noise_of(m: Mechanism) -> (Noise, f64) {
    match m {
        Mechanism::Gaussian {
            noise_multiplier,
            sample_rate,
        } => (Noise::Gaussian { noise_multiplier }, sample_rate),
        Mechanism::Laplace { scale, sample_rate } => (Noise::Laplace { scale }, sample_rate),
    }
}

fn check_rate(sample_rate: f64) -> Result<(), AccountingError> {
    if (0.0..=1.0).contains(&sample_rate) {
        Ok(())
    } else {
        Err(AccountingError::InvalidParameter {
            name: "sample_rate",
            value: sample_rate,
            expected: "a value in [0, 1]",
        })
    }
}

impl Accountant for PldAccountant {
    fn kind(&self) -> AccountantKind {
        AccountantKind::Pld
    }

    fn check(&self, event: &DpEvent) -> Result<(), AccountingError> {
        self.plan(event, 1).map(|_| ())
    }

    fn compose(&mut self, event: &DpEvent, count: u64) -> Result<(), AccountingError> {
        let plan = self.plan(event, count)?;
        if self.non_private || plan.non_private {
            // ε = ∞ from now on; no distribution is needed.
            self.non_private = true;
            return Ok(());
        }
        let mut pld = self.pld.clone();
        for (m, k) in plan.mechanisms {
            let next = self.build(m, k)?;
            pld = pld.compose(&next, TAIL_MASS_TRUNCATION)?;
        }
        self.pld = pld;
        Ok(())
    }

    fn epsilon(&self, delta: f64) -> Result<PrivacyReport, AccountingError> {
        if !(0.0..=1.0).contains(&delta) {
            return Err(AccountingError::InvalidParameter {
                name: "delta",
                value: delta,
                expected: "a value in [0, 1]",
            });
        }
        let epsilon = if self.non_private {
            f64::INFINITY
        } else {
            self.pld.epsilon_for_delta(delta)
        };
        Ok(PrivacyReport {
            epsilon,
            delta,
            accountant: AccountantKind::Pld,
            order: None,
            notes: self.notes(),
        })
    }

    fn delta(&self, epsilon: f64) -> Result<f64, AccountingError> {
        if epsilon.is_nan() {
            return Err(AccountingError::InvalidParameter {
                name: "epsilon",
                value: epsilon,
                expected: "a number",
            });
        }
        if self.non_private {
            return Ok(1.0);
        }
        Ok(self.pld.delta_for_epsilon(epsilon))
    }
}
