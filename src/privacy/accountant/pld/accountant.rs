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

use rayon::prelude::*;

use super::distribution::{PrivacyLossDistribution, TAIL_MASS_TRUNCATION};
use super::mechanism::Noise;
use crate::privacy::accountant::checks::round_down_to_grid;
use crate::privacy::accountant::{Accountant, AccountantKind, AccountingError, PrivacyReport};
use crate::privacy::event::{DpEvent, NeighbouringRelation};

/// The default grid step of the privacy-loss values (dp_accounting's default).
pub const DEFAULT_VALUE_DISCRETIZATION_INTERVAL: f64 = 1e-4;

/// The default relative step of the σ grid ([`PldAccountant::with_sigma_grid`]) that long
/// schedules of distinct noise multipliers are rounded down to.
pub const DEFAULT_SIGMA_GRID: f64 = 2e-3;

/// A composition with at most this many distinct Gaussian mechanisms is always exact; above it
/// the σ grid, when set, applies.
pub const EXACT_DISTINCT_LIMIT: usize = 256;

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
    /// True for [`PldAccountant::lower_estimate`]: ε is a lower estimate, not a guarantee.
    lower: bool,
    /// ln(1 + relative step) of the σ grid, if any ([`PldAccountant::with_sigma_grid`]).
    sigma_grid: Option<f64>,
    /// The last binned composition: (distinct Gaussian mechanisms, after rounding), for the notes.
    binned: Option<(usize, usize)>,
}

/// How many distinct mechanisms are composed (with the state) in one Fourier-domain pass.
const COMPOSE_CHUNK: usize = 64;

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
            lower: false,
            sigma_grid: None,
            binned: None,
        }
    }

    /// A conservative approximation for long schedules of distinct noise multipliers: when one
    /// composition holds more than [`EXACT_DISTINCT_LIMIT`] distinct Gaussian mechanisms, every
    /// σ is rounded DOWN to the geometric grid {(1 + `relative_step`)^k} and equal results are
    /// composed together (`None`: always exact).
    ///
    /// Why it is an upper bound: at equal sampling, the Gaussian mechanism with σ' ≤ σ dominates
    /// the one with σ (adding independent N(0, σ² − σ'²) noise to its output gives the other:
    /// post-processing), in both add/remove directions; the pessimistic PLD of the σ' mechanism
    /// dominates its own curve, and composition preserves dominance (Zhu, Dong, Wang 2022,
    /// Thm 10). So δ(ε) can only grow. By how much: at most as if every σ were divided by
    /// (1 + step); docs/accounting.md gives the measured error.
    pub fn with_sigma_grid(mut self, relative_step: Option<f64>) -> Result<Self, AccountingError> {
        if let Some(step) = relative_step {
            if !(1e-9..=0.1).contains(&step) {
                return Err(AccountingError::InvalidParameter {
                    name: "pld_sigma_grid",
                    value: step,
                    expected: "a relative grid step in [1e-9, 0.1]",
                });
            }
            self.sigma_grid = Some(step.ln_1p());
        } else {
            self.sigma_grid = None;
        }
        Ok(self)
    }

    /// The plan's mechanisms, with σ rounded down to the grid when the grid applies
    /// ([`PldAccountant::with_sigma_grid`]); never for a lower estimate.
    fn on_grid(&self, plan: &Plan) -> Result<Option<Plan>, AccountingError> {
        let Some(ln_step) = self.sigma_grid.filter(|_| !self.lower) else {
            return Ok(None);
        };
        let gaussians = plan
            .mechanisms
            .iter()
            .filter(|(m, _)| matches!(m, Mechanism::Gaussian { .. }))
            .count();
        if gaussians <= EXACT_DISTINCT_LIMIT {
            return Ok(None);
        }
        let mut out = Plan {
            non_private: plan.non_private,
            ..Plan::default()
        };
        for &(m, k) in &plan.mechanisms {
            let m = match m {
                Mechanism::Gaussian {
                    noise_multiplier,
                    sample_rate,
                } => Mechanism::Gaussian {
                    noise_multiplier: round_down_to_grid(noise_multiplier, ln_step),
                    sample_rate,
                },
                other => other,
            };
            out.add(m, k)?;
        }
        Ok(Some(out))
    }

    /// An accountant whose ε and δ are **lower** estimates of the true ones: each mechanism's
    /// privacy loss is rounded down ([`PrivacyLossDistribution::lower_estimate`]) and composed
    /// without tail truncation, so grids grow with the number of distinct mechanisms and steps
    /// (for tests and audits of the upper-bound accountants, not for runs). It also covers what
    /// the pessimistic accountant refuses, through realisable neighbouring pairs: sampling
    /// without replacement under replace-one (the symmetric pair at q = m/n, or the full batch
    /// when m = n under either relation) and Poisson-subsampled Laplace under replace-one.
    /// Reports say `upper_bound = false`.
    pub fn lower_estimate(
        relation: NeighbouringRelation,
        value_discretization_interval: f64,
    ) -> PldAccountant {
        PldAccountant {
            lower: true,
            ..PldAccountant::new(relation, value_discretization_interval)
        }
    }

    /// Tail mass each composition may truncate: none for a lower estimate (the pessimistic
    /// truncation would add mass at +∞).
    fn truncation(&self) -> f64 {
        if self.lower {
            0.0
        } else {
            TAIL_MASS_TRUNCATION
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
    /// Flatten `event` run `count` times into the plan to compose (σ on the grid when it applies,
    /// with the numbers of distinct mechanisms before and after), checking every sub-event.
    fn plan(
        &self,
        event: &DpEvent,
        count: u64,
    ) -> Result<(Plan, Option<(usize, usize)>), AccountingError> {
        self.check_interval()?;
        let mut plan = Plan::default();
        self.walk(event, count, &mut plan)?;
        let (plan, binned) = match self.on_grid(&plan)? {
            Some(on_grid) => {
                let counts = (plan.mechanisms.len(), on_grid.mechanisms.len());
                (on_grid, Some(counts))
            }
            None => (plan, None),
        };
        // Refuse in the dry run what the factories could not allocate (the grid `build` uses).
        // A lower estimate's factories check their own grids.
        for &(m, k) in plan.mechanisms.iter().filter(|_| !self.lower) {
            let (noise, q, _) = folded(m, k);
            PrivacyLossDistribution::grid_points(noise, q, self.relation, self.interval)?;
        }
        Ok((plan, binned))
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
            DpEvent::SampledWithoutReplacement {
                dataset_size,
                batch_size,
                event: inner,
            } if self.lower && batch_size <= dataset_size && *dataset_size > 0 => {
                let q = *batch_size as f64 / *dataset_size as f64;
                match self.relation {
                    NeighbouringRelation::ReplaceOne => self.sampled(inner, q, count, plan),
                    NeighbouringRelation::AddOrRemoveOne if q == 1.0 => {
                        self.sampled(inner, 1.0, count, plan)
                    }
                    NeighbouringRelation::AddOrRemoveOne => Err(unsupported(
                        event,
                        "no realisable pair is built for sampling without replacement under add/remove-one",
                    )),
                }
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
                if self.relation == NeighbouringRelation::ReplaceOne
                    && rate < 1.0
                    && rate > 0.0
                    && !self.lower
                {
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
            // Gaussians composed on the same batch (a clipping policy's gradient and its noisy
            // count or histogram) are one Gaussian mechanism on the concatenated query, with
            // σ^−2 = Σ σ_i^−2 (DC-SGD Thm 2): exactly the subsampled Gaussian of that σ.
            DpEvent::Composed(_) => {
                match crate::privacy::accountant::checks::effective_gaussian_noise_multiplier(event)
                {
                    Ok(None) => Ok(()),
                    Ok(Some(sigma)) => self.sampled(&DpEvent::gaussian(sigma), rate, count, plan),
                    Err(_) => Err(unsupported(
                        event,
                        "only a single Gaussian or Laplace release, or Gaussians composed on the same batch, can be Poisson-subsampled",
                    )),
                }
            }
            DpEvent::SampledWithoutReplacement { .. } | DpEvent::SelfComposed { .. } => {
                Err(unsupported(
                    event,
                    "only a single Gaussian or Laplace release can be Poisson-subsampled",
                ))
            }
        }
    }

    /// The state composed with every mechanism of `plan`. One distinct mechanism is
    /// self-composed by FFT power and composed onto the state (as before many were); several are
    /// composed in chunks of [`COMPOSE_CHUNK`], each chunk and the state in one pass in the
    /// Fourier domain, so a schedule of T distinct steps costs T transforms of the window's length
    /// and T/64 inverse transforms, not T convolutions, and at most a chunk of single-step PLDs is
    /// held at once.
    fn composed(&self, plan: &Plan) -> Result<PrivacyLossDistribution, AccountingError> {
        let tau = self.truncation();
        if let [(m, k)] = plan.mechanisms[..] {
            let (noise, q, count) = folded(m, k);
            let next = self.single(noise, q)?.self_compose(count, tau)?;
            return self.pld.compose(&next, tau);
        }
        let mut pld = self.pld.clone();
        for chunk in plan.mechanisms.chunks(COMPOSE_CHUNK) {
            // Built in parallel and collected in order: the same bits on any thread count.
            let built: Vec<(PrivacyLossDistribution, u64)> = chunk
                .par_iter()
                .map(|&(m, k)| {
                    let (noise, q, count) = folded(m, k);
                    Ok((self.single(noise, q)?, count))
                })
                .collect::<Result<_, AccountingError>>()?;
            let mut parts: Vec<(&PrivacyLossDistribution, u64)> = vec![(&pld, 1)];
            parts.extend(built.iter().map(|(p, k)| (p, *k)));
            pld = PrivacyLossDistribution::compose_many(&parts, tau)?;
        }
        Ok(pld)
    }

    /// The PLD of one run of a mechanism: pessimistic, or rounded down for a lower estimate.
    fn single(&self, noise: Noise, q: f64) -> Result<PrivacyLossDistribution, AccountingError> {
        Ok(if self.lower {
            PrivacyLossDistribution::lower_estimate(noise, q, self.relation, self.interval)?
        } else {
            match noise {
                Noise::Gaussian { noise_multiplier } => PrivacyLossDistribution::from_gaussian(
                    noise_multiplier,
                    q,
                    self.relation,
                    self.interval,
                )?,
                Noise::Laplace { scale } => {
                    PrivacyLossDistribution::from_laplace(scale, q, self.relation, self.interval)?
                }
            }
        })
    }

    fn notes(&self) -> Vec<String> {
        if self.lower {
            return vec![format!(
                "lower estimate: privacy losses rounded down on a grid of {}, no tail truncation",
                self.interval
            )];
        }
        let mut notes = vec![format!(
            "upper bound: pessimistic (connect-the-dots) discretisation of the privacy loss on a \
             grid of {}, tails truncated pessimistically",
            self.interval
        )];
        if let (Some((before, after)), Some(ln_step)) = (self.binned, self.sigma_grid) {
            notes.push(format!(
                "{before} distinct mechanisms: noise multipliers rounded down to a {:.3e} relative grid ({after} distinct; conservative)",
                ln_step.exp_m1()
            ));
        }
        notes
    }
}

/// The mechanism to discretise for `m` run `count` times, with the count left to compose: T
/// full-batch Gaussian releases are one Gaussian with σ/√T (exact, as dp_accounting does).
fn folded(m: Mechanism, count: u64) -> (Noise, f64, u64) {
    match noise_of(m) {
        (Noise::Gaussian { noise_multiplier }, 1.0) => (
            Noise::Gaussian {
                noise_multiplier: noise_multiplier / (count as f64).sqrt(),
            },
            1.0,
            1,
        ),
        (noise, q) => (noise, q, count),
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
        let (plan, binned) = self.plan(event, count)?;
        if self.non_private || plan.non_private {
            // ε = ∞ from now on; no distribution is needed.
            self.non_private = true;
            return Ok(());
        }
        self.pld = self.composed(&plan)?;
        if binned.is_some() {
            self.binned = binned;
        }
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
            // Gaussian and Laplace losses are finite: all mass at +∞ is the pessimistic tail
            // truncation (about 1e-15 per composition). A δ at or below it would give ε = ∞,
            // which is the truncation speaking, not the mechanism: say so.
            let truncated = self.pld.infinity_mass();
            if delta > 0.0 && delta <= truncated {
                return Err(AccountingError::InvalidParameter {
                    name: "delta",
                    value: delta,
                    expected: "a delta above the PLD accountant's pessimistically truncated tail mass (about 1e-15 per composed mechanism); use the rdp accountant for smaller delta",
                });
            }
            self.pld.epsilon_for_delta(delta)
        };
        Ok(PrivacyReport {
            epsilon,
            delta,
            accountant: AccountantKind::Pld,
            order: None,
            notes: self.notes(),
            upper_bound: !self.lower,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::special::normal_cdf;
    use proptest::prelude::*;

    const ADD_REMOVE: NeighbouringRelation = NeighbouringRelation::AddOrRemoveOne;

    fn acc() -> PldAccountant {
        PldAccountant::new(ADD_REMOVE, DEFAULT_VALUE_DISCRETIZATION_INTERVAL)
    }

    fn sgm(q: f64, sigma: f64) -> DpEvent {
        DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma))
    }

    #[test]
    fn delta_below_the_truncated_mass_is_refused_not_infinite() {
        // δ ≤ 1e-15 used to give ε = ∞ (the truncation's mass at +∞), and calibration then
        // blamed σ > 1e6; it is now an error that names delta and the rdp alternative.
        let mut acc = PldAccountant::new(ADD_REMOVE, 1e-4);
        acc.compose(&sgm(0.01, 1.0), 100).unwrap();
        let err = acc.epsilon(1e-16).unwrap_err();
        assert!(
            matches!(&err, AccountingError::InvalidParameter { name: "delta", expected, .. } if expected.contains("rdp")),
            "{err}"
        );
        assert!(acc.epsilon(1e-12).unwrap().epsilon.is_finite());
    }

    #[test]
    fn lower_estimate_is_below_the_upper_bound_and_close_to_it() {
        for relation in [ADD_REMOVE, NeighbouringRelation::ReplaceOne] {
            let mut upper = PldAccountant::new(relation, 1e-3);
            let mut lower = PldAccountant::lower_estimate(relation, 1e-3);
            upper.compose(&sgm(0.05, 1.2), 40).unwrap();
            lower.compose(&sgm(0.05, 1.2), 40).unwrap();
            let (u, l) = (upper.epsilon(1e-5).unwrap(), lower.epsilon(1e-5).unwrap());
            assert!(u.upper_bound && !l.upper_bound);
            assert!(
                l.epsilon <= u.epsilon,
                "{relation:?}: {} > {}",
                l.epsilon,
                u.epsilon
            );
            assert!(
                u.epsilon - l.epsilon < 0.05 * u.epsilon,
                "{relation:?}: {} vs {}",
                l.epsilon,
                u.epsilon
            );
        }
    }

    /// Exact δ(ε) of μ-GDP (Dong, Roth, Su 2019, Cor. 2.13): Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
    fn gaussian_delta(mu: f64, eps: f64) -> f64 {
        normal_cdf(-eps / mu + mu / 2.0) - eps.exp() * normal_cdf(-eps / mu - mu / 2.0)
    }

    #[test]
    fn accountant_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<PldAccountant>();
        let boxed: Box<dyn Accountant> = Box::new(acc());
        assert_eq!(boxed.kind(), AccountantKind::Pld);
    }

    #[test]
    fn contract_no_events_is_zero_epsilon() {
        let a = acc();
        assert_eq!(a.kind(), AccountantKind::Pld);
        assert_eq!(a.epsilon(1e-5).unwrap().epsilon, 0.0);
        assert_eq!(a.delta(0.0).unwrap(), 0.0);
    }

    #[test]
    fn contract_non_private_is_infinite() {
        let mut a = acc();
        a.compose(&sgm(0.01, 1.0), 100).unwrap();
        a.compose(&DpEvent::NonPrivate, 1).unwrap();
        assert_eq!(a.epsilon(1e-5).unwrap().epsilon, f64::INFINITY);
        assert_eq!(a.delta(10.0).unwrap(), 1.0);
        let mut b = acc();
        b.compose(&DpEvent::gaussian(0.0), 1).unwrap();
        assert_eq!(b.epsilon(0.5).unwrap().epsilon, f64::INFINITY);
    }

    #[test]
    fn contract_noop_and_empty_sampling_cost_nothing() {
        let mut a = acc();
        a.compose(&DpEvent::NoOp, 5).unwrap();
        a.compose(&DpEvent::poisson_sampled(0.0, DpEvent::gaussian(1.0)), 5)
            .unwrap();
        a.compose(&DpEvent::poisson_sampled(0.3, DpEvent::NoOp), 5)
            .unwrap();
        a.compose(&DpEvent::gaussian(1.0), 0).unwrap();
        assert_eq!(a.epsilon(1e-6).unwrap().epsilon, 0.0);
    }

    #[test]
    fn gaussians_composed_on_one_batch_are_the_gaussian_of_the_combined_multiplier() {
        // DC-SGD Thm 2: gradient at σ_T and histogram at σ_H on the same Poisson batch cost
        // exactly the subsampled Gaussian with σ^−2 = σ_T^−2 + σ_H^−2.
        let (sigma_t, sigma_h) = (1.2f64, 5.0f64);
        let sigma = (sigma_t.powi(-2) + sigma_h.powi(-2)).powf(-0.5);
        let mut split = acc();
        split
            .compose(
                &DpEvent::poisson_sampled(
                    0.02,
                    DpEvent::Composed(vec![DpEvent::gaussian(sigma_t), DpEvent::gaussian(sigma_h)]),
                ),
                200,
            )
            .unwrap();
        let mut one = acc();
        one.compose(&sgm(0.02, sigma), 200).unwrap();
        let (a, b) = (
            split.epsilon(1e-5).unwrap().epsilon,
            one.epsilon(1e-5).unwrap().epsilon,
        );
        assert_eq!(a, b);
        // A composed Laplace inside the sampling is still refused.
        assert!(matches!(
            acc().check(&DpEvent::poisson_sampled(
                0.1,
                DpEvent::Composed(vec![DpEvent::gaussian(1.0), DpEvent::laplace(1.0)])
            )),
            Err(AccountingError::Unsupported { .. })
        ));
    }

    #[test]
    fn contract_unsupported_nested_event_changes_nothing() {
        let mut a = acc();
        a.compose(&sgm(0.02, 1.1), 50).unwrap();
        let before = a.epsilon(1e-5).unwrap().epsilon;
        let bad = DpEvent::Composed(vec![
            sgm(0.02, 1.1),
            DpEvent::Composed(vec![DpEvent::sampled_without_replacement(
                1000,
                10,
                DpEvent::gaussian(1.0),
            )]),
        ]);
        let err = a.check(&bad).unwrap_err();
        assert!(
            matches!(&err, AccountingError::Unsupported { accountant: AccountantKind::Pld, event } if event.contains("SampledWithoutReplacement")),
            "{err:?}"
        );
        assert_eq!(a.compose(&bad, 3).unwrap_err(), err);
        assert_eq!(a.epsilon(1e-5).unwrap().epsilon, before);
        // a sampled composition is not a mechanism this accountant can subsample
        let nested = DpEvent::poisson_sampled(0.1, DpEvent::gaussian(1.0).self_composed(2));
        assert!(matches!(
            a.check(&nested),
            Err(AccountingError::Unsupported { .. })
        ));
    }

    #[test]
    fn contract_bad_parameters_are_named() {
        let a = acc();
        for (event, name) in [
            (DpEvent::gaussian(f64::NAN), "noise_multiplier"),
            (DpEvent::gaussian(-1.0), "noise_multiplier"),
            (DpEvent::laplace(f64::INFINITY), "scale"),
            (sgm(1.5, 1.0), "sample_rate"),
            (sgm(f64::NAN, 1.0), "sample_rate"),
        ] {
            match a.check(&event) {
                Err(AccountingError::InvalidParameter { name: got, .. }) => assert_eq!(got, name),
                other => panic!("{event:?}: {other:?}"),
            }
        }
        assert!(matches!(
            a.epsilon(1.5),
            Err(AccountingError::InvalidParameter { name: "delta", .. })
        ));
        assert!(a.delta(f64::NAN).is_err());
        let bad_grid = PldAccountant::new(ADD_REMOVE, 0.0);
        assert!(matches!(
            bad_grid.check(&DpEvent::gaussian(1.0)),
            Err(AccountingError::InvalidParameter {
                name: "value_discretization_interval",
                ..
            })
        ));
    }

    #[test]
    fn grids_too_fine_are_refused_by_the_dry_run() {
        // 10^8 full-batch Gaussian steps at σ = 1 are one Gaussian with σ = 1e-4: its losses
        // reach ~5e7, far beyond 2^25 grid points of 1e-4.
        let mut a = acc();
        let err = a.check(&DpEvent::gaussian(1.0).self_composed(100_000_000));
        assert!(matches!(err, Err(AccountingError::Numerical(_))), "{err:?}");
        assert!(a.compose(&DpEvent::gaussian(1.0), 100_000_000).is_err());
        assert_eq!(a.epsilon(1e-5).unwrap().epsilon, 0.0);
    }

    #[test]
    fn check_never_mutates() {
        let a = acc();
        a.check(&sgm(0.5, 0.8).self_composed(10)).unwrap();
        assert_eq!(a.epsilon(1e-5).unwrap().epsilon, 0.0);
        assert_eq!(a.distribution(), &PrivacyLossDistribution::identity(1e-4));
    }

    #[test]
    fn report_says_upper_bound() {
        let mut a = acc();
        a.compose(&DpEvent::gaussian(2.0), 1).unwrap();
        let r = a.epsilon(1e-5).unwrap();
        assert_eq!(r.accountant, AccountantKind::Pld);
        assert_eq!(r.order, None);
        assert_eq!(r.delta, 1e-5);
        assert!(r.notes.iter().any(|n| n.contains("upper bound")));
        assert!(r.notes.iter().any(|n| n.contains("pessimistic")));
    }

    #[test]
    fn laplace_composition_is_at_most_basic_composition() {
        // k Laplace(b) releases are (k/b, 0)-DP by basic composition (Dwork & Roth, Thm 3.16);
        // the PLD ε at tiny δ must not exceed it (plus one grid step per release).
        let mut a = acc();
        a.compose(&DpEvent::laplace(4.0), 8).unwrap();
        let eps = a.epsilon(1e-12).unwrap().epsilon;
        assert!(eps <= 2.0 + 8.0 * 1e-4, "{eps}");
        assert!(eps > 1.0, "{eps}");
        // subsampled: amplification ln(1 + q(e^{1/b} − 1)) per step (Balle, Barthe, Gaboardi
        // 2018, Thm 8) bounds the pure-DP ε of each step.
        let mut s = acc();
        s.compose(&DpEvent::poisson_sampled(0.1, DpEvent::laplace(1.0)), 10)
            .unwrap();
        let per_step = (0.1 * (1f64.exp() - 1.0)).ln_1p();
        let eps = s.epsilon(1e-12).unwrap().epsilon;
        assert!(eps <= 10.0 * per_step + 10.0 * 1e-4, "{eps}");
    }

    #[test]
    fn nested_poisson_sampling_multiplies_rates() {
        let mut nested = acc();
        nested
            .compose(
                &DpEvent::poisson_sampled(0.5, sgm(0.1, 1.0)).self_composed(20),
                1,
            )
            .unwrap();
        let mut flat = acc();
        flat.compose(&sgm(0.05, 1.0), 20).unwrap();
        assert_eq!(
            nested.epsilon(1e-5).unwrap().epsilon,
            flat.epsilon(1e-5).unwrap().epsilon
        );
    }

    #[test]
    fn equal_events_are_grouped_across_the_tree() {
        // Composition is commutative: [a, b, a] composed = a twice and b once.
        let a_ev = sgm(0.05, 0.9);
        let b_ev = DpEvent::gaussian(3.0);
        let mut tree = acc();
        tree.compose(
            &DpEvent::Composed(vec![
                a_ev.clone(),
                b_ev.clone(),
                a_ev.clone().self_composed(9),
            ]),
            2,
        )
        .unwrap();
        let mut grouped = acc();
        grouped.compose(&a_ev, 20).unwrap();
        grouped.compose(&b_ev, 2).unwrap();
        let (x, y) = (
            tree.epsilon(1e-6).unwrap().epsilon,
            grouped.epsilon(1e-6).unwrap().epsilon,
        );
        assert!((x - y).abs() <= 1e-9 * y, "{x} vs {y}");
    }

    #[test]
    fn replace_one_costs_more_than_add_remove() {
        let mut replace = PldAccountant::new(NeighbouringRelation::ReplaceOne, 1e-4);
        replace.compose(&sgm(0.05, 1.0), 50).unwrap();
        let mut add_remove = acc();
        add_remove.compose(&sgm(0.05, 1.0), 50).unwrap();
        assert!(replace.epsilon(1e-5).unwrap().epsilon > add_remove.epsilon(1e-5).unwrap().epsilon);
        // full batch: replace-one with σ equals add/remove with σ/2 (shift 2)
        let mut r = PldAccountant::new(NeighbouringRelation::ReplaceOne, 1e-4);
        r.compose(&DpEvent::gaussian(4.0), 3).unwrap();
        let mut h = acc();
        h.compose(&DpEvent::gaussian(2.0), 3).unwrap();
        let (x, y) = (r.delta(1.0).unwrap(), h.delta(1.0).unwrap());
        assert!((x - y).abs() <= 1e-12 * y, "{x} vs {y}");
        // subsampled Laplace under replace-one is refused by name
        assert!(matches!(
            r.check(&DpEvent::poisson_sampled(0.5, DpEvent::laplace(1.0))),
            Err(AccountingError::Unsupported { .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

        /// For q = 1 the PLD brackets the exact Gaussian δ(ε) from above: T Gaussians with σ are
        /// μ-GDP with μ = √T/σ (Dong, Roth, Su 2019, Cor. 3.3).
        #[test]
        fn full_batch_gaussian_brackets_exact_delta(
            sigma in 0.6f64..6.0, steps in 1u64..200, eps in 0.0f64..4.0,
        ) {
            let mut a = acc();
            a.compose(&DpEvent::gaussian(sigma), steps).unwrap();
            let mu = (steps as f64).sqrt() / sigma;
            let exact = gaussian_delta(mu, eps);
            let got = a.delta(eps).unwrap();
            prop_assert!(got >= exact - 1e-12, "below exact: {} < {}", got, exact);
            prop_assert!(got <= exact * (1.0 + 1e-3) + 1e-10, "too loose: {} vs {}", got, exact);
        }

        /// More noise never costs more privacy (a gap of ≥ 5% in σ keeps grid effects out).
        #[test]
        fn epsilon_decreases_in_sigma(
            q in 0.01f64..0.3, sigma in 0.8f64..3.0, gap in 0.05f64..0.5, steps in 1u64..60,
        ) {
            let eps = |s: f64| {
                let mut a = acc();
                a.compose(&sgm(q, s), steps).unwrap();
                a.epsilon(1e-5).unwrap().epsilon
            };
            let (lo, hi) = (eps(sigma * (1.0 + gap)), eps(sigma));
            prop_assert!(lo <= hi, "ε(σ(1+gap)) = {} > ε(σ) = {}", lo, hi);
        }

        /// ε(δ) and δ(ε) are inverse to each other on the discrete PLD.
        #[test]
        fn epsilon_delta_round_trip(
            q in 0.01f64..1.0, sigma in 0.8f64..3.0, steps in 1u64..60, log_delta in -9.0f64..-2.0,
        ) {
            let mut a = acc();
            a.compose(&sgm(q, sigma), steps).unwrap();
            let delta = 10f64.powf(log_delta);
            let eps = a.epsilon(delta).unwrap().epsilon;
            prop_assert!(a.delta(eps).unwrap() <= delta * (1.0 + 1e-9));
            if eps > 1e-3 {
                prop_assert!(a.delta(eps - 1e-3).unwrap() > delta);
            }
        }

        /// T separate compositions equal one T-fold self-composition (up to truncation).
        #[test]
        fn repeated_compose_equals_self_composition(
            q in 0.02f64..0.5, sigma in 0.8f64..2.0, steps in 2u64..12,
        ) {
            let mut one_by_one = acc();
            for _ in 0..steps {
                one_by_one.compose(&sgm(q, sigma), 1).unwrap();
            }
            let mut at_once = acc();
            at_once.compose(&sgm(q, sigma).self_composed(steps), 1).unwrap();
            let (x, y) = (
                one_by_one.epsilon(1e-5).unwrap().epsilon,
                at_once.epsilon(1e-5).unwrap().epsilon,
            );
            prop_assert!((x - y).abs() <= 1e-6 * y.max(1e-3), "{} vs {}", x, y);
        }
    }

    /// A schedule of `n` distinct σ, linear from `lo` to `hi`, at sampling rate `q`.
    fn schedule(n: usize, lo: f64, hi: f64, q: f64) -> DpEvent {
        DpEvent::Composed(
            (0..n)
                .map(|i| sgm(q, lo + (hi - lo) * i as f64 / (n - 1).max(1) as f64))
                .collect(),
        )
    }

    #[test]
    fn distinct_steps_in_one_pass_equal_step_by_step_composition() {
        for relation in [ADD_REMOVE, NeighbouringRelation::ReplaceOne] {
            let event = schedule(90, 0.8, 1.6, 0.01);
            let mut at_once = PldAccountant::new(relation, 1e-3);
            at_once.compose(&event, 1).unwrap();
            let mut one_by_one = PldAccountant::new(relation, 1e-3);
            let DpEvent::Composed(steps) = &event else {
                unreachable!()
            };
            for step in steps {
                one_by_one.compose(step, 1).unwrap();
            }
            let mut lower = PldAccountant::lower_estimate(relation, 1e-3);
            lower.compose(&event, 1).unwrap();
            for delta in [1e-3, 1e-5, 1e-7] {
                let x = at_once.epsilon(delta).unwrap().epsilon;
                let y = one_by_one.epsilon(delta).unwrap().epsilon;
                let low = lower.epsilon(delta).unwrap().epsilon;
                // one truncation instead of 90 (each puts up to 1e-15 of mass at +∞, which
                // moves ε at δ = 1e-7 by ~1e-7 relative): never above, and that close
                assert!(x <= y * (1.0 + 1e-12), "{relation:?} {delta}: {x} > {y}");
                assert!(x >= y * (1.0 - 1e-6), "{relation:?} {delta}: {x} ≪ {y}");
                assert!(
                    x >= low,
                    "{relation:?} {delta}: {x} below the lower estimate {low}"
                );
            }
        }
    }

    #[test]
    fn the_sigma_grid_is_conservative_and_within_half_a_percent() {
        let exact_event = schedule(EXACT_DISTINCT_LIMIT, 0.8, 2.0, 0.01);
        let long = schedule(600, 0.8, 2.0, 0.01);
        for relation in [ADD_REMOVE, NeighbouringRelation::ReplaceOne] {
            let gridded = || {
                PldAccountant::new(relation, 1e-3)
                    .with_sigma_grid(Some(DEFAULT_SIGMA_GRID))
                    .unwrap()
            };
            // at most EXACT_DISTINCT_LIMIT distinct: the grid does not apply
            let (mut a, mut b) = (gridded(), PldAccountant::new(relation, 1e-3));
            a.compose(&exact_event, 1).unwrap();
            b.compose(&exact_event, 1).unwrap();
            assert_eq!(
                a.epsilon(1e-5).unwrap().epsilon,
                b.epsilon(1e-5).unwrap().epsilon
            );
            assert_eq!(a.epsilon(1e-5).unwrap().notes.len(), 1);
            // above it: rounded down, so never below the exact value, and close to it
            let (mut a, mut b) = (gridded(), PldAccountant::new(relation, 1e-3));
            a.compose(&long, 1).unwrap();
            b.compose(&long, 1).unwrap();
            for delta in [1e-3, 1e-5, 1e-7] {
                let (x, y) = (a.epsilon(delta).unwrap(), b.epsilon(delta).unwrap().epsilon);
                assert!(x.epsilon >= y, "{relation:?} {delta}: {} < {y}", x.epsilon);
                assert!(
                    x.epsilon <= y * 1.005,
                    "{relation:?} {delta}: {} ≫ {y}",
                    x.epsilon
                );
                assert!(
                    x.notes.iter().any(|n| n.contains("600 distinct")),
                    "{:?}",
                    x.notes
                );
            }
        }
        assert!(acc().with_sigma_grid(Some(0.5)).is_err());
        assert!(acc().with_sigma_grid(Some(0.0)).is_err());
    }
}
