//! The rows a run writes: one [`MetricsRow`] per evaluation per seed (`metrics.csv`) and one
//! [`SummaryRow`] per seed (`summary.csv`), and the `ClipWindow` a DP-SGD seed accumulates
//! between two rows (what its clipping policy did).
//!
//! Column names are the DP vocabulary used in the TOML and in the code. Empty cells mean "not
//! applicable" (no validation split, a non-private run's ε, no training steps yet). Floating-point
//! values are written in their shortest round-trip form, so the same run gives the same bytes.

use serde::Serialize;

/// The columns of every `metrics.csv`, in order (a test checks them against [`MetricsRow`]).
pub const METRICS_COLUMNS: &[&str] = &[
    "seed",
    "step",
    "epoch",
    "lr",
    "noise_multiplier",
    "noise_std",
    "clip_norm",
    "batch_size",
    "epsilon",
    "delta",
    "train_loss",
    "test_loss",
    "test_accuracy",
    "validation_loss",
    "validation_accuracy",
    "clipped_fraction_private",
    "clipped_fraction_nonprivate",
    "train_set_loss",
    "train_set_accuracy",
];

/// The columns an accelerated run may add after [`METRICS_COLUMNS`], in order.
pub const METRICS_EXTRA_COLUMNS: &[&str] = &[
    "objective",
    "excess_risk",
    "laplace_scale",
    "step_epsilon",
    "step_size",
    "momentum",
    "stage",
];

/// The columns a run with `train.ema_decay` adds at the end, in order.
pub const METRICS_EMA_COLUMNS: &[&str] = &[
    "ema_test_loss",
    "ema_test_accuracy",
    "ema_validation_accuracy",
];

/// The column a run with `train.eval_gradient_error` adds at the very end of `metrics.csv`.
pub const METRICS_DIAGNOSTIC_COLUMNS: &[&str] = &["gradient_error_nonprivate"];

/// The columns of every `summary.csv`, in order (a test checks them against [`SummaryRow`]).
pub const SUMMARY_COLUMNS: &[&str] = &[
    "seed",
    "status",
    "steps",
    "epochs",
    "final_test_accuracy",
    "best_test_accuracy",
    "final_test_loss",
    "final_train_loss",
    "final_validation_accuracy",
    "epsilon",
    "delta",
    "order",
    "accountant",
    "noise_multiplier",
    "epsilon_guaranteed",
    "noise_mode",
    "final_train_set_loss",
    "seconds",
];

/// The columns an accelerated run may add after [`SUMMARY_COLUMNS`], in order.
pub const SUMMARY_EXTRA_COLUMNS: &[&str] = &[
    "final_excess_risk",
    "optimum_objective",
    "smoothness",
    "epsilon_rdp",
    "rdp_delta",
];

/// The column a run with `train.ema_decay` adds at the end of `summary.csv`.
pub const SUMMARY_EMA_COLUMNS: &[&str] = &["final_ema_test_accuracy"];

/// The column a run with `train.eval_gradient_error` adds at the very end of `summary.csv`.
pub const SUMMARY_DIAGNOSTIC_COLUMNS: &[&str] = &["mean_gradient_error_nonprivate"];

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
    /// With `train.ema_decay` only (absent otherwise): the test loss and accuracy of the
    /// exponential moving average of the parameters, and its validation accuracy (absent
    /// without a validation split).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ema_test_loss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ema_test_accuracy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ema_validation_accuracy: Option<f64>,
    /// With `train.eval_gradient_error` only (absent otherwise; empty before the first step):
    /// the mean over the steps since the previous evaluation of ‖Σ_{i∈B_t} g_i − s̃_t‖₂ / B, the
    /// distance between the raw batch gradient and the released one (clipping bias plus noise;
    /// B the expected batch size, s̃_t the policy's noisy sum). NOT differentially private: a
    /// diagnostic (AdaCliP's Fig. 3 plots its mean against ε).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gradient_error_nonprivate: Option<Option<f64>>,
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
    /// With `train.ema_decay` only: the last row's `ema_test_accuracy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_ema_test_accuracy: Option<f64>,
    /// With `train.eval_gradient_error` only: `gradient_error_nonprivate` averaged over every
    /// step of the seed (not private: a diagnostic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_gradient_error_nonprivate: Option<Option<f64>>,
}

/// What the clipping policy did over the steps since the previous evaluation row.
#[derive(Default)]
pub(crate) struct ClipWindow {
    /// (C_t, noise std) of the last step.
    pub(crate) last: Option<(Option<f64>, f64)>,
    /// Sum and count of the policy's private clipped-fraction estimates.
    pub(crate) private_sum: f64,
    pub(crate) private_steps: u64,
    /// Examples clipped and examples seen (the non-private diagnostic).
    pub(crate) clipped: usize,
    pub(crate) examples: usize,
    /// `train.eval_gradient_error` (non-private): Σ and count of ‖Σ g_i − s̃_t‖/B in this
    /// window, and over every step of the seed (kept across windows).
    pub(crate) gradient_error_sum: f64,
    pub(crate) gradient_error_steps: u64,
    pub(crate) gradient_error_total: f64,
    pub(crate) gradient_error_total_steps: u64,
}

impl ClipWindow {
    pub(crate) fn record(&mut self, step: &crate::privacy::clip::StepRelease) {
        self.last = Some((step.clip_norm, step.noise_std));
        if let Some(f) = step.clipped_fraction_private {
            self.private_sum += f;
            self.private_steps += 1;
        }
        if step.clip_norm.is_some() {
            self.clipped += step.clipped_count_nonprivate;
            self.examples += step.batch_size_nonprivate;
        }
    }

    pub(crate) fn record_gradient_error(&mut self, e: f64) {
        self.gradient_error_sum += e;
        self.gradient_error_steps += 1;
        self.gradient_error_total += e;
        self.gradient_error_total_steps += 1;
    }

    /// Start a new window; the last step's C and noise, and the seed's totals, stay.
    pub(crate) fn reset(&mut self) {
        *self = ClipWindow {
            last: self.last,
            gradient_error_total: self.gradient_error_total,
            gradient_error_total_steps: self.gradient_error_total_steps,
            ..ClipWindow::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<T: Serialize>(row: &T) -> Vec<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(row).unwrap();
        let bytes = w.into_inner().unwrap();
        let text = String::from_utf8(bytes).unwrap();
        text.lines()
            .next()
            .unwrap()
            .split(',')
            .map(String::from)
            .collect()
    }

    #[test]
    fn column_lists_match_the_rows() {
        let mut m = MetricsRow {
            seed: 0,
            step: 0,
            epoch: 0.0,
            lr: 0.0,
            noise_multiplier: None,
            noise_std: None,
            clip_norm: None,
            batch_size: None,
            epsilon: None,
            delta: None,
            train_loss: None,
            test_loss: 0.0,
            test_accuracy: 0.0,
            validation_loss: None,
            validation_accuracy: None,
            clipped_fraction_private: None,
            clipped_fraction_nonprivate: None,
            train_set_loss: None,
            train_set_accuracy: None,
            objective: None,
            excess_risk: None,
            laplace_scale: None,
            step_epsilon: None,
            step_size: None,
            momentum: None,
            stage: None,
            ema_test_loss: None,
            ema_test_accuracy: None,
            ema_validation_accuracy: None,
            gradient_error_nonprivate: None,
        };
        assert_eq!(header(&m), METRICS_COLUMNS);
        (m.objective, m.excess_risk, m.laplace_scale) = (Some(0.0), Some(0.0), Some(0.0));
        (m.step_epsilon, m.step_size, m.momentum, m.stage) =
            (Some(0.0), Some(0.0), Some(0.0), Some(1));
        let all: Vec<&str> = METRICS_COLUMNS
            .iter()
            .chain(METRICS_EXTRA_COLUMNS)
            .copied()
            .collect();
        assert_eq!(header(&m), all);
        (
            m.ema_test_loss,
            m.ema_test_accuracy,
            m.ema_validation_accuracy,
        ) = (Some(0.0), Some(0.0), Some(0.0));
        let all: Vec<&str> = METRICS_COLUMNS
            .iter()
            .chain(METRICS_EXTRA_COLUMNS)
            .chain(METRICS_EMA_COLUMNS)
            .copied()
            .collect();
        assert_eq!(header(&m), all);
        // Present but empty (before the first step) still writes the column.
        m.gradient_error_nonprivate = Some(None);
        let all: Vec<&str> = all
            .into_iter()
            .chain(METRICS_DIAGNOSTIC_COLUMNS.iter().copied())
            .collect();
        assert_eq!(header(&m), all);
        let mut s = SummaryRow {
            seed: 0,
            status: SeedStatus::Completed,
            steps: 0,
            epochs: 0.0,
            final_test_accuracy: 0.0,
            best_test_accuracy: 0.0,
            final_test_loss: 0.0,
            final_train_loss: None,
            final_validation_accuracy: None,
            epsilon: None,
            delta: None,
            order: None,
            accountant: None,
            noise_multiplier: None,
            epsilon_guaranteed: true,
            noise_mode: "none".into(),
            final_train_set_loss: None,
            seconds: 0.0,
            final_excess_risk: None,
            optimum_objective: None,
            smoothness: None,
            epsilon_rdp: None,
            rdp_delta: None,
            final_ema_test_accuracy: None,
            mean_gradient_error_nonprivate: None,
        };
        assert_eq!(header(&s), SUMMARY_COLUMNS);
        (s.final_excess_risk, s.optimum_objective, s.smoothness) =
            (Some(0.0), Some(0.0), Some(0.0));
        (s.epsilon_rdp, s.rdp_delta) = (Some(0.0), Some(0.0));
        let all: Vec<&str> = SUMMARY_COLUMNS
            .iter()
            .chain(SUMMARY_EXTRA_COLUMNS)
            .copied()
            .collect();
        assert_eq!(header(&s), all);
        s.final_ema_test_accuracy = Some(0.0);
        let all: Vec<&str> = SUMMARY_COLUMNS
            .iter()
            .chain(SUMMARY_EXTRA_COLUMNS)
            .chain(SUMMARY_EMA_COLUMNS)
            .copied()
            .collect();
        assert_eq!(header(&s), all);
        s.mean_gradient_error_nonprivate = Some(Some(0.5));
        let all: Vec<&str> = all
            .into_iter()
            .chain(SUMMARY_DIAGNOSTIC_COLUMNS.iter().copied())
            .collect();
        assert_eq!(header(&s), all);
    }
}
