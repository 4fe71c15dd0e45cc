//! A built sequential model: parameter layout, seeded initialisation, forward and backward passes.
//!
//! Part of the model room; knows nothing of privacy. [`ModelSpec::build`] checks a spec's shapes
//! layer by layer through the registry ([`super::layer::build`]) and returns a [`Model`], which
//! holds no parameters: parameters are a flat f32 vector passed to every call (values in, values
//! out), laid out layer by layer, each layer's tensors in order (weight then bias), as
//! [`Model::groups`] names them. Each layer's own file says its layout (see [`super::layer`]).
//!
//! This file runs the layers in sequence: the forward pass (keeping what the backward pass
//! needs), the backward pass (stopping below the first trainable layer), and the assembly of the
//! trainable layers' per-sample gradients into one [`BatchGradients`]. Residual blocks
//! ([`super::layer::residual`]) add the one exception to "in sequence": an add also reads the
//! activation its block started from, which the forward pass keeps alive until then, and the
//! backward pass adds the shortcut's adjoint to that activation's gradient. Every trainable layer
//! still sees only its own input and delta, so its per-sample gradients are unchanged.

use std::ops::Range;
use std::sync::Arc;

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, CowArray, Ix2, s};
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;
use rayon::prelude::*;

use super::ModelError;
use super::layer::{
    self, BackwardContext, BuildContext, Layer, MAX_FEATURES, MAX_PARAMS, Saved, Shape,
    reshape::ToChannelsLast,
};
use super::loss::{loss_and_dlogits, predictions};
use super::per_sample::{BatchGradients, Shard, TrainableGradients, even_ranges, shard_ranges};
use super::spec::{LossKind, ModelSpec};
use crate::grad::DEFAULT_MATERIALIZE_LIMIT_BYTES;

/// Rows per chunk in [`Model::forward`] and [`Model::evaluate`], bounding their memory.
const EVAL_CHUNK: usize = 1024;

/// A sequential model built from a [`ModelSpec`].
#[derive(Debug, Clone)]
pub struct Model {
    spec: ModelSpec,
    layers: Vec<Arc<dyn Layer>>,
    /// Per layer: frozen (trained no further: no per-sample gradients, no update).
    frozen: Vec<bool>,
    /// The tensors of the trainable, unfrozen layers.
    groups: Vec<(String, Range<usize>)>,
    num_params: usize,
    input_size: usize,
    output_size: usize,
    materialize_limit_bytes: u64,
    /// A fixed number of data-parallel shards per batch ([`Model::with_shards`]); `None`: the
    /// number [`super::per_sample::shard_ranges`] chooses.
    shards: Option<usize>,
}

/// Two models are equal when built from equal specs with equal limits and shard settings (the
/// layers are a function of the spec).
impl PartialEq for Model {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
            && self.frozen == other.frozen
            && self.materialize_limit_bytes == other.materialize_limit_bytes
            && self.shards == other.shards
    }
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
        let mut layers: Vec<Arc<dyn Layer>> = Vec::with_capacity(self.layers.len() + 1);
        if let Shape::Image { c, h, w } = shape
            && c > 1
        {
            layers.push(Arc::new(ToChannelsLast { c, h, w }));
        }
        let mut ctx = BuildContext {
            index: 0,
            next_param: 0,
            built_layers: layers.len(),
            open_blocks: Vec::new(),
        };
        for (index, spec) in self.layers.iter().enumerate() {
            let bad = |reason: String| ModelError::InvalidLayer {
                index,
                layer: format!("{spec:?}"),
                reason,
            };
            ctx.index = index;
            ctx.built_layers = layers.len();
            let Some(built) = layer::build(spec, shape, &mut ctx).map_err(bad)? else {
                continue;
            };
            shape = built.output_shape();
            if shape.len() > MAX_FEATURES {
                return Err(bad(format!(
                    "its output has {} features per example, over {MAX_FEATURES}",
                    shape.len()
                )));
            }
            if ctx.next_param > MAX_PARAMS {
                return Err(ModelError::TooLarge {
                    what: "parameters".into(),
                    size: ctx.next_param,
                    limit: MAX_PARAMS,
                });
            }
            layers.push(built);
        }
        if let Some(open) = ctx.open_blocks.last() {
            return Err(ModelError::InvalidLayer {
                index: open.spec_index,
                layer: "ResidualSave".into(),
                reason: "no residual_add closes the block it opens".into(),
            });
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
        let groups: Vec<(String, Range<usize>)> = layers
            .iter()
            .flat_map(|l| l.params().iter().map(|t| (t.name.clone(), t.range.clone())))
            .collect();
        if groups.is_empty() {
            return Err(ModelError::NoParameters);
        }
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return Err(ModelError::InvalidL2 { l2: self.l2 });
        }
        Ok(Model {
            spec: self.clone(),
            frozen: vec![false; layers.len()],
            layers,
            groups,
            num_params: ctx.next_param,
            input_size,
            output_size,
            materialize_limit_bytes: DEFAULT_MATERIALIZE_LIMIT_BYTES,
            shards: None,
        })
    }
}

fn checked_len(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// The intermediate values of a forward pass that the backward pass needs.
pub(crate) struct Trace<'a> {
    /// `acts[i]` is the input of layer `i`; `acts[n]` the logits.
    pub acts: Vec<CowArray<'a, f32, Ix2>>,
    /// What each layer's forward pass saved for its backward pass.
    pub saved: Vec<Option<Saved>>,
}

impl Model {
    /// The spec this model was built from.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The built layers, in order (a `ToChannelsLast` first for multi-channel images).
    pub(crate) fn layers(&self) -> &[Arc<dyn Layer>] {
        &self.layers
    }

    /// Number of parameters P.
    pub fn num_params(&self) -> usize {
        self.num_params
    }

    /// The same model with the layers named in `layers` frozen: a name is a layer's index in
    /// the spec (`"3"`, the prefix of its tensors `"3.weight"`, `"3.bias"`). A frozen layer keeps
    /// its parameters: it has no per-sample gradients (they are not computed, and do not count in
    /// the norms that clipping bounds), and [`Model::frozen_ranges`] says which coordinates an
    /// update must leave alone. Errors name an entry that is not a layer with parameters, or a
    /// freeze that leaves nothing to train.
    pub fn with_frozen(mut self, layers: &[String]) -> Result<Self, ModelError> {
        let names = |l: &Arc<dyn Layer>| -> Option<String> {
            l.params()
                .first()
                .and_then(|t| t.name.split('.').next().map(str::to_string))
        };
        for entry in layers {
            let Some(i) = self
                .layers
                .iter()
                .position(|l| names(l).as_deref() == Some(entry.as_str()))
            else {
                let known: Vec<String> = self.layers.iter().filter_map(names).collect();
                return Err(ModelError::Freeze {
                    entry: entry.clone(),
                    reason: format!(
                        "no layer with parameters has that index (they are {})",
                        known.join(", ")
                    ),
                });
            };
            self.frozen[i] = true;
        }
        self.groups = self
            .layers
            .iter()
            .zip(&self.frozen)
            .filter(|(_, f)| !**f)
            .flat_map(|(l, _)| l.params().iter().map(|t| (t.name.clone(), t.range.clone())))
            .collect();
        if self.groups.is_empty() {
            return Err(ModelError::Freeze {
                entry: layers.join(", "),
                reason: "every layer with parameters is frozen: nothing is left to train".into(),
            });
        }
        Ok(self)
    }

    /// The parameter ranges of frozen layers (empty without `with_frozen`).
    pub fn frozen_ranges(&self) -> Vec<Range<usize>> {
        self.layers
            .iter()
            .zip(&self.frozen)
            .filter(|(_, f)| **f)
            .flat_map(|(l, _)| l.params().iter().map(|t| t.range.clone()))
            .collect()
    }

    /// Zero the coordinates of frozen layers in an update direction `g` `[P]` (what the
    /// private step released for them, noise included, is discarded: post-processing).
    pub fn mask_frozen(&self, g: &mut Array1<f64>) {
        for r in self.frozen_ranges() {
            g.slice_mut(s![r]).fill(0.0);
        }
    }

    /// Every parameter tensor `(name, range)`, frozen ones included, in layer order.
    pub fn tensors(&self) -> Vec<(String, Range<usize>)> {
        self.layers
            .iter()
            .flat_map(|l| l.params().iter().map(|t| (t.name.clone(), t.range.clone())))
            .collect()
    }

    /// Parameter groups `(name, range)` of the layers being trained (all but frozen ones), in
    /// order: `"{i}.weight"`, `"{i}.bias"` for the `i`-th
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
        std::iter::once(self.input_size)
            .chain(self.layers.iter().map(|l| l.output_shape().len()))
            .collect()
    }

    /// Per example, the floats of per-example gradients the layers may keep between the norm
    /// pass and the weighted sum (Σ L·K of every convolution; see
    /// [`super::per_sample::CONV_CACHE_LIMIT_BYTES`]).
    pub fn conv_patch_lens(&self) -> usize {
        self.layers.iter().map(|l| l.kept_gradient_len()).sum()
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

    /// Cut every batch into `shards` data-parallel shards (at most one per example) instead of
    /// the number [`super::per_sample::shard_ranges`] chooses: for tests of the sharded path on
    /// small batches and for measurements. Sums then add `shards` partial sums, so their bits
    /// differ from the default's (the same on any thread count).
    pub fn with_shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards.max(1));
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
    /// explicit U(−1/√fan_in, 1/√fan_in). Layers are filled in order, each tensor in order, from
    /// one ChaCha12 stream seeded with `seed` (each layer's file says its rule).
    pub fn init_params(&self, seed: u64) -> Array1<f32> {
        let mut rng = ChaCha12Rng::seed_from_u64(seed);
        let mut params = Array1::<f32>::zeros(self.num_params);
        for layer in &self.layers {
            layer.init_params(&mut rng, &mut params);
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
        self.per_sample_views(params, x, labels, 1)
    }

    /// [`Model::per_sample`] of a batch whose rows are `views` consecutive views of each example
    /// (augmentation multiplicity, De et al. 2022, arXiv:2204.13650, Sec. 3.1): example i's
    /// gradient is the mean of rows i·K .. i·K + K, and its loss the mean of theirs.
    ///
    /// The batch is cut into data-parallel shards of whole examples
    /// ([`super::per_sample::shard_ranges`], a function of the batch size and the model, never of
    /// the thread count); each shard runs its own forward and backward pass on the pool, and
    /// sums over the batch add the shards' partial sums in shard order.
    ///
    /// # Panics
    /// When `views` is 0 or the rows are not a multiple of it (the caller built the batch).
    pub fn per_sample_views<'a>(
        &self,
        params: ArrayView1<'_, f32>,
        x: ArrayView2<'a, f32>,
        labels: &[usize],
        views: usize,
    ) -> Result<BatchGradients<'a>, ModelError> {
        self.check_batch(&params, &x, Some(labels))?;
        assert!(
            views >= 1 && x.nrows().is_multiple_of(views),
            "{} rows are not whole groups of {views} views",
            x.nrows()
        );
        let params = params.as_standard_layout();
        let batch = x.nrows() / views;
        let ranges = match self.shards {
            Some(shards) => even_ranges(batch, shards),
            None => shard_ranges(
                batch,
                views,
                self.num_params,
                self.step_flops(x.nrows(), true),
            ),
        };
        let parts: Vec<(Shard<'a>, Array1<f64>)> = ranges
            .into_par_iter()
            .map(|examples| {
                let rows = examples.start * views..examples.end * views;
                let (trainables, losses) = self.shard_gradients(
                    params.view(),
                    x.slice_move(s![rows.clone(), ..]),
                    &labels[rows],
                );
                let losses = if views == 1 {
                    losses
                } else {
                    losses
                        .exact_chunks(views)
                        .into_iter()
                        .map(|c| c.iter().sum::<f64>() / views as f64)
                        .collect()
                };
                (Shard::new(examples, trainables), losses)
            })
            .collect();
        let mut losses = Vec::with_capacity(batch);
        let mut shards = Vec::with_capacity(parts.len());
        for (shard, shard_losses) in parts {
            losses.extend(shard_losses);
            shards.push(shard);
        }
        Ok(BatchGradients::new(
            (batch, views),
            self.num_params,
            self.groups.clone(),
            shards,
            Array1::from(losses),
            self.materialize_limit_bytes,
        ))
    }

    /// One shard's forward and backward pass: its trainable layers' per-sample gradients and its
    /// rows' losses.
    fn shard_gradients<'a>(
        &self,
        params: ArrayView1<'_, f32>,
        x: ArrayView2<'a, f32>,
        labels: &[usize],
    ) -> (Vec<TrainableGradients<'a>>, Array1<f64>) {
        let mut trace = self.trace(params, x, true);
        let Some(logits) = trace.acts.last() else {
            unreachable!("a trace always holds its logits")
        };
        let (losses, dlogits) = loss_and_dlogits(self.spec.loss, logits.view(), labels);
        let deltas = self.backward(params, &trace, dlogits);
        let mut trainables = Vec::new();
        let mut next_group = 0;
        for (i, delta) in deltas.into_iter().enumerate() {
            let Some(delta) = delta else { continue };
            let layer = &self.layers[i];
            let input = std::mem::replace(&mut trace.acts[i], CowArray::from(layer::empty()));
            let Some(gradients) = layer.gradients(params, input, delta) else {
                unreachable!("only trainable layers have deltas")
            };
            let groups = next_group..next_group + layer.params().len();
            next_group = groups.end;
            trainables.push(TrainableGradients { gradients, groups });
        }
        (trainables, losses)
    }

    /// FLOPs (2 per multiply-add) of one training step on `batch` examples: for every trainable
    /// layer the forward product, the weight-gradient product and the input-gradient product
    /// (skipped below the first trainable layer). With `per_sample_norms`, a convolution's
    /// weight-gradient product is done per example (the same count; the kept per-example
    /// gradients then give the weighted sum by a cheap pass) unless they exceed the cache limit,
    /// in which case the norm pass of [`super::ConvNormMethod::cheaper`] is added. Element-wise
    /// work is not counted. Counts are nominal (direct convolution): a forward product done by
    /// [`super::winograd`] takes 4/9 of its multiplies, so rates from this count are effective
    /// rates.
    pub fn step_flops(&self, batch: usize, per_sample_norms: bool) -> f64 {
        let mut total = 0.0f64;
        let mut first = true;
        let mut cache_budget = super::per_sample::CONV_CACHE_LIMIT_BYTES;
        for (layer, &frozen) in self.layers.iter().zip(&self.frozen) {
            if layer.params().is_empty() {
                continue;
            }
            let macs = layer.forward_macs();
            if frozen {
                // Forward, and the input gradient above the first layer being trained.
                total += 2.0 * batch as f64 * macs * if first { 1.0 } else { 2.0 };
                continue;
            }
            let extra = layer.norm_macs(batch, &mut cache_budget);
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
    ///
    /// The skip source of a residual block (`acts[a]`, see [`super::layer::residual`]) stays
    /// alive until the last add that reads it: no layer runs in place on it, and a pass that
    /// keeps nothing drops it only after that add.
    pub(crate) fn trace<'a>(
        &self,
        params: ArrayView1<'_, f32>,
        x: ArrayView2<'a, f32>,
        keep: bool,
    ) -> Trace<'a> {
        let n = self.layers.len();
        let mut acts: Vec<CowArray<'a, f32, Ix2>> = Vec::with_capacity(n + 1);
        let mut saved: Vec<Option<Saved>> = (0..n).map(|_| None).collect();
        // Per activation: how many residual adds still have to read it.
        let mut skip_reads = vec![0usize; n + 1];
        for layer in &self.layers {
            if let Some(shortcut) = layer.shortcut() {
                skip_reads[shortcut.source] += 1;
            }
        }
        acts.push(CowArray::from(x));
        for (i, layer) in self.layers.iter().enumerate() {
            // An element-wise layer whose backward pass needs only its output runs in place on
            // its input when nothing else needs that input (the previous layer's backward pass
            // does not read its output, no residual add still reads it); the model's input is
            // borrowed, never overwritten.
            let in_place = i > 0
                && skip_reads[i] == 0
                && !layer.keeps_input()
                && !self.layers[i - 1].keeps_output();
            let mut out = None;
            if in_place {
                let mut owned =
                    std::mem::replace(&mut acts[i], CowArray::from(layer::empty())).into_owned();
                if layer.forward_in_place(&mut owned) {
                    out = Some(owned);
                } else {
                    acts[i] = CowArray::from(owned);
                }
            }
            let mut out = match out {
                Some(out) => out,
                None => {
                    let f = layer.forward(params, acts[i].view(), keep);
                    if keep {
                        saved[i] = f.saved;
                    }
                    f.output
                }
            };
            if let Some(shortcut) = layer.shortcut() {
                let a = shortcut.source;
                shortcut.add_to(&mut out, acts[a].view());
                skip_reads[a] -= 1;
                if !keep && a > 0 && a < i && skip_reads[a] == 0 {
                    acts[a] = CowArray::from(layer::empty());
                }
            }
            if !keep && i > 0 && skip_reads[i] == 0 {
                acts[i] = CowArray::from(layer::empty());
            }
            acts.push(CowArray::from(out));
        }
        Trace { acts, saved }
    }

    /// Backward pass from the logits' gradient; returns each trainable layer's delta (the loss
    /// gradient with respect to its output, in the layout its per-sample gradients expect: `[B,
    /// units]` for dense, `[B·L, C_out]` for conv). Stops below the first trainable layer (its
    /// input gradient is never needed). A residual add's shortcut contributes Sᵀ(∂L/∂y) to the
    /// gradient of its block's source (He et al. 2016, eq. 1; [`super::layer::residual`]).
    fn backward(
        &self,
        params: ArrayView1<'_, f32>,
        trace: &Trace<'_>,
        dlogits: Array2<f32>,
    ) -> Vec<Option<Array2<f32>>> {
        let n = self.layers.len();
        let batch = dlogits.nrows();
        let mut deltas = vec![None; n];
        let first = (0..n)
            .position(|i| !self.layers[i].params().is_empty() && !self.frozen[i])
            .unwrap_or(n);
        let mut d = dlogits;
        // Sᵀ(∂L/∂y) of the residual adds passed, with the activation it belongs to; blocks nest,
        // so the innermost (largest source) is on top.
        let mut skips: Vec<(usize, Array2<f32>)> = Vec::new();
        for i in (first..n).rev() {
            if let Some(shortcut) = self.layers[i].shortcut()
                && shortcut.source > first
            {
                skips.push((shortcut.source, shortcut.adjoint(d.view())));
            }
            let ctx = BackwardContext {
                params,
                input: trace.acts[i].view(),
                output: trace.acts[i + 1].view(),
                saved: trace.saved[i].as_deref(),
                batch,
            };
            let step = self.layers[i].backward(ctx, d, i > first);
            deltas[i] = if self.frozen[i] { None } else { step.delta };
            d = step.input_gradient.unwrap_or_else(layer::empty);
            // `d` is ∂L/∂acts[i] through the layers; a block starting here adds its shortcut's.
            while let Some((_, g)) = skips.pop_if(|(a, _)| *a == i) {
                d += &g;
            }
        }
        deltas
    }
}
