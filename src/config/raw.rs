//! Config room: the serde mirror of the experiment TOML, exactly as the user typed it.
//!
//! Owns the shape of the file: section and key names, value types, and the rejection of unknown
//! keys (`deny_unknown_fields` on every table). Every key is optional here and no value is
//! range-checked: integers are `i64` and floats `f64` whatever their meaning, so that
//! `spec::validate` is the only place ranges, defaults and combinations are decided (the two
//! stages of ripgrep's low/high args; linfa's checked params). Must not interpret values.
//!
//! Sections: `[experiment]`, `[data]` (+ `[data.synthetic]`), `[model]` (+ `[[model.layers]]`),
//! `[train]` (+ `[train.lr_schedule]`), `[clip]`, `[noise]`, `[privacy]`, `[output]`,
//! `[accelerated]`.
//! A policy or schedule with parameters of its own gets a sub-table named after it (e.g. the
//! planned `[clip.adaclip]`), so adding one means adding one optional field here.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::kinds::{
    AcceleratedMethodKind, BoundConstantsKind, L1SensitivityKind, LaplaceParameterKind,
};
use super::kinds::{
    Activation, AdaclipInitialStd, AdaclipVarianceScale, Architecture, ClipPolicyKind, DataPart,
    DatasetName, Features, LayerKind, LayerSplitKind, Loss, LrScheduleKind, NoiseMechanismKind,
    NoiseScheduleKind, NormSource, OptimizerKind, SamplerKind, Standardize,
};
use crate::privacy::accountant::AccountantKind;
use crate::privacy::event::NeighbouringRelation;

mod every_key;

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub experiment: RawExperiment,
    #[serde(default)]
    pub data: RawData,
    #[serde(default)]
    pub model: RawModel,
    #[serde(default)]
    pub train: RawTrain,
    #[serde(default)]
    pub clip: RawClip,
    #[serde(default)]
    pub noise: RawNoise,
    #[serde(default)]
    pub privacy: RawPrivacy,
    #[serde(default)]
    pub output: RawOutput,
    /// `[accelerated]`: present only for the accelerated DP methods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerated: Option<RawAccelerated>,
}

/// `[experiment]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExperiment {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seeds: Option<RawSeeds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `experiment.seeds`: a count (`seeds = 5` means 0..5) or an explicit list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RawSeeds {
    Count(i64),
    List(Vec<i64>),
}

impl<'de> Deserialize<'de> for RawSeeds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawSeeds;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number of seeds or a list of integer seeds")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawSeeds, E> {
                Ok(RawSeeds::Count(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawSeeds, E> {
                i64::try_from(v)
                    .map(RawSeeds::Count)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawSeeds, A::Error> {
                let mut seeds = Vec::new();
                while let Some(s) = seq.next_element::<i64>()? {
                    seeds.push(s);
                }
                Ok(RawSeeds::List(seeds))
            }
        }
        d.deserialize_any(V)
    }
}

/// `train.threads`: a positive count or `"auto"` (all available cores).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RawThreads {
    Count(i64),
    Auto(AutoWord),
}

/// The word `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoWord {
    Auto,
}

impl<'de> Deserialize<'de> for RawThreads {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawThreads;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number of threads or \"auto\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawThreads, E> {
                Ok(RawThreads::Count(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawThreads, E> {
                i64::try_from(v)
                    .map(RawThreads::Count)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawThreads, E> {
                if v == "auto" {
                    Ok(RawThreads::Auto(AutoWord::Auto))
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `[data]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawData {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_fraction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_column: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize: Option<Standardize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_norm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize_mean: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize_std: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize_noise_multiplier: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize_mean_clip_norm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize_second_moment_clip_norm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize_seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize_variance_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_nonprivate_statistics: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_fraction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_on: Option<DataPart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subsample: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_fraction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pca_components: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pca_noise_multiplier: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pca_seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scattering_j: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scattering_angles: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scattering_input_mean: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scattering_input_std: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<RawSynthetic>,
}

/// `[data.synthetic]`: generator parameters for the synthetic datasets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSynthetic {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_train: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_test: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_features: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_classes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub separation: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
}

/// `[model]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Architecture>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Vec<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activation: Option<Activation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<Loss>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freeze: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<Vec<RawLayer>>,
}

/// One `[[model.layers]]` entry of an explicit CNN.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLayer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<LayerKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_channels: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stride: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub padding: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_features: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight_standardization: Option<bool>,
}

/// `[train]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTrain {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epochs: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampler: Option<SamplerKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_batch_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<OptimizerKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub momentum: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_every_epochs: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_every_steps: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<RawThreads>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lr_schedule: Option<RawLrSchedule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adagrad_norm: Option<RawAdagradNorm>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adam: Option<RawAdam>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_train_set: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_gradient_error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ema_decay: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub augmentation: Option<RawAugmentation>,
}

/// `[train.augmentation]`: augmentation multiplicity (docs/config.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAugmentation {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplicity: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crop_padding: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub horizontal_flip: Option<bool>,
}

/// `[train.adam]`: parameters of `optimizer = "adam"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdam {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta2: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stability_constant: Option<f64>,
}

/// `[train.adagrad_norm]`: parameters of `optimizer = "adagrad_norm"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdagradNorm {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b0_sq: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nu: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta_period: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub norm_source: Option<NormSource>,
}

/// `[train.lr_schedule]`: the kind and the parameters that kind uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLrSchedule {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<LrScheduleKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_epochs: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_steps: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_learning_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c: Option<f64>,
}

/// `[clip]`. Policies with parameters of their own have a `[clip.<policy>]` sub-table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClip {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<ClipPolicyKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clip_norm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_layer: Option<RawPerLayer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decay: Option<RawDecay>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automatic: Option<RawAutomatic>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantile: Option<RawQuantile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaclip: Option<RawAdaclip>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcsgd_p: Option<RawDcsgd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcsgd_e: Option<RawDcsgd>,
}

/// `[clip.per_layer]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPerLayer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<LayerSplitKind>,
}

/// `[clip.decay]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDecay {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_ratio: Option<f64>,
}

/// `[clip.automatic]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAutomatic {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
}

/// `[clip.quantile]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuantile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_quantile: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count_noise_std: Option<f64>,
}

/// `[clip.adaclip]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdaclip {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta2: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_std: Option<AdaclipInitialStd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variance_scale: Option<AdaclipVarianceScale>,
}

/// `[clip.dcsgd_p]` and `[clip.dcsgd_e]` (`percentile` is P's only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDcsgd {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bins: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram_noise_multiplier: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_range: Option<f64>,
}

/// `[noise]`: the schedule and the parameters of its shape (each key applies to some schedules
/// only; spec.rs rejects the others).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNoise {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<NoiseMechanismKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bands: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<NoiseScheduleKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_multiplier: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b0_sq: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c_alpha: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decay: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_epochs: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_steps: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_digits: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrain_sigma_min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrain_sigma_max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrain_points: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrain_repeats: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrain_steps: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrain_seed: Option<i64>,
}

/// `[privacy]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrivacy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    #[serde(
        default,
        deserialize_with = "de_accountant",
        skip_serializing_if = "Option::is_none"
    )]
    pub accountant: Option<AccountantKind>,
    #[serde(
        default,
        deserialize_with = "de_neighbouring",
        skip_serializing_if = "Option::is_none"
    )]
    pub neighbouring: Option<NeighbouringRelation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secure_noise: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_when_spent: Option<bool>,
}

/// `[output]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save_model_every_evals: Option<i64>,
}

/// `[accelerated]`: the accelerated DP methods of Kuru et al. 2020 (docs/config.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAccelerated {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<AcceleratedMethodKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_constant: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smoothness: Option<RawNumberOrWord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub momentum: Option<RawNumberOrWord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_dividing: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub select_steps: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_constants: Option<BoundConstantsKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_error: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<L1SensitivityKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_l1_bound: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1_clip_norm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub laplace_parameter: Option<LaplaceParameterKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masg_p: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masg_first_stage: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdp_delta: Option<f64>,
}

/// A key that takes a number or a word (`accelerated.smoothness = "gram"` or `= 5.1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RawNumberOrWord {
    Number(f64),
    Word(String),
}

/// The accountant names are those of `AccountantKind` on the command line (`rdp`, `pld`, ...),
/// so a new accountant is accepted here without a change to this room.
fn de_accountant<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AccountantKind>, D::Error> {
    use clap::ValueEnum;
    use std::sync::OnceLock;
    // serde's `unknown_variant` wants a `&'static [&'static str]`; the names are built once.
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    let s = String::deserialize(d)?;
    match AccountantKind::from_str(&s, false) {
        Ok(kind) => Ok(Some(kind)),
        Err(_) => {
            let names = NAMES.get_or_init(|| {
                AccountantKind::value_variants()
                    .iter()
                    .map(|k| k.name())
                    .collect()
            });
            Err(de::Error::unknown_variant(&s, names.as_slice()))
        }
    }
}

/// Spelled as `NeighbouringRelation` serialises (`add_or_remove_one`, `replace_one`).
fn de_neighbouring<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<NeighbouringRelation>, D::Error> {
    const NAMES: &[&str] = &["add_or_remove_one", "replace_one"];
    let s = String::deserialize(d)?;
    match s.as_str() {
        "add_or_remove_one" => Ok(Some(NeighbouringRelation::AddOrRemoveOne)),
        "replace_one" => Ok(Some(NeighbouringRelation::ReplaceOne)),
        _ => Err(de::Error::unknown_variant(&s, NAMES)),
    }
}
