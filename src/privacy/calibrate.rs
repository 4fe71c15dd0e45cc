//! Calibration (room: `privacy::calibrate`): the noise multiplier, schedule scale or number of
//! steps that meets a target (ε, δ) under a given accountant. Owns only the search (after
//! dp_accounting's `mechanism_calibration.py` and Opacus's `get_noise_multiplier`); the privacy
//! maths stays in the accountants. Must not: build accountants itself (callers pass a factory, so
//! every accountant, including ones added later, calibrates the same way) or return an answer
//! whose ε exceeds the target.
//!
//! # Method
//! ε is non-increasing in a noise parameter (σ, a schedule scale κ with σ_t = κ·s_t, a Laplace
//! scale) and non-decreasing in the number of steps. Bracket by doubling, then bisect: for a noise
//! parameter until (hi − lo) ≤ 1e-6·hi (the issue asks for 1e-4 or better), returning `hi`, the
//! conservative end (ε(hi) ≤ target was computed, never assumed); for steps, the largest integer
//! with ε ≤ target. Each evaluation uses a fresh accountant from the factory. The noise search
//! interpolates the crossing before it bisects (safeguarded: see [`calibrate_decreasing`]), so a
//! tight accountant on a long schedule is evaluated about 8-10 times, not 20-25.

use crate::privacy::accountant::{Accountant, AccountingError, PrivacyReport};
use crate::privacy::event::DpEvent;

/// Largest noise parameter the search tries before declaring the target unreachable.
pub const MAX_NOISE_PARAMETER: f64 = 1e6;

/// Relative width of the final bracket for noise parameters.
pub const RELATIVE_TOLERANCE: f64 = 1e-6;

/// Largest number of steps the steps search tries.
pub const MAX_STEPS: u64 = 1 << 40;

/// The privacy budget to meet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    pub epsilon: f64,
    pub delta: f64,
}

/// What calibration could not do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrationError {
    /// The accountant refused an event or a parameter.
    #[error(transparent)]
    Accounting {
        #[from]
        source: AccountingError,
    },
    /// The target is not a valid (ε, δ).
    #[error("invalid target: {name} = {value}, expected {expected}")]
    InvalidTarget {
        name: &'static str,
        value: f64,
        expected: &'static str,
    },
    /// No parameter within the search range meets the target.
    #[error(
        "unreachable target: epsilon {epsilon} at delta {delta} would need {parameter} {limit_description}"
    )]
    Unreachable {
        parameter: &'static str,
        epsilon: f64,
        delta: f64,
        limit_description: String,
    },
}

/// The result of a calibration: the parameter and the report of the accountant at that value.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// The calibrated parameter (noise multiplier, scale, …); its ε never exceeds the target.
    pub value: f64,
    /// The accountant's report at `value`.
    pub report: PrivacyReport,
    /// How many accountant evaluations the search used.
    pub evaluations: usize,
}

/// The result of a steps calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct StepsCalibration {
    /// The largest number of steps whose ε is within the target.
    pub steps: u64,
    /// The accountant's report at `steps`.
    pub report: PrivacyReport,
    /// How many accountant evaluations the search used.
    pub evaluations: usize,
}

/// An accountant factory, as [`crate::privacy::accountant::new_accountant`] bound to its
/// arguments: `|| new_accountant(kind, &options)`.
pub trait AccountantFactory: Fn() -> Result<Box<dyn Accountant>, AccountingError> {}
impl<F: Fn() -> Result<Box<dyn Accountant>, AccountingError>> AccountantFactory for F {}

fn check_target(target: Target) -> Result<(), CalibrationError> {
    if !(target.epsilon.is_finite() && target.epsilon > 0.0) {
        return Err(CalibrationError::InvalidTarget {
            name: "epsilon",
            value: target.epsilon,
            expected: "a finite number > 0",
        });
    }
    if target.delta.is_nan() || !(0.0..1.0).contains(&target.delta) {
        return Err(CalibrationError::InvalidTarget {
            name: "delta",
            value: target.delta,
            expected: "a number in [0, 1)",
        });
    }
    Ok(())
}

/// ε of `event` under a fresh accountant.
pub fn epsilon_of(
    new_accountant: &impl AccountantFactory,
    event: &DpEvent,
    delta: f64,
) -> Result<PrivacyReport, AccountingError> {
    let mut accountant = new_accountant()?;
    accountant.compose(event, 1)?;
    accountant.epsilon(delta)
}

/// The smallest noise parameter p > 0 (to [`RELATIVE_TOLERANCE`], rounded up) such that the event
/// `event_for(p)` (the whole run) meets `target`. ε must be non-increasing in p.
///
/// `parameter` names p in errors ("noise_multiplier", "scale").
pub fn calibrate_decreasing(
    new_accountant: &impl AccountantFactory,
    event_for: &impl Fn(f64) -> DpEvent,
    target: Target,
    parameter: &'static str,
) -> Result<Calibration, CalibrationError> {
    check_target(target)?;
    let mut evaluations = 0usize;
    let mut eval = |p: f64| -> Result<PrivacyReport, CalibrationError> {
        evaluations += 1;
        Ok(epsilon_of(new_accountant, &event_for(p), target.delta)?)
    };
    let within = |r: &PrivacyReport| r.epsilon <= target.epsilon;

    // Bracket: `hi` meets the target, `lo` does not (or is tiny); ε at both ends is kept for the
    // interpolation below.
    let mut hi = 1.0f64;
    let mut hi_report = eval(hi)?;
    let mut lo;
    let mut lo_epsilon;
    if within(&hi_report) {
        lo = hi;
        loop {
            lo *= 0.5;
            if lo < 1e-9 {
                // Even a (practically) noiseless release meets the target.
                return Ok(Calibration {
                    value: hi,
                    report: hi_report,
                    evaluations,
                });
            }
            let r = eval(lo)?;
            if within(&r) {
                hi = lo;
                hi_report = r;
            } else {
                lo_epsilon = r.epsilon;
                break;
            }
        }
    } else {
        loop {
            lo = hi;
            lo_epsilon = hi_report.epsilon;
            hi *= 2.0;
            if hi > MAX_NOISE_PARAMETER {
                return Err(CalibrationError::Unreachable {
                    parameter,
                    epsilon: target.epsilon,
                    delta: target.delta,
                    limit_description: format!("> {MAX_NOISE_PARAMETER:e}"),
                });
            }
            let r = eval(hi)?;
            if within(&r) {
                hi_report = r;
                break;
            }
            hi_report = r;
        }
    }
    // Shrink the bracket, keeping ε(hi) ≤ target < ε(lo). Each round guesses the crossing g in
    // (ln p, ln ε), where ε of DP-SGD is close to a power of σ: by the secant through the last two
    // evaluations (after the first round these are a pair a quarter-tolerance either side of the
    // last guess, so the secant is a Newton step), else by interpolating the bracket. It then
    // evaluates just above g and just below it: when g is that accurate, those two close the
    // bracket. After two rounds in a row that did not halve the bracket comes a bisection, so the
    // search always ends (at worst about five evaluations per halving); in practice it takes 8-12
    // evaluations where bisection alone (dp_accounting's `mechanism_calibration`, Opacus) takes
    // about 22 at 1e-6.
    let mut history: Vec<(f64, f64)> = Vec::new();
    let mut stalled = 0;
    let crossing = |(p1, e1): (f64, f64), (p2, e2): (f64, f64)| -> Option<f64> {
        if p1 > 0.0 && p2 > 0.0 && e1 > 0.0 && e2 > 0.0 && e1.is_finite() && e2.is_finite() {
            // In ratios only, so that a problem scaled by powers of two (p ↦ 2^j p with ε and the
            // target ↦ 2^k ε) takes exactly the scaled steps, as bisection did (tests rely on it).
            let slope = (e2 / e1).ln() / (p2 / p1).ln();
            let g = p1 * ((target.epsilon / e1).ln() / slope).exp();
            (slope < 0.0 && g.is_finite()).then_some(g)
        } else {
            None
        }
    };
    while hi - lo > RELATIVE_TOLERANCE * hi {
        let width = hi - lo;
        let inside = |g: &f64| *g > lo && *g < hi;
        let guess = match history[..] {
            [.., a, b] => crossing(a, b).filter(inside),
            _ => None,
        }
        .or_else(|| crossing((lo, lo_epsilon), (hi, hi_report.epsilon)).filter(inside))
        .unwrap_or(0.5 * (lo + hi));
        let step = 0.25 * RELATIVE_TOLERANCE * hi;
        let mid = 0.5 * (lo + hi);
        // The bisection only after two rounds in a row that did not halve the bracket (a
        // converging Newton step shrinks it from one side only, and needs no help).
        let bisect = stalled >= 2;
        for (k, p) in [guess + step, guess - step, mid].into_iter().enumerate() {
            let done = hi - lo <= RELATIVE_TOLERANCE * hi;
            if done || !(p > lo && p < hi) || (k == 2 && !bisect) {
                continue;
            }
            let r = eval(p)?;
            history.push((p, r.epsilon));
            if within(&r) {
                hi = p;
                hi_report = r;
            } else {
                lo = p;
                lo_epsilon = r.epsilon;
            }
        }
        stalled = if bisect || hi - lo <= 0.5 * width {
            0
        } else {
            stalled + 1
        };
    }
    Ok(Calibration {
        value: hi,
        report: hi_report,
        evaluations,
    })
}

/// The noise multiplier σ for which `event_for(σ)` (the whole run at constant σ, e.g.
/// `PoissonSampled(q, Gaussian(σ))` self-composed T times) meets `target`.
pub fn calibrate_noise_multiplier(
    new_accountant: &impl AccountantFactory,
    event_for: &impl Fn(f64) -> DpEvent,
    target: Target,
) -> Result<Calibration, CalibrationError> {
    calibrate_decreasing(new_accountant, event_for, target, "noise_multiplier")
}

/// The scale κ of a schedule shape: `event_for(κ)` builds the whole run with σ_t = κ·s_t (and any
/// extra releases per step, e.g. a noisy histogram whose noise also scales with κ).
pub fn calibrate_scale(
    new_accountant: &impl AccountantFactory,
    event_for: &impl Fn(f64) -> DpEvent,
    target: Target,
) -> Result<Calibration, CalibrationError> {
    calibrate_decreasing(new_accountant, event_for, target, "scale")
}

/// The largest number of steps T ≥ 1 for which `event_for(T)` meets `target`. ε must be
/// non-decreasing in T.
pub fn calibrate_steps(
    new_accountant: &impl AccountantFactory,
    event_for: &impl Fn(u64) -> DpEvent,
    target: Target,
) -> Result<StepsCalibration, CalibrationError> {
    check_target(target)?;
    let mut evaluations = 0usize;
    let mut eval = |t: u64| -> Result<PrivacyReport, CalibrationError> {
        evaluations += 1;
        Ok(epsilon_of(new_accountant, &event_for(t), target.delta)?)
    };
    let first = eval(1)?;
    if first.epsilon > target.epsilon {
        return Err(CalibrationError::Unreachable {
            parameter: "steps",
            epsilon: target.epsilon,
            delta: target.delta,
            limit_description: format!("< 1 (one step already spends epsilon {})", first.epsilon),
        });
    }
    let (mut lo, mut lo_report) = (1u64, first);
    let mut hi = 2u64;
    loop {
        if hi > MAX_STEPS {
            return Err(CalibrationError::Unreachable {
                parameter: "steps",
                epsilon: target.epsilon,
                delta: target.delta,
                limit_description: format!("> {MAX_STEPS} (the target is never reached)"),
            });
        }
        let r = eval(hi)?;
        if r.epsilon > target.epsilon {
            break;
        }
        lo = hi;
        lo_report = r;
        hi *= 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let r = eval(mid)?;
        if r.epsilon <= target.epsilon {
            lo = mid;
            lo_report = r;
        } else {
            hi = mid;
        }
    }
    Ok(StepsCalibration {
        steps: lo,
        report: lo_report,
        evaluations,
    })
}

/// The DP-SGD run at constant noise: `steps` Poisson-sampled Gaussian steps (a full-batch
/// Gaussian when `sample_rate` is 1).
pub fn dp_sgd_event(sample_rate: f64, noise_multiplier: f64, steps: u64) -> DpEvent {
    let step = if sample_rate == 1.0 {
        DpEvent::gaussian(noise_multiplier)
    } else {
        DpEvent::poisson_sampled(sample_rate, DpEvent::gaussian(noise_multiplier))
    };
    step.self_composed(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::accountant::{AccountantKind, AccountantOptions, new_accountant};

    fn rdp() -> impl AccountantFactory {
        || new_accountant(AccountantKind::Rdp, &AccountantOptions::default())
    }

    #[test]
    fn unreachable_target_is_a_clear_error() {
        // With every record in every batch and 1e9 steps at epsilon 1e-9, sigma would exceed 1e6.
        let err = calibrate_noise_multiplier(
            &rdp(),
            &|s| dp_sgd_event(1.0, s, 1_000_000_000),
            Target {
                epsilon: 1e-9,
                delta: 1e-10,
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("noise_multiplier > 1e6"), "{err}");
    }

    #[test]
    fn steps_calibration_is_the_largest_within_target() {
        let target = Target {
            epsilon: 2.0,
            delta: 1e-6,
        };
        let event = |t: u64| dp_sgd_event(0.1, 3.0, t);
        let found = calibrate_steps(&rdp(), &event, target).unwrap();
        assert!(found.report.epsilon <= 2.0);
        let next = epsilon_of(&rdp(), &event(found.steps + 1), 1e-6).unwrap();
        assert!(next.epsilon > 2.0);
    }

    #[test]
    fn the_noise_search_is_tight_and_needs_few_evaluations() {
        for (q, steps, epsilon) in [(0.004, 10_000u64, 3.0), (0.1, 50, 0.5), (1.0, 3, 8.0)] {
            let target = Target {
                epsilon,
                delta: 1e-5,
            };
            let event = |s: f64| dp_sgd_event(q, s, steps);
            let found = calibrate_noise_multiplier(&rdp(), &event, target).unwrap();
            assert!(found.report.epsilon <= epsilon);
            // the answer is within the tolerance of the crossing: a little less noise fails
            let below = found.value * (1.0 - 2.0 * RELATIVE_TOLERANCE);
            let e = epsilon_of(&rdp(), &event(below), 1e-5).unwrap().epsilon;
            assert!(e > epsilon, "{q} {steps}: {} is not tight", found.value);
            // bisection alone needs about 20 evaluations after the bracket
            assert!(
                found.evaluations <= 14,
                "{q} {steps}: {} evaluations",
                found.evaluations
            );
        }
    }

    #[test]
    fn invalid_target_rejected() {
        let err = calibrate_noise_multiplier(
            &rdp(),
            &|s| dp_sgd_event(0.01, s, 10),
            Target {
                epsilon: f64::NAN,
                delta: 1e-5,
            },
        )
        .unwrap_err();
        assert!(matches!(
            err,
            CalibrationError::InvalidTarget {
                name: "epsilon",
                ..
            }
        ));
    }
}
