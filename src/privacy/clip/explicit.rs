//! Per-sample gradients given as an explicit `[B, P]` matrix: the obviously-correct
//! implementation of [`PerSampleGradients`] that the policies' tests (sensitivity worst cases,
//! hand-computed histograms) are written against.
//!
//! Part of the privacy room, for tests and examples; training uses `model`'s lazy
//! implementation. Every answer is computed in f64 from the f32 entries, row by row.

use std::ops::Range;

use ndarray::{Array1, Array2, Axis};

use crate::grad::{GradError, PerSampleGradients, check_materialize_budget};

/// A batch of per-sample gradients held as a matrix, with parameter groups.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplicitGradients {
    /// Shape `[B, P]`.
    pub matrix: Array2<f32>,
    /// Contiguous groups covering `0..P`, in order.
    pub groups: Vec<(String, Range<usize>)>,
    /// The limit [`PerSampleGradients::materialize`] enforces, in bytes.
    pub limit_bytes: u64,
}

impl ExplicitGradients {
    /// One group ("all") and no practical memory limit.
    pub fn new(matrix: Array2<f32>) -> Self {
        let p = matrix.ncols();
        ExplicitGradients {
            matrix,
            groups: vec![("all".into(), 0..p)],
            limit_bytes: u64::MAX,
        }
    }

    /// With the given groups (contiguous, covering every column).
    pub fn with_groups(matrix: Array2<f32>, groups: Vec<(String, Range<usize>)>) -> Self {
        ExplicitGradients {
            matrix,
            groups,
            limit_bytes: u64::MAX,
        }
    }

    fn row_norm(row: ndarray::ArrayView1<f32>, range: Range<usize>) -> f64 {
        row.slice(ndarray::s![range])
            .iter()
            .map(|&v| (v as f64) * (v as f64))
            .sum::<f64>()
            .sqrt()
    }
}

impl PerSampleGradients for ExplicitGradients {
    fn batch_size(&self) -> usize {
        self.matrix.nrows()
    }

    fn num_params(&self) -> usize {
        self.matrix.ncols()
    }

    fn groups(&self) -> Vec<(String, Range<usize>)> {
        self.groups.clone()
    }

    fn norms(&self) -> Array1<f64> {
        let p = self.matrix.ncols();
        self.matrix
            .axis_iter(Axis(0))
            .map(|r| Self::row_norm(r, 0..p))
            .collect()
    }

    fn group_norms(&self) -> Array2<f64> {
        let (b, k) = (self.matrix.nrows(), self.groups.len());
        Array2::from_shape_fn((b, k), |(i, g)| {
            Self::row_norm(self.matrix.row(i), self.groups[g].1.clone())
        })
    }

    fn weighted_sum(&self, weights: &Array1<f64>) -> Array1<f64> {
        let mut out = Array1::<f64>::zeros(self.matrix.ncols());
        for (row, &w) in self.matrix.axis_iter(Axis(0)).zip(weights) {
            out.zip_mut_with(&row, |o, &v| *o += w * v as f64);
        }
        out
    }

    fn group_weighted_sum(&self, weights: &Array2<f64>) -> Array1<f64> {
        let mut out = Array1::<f64>::zeros(self.matrix.ncols());
        for (i, row) in self.matrix.axis_iter(Axis(0)).enumerate() {
            for (g, (_, range)) in self.groups.iter().enumerate() {
                let w = weights[[i, g]];
                for j in range.clone() {
                    out[j] += w * row[j] as f64;
                }
            }
        }
        out
    }

    fn materialize(&self) -> Result<Array2<f32>, GradError> {
        check_materialize_budget(self.matrix.nrows(), self.matrix.ncols(), self.limit_bytes)?;
        Ok(self.matrix.clone())
    }
}
