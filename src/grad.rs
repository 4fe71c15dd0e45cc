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

use ndarray::{Array1, Array2};

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

    /// The materialised per-sample gradient matrix. Shape `[B, P]`.
    fn materialize(&self) -> Array2<f32>;
}
