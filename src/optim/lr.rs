//! Learning-rate schedules: pure functions of the step.
//!
//! A schedule is a value; `at(t)` gives η_t for step `t` in `0..total_steps`. Schedules live
//! outside the optimizers (burn passes `lr` per step), so `dpx account --config` and noise
//! schedules tied to the learning rate (ADP-SGD) can replay them without training.

use serde::Serialize;

/// A learning-rate schedule over `total_steps` steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LrSchedule {
    /// η_t = η.
    Constant { learning_rate: f64 },
    /// η_t = η · γ^⌊t / step_size⌋.
    Step {
        learning_rate: f64,
        step_size: u64,
        gamma: f64,
    },
    /// η_t = η · γ^t.
    Exponential { learning_rate: f64, gamma: f64 },
    /// η_t = η_min + (η − η_min)(1 + cos(π t / T)) / 2 (Loshchilov and Hutter 2017, without restarts).
    Cosine {
        learning_rate: f64,
        min_learning_rate: f64,
        total_steps: u64,
    },
    /// η_t = η / √(a + c·t) (the ADP-SGD paper's schedule S1 is η = 1, a = 20, c = 1).
    InvSqrt { learning_rate: f64, a: f64, c: f64 },
    /// η_t = η_0 − (η_0 − η_end)·√(t/T) (the ADP-SGD paper's schedule S2, Table 1).
    SqrtToZero {
        learning_rate: f64,
        end_learning_rate: f64,
        total_steps: u64,
    },
}

impl LrSchedule {
    /// The learning rate at step `t` (0-based).
    ///
    /// ```
    /// use dpx::optim::lr::LrSchedule;
    /// let s = LrSchedule::InvSqrt { learning_rate: 1.0, a: 20.0, c: 1.0 };
    /// assert_eq!(s.at(5), 1.0 / 5.0);
    /// ```
    pub fn at(&self, t: u64) -> f64 {
        let tf = t as f64;
        match *self {
            LrSchedule::Constant { learning_rate } => learning_rate,
            LrSchedule::Step {
                learning_rate,
                step_size,
                gamma,
            } => {
                let k = t / step_size.max(1);
                learning_rate * gamma.powf(k as f64)
            }
            LrSchedule::Exponential {
                learning_rate,
                gamma,
            } => learning_rate * gamma.powf(tf),
            LrSchedule::Cosine {
                learning_rate,
                min_learning_rate,
                total_steps,
            } => {
                let frac = (tf / total_steps.max(1) as f64).min(1.0);
                min_learning_rate
                    + 0.5
                        * (learning_rate - min_learning_rate)
                        * (1.0 + (std::f64::consts::PI * frac).cos())
            }
            LrSchedule::InvSqrt {
                learning_rate,
                a,
                c,
            } => learning_rate / (a + c * tf).sqrt(),
            LrSchedule::SqrtToZero {
                learning_rate,
                end_learning_rate,
                total_steps,
            } => {
                let frac = (tf / total_steps.max(1) as f64).min(1.0);
                learning_rate - (learning_rate - end_learning_rate) * frac.sqrt()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_match_hand_computed_values() {
        let c = LrSchedule::Constant { learning_rate: 0.3 };
        assert_eq!(c.at(0), 0.3);
        assert_eq!(c.at(1000), 0.3);

        let s = LrSchedule::Step {
            learning_rate: 1.0,
            step_size: 10,
            gamma: 0.5,
        };
        assert_eq!(s.at(9), 1.0);
        assert_eq!(s.at(10), 0.5);
        assert_eq!(s.at(25), 0.25);

        let e = LrSchedule::Exponential {
            learning_rate: 2.0,
            gamma: 0.9,
        };
        assert!((e.at(2) - 2.0 * 0.81).abs() < 1e-15);

        let cos = LrSchedule::Cosine {
            learning_rate: 1.0,
            min_learning_rate: 0.0,
            total_steps: 100,
        };
        assert_eq!(cos.at(0), 1.0);
        assert!((cos.at(50) - 0.5).abs() < 1e-15);
        assert!(cos.at(100).abs() < 1e-15);

        // ADP-SGD schedule S1: eta_t = 1/sqrt(20 + t) (docs/methods/adp_sgd.md §1.2), a = 20, c = 1.
        let inv = LrSchedule::InvSqrt {
            learning_rate: 1.0,
            a: 20.0,
            c: 1.0,
        };
        assert!((inv.at(0) - 1.0 / 20f64.sqrt()).abs() < 1e-15);
        assert!((inv.at(16) - 1.0 / 6.0).abs() < 1e-15);

        // ADP-SGD schedule S2: eta_t = 0.1 - k_T sqrt(t), eta_T = 1e-10 (docs/methods/adp_sgd.md §1.2).
        let s2 = LrSchedule::SqrtToZero {
            learning_rate: 0.1,
            end_learning_rate: 1e-10,
            total_steps: 400,
        };
        assert_eq!(s2.at(0), 0.1);
        let k = (0.1 - 1e-10) / 400f64.sqrt();
        assert!((s2.at(100) - (0.1 - k * 10.0)).abs() < 1e-15);
        assert!((s2.at(400) - 1e-10).abs() < 1e-15);
    }
}
