//! The plan `dpx account` answers for (room: `cli::account`): flags validated into steps, sampling,
//! noise (constant or a schedule file) and target, and the plan's events. Every bad value is a
//! one-line bad-input error naming its flag.

use std::path::Path;

use super::*;
use crate::bad_input;
use crate::privacy::event::{DpEvent, EventLedger};
use crate::privacy::selection::RandomStopping;

/// Most steps a schedule file may hold (a sane bound on what a file can make us allocate).
pub(super) const MAX_SCHEDULE_STEPS: usize = 100_000_000;

/// The noise of the plan.
#[derive(Debug, Clone)]
pub(super) enum Noise {
    /// One noise parameter for every step (σ or Laplace scale), or to be calibrated (`None`).
    Constant(Option<f64>),
    /// One noise multiplier per step (a shape when calibrating).
    Schedule(Vec<f64>),
}

/// A validated plan.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) mechanism: Mechanism,
    pub(super) sampling: Sampling,
    pub(super) sample_rate: f64,
    pub(super) dataset_size: Option<u64>,
    pub(super) batch_size: Option<u64>,
    pub(super) steps: u64,
    pub(super) steps_from: String,
    pub(super) noise: Noise,
    pub(super) target_epsilon: Option<f64>,
    pub(super) delta: Option<f64>,
    /// G of `--tuning-runs`: the whole plan runs G times (1: a single run).
    pub(super) tuning_runs: u64,
    /// How the G runs are charged (composition, or Liu–Talwar random stopping).
    pub(super) tuning_charge: TuningCharge,
}

pub(super) fn finite_positive(flag: &str, value: f64) -> anyhow::Result<f64> {
    if !(value.is_finite() && value > 0.0) {
        return Err(bad_input!(
            "{flag} must be a finite number > 0, got {value}"
        ));
    }
    Ok(value)
}

/// Exact integer steps from epochs: ceil(x), ignoring floating noise in the last bits.
pub(super) fn ceil_steps(x: f64) -> u64 {
    let r = x.round();
    if (x - r).abs() <= 1e-9 * x.max(1.0) {
        r as u64
    } else {
        x.ceil() as u64
    }
}

pub(super) fn validate(args: &AccountArgs) -> anyhow::Result<Plan> {
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
    if args.settings.sampling == Sampling::BallsInBins {
        if args.dataset_size.is_none() {
            return Err(bad_input!(
                "--sampling balls-in-bins needs --dataset-size and --batch-size"
            ));
        }
        if args.schedule.is_some() || args.mechanism == Mechanism::Laplace {
            return Err(bad_input!(
                "--sampling balls-in-bins is analysed for one Gaussian noise multiplier per epoch: drop --schedule and --mechanism laplace"
            ));
        }
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
                (Some(n), Some(b)) if args.settings.sampling == Sampling::BallsInBins => (
                    ceil_steps(e * n.div_ceil(b) as f64),
                    format!("ceil(epochs × ceil(N / B)) = ceil({e} × {})", n.div_ceil(b)),
                ),
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
        tuning_charge: args.tuning_charge,
    })
}

/// Read a schedule: a plain list (one number per line; blank lines and `#` comments skipped) or a
/// CSV whose header has a `noise_multiplier` column.
pub(super) fn read_schedule(path: &Path) -> anyhow::Result<Vec<f64>> {
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
    pub(super) fn step_event(&self, p: f64) -> DpEvent {
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
            // Accounted per epoch in `single_run_event`; one step alone is the epoch's event.
            (Sampling::BallsInBins, Some(_), Some(_)) => {
                DpEvent::random_allocation(self.balls_in_bins_steps().unwrap_or(1), inner)
            }
            _ => DpEvent::poisson_sampled(self.sample_rate, inner),
        }
    }

    /// t = ⌈N/B⌉, the steps of one balls-in-bins epoch (`None` for the other samplings).
    fn balls_in_bins_steps(&self) -> Option<u64> {
        match (self.sampling, self.dataset_size, self.batch_size) {
            (Sampling::BallsInBins, Some(n), Some(b)) => Some(n.div_ceil(b.max(1)).max(1)),
            _ => None,
        }
    }

    /// The whole run with noise parameter (or schedule scale) `p`, composed over the
    /// `--tuning-runs` G runs of a grid search (each run independent, so RDP adds: docs/methods/dc_sgd.md §2).
    /// Under random stopping the runs do not compose: the charge is applied to one run's (ε, δ)
    /// (`random_stopping`).
    pub(super) fn run_event(&self, p: f64) -> DpEvent {
        let one = self.single_run_event(p);
        if self.tuning_runs > 1 && self.tuning_charge == TuningCharge::Composition {
            one.self_composed(self.tuning_runs)
        } else {
            one
        }
    }

    /// Liu–Talwar random stopping over the `--tuning-runs` grid, when that is the charge.
    pub(super) fn random_stopping(&self) -> Option<RandomStopping> {
        (self.tuning_runs > 1 && self.tuning_charge == TuningCharge::RandomStopping)
            .then(|| RandomStopping::for_grid(self.tuning_runs))
    }

    pub(super) fn single_run_event(&self, p: f64) -> DpEvent {
        if let Some(t) = self.balls_in_bins_steps() {
            // One random allocation per epoch of t = ⌈N/B⌉ steps; a partial last epoch is a
            // prefix of one, so it costs at most one.
            return self.step_event(p).self_composed(self.steps.div_ceil(t));
        }
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

    pub(super) fn parameter_name(&self) -> &'static str {
        match (&self.noise, self.mechanism) {
            (Noise::Schedule(_), _) => "scale",
            (_, Mechanism::Laplace) => "scale",
            (_, Mechanism::Gaussian) => "noise_multiplier",
        }
    }

    pub(super) fn sampling_name(&self) -> &'static str {
        if self.sample_rate == 1.0 {
            "full batch"
        } else {
            match self.sampling {
                Sampling::Poisson => "poisson",
                Sampling::WithoutReplacement => "without replacement",
                Sampling::BallsInBins => "balls in bins",
            }
        }
    }
}
