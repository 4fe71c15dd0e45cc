//! The privacy room: what is released, how it is accounted, and how noise is formed.
//!
//! - [`event`]: [`event::DpEvent`], the only thing accountants ever see, and the ledger that
//!   records the events of a run.
//! - [`accountant`]: the [`accountant::Accountant`] trait and its implementations.
//! - [`calibrate`]: the noise multiplier, schedule scale or steps that meet a target (ε, δ).
//! - [`mechanism`]: the Gaussian mechanism, the one place a noise scale is formed.
//! - [`normal`]: fast bulk standard normals (xoshiro256++ and a ziggurat), deterministic per seed.
//! - [`schedule`]: noise-multiplier shapes s_t over the steps (σ_t = κ·s_t).
//! - [`secure_rng`]: the OS-seeded ChaCha20 noise source of `privacy.secure_noise = true`.
//! - [`noise_dividing`]: the per-step ε_t / Laplace scales b_t of the accelerated methods
//!   (uniform or the cube-root split) and the exact inversion of subsampling amplification.
//! - [`selection`]: the cost of choosing hyperparameters by random stopping (Liu & Talwar 2019).
//! - [`clip`]: clipping policies (flat, ...) that turn per-sample gradients into a [`clip::Release`].
//!
//! Walls: this room never imports `model` or `train`. Maths here is `f64`.

pub mod accountant;
pub mod bandmf;
pub mod calibrate;
pub mod clip;
pub mod event;
pub mod mechanism;
pub mod noise_dividing;
pub mod normal;
pub mod schedule;
pub mod secure_rng;
pub mod selection;
pub mod special;
