//! Clipping policies: bound each example's contribution, sum, and add noise through
//! [`crate::privacy::mechanism`].
//!
//! Part of the privacy room. A policy sees per-sample gradients only through
//! [`crate::grad::PerSampleGradients`] (never the model) and returns a [`Release`]: the noisy sum
//! and the [`DpEvent`]s it spent. The caller divides the sum by the expected batch size and wraps
//! the events in its sampling event (e.g. `PoissonSampled(q, Gaussian(σ))`).
//!
//! - [`flat`]: flat (all-layer) clipping of Abadi et al. 2016.

use ndarray::Array1;

use super::event::DpEvent;
use super::mechanism::MechanismError;

pub mod flat;

/// What a clipping policy releases in one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    /// The noisy sum of clipped per-sample gradients. Shape `[P]`.
    pub sum: Array1<f64>,
    /// The private releases made, in order, before sampling is accounted for.
    pub events: Vec<DpEvent>,
}

/// Errors of a clipping policy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClipError {
    #[error("clip_norm must be finite and positive, found {clip_norm}")]
    InvalidClipNorm { clip_norm: f64 },
    #[error(
        "the gradient of example {index} in the batch has a non-finite norm ({norm}); the model \
         has diverged (try a smaller learning rate)"
    )]
    NonFiniteNorm { index: usize, norm: f64 },
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
}
