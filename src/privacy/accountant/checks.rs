//! Checks and descriptions of events shared by the accountants (room: `privacy::accountant`):
//! parameter ranges, the one-line description of an event in errors, and the effective noise
//! multiplier of Gaussians composed on one batch, and the geometric σ grid of the conservative
//! approximations.

use crate::privacy::accountant::AccountingError;
use crate::privacy::event::DpEvent;

pub(crate) fn check_rate(q: f64) -> Result<(), AccountingError> {
    if q.is_nan() || !(0.0..=1.0).contains(&q) {
        return Err(AccountingError::InvalidParameter {
            name: "sample_rate",
            value: q,
            expected: "a number in [0, 1]",
        });
    }
    Ok(())
}

pub(crate) fn check_noise_multiplier(sigma: f64) -> Result<(), AccountingError> {
    if sigma.is_nan() || sigma < 0.0 {
        return Err(AccountingError::InvalidParameter {
            name: "noise_multiplier",
            value: sigma,
            expected: "a number >= 0",
        });
    }
    Ok(())
}

pub(crate) fn check_scale(scale: f64) -> Result<(), AccountingError> {
    if scale.is_nan() || scale < 0.0 {
        return Err(AccountingError::InvalidParameter {
            name: "scale",
            value: scale,
            expected: "a number >= 0",
        });
    }
    Ok(())
}

/// A short name of an event, for error messages.
pub(crate) fn describe(event: &DpEvent) -> String {
    match event {
        DpEvent::NoOp => "NoOp".into(),
        DpEvent::NonPrivate => "NonPrivate".into(),
        DpEvent::Gaussian { noise_multiplier } => {
            format!("Gaussian(noise_multiplier={noise_multiplier})")
        }
        DpEvent::Laplace { scale } => format!("Laplace(scale={scale})"),
        DpEvent::PoissonSampled { sample_rate, event } => {
            format!(
                "PoissonSampled(sample_rate={sample_rate}, {})",
                describe(event)
            )
        }
        DpEvent::SampledWithoutReplacement {
            dataset_size,
            batch_size,
            event,
        } => format!(
            "SampledWithoutReplacement(dataset_size={dataset_size}, batch_size={batch_size}, {})",
            describe(event)
        ),
        DpEvent::RandomAllocation { steps, event } => {
            format!("RandomAllocation(steps={steps}, {})", describe(event))
        }
        DpEvent::SelfComposed { event, count } => {
            format!("SelfComposed({}, count={count})", describe(event))
        }
        DpEvent::Composed(events) => format!("Composed({} events)", events.len()),
    }
}

/// The effective noise multiplier of a nested structure of Gaussians released on the same batch:
/// (Σ σ_i^{−2})^{−1/2} (Mironov, Talwar, Zhang 2019, §3; dp_accounting
/// `_effective_gaussian_noise_multiplier`). `Ok(None)` when `event` contains no release;
/// `Err(sub_event)` names the first sub-event that is not Gaussian.
pub(crate) fn effective_gaussian_noise_multiplier(
    event: &DpEvent,
) -> Result<Option<f64>, &DpEvent> {
    fn inverse_square_sum(event: &DpEvent) -> Result<f64, &DpEvent> {
        match event {
            DpEvent::NoOp => Ok(0.0),
            DpEvent::Gaussian { noise_multiplier } => Ok(if *noise_multiplier == 0.0 {
                f64::INFINITY
            } else {
                noise_multiplier.powi(-2)
            }),
            DpEvent::SelfComposed { event, count } => {
                Ok(inverse_square_sum(event)? * *count as f64)
            }
            DpEvent::Composed(events) => {
                let mut sum = 0.0;
                for e in events {
                    sum += inverse_square_sum(e)?;
                }
                Ok(sum)
            }
            DpEvent::NonPrivate
            | DpEvent::Laplace { .. }
            | DpEvent::PoissonSampled { .. }
            | DpEvent::SampledWithoutReplacement { .. }
            | DpEvent::RandomAllocation { .. } => Err(event),
        }
    }
    let s = inverse_square_sum(event)?;
    Ok(if s == 0.0 {
        None
    } else if s.is_infinite() {
        Some(0.0)
    } else {
        Some(s.powf(-0.5))
    })
}

/// Validate every Gaussian noise multiplier inside `event`.
pub(crate) fn check_gaussians(event: &DpEvent) -> Result<(), AccountingError> {
    match event {
        DpEvent::Gaussian { noise_multiplier } => check_noise_multiplier(*noise_multiplier),
        DpEvent::SelfComposed { event, .. } => check_gaussians(event),
        DpEvent::Composed(events) => events.iter().try_for_each(check_gaussians),
        DpEvent::PoissonSampled { event, .. }
        | DpEvent::SampledWithoutReplacement { event, .. }
        | DpEvent::RandomAllocation { event, .. } => check_gaussians(event),
        DpEvent::Laplace { scale } => check_scale(*scale),
        DpEvent::NoOp | DpEvent::NonPrivate => Ok(()),
    }
}

/// The largest grid point `(1 + step)^k ≤ sigma` (`ln_step = ln(1 + step)`), for σ > 0 finite:
/// the conservative σ grids of the RDP and PLD accountants (a smaller σ never lowers ε).
pub(crate) fn round_down_to_grid(sigma: f64, ln_step: f64) -> f64 {
    if !(sigma.is_finite() && sigma > 0.0) {
        return sigma;
    }
    let mut k = (sigma.ln() / ln_step).floor();
    // exp/ln rounding may land one point off either way: settle on the largest k with
    // exp(k·ln_step) ≤ σ (so a grid point maps to itself).
    while (k * ln_step).exp() > sigma {
        k -= 1.0;
    }
    while ((k + 1.0) * ln_step).exp() <= sigma {
        k += 1.0;
    }
    (k * ln_step).exp()
}

/// ln(1 + `relative_step`) of a conservative σ grid, after checking the step lies in
/// [1e-9, 0.1] (`name` is the setting named in the error).
pub(crate) fn sigma_grid_ln_step(
    name: &'static str,
    relative_step: f64,
) -> Result<f64, AccountingError> {
    if (1e-9..=0.1).contains(&relative_step) {
        Ok(relative_step.ln_1p())
    } else {
        Err(AccountingError::InvalidParameter {
            name,
            value: relative_step,
            expected: "a relative grid step in [1e-9, 0.1]",
        })
    }
}
