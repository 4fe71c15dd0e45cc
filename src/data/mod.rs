//! The data room: datasets in their real file formats, synthetic generators, preprocessing.
//!
//! A [`Dataset`] is a dense feature matrix with one row per example (images flattened in
//! channel, row, column order), class labels, and the shape of one sample. Models read
//! `features` as `[n, prod(sample_shape)]`.
//!
//! This room knows nothing of models or privacy.

use ndarray::Array2;

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
