//! `dpx account`'s flags (room: `cli::account`): the clap definitions of every option, their
//! help text and defaults. Nothing here validates or computes.

use std::path::PathBuf;

use crate::privacy::accountant::{AccountantKind, RdpConversion, ZcdpConversion};

/// The released mechanism at each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mechanism {
    /// Gaussian noise with `--noise-multiplier` (σ, relative to the add/remove L2 sensitivity;
    /// `--relation replace-one` counts a swap as twice that).
    Gaussian,
    /// Laplace noise with `--scale` (relative to the add/remove L1 sensitivity).
    Laplace,
}

/// How a grid search of `--tuning-runs` G configurations is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TuningCharge {
    /// Every one of the G runs is released to the tuner: they compose (DC-SGD's Table III).
    Composition,
    /// Liu & Talwar 2019 random stopping with γ = 1/(2G), δ₂ = 1e-20 (DC-SGD's Table II, Thm. 1):
    /// each run is calibrated to (ε₁, δ₁) with ε' = 3ε₁ + 3√(2δ₁), δ' = 3√(2δ₁)·T + δ₂.
    RandomStopping,
}

/// How each batch is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sampling {
    /// Each record independently with probability `sample_rate` (Opacus, dp_accounting default).
    Poisson,
    /// Exactly `--batch-size` of `--dataset-size` records, uniformly (needs `--relation replace-one`).
    WithoutReplacement,
    /// Balls in bins: each epoch every record in one of t = ceil(N / B) batches, uniformly and
    /// independently (needs --dataset-size, --batch-size and the rdp accountant; one random
    /// allocation per epoch of t steps).
    BallsInBins,
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
    #[arg(long, env = "DPX_DATA_DIR", requires = "config", value_parser = crate::cli::parse_data_dir)]
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
    /// How `--tuning-runs` G is charged.
    #[arg(long, value_enum, default_value_t = TuningCharge::Composition, requires = "tuning_runs")]
    pub tuning_charge: TuningCharge,
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
    /// PLD only: when a plan has more than 256 distinct σ_t, round every σ_t DOWN to a geometric
    /// grid of this relative step (conservative: ε can only grow); 0 = always exact.
    #[arg(long, value_name = "STEP", default_value_t = crate::privacy::accountant::pld::DEFAULT_SIGMA_GRID)]
    pub pld_sigma_grid: f64,
}
