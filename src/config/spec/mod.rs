//! Config room: the validated experiment spec, and `validate`, the only place values are checked.
//!
//! Owns every range check, default and combination rule of the experiment file (δ in (0, 1),
//! ε > 0, exactly one of `noise.noise_multiplier` and `privacy.epsilon`, keys that do not apply
//! to the chosen kind, ...). An [`ExperimentSpec`] is plain data: once built it is known valid,
//! so the rooms that consume it (data, model, train, privacy) never re-check its values; they
//! only build runtime objects from it. The checks that need the loaded data (a batch larger than
//! the dataset) are [`ExperimentSpec::check_against_data`]. Must not load data, build models or
//! run accountants.
//!
//! # Files
//!
//! One file per TOML section, each with its section's types and its checks: `data.rs`,
//! `model.rs`, `train.rs`, `clip.rs`, `noise.rs`, `privacy.rs`, `accelerated.rs`. This file holds
//! the top level ([`ExperimentSpec`], `[experiment]`, `[output]`), the `Checker` helpers every
//! section uses, and the **cross-section rules** in one place: [`validate`] (which sections
//! apply together, e.g. PCA against a CNN, `[accelerated]` against `[privacy]`) and
//! [`ExperimentSpec::check_against_data`] (rules that need the loaded data).

mod accelerated;
mod clip;
mod data;
mod model;
mod noise;
mod privacy;
mod train;

pub use accelerated::*;
pub use clip::*;
pub use data::*;
pub use model::*;
pub use noise::*;
pub use privacy::*;
pub use train::*;

use super::error::{ConfigError, Location};
use super::kinds::{
    AcceleratedMethodKind, BoundConstantsKind, L1SensitivityKind, LaplaceParameterKind,
};
use super::kinds::{
    Activation, AdaclipInitialStd, AdaclipVarianceScale, Architecture, ClipPolicyKind, DataPart,
    DatasetName, Features, LayerKind, LayerSplitKind, Loss, LrScheduleKind, NoiseMechanismKind,
    NoiseScheduleKind, NormSource, OptimizerKind, SamplerKind, Standardize,
};
use super::raw::{RawAccelerated, RawNumberOrWord};
use super::raw::{
    RawConfig, RawData, RawLayer, RawLrSchedule, RawModel, RawNoise, RawPrivacy, RawSeeds,
    RawSynthetic, RawThreads, RawTrain,
};
use crate::privacy::accountant::AccountantKind;
use crate::privacy::event::NeighbouringRelation;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Upper bound on layer widths, channel counts and hidden sizes: a sane limit so that a typo
/// cannot make the model room allocate terabytes.
pub const MAX_WIDTH: usize = 65_536;
/// Upper bound on the number of seeds of one experiment.
pub const MAX_SEEDS: usize = 100_000;
/// Upper bound on the number of examples of a generated dataset (train or test).
pub const MAX_SYNTHETIC_EXAMPLES: usize = 10_000_000;
/// Upper bound on n × d of a generated dataset (4 GiB of f32).
pub const MAX_SYNTHETIC_CELLS: usize = 1 << 30;
/// Upper bound on the steps of one run (`train.steps`, or ⌈epochs · n / batch⌉): the plan holds
/// a few numbers per step (σ_t, s_t: 16 bytes), so 10^8 steps cost 1.6 GB before training.
pub const MAX_STEPS: u64 = 100_000_000;

/// A validated experiment: everything `dpx run` needs, every default filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentSpec {
    /// The file the spec was read from (for error messages; not part of the experiment).
    pub source: PathBuf,
    /// `experiment.name`: letters, digits, `.`, `_`, `-`; names the output directory.
    pub name: String,
    /// `experiment.description` (may be empty).
    pub description: String,
    /// `experiment.seeds`: non-empty, distinct, in the order given.
    pub seeds: Vec<u64>,
    pub data: DataSpec,
    pub model: ModelSpec,
    pub train: TrainSpec,
    pub clip: ClipSpec,
    /// `None` when `privacy.enabled = false` (a non-private baseline).
    pub privacy: Option<PrivacySpec>,
    pub output: OutputSpec,
    /// `[accelerated]`: the accelerated DP methods (then `privacy` is `None`: the budget is
    /// `accelerated.epsilon`, pure ε-DP with the Laplace mechanism).
    pub accelerated: Option<AcceleratedSpec>,
}

/// `[output]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    /// `output.dir` (default `results/<experiment.name>`).
    pub dir: PathBuf,
    /// `output.save_model_every_evals`: also save the parameters at every k-th evaluation (as
    /// `seeds/<seed>.step<step>.model.safetensors`), besides the final model.
    pub save_model_every_evals: Option<u64>,
}

impl ExperimentSpec {
    /// The number of steps the run plans: `train.steps`, or ⌈epochs · n_train / batch⌉ where
    /// batch is the (expected) batch size. Saturates at `u64::MAX`.
    pub fn planned_steps(&self, n_train: usize) -> u64 {
        match self.train.length {
            TrainLength::Steps(s) => s,
            TrainLength::Epochs(e) => {
                if let Some(t) = self.train.sampler.steps_per_epoch(n_train) {
                    return e.saturating_mul(t);
                }
                let b = self.train.sampler.batch_size().max(1) as u128;
                let total = (e as u128) * (n_train as u128);
                u64::try_from(total.div_ceil(b)).unwrap_or(u64::MAX)
            }
        }
    }

    /// A period in steps: `Every::Steps(s)` is s; `Every::Epochs(e)` is ⌈e · n_train / batch⌉
    /// (at least 1), the same rounding as [`planned_steps`](Self::planned_steps), so evaluation
    /// rows, learning-rate decay and `dpx account --config`'s per-epoch report agree.
    pub fn period_in_steps(&self, every: Every, n_train: usize) -> u64 {
        match every {
            Every::Steps(s) => s,
            Every::Epochs(e) => {
                if let Some(t) = self.train.sampler.steps_per_epoch(n_train) {
                    return e.saturating_mul(t).max(1);
                }
                let b = self.train.sampler.batch_size().max(1) as u128;
                let total = (e as u128) * (n_train as u128);
                u64::try_from(total.div_ceil(b)).unwrap_or(u64::MAX).max(1)
            }
        }
    }

    /// Poisson sample rate q = expected_batch_size / n_train (the batch fraction for the other
    /// samplers). `n_train` must be positive (see [`check_against_data`](Self::check_against_data)).
    pub fn sample_rate(&self, n_train: usize) -> f64 {
        self.train.sampler.batch_size() as f64 / n_train.max(1) as f64
    }

    /// The checks that need the loaded data: `n_train` examples in the training split actually
    /// used (after preprocessing and the validation split), `n_features` features per example
    /// as the model sees them.
    pub fn check_against_data(&self, n_train: usize, n_features: usize) -> Result<(), ConfigError> {
        let at = Location::file(&self.source);
        if n_train == 0 {
            return Err(ConfigError::DataMismatch {
                at,
                key: "data.dataset".into(),
                reason: "the training set is empty".into(),
            });
        }
        let batch = self.train.sampler.batch_size();
        if batch > n_train {
            return Err(ConfigError::DataMismatch {
                at,
                key: self.train.sampler.batch_key().into(),
                reason: format!(
                    "the batch size {batch} is larger than the {n_train} training examples"
                ),
            });
        }
        if let TrainLength::Epochs(e) = self.train.length {
            let steps = self.planned_steps(n_train);
            if steps > MAX_STEPS {
                return Err(ConfigError::DataMismatch {
                    at,
                    key: "train.epochs".into(),
                    reason: format!(
                        "{e} epochs of {n_train} examples in batches of {batch} are {steps} steps, \
                         more than the limit of {MAX_STEPS} steps per run"
                    ),
                });
            }
        }
        let needed = match self.model.architecture {
            ModelArchitecture::MnistCnn => Some((784, "1×28×28")),
            ModelArchitecture::CifarCnn | ModelArchitecture::Resnet20Gn => Some((3072, "3×32×32")),
            ModelArchitecture::Logistic
            | ModelArchitecture::Mlp { .. }
            | ModelArchitecture::Cnn { .. } => None,
        };
        if let Some((d, shape)) = needed.filter(|&(d, _)| d != n_features) {
            return Err(ConfigError::DataMismatch {
                at,
                key: "model.architecture".into(),
                reason: format!(
                    "{} needs {shape} inputs ({d} features), the data has {n_features}",
                    self.model.architecture.kind().name()
                ),
            });
        }
        Ok(())
    }
}

/// Check `raw` (read from `source`) and build the spec; the first problem found is returned.
pub fn validate(raw: &RawConfig, source: &Path) -> Result<ExperimentSpec, ConfigError> {
    let v = Checker { file: source };
    let (name, description, seeds) = v.experiment(raw)?;
    let accelerated = match &raw.accelerated {
        Some(a) => Some(v.accelerated(raw, a)?),
        None => None,
    };
    let privacy_enabled = accelerated.is_none() && raw.privacy.enabled.unwrap_or(true);
    let data = v.data(&raw.data)?;
    let model = v.model(&raw.model)?;
    if accelerated.is_some() {
        v.absent("model.init_from", &raw.model.init_from, || {
            "not used by [accelerated] runs (their binary logistic model starts at zero)".into()
        })?;
        v.absent("model.freeze", &raw.model.freeze, || {
            "not used by [accelerated] runs".into()
        })?;
    }
    // Statistics fitted on the private training data without noise would be a release the
    // run's ε does not cover: refused in a private run unless explicitly accepted (then the
    // plan marks ε not guaranteed).
    let leaky = matches!(
        data.standardize,
        Standardize::PerFeature | Standardize::PerChannel
    ) || data.nonprivate_pca();
    if accelerated.is_some() && leaky {
        let key = if data.nonprivate_pca() {
            "data.pca_components"
        } else {
            "data.standardize"
        };
        return Err(v.conflict(
            key,
            "accelerated",
            "statistics fitted on the private training data without noise are not covered by the accelerated methods' epsilon; use data.standardize = \"fixed\" with public constants",
        ));
    }
    // Private statistics are a release of the private training data: they need the privacy
    // section that accounts them, and the accelerated methods' pure-ε plan has no place for a
    // Gaussian release.
    if data.standardize == Standardize::Private {
        if accelerated.is_some() {
            return Err(v.conflict(
                "data.standardize",
                "accelerated",
                "\"private\" releases Gaussian statistics, which the accelerated methods' pure-epsilon accounting does not cover; use data.standardize = \"fixed\" with public constants",
            ));
        }
        if !privacy_enabled {
            return Err(v.conflict(
                "data.standardize",
                "privacy.enabled",
                "\"private\" statistics are accounted by the run's privacy section; a non-private run has none (use \"per_channel\" or \"per_feature\")",
            ));
        }
    }
    // The same for the private PCA's release (`data.pca_noise_multiplier`).
    if data.private_pca.is_some() {
        if accelerated.is_some() {
            return Err(v.conflict(
                "data.pca_noise_multiplier",
                "accelerated",
                "the private PCA is a Gaussian release, which the accelerated methods' pure-epsilon accounting does not cover",
            ));
        }
        if !privacy_enabled {
            return Err(v.conflict(
                "data.pca_noise_multiplier",
                "privacy.enabled",
                "the private PCA's release is accounted by the run's privacy section; a non-private run has none (drop data.pca_noise_multiplier for a plain PCA)",
            ));
        }
    }
    if privacy_enabled && !data.allow_nonprivate_statistics {
        if matches!(
            data.standardize,
            Standardize::PerFeature | Standardize::PerChannel
        ) {
            return Err(v.conflict(
                "data.standardize",
                "privacy",
                "its mean and standard deviation would be fitted on the private training data without noise, which epsilon does not cover; use data.standardize = \"fixed\" with public constants (data.standardize_mean, data.standardize_std), or set data.allow_nonprivate_statistics = true to accept a run whose epsilon is not guaranteed",
            ));
        }
        if data.nonprivate_pca() {
            return Err(v.conflict(
                "data.pca_components",
                "privacy",
                "the projection would be fitted on the private training data without noise, which epsilon does not cover; give data.pca_noise_multiplier for a private PCA, or set data.allow_nonprivate_statistics = true to accept a run whose epsilon is not guaranteed",
            ));
        }
    }
    if data.pca_components.is_some()
        && matches!(
            model.architecture,
            ModelArchitecture::Cnn { .. }
                | ModelArchitecture::MnistCnn
                | ModelArchitecture::CifarCnn
                | ModelArchitecture::Resnet20Gn
        )
    {
        return Err(v.conflict(
            "data.pca_components",
            "model.architecture",
            "PCA turns images into plain vectors; a CNN needs images",
        ));
    }
    if matches!(data.features, FeatureMap::Scattering { .. })
        && matches!(
            model.architecture,
            ModelArchitecture::MnistCnn
                | ModelArchitecture::CifarCnn
                | ModelArchitecture::Resnet20Gn
        )
    {
        return Err(v.conflict(
            "data.features",
            "model.architecture",
            "the fixed model.architecture = mnist_cnn/cifar_cnn/resnet20_gn expect pixels; on scattering features use architecture = \"cnn\" with [[model.layers]], \"mlp\" or \"logistic\"",
        ));
    }
    let train = match (&accelerated, raw.train.learning_rate) {
        // The accelerated methods take α = c/L; `train.learning_rate` is not used (1 if absent).
        (Some(_), None) => v.train(&RawTrain {
            learning_rate: Some(1.0),
            ..raw.train.clone()
        })?,
        _ => v.train(&raw.train)?,
    };
    // On scattering features a view is the transform of the example or of its mirror image (both
    // computed once): left-right flips only, no crops.
    if let (FeatureMap::Scattering { .. }, Some(a)) = (data.features, train.augmentation) {
        if a.crop_padding > 0 {
            return Err(v.conflict(
                "train.augmentation.crop_padding",
                "data.features",
                "with data.features = \"scattering\" the views are left-right flips only (the transform of each training image's mirror is computed once, beside the image's); set train.augmentation.crop_padding = 0",
            ));
        }
        if !a.horizontal_flip {
            return Err(v.conflict(
                "train.augmentation.horizontal_flip",
                "data.features",
                "with data.features = \"scattering\" the only augmentation is the left-right flip; without it every view is the same example",
            ));
        }
    }
    if accelerated.is_some() {
        v.absent("train.ema_decay", &raw.train.ema_decay, || {
            "not used by [accelerated] runs (they average their iterates as the paper says)".into()
        })?;
        v.absent(
            "train.eval_gradient_error",
            &raw.train.eval_gradient_error,
            || "not used by [accelerated] runs (their metrics have excess_risk)".into(),
        )?;
        v.absent("train.augmentation", &raw.train.augmentation, || {
            "not used by [accelerated] runs (their data are feature vectors, not images)".into()
        })?;
        v.absent(
            "output.save_model_every_evals",
            &raw.output.save_model_every_evals,
            || "[accelerated] runs save no model file".into(),
        )?;
    }
    let clip = v.clip(raw, privacy_enabled)?;
    let privacy = v.privacy(raw, privacy_enabled)?;
    if let Some(p) = &privacy
        && let NoiseMechanism::BandMf { .. } = p.mechanism
    {
        // The banded sensitivity (privacy::bandmf) covers one Gaussian vector per step, of one
        // noise multiplier and one clip norm, under b-min-separated Poisson sampling.
        if !matches!(
            train.sampler,
            Sampler::Poisson { .. } | Sampler::FixedOrder { .. }
        ) {
            return Err(v.conflict(
                "noise.mechanism",
                "train.sampler",
                "\"bandmf\" is accounted under b-min-separated Poisson sampling (train.sampler = \"poisson\": each example in one of `noise.bands` groups, step t sampling group t mod bands) or fixed-order batches (train.sampler = \"fixed_order\", no amplification)",
            ));
        }
        if !matches!(
            clip,
            ClipSpec::Flat { .. } | ClipSpec::PerLayer { .. } | ClipSpec::Automatic { .. }
        ) {
            return Err(v.conflict(
                "noise.mechanism",
                "clip.policy",
                "\"bandmf\" correlates the noise of the clipped gradient sum only, at one clip norm for all steps: use clip.policy = \"flat\", \"per_layer\" or \"automatic\"",
            ));
        }
        if matches!(train.sampler, Sampler::Poisson { .. })
            && p.neighbouring != crate::privacy::event::NeighbouringRelation::AddOrRemoveOne
        {
            return Err(v.conflict(
                "noise.mechanism",
                "privacy.neighbouring",
                "\"bandmf\"'s amplification by b-min-separated sampling is the add/remove-one guarantee (docs/accounting.md): use privacy.neighbouring = \"add_or_remove_one\"",
            ));
        }
        if p.noise_schedule != NoiseSchedule::Constant {
            return Err(v.conflict(
                "noise.mechanism",
                "noise.schedule",
                "\"bandmf\"'s sensitivity assumes one noise multiplier for all steps: use noise.schedule = \"constant\"",
            ));
        }
    }
    if let Some(p) = &privacy
        && let NoiseSchedule::InfluenceQuadratic { .. } = p.noise_schedule
    {
        // The analytic influence (docs/methods/dynamic_noise.md §1.2(g)) is the noise's effect
        // on the final loss of gradient descent on a quadratic: a linear model, the squared loss,
        // plain steps at one learning rate.
        if model.architecture != ModelArchitecture::Logistic || model.loss != Loss::Squared {
            return Err(v.conflict(
                "noise.schedule",
                "model.loss",
                "\"influence_quadratic\" is the analytic influence of gradient descent on the squared loss of a linear model: set model.architecture = \"logistic\" and model.loss = \"squared\" (otherwise use influence_gd or exponential)",
            ));
        }
        if train.optimizer != OptimizerSpec::Sgd {
            return Err(v.conflict(
                "noise.schedule",
                "train.optimizer",
                "\"influence_quadratic\" is derived for plain gradient steps: set train.optimizer = \"sgd\" (with momentum use influence_momentum)",
            ));
        }
        if train.lr_schedule != LrSchedule::Constant {
            return Err(v.conflict(
                "noise.schedule",
                "train.lr_schedule",
                "\"influence_quadratic\" assumes one learning rate for every step: use train.lr_schedule = \"constant\"",
            ));
        }
        if !data.allow_nonprivate_statistics {
            return Err(v.conflict(
                "noise.schedule",
                "data.allow_nonprivate_statistics",
                "\"influence_quadratic\" is fitted to the eigenvalues of the private training data's Hessian without noise, which epsilon does not cover; set data.allow_nonprivate_statistics = true to accept a run whose epsilon is not guaranteed",
            ));
        }
    }
    if let Some(p) = &privacy
        && let NoiseSchedule::InfluenceRetrained { .. } = p.noise_schedule
    {
        // The retraining estimate (docs/methods/dynamic_noise.md §1.2(h)) reruns the paper's
        // setting: full-batch steps (checked against the data size before training), flat
        // clipping, fresh noise at every step, plain or momentum steps, the parameters
        // themselves as the output.
        let name = p.noise_schedule.kind().name();
        if !matches!(
            train.optimizer,
            OptimizerSpec::Sgd
                | OptimizerSpec::Momentum { .. }
                | OptimizerSpec::BiasCorrectedMomentum { .. }
        ) {
            return Err(v.conflict(
                "noise.schedule",
                "train.optimizer",
                &format!("\"{name}\" retrains with gradient steps whose size does not depend on the noise: set train.optimizer = \"sgd\", \"momentum\" or \"bias_corrected_momentum\""),
            ));
        }
        if !matches!(clip, ClipSpec::Flat { .. }) {
            return Err(v.conflict(
                "noise.schedule",
                "clip.policy",
                &format!("\"{name}\" retrains with one clip norm and one noise vector per step: set clip.policy = \"flat\""),
            ));
        }
        if p.mechanism != NoiseMechanism::Independent {
            return Err(v.conflict(
                "noise.schedule",
                "noise.mechanism",
                &format!("\"{name}\" retrains with fresh noise at every step: set noise.mechanism = \"independent\""),
            ));
        }
        if train.augmentation.is_some() {
            return Err(v.conflict(
                "noise.schedule",
                "train.augmentation",
                &format!("\"{name}\" retrains on the training examples as they are: remove train.augmentation"),
            ));
        }
        if model.init_from.is_some() {
            return Err(v.conflict(
                "noise.schedule",
                "model.init_from",
                &format!(
                    "\"{name}\" retrains from the seeded initialisation: remove model.init_from"
                ),
            ));
        }
        if train.ema_decay.is_some() {
            return Err(v.conflict(
                "noise.schedule",
                "train.ema_decay",
                &format!("\"{name}\" fits the final loss of the parameters themselves: remove train.ema_decay"),
            ));
        }
        if !data.allow_nonprivate_statistics {
            return Err(v.conflict(
                "noise.schedule",
                "data.allow_nonprivate_statistics",
                &format!("\"{name}\" is estimated by retraining on the private training data, whose losses decide every σ_t without noise, which epsilon does not cover; set data.allow_nonprivate_statistics = true to accept a run whose epsilon is not guaranteed"),
            ));
        }
    }
    if let (Some(p), Sampler::FixedOrder { .. }) = (&privacy, train.sampler) {
        // One release per epoch: adding an example would shift every later batch of the fixed
        // cut, so the guarantee is for replace-one neighbours (the replaced example keeps its
        // place), and every step must release the same events.
        if p.neighbouring != crate::privacy::event::NeighbouringRelation::ReplaceOne {
            return Err(v.conflict(
                "train.sampler",
                "privacy.neighbouring",
                "\"fixed_order\" batches are a fixed cut of one permutation: adding or removing an example would move every later example to another batch, so its guarantee is for replace-one neighbours: set privacy.neighbouring = \"replace_one\"",
            ));
        }
        if p.noise_schedule != NoiseSchedule::Constant {
            return Err(v.conflict(
                "train.sampler",
                "noise.schedule",
                "\"fixed_order\" is accounted as one release per epoch, at one noise multiplier: use noise.schedule = \"constant\"",
            ));
        }
    }
    if let (Some(p), Sampler::BallsInBins { .. }) = (&privacy, train.sampler) {
        // One random-allocation event per epoch (docs/accounting.md, "Balls-in-bins batches"):
        // the Gaussian analyses of the rdp and pld accountants, add/remove one, one σ per epoch.
        if !matches!(
            p.accountant,
            crate::privacy::accountant::AccountantKind::Rdp
                | crate::privacy::accountant::AccountantKind::Pld
        ) {
            return Err(v.conflict(
                "train.sampler",
                "privacy.accountant",
                "\"balls_in_bins\" is accounted by the random-allocation analyses of the rdp and pld accountants: set privacy.accountant = \"pld\" or \"rdp\"",
            ));
        }
        if p.neighbouring != crate::privacy::event::NeighbouringRelation::AddOrRemoveOne {
            return Err(v.conflict(
                "train.sampler",
                "privacy.neighbouring",
                "\"balls_in_bins\"'s guarantee (random allocation) is for add/remove-one neighbours: use privacy.neighbouring = \"add_or_remove_one\"",
            ));
        }
        if p.noise_schedule != NoiseSchedule::Constant {
            return Err(v.conflict(
                "train.sampler",
                "noise.schedule",
                "\"balls_in_bins\" is accounted one epoch at a time, at one noise multiplier: use noise.schedule = \"constant\"",
            ));
        }
        if let NoiseMechanism::BandMf { .. } = p.mechanism {
            return Err(v.conflict(
                "train.sampler",
                "noise.mechanism",
                "\"balls_in_bins\" is analysed for independent Gaussian noise only; \"bandmf\" runs with \"poisson\" or \"fixed_order\"",
            ));
        }
    }
    // A secure (OS-seeded) draw of the statistics could not be drawn again: a resumed seed or
    // `dpx eval` would normalise with another release, which the ledger does not hold.
    if data.standardize == Standardize::Private && privacy.as_ref().is_some_and(|p| p.secure_noise)
    {
        return Err(v.conflict(
            "data.standardize",
            "privacy.secure_noise",
            "\"private\" statistics are not drawn with privacy.secure_noise = true: they come from the experiment's seeded statistics stream so that a resumed seed and dpx eval reproduce the same release, and OS noise could not be drawn again",
        ));
    }
    if data.private_pca.is_some() && privacy.as_ref().is_some_and(|p| p.secure_noise) {
        return Err(v.conflict(
            "data.pca_noise_multiplier",
            "privacy.secure_noise",
            "the private PCA is not drawn with privacy.secure_noise = true: it comes from the seeded stream of data.pca_seed so that a resumed seed and dpx eval reproduce the same release, and OS noise could not be drawn again",
        ));
    }
    let dir = match &raw.output.dir {
        Some(d) if d.trim().is_empty() => {
            return Err(v.range("output.dir", "a non-empty path", format!("{d:?}")));
        }
        Some(d) => PathBuf::from(d),
        None => Path::new("results").join(&name),
    };
    Ok(ExperimentSpec {
        source: source.to_path_buf(),
        name,
        description,
        seeds,
        data,
        model,
        train,
        clip,
        privacy,
        output: OutputSpec {
            dir,
            save_model_every_evals: raw
                .output
                .save_model_every_evals
                .map(|k| v.int("output.save_model_every_evals", k, 1, i64::MAX))
                .transpose()?,
        },
        accelerated,
    })
}

/// The synthetic generators (the synthetic subset of [`DatasetName`]).
#[derive(Clone, Copy)]
enum Generator {
    GaussianMixture,
    TwoCluster,
    LogisticSynthetic,
}

/// The validation helpers, all carrying the file for error locations.
struct Checker<'a> {
    file: &'a Path,
}

type R<T> = Result<T, ConfigError>;

impl Checker<'_> {
    fn at(&self) -> Location {
        Location::file(self.file)
    }

    fn range(&self, key: &str, expected: &str, found: String) -> ConfigError {
        ConfigError::OutOfRange {
            at: self.at(),
            key: key.into(),
            expected: expected.into(),
            found,
        }
    }

    fn missing(&self, key: &str, reason: &'static str) -> ConfigError {
        ConfigError::Missing {
            at: self.at(),
            key: key.into(),
            reason,
        }
    }

    fn conflict(&self, key: &str, other: &str, reason: &str) -> ConfigError {
        ConfigError::Conflict {
            at: self.at(),
            key: key.into(),
            other: other.into(),
            reason: reason.into(),
        }
    }

    fn not_applicable(&self, key: &str, reason: String) -> ConfigError {
        ConfigError::NotApplicable {
            at: self.at(),
            key: key.into(),
            reason,
        }
    }

    /// Reject `value` when it is set: the key has no meaning here.
    fn absent<T>(&self, key: &str, value: &Option<T>, why: impl FnOnce() -> String) -> R<()> {
        match value {
            Some(_) => Err(self.not_applicable(key, why())),
            None => Ok(()),
        }
    }

    /// A finite float satisfying `ok`; `expected` describes the allowed range.
    fn float(&self, key: &str, v: f64, expected: &str, ok: impl Fn(f64) -> bool) -> R<f64> {
        if v.is_finite() && ok(v) {
            Ok(v)
        } else {
            Err(self.range(key, expected, format!("{v:?}")))
        }
    }

    fn positive(&self, key: &str, v: f64) -> R<f64> {
        self.float(key, v, "a finite number > 0", |x| x > 0.0)
    }

    /// An integer in `lo..=hi`.
    fn int(&self, key: &str, v: i64, lo: i64, hi: i64) -> R<u64> {
        if (lo..=hi).contains(&v) {
            // lo >= 0 at every call site, so the conversion cannot fail.
            u64::try_from(v).map_err(|_| self.range(key, "a non-negative integer", v.to_string()))
        } else if hi == i64::MAX {
            Err(self.range(key, &format!("an integer ≥ {lo}"), v.to_string()))
        } else {
            Err(self.range(key, &format!("an integer in {lo}..={hi}"), v.to_string()))
        }
    }

    fn size(&self, key: &str, v: i64, lo: usize, hi: usize) -> R<usize> {
        let n = self.int(key, v, lo as i64, hi as i64)?;
        usize::try_from(n).map_err(|_| self.range(key, "a smaller integer", v.to_string()))
    }

    /// At most one of two keys: both set is a `Conflict` (the caller decides about neither).
    fn at_most_one<A, B>(&self, ka: &str, a: &Option<A>, kb: &str, b: &Option<B>) -> R<()> {
        if a.is_some() && b.is_some() {
            Err(self.conflict(kb, ka, &format!("give either `{ka}` or `{kb}`, not both")))
        } else {
            Ok(())
        }
    }

    fn experiment(&self, raw: &RawConfig) -> R<(String, String, Vec<u64>)> {
        let e = &raw.experiment;
        let name = e
            .name
            .clone()
            .ok_or_else(|| self.missing("experiment.name", "every experiment needs a name"))?;
        let name_ok = !name.is_empty()
            && name.chars().count() <= 100
            && !name.starts_with('.')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !name_ok {
            return Err(self.range(
                "experiment.name",
                "1 to 100 letters, digits, `.`, `_` or `-`, not starting with `.`",
                format!("{name:?}"),
            ));
        }
        let seeds = match &e.seeds {
            None => vec![0],
            Some(RawSeeds::Count(n)) => {
                let n = self.int("experiment.seeds", *n, 1, MAX_SEEDS as i64)?;
                (0..n).collect()
            }
            Some(RawSeeds::List(list)) => {
                if list.is_empty() {
                    return Err(self.range(
                        "experiment.seeds",
                        "at least one seed",
                        "an empty list".into(),
                    ));
                }
                if list.len() > MAX_SEEDS {
                    return Err(self.range(
                        "experiment.seeds",
                        &format!("at most {MAX_SEEDS} seeds"),
                        format!("{} seeds", list.len()),
                    ));
                }
                let mut seen = BTreeSet::new();
                let mut seeds = Vec::with_capacity(list.len());
                for &s in list {
                    let s = self.int("experiment.seeds", s, 0, i64::MAX)?;
                    if !seen.insert(s) {
                        return Err(self.range(
                            "experiment.seeds",
                            "distinct seeds",
                            format!("{s} twice"),
                        ));
                    }
                    seeds.push(s);
                }
                seeds
            }
        };
        Ok((name, e.description.clone().unwrap_or_default(), seeds))
    }
}
