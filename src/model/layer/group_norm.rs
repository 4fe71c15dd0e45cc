//! Group normalisation (Wu & He 2018, "Group Normalization", arXiv:1803.08494, eq. 1–3) and
//! its per-sample gradients (room: `model`).
//!
//! Each example's channels are split into `groups` groups of C/G consecutive channels; each group
//! is normalised over its channels and every spatial position, then scaled and shifted per
//! channel: `x̂ = (x − μ) / √(σ² + ε)`, `y_c = γ_c x̂_c + β_c`, with μ and σ² the group's mean and
//! (biased) variance and ε = [`EPS`] (PyTorch's `GroupNorm` default). The statistics are those of
//! one example alone, so no example's output depends on another's: unlike batch normalisation it
//! keeps per-example gradients, clipping and the privacy analysis valid. On a vector input of d
//! features it treats each feature as a channel at one position (groups = 1 is layer
//! normalisation).
//!
//! Layout: weight γ `[C]` (initialised to 1), bias β `[C]` (initialised to 0), as PyTorch's
//! `GroupNorm.weight` and `.bias`; drawing nothing from the initialisation stream.
//!
//! Gradients (per example, over the group's n = L·C/G entries): the per-sample parameter
//! gradients are small (`[2C]`) and formed directly in the backward pass, `g^γ_c = Σ_l δ_{l,c}
//! x̂_{l,c}`, `g^β_c = Σ_l δ_{l,c}`; the input gradient is
//! `dx = (dx̂ − mean(dx̂) − x̂ · mean(dx̂ ⊙ x̂)) / √(σ² + ε)` with `dx̂ = γ ⊙ δ` (the derivative
//! of eq. 1–2; means over the group).

use std::any::Any;

use ndarray::{
    Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis, CowArray, Ix2, s,
};
use rand_chacha::ChaCha12Rng;
use rayon::prelude::*;

use super::{
    Backward, BackwardContext, BuildContext, Forward, Layer, LayerGradients, NormContext,
    ParamTensor, Saved, Shape,
};
use crate::model::sums::{sum_squares, sum_squares_slice};

/// ε added to the variance (PyTorch's default).
pub const EPS: f64 = 1e-5;

/// A built group normalisation layer.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupNorm {
    shape: Shape,
    /// Channels C (features of a vector input).
    channels: usize,
    /// Spatial positions L (1 for a vector input).
    positions: usize,
    groups: usize,
    /// `[weight, bias]`.
    tensors: Vec<ParamTensor>,
}

/// What the forward pass keeps: `x̂` `[B, L·C]` and 1/√(σ² + ε) `[B, G]`.
struct Normalised {
    xhat: Array2<f32>,
    rstd: Array2<f64>,
}

impl GroupNorm {
    /// Group normalisation with `groups` groups, which must divide the channel count.
    pub fn build(groups: usize, input: Shape, ctx: &mut BuildContext) -> Result<Self, String> {
        let (channels, positions) = match input {
            Shape::Image { c, h, w } => (c, h * w),
            Shape::Flat(d) => (d, 1),
        };
        if groups == 0 || channels % groups != 0 {
            return Err(format!(
                "groups {groups} must be positive and divide the {channels} channels of its input"
            ));
        }
        let weight = ctx.tensor("weight", vec![channels])?;
        let bias = ctx.tensor("bias", vec![channels])?;
        Ok(GroupNorm {
            shape: input,
            channels,
            positions,
            groups,
            tensors: vec![weight, bias],
        })
    }
}

impl Layer for GroupNorm {
    fn output_shape(&self) -> Shape {
        self.shape
    }

    fn params(&self) -> &[ParamTensor] {
        &self.tensors
    }

    fn init_params(&self, _rng: &mut ChaCha12Rng, params: &mut Array1<f32>) {
        params
            .slice_mut(s![self.tensors[0].range.clone()])
            .fill(1.0);
        params
            .slice_mut(s![self.tensors[1].range.clone()])
            .fill(0.0);
    }

    fn forward(
        &self,
        params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        keep: bool,
    ) -> Forward {
        let gamma = params.slice(s![self.tensors[0].range.clone()]);
        let beta = params.slice(s![self.tensors[1].range.clone()]);
        let (batch, c) = (input.nrows(), self.channels);
        let mut xhat = Array2::<f32>::zeros(input.raw_dim());
        let mut rstd = Array2::<f64>::zeros((batch, self.groups));
        let (groups, per) = (self.groups, c / self.groups);
        let n = (self.positions * per) as f64;
        xhat.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(rstd.axis_iter_mut(Axis(0)).into_par_iter())
            .zip(input.axis_iter(Axis(0)).into_par_iter())
            .for_each(|((mut xh, mut rs), x)| {
                let x = contiguous(x);
                let xh = xh.as_slice_mut().expect("a fresh array is contiguous");
                // Each group's sums run position by position over its channels in order.
                let mut mean = vec![0.0f64; groups];
                for pos in x.chunks_exact(c) {
                    for (m, chans) in mean.iter_mut().zip(pos.chunks_exact(per)) {
                        for &v in chans {
                            *m += v as f64;
                        }
                    }
                }
                mean.iter_mut().for_each(|m| *m /= n);
                let mut var = vec![0.0f64; groups];
                for pos in x.chunks_exact(c) {
                    for ((s, &m), chans) in var.iter_mut().zip(&mean).zip(pos.chunks_exact(per)) {
                        for &v in chans {
                            *s += (v as f64 - m).powi(2);
                        }
                    }
                }
                for (g, s) in var.iter().enumerate() {
                    rs[g] = 1.0 / (s / n + EPS).sqrt();
                }
                for (out, pos) in xh.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
                    for (g, (o, chans)) in out
                        .chunks_exact_mut(per)
                        .zip(pos.chunks_exact(per))
                        .enumerate()
                    {
                        let (m, r) = (mean[g], rs[g]);
                        for (o, &v) in o.iter_mut().zip(chans) {
                            *o = ((v as f64 - m) * r) as f32;
                        }
                    }
                }
            });
        let mut output = xhat.clone();
        output
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .for_each(|mut y| {
                let y = y.as_slice_mut().expect("a fresh array is contiguous");
                for pos in y.chunks_exact_mut(c) {
                    for ((v, &ga), &be) in pos.iter_mut().zip(gamma.iter()).zip(beta.iter()) {
                        *v = ga * *v + be;
                    }
                }
            });
        Forward {
            output,
            saved: keep.then(|| Box::new(Normalised { xhat, rstd }) as Saved),
        }
    }

    fn backward(&self, ctx: BackwardContext<'_>, d: Array2<f32>, input_gradient: bool) -> Backward {
        let Some(saved) = ctx.saved.and_then(|s| s.downcast_ref::<Normalised>()) else {
            unreachable!("a kept trace holds the normalised input")
        };
        let gamma = ctx.params.slice(s![self.tensors[0].range.clone()]);
        let c = self.channels;
        // Per-example parameter gradients [B, 2C]: γ's then β's, summed over positions in f64.
        let mut per_example = Array2::<f32>::zeros((ctx.batch, 2 * c));
        per_example
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(d.axis_iter(Axis(0)).into_par_iter())
            .zip(saved.xhat.axis_iter(Axis(0)).into_par_iter())
            .for_each(|((mut g, di), xh)| {
                let mut acc = vec![0.0f64; 2 * c];
                for l in 0..self.positions {
                    for ch in 0..c {
                        let j = l * c + ch;
                        acc[ch] += di[j] as f64 * xh[j] as f64;
                        acc[c + ch] += di[j] as f64;
                    }
                }
                g.iter_mut().zip(&acc).for_each(|(o, &a)| *o = a as f32);
            });
        let dx = input_gradient.then(|| {
            let (groups, per) = (self.groups, c / self.groups);
            let n = (self.positions * per) as f64;
            let gamma: Vec<f64> = gamma.iter().map(|&g| g as f64).collect();
            let mut dx = Array2::<f32>::zeros(d.raw_dim());
            dx.axis_iter_mut(Axis(0))
                .into_par_iter()
                .enumerate()
                .for_each(|(i, mut dxi)| {
                    let (di, xh) = (contiguous(d.row(i)), contiguous(saved.xhat.row(i)));
                    let dxi = dxi.as_slice_mut().expect("a fresh array is contiguous");
                    // dx̂ = γ ⊙ δ; its mean and its mean against x̂ per group, summed position by
                    // position over the group's channels in order.
                    let (mut m1, mut m2) = (vec![0.0f64; groups], vec![0.0f64; groups]);
                    for (pd, px) in di.chunks_exact(c).zip(xh.chunks_exact(c)) {
                        for (g, ((cd, cx), ga)) in pd
                            .chunks_exact(per)
                            .zip(px.chunks_exact(per))
                            .zip(gamma.chunks_exact(per))
                            .enumerate()
                        {
                            for ((&dv, &xv), &gv) in cd.iter().zip(cx).zip(ga) {
                                let dxh = gv * dv as f64;
                                m1[g] += dxh;
                                m2[g] += dxh * xv as f64;
                            }
                        }
                    }
                    for (out, (pd, px)) in dxi
                        .chunks_exact_mut(c)
                        .zip(di.chunks_exact(c).zip(xh.chunks_exact(c)))
                    {
                        for (g, (((o, cd), cx), ga)) in out
                            .chunks_exact_mut(per)
                            .zip(pd.chunks_exact(per))
                            .zip(px.chunks_exact(per))
                            .zip(gamma.chunks_exact(per))
                            .enumerate()
                        {
                            let (a, b, r) = (m1[g] / n, m2[g] / n, saved.rstd[[i, g]]);
                            for (((o, &dv), &xv), &gv) in o.iter_mut().zip(cd).zip(cx).zip(ga) {
                                let dxh = gv * dv as f64;
                                *o = (r * (dxh - a - xv as f64 * b)) as f32;
                            }
                        }
                    }
                });
            dx
        });
        Backward {
            input_gradient: dx,
            delta: Some(per_example),
        }
    }

    fn gradients<'a>(
        &self,
        _params: ArrayView1<'_, f32>,
        _input: CowArray<'a, f32, Ix2>,
        delta: Array2<f32>,
    ) -> Option<Box<dyn LayerGradients + 'a>> {
        Some(Box::new(GroupNormGradients {
            per_example: delta,
            weight: self.tensors[0].clone(),
            bias: self.tensors[1].clone(),
        }))
    }
}

/// A row as a contiguous slice (borrowed when it is one).
fn contiguous<'a>(row: ArrayView1<'a, f32>) -> std::borrow::Cow<'a, [f32]> {
    match row.to_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(row.to_vec()),
    }
}

/// The per-example gradients `[B, 2C]` (γ's then β's), formed whole by the backward pass.
struct GroupNormGradients {
    per_example: Array2<f32>,
    weight: ParamTensor,
    bias: ParamTensor,
}

impl GroupNormGradients {
    /// Example `i`'s gradients of γ and of β.
    fn halves(&self, i: usize) -> (ArrayView1<'_, f32>, ArrayView1<'_, f32>) {
        let c = self.weight.range.len();
        let row = self.per_example.row(i);
        (row.slice_move(s![..c]), row.slice_move(s![c..]))
    }
}

impl LayerGradients for GroupNormGradients {
    fn squared_norms(
        &self,
        _ctx: &mut NormContext,
        mut out: ArrayViewMut2<'_, f64>,
    ) -> Option<Saved> {
        for i in 0..self.per_example.nrows() {
            let (w, b) = self.halves(i);
            out[[i, 0]] = w
                .as_slice()
                .map_or_else(|| sum_squares(w.iter().copied()), sum_squares_slice);
            out[[i, 1]] = b
                .as_slice()
                .map_or_else(|| sum_squares(b.iter().copied()), sum_squares_slice);
        }
        None
    }

    fn weighted_sum(
        &self,
        weights: Option<ArrayView2<'_, f64>>,
        _cache: Option<&(dyn Any + Send + Sync)>,
        out: &mut Array1<f64>,
    ) {
        let c = self.weight.range.len();
        let mut acc = vec![0.0f64; 2 * c];
        for i in 0..self.per_example.nrows() {
            let (ww, wb) = weights.map_or((1.0, 1.0), |w| (w[[i, 0]], w[[i, 1]]));
            for (j, (a, &v)) in acc.iter_mut().zip(self.per_example.row(i)).enumerate() {
                *a += if j < c { ww } else { wb } * v as f64;
            }
        }
        out.slice_mut(s![self.weight.range.clone()])
            .iter_mut()
            .zip(&acc[..c])
            .for_each(|(o, &a)| *o = a);
        out.slice_mut(s![self.bias.range.clone()])
            .iter_mut()
            .zip(&acc[c..])
            .for_each(|(o, &a)| *o = a);
    }

    fn example_gradient(&self, i: usize, mut row: ArrayViewMut1<'_, f32>) {
        let (w, b) = self.halves(i);
        row.slice_mut(s![self.weight.range.clone()]).assign(&w);
        row.slice_mut(s![self.bias.range.clone()]).assign(&b);
    }
}
