//! `dpx account --config FILE`: what a planned run will spend, from the plan alone.
//!
//! Builds the model and the plan exactly as `dpx run` does (the examples chosen, model, plan,
//! calibration) but prepares only a few rows of data ([`crate::train::prepare::Experiment::plan_only`]:
//! no scattering features are computed or loaded) and trains nothing; prints the noise multiplier (the schedule's scale and first, last, min and max σ_t),
//! the steps and ε at the end of every epoch. The events
//! are the plan's ([`crate::train::plan::TrainingPlan::planned_ledger`]), which a test checks
//! equal the events a real run records.

use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

use super::run::plan_experiment;
use crate::privacy::schedule::ScheduleSummary;
use crate::train::plan::TrainingPlan;

/// ε after the first `step` steps of the plan, from scratch: the same computation as the ε a
/// run writes on its rows, so the two agree to the last bit.
fn epsilon_at(plan: &TrainingPlan, step: u64) -> anyhow::Result<Option<f64>> {
    match plan.epsilon_of(&plan.planned_ledger(step)) {
        None => Ok(None),
        Some(r) => Ok(Some(r?.epsilon)),
    }
}

#[derive(Serialize)]
struct EpochRow {
    epoch: u64,
    step: u64,
    epsilon: Option<f64>,
}

#[derive(Serialize)]
struct PlanReport<'a> {
    config: String,
    accountant: Option<&'a str>,
    noise_multiplier: Option<f64>,
    /// `noise.schedule` and σ_t over the steps the run takes.
    noise_schedule: Option<&'a str>,
    noise_multiplier_summary: Option<ScheduleSummary>,
    calibrated: bool,
    target_epsilon: Option<f64>,
    epsilon: Option<f64>,
    delta: Option<f64>,
    clip_norm: Option<f64>,
    /// `clip.policy` and its parameters.
    clip_policy: &'a crate::privacy::clip::ClipPolicy,
    /// The statistic the policy releases beside the gradient, its noise multiplier, and the
    /// gradient's share of the first step's σ (σ^−2 = σ_grad^−2 + σ_stat^−2).
    clip_statistic: Option<&'static str>,
    statistic_noise_multiplier: Option<f64>,
    gradient_noise_multiplier: Option<f64>,
    sample_rate: f64,
    expected_batch_size: f64,
    dataset_size: usize,
    steps: u64,
    planned_steps: u64,
    epsilon_guaranteed: bool,
    warnings: &'a [String],
    epochs: Vec<EpochRow>,
    /// `noise.mechanism = "bandmf"`: the strategy and its rounds (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    bandmf: Option<BandMfReport>,
}

/// The banded strategy of a BandMF plan (`train::plan::BandMfPlan`).
#[derive(Serialize)]
struct BandMfReport {
    bands: u64,
    /// `prefix_sum` or `momentum`.
    workload: &'static str,
    momentum: Option<f64>,
    /// b·q: the Poisson rate inside an example's group (null with fixed-order batches).
    group_sample_rate: Option<f64>,
    /// ⌈T / b⌉: the subsampled-Gaussian events the run is accounted as.
    rounds: u64,
    /// Expected squared workload error relative to DP-SGD's at the same noise multiplier.
    error_ratio: f64,
    /// c_0, …, c_{b−1} of the b-banded Toeplitz strategy (Σ c_j² = 1).
    coefficients: Vec<f64>,
}

/// Run `dpx account --config`.
pub fn run(config: &Path, data_dir: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let exp = match plan_experiment(config, data_dir)? {
        Ok(planned) => planned,
        Err(full) => match &full.accelerated {
            Some(acc) => return super::plan_accelerated::run(config, &full, acc, json),
            None => unreachable!("only [accelerated] configs are built in full"),
        },
    };
    let plan = &exp.plan;
    let privacy = plan.privacy.as_ref();
    let mut epochs = Vec::new();
    for (k, step) in plan.epoch_ends().into_iter().enumerate() {
        epochs.push(EpochRow {
            epoch: k as u64 + 1,
            step,
            epsilon: epsilon_at(plan, step)?,
        });
    }
    let no_warnings = Vec::new();
    let first_sigma = plan.noise_multiplier_at(0);
    let statistic = plan.clip.statistic();
    let report = PlanReport {
        config: config.display().to_string(),
        accountant: privacy.map(|p| p.accountant.name()),
        noise_multiplier: privacy.map(|p| p.noise_multiplier),
        noise_schedule: privacy.map(|p| p.schedule.name()),
        noise_multiplier_summary: plan.schedule_summary(),
        calibrated: privacy.is_some_and(|p| p.calibrated),
        target_epsilon: privacy.and_then(|p| p.target_epsilon),
        epsilon: epochs.last().and_then(|e| e.epsilon),
        delta: privacy.map(|p| p.delta),
        clip_norm: plan.clip_norm,
        clip_policy: &plan.clip,
        clip_statistic: statistic.map(|(name, _)| name),
        statistic_noise_multiplier: statistic.map(|(_, s)| s),
        gradient_noise_multiplier: first_sigma
            .map(|s| plan.clip.gradient_noise_multiplier(s))
            .transpose()?,
        sample_rate: plan.sample_rate,
        expected_batch_size: plan.expected_batch_size,
        dataset_size: plan.n_train,
        steps: plan.steps,
        planned_steps: plan.planned_steps,
        epsilon_guaranteed: privacy.is_some_and(|p| p.epsilon_guaranteed),
        warnings: privacy
            .map(|p| p.warnings.as_slice())
            .unwrap_or(&no_warnings),
        epochs,
        bandmf: plan.bandmf.as_ref().map(|m| {
            let (workload, momentum) = match m.workload {
                crate::privacy::bandmf::Workload::PrefixSum => ("prefix_sum", None),
                crate::privacy::bandmf::Workload::Momentum { momentum } => {
                    ("momentum", Some(momentum))
                }
            };
            BandMfReport {
                bands: m.bands,
                workload,
                momentum,
                group_sample_rate: m.group_sample_rate,
                rounds: plan.rounds.map_or(plan.steps, |r| r.count(plan.steps)),
                error_ratio: m.error_ratio,
                coefficients: m.strategy.coefficients().to_vec(),
            }
        }),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("experiment {} ({})", exp.spec.name, report.config);
    println!(
        "dataset_size {}, expected_batch_size {}, sample_rate {:.6}, steps {}{}",
        report.dataset_size,
        report.expected_batch_size,
        report.sample_rate,
        report.steps,
        if report.steps < report.planned_steps {
            format!(
                " (stops when the budget is spent; {} planned)",
                report.planned_steps
            )
        } else {
            String::new()
        }
    );
    match privacy {
        None => println!("privacy disabled: a non-private baseline (epsilon is infinite)"),
        Some(p) => {
            println!(
                "accountant {}: {} {:.6} ({}), clip_norm {}, delta {}",
                p.accountant,
                if p.schedule.name() == "constant" {
                    "noise_multiplier"
                } else {
                    "noise scale"
                },
                p.noise_multiplier,
                if p.calibrated { "calibrated" } else { "given" },
                plan.clip_norm.map(|c| c.to_string()).unwrap_or_default(),
                p.delta
            );
            println!("clip policy {}", plan.clip.name());
            if let Some(b) = &report.bandmf {
                println!(
                    "noise bandmf: {} bands ({} workload), expected squared error {:.4} of DP-SGD's at the same noise_multiplier; {}, accounted as {} rounds",
                    b.bands,
                    b.workload,
                    b.error_ratio,
                    match b.group_sample_rate {
                        Some(rate) => format!(
                            "b-min-separated Poisson sampling at rate {rate:.6} within each group"
                        ),
                        None => "fixed-order batches (no amplification)".to_string(),
                    },
                    b.rounds
                );
            }
            if let (Some(stat), Some(stat_sigma), Some(grad)) = (
                report.clip_statistic,
                report.statistic_noise_multiplier,
                report.gradient_noise_multiplier,
            ) {
                println!(
                    "  each step also releases a {stat} with noise_multiplier {stat_sigma}; gradient noise_multiplier {grad:.6} at the first step (the two together cost exactly the noise_multiplier above, which the epsilon below accounts)"
                );
            }
            if let (Some(name), Some(s)) = (report.noise_schedule, report.noise_multiplier_summary)
            {
                println!(
                    "noise schedule {name} (sigma_t = scale * s_t): noise_multiplier first {:.6}, last {:.6}, min {:.6}, max {:.6}",
                    s.first, s.last, s.min, s.max
                );
            }
            println!("{:>6} {:>8} {:>10}", "epoch", "step", "epsilon");
            for e in &report.epochs {
                println!(
                    "{:>6} {:>8} {:>10.4}",
                    e.epoch,
                    e.step,
                    e.epsilon.unwrap_or(f64::INFINITY)
                );
            }
            if !p.epsilon_guaranteed {
                println!("epsilon is NOT guaranteed:");
            }
            for w in &p.warnings {
                println!("  warning: {w}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
