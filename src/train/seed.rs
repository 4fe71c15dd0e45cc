//! What every step loop of one seed shares (room: `train`): the seed's random streams, the
//! observer that watches progress, how a seed ends and what it returns, and the Gaussian noise
//! source. Below both loops — the DP-SGD loop (`run.rs`) and the accelerated loop
//! (`accelerated.rs`) import it, neither imports the other; `train::train_seed` picks the loop.
//!
//! Randomness: independent ChaCha12 streams (initialisation, sampling, noise) derived from the
//! seed, so a seed's result never depends on thread count or on other seeds. With
//! `privacy.secure_noise = true` the noise stream alone is replaced by an OS-seeded ChaCha20
//! source (`privacy::secure_rng`): such runs are not reproducible.

use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

use super::metrics::{MetricsRow, SummaryRow};
use super::prepare::Experiment;
use crate::privacy::event::EventLedger;
use crate::privacy::mechanism::GaussianSource;
use crate::privacy::secure_rng::{SecureGaussian, SecureRngError};

/// Stream ids of a seed's random streams.
pub const STREAM_INIT: u64 = 1;
pub const STREAM_SAMPLING: u64 = 2;
pub const STREAM_NOISE: u64 = 3;
/// The augmented views' crops and flips (`[train.augmentation]`).
pub const STREAM_AUGMENT: u64 = 4;
/// The noise of the private data statistics (`data.standardize = "private"`), drawn once per
/// experiment from the stream of `data.standardize_seed`.
pub const STREAM_STATISTICS: u64 = 5;
/// The groups of b-min-separated sampling (`noise.mechanism = "bandmf"` with more than one band)
/// and the permutation of `train.sampler = "fixed_order"`.
pub const STREAM_PARTITION: u64 = 6;
/// The noise of the private PCA's release (`data.pca_noise_multiplier`), drawn once per
/// experiment from the stream of `data.pca_seed`.
pub const STREAM_PCA: u64 = 7;

/// A ChaCha12 generator for stream `stream` of run seed `seed`.
pub fn stream_rng(seed: u64, stream: u64) -> ChaCha12Rng {
    let mut rng = ChaCha12Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// A 64-bit seed for stream `stream` of run seed `seed` (SplitMix64 of their combination), for
/// APIs that take a plain `u64` seed.
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Receives progress while a seed trains (the CLI draws bars from it). Must not affect results.
pub trait Observer: Sync {
    /// Called after every step with the number of steps done.
    fn on_step(&self, _seed: u64, _steps_done: u64, _total: u64) {}
    /// Called after every evaluation.
    fn on_eval(&self, _seed: u64, _row: &MetricsRow, _total: u64) {}
}

/// An observer that ignores everything.
pub struct Silent;
impl Observer for Silent {}

/// A finished seed: its evaluation rows, summary and the events it released.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedResult {
    pub rows: Vec<MetricsRow>,
    pub summary: SummaryRow,
    pub ledger: EventLedger,
    /// The final parameters of a layered model (`None` for `[accelerated]` runs, whose binary
    /// logistic model has no layers to name); saved as `seeds/<seed>.model.safetensors`.
    pub params: Option<ndarray::Array1<f32>>,
    /// The final exponential moving average of the parameters (`train.ema_decay`); saved as
    /// `seeds/<seed>.ema.model.safetensors`.
    pub ema_params: Option<ndarray::Array1<f32>>,
    /// The parameters at every k-th evaluation (`output.save_model_every_evals`), with the step
    /// and that row's test accuracy; saved as `seeds/<seed>.step<step>.model.safetensors`.
    pub snapshots: Vec<Snapshot>,
}

/// The parameters of a seed at one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub step: u64,
    pub test_accuracy: f64,
    pub params: ndarray::Array1<f32>,
}

/// The EMA decay at update t (0-based: the update after step t) for a configured decay `d`:
/// min(d, (1 + t)/(10 + t)), the warm-up of TensorFlow's `ExponentialMovingAverage` with
/// `num_updates`, as used by De et al. 2022 (arXiv:2204.13650, Sec. 3.2), so early averages are
/// not dominated by the initialisation.
pub fn ema_decay_at(d: f64, t: u64) -> f64 {
    let t = t as f64;
    d.min((1.0 + t) / (10.0 + t))
}

/// One EMA update: ema ← decay·ema + (1 − decay)·θ, coordinate by coordinate (so the result
/// does not depend on the thread count).
pub fn ema_update(ema: &mut ndarray::Array1<f32>, params: &ndarray::Array1<f32>, decay: f64) {
    let (a, b) = (decay as f32, (1.0 - decay) as f32);
    crate::optim::each_param!(
        params.len(),
        ndarray::Zip::from(ema).and(params),
        |e: &mut f32, &p: &f32| *e = a * *e + b * p
    );
}

/// How a call to [`crate::train::train_seed`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SeedEnd {
    Finished(Box<SeedResult>),
    /// `cancel` was set before the seed finished; nothing of it is kept.
    Interrupted,
}

/// A seed's Gaussian noise: the reproducible noise stream of its seed, or
/// (`privacy.secure_noise = true`) an OS-seeded cryptographic source that no seed reproduces.
pub(crate) enum NoiseSource {
    Seeded(ChaCha12Rng),
    Secure(SecureGaussian),
}

impl NoiseSource {
    /// The noise source of seed `seed` of `exp`.
    pub(crate) fn of(exp: &Experiment, seed: u64) -> Result<NoiseSource, SecureRngError> {
        if exp.spec.privacy.as_ref().is_some_and(|p| p.secure_noise) {
            Ok(NoiseSource::Secure(SecureGaussian::from_os()?))
        } else {
            Ok(NoiseSource::Seeded(stream_rng(seed, STREAM_NOISE)))
        }
    }

    /// The `noise_mode` written in a summary row.
    pub(crate) fn mode(&self) -> &'static str {
        match self {
            NoiseSource::Seeded(_) => "seeded",
            NoiseSource::Secure(_) => "secure",
        }
    }
}

impl GaussianSource for NoiseSource {
    fn standard_normal(&mut self) -> f64 {
        match self {
            NoiseSource::Seeded(r) => r.standard_normal(),
            NoiseSource::Secure(r) => r.standard_normal(),
        }
    }

    fn add_scaled_normals(&mut self, out: &mut [f64], scale: f64) {
        match self {
            NoiseSource::Seeded(r) => r.add_scaled_normals(out, scale),
            NoiseSource::Secure(r) => r.add_scaled_normals(out, scale),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ema_decay_warms_up_then_holds() {
        // (1 + t)/(10 + t): 0.1 at the first update, 0.5 at t = 8, then capped by d.
        assert_eq!(ema_decay_at(0.999, 0), 0.1);
        assert_eq!(ema_decay_at(0.999, 8), 0.5);
        assert_eq!(ema_decay_at(0.9, 1000), 0.9);
        assert!(ema_decay_at(0.999, 1000) < 0.999);
        assert_eq!(ema_decay_at(0.999, 100_000), 0.999);
    }

    #[test]
    fn an_ema_update_moves_towards_the_parameters() {
        let mut ema = ndarray::Array1::from(vec![0.0f32, 1.0, -2.0]);
        let params = ndarray::Array1::from(vec![1.0f32, 1.0, 2.0]);
        ema_update(&mut ema, &params, 0.75);
        assert_eq!(ema.to_vec(), vec![0.25, 1.0, -1.0]);
    }
}
