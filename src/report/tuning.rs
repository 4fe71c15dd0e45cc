//! The privacy cost of hyperparameter tuning: releasing the best of a sweep's G points is itself
//! a release that depends on the data through all G runs.
//!
//! This file (report room) combines per-run RDP curves that the privacy room's RDP accountant
//! computed; the RDP → (ε, δ) conversions are the privacy room's ([`epsilon_from_rdp`],
//! [`delta_from_rdp`], Balle et al. 2020, as dp_accounting). Three numbers:
//!
//! 1. **Composition of the G runs** (RDP, Mironov 2017, Prop. 1): the curves add, order by order.
//! 2. **Basic composition** (Dwork & Roth 2014, Thm. 3.16): Σ ε_g at Σ δ_g, when curves are
//!    missing (e.g. an accountant other than RDP, or different order grids).
//! 3. **Random-count repetition** (Papernot & Steinke 2022, "Hyperparameter tuning with Rényi
//!    differential privacy", ICLR, Theorem 6, Poisson case; dp_accounting's
//!    `RepeatAndSelectDpEvent` with `shape = inf`): if one run Q is (λ, ε)-RDP and
//!    (ε̂, δ̂)-DP with e^ε̂ ≤ 1 + 1/(λ−1), and the number of runs K ~ Poisson(μ), releasing the
//!    best run is (λ, ε + μ·δ̂ + ln μ/(λ−1))-RDP. As dp_accounting, ε̂ = ln(1 + 1/(λ−1)) and δ̂
//!    is the δ of Q's curve at ε̂. Here μ = G and Q = "train one point drawn uniformly from the
//!    G points": by joint quasi-convexity of the Rényi divergence Q's curve is at most the
//!    pointwise maximum of the G curves. **Assumption**: the theorem holds for a tuner that
//!    draws K ~ Poisson(G) and, for each run, a point at random — not for a fixed grid run
//!    exactly once each; the sweep's own grid is covered by number 1.

use crate::privacy::accountant::RdpConversion;
use crate::privacy::accountant::rdp::{delta_from_rdp, epsilon_from_rdp};

/// One run's planned RDP curve on an order grid.
#[derive(Debug, Clone, PartialEq)]
pub struct RdpCurve {
    pub orders: Vec<f64>,
    pub rdp: Vec<f64>,
}

/// The tuning cost of choosing the best of G points.
#[derive(Debug, Clone, PartialEq)]
pub struct TuningCost {
    /// G.
    pub points: usize,
    pub delta: f64,
    /// ε of the G runs composed under RDP at `delta` (None without curves on one grid).
    pub composed_rdp: Option<f64>,
    /// Σ ε_g (basic composition), at δ = `basic_delta`.
    pub basic: f64,
    pub basic_delta: f64,
    /// Papernot–Steinke Thm. 6 with K ~ Poisson(G), at `delta` (None without curves).
    pub poisson_repetition: Option<f64>,
    /// ε of the most expensive single point, for comparison.
    pub single_max: f64,
}

/// RDP of repeating a run K ~ Poisson(`mean`) times and releasing only the best
/// (Papernot & Steinke 2022, Thm. 6; dp_accounting `_compute_rdp_repeat_and_select`, Poisson
/// branch). Orders ≤ 1 give +∞.
pub fn repeat_and_select_poisson(curve: &RdpCurve, mean: f64) -> Vec<f64> {
    curve
        .orders
        .iter()
        .zip(&curve.rdp)
        .map(|(&lambda, &eps)| {
            if lambda <= 1.0 {
                return f64::INFINITY;
            }
            let eps_hat = (1.0 / (lambda - 1.0)).ln_1p();
            let (delta_hat, _) =
                delta_from_rdp(&curve.orders, &curve.rdp, eps_hat, RdpConversion::Improved);
            eps + mean * delta_hat + mean.ln() / (lambda - 1.0)
        })
        .collect()
}

/// The tuning cost of releasing the best of the runs whose ε (at `delta`) are `epsilons` and
/// whose RDP curves are `curves` (all on one grid, or `None`).
pub fn tuning_cost(epsilons: &[f64], delta: f64, curves: Option<&[RdpCurve]>) -> TuningCost {
    let g = epsilons.len();
    let basic = epsilons.iter().sum();
    let single_max = epsilons.iter().copied().fold(0.0, f64::max);
    let same_grid = curves
        .filter(|c| !c.is_empty() && c.len() == g && c.iter().all(|x| x.orders == c[0].orders));
    let (composed_rdp, poisson_repetition) = match same_grid {
        None => (None, None),
        Some(c) => {
            let orders = c[0].orders.clone();
            let sum: Vec<f64> = (0..orders.len())
                .map(|k| c.iter().map(|x| x.rdp[k]).sum())
                .collect();
            let max: Vec<f64> = (0..orders.len())
                .map(|k| c.iter().map(|x| x.rdp[k]).fold(0.0, f64::max))
                .collect();
            let composed = epsilon_from_rdp(&orders, &sum, delta, RdpConversion::Improved).0;
            let per_run = RdpCurve {
                orders: orders.clone(),
                rdp: max,
            };
            let rs = repeat_and_select_poisson(&per_run, g as f64);
            let ps = epsilon_from_rdp(&orders, &rs, delta, RdpConversion::Improved).0;
            (Some(composed), Some(ps))
        }
    };
    TuningCost {
        points: g,
        delta,
        composed_rdp,
        basic,
        basic_delta: delta * g as f64,
        poisson_repetition,
        single_max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::accountant::rdp::default_orders;

    /// A Gaussian mechanism with noise multiplier σ: RDP λ/(2σ²) (Mironov 2017, Prop. 7).
    fn gaussian(sigma: f64) -> RdpCurve {
        let orders = default_orders();
        let rdp = orders.iter().map(|a| a / (2.0 * sigma * sigma)).collect();
        RdpCurve { orders, rdp }
    }

    #[test]
    fn composition_of_identical_gaussians_is_one_gaussian_with_smaller_sigma() {
        // G runs of σ compose to λ·G/(2σ²) = one Gaussian of σ/√G (Mironov 2017, Prop. 1, 7).
        let g = 4;
        let curves: Vec<RdpCurve> = (0..g).map(|_| gaussian(8.0)).collect();
        let one = gaussian(4.0);
        let expected = epsilon_from_rdp(&one.orders, &one.rdp, 1e-5, RdpConversion::Improved).0;
        let t = tuning_cost(&[1.0; 4], 1e-5, Some(&curves));
        assert!((t.composed_rdp.unwrap() - expected).abs() < 1e-12);
        assert_eq!(t.basic, 4.0);
        assert_eq!(t.basic_delta, 4e-5);
    }

    #[test]
    fn poisson_repetition_matches_hand_computation_at_one_order() {
        // Hand computation, one order λ = 2 with ε(2) = 0.1, μ = 10:
        // ε̂ = ln(1 + 1/(λ−1)) = ln 2; δ̂ by dp_accounting's `compute_delta` (Balle et al. 2020):
        // ln δ̂ = min(½ ln(1 − e^{−0.1}), (λ−1)(0.1 − ε̂ + ln(1 − 1/λ)) − ln λ)
        //      = min(−1.1761, 0.1 − 3 ln 2 = −1.9794), so δ̂ = e^{0.1}/8.
        // ε' = 0.1 + 10·e^{0.1}/8 + ln 10 / 1 = 3.7840487405... (python3 float).
        let curve = RdpCurve {
            orders: vec![2.0],
            rdp: vec![0.1],
        };
        let out = repeat_and_select_poisson(&curve, 10.0)[0];
        let expected = 0.1 + 10.0 * 0.1f64.exp() / 8.0 + 10f64.ln();
        assert!((out - expected).abs() < 1e-12, "{out} vs {expected}");
        assert!((out - 3.784_048_740_6).abs() < 1e-9);
    }
}
