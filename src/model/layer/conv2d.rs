//! The 2-D convolution layer and its per-sample gradients (room: `model`).
//!
//! Cross-correlation as PyTorch's `Conv2d`, on channels-last images (see
//! [`crate::model::kernels`]). Layout: weight `[C_out, kernel, kernel, C_in]` row-major
//! (PyTorch's `Conv2d.weight` `[C_out, C_in, kh, kw]` with the input-channel axis moved last),
//! bias `[C_out]`. The forward product of 3×3 stride-1 padding-1 convolutions runs by
//! Winograd's F(2×2, 3×3) ([`crate::model::winograd`]).
//!
//! Per-sample gradients (im2col: `Y_i = U_i Wᵀ + b`, `U_i` `[L, K]`, `Δ_i` `[L, C_out]`):
//! `g_i^W = Δ_iᵀ U_i`. Its squared norm is either formed directly (cost ≈ L·K·C_out) or by the
//! ghost-norm identity ‖Δ_iᵀ U_i‖²_F = ⟨U_i U_iᵀ, Δ_i Δ_iᵀ⟩ (cost ≈ L²(K + C_out); Li et al.
//! 2022, "Large language models can be strong differentially private learners", §4). When the
//! per-example gradients `[B, C_out·K]` fit in the batch's cache budget
//! ([`crate::model::per_sample::CONV_CACHE_LIMIT_BYTES`]) they are materialised and kept, and the
//! weighted sum is a pass over them (no second product); otherwise the cheaper of the two norm
//! methods is used and the weighted sum scales Δ's rows by their example's weight and forms one
//! product `(diag(w) Δ)ᵀ U`. `g_i^b = Σ_l Δ_i[l, :]`.
//!
//! With weight standardisation ([`super::weight_std`], Qiao et al. 2019, eq. 1–2) the products
//! use Ŵ instead of W, `Δ_iᵀ U_i` is the gradient with respect to Ŵ, and example i's weight
//! gradient is `Jᵀ(Δ_iᵀ U_i)`, the backward map of the standardisation applied row by row. The
//! materialise method applies it to each example's product (C_out·K more work per example) and
//! sums the squares; the ghost method forms the norm by the exact identity of
//! [`super::weight_std`] from ⟨U_i U_iᵀ, Δ̃_i Δ̃_iᵀ⟩ (Δ̃ = Δ diag(1/s)), Σ g = Δ_iᵀ(U_i 1) and
//! Σ g ⊙ Ŵ = Σ_l Δ_i ⊙ (U_i Ŵᵀ), whose last product costs as much as materialising, so it is
//! never the cheaper method and runs only when forced (it cross-checks the identity in the
//! tests). The weighted sum applies the map once to the sum (it is linear), or sums the kept
//! per-example W-gradients.

use std::any::Any;
use std::borrow::Cow;

use ndarray::{
    Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis, CowArray, Ix2, s,
};
use rand_chacha::ChaCha12Rng;
use rayon::prelude::*;

use super::weight_std::Standardized;
use super::{
    Backward, BackwardContext, BuildContext, Forward, Layer, LayerGradients, NormContext,
    ParamTensor, Saved, Shape, image_input, init_uniform_fan_in, tensor_matrix, window,
};
use crate::model::kernels::{self, Window, conv_chunk_examples, im2col_example, with_scratch};
use crate::model::linalg::{gemm, gemm_serial, gemm_serial_uninit};
use crate::model::per_sample::ConvNormMethod;
use crate::model::sums::{
    accumulate_rows, bias_sum, scale_rows, sum_squares_slice, toward_zero_f32, weighted_bias_sum,
    weighted_rows_sum, write_f64,
};

/// A built convolution.
#[derive(Debug, Clone, PartialEq)]
pub struct Conv2d {
    window: Window,
    out_channels: usize,
    /// Weight standardisation: the products use Ŵ ([`super::weight_std`]).
    standardize: bool,
    /// `[weight, bias]`.
    tensors: Vec<ParamTensor>,
}

impl Conv2d {
    /// A convolution of `channels` output channels on an image input, with weight
    /// standardisation when `standardize`.
    pub fn build(
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        standardize: bool,
        input: Shape,
        ctx: &mut BuildContext,
    ) -> Result<Self, String> {
        let (c, h, w) = image_input(input)?;
        let window = window(c, h, w, kernel, stride, padding)?;
        if channels == 0 {
            return Err("channels must be positive".into());
        }
        if standardize && window.patch_len() < 2 {
            // A fan-in of one standardises every weight to 0: the layer would output its bias.
            return Err(format!(
                "weight standardisation needs a fan-in (input channels × kernel²) of at least 2, \
                 but this layer's is {}",
                window.patch_len()
            ));
        }
        let weight = ctx.tensor("weight", vec![channels, kernel, kernel, c])?;
        let bias = ctx.tensor("bias", vec![channels])?;
        Ok(Conv2d {
            window,
            out_channels: channels,
            standardize,
            tensors: vec![weight, bias],
        })
    }

    /// The weight the products use: W, or Ŵ with weight standardisation.
    fn product_weight<'p>(&self, params: &ArrayView1<'p, f32>) -> CowArray<'p, f32, Ix2> {
        let w = self.weight(params);
        if self.standardize {
            CowArray::from(Standardized::new(w).weight().to_owned())
        } else {
            CowArray::from(w)
        }
    }

    fn weight<'p>(&self, params: &ArrayView1<'p, f32>) -> ArrayView2<'p, f32> {
        let g = &self.window;
        tensor_matrix(
            params,
            &self.tensors[0].range,
            self.out_channels,
            g.patch_len(),
        )
    }
}

impl Layer for Conv2d {
    fn output_shape(&self) -> Shape {
        Shape::Image {
            c: self.out_channels,
            h: self.window.out_height,
            w: self.window.out_width,
        }
    }

    fn params(&self) -> &[ParamTensor] {
        &self.tensors
    }

    fn init_params(&self, rng: &mut ChaCha12Rng, params: &mut Array1<f32>) {
        init_uniform_fan_in(rng, params, self.window.patch_len(), &self.tensors);
    }

    fn saved_shape(&self, t: usize) -> Vec<usize> {
        let g = &self.window;
        match t {
            0 => vec![self.out_channels, g.channels, g.kernel, g.kernel],
            _ => vec![self.out_channels],
        }
    }

    /// The weight `[C_out, kh, kw, C_in]` to PyTorch's `[C_out, C_in, kh, kw]`.
    fn saved_layout(&self, t: usize, stored: &[f32]) -> Vec<f32> {
        if t != 0 {
            return stored.to_vec();
        }
        let (k, c) = (self.window.kernel, self.window.channels);
        let mut out = vec![0.0f32; stored.len()];
        for (src, dst) in stored
            .chunks_exact(k * k * c)
            .zip(out.chunks_exact_mut(k * k * c))
        {
            for tap in 0..k * k {
                for ch in 0..c {
                    dst[ch * k * k + tap] = src[tap * c + ch];
                }
            }
        }
        out
    }

    fn stored_layout(&self, t: usize, saved: &[f32]) -> Vec<f32> {
        if t != 0 {
            return saved.to_vec();
        }
        let (k, c) = (self.window.kernel, self.window.channels);
        let mut out = vec![0.0f32; saved.len()];
        for (src, dst) in saved
            .chunks_exact(k * k * c)
            .zip(out.chunks_exact_mut(k * k * c))
        {
            for tap in 0..k * k {
                for ch in 0..c {
                    dst[tap * c + ch] = src[ch * k * k + tap];
                }
            }
        }
        out
    }

    fn keeps_input(&self) -> bool {
        true
    }

    fn forward(
        &self,
        params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        _keep: bool,
    ) -> Forward {
        let w = self.product_weight(&params);
        let b = params.slice(s![self.tensors[1].range.clone()]);
        Forward::plain(if crate::model::winograd::applies(&self.window) {
            crate::model::winograd::conv_forward(input, &self.window, w.view(), b)
        } else {
            conv_forward(input, &self.window, w.view(), b)
        })
    }

    fn backward(&self, ctx: BackwardContext<'_>, d: Array2<f32>, input_gradient: bool) -> Backward {
        let rows = ctx.batch * self.window.positions();
        let dm = d
            .into_shape_with_order((rows, self.out_channels))
            .unwrap_or_else(|_| unreachable!("a conv delta is contiguous"));
        let dx = input_gradient.then(|| {
            let w = self.product_weight(&ctx.params);
            conv_input_gradient(dm.view(), &self.window, w.view(), ctx.batch)
        });
        Backward {
            input_gradient: dx,
            delta: Some(dm),
        }
    }

    fn gradients<'a>(
        &self,
        params: ArrayView1<'_, f32>,
        input: CowArray<'a, f32, Ix2>,
        delta: Array2<f32>,
    ) -> Option<Box<dyn LayerGradients + 'a>> {
        Some(Box::new(ConvGradients {
            input,
            window: self.window,
            delta,
            standardized: self
                .standardize
                .then(|| Standardized::new(self.weight(&params))),
            weight: self.tensors[0].clone(),
            bias: self.tensors[1].clone(),
        }))
    }

    fn forward_macs(&self) -> f64 {
        (self.window.positions() * self.window.patch_len() * self.out_channels) as f64
    }

    /// With weight standardisation: the backward map on every example's product (3·C_out·K per
    /// example: two row sums and the update), plus, per batch, the standardisation done by the
    /// forward pass, the backward pass and the gradient object and the map on the weighted sum
    /// (≈ 4 × 3·C_out·K, spread over the batch); the norm method is always materialise.
    fn norm_macs(&self, batch: usize, cache_budget: &mut u64) -> f64 {
        let (l, k, c) = (
            self.window.positions(),
            self.window.patch_len(),
            self.out_channels,
        );
        let standardization = if self.standardize {
            3.0 * (k * c) as f64 + 12.0 * (k * c) as f64 / batch.max(1) as f64
        } else {
            0.0
        };
        let bytes = (batch * k * c * 4) as u64;
        let norms = if bytes <= *cache_budget {
            *cache_budget -= bytes;
            0.0
        } else {
            match self.default_method(l, k, c) {
                ConvNormMethod::Materialize => (l * k * c) as f64,
                ConvNormMethod::Ghost => (l * l * (k + c)) as f64,
            }
        };
        norms + standardization
    }

    fn kept_gradient_len(&self) -> usize {
        self.window.patch_len() * self.out_channels
    }
}

impl Conv2d {
    /// The norm method used when the kept gradients do not fit: the cheaper one, or materialise
    /// with weight standardisation (its ghost form needs a product as large as materialising).
    fn default_method(&self, l: usize, k: usize, c: usize) -> ConvNormMethod {
        default_method(self.standardize, l, k, c)
    }
}

fn default_method(standardize: bool, l: usize, k: usize, c: usize) -> ConvNormMethod {
    if standardize {
        ConvNormMethod::Materialize
    } else {
        ConvNormMethod::cheaper(l, k, c)
    }
}

/// `input`: `[B, H·W·C_in]` (channels-last; its im2col rows `U_i` `[L, K]` are formed a few
/// examples at a time when needed); `delta`: `[B·L, C_out]`.
struct ConvGradients<'a> {
    input: CowArray<'a, f32, Ix2>,
    window: Window,
    delta: Array2<f32>,
    /// With weight standardisation: Ŵ and the backward map to W.
    standardized: Option<Standardized>,
    weight: ParamTensor,
    bias: ParamTensor,
}

/// What a convolution's norm pass leaves for the weighted sum that follows.
struct ConvCache {
    /// Per-example weight gradients `[B, C_out·K]` (with respect to W, the backward map of a
    /// standardisation already applied), when materialised within the cache budget.
    kept: Option<Array2<f32>>,
    /// Per-example bias gradients Σ_l Δ_i[l, :] `[B, C_out]` (f64).
    bias: Array2<f64>,
}

impl LayerGradients for ConvGradients<'_> {
    fn squared_norms(
        &self,
        ctx: &mut NormContext,
        mut out: ArrayViewMut2<'_, f64>,
    ) -> Option<Saved> {
        let batch = self.input.nrows();
        let (positions, k, c) = (
            self.window.positions(),
            self.window.patch_len(),
            self.delta.ncols(),
        );
        // Materialising and keeping Δ_iᵀU_i costs L·K·C_out per example and saves the weighted
        // sum's product of the same size, so it beats the ghost norm whenever the kept gradients
        // fit the cache; otherwise take the cheaper.
        let bytes = (batch * k * c * 4) as u64;
        let fits = bytes <= ctx.cache_budget;
        let ws = self.standardized.as_ref();
        let method = ctx.conv_method.unwrap_or_else(|| {
            if fits {
                ConvNormMethod::Materialize
            } else {
                default_method(ws.is_some(), positions, k, c)
            }
        });
        let keep = method == ConvNormMethod::Materialize && fits;
        if keep {
            ctx.cache_budget -= bytes;
        }
        let (norms, kept, bias) = conv_squared_norms(
            self.input.view(),
            &self.window,
            self.delta.view(),
            ws,
            method,
            keep,
        );
        for (i, (w, b)) in norms.into_iter().enumerate() {
            out[[i, 0]] = w;
            out[[i, 1]] = b;
        }
        Some(Box::new(ConvCache { kept, bias }))
    }

    fn weighted_sum(
        &self,
        weights: Option<ArrayView2<'_, f64>>,
        cache: Option<&(dyn Any + Send + Sync)>,
        out: &mut [std::mem::MaybeUninit<f64>],
    ) {
        let wcol: Option<Vec<f32>> =
            weights.map(|w| w.column(0).iter().map(|&v| toward_zero_f32(v)).collect());
        let bcol: Option<Vec<f64>> = weights.map(|w| w.column(1).to_vec());
        let positions = self.window.positions();
        let cache = cache.and_then(|c| c.downcast_ref::<ConvCache>());
        match cache {
            Some(c) => weighted_bias_sum(out, &self.bias.range, c.bias.view(), bcol.as_deref()),
            None => bias_sum(
                out,
                &self.bias.range,
                self.delta.view(),
                positions,
                bcol.as_deref(),
            ),
        }
        let kept = cache.and_then(|c| c.kept.as_ref());
        if let (Some(per_example), Some(w)) = (kept, wcol.as_deref()) {
            weighted_rows_sum(out, &self.weight.range, per_example.view(), w);
            return;
        }
        let scaled = scale_rows(self.delta.view(), wcol.as_deref(), positions);
        let d = scaled.as_ref().map_or(self.delta.view(), |a| a.view());
        let gw = conv_weight_gradient(self.input.view(), &self.window, d);
        write_f64(out, &self.weight.range, &gw);
        if let Some(ws) = &self.standardized {
            // The map is linear: J applied once to Σ_i w_i ∂L_i/∂Ŵ is Σ_i w_i ∂L_i/∂W.
            let o = &mut out[self.weight.range.clone()];
            // SAFETY: `write_f64` just wrote every element of the weight range.
            ws.backward_f64(unsafe { crate::model::sums::assume_written(o) });
        }
    }

    fn example_gradient(&self, i: usize, mut row: ArrayViewMut1<'_, f32>) {
        let (l, k) = (self.window.positions(), self.window.patch_len());
        let d = self.delta.slice(s![i * l..(i + 1) * l, ..]);
        let mut gw = row
            .slice_mut(s![self.weight.range.clone()])
            .into_shape_with_order((d.ncols(), k))
            .unwrap_or_else(|_| unreachable!("a row of a fresh array is contiguous"));
        with_scratch(l * k, |ub| {
            let u = example_cols(self.input.view(), &self.window, i, ub);
            conv_example_gradient(u, d, gw.view_mut());
        });
        if let Some(ws) = &self.standardized {
            let Some(g) = gw.as_slice_mut() else {
                unreachable!("a row of a fresh array is contiguous")
            };
            ws.backward_f32(g);
        }
        row.slice_mut(s![self.bias.range.clone()])
            .assign(&d.sum_axis(Axis(0)));
    }
}

/// A convolution's forward pass `Y_i = U_i Wᵀ + b`, a chunk of examples at a time
/// ([`kernels::conv_chunk_examples`]): each chunk's im2col rows are formed in a reused buffer and
/// multiplied while still in cache, so the `[B·L, K]` matrix never exists. Chunks are
/// independent (run in parallel); each output row is one product whatever the thread count.
///
/// # Shapes
/// `x`: `[B, H·W·C_in]`; `w`: `[C_out, K]`; `b`: `[C_out]`; returns `[B, L·C_out]`.
fn conv_forward(
    x: ArrayView2<'_, f32>,
    g: &Window,
    w: ArrayView2<'_, f32>,
    b: ArrayView1<'_, f32>,
) -> Array2<f32> {
    let (batch, l, k, c) = (x.nrows(), g.positions(), g.patch_len(), w.nrows());
    assert_eq!(b.len(), c, "one bias per output channel");
    // Written once: each row is set to the bias, then the product is added (no zero-fill first).
    let mut out = Array2::<f32>::uninit((batch, l * c));
    // Wᵀ `[K, C_out]` row-major: the product streams along output channels (measured 5–70% faster
    // than the strided view of W on these shapes).
    let wt = w.t().as_standard_layout().into_owned();
    let bias_row = b.to_vec();
    let per = kernels::conv_chunk_examples(g);
    out.axis_chunks_iter_mut(Axis(0), per)
        .into_par_iter()
        .zip(x.axis_chunks_iter(Axis(0), per).into_par_iter())
        .for_each(|(o, xc)| {
            let nb = xc.nrows();
            kernels::with_scratch(nb * l * k, |buf| {
                for (j, xi) in xc.rows().into_iter().enumerate() {
                    let xi = xi
                        .as_slice()
                        .map_or_else(|| xi.to_vec().into(), Cow::Borrowed);
                    kernels::im2col_example(&xi, g, &mut buf[j * l * k..(j + 1) * l * k]);
                }
                let u = ArrayView2::from_shape((nb * l, k), &buf[..nb * l * k])
                    .unwrap_or_else(|_| unreachable!("the buffer has nb·L·K entries"));
                let mut o = o
                    .into_shape_with_order((nb * l, c))
                    .unwrap_or_else(|_| unreachable!("rows of a fresh array are contiguous"));
                let Some(flat) = o.as_slice_mut() else {
                    unreachable!("rows of a fresh array are contiguous")
                };
                for r in flat.chunks_exact_mut(c) {
                    for (dst, &bias) in r.iter_mut().zip(bias_row.iter()) {
                        dst.write(bias);
                    }
                }
                // SAFETY: every row was just set to the bias (rows have C_out = len(b) entries).
                let mut o = unsafe { o.assume_init() };
                gemm_serial(u, wt.view(), 1.0, o.view_mut());
            });
        });
    // SAFETY: the chunks cover every row, and each chunk initialised all of its rows.
    unsafe { out.assume_init() }
}

/// A convolution's input gradient `col2im(Δ W)`, a chunk of examples at a time (the `[B·L, K]`
/// product never exists; see [`conv_forward`]).
///
/// # Shapes
/// `dm`: `[B·L, C_out]`; `w`: `[C_out, K]`; returns `[B, H·W·C_in]`.
fn conv_input_gradient(
    dm: ArrayView2<'_, f32>,
    g: &Window,
    w: ArrayView2<'_, f32>,
    batch: usize,
) -> Array2<f32> {
    let (l, k) = (g.positions(), g.patch_len());
    let mut dx = Array2::<f32>::zeros((batch, g.in_len()));
    let per = kernels::conv_chunk_examples(g);
    dx.axis_chunks_iter_mut(Axis(0), per)
        .into_par_iter()
        .zip(dm.axis_chunks_iter(Axis(0), per * l).into_par_iter())
        .for_each(|(mut dxc, dc)| {
            let nb = dxc.nrows();
            kernels::with_scratch(nb * l * k, |buf| {
                let mut du = ArrayViewMut2::from_shape((nb * l, k), &mut *buf)
                    .unwrap_or_else(|_| unreachable!("the buffer has nb·L·K entries"));
                gemm_serial(dc, w, 0.0, du.view_mut());
                for (j, mut xi) in dxc.rows_mut().into_iter().enumerate() {
                    let Some(xi) = xi.as_slice_mut() else {
                        unreachable!("rows of a fresh array are contiguous")
                    };
                    kernels::col2im_example_add(&buf[j * l * k..(j + 1) * l * k], g, xi);
                }
            });
        });
    dx
}

/// `g ← Δ_iᵀ U_i`.
fn conv_example_gradient(
    u: ArrayView2<'_, f32>,
    d: ArrayView2<'_, f32>,
    g: ArrayViewMut2<'_, f32>,
) {
    gemm_serial(d.t(), u, 0.0, g);
}

/// Conv norms and what the weighted sum can reuse.
type ConvNorms = (Vec<(f64, f64)>, Option<Array2<f32>>, Array2<f64>);

/// Per example: (‖Δ_iᵀ U_i‖²_F, ‖Σ_l Δ_i[l, :]‖²); with `keep` (materialise method only), also
/// the per-example weight gradients `[B, C_out·K]`; and the per-example bias gradients
/// `[B, C_out]` (f64). With weight standardisation (`ws`) the weight gradients and their norms
/// are those of `Jᵀ(Δ_iᵀ U_i)` (see the module doc).
fn conv_squared_norms(
    input: ArrayView2<'_, f32>,
    window: &Window,
    delta: ArrayView2<'_, f32>,
    ws: Option<&Standardized>,
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
                let mut g = with_scratch(positions * k, |buf| {
                    gemm_serial_uninit(d.t(), example_cols(input, window, i, buf), g)
                });
                let Some(g) = g.as_slice_mut() else {
                    unreachable!("a row of a fresh array is contiguous")
                };
                if let Some(ws) = ws {
                    ws.backward_f32(g);
                }
                (sum_squares_slice(g), bias_sq(i))
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
                            let Some(g) = s1.as_slice_mut() else {
                                unreachable!("a fresh array is contiguous")
                            };
                            if let Some(ws) = ws {
                                ws.backward_f32(g);
                            }
                            sum_squares_slice(g)
                        }
                        ConvNormMethod::Ghost => match ws {
                            Some(ws) => ws_ghost_squared_norm(u, d, ws, s1, s2),
                            None => {
                                gemm_serial(u, u.t(), 0.0, s1.view_mut());
                                gemm_serial(d, d.t(), 0.0, s2.view_mut());
                                s1.iter()
                                    .zip(s2.iter())
                                    .map(|(&x, &y)| x as f64 * y as f64)
                                    .sum::<f64>()
                            }
                        },
                    }
                });
                (weight_sq, bias_sq(i))
            },
        )
        .collect();
    (norms, None, biases)
}

/// ‖Jᵀ(Δᵀ U)‖²_F for one example by the identity of [`super::weight_std`] (its split form):
/// Σ_o ‖g_o‖² / s_o² = ⟨U Uᵀ, Δ̃ Δ̃ᵀ⟩ with Δ̃ = Δ diag(1/s) (ghost norm, `s1`, `s2` `[L, L]`
/// scratch), plus per row o the correction from Σ g_o = Σ_l Δ[l, o] (U 1)[l] and
/// Σ g_o ⊙ Ŵ_o = Σ_l Δ[l, o] (U Ŵᵀ)[l, o]. The identity subtracts nearly equal terms when g lies
/// close to span{1, Ŵ_o} (always for a fan-in of 2), so its relative error can be large there;
/// the result is clamped at 0. It is never the default method (see [`default_method`]).
fn ws_ghost_squared_norm(
    u: ArrayView2<'_, f32>,
    d: ArrayView2<'_, f32>,
    ws: &Standardized,
    s1: &mut Array2<f32>,
    s2: &mut Array2<f32>,
) -> f64 {
    let (l, c) = d.dim();
    let inv = ws.inv_std();
    let mut scaled = d.to_owned();
    for mut r in scaled.rows_mut() {
        r.iter_mut()
            .zip(inv)
            .for_each(|(v, &x)| *v = (*v as f64 * x) as f32);
    }
    gemm_serial(u, u.t(), 0.0, s1.view_mut());
    gemm_serial(scaled.view(), scaled.t(), 0.0, s2.view_mut());
    let gram: f64 = s1
        .iter()
        .zip(s2.iter())
        .map(|(&x, &y)| x as f64 * y as f64)
        .sum();
    let row_sums: Vec<f64> = u
        .rows()
        .into_iter()
        .map(|r| r.iter().map(|&v| v as f64).sum())
        .collect();
    let mut p = Array2::<f32>::zeros((l, c));
    gemm_serial(u, ws.weight().t(), 0.0, p.view_mut());
    ((0..c)
        .map(|o| {
            let (mut sum_g, mut sum_gw) = (0.0f64, 0.0f64);
            for t in 0..l {
                let dv = d[[t, o]] as f64;
                sum_g += dv * row_sums[t];
                sum_gw += dv * p[[t, o]] as f64;
            }
            ws.squared_norm(o, 0.0, sum_g, sum_gw)
        })
        .sum::<f64>()
        + gram)
        .max(0.0)
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
