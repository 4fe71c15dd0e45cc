//! Per-sample gradients of one batch without a `[B, P]` matrix: the model room's answer to
//! [`crate::grad::PerSampleGradients`].
//!
//! Part of the model room; knows nothing of privacy (it never sees a clip norm or noise). One
//! forward and one backward pass over the batch keep, for each trainable layer, its input and its
//! delta (gradient of the loss with respect to the layer's output). No operation mixes examples,
//! so example i's gradient is a function of its own rows only:
//!
//! - **Dense** (`y = W a + b`): `g_i = δ_i a_iᵀ`, so ‖g_i^W‖² = ‖a_i‖² ‖δ_i‖² and ‖g_i^b‖² = ‖δ_i‖²
//!   (the norm factorisation of Goodfellow 2015, "Efficient per-example gradient computations");
//!   `Σ_i w_i g_i^W = Δᵀ diag(w) A`: one matrix product.
//! - **Conv** (im2col: `Y_i = U_i Wᵀ + b`, `U_i` `[L, K]`, `Δ_i` `[L, C_out]`): `g_i^W = Δ_iᵀ U_i`.
//!   Its squared norm is either formed directly (cost ≈ L·K·C_out) or by the ghost-norm identity
//!   ‖Δ_iᵀ U_i‖²_F = ⟨U_i U_iᵀ, Δ_i Δ_iᵀ⟩ (cost ≈ L²(K + C_out); Li et al. 2022, "Large language
//!   models can be strong differentially private learners", §4). When the per-example gradients
//!   `[B, C_out·K]` fit in [`CONV_CACHE_LIMIT_BYTES`] they are materialised and kept, and the
//!   weighted sum is a pass over them (no second product); otherwise the cheaper of the two norm
//!   methods is used and the weighted sum scales Δ's rows by their example's weight and forms one
//!   product `(diag(w) Δ)ᵀ U`. `g_i^b = Σ_l Δ_i[l, :]`.
//!
//! Numerics: inputs and deltas are f32; squared norms are accumulated in f64 (32 lanes, f32 within
//! blocks of 256 values, summed at the end by a fixed pairwise tree); weighted sums are
//! f32 matrix products (weights rounded toward zero to f32 so no example's weight grows) returned
//! as f64. Each example's norm is computed by the same operations whatever the thread count.

use std::ops::Range;
use std::sync::OnceLock;

use ndarray::{Array1, Array2, ArrayView2, ArrayViewMut2, Axis, CowArray, Ix2, s};
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::kernels::avx512_available;
use super::kernels::{Window, conv_chunk_examples, im2col_example, with_scratch};
use super::linalg::{gemm, gemm_serial, gemm_serial_uninit, gemm_uninit};
use crate::grad::{GradError, PerSampleGradients, check_materialize_budget};

/// Memory allowed for keeping convolutions' per-example weight gradients between the norm pass
/// and the weighted sum (1 GiB); layers beyond it recompute the sum as one product.
pub const CONV_CACHE_LIMIT_BYTES: u64 = 1 << 30;

/// What one trainable layer keeps from the passes.
pub(crate) enum Trainable<'a> {
    /// `input`: `[B, inputs]`; `delta`: `[B, units]`.
    Dense {
        input: CowArray<'a, f32, Ix2>,
        delta: Array2<f32>,
        weight: Range<usize>,
        bias: Range<usize>,
    },
    /// `input`: `[B, H·W·C_in]` (channels-last; its im2col rows `U_i` `[L, K]` are formed a few
    /// examples at a time when needed); `delta`: `[B·L, C_out]`.
    Conv {
        input: CowArray<'a, f32, Ix2>,
        window: Window,
        delta: Array2<f32>,
        weight: Range<usize>,
        bias: Range<usize>,
    },
}

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

/// Squared norms `[B, groups]` and what each trainable layer kept from the norm pass.
type NormsAndCache = (Array2<f64>, Vec<LayerCache>);

/// What a convolution's norm pass leaves for the weighted sum that follows (dense layers keep
/// nothing: their sum is one product either way).
#[derive(Default)]
struct LayerCache {
    /// Per-example weight gradients `[B, C_out·K]`, when materialised within the cache limit.
    kept: Option<Array2<f32>>,
    /// Per-example bias gradients Σ_l Δ_i[l, :] `[B, C_out]` (f64).
    bias: Option<Array2<f64>>,
}

/// The per-sample gradients of one batch (see the module doc), with per-example losses.
pub struct BatchGradients<'a> {
    batch: usize,
    num_params: usize,
    groups: Vec<(String, Range<usize>)>,
    trainables: Vec<Trainable<'a>>,
    losses: Array1<f64>,
    limit_bytes: u64,
    /// Squared per-example norms per group `[B, groups]`, computed on first use, and for each
    /// trainable layer the per-example weight gradients `[B, C_out·K]` of convolutions whose
    /// norms were formed by materialising them (kept within [`CONV_CACHE_LIMIT_BYTES`]), so the
    /// weighted sum that follows is a cheap pass instead of a second product.
    squared: OnceLock<NormsAndCache>,
    conv_method: Option<ConvNormMethod>,
}

impl<'a> BatchGradients<'a> {
    pub(crate) fn new(
        batch: usize,
        num_params: usize,
        groups: Vec<(String, Range<usize>)>,
        trainables: Vec<Trainable<'a>>,
        losses: Array1<f64>,
        limit_bytes: u64,
    ) -> Self {
        BatchGradients {
            batch,
            num_params,
            groups,
            trainables,
            losses,
            limit_bytes,
            squared: OnceLock::new(),
            conv_method: None,
        }
    }

    /// Per-example losses ℓ_i (data term). Shape `[B]`.
    pub fn losses(&self) -> &Array1<f64> {
        &self.losses
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
            let mut out = Array2::<f64>::zeros((self.batch, self.groups.len()));
            let mut caches = Vec::with_capacity(self.trainables.len());
            let mut cache_budget = CONV_CACHE_LIMIT_BYTES;
            for (t, trainable) in self.trainables.iter().enumerate() {
                let mut cache = LayerCache::default();
                let per_example: Vec<(f64, f64)> = match trainable {
                    Trainable::Dense { input, delta, .. } => {
                        dense_squared_norms(input.view(), delta.view())
                    }
                    Trainable::Conv {
                        input,
                        window,
                        delta,
                        ..
                    } => {
                        let (positions, k) = (window.positions(), window.patch_len());
                        // Materialising and keeping Δ_iᵀU_i costs L·K·C_out per example and saves
                        // the weighted sum's product of the same size, so it beats the ghost norm
                        // whenever the kept gradients fit the cache; otherwise take the cheaper.
                        let bytes = (self.batch * k * delta.ncols() * 4) as u64;
                        let fits = bytes <= cache_budget;
                        let method = self.conv_method.unwrap_or_else(|| {
                            if fits {
                                ConvNormMethod::Materialize
                            } else {
                                ConvNormMethod::cheaper(positions, k, delta.ncols())
                            }
                        });
                        let keep = method == ConvNormMethod::Materialize && fits;
                        if keep {
                            cache_budget -= bytes;
                        }
                        let (norms, kept, bias) =
                            conv_squared_norms(input.view(), window, delta.view(), method, keep);
                        cache = LayerCache {
                            kept,
                            bias: Some(bias),
                        };
                        norms
                    }
                };
                for (i, (w, b)) in per_example.into_iter().enumerate() {
                    out[[i, 2 * t]] = w;
                    out[[i, 2 * t + 1]] = b;
                }
                caches.push(cache);
            }
            (out, caches)
        })
    }

    /// Σ_i Σ_k weights[i, k] g_i restricted to group k; `None` means all weights 1.
    fn combine(&self, weights: Option<&Array2<f64>>) -> Array1<f64> {
        let mut out = Array1::<f64>::zeros(self.num_params);
        for (t, trainable) in self.trainables.iter().enumerate() {
            let wcol = weights.map(|w| {
                w.column(2 * t)
                    .iter()
                    .map(|&v| toward_zero_f32(v))
                    .collect::<Vec<f32>>()
            });
            let bcol = weights.map(|w| w.column(2 * t + 1).to_vec());
            match trainable {
                Trainable::Dense {
                    input,
                    delta,
                    weight,
                    bias,
                } => {
                    let scaled = scale_rows(delta.view(), wcol.as_deref(), 1);
                    let d = scaled.as_ref().map_or(delta.view(), |a| a.view());
                    let mut gw = Array2::<f32>::uninit((delta.ncols(), input.ncols()));
                    gemm_uninit(d.t(), input.view(), gw.view_mut());
                    // SAFETY: `gemm_uninit` wrote every element.
                    let gw = unsafe { gw.assume_init() };
                    write_f64(&mut out, weight, &gw);
                    bias_sum(&mut out, bias, delta.view(), 1, bcol.as_deref());
                }
                Trainable::Conv {
                    input,
                    window,
                    delta,
                    weight,
                    bias,
                } => {
                    let positions = window.positions();
                    let cache = self.squared.get().map(|(_, c)| &c[t]);
                    match cache.and_then(|c| c.bias.as_ref()) {
                        Some(per_example) => {
                            weighted_bias_sum(&mut out, bias, per_example.view(), bcol.as_deref())
                        }
                        None => bias_sum(&mut out, bias, delta.view(), positions, bcol.as_deref()),
                    }
                    let kept = cache.and_then(|c| c.kept.as_ref());
                    if let (Some(per_example), Some(w)) = (kept, wcol.as_deref()) {
                        weighted_rows_sum(&mut out, weight, per_example.view(), w);
                        continue;
                    }
                    let scaled = scale_rows(delta.view(), wcol.as_deref(), positions);
                    let d = scaled.as_ref().map_or(delta.view(), |a| a.view());
                    let gw = conv_weight_gradient(input.view(), window, d);
                    write_f64(&mut out, weight, &gw);
                }
            }
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
        out.axis_iter_mut(Axis(0))
            .into_par_iter()
            .enumerate()
            .for_each(|(i, mut row)| {
                for trainable in &self.trainables {
                    match trainable {
                        Trainable::Dense {
                            input,
                            delta,
                            weight,
                            bias,
                        } => {
                            let a = input.row(i);
                            let d = delta.row(i);
                            let mut gw = row
                                .slice_mut(s![weight.clone()])
                                .into_shape_with_order((d.len(), a.len()))
                                .unwrap_or_else(|_| {
                                    unreachable!("a row of a fresh array is contiguous")
                                });
                            for (mut r, &dj) in gw.rows_mut().into_iter().zip(d.iter()) {
                                r.zip_mut_with(&a, |g, &ak| *g = dj * ak);
                            }
                            row.slice_mut(s![bias.clone()]).assign(&d);
                        }
                        Trainable::Conv {
                            input,
                            window,
                            delta,
                            weight,
                            bias,
                        } => {
                            let (l, k) = (window.positions(), window.patch_len());
                            let d = delta.slice(s![i * l..(i + 1) * l, ..]);
                            let gw = row
                                .slice_mut(s![weight.clone()])
                                .into_shape_with_order((d.ncols(), k))
                                .unwrap_or_else(|_| {
                                    unreachable!("a row of a fresh array is contiguous")
                                });
                            with_scratch(l * k, |ub| {
                                let u = example_cols(input.view(), window, i, ub);
                                conv_example_gradient(u, d, gw);
                            });
                            row.slice_mut(s![bias.clone()]).assign(&d.sum_axis(Axis(0)));
                        }
                    }
                }
            });
        Ok(out)
    }
}

/// `g ← Δ_iᵀ U_i`.
fn conv_example_gradient(
    u: ArrayView2<'_, f32>,
    d: ArrayView2<'_, f32>,
    g: ArrayViewMut2<'_, f32>,
) {
    gemm_serial(d.t(), u, 0.0, g);
}

/// Per example: (‖a_i‖²‖δ_i‖², ‖δ_i‖²), accumulated in f64.
fn dense_squared_norms(input: ArrayView2<'_, f32>, delta: ArrayView2<'_, f32>) -> Vec<(f64, f64)> {
    input
        .axis_iter(Axis(0))
        .into_par_iter()
        .zip(delta.axis_iter(Axis(0)).into_par_iter())
        .map(|(a, d)| {
            let sa = a
                .as_slice()
                .map_or_else(|| sum_squares(a.iter().copied()), sum_squares_slice);
            let sd = d
                .as_slice()
                .map_or_else(|| sum_squares(d.iter().copied()), sum_squares_slice);
            (sa * sd, sd)
        })
        .collect()
}

/// Conv norms and what the weighted sum can reuse.
type ConvNorms = (Vec<(f64, f64)>, Option<Array2<f32>>, Array2<f64>);

/// Per example: (‖Δ_iᵀ U_i‖²_F, ‖Σ_l Δ_i[l, :]‖²); with `keep` (materialise method only), also
/// the per-example weight gradients `[B, C_out·K]`; and the per-example bias gradients
/// `[B, C_out]` (f64).
fn conv_squared_norms(
    input: ArrayView2<'_, f32>,
    window: &Window,
    delta: ArrayView2<'_, f32>,
    method: ConvNormMethod,
    keep: bool,
) -> ConvNorms {
    let positions = window.positions();
    let batch = input.nrows();
    let (k, c) = (window.patch_len(), delta.ncols());
    let mut biases = Array2::<f64>::zeros((batch, c));
    biases
        .axis_iter_mut(Axis(0))
        .into_par_iter()
        .enumerate()
        .for_each(|(i, mut b)| {
            let Some(b) = b.as_slice_mut() else {
                unreachable!("rows of a fresh array are contiguous")
            };
            let d = delta.slice(s![i * positions..(i + 1) * positions, ..]);
            match d.as_slice() {
                Some(d) => accumulate_rows(b, d, 1.0),
                None => d.rows().into_iter().for_each(|r| {
                    b.iter_mut().zip(r).for_each(|(a, &v)| *a += v as f64);
                }),
            }
        });
    let bias_sq = |i: usize| -> f64 { biases.row(i).iter().map(|b| b * b).sum() };
    let delta_of = |i: usize| delta.slice(s![i * positions..(i + 1) * positions, ..]);
    if keep && method == ConvNormMethod::Materialize {
        // Every row is overwritten by its example's product: no zero-fill of what can be
        // ~150 MB (cnn_cifar10 at batch 128).
        let mut kept = Array2::<f32>::uninit((batch, c * k));
        let norms = kept
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .enumerate()
            .map(|(i, row)| {
                let d = delta_of(i);
                let g = row
                    .into_shape_with_order((c, k))
                    .unwrap_or_else(|_| unreachable!("a row of a fresh array is contiguous"));
                let g = with_scratch(positions * k, |buf| {
                    gemm_serial_uninit(d.t(), example_cols(input, window, i, buf), g)
                });
                (sum_squares_slice(g.as_slice().unwrap_or(&[])), bias_sq(i))
            })
            .collect();
        // SAFETY: the loop above visited every row and `gemm_serial_uninit` wrote all of it.
        let kept = unsafe { kept.assume_init() };
        return (norms, Some(kept), biases);
    }
    let norms = (0..batch)
        .into_par_iter()
        .map_init(
            || match method {
                ConvNormMethod::Materialize => {
                    (Array2::<f32>::zeros((c, k)), Array2::<f32>::zeros((0, 0)))
                }
                ConvNormMethod::Ghost => (
                    Array2::<f32>::zeros((positions, positions)),
                    Array2::<f32>::zeros((positions, positions)),
                ),
            },
            |(s1, s2), i| {
                let d = delta_of(i);
                let weight_sq = with_scratch(positions * k, |buf| {
                    let u = example_cols(input, window, i, buf);
                    match method {
                        ConvNormMethod::Materialize => {
                            conv_example_gradient(u, d, s1.view_mut());
                            sum_squares_slice(s1.as_slice().unwrap_or(&[]))
                        }
                        ConvNormMethod::Ghost => {
                            gemm_serial(u, u.t(), 0.0, s1.view_mut());
                            gemm_serial(d, d.t(), 0.0, s2.view_mut());
                            s1.iter()
                                .zip(s2.iter())
                                .map(|(&x, &y)| x as f64 * y as f64)
                                .sum::<f64>()
                        }
                    }
                });
                (weight_sq, bias_sq(i))
            },
        )
        .collect();
    (norms, None, biases)
}

/// Example `i`'s im2col rows `U_i` (`[L, K]` row-major), formed in `buf` (`L·K` entries).
fn example_cols<'b>(
    input: ArrayView2<'_, f32>,
    window: &Window,
    i: usize,
    buf: &'b mut [f32],
) -> ArrayView2<'b, f32> {
    let xi = input.row(i);
    match xi.as_slice() {
        Some(xi) => im2col_example(xi, window, buf),
        None => im2col_example(&xi.to_vec(), window, buf),
    }
    ArrayView2::from_shape((window.positions(), window.patch_len()), &*buf)
        .unwrap_or_else(|_| unreachable!("the buffer has L·K entries"))
}

/// `Σ_i Δ_iᵀ U_i` (`[C_out, K]`) with `d` = Δ (`[B·L, C_out]`, rows possibly pre-scaled): the
/// im2col rows are formed [`conv_chunk_examples`] examples at a time and each chunk's product
/// is accumulated in chunk order (the same order whatever the thread count).
fn conv_weight_gradient(
    input: ArrayView2<'_, f32>,
    window: &Window,
    d: ArrayView2<'_, f32>,
) -> Array2<f32> {
    let (l, k) = (window.positions(), window.patch_len());
    let mut gw = Array2::<f32>::zeros((d.ncols(), k));
    let per = conv_chunk_examples(window);
    with_scratch(per.min(input.nrows()) * l * k, |buf| {
        for (xc, dc) in input
            .axis_chunks_iter(Axis(0), per)
            .zip(d.axis_chunks_iter(Axis(0), per * l))
        {
            let nb = xc.nrows();
            buf[..nb * l * k]
                .par_chunks_mut(l * k)
                .zip(xc.axis_iter(Axis(0)).into_par_iter())
                .for_each(|(out, xi)| match xi.as_slice() {
                    Some(xi) => im2col_example(xi, window, out),
                    None => im2col_example(&xi.to_vec(), window, out),
                });
            let u = ArrayView2::from_shape((nb * l, k), &buf[..nb * l * k])
                .unwrap_or_else(|_| unreachable!("nb·L·K entries"));
            gemm(dc.t(), u, 1.0, gw.view_mut());
        }
    });
    gw
}

/// out[range] ← Σ_i w_i rows[i] (f64, examples in order), split over output blocks only.
fn weighted_rows_sum(
    out: &mut Array1<f64>,
    range: &Range<usize>,
    rows: ArrayView2<'_, f32>,
    w: &[f32],
) {
    let Some(out) = out.slice_mut(s![range.clone()]).into_slice() else {
        unreachable!("a fresh array is contiguous")
    };
    const BLOCK: usize = 4096;
    out.par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(b, chunk)| {
            #[cfg(target_arch = "x86_64")]
            if avx512_available() {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe { block_sum_avx512(chunk, b * BLOCK, rows, w) };
                return;
            }
            block_sum(chunk, b * BLOCK, rows, w)
        });
}

/// One output block of [`weighted_rows_sum`] (columns `start..start + chunk.len()`): f32 partial
/// sums over 16 examples at a time, widened to f64 between blocks.
#[inline(always)]
fn block_sum(chunk: &mut [f64], start: usize, rows: ArrayView2<'_, f32>, w: &[f32]) {
    let mut acc = vec![0.0f32; chunk.len()];
    for (block_index, block) in rows.axis_chunks_iter(Axis(0), 16).enumerate() {
        acc.iter_mut().for_each(|a| *a = 0.0);
        for (j, row) in block.rows().into_iter().enumerate() {
            let wi = w[block_index * 16 + j];
            let src = row.slice(s![start..start + chunk.len()]);
            let Some(src) = src.as_slice() else {
                unreachable!("rows of a fresh array are contiguous")
            };
            for (a, &v) in acc.iter_mut().zip(src) {
                *a += wi * v;
            }
        }
        for (o, &a) in chunk.iter_mut().zip(&acc) {
            *o += a as f64;
        }
    }
}

/// [`block_sum`] compiled for AVX-512F (same operations, same bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_sum_avx512(chunk: &mut [f64], start: usize, rows: ArrayView2<'_, f32>, w: &[f32]) {
    block_sum(chunk, start, rows, w)
}

/// Σ v² with f32 partial sums over blocks of 256, accumulated in f64 (vectorisable; relative
/// error ~1e-7·√256 per block).
///
/// 32 independent lanes (enough accumulator chains to hide the add latency on the baseline x86-64
/// target): lane j holds the squares of positions ≡ j mod 32, in f32 within a block and in f64
/// across blocks; the 32 lanes are summed once at the end by a fixed pairwise tree. The order
/// depends only on the length, never on the thread count. (Summing the lanes into one f64 chain
/// after every block was latency-bound: 14% of a logreg_mnist DP step.)
fn sum_squares_slice(v: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_available() {
            // SAFETY: the CPU supports AVX-512F (checked at run time just above).
            return unsafe { sum_squares_avx512(v) };
        }
    }
    sum_squares_lanes(v)
}

/// [`sum_squares_lanes`] with AVX-512F intrinsics: the same lanes, the same operations in the
/// same order (a multiply then an add, never fused), so the same bits; the 32 f32 lanes are two
/// registers and the 32 f64 lanes four. (LLVM does not vectorise the portable form well: it
/// spills the lanes.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn sum_squares_avx512(v: &[f32]) -> f64 {
    use std::arch::x86_64::*;
    let mut wide = [_mm512_setzero_pd(); 4];
    for block in v.chunks(256) {
        let (mut a0, mut a1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let mut it = block.chunks_exact(32);
        for c in &mut it {
            // SAFETY: `c` holds exactly 32 f32, read as two unaligned 16-lane loads.
            let (x0, x1) = unsafe {
                (
                    _mm512_loadu_ps(c.as_ptr()),
                    _mm512_loadu_ps(c.as_ptr().add(16)),
                )
            };
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(x0, x0));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(x1, x1));
        }
        let rest = it.remainder();
        if !rest.is_empty() {
            // Masked-off lanes load +0.0, and adding +0.0 to a sum of squares changes no bit.
            // (Copying the tail to a padded buffer stalled on store forwarding.)
            let n = rest.len();
            let m0: __mmask16 = if n >= 16 { 0xffff } else { (1u16 << n) - 1 };
            // SAFETY: the mask covers only the first min(n, 16) elements of `rest`.
            let x0 = unsafe { _mm512_maskz_loadu_ps(m0, rest.as_ptr()) };
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(x0, x0));
            if n > 16 {
                let m1: __mmask16 = (1u16 << (n - 16)) - 1;
                // SAFETY: n − 16 < 16 elements follow rest[16].
                let x1 = unsafe { _mm512_maskz_loadu_ps(m1, rest.as_ptr().add(16)) };
                a1 = _mm512_add_ps(a1, _mm512_mul_ps(x1, x1));
            }
        }
        for (j, a) in [a0, a1].into_iter().enumerate() {
            let lo = _mm512_castps512_ps256(a);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
            wide[2 * j] = _mm512_add_pd(wide[2 * j], _mm512_cvtps_pd(lo));
            wide[2 * j + 1] = _mm512_add_pd(wide[2 * j + 1], _mm512_cvtps_pd(hi));
        }
    }
    let mut lanes = [0.0f64; 32];
    for (j, w) in wide.into_iter().enumerate() {
        // SAFETY: `lanes[8j..8j + 8]` holds 8 f64.
        unsafe { _mm512_storeu_pd(lanes.as_mut_ptr().add(8 * j), w) };
    }
    pairwise_sum_32(lanes)
}

/// Σ of 32 lanes by a fixed pairwise tree (lane j + lane j + 16, then + 8, + 4, + 2, + 1).
#[inline(always)]
fn pairwise_sum_32(mut wide: [f64; 32]) -> f64 {
    let mut width = 16;
    while width > 0 {
        let (lo, hi) = wide.split_at_mut(width);
        for (a, &b) in lo.iter_mut().zip(&hi[..width]) {
            *a += b;
        }
        width /= 2;
    }
    wide[0]
}

/// The portable form of [`sum_squares_slice`] (the reference every faster path must equal).
fn sum_squares_lanes(v: &[f32]) -> f64 {
    const LANES: usize = 32;
    let mut wide = [0.0f64; LANES];
    for block in v.chunks(256) {
        let mut lanes = [0.0f32; LANES];
        let mut it = block.chunks_exact(LANES);
        for c in &mut it {
            for (l, &x) in lanes.iter_mut().zip(c) {
                *l += x * x;
            }
        }
        for (l, &x) in lanes.iter_mut().zip(it.remainder()) {
            *l += x * x;
        }
        for (w, &l) in wide.iter_mut().zip(&lanes) {
            *w += l as f64;
        }
    }
    pairwise_sum_32(wide)
}

fn sum_squares(it: impl Iterator<Item = f32>) -> f64 {
    it.map(|v| (v as f64) * (v as f64)).sum()
}

/// Rows of `delta` times their example's weight (`rows_per_example` rows per example);
/// `None` when there are no weights (all ones).
fn scale_rows(
    delta: ArrayView2<'_, f32>,
    weights: Option<&[f32]>,
    rows_per_example: usize,
) -> Option<Array2<f32>> {
    let w = weights?;
    let mut out = delta.to_owned();
    out.axis_chunks_iter_mut(Axis(0), rows_per_example)
        .into_par_iter()
        .zip(w.par_iter())
        .for_each(|(mut block, &wi)| block.mapv_inplace(|v| v * wi));
    Some(out)
}

/// out[range] ← g (flattened row-major), widened to f64.
fn write_f64(out: &mut Array1<f64>, range: &Range<usize>, g: &Array2<f32>) {
    #[inline(always)]
    fn widen(out: &mut [f64], g: &[f32]) {
        out.iter_mut().zip(g).for_each(|(o, &v)| *o = v as f64);
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn widen_avx512(out: &mut [f64], g: &[f32]) {
        widen(out, g)
    }
    let mut out = out.slice_mut(s![range.clone()]);
    let (Some(o), Some(g)) = (out.as_slice_mut(), g.as_slice()) else {
        for (o, &v) in out.iter_mut().zip(g.iter()) {
            *o = v as f64;
        }
        return;
    };
    #[cfg(target_arch = "x86_64")]
    if avx512_available() {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        unsafe { widen_avx512(o, g) };
        return;
    }
    widen(o, g)
}

/// out[bias] ← Σ_i w_i Σ_{rows of i} δ (f64).
fn bias_sum(
    out: &mut Array1<f64>,
    range: &Range<usize>,
    delta: ArrayView2<'_, f32>,
    rows_per_example: usize,
    weights: Option<&[f64]>,
) {
    let c = delta.ncols();
    let mut acc = vec![0.0f64; c];
    for (i, block) in delta
        .axis_chunks_iter(Axis(0), rows_per_example.max(1))
        .enumerate()
    {
        let wi = weights.map_or(1.0, |w| w[i]);
        match block.as_slice() {
            Some(rows) => accumulate_rows(&mut acc, rows, wi),
            None => {
                for r in block.rows() {
                    for (a, &v) in acc.iter_mut().zip(r.iter()) {
                        *a += wi * v as f64;
                    }
                }
            }
        }
    }
    for (o, a) in out.slice_mut(s![range.clone()]).iter_mut().zip(acc) {
        *o = a;
    }
}

/// out[bias] ← Σ_i w_i b_i from the per-example bias gradients `b` `[B, C_out]` (f64, examples in
/// order; all weights 1 when `None`).
fn weighted_bias_sum(
    out: &mut Array1<f64>,
    range: &Range<usize>,
    b: ArrayView2<'_, f64>,
    weights: Option<&[f64]>,
) {
    let mut acc = vec![0.0f64; b.ncols()];
    for (i, row) in b.rows().into_iter().enumerate() {
        let wi = weights.map_or(1.0, |w| w[i]);
        for (a, &v) in acc.iter_mut().zip(row.iter()) {
            *a += wi * v;
        }
    }
    for (o, a) in out.slice_mut(s![range.clone()]).iter_mut().zip(acc) {
        *o = a;
    }
}

/// acc[j] += w · rows[r·C + j] over the rows of a row-major `[R, C]` slice (C = acc.len()), rows
/// in order, in f64: the bias gradients' sums. Vectorised across j (AVX-512 where the CPU has it;
/// the same operations in the same order, so the same bits).
fn accumulate_rows(acc: &mut [f64], rows: &[f32], w: f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_available() {
            // SAFETY: the CPU supports AVX-512F (checked at run time just above).
            unsafe { accumulate_rows_avx512(acc, rows, w) };
            return;
        }
    }
    accumulate_rows_portable(acc, rows, w);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn accumulate_rows_avx512(acc: &mut [f64], rows: &[f32], w: f64) {
    accumulate_rows_portable(acc, rows, w);
}

#[inline(always)]
fn accumulate_rows_portable(acc: &mut [f64], rows: &[f32], w: f64) {
    if acc.is_empty() {
        return;
    }
    for r in rows.chunks_exact(acc.len()) {
        for (a, &v) in acc.iter_mut().zip(r) {
            *a += w * v as f64;
        }
    }
}

/// `w` as f32, rounded toward zero so |result| ≤ |w| (a clipping weight never grows).
fn toward_zero_f32(w: f64) -> f32 {
    let v = w as f32;
    if v != 0.0 && (v as f64).abs() > w.abs() {
        f32::from_bits(v.to_bits() - 1)
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_builds_of_the_sums_give_the_portable_bits() {
        let rows = Array2::from_shape_fn((37, 1000), |(i, j)| {
            (((i * 7919 + j * 104_729) % 2003) as f32 - 1001.0) * 1e-3 * (1.0 + (j % 5) as f32)
        });
        let w: Vec<f32> = (0..37).map(|i| 1.0 / (1.0 + i as f32 * 0.3)).collect();
        let mut portable = vec![0.5f64; 700];
        block_sum(&mut portable, 300, rows.view(), &w);
        let mut acc_portable = vec![0.25f64; 40];
        let flat = rows.as_slice().unwrap();
        accumulate_rows_portable(&mut acc_portable, &flat[..40 * 900], 0.75);
        let mut acc = vec![0.25f64; 40];
        accumulate_rows(&mut acc, &flat[..40 * 900], 0.75);
        assert!(
            acc.iter()
                .zip(&acc_portable)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        #[cfg(target_arch = "x86_64")]
        if avx512_available() {
            let mut fast = vec![0.5f64; 700];
            // SAFETY: AVX-512F was detected.
            unsafe { block_sum_avx512(&mut fast, 300, rows.view(), &w) };
            assert!(
                fast.iter()
                    .zip(&portable)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
            let mut acc_fast = vec![0.25f64; 40];
            // SAFETY: AVX-512F was detected.
            unsafe { accumulate_rows_avx512(&mut acc_fast, &flat[..40 * 900], 0.75) };
            assert!(
                acc_fast
                    .iter()
                    .zip(&acc_portable)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
        }
    }

    #[test]
    fn sum_squares_paths_agree_bit_for_bit() {
        // Every length class: empty, under one 32-lane group, whole groups, partial blocks, many
        // blocks; values of mixed sign and magnitude.
        for len in [0usize, 1, 7, 31, 32, 33, 255, 256, 257, 784, 1000, 4099] {
            let v: Vec<f32> = (0..len)
                .map(|i| ((i as f32) * 0.37).sin() * (1.0 + (i % 13) as f32 * 10.0))
                .collect();
            let portable = sum_squares_lanes(&v);
            let exact: f64 = v.iter().map(|&x| (x as f64) * (x as f64)).sum();
            assert!(
                (portable - exact).abs() <= 1e-6 * exact.max(1e-30),
                "len {len}"
            );
            assert_eq!(
                sum_squares_slice(&v).to_bits(),
                portable.to_bits(),
                "len {len}"
            );
            #[cfg(target_arch = "x86_64")]
            if avx512_available() {
                // SAFETY: AVX-512F was detected.
                let fast = unsafe { sum_squares_avx512(&v) };
                assert_eq!(fast.to_bits(), portable.to_bits(), "len {len}");
            }
        }
    }

    #[test]
    fn weights_round_toward_zero() {
        for w in [0.1f64, 1.0 / 3.0, 0.7, -0.3, 1e-40, 1.0] {
            let v = toward_zero_f32(w);
            assert!((v as f64).abs() <= w.abs(), "{w} -> {v}");
            assert!(
                ((v as f64) - w).abs() <= w.abs() * 1.2e-7 + 1e-45,
                "{w} -> {v}"
            );
        }
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
