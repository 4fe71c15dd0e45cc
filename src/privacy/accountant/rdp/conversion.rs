//! RDP → (ε, δ) conversions (room: `privacy::accountant::rdp`): Balle, Barthe, Gaboardi, Hsu,
//! Sato 2020 ("Hypothesis testing interpretations and Rényi DP", Thm. 21), as dp_accounting, and
//! the classic Mironov 2017 Prop. 3.

use crate::privacy::accountant::RdpConversion;

/// The (ε, δ) conversion's per-order ε (before the minimum over orders); non-decreasing in `rdp`.
pub fn epsilon_at_order(alpha: f64, rdp: f64, delta: f64, conversion: RdpConversion) -> f64 {
    if rdp.is_nan() {
        return f64::INFINITY;
    }
    match conversion {
        RdpConversion::Improved => {
            // dp_accounting `compute_epsilon` (Balle et al. 2020, Thm. 21).
            if rdp < 0.0 || delta * delta + (-rdp).exp_m1() > 0.0 {
                0.0
            } else if alpha > 1.01 {
                rdp + (-1.0 / alpha).ln_1p() - (delta * alpha).ln() / (alpha - 1.0)
            } else {
                f64::INFINITY
            }
        }
        RdpConversion::Classic => {
            // Mironov 2017, Prop. 3.
            if alpha <= 1.0 {
                f64::INFINITY
            } else {
                rdp - delta.ln() / (alpha - 1.0)
            }
        }
    }
}

/// The per-order ln δ for a target ε (before the minimum over orders); non-decreasing in `rdp`.
pub fn log_delta_at_order(alpha: f64, rdp: f64, epsilon: f64, conversion: RdpConversion) -> f64 {
    if rdp.is_nan() {
        return 0.0;
    }
    match conversion {
        RdpConversion::Improved => {
            // dp_accounting `compute_delta` (Balle et al. 2020, Prop. 12 in v4), with the KL bound
            // δ ≤ √(1 − e^{−r}).
            let mut log_delta = if rdp <= 0.0 {
                f64::NEG_INFINITY
            } else {
                0.5 * (-(-rdp).exp()).ln_1p()
            };
            if alpha > 1.01 {
                let bound = (alpha - 1.0) * (rdp - epsilon + (-1.0 / alpha).ln_1p()) - alpha.ln();
                log_delta = log_delta.min(bound);
            }
            log_delta
        }
        RdpConversion::Classic => {
            if alpha <= 1.0 {
                0.0
            } else {
                (alpha - 1.0) * (rdp - epsilon)
            }
        }
    }
}

/// ε for a target δ from an RDP curve: (ε, optimal order), ε clamped at 0 (dp_accounting's
/// `compute_epsilon` for `Improved`). `orders` and `rdp` have equal lengths.
pub fn epsilon_from_rdp(
    orders: &[f64],
    rdp: &[f64],
    delta: f64,
    conversion: RdpConversion,
) -> (f64, f64) {
    let mut best = (f64::INFINITY, orders.first().copied().unwrap_or(f64::NAN));
    for (&a, &r) in orders.iter().zip(rdp) {
        let e = epsilon_at_order(a, r, delta, conversion);
        if e < best.0 {
            best = (e, a);
        }
    }
    (best.0.max(0.0), best.1)
}

/// δ for a target ε from an RDP curve: (δ, optimal order), δ clamped at 1.
pub fn delta_from_rdp(
    orders: &[f64],
    rdp: &[f64],
    epsilon: f64,
    conversion: RdpConversion,
) -> (f64, f64) {
    let mut best = (f64::INFINITY, orders.first().copied().unwrap_or(f64::NAN));
    for (&a, &r) in orders.iter().zip(rdp) {
        let l = log_delta_at_order(a, r, epsilon, conversion);
        if l < best.0 {
            best = (l, a);
        }
    }
    (best.0.exp().min(1.0), best.1)
}
