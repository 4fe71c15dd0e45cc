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
    /// The std of the noise added to each coordinate of the clipped sum at the last step:
    /// σ_t·C_t, with the gradient's share of σ_t for policies that split it (quantile, DC-SGD),
    /// and the RMS over coordinates for AdaCliP.
    pub noise_std: Option<f64>,
    /// The clip norm C_t of the last step (C_0 at step 0; 1 for `automatic`; for AdaCliP the flat
    /// C of equal noise power, ‖b‖/√P).
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
    /// The clipping policy's private estimate of the fraction of examples clipped (from its noisy
    /// count or histogram: post-processing), averaged over the steps since the previous
    /// evaluation; empty for policies without one.
    pub clipped_fraction_private: Option<f64>,
    /// The true fraction of examples clipped over the steps since the previous evaluation,
    /// computed from the raw per-sample norms: a diagnostic that is NOT differentially private.
    pub clipped_fraction_nonprivate: Option<f64>,
    /// Mean loss of the current parameters over the whole training set (`train.eval_train_set`;
    /// empty otherwise): at the last row, f(θ_T), the dynamic-noise paper's metric. Computed
    /// without noise: a non-private diagnostic, like the test columns.
    pub train_set_loss: Option<f64>,
    pub train_set_accuracy: Option<f64>,
    /// Accelerated methods only (these columns are absent from other runs' CSVs; the per-step
    /// columns hold the last step's values, the first step's at step 0, as `lr` does):
    /// F(x_t), the training objective with its penalty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective: Option<f64>,
    /// F(x_t) − F*, F* from the non-private solver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excess_risk: Option<f64>,
    /// b_t of the last step: the Laplace scale added to each coordinate of the batch mean.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub laplace_scale: Option<f64>,
    /// ε_t of the last step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_epsilon: Option<f64>,
    /// α_t of the last step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_size: Option<f64>,
    /// β_t of the last step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub momentum: Option<f64>,
    /// MASG stage of the last step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<u32>,
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
    /// Accelerated methods only (absent from other runs' CSVs): the last row's F(x) − F*.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_excess_risk: Option<f64>,
    /// F*.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimum_objective: Option<f64>,
    /// The smoothness constant L of the step size α = c/L.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smoothness: Option<f64>,
    /// ε at `rdp_delta` of the same Laplace releases under the RDP accountant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon_rdp: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdp_delta: Option<f64>,
}
