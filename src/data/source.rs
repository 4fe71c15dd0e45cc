//! Data room: where datasets live and how a [`DataSource`] becomes a [`TrainTest`].
//!
//! The data directory is `data/` relative to the working directory unless the `DPX_DATA_DIR`
//! environment variable says otherwise ([`default_data_dir`]); a named dataset lives in
//! `<data_dir>/<name>/` unless the source gives an explicit directory. A dataset that is not
//! there is a [`DataError::NotFound`] listing every place looked and the `dpx data fetch`
//! command that gets it. This module must not download anything (that is `fetch`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::cifar::{self, TEST_BATCH, TRAIN_BATCHES};
use super::csv::{CsvOptions, load_csv_pair};
use super::error::DataError;
use super::idx::load_idx_dataset;
use super::io::check_regular;
use super::libsvm::load_libsvm_pair;
use super::svhn;
use super::synthetic::SyntheticSpec;
use super::{Dataset, TrainTest};

/// The environment variable that overrides the data directory.
pub const DATA_DIR_ENV: &str = "DPX_DATA_DIR";

/// The data directory when neither a flag nor [`DATA_DIR_ENV`] says otherwise.
pub const DEFAULT_DATA_DIR: &str = "data";

/// The standard datasets dpx can find on disk and fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NamedDataset {
    /// MNIST digits (IDX), 60000 train / 10000 test, 1x28x28, 10 classes.
    Mnist,
    /// Fashion-MNIST (IDX), same shapes as MNIST.
    FashionMnist,
    /// CIFAR-10 binary version, 50000 train / 10000 test, 3x32x32, 10 classes.
    Cifar10,
    /// a9a (UCI Adult, LIBSVM), 32561 train / 16281 test, 123 binary features, 2 classes.
    A9a,
    /// SVHN cropped digits (MAT-files), 73257 train / 26032 test, 3x32x32, 10 classes.
    Svhn,
}

/// The four IDX file names of MNIST and Fashion-MNIST (without `.gz`):
/// train images, train labels, test images, test labels.
pub const IDX_FILES: [&str; 4] = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
];

/// The a9a feature count (LIBSVM data page: "# of features: 123").
pub const A9A_FEATURES: usize = 123;

impl NamedDataset {
    /// Every named dataset.
    pub const ALL: [NamedDataset; 5] = [
        NamedDataset::Mnist,
        NamedDataset::FashionMnist,
        NamedDataset::Cifar10,
        NamedDataset::A9a,
        NamedDataset::Svhn,
    ];

    /// The name used on the command line, in configs and as the directory name.
    pub fn name(self) -> &'static str {
        match self {
            NamedDataset::Mnist => "mnist",
            NamedDataset::FashionMnist => "fashion-mnist",
            NamedDataset::Cifar10 => "cifar10",
            NamedDataset::A9a => "a9a",
            NamedDataset::Svhn => "svhn",
        }
    }

    /// The command that downloads this dataset into `data_dir`.
    pub fn fetch_command(self, data_dir: &Path) -> String {
        if data_dir == Path::new(DEFAULT_DATA_DIR) {
            format!("dpx data fetch {}", self.name())
        } else {
            format!(
                "dpx data fetch {} --data-dir {}",
                self.name(),
                data_dir.display()
            )
        }
    }
}

impl std::fmt::Display for NamedDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for NamedDataset {
    type Err = DataError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NamedDataset::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| DataError::InvalidParameter {
                name: "dataset",
                expected: format!("one of {}", NamedDataset::ALL.map(|d| d.name()).join(", ")),
                found: s.to_string(),
            })
    }
}

/// Where a run's data comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSource {
    /// A standard dataset in `path` (its own directory) or else `<data_dir>/<name>`.
    Named {
        dataset: NamedDataset,
        path: Option<PathBuf>,
    },
    /// Two LIBSVM files; `num_features` fixed, or the largest index in either file.
    Libsvm {
        train: PathBuf,
        test: PathBuf,
        num_features: Option<usize>,
    },
    /// Two CSV files with a label column.
    Csv {
        train: PathBuf,
        test: PathBuf,
        options: CsvOptions,
    },
    /// A synthetic generator, deterministic from `seed`.
    Synthetic { spec: SyntheticSpec, seed: u64 },
}

/// The data directory: the value of `DPX_DATA_DIR` when set and non-empty, else `data`.
pub fn default_data_dir() -> PathBuf {
    data_dir_from_env(std::env::var_os(DATA_DIR_ENV))
}

/// [`default_data_dir`] given the environment variable's value (testable without touching
/// the process environment).
pub fn data_dir_from_env(value: Option<OsString>) -> PathBuf {
    match value {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(DEFAULT_DATA_DIR),
    }
}

/// The directory a named dataset is looked for in: `path` when given, else
/// `<data_dir>/<name>`.
pub fn dataset_dir(dataset: NamedDataset, path: Option<&Path>, data_dir: &Path) -> PathBuf {
    path.map_or_else(|| data_dir.join(dataset.name()), Path::to_path_buf)
}

/// Load train and test for a source. `data_dir` is used only for named datasets without an
/// explicit path (see [`default_data_dir`]).
pub fn load(source: &DataSource, data_dir: &Path) -> Result<TrainTest, DataError> {
    let data = match source {
        DataSource::Named { dataset, path } => {
            let dir = dataset_dir(*dataset, path.as_deref(), data_dir);
            let not_found = |expected: String, looked_in: Vec<PathBuf>| DataError::NotFound {
                dataset: dataset.name().to_string(),
                expected,
                looked_in: looked_in.iter().map(|p| absolute(p)).collect(),
                hint: hint(*dataset, path.as_deref(), data_dir),
            };
            match dataset {
                NamedDataset::Mnist | NamedDataset::FashionMnist => load_idx_dir(&dir, not_found)?,
                NamedDataset::Cifar10 => load_cifar(&dir, not_found)?,
                NamedDataset::Svhn => {
                    let mut files = Vec::with_capacity(2);
                    for name in [svhn::TRAIN_FILE, svhn::TEST_FILE] {
                        match raw_or_gz(&dir, name)? {
                            Some(p) => files.push(p),
                            None => {
                                return Err(not_found(format!("{name} or {name}.gz"), vec![dir]));
                            }
                        }
                    }
                    TrainTest {
                        train: svhn::read_svhn_file(&files[0])?,
                        test: svhn::read_svhn_file(&files[1])?,
                    }
                }
                NamedDataset::A9a => {
                    let (train, test) = (dir.join("a9a"), dir.join("a9a.t"));
                    check_regular(&train, "the a9a training file")?;
                    check_regular(&test, "the a9a test file")?;
                    if !train.is_file() || !test.is_file() {
                        return Err(not_found("a9a and a9a.t".to_string(), vec![dir]));
                    }
                    let (train, test) = load_libsvm_pair(&train, &test, Some(A9A_FEATURES))?;
                    TrainTest { train, test }
                }
            }
        }
        DataSource::Libsvm {
            train,
            test,
            num_features,
        } => {
            let (train, test) = load_libsvm_pair(train, test, *num_features)?;
            TrainTest { train, test }
        }
        DataSource::Csv {
            train,
            test,
            options,
        } => {
            let (train, test) = load_csv_pair(train, test, options)?;
            TrainTest { train, test }
        }
        DataSource::Synthetic { spec, seed } => spec.generate(*seed)?,
    };
    data.check_consistent()?;
    Ok(data)
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn hint(dataset: NamedDataset, path: Option<&Path>, data_dir: &Path) -> String {
    match path {
        Some(p) => format!(
            "Download it with `{}` and set the path to {}, or put the files in {}",
            dataset.fetch_command(data_dir),
            data_dir.join(dataset.name()).display(),
            p.display()
        ),
        None => format!(
            "Download it with `{}`, or set {DATA_DIR_ENV} to a directory holding {}/",
            dataset.fetch_command(data_dir),
            dataset.name()
        ),
    }
}

/// The file `name` or `name.gz` in `dir`, whichever exists; a directory, FIFO or device in
/// their place is an error saying so (not "not found").
fn raw_or_gz(dir: &Path, name: &str) -> Result<Option<PathBuf>, DataError> {
    let candidates = [dir.join(name), dir.join(format!("{name}.gz"))];
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        return Ok(Some(p.clone()));
    }
    for p in &candidates {
        check_regular(p, &format!("the data file {name} or {name}.gz"))?;
    }
    Ok(None)
}

fn load_idx_dir(
    dir: &Path,
    not_found: impl Fn(String, Vec<PathBuf>) -> DataError,
) -> Result<TrainTest, DataError> {
    let mut files = Vec::with_capacity(4);
    for name in IDX_FILES {
        match raw_or_gz(dir, name)? {
            Some(p) => files.push(p),
            None => return Err(not_found(format!("{name} or {name}.gz"), vec![dir.into()])),
        }
    }
    Ok(TrainTest {
        train: load_idx_dataset(&files[0], &files[1], 10)?,
        test: load_idx_dataset(&files[2], &files[3], 10)?,
    })
}

fn load_cifar(
    dir: &Path,
    not_found: impl Fn(String, Vec<PathBuf>) -> DataError,
) -> Result<TrainTest, DataError> {
    let batches = dir.join("cifar-10-batches-bin");
    let tarball = dir.join("cifar-10-binary.tar.gz");
    for candidate in [&batches, dir] {
        if cifar::batch_file(candidate, TRAIN_BATCHES[0]).is_some()
            || cifar::batch_file(candidate, TEST_BATCH).is_some()
        {
            return cifar::load_cifar_dir(candidate);
        }
    }
    if tarball.is_file() {
        return cifar::load_cifar_tar(&tarball);
    }
    for stem in TRAIN_BATCHES.iter().chain([&TEST_BATCH]) {
        check_regular(
            &batches.join(format!("{stem}.bin")),
            "a CIFAR-10 batch file",
        )?;
    }
    check_regular(&tarball, "the CIFAR-10 archive cifar-10-binary.tar.gz")?;
    Err(not_found(
        "data_batch_1..5 and test_batch (.bin or .bin.gz), or cifar-10-binary.tar.gz".to_string(),
        vec![batches, dir.to_path_buf(), tarball],
    ))
}

impl TrainTest {
    /// Check train and test describe the same kind of example; unify `num_classes`.
    pub fn check_consistent(&self) -> Result<(), DataError> {
        let (a, b) = (&self.train, &self.test);
        if a.sample_shape != b.sample_shape || a.num_features() != b.num_features() {
            return Err(DataError::Inconsistent {
                what: "test sample shape (must equal train's)".to_string(),
                expected: format!("{:?}", a.sample_shape),
                found: format!("{:?}", b.sample_shape),
            });
        }
        if a.num_classes != b.num_classes {
            return Err(DataError::Inconsistent {
                what: "test number of classes (must equal train's)".to_string(),
                expected: a.num_classes.to_string(),
                found: b.num_classes.to_string(),
            });
        }
        Ok(())
    }
}

/// A convenience for callers holding only a [`Dataset`]: wrap train and test.
pub fn train_test(train: Dataset, test: Dataset) -> Result<TrainTest, DataError> {
    let t = TrainTest { train, test };
    t.check_consistent()?;
    Ok(t)
}
