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

use super::allocation;
use super::distribution::{PrivacyLossDistribution, TAIL_MASS_TRUNCATION};
use super::mechanism::Noise;
use super::pmf::DiscretePmf;
use crate::privacy::accountant::checks::{round_down_to_grid, sigma_grid_ln_step};
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
/// sampling multiplies the rates), random allocation of Gaussian releases under add/remove-one
/// (one epoch of balls-in-bins batches, [`allocation`]), `NoOp` and `NonPrivate`. Refuses
/// sampling without replacement, and Poisson-subsampled Laplace under replace-one.
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
    /// Random-allocation epochs composed so far: the coarsest lattice step, and whether any
    /// epoch was accounted as one unamplified Gaussian release, for the notes.
    allocation: Option<(f64, bool)>,
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
    /// One epoch of random allocation over `steps` steps of a Gaussian release.
    Allocation {
        noise_multiplier: f64,
        steps: u64,
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
            Mechanism::Allocation {
                noise_multiplier,
                steps,
            } => (2, noise_multiplier.to_bits(), steps),
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
            allocation: None,
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
        self.sigma_grid = relative_step
            .map(|step| sigma_grid_ln_step("pld_sigma_grid", step))
            .transpose()?;
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
            match folded(m, k) {
                (Folded::Additive(noise, q), _) => {
                    PrivacyLossDistribution::grid_points(noise, q, self.relation, self.interval)?;
                }
                // The lattice is capped by construction; the Gaussian fallback's grid is checked.
                (
                    Folded::Allocation {
                        noise_multiplier,
                        steps,
                    },
                    _,
                ) => {
                    if allocation::epoch_method(noise_multiplier, steps)
                        == allocation::EpochMethod::Gaussian
                    {
                        PrivacyLossDistribution::grid_points(
                            Noise::Gaussian { noise_multiplier },
                            1.0,
                            self.relation,
                            self.interval,
                        )?;
                    }
                }
            }
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
            // The lower estimate only: an epoch's first step alone is Poisson sampling at rate
            // 1/t (the record is in it with probability 1/t), so observing it is post-processing
            // of the epoch and its PLD is a valid, loose, lower bound.
            DpEvent::RandomAllocation {
                steps,
                event: inner,
            } if self.lower && *steps > 0 => self.walk(
                &DpEvent::poisson_sampled(1.0 / *steps as f64, (**inner).clone()),
                count,
                plan,
            ),
            DpEvent::RandomAllocation { steps: 0, .. } => Err(AccountingError::InvalidParameter {
                name: "steps",
                value: 0.0,
                expected: "at least one step per random allocation",
            }),
            // One epoch of balls-in-bins batches: the dominating pair of Chua et al. 2025, for
            // add/remove-one neighbours and Gaussian releases ([`super::allocation`]).
            DpEvent::RandomAllocation {
                steps,
                event: inner,
            } => {
                if self.relation != NeighbouringRelation::AddOrRemoveOne {
                    return Err(unsupported(
                        event,
                        "random allocation is analysed for add/remove-one neighbours",
                    ));
                }
                match crate::privacy::accountant::checks::effective_gaussian_noise_multiplier(inner)
                {
                    Ok(None) => Ok(()),
                    Ok(Some(sigma)) => {
                        check_noise("noise_multiplier", sigma)?;
                        if sigma == 0.0 {
                            plan.non_private |= count > 0;
                            Ok(())
                        } else {
                            plan.add(
                                Mechanism::Allocation {
                                    noise_multiplier: sigma,
                                    steps: *steps,
                                },
                                count,
                            )
                        }
                    }
                    Err(_) => Err(unsupported(
                        event,
                        "only Gaussian releases (one, or several on the same batch) are analysed under random allocation",
                    )),
                }
            }
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
            DpEvent::SampledWithoutReplacement { .. }
            | DpEvent::RandomAllocation { .. }
            | DpEvent::SelfComposed { .. } => Err(unsupported(
                event,
                "only a single Gaussian or Laplace release can be Poisson-subsampled",
            )),
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
            let (one, count) = folded(m, k);
            let next = self.single(one)?.self_compose(count, tau)?;
            return self.pld.compose(&next, tau);
        }
        let mut pld = self.pld.clone();
        let mut compose_chunks = || -> Result<(), AccountingError> {
            for chunk in plan.mechanisms.chunks(COMPOSE_CHUNK) {
                // Built in parallel and collected in order: the same bits on any thread count.
                let built: Vec<(PrivacyLossDistribution, u64)> = chunk
                    .par_iter()
                    .map(|&(m, k)| {
                        let (one, count) = folded(m, k);
                        Ok((self.single(one)?, count))
                    })
                    .collect::<Result<_, AccountingError>>()?;
                let mut parts: Vec<(&PrivacyLossDistribution, u64)> = vec![(&pld, 1)];
                parts.extend(built.iter().map(|(p, k)| (p, *k)));
                let next = PrivacyLossDistribution::compose_many(&parts, tau);
                drop(parts);
                // The next chunk's factories reuse these grid buffers (pages already touched).
                built.into_iter().for_each(|(p, _)| p.recycle());
                pld = next?;
            }
            Ok(())
        };
        let done = compose_chunks();
        DiscretePmf::release_buffers();
        done.map(|()| pld)
    }

    /// The PLD of one run of a mechanism: pessimistic, or rounded down for a lower estimate.
    fn single(&self, one: Folded) -> Result<PrivacyLossDistribution, AccountingError> {
        let (noise, q) = match one {
            Folded::Additive(noise, q) => (noise, q),
            // (a lower estimate never plans an allocation: its walk reads the first step)
            Folded::Allocation {
                noise_multiplier,
                steps,
            } => return allocation::epoch_pld(noise_multiplier, steps, self.interval),
        };
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
        if let Some((step, gaussian)) = self.allocation {
            if step > 0.0 {
                notes.push(format!(
                    "balls-in-bins epochs: PLD of random allocation (Chua et al. 2025 dominating pair, both directions), likelihood-ratio terms rounded up on a lattice of step {step:.3e} (an epoch's loss is overestimated by about that step where it matters)"
                ));
            }
            if gaussian {
                notes.push(
                    "balls-in-bins epochs with too little noise for the lattice are accounted as one unamplified Gaussian release each (valid, loose; the rdp accountant may be tighter)"
                        .to_string(),
                );
            }
        }
        if let (Some((before, after)), Some(ln_step)) = (self.binned, self.sigma_grid) {
            notes.push(format!(
                "{before} distinct mechanisms: noise multipliers rounded down to a {:.3e} relative grid ({after} distinct; conservative)",
                ln_step.exp_m1()
            ));
        }
        notes
    }
}

/// What one run of a mechanism is discretised as.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Folded {
    /// Additive noise at a Poisson sampling rate (1 = full batch).
    Additive(Noise, f64),
    /// One epoch of random allocation ([`allocation::epoch_pld`]).
    Allocation { noise_multiplier: f64, steps: u64 },
}

/// The mechanism to discretise for `m` run `count` times, with the count left to compose: T
/// full-batch Gaussian releases are one Gaussian with σ/√T (exact, as dp_accounting does).
fn folded(m: Mechanism, count: u64) -> (Folded, u64) {
    match m {
        Mechanism::Gaussian {
            noise_multiplier,
            sample_rate: 1.0,
        } => (
            Folded::Additive(
                Noise::Gaussian {
                    noise_multiplier: noise_multiplier / (count as f64).sqrt(),
                },
                1.0,
            ),
            1,
        ),
        Mechanism::Gaussian {
            noise_multiplier,
            sample_rate,
        } => (
            Folded::Additive(Noise::Gaussian { noise_multiplier }, sample_rate),
            count,
        ),
        Mechanism::Laplace { scale, sample_rate } => (
            Folded::Additive(Noise::Laplace { scale }, sample_rate),
            count,
        ),
        Mechanism::Allocation {
            noise_multiplier,
            steps,
        } => (
            Folded::Allocation {
                noise_multiplier,
                steps,
            },
            count,
        ),
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
        for &(m, _) in &plan.mechanisms {
            if let Mechanism::Allocation {
                noise_multiplier,
                steps,
            } = m
            {
                let (step, gaussian) = self.allocation.unwrap_or((0.0, false));
                self.allocation = Some(match allocation::epoch_method(noise_multiplier, steps) {
                    allocation::EpochMethod::Lattice { step: h } => (step.max(h), gaussian),
                    allocation::EpochMethod::Gaussian => (step, gaussian || steps > 1),
                });
            }
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
#[path = "accountant_tests.rs"]
mod tests;
