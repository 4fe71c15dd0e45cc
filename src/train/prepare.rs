//! From a validated spec to runtime objects: data and plan (the model itself: `model_build`).
//!
//! Data preparation follows the order documented in `docs/config.md`: keep classes and relabel →
//! subsample → validation split → scale → features (scattering) → standardise → PCA → max row
//! norm, each fitted on the training split only. The subsample and the validation split are drawn from a fixed data
//! stream, so every seed of an experiment trains on the same examples and seeds differ only in
//! initialisation, sampling and noise.

use std::path::{Path, PathBuf};

use crate::config::kinds::{DataPart, DatasetName, Standardize};
use crate::config::spec::{
    DataSource as SpecSource, ExperimentSpec, FeatureMap, PrivateStandardization,
    SyntheticSpec as SpecSynthetic, TestSet,
};
use crate::data::csv::{CsvOptions, LabelColumn};
use crate::data::moments;
use crate::data::preprocess::{self, StandardizeMode};
use crate::data::private_pca::{self, PrivatePca};
use crate::data::synthetic::{self, SyntheticSpec};
use crate::data::{DataError, DataSource, Dataset, NamedDataset, TrainTest};
use crate::model::Model;
use crate::privacy::mechanism::add_gaussian_noise;

use super::TrainError;
pub use super::model_build::{build_model, load_init_from, model_spec};
use super::plan::TrainingPlan;

/// The fixed seed of the data stream (subsample, validation split, held-out test fraction).
pub const DATA_SEED: u64 = 0x0da7_a5ee_d000_0001;

/// The data of one experiment after preprocessing.
#[derive(Debug, Clone)]
pub struct PreparedData {
    pub train: Dataset,
    /// Scattering features with `[train.augmentation]`: the features of every training image's
    /// mirror (left-right), row for row with `train`, through the same preprocessing; a flipped
    /// view is its row (`data::augment::flip_views`).
    pub train_mirrored: Option<Dataset>,
    /// The validation split (`data.validation_fraction > 0`), evaluated beside the test set.
    pub validation: Option<Dataset>,
    pub test: Dataset,
    /// Caveats to show the user (e.g. "PCA fitted on training data: not differentially private").
    pub notes: Vec<String>,
}

/// Everything one experiment needs, built once and shared by its seeds.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub spec: ExperimentSpec,
    /// Shared, never copied: the points of a sweep that prepare the same data hold one copy.
    pub data: std::sync::Arc<PreparedData>,
    pub model: Model,
    /// The parameters of `model.init_from`, when given (every seed starts from them).
    pub init_from: Option<ndarray::Array1<f32>>,
    pub plan: TrainingPlan,
    /// `[accelerated]` runs: the problem, F* and the accelerated plan.
    pub accelerated: Option<super::accelerated::AcceleratedExperiment>,
}

impl Experiment {
    /// Seed `seed`'s initial parameters: `model.init_from`'s, or the seeded initialisation.
    pub fn initial_params(&self, seed: u64) -> ndarray::Array1<f32> {
        match &self.init_from {
            Some(p) => p.clone(),
            None => self
                .model
                .init_params(super::seed::stream_seed(seed, super::seed::STREAM_INIT)),
        }
    }

    /// Load and prepare the data, build the model, check the spec against both, and plan the
    /// run (calibrating the noise when the budget is given as ε).
    pub fn build(spec: ExperimentSpec, data_dir: &Path) -> Result<Self, TrainError> {
        let data = prepare_data(&spec, data_dir)?;
        let (model, plan) = plan_and_model(&spec, &data, data.train.len())?;
        let accelerated = match &spec.accelerated {
            Some(acc) => Some(super::accelerated::AcceleratedExperiment::build(
                &spec, acc, &data, data_dir,
            )?),
            None => None,
        };
        let init_from = load_init_from(&spec, &model)?;
        Ok(Experiment {
            spec,
            data: std::sync::Arc::new(data),
            model,
            init_from,
            plan,
            accelerated,
        })
    }
}

/// What `dpx account --config` needs of an experiment: its spec, model and plan.
#[derive(Debug, Clone)]
pub struct PlannedExperiment {
    pub spec: ExperimentSpec,
    pub model: Model,
    pub plan: TrainingPlan,
}

impl Experiment {
    /// The model and plan of [`Experiment::build`] for the same spec, without preparing all the
    /// data: the examples are chosen as a run chooses them (so the plan sees the same number of
    /// training examples), then only the first few of each split go through the feature map,
    /// standardisation and the model's checks, and scattering features are neither read from nor
    /// written to the cache. A run's plan depends on the data only through that number (a test
    /// checks the two plans' events agree). `[accelerated]` runs, PCA (whose fit needs the
    /// whole training split) and the `influence_quadratic` and `influence_retrained` schedules
    /// (estimated from it) are built in full.
    pub fn plan_only(
        spec: ExperimentSpec,
        data_dir: &Path,
    ) -> Result<PlannedExperiment, TrainError> {
        if spec.accelerated.is_some()
            || spec.data.pca_components.is_some()
            || super::influence::needs_training_data(&spec)
        {
            let exp = Experiment::build(spec, data_dir)?;
            return Ok(PlannedExperiment {
                spec: exp.spec,
                model: exp.model,
                plan: exp.plan,
            });
        }
        let (data, n_train) = prepare_data_with(&spec, data_dir, Some(PLAN_ONLY_ROWS))?;
        let (model, plan) = plan_and_model(&spec, &data, n_train)?;
        load_init_from(&spec, &model)?;
        Ok(PlannedExperiment { spec, model, plan })
    }
}

/// The model for `data` and the plan for `n_train` training examples, with every check
/// [`Experiment::build`] makes of the spec against the data (also how `dpx sweep` builds a
/// point on its shared data).
pub fn plan_and_model(
    spec: &ExperimentSpec,
    data: &PreparedData,
    n_train: usize,
) -> Result<(Model, TrainingPlan), TrainError> {
    let model = build_model(spec, data)?;
    spec.check_against_data(n_train, data.train.num_features())?;
    check_augmentation(spec, &data.train.sample_shape)?;
    // The influence is estimated on the whole training split; `plan_only` builds in full for it.
    let influence = super::influence::estimate(spec, &model, &data.train)?;
    let plan = TrainingPlan::with_influence(spec, n_train, influence.as_ref())?;
    // A policy that materialises [B, P] (AdaCliP) is refused before training when the
    // (expected) batch does not fit the memory limit.
    if plan.clip.materializes() {
        crate::grad::check_materialize_budget(
            spec.train.sampler.batch_size(),
            model.num_params(),
            model.materialize_limit_bytes(),
        )
        .map_err(|e| crate::config::ConfigError::DataMismatch {
            at: crate::config::Location::file(&spec.source),
            key: "clip.policy".into(),
            reason: e.to_string(),
        })?;
    }
    Ok((model, plan))
}

fn named(dataset: DatasetName) -> Option<NamedDataset> {
    match dataset {
        DatasetName::Mnist => Some(NamedDataset::Mnist),
        DatasetName::FashionMnist => Some(NamedDataset::FashionMnist),
        DatasetName::Cifar10 => Some(NamedDataset::Cifar10),
        DatasetName::A9a => Some(NamedDataset::A9a),
        DatasetName::Svhn => Some(NamedDataset::Svhn),
        DatasetName::Libsvm
        | DatasetName::Csv
        | DatasetName::GaussianMixture
        | DatasetName::TwoCluster
        | DatasetName::LogisticSynthetic => None,
    }
}

fn synthetic_source(s: &SpecSynthetic) -> DataSource {
    let (spec, seed) = match *s {
        SpecSynthetic::GaussianMixture {
            n_train,
            n_test,
            n_features,
            n_classes,
            separation,
            seed,
        } => (
            SyntheticSpec::GaussianMixture(synthetic::GaussianMixture {
                n_train,
                n_test,
                dim: n_features,
                num_classes: n_classes,
                separation,
                ..synthetic::GaussianMixture::default()
            }),
            seed,
        ),
        SpecSynthetic::TwoCluster {
            n_train,
            n_test,
            n_features,
            separation,
            seed,
        } => (
            SyntheticSpec::TwoClusters(synthetic::TwoClusters {
                n_train,
                n_test,
                dim: n_features,
                distance: separation,
                ..synthetic::TwoClusters::default()
            }),
            seed,
        ),
        SpecSynthetic::LogisticSynthetic {
            n_train,
            n_test,
            n_features,
            seed,
        } => (
            SyntheticSpec::UniformLogistic(synthetic::UniformLogistic {
                n_train,
                n_test,
                dim: n_features,
                ..synthetic::UniformLogistic::default()
            }),
            seed,
        ),
    };
    DataSource::Synthetic { spec, seed }
}

/// Load the spec's dataset: the data source, then a held-out test fraction where the test set
/// is part of the same file.
fn load(spec: &ExperimentSpec, data_dir: &Path) -> Result<TrainTest, TrainError> {
    let (source, test_fraction): (DataSource, Option<f64>) = match &spec.data.source {
        SpecSource::Standard { dataset, dir } => {
            let dataset = named(*dataset).ok_or_else(|| TrainError::Step {
                seed: 0,
                step: 0,
                reason: format!("{dataset:?} is not a standard dataset"),
            })?;
            (
                DataSource::Named {
                    dataset,
                    path: dir.clone(),
                },
                None,
            )
        }
        SpecSource::Libsvm { path, test } => {
            let (test_path, frac) = split_test(path, test);
            (
                DataSource::Libsvm {
                    train: path.clone(),
                    test: test_path,
                    num_features: None,
                },
                frac,
            )
        }
        SpecSource::Csv {
            path,
            test,
            label_column,
            header,
        } => {
            let (test_path, frac) = split_test(path, test);
            let options = CsvOptions {
                has_header: *header,
                label: LabelColumn::Index(*label_column),
                ..CsvOptions::default()
            };
            (
                DataSource::Csv {
                    train: path.clone(),
                    test: test_path,
                    options,
                },
                frac,
            )
        }
        SpecSource::Synthetic(s) => (synthetic_source(s), None),
    };
    let data = crate::data::load(&source, data_dir)?;
    match test_fraction {
        None => Ok(data),
        Some(f) => {
            // The same file was read as train and test: hold out a fraction of it as the test set.
            let n = data.train.len();
            let size = ((n as f64) * f).round().clamp(1.0, (n.max(2) - 1) as f64) as usize;
            let (train, test) = preprocess::train_validation_split(&data.train, size, DATA_SEED)
                .map_err(keyed(spec, "data.test_fraction"))?;
            Ok(TrainTest { train, test })
        }
    }
}

fn split_test(path: &Path, test: &TestSet) -> (PathBuf, Option<f64>) {
    match test {
        TestSet::File(p) => (p.clone(), None),
        TestSet::Fraction(f) => (path.to_path_buf(), Some(*f)),
    }
}

/// `[train.augmentation]` draws views of images: the data must be `[C, H, W]` images (not
/// vectors, not PCA features) at least as tall and wide as the padding.
fn check_augmentation(spec: &ExperimentSpec, sample_shape: &[usize]) -> Result<(), TrainError> {
    let Some(a) = spec.train.augmentation else {
        return Ok(());
    };
    let mismatch = |key: &str, reason: String| {
        TrainError::Config(crate::config::ConfigError::DataMismatch {
            at: crate::config::Location::file(&spec.source),
            key: key.into(),
            reason,
        })
    };
    match sample_shape {
        [_, h, w] if a.crop_padding <= *h && a.crop_padding <= *w => Ok(()),
        [_, h, w] => Err(mismatch(
            "train.augmentation.crop_padding",
            format!(
                "{} pixels of mirror padding on images of {h} x {w}; use at most {}",
                a.crop_padding,
                h.min(w)
            ),
        )),
        other => Err(mismatch(
            "train.augmentation",
            format!(
                "random crops and flips need images [C, H, W]; the training examples have shape {other:?}"
            ),
        )),
    }
}

/// A preprocessing error caused by the value of `key`: one line naming the file and the key.
fn keyed<'a>(spec: &'a ExperimentSpec, key: &'static str) -> impl Fn(DataError) -> TrainError + 'a {
    move |e| {
        let reason = match e {
            DataError::InvalidParameter {
                expected, found, ..
            } => format!("expected {expected}, found {found}"),
            other => other.to_string(),
        };
        TrainError::Config(crate::config::ConfigError::DataMismatch {
            at: crate::config::Location::file(&spec.source),
            key: key.into(),
            reason,
        })
    }
}

/// Load and preprocess the data of `spec`.
pub fn prepare_data(spec: &ExperimentSpec, data_dir: &Path) -> Result<PreparedData, TrainError> {
    prepare_data_with(spec, data_dir, None).map(|(data, _)| data)
}

/// Rows of each split kept by [`Experiment::plan_only`]'s preparation.
const PLAN_ONLY_ROWS: usize = 64;

/// [`prepare_data`]; with `head = Some(k)`, every split is cut to its first k examples right after
/// the examples are chosen (classes, public part, subsample, validation split), and scattering
/// features are computed for those alone without the cache: the same steps and checks on a
/// few rows. Also returns the number of training examples before that cut.
fn prepare_data_with(
    spec: &ExperimentSpec,
    data_dir: &Path,
    head: Option<usize>,
) -> Result<(PreparedData, usize), TrainError> {
    let d = &spec.data;
    let mut data = load(spec, data_dir)?;
    let mut notes = Vec::new();
    if let Some(classes) = &d.classes {
        data.train =
            preprocess::keep_classes(&data.train, classes).map_err(keyed(spec, "data.classes"))?;
        data.test =
            preprocess::keep_classes(&data.test, classes).map_err(keyed(spec, "data.classes"))?;
    }
    if let Some(split) = d.public_split {
        let n = data.train.len();
        let public = ((n as f64) * split.fraction)
            .round()
            .clamp(1.0, (n.max(2) - 1) as f64) as usize;
        let (private, public_part) =
            preprocess::train_validation_split(&data.train, public, DATA_SEED ^ 3)
                .map_err(keyed(spec, "data.public_fraction"))?;
        let (used, other) = match split.train_on {
            DataPart::Public => (public_part, private),
            DataPart::Private => (private, public_part),
        };
        notes.push(match split.train_on {
            DataPart::Private => format!(
                "data.public_fraction = {}: training on the private part, {} of the {n} training examples; the privacy guarantee covers these {} only, the other {} (data.train_on = \"public\") are treated as public",
                split.fraction,
                used.len(),
                used.len(),
                other.len()
            ),
            DataPart::Public => format!(
                "data.public_fraction = {}: training on the public part, {} of the {n} training examples, treated as public; the other {} (data.train_on = \"private\") are not used",
                split.fraction,
                used.len(),
                other.len()
            ),
        });
        data.train = used;
    }
    if let Some(n) = d.subsample {
        let available = data.train.len();
        if n > available {
            let after = if d.classes.is_some() {
                " (after data.classes)"
            } else {
                ""
            };
            return Err(crate::config::ConfigError::DataMismatch {
                at: crate::config::Location::file(&spec.source),
                key: "data.subsample".into(),
                reason: format!(
                    "{n} is more than the {available} training examples of the dataset{after}"
                ),
            }
            .into());
        }
        if n < available {
            data.train = preprocess::subsample(&data.train, n, DATA_SEED ^ 1)
                .map_err(keyed(spec, "data.subsample"))?;
        }
    }
    let mut validation = None;
    if d.validation_fraction > 0.0 {
        let n = data.train.len();
        let size = ((n as f64) * d.validation_fraction)
            .round()
            .clamp(1.0, (n.max(2) - 1) as f64) as usize;
        let (train, val) = preprocess::train_validation_split(&data.train, size, DATA_SEED ^ 2)
            .map_err(keyed(spec, "data.validation_fraction"))?;
        data.train = train;
        validation = Some(val);
    }
    let n_train = data.train.len();
    if let Some(k) = head {
        data.train = first_rows(&data.train, k);
        data.test = first_rows(&data.test, k);
        validation = validation.map(|v| first_rows(&v, k));
    }
    let mut sets: Vec<&mut Dataset> = vec![&mut data.train, &mut data.test];
    if let Some(v) = validation.as_mut() {
        sets.push(v);
    }
    if d.scale {
        for s in sets.iter_mut() {
            preprocess::scale_to_unit(s);
        }
    }
    let mut train_mirrored = None;
    if let FeatureMap::Scattering { j, angles } = d.features {
        // A fixed map of each example on its own, fitted on nothing: no privacy cost.
        let dataset = d.source.dataset().name();
        // Flip views need the transform of each training image's mirror too (the config check
        // allows no other augmentation on these features).
        if spec.train.augmentation.is_some()
            && let [c, h, w] = data.train.sample_shape[..]
        {
            train_mirrored = Some(Dataset {
                features: crate::data::augment::mirror_images(
                    data.train.features.view(),
                    [c, h, w],
                ),
                labels: data.train.labels.clone(),
                sample_shape: data.train.sample_shape.clone(),
                num_classes: data.train.num_classes,
            });
        }
        // Public constants on the pixels first (the cache key covers the normalised pixels).
        let input = match &d.scattering_input {
            Some((mean, std)) => Some(
                preprocess::Standardizer::fixed(&data.train, mean, std)
                    .map_err(keyed(spec, "data.scattering_input_mean"))?,
            ),
            None => None,
        };
        let mut splits: Vec<(&str, &mut Dataset)> =
            vec![("train", &mut data.train), ("test", &mut data.test)];
        if let Some(v) = validation.as_mut() {
            splits.push(("validation", v));
        }
        if let Some(m) = train_mirrored.as_mut() {
            splits.push(("train_mirrored", m));
        }
        for (split, set) in splits {
            if let Some(st) = &input {
                st.apply(set)?;
            }
            *set = scattering_features(spec, data_dir, (dataset, split), (j, angles), set, head)?;
        }
    }
    if let Some(ps) = d.private_standardization {
        let (standardizer, note) = private_standardizer(spec, &data.train, ps)?;
        for s in [&mut data.train, &mut data.test] {
            standardizer.apply(s)?;
        }
        for v in [validation.as_mut(), train_mirrored.as_mut()]
            .into_iter()
            .flatten()
        {
            standardizer.apply(v)?;
        }
        notes.push(note);
    }
    let mode = match d.standardize {
        Standardize::None | Standardize::Fixed | Standardize::Private => None,
        Standardize::PerFeature => Some(StandardizeMode::PerFeature),
        Standardize::PerChannel => Some(StandardizeMode::PerChannel),
    };
    if let Some((mean, std)) = &d.fixed_standardization {
        let st = preprocess::Standardizer::fixed(&data.train, mean, std)
            .map_err(keyed(spec, "data.standardize_mean"))?;
        for s in [&mut data.train, &mut data.test] {
            st.apply(s)?;
        }
        for v in [validation.as_mut(), train_mirrored.as_mut()]
            .into_iter()
            .flatten()
        {
            st.apply(v)?;
        }
    }
    if let Some(mode) = mode {
        let st = preprocess::Standardizer::fit(&data.train, mode)?;
        st.apply(&mut data.train)?;
        st.apply(&mut data.test)?;
        for v in [validation.as_mut(), train_mirrored.as_mut()]
            .into_iter()
            .flatten()
        {
            st.apply(v)?;
        }
        notes.push(
            "standardisation statistics come from the training data and are not privatised".into(),
        );
    }
    if let Some(k) = d.pca_components {
        // Fitted on the training split (through a noisy release when private), applied to all.
        type Projection = Box<dyn Fn(&Dataset) -> Result<Dataset, DataError>>;
        let (project, note): (Projection, String) = match d.private_pca {
            Some(pp) => {
                let pca = private_pca(spec, &data.train, k, pp)?;
                let note = format!(
                    "private PCA: {k} components of the training rows' second-moment matrix released with noise multiplier {} (1 Gaussian event at the head of every seed's ledger)",
                    pp.noise_multiplier
                );
                (Box::new(move |ds| pca.transform(ds)), note)
            }
            None => {
                let pca = preprocess::Pca::fit(&data.train, k)
                    .map_err(keyed(spec, "data.pca_components"))?;
                let note = preprocess::Pca::NOTE.to_string();
                (Box::new(move |ds| pca.transform(ds)), note)
            }
        };
        data.train = project(&data.train)?;
        data.test = project(&data.test)?;
        if let Some(v) = validation.as_mut() {
            *v = project(v)?;
        }
        notes.push(note);
    }
    if let Some(max_norm) = d.max_norm {
        let mut tt = TrainTest {
            train: data.train,
            test: data.test,
        };
        let factor = preprocess::scale_max_row_norm(&mut tt, max_norm)?;
        data.train = tt.train;
        data.test = tt.test;
        for v in [validation.as_mut(), train_mirrored.as_mut()]
            .into_iter()
            .flatten()
        {
            preprocess::scale(v, factor as f32);
        }
        notes.push(format!(
            "rows rescaled by {factor:.6} so the largest training row norm is {max_norm} (a data-dependent scale, not privatised)"
        ));
    }
    Ok((
        PreparedData {
            train: data.train,
            train_mirrored,
            validation,
            test: data.test,
            notes,
        },
        n_train,
    ))
}

/// The first `k` examples of `set` (all of them when it has fewer).
fn first_rows(set: &Dataset, k: usize) -> Dataset {
    let k = k.min(set.len());
    Dataset {
        features: set.features.slice(ndarray::s![..k, ..]).to_owned(),
        labels: set.labels[..k].to_vec(),
        sample_shape: set.sample_shape.clone(),
        num_classes: set.num_classes,
    }
}

/// `data.standardize = "private"`: the clipped moment sums of `train` released through the
/// Gaussian mechanism (noise from the statistics stream of `data.standardize_seed`, so every seed,
/// a resumed seed, `dpx eval` and the seeds of an experiment split into several runs see the same
/// release), turned into a standardizer. The two releases are the events
/// `plan::statistics_events` puts at the head of every seed's ledger.
fn private_standardizer(
    spec: &ExperimentSpec,
    train: &Dataset,
    ps: PrivateStandardization,
) -> Result<(preprocess::Standardizer, String), TrainError> {
    let mut sums =
        moments::clipped_moment_sums(train, ps.mean_clip_norm, ps.second_moment_clip_norm)
            .map_err(keyed(spec, "data.standardize"))?;
    let mut rng = super::seed::stream_rng(ps.seed, super::seed::STREAM_STATISTICS);
    for (sum, clip_norm) in [
        (&mut sums.mean, ps.mean_clip_norm),
        (&mut sums.second_moment, ps.second_moment_clip_norm),
    ] {
        add_gaussian_noise(
            ndarray::ArrayViewMut1::from(&mut sum[..]),
            ps.noise_multiplier,
            clip_norm,
            &mut rng,
        )
        .map_err(|e| {
            keyed(spec, "data.standardize_noise_multiplier")(DataError::InvalidParameter {
                name: "data.standardize_noise_multiplier",
                expected: "a valid Gaussian mechanism".into(),
                found: e.to_string(),
            })
        })?;
    }
    let groups = sums.mean.len();
    let (standardizer, dropped) =
        moments::standardizer_from_sums(&sums, train.len(), ps.variance_floor);
    let dropped = match (dropped, ps.variance_floor) {
        (0, _) => String::new(),
        (k, None) => format!("; {k} with a released variance <= 0 set to 0"),
        (k, Some(floor)) => format!("; {k} with a released variance below {floor} raised to it"),
    };
    let note = format!(
        "private standardisation: the means and second moments of {groups} {} released with noise multiplier {} (2 Gaussian events at the head of every seed's ledger){dropped}",
        if sums.per_channel {
            "channels"
        } else {
            "features"
        },
        ps.noise_multiplier
    );
    Ok((standardizer, note))
}

/// `data.pca_noise_multiplier`: the upper triangle of the unit rows' second-moment matrix of
/// `train` (`data::private_pca`, sensitivity 1) released through the Gaussian mechanism, with
/// noise from the PCA stream of `data.pca_seed` (one release per experiment, as for
/// [`private_standardizer`]); the event `plan::statistics_events` records last.
fn private_pca(
    spec: &ExperimentSpec,
    train: &Dataset,
    k: usize,
    pp: crate::config::spec::PrivatePca,
) -> Result<PrivatePca, TrainError> {
    let mut upper = private_pca::unit_second_moments(train);
    let mut rng = super::seed::stream_rng(pp.seed, super::seed::STREAM_PCA);
    add_gaussian_noise(
        ndarray::ArrayViewMut1::from(&mut upper[..]),
        pp.noise_multiplier,
        1.0,
        &mut rng,
    )
    .map_err(|e| {
        keyed(spec, "data.pca_noise_multiplier")(DataError::InvalidParameter {
            name: "data.pca_noise_multiplier",
            expected: "a valid Gaussian mechanism".into(),
            found: e.to_string(),
        })
    })?;
    PrivatePca::from_release(&upper, train.features.ncols(), k)
        .map_err(keyed(spec, "data.pca_components"))
}

/// The scattering features of one split (`data.features = "scattering"`), cached under
/// `data_dir` (`data::scattering_cache`).
/// With `head` set (a plan-only preparation of a few rows), the transform runs on `set` directly and
/// nothing is cached.
fn scattering_features(
    spec: &ExperimentSpec,
    data_dir: &Path,
    (dataset, split): (&str, &str),
    (j, angles): (usize, usize),
    set: &Dataset,
    head: Option<usize>,
) -> Result<Dataset, TrainError> {
    let [_, h, w] = set.sample_shape[..] else {
        return Err(keyed(spec, "data.features")(DataError::InvalidParameter {
            name: "data.features",
            expected: "images [C, H, W]".into(),
            found: format!("examples of shape {:?}", set.sample_shape),
        }));
    };
    let s = crate::data::scattering::Scattering2d::new(h, w, j, angles)
        .map_err(keyed(spec, "data.features"))?;
    if head.is_some() {
        return s
            .transform_dataset(set)
            .map_err(keyed(spec, "data.features"));
    }
    crate::data::scattering_cache::transform_cached(&s, data_dir, dataset, split, set)
        .map_err(keyed(spec, "data.features"))
}
