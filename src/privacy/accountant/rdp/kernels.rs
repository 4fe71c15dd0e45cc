//! Per-step RDP kernels (room: `privacy::accountant::rdp`): the full-batch Gaussian and Laplace
//! mechanisms, Poisson-subsampled Laplace, and [`RdpKernel`], the one value per step the
//! accountant stores and evaluates at any order.

use super::*;
use crate::privacy::special::{ln_binom, log_sum_exp};

/// RDP at order `alpha` of the Gaussian mechanism with noise multiplier `sigma`: α/(2σ²)
/// (Mironov 2017, Prop. 7).
pub fn rdp_gaussian(sigma: f64, alpha: f64) -> f64 {
    if sigma == 0.0 {
        return f64::INFINITY;
    }
    alpha / (2.0 * sigma * sigma)
}

/// RDP at order `alpha` of the Laplace mechanism with pure-DP parameter `eps` = 1/scale
/// (Mironov 2017, Prop. 6; exactly tight). Order 1 gives the KL divergence ε + e^{−ε} − 1.
pub fn rdp_laplace(eps: f64, alpha: f64) -> f64 {
    if eps.is_infinite() {
        return f64::INFINITY;
    }
    if alpha == 1.0 {
        return eps + (-eps).exp_m1();
    }
    if alpha.is_infinite() {
        return eps;
    }
    let c = (eps * (1.0 - 2.0 * alpha)).exp_m1() / (2.0 * alpha - 1.0);
    if alpha < 1.1 {
        // ln(1 + c·x)/x with x = α − 1 small: c·Σ_{k≥1} (−c x)^{k−1}/k (0 ≤ −c x ≤ 0.1).
        let v = -c * (alpha - 1.0);
        let mut series = 0.0;
        let mut power = 1.0;
        for k in 1..100 {
            series += power / f64::from(k);
            power *= v;
        }
        return eps + c * series;
    }
    eps + ((alpha - 1.0) * c).ln_1p() / (alpha - 1.0)
}

/// Upper bound on the RDP at order `alpha` of the Poisson-subsampled Laplace mechanism (Zhu and
/// Wang 2019, Thm. 6; fractional orders use ⌈α⌉). `eps` = 1/scale. For integer α ≥ 2:
/// (α−1)·RDP ≤ ln[(1−q)^{α−1}(αq − q + 1) + C(α,2) q² (1−q)^{α−2} e^{ε(2)}
///                + 3 Σ_{ℓ=3}^{α} C(α,ℓ)(1−q)^{α−ℓ} q^ℓ e^{(ℓ−1)ε(ℓ)}],
/// with ε(ℓ) the Laplace RDP at order ℓ.
pub fn rdp_poisson_laplace(q: f64, eps: f64, alpha: f64) -> f64 {
    if q == 0.0 {
        return 0.0;
    }
    if q == 1.0 {
        return rdp_laplace(eps, alpha);
    }
    if eps.is_infinite() || alpha.is_infinite() {
        return f64::INFINITY;
    }
    let a = alpha.ceil().max(2.0) as u64;
    let ln_q = q.ln();
    let ln_1mq = (-q).ln_1p();
    let af = a as f64;
    let mut terms = Vec::with_capacity(a as usize);
    // (1−q)^{α−1}(αq − q + 1)
    terms.push((af - 1.0) * ln_1mq + ((af - 1.0) * q).ln_1p());
    // C(α,2) q² (1−q)^{α−2} e^{ε(2)}
    terms.push(ln_binom(a, 2) + 2.0 * ln_q + (af - 2.0) * ln_1mq + rdp_laplace(eps, 2.0));
    for l in 3..=a {
        let lf = l as f64;
        terms.push(
            3f64.ln()
                + ln_binom(a, l)
                + (af - lf) * ln_1mq
                + lf * ln_q
                + (lf - 1.0) * rdp_laplace(eps, lf),
        );
    }
    (log_sum_exp(&terms) / (af - 1.0)).max(0.0)
}

/// One step's mechanism, as the RDP accountant sees it after flattening events.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RdpKernel {
    /// Full-batch Gaussian with this noise multiplier.
    Gaussian { sigma: f64 },
    /// Poisson-subsampled Gaussian (add/remove one).
    PoissonGaussian { q: f64, sigma: f64 },
    /// Gaussian on a batch sampled without replacement (replace one), q = batch/dataset.
    WorGaussian { q: f64, sigma: f64 },
    /// Laplace with pure-DP parameter eps = 1/scale.
    Laplace { eps: f64 },
    /// Poisson-subsampled Laplace (add/remove one).
    PoissonLaplace { q: f64, eps: f64 },
    /// Laplace on a batch sampled without replacement (replace one), q = batch/dataset.
    WorLaplace { q: f64, eps: f64 },
    /// One epoch of random allocation over `steps` Gaussian steps (add/remove one).
    RandomAllocationGaussian { steps: u64, sigma: f64 },
}

impl RdpKernel {
    /// RDP of one step at order `alpha`.
    pub fn rdp(&self, alpha: f64) -> f64 {
        match *self {
            RdpKernel::Gaussian { sigma } => rdp_gaussian(sigma, alpha),
            RdpKernel::PoissonGaussian { q, sigma } => rdp_poisson_gaussian(q, sigma, alpha),
            RdpKernel::WorGaussian { q, sigma } => rdp_wor_gaussian(q, sigma, alpha),
            RdpKernel::Laplace { eps } => rdp_laplace(eps, alpha),
            RdpKernel::PoissonLaplace { q, eps } => rdp_poisson_laplace(q, eps, alpha),
            RdpKernel::WorLaplace { q, eps } => rdp_wor_laplace(q, eps, alpha),
            RdpKernel::RandomAllocationGaussian { steps, sigma } => {
                rdp_random_allocation_gaussian(steps, sigma, alpha)
            }
        }
    }

    /// True when the value is an exact Rényi divergence (so (α−1)·RDP is convex in α and RDP is
    /// non-decreasing), which licenses branch and bound over orders.
    pub(super) fn is_exact(&self) -> bool {
        match self {
            RdpKernel::Gaussian { .. }
            | RdpKernel::PoissonGaussian { .. }
            | RdpKernel::Laplace { .. } => true,
            RdpKernel::WorGaussian { .. }
            | RdpKernel::PoissonLaplace { .. }
            | RdpKernel::WorLaplace { .. }
            | RdpKernel::RandomAllocationGaussian { .. } => false,
        }
    }
}

/// A hashable identity of a kernel (its variant and parameters' bits).
pub(super) fn kernel_key(kernel: &RdpKernel) -> [u64; 3] {
    match *kernel {
        RdpKernel::Gaussian { sigma } => [0, 0, sigma.to_bits()],
        RdpKernel::PoissonGaussian { q, sigma } => [1, q.to_bits(), sigma.to_bits()],
        RdpKernel::WorGaussian { q, sigma } => [2, q.to_bits(), sigma.to_bits()],
        RdpKernel::Laplace { eps } => [3, 0, eps.to_bits()],
        RdpKernel::PoissonLaplace { q, eps } => [4, q.to_bits(), eps.to_bits()],
        RdpKernel::WorLaplace { q, eps } => [5, q.to_bits(), eps.to_bits()],
        RdpKernel::RandomAllocationGaussian { steps, sigma } => [6, steps, sigma.to_bits()],
    }
}
