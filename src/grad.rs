//! Per-sample gradients: three questions, not one matrix.
//!
//! A clipping policy asks at most three things of a batch's per-sample gradients g_1..g_B
//! (see `ARCHITECTURE.md`):
//!
//! 1. [`PerSampleGradients::norms`]: ‖g_i‖₂, and per parameter group for per-layer clipping;
//! 2. [`PerSampleGradients::weighted_sum`]: Σ_i w_i g_i (flat clipping is w_i = min(1, C/‖g_i‖));
//! 3. [`PerSampleGradients::materialize`]: the [B, P] matrix, only for policies that transform
//!    coordinates (AdaCliP).
//!
//! `model` implements this trait; `privacy` consumes it. Neither imports the other.
//!
//! Materialising costs `B · P · 4` bytes, so it is refused above a memory limit
//! ([`DEFAULT_MATERIALIZE_LIMIT_BYTES`] unless the model is told otherwise) with a
//! [`GradError::MemoryLimit`] that suggests the largest batch that fits.

use ndarray::{Array1, Array2};

/// Default limit on the bytes a materialised `[B, P]` per-sample gradient matrix may take: 4 GiB.
pub const DEFAULT_MATERIALIZE_LIMIT_BYTES: u64 = 4 << 30;

/// Why per-sample gradients could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GradError {
    /// The `[B, P]` matrix would exceed the memory limit.
    #[error(
        "materialising per-sample gradients needs {bytes} bytes ({batch_size} examples x \
         {num_params} parameters x 4 bytes), over the limit of {limit_bytes} bytes; use a batch \
         of at most {max_batch_size} examples, or a clipping policy that does not materialise"
    )]
    MemoryLimit {
        batch_size: usize,
        num_params: usize,
        bytes: u64,
        limit_bytes: u64,
        max_batch_size: u64,
    },
}

/// Check that a `[batch_size, num_params]` f32 matrix fits in `limit_bytes`; a config check can
/// call this before training starts.
pub fn check_materialize_budget(
    batch_size: usize,
    num_params: usize,
    limit_bytes: u64,
) -> Result<(), GradError> {
    let row = (num_params as u64).saturating_mul(4);
    let bytes = (batch_size as u64).saturating_mul(row);
    if bytes > limit_bytes {
        return Err(GradError::MemoryLimit {
            batch_size,
            num_params,
            bytes,
            limit_bytes,
            max_batch_size: limit_bytes.checked_div(row).unwrap_or(0),
        });
    }
    Ok(())
}

/// The per-sample gradients of one batch, answered lazily.
///
/// Parameters are a flat vector of length [`num_params`](Self::num_params), divided into
/// contiguous groups (one per parameter tensor, e.g. a layer's weights, then its bias) whose
/// ranges [`groups`](Self::groups) gives.
pub trait PerSampleGradients {
    /// Number of examples B in the batch.
    fn batch_size(&self) -> usize;

    /// Number of parameters P.
    fn num_params(&self) -> usize;

    /// Parameter groups as `(name, start..end)` ranges into the flat parameter vector, in order.
    fn groups(&self) -> Vec<(String, std::ops::Range<usize>)>;

    /// Per-example L2 norms of the whole gradient. Shape `[B]`.
    fn norms(&self) -> Array1<f64>;

    /// Per-example L2 norms per parameter group. Shape `[B, groups]`.
    fn group_norms(&self) -> Array2<f64>;

    /// Σ_i w_i g_i over the batch. `weights` has shape `[B]`; the result `[P]`.
    fn weighted_sum(&self, weights: &Array1<f64>) -> Array1<f64>;

    /// Σ_i g_i with per-example, per-group weights `weights[i, k]` on group k. Shape `[P]`.
    fn group_weighted_sum(&self, weights: &Array2<f64>) -> Array1<f64>;

    /// The materialised per-sample gradient matrix. Shape `[B, P]`. Refused with
    /// [`GradError::MemoryLimit`] when it would exceed the implementation's memory limit.
    fn materialize(&self) -> Result<Array2<f32>, GradError>;
}
