//! The layer trait and the registry of layers (room: `model`).
//!
//! Every layer of a sequential [`crate::model::Model`] answers the same questions through
//! [`Layer`]: its output shape, its parameter tensors (names, shapes, where they sit in the flat
//! parameter vector, their seeded initialisation), its forward pass, its backward pass (the
//! gradient with respect to its input, and for trainable layers the delta kept for per-sample
//! gradients), the per-sample gradient object built from what the passes kept
//! ([`LayerGradients`]: per-example squared norms, weighted gradient sums, one example's row), and
//! its FLOPs. One file per layer:
//!
//! - [`dense`]: `y = W x + b`;
//! - [`conv2d`]: 2-D convolution (im2col, Winograd forward where it applies, ghost norms),
//!   optionally weight-standardised ([`weight_std`]: Ŵ, its backward map and exact norms);
//! - [`pool`]: max and average pooling;
//! - [`group_norm`]: group normalisation (per example, so per-sample gradients stay valid);
//! - [`activation`]: element-wise activations;
//! - [`reshape`]: the channel-major ↔ channels-last permutations (`ToChannelsLast`, `Flatten`);
//! - [`residual`]: skip connections — `ResidualSave` opens a block (it builds no layer, only marks
//!   the activation the block starts from), `ResidualAdd` closes it with [`residual::Add`], whose
//!   parameter-free shortcut the network adds (the design and its maths are in that file).
//!
//! Adding a layer is one new file here plus one arm in [`build`] (the registry), beside its
//! [`LayerSpec`] variant. The per-sample gradient tests (`tests/per_sample.rs`) run one harness
//! (batch-of-1 loop, finite differences, thread counts) over every [`LayerSpec`] variant and fail
//! to compile until a new variant has a case.
//!
//! No layer mixes examples, so example i's gradient is a function of its own rows only, and every
//! kernel gives the same bits whatever the thread count.

pub mod activation;
pub mod conv2d;
pub mod dense;
pub mod group_norm;
pub mod pool;
pub mod reshape;
pub mod residual;
pub mod weight_std;

use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use ndarray::{
    Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, CowArray, Ix2,
};
use rand_chacha::ChaCha12Rng;

use super::kernels::Window;
use super::per_sample::ConvNormMethod;
use super::spec::LayerSpec;

/// Largest parameter count a spec may ask for (2^30 f32 = 4 GiB), so a typo cannot allocate
/// without bound.
pub const MAX_PARAMS: usize = 1 << 30;
/// Largest activation size per example a spec may ask for.
pub const MAX_FEATURES: usize = 1 << 26;

/// The shape of one example's activation between layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A vector of `d` features.
    Flat(usize),
    /// A channels-last image inside the model (`[C, H, W]` channel-major at the model's input).
    Image { c: usize, h: usize, w: usize },
}

impl Shape {
    /// Floats per example.
    pub fn len(self) -> usize {
        match self {
            Shape::Flat(d) => d,
            Shape::Image { c, h, w } => c * h * w,
        }
    }

    /// Whether the shape holds no float (never, for a built model).
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// One parameter tensor of a layer: its name (`"{spec index}.weight"`, PyTorch's `Sequential`
/// naming), its shape in dpx's storage layout (row-major) and its range in the flat vector. Each
/// tensor is one parameter group (per-layer clipping, group norms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub range: Range<usize>,
}

/// What a layer's forward pass leaves for its backward pass besides its input and output (the
/// winning indices of max pooling, say). Only the layer that made it reads it back.
pub type Saved = Box<dyn Any + Send + Sync>;

/// A layer's forward result.
pub struct Forward {
    pub output: Array2<f32>,
    pub saved: Option<Saved>,
}

impl Forward {
    /// An output with nothing saved.
    pub fn plain(output: Array2<f32>) -> Self {
        Forward {
            output,
            saved: None,
        }
    }
}

/// What the backward pass of layer i reads: the flat parameters, the layer's input and output
/// (each empty, `[0, 0]`, when the layer did not ask to keep it), and what its forward saved.
pub struct BackwardContext<'t> {
    pub params: ArrayView1<'t, f32>,
    pub input: ArrayView2<'t, f32>,
    pub output: ArrayView2<'t, f32>,
    pub saved: Option<&'t (dyn Any + Send + Sync)>,
    pub batch: usize,
}

/// A layer's backward result.
pub struct Backward {
    /// ∂L/∂input, `None` when it was not asked for (below the first trainable layer).
    pub input_gradient: Option<Array2<f32>>,
    /// For a trainable layer: ∂L/∂output in the layout its [`LayerGradients`] expects.
    pub delta: Option<Array2<f32>>,
}

/// How the norm pass of one batch is run: the memory left for keeping per-example gradients
/// between the norm pass and the weighted sum, and a forced convolution norm method (tests).
pub struct NormContext {
    pub cache_budget: u64,
    pub conv_method: Option<ConvNormMethod>,
}

/// The per-sample gradients of one trainable layer over one batch, formed lazily from the input
/// and delta its passes kept (see [`super::per_sample`] for the numerics).
pub trait LayerGradients: Send + Sync {
    /// Squared per-example norms `[B, groups of this layer]`, written into `out`; returns what
    /// the weighted sum that follows may reuse.
    fn squared_norms(&self, ctx: &mut NormContext, out: ArrayViewMut2<'_, f64>) -> Option<Saved>;

    /// `out[group ranges] ← Σ_i weights[i, k] g_i` restricted to group k of this layer
    /// (`weights` `[B, groups of this layer]`; `None` means all ones). `cache` is what
    /// [`LayerGradients::squared_norms`] returned, when it ran. `out` is the whole `[P]` sum,
    /// uninitialised: write every element of this layer's ranges, read none before writing it.
    fn weighted_sum(
        &self,
        weights: Option<ArrayView2<'_, f64>>,
        cache: Option<&(dyn Any + Send + Sync)>,
        out: &mut [std::mem::MaybeUninit<f64>],
    );

    /// Example `i`'s gradient written into its ranges of `row` (a `[P]` row).
    fn example_gradient(&self, i: usize, row: ArrayViewMut1<'_, f32>);
}

/// One built layer. See the module doc.
pub trait Layer: fmt::Debug + Send + Sync {
    /// The shape of one example's output.
    fn output_shape(&self) -> Shape;

    /// The layer's parameter tensors, in order (empty for parameter-free layers).
    fn params(&self) -> &[ParamTensor] {
        &[]
    }

    /// Fill the layer's parameters from `rng` (called in layer order on one stream).
    fn init_params(&self, _rng: &mut ChaCha12Rng, _params: &mut Array1<f32>) {}

    /// The shape of tensor `t` in a saved model (PyTorch's layout); by default its storage shape.
    fn saved_shape(&self, t: usize) -> Vec<usize> {
        self.params()[t].shape.clone()
    }

    /// Tensor `t`'s values (`stored`, in storage order) in the saved layout.
    fn saved_layout(&self, _t: usize, stored: &[f32]) -> Vec<f32> {
        stored.to_vec()
    }

    /// The inverse of [`Layer::saved_layout`]: values in the saved layout back in storage order.
    fn stored_layout(&self, _t: usize, saved: &[f32]) -> Vec<f32> {
        saved.to_vec()
    }

    /// Whether the backward pass (or the per-sample gradients) read the layer's input.
    fn keeps_input(&self) -> bool {
        false
    }

    /// Whether the backward pass reads the layer's output.
    fn keeps_output(&self) -> bool {
        false
    }

    /// The forward pass of a batch `[B, input len]` → `[B, output len]`; `keep` says whether the
    /// backward pass will run (so [`Forward::saved`] is needed).
    fn forward(
        &self,
        params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        keep: bool,
    ) -> Forward;

    /// The shortcut a residual add adds to its output from an earlier activation (the network
    /// reads that activation and adds `S(a)`; see [`residual`]); `None` for every other layer.
    fn shortcut(&self) -> Option<&residual::Shortcut> {
        None
    }

    /// Run the forward pass in place when the layer is element-wise; `false` when it cannot.
    fn forward_in_place(&self, _x: &mut Array2<f32>) -> bool {
        false
    }

    /// The backward pass from `d` = ∂L/∂output; `input_gradient` says whether ∂L/∂input is
    /// needed.
    fn backward(&self, ctx: BackwardContext<'_>, d: Array2<f32>, input_gradient: bool) -> Backward;

    /// The per-sample gradient object of a trainable layer, from the flat parameters (for
    /// layers whose gradients depend on them, as a weight-standardised convolution's), its input
    /// and its delta.
    fn gradients<'a>(
        &self,
        _params: ArrayView1<'_, f32>,
        _input: CowArray<'a, f32, Ix2>,
        _delta: Array2<f32>,
    ) -> Option<Box<dyn LayerGradients + 'a>> {
        None
    }

    /// Multiply-adds of the forward product per example (0 for layers without a product).
    fn forward_macs(&self) -> f64 {
        0.0
    }

    /// Extra multiply-adds per example of the per-sample norm pass at this batch size, drawing
    /// from the shared memory budget for kept per-example gradients.
    fn norm_macs(&self, _batch: usize, _cache_budget: &mut u64) -> f64 {
        0.0
    }

    /// Floats per example of per-example gradients this layer may keep between the norm pass and
    /// the weighted sum (for memory estimates).
    fn kept_gradient_len(&self) -> usize {
        0
    }
}

/// Where the next layer's parameters start and which spec layer is being built.
pub struct BuildContext {
    /// The index of the layer in the spec (for parameter names).
    pub index: usize,
    /// The next free position of the flat parameter vector.
    pub next_param: usize,
    /// How many layers the model has built so far: the index in its trace of the activation
    /// the next layer reads (where a `ResidualSave` opens a block).
    pub built_layers: usize,
    /// The residual blocks opened and not yet closed, innermost last.
    pub open_blocks: Vec<residual::OpenBlock>,
}

impl BuildContext {
    /// Reserve a tensor of `shape` named `"{index}.{suffix}"`; errors when it is too large.
    pub fn tensor(&mut self, suffix: &str, shape: Vec<usize>) -> Result<ParamTensor, String> {
        let len = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .filter(|&n| n <= MAX_PARAMS)
            .ok_or_else(|| format!("its {suffix} of shape {shape:?} exceeds {MAX_PARAMS}"))?;
        let range = self.next_param..self.next_param + len;
        self.next_param = range.end;
        Ok(ParamTensor {
            name: format!("{}.{suffix}", self.index),
            shape,
            range,
        })
    }
}

/// The registry: build the layer a spec entry asks for on an input of shape `input`. `Ok(None)`
/// when the entry builds no layer (flatten on a vector; `ResidualSave`, which only opens a block
/// in `ctx`). Errors say what is wrong with the entry.
pub fn build(
    spec: &LayerSpec,
    input: Shape,
    ctx: &mut BuildContext,
) -> Result<Option<Arc<dyn Layer>>, String> {
    let layer: Arc<dyn Layer> = match *spec {
        LayerSpec::Dense { units } => Arc::new(dense::Dense::build(units, input, ctx)?),
        LayerSpec::Conv2d {
            channels,
            kernel,
            stride,
            padding,
            weight_standardization,
        } => Arc::new(conv2d::Conv2d::build(
            channels,
            kernel,
            stride,
            padding,
            weight_standardization,
            input,
            ctx,
        )?),
        LayerSpec::MaxPool { kernel, stride } => {
            Arc::new(pool::MaxPool::build(kernel, stride, input)?)
        }
        LayerSpec::AvgPool { kernel, stride } => {
            Arc::new(pool::AvgPool::build(kernel, stride, input)?)
        }
        LayerSpec::Flatten => match input {
            Shape::Image { c, h, w } => Arc::new(reshape::Flatten { c, h, w }),
            Shape::Flat(_) => return Ok(None),
        },
        LayerSpec::GroupNorm { groups } => {
            Arc::new(group_norm::GroupNorm::build(groups, input, ctx)?)
        }
        LayerSpec::Activation { function } => Arc::new(activation::Act {
            function,
            shape: input,
        }),
        LayerSpec::ResidualSave => {
            ctx.open_blocks.push(residual::OpenBlock {
                spec_index: ctx.index,
                source: ctx.built_layers,
                shape: input,
            });
            return Ok(None);
        }
        LayerSpec::ResidualAdd => Arc::new(residual::Add::build(ctx.open_blocks.pop(), input)?),
    };
    Ok(Some(layer))
}

/// The image geometry a layer with a square window needs, or why it does not fit `input`.
pub fn image_input(input: Shape) -> Result<(usize, usize, usize), String> {
    match input {
        Shape::Image { c, h, w } => Ok((c, h, w)),
        Shape::Flat(_) => Err("needs an image input [C, H, W], but its input is a vector".into()),
    }
}

/// A `[rows, cols]` view of a tensor of the flat (standard-layout) parameter vector.
pub fn tensor_matrix<'p>(
    params: &ArrayView1<'p, f32>,
    range: &Range<usize>,
    rows: usize,
    cols: usize,
) -> ArrayView2<'p, f32> {
    params
        .slice_move(ndarray::s![range.clone()])
        .into_shape_with_order((rows, cols))
        .unwrap_or_else(|_| unreachable!("parameters are in standard layout"))
}

/// An empty activation (what a dropped input or output is replaced by).
pub fn empty() -> Array2<f32> {
    Array2::zeros((0, 0))
}

/// Fill every entry of `tensors` from U(−1/√fan_in, 1/√fan_in), in order (PyTorch's default
/// initialisation of `Linear` and `Conv2d`: `kaiming_uniform_(a = √5)` for weights, whose bound is
/// √(6 / ((1 + a²) fan_in)) = 1/√fan_in, and the explicit U(−1/√fan_in, 1/√fan_in) for biases).
pub fn init_uniform_fan_in(
    rng: &mut ChaCha12Rng,
    params: &mut Array1<f32>,
    fan_in: usize,
    tensors: &[ParamTensor],
) {
    use rand::Rng;
    let bound = 1.0 / (fan_in as f32).sqrt();
    for t in tensors {
        for v in params.slice_mut(ndarray::s![t.range.clone()]) {
            *v = rng.random_range(-bound..bound);
        }
    }
}

/// The geometry of a square window of side `kernel`, moved by `stride`, on a `c × h × w` image
/// zero-padded by `padding`, or why it does not fit.
pub fn window(
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
