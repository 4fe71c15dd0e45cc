//! Differential-privacy events: a value describing what a private computation released.
//!
//! Every private release a training step makes (a noisy gradient sum, a noisy histogram, a
//! noisy count) is expressed as a [`DpEvent`]. Accountants see nothing else: they never read
//! training code. Events carry only what accounting needs, and each variant's doc states its
//! exact maths (after Google's `dp_accounting` `dp_event.py`).
//!
//! Contract: never change the meaning of an existing variant; add a new one. Accountants match
//! events exhaustively (no `_ =>`), so a new variant forces each accountant to decide whether it
//! supports it.
//!
//! The [`EventLedger`] records a run's events in order and merges consecutive identical ones into
//! `SelfComposed`, so 10,000 steps at a constant noise multiplier are one node.

use serde::Serialize;

/// A differentially private release, or a composition of releases.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "args", rename_all = "snake_case")]
pub enum DpEvent {
    /// Nothing released: no privacy cost.
    NoOp,
    /// A release with no privacy guarantee (epsilon is infinite).
    NonPrivate,
    /// The Gaussian mechanism: a query with L2 sensitivity `s` released with noise N(0, (σ·s)² I),
    /// where `noise_multiplier` = σ (unitless: noise std divided by sensitivity).
    Gaussian { noise_multiplier: f64 },
    /// The Laplace mechanism: a query with L1 sensitivity `s` released with Laplace noise of
    /// scale `scale · s` per coordinate. Pure (1/`scale`)-DP.
    Laplace { scale: f64 },
    /// Poisson subsampling: each record enters the batch independently with probability
    /// `sample_rate`, then `event` runs on the batch.
    PoissonSampled {
        sample_rate: f64,
        event: Box<DpEvent>,
    },
    /// Sampling without replacement: a uniformly random subset of exactly `batch_size` of
    /// `dataset_size` records, then `event` runs on it.
    SampledWithoutReplacement {
        dataset_size: u64,
        batch_size: u64,
        event: Box<DpEvent>,
    },
    /// Random allocation ("balls in bins"): `steps` consecutive runs of `event`, each record
    /// taking part in exactly one of them, chosen uniformly and independently of the other
    /// records. The `steps` runs are this one event (one epoch of balls-in-bins batches; Chua et
    /// al. 2025, "Balls-and-bins sampling for DP-SGD"; Feldman & Shenfeld 2025, "Privacy
    /// amplification by random allocation"). A prefix of the steps is post-processing of the
    /// whole, so a partial epoch costs at most this event.
    RandomAllocation { steps: u64, event: Box<DpEvent> },
    /// `event` run `count` times, each time on fresh randomness (adaptive composition).
    SelfComposed { event: Box<DpEvent>, count: u64 },
    /// Each event run once, in order (adaptive composition).
    Composed(Vec<DpEvent>),
}

impl DpEvent {
    /// The Gaussian mechanism with the given noise multiplier.
    pub fn gaussian(noise_multiplier: f64) -> Self {
        DpEvent::Gaussian { noise_multiplier }
    }

    /// The Laplace mechanism with the given scale (relative to the L1 sensitivity).
    pub fn laplace(scale: f64) -> Self {
        DpEvent::Laplace { scale }
    }

    /// `event` under Poisson sampling with rate `sample_rate`.
    pub fn poisson_sampled(sample_rate: f64, event: DpEvent) -> Self {
        DpEvent::PoissonSampled {
            sample_rate,
            event: Box::new(event),
        }
    }

    /// `event` on a fixed-size batch drawn without replacement.
    pub fn sampled_without_replacement(dataset_size: u64, batch_size: u64, event: DpEvent) -> Self {
        DpEvent::SampledWithoutReplacement {
            dataset_size,
            batch_size,
            event: Box::new(event),
        }
    }

    /// `event` under random allocation over `steps` steps (one epoch of balls-in-bins batches).
    pub fn random_allocation(steps: u64, event: DpEvent) -> Self {
        DpEvent::RandomAllocation {
            steps,
            event: Box::new(event),
        }
    }

    /// `self` composed with itself `count` times.
    pub fn self_composed(self, count: u64) -> Self {
        DpEvent::SelfComposed {
            event: Box::new(self),
            count,
        }
    }
}

/// Which datasets count as neighbours. Fixed when an accountant is built.
///
/// # Sensitivity: one convention for every event and every accountant
///
/// A noise parameter in an event (`Gaussian::noise_multiplier`, `Laplace::scale`) is relative to
/// the query's **add/remove-one sensitivity** Δ: the most that one record's presence can move
/// the query (for a sum of per-example gradients clipped to norm C, Δ = C). The noise std is
/// σ·Δ (Laplace: scale·Δ), formed only in `privacy::mechanism`.
///
/// - Add/remove one: a neighbouring dataset moves the query by at most Δ (distance 1 in units
///   of Δ).
/// - Replace one: one record's contribution g is swapped for another g′ with ‖g‖, ‖g′‖ ≤ Δ, so
///   the query moves by up to ‖g − g′‖ ≤ 2Δ (distance 2). An unsampled Gaussian release is then
///   the Gaussian mechanism at effective multiplier σ/2 (Laplace: scale/2); on a batch sampled
///   without replacement, the base mechanism of the subsampling theorem (Wang, Balle,
///   Kasiviswanathan 2019, Thm. 9; Balle, Barthe, Gaboardi 2018, Thm. 9) is that same σ/2
///   mechanism; under Poisson sampling the PLD pair is the symmetric mixture
///   (1−q)μ + qμ(· − Δ) against (1−q)μ + qμ(· + Δ) (dp_accounting's `REPLACE_ONE`).
///
/// [`NeighbouringRelation::sensitivity_factor`] is the one place that factor lives; every
/// accountant divides its noise parameter by it (PLD builds the distance into its pairs). This
/// is dp_accounting's PLD convention; its RDP accountant instead treats the noise multiplier as
/// relative to the replace-one sensitivity, so the two disagree by a factor 2 in σ for unsampled
/// replace-one releases (docs/accounting.md) — dpx keeps one convention everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NeighbouringRelation {
    /// One dataset is the other with one record added or removed (the default, as in Opacus and
    /// dp_accounting).
    #[default]
    AddOrRemoveOne,
    /// One dataset is the other with one record replaced by another.
    ReplaceOne,
}

impl NeighbouringRelation {
    /// How far a neighbouring change can move a query, in units of its add/remove-one
    /// sensitivity Δ: 1 under add/remove-one, 2 under replace-one (see the type's doc).
    /// Accountants analyse a release of noise multiplier σ as the mechanism of multiplier
    /// σ / `sensitivity_factor()` on a distance-1 query.
    pub fn sensitivity_factor(self) -> f64 {
        match self {
            NeighbouringRelation::AddOrRemoveOne => 1.0,
            NeighbouringRelation::ReplaceOne => 2.0,
        }
    }
}

/// The events of one run, in order, with consecutive identical events merged.
///
/// Recording is cheap (one comparison per event), so a training loop can record every release.
/// [`EventLedger::to_event`] gives the whole history as one [`DpEvent`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventLedger {
    runs: Vec<(DpEvent, u64)>,
}

impl EventLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one occurrence of `event`.
    pub fn record(&mut self, event: DpEvent) {
        self.record_many(event, 1);
    }

    /// Record `count` consecutive occurrences of `event`. `NoOp` costs nothing and is not
    /// stored (BandMF's steps between rounds record it: their releases are covered by the
    /// round's event, `train::plan`).
    pub fn record_many(&mut self, event: DpEvent, count: u64) {
        if count == 0 || event == DpEvent::NoOp {
            return;
        }
        match self.runs.last_mut() {
            Some((last, n)) if *last == event => *n += count,
            _ => self.runs.push((event, count)),
        }
    }

    /// The runs of identical events, in order: `(event, count)`.
    pub fn runs(&self) -> &[(DpEvent, u64)] {
        &self.runs
    }

    /// True when nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The whole history as one event: `NoOp` when empty, a single (self-composed) event for a
    /// single run, `Composed` otherwise.
    pub fn to_event(&self) -> DpEvent {
        let mut parts: Vec<DpEvent> = self
            .runs
            .iter()
            .map(|(e, n)| {
                if *n == 1 {
                    e.clone()
                } else {
                    e.clone().self_composed(*n)
                }
            })
            .collect();
        match parts.len() {
            0 => DpEvent::NoOp,
            1 => parts.pop().unwrap_or(DpEvent::NoOp),
            _ => DpEvent::Composed(parts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_merges_consecutive_identical_events() {
        let mut ledger = EventLedger::new();
        let step = DpEvent::poisson_sampled(0.01, DpEvent::gaussian(1.1));
        for _ in 0..1000 {
            ledger.record(step.clone());
        }
        ledger.record(DpEvent::poisson_sampled(0.01, DpEvent::gaussian(1.2)));
        ledger.record(step.clone());
        assert_eq!(ledger.runs().len(), 3);
        assert_eq!(ledger.runs()[0].1, 1000);
        match ledger.to_event() {
            DpEvent::Composed(parts) => {
                assert_eq!(parts.len(), 3);
                assert_eq!(parts[0], step.clone().self_composed(1000));
                assert_eq!(parts[2], step);
            }
            other => panic!("expected Composed, got {other:?}"),
        }
    }

    #[test]
    fn empty_ledger_is_noop() {
        assert_eq!(EventLedger::new().to_event(), DpEvent::NoOp);
    }
}
