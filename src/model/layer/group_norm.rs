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

    fn dims(&self) -> Dims {
        let per = self.channels / self.groups;
        Dims {
            c: self.channels,
            per,
            n: (self.positions * per) as f64,
        }
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
        let batch = input.nrows();
        let mut xhat = Array2::<f32>::zeros(input.raw_dim());
        let mut output = Array2::<f32>::zeros(input.raw_dim());
        let mut rstd = Array2::<f64>::zeros((batch, self.groups));
        let (gamma, beta) = (contiguous(gamma), contiguous(beta));
        let dims = self.dims();
        xhat.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(output.axis_iter_mut(Axis(0)).into_par_iter())
            .zip(rstd.axis_iter_mut(Axis(0)).into_par_iter())
            .zip(input.axis_iter(Axis(0)).into_par_iter())
            .for_each(|(((mut xh, mut y), mut rs), x)| {
                let x = contiguous(x);
                let fresh = "a fresh array is contiguous";
                forward_example(
                    dims,
                    &x,
                    (&gamma, &beta),
                    xh.as_slice_mut().expect(fresh),
                    y.as_slice_mut().expect(fresh),
                    rs.as_slice_mut().expect(fresh),
                );
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
        // Per-example parameter gradients [B, 2C]: γ's then β's.
        let mut per_example = Array2::<f32>::zeros((ctx.batch, 2 * c));
        per_example
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(d.axis_iter(Axis(0)).into_par_iter())
            .zip(saved.xhat.axis_iter(Axis(0)).into_par_iter())
            .for_each(|((mut g, di), xh)| {
                let (di, xh) = (contiguous(di), contiguous(xh));
                let g = g.as_slice_mut().expect("a fresh array is contiguous");
                parameter_gradients_example(c, &di, &xh, g);
            });
        let dx = input_gradient.then(|| {
            let dims = self.dims();
            let gamma: Vec<f64> = gamma.iter().map(|&g| g as f64).collect();
            let mut dx = Array2::<f32>::zeros(d.raw_dim());
            dx.axis_iter_mut(Axis(0))
                .into_par_iter()
                .enumerate()
                .for_each(|(i, mut dxi)| {
                    let (di, xh) = (contiguous(d.row(i)), contiguous(saved.xhat.row(i)));
                    let rstd = saved.rstd.row(i).to_vec();
                    let dxi = dxi.as_slice_mut().expect("a fresh array is contiguous");
                    input_gradient_example(dims, &di, &xh, &gamma, &rstd, dxi);
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

/// One example's shape: C channels, C/G channels per group, n = L·C/G entries per group.
#[derive(Debug, Clone, Copy)]
struct Dims {
    c: usize,
    per: usize,
    n: f64,
}

// Per-example kernels. Rows are position-major (`[L·C]`, channel fastest). Every sum over a
// group runs in f64 in one fixed order, which is part of the layer's bits: each channel's sum over
// positions in order (C independent chains, one SIMD lane each), then the group's channels in
// order. Each kernel is compiled twice, portable and for AVX-512F, chosen at run time; both do the
// same operations in the same order (Rust never fuses a multiply and an add), so the results do
// not depend on the CPU.

/// Defines `fn $name` whose body is compiled twice, portable and for AVX-512F, and runs the
/// AVX-512F form when the CPU has it.
macro_rules! widest {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn kernel($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            unsafe fn wide($($arg: $ty),*) {
                kernel($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if crate::cpu::avx512_available() {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe { wide($($arg),*) };
                return;
            }
            kernel($($arg),*)
        }
    };
}

widest! {
    /// Forward pass of one example: x̂ (`xh`), y = γ x̂ + β and 1/√(σ² + ε) per group (`rstd`).
    fn forward_example(
        dims: Dims,
        x: &[f32],
        affine: (&[f32], &[f32]),
        xh: &mut [f32],
        y: &mut [f32],
        rstd: &mut [f64],
    ) {
        let (gamma, beta) = affine;
        let c = dims.c;
        let mut sums = vec![0.0f64; c];
        for pos in x.chunks_exact(c) {
            for (s, &v) in sums.iter_mut().zip(pos) {
                *s += v as f64;
            }
        }
        let mean = spread(&group_means(&sums, dims), dims.per);
        let mut squares = vec![0.0f64; c];
        for pos in x.chunks_exact(c) {
            for ((s, &v), &m) in squares.iter_mut().zip(pos).zip(&mean) {
                let d = v as f64 - m;
                *s += d * d;
            }
        }
        let variance = group_means(&squares, dims);
        for (r, &v) in rstd.iter_mut().zip(&variance) {
            *r = 1.0 / (v + EPS).sqrt();
        }
        let r = spread(rstd, dims.per);
        for ((xo, yo), pos) in xh
            .chunks_exact_mut(c)
            .zip(y.chunks_exact_mut(c))
            .zip(x.chunks_exact(c))
        {
            for (((((xo, yo), &v), &m), &r), (&ga, &be)) in xo
                .iter_mut()
                .zip(yo.iter_mut())
                .zip(pos)
                .zip(&mean)
                .zip(&r)
                .zip(gamma.iter().zip(beta))
            {
                let t = ((v as f64 - m) * r) as f32;
                *xo = t;
                *yo = ga * t + be;
            }
        }
    }
}

widest! {
    /// One example's parameter gradients `[2C]`: g^γ_c = Σ_l δ_{l,c} x̂_{l,c}, then
    /// g^β_c = Σ_l δ_{l,c}, each summed over positions in order, in f64.
    fn parameter_gradients_example(c: usize, d: &[f32], xh: &[f32], g: &mut [f32]) {
        let mut acc = vec![0.0f64; 2 * c];
        let (acc_gamma, acc_beta) = acc.split_at_mut(c);
        for (pd, px) in d.chunks_exact(c).zip(xh.chunks_exact(c)) {
            for (((ag, ab), &dv), &xv) in acc_gamma
                .iter_mut()
                .zip(acc_beta.iter_mut())
                .zip(pd)
                .zip(px)
            {
                *ag += dv as f64 * xv as f64;
                *ab += dv as f64;
            }
        }
        g.iter_mut().zip(&acc).for_each(|(o, &a)| *o = a as f32);
    }
}

widest! {
    /// One example's input gradient
    /// `dx = (dx̂ − mean(dx̂) − x̂ · mean(dx̂ ⊙ x̂)) / √(σ² + ε)`, `dx̂ = γ ⊙ δ`, means over the group.
    fn input_gradient_example(
        dims: Dims,
        d: &[f32],
        xh: &[f32],
        gamma: &[f64],
        rstd: &[f64],
        dx: &mut [f32],
    ) {
        let c = dims.c;
        let (mut m1, mut m2) = (vec![0.0f64; c], vec![0.0f64; c]);
        for (pd, px) in d.chunks_exact(c).zip(xh.chunks_exact(c)) {
            for ((((s1, s2), &dv), &xv), &gv) in
                m1.iter_mut().zip(m2.iter_mut()).zip(pd).zip(px).zip(gamma)
            {
                let dxh = gv * dv as f64;
                *s1 += dxh;
                *s2 += dxh * xv as f64;
            }
        }
        let a = spread(&group_means(&m1, dims), dims.per);
        let b = spread(&group_means(&m2, dims), dims.per);
        let r = spread(rstd, dims.per);
        for (out, (pd, px)) in dx
            .chunks_exact_mut(c)
            .zip(d.chunks_exact(c).zip(xh.chunks_exact(c)))
        {
            for ((((((o, &dv), &xv), &gv), &a), &b), &r) in out
                .iter_mut()
                .zip(pd)
                .zip(px)
                .zip(gamma)
                .zip(&a)
                .zip(&b)
                .zip(&r)
            {
                let dxh = gv * dv as f64;
                *o = (r * (dxh - a - xv as f64 * b)) as f32;
            }
        }
    }
}

/// Per-channel sums `[C]` → each group's total over its channels in order, divided by n: `[G]`.
#[inline(always)]
fn group_means(per_channel: &[f64], dims: Dims) -> Vec<f64> {
    per_channel
        .chunks_exact(dims.per)
        .map(|g| g.iter().sum::<f64>() / dims.n)
        .collect()
}

/// Per-group values `[G]` spread to their channels: `[C]`.
#[inline(always)]
fn spread(per_group: &[f64], per: usize) -> Vec<f64> {
    per_group
        .iter()
        .flat_map(|&v| std::iter::repeat_n(v, per))
        .collect()
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
        out: &mut [std::mem::MaybeUninit<f64>],
    ) {
        let c = self.weight.range.len();
        let mut acc = vec![0.0f64; 2 * c];
        for i in 0..self.per_example.nrows() {
            let (ww, wb) = weights.map_or((1.0, 1.0), |w| (w[[i, 0]], w[[i, 1]]));
            for (j, (a, &v)) in acc.iter_mut().zip(self.per_example.row(i)).enumerate() {
                *a += if j < c { ww } else { wb } * v as f64;
            }
        }
        crate::model::sums::assign(out, &self.weight.range, &acc[..c]);
        crate::model::sums::assign(out, &self.bias.range, &acc[c..]);
    }

    fn example_gradient(&self, i: usize, mut row: ArrayViewMut1<'_, f32>) {
        let (w, b) = self.halves(i);
        row.slice_mut(s![self.weight.range.clone()]).assign(&w);
        row.slice_mut(s![self.bias.range.clone()]).assign(&b);
    }
}
