//! `dpx audit CONFIG`: an empirical lower bound ε_lower on the privacy of the configured run,
//! printed next to the accountant's ε.
//!
//! Orchestration only: load and validate the config and flags, build the experiment, run the
//! audit runs (`crate::audit`, one-run auditing with Dirac gradient canaries) on a rayon pool,
//! print a table or JSON, and with `--out DIR` write `DIR/audit.csv` (one row per run and a
//! pooled row) and the resolved config atomically.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use rayon::prelude::*;
use serde::Serialize;

use super::bad_input;
use super::run::build_experiment;
use crate::audit::{
    AuditError, AuditNoise, AuditOptions, CanaryRun, audit_seed, check, claimed_epsilon,
    pooled_epsilon_lower,
};
use crate::report::atomic::write_atomic;
use crate::train::prepare::Experiment;

/// The most canaries a run may hold (each costs a score and a coin; memory stays small).
pub const MAX_CANARIES: usize = 10_000_000;
/// The most audit runs one command may train.
pub const MAX_RUNS: usize = 10_000;

/// Arguments of `dpx audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// The experiment file (TOML) whose DP-SGD run is audited.
    pub config: PathBuf,
    /// Canaries per run (m), each included with probability 1/2.
    #[arg(long, default_value_t = 1000, value_parser = parse_canaries)]
    pub canaries: usize,
    /// Canaries guessed "included" per run (k+, the highest scores) [default: canaries / 10].
    #[arg(long)]
    pub guess_included: Option<usize>,
    /// Canaries guessed "excluded" per run (k-, the lowest scores).
    #[arg(long, default_value_t = 0)]
    pub guess_excluded: usize,
    /// Independent audit runs (training runs), seeds SEED, SEED+1, ...; their guesses are also
    /// pooled into one bound.
    #[arg(long, default_value_t = 1, value_parser = parse_runs)]
    pub runs: usize,
    /// Seed of the first run [default: the config's first seed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Probability with which ε_lower is a valid lower bound (1 - β).
    #[arg(long, default_value_t = 0.95, value_parser = parse_confidence)]
    pub confidence: f64,
    /// Control: switch the noise off (everything else unchanged). ε_lower must then exceed the
    /// accountant's ε, which is still the ε of the configured noise.
    #[arg(long)]
    pub no_noise: bool,
    /// Print the result as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write audit.csv and config.toml into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Worker threads (runs train in parallel). Results do not depend on it.
    #[arg(long, value_parser = super::parse_threads)]
    pub threads: Option<usize>,
    /// Refuse the audit when its estimated peak memory is over this many GiB (default: three
    /// quarters of the physical memory).
    #[arg(long, value_name = "GIB", value_parser = super::parse_max_memory)]
    pub max_memory: Option<f64>,
    /// The data directory (default: `$DPX_DATA_DIR`, else `data`).
    #[arg(long, env = "DPX_DATA_DIR", value_parser = super::parse_data_dir)]
    pub data_dir: Option<PathBuf>,
}

fn parse_canaries(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_CANARIES).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number from 1 to {MAX_CANARIES}, found `{text}`"
        )),
    }
}

fn parse_runs(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_RUNS).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number from 1 to {MAX_RUNS}, found `{text}`"
        )),
    }
}

fn parse_confidence(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        _ => Err(format!(
            "expected a number strictly between 0 and 1, found `{text}`"
        )),
    }
}

/// One line of the result: a run, or the pooled runs.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRow {
    /// The run's index, or `pooled`.
    pub run: String,
    pub seed: Option<u64>,
    pub canaries: usize,
    pub included: Option<usize>,
    pub guesses: usize,
    pub correct: usize,
    pub confidence: f64,
    pub epsilon_lower: f64,
    /// The accountant's ε for the configured run (the claim audited).
    pub epsilon: f64,
    pub delta: f64,
    pub accountant: String,
    pub noise_multiplier: f64,
    pub clip_norm: f64,
    pub sample_rate: f64,
    pub steps: u64,
    /// Each canary is active at one step in `slots`.
    pub slots: u64,
    /// `seeded`, `secure`, or `off` (the control).
    pub noise_mode: String,
    pub final_test_accuracy: Option<f64>,
}

/// The whole result, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    pub config: String,
    pub method: &'static str,
    pub runs: Vec<AuditRow>,
    pub pooled: Option<AuditRow>,
}

fn to_bad_input(e: AuditError) -> anyhow::Error {
    if e.is_bad_input() {
        bad_input(e)
    } else {
        e.into()
    }
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let exp = build_experiment(&args.config, args.data_dir.as_deref())?;
    let opts = AuditOptions {
        canaries: args.canaries,
        guess_included: args.guess_included.unwrap_or(args.canaries / 10),
        guess_excluded: args.guess_excluded,
        confidence: args.confidence,
        noise: if args.no_noise {
            AuditNoise::Off
        } else {
            AuditNoise::Configured
        },
    };
    check(&exp, &opts).map_err(to_bad_input)?;
    if opts.guess_included + opts.guess_excluded == 0 {
        return Err(bad_input(anyhow::anyhow!(
            "--guess-included and --guess-excluded are both 0: the audit would make no guess"
        )));
    }
    let claim = claimed_epsilon(&exp).map_err(to_bad_input)?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)
            .map_err(|e| bad_input(anyhow::anyhow!("--out {}: {e}", out.display())))?;
    }
    for w in exp.plan.privacy.iter().flat_map(|p| &p.warnings) {
        eprintln!("warning: {w}");
    }

    let first = args
        .seed
        .unwrap_or_else(|| exp.spec.seeds.first().copied().unwrap_or(0));
    let seeds: Vec<u64> = (0..args.runs as u64)
        .map(|k| first.checked_add(k))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            bad_input(anyhow::anyhow!(
                "--seed {first} with --runs {}: the run seeds {first}, {first}+1, ... would pass the largest seed {}",
                args.runs,
                u64::MAX
            ))
        })?;
    let pool = super::thread_pool(args.threads)?;
    super::check_memory(
        &exp,
        pool.current_num_threads().min(args.runs),
        args.max_memory,
    )?;
    let runs: Vec<CanaryRun> = pool
        .install(|| {
            seeds
                .par_iter()
                .map(|&seed| audit_seed(&exp, seed, &opts))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(to_bad_input)?;
    let pooled = if runs.len() > 1 {
        Some(pooled_epsilon_lower(&runs, claim.delta, opts.confidence).map_err(to_bad_input)?)
    } else {
        None
    };

    let report = build_report(&args.config, &exp, &opts, &claim, &runs, pooled);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report, &exp, &opts);
    }
    if let Some(out) = &args.out {
        write_outputs(out, &exp, &report)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn build_report(
    config: &Path,
    exp: &Experiment,
    opts: &AuditOptions,
    claim: &crate::privacy::accountant::PrivacyReport,
    runs: &[CanaryRun],
    pooled: Option<f64>,
) -> AuditReport {
    let plan = &exp.plan;
    let base = |run: String| AuditRow {
        run,
        seed: None,
        canaries: 0,
        included: None,
        guesses: 0,
        correct: 0,
        confidence: opts.confidence,
        epsilon_lower: 0.0,
        epsilon: claim.epsilon,
        delta: claim.delta,
        accountant: claim.accountant.name().to_string(),
        noise_multiplier: plan.privacy.as_ref().map_or(0.0, |p| p.noise_multiplier),
        clip_norm: plan.clip_norm.unwrap_or(0.0),
        sample_rate: plan.sample_rate,
        steps: plan.steps,
        slots: runs.first().map_or(1, |r| r.slots),
        noise_mode: runs.first().map_or("", |r| r.noise_mode).to_string(),
        final_test_accuracy: None,
    };
    let rows = runs
        .iter()
        .enumerate()
        .map(|(k, r)| AuditRow {
            seed: Some(r.seed),
            canaries: r.canaries,
            included: Some(r.included),
            guesses: r.guesses,
            correct: r.correct,
            epsilon_lower: r.epsilon_lower,
            slots: r.slots,
            noise_mode: r.noise_mode.to_string(),
            final_test_accuracy: Some(r.final_test_accuracy),
            ..base(k.to_string())
        })
        .collect();
    let pooled = pooled.map(|eps| AuditRow {
        canaries: runs.iter().map(|r| r.canaries).sum(),
        included: Some(runs.iter().map(|r| r.included).sum()),
        guesses: runs.iter().map(|r| r.guesses).sum(),
        correct: runs.iter().map(|r| r.correct).sum(),
        epsilon_lower: eps,
        ..base("pooled".into())
    });
    AuditReport {
        config: config.display().to_string(),
        method: "one-run audit (Steinke, Nasr & Jagielski 2023, Thm 5.2), white-box Dirac gradient canaries",
        runs: rows,
        pooled,
    }
}

fn print_table(report: &AuditReport, exp: &Experiment, opts: &AuditOptions) {
    let plan = &exp.plan;
    let Some(first) = report.runs.first() else {
        return;
    };
    println!("audit of {}: {}", report.config, report.method);
    println!(
        "mechanism: DP-SGD, Poisson sample_rate {:.6}, {} steps, noise_multiplier {:.6}, clip_norm {}, noise {}",
        plan.sample_rate, plan.steps, first.noise_multiplier, first.clip_norm, first.noise_mode
    );
    println!(
        "canaries: {} per run over {} parameters, each active at one step in {}; guesses: {} included, {} excluded",
        opts.canaries,
        exp.model.num_params(),
        first.slots,
        opts.guess_included,
        opts.guess_excluded
    );
    if opts.noise == AuditNoise::Off {
        println!(
            "control: noise OFF. epsilon below is the accountant's for the configured noise, which this run did not add"
        );
    }
    println!(
        "{:>6} {:>10} {:>9} {:>8} {:>8} {:>14} {:>10} {:>14}",
        "run",
        "seed",
        "included",
        "guesses",
        "correct",
        "epsilon_lower",
        "epsilon",
        "test_accuracy"
    );
    let line = |r: &AuditRow| {
        println!(
            "{:>6} {:>10} {:>9} {:>8} {:>8} {:>14.4} {:>10.4} {:>14}",
            r.run,
            r.seed.map_or("-".into(), |s| s.to_string()),
            r.included.map_or("-".into(), |s| s.to_string()),
            r.guesses,
            r.correct,
            r.epsilon_lower,
            r.epsilon,
            r.final_test_accuracy
                .map_or("-".into(), |a| format!("{a:.4}"))
        )
    };
    report.runs.iter().for_each(line);
    if let Some(p) = &report.pooled {
        line(p);
    }
    let best = report
        .pooled
        .as_ref()
        .map_or(first.epsilon_lower, |p| p.epsilon_lower);
    println!(
        "epsilon_lower {:.4} (confidence {}) vs the {} accountant's epsilon {:.4} at delta {:e}: {}",
        best,
        opts.confidence,
        first.accountant,
        first.epsilon,
        first.delta,
        match (opts.noise, best <= first.epsilon) {
            (AuditNoise::Configured, true) => "consistent with the claim",
            (AuditNoise::Configured, false) => {
                "ABOVE the claim: the run leaks more than its accountant says"
            }
            (AuditNoise::Off, true) => {
                "the control found no more than the claim (too few canaries or guesses to show the leak)"
            }
            (AuditNoise::Off, false) => "above the claim, as a run without noise must be",
        }
    );
}

fn write_outputs(out: &Path, exp: &Experiment, report: &AuditReport) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in report.runs.iter().chain(report.pooled.iter()) {
        w.serialize(r)?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    let path = out.join("audit.csv");
    write_atomic(&path, &bytes).with_context(|| path.display().to_string())?;
    let path = out.join("config.toml");
    write_atomic(
        &path,
        exp.spec.with_absolute_paths().to_resolved_toml().as_bytes(),
    )
    .with_context(|| path.display().to_string())?;
    Ok(())
}
