//! The rows a run writes: one [`MetricsRow`] per evaluation per seed (`metrics.csv`) and one
//! [`SummaryRow`] per seed (`summary.csv`).
//!
//! Column names are the DP vocabulary used in the TOML and in the code. Empty cells mean "not
//! applicable" (no validation split, a non-private run's ε, no training steps yet). Floating-point
//! values are written in their shortest round-trip form, so the same run gives the same bytes.

use serde::Serialize;

/// One evaluation of one seed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricsRow {
    pub seed: u64,
    /// Steps taken so far.
    pub step: u64,
    /// step / steps-per-epoch.
    pub epoch: f64,
    /// η of the last step taken (η_0 at step 0).
    pub lr: f64,
    /// σ_t of the last step taken (empty for a non-private run).
    pub noise_multiplier: Option<f64>,
    /// σ_t · C: the std of the noise added to the clipped sum.
    pub noise_std: Option<f64>,
    pub clip_norm: Option<f64>,
    /// Size of the last batch drawn (Poisson batches vary).
    pub batch_size: Option<usize>,
    /// ε spent so far at `delta` under the configured accountant.
    pub epsilon: Option<f64>,
    pub delta: Option<f64>,
    /// Mean per-example loss over the batches since the previous evaluation (before each update).
    pub train_loss: Option<f64>,
    pub test_loss: f64,
    pub test_accuracy: f64,
    pub validation_loss: Option<f64>,
    pub validation_accuracy: Option<f64>,
    /// Mean loss of the current parameters over the whole training set (`train.eval_train_set`;
    /// empty otherwise): at the last row, f(θ_T), the dynamic-noise paper's metric. Computed
    /// without noise: a non-private diagnostic, like the test columns.
    pub train_set_loss: Option<f64>,
    pub train_set_accuracy: Option<f64>,
}

/// How a seed ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeedStatus {
    /// Every planned step ran.
    Completed,
    /// A loss or parameter became NaN or infinite; the seed stopped there.
    Diverged,
}

/// The outcome of one seed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    pub seed: u64,
    pub status: SeedStatus,
    pub steps: u64,
    pub epochs: f64,
    pub final_test_accuracy: f64,
    pub best_test_accuracy: f64,
    pub final_test_loss: f64,
    pub final_train_loss: Option<f64>,
    pub final_validation_accuracy: Option<f64>,
    pub epsilon: Option<f64>,
    pub delta: Option<f64>,
    /// The RDP order at which ε was attained (RDP only).
    pub order: Option<f64>,
    pub accountant: Option<String>,
    pub noise_multiplier: Option<f64>,
    /// False when an assumption of the accountant fails (shuffle sampling, δ ≥ 1/n, ...).
    pub epsilon_guaranteed: bool,
    /// `seeded` (reproducible noise), `secure` (OS-seeded cryptographic noise, not
    /// reproducible; `privacy.secure_noise`) or `none` for a non-private run.
    pub noise_mode: String,
    /// `train_set_loss` of the last evaluation (`train.eval_train_set`; empty otherwise).
    pub final_train_set_loss: Option<f64>,
    /// Wall-clock seconds of this seed (the only column that varies between identical runs).
    pub seconds: f64,
}
