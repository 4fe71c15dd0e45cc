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

use std::mem::MaybeUninit;

use ndarray::{Array2, ArrayView2, ArrayViewMut1, Axis};
use rayon::prelude::*;

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

/// From this many copied elements, [`gather_rows`] copies rows on the pool.
const GATHER_PAR_MIN_ELEMENTS: usize = 1 << 16;

/// Rows `indices` of `features`, in that order: `[indices.len(), d]`, each row copied whole
/// (rows on the current rayon pool from `GATHER_PAR_MIN_ELEMENTS` elements). The same values
/// as ndarray's `select(Axis(0), indices)`, which walks element by element: measured on two AMD
/// EPYC cores (2026-11-29), `select` took about 140 µs for a batch of 256 MNIST rows, a third of
/// a `logreg_mnist`-sized training step, with the pool's other worker idle and falling asleep.
///
/// # Panics
/// When an index is out of range (callers pass sampled example indices).
pub fn gather_rows(features: ArrayView2<'_, f32>, indices: &[usize]) -> Array2<f32> {
    let d = features.ncols();
    let mut out = Array2::<f32>::uninit((indices.len(), d));
    let copy = |(mut row, &i): (ArrayViewMut1<'_, MaybeUninit<f32>>, &usize)| {
        let source = features.row(i);
        match (row.as_slice_mut(), source.as_slice()) {
            (Some(dst), Some(src)) => {
                for (o, &v) in dst.iter_mut().zip(src) {
                    o.write(v);
                }
            }
            _ => row.zip_mut_with(&source, |o, &v| {
                o.write(v);
            }),
        }
    };
    if indices.len().saturating_mul(d) >= GATHER_PAR_MIN_ELEMENTS {
        out.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(indices.par_iter())
            .for_each(copy);
    } else {
        out.axis_iter_mut(Axis(0)).zip(indices).for_each(copy);
    }
    // SAFETY: every row was written whole just above (`indices.len()` rows of `d` elements).
    unsafe { out.assume_init() }
}

/// A training set and a test set of the same kind (same sample shape and classes).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainTest {
    pub train: Dataset,
    pub test: Dataset,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_rows_are_ndarrays_select() {
        let x = Array2::from_shape_fn((300, 257), |(i, j)| (i * 1000 + j) as f32 * 0.5);
        // A small batch (serial), a large one (rows on the pool), repeats, an empty one and a
        // non-contiguous source (a transposed copy viewed back).
        let small = [4usize, 0, 4, 299];
        let large: Vec<usize> = (0..600).map(|k| (k * 7919) % 300).collect();
        let xt = x.t().to_owned();
        for indices in [&small[..], &large[..], &[]] {
            let want = x.select(Axis(0), indices);
            assert_eq!(gather_rows(x.view(), indices), want);
            assert_eq!(gather_rows(xt.t(), indices), want);
        }
    }
}
