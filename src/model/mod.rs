//! The model room: layers, losses, forward passes and per-sample backward passes.
//!
//! Knows nothing of differential privacy: it answers the questions of [`crate::grad`] and never
//! sees a clip norm or a noise multiplier.
//!
//! - [`spec`]: [`ModelSpec`] / [`LayerSpec`], what a user asks for, and the named architectures.
//! - [`layer`]: the [`layer::Layer`] trait and one file per layer (dense, conv2d, pooling,
//!   activations, reshapes, residual adds), each with its forward, backward and per-sample
//!   gradient maths; the registry that builds a layer from its spec.
//! - [`network`]: [`Model`], built from a spec: parameter layout, seeded initialisation, the
//!   layers run in sequence (with the skip connections of residual blocks) for forward,
//!   evaluation, non-private and per-sample gradients.
//! - [`per_sample`]: [`BatchGradients`], per-sample gradients without a `[B, P]` matrix.
//! - [`sums`]: the reductions of per-sample gradients (sums of squares, weighted sums).
//! - [`artifact`]: a model's parameters saved as safetensors (PyTorch's names and layouts)
//!   and loaded back, shape-checked.
//! - [`loss`], [`kernels`], [`linalg`], [`winograd`]: the numerical pieces.
//!
//! Threads: every kernel runs on the current rayon pool (see [`with_threads`]); work is split by
//! example or by output block only, so results are bit-identical for any thread count.

pub mod artifact;
pub mod binary_logistic;
pub mod kernels;
pub mod layer;
pub mod linalg;
pub mod loss;
pub mod network;
pub mod per_sample;
pub mod spec;
pub mod sums;
pub mod winograd;

pub use network::Model;
pub use per_sample::{BatchGradients, ConvNormMethod};
pub use spec::{Activation, LayerSpec, LossKind, ModelSpec, NAMED_ARCHITECTURES};

/// Errors from building or running a model. Messages name the layer or quantity at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error(
        "model input_shape {shape:?} is invalid: expected [d] or [C, H, W] with positive sizes"
    )]
    InvalidInputShape { shape: Vec<usize> },
    #[error("model layer {index} ({layer}): {reason}")]
    InvalidLayer {
        index: usize,
        layer: String,
        reason: String,
    },
    #[error("model {what} size {size} exceeds the limit {limit}")]
    TooLarge {
        what: String,
        size: usize,
        limit: usize,
    },
    #[error("model loss {loss:?} does not fit its {outputs} outputs: {reason}")]
    LossMismatch {
        loss: LossKind,
        outputs: usize,
        reason: String,
    },
    #[error("model.freeze entry \"{entry}\": {reason}")]
    Freeze { entry: String, reason: String },
    #[error("model has no trainable layer (add a dense or conv2d layer)")]
    NoParameters,
    #[error("model l2 must be finite and non-negative, found {l2}")]
    InvalidL2 { l2: f64 },
    #[error(
        "the model expects {expected} input features (input_shape {shape:?}), but the data has {found}"
    )]
    InputSize {
        expected: usize,
        found: usize,
        shape: Vec<usize>,
    },
    #[error("the dataset has {dataset} classes, but the model has {model} outputs for classes")]
    ClassCount { dataset: usize, model: usize },
    #[error("parameter vector has {found} entries, but the model has {expected}")]
    ParamCount { expected: usize, found: usize },
    #[error("{labels} labels for {rows} examples")]
    LabelCount { labels: usize, rows: usize },
    #[error(
        "label {label} of example {index} is out of range for a model with {num_classes} classes"
    )]
    LabelOutOfRange {
        index: usize,
        label: usize,
        num_classes: usize,
    },
    #[error("cannot evaluate on an empty set of examples")]
    EmptyBatch,
    #[error("cannot start a pool of {threads} threads: {reason}")]
    ThreadPool { threads: usize, reason: String },
}

/// Run `f` on a rayon pool of `threads` threads (0 = one per available core). Results do not
/// depend on `threads`.
pub fn with_threads<R: Send>(
    threads: usize,
    f: impl FnOnce() -> R + Send,
) -> Result<R, ModelError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| ModelError::ThreadPool {
            threads,
            reason: e.to_string(),
        })?;
    Ok(pool.install(f))
}
