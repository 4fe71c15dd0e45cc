//! A built sequential model: parameter layout, seeded initialisation, forward and backward passes.
//!
//! Part of the model room; knows nothing of privacy. [`ModelSpec::build`] checks a spec's shapes
//! and returns a [`Model`], which holds no parameters: parameters are a flat f32 vector passed to
//! every call (values in, values out), laid out layer by layer, weight then bias, as
//! [`Model::groups`] names them.
//!
//! Layouts (see [`super::kernels`] for the channels-last convention):
//! - dense weight `[units, inputs]` row-major (PyTorch's `Linear.weight`), bias `[units]`;
//! - conv weight `[C_out, kernel, kernel, C_in]` row-major (PyTorch's `Conv2d.weight`
//!   `[C_out, C_in, kh, kw]` with the input-channel axis moved last), bias `[C_out]`.

use std::ops::Range;

use std::borrow::Cow;

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis, CowArray, Ix2, s};
use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;
use rayon::prelude::*;

use super::ModelError;
use super::kernels::{self, Window};
use super::linalg::{gemm, gemm_serial};
use super::loss::{loss_and_dlogits, predictions};
use super::per_sample::{BatchGradients, ConvNormMethod, Trainable};
use super::spec::{Activation, LayerSpec, LossKind, ModelSpec};
use crate::grad::DEFAULT_MATERIALIZE_LIMIT_BYTES;

/// Largest parameter count a spec may ask for (2^30 f32 = 4 GiB), so a typo cannot allocate
/// without bound.
pub const MAX_PARAMS: usize = 1 << 30;
/// Largest activation size per example a spec may ask for.
pub const MAX_FEATURES: usize = 1 << 26;

/// Rows per chunk in [`Model::forward`] and [`Model::evaluate`], bounding their memory.
const EVAL_CHUNK: usize = 1024;

/// One built layer, with its input geometry resolved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Layer {
    /// Channel-major input image to channels-last (inserted by `build` before a first image layer).
    ToChannelsLast {
        c: usize,
        h: usize,
        w: usize,
    },
    Dense {
        inputs: usize,
        units: usize,
        weight: Range<usize>,
        bias: Range<usize>,
    },
    Conv {
        window: Window,
        out_channels: usize,
        weight: Range<usize>,
        bias: Range<usize>,
    },
    MaxPool {
        window: Window,
    },
    AvgPool {
        window: Window,
    },
    /// Channels-last image to channel-major vector (PyTorch's flatten order); identity on vectors.
    Flatten {
        c: usize,
        h: usize,
        w: usize,
    },
    Act(Activation),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Flat(usize),
    Image { c: usize, h: usize, w: usize },
}

impl Shape {
    fn len(self) -> usize {
        match self {
            Shape::Flat(d) => d,
            Shape::Image { c, h, w } => c * h * w,
        }
    }
}

/// A sequential model built from a [`ModelSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    spec: ModelSpec,
    layers: Vec<Layer>,
    groups: Vec<(String, Range<usize>)>,
    /// For each trainable layer (in order): the spec index, used in group names.
    num_params: usize,
    input_size: usize,
    output_size: usize,
    materialize_limit_bytes: u64,
}

impl ModelSpec {
    /// Check shapes layer by layer and build the model.
    ///
    /// Errors name the offending layer (by its index in `layers`) and say what is wrong: a dense
    /// layer on an image without `flatten`, a kernel larger than its (padded) input, a zero size,
    /// a loss that does not fit the output size, or sizes beyond [`MAX_PARAMS`]/[`MAX_FEATURES`].
    pub fn build(&self) -> Result<Model, ModelError> {
        let mut shape = match *self.input_shape.as_slice() {
            [d] if d > 0 => Shape::Flat(d),
            [c, h, w] if c > 0 && h > 0 && w > 0 => Shape::Image { c, h, w },
            _ => {
                return Err(ModelError::InvalidInputShape {
                    shape: self.input_shape.clone(),
                });
            }
        };
        let input_size = checked_len(&self.input_shape).ok_or(ModelError::TooLarge {
            what: "input".into(),
            size: usize::MAX,
            limit: MAX_FEATURES,
        })?;
        if input_size > MAX_FEATURES {
            return Err(ModelError::TooLarge {
                what: "input".into(),
                size: input_size,
                limit: MAX_FEATURES,
            });
        }
        let mut layers = Vec::with_capacity(self.layers.len() + 1);
        let mut groups = Vec::new();
        let mut next = 0usize;
        if let Shape::Image { c, h, w } = shape
            && c > 1
        {
            layers.push(Layer::ToChannelsLast { c, h, w });
        }
        for (index, spec) in self.layers.iter().enumerate() {
            let bad = |reason: String| ModelError::InvalidLayer {
                index,
                layer: format!("{spec:?}"),
                reason,
            };
            let layer = match (*spec, shape) {
                (LayerSpec::Dense { units }, Shape::Flat(inputs)) => {
                    if units == 0 {
                        return Err(bad("units must be positive".into()));
                    }
                    let n_weight = inputs.checked_mul(units).filter(|&n| n <= MAX_PARAMS);
                    let Some(n_weight) = n_weight else {
                        return Err(bad(format!(
                            "{inputs} × {units} weights exceed {MAX_PARAMS}"
                        )));
                    };
                    let weight = next..next + n_weight;
                    let bias = weight.end..weight.end + units;
                    next = bias.end;
                    groups.push((format!("{index}.weight"), weight.clone()));
                    groups.push((format!("{index}.bias"), bias.clone()));
                    shape = Shape::Flat(units);
                    Layer::Dense {
                        inputs,
                        units,
                        weight,
                        bias,
                    }
                }
                (LayerSpec::Dense { .. }, Shape::Image { .. }) => {
                    return Err(bad(
                        "a dense layer needs a vector input; add a flatten layer before it".into(),
                    ));
                }
                (
                    LayerSpec::Conv2d {
                        channels,
                        kernel,
                        stride,
                        padding,
                    },
                    Shape::Image { c, h, w },
                ) => {
                    let window = window(c, h, w, kernel, stride, padding).map_err(bad)?;
                    if channels == 0 {
                        return Err(bad("channels must be positive".into()));
                    }
                    let n_weight = window
                        .patch_len()
                        .checked_mul(channels)
                        .filter(|&n| n <= MAX_PARAMS)
                        .ok_or_else(|| bad(format!("weights exceed {MAX_PARAMS}")))?;
                    let weight = next..next + n_weight;
                    let bias = weight.end..weight.end + channels;
                    next = bias.end;
                    groups.push((format!("{index}.weight"), weight.clone()));
                    groups.push((format!("{index}.bias"), bias.clone()));
                    shape = Shape::Image {
                        c: channels,
                        h: window.out_height,
                        w: window.out_width,
                    };
                    Layer::Conv {
                        window,
                        out_channels: channels,
                        weight,
                        bias,
                    }
                }
                (
                    LayerSpec::MaxPool { kernel, stride } | LayerSpec::AvgPool { kernel, stride },
                    Shape::Image { c, h, w },
                ) => {
                    let window = window(c, h, w, kernel, stride, 0).map_err(bad)?;
                    shape = Shape::Image {
                        c,
                        h: window.out_height,
                        w: window.out_width,
                    };
                    if matches!(spec, LayerSpec::MaxPool { .. }) {
                        Layer::MaxPool { window }
                    } else {
                        Layer::AvgPool { window }
                    }
                }
                (
                    LayerSpec::Conv2d { .. }
                    | LayerSpec::MaxPool { .. }
                    | LayerSpec::AvgPool { .. },
                    Shape::Flat(_),
                ) => {
                    return Err(bad(
                        "needs an image input [C, H, W], but its input is a vector".into(),
                    ));
                }
                (LayerSpec::Flatten, Shape::Image { c, h, w }) => {
                    shape = Shape::Flat(c * h * w);
                    Layer::Flatten { c, h, w }
                }
                (LayerSpec::Flatten, Shape::Flat(_)) => continue,
                (LayerSpec::Activation { function }, _) => Layer::Act(function),
            };
            if shape.len() > MAX_FEATURES {
                return Err(bad(format!(
                    "its output has {} features per example, over {MAX_FEATURES}",
                    shape.len()
                )));
            }
            if next > MAX_PARAMS {
                return Err(ModelError::TooLarge {
                    what: "parameters".into(),
                    size: next,
                    limit: MAX_PARAMS,
                });
            }
            layers.push(layer);
        }
        let output_size = match shape {
            Shape::Flat(d) => d,
            Shape::Image { .. } => {
                return Err(ModelError::LossMismatch {
                    loss: self.loss,
                    outputs: shape.len(),
                    reason: "the model's output is an image; end with flatten and dense".into(),
                });
            }
        };
        match self.loss {
            LossKind::SoftmaxCrossEntropy if output_size < 2 => {
                return Err(ModelError::LossMismatch {
                    loss: self.loss,
                    outputs: output_size,
                    reason: "softmax cross-entropy needs at least 2 outputs (one per class)".into(),
                });
            }
            LossKind::BinaryLogistic if output_size != 1 => {
                return Err(ModelError::LossMismatch {
                    loss: self.loss,
                    outputs: output_size,
                    reason: "the binary logistic loss needs exactly 1 output".into(),
                });
            }
            _ => {}
        }
        if groups.is_empty() {
            return Err(ModelError::NoParameters);
        }
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return Err(ModelError::InvalidL2 { l2: self.l2 });
        }
        Ok(Model {
            spec: self.clone(),
            layers,
            groups,
            num_params: next,
            input_size,
            output_size,
            materialize_limit_bytes: DEFAULT_MATERIALIZE_LIMIT_BYTES,
        })
    }
}

fn checked_len(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

fn window(
    c: usize,
    h: usize,
    w: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
) -> Result<Window, String> {
    if kernel == 0 || stride == 0 {
        return Err("kernel and stride must be positive".into());
    }
    if padding >= kernel {
        return Err(format!(
            "padding {padding} must be smaller than the kernel {kernel}"
        ));
    }
    if h + 2 * padding < kernel || w + 2 * padding < kernel {
        return Err(format!(
            "kernel {kernel} is larger than its input {h}x{w} (padding {padding})"
        ));
    }
    Ok(Window {
        channels: c,
        height: h,
        width: w,
        kernel,
        stride,
        padding,
        out_height: (h + 2 * padding - kernel) / stride + 1,
        out_width: (w + 2 * padding - kernel) / stride + 1,
    })
}

/// The intermediate values of a forward pass that the backward pass needs.
pub(crate) struct Trace<'a> {
    /// `acts[i]` is the input of layer `i`; `acts[n]` the logits.
    pub acts: Vec<CowArray<'a, f32, Ix2>>,
    /// Winning indices of max-pooling layers.
    pub argmax: Vec<Option<Array2<u32>>>,
}

impl Model {
    /// The spec this model was built from.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// Number of parameters P.
    pub fn num_params(&self) -> usize {
        self.num_params
    }

    /// Parameter groups `(name, range)` in order: `"{i}.weight"`, `"{i}.bias"` for the `i`-th
    /// layer of the spec (PyTorch's `Sequential` naming).
    pub fn groups(&self) -> &[(String, Range<usize>)] {
        &self.groups
    }

    /// Features per example the model expects (the product of `input_shape`).
    pub fn input_size(&self) -> usize {
        self.input_size
    }

    /// Number of outputs (logits).
    pub fn output_size(&self) -> usize {
        self.output_size
    }

    /// Number of classes the labels may take: the output size, or 2 for one output.
    pub fn num_classes(&self) -> usize {
        self.output_size.max(2)
    }

    /// Floats per example of the input and of each layer's output, in order: what a forward
    /// pass holds per example (for memory estimates).
    pub fn activation_lens(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.layers.len() + 1);
        out.push(self.input_size);
        for layer in &self.layers {
            let prev = out.last().copied().unwrap_or(0);
            out.push(match layer {
                Layer::ToChannelsLast { c, h, w } | Layer::Flatten { c, h, w } => c * h * w,
                Layer::Dense { units, .. } => *units,
                Layer::Conv {
                    window,
                    out_channels,
                    ..
                } => window.positions() * out_channels,
                Layer::MaxPool { window } | Layer::AvgPool { window } => {
                    window.positions() * window.channels
                }
                Layer::Act(_) => prev,
            });
        }
        out
    }

    /// Per example, the im2col patch floats of every convolution (Σ L·K), which the per-sample
    /// gradients of convolutions may keep ([`super::per_sample::CONV_CACHE_LIMIT_BYTES`]).
    pub fn conv_patch_lens(&self) -> usize {
        self.layers
            .iter()
            .map(|l| match l {
                Layer::Conv {
                    window,
                    out_channels,
                    ..
                } => window.patch_len() * out_channels,
                _ => 0,
            })
            .sum()
    }

    /// The memory limit for [`crate::grad::PerSampleGradients::materialize`] (default 4 GiB).
    pub fn materialize_limit_bytes(&self) -> u64 {
        self.materialize_limit_bytes
    }

    /// The same model with another materialisation limit in bytes.
    pub fn with_materialize_limit(mut self, bytes: u64) -> Self {
        self.materialize_limit_bytes = bytes;
        self
    }

    /// Check that data with `num_features` columns fits this model.
    pub fn check_input(&self, num_features: usize) -> Result<(), ModelError> {
        if num_features != self.input_size {
            return Err(ModelError::InputSize {
                expected: self.input_size,
                found: num_features,
                shape: self.spec.input_shape.clone(),
            });
        }
        Ok(())
    }

    /// Check that a dataset fits this model: its feature count equals the model's input size
    /// (and its sample shape, when it has one, matches `input_shape` in size), and its number of
    /// classes is at most the model's.
    pub fn check_dataset(&self, data: &crate::data::Dataset) -> Result<(), ModelError> {
        self.check_input(data.num_features())?;
        let sample: usize = data.sample_shape.iter().product();
        if !data.sample_shape.is_empty() && sample != self.input_size {
            return Err(ModelError::InputSize {
                expected: self.input_size,
                found: sample,
                shape: self.spec.input_shape.clone(),
            });
        }
        if data.num_classes > self.num_classes() {
            return Err(ModelError::ClassCount {
                dataset: data.num_classes,
                model: self.num_classes(),
            });
        }
        Ok(())
    }

    /// Seeded initial parameters, PyTorch's defaults for `Linear` and `Conv2d`: every weight and
    /// bias entry of a layer is drawn independently from U(−1/√fan_in, 1/√fan_in), where fan_in
    /// is the layer's inputs (dense) or `C_in · kernel²` (conv). For weights this is PyTorch's
    /// `kaiming_uniform_(a = √5)` (bound = √(6 / ((1 + a²) fan_in)) = 1/√fan_in); for biases its
    /// explicit U(−1/√fan_in, 1/√fan_in). Layers are filled in order, weight then bias, from one
    /// ChaCha12 stream seeded with `seed`.
    pub fn init_params(&self, seed: u64) -> Array1<f32> {
        let mut rng = ChaCha12Rng::seed_from_u64(seed);
        let mut params = Array1::<f32>::zeros(self.num_params);
        for layer in &self.layers {
            let (fan_in, weight, bias) = match layer {
                Layer::Dense {
                    inputs,
                    weight,
                    bias,
                    ..
                } => (*inputs, weight, bias),
                Layer::Conv {
                    window,
                    weight,
                    bias,
                    ..
                } => (window.patch_len(), weight, bias),
                _ => continue,
            };
            let bound = 1.0 / (fan_in as f32).sqrt();
            for r in [weight, bias] {
                for v in params.slice_mut(s![r.clone()]) {
                    *v = rng.random_range(-bound..bound);
                }
            }
        }
        params
    }

    fn check_batch(
        &self,
        params: &ArrayView1<'_, f32>,
        x: &ArrayView2<'_, f32>,
        labels: Option<&[usize]>,
    ) -> Result<(), ModelError> {
        if params.len() != self.num_params {
            return Err(ModelError::ParamCount {
                expected: self.num_params,
                found: params.len(),
            });
        }
        self.check_input(x.ncols())?;
        if let Some(labels) = labels {
            if labels.len() != x.nrows() {
                return Err(ModelError::LabelCount {
                    labels: labels.len(),
                    rows: x.nrows(),
                });
            }
            let num_classes = self.num_classes();
            if let Some((index, &label)) =
                labels.iter().enumerate().find(|(_, l)| **l >= num_classes)
            {
                return Err(ModelError::LabelOutOfRange {
                    index,
                    label,
                    num_classes,
                });
            }
        }
        Ok(())
    }

    /// The logits of a batch.
    ///
    /// # Shapes
    /// `params`: `[P]`; `x`: `[B, input_size]`; returns `[B, output_size]`.
    pub fn forward(
        &self,
        params: ArrayView1<'_, f32>,
        x: ArrayView2<'_, f32>,
    ) -> Result<Array2<f32>, ModelError> {
        self.check_batch(&params, &x, None)?;
        let params = params.as_standard_layout();
        let mut out = Array2::<f32>::zeros((x.nrows(), self.output_size));
        for (start, chunk) in x.axis_chunks_iter(ndarray::Axis(0), EVAL_CHUNK).enumerate() {
            let trace = self.trace(params.view(), chunk, false);
            let logits = trace.acts.last().map(|a| a.view());
            if let Some(logits) = logits {
                out.slice_mut(s![
                    start * EVAL_CHUNK..start * EVAL_CHUNK + chunk.nrows(),
                    ..
                ])
                .assign(&logits);
            }
        }
        Ok(out)
    }

    /// Mean loss and accuracy over a dataset, in chunks of 1024 examples (the data term only:
    /// the L2 penalty is not included). Returns `(mean_loss, accuracy)`; an empty set is an error.
    pub fn evaluate(
        &self,
        params: ArrayView1<'_, f32>,
        x: ArrayView2<'_, f32>,
        labels: &[usize],
    ) -> Result<(f64, f64), ModelError> {
        self.check_batch(&params, &x, Some(labels))?;
        if x.nrows() == 0 {
            return Err(ModelError::EmptyBatch);
        }
        let params = params.as_standard_layout();
        let mut loss_sum = 0.0f64;
        let mut correct = 0usize;
        for (chunk_index, chunk) in x.axis_chunks_iter(ndarray::Axis(0), EVAL_CHUNK).enumerate() {
            let y = &labels[chunk_index * EVAL_CHUNK..chunk_index * EVAL_CHUNK + chunk.nrows()];
            let trace = self.trace(params.view(), chunk, false);
            let Some(logits) = trace.acts.last() else {
                unreachable!("a trace always holds its logits")
            };
            let (losses, _) = loss_and_dlogits(self.spec.loss, logits.view(), y);
            loss_sum += losses.sum();
            correct += predictions(self.spec.loss, logits.view())
                .iter()
                .zip(y)
                .filter(|(p, t)| p == t)
                .count();
        }
        let n = x.nrows() as f64;
        Ok((loss_sum / n, correct as f64 / n))
    }

    /// The non-private gradient: Σ_i ∇ℓ_i over the batch, and Σ_i ℓ_i (data terms only; add
    /// [`Model::add_l2_gradient`] for the penalty). Same cost as one [`Model::per_sample`] plus
    /// one weighted sum.
    pub fn loss_and_gradient(
        &self,
        params: ArrayView1<'_, f32>,
        x: ArrayView2<'_, f32>,
        labels: &[usize],
    ) -> Result<(f64, Array1<f64>), ModelError> {
        let grads = self.per_sample(params, x, labels)?;
        Ok((grads.losses().sum(), grads.sum()))
    }

    /// Per-sample gradients of a batch (and per-example losses), answered lazily through
    /// [`crate::grad::PerSampleGradients`]: one forward and one backward pass over the whole batch
    /// keep each trainable layer's inputs and output gradients (deltas); norms and weighted sums
    /// are formed from them without a `[B, P]` matrix.
    ///
    /// # Shapes
    /// `params`: `[P]`; `x`: `[B, input_size]`; `labels`: `[B]`. `B = 0` is allowed (an empty
    /// Poisson batch): every answer is then empty or zero.
    pub fn per_sample<'a>(
        &self,
        params: ArrayView1<'_, f32>,
        x: ArrayView2<'a, f32>,
        labels: &[usize],
    ) -> Result<BatchGradients<'a>, ModelError> {
        self.check_batch(&params, &x, Some(labels))?;
        let params = params.as_standard_layout();
        let batch = x.nrows();
        let mut trace = self.trace(params.view(), x, true);
        let Some(logits) = trace.acts.last() else {
            unreachable!("a trace always holds its logits")
        };
        let (losses, dlogits) = loss_and_dlogits(self.spec.loss, logits.view(), labels);
        let deltas = self.backward(params.view(), &trace, dlogits);
        let mut trainables = Vec::new();
        for (i, delta) in deltas.into_iter().enumerate() {
            let Some(delta) = delta else { continue };
            match &self.layers[i] {
                Layer::Dense { weight, bias, .. } => {
                    let input = std::mem::replace(
                        &mut trace.acts[i],
                        CowArray::from(Array2::zeros((0, 0))),
                    );
                    trainables.push(Trainable::Dense {
                        input,
                        delta,
                        weight: weight.clone(),
                        bias: bias.clone(),
                    });
                }
                Layer::Conv {
                    window,
                    weight,
                    bias,
                    ..
                } => {
                    let input = std::mem::replace(
                        &mut trace.acts[i],
                        CowArray::from(Array2::zeros((0, 0))),
                    );
                    trainables.push(Trainable::Conv {
                        input,
                        window: *window,
                        delta,
                        weight: weight.clone(),
                        bias: bias.clone(),
                    });
                }
                _ => unreachable!("only dense and conv layers have deltas"),
            }
        }
        Ok(BatchGradients::new(
            batch,
            self.num_params,
            self.groups.clone(),
            trainables,
            losses,
            self.materialize_limit_bytes,
        ))
    }

    /// FLOPs (2 per multiply-add) of one training step on `batch` examples: for every dense and
    /// conv layer the forward product, the weight-gradient product and the input-gradient product
    /// (skipped below the first trainable layer). With `per_sample_norms`, a convolution's
    /// weight-gradient product is done per example (the same count; the kept per-example
    /// gradients then give the weighted sum by a cheap pass) unless they exceed the cache limit,
    /// in which case the norm pass of [`ConvNormMethod::cheaper`] is added. Element-wise work is
    /// not counted. Counts are nominal (direct convolution): a forward product done by
    /// [`super::winograd`] takes 4/9 of its multiplies, so rates from this count are effective
    /// rates.
    pub fn step_flops(&self, batch: usize, per_sample_norms: bool) -> f64 {
        let mut total = 0.0f64;
        let mut first = true;
        let mut cache_budget = super::per_sample::CONV_CACHE_LIMIT_BYTES;
        for layer in &self.layers {
            let (macs, extra) = match layer {
                Layer::Dense { inputs, units, .. } => ((inputs * units) as f64, 0.0),
                Layer::Conv {
                    window,
                    out_channels,
                    ..
                } => {
                    let (l, k, c) = (window.positions(), window.patch_len(), *out_channels);
                    let bytes = (batch * k * c * 4) as u64;
                    let extra = if bytes <= cache_budget {
                        cache_budget -= bytes;
                        0.0
                    } else {
                        match ConvNormMethod::cheaper(l, k, c) {
                            ConvNormMethod::Materialize => (l * k * c) as f64,
                            ConvNormMethod::Ghost => (l * l * (k + c)) as f64,
                        }
                    };
                    ((l * k * c) as f64, extra)
                }
                _ => continue,
            };
            let products = if first { 2.0 } else { 3.0 };
            first = false;
            total += 2.0 * batch as f64 * macs * products;
            if per_sample_norms {
                total += 2.0 * batch as f64 * extra;
            }
        }
        total
    }

    /// The L2 penalty `λ/2 ‖θ‖²` (accumulated in f64).
    pub fn l2_penalty(&self, params: ArrayView1<'_, f32>) -> f64 {
        0.5 * self.spec.l2 * params.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>()
    }

    /// Add the L2 penalty's gradient `λ θ` to `grad`. It is data-independent, so a private
    /// training loop adds it after privatisation (it costs no privacy).
    pub fn add_l2_gradient(&self, params: ArrayView1<'_, f32>, grad: &mut Array1<f64>) {
        if self.spec.l2 == 0.0 {
            return;
        }
        grad.zip_mut_with(&params, |g, &p| *g += self.spec.l2 * p as f64);
    }

    /// Forward pass keeping (`keep`) or dropping the values the backward pass needs.
    pub(crate) fn trace<'a>(
        &self,
        params: ArrayView1<'_, f32>,
        x: ArrayView2<'a, f32>,
        keep: bool,
    ) -> Trace<'a> {
        let n = self.layers.len();
        let batch = x.nrows();
        let mut acts: Vec<CowArray<'a, f32, Ix2>> = Vec::with_capacity(n + 1);
        let mut argmax = vec![None; n];
        acts.push(CowArray::from(x));
        for (i, layer) in self.layers.iter().enumerate() {
            let input = acts[i].view();
            let out = match layer {
                Layer::ToChannelsLast { c, h, w } => kernels::chw_to_hwc(input, *c, *h, *w),
                Layer::Dense {
                    inputs,
                    units,
                    weight,
                    bias,
                } => {
                    let w = weight_matrix(&params, weight, *units, *inputs);
                    let mut out = broadcast_bias(&params, bias, batch);
                    gemm(input, w.t(), 1.0, out.view_mut());
                    out
                }
                Layer::Conv {
                    window,
                    out_channels,
                    weight,
                    bias,
                } => {
                    let w = weight_matrix(&params, weight, *out_channels, window.patch_len());
                    let b = params.slice(s![bias.clone()]);
                    if super::winograd::applies(window) {
                        super::winograd::conv_forward(input, window, w, b)
                    } else {
                        conv_forward(input, window, w, b)
                    }
                }
                Layer::MaxPool { window } => {
                    let (out, arg) = kernels::max_pool(input, window);
                    if keep {
                        argmax[i] = Some(arg);
                    }
                    out
                }
                Layer::AvgPool { window } => kernels::avg_pool(input, window),
                Layer::Flatten { c, h, w } => kernels::hwc_to_chw(input, *c, *h, *w),
                Layer::Act(f) => {
                    // The backward pass of an activation needs its output only; its input is
                    // needed later only when it is another activation's output. Otherwise
                    // activate in place instead of copying.
                    let reuse = i > 0 && !matches!(self.layers[i - 1], Layer::Act(_));
                    let mut out = if reuse {
                        std::mem::replace(&mut acts[i], CowArray::from(Array2::zeros((0, 0))))
                            .into_owned()
                    } else {
                        input.to_owned()
                    };
                    kernels::activate(*f, &mut out);
                    out
                }
            };
            if !keep && i > 0 {
                acts[i] = CowArray::from(Array2::zeros((0, 0)));
            }
            acts.push(CowArray::from(out));
        }
        Trace { acts, argmax }
    }

    /// Backward pass from the logits' gradient; returns each trainable layer's delta (the loss
    /// gradient with respect to its output: `[B, units]` for dense, `[B·L, C_out]` for conv).
    /// Stops below the first trainable layer (its input gradient is never needed).
    fn backward(
        &self,
        params: ArrayView1<'_, f32>,
        trace: &Trace<'_>,
        dlogits: Array2<f32>,
    ) -> Vec<Option<Array2<f32>>> {
        let n = self.layers.len();
        let batch = dlogits.nrows();
        let mut deltas = vec![None; n];
        let first = self
            .layers
            .iter()
            .position(|l| matches!(l, Layer::Dense { .. } | Layer::Conv { .. }))
            .unwrap_or(n);
        let mut d = dlogits;
        for i in (first..n).rev() {
            match &self.layers[i] {
                Layer::Act(f) => kernels::activation_backward(*f, trace.acts[i + 1].view(), &mut d),
                Layer::Dense {
                    inputs,
                    units,
                    weight,
                    ..
                } => {
                    if i > first {
                        let w = weight_matrix(&params, weight, *units, *inputs);
                        let mut dx = Array2::<f32>::zeros((batch, *inputs));
                        gemm(d.view(), w, 0.0, dx.view_mut());
                        deltas[i] = Some(std::mem::replace(&mut d, dx));
                    } else {
                        deltas[i] = Some(std::mem::replace(&mut d, Array2::zeros((0, 0))));
                    }
                }
                Layer::Conv {
                    window,
                    out_channels,
                    weight,
                    ..
                } => {
                    let rows = batch * window.positions();
                    let dm = std::mem::replace(&mut d, Array2::zeros((0, 0)))
                        .into_shape_with_order((rows, *out_channels))
                        .unwrap_or_else(|_| unreachable!("a conv delta is contiguous"));
                    if i > first {
                        let w = weight_matrix(&params, weight, *out_channels, window.patch_len());
                        d = conv_input_gradient(dm.view(), window, w, batch);
                    }
                    deltas[i] = Some(dm);
                }
                Layer::MaxPool { window } => {
                    let Some(arg) = trace.argmax[i].as_ref() else {
                        unreachable!("a kept trace holds max-pool indices")
                    };
                    d = kernels::max_pool_backward(d.view(), arg, window);
                }
                Layer::AvgPool { window } => d = kernels::avg_pool_backward(d.view(), window),
                Layer::Flatten { c, h, w } => d = kernels::chw_to_hwc(d.view(), *c, *h, *w),
                Layer::ToChannelsLast { c, h, w } => d = kernels::hwc_to_chw(d.view(), *c, *h, *w),
            }
        }
        deltas
    }
}

/// A `[rows, cols]` view of a weight group of the flat (standard-layout) parameter vector.
fn weight_matrix<'p>(
    params: &ArrayView1<'p, f32>,
    range: &Range<usize>,
    rows: usize,
    cols: usize,
) -> ArrayView2<'p, f32> {
    params
        .slice_move(s![range.clone()])
        .into_shape_with_order((rows, cols))
        .unwrap_or_else(|_| unreachable!("parameters are in standard layout"))
}

/// `[rows, units]` filled with the bias, row by row (the `β = 1` start of `X Wᵀ + b`).
fn broadcast_bias(params: &ArrayView1<'_, f32>, range: &Range<usize>, rows: usize) -> Array2<f32> {
    let b = params.slice(s![range.clone()]);
    let mut out = Array2::<f32>::zeros((rows, b.len()));
    out.rows_mut().into_iter().for_each(|mut r| r.assign(&b));
    out
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
