//! The ADP-SGD paper's own privacy bound (room: `privacy::accountant`), labelled `adp-paper`, for
//! faithful reproductions of Wu et al. (arXiv 2110.07435). Owns only that closed form. Must not:
//! be presented as a proven guarantee when the paper's own validity condition fails (reports say
//! so), nor be used for anything but reproductions.
//!
//! # Maths (docs/methods/adp_sgd.md §2.1-2.2; Wu et al. Thm. 4.1 / C.1)
//! Per step t the Gaussian noise multiplier is z_t (noise std on the clipped-gradient sum over
//! the clip norm) on a batch of m of n records, q = m/n. Advanced composition of the amplified
//! per-step Gaussian mechanisms gives
//!     ε = 16·q·√(B_δ · Σ_t 1/z_t²),   B_δ = ln(16·T·q/δ) · ln(1.25/δ),
//! i.e. the paper's invariant Σ 1/s_t² = n²ε²/((16G)² B_δ) with s_t = z_t·G/m. The derivation
//! needs each step's ε_t = 2√(2 ln(1.25/δ₀))/z_t ≤ 1 with δ₀ = δ/(12.5·T·q) (Lemma A.1); when it
//! fails the report notes that the number is the paper's, not a proven bound.

use crate::privacy::accountant::checks::{
    check_gaussians, describe, effective_gaussian_noise_multiplier,
};
use crate::privacy::accountant::{Accountant, AccountantKind, AccountingError, PrivacyReport};
use crate::privacy::event::{DpEvent, NeighbouringRelation};

/// The paper's B_δ = ln(16·T·q/δ) · ln(1.25/δ).
pub fn adp_paper_b_delta(steps: f64, sample_rate: f64, delta: f64) -> f64 {
    (16.0 * steps * sample_rate / delta).ln() * (1.25 / delta).ln()
}

/// The paper's ε for T sampled-Gaussian steps at rate q with Σ 1/z_t² = `sum_inv_z2`.
pub fn adp_paper_epsilon(sample_rate: f64, steps: f64, sum_inv_z2: f64, delta: f64) -> f64 {
    16.0 * sample_rate * (adp_paper_b_delta(steps, sample_rate, delta) * sum_inv_z2).sqrt()
}

/// What one flattened event contributes: (steps, Σ 1/z², min z, rate, non-private).
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    steps: f64,
    sum_inv_z2: f64,
    min_z: f64,
    rate: Option<f64>,
    non_private: bool,
}

/// The `adp-paper` accountant.
#[derive(Debug, Clone)]
pub struct AdpPaperAccountant {
    relation: NeighbouringRelation,
    tally: Tally,
}

impl AdpPaperAccountant {
    /// A new accountant. The paper's theory uses replace-one neighbours; the closed form is the
    /// same number under either relation, so both are accepted and the relation is only recorded.
    pub fn new(relation: NeighbouringRelation) -> Self {
        Self {
            relation,
            tally: Tally {
                min_z: f64::INFINITY,
                ..Tally::default()
            },
        }
    }

    fn unsupported(&self, event: &DpEvent, why: &str) -> AccountingError {
        AccountingError::Unsupported {
            accountant: AccountantKind::AdpPaper,
            event: format!("{} ({why})", describe(event)),
        }
    }

    fn add(&self, event: &DpEvent, mult: f64, tally: &mut Tally) -> Result<(), AccountingError> {
        let sampled = |q: f64, inner: &DpEvent, tally: &mut Tally| -> Result<(), AccountingError> {
            check_gaussians(inner)?;
            let z = match effective_gaussian_noise_multiplier(inner) {
                Ok(None) => return Ok(()),
                Ok(Some(z)) => z,
                Err(bad) => {
                    return Err(self
                        .unsupported(bad, "the paper's bound covers sampled Gaussian steps only"));
                }
            };
            if q == 0.0 || mult == 0.0 {
                return Ok(());
            }
            if let Some(r) = tally.rate
                && (r - q).abs() > 1e-12 * r
            {
                return Err(AccountingError::InvalidParameter {
                    name: "sample_rate",
                    value: q,
                    expected: "the same sample rate at every step (the paper's bound assumes one q)",
                });
            }
            tally.rate = Some(q);
            if z == 0.0 {
                tally.non_private = true;
                return Ok(());
            }
            tally.steps += mult;
            tally.sum_inv_z2 += mult / (z * z);
            tally.min_z = tally.min_z.min(z);
            Ok(())
        };
        match event {
            DpEvent::NoOp => Ok(()),
            DpEvent::NonPrivate => {
                tally.non_private = true;
                Ok(())
            }
            DpEvent::Gaussian { .. } | DpEvent::Laplace { .. } => Err(self.unsupported(
                event,
                "the paper's bound covers Gaussian steps on a sampled batch (q = m/n) only",
            )),
            DpEvent::PoissonSampled {
                sample_rate,
                event: inner,
            } => {
                if sample_rate.is_nan() || !(0.0..=1.0).contains(sample_rate) {
                    return Err(AccountingError::InvalidParameter {
                        name: "sample_rate",
                        value: *sample_rate,
                        expected: "a number in [0, 1]",
                    });
                }
                sampled(*sample_rate, inner, tally)
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
                sampled(*batch_size as f64 / *dataset_size as f64, inner, tally)
            }
            DpEvent::SelfComposed { event, count } => self.add(event, mult * *count as f64, tally),
            DpEvent::Composed(events) => events.iter().try_for_each(|e| self.add(e, mult, tally)),
        }
    }

    fn epsilon_value(&self, delta: f64) -> f64 {
        let t = &self.tally;
        if t.non_private {
            return f64::INFINITY;
        }
        match t.rate {
            Some(q) if t.steps > 0.0 => adp_paper_epsilon(q, t.steps, t.sum_inv_z2, delta),
            _ => 0.0,
        }
    }
}

impl Accountant for AdpPaperAccountant {
    fn kind(&self) -> AccountantKind {
        AccountantKind::AdpPaper
    }

    fn check(&self, event: &DpEvent) -> Result<(), AccountingError> {
        let mut tally = self.tally;
        self.add(event, 1.0, &mut tally)
    }

    fn compose(&mut self, event: &DpEvent, count: u64) -> Result<(), AccountingError> {
        let mut tally = self.tally;
        self.add(event, count as f64, &mut tally)?;
        self.tally = tally;
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
        let t = &self.tally;
        let mut upper_bound = true;
        let mut notes = vec![
            "the ADP-SGD paper's advanced-composition bound (Wu et al., Thm 4.1), for reproductions".to_string(),
        ];
        if let Some(q) = t.rate
            && t.steps > 0.0
        {
            if adp_paper_b_delta(t.steps, q, delta) <= 0.0 {
                return Err(AccountingError::InvalidParameter {
                    name: "delta",
                    value: delta,
                    expected: "a delta below 16·steps·sample_rate (the paper's B_delta must be positive)",
                });
            }
            let delta0 = delta / (12.5 * t.steps * q);
            let eps_step = 2.0 * (2.0 * (1.25 / delta0).ln()).sqrt() / t.min_z;
            if eps_step > 1.0 {
                upper_bound = false;
                notes.push(format!(
                        "the paper's condition epsilon_t <= 1 (Lemma A.1) fails (largest per-step epsilon_t = {eps_step:.3}): this is the paper's number, not a proven guarantee"
                    ));
            }
        }
        if self.relation == NeighbouringRelation::AddOrRemoveOne {
            notes.push("the paper's derivation assumes replace-one neighbours".into());
        }
        Ok(PrivacyReport {
            epsilon: self.epsilon_value(delta),
            delta,
            accountant: AccountantKind::AdpPaper,
            order: None,
            notes,
            upper_bound,
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
        if self.tally.non_private {
            return Ok(1.0);
        }
        if self.epsilon_value(0.5) == 0.0 {
            return Ok(0.0);
        }
        // ε(δ) decreases in δ: bisect ln δ, keep the end whose ε is within the target.
        let (mut lo, mut hi) = (-745.0f64, (0.999f64).ln());
        if self.epsilon_value(hi.exp()) > epsilon {
            return Ok(1.0);
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if self.epsilon_value(mid.exp()) > epsilon {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(hi.exp())
    }
}
