//! What `dpx account` prints (room: `cli::account`): the human table and the JSON of each
//! accountant's answer, and why the others did not apply.

use serde_json::{Value, json};

use super::*;
use crate::privacy::accountant::{AccountantKind, AccountantOptions};

pub(super) fn describe_accountant(kind: AccountantKind, options: &AccountantOptions) -> String {
    match kind {
        AccountantKind::Rdp => {
            let conversion = match options.rdp_conversion {
                RdpConversion::Improved => "Rényi DP, Balle et al. 2020 conversion",
                RdpConversion::Classic => "Rényi DP, classic conversion (Mironov 2017)",
            };
            match options.rdp_sigma_grid {
                Some(step) => format!(
                    "{conversion}, sigma rounded down to a {step} relative grid (conservative)"
                ),
                None => conversion.into(),
            }
        }
        AccountantKind::Pld => "privacy-loss distribution, pessimistic upper bound".into(),
        AccountantKind::Zcdp => match options.zcdp_conversion {
            ZcdpConversion::Tight => {
                "zero-concentrated DP, Canonne-Kamath-Steinke conversion".into()
            }
            ZcdpConversion::Standard => "zero-concentrated DP, standard conversion".into(),
        },
        AccountantKind::Gdp => "Gaussian DP".into(),
        AccountantKind::Pure => "pure epsilon-DP, basic composition".into(),
        AccountantKind::AdpPaper => "the ADP-SGD paper's own bound".into(),
        AccountantKind::ZcdpPaper => "the dynamic-noise paper's own zCDP bound".into(),
    }
}

pub(super) fn fmt_num(x: f64) -> String {
    if x.is_infinite() {
        "inf".into()
    } else {
        format!("{}", (x * 1e6).round() / 1e6)
            .trim_end_matches('.')
            .to_string()
    }
}

/// The noise value(s) of an answer, for printing: σ or scale, and the schedule range.
pub(super) fn noise_fields(
    plan: &Plan,
    answer: &Answer,
) -> (Option<f64>, Option<f64>, Option<(f64, f64)>) {
    match (&plan.noise, plan.mechanism) {
        (Noise::Schedule(shape), _) => {
            let min = shape.iter().copied().fold(f64::INFINITY, f64::min) * answer.parameter;
            let max = shape.iter().copied().fold(0.0, f64::max) * answer.parameter;
            (None, Some(answer.parameter), Some((min, max)))
        }
        (_, Mechanism::Laplace) => (None, Some(answer.parameter), None),
        (_, Mechanism::Gaussian) => (Some(answer.parameter), None, None),
    }
}

pub(super) fn answer_json(kind: AccountantKind, plan: &Plan, answer: &Answer) -> Value {
    let (noise_multiplier, scale, range) = noise_fields(plan, answer);
    let finite = |x: f64| {
        if x.is_finite() {
            json!(x)
        } else {
            json!("inf")
        }
    };
    json!({
        "accountant": kind.name(),
        "epsilon": finite(answer.report.epsilon),
        "delta": answer.report.delta,
        "noise_multiplier": noise_multiplier,
        "scale": scale,
        "noise_multiplier_min": range.map(|r| r.0),
        "noise_multiplier_max": range.map(|r| r.1),
        "order": answer.report.order,
        "sample_rate": plan.sample_rate,
        "steps": plan.steps,
        "target_epsilon": plan.target_epsilon,
        "mechanism": match plan.mechanism { Mechanism::Gaussian => "gaussian", Mechanism::Laplace => "laplace" },
        "sampling": plan.sampling_name(),
        "dataset_size": plan.dataset_size,
        "batch_size": plan.batch_size,
        "tuning_runs": plan.tuning_runs,
        "tuning_charge": match plan.tuning_charge { TuningCharge::Composition => "composition", TuningCharge::RandomStopping => "random-stopping" },
        "notes": answer.report.notes,
    })
}

pub(super) fn noise_text(plan: &Plan, answer: &Answer) -> String {
    let (sigma, scale, range) = noise_fields(plan, answer);
    match (sigma, scale, range) {
        (Some(s), _, _) => format!("noise_multiplier: {}", fmt_sig(s)),
        (None, Some(k), Some((lo, hi))) => {
            format!(
                "scale: {} (noise_multiplier from {} to {})",
                fmt_sig(k),
                fmt_sig(lo),
                fmt_sig(hi)
            )
        }
        (None, Some(b), None) => format!("scale: {}", fmt_sig(b)),
        _ => String::new(),
    }
}

/// A noise value for printing: at most 6 significant digits (calibrated values are already rounded
/// up to 6 digits; given values print as given).
pub(super) fn fmt_sig(x: f64) -> String {
    let e = if x > 0.0 { x.log10().floor() as i32 } else { 0 };
    let scale = 10f64.powi(5 - e);
    let r = (x * scale).round() / scale;
    if r == x || (r - x).abs() <= 1e-12 * x {
        format!("{r}")
    } else {
        format!("{x}")
    }
}

pub(super) fn failure_text(f: &Failure) -> &str {
    match f {
        Failure::NotApplicable(s) | Failure::Unreachable(s) | Failure::Other(s) => s,
    }
}

pub(super) fn print_human(
    args: &AccountArgs,
    plan: &Plan,
    options: &AccountantOptions,
    answers: &[(AccountantKind, Answer)],
    skipped: &[(AccountantKind, Failure)],
) {
    let mechanism = match plan.mechanism {
        Mechanism::Gaussian => "gaussian",
        Mechanism::Laplace => "laplace",
    };
    println!(
        "plan: {mechanism} steps, sample_rate {} ({}), steps {} ({})",
        plan.sample_rate,
        plan.sampling_name(),
        plan.steps,
        plan.steps_from
    );
    if let Some(e) = plan.target_epsilon {
        match plan.delta {
            Some(d) => println!("target: epsilon {e} at delta {d:e}"),
            None => println!("target: epsilon {e}"),
        }
    }
    if plan.random_stopping().is_some() {
        println!(
            "tuning: a grid of {} configurations searched by random stopping (Liu & Talwar 2019, as DC-SGD's Table II); the noise is per run and epsilon, delta are the tuner's, for releasing the best run",
            plan.tuning_runs
        );
    } else if plan.tuning_runs > 1 {
        println!(
            "tuning: {} runs of this plan compose (grid search charged by composition); the noise is per run and epsilon is for all {} together, so releasing the best run stays within it",
            plan.tuning_runs, plan.tuning_runs
        );
    }
    if !args.all {
        let (kind, answer) = &answers[0];
        println!(
            "accountant: {kind} ({})",
            describe_accountant(*kind, options)
        );
        println!("{}", noise_text(plan, answer));
        let order = answer
            .report
            .order
            .map(|a| format!(" (optimal order {a})"))
            .unwrap_or_default();
        let delta = answer.report.delta;
        let delta = if delta == 0.0 {
            "0".to_string()
        } else {
            format!("{delta:e}")
        };
        println!(
            "epsilon: {} at delta {delta}{order}",
            fmt_num(answer.report.epsilon)
        );
        for note in &answer.report.notes {
            println!("note: {note}");
        }
        return;
    }
    println!(
        "{:<11} {:>12} {:>18} {:>7}  notes",
        "accountant",
        "epsilon",
        plan.parameter_name(),
        "order"
    );
    for (kind, answer) in answers {
        let (sigma, scale, _) = noise_fields(plan, answer);
        let value = sigma.or(scale).map(fmt_sig).unwrap_or_default();
        let order = answer
            .report
            .order
            .map(|a| a.to_string())
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<11} {:>12} {:>18} {:>7}  {}",
            kind.name(),
            fmt_num(answer.report.epsilon),
            value,
            order,
            answer.report.notes.join("; ")
        );
    }
    for (kind, failure) in skipped {
        println!(
            "{:<11} not applicable: {}",
            kind.name(),
            failure_text(failure)
        );
    }
}
