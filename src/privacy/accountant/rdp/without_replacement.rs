//! RDP of releases on a batch sampled without replacement, replace-one relation (room:
//! `privacy::accountant::rdp`): Wang, Balle, Kasiviswanathan 2019 ("Subsampled Rényi Differential
//! Privacy and Analytical Moments Accountant", Thm. 9), for the Gaussian and Laplace mechanisms,
//! capped by the base mechanism.

use super::*;
use crate::privacy::special::{ln_binom, ln_expm1, log_sum_exp};

/// Upper bound on the cumulant (α−1)·RDP(α) at an integer order α ≥ 2 of the Gaussian mechanism
/// on a batch of m = q·n records sampled without replacement, replace-one relation
/// (Wang, Balle, Kasiviswanathan 2019, Thm. 9 with ε(∞) = ∞):
/// A ≤ 1 + C(α,2) q² min{4(e^{ε(2)} − 1), 2e^{ε(2)}} + Σ_{j=3}^{α} C(α,j) q^j · 2e^{(j−1)ε(j)},
/// where ε(j) = j/(2σ²) is the Gaussian RDP.
pub(super) fn cgf_wor_gaussian_int(q: f64, sigma: f64, alpha: u64) -> f64 {
    if alpha == 1 {
        return 0.0;
    }
    let eps = |x: f64| x / (2.0 * sigma * sigma);
    let ln_q = q.ln();
    let e2 = eps(2.0);
    let mut terms = Vec::with_capacity(alpha as usize);
    terms.push(0.0);
    let second = (4f64.ln() + ln_expm1(e2)).min(e2 + 2f64.ln());
    terms.push(2.0 * ln_q + ln_binom(alpha, 2) + second);
    for j in 3..=alpha {
        let jf = j as f64;
        terms.push(2f64.ln() + (jf - 1.0) * eps(jf) + jf * ln_q + ln_binom(alpha, j));
    }
    log_sum_exp(&terms)
}

/// Upper bound on the RDP at order `alpha` of the Gaussian mechanism on a batch drawn without
/// replacement with q = batch/dataset, replace one (Wang, Balle, Kasiviswanathan 2019; fractional
/// orders interpolate the cumulant linearly, their Cor. 10).
pub fn rdp_wor_gaussian(q: f64, sigma: f64, alpha: f64) -> f64 {
    if q == 0.0 {
        return 0.0;
    }
    if sigma == 0.0 || alpha.is_infinite() {
        return f64::INFINITY;
    }
    let base = rdp_gaussian(sigma, alpha);
    if q == 1.0 {
        return base;
    }
    // Subsampling never costs more than the base mechanism (Rényi divergence is jointly
    // quasi-convex, and the coupled batches differ in at most the replaced record), so the
    // smaller of the two bounds holds; near q = 1 Thm. 9 alone exceeds the base.
    let bound = if alpha.fract() == 0.0 {
        cgf_wor_gaussian_int(q, sigma, alpha as u64) / (alpha - 1.0)
    } else {
        let lo = alpha.floor();
        let hi = alpha.ceil();
        let t = alpha - lo;
        let x = cgf_wor_gaussian_int(q, sigma, lo as u64);
        let y = cgf_wor_gaussian_int(q, sigma, hi as u64);
        ((1.0 - t) * x + t * y) / (alpha - 1.0)
    };
    bound.min(base)
}

/// Upper bound on the cumulant (α−1)·RDP(α) at an integer order α ≥ 2 of the Laplace mechanism
/// with pure-DP parameter `eps` = 1/scale on a batch sampled without replacement, replace-one
/// relation (Wang, Balle, Kasiviswanathan 2019, Thm. 9 with ε(∞) = `eps`, the pure-DP parameter):
/// A ≤ 1 + C(α,2) q² min{4(e^{ε(2)} − 1), e^{ε(2)} min{2, (e^{ε(∞)} − 1)²}}
///       + Σ_{j=3}^{α} C(α,j) q^j e^{(j−1)ε(j)} min{2, (e^{ε(∞)} − 1)^j},
/// where ε(j) is the Laplace RDP ([`rdp_laplace`]).
pub(super) fn cgf_wor_laplace_int(q: f64, eps: f64, alpha: u64) -> f64 {
    if alpha == 1 {
        return 0.0;
    }
    let ln_q = q.ln();
    let ln_em1 = eps.exp_m1().ln();
    let ln_min = |j: f64| 2f64.ln().min(j * ln_em1);
    let e2 = rdp_laplace(eps, 2.0);
    let mut terms = Vec::with_capacity(alpha as usize);
    terms.push(0.0);
    let second = (4f64.ln() + ln_expm1(e2)).min(e2 + ln_min(2.0));
    terms.push(2.0 * ln_q + ln_binom(alpha, 2) + second);
    for j in 3..=alpha {
        let jf = j as f64;
        terms.push(ln_min(jf) + (jf - 1.0) * rdp_laplace(eps, jf) + jf * ln_q + ln_binom(alpha, j));
    }
    log_sum_exp(&terms)
}

/// Upper bound on the RDP at order `alpha` of the Laplace mechanism (`eps` = 1/scale) on a batch
/// drawn without replacement with q = batch/dataset, replace one (Wang, Balle, Kasiviswanathan
/// 2019, Thm. 9; fractional orders interpolate the cumulant linearly, their Cor. 10).
pub fn rdp_wor_laplace(q: f64, eps: f64, alpha: f64) -> f64 {
    if q == 0.0 {
        return 0.0;
    }
    if q == 1.0 {
        return rdp_laplace(eps, alpha);
    }
    if eps.is_infinite() || alpha.is_infinite() {
        return f64::INFINITY;
    }
    let bound = if alpha < 2.0 {
        // Below order 2 the bound at order 2 holds (RDP is non-decreasing in α).
        cgf_wor_laplace_int(q, eps, 2)
    } else if alpha.fract() == 0.0 {
        cgf_wor_laplace_int(q, eps, alpha as u64) / (alpha - 1.0)
    } else {
        let lo = alpha.floor();
        let hi = alpha.ceil();
        let t = alpha - lo;
        let x = cgf_wor_laplace_int(q, eps, lo as u64);
        let y = cgf_wor_laplace_int(q, eps, hi as u64);
        ((1.0 - t) * x + t * y) / (alpha - 1.0)
    };
    // Never above the base mechanism (joint quasi-convexity, as for the Gaussian).
    bound.min(rdp_laplace(eps, alpha))
}
