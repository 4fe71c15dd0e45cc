//! `dpx account` (room: `cli::account`): the noise multiplier for a target (ε, δ), or ε for a
//! plan, under any accountant (or `--all` side by side). Owns flag validation, schedule-file
//! loading and printing only; the maths is `privacy::accountant` and `privacy::calibrate`. Must
//! not: compute privacy itself, or accept a flag value it cannot account for (NaN, σ ≤ 0, q outside
//! (0, 1], δ outside (0, 1), ε ≤ 0, zero steps): those are one-line bad-input errors (exit 2)
//! naming the flag.
//!
//! Files: `args.rs` (flags), `plan.rs` (flags → validated plan and its events), `output.rs`
//! (table and JSON); this file answers the plan under each accountant.

mod args;
mod output;
mod plan;

pub use args::{AccountArgs, AccountSettings, Mechanism, Relation, Sampling, TuningCharge};
use output::*;
use plan::*;

use std::process::ExitCode;

use anyhow::Context;
use serde_json::json;

use crate::bad_input;
use crate::privacy::accountant::{
    ALL_KINDS, AccountantKind, AccountantOptions, AccountingError, PrivacyReport, RdpConversion,
    ZcdpConversion, new_accountant,
};
use crate::privacy::calibrate::{CalibrationError, Target, calibrate_decreasing, epsilon_of};
use crate::privacy::event::NeighbouringRelation;
use crate::privacy::selection::RandomStopping;

/// One accountant's answer.
#[derive(Debug, Clone)]
struct Answer {
    /// The noise parameter used (given, or calibrated).
    parameter: f64,
    report: PrivacyReport,
}

/// Why one accountant gave no answer.
#[derive(Debug)]
enum Failure {
    /// The accountant cannot analyse this plan.
    NotApplicable(String),
    /// The target cannot be met.
    Unreachable(String),
    /// Anything else (a bug or a numerical failure).
    Other(String),
}

/// Round a calibrated value up to 6 significant digits, so the printed value is never below it
/// (ε is non-increasing in the noise, so the printed value still meets the target).
fn round_up_6(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return x;
    }
    let e = x.log10().floor() as i32;
    let scale = 10f64.powi(5 - e);
    let mut r = (x * scale).ceil() / scale;
    while r < x {
        r += 1.0 / scale;
    }
    r
}

fn evaluate(
    kind: AccountantKind,
    plan: &Plan,
    options: &AccountantOptions,
) -> Result<Answer, Failure> {
    let delta = match (plan.delta, kind) {
        (Some(d), _) => d,
        (None, AccountantKind::Pure) => 0.0,
        (None, _) => {
            return Err(Failure::NotApplicable(format!(
                "the {kind} accountant needs --delta"
            )));
        }
    };
    if let Some(lt) = plan.random_stopping() {
        return evaluate_random_stopping(kind, plan, options, &lt, delta);
    }
    let factory = || new_accountant(kind, options);
    let accounting = |e: AccountingError| match e {
        AccountingError::Unsupported { .. } => Failure::NotApplicable(e.to_string()),
        AccountingError::InvalidParameter { .. } => Failure::NotApplicable(e.to_string()),
        AccountingError::Numerical(_) => Failure::Other(e.to_string()),
    };
    match (plan.target_epsilon, &plan.noise) {
        (Some(epsilon), _) => {
            let event_for = |p: f64| plan.run_event(p);
            let found = calibrate_decreasing(
                &factory,
                &event_for,
                Target { epsilon, delta },
                plan.parameter_name(),
            )
            .map_err(|e| match e {
                CalibrationError::Accounting { source } => accounting(source),
                CalibrationError::Unreachable { .. } => Failure::Unreachable(e.to_string()),
                CalibrationError::InvalidTarget { .. } => Failure::Other(e.to_string()),
            })?;
            // Print (and report) at the value rounded up to 6 digits: still within the target.
            let parameter = round_up_6(found.value);
            let report =
                epsilon_of(&factory, &plan.run_event(parameter), delta).map_err(accounting)?;
            Ok(Answer { parameter, report })
        }
        (None, Noise::Constant(Some(p))) => {
            let report = epsilon_of(&factory, &plan.run_event(*p), delta).map_err(accounting)?;
            Ok(Answer {
                parameter: *p,
                report,
            })
        }
        (None, Noise::Schedule(_)) => {
            let report = epsilon_of(&factory, &plan.run_event(1.0), delta).map_err(accounting)?;
            Ok(Answer {
                parameter: 1.0,
                report,
            })
        }
        (None, Noise::Constant(None)) => {
            Err(Failure::Other("no noise parameter and no target".into()))
        }
    }
}

/// `--tuning-charge random-stopping`: one run calibrated to (or accounted at) the per-run
/// (ε₁, δ₁) of Liu–Talwar's theorem, reported as the tuner's total (ε', δ').
fn evaluate_random_stopping(
    kind: AccountantKind,
    plan: &Plan,
    options: &AccountantOptions,
    lt: &RandomStopping,
    delta: f64,
) -> Result<Answer, Failure> {
    let unreachable =
        |e: crate::privacy::selection::SelectionError| Failure::Unreachable(e.to_string());
    let (target_epsilon, delta1) = match plan.target_epsilon {
        Some(epsilon) => {
            let (epsilon1, delta1) = lt.per_run_target(epsilon, delta).map_err(unreachable)?;
            (Some(epsilon1), delta1)
        }
        None => (None, lt.per_run_delta(delta).map_err(unreachable)?),
    };
    let per_run = Plan {
        tuning_runs: 1,
        target_epsilon,
        delta: Some(delta1),
        ..plan.clone()
    };
    let answer = evaluate(kind, &per_run, options)?;
    let (epsilon1, delta1) = (answer.report.epsilon, answer.report.delta);
    let (epsilon_total, delta_total) = lt.total(epsilon1, delta1);
    let mut report = answer.report;
    report.notes.insert(
        0,
        format!(
            "random stopping over {} configurations (Liu & Talwar 2019; gamma = {}, delta2 = {:e}, at most {:.0} runs): each run is ({}, {:e})-DP",
            plan.tuning_runs,
            lt.gamma,
            lt.delta2,
            lt.max_runs().floor(),
            fmt_num(epsilon1),
            delta1
        ),
    );
    report.epsilon = epsilon_total;
    report.delta = delta_total;
    Ok(Answer {
        parameter: answer.parameter,
        report,
    })
}

/// Turn transparent huge pages off for this process (Linux). The allocator asks the kernel
/// for 2 MiB pages (`MADV_HUGEPAGE`), and when other processes have churned memory each such
/// fault can stall in compaction: a PLD composition touches about 100 MB once, and right after
/// another process had allocated and freed 1.5 GB its system time was 0.12–0.22 s in most runs
/// with huge pages against 0.02–0.04 s without (user time unchanged; docs/accounting.md, "Speed").
/// Accounting reads no large array repeatedly, so it gains nothing from them.
fn small_pages_only() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and only sets a flag of this
    // process's memory map; failure (an old kernel) leaves huge pages on, which is harmless.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Run `dpx account`.
pub fn run(args: AccountArgs) -> anyhow::Result<ExitCode> {
    if let Some(config) = &args.config {
        return crate::cli::plan::run(config, args.data_dir.as_deref(), args.json);
    }
    let plan = validate(&args)?;
    small_pages_only();
    let relation = match args.settings.relation {
        Relation::AddOrRemoveOne => NeighbouringRelation::AddOrRemoveOne,
        Relation::ReplaceOne => NeighbouringRelation::ReplaceOne,
    };
    if plan.sampling == Sampling::WithoutReplacement
        && plan.sample_rate < 1.0
        && relation != NeighbouringRelation::ReplaceOne
    {
        return Err(bad_input!(
            "--sampling without-replacement is analysed under --relation replace-one only"
        ));
    }
    let options = AccountantOptions {
        relation,
        rdp_orders: args.settings.orders.clone().unwrap_or_else(|| {
            // Random stopping asks for δ₁ ≈ 1e-17 per run: the best order is then between
            // the default grid's 63 and 128.
            if plan.random_stopping().is_some() {
                crate::privacy::accountant::rdp::dense_orders()
            } else {
                crate::privacy::accountant::rdp::default_orders()
            }
        }),
        rdp_conversion: args.settings.rdp_conversion,
        pld_value_discretization_interval: args.settings.pld_interval,
        zcdp_conversion: args.settings.zcdp_conversion,
        rdp_sigma_grid: args.settings.rdp_sigma_grid,
        pld_sigma_grid: (args.settings.pld_sigma_grid != 0.0)
            .then_some(args.settings.pld_sigma_grid),
    };
    if let Some(step) = args.settings.rdp_sigma_grid
        && !(1e-9..=0.1).contains(&step)
    {
        return Err(bad_input!(
            "--rdp-sigma-grid {step}: must be a relative step between 1e-9 and 0.1"
        ));
    }
    let pld_step = args.settings.pld_sigma_grid;
    if pld_step != 0.0 && !(1e-9..=0.1).contains(&pld_step) {
        return Err(bad_input!(
            "--pld-sigma-grid {pld_step}: must be 0 (exact) or a relative step between 1e-9 and 0.1"
        ));
    }
    if plan.delta.is_none() && (args.all || args.accountant != AccountantKind::Pure) {
        return Err(bad_input!(
            "--delta is required (every accountant but pure needs it)"
        ));
    }

    let kinds: Vec<AccountantKind> = if args.all {
        ALL_KINDS.to_vec()
    } else {
        vec![args.accountant]
    };
    let mut answers = Vec::new();
    let mut skipped = Vec::new();
    for kind in kinds {
        match evaluate(kind, &plan, &options) {
            Ok(a) => answers.push((kind, a)),
            Err(failure) if args.all => skipped.push((kind, failure)),
            Err(Failure::NotApplicable(why)) => {
                return Err(bad_input!("--accountant {kind}: {why}"));
            }
            Err(Failure::Unreachable(why)) => return Err(bad_input!("--epsilon: {why}")),
            Err(Failure::Other(why)) => anyhow::bail!("the {kind} accountant failed: {why}"),
        }
    }
    if answers.is_empty() {
        let reasons: Vec<String> = skipped
            .iter()
            .map(|(k, f)| format!("{k}: {}", failure_text(f)))
            .collect();
        return Err(bad_input!(
            "no accountant applies to this plan ({})",
            reasons.join("; ")
        ));
    }

    if args.json {
        let value = if args.all {
            json!({
                "results": answers.iter().map(|(k, a)| answer_json(*k, &plan, a)).collect::<Vec<_>>(),
                "not_applicable": skipped.iter().map(|(k, f)| json!({"accountant": k.name(), "reason": failure_text(f)})).collect::<Vec<_>>(),
            })
        } else {
            let (k, a) = &answers[0];
            answer_json(*k, &plan, a)
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&value).context("writing JSON")?
        );
        return Ok(ExitCode::SUCCESS);
    }

    print_human(&args, &plan, &options, &answers, &skipped);
    Ok(ExitCode::SUCCESS)
}
