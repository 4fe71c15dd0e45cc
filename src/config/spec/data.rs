//! `[data]` (room: `config::spec`): the dataset, its source files, synthetic generators,
//! preprocessing and splits, and their checks.

use super::*;

/// `[data]`: where the examples come from and how they are preprocessed.
///
/// Preprocessing order (each step fitted on the training split only): keep `classes` and
/// relabel → public/private split → `subsample` → validation split → `scale` → `features`
/// (scattering) → `standardize` → PCA → `max_norm`.
#[derive(Debug, Clone, PartialEq)]
pub struct DataSpec {
    pub source: DataSource,
    /// `data.scale`: divide 8-bit pixel values by 255 (to [0, 1]).
    pub scale: bool,
    pub standardize: Standardize,
    /// `data.standardize_mean` and `data.standardize_std` of `standardize = "fixed"`: public
    /// constants, one per image channel or per feature (std > 0).
    pub fixed_standardization: Option<(Vec<f64>, Vec<f64>)>,
    /// `standardize = "private"`: the noise and clip norms of the private statistics.
    pub private_standardization: Option<PrivateStandardization>,
    /// `data.allow_nonprivate_statistics`: accept statistics fitted on the private training data
    /// without noise (`standardize = "per_feature"`/`"per_channel"`, PCA) in a private run, whose
    /// ε then does not cover them and is marked not guaranteed.
    pub allow_nonprivate_statistics: bool,
    /// `data.max_norm`: rescale all rows by one factor so that the largest row norm equals this.
    pub max_norm: Option<f64>,
    /// `data.classes`: keep these labels, relabelled 0, 1, ... in the order given.
    pub classes: Option<Vec<usize>>,
    /// `data.public_fraction` and `data.train_on`: split the training set (after `classes`)
    /// into a public part and a private rest, and train on one of them.
    pub public_split: Option<PublicSplit>,
    /// `data.subsample`: keep this many training examples (drawn with the data seed stream).
    pub subsample: Option<usize>,
    /// `data.validation_fraction`: in [0, 1); held out of the training set for evaluation.
    pub validation_fraction: f64,
    /// `data.pca_components`: PCA fitted on the training data (not private; outputs say so),
    /// unless `private_pca` is set.
    pub pca_components: Option<usize>,
    /// `data.pca_noise_multiplier`: the PCA is differentially private (Abadi et al. 2016).
    pub private_pca: Option<PrivatePca>,
    /// `data.features` (with `data.scattering_j`, `data.scattering_angles`).
    pub features: FeatureMap,
    /// `data.scattering_input_mean` and `data.scattering_input_std`: public per-channel constants
    /// the scaled pixels are standardised with before the scattering transform (Tramèr & Boneh
    /// 2021 use ImageNet's), `features = "scattering"` only.
    pub scattering_input: Option<(Vec<f64>, Vec<f64>)>,
}

/// `data.features`: a fixed, data-independent map applied to each image after scaling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeatureMap {
    /// The pixels themselves.
    #[default]
    Pixels,
    /// The 2-D scattering transform (`data::scattering`): `j` scales, `angles` orientations.
    Scattering { j: usize, angles: usize },
}

/// `data.standardize = "private"` (Tramèr & Boneh 2021, "Differentially private learning needs
/// better features", Appendix B, Algorithm 2): each example's per-group means m_i and means of
/// squares s_i (a group is an image channel, or one feature of a vector), clipped to L2 norms
/// `mean_clip_norm` and `second_moment_clip_norm`, summed, and released once with Gaussian noise of
/// std `noise_multiplier` × the clip norm. Two Gaussian events of `noise_multiplier` on the whole
/// training set (add/remove-one sensitivity = the clip norm; docs/accounting.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrivateStandardization {
    /// `data.standardize_noise_multiplier`: σ of both releases.
    pub noise_multiplier: f64,
    /// `data.standardize_mean_clip_norm`: the bound on ‖m_i‖₂.
    pub mean_clip_norm: f64,
    /// `data.standardize_second_moment_clip_norm`: the bound on ‖s_i‖₂.
    pub second_moment_clip_norm: f64,
    /// `data.standardize_seed`: the seed of the release's noise stream (one release per
    /// experiment, whatever its `experiment.seeds`).
    pub seed: u64,
    /// `data.standardize_variance_floor`: when set, a released variance below it is raised to it
    /// and no group is dropped (post-processing of the release); unset, a group whose released
    /// variance is ≤ 0 is set to 0, as in the paper's code.
    pub variance_floor: Option<f64>,
}

/// `data.pca_noise_multiplier` (Abadi et al. 2016, "Deep learning with differential privacy",
/// Sec. 4; the DP-PCA of Pichapati et al. 2019, AdaCliP, Table 2): the upper triangle of
/// Σ x̂x̂ᵀ over the unit-normalised training rows released once with Gaussian noise of std
/// `noise_multiplier` (add/remove-one L2 sensitivity 1; docs/accounting.md), and the data
/// projected onto the top `data.pca_components` eigenvectors of the release. One Gaussian event of
/// `noise_multiplier` on the whole training set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrivatePca {
    /// `data.pca_noise_multiplier`: σ of the release.
    pub noise_multiplier: f64,
    /// `data.pca_seed`: the seed of the release's noise stream (one release per experiment).
    pub seed: u64,
}

impl DataSpec {
    /// Whether the PCA is fitted on the private training data without noise
    /// (`data.pca_components` without `data.pca_noise_multiplier`).
    pub fn nonprivate_pca(&self) -> bool {
        self.pca_components.is_some() && self.private_pca.is_none()
    }
}

/// Default `data.scattering_j` (Oyallon & Mallat 2015; Tramèr & Boneh 2021).
pub const DEFAULT_SCATTERING_J: usize = 2;
/// Default `data.scattering_angles` (L).
pub const DEFAULT_SCATTERING_ANGLES: usize = 8;

/// A public/private split of the training set: a fixed random `fraction` of it (drawn with the
/// data stream, the same for every config with the same data) is the public part, the rest the
/// private part; the run trains on `train_on`. A run on the private part covers exactly those
/// examples with its privacy guarantee; the public part is outside it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublicSplit {
    pub fraction: f64,
    pub train_on: DataPart,
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
    /// u ~ U\[0,1\]^d, w ~ N(0, I), label sign(u·w) (accelerated-methods paper, §5: n = 1e5, d = 20).
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

impl Checker<'_> {
    pub(super) fn data(&self, d: &RawData) -> R<DataSpec> {
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
            | DatasetName::A9a
            | DatasetName::Svhn => DataSource::Standard {
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
        let fixed_standardization = if standardize == Standardize::Fixed {
            let list = |key: &str, v: &Option<Vec<f64>>, positive: bool| -> R<Vec<f64>> {
                let v = v.as_ref().ok_or_else(|| {
                    self.missing(key, "standardize = \"fixed\" needs its public constants")
                })?;
                self.constants(key, v, positive)
            };
            let mean = list("data.standardize_mean", &d.standardize_mean, false)?;
            let std = list("data.standardize_std", &d.standardize_std, true)?;
            if mean.len() != std.len() {
                return Err(self.range(
                    "data.standardize_std",
                    &format!("as many numbers as data.standardize_mean ({})", mean.len()),
                    format!("{} numbers", std.len()),
                ));
            }
            Some((mean, std))
        } else {
            let why = || "only used with data.standardize = \"fixed\"".to_string();
            self.absent("data.standardize_mean", &d.standardize_mean, why)?;
            self.absent("data.standardize_std", &d.standardize_std, why)?;
            None
        };
        let private_standardization = if standardize == Standardize::Private {
            let need = |key: &str, v: Option<f64>| -> R<f64> {
                let v = v.ok_or_else(|| {
                    self.missing(
                        key,
                        "standardize = \"private\" needs its noise multiplier and clip norms",
                    )
                })?;
                self.positive(key, v)
            };
            Some(PrivateStandardization {
                noise_multiplier: need(
                    "data.standardize_noise_multiplier",
                    d.standardize_noise_multiplier,
                )?,
                mean_clip_norm: need(
                    "data.standardize_mean_clip_norm",
                    d.standardize_mean_clip_norm,
                )?,
                second_moment_clip_norm: need(
                    "data.standardize_second_moment_clip_norm",
                    d.standardize_second_moment_clip_norm,
                )?,
                seed: self.int(
                    "data.standardize_seed",
                    d.standardize_seed.unwrap_or(0),
                    0,
                    i64::MAX,
                )?,
                variance_floor: d
                    .standardize_variance_floor
                    .map(|v| {
                        self.float(
                            "data.standardize_variance_floor",
                            v,
                            "a finite number ≥ 0",
                            |x| x >= 0.0,
                        )
                    })
                    .transpose()?,
            })
        } else {
            let why = || "only used with data.standardize = \"private\"".to_string();
            self.absent(
                "data.standardize_noise_multiplier",
                &d.standardize_noise_multiplier,
                why,
            )?;
            self.absent(
                "data.standardize_mean_clip_norm",
                &d.standardize_mean_clip_norm,
                why,
            )?;
            self.absent(
                "data.standardize_second_moment_clip_norm",
                &d.standardize_second_moment_clip_norm,
                why,
            )?;
            self.absent("data.standardize_seed", &d.standardize_seed, why)?;
            self.absent(
                "data.standardize_variance_floor",
                &d.standardize_variance_floor,
                why,
            )?;
            None
        };
        let allow_nonprivate_statistics = d.allow_nonprivate_statistics.unwrap_or(false);
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
        let public_split = match d.public_fraction {
            None => {
                self.absent("data.train_on", &d.train_on, || {
                    "only used with data.public_fraction".into()
                })?;
                None
            }
            Some(f) => Some(PublicSplit {
                fraction: self.float("data.public_fraction", f, "a fraction in (0, 1)", |x| {
                    x > 0.0 && x < 1.0
                })?,
                train_on: d.train_on.unwrap_or(DataPart::Private),
            }),
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
        let private_pca = match d.pca_noise_multiplier {
            Some(sigma) => {
                if pca_components.is_none() {
                    return Err(self.missing(
                        "data.pca_components",
                        "data.pca_noise_multiplier releases a private PCA; give its number of components",
                    ));
                }
                Some(PrivatePca {
                    noise_multiplier: self.positive("data.pca_noise_multiplier", sigma)?,
                    seed: self.int("data.pca_seed", d.pca_seed.unwrap_or(0), 0, i64::MAX)?,
                })
            }
            None => {
                self.absent("data.pca_seed", &d.pca_seed, || {
                    "only used with data.pca_noise_multiplier".to_string()
                })?;
                None
            }
        };
        let features = match d.features.unwrap_or_default() {
            Features::Pixels => {
                let why = || "only used with data.features = \"scattering\"".to_string();
                self.absent("data.scattering_j", &d.scattering_j, why)?;
                self.absent("data.scattering_angles", &d.scattering_angles, why)?;
                self.absent("data.scattering_input_mean", &d.scattering_input_mean, why)?;
                self.absent("data.scattering_input_std", &d.scattering_input_std, why)?;
                FeatureMap::Pixels
            }
            Features::Scattering => {
                if !dataset.is_image() {
                    return Err(self.not_applicable(
                        "data.features",
                        format!(
                            "\"scattering\" needs an image dataset (mnist, fashion-mnist, cifar10); data.dataset is \"{name}\""
                        ),
                    ));
                }
                if pca_components.is_some() {
                    return Err(self.conflict(
                        "data.pca_components",
                        "data.features",
                        "PCA of scattering features is not supported; use one or the other",
                    ));
                }
                let j = self.size(
                    "data.scattering_j",
                    d.scattering_j.unwrap_or(DEFAULT_SCATTERING_J as i64),
                    1,
                    crate::data::scattering::MAX_J,
                )?;
                let angles = self.size(
                    "data.scattering_angles",
                    d.scattering_angles
                        .unwrap_or(DEFAULT_SCATTERING_ANGLES as i64),
                    1,
                    crate::data::scattering::MAX_ANGLES,
                )?;
                FeatureMap::Scattering { j, angles }
            }
        };
        let scattering_input = match features {
            FeatureMap::Scattering { .. } => self.scattering_input(d)?,
            FeatureMap::Pixels => None,
        };
        Ok(DataSpec {
            features,
            scattering_input,
            source,
            scale: d.scale.unwrap_or(dataset.is_image()),
            standardize,
            fixed_standardization,
            private_standardization,
            allow_nonprivate_statistics,
            max_norm,
            classes,
            public_split,
            subsample,
            validation_fraction,
            pca_components,
            private_pca,
        })
    }

    /// A list of public constants (one per channel or feature): 1 to 65536 finite numbers, all
    /// > 0 when `positive`.
    fn constants(&self, key: &str, v: &[f64], positive: bool) -> R<Vec<f64>> {
        if v.is_empty() || v.len() > MAX_WIDTH {
            return Err(self.range(
                key,
                "1 to 65536 numbers (one per channel or feature)",
                format!("{} numbers", v.len()),
            ));
        }
        for &x in v {
            let ok = x.is_finite() && (!positive || x > 0.0);
            if !ok {
                return Err(self.range(
                    key,
                    if positive {
                        "finite numbers > 0"
                    } else {
                        "finite numbers"
                    },
                    x.to_string(),
                ));
            }
        }
        Ok(v.to_vec())
    }

    /// `data.scattering_input_mean` / `data.scattering_input_std`: public per-channel constants
    /// the pixels are standardised with before the scattering transform (both or neither).
    fn scattering_input(&self, d: &RawData) -> R<Option<(Vec<f64>, Vec<f64>)>> {
        match (&d.scattering_input_mean, &d.scattering_input_std) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(self.missing(
                "data.scattering_input_std",
                "data.scattering_input_mean needs its standard deviations",
            )),
            (None, Some(_)) => Err(self.missing(
                "data.scattering_input_mean",
                "data.scattering_input_std needs its means",
            )),
            (Some(mean), Some(std)) => {
                let mean = self.constants("data.scattering_input_mean", mean, false)?;
                let std = self.constants("data.scattering_input_std", std, true)?;
                if mean.len() != std.len() {
                    return Err(self.range(
                        "data.scattering_input_std",
                        &format!(
                            "as many numbers as data.scattering_input_mean ({})",
                            mean.len()
                        ),
                        format!("{} numbers", std.len()),
                    ));
                }
                Ok(Some((mean, std)))
            }
        }
    }

    pub(super) fn synthetic(
        &self,
        generator: Generator,
        s: Option<&RawSynthetic>,
    ) -> R<SyntheticSpec> {
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
}
