//! The training room: one run = one seed of one experiment.
//!
//! - [`prepare`]: turns a validated [`crate::config::ExperimentSpec`] into runtime objects: the
//!   prepared data, the built model and the [`plan::TrainingPlan`].
//! - [`plan`]: the planned run (steps, σ_t, learning rates, sampling, the events every step
//!   releases) from the spec and the data size alone. `dpx account --config` reads the same plan,
//!   so what it prints is what a run records.
//! - [`seed`]: what every seed's loop shares: random streams, the observer, how a seed ends, the
//!   noise source. [`train_seed`] runs one seed with the loop its experiment needs.
//! - [`run`]: the DP-SGD step loop of one seed in named phases (set-up, step, evaluation, end).
//! - [`metrics`]: the rows written to `metrics.csv` and `summary.csv`.
//! - [`checkpoint`]: mid-run checkpoints of a seed (its whole state between steps, the
//!   file format and its checks), from which `dpx run --resume` continues bit for bit.
//! - [`accelerated`]: `[accelerated]` runs (Kuru et al. 2020): their plan (α_t, β_t, ε_t, Laplace
//!   scales, T'), F* and their step loop, beside `run`'s (neither imports the other).
//!
//! This is the one room that sees every other (config, data, model, privacy, optim); it holds
//! no maths of its own beyond wiring: clipping and noise are formed in `privacy`, gradients in
//! `model`, updates in `optim`.

pub mod accelerated;
pub mod artifact;
pub mod checkpoint;
pub mod influence;
pub mod influence_retrain;
pub(crate) mod look_ahead;
pub mod memory;
pub mod metrics;
pub mod model_build;
pub mod plan;
pub mod prepare;
pub mod run;
pub mod seed;
pub mod update;

pub use seed::{Observer, SeedEnd, SeedResult, Silent};

use crate::config::ConfigError;
use crate::data::DataError;
use crate::model::ModelError;
use crate::privacy::accountant::AccountingError;
use crate::privacy::calibrate::CalibrationError;
use crate::privacy::clip::ClipError;

/// Train one seed of `exp` with its loop: the accelerated methods' for an `[accelerated]`
/// experiment, DP-SGD's (private or not) otherwise. Progress goes to `observer`; `cancel` stops
/// it between steps.
pub fn train_seed(
    exp: &prepare::Experiment,
    seed: u64,
    observer: &dyn Observer,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<SeedEnd, TrainError> {
    match &exp.accelerated {
        Some(acc) => accelerated::train_seed(exp, acc, seed, observer, cancel),
        None => run::train_seed(exp, seed, observer, cancel),
    }
}

/// [`train_seed`] with checkpoints: written as `checkpoints` says, and `resume` continues a seed
/// from one (`run::train_seed_checkpointed`, `accelerated::train_seed_checkpointed`).
pub fn train_seed_checkpointed(
    exp: &prepare::Experiment,
    seed: u64,
    observer: &dyn Observer,
    cancel: &std::sync::atomic::AtomicBool,
    checkpoints: Option<&checkpoint::Checkpointing>,
    resume: Option<checkpoint::SeedState>,
) -> Result<SeedEnd, TrainError> {
    match &exp.accelerated {
        Some(acc) => accelerated::train_seed_checkpointed(
            exp,
            acc,
            seed,
            observer,
            cancel,
            checkpoints,
            resume,
        ),
        None => run::train_seed_checkpointed(exp, seed, observer, cancel, checkpoints, resume),
    }
}

/// What can go wrong building or running an experiment.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The config is inconsistent with the data (e.g. a batch larger than the dataset).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The dataset could not be loaded or prepared.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The model could not be built or does not fit the data.
    #[error("{}: model: {source}", path.display())]
    Model {
        path: std::path::PathBuf,
        #[source]
        source: ModelError,
    },
    /// `model.init_from` could not be read or does not fit the model.
    #[error("{}: model.init_from: {source}", path.display())]
    InitFrom {
        path: std::path::PathBuf,
        #[source]
        source: Box<crate::model::artifact::ArtifactError>,
    },
    /// The model's output has fewer classes than the data's labels.
    #[error(
        "{}: model.architecture: the model predicts {model_classes} classes but the data has {data_classes}",
        path.display()
    )]
    ClassMismatch {
        path: std::path::PathBuf,
        model_classes: usize,
        data_classes: usize,
    },
    /// The accountant refused the run's events.
    #[error("{}: privacy: {source}", path.display())]
    Accounting {
        path: std::path::PathBuf,
        #[source]
        source: AccountingError,
    },
    /// The noise could not be calibrated to the budget.
    #[error("{}: privacy.epsilon: {source}", path.display())]
    Calibration {
        path: std::path::PathBuf,
        #[source]
        source: CalibrationError,
    },
    /// A step failed while training (a model or clipping error).
    #[error("seed {seed}, step {step}: {reason}")]
    Step {
        seed: u64,
        step: u64,
        reason: String,
    },
}

impl TrainError {
    /// True when the error is the user's input (config, data file, model shape, budget) rather
    /// than a failure during training.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, TrainError::Step { .. })
    }
}

impl From<ClipError> for TrainError {
    fn from(e: ClipError) -> Self {
        TrainError::Step {
            seed: 0,
            step: 0,
            reason: e.to_string(),
        }
    }
}
