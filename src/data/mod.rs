//! The data room: datasets in their real file formats, synthetic generators, preprocessing.
//!
//! A [`Dataset`] is a dense feature matrix with one row per example (images flattened in
//! channel, row, column order), class labels, and the shape of one sample. Models read
//! `features` as `[n, prod(sample_shape)]`.
//!
//! Files, one per concern: [`idx`] (MNIST, Fashion-MNIST), [`cifar`] (CIFAR-10 binary),
//! [`libsvm`] (a9a), [`csv`] (CSV with a label column), [`synthetic`] (seeded generators),
//! [`source`] (where datasets live; [`load`]), [`preprocess`] (scaling, standardising, class
//! subsets, splits, PCA), [`moments`] (clipped per-example channel moments, the data half of
//! private standardisation), [`scattering`] (the 2-D scattering transform of images, checked
//! against Kymatio) and [`scattering_cache`] (its features cached on disk), [`augment`] (random crops and flips: augmented views of image
//! batches), [`sampler`] (Poisson, shuffle, fixed-size batches), [`fetch`]
//! (download and verify the standard datasets), [`error`] ([`DataError`]).
//!
//! This room knows nothing of models or privacy. Loaders return pixel values as read (0..=255
//! for images); scaling is an explicit preprocessing step.

use ndarray::Array2;

pub mod augment;
pub mod cifar;
pub mod csv;
pub mod error;
pub mod fetch;
pub mod idx;
pub mod io;
pub mod labels;
pub mod libsvm;
pub mod mat;
pub mod moments;
pub mod preprocess;
pub mod private_pca;
pub mod sampler;
pub mod scattering;
pub mod scattering_cache;
pub mod source;
pub mod svhn;
pub mod synthetic;

pub use error::DataError;
pub use source::{DataSource, NamedDataset, default_data_dir, load};

/// A labelled dataset held in memory.
///
/// # Shapes
/// - `features`: `[n, d]` with `d = sample_shape.iter().product()`; images are `[C, H, W]`
///   flattened channel-major (as CIFAR-10's binary format stores them).
/// - `labels`: `[n]`, class indices in `0..num_classes` (binary ±1 data maps −1 → 0, +1 → 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub features: Array2<f32>,
    pub labels: Vec<usize>,
    pub sample_shape: Vec<usize>,
    pub num_classes: usize,
}

impl Dataset {
    /// Number of examples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no examples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Number of features per example.
    pub fn num_features(&self) -> usize {
        self.features.ncols()
    }
}

/// A training set and a test set of the same kind (same sample shape and classes).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainTest {
    pub train: Dataset,
    pub test: Dataset,
}
