//! Per-sample gradients of one batch without a `[B, P]` matrix: the model room's answer to
//! [`crate::grad::PerSampleGradients`].
//!
//! Part of the model room; knows nothing of privacy (it never sees a clip norm or noise). One
//! forward and one backward pass over the batch keep, for each trainable layer, its input and its
//! delta (gradient of the loss with respect to the layer's output), wrapped in that layer's
//! [`LayerGradients`] (the maths of each lives in its file under [`super::layer`]: the dense norm
//! factorisation, the convolution's materialised or ghost norms). No operation mixes examples, so
//! example i's gradient is a function of its own rows only.
//!
//! [`BatchGradients`] lays the layers' parameter groups side by side (each layer's tensors in
//! order, as [`crate::model::Model::groups`] names them), runs the norm pass once (lazily, with a
//! shared memory budget, [`CONV_CACHE_LIMIT_BYTES`], for per-example gradients kept until the
//! weighted sum) and answers norms, group norms, weighted sums and the materialised matrix from
//! it. Numerics in [`super::sums`]: each example's norm is computed by the same operations
//! whatever the thread count.
//!
//! **Views** ([`BatchGradients::with_views`], augmentation multiplicity: De et al. 2022,
//! arXiv:2204.13650, Sec. 3.1): the batch's rows are K consecutive views of each example, and
//! example i's gradient is their mean, g_i = (1/K) Σ_k g_{i,k}, so clipping g_i keeps the
//! sensitivity of one example. Weighted sums expand the weights to the views (w_i / K on each of
//! example i's rows: linear, one product). Norms of the mean are not the views' norms: each
//! example's mean row is formed from the layers' per-example rows, one example per worker at a
//! time (one `[P]` scratch buffer per thread, never K·B·P floats), and its squares summed per
//! group. The B mean rows (`[B, P]`, within [`CONV_CACHE_LIMIT_BYTES`]) are kept for the weighted
//! sum that follows, which is then a pass over them, Σ_i w_i ḡ_i, instead of a second product over
//! all K·B rows; the clipped sum is then made of exactly the vectors whose norms were taken.

use std::ops::Range;
use std::sync::OnceLock;

use ndarray::{Array1, Array2, Axis, s};
use rayon::prelude::*;

use super::layer::{LayerGradients, NormContext, Saved};
use super::sums::toward_zero_f32;
use crate::grad::{GradError, PerSampleGradients, check_materialize_budget};

/// Memory allowed for keeping convolutions' per-example weight gradients between the norm pass
/// and the weighted sum (1 GiB); layers beyond it recompute the sum as one product.
pub const CONV_CACHE_LIMIT_BYTES: u64 = 1 << 30;

/// How a convolution's per-example weight-gradient norm is formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvNormMethod {
    /// Form `Δ_iᵀ U_i` (`[C_out, K]`) and sum its squares.
    Materialize,
    /// ⟨U_i U_iᵀ, Δ_i Δ_iᵀ⟩ with two `[L, L]` Gram matrices.
    Ghost,
}

impl ConvNormMethod {
    /// The cheaper method for `positions` = L, `patch` = K, `channels` = C_out:
    /// ghost when L²(K + C_out) < L·K·C_out.
    pub fn cheaper(positions: usize, patch: usize, channels: usize) -> Self {
        if positions * (patch + channels) < patch * channels {
            ConvNormMethod::Ghost
        } else {
            ConvNormMethod::Materialize
        }
    }
}

/// One trainable layer's per-sample gradients and the columns of its groups.
pub(crate) struct TrainableGradients<'a> {
    pub gradients: Box<dyn LayerGradients + 'a>,
    /// Its groups are columns `groups` of the `[B, groups]` norm and weight matrices.
    pub groups: Range<usize>,
}

/// Squared norms `[B, groups]` and what each trainable layer kept from the norm pass.
type NormsAndCache = (Array2<f64>, Vec<Option<Saved>>, Option<Array2<f32>>);

/// The per-sample gradients of one batch (see the module doc), with per-example losses.
pub struct BatchGradients<'a> {
    /// Examples B (rows / views).
    batch: usize,
    /// Views K per example: rows i·K .. i·K + K are example i's views (1: one row per example).
    views: usize,
    num_params: usize,
    groups: Vec<(String, Range<usize>)>,
    trainables: Vec<TrainableGradients<'a>>,
    losses: Array1<f64>,
    limit_bytes: u64,
    /// Squared per-example norms per group `[B, groups]`, computed on first use, and what each
    /// trainable layer's norm pass kept for the weighted sum that follows (per-example weight
    /// gradients of convolutions within [`CONV_CACHE_LIMIT_BYTES`]; with views, the examples'
    /// mean rows `[B, P]` within it), so that sum is a cheap pass instead of a second product.
    squared: OnceLock<NormsAndCache>,
    conv_method: Option<ConvNormMethod>,
}

impl<'a> BatchGradients<'a> {
    pub(crate) fn new(
        batch: usize,
        num_params: usize,
        groups: Vec<(String, Range<usize>)>,
        trainables: Vec<TrainableGradients<'a>>,
        losses: Array1<f64>,
        limit_bytes: u64,
    ) -> Self {
        BatchGradients {
            batch,
            views: 1,
            num_params,
            groups,
            trainables,
            losses,
            limit_bytes,
            squared: OnceLock::new(),
            conv_method: None,
        }
    }

    /// Per-example losses ℓ_i (data term; with views, the mean over the example's views).
    /// Shape `[B]`.
    pub fn losses(&self) -> &Array1<f64> {
        &self.losses
    }

    /// Read the batch's rows as `views` consecutive views of each example (see the module doc):
    /// from here on example i's gradient is the mean of rows i·K .. i·K + K. Panics when the rows
    /// are not a multiple of `views` (the caller built the batch).
    pub fn with_views(mut self, views: usize) -> Self {
        assert!(
            views >= 1 && self.batch.is_multiple_of(views) && self.views == 1,
            "{} rows are not whole groups of {views} views",
            self.batch
        );
        if views == 1 {
            return self;
        }
        self.batch /= views;
        self.views = views;
        self.losses = self
            .losses
            .exact_chunks(views)
            .into_iter()
            .map(|c| c.iter().sum::<f64>() / views as f64)
            .collect();
        self.squared = OnceLock::new();
        self
    }

    /// Weights per example and group `[B, groups]` (`None`: all ones) spread over the rows:
    /// w_i / K on each of example i's K views (the mean of the views is linear).
    fn per_row(&self, weights: Option<&Array2<f64>>, groups: usize) -> Array2<f64> {
        let k = self.views as f64;
        Array2::from_shape_fn((self.batch * self.views, groups), |(r, g)| {
            weights.map_or(1.0, |w| w[[r / self.views, g]]) / k
        })
    }

    /// Example i's gradient (the mean of its views) into `row`; `view` is scratch of length P.
    fn mean_row(&self, i: usize, row: &mut [f32], view: &mut [f32]) {
        row.fill(0.0);
        // Every view writes the same (trainable) ranges; frozen ones stay zero.
        view.fill(0.0);
        for v in 0..self.views {
            let mut view_row = ndarray::ArrayViewMut1::from(&mut *view);
            for trainable in &self.trainables {
                trainable
                    .gradients
                    .example_gradient(i * self.views + v, view_row.view_mut());
            }
            for (r, x) in row.iter_mut().zip(view.iter()) {
                *r += *x;
            }
        }
        let k = self.views as f32;
        row.iter_mut().for_each(|r| *r /= k);
    }

    /// Squared norms per group of the views' means, one example per worker, and the mean rows
    /// `[B, P]` themselves when they fit [`CONV_CACHE_LIMIT_BYTES`] (for the weighted sum).
    fn mean_squared_norms(&self) -> (Array2<f64>, Option<Array2<f32>>) {
        let p = self.num_params;
        let keep = (self.batch as u64)
            .saturating_mul(p as u64)
            .saturating_mul(4)
            <= CONV_CACHE_LIMIT_BYTES;
        let norms_of = |row: &[f32]| -> Vec<f64> {
            self.groups
                .iter()
                .map(|(_, r)| super::sums::sum_squares_slice(&row[r.clone()]))
                .collect()
        };
        let (rows, kept): (Vec<Vec<f64>>, _) = if keep {
            let mut kept = Array2::<f32>::zeros((self.batch, p));
            let rows = kept
                .axis_iter_mut(Axis(0))
                .into_par_iter()
                .enumerate()
                .map_init(
                    || vec![0f32; p],
                    |view, (i, mut row)| {
                        let Some(row) = row.as_slice_mut() else {
                            unreachable!("rows of a fresh array are contiguous")
                        };
                        self.mean_row(i, row, view);
                        norms_of(row)
                    },
                )
                .collect();
            (rows, Some(kept))
        } else {
            let rows = (0..self.batch)
                .into_par_iter()
                .map_init(
                    || (vec![0f32; p], vec![0f32; p]),
                    |(row, view), i| {
                        self.mean_row(i, row, view);
                        norms_of(row)
                    },
                )
                .collect();
            (rows, None)
        };
        let norms = Array2::from_shape_fn((self.batch, self.groups.len()), |(i, g)| rows[i][g]);
        (norms, kept)
    }

    /// Σ_i g_i: the non-private batch gradient. Shape `[P]`.
    pub fn sum(&self) -> Array1<f64> {
        self.combine(None)
    }

    /// Force one method for every convolution's norms (tests compare both); by default each
    /// layer uses [`ConvNormMethod::cheaper`].
    pub fn with_conv_norm_method(mut self, method: ConvNormMethod) -> Self {
        self.conv_method = Some(method);
        self.squared = OnceLock::new();
        self
    }

    fn squared_norms(&self) -> &Array2<f64> {
        &self.squared_and_cache().0
    }

    fn squared_and_cache(&self) -> &NormsAndCache {
        self.squared.get_or_init(|| {
            if self.views > 1 {
                let (norms, kept) = self.mean_squared_norms();
                return (norms, self.trainables.iter().map(|_| None).collect(), kept);
            }
            let mut out = Array2::<f64>::zeros((self.batch, self.groups.len()));
            let mut ctx = NormContext {
                cache_budget: CONV_CACHE_LIMIT_BYTES,
                conv_method: self.conv_method,
            };
            let caches = self
                .trainables
                .iter()
                .map(|t| {
                    let cols = out.slice_mut(s![.., t.groups.clone()]);
                    t.gradients.squared_norms(&mut ctx, cols)
                })
                .collect();
            (out, caches, None)
        })
    }

    /// Σ_i Σ_k weights[i, k] g_i restricted to group k; `None` means all weights 1.
    fn combine(&self, weights: Option<&Array2<f64>>) -> Array1<f64> {
        if let Some(means) = self.squared.get().and_then(|(_, _, kept)| kept.as_ref()) {
            // With views and the norm pass done: a pass over the kept mean rows, group by group.
            let mut out = Array1::<f64>::zeros(self.num_params);
            for (g, (_, range)) in self.groups.iter().enumerate() {
                let w: Vec<f32> = (0..self.batch)
                    .map(|i| weights.map_or(1.0, |w| toward_zero_f32(w[[i, g]])))
                    .collect();
                let rows = means.slice(s![.., range.clone()]);
                super::sums::weighted_rows_sum(&mut out, range, rows, &w);
            }
            return out;
        }
        // With views, example i's weight goes to each of its rows over K (no cache is kept then).
        let spread;
        let weights = if self.views > 1 {
            spread = self.per_row(weights, self.groups.len());
            Some(&spread)
        } else {
            weights
        };
        let mut out = Array1::<f64>::zeros(self.num_params);
        let caches = self.squared.get().map(|(_, c, _)| c);
        for (t, trainable) in self.trainables.iter().enumerate() {
            let w = weights.map(|w| w.slice(s![.., trainable.groups.clone()]));
            let cache = caches.and_then(|c| c[t].as_deref());
            trainable.gradients.weighted_sum(w, cache, &mut out);
        }
        out
    }
}

impl PerSampleGradients for BatchGradients<'_> {
    fn batch_size(&self) -> usize {
        self.batch
    }

    fn num_params(&self) -> usize {
        self.num_params
    }

    fn groups(&self) -> Vec<(String, Range<usize>)> {
        self.groups.clone()
    }

    fn norms(&self) -> Array1<f64> {
        self.squared_norms()
            .axis_iter(Axis(0))
            .map(|row| row.sum().sqrt())
            .collect()
    }

    fn group_norms(&self) -> Array2<f64> {
        self.squared_norms().mapv(f64::sqrt)
    }

    fn weighted_sum(&self, weights: &Array1<f64>) -> Array1<f64> {
        assert_eq!(weights.len(), self.batch, "one weight per example");
        let g = self.groups.len();
        let full = Array2::from_shape_fn((self.batch, g), |(i, _)| weights[i]);
        self.combine(Some(&full))
    }

    fn group_weighted_sum(&self, weights: &Array2<f64>) -> Array1<f64> {
        assert_eq!(
            weights.dim(),
            (self.batch, self.groups.len()),
            "one weight per example and group"
        );
        self.combine(Some(weights))
    }

    fn materialize(&self) -> Result<Array2<f32>, GradError> {
        check_materialize_budget(self.batch, self.num_params, self.limit_bytes)?;
        let mut out = Array2::<f32>::zeros((self.batch, self.num_params));
        if self.views > 1 {
            let p = self.num_params;
            out.axis_iter_mut(Axis(0))
                .into_par_iter()
                .enumerate()
                .for_each_init(
                    || vec![0f32; p],
                    |view, (i, mut row)| match row.as_slice_mut() {
                        Some(row) => self.mean_row(i, row, view),
                        None => unreachable!("rows of a standard-layout matrix are contiguous"),
                    },
                );
            return Ok(out);
        }
        out.axis_iter_mut(Axis(0))
            .into_par_iter()
            .enumerate()
            .for_each(|(i, mut row)| {
                for trainable in &self.trainables {
                    trainable.gradients.example_gradient(i, row.view_mut());
                }
            });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ghost_is_chosen_only_when_cheaper() {
        // mnist_cnn's first conv: L = 196, K = 64, C = 16: 196·80 > 64·16, so materialise.
        assert_eq!(
            ConvNormMethod::cheaper(196, 64, 16),
            ConvNormMethod::Materialize
        );
        // A late conv with 4 positions and a wide kernel: 4·(1152+128) < 1152·128, so ghost.
        assert_eq!(ConvNormMethod::cheaper(4, 1152, 128), ConvNormMethod::Ghost);
    }
}
