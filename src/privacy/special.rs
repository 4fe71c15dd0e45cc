//! Special functions for privacy maths, in `f64`: log-space sums and the normal distribution.
//!
//! Shared by every accountant so that each tail probability is computed one way. Uses `libm`
//! for `erfc` and `lgamma`; tails far beyond `erfc`'s range use the asymptotic series.

use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// ln(e^a + e^b), stable for large or infinite arguments.
pub fn log_add_exp(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (lo - hi).exp().ln_1p()
}

/// ln(e^a − e^b) for a ≥ b; −∞ when a == b.
pub fn log_sub_exp(a: f64, b: f64) -> f64 {
    if b == f64::NEG_INFINITY {
        return a;
    }
    if a <= b {
        return f64::NEG_INFINITY;
    }
    a + (-(b - a).exp_m1()).ln()
}

/// ln Γ(x) for x > 0.
pub fn ln_gamma(x: f64) -> f64 {
    libm::lgamma_r(x).0
}

/// The standard normal CDF Φ(x).
///
/// ```
/// assert!((dpx::privacy::special::normal_cdf(0.0) - 0.5).abs() < 1e-16);
/// ```
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x * FRAC_1_SQRT_2)
}

/// The standard normal survival function 1 − Φ(x), accurate in the upper tail.
pub fn normal_sf(x: f64) -> f64 {
    0.5 * libm::erfc(x * FRAC_1_SQRT_2)
}

/// ln Φ(x), accurate for very negative x (where Φ(x) underflows).
///
/// For x < −30 uses the asymptotic series
/// ln Φ(x) = −x²/2 − ln(−x) − ln√(2π) + ln(1 − 1/x² + 3/x⁴ − 15/x⁶).
pub fn log_normal_cdf(x: f64) -> f64 {
    if x > -30.0 {
        return normal_cdf(x).ln();
    }
    let x2 = x * x;
    let series = 1.0 - 1.0 / x2 + 3.0 / (x2 * x2) - 15.0 / (x2 * x2 * x2);
    -0.5 * x2 - (-x).ln() - 0.5 * (2.0 * PI).ln() + series.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_sum_exp_identities() {
        assert!((log_add_exp(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
        assert!((log_sub_exp(2f64.ln(), 0.0) - 0.0).abs() < 1e-15);
        assert_eq!(log_add_exp(f64::NEG_INFINITY, 1.5), 1.5);
        assert_eq!(log_sub_exp(1.0, 1.0), f64::NEG_INFINITY);
        assert!((log_add_exp(1000.0, 1000.0) - (1000.0 + 2f64.ln())).abs() < 1e-12);
    }

    #[test]
    fn normal_tails() {
        // Φ(-1.96) = 0.024997895148220435 (mpmath ncdf, 40 digits)
        assert!((normal_cdf(-1.96) - 0.024997895148220435).abs() < 1e-15);
        assert!((normal_sf(1.96) - 0.024997895148220435).abs() < 1e-15);
        // ln Φ(-40) = -804.6084420137538 (mpmath log(ncdf(-40)), 40 digits)
        assert!((log_normal_cdf(-40.0) - (-804.6084420137538)).abs() < 1e-9);
        // continuity at the switch point
        let a = log_normal_cdf(-29.999_999);
        let b = log_normal_cdf(-30.000_001);
        assert!((a - b).abs() < 1e-3);
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-13);
        assert!((ln_gamma(0.5) - PI.sqrt().ln()).abs() < 1e-13);
    }
}
