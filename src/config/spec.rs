//! Config room: the validated experiment spec, and `validate`, the only place values are checked.
//!
//! Owns every range check, default and combination rule of the experiment file (δ in (0, 1),
//! ε > 0, exactly one of `noise.noise_multiplier` and `privacy.epsilon`, keys that do not apply
//! to the chosen kind, ...). An [`ExperimentSpec`] is plain data: once built it is known valid,
//! so the rooms that consume it (data, model, train, privacy) never re-check its values; they
//! only build runtime objects from it. The checks that need the loaded data (a batch larger than
//! the dataset) are [`ExperimentSpec::check_against_data`]. Must not load data, build models or
//! run accountants.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::error::{ConfigError, Location};
use super::kinds::{
    AcceleratedMethodKind, BoundConstantsKind, L1SensitivityKind, LaplaceParameterKind,
};
use super::kinds::{
    Activation, AdaclipInitialStd, AdaclipVarianceScale, Architecture, ClipPolicyKind, DatasetName,
    LayerKind, LayerSplitKind, LrScheduleKind, NoiseScheduleKind, NormSource, OptimizerKind,
    SamplerKind, Standardize,
};
use super::raw::{RawAccelerated, RawNumberOrWord};
use super::raw::{
    RawConfig, RawData, RawLayer, RawLrSchedule, RawModel, RawNoise, RawPrivacy, RawSeeds,
    RawSynthetic, RawThreads, RawTrain,
};
use crate::privacy::accountant::AccountantKind;
use crate::privacy::event::NeighbouringRelation;

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

/// `[data]`: where the examples come from and how they are preprocessed.
///
/// Preprocessing order (each step fitted on the training split only): keep `classes` and
/// relabel → `subsample` → validation split → `scale` → `standardize` → PCA → `max_norm`.
#[derive(Debug, Clone, PartialEq)]
pub struct DataSpec {
    pub source: DataSource,
    /// `data.scale`: divide 8-bit pixel values by 255 (to [0, 1]).
    pub scale: bool,
    pub standardize: Standardize,
    /// `data.max_norm`: rescale all rows by one factor so that the largest row norm equals this.
    pub max_norm: Option<f64>,
    /// `data.classes`: keep these labels, relabelled 0, 1, ... in the order given.
    pub classes: Option<Vec<usize>>,
    /// `data.subsample`: keep this many training examples (drawn with the data seed stream).
    pub subsample: Option<usize>,
    /// `data.validation_fraction`: in [0, 1); held out of the training set for evaluation.
    pub validation_fraction: f64,
    /// `data.pca_components`: PCA fitted on the training data (not private; outputs say so).
    pub pca_components: Option<usize>,
}

/// Where the examples come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSource {
    /// MNIST, Fashion-MNIST, CIFAR-10 or a9a in their published file layout. `dir: None` is the
    /// data room's default location (`$DPX_DATA_DIR/<name>` or `data/<name>`).
    Standard {
        dataset: DatasetName,
        dir: Option<PathBuf>,
    },
    /// A LIBSVM text file.
    Libsvm { path: PathBuf, test: TestSet },
    /// A CSV file of numbers: one label column, the other columns features.
    Csv {
        path: PathBuf,
        test: TestSet,
        /// 0-based index of the label column.
        label_column: usize,
        /// Whether the first line is a header to skip.
        header: bool,
    },
    /// Generated from `seed` (the same data for every run seed).
    Synthetic(SyntheticSpec),
}

impl DataSource {
    /// The `data.dataset` name.
    pub fn dataset(&self) -> DatasetName {
        match self {
            DataSource::Standard { dataset, .. } => *dataset,
            DataSource::Libsvm { .. } => DatasetName::Libsvm,
            DataSource::Csv { .. } => DatasetName::Csv,
            DataSource::Synthetic(s) => s.dataset(),
        }
    }
}

/// The test set of a generic file dataset.
#[derive(Debug, Clone, PartialEq)]
pub enum TestSet {
    /// `data.test_path`.
    File(PathBuf),
    /// `data.test_fraction` of the file held out (with the data seed stream).
    Fraction(f64),
}

/// `[data.synthetic]`, per generator.
#[derive(Debug, Clone, PartialEq)]
pub enum SyntheticSpec {
    /// k classes, class means at the vertices of a regular simplex with edge `separation`,
    /// identity covariance, balanced classes.
    GaussianMixture {
        n_train: usize,
        n_test: usize,
        n_features: usize,
        n_classes: usize,
        separation: f64,
        seed: u64,
    },
    /// Two linearly separable clusters in the hypercube at Euclidean distance `separation`
    /// (dynamic-noise paper, §5: D = 100, distance 10, N = 1000).
    TwoCluster {
        n_train: usize,
        n_test: usize,
        n_features: usize,
        separation: f64,
        seed: u64,
    },
    /// u ~ U[0,1]^d, w ~ N(0, I), label sign(u·w) (accelerated-methods paper, §5: n = 1e5, d = 20).
    LogisticSynthetic {
        n_train: usize,
        n_test: usize,
        n_features: usize,
        seed: u64,
    },
}

impl SyntheticSpec {
    /// The `data.dataset` name.
    pub fn dataset(&self) -> DatasetName {
        match self {
            SyntheticSpec::GaussianMixture { .. } => DatasetName::GaussianMixture,
            SyntheticSpec::TwoCluster { .. } => DatasetName::TwoCluster,
            SyntheticSpec::LogisticSynthetic { .. } => DatasetName::LogisticSynthetic,
        }
    }
}

/// `[model]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub architecture: ModelArchitecture,
    /// `model.l2`: coefficient λ of the penalty (λ/2)‖θ‖² added to the mean loss; ≥ 0.
    pub l2: f64,
}

/// The network. The output layer (one unit per class, or one logit for two classes with
/// `Logistic`) is always added by the model room; the lists here are the hidden part.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelArchitecture {
    Logistic,
    Mlp {
        hidden: Vec<usize>,
        activation: Activation,
    },
    /// Explicit layers, then the output dense layer. A dense layer after a spatial layer
    /// flattens its input.
    Cnn {
        layers: Vec<LayerSpec>,
    },
    MnistCnn,
    CifarCnn,
}

impl ModelArchitecture {
    /// The `model.architecture` name.
    pub fn kind(&self) -> Architecture {
        match self {
            ModelArchitecture::Logistic => Architecture::Logistic,
            ModelArchitecture::Mlp { .. } => Architecture::Mlp,
            ModelArchitecture::Cnn { .. } => Architecture::Cnn,
            ModelArchitecture::MnistCnn => Architecture::MnistCnn,
            ModelArchitecture::CifarCnn => Architecture::CifarCnn,
        }
    }
}

/// One layer of an explicit CNN (`[[model.layers]]`).
#[derive(Debug, Clone, PartialEq)]
pub enum LayerSpec {
    Conv2d {
        out_channels: usize,
        kernel_size: usize,
        stride: usize,
        padding: usize,
    },
    MaxPool2d {
        kernel_size: usize,
        stride: usize,
    },
    AvgPool2d {
        kernel_size: usize,
        stride: usize,
    },
    Flatten,
    Dense {
        out_features: usize,
    },
    Relu,
    Tanh,
}

/// `[train]`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainSpec {
    pub length: TrainLength,
    pub sampler: Sampler,
    pub optimizer: OptimizerSpec,
    /// `train.learning_rate`: η_0 > 0.
    pub learning_rate: f64,
    pub lr_schedule: LrSchedule,
    /// `train.eval_every_epochs` / `train.eval_every_steps`.
    pub eval_every: Every,
    pub threads: Threads,
    /// `train.eval_train_set`: also evaluate on the whole training set at every evaluation.
    pub eval_train_set: bool,
}

/// `train.epochs` or `train.steps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainLength {
    Epochs(u64),
    Steps(u64),
}

/// A period counted in epochs or in steps (evaluation, learning-rate decay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    Epochs(u64),
    Steps(u64),
}

/// `train.sampler` with its batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampler {
    /// Sample rate q = expected_batch_size / n; noisy sums are divided by expected_batch_size.
    Poisson {
        expected_batch_size: usize,
    },
    Shuffle {
        batch_size: usize,
    },
    FixedSize {
        batch_size: usize,
    },
}

impl Sampler {
    /// The kind of sampler.
    pub fn kind(&self) -> SamplerKind {
        match self {
            Sampler::Poisson { .. } => SamplerKind::Poisson,
            Sampler::Shuffle { .. } => SamplerKind::Shuffle,
            Sampler::FixedSize { .. } => SamplerKind::FixedSize,
        }
    }

    /// The (expected, for Poisson) batch size: the divisor of the noisy gradient sum.
    pub fn batch_size(&self) -> usize {
        match *self {
            Sampler::Poisson {
                expected_batch_size,
            } => expected_batch_size,
            Sampler::Shuffle { batch_size } | Sampler::FixedSize { batch_size } => batch_size,
        }
    }

    /// The TOML key holding the batch size for this sampler.
    pub fn batch_key(&self) -> &'static str {
        match self {
            Sampler::Poisson { .. } => "train.expected_batch_size",
            Sampler::Shuffle { .. } | Sampler::FixedSize { .. } => "train.batch_size",
        }
    }
}

/// `train.optimizer` with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptimizerSpec {
    Sgd,
    /// v ← μ·v + g; θ ← θ − η_t·v (PyTorch's SGD momentum, dampening 0). μ in [0, 1).
    Momentum {
        momentum: f64,
    },
    /// v ← β v + (1 − β) g, θ ← θ − η_t v/(1 − β^k) (dynamic-noise paper). β in [0, 1).
    BiasCorrectedMomentum {
        beta: f64,
    },
    /// AdaGrad-norm: θ ← θ − (η_t / b_{k+1}) g, b_{k+1}² = b_k² + max(β_k ‖g‖², ν).
    AdagradNorm {
        b0_sq: f64,
        nu: f64,
        beta: f64,
        beta_period: Option<u64>,
        norm_source: NormSource,
    },
    /// Adam with bias correction (Kingma & Ba 2015, Alg. 1; PyTorch's `torch.optim.Adam`):
    /// m ← β1 m + (1 − β1) g, v ← β2 v + (1 − β2) g², θ ← θ − η m̂/(√v̂ + ε̂).
    Adam {
        beta1: f64,
        beta2: f64,
        stability_constant: f64,
    },
}

impl OptimizerSpec {
    /// The kind of optimizer.
    pub fn kind(&self) -> OptimizerKind {
        match self {
            OptimizerSpec::Sgd => OptimizerKind::Sgd,
            OptimizerSpec::Momentum { .. } => OptimizerKind::Momentum,
            OptimizerSpec::BiasCorrectedMomentum { .. } => OptimizerKind::BiasCorrectedMomentum,
            OptimizerSpec::AdagradNorm { .. } => OptimizerKind::AdagradNorm,
            OptimizerSpec::Adam { .. } => OptimizerKind::Adam,
        }
    }
}

/// `[train.lr_schedule]`: η_t as a pure function of the 0-based step t, with η_0 =
/// `train.learning_rate`, T the planned number of steps and E the steps per epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LrSchedule {
    /// η_t = η_0.
    Constant,
    /// η_t = η_0 · factor^⌊t / P⌋ with P the period in steps (`every` converted with E).
    Step { factor: f64, every: Every },
    /// η_t = η_0 · factor^(t / P): the continuous version of `Step`.
    Exponential { factor: f64, every: Every },
    /// η_t = η_end + (η_0 − η_end)·(1 + cos(π t / T)) / 2.
    Cosine { final_learning_rate: f64 },
    /// η_t = η_0 / √(a + c·t) (ADP-SGD paper, schedules S1/S4: a = 20 or 2, c = 1).
    InvSqrt { a: f64, c: f64 },
    /// η_t = η_0 − (η_0 − η_end)·√(t / T) (ADP-SGD paper, schedule S2), so η_T = η_end.
    SqrtToZero { final_learning_rate: f64 },
}

impl LrSchedule {
    /// The kind of schedule.
    pub fn kind(&self) -> LrScheduleKind {
        match self {
            LrSchedule::Constant => LrScheduleKind::Constant,
            LrSchedule::Step { .. } => LrScheduleKind::Step,
            LrSchedule::Exponential { .. } => LrScheduleKind::Exponential,
            LrSchedule::Cosine { .. } => LrScheduleKind::Cosine,
            LrSchedule::InvSqrt { .. } => LrScheduleKind::InvSqrt,
            LrSchedule::SqrtToZero { .. } => LrScheduleKind::SqrtToZero,
        }
    }
}

/// `train.threads`: worker threads for the seeds (results never depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// All available cores.
    Auto,
    Count(usize),
}

/// `[clip]`: the clipping policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClipSpec {
    /// No clipping (non-private runs only).
    None,
    /// g_i ← g_i · min(1, C / ‖g_i‖) with C = `clip_norm` (Abadi et al. 2016, Alg. 1).
    Flat { clip_norm: f64 },
    /// Group k clipped to C_k, Σ_k C_k² = `clip_norm`² (`privacy::clip::per_layer`).
    PerLayer {
        clip_norm: f64,
        split: LayerSplitKind,
    },
    /// Flat clipping at C_t = `clip_norm`·`final_ratio`^(t/T) (Du et al. 2021).
    Decay { clip_norm: f64, final_ratio: f64 },
    /// g_i/(‖g_i‖ + γ), sensitivity 1 (Bu et al.).
    Automatic { gamma: f64 },
    /// Andrew et al. 2021: C_0 = `initial_clip_norm`, geometric update toward `target_quantile`.
    Quantile {
        initial_clip_norm: f64,
        target_quantile: f64,
        learning_rate: f64,
        count_noise_std: f64,
    },
    /// AdaCliP (Pichapati et al. 2019).
    Adaclip {
        gamma: f64,
        beta1: f64,
        beta2: f64,
        h1: f64,
        h2: f64,
        initial_std: AdaclipInitialStd,
        variance_scale: AdaclipVarianceScale,
    },
    /// DC-SGD-P (`percentile: Some(p)`) or DC-SGD-E (`None`).
    Dcsgd {
        initial_clip_norm: f64,
        percentile: Option<f64>,
        bins: usize,
        histogram_noise_multiplier: f64,
        initial_range: f64,
    },
}

impl ClipSpec {
    /// The kind of policy.
    pub fn kind(&self) -> ClipPolicyKind {
        match self {
            ClipSpec::None => ClipPolicyKind::None,
            ClipSpec::Flat { .. } => ClipPolicyKind::Flat,
            ClipSpec::PerLayer { .. } => ClipPolicyKind::PerLayer,
            ClipSpec::Decay { .. } => ClipPolicyKind::Decay,
            ClipSpec::Automatic { .. } => ClipPolicyKind::Automatic,
            ClipSpec::Quantile { .. } => ClipPolicyKind::Quantile,
            ClipSpec::Adaclip { .. } => ClipPolicyKind::Adaclip,
            ClipSpec::Dcsgd {
                percentile: Some(_),
                ..
            } => ClipPolicyKind::DcsgdP,
            ClipSpec::Dcsgd {
                percentile: None, ..
            } => ClipPolicyKind::DcsgdE,
        }
    }
}

/// `[noise]` schedule: σ_t = κ·s_t with s_t the shape and κ given or calibrated (the formulas
/// are in `privacy::schedule`; T is the planned number of steps).
#[derive(Debug, Clone, PartialEq)]
pub enum NoiseSchedule {
    /// s_t = 1: σ_t = κ at every step.
    Constant,
    /// ADP-SGD (docs/methods/adp_sgd.md §1.1): α_{t+1}² = (η_0/η_t)^p, s_t = α_{t+1}. `power` p in [0, 4].
    Adp { power: f64 },
    /// ADP-SGD with AdaGrad-norm (docs/methods/adp_sgd.md §1.2 S5): s_t = (b_0² + (t+1)·C)^{1/4}.
    AdpAdagrad { b0_sq: f64, c_alpha: f64 },
    /// s_t = e^{−decay·t}.
    Exponential { decay: f64 },
    /// s_t = factor^⌊t / P⌋.
    Step { factor: f64, every: Every },
    /// s_t = 1/(1 + decay·t).
    TimeDecay { decay: f64 },
    /// s_t = (1 − end_ratio)(1 − min(t, P)/P)^power + end_ratio.
    Polynomial {
        end_ratio: f64,
        power: f64,
        every: Every,
    },
    /// Influence-optimal for GD under PL (docs/methods/dynamic_noise.md §1.2(c)): s_t = γ^{(t+1−T)/4}.
    InfluenceGd { gamma: f64 },
    /// Influence-optimal for momentum (docs/methods/dynamic_noise.md §1.2(e)), β < γ.
    InfluenceMomentum { gamma: f64, beta: f64 },
    /// Per-step values from `noise.path` or `noise.values` (σ_t = κ·value_t).
    File {
        path: Option<PathBuf>,
        values: std::sync::Arc<[f64]>,
    },
}

impl NoiseSchedule {
    /// The kind of schedule.
    pub fn kind(&self) -> NoiseScheduleKind {
        match self {
            NoiseSchedule::Constant => NoiseScheduleKind::Constant,
            NoiseSchedule::Adp { .. } => NoiseScheduleKind::Adp,
            NoiseSchedule::AdpAdagrad { .. } => NoiseScheduleKind::AdpAdagrad,
            NoiseSchedule::Exponential { .. } => NoiseScheduleKind::Exponential,
            NoiseSchedule::Step { .. } => NoiseScheduleKind::Step,
            NoiseSchedule::TimeDecay { .. } => NoiseScheduleKind::TimeDecay,
            NoiseSchedule::Polynomial { .. } => NoiseScheduleKind::Polynomial,
            NoiseSchedule::InfluenceGd { .. } => NoiseScheduleKind::InfluenceGd,
            NoiseSchedule::InfluenceMomentum { .. } => NoiseScheduleKind::InfluenceMomentum,
            NoiseSchedule::File { .. } => NoiseScheduleKind::File,
        }
    }
}

/// `[privacy]` (with `[noise]`) of a private run.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivacySpec {
    /// `privacy.delta`, in (0, 1).
    pub delta: f64,
    pub budget: Budget,
    pub noise_schedule: NoiseSchedule,
    /// `privacy.accountant` (default `rdp`).
    pub accountant: AccountantKind,
    /// `privacy.neighbouring` (default `add_or_remove_one`).
    pub neighbouring: NeighbouringRelation,
    /// `privacy.secure_noise`: draw noise from a cryptographic RNG.
    pub secure_noise: bool,
    /// `noise.round_digits`: σ_t rounded DOWN to this many significant digits (conservative;
    /// fewer distinct events, faster accounting). `None`: σ_t exactly.
    pub round_digits: Option<u32>,
}

/// How the noise scale and the privacy budget relate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// `privacy.epsilon` given: the noise scale κ is calibrated before training so the whole
    /// planned run spends ε at `delta` under the accountant.
    Calibrated { epsilon: f64 },
    /// `noise.noise_multiplier` given: κ = noise_multiplier; the ε spent is reported.
    NoiseMultiplier { noise_multiplier: f64 },
    /// `privacy.stop_when_spent = true`: κ = noise_multiplier and training stops before the step
    /// that would take the spent ε above `epsilon` (the planned length is then a maximum).
    UntilSpent { noise_multiplier: f64, epsilon: f64 },
}

/// `[output]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    /// `output.dir` (default `results/<experiment.name>`).
    pub dir: PathBuf,
}

impl ExperimentSpec {
    /// The number of steps the run plans: `train.steps`, or ⌈epochs · n_train / batch⌉ where
    /// batch is the (expected) batch size. Saturates at `u64::MAX`.
    pub fn planned_steps(&self, n_train: usize) -> u64 {
        match self.train.length {
            TrainLength::Steps(s) => s,
            TrainLength::Epochs(e) => {
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
            ModelArchitecture::CifarCnn => Some((3072, "3×32×32")),
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
    if data.pca_components.is_some()
        && matches!(
            model.architecture,
            ModelArchitecture::Cnn { .. }
                | ModelArchitecture::MnistCnn
                | ModelArchitecture::CifarCnn
        )
    {
        return Err(v.conflict(
            "data.pca_components",
            "model.architecture",
            "PCA turns images into plain vectors; a CNN needs images",
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
    let clip = v.clip(raw, privacy_enabled)?;
    let privacy = v.privacy(raw, privacy_enabled)?;
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
        output: OutputSpec { dir },
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

    fn data(&self, d: &RawData) -> R<DataSpec> {
        let dataset = d.dataset.ok_or_else(|| {
            self.missing(
                "data.dataset",
                "name a dataset (e.g. \"mnist\" or \"gaussian_mixture\")",
            )
        })?;
        let name = dataset.name();
        let only_for = |what: &'static str| {
            move || format!("only used with {what}; data.dataset is \"{name}\"")
        };
        if !dataset.is_generic_file() {
            self.absent("data.test_path", &d.test_path, only_for("libsvm and csv"))?;
            self.absent(
                "data.test_fraction",
                &d.test_fraction,
                only_for("libsvm and csv"),
            )?;
        }
        if dataset != DatasetName::Csv {
            self.absent("data.label_column", &d.label_column, only_for("csv"))?;
            self.absent("data.header", &d.header, only_for("csv"))?;
        }
        if !dataset.is_synthetic() {
            self.absent(
                "data.synthetic",
                &d.synthetic,
                only_for("the synthetic datasets"),
            )?;
        }
        let nonempty_path = |key: &str, p: &String| -> R<PathBuf> {
            if p.trim().is_empty() {
                Err(self.range(key, "a non-empty path", format!("{p:?}")))
            } else {
                Ok(PathBuf::from(p))
            }
        };
        let test_set = || -> R<TestSet> {
            self.at_most_one(
                "data.test_path",
                &d.test_path,
                "data.test_fraction",
                &d.test_fraction,
            )?;
            match (&d.test_path, d.test_fraction) {
                (Some(p), _) => Ok(TestSet::File(nonempty_path("data.test_path", p)?)),
                (None, f) => Ok(TestSet::Fraction(self.float(
                    "data.test_fraction",
                    f.unwrap_or(0.2),
                    "a fraction in (0, 1)",
                    |x| x > 0.0 && x < 1.0,
                )?)),
            }
        };
        let required_path = || -> R<PathBuf> {
            let p = d.path.as_ref().ok_or_else(|| {
                self.missing("data.path", "libsvm and csv datasets need the file's path")
            })?;
            nonempty_path("data.path", p)
        };
        let source = match dataset {
            DatasetName::Mnist
            | DatasetName::FashionMnist
            | DatasetName::Cifar10
            | DatasetName::A9a => DataSource::Standard {
                dataset,
                dir: d
                    .path
                    .as_ref()
                    .map(|p| nonempty_path("data.path", p))
                    .transpose()?,
            },
            DatasetName::Libsvm => DataSource::Libsvm {
                path: required_path()?,
                test: test_set()?,
            },
            DatasetName::Csv => DataSource::Csv {
                path: required_path()?,
                test: test_set()?,
                label_column: self.size(
                    "data.label_column",
                    d.label_column.unwrap_or(0),
                    0,
                    1_000_000,
                )?,
                header: d.header.unwrap_or(false),
            },
            DatasetName::GaussianMixture => {
                self.absent("data.path", &d.path, only_for("file datasets"))?;
                DataSource::Synthetic(
                    self.synthetic(Generator::GaussianMixture, d.synthetic.as_ref())?,
                )
            }
            DatasetName::TwoCluster => {
                self.absent("data.path", &d.path, only_for("file datasets"))?;
                DataSource::Synthetic(self.synthetic(Generator::TwoCluster, d.synthetic.as_ref())?)
            }
            DatasetName::LogisticSynthetic => {
                self.absent("data.path", &d.path, only_for("file datasets"))?;
                DataSource::Synthetic(
                    self.synthetic(Generator::LogisticSynthetic, d.synthetic.as_ref())?,
                )
            }
        };
        let standardize = d.standardize.unwrap_or(Standardize::None);
        if standardize == Standardize::PerChannel && !dataset.is_image() {
            return Err(self.not_applicable(
                "data.standardize",
                format!("\"per_channel\" needs an image dataset; data.dataset is \"{name}\""),
            ));
        }
        let max_norm = d
            .max_norm
            .map(|m| self.positive("data.max_norm", m))
            .transpose()?;
        let classes = match &d.classes {
            None => None,
            Some(list) => {
                if list.len() < 2 {
                    return Err(self.range(
                        "data.classes",
                        "at least two class labels",
                        format!("{} label(s)", list.len()),
                    ));
                }
                let mut seen = BTreeSet::new();
                let mut out = Vec::with_capacity(list.len());
                for &c in list {
                    let c = self.size("data.classes", c, 0, MAX_WIDTH)?;
                    if !seen.insert(c) {
                        return Err(self.range(
                            "data.classes",
                            "distinct class labels",
                            format!("{c} twice"),
                        ));
                    }
                    out.push(c);
                }
                Some(out)
            }
        };
        let subsample = d
            .subsample
            .map(|s| self.size("data.subsample", s, 1, 1_000_000_000))
            .transpose()?;
        let validation_fraction = self.float(
            "data.validation_fraction",
            d.validation_fraction.unwrap_or(0.0),
            "a fraction in [0, 1)",
            |x| (0.0..1.0).contains(&x),
        )?;
        let pca_components = d
            .pca_components
            .map(|k| self.size("data.pca_components", k, 1, MAX_WIDTH))
            .transpose()?;
        Ok(DataSpec {
            source,
            scale: d.scale.unwrap_or(dataset.is_image()),
            standardize,
            max_norm,
            classes,
            subsample,
            validation_fraction,
            pca_components,
        })
    }

    fn synthetic(&self, generator: Generator, s: Option<&RawSynthetic>) -> R<SyntheticSpec> {
        let empty = RawSynthetic::default();
        let s = s.unwrap_or(&empty);
        // Defaults per generator: the papers' sizes where the generator comes from a paper
        // (dynamic-noise §5: N = 1000, D = 100; accelerated methods §5: n = 1e5, d = 20).
        let (name, n_train, n_test, n_features) = match generator {
            Generator::GaussianMixture => ("gaussian_mixture", 10_000, 2_000, 20),
            Generator::TwoCluster => ("two_cluster", 1000, 1000, 100),
            Generator::LogisticSynthetic => ("logistic_synthetic", 100_000, 10_000, 20),
        };
        let n_train = self.size(
            "data.synthetic.n_train",
            s.n_train.unwrap_or(n_train),
            1,
            MAX_SYNTHETIC_EXAMPLES,
        )?;
        let n_test = self.size(
            "data.synthetic.n_test",
            s.n_test.unwrap_or(n_test),
            1,
            MAX_SYNTHETIC_EXAMPLES,
        )?;
        let n_features = self.size(
            "data.synthetic.n_features",
            s.n_features.unwrap_or(n_features),
            1,
            MAX_WIDTH,
        )?;
        if (n_train + n_test).saturating_mul(n_features) > MAX_SYNTHETIC_CELLS {
            return Err(self.range(
                "data.synthetic.n_features",
                &format!("(n_train + n_test) × n_features ≤ {MAX_SYNTHETIC_CELLS}"),
                format!("({n_train} + {n_test}) × {n_features}"),
            ));
        }
        let seed = self.int("data.synthetic.seed", s.seed.unwrap_or(0), 0, i64::MAX)?;
        let separation = |default: f64| {
            self.positive("data.synthetic.separation", s.separation.unwrap_or(default))
        };
        Ok(match generator {
            Generator::GaussianMixture => {
                let n_classes = self.size(
                    "data.synthetic.n_classes",
                    s.n_classes.unwrap_or(2),
                    2,
                    1000,
                )?;
                if n_features + 1 < n_classes {
                    return Err(self.range(
                        "data.synthetic.n_classes",
                        "at most n_features + 1 classes (the means form a regular simplex)",
                        n_classes.to_string(),
                    ));
                }
                SyntheticSpec::GaussianMixture {
                    n_train,
                    n_test,
                    n_features,
                    n_classes,
                    separation: separation(4.0)?,
                    seed,
                }
            }
            Generator::TwoCluster => {
                self.absent("data.synthetic.n_classes", &s.n_classes, || {
                    format!("\"{name}\" always has two classes")
                })?;
                SyntheticSpec::TwoCluster {
                    n_train,
                    n_test,
                    n_features,
                    separation: separation(10.0)?,
                    seed,
                }
            }
            Generator::LogisticSynthetic => {
                self.absent("data.synthetic.n_classes", &s.n_classes, || {
                    format!("\"{name}\" always has two classes")
                })?;
                self.absent("data.synthetic.separation", &s.separation, || {
                    format!("\"{name}\" has no separation parameter")
                })?;
                SyntheticSpec::LogisticSynthetic {
                    n_train,
                    n_test,
                    n_features,
                    seed,
                }
            }
        })
    }

    fn model(&self, m: &RawModel) -> R<ModelSpec> {
        let arch = m.architecture.ok_or_else(|| {
            self.missing(
                "model.architecture",
                "choose logistic, mlp, cnn, mnist_cnn or cifar_cnn",
            )
        })?;
        let name = arch.name();
        let only = |what: &'static str| {
            move || format!("only used with {what}; model.architecture is \"{name}\"")
        };
        if arch != Architecture::Mlp {
            self.absent("model.hidden", &m.hidden, only("mlp"))?;
            self.absent("model.activation", &m.activation, only("mlp"))?;
        }
        if arch != Architecture::Cnn {
            self.absent("model.layers", &m.layers, only("cnn"))?;
        }
        let architecture = match arch {
            Architecture::Logistic => ModelArchitecture::Logistic,
            Architecture::MnistCnn => ModelArchitecture::MnistCnn,
            Architecture::CifarCnn => ModelArchitecture::CifarCnn,
            Architecture::Mlp => {
                let hidden = m.hidden.as_ref().ok_or_else(|| {
                    self.missing(
                        "model.hidden",
                        "an mlp needs its hidden sizes, e.g. [512, 512]",
                    )
                })?;
                if hidden.is_empty() || hidden.len() > 64 {
                    return Err(self.range(
                        "model.hidden",
                        "1 to 64 hidden sizes",
                        format!("{} sizes", hidden.len()),
                    ));
                }
                let hidden = hidden
                    .iter()
                    .map(|&h| self.size("model.hidden", h, 1, MAX_WIDTH))
                    .collect::<R<Vec<_>>>()?;
                ModelArchitecture::Mlp {
                    hidden,
                    activation: m.activation.unwrap_or(Activation::Relu),
                }
            }
            Architecture::Cnn => {
                let layers = m.layers.as_ref().ok_or_else(|| {
                    self.missing("model.layers", "a cnn needs its [[model.layers]] list")
                })?;
                if layers.is_empty() || layers.len() > 1024 {
                    return Err(self.range(
                        "model.layers",
                        "1 to 1024 layers",
                        format!("{} layers", layers.len()),
                    ));
                }
                let layers = layers
                    .iter()
                    .enumerate()
                    .map(|(i, l)| self.layer(i, l))
                    .collect::<R<Vec<_>>>()?;
                ModelArchitecture::Cnn { layers }
            }
        };
        let l2 = self.float(
            "model.l2",
            m.l2.unwrap_or(0.0),
            "a finite number ≥ 0",
            |x| x >= 0.0,
        )?;
        Ok(ModelSpec { architecture, l2 })
    }

    fn layer(&self, i: usize, l: &RawLayer) -> R<LayerSpec> {
        let key = |k: &str| format!("model.layers[{i}].{k}");
        let kind = l
            .kind
            .ok_or_else(|| self.missing(&key("kind"), "every layer needs a kind"))?;
        let why = || format!("not a parameter of a {} layer", kind.name());
        let need = |k: &str, v: Option<i64>, lo: usize, hi: usize| -> R<usize> {
            let v = v.ok_or_else(|| ConfigError::Missing {
                at: self.at(),
                key: key(k),
                reason: "required for this layer kind",
            })?;
            self.size(&key(k), v, lo, hi)
        };
        let opt = |k: &str, v: Option<i64>, default: usize, lo: usize, hi: usize| -> R<usize> {
            match v {
                Some(v) => self.size(&key(k), v, lo, hi),
                None => Ok(default),
            }
        };
        let uses = |out_channels: bool, kernel: bool, padding: bool, out_features: bool| -> R<()> {
            if !out_channels {
                self.absent(&key("out_channels"), &l.out_channels, why)?;
            }
            if !kernel {
                self.absent(&key("kernel_size"), &l.kernel_size, why)?;
                self.absent(&key("stride"), &l.stride, why)?;
            }
            if !padding {
                self.absent(&key("padding"), &l.padding, why)?;
            }
            if !out_features {
                self.absent(&key("out_features"), &l.out_features, why)?;
            }
            Ok(())
        };
        Ok(match kind {
            LayerKind::Conv2d => {
                uses(true, true, true, false)?;
                LayerSpec::Conv2d {
                    out_channels: need("out_channels", l.out_channels, 1, MAX_WIDTH)?,
                    kernel_size: need("kernel_size", l.kernel_size, 1, 64)?,
                    stride: opt("stride", l.stride, 1, 1, 64)?,
                    padding: opt("padding", l.padding, 0, 0, 64)?,
                }
            }
            LayerKind::MaxPool2d | LayerKind::AvgPool2d => {
                uses(false, true, false, false)?;
                let kernel_size = need("kernel_size", l.kernel_size, 1, 64)?;
                let stride = opt("stride", l.stride, kernel_size, 1, 64)?;
                if kind == LayerKind::MaxPool2d {
                    LayerSpec::MaxPool2d {
                        kernel_size,
                        stride,
                    }
                } else {
                    LayerSpec::AvgPool2d {
                        kernel_size,
                        stride,
                    }
                }
            }
            LayerKind::Dense => {
                uses(false, false, false, true)?;
                LayerSpec::Dense {
                    out_features: need("out_features", l.out_features, 1, MAX_WIDTH)?,
                }
            }
            LayerKind::Flatten => {
                uses(false, false, false, false)?;
                LayerSpec::Flatten
            }
            LayerKind::Relu => {
                uses(false, false, false, false)?;
                LayerSpec::Relu
            }
            LayerKind::Tanh => {
                uses(false, false, false, false)?;
                LayerSpec::Tanh
            }
        })
    }

    fn train(&self, t: &RawTrain) -> R<TrainSpec> {
        let length = match (t.epochs, t.steps) {
            (Some(_), Some(_)) => {
                return Err(self.conflict(
                    "train.steps",
                    "train.epochs",
                    "give either `train.epochs` or `train.steps`, not both",
                ));
            }
            (Some(e), None) => TrainLength::Epochs(self.int("train.epochs", e, 1, 1_000_000)?),
            (None, Some(s)) => {
                TrainLength::Steps(self.int("train.steps", s, 1, MAX_STEPS as i64)?)
            }
            (None, None) => {
                return Err(self.missing("train.epochs", "give `train.epochs` or `train.steps`"));
            }
        };
        let kind = t.sampler.unwrap_or(SamplerKind::Poisson);
        let batch = |key: &str, v: i64| self.size(key, v, 1, 100_000_000);
        let sampler = match kind {
            SamplerKind::Poisson => {
                self.at_most_one(
                    "train.batch_size",
                    &t.batch_size,
                    "train.expected_batch_size",
                    &t.expected_batch_size,
                )?;
                let expected_batch_size = match (t.expected_batch_size, t.batch_size) {
                    (Some(b), _) => batch("train.expected_batch_size", b)?,
                    (None, Some(b)) => batch("train.batch_size", b)?,
                    (None, None) => {
                        return Err(self.missing(
                            "train.expected_batch_size",
                            "Poisson sampling needs an expected batch size",
                        ));
                    }
                };
                Sampler::Poisson {
                    expected_batch_size,
                }
            }
            SamplerKind::Shuffle | SamplerKind::FixedSize => {
                self.absent("train.expected_batch_size", &t.expected_batch_size, || {
                    format!(
                        "only used with sampler = \"poisson\"; use `train.batch_size` with \"{}\"",
                        kind.name()
                    )
                })?;
                let b = t.batch_size.ok_or_else(|| {
                    self.missing("train.batch_size", "the sampler needs a batch size")
                })?;
                let batch_size = batch("train.batch_size", b)?;
                if kind == SamplerKind::Shuffle {
                    Sampler::Shuffle { batch_size }
                } else {
                    Sampler::FixedSize { batch_size }
                }
            }
        };
        let opt_kind = t.optimizer.unwrap_or(OptimizerKind::Sgd);
        if !matches!(
            opt_kind,
            OptimizerKind::Momentum | OptimizerKind::BiasCorrectedMomentum
        ) {
            self.absent("train.momentum", &t.momentum, || {
                "only used with optimizer = \"momentum\" or \"bias_corrected_momentum\"".into()
            })?;
        }
        if opt_kind != OptimizerKind::AdagradNorm {
            self.absent("train.adagrad_norm", &t.adagrad_norm, || {
                "only used with optimizer = \"adagrad_norm\"".into()
            })?;
        }
        if opt_kind != OptimizerKind::Adam {
            self.absent("train.adam", &t.adam, || {
                "only used with optimizer = \"adam\"".into()
            })?;
        }
        let momentum = || {
            self.float(
                "train.momentum",
                t.momentum.unwrap_or(0.9),
                "a number in [0, 1)",
                |x| (0.0..1.0).contains(&x),
            )
        };
        let optimizer = match opt_kind {
            OptimizerKind::Sgd => OptimizerSpec::Sgd,
            OptimizerKind::Momentum => OptimizerSpec::Momentum {
                momentum: momentum()?,
            },
            OptimizerKind::BiasCorrectedMomentum => {
                OptimizerSpec::BiasCorrectedMomentum { beta: momentum()? }
            }
            OptimizerKind::AdagradNorm => {
                let a = t.adagrad_norm.clone().unwrap_or_default();
                OptimizerSpec::AdagradNorm {
                    b0_sq: self.positive("train.adagrad_norm.b0_sq", a.b0_sq.unwrap_or(20.0))?,
                    nu: self.positive("train.adagrad_norm.nu", a.nu.unwrap_or(1e-5))?,
                    beta: self.positive("train.adagrad_norm.beta", a.beta.unwrap_or(1.0))?,
                    beta_period: a
                        .beta_period
                        .map(|p| self.int("train.adagrad_norm.beta_period", p, 1, i64::MAX))
                        .transpose()?,
                    norm_source: a.norm_source.unwrap_or(NormSource::Noisy),
                }
            }
            OptimizerKind::Adam => {
                let a = t.adam.clone().unwrap_or_default();
                let beta = |key: &str, v: f64| {
                    self.float(key, v, "a number in [0, 1)", |x| (0.0..1.0).contains(&x))
                };
                OptimizerSpec::Adam {
                    beta1: beta("train.adam.beta1", a.beta1.unwrap_or(0.9))?,
                    beta2: beta("train.adam.beta2", a.beta2.unwrap_or(0.999))?,
                    stability_constant: self.positive(
                        "train.adam.stability_constant",
                        a.stability_constant.unwrap_or(1e-8),
                    )?,
                }
            }
        };
        let learning_rate = t.learning_rate.ok_or_else(|| {
            self.missing("train.learning_rate", "give the (initial) learning rate")
        })?;
        let learning_rate = self.positive("train.learning_rate", learning_rate)?;
        let lr_schedule = self.lr_schedule(t.lr_schedule.as_ref(), learning_rate)?;
        let eval_every = self
            .every(
                "train.eval_every_epochs",
                t.eval_every_epochs,
                "train.eval_every_steps",
                t.eval_every_steps,
            )?
            .unwrap_or(Every::Epochs(1));
        let threads = match &t.threads {
            None | Some(RawThreads::Auto(_)) => Threads::Auto,
            Some(RawThreads::Count(n)) => {
                Threads::Count(self.size("train.threads", *n, 1, 1024)?)
            }
        };
        Ok(TrainSpec {
            length,
            sampler,
            optimizer,
            learning_rate,
            lr_schedule,
            eval_every,
            threads,
            eval_train_set: t.eval_train_set.unwrap_or(false),
        })
    }

    /// At most one of a pair of `*_epochs` / `*_steps` keys, each ≥ 1.
    fn every(&self, ke: &str, e: Option<i64>, ks: &str, s: Option<i64>) -> R<Option<Every>> {
        self.at_most_one(ke, &e, ks, &s)?;
        Ok(match (e, s) {
            (Some(e), _) => Some(Every::Epochs(self.int(ke, e, 1, i64::MAX)?)),
            (None, Some(s)) => Some(Every::Steps(self.int(ks, s, 1, i64::MAX)?)),
            (None, None) => None,
        })
    }

    fn lr_schedule(&self, s: Option<&RawLrSchedule>, lr: f64) -> R<LrSchedule> {
        let empty = RawLrSchedule::default();
        let s = s.unwrap_or(&empty);
        let kind = s.kind.unwrap_or(LrScheduleKind::Constant);
        let k = |name: &str| format!("train.lr_schedule.{name}");
        let why = || {
            format!(
                "not a parameter of the \"{}\" learning-rate schedule",
                kind.name()
            )
        };
        let uses_factor = matches!(kind, LrScheduleKind::Step | LrScheduleKind::Exponential);
        let uses_final = matches!(kind, LrScheduleKind::Cosine | LrScheduleKind::SqrtToZero);
        let uses_ac = kind == LrScheduleKind::InvSqrt;
        if !uses_factor {
            self.absent(&k("factor"), &s.factor, why)?;
            self.absent(&k("every_epochs"), &s.every_epochs, why)?;
            self.absent(&k("every_steps"), &s.every_steps, why)?;
        }
        if !uses_final {
            self.absent(&k("final_learning_rate"), &s.final_learning_rate, why)?;
        }
        if !uses_ac {
            self.absent(&k("a"), &s.a, why)?;
            self.absent(&k("c"), &s.c, why)?;
        }
        let final_lr = || {
            self.float(
                &k("final_learning_rate"),
                s.final_learning_rate.unwrap_or(0.0),
                "a number in [0, train.learning_rate]",
                |x| (0.0..=lr).contains(&x),
            )
        };
        let decay = || -> R<(f64, Every)> {
            let factor = s.factor.ok_or_else(|| ConfigError::Missing {
                at: self.at(),
                key: k("factor"),
                reason: "the decay factor per period, in (0, 1]",
            })?;
            let factor = self.float(&k("factor"), factor, "a number in (0, 1]", |x| {
                x > 0.0 && x <= 1.0
            })?;
            let every = self
                .every(
                    &k("every_epochs"),
                    s.every_epochs,
                    &k("every_steps"),
                    s.every_steps,
                )?
                .ok_or_else(|| ConfigError::Missing {
                    at: self.at(),
                    key: k("every_epochs"),
                    reason: "give the decay period as `every_epochs` or `every_steps`",
                })?;
            Ok((factor, every))
        };
        Ok(match kind {
            LrScheduleKind::Constant => LrSchedule::Constant,
            LrScheduleKind::Step => {
                let (factor, every) = decay()?;
                LrSchedule::Step { factor, every }
            }
            LrScheduleKind::Exponential => {
                let (factor, every) = decay()?;
                LrSchedule::Exponential { factor, every }
            }
            LrScheduleKind::Cosine => LrSchedule::Cosine {
                final_learning_rate: final_lr()?,
            },
            LrScheduleKind::SqrtToZero => LrSchedule::SqrtToZero {
                final_learning_rate: final_lr()?,
            },
            LrScheduleKind::InvSqrt => {
                let a = s.a.ok_or_else(|| ConfigError::Missing {
                    at: self.at(),
                    key: k("a"),
                    reason: "η_t = η_0/√(a + c·t) needs a > 0",
                })?;
                let c = s.c.ok_or_else(|| ConfigError::Missing {
                    at: self.at(),
                    key: k("c"),
                    reason: "η_t = η_0/√(a + c·t) needs c ≥ 0",
                })?;
                LrSchedule::InvSqrt {
                    a: self.positive(&k("a"), a)?,
                    c: self.float(&k("c"), c, "a finite number ≥ 0", |x| x >= 0.0)?,
                }
            }
        })
    }

    fn clip(&self, raw: &RawConfig, private: bool) -> R<ClipSpec> {
        let c = &raw.clip;
        // Without a policy: flat when private or when a clip norm is given, else none.
        let default = if private || c.clip_norm.is_some() {
            ClipPolicyKind::Flat
        } else {
            ClipPolicyKind::None
        };
        let kind = c.policy.unwrap_or(default);
        self.clip_tables(c, kind)?;
        Ok(match kind {
            ClipPolicyKind::None => {
                if private {
                    return Err(self.conflict(
                        "clip.policy",
                        "privacy.enabled",
                        "a private run must clip (\"none\" is only for privacy.enabled = false)",
                    ));
                }
                self.absent("clip.clip_norm", &c.clip_norm, || {
                    "not used with clip.policy = \"none\"".into()
                })?;
                ClipSpec::None
            }
            ClipPolicyKind::Flat => {
                let clip_norm = c.clip_norm.ok_or_else(|| {
                    self.missing("clip.clip_norm", "flat clipping needs the norm bound C")
                })?;
                ClipSpec::Flat {
                    clip_norm: self.positive("clip.clip_norm", clip_norm)?,
                }
            }
            other => self.adaptive_clip(raw, other)?,
        })
    }

    /// Each `[clip.<policy>]` table only with its policy.
    fn clip_tables(&self, c: &super::raw::RawClip, kind: ClipPolicyKind) -> R<()> {
        let why = |table: &str| {
            let table = table.to_string();
            move || format!("only used with clip.policy = \"{table}\"")
        };
        let only = |table: &str, present: bool, k: ClipPolicyKind| -> R<()> {
            if present && kind != k {
                Err(self.not_applicable(&format!("clip.{table}"), why(table)()))
            } else {
                Ok(())
            }
        };
        only("per_layer", c.per_layer.is_some(), ClipPolicyKind::PerLayer)?;
        only("decay", c.decay.is_some(), ClipPolicyKind::Decay)?;
        only(
            "automatic",
            c.automatic.is_some(),
            ClipPolicyKind::Automatic,
        )?;
        only("quantile", c.quantile.is_some(), ClipPolicyKind::Quantile)?;
        only("adaclip", c.adaclip.is_some(), ClipPolicyKind::Adaclip)?;
        only("dcsgd_p", c.dcsgd_p.is_some(), ClipPolicyKind::DcsgdP)?;
        only("dcsgd_e", c.dcsgd_e.is_some(), ClipPolicyKind::DcsgdE)?;
        Ok(())
    }

    /// The policies beyond `none` and `flat`, from their `[clip.<policy>]` tables.
    fn adaptive_clip(&self, raw: &RawConfig, kind: ClipPolicyKind) -> R<ClipSpec> {
        let c = &raw.clip;
        if raw.train.adagrad_norm.as_ref().and_then(|a| a.norm_source) == Some(NormSource::Clean) {
            return Err(self.conflict(
                "train.adagrad_norm.norm_source",
                "clip.policy",
                "the clean norm is defined for flat clipping only",
            ));
        }
        let unit =
            |key: &str, v: f64| self.float(key, v, "a number in (0, 1)", |x| x > 0.0 && x < 1.0);
        let beta = |key: &str, v: f64| {
            self.float(key, v, "a number in [0, 1)", |x| (0.0..1.0).contains(&x))
        };
        // C_0 of the adaptive policies: docs/methods/dc_sgd.md's default 1.
        let initial = || self.positive("clip.clip_norm", c.clip_norm.unwrap_or(1.0));
        let required = |why: &'static str| {
            c.clip_norm
                .ok_or_else(|| self.missing("clip.clip_norm", why))
                .and_then(|v| self.positive("clip.clip_norm", v))
        };
        Ok(match kind {
            ClipPolicyKind::None | ClipPolicyKind::Flat => {
                unreachable!("handled by clip()")
            }
            ClipPolicyKind::PerLayer => ClipSpec::PerLayer {
                clip_norm: required("per-layer clipping needs the total norm bound C")?,
                split: c
                    .per_layer
                    .as_ref()
                    .and_then(|p| p.split)
                    .unwrap_or(LayerSplitKind::Equal),
            },
            ClipPolicyKind::Decay => {
                let ratio = c.decay.as_ref().and_then(|d| d.final_ratio).unwrap_or(0.5);
                ClipSpec::Decay {
                    clip_norm: required("decay needs the initial norm bound C_0")?,
                    final_ratio: self.float(
                        "clip.decay.final_ratio",
                        ratio,
                        "a number in (0, 1]",
                        |x| x > 0.0 && x <= 1.0,
                    )?,
                }
            }
            ClipPolicyKind::Automatic => {
                self.absent("clip.clip_norm", &c.clip_norm, || {
                    "automatic clipping has sensitivity 1 and no clip norm".into()
                })?;
                let gamma = c.automatic.as_ref().and_then(|a| a.gamma).unwrap_or(0.01);
                ClipSpec::Automatic {
                    gamma: self.positive("clip.automatic.gamma", gamma)?,
                }
            }
            ClipPolicyKind::Quantile => {
                let q = c.quantile.clone().unwrap_or_default();
                // Andrew et al. 2021 (and DC-SGD's runs of it): σ_b = B/20.
                let batch = raw
                    .train
                    .expected_batch_size
                    .or(raw.train.batch_size)
                    .unwrap_or(20) as f64;
                ClipSpec::Quantile {
                    initial_clip_norm: initial()?,
                    target_quantile: unit(
                        "clip.quantile.target_quantile",
                        q.target_quantile.unwrap_or(0.5),
                    )?,
                    learning_rate: self.positive(
                        "clip.quantile.learning_rate",
                        q.learning_rate.unwrap_or(0.2),
                    )?,
                    // Bounded so that the count's multiplier 2σ_b stays finite.
                    count_noise_std: self.float(
                        "clip.quantile.count_noise_std",
                        q.count_noise_std.unwrap_or(batch / 20.0),
                        "a number in (0, 1e100]",
                        |x| x > 0.0 && x <= 1e100,
                    )?,
                }
            }
            ClipPolicyKind::Adaclip => {
                self.absent("clip.clip_norm", &c.clip_norm, || {
                    "AdaCliP clips at 1 after its own transform (tune clip.adaclip.h2)".into()
                })?;
                let a = c.adaclip.clone().unwrap_or_default();
                let h1 = self.positive("clip.adaclip.h1", a.h1.unwrap_or(1e-12))?;
                let h2 = a.h2.ok_or_else(|| {
                    self.missing(
                        "clip.adaclip.h2",
                        "AdaCliP needs the variance cap h2 (the paper tunes it; about C²/d matches DP-SGD at C)",
                    )
                })?;
                let h2 = self.float(
                    "clip.adaclip.h2",
                    h2,
                    &format!("a number > clip.adaclip.h1 = {h1}"),
                    |x| x > h1,
                )?;
                ClipSpec::Adaclip {
                    gamma: self.positive("clip.adaclip.gamma", a.gamma.unwrap_or(1.0))?,
                    beta1: beta("clip.adaclip.beta1", a.beta1.unwrap_or(0.99))?,
                    beta2: beta("clip.adaclip.beta2", a.beta2.unwrap_or(0.9))?,
                    h1,
                    h2,
                    initial_std: a.initial_std.unwrap_or(AdaclipInitialStd::Paper),
                    variance_scale: a.variance_scale.unwrap_or(AdaclipVarianceScale::PerExample),
                }
            }
            ClipPolicyKind::DcsgdP | ClipPolicyKind::DcsgdE => {
                let p_rule = kind == ClipPolicyKind::DcsgdP;
                let (table, d) = if p_rule {
                    ("clip.dcsgd_p", c.dcsgd_p.clone().unwrap_or_default())
                } else {
                    ("clip.dcsgd_e", c.dcsgd_e.clone().unwrap_or_default())
                };
                let key = |k: &str| format!("{table}.{k}");
                let percentile = if p_rule {
                    Some(self.float(
                        &key("percentile"),
                        d.percentile.unwrap_or(0.9),
                        "a number in (0, 1]",
                        |x| x > 0.0 && x <= 1.0,
                    )?)
                } else {
                    self.absent(&key("percentile"), &d.percentile, || {
                        "only used with clip.policy = \"dcsgd_p\"".into()
                    })?;
                    None
                };
                let bins = self.size(&key("bins"), d.bins.unwrap_or(20), 2, 100_000)?;
                // docs/methods/dc_sgd.md §1.3-1.4: R_0 = 1 for P, b for E.
                let default_range = if p_rule { 1.0 } else { bins as f64 };
                ClipSpec::Dcsgd {
                    initial_clip_norm: initial()?,
                    percentile,
                    bins,
                    histogram_noise_multiplier: self.positive(
                        &key("histogram_noise_multiplier"),
                        d.histogram_noise_multiplier.unwrap_or(5.0),
                    )?,
                    initial_range: self.positive(
                        &key("initial_range"),
                        d.initial_range.unwrap_or(default_range),
                    )?,
                }
            }
        })
    }

    fn privacy(&self, raw: &RawConfig, enabled: bool) -> R<Option<PrivacySpec>> {
        let p: &RawPrivacy = &raw.privacy;
        let n = &raw.noise;
        if !enabled {
            let why = || "not used with privacy.enabled = false".to_string();
            self.absent("privacy.epsilon", &p.epsilon, why)?;
            self.absent("privacy.delta", &p.delta, why)?;
            self.absent("privacy.accountant", &p.accountant, why)?;
            self.absent("privacy.neighbouring", &p.neighbouring, why)?;
            self.absent("privacy.secure_noise", &p.secure_noise, why)?;
            self.absent("privacy.stop_when_spent", &p.stop_when_spent, why)?;
            self.absent("noise.schedule", &n.schedule, why)?;
            self.absent("noise.noise_multiplier", &n.noise_multiplier, why)?;
            if *n != RawNoise::default() {
                return Err(self.not_applicable("noise", why()));
            }
            return Ok(None);
        }
        let delta = p
            .delta
            .ok_or_else(|| self.missing("privacy.delta", "a private run needs δ (e.g. 1e-5)"))?;
        let delta = self.float("privacy.delta", delta, "a value in (0, 1)", |x| {
            x > 0.0 && x < 1.0
        })?;
        let epsilon = p
            .epsilon
            .map(|e| self.positive("privacy.epsilon", e))
            .transpose()?;
        let sigma = n
            .noise_multiplier
            .map(|s| self.positive("noise.noise_multiplier", s))
            .transpose()?;
        let budget = if p.stop_when_spent.unwrap_or(false) {
            match (sigma, epsilon) {
                (Some(noise_multiplier), Some(epsilon)) => Budget::UntilSpent {
                    noise_multiplier,
                    epsilon,
                },
                (None, _) => {
                    return Err(self.missing(
                        "noise.noise_multiplier",
                        "privacy.stop_when_spent = true trains at a given noise multiplier until privacy.epsilon is spent",
                    ));
                }
                (Some(_), None) => {
                    return Err(self.missing(
                        "privacy.epsilon",
                        "privacy.stop_when_spent = true needs the budget ε to stop at",
                    ));
                }
            }
        } else {
            match (sigma, epsilon) {
                (Some(_), Some(_)) => {
                    return Err(self.conflict(
                        "noise.noise_multiplier",
                        "privacy.epsilon",
                        "give either `noise.noise_multiplier` (ε is then reported) or `privacy.epsilon` (σ is then calibrated), not both",
                    ));
                }
                (Some(noise_multiplier), None) => Budget::NoiseMultiplier { noise_multiplier },
                (None, Some(epsilon)) => Budget::Calibrated { epsilon },
                (None, None) => {
                    return Err(self.missing(
                        "privacy.epsilon",
                        "a private run needs `privacy.epsilon` (to calibrate σ) or `noise.noise_multiplier`",
                    ));
                }
            }
        };
        let noise_schedule = self.noise_schedule(n)?;
        let round_digits = n
            .round_digits
            .map(|d| self.int("noise.round_digits", d, 1, 15))
            .transpose()?
            .map(|d| d as u32);
        Ok(Some(PrivacySpec {
            delta,
            budget,
            noise_schedule,
            accountant: p.accountant.unwrap_or(AccountantKind::Rdp),
            neighbouring: p.neighbouring.unwrap_or_default(),
            secure_noise: p.secure_noise.unwrap_or(false),
            round_digits,
        }))
    }

    fn noise_schedule(&self, n: &RawNoise) -> R<NoiseSchedule> {
        use NoiseScheduleKind as K;
        let kind = n.schedule.unwrap_or(K::Constant);
        let why = || format!("not a parameter of the \"{}\" noise schedule", kind.name());
        let uses = |keys: &[K]| keys.contains(&kind);
        if !uses(&[K::Adp, K::Polynomial]) {
            self.absent("noise.power", &n.power, why)?;
        }
        if !uses(&[K::AdpAdagrad]) {
            self.absent("noise.b0_sq", &n.b0_sq, why)?;
            self.absent("noise.c_alpha", &n.c_alpha, why)?;
        }
        if !uses(&[K::Exponential, K::TimeDecay]) {
            self.absent("noise.decay", &n.decay, why)?;
        }
        if !uses(&[K::Step]) {
            self.absent("noise.factor", &n.factor, why)?;
        }
        if !uses(&[K::Step, K::Polynomial]) {
            self.absent("noise.every_epochs", &n.every_epochs, why)?;
            self.absent("noise.every_steps", &n.every_steps, why)?;
        }
        if !uses(&[K::Polynomial]) {
            self.absent("noise.end_ratio", &n.end_ratio, why)?;
        }
        if !uses(&[K::InfluenceGd, K::InfluenceMomentum]) {
            self.absent("noise.gamma", &n.gamma, why)?;
        }
        if !uses(&[K::InfluenceMomentum]) {
            self.absent("noise.beta", &n.beta, why)?;
        }
        if !uses(&[K::File]) {
            self.absent("noise.path", &n.path, why)?;
            self.absent("noise.values", &n.values, why)?;
        }
        let need = |key: &str, v: Option<f64>, reason: &'static str| -> R<f64> {
            v.ok_or_else(|| self.missing(key, reason))
        };
        let period = || -> R<Every> {
            self.every(
                "noise.every_epochs",
                n.every_epochs,
                "noise.every_steps",
                n.every_steps,
            )?
            .ok_or_else(|| {
                self.missing(
                    "noise.every_epochs",
                    "give the period as `noise.every_epochs` or `noise.every_steps`",
                )
            })
        };
        let gamma = || -> R<f64> {
            let g = need(
                "noise.gamma",
                n.gamma,
                "the influence-optimal schedules need γ = 1 − µ/M in (0, 1)",
            )?;
            self.float("noise.gamma", g, "a number in (0, 1)", |x| {
                x > 0.0 && x < 1.0
            })
        };
        Ok(match kind {
            K::Constant => NoiseSchedule::Constant,
            K::Adp => NoiseSchedule::Adp {
                power: self.float(
                    "noise.power",
                    n.power.unwrap_or(1.0),
                    "a number in [0, 4]",
                    |x| (0.0..=4.0).contains(&x),
                )?,
            },
            K::AdpAdagrad => NoiseSchedule::AdpAdagrad {
                b0_sq: self.positive(
                    "noise.b0_sq",
                    need(
                        "noise.b0_sq",
                        n.b0_sq,
                        "α_t = (b_0² + t·C)^{1/4} needs b_0² > 0",
                    )?,
                )?,
                c_alpha: self.positive(
                    "noise.c_alpha",
                    need(
                        "noise.c_alpha",
                        n.c_alpha,
                        "α_t = (b_0² + t·C)^{1/4} needs C > 0",
                    )?,
                )?,
            },
            K::Exponential | K::TimeDecay => {
                let decay = need("noise.decay", n.decay, "the decay rate k ≥ 0")?;
                let decay =
                    self.float("noise.decay", decay, "a finite number ≥ 0", |x| x >= 0.0)?;
                if kind == K::Exponential {
                    NoiseSchedule::Exponential { decay }
                } else {
                    NoiseSchedule::TimeDecay { decay }
                }
            }
            K::Step => {
                let factor = need("noise.factor", n.factor, "the factor per period, in (0, 1]")?;
                NoiseSchedule::Step {
                    factor: self.float("noise.factor", factor, "a number in (0, 1]", |x| {
                        x > 0.0 && x <= 1.0
                    })?,
                    every: period()?,
                }
            }
            K::Polynomial => {
                let end_ratio = need(
                    "noise.end_ratio",
                    n.end_ratio,
                    "σ_end/σ_0, the final fraction of the noise multiplier, in (0, 1]",
                )?;
                NoiseSchedule::Polynomial {
                    end_ratio: self.float(
                        "noise.end_ratio",
                        end_ratio,
                        "a number in (0, 1]",
                        |x| x > 0.0 && x <= 1.0,
                    )?,
                    power: self.float(
                        "noise.power",
                        n.power.unwrap_or(3.0),
                        "a finite number ≥ 0",
                        |x| x >= 0.0,
                    )?,
                    every: period()?,
                }
            }
            K::InfluenceGd => NoiseSchedule::InfluenceGd { gamma: gamma()? },
            K::InfluenceMomentum => {
                let gamma = gamma()?;
                let beta = need("noise.beta", n.beta, "the momentum β in [0, γ)")?;
                let beta = self.float("noise.beta", beta, "a number in [0, noise.gamma)", |x| {
                    (0.0..gamma).contains(&x)
                })?;
                NoiseSchedule::InfluenceMomentum { gamma, beta }
            }
            K::File => {
                self.at_most_one("noise.path", &n.path, "noise.values", &n.values)?;
                let (path, values) = match (&n.path, &n.values) {
                    (Some(p), _) => {
                        let path = PathBuf::from(p);
                        let text = crate::text_file::read_text_capped(
                            &path,
                            crate::text_file::MAX_SCHEDULE_BYTES,
                            "a noise schedule file",
                        )
                        .map_err(|e| {
                            self.range(
                                "noise.path",
                                "a readable file of per-step noise multipliers",
                                e.to_string(),
                            )
                        })?;
                        let values = crate::privacy::schedule::parse_values(&text).map_err(|e| {
                            self.range(
                                "noise.path",
                                "one noise multiplier > 0 per line (or a `noise_multiplier` CSV column)",
                                format!("{p}: {e}"),
                            )
                        })?;
                        (Some(path), values)
                    }
                    (None, Some(v)) => {
                        for &x in v {
                            self.positive("noise.values", x)?;
                        }
                        (None, v.clone())
                    }
                    (None, None) => {
                        return Err(self.missing(
                            "noise.path",
                            "the file schedule needs `noise.path` or `noise.values`",
                        ));
                    }
                };
                if values.is_empty() {
                    return Err(self.range(
                        "noise.values",
                        "at least one noise multiplier",
                        "none".into(),
                    ));
                }
                NoiseSchedule::File {
                    path,
                    values: values.into(),
                }
            }
        })
    }
}

/// `[accelerated]`: the accelerated DP methods of Kuru, Birbil, Gürbüzbalaban and Yıldırım
/// (2020) on the paper's regularised binary logistic regression (method notes docs/methods/accelerated.md).
#[derive(Debug, Clone, PartialEq)]
pub struct AcceleratedSpec {
    pub method: AcceleratedMethodKind,
    /// The pure-DP budget ε (δ = 0), spent by the Laplace mechanism over the run.
    pub epsilon: f64,
    /// c of the step size α = c/L, in (0, 1].
    pub step_constant: f64,
    pub smoothness: SmoothnessSpec,
    pub momentum: MomentumSpec,
    /// The cube-root split of ε (the `-opt` variants; NAG and MASG only).
    pub noise_dividing: bool,
    /// With `noise_dividing`: run T' ≤ T steps, T' minimising the error bound.
    pub select_steps: bool,
    pub bound_constants: BoundConstantsKind,
    /// E_0 of the T' score.
    pub initial_error: f64,
    /// x_0 = init_value · 1.
    pub init_value: f64,
    pub sensitivity: SensitivitySpec,
    pub laplace_parameter: LaplaceParameterKind,
    /// MASG's p (n_k = 2^k ⌈√κ ln 2^{p+2}⌉).
    pub masg_p: u32,
    /// MASG's n_1 (`None`: ⌈2√κ ln √κ⌉).
    pub masg_first_stage: Option<u64>,
    /// δ at which the RDP ε of the same Laplace releases is reported beside the pure ε.
    pub rdp_delta: f64,
}

/// `accelerated.smoothness`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SmoothnessSpec {
    /// σ_max(UᵀU/n) + μ (the paper's).
    Gram,
    /// ¼σ_max(UᵀU/n) + μ.
    Logistic,
    /// A given L.
    Value(f64),
}

/// `accelerated.momentum`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MomentumSpec {
    /// β = (1 − √(αμ))/(1 + √(αμ)).
    StronglyConvex,
    Value(f64),
}

/// `accelerated.sensitivity` with its bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SensitivitySpec {
    /// ‖u‖₁ ≤ `feature_l1_bound` for every example; S1 = 2·bound.
    FeatureBound { feature_l1_bound: f64 },
    /// Loss gradients clipped to L1 norm `l1_clip_norm`; S1 = 2·norm.
    L1Clip { l1_clip_norm: f64 },
}

impl SensitivitySpec {
    /// S1: the L1 distance between two examples' loss gradients can reach (replace one).
    pub fn l1_sensitivity(&self) -> f64 {
        match *self {
            SensitivitySpec::FeatureBound { feature_l1_bound } => 2.0 * feature_l1_bound,
            SensitivitySpec::L1Clip { l1_clip_norm } => 2.0 * l1_clip_norm,
        }
    }
}

impl Checker<'_> {
    fn accelerated(&self, raw: &RawConfig, a: &RawAccelerated) -> R<AcceleratedSpec> {
        // The budget lives in [accelerated]; the Gaussian-mechanism sections do not apply.
        let own = "the accelerated methods set their own privacy in [accelerated] (epsilon, pure DP, Laplace noise)";
        if raw.privacy.enabled == Some(true)
            || (RawPrivacy {
                enabled: None,
                ..raw.privacy.clone()
            }) != RawPrivacy::default()
        {
            return Err(self.conflict("privacy", "accelerated", own));
        }
        if raw.noise != RawNoise::default() {
            return Err(self.conflict("noise", "accelerated", own));
        }
        let clip_ok = raw.clip.clip_norm.is_none()
            && matches!(raw.clip.policy, None | Some(ClipPolicyKind::None));
        if !clip_ok {
            return Err(self.conflict(
                "clip",
                "accelerated",
                "the accelerated methods clip (optionally) with accelerated.sensitivity = \"l1_clip\"",
            ));
        }
        if !matches!(raw.train.sampler, Some(SamplerKind::FixedSize)) {
            return Err(self.conflict(
                "train.sampler",
                "accelerated",
                "the accelerated methods sample a fixed-size batch without replacement: set train.sampler = \"fixed_size\" (batch_size = n is full batch)",
            ));
        }
        if !matches!(raw.train.optimizer, None | Some(OptimizerKind::Sgd)) {
            return Err(self.conflict(
                "train.optimizer",
                "accelerated",
                "the update rule is accelerated.method",
            ));
        }
        if !matches!(raw.model.architecture, None | Some(Architecture::Logistic)) {
            return Err(self.conflict(
                "model.architecture",
                "accelerated",
                "the accelerated methods train the paper's binary logistic regression (\"logistic\")",
            ));
        }
        if !raw.model.l2.is_some_and(|l2| l2.is_finite() && l2 > 0.0) {
            return Err(self.range(
                "model.l2",
                "μ > 0 for the accelerated methods (the penalty (μ/2)‖x‖²; the paper's λ = 0.01 is μ = 0.02)",
                format!("{:?}", raw.model.l2),
            ));
        }
        let method = a.method.ok_or_else(|| {
            self.missing(
                "accelerated.method",
                "name the method: gd, heavy_ball, heavy_ball_ema, nesterov or masg",
            )
        })?;
        let epsilon = a.epsilon.ok_or_else(|| {
            self.missing(
                "accelerated.epsilon",
                "the accelerated methods need a pure-DP budget ε",
            )
        })?;
        let epsilon = self.positive("accelerated.epsilon", epsilon)?;
        let step_constant = self.float(
            "accelerated.step_constant",
            a.step_constant.unwrap_or(1.0),
            "a number in (0, 1]",
            |x| x > 0.0 && x <= 1.0,
        )?;
        let smoothness = match &a.smoothness {
            None => SmoothnessSpec::Gram,
            Some(RawNumberOrWord::Word(w)) if w == "gram" => SmoothnessSpec::Gram,
            Some(RawNumberOrWord::Word(w)) if w == "logistic" => SmoothnessSpec::Logistic,
            Some(RawNumberOrWord::Word(w)) => {
                return Err(self.range(
                    "accelerated.smoothness",
                    "\"gram\", \"logistic\" or a number > 0",
                    format!("{w:?}"),
                ));
            }
            Some(RawNumberOrWord::Number(x)) => {
                SmoothnessSpec::Value(self.positive("accelerated.smoothness", *x)?)
            }
        };
        let momentum = match &a.momentum {
            None => MomentumSpec::StronglyConvex,
            Some(RawNumberOrWord::Word(w)) if w == "strongly_convex" => {
                MomentumSpec::StronglyConvex
            }
            Some(RawNumberOrWord::Word(w)) => {
                return Err(self.range(
                    "accelerated.momentum",
                    "\"strongly_convex\" or a number in [0, 1)",
                    format!("{w:?}"),
                ));
            }
            Some(RawNumberOrWord::Number(x)) => MomentumSpec::Value(self.float(
                "accelerated.momentum",
                *x,
                "\"strongly_convex\" or a number in [0, 1)",
                |b| (0.0..1.0).contains(&b),
            )?),
        };
        if method == AcceleratedMethodKind::Gd {
            self.absent("accelerated.momentum", &a.momentum, || {
                "gradient descent has no momentum".into()
            })?;
        }
        let noise_dividing = a.noise_dividing.unwrap_or(false);
        if noise_dividing
            && !matches!(
                method,
                AcceleratedMethodKind::Nesterov | AcceleratedMethodKind::Masg
            )
        {
            return Err(self.conflict(
                "accelerated.noise_dividing",
                "accelerated.method",
                "the noise-dividing split is derived for nesterov and masg only",
            ));
        }
        let why = || "only used with accelerated.noise_dividing = true".to_string();
        if !noise_dividing {
            self.absent("accelerated.select_steps", &a.select_steps, why)?;
            self.absent("accelerated.bound_constants", &a.bound_constants, why)?;
            self.absent("accelerated.initial_error", &a.initial_error, why)?;
        }
        let initial_error =
            self.positive("accelerated.initial_error", a.initial_error.unwrap_or(10.0))?;
        let init_value = self.float(
            "accelerated.init_value",
            a.init_value.unwrap_or(10.0),
            "a finite number",
            |_| true,
        )?;
        let sensitivity = match a.sensitivity.unwrap_or(L1SensitivityKind::FeatureBound) {
            L1SensitivityKind::FeatureBound => {
                self.absent("accelerated.l1_clip_norm", &a.l1_clip_norm, || {
                    "only used with accelerated.sensitivity = \"l1_clip\"".into()
                })?;
                SensitivitySpec::FeatureBound {
                    feature_l1_bound: self.positive(
                        "accelerated.feature_l1_bound",
                        a.feature_l1_bound.unwrap_or(20.0),
                    )?,
                }
            }
            L1SensitivityKind::L1Clip => {
                self.absent("accelerated.feature_l1_bound", &a.feature_l1_bound, || {
                    "only used with accelerated.sensitivity = \"feature_bound\"".into()
                })?;
                let c = a.l1_clip_norm.ok_or_else(|| {
                    self.missing(
                        "accelerated.l1_clip_norm",
                        "L1 clipping needs the norm bound",
                    )
                })?;
                SensitivitySpec::L1Clip {
                    l1_clip_norm: self.positive("accelerated.l1_clip_norm", c)?,
                }
            }
        };
        if method != AcceleratedMethodKind::Masg {
            let why = || "only used with accelerated.method = \"masg\"".to_string();
            self.absent("accelerated.masg_p", &a.masg_p, why)?;
            self.absent("accelerated.masg_first_stage", &a.masg_first_stage, why)?;
        }
        let masg_p = self.int("accelerated.masg_p", a.masg_p.unwrap_or(1), 0, 60)? as u32;
        let masg_first_stage = match a.masg_first_stage {
            Some(n1) => Some(self.int("accelerated.masg_first_stage", n1, 1, i64::MAX)?),
            None => None,
        };
        let rdp_delta = self.float(
            "accelerated.rdp_delta",
            a.rdp_delta.unwrap_or(1e-6),
            "a value in (0, 1)",
            |x| x > 0.0 && x < 1.0,
        )?;
        Ok(AcceleratedSpec {
            method,
            epsilon,
            step_constant,
            smoothness,
            momentum,
            noise_dividing,
            select_steps: noise_dividing && a.select_steps.unwrap_or(true),
            bound_constants: a.bound_constants.unwrap_or(BoundConstantsKind::Code),
            initial_error,
            init_value,
            sensitivity,
            laplace_parameter: a.laplace_parameter.unwrap_or(LaplaceParameterKind::Scale),
            masg_p,
            masg_first_stage,
            rdp_delta,
        })
    }
}
