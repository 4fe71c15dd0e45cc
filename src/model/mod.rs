//! The model room: layers, losses, forward passes and per-sample backward passes.
//!
//! Knows nothing of differential privacy: it answers the questions of [`crate::grad`].
