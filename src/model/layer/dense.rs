//! The dense (fully connected) layer `y = W a + b` and its per-sample gradients (room: `model`).
//!
//! Layout: weight `[units, inputs]` row-major (PyTorch's `Linear.weight`), bias `[units]`.
//!
//! Per-sample gradients: `g_i^W = δ_i a_iᵀ`, so ‖g_i^W‖² = ‖a_i‖² ‖δ_i‖² and ‖g_i^b‖² = ‖δ_i‖²
//! (the norm factorisation of Goodfellow 2015, "Efficient per-example gradient computations");
//! `Σ_i w_i g_i^W = Δᵀ diag(w) A` is one matrix product.

use std::any::Any;

use ndarray::{
    Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis, CowArray, Ix2, s,
};
use rand_chacha::ChaCha12Rng;
use rayon::prelude::*;

use super::{
    Backward, BackwardContext, BuildContext, Forward, Layer, LayerGradients, NormContext,
    ParamTensor, Saved, Shape, init_uniform_fan_in, tensor_matrix,
};
use crate::model::linalg::{gemm, gemm_uninit, transposed};
use crate::model::sums::{
    PAR_MIN_OUTPUTS, assign, bias_acc, scale_rows, sum_squares, sum_squares_slice, toward_zero_f32,
    write_f64,
};

/// `(a(), b())`, the two side by side on the pool when `par`, else one after the other on the
/// calling thread (the same results: neither closure's arithmetic depends on where it runs).
fn join_if<A: Send, B: Send>(
    par: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if par { rayon::join(a, b) } else { (a(), b()) }
}

/// A built dense layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Dense {
    inputs: usize,
    units: usize,
    /// `[weight, bias]`.
    tensors: Vec<ParamTensor>,
}

impl Dense {
    /// A dense layer of `units` outputs on a vector input.
    pub fn build(units: usize, input: Shape, ctx: &mut BuildContext) -> Result<Self, String> {
        let Shape::Flat(inputs) = input else {
            return Err("a dense layer needs a vector input; add a flatten layer before it".into());
        };
        if units == 0 {
            return Err("units must be positive".into());
        }
        let weight = ctx.tensor("weight", vec![units, inputs])?;
        let bias = ctx.tensor("bias", vec![units])?;
        Ok(Dense {
            inputs,
            units,
            tensors: vec![weight, bias],
        })
    }

    fn weight<'p>(&self, params: &ArrayView1<'p, f32>) -> ArrayView2<'p, f32> {
        tensor_matrix(params, &self.tensors[0].range, self.units, self.inputs)
    }
}

/// From this many rows the forward product copies `Wᵀ` row-major first: the copy is one pass over
/// the weights, at most an eighth of the product's multiply-adds.
const MIN_ROWS_FOR_TRANSPOSED_COPY: usize = 8;

/// Narrower layers (a 10-class output) are packed quickly enough from the view: the copy's task
/// dispatch cost more than it saved on `logreg_mnist` (784 → 10).
const MIN_UNITS_FOR_TRANSPOSED_COPY: usize = 32;

impl Layer for Dense {
    fn output_shape(&self) -> Shape {
        Shape::Flat(self.units)
    }

    fn params(&self) -> &[ParamTensor] {
        &self.tensors
    }

    fn init_params(&self, rng: &mut ChaCha12Rng, params: &mut Array1<f32>) {
        init_uniform_fan_in(rng, params, self.inputs, &self.tensors);
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
        let w = self.weight(&params);
        let b = params.slice(s![self.tensors[1].range.clone()]);
        // The `β = 1` start of `X Wᵀ + b`: every row set to the bias (rows on the pool for outputs
        // of at least `PAR_MIN_OUTPUTS` elements).
        let mut out = if input.nrows() * b.len() >= PAR_MIN_OUTPUTS {
            let mut out = Array2::<f32>::uninit((input.nrows(), b.len()));
            out.axis_iter_mut(Axis(0))
                .into_par_iter()
                .for_each(|mut row| {
                    row.zip_mut_with(&b, |o, &v| *o = std::mem::MaybeUninit::new(v));
                });
            // SAFETY: every row was written just above.
            unsafe { out.assume_init() }
        } else {
            let Some(rows_of_bias) = b.broadcast((input.nrows(), b.len())) else {
                unreachable!("a vector broadcasts to rows of its own length")
            };
            rows_of_bias.to_owned()
        };
        if input.nrows() >= MIN_ROWS_FOR_TRANSPOSED_COPY
            && self.units >= MIN_UNITS_FOR_TRANSPOSED_COPY
        {
            // A row-major Wᵀ: the backend packs a transposed view on one thread (linalg docs).
            gemm(input, transposed(w).view(), 1.0, out.view_mut());
        } else {
            gemm(input, w.t(), 1.0, out.view_mut());
        }
        Forward::plain(out)
    }

    fn backward(&self, ctx: BackwardContext<'_>, d: Array2<f32>, input_gradient: bool) -> Backward {
        let dx = input_gradient.then(|| {
            let mut dx = Array2::<f32>::uninit((ctx.batch, self.inputs));
            gemm_uninit(d.view(), self.weight(&ctx.params), dx.view_mut());
            // SAFETY: `gemm_uninit` wrote every element.
            unsafe { dx.assume_init() }
        });
        Backward {
            input_gradient: dx,
            delta: Some(d),
        }
    }

    fn gradients<'a>(
        &self,
        _params: ArrayView1<'_, f32>,
        input: CowArray<'a, f32, Ix2>,
        delta: Array2<f32>,
    ) -> Option<Box<dyn LayerGradients + 'a>> {
        Some(Box::new(DenseGradients {
            input,
            delta,
            weight: self.tensors[0].clone(),
            bias: self.tensors[1].clone(),
        }))
    }

    fn forward_macs(&self) -> f64 {
        (self.inputs * self.units) as f64
    }
}

/// Examples per task of the norm pass (each example's norms are computed alone, so the results do
/// not depend on it): finer tasks cost more to hand out than a row's two sums of squares.
const NORM_ROWS_PER_TASK: usize = 16;

/// `input`: `[B, inputs]`; `delta`: `[B, units]`.
struct DenseGradients<'a> {
    input: CowArray<'a, f32, Ix2>,
    delta: Array2<f32>,
    weight: ParamTensor,
    bias: ParamTensor,
}

impl LayerGradients for DenseGradients<'_> {
    fn squared_norms(
        &self,
        _ctx: &mut NormContext,
        mut out: ArrayViewMut2<'_, f64>,
    ) -> Option<Saved> {
        let per_example: Vec<(f64, f64)> = self
            .input
            .axis_iter(Axis(0))
            .into_par_iter()
            .zip(self.delta.axis_iter(Axis(0)).into_par_iter())
            .with_min_len(NORM_ROWS_PER_TASK)
            .map(|(a, d)| {
                let sa = a
                    .as_slice()
                    .map_or_else(|| sum_squares(a.iter().copied()), sum_squares_slice);
                let sd = d
                    .as_slice()
                    .map_or_else(|| sum_squares(d.iter().copied()), sum_squares_slice);
                (sa * sd, sd)
            })
            .collect();
        for (i, (w, b)) in per_example.into_iter().enumerate() {
            out[[i, 0]] = w;
            out[[i, 1]] = b;
        }
        None
    }

    fn weighted_sum(
        &self,
        weights: Option<ArrayView2<'_, f64>>,
        _cache: Option<&(dyn Any + Send + Sync)>,
        out: &mut [std::mem::MaybeUninit<f64>],
    ) {
        let wcol: Option<Vec<f32>> =
            weights.map(|w| w.column(0).iter().map(|&v| toward_zero_f32(v)).collect());
        let bcol: Option<Vec<f64>> = weights.map(|w| w.column(1).to_vec());
        // The bias sum (a serial pass over the rows) runs beside the weight product when the
        // layer's output is large enough for the hand-off to pay.
        let par = self.delta.len() >= PAR_MIN_OUTPUTS;
        let (gw, bias) = join_if(
            par,
            || {
                let scaled = scale_rows(self.delta.view(), wcol.as_deref(), 1);
                let d = scaled.as_ref().map_or(self.delta.view(), |a| a.view());
                let mut gw = Array2::<f32>::uninit((self.delta.ncols(), self.input.ncols()));
                gemm_uninit(d.t(), self.input.view(), gw.view_mut());
                // SAFETY: `gemm_uninit` wrote every element.
                unsafe { gw.assume_init() }
            },
            || bias_acc(self.delta.view(), 1, bcol.as_deref()),
        );
        write_f64(out, &self.weight.range, &gw);
        assign(out, &self.bias.range, &bias);
    }

    fn example_gradient(&self, i: usize, mut row: ArrayViewMut1<'_, f32>) {
        let a = self.input.row(i);
        let d = self.delta.row(i);
        let mut gw = row
            .slice_mut(s![self.weight.range.clone()])
            .into_shape_with_order((d.len(), a.len()))
            .unwrap_or_else(|_| unreachable!("a row of a fresh array is contiguous"));
        for (j, mut r) in gw.rows_mut().into_iter().enumerate() {
            let dj = d[j];
            r.zip_mut_with(&a, |g, &ak| *g = dj * ak);
        }
        row.slice_mut(s![self.bias.range.clone()]).assign(&d);
    }
}
