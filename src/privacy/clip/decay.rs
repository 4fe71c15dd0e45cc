//! Decaying clip norm (Du, Li, Chen, Ni, Wang, "Dynamic differential-privacy preserving SGD",
//! 2021; the clipping schedule DC-SGD compares against, docs/methods/dc_sgd.md §1.6):
//! C_t = C_0·ρ^(t/T), from C_0 at the first step to ρ·C_0 at the last.
//!
//! Part of the privacy room. C_t is a public function of the step, so each step is flat
//! clipping at C_t with noise σ_t·C_t and event `Gaussian(σ_t)`: the accounting is DP-SGD's.
//! Only the clipping schedule is taken from Du et al. (as DC-SGD does), not their noise schedule.

use serde::Serialize;

/// `clip.decay`: C_t = `clip_norm`·`final_ratio`^(t/`total_steps`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DecayParams {
    /// C_0.
    pub clip_norm: f64,
    /// ρ in (0, 1]: C at t = T relative to C_0.
    pub final_ratio: f64,
    /// T, the planned number of steps.
    pub total_steps: u64,
}

impl DecayParams {
    /// C_t = C_0·ρ^(t/T).
    ///
    /// ```
    /// use dpx::privacy::clip::decay::DecayParams;
    /// let d = DecayParams { clip_norm: 4.0, final_ratio: 0.25, total_steps: 100 };
    /// assert_eq!(d.clip_norm_at(0), 4.0);
    /// assert!((d.clip_norm_at(50) - 2.0).abs() < 1e-12);
    /// assert!((d.clip_norm_at(100) - 1.0).abs() < 1e-12);
    /// ```
    pub fn clip_norm_at(&self, step: u64) -> f64 {
        let t = step as f64 / self.total_steps.max(1) as f64;
        self.clip_norm * self.final_ratio.powf(t)
    }
}
