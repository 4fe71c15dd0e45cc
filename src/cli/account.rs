//! `dpx account` (room: `cli::account`): the noise multiplier for a target (ε, δ), or ε for a
//! plan, under any accountant (or `--all` side by side). Owns flag validation, schedule-file
//! loading and printing only; the maths is `privacy::accountant` and `privacy::calibrate`. Must
//! not: compute privacy itself, or accept a flag value it cannot account for (NaN, σ ≤ 0, q outside
//! (0, 1], δ outside (0, 1), ε ≤ 0, zero steps): those are one-line bad-input errors (exit 2)
//! naming the flag.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use crate::bad_input;
use crate::privacy::accountant::{
    ALL_KINDS, AccountantKind, AccountantOptions, AccountingError, PrivacyReport, RdpConversion,
    ZcdpConversion, new_accountant,
};
use crate::privacy::calibrate::{CalibrationError, Target, calibrate_decreasing, epsilon_of};
use crate::privacy::event::{DpEvent, EventLedger, NeighbouringRelation};

/// Most steps a schedule file may hold (a sane bound on what a file can make us allocate).
const MAX_SCHEDULE_STEPS: usize = 100_000_000;

/// The released mechanism at each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mechanism {
    /// Gaussian noise with `--noise-multiplier` (σ, relative to the L2 sensitivity).
    Gaussian,
    /// Laplace noise with `--scale` (relative to the L1 sensitivity).
    Laplace,
}

/// How each batch is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sampling {
    /// Each record independently with probability `sample_rate` (Opacus, dp_accounting default).
    Poisson,
    /// Exactly `--batch-size` of `--dataset-size` records, uniformly (needs `--relation replace-one`).
    WithoutReplacement,
}

/// Which datasets are neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Relation {
    /// One record added or removed.
    AddOrRemoveOne,
    /// One record replaced.
    ReplaceOne,
}

/// Arguments of `dpx account`.
#[derive(Debug, clap::Args)]
#[command(
    allow_negative_numbers = true,
    after_help = "Examples:\n  dpx account --epsilon 3 --delta 1e-5 --sample-rate 0.004 --steps 10000\n  dpx account --noise-multiplier 1.1 --delta 1e-5 --dataset-size 60000 --batch-size 240 --epochs 60 --all"
)]
pub struct AccountArgs {
    /// An experiment file: print what the planned run spends (noise multiplier, ε per epoch),
    /// from the plan alone, without training.
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "epsilon", "delta", "noise_multiplier", "sample_rate", "dataset_size", "batch_size",
        "steps", "epochs", "schedule", "scale", "all",
    ])]
    pub config: Option<PathBuf>,
    /// The data directory for `--config` (default: `$DPX_DATA_DIR`, else `data`).
    #[arg(long, env = "DPX_DATA_DIR", requires = "config", value_parser = super::parse_data_dir)]
    pub data_dir: Option<PathBuf>,
    /// Target epsilon: print the noise multiplier (or scale) that meets it.
    #[arg(long)]
    pub epsilon: Option<f64>,
    /// Target delta (required by every accountant except `pure`).
    #[arg(long)]
    pub delta: Option<f64>,
    /// Noise multiplier σ of every step: print epsilon.
    #[arg(long)]
    pub noise_multiplier: Option<f64>,
    /// Sampling rate q in (0, 1] (1 = full batch).
    #[arg(long)]
    pub sample_rate: Option<f64>,
    /// Number of training records N (with `--batch-size`: q = B/N).
    #[arg(long)]
    pub dataset_size: Option<u64>,
    /// (Expected) batch size B.
    #[arg(long)]
    pub batch_size: Option<u64>,
    /// Number of steps.
    #[arg(long)]
    pub steps: Option<u64>,
    /// Number of epochs: steps = ceil(epochs × N / B) (or ceil(epochs / q)).
    #[arg(long)]
    pub epochs: Option<f64>,
    /// File with one noise multiplier per step: a plain list, or a CSV with a `noise_multiplier`
    /// column. With `--epsilon`, the file is a shape and one scale κ is calibrated (σ_t = κ·s_t).
    #[arg(long, value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// The mechanism of each step.
    #[arg(long, value_enum, default_value_t = Mechanism::Gaussian)]
    pub mechanism: Mechanism,
    /// Laplace scale b (relative to the L1 sensitivity) for `--mechanism laplace`.
    #[arg(long)]
    pub scale: Option<f64>,
    /// The accountant.
    #[arg(long, value_enum, default_value_t = AccountantKind::Rdp)]
    pub accountant: AccountantKind,
    /// Print every applicable accountant side by side.
    #[arg(long)]
    pub all: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Charge a grid search of G runs (DC-SGD's RDP option): the G runs compose, so the noise
    /// multiplier printed is the one each run needs for the best of G to stay within (ε, δ);
    /// with `--noise-multiplier`, ε of the G runs together.
    #[arg(long, value_name = "G", conflicts_with = "config")]
    pub tuning_runs: Option<u64>,
    /// Sampling, neighbouring relation and accountant settings.
    #[command(flatten)]
    pub settings: Box<AccountSettings>,
}

/// The less common settings of `dpx account` (boxed to keep the command enum small).
#[derive(Debug, clap::Args)]
pub struct AccountSettings {
    /// How batches are drawn.
    #[arg(long, value_enum, default_value_t = Sampling::Poisson)]
    pub sampling: Sampling,
    /// The neighbouring relation.
    #[arg(long, value_enum, default_value_t = Relation::AddOrRemoveOne)]
    pub relation: Relation,
    /// RDP → (ε, δ) conversion.
    #[arg(long, value_enum, default_value_t = RdpConversion::Improved)]
    pub rdp_conversion: RdpConversion,
    /// zCDP → (ε, δ) conversion.
    #[arg(long, value_enum, default_value_t = ZcdpConversion::Tight)]
    pub zcdp_conversion: ZcdpConversion,
    /// RDP orders, comma-separated (default: dp_accounting's grid 1.1..10.9, 11..63, 128..1024).
    #[arg(long, value_delimiter = ',')]
    pub orders: Option<Vec<f64>>,
    /// PLD discretisation interval of the privacy loss.
    #[arg(long, default_value_t = 1e-4)]
    pub pld_interval: f64,
    /// RDP only: round every σ_t DOWN to a geometric grid of this relative step (e.g. 1e-3), a
    /// conservative approximation (ε can only grow) that makes schedules of many distinct σ_t
    /// fast. Default: exact.
    #[arg(long, value_name = "STEP")]
    pub rdp_sigma_grid: Option<f64>,
}

/// The noise of the plan.
#[derive(Debug, Clone)]
enum Noise {
    /// One noise parameter for every step (σ or Laplace scale), or to be calibrated (`None`).
    Constant(Option<f64>),
    /// One noise multiplier per step (a shape when calibrating).
    Schedule(Vec<f64>),
}

/// A validated plan.
#[derive(Debug, Clone)]
struct Plan {
    mechanism: Mechanism,
    sampling: Sampling,
    sample_rate: f64,
    dataset_size: Option<u64>,
    batch_size: Option<u64>,
    steps: u64,
    steps_from: String,
    noise: Noise,
    target_epsilon: Option<f64>,
    delta: Option<f64>,
    /// G of `--tuning-runs`: the whole plan runs G times (1: a single run).
    tuning_runs: u64,
}

fn finite_positive(flag: &str, value: f64) -> anyhow::Result<f64> {
    if !(value.is_finite() && value > 0.0) {
        return Err(bad_input!(
            "{flag} must be a finite number > 0, got {value}"
        ));
    }
    Ok(value)
}

/// Exact integer steps from epochs: ceil(x), ignoring floating noise in the last bits.
fn ceil_steps(x: f64) -> u64 {
    let r = x.round();
    if (x - r).abs() <= 1e-9 * x.max(1.0) {
        r as u64
    } else {
        x.ceil() as u64
    }
}

fn validate(args: &AccountArgs) -> anyhow::Result<Plan> {
    // Goal and noise.
    let target_epsilon = args
        .epsilon
        .map(|e| finite_positive("--epsilon", e))
        .transpose()?;
    let delta = match args.delta {
        Some(d) if !(d > 0.0 && d < 1.0) => {
            return Err(bad_input!("--delta must be in (0, 1), got {d}"));
        }
        d => d,
    };
    if let Some(s) = args.noise_multiplier {
        finite_positive("--noise-multiplier", s)?;
    }
    if let Some(b) = args.scale {
        finite_positive("--scale", b)?;
    }
    finite_positive("--pld-interval", args.settings.pld_interval)?;
    if let Some(orders) = &args.settings.orders {
        if orders.is_empty() {
            return Err(bad_input!("--orders must list at least one order"));
        }
        for &a in orders {
            if !(a.is_finite() && a > 1.0) {
                return Err(bad_input!("--orders must be finite numbers > 1, got {a}"));
            }
        }
    }

    // Sampling.
    if let Some(n) = args.dataset_size
        && n == 0
    {
        return Err(bad_input!("--dataset-size must be at least 1"));
    }
    if let Some(b) = args.batch_size
        && b == 0
    {
        return Err(bad_input!("--batch-size must be at least 1"));
    }
    let sample_rate = match (args.sample_rate, args.dataset_size, args.batch_size) {
        (Some(q), None, None) => {
            if !(q > 0.0 && q <= 1.0) {
                return Err(bad_input!("--sample-rate must be in (0, 1], got {q}"));
            }
            q
        }
        (None, Some(n), Some(b)) => {
            if b > n {
                return Err(bad_input!(
                    "--batch-size ({b}) must not exceed --dataset-size ({n})"
                ));
            }
            b as f64 / n as f64
        }
        (Some(_), _, _) => {
            return Err(bad_input!(
                "give either --sample-rate or --dataset-size with --batch-size, not both"
            ));
        }
        (None, Some(_), None) => return Err(bad_input!("--dataset-size needs --batch-size")),
        (None, None, Some(_)) => return Err(bad_input!("--batch-size needs --dataset-size")),
        (None, None, None) => {
            return Err(bad_input!(
                "give --sample-rate, or --dataset-size with --batch-size"
            ));
        }
    };
    if args.settings.sampling == Sampling::WithoutReplacement && args.dataset_size.is_none() {
        return Err(bad_input!(
            "--sampling without-replacement needs --dataset-size and --batch-size"
        ));
    }

    // Noise source.
    let noise = match (args.mechanism, args.schedule.as_deref()) {
        (Mechanism::Laplace, Some(_)) => {
            return Err(bad_input!(
                "--schedule is for Gaussian noise multipliers; drop --mechanism laplace"
            ));
        }
        (Mechanism::Laplace, None) => {
            if args.noise_multiplier.is_some() {
                return Err(bad_input!(
                    "--noise-multiplier is for Gaussian steps; use --scale with --mechanism laplace"
                ));
            }
            match (args.scale, target_epsilon) {
                (Some(_), Some(_)) => {
                    return Err(bad_input!(
                        "give either --scale (to get epsilon) or --epsilon (to get the scale), not both"
                    ));
                }
                (None, None) => {
                    return Err(bad_input!(
                        "give --scale (to get epsilon) or --epsilon (to get the scale)"
                    ));
                }
                (b, _) => Noise::Constant(b),
            }
        }
        (Mechanism::Gaussian, Some(path)) => {
            if args.noise_multiplier.is_some() {
                return Err(bad_input!(
                    "give either --schedule or --noise-multiplier, not both"
                ));
            }
            Noise::Schedule(read_schedule(path)?)
        }
        (Mechanism::Gaussian, None) => {
            if args.scale.is_some() {
                return Err(bad_input!(
                    "--scale is for --mechanism laplace; use --noise-multiplier"
                ));
            }
            match (args.noise_multiplier, target_epsilon) {
                (Some(_), Some(_)) => {
                    return Err(bad_input!(
                        "give either --noise-multiplier (to get epsilon) or --epsilon (to get the noise multiplier), not both"
                    ));
                }
                (None, None) => {
                    return Err(bad_input!(
                        "give --noise-multiplier (to get epsilon) or --epsilon (to get the noise multiplier)"
                    ));
                }
                (s, _) => Noise::Constant(s),
            }
        }
    };

    // Steps.
    let (steps, steps_from) = match (&noise, args.steps, args.epochs) {
        (Noise::Schedule(s), None, None) => {
            (s.len() as u64, "one per line of --schedule".to_string())
        }
        (Noise::Schedule(_), _, _) => {
            return Err(bad_input!(
                "--schedule gives the steps (one per line); drop --steps/--epochs"
            ));
        }
        (_, Some(_), Some(_)) => {
            return Err(bad_input!("give either --steps or --epochs, not both"));
        }
        (_, Some(0), None) => return Err(bad_input!("--steps must be at least 1")),
        (_, Some(t), None) => (t, "--steps".to_string()),
        (_, None, Some(e)) => {
            let e = finite_positive("--epochs", e)?;
            match (args.dataset_size, args.batch_size) {
                (Some(n), Some(b)) => (
                    ceil_steps(e * n as f64 / b as f64),
                    format!("ceil(epochs × N / B) = ceil({e} × {n} / {b})"),
                ),
                _ => (
                    ceil_steps(e / sample_rate),
                    format!("ceil(epochs / sample_rate) = ceil({e} / {sample_rate})"),
                ),
            }
        }
        (_, None, None) => return Err(bad_input!("give --steps or --epochs")),
    };
    if steps == 0 {
        return Err(bad_input!("the plan has zero steps"));
    }
    let tuning_runs = match args.tuning_runs {
        None => 1,
        Some(g) if (1..=1_000_000).contains(&g) => g,
        Some(g) => {
            return Err(bad_input!(
                "--tuning-runs {g}: must be a number of runs between 1 and 1000000"
            ));
        }
    };

    Ok(Plan {
        mechanism: args.mechanism,
        sampling: args.settings.sampling,
        sample_rate,
        dataset_size: args.dataset_size,
        batch_size: args.batch_size,
        steps,
        steps_from,
        noise,
        target_epsilon,
        delta,
        tuning_runs,
    })
}

/// Read a schedule: a plain list (one number per line; blank lines and `#` comments skipped) or a
/// CSV whose header has a `noise_multiplier` column.
fn read_schedule(path: &Path) -> anyhow::Result<Vec<f64>> {
    let flag = format!("--schedule {}", path.display());
    let text = crate::text_file::read_text_capped(
        path,
        crate::text_file::MAX_SCHEDULE_BYTES,
        "a schedule file",
    )
    .map_err(|e| bad_input!("--schedule: {e}"))?;
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .ok_or_else(|| bad_input!("{flag}: the file has no noise multipliers"))?;
    let is_csv = first.contains(',')
        || first
            .chars()
            .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E');
    let mut values = Vec::new();
    let mut push = |v: &str, line: usize| -> anyhow::Result<()> {
        let x: f64 = v
            .trim()
            .parse()
            .map_err(|_| bad_input!("{flag}: line {line}: not a number: {:?}", v.trim()))?;
        if !(x.is_finite() && x > 0.0) {
            return Err(bad_input!(
                "{flag}: line {line}: noise multiplier must be a finite number > 0, got {x}"
            ));
        }
        if values.len() >= MAX_SCHEDULE_STEPS {
            return Err(bad_input!("{flag}: more than {MAX_SCHEDULE_STEPS} steps"));
        }
        values.push(x);
        Ok(())
    };
    if is_csv {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        let headers = reader
            .headers()
            .map_err(|e| bad_input!("{flag}: bad CSV header: {e}"))?
            .clone();
        let column = headers
            .iter()
            .position(|h| h == "noise_multiplier")
            .ok_or_else(|| bad_input!("{flag}: the CSV header has no noise_multiplier column"))?;
        for (i, record) in reader.records().enumerate() {
            let record = record.map_err(|e| bad_input!("{flag}: bad CSV row: {e}"))?;
            let line = record.position().map_or(i + 2, |p| p.line() as usize);
            let v = record
                .get(column)
                .ok_or_else(|| bad_input!("{flag}: line {line}: no noise_multiplier value"))?;
            push(v, line)?;
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            push(l, i + 1)?;
        }
    }
    if values.is_empty() {
        return Err(bad_input!("{flag}: the file has no noise multipliers"));
    }
    Ok(values)
}

impl Plan {
    /// One step's event with noise parameter `p` (σ or Laplace scale).
    fn step_event(&self, p: f64) -> DpEvent {
        let inner = match self.mechanism {
            Mechanism::Gaussian => DpEvent::gaussian(p),
            Mechanism::Laplace => DpEvent::laplace(p),
        };
        if self.sample_rate == 1.0 {
            return inner;
        }
        match (self.sampling, self.dataset_size, self.batch_size) {
            (Sampling::WithoutReplacement, Some(n), Some(b)) => {
                DpEvent::sampled_without_replacement(n, b, inner)
            }
            _ => DpEvent::poisson_sampled(self.sample_rate, inner),
        }
    }

    /// The whole run with noise parameter (or schedule scale) `p`, composed over the
    /// `--tuning-runs` G runs of a grid search (each run independent, so RDP adds: docs/methods/dc_sgd.md §2).
    fn run_event(&self, p: f64) -> DpEvent {
        let one = self.single_run_event(p);
        if self.tuning_runs > 1 {
            one.self_composed(self.tuning_runs)
        } else {
            one
        }
    }

    fn single_run_event(&self, p: f64) -> DpEvent {
        match &self.noise {
            Noise::Constant(_) => self.step_event(p).self_composed(self.steps),
            Noise::Schedule(shape) => {
                let mut ledger = EventLedger::new();
                for &s in shape {
                    ledger.record(self.step_event(p * s));
                }
                ledger.to_event()
            }
        }
    }

    fn parameter_name(&self) -> &'static str {
        match (&self.noise, self.mechanism) {
            (Noise::Schedule(_), _) => "scale",
            (_, Mechanism::Laplace) => "scale",
            (_, Mechanism::Gaussian) => "noise_multiplier",
        }
    }

    fn sampling_name(&self) -> &'static str {
        if self.sample_rate == 1.0 {
            "full batch"
        } else {
            match self.sampling {
                Sampling::Poisson => "poisson",
                Sampling::WithoutReplacement => "without replacement",
            }
        }
    }
}

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

fn describe_accountant(kind: AccountantKind, options: &AccountantOptions) -> String {
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

fn fmt_num(x: f64) -> String {
    if x.is_infinite() {
        "inf".into()
    } else {
        format!("{}", (x * 1e6).round() / 1e6)
            .trim_end_matches('.')
            .to_string()
    }
}

/// The noise value(s) of an answer, for printing: σ or scale, and the schedule range.
fn noise_fields(plan: &Plan, answer: &Answer) -> (Option<f64>, Option<f64>, Option<(f64, f64)>) {
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

fn answer_json(kind: AccountantKind, plan: &Plan, answer: &Answer) -> Value {
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
        "notes": answer.report.notes,
    })
}

fn noise_text(plan: &Plan, answer: &Answer) -> String {
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
fn fmt_sig(x: f64) -> String {
    let e = if x > 0.0 { x.log10().floor() as i32 } else { 0 };
    let scale = 10f64.powi(5 - e);
    let r = (x * scale).round() / scale;
    if r == x || (r - x).abs() <= 1e-12 * x {
        format!("{r}")
    } else {
        format!("{x}")
    }
}

/// Run `dpx account`.
pub fn run(args: AccountArgs) -> anyhow::Result<ExitCode> {
    if let Some(config) = &args.config {
        return super::plan::run(config, args.data_dir.as_deref(), args.json);
    }
    let plan = validate(&args)?;
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
        rdp_orders: args
            .settings
            .orders
            .clone()
            .unwrap_or_else(crate::privacy::accountant::rdp::default_orders),
        rdp_conversion: args.settings.rdp_conversion,
        pld_value_discretization_interval: args.settings.pld_interval,
        zcdp_conversion: args.settings.zcdp_conversion,
        rdp_sigma_grid: args.settings.rdp_sigma_grid,
    };
    if let Some(step) = args.settings.rdp_sigma_grid
        && !(1e-9..=0.1).contains(&step)
    {
        return Err(bad_input!(
            "--rdp-sigma-grid {step}: must be a relative step between 1e-9 and 0.1"
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

fn failure_text(f: &Failure) -> &str {
    match f {
        Failure::NotApplicable(s) | Failure::Unreachable(s) | Failure::Other(s) => s,
    }
}

fn print_human(
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
    if plan.tuning_runs > 1 {
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
