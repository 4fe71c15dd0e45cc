//! Per-sample gradients of one batch without a `[B, P]` matrix: the model room's answer to
//! [`crate::grad::PerSampleGradients`].
//!
//! Part of the model room; knows nothing of privacy (it never sees a clip norm or noise). One
//! forward and one backward pass over each shard of the batch keep, for each trainable layer, its input and its
//! delta (gradient of the loss with respect to the layer's output), wrapped in that layer's
//! [`LayerGradients`] (the maths of each lives in its file under [`super::layer`]: the dense norm
//! factorisation, the convolution's materialised or ghost norms). No operation mixes examples, so
//! example i's gradient is a function of its own rows only.
//!
//! **Shards** (data parallelism inside one step): [`crate::model::Model::per_sample_views`] cuts
//! the batch into consecutive ranges of whole examples ([`shard_ranges`]: as many as the step's
//! work pays for, at most [`MAX_SHARDS`]), and each shard runs its own forward pass, backward pass
//! and norm pass as one task on the rayon pool, so a small step keeps two cores busy where its
//! layers alone could not. Norms are per example, so sharding leaves them unchanged; sums over the
//! batch add the shards' partial sums in shard order. The shard count is a function of the batch
//! size and the model, never of the thread count, so every bit is the same on any pool.
//!
//! [`BatchGradients`] lays the layers' parameter groups side by side (each layer's tensors in
//! order, as [`crate::model::Model::groups`] names them), runs the norm pass once (lazily, with a
//! memory budget, [`CONV_CACHE_LIMIT_BYTES`] split evenly between the shards, for per-example
//! gradients kept until the weighted sum) and answers norms, group norms, weighted sums and the materialised matrix from
//! it. Numerics in [`super::sums`]: each example's norm is computed by the same operations
//! whatever the thread count.
//!
//! **Views** ([`crate::model::Model::per_sample_views`], augmentation multiplicity: De et al. 2022,
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

use ndarray::{Array1, Array2, ArrayView2, Axis, s};
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

/// Squared norms `[examples, groups]` and what each trainable layer kept from the norm pass.
type NormsAndCache = (Array2<f64>, Vec<Option<Saved>>, Option<Array2<f32>>);

/// Fewest rows (examples × views) a shard is given: smaller products lose more to packing and
/// task overhead than a second core gains on them.
pub const SHARD_MIN_ROWS: usize = 32;

/// Most shards a batch is cut into.
pub const MAX_SHARDS: usize = 8;

/// Step FLOPs per parameter each shard must carry. A shard costs about P of its own (its partial
/// sum is a `[P]` vector written, widened to f64 and added once more; its weight-gradient
/// products have a short reduction): about 2.4 ns per parameter measured on dense layers, i.e.
/// ~240 FLOPs at 100 GFLOP/s, so 2,400 keeps it near a tenth of the shard's work.
const SHARD_FLOPS_PER_PARAM: f64 = 2400.0;

/// Memory allowed for the shards' partial sums (`shards × P` f64) before they are reduced.
const PARTIAL_SUMS_LIMIT_BYTES: u64 = 256 << 20;

/// The data-parallel shards of a batch of `examples` examples of `views` rows each, for a model
/// of `num_params` parameters whose step on the batch costs `step_flops`: consecutive example
/// ranges of near-equal size, as many as the work allows (each shard at least [`SHARD_MIN_ROWS`]
/// rows and `SHARD_FLOPS_PER_PARAM` × P FLOPs), at most [`MAX_SHARDS`] and at most what
/// `PARTIAL_SUMS_LIMIT_BYTES` allows. A function of the batch and the model only, never of the
/// thread count, so the reduction order (and every bit of the sum) is the same on any pool.
pub fn shard_ranges(
    examples: usize,
    views: usize,
    num_params: usize,
    step_flops: f64,
) -> Vec<Range<usize>> {
    let rows = examples.saturating_mul(views);
    let p = num_params.max(1);
    let by_memory = usize::try_from(PARTIAL_SUMS_LIMIT_BYTES / (p as u64 * 8)).unwrap_or(1);
    // Truncation toward zero is the intent (a partial shard's worth of work is not a shard).
    let by_work = (step_flops / (SHARD_FLOPS_PER_PARAM * p as f64)).min(MAX_SHARDS as f64) as usize;
    let shards = (rows / SHARD_MIN_ROWS)
        .min(MAX_SHARDS)
        .min(by_work)
        .min(by_memory)
        .max(1);
    even_ranges(examples, shards)
}

/// `examples` cut into `shards` consecutive ranges of near-equal size (at most one per example;
/// one empty range for an empty batch).
pub fn even_ranges(examples: usize, shards: usize) -> Vec<Range<usize>> {
    let shards = shards.min(examples).max(1);
    (0..shards)
        .map(|k| k * examples / shards..(k + 1) * examples / shards)
        .collect()
}

/// One data-parallel shard of a batch: consecutive examples, the per-sample gradients of their
/// rows (from their own forward and backward pass) and their norm pass.
pub(crate) struct Shard<'a> {
    /// The batch's examples this shard holds (its rows are `examples × views`).
    pub examples: Range<usize>,
    pub trainables: Vec<TrainableGradients<'a>>,
    /// Squared norms per group of this shard's examples, and what the norm pass kept.
    squared: OnceLock<NormsAndCache>,
}

impl<'a> Shard<'a> {
    pub(crate) fn new(examples: Range<usize>, trainables: Vec<TrainableGradients<'a>>) -> Self {
        Shard {
            examples,
            trainables,
            squared: OnceLock::new(),
        }
    }

    fn len(&self) -> usize {
        self.examples.len()
    }
}

/// The per-sample gradients of one batch (see the module doc), with per-example losses.
pub struct BatchGradients<'a> {
    /// Examples B (rows / views).
    batch: usize,
    /// Views K per example: rows i·K .. i·K + K are example i's views (1: one row per example).
    views: usize,
    num_params: usize,
    groups: Vec<(String, Range<usize>)>,
    /// Consecutive example ranges covering 0..B, in order ([`shard_ranges`]).
    shards: Vec<Shard<'a>>,
    losses: Array1<f64>,
    limit_bytes: u64,
    /// Squared per-example norms per group `[B, groups]`: the shards' norm passes side by side.
    squared: OnceLock<Array2<f64>>,
    conv_method: Option<ConvNormMethod>,
}

impl<'a> BatchGradients<'a> {
    /// `shards` cover examples `0..B` in order; `losses` are per example (views averaged).
    pub(crate) fn new(
        (batch, views): (usize, usize),
        num_params: usize,
        groups: Vec<(String, Range<usize>)>,
        shards: Vec<Shard<'a>>,
        losses: Array1<f64>,
        limit_bytes: u64,
    ) -> Self {
        debug_assert_eq!(shards.iter().map(Shard::len).sum::<usize>(), batch);
        BatchGradients {
            batch,
            views,
            num_params,
            groups,
            shards,
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

    /// Number of data-parallel shards the batch was cut into ([`shard_ranges`]).
    pub fn shards(&self) -> usize {
        self.shards.len()
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
        for shard in &mut self.shards {
            shard.squared = OnceLock::new();
        }
        self
    }

    /// Example `i`'s gradient (the mean of its views) of `shard` into `row` (local index `i`);
    /// `view` is scratch of length P.
    fn mean_row(&self, shard: &Shard<'_>, i: usize, row: &mut [f32], view: &mut [f32]) {
        row.fill(0.0);
        // Every view writes the same (trainable) ranges; frozen ones stay zero.
        view.fill(0.0);
        for v in 0..self.views {
            let mut view_row = ndarray::ArrayViewMut1::from(&mut *view);
            for trainable in &shard.trainables {
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

    /// Squared norms per group of `shard`'s views' means, one example per worker, and the mean
    /// rows `[examples, P]` themselves when they fit `cache_budget` (for the weighted sum).
    fn mean_squared_norms(
        &self,
        shard: &Shard<'_>,
        cache_budget: u64,
    ) -> (Array2<f64>, Option<Array2<f32>>) {
        let p = self.num_params;
        let n = shard.len();
        let keep = (n as u64).saturating_mul(p as u64).saturating_mul(4) <= cache_budget;
        let norms_of = |row: &[f32]| -> Vec<f64> {
            self.groups
                .iter()
                .map(|(_, r)| super::sums::sum_squares_slice(&row[r.clone()]))
                .collect()
        };
        let (rows, kept): (Vec<Vec<f64>>, _) = if keep {
            let mut kept = Array2::<f32>::zeros((n, p));
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
                        self.mean_row(shard, i, row, view);
                        norms_of(row)
                    },
                )
                .collect();
            (rows, Some(kept))
        } else {
            let rows = (0..n)
                .into_par_iter()
                .map_init(
                    || (vec![0f32; p], vec![0f32; p]),
                    |(row, view), i| {
                        self.mean_row(shard, i, row, view);
                        norms_of(row)
                    },
                )
                .collect();
            (rows, None)
        };
        let norms = Array2::from_shape_fn((n, self.groups.len()), |(i, g)| rows[i][g]);
        (norms, kept)
    }

    /// `shard`'s norm pass (once): the shared cache budget is split evenly between shards.
    fn shard_squared<'s>(&self, shard: &'s Shard<'_>) -> &'s NormsAndCache {
        shard.squared.get_or_init(|| {
            let cache_budget = CONV_CACHE_LIMIT_BYTES / self.shards.len() as u64;
            if self.views > 1 {
                let (norms, kept) = self.mean_squared_norms(shard, cache_budget);
                return (norms, shard.trainables.iter().map(|_| None).collect(), kept);
            }
            let mut out = Array2::<f64>::zeros((shard.len(), self.groups.len()));
            let mut ctx = NormContext {
                cache_budget,
                conv_method: self.conv_method,
            };
            let caches = shard
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

    fn squared_norms(&self) -> &Array2<f64> {
        self.squared.get_or_init(|| {
            let parts: Vec<&Array2<f64>> = self
                .shards
                .par_iter()
                .map(|shard| &self.shard_squared(shard).0)
                .collect();
            let mut out = Array2::<f64>::zeros((self.batch, self.groups.len()));
            for (shard, part) in self.shards.iter().zip(parts) {
                out.slice_mut(s![shard.examples.clone(), ..]).assign(part);
            }
            out
        })
    }

    /// Σ_i Σ_k weights[i, k] g_i restricted to group k; `None` means all weights 1. Each shard
    /// sums its own examples; the partial sums are added in shard order.
    fn combine(&self, weights: Option<&Array2<f64>>) -> Array1<f64> {
        let partial = |shard: &Shard<'_>| {
            let w = weights.map(|w| w.slice(s![shard.examples.clone(), ..]));
            self.combine_shard(shard, w)
        };
        if let [shard] = self.shards.as_slice() {
            return partial(shard);
        }
        let mut parts: Vec<Array1<f64>> = self.shards.par_iter().map(partial).collect();
        let rest = parts.split_off(1);
        let Some(mut out) = parts.pop() else {
            unreachable!("a batch has at least one shard")
        };
        const BLOCK: usize = 4096;
        let Some(slice) = out.as_slice_mut() else {
            unreachable!("a fresh array is contiguous")
        };
        slice
            .par_chunks_mut(BLOCK)
            .enumerate()
            .for_each(|(b, chunk)| {
                let start = b * BLOCK;
                for part in &rest {
                    let part = part.slice(s![start..start + chunk.len()]);
                    chunk.iter_mut().zip(part).for_each(|(o, p)| *o += *p);
                }
            });
        out
    }

    /// One shard's Σ_i Σ_k weights[i, k] g_i (`weights` its rows of the batch's weights).
    fn combine_shard(
        &self,
        shard: &Shard<'_>,
        weights: Option<ArrayView2<'_, f64>>,
    ) -> Array1<f64> {
        let covered: Vec<Range<usize>> = self.groups.iter().map(|(_, r)| r.clone()).collect();
        let done = shard.squared.get();
        if let Some(means) = done.and_then(|(_, _, kept)| kept.as_ref()) {
            // With views and the norm pass done: a pass over the kept mean rows, group by group.
            return super::sums::written_sum(self.num_params, &covered, |out| {
                for (g, (_, range)) in self.groups.iter().enumerate() {
                    let w: Vec<f32> = (0..shard.len())
                        .map(|i| weights.map_or(1.0, |w| toward_zero_f32(w[[i, g]])))
                        .collect();
                    let rows = means.slice(s![.., range.clone()]);
                    super::sums::weighted_rows_sum(out, range, rows, &w);
                }
            });
        }
        // With views, example i's weight goes to each of its rows over K (no cache is kept then).
        let k = self.views as f64;
        let spread;
        let weights = if self.views > 1 {
            spread =
                Array2::from_shape_fn((shard.len() * self.views, self.groups.len()), |(r, g)| {
                    weights.map_or(1.0, |w| w[[r / self.views, g]]) / k
                });
            Some(spread.view())
        } else {
            weights
        };
        let caches = done.map(|(_, c, _)| c);
        super::sums::written_sum(self.num_params, &covered, |out| {
            for (t, trainable) in shard.trainables.iter().enumerate() {
                let w = weights.map(|w| w.slice_move(s![.., trainable.groups.clone()]));
                let cache = caches.and_then(|c| c[t].as_deref());
                trainable.gradients.weighted_sum(w, cache, out);
            }
        })
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
        let p = self.num_params;
        for shard in &self.shards {
            let mut rows = out.slice_mut(s![shard.examples.clone(), ..]);
            if self.views > 1 {
                rows.axis_iter_mut(Axis(0))
                    .into_par_iter()
                    .enumerate()
                    .for_each_init(
                        || vec![0f32; p],
                        |view, (i, mut row)| match row.as_slice_mut() {
                            Some(row) => self.mean_row(shard, i, row, view),
                            None => {
                                unreachable!("rows of a standard-layout matrix are contiguous")
                            }
                        },
                    );
                continue;
            }
            rows.axis_iter_mut(Axis(0))
                .into_par_iter()
                .enumerate()
                .for_each(|(i, mut row)| {
                    for trainable in &shard.trainables {
                        trainable.gradients.example_gradient(i, row.view_mut());
                    }
                });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_batch_in_order_and_follow_the_work() {
        let covers = |ranges: &[Range<usize>], examples: usize| {
            assert_eq!(ranges.first().map(|r| r.start), Some(0));
            assert_eq!(ranges.last().map(|r| r.end), Some(examples));
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        };
        // mnist_cnn at 256 examples: ~2.1 MFLOP a row, 26,010 parameters: the most shards.
        let cnn = shard_ranges(256, 1, 26_010, 256.0 * 2.1e6);
        assert_eq!(cnn.len(), MAX_SHARDS);
        assert!(cnn.iter().all(|r| r.len() == 32));
        covers(&cnn, 256);
        // mlp_mnist: ~6 FLOPs per parameter a row is too little work to pay for a second
        // partial sum of 669,706 parameters.
        assert_eq!(
            shard_ranges(256, 1, 669_706, 256.0 * 6.0 * 669_706.0).len(),
            1
        );
        // Rows, not examples, count towards the minimum; shards hold whole examples.
        let views = shard_ranges(10, 8, 1000, 1e12);
        assert_eq!(views.len(), 2);
        covers(&views, 10);
        // Uneven batches differ by at most one example between shards.
        let uneven = shard_ranges(259, 1, 1000, 1e12);
        covers(&uneven, 259);
        assert!(uneven.iter().all(|r| r.len() == 32 || r.len() == 33));
        // One partial sum of 10⁸ parameters (800 MB) is already over the allowance for them.
        assert_eq!(shard_ranges(4096, 1, 100_000_000, 1e18).len(), 1);
        assert_eq!(shard_ranges(4096, 1, 10_000_000, 1e18).len(), 3);
        // An empty (Poisson) batch is one empty shard.
        assert_eq!(shard_ranges(0, 1, 10, 0.0), vec![0..0]);
        assert_eq!(even_ranges(3, 8), vec![0..1, 1..2, 2..3]);
    }

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
