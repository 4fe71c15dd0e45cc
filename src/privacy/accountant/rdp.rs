//! The Rényi-DP accountant (room: `privacy::accountant`). Owns the RDP maths kernels (free
//! functions), the RDP → (ε, δ) conversions, and [`RdpAccountant`], which only accumulates events
//! into per-order RDP totals. Must not: read training code, print, or allocate from untrusted sizes.
//!
//! # Maths
//!
//! - Poisson-subsampled Gaussian (add/remove one): RDP(α) = ln A_α / (α − 1) with
//!   A_α = E_{z∼N(0,σ²)}[((1 − q) + q·e^{(2z − 1)/(2σ²)})^α] (Mironov, Talwar, Zhang 2019, "Rényi
//!   Differential Privacy of the Sampled Gaussian Mechanism", §3.3). Integer α: the binomial
//!   expansion, summed as A_α − 1 = Σ_{i≥2} C(α,i) q^i (1−q)^{α−i} (e^{i(i−1)/(2σ²)} − 1) so that
//!   small RDP keeps its relative precision. Fractional α: the exact *signed* series of §3.3 (the
//!   binomial coefficients of a fractional α alternate in sign), as Opacus does — not dp_accounting's
//!   sum of absolute values, which is an upper bound (0.00531657 vs 0.00531629 at q=.04, σ=1.5,
//!   α=3.9).
//! - Sensitivity: every noise parameter is relative to the add/remove-one sensitivity; under
//!   replace-one a release is analysed at distance 2 (σ/2, Laplace ε = 2/b), also as the base
//!   mechanism of sampling without replacement (`NeighbouringRelation::sensitivity_factor`).
//!   Poisson sampling is analysed under add/remove-one only.
//! - Full-batch Gaussian: RDP(α) = α/(2σ²) (Mironov 2017, "Rényi Differential Privacy", Prop. 7).
//! - Laplace with scale b (ε = 1/b): Mironov 2017 Prop. 6,
//!   RDP(α) = ε + ln(1 + (α−1)(e^{(1−2α)ε} − 1)/(2α−1)) / (α−1).
//! - Poisson-subsampled Laplace: the general subsampled-RDP upper bound of Zhu and Wang 2019
//!   ("Poisson Subsampled Rényi Differential Privacy", Thm. 6) at integer α ≥ 2, see
//!   [`rdp_poisson_laplace`]; a fractional order uses the bound at ⌈α⌉ (RDP is non-decreasing
//!   in α).
//! - Gaussian on a batch sampled without replacement (replace one): Wang, Balle, Kasiviswanathan
//!   2019 ("Subsampled Rényi Differential Privacy and Analytical Moments Accountant", Thm. 9 with
//!   ε(∞) = ∞), see [`rdp_wor_gaussian`]; fractional α interpolates the cumulant linearly between
//!   ⌊α⌋ and ⌈α⌉ (their Cor. 10). dp_accounting additionally tightens the j ≥ 3 terms with
//!   forward differences for α ≤ 256; dpx uses the plain bound, so it can be slightly larger
//!   (more conservative) there. Both without-replacement bounds are capped by the base
//!   mechanism's RDP (joint quasi-convexity of the Rényi divergence), which they exceed near
//!   q = 1, so ε never grows when the batch grows to the whole dataset.
//! - Laplace on a batch sampled without replacement (replace one): the same Thm. 9 of Wang,
//!   Balle, Kasiviswanathan 2019 with ε(∞) = 1/scale (Laplace is pure DP), see [`rdp_wor_laplace`].
//! - Composition: RDP vectors add (Mironov 2017 Prop. 1), also across heterogeneous steps.
//! - Conversion to (ε, δ): Balle, Barthe, Gaboardi, Hsu, Sato 2020 ("Hypothesis testing
//!   interpretations and Rényi DP", Thm. 21), exactly as dp_accounting's `compute_epsilon` /
//!   `compute_delta` (KL shortcut δ² + e^{−r} − 1 > 0 ⇒ ε = 0, orders ≤ 1.01 skipped, ε clamped at
//!   0); `Classic` is Mironov 2017 Prop. 3, ε = r + ln(1/δ)/(α − 1), for reproducing older numbers.
//!
//! # Speed
//!
//! The accountant keeps the run-length history of per-step kernels and, per order, a cached
//! running total. When every kernel is an exact Rényi divergence (all but the two bounds above),
//! (α − 1)·RDP(α) is a cumulant generating function — convex in α, zero at α = 1 — and RDP is
//! non-decreasing in α. So ε(δ) = min over the grid is found by branch and bound: orders whose
//! lower bound cannot beat the best are never evaluated. The minimum is the same as over the full
//! grid.
//!
//! Short pending histories use lower bounds from exactly evaluated neighbours (monotonicity and
//! convexity), seeded at the cheap integer orders 2, 4, …, 64; their cached totals make repeated
//! queries incremental. When every order has a long pending history (≥ 4,096 segments, e.g. a
//! fresh schedule of thousands of distinct σ_t), the orders first get rigorous *binned* lower
//! bounds instead: RDP is
//! non-increasing in σ (data processing), so sorting the Gaussian steps by (q, σ), cutting them
//! into cells of relative width w and charging every step the RDP at its cell's largest σ gives
//! a lower bound on the exact total for one evaluation per cell (slack 1e-9 relative for
//! rounding). Best-first search then refines the order whose bound on the objective is smallest —
//! one cell per sampling rate, then w = 5e-2, 1.25e-2, 3e-3, 8e-4, 2e-4, then the exact total
//! (directly once a level would have more than 40% as many cells as segments, or 10% before any
//! order is exact) — and stops when that order is exact: its exact ε is at most every other
//! order's lower bound. Bounds from smaller orders (RDP non-decreasing in α) and the convexity
//! bounds from exact orders are used too. On the 40,000-step ramp of the benchmark only the two
//! orders nearest the optimum (5.6 and 5.7) are summed exactly; the others are excluded by
//! bounds costing a few hundred to a few thousand kernel evaluations each. Exact totals and large
//! bound sums run on the rayon pool in fixed chunks added in order, so results do not depend on
//! the thread count.
//!
//! The fractional-order kernel ([`log_a_poisson_gaussian_frac`]) evaluates the same exact series
//! as the reference ([`log_a_poisson_gaussian_frac_reference`]) without an exp or erfc per term:
//! every term is a Mills-ratio multiple of one constant, products give the rest, the Mills ratio
//! is computed only to the precision a term needs, and the slowly decaying alternating tail is
//! summed by a convergence acceleration with a proven error bound.
//!
//! [`RdpAccountant::with_sigma_grid`] remains an opt-in conservative approximation: σ rounded down
//! to a fine geometric grid, equal steps grouped (ε can only grow; the sandwich against the exact
//! value is tested).

use std::sync::{Mutex, OnceLock};

use crate::privacy::accountant::{
    Accountant, AccountantKind, AccountingError, PrivacyReport, RdpConversion,
};
use crate::privacy::event::{DpEvent, NeighbouringRelation};
use crate::privacy::special::{ln_gamma, log_add_exp, log_normal_cdf};

/// dp_accounting's `DEFAULT_RDP_ORDERS`: 1.1, 1.2, …, 10.9, 11, …, 63, 128, 256, 512, 1024.
pub fn default_orders() -> Vec<f64> {
    let mut orders: Vec<f64> = (1..100).map(|x| 1.0 + f64::from(x) / 10.0).collect();
    orders.extend((11..64).map(f64::from));
    orders.extend([128.0, 256.0, 512.0, 1024.0]);
    orders
}

/// Opacus's `RDPAccountant.DEFAULT_ALPHAS`: 1.1, …, 10.9, 12, …, 63.
pub fn opacus_orders() -> Vec<f64> {
    let mut orders: Vec<f64> = (1..100).map(|x| 1.0 + f64::from(x) / 10.0).collect();
    orders.extend((12..64).map(f64::from));
    orders
}

/// The orders of TF Privacy's `compute_dp_sgd_privacy`:
/// 1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5, 5, …, 63, 128, 256, 512.
pub fn tfp_orders() -> Vec<f64> {
    let mut orders = vec![1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5];
    orders.extend((5..64).map(f64::from));
    orders.extend([128.0, 256.0, 512.0]);
    orders
}

const LN_FACT_TABLE: usize = 4097;

fn ln_factorial(n: u64) -> f64 {
    static TABLE: OnceLock<Vec<f64>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..LN_FACT_TABLE)
            .map(|k| ln_gamma(k as f64 + 1.0))
            .collect()
    });
    match usize::try_from(n) {
        Ok(k) if k < LN_FACT_TABLE => table[k],
        _ => ln_gamma(n as f64 + 1.0),
    }
}

fn ln_binom(n: u64, k: u64) -> f64 {
    ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k)
}

/// ln(e^x − 1) for x > 0, stable at both ends.
fn ln_expm1(x: f64) -> f64 {
    if x > 50.0 { x } else { x.exp_m1().ln() }
}

/// ln Σ e^{v_i} over a slice (−∞ when empty).
fn log_sum_exp(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max.is_infinite() {
        return max;
    }
    let sum: f64 = values
        .iter()
        .filter(|&&v| v - max > -60.0)
        .map(|&v| (v - max).exp())
        .sum();
    max + sum.ln()
}

/// ln A_α of the Poisson-subsampled Gaussian at an integer order α ≥ 2, 0 < q < 1
/// (Mironov, Talwar, Zhang 2019, §3.3, integer case).
///
/// A_α = Σ_{i=0}^{α} t_i with t_i = C(α,i) q^i (1−q)^{α−i} e^{i(i−1)/(2σ²)}. The sum is returned as
/// ln(1 + Σ_{i≥2} C(α,i) q^i (1−q)^{α−i} (e^{i(i−1)/(2σ²)} − 1)) (all terms positive, since the
/// i = 0, 1 terms and the binomial mass sum to 1), so small RDP keeps its relative precision.
///
/// Only terms within e^{−40} of the largest are summed (the rest change A by < (α+1)·e^{−40}
/// relative, below 4.3e-15 for α ≤ 1024). They are found without visiting every i: the log-ratio
/// h(i) = ln t_{i+1} − ln t_i = ln((α−i)/(i+1)) + ln(q/(1−q)) + i/σ² is decreasing, increasing,
/// then decreasing in i (h′ = 1/σ² − 1/(α−i) − 1/(i+1)), so ln t_i has at most two local maxima,
/// located by bisection on h; the sum extends from each while terms stay above the threshold.
pub fn log_a_poisson_gaussian_int(q: f64, sigma: f64, alpha: u64) -> f64 {
    if alpha <= 64 {
        // Few terms: summing them all is cheaper than locating the peaks.
        return log_a_poisson_gaussian_int_full(q, sigma, alpha);
    }
    let a = alpha as f64;
    let ln_q = q.ln();
    let ln_1mq = (-q).ln_1p();
    let c = 1.0 / (2.0 * sigma * sigma);
    let ln_term = |i: u64| {
        let fi = i as f64;
        ln_binom(alpha, i) + fi * ln_q + (a - fi) * ln_1mq + fi * (fi - 1.0) * c
    };
    let ratio = ln_q - ln_1mq;
    let h = |i: u64| {
        let fi = i as f64;
        (a - fi).ln() - (fi + 1.0).ln() + ratio + 2.0 * fi * c
    };
    let last = alpha - 1; // h is defined on 0..=α−1
    // Turning points of h: (α − x)(x + 1) = σ²(α + 1).
    let disc = (a - 1.0).powi(2) - 4.0 * (sigma * sigma * (a + 1.0) - a);
    let (x1, x2) = if disc > 0.0 {
        let r = disc.sqrt();
        (
            ((a - 1.0 - r) / 2.0).clamp(0.0, last as f64),
            ((a - 1.0 + r) / 2.0).clamp(0.0, last as f64),
        )
    } else {
        (last as f64, last as f64)
    };
    // First integer in [lo, hi] with h ≤ 0, given h decreasing on it, h(lo) > 0 and h(hi) ≤ 0.
    let bisect = |mut lo: u64, mut hi: u64| {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if h(mid) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    };
    let mut candidates: Vec<u64> = vec![0, alpha];
    // First local maximum, in the region where h decreases from i = 0.
    let f1 = x1.floor() as u64;
    let c1 = (x1.ceil() as u64).min(last);
    if h(0) <= 0.0 {
        candidates.push(0);
    } else if h(f1) <= 0.0 {
        candidates.push(bisect(0, f1));
    } else if h(c1) <= 0.0 {
        candidates.push(c1);
    }
    // Second local maximum, in the region where h decreases towards i = α − 1.
    if h(last) > 0.0 {
        candidates.push(alpha);
    } else {
        let s = (x2.ceil() as u64).min(last);
        if h(s) > 0.0 {
            candidates.push(bisect(s, last));
        } else if s >= 1 && h(s - 1) > 0.0 {
            candidates.push(s);
        }
    }
    let max = candidates
        .iter()
        .map(|&i| ln_term(i))
        .fold(f64::NEG_INFINITY, f64::max);
    let threshold = max - 40.0;
    let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(candidates.len());
    for &p in &candidates {
        if ln_term(p) < threshold {
            continue;
        }
        let mut lo = p;
        while lo > 0 && ln_term(lo - 1) >= threshold {
            lo -= 1;
        }
        let mut hi = p;
        while hi < alpha && ln_term(hi + 1) >= threshold {
            hi += 1;
        }
        ranges.push((lo, hi));
    }
    ranges.sort_unstable();
    // Sum e^{ln t_i − x_i + ln(e^{x_i} − 1) − max} over the union of ranges, for i ≥ 2.
    let mut sum = 0.0f64;
    let mut next = 2u64; // first index not yet summed
    for (lo, hi) in ranges {
        for i in lo.max(next)..=hi {
            let x = (i * (i - 1)) as f64 * c;
            let base = ln_term(i) - x - max;
            sum += if x < 600.0 {
                base.exp() * x.exp_m1()
            } else {
                (base + x).exp()
            };
        }
        next = next.max(hi + 1);
    }
    if sum == 0.0 {
        return 0.0;
    }
    log_add_exp(0.0, sum.ln() + max)
}

/// ln A_α at an integer order by the plain sum over every i (the reference the fast kernel is
/// tested against).
pub fn log_a_poisson_gaussian_int_full(q: f64, sigma: f64, alpha: u64) -> f64 {
    let ln_q = q.ln();
    let ln_1mq = (-q).ln_1p();
    let c = 1.0 / (2.0 * sigma * sigma);
    // ln of C(α,i) q^i (1−q)^{α−i} and the exponent x_i = i(i−1)/(2σ²), for i ≥ 2.
    let mut max = f64::NEG_INFINITY;
    let mut terms = [(0.0f64, 0.0f64); 64];
    let mut heap = Vec::new();
    let store: &mut [(f64, f64)] = if alpha <= 65 {
        &mut terms[..(alpha as usize).saturating_sub(1)]
    } else {
        heap.resize((alpha - 1) as usize, (0.0, 0.0));
        &mut heap
    };
    for (slot, i) in store.iter_mut().zip(2..=alpha) {
        let base = ln_binom(alpha, i) + i as f64 * ln_q + (alpha - i) as f64 * ln_1mq;
        let x = (i * (i - 1)) as f64 * c;
        *slot = (base, x);
        max = max.max(base + x);
    }
    if max == f64::NEG_INFINITY {
        return 0.0;
    }
    // Σ e^{base} (e^{x} − 1), scaled by e^{−max}; terms below e^{−40}·max are negligible.
    let mut sum = 0.0f64;
    for &(base, x) in store.iter() {
        if base + x - max < -40.0 {
            continue;
        }
        sum += if x < 600.0 {
            (base - max).exp() * x.exp_m1()
        } else {
            (base + x - max).exp()
        };
    }
    if sum == 0.0 {
        return 0.0;
    }
    log_add_exp(0.0, sum.ln() + max)
}

/// Series iterations before a fractional-order computation stops. The second half of the series
/// can decay only polynomially (like i^{−α−2}) when e^{−z₀²/(2σ²)} is not small (large q, small
/// σ); it then alternates, and the upper bracket of the last two partial sums is returned.
/// Otherwise +∞ (conservative: the order is then never optimal).
const MAX_SERIES_TERMS: usize = 4000;

/// √(π/2) = R(0), the Mills ratio at 0.
const SQRT_FRAC_PI_2: f64 = 1.253_314_137_315_500_3;

/// ln √(2π).
const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// erfcx(x) = e^{x²}·erfc(x) for x ≥ 0, to about 1e-15 relative. Below 1.25 it is libm's erfc times
/// e^{x²}; on [1.25, 26) the rational approximations of FreeBSD's `s_erf.c` (the ones libm's
/// `erfc` uses; coefficients © 1993 Sun Microsystems, "Permission to use, copy, modify, and
/// distribute this software is freely granted, provided that this notice is preserved"), which
/// approximate ln(x·erfc(x)) + x² + 0.5625, so erfcx = e^{R/S − 0.5625}/x costs one exp instead of
/// erfc's two; from 26 on the asymptotic series 1/(x√π)·Σ_k (−1)^k (2k−1)!!/(2x²)^k, whose
/// ninth term is below 1e-18.
fn erfcx(x: f64) -> f64 {
    const RA: [f64; 8] = [
        -9.864_944_034_847_148e-3,
        -6.938_585_727_071_818e-1,
        -1.055_862_622_532_329_1e1,
        -6.237_533_245_032_601e1,
        -1.623_966_694_625_734_7e2,
        -1.846_050_929_067_110_4e2,
        -8.128_743_550_630_66e1,
        -9.814_329_344_169_145,
    ];
    const SA: [f64; 8] = [
        1.965_127_166_743_925_7e1,
        1.376_577_541_435_190_4e2,
        4.345_658_774_752_292_3e2,
        6.453_872_717_332_679e2,
        4.290_081_400_275_678e2,
        1.086_350_055_417_794_3e2,
        6.570_249_770_319_282,
        -6.042_441_521_485_81e-2,
    ];
    const RB: [f64; 7] = [
        -9.864_942_924_700_1e-3,
        -7.992_832_376_805_23e-1,
        -1.775_795_491_775_475_2e1,
        -1.606_363_848_558_219_2e2,
        -6.375_664_433_683_896e2,
        -1.025_095_131_611_077_2e3,
        -4.835_191_916_086_514e2,
    ];
    const SB: [f64; 7] = [
        3.033_806_074_348_246e1,
        3.257_925_129_965_739e2,
        1.536_729_586_084_437e3,
        3.199_858_219_508_595_5e3,
        2.553_050_406_433_164_4e3,
        4.745_285_412_069_554e2,
        -2.244_095_244_658_582e1,
    ];
    fn poly(coefs: &[f64], s: f64) -> f64 {
        coefs.iter().rev().fold(0.0, |acc, &c| acc * s + c)
    }
    if x < 1.25 {
        return libm::erfc(x) * (x * x).exp();
    }
    if x < 26.0 {
        let s = 1.0 / (x * x);
        let (r, big_s) = if x < 1.0 / 0.35 {
            (poly(&RA, s), 1.0 + s * poly(&SA, s))
        } else {
            (poly(&RB, s), 1.0 + s * poly(&SB, s))
        };
        return (r / big_s - 0.5625).exp() / x;
    }
    let v = 0.5 / (x * x);
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..=8 {
        term *= -f64::from(2 * k - 1) * v;
        sum += term;
    }
    sum / (x * std::f64::consts::PI.sqrt())
}

/// The Mills ratio R(t) = (1 − Φ(t))/φ(t) = √(π/2)·erfcx(t/√2) for t ≥ 0. R is decreasing, with
/// R(0) = √(π/2) and R(t) < 1/t.
fn mills_ratio(t: f64) -> f64 {
    SQRT_FRAC_PI_2 * erfcx(t * std::f64::consts::FRAC_1_SQRT_2)
}

/// An upper bound on the Mills ratio R(t), t ≥ 0 (R(t) ≤ min(R(0), 1/t)).
fn mills_ratio_bound(t: f64) -> f64 {
    if t > 1.0 { 1.0 / t } else { SQRT_FRAC_PI_2 }
}

/// Terms of the alternating tail of the fractional series summed by [`alternating_sum`] when it has
/// not converged directly: its error is at most 2·(3 + √8)^{−22} < 3e-17 of the tail.
const TAIL_TERMS: usize = 22;

/// Σ_{k≥0} (−1)^k a_k from a_0, …, a_{n−1}, when (a_k) is a Hausdorff moment sequence
/// (a_k = ∫₀¹ x^k dμ(x) with μ ≥ 0): Algorithm 1 of Cohen, Rodriguez Villegas and Zagier 2000
/// ("Convergence acceleration of alternating series", Experiment. Math. 9), whose error is at most
/// 2·(3 + √8)^{−n} times the sum.
fn alternating_sum(a: &[f64]) -> f64 {
    let n = a.len() as f64;
    let d = (3.0 + 8f64.sqrt()).powf(n);
    let d = (d + 1.0 / d) / 2.0;
    let mut b = -1.0f64;
    let mut c = -d;
    let mut s = 0.0f64;
    for (k, &ak) in a.iter().enumerate() {
        let k = k as f64;
        c = b - c;
        s += c * ak;
        b = (k + n) * (k - n) * b / ((k + 0.5) * (k + 1.0));
    }
    s / d
}

/// A term below this fraction of the partial sum (and of its own leading factor) is not
/// evaluated: it cannot change the sum in double precision.
const NEGLIGIBLE: f64 = 1e-20;

/// ln A_α of the Poisson-subsampled Gaussian at a fractional order α > 1, 0 < q < 1: the same
/// exact signed series as [`log_a_poisson_gaussian_frac_reference`] (Mironov, Talwar, Zhang 2019,
/// §3.3), evaluated without an exp or erfc per term.
///
/// With z₀ = σ² ln(1/q − 1) + 1/2 and c = 1/(2σ²), the i-th pair of terms is |C(α,i)| times
/// P₀(i)·Φ(x₀) and P₁(i)·Φ(x₁), where P₀(i) = q^i (1−q)^{α−i} e^{(i²−i)c}, x₀ = (z₀ − i)/σ,
/// P₁(i) = q^{α−i} (1−q)^i e^{((α−i)²−(α−i))c}, x₁ = (α − i − z₀)/σ. Because (2z₀ − 1)c = ln((1−q)/q),
/// P₀(i)·φ(x₀) = P₁(i)·φ(x₁) = K := (1−q)^α e^{−z₀²c}/√(2π) for every i (φ the normal density). With
/// the Mills ratio R(t) = (1 − Φ(t))/φ(t) each factor becomes
/// P·Φ(x) = P − K·R(x) for x ≥ 0 and K·R(−x) for x < 0,
/// and P₀, P₁ follow by products (P₀(i+1) = P₀(i)·(q/(1−q))·e^{2ic},
/// P₁(i+1) = P₁(i)·((1−q)/q)·e^{−2(α−i−1)c}). So a term costs a few multiplications, plus one exp
/// (inside R) only where K·R matters: K·R ≤ K·min(R(0), 1/x) tells when it is negligible, and
/// where it needs only a few digits the midpoint of Birnbaum's (1942) and Sampford's (1953)
/// algebraic bounds on R replaces the exp.
///
/// Both factors P·Φ(x) = √(2π)K·e^{x²/2}Φ(x) are decreasing in i, since x decreases with i and
/// d/dx[e^{x²/2}Φ(x)] = e^{x²/2}(xΦ(x) + φ(x)) is positive; so both terms decrease once |C(α,i)|
/// does, i.e. for i ≥ (α+1)/2. The stopping rule of the reference (terms decreasing and below
/// 1e-12 of ln A, upper bracket past i > α) is applied from there, never earlier than the
/// reference applies it.
///
/// Past i > α the terms alternate in sign and may decay only polynomially (like i^{−α−2} when
/// e^{−z₀²c} is not small), which costs the reference hundreds of terms at small σ. Their
/// magnitudes |C(α,i)|·K·(R(t₀) + R(t₁)), t₀ = (i − z₀)/σ, t₁ = (i + z₀ − α)/σ (valid for every i, as
/// Φ(x) = φ(x)R(−x)), form a Hausdorff moment sequence in i ≥ m = ⌊α⌋ + 1: for i > α,
/// |C(α,i)| = (|sin πα|/π)·∫₀¹ x^{i−α−1}(1−x)^α dx, and R(t) = ∫₀^∞ e^{−ts − s²/2} ds makes each
/// R(t_m + (i − m)/σ) a moment sequence in x = e^{−s/σ}; products and sums of moment sequences
/// are moment sequences. So unless the terms converge directly first, the tail is summed from its
/// first n ≤ 22 terms by the Cohen–Rodriguez Villegas–Zagier acceleration ([`alternating_sum`]),
/// whose error is at most 2·(3 + √8)^{−n} of the tail, hence of its first term; n is the smallest
/// that keeps this below 1e-17 of the partial sum before the tail. Falls back to the reference if a term
/// overflows (orders in the thousands).
pub fn log_a_poisson_gaussian_frac(q: f64, sigma: f64, alpha: f64) -> f64 {
    let ln_q = q.ln();
    let ln_1mq = (-q).ln_1p();
    let c = 1.0 / (2.0 * sigma * sigma);
    let z0 = sigma * sigma * (1.0 / q - 1.0).ln() + 0.5;
    // Scale: the larger i = 0 factor, roughly (Φ bounded by its Gaussian tail where small).
    let x_top = (alpha - z0) / sigma;
    let top1 = alpha * ln_q + (alpha * alpha - alpha) * c;
    let reference = (alpha * ln_1mq).max(if x_top < 0.0 {
        top1 - 0.5 * x_top * x_top
    } else {
        top1
    });
    let k = (alpha * ln_1mq - c * z0 * z0 - LN_SQRT_2PI - reference).exp();
    let mut p0 = if reference == alpha * ln_1mq {
        1.0
    } else {
        (alpha * ln_1mq - reference).exp()
    };
    let ratio = q / (1.0 - q);
    let inv_ratio = (1.0 - q) / q;
    let e2c = (2.0 * c).exp();
    let mut grow = 1.0f64; // e^{2ic}
    // P₁ is used only while x₁ ≥ 0, i.e. never when α < z₀ (small q: the common case).
    let (mut p1, mut shrink) = if x_top >= 0.0 {
        // shrink = e^{−2(α−1−i)c}
        ((top1 - reference).exp(), (-2.0 * (alpha - 1.0) * c).exp())
    } else {
        (0.0, 0.0)
    };
    let decreasing_from = (alpha + 1.0) / 2.0;
    // P·Φ(x) for the factor P and argument x of one term; `scale` is |C(α,i)|.
    // K·R(t), to the precision the term |C(α,i)|·K·R(t) needs: within 1e-17 of the partial sum
    // (partial sums of the positive head only grow; past α they straddle the limit), the midpoint
    // of Birnbaum's and Sampford's bounds 2/(t + √(t²+4)) < R(t) < 4/(3t + √(t²+8)) will do.
    let k_mills = |t: f64, scale: f64, sum: f64| -> f64 {
        let lo = 2.0 / (t + (t * t + 4.0).sqrt());
        let hi = 4.0 / (3.0 * t + (t * t + 8.0).sqrt());
        if scale * k * (hi - lo) <= 2e-17 * sum {
            k * 0.5 * (lo + hi)
        } else {
            k * mills_ratio(t)
        }
    };
    // P·Φ(x) for the factor P and argument x of one term; `scale` is |C(α,i)|.
    let factor = |p: f64, x: f64, scale: f64, sum: f64| -> f64 {
        if x >= 0.0 {
            if k * mills_ratio_bound(x) <= p * NEGLIGIBLE {
                p
            } else {
                p - k_mills(x, scale, sum)
            }
        } else if scale * k * mills_ratio_bound(-x) <= sum * NEGLIGIBLE {
            // Negligible: its bound stands in for the stopping rule; the sum does not see it.
            -k * mills_ratio_bound(-x)
        } else {
            k_mills(-x, scale, sum)
        }
    };
    let mut coef = 1.0f64;
    let mut sum = 0.0f64;
    // The tail i ≥ m (first index past α), for acceleration.
    let m = alpha.floor() as usize + 1;
    let mut tail = [0.0f64; TAIL_TERMS];
    let mut head = 0.0f64;
    let mut tail_sign = 1.0f64;
    let mut tail_terms = TAIL_TERMS;
    for i in 0..MAX_SERIES_TERMS {
        let fi = i as f64;
        let j = alpha - fi;
        let x0 = (z0 - fi) / sigma;
        let x1 = (j - z0) / sigma;
        let scale = coef.abs();
        let f0 = factor(p0, x0, scale, sum);
        let f1 = factor(p1, x1, scale, sum);
        // Negative values mark negligible terms: their bound counts for stopping only.
        let a0 = scale * f0.abs();
        let a1 = scale * f1.abs();
        let previous_sum = sum;
        let add = scale * (f0.max(0.0) + f1.max(0.0));
        sum += coef.signum() * add;
        if !(sum.is_finite() && a0.is_finite() && a1.is_finite()) {
            return log_a_poisson_gaussian_frac_reference(q, sigma, alpha);
        }
        let decreasing = fi >= decreasing_from;
        let largest = a0.max(a1);
        let converged = series_converged(decreasing, largest, sum, reference);
        if converged || i + 1 == MAX_SERIES_TERMS {
            return series_end(
                converged,
                decreasing,
                fi,
                alpha,
                sum,
                previous_sum,
                reference,
            );
        }
        if i >= m {
            if i == m {
                head = previous_sum;
                tail_sign = coef.signum();
                // The tail S ≤ its first term b_m, and the acceleration's error is at most
                // 2·(3 + √8)^{−n}·S: take the fewest terms that keep it below 1e-17 of the head.
                if head > 0.0 && add > 0.0 {
                    let need = (2e17 * add / head).ln() / (3.0 + 8f64.sqrt()).ln();
                    tail_terms = (need.ceil().max(1.0) as usize).min(TAIL_TERMS);
                } else if add == 0.0 {
                    tail_terms = 1;
                }
            }
            tail[i - m] = add;
            if i + 1 == m + tail_terms {
                // Not converged yet (the tail decays only polynomially): sum it by acceleration.
                let total = head + tail_sign * alternating_sum(&tail[..tail_terms]);
                return if total > 0.0 {
                    total.ln() + reference
                } else {
                    f64::INFINITY
                };
            }
        }
        // Advance the products while an argument is still ≥ 0 (beyond, only K·R is used).
        if x0 >= 0.0 {
            p0 *= ratio * grow;
            grow *= e2c;
        }
        if x1 >= 0.0 {
            p1 *= inv_ratio * shrink;
            shrink *= e2c;
        }
        coef *= (alpha - fi) / (fi + 1.0);
    }
    f64::INFINITY
}

/// The fractional series' stopping test, shared by [`log_a_poisson_gaussian_frac`] and its
/// reference: both terms decrease and the largest changes ln A by less than 1e-12 of ln A (or
/// 1e-15 absolute). `sum` is the partial sum relative to e^`reference`.
fn series_converged(decreasing: bool, largest: f64, sum: f64, reference: f64) -> bool {
    decreasing
        && largest < 9.4e-14 * sum
        && largest < sum * (1e-12 * (sum.ln() + reference)).max(1e-15)
}

/// ln A when the fractional series stops at term `fi` (converged, or out of terms). Past i > α
/// the terms alternate in sign, so consecutive partial sums bracket the limit: the larger one is
/// returned, an upper bound. Out of terms without that bracket: +∞ (conservative).
fn series_end(
    converged: bool,
    decreasing: bool,
    fi: f64,
    alpha: f64,
    sum: f64,
    previous_sum: f64,
    reference: f64,
) -> f64 {
    let upper = if fi > alpha {
        sum.max(previous_sum)
    } else {
        sum
    };
    if (converged || (decreasing && fi > alpha)) && upper > 0.0 {
        upper.ln() + reference
    } else {
        f64::INFINITY
    }
}

/// The reference (slower) evaluation of [`log_a_poisson_gaussian_frac`]: ln A_α of the
/// Poisson-subsampled Gaussian at a fractional order α > 1, 0 < q < 1, by the exact
/// signed series of Mironov, Talwar, Zhang 2019, §3.3:
/// A = Σ_i C(α,i) [q^i (1−q)^{α−i} e^{(i²−i)/(2σ²)} Φ((z₀−i)/σ)
///                 + q^{α−i} (1−q)^i e^{((α−i)²−(α−i))/(2σ²)} Φ((α−i−z₀)/σ)],
/// z₀ = σ² ln(1/q − 1) + 1/2, where C(α,i) is the (signed) generalised binomial coefficient.
/// Stops when both terms decrease and change ln A by less than 1e-12 relative.
pub fn log_a_poisson_gaussian_frac_reference(q: f64, sigma: f64, alpha: f64) -> f64 {
    let ln_q = q.ln();
    let ln_1mq = (-q).ln_1p();
    let inv_2s2 = 1.0 / (2.0 * sigma * sigma);
    let z0 = sigma * sigma * (1.0 / q - 1.0).ln() + 0.5;
    // Terms are summed in linear space relative to the larger i = 0 term, which is O(1) in
    // practice; the log-space fallback handles overflow. The coefficient C(α, i) is kept in
    // linear space (it decays polynomially), so one iteration costs two exp and two erfc.
    let reference = (alpha * ln_1mq + log_normal_cdf(z0 / sigma)).max(
        alpha * ln_q + (alpha * alpha - alpha) * inv_2s2 + log_normal_cdf((alpha - z0) / sigma),
    );
    let mut coef = 1.0f64;
    let mut sum = 0.0f64;
    let (mut last0, mut last1) = (f64::INFINITY, f64::INFINITY);
    for i in 0..MAX_SERIES_TERMS {
        let fi = i as f64;
        let j = alpha - fi;
        let e0 = fi * ln_q + j * ln_1mq + (fi * fi - fi) * inv_2s2 - reference;
        let e1 = j * ln_q + fi * ln_1mq + (j * j - j) * inv_2s2 - reference;
        let a0 = coef.abs() * exp_times_normal_cdf(e0, (z0 - fi) / sigma);
        let a1 = coef.abs() * exp_times_normal_cdf(e1, (j - z0) / sigma);
        if !(a0.is_finite() && a1.is_finite()) {
            return log_a_poisson_gaussian_frac_logspace(q, sigma, alpha);
        }
        let previous_sum = sum;
        sum += coef.signum() * (a0 + a1);
        let decreasing = a0 < last0 && a1 < last1;
        // Stop once both terms decrease and change ln A by less than 1e-12 of ln A (or 1e-15
        // absolute). Past i > α the terms alternate in sign, so consecutive partial sums bracket
        // the limit: return the larger one, an upper bound within that tolerance. The second half
        // can decay only polynomially (like i^{−α−2}) when e^{−z₀²/(2σ²)} is not small, so the
        // bracket matters there.
        let largest = a0.max(a1);
        let converged = series_converged(decreasing, largest, sum, reference);
        if converged || i + 1 == MAX_SERIES_TERMS {
            return series_end(
                converged,
                decreasing,
                fi,
                alpha,
                sum,
                previous_sum,
                reference,
            );
        }
        last0 = a0;
        last1 = a1;
        // C(α, i+1) = C(α, i)·(α − i)/(i + 1): the sign flips once i exceeds α.
        coef *= (alpha - fi) / (fi + 1.0);
    }
    f64::INFINITY
}

/// e^e · Φ(x), without overflow or underflow in the factors where the product is representable.
fn exp_times_normal_cdf(e: f64, x: f64) -> f64 {
    if x > -20.0 && e < 700.0 {
        e.exp() * crate::privacy::special::normal_cdf(x)
    } else {
        (e + log_normal_cdf(x)).exp()
    }
}

/// The same series as [`log_a_poisson_gaussian_frac`], accumulated in log space with signs (slower;
/// used only when terms overflow linear space).
fn log_a_poisson_gaussian_frac_logspace(q: f64, sigma: f64, alpha: f64) -> f64 {
    let ln_q = q.ln();
    let ln_1mq = (-q).ln_1p();
    let s2 = sigma * sigma;
    let z0 = s2 * (1.0 / q - 1.0).ln() + 0.5;
    let mut ln_coef = 0.0f64;
    let mut positive = true;
    let (mut pos, mut neg) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    let (mut last0, mut last1) = (f64::INFINITY, f64::INFINITY);
    for i in 0..MAX_SERIES_TERMS {
        let fi = i as f64;
        let j = alpha - fi;
        let lt0 = ln_coef
            + fi * ln_q
            + j * ln_1mq
            + (fi * fi - fi) / (2.0 * s2)
            + log_normal_cdf((z0 - fi) / sigma);
        let lt1 = ln_coef
            + j * ln_q
            + fi * ln_1mq
            + (j * j - j) / (2.0 * s2)
            + log_normal_cdf((j - z0) / sigma);
        let term = log_add_exp(lt0, lt1);
        if positive {
            pos = log_add_exp(pos, term);
        } else {
            neg = log_add_exp(neg, term);
        }
        let total = crate::privacy::special::log_sub_exp(pos, neg);
        if lt0 < last0 && lt1 < last1 && lt0.max(lt1) < total - 40.0 {
            return total;
        }
        last0 = lt0;
        last1 = lt1;
        let ratio = (alpha - fi) / (fi + 1.0);
        ln_coef += ratio.abs().ln();
        if ratio < 0.0 {
            positive = !positive;
        }
    }
    f64::INFINITY
}

/// RDP at order `alpha` of one step of the Poisson-subsampled Gaussian mechanism with sampling
/// rate `q` and noise multiplier `sigma` (add/remove one). Matches dp_accounting's conventions:
/// q = 0 → 0; σ = 0 → ∞; q = 1 → α/(2σ²).
pub fn rdp_poisson_gaussian(q: f64, sigma: f64, alpha: f64) -> f64 {
    poisson_gaussian_with(
        q,
        sigma,
        alpha,
        log_a_poisson_gaussian_int,
        log_a_poisson_gaussian_frac,
    )
}

/// The conventions of [`rdp_poisson_gaussian`] around the given integer- and fractional-order
/// kernels (ln A_α).
fn poisson_gaussian_with(
    q: f64,
    sigma: f64,
    alpha: f64,
    int_kernel: fn(f64, f64, u64) -> f64,
    frac_kernel: fn(f64, f64, f64) -> f64,
) -> f64 {
    if q == 0.0 {
        return 0.0;
    }
    if sigma == 0.0 || alpha.is_infinite() {
        return f64::INFINITY;
    }
    if q == 1.0 {
        return rdp_gaussian(sigma, alpha);
    }
    let log_a = if alpha.fract() == 0.0 && alpha <= 1e9 {
        int_kernel(q, sigma, alpha as u64)
    } else {
        frac_kernel(q, sigma, alpha)
    };
    log_a / (alpha - 1.0)
}

/// [`rdp_poisson_gaussian`] through the reference kernels ([`log_a_poisson_gaussian_int_full`],
/// [`log_a_poisson_gaussian_frac_reference`]): slow, kept to test the fast path against.
pub fn rdp_poisson_gaussian_reference(q: f64, sigma: f64, alpha: f64) -> f64 {
    poisson_gaussian_with(
        q,
        sigma,
        alpha,
        log_a_poisson_gaussian_int_full,
        log_a_poisson_gaussian_frac_reference,
    )
}

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

/// Upper bound on the cumulant (α−1)·RDP(α) at an integer order α ≥ 2 of the Gaussian mechanism
/// on a batch of m = q·n records sampled without replacement, replace-one relation
/// (Wang, Balle, Kasiviswanathan 2019, Thm. 9 with ε(∞) = ∞):
/// A ≤ 1 + C(α,2) q² min{4(e^{ε(2)} − 1), 2e^{ε(2)}} + Σ_{j=3}^{α} C(α,j) q^j · 2e^{(j−1)ε(j)},
/// where ε(j) = j/(2σ²) is the Gaussian RDP.
fn cgf_wor_gaussian_int(q: f64, sigma: f64, alpha: u64) -> f64 {
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
fn cgf_wor_laplace_int(q: f64, eps: f64, alpha: u64) -> f64 {
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
        }
    }

    /// True when the value is an exact Rényi divergence (so (α−1)·RDP is convex in α and RDP is
    /// non-decreasing), which licenses branch and bound over orders.
    fn is_exact(&self) -> bool {
        match self {
            RdpKernel::Gaussian { .. }
            | RdpKernel::PoissonGaussian { .. }
            | RdpKernel::Laplace { .. } => true,
            RdpKernel::WorGaussian { .. }
            | RdpKernel::PoissonLaplace { .. }
            | RdpKernel::WorLaplace { .. } => false,
        }
    }
}

/// The largest grid point `(1 + step)^k ≤ sigma` (`ln_step = ln(1 + step)`), for σ > 0 finite.
fn round_down_to_grid(sigma: f64, ln_step: f64) -> f64 {
    if !(sigma.is_finite() && sigma > 0.0) {
        return sigma;
    }
    let mut k = (sigma.ln() / ln_step).floor();
    // exp/ln rounding may land one point off either way: settle on the largest k with
    // exp(k·ln_step) ≤ σ (so a grid point maps to itself).
    while (k * ln_step).exp() > sigma {
        k -= 1.0;
    }
    while ((k + 1.0) * ln_step).exp() <= sigma {
        k += 1.0;
    }
    (k * ln_step).exp()
}

/// A hashable identity of a kernel (its variant and parameters' bits).
fn kernel_key(kernel: &RdpKernel) -> [u64; 3] {
    match *kernel {
        RdpKernel::Gaussian { sigma } => [0, 0, sigma.to_bits()],
        RdpKernel::PoissonGaussian { q, sigma } => [1, q.to_bits(), sigma.to_bits()],
        RdpKernel::WorGaussian { q, sigma } => [2, q.to_bits(), sigma.to_bits()],
        RdpKernel::Laplace { eps } => [3, 0, eps.to_bits()],
        RdpKernel::PoissonLaplace { q, eps } => [4, q.to_bits(), eps.to_bits()],
        RdpKernel::WorLaplace { q, eps } => [5, q.to_bits(), eps.to_bits()],
    }
}

fn check_rate(q: f64) -> Result<(), AccountingError> {
    if q.is_nan() || !(0.0..=1.0).contains(&q) {
        return Err(AccountingError::InvalidParameter {
            name: "sample_rate",
            value: q,
            expected: "a number in [0, 1]",
        });
    }
    Ok(())
}

pub(crate) fn check_noise_multiplier(sigma: f64) -> Result<(), AccountingError> {
    if sigma.is_nan() || sigma < 0.0 {
        return Err(AccountingError::InvalidParameter {
            name: "noise_multiplier",
            value: sigma,
            expected: "a number >= 0",
        });
    }
    Ok(())
}

pub(crate) fn check_scale(scale: f64) -> Result<(), AccountingError> {
    if scale.is_nan() || scale < 0.0 {
        return Err(AccountingError::InvalidParameter {
            name: "scale",
            value: scale,
            expected: "a number >= 0",
        });
    }
    Ok(())
}

/// A short name of an event, for error messages.
pub(crate) fn describe(event: &DpEvent) -> String {
    match event {
        DpEvent::NoOp => "NoOp".into(),
        DpEvent::NonPrivate => "NonPrivate".into(),
        DpEvent::Gaussian { noise_multiplier } => {
            format!("Gaussian(noise_multiplier={noise_multiplier})")
        }
        DpEvent::Laplace { scale } => format!("Laplace(scale={scale})"),
        DpEvent::PoissonSampled { sample_rate, event } => {
            format!(
                "PoissonSampled(sample_rate={sample_rate}, {})",
                describe(event)
            )
        }
        DpEvent::SampledWithoutReplacement {
            dataset_size,
            batch_size,
            event,
        } => format!(
            "SampledWithoutReplacement(dataset_size={dataset_size}, batch_size={batch_size}, {})",
            describe(event)
        ),
        DpEvent::SelfComposed { event, count } => {
            format!("SelfComposed({}, count={count})", describe(event))
        }
        DpEvent::Composed(events) => format!("Composed({} events)", events.len()),
    }
}

/// The effective noise multiplier of a nested structure of Gaussians released on the same batch:
/// (Σ σ_i^{−2})^{−1/2} (Mironov, Talwar, Zhang 2019, §3; dp_accounting
/// `_effective_gaussian_noise_multiplier`). `Ok(None)` when `event` contains no release;
/// `Err(sub_event)` names the first sub-event that is not Gaussian.
pub(crate) fn effective_gaussian_noise_multiplier(
    event: &DpEvent,
) -> Result<Option<f64>, &DpEvent> {
    fn inverse_square_sum(event: &DpEvent) -> Result<f64, &DpEvent> {
        match event {
            DpEvent::NoOp => Ok(0.0),
            DpEvent::Gaussian { noise_multiplier } => Ok(if *noise_multiplier == 0.0 {
                f64::INFINITY
            } else {
                noise_multiplier.powi(-2)
            }),
            DpEvent::SelfComposed { event, count } => {
                Ok(inverse_square_sum(event)? * *count as f64)
            }
            DpEvent::Composed(events) => {
                let mut sum = 0.0;
                for e in events {
                    sum += inverse_square_sum(e)?;
                }
                Ok(sum)
            }
            DpEvent::NonPrivate
            | DpEvent::Laplace { .. }
            | DpEvent::PoissonSampled { .. }
            | DpEvent::SampledWithoutReplacement { .. } => Err(event),
        }
    }
    let s = inverse_square_sum(event)?;
    Ok(if s == 0.0 {
        None
    } else if s.is_infinite() {
        Some(0.0)
    } else {
        Some(s.powf(-0.5))
    })
}

/// Validate every Gaussian noise multiplier inside `event`.
pub(crate) fn check_gaussians(event: &DpEvent) -> Result<(), AccountingError> {
    match event {
        DpEvent::Gaussian { noise_multiplier } => check_noise_multiplier(*noise_multiplier),
        DpEvent::SelfComposed { event, .. } => check_gaussians(event),
        DpEvent::Composed(events) => events.iter().try_for_each(check_gaussians),
        DpEvent::PoissonSampled { event, .. }
        | DpEvent::SampledWithoutReplacement { event, .. } => check_gaussians(event),
        DpEvent::Laplace { scale } => check_scale(*scale),
        DpEvent::NoOp | DpEvent::NonPrivate => Ok(()),
    }
}

/// The flattened form of an event tree: per-step kernels with multiplicities, or non-private.
#[derive(Debug, Default)]
struct Flat {
    kernels: Vec<(RdpKernel, u64)>,
    non_private: bool,
}

/// Segments per parallel chunk when summing a long history at one order.
const PARALLEL_CHUNK: usize = 4096;

/// Pending segments from which the minimisation first bounds each order by binning σ (below this,
/// evaluating an order exactly is cheap enough).
const BIN_MIN_SEGMENTS: usize = 4096;

/// Relative widths of the σ cells of the successive bound levels (the first: one cell per
/// mechanism and sampling rate).
const BIN_WIDTHS: [f64; 6] = [f64::INFINITY, 0.05, 0.0125, 3e-3, 8e-4, 2e-4];

/// A level is skipped (the order is evaluated exactly instead) when it has more cells than this
/// fraction of the steps' segments.
const BIN_MAX_FRACTION: f64 = 0.4;

/// Before any order is exact, the cell budget of a level (as a fraction of the segments).
const BIN_FIRST_EXACT_FRACTION: f64 = 0.1;

/// Cells (per bound evaluation) per parallel chunk.
const BIN_CHUNK: usize = 256;

/// The pending segments of the history (from `start`), prepared for rigorous lower bounds on the
/// total RDP at any order: Gaussian and Poisson-subsampled Gaussian steps sorted by (mechanism,
/// q, σ), everything else kept as is.
#[derive(Debug)]
struct Binned {
    start: usize,
    /// (mechanism, q bits, σ, steps), sorted; mechanism 0 is the full-batch Gaussian.
    noisy: Vec<(u8, u64, f64, u64)>,
    others: Vec<(RdpKernel, u64)>,
    /// Steps in the pending segments.
    steps: f64,
    /// Per level: (kernel at the cell's largest σ, steps in the cell); `None` until built.
    cells: Vec<Option<Vec<(RdpKernel, f64)>>>,
}

impl Binned {
    fn new(segments: &[(RdpKernel, u64)], start: usize) -> Self {
        let mut noisy = Vec::with_capacity(segments.len() - start);
        let mut others = Vec::new();
        let mut steps = 0.0;
        for &(kernel, count) in &segments[start..] {
            steps += count as f64;
            match kernel {
                RdpKernel::Gaussian { sigma } => noisy.push((0u8, 0u64, sigma, count)),
                RdpKernel::PoissonGaussian { q, sigma } => {
                    noisy.push((1u8, q.to_bits(), sigma, count))
                }
                other => others.push((other, count)),
            }
        }
        // Schedules are often monotone already; the sort then costs one pass.
        noisy.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)).then(a.2.total_cmp(&b.2)));
        Self {
            start,
            noisy,
            others,
            steps,
            cells: vec![None; BIN_WIDTHS.len()],
        }
    }

    /// The cells of `level`: consecutive (sorted) steps of one mechanism and q whose σ lie within
    /// a factor 1 + width of the cell's smallest, each represented by its largest σ.
    fn cells(&mut self, level: usize) -> &[(RdpKernel, f64)] {
        if self.cells[level].is_none() {
            let factor = 1.0 + BIN_WIDTHS[level];
            let mut cells: Vec<(RdpKernel, f64)> = Vec::new();
            let mut open: Option<(u8, u64, f64, f64, f64)> = None; // key, first σ, last σ, steps
            let kernel = |kind: u8, q_bits: u64, sigma: f64| {
                if kind == 0 {
                    RdpKernel::Gaussian { sigma }
                } else {
                    RdpKernel::PoissonGaussian {
                        q: f64::from_bits(q_bits),
                        sigma,
                    }
                }
            };
            for &(kind, q_bits, sigma, count) in &self.noisy {
                match open.as_mut() {
                    Some((k, q, first, last, n))
                        if *k == kind && *q == q_bits && sigma <= *first * factor =>
                    {
                        *last = sigma;
                        *n += count as f64;
                    }
                    _ => {
                        if let Some((k, q, _, last, n)) = open {
                            cells.push((kernel(k, q, last), n));
                        }
                        open = Some((kind, q_bits, sigma, sigma, count as f64));
                    }
                }
            }
            if let Some((k, q, _, last, n)) = open {
                cells.push((kernel(k, q, last), n));
            }
            self.cells[level] = Some(cells);
        }
        self.cells[level].as_deref().unwrap_or(&[])
    }

    /// A lower bound on the total RDP of the pending segments at `alpha` from the cells of
    /// `level`: RDP is non-increasing in σ (a Gaussian of larger variance is a post-processing of
    /// one of smaller variance, and Rényi divergence obeys data processing; van Erven & Harremoës
    /// 2014, Thm. 9), so a step's RDP is at least that at its cell's largest σ. The slack covers
    /// the rounding of both this sum and the exact one (relative 1e-9, plus 4e-15 absolute on
    /// each step's ln A).
    fn lower_bound(&mut self, level: usize, alpha: f64) -> f64 {
        let steps = self.steps;
        let others: f64 = self
            .others
            .iter()
            .map(|(kernel, count)| kernel.rdp(alpha) * *count as f64)
            .sum();
        let cells = self.cells(level);
        let sum_cells = |chunk: &[(RdpKernel, f64)]| -> f64 {
            chunk.iter().map(|(kernel, n)| kernel.rdp(alpha) * n).sum()
        };
        let binned = if cells.len() >= 2 * BIN_CHUNK {
            use rayon::prelude::*;
            let partial: Vec<f64> = cells.par_chunks(BIN_CHUNK).map(sum_cells).collect();
            partial.iter().sum()
        } else {
            sum_cells(cells)
        };
        let total = binned + others;
        if total.is_nan() {
            return 0.0;
        }
        (total * (1.0 - 1e-9) - steps * 4e-15 / (alpha - 1.0)).max(0.0)
    }
}

/// Cached running total of one order: segments summed so far and their total.
#[derive(Debug, Clone, Copy, Default)]
struct OrderTotal {
    upto: usize,
    total: f64,
}

/// The RDP accountant: accumulates per-step kernels and converts with the chosen conversion.
#[derive(Debug)]
pub struct RdpAccountant {
    relation: NeighbouringRelation,
    orders: Vec<f64>,
    conversion: RdpConversion,
    segments: Vec<(RdpKernel, u64)>,
    non_private: bool,
    all_exact: bool,
    cache: Mutex<Vec<OrderTotal>>,
    /// `ln(1 + step)` of the optional noise-multiplier grid ([`RdpAccountant::with_sigma_grid`]).
    sigma_grid: Option<f64>,
    /// With a grid: where each distinct kernel's segment is, so equal kernels share one segment.
    kernel_index: std::collections::HashMap<[u64; 3], usize>,
    /// Pending segments from which the minimisation bounds orders by binning σ first
    /// ([`BIN_MIN_SEGMENTS`]; smaller in tests).
    bin_min_segments: usize,
}

impl RdpAccountant {
    /// A new accountant. `orders` must be non-empty, finite and each > 1 (use [`default_orders`]).
    pub fn new(
        relation: NeighbouringRelation,
        orders: Vec<f64>,
        conversion: RdpConversion,
    ) -> Result<Self, AccountingError> {
        if orders.is_empty() {
            return Err(AccountingError::InvalidParameter {
                name: "orders",
                value: 0.0,
                expected: "at least one order",
            });
        }
        for &a in &orders {
            if !a.is_finite() || a <= 1.0 {
                return Err(AccountingError::InvalidParameter {
                    name: "orders",
                    value: a,
                    expected: "finite orders > 1",
                });
            }
        }
        let mut orders = orders;
        orders.sort_by(f64::total_cmp);
        orders.dedup();
        let n = orders.len();
        Ok(Self {
            relation,
            orders,
            conversion,
            segments: Vec::new(),
            non_private: false,
            all_exact: true,
            cache: Mutex::new(vec![OrderTotal::default(); n]),
            sigma_grid: None,
            kernel_index: Default::default(),
            bin_min_segments: BIN_MIN_SEGMENTS,
        })
    }

    /// The accountant with dp_accounting's default orders and the Balle et al. conversion.
    pub fn with_defaults(relation: NeighbouringRelation) -> Self {
        Self {
            relation,
            orders: default_orders(),
            conversion: RdpConversion::Improved,
            segments: Vec::new(),
            non_private: false,
            all_exact: true,
            cache: Mutex::new(vec![OrderTotal::default(); default_orders().len()]),
            sigma_grid: None,
            kernel_index: Default::default(),
            bin_min_segments: BIN_MIN_SEGMENTS,
        }
    }

    /// A conservative approximation for long schedules with many distinct noise multipliers:
    /// every full-batch or Poisson-subsampled Gaussian step's noise multiplier σ is rounded DOWN to the geometric grid {(1 + relative_step)^k : k ∈ ℤ}, and
    /// steps with equal kernels share one segment, so a schedule costs one RDP evaluation per
    /// distinct grid value instead of per step.
    ///
    /// Conservative: both RDP curves are exact Rényi divergences, non-increasing in σ (a Gaussian
    /// of larger variance is a post-processing — adding independent noise — of one of smaller
    /// variance, and Rényi divergence obeys data processing; van Erven & Harremoës 2014, Thm. 9), so rounding σ down never lowers any step's RDP and the
    /// reported ε can only grow. It exceeds the exact ε by at most the effect of dividing every σ
    /// by (1 + relative_step) (tested). Laplace steps and sampling without replacement (whose
    /// RDP here is a bound, not a divergence) are unchanged. Must be set before composing;
    /// `relative_step` must lie in [1e-9, 0.1].
    pub fn with_sigma_grid(mut self, relative_step: f64) -> Result<Self, AccountingError> {
        if !(1e-9..=0.1).contains(&relative_step) {
            return Err(AccountingError::InvalidParameter {
                name: "relative_step",
                value: relative_step,
                expected: "a relative grid step in [1e-9, 0.1]",
            });
        }
        self.sigma_grid = Some(relative_step.ln_1p());
        Ok(self)
    }

    /// `kernel` with its noise multiplier rounded down to the grid (identity without a grid).
    fn on_grid(&self, kernel: RdpKernel) -> RdpKernel {
        let Some(ln_step) = self.sigma_grid else {
            return kernel;
        };
        let down = |sigma: f64| round_down_to_grid(sigma, ln_step);
        match kernel {
            RdpKernel::Gaussian { sigma } => RdpKernel::Gaussian { sigma: down(sigma) },
            RdpKernel::PoissonGaussian { q, sigma } => RdpKernel::PoissonGaussian {
                q,
                sigma: down(sigma),
            },
            other => other,
        }
    }

    /// Add `n` steps of `kernel` to segment `index`, updating cached totals that include it.
    fn add_to_segment(&mut self, index: usize, kernel: RdpKernel, n: u64) {
        self.segments[index].1 += n;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        for (entry, &alpha) in cache.iter_mut().zip(&self.orders) {
            if entry.upto > index {
                entry.total += kernel.rdp(alpha) * n as f64;
            }
        }
    }

    /// The orders of the grid (ascending).
    pub fn orders(&self) -> &[f64] {
        &self.orders
    }

    /// The run-length history of per-step kernels composed so far.
    pub fn segments(&self) -> &[(RdpKernel, u64)] {
        &self.segments
    }

    fn unsupported(&self, event: &DpEvent, why: &str) -> AccountingError {
        AccountingError::Unsupported {
            accountant: AccountantKind::Rdp,
            event: format!("{} ({why})", describe(event)),
        }
    }

    fn flatten(&self, event: &DpEvent, mult: u64, out: &mut Flat) -> Result<(), AccountingError> {
        let k = self.relation.sensitivity_factor();
        match event {
            DpEvent::NoOp => Ok(()),
            DpEvent::NonPrivate => {
                out.non_private = true;
                Ok(())
            }
            // Unsampled releases: the query moves by `k` times its add/remove sensitivity
            // (2 under replace-one), so the mechanism is analysed at σ/k (Laplace: ε = k/b).
            DpEvent::Gaussian { noise_multiplier } => {
                check_noise_multiplier(*noise_multiplier)?;
                if *noise_multiplier == 0.0 {
                    out.non_private = true;
                } else if mult > 0 {
                    out.kernels.push((
                        RdpKernel::Gaussian {
                            sigma: *noise_multiplier / k,
                        },
                        mult,
                    ));
                }
                Ok(())
            }
            DpEvent::Laplace { scale } => {
                check_scale(*scale)?;
                if *scale == 0.0 {
                    out.non_private = true;
                } else if mult > 0 {
                    out.kernels
                        .push((RdpKernel::Laplace { eps: k / scale }, mult));
                }
                Ok(())
            }
            DpEvent::PoissonSampled {
                sample_rate,
                event: inner,
            } => {
                check_rate(*sample_rate)?;
                check_gaussians(inner)?;
                if self.relation != NeighbouringRelation::AddOrRemoveOne {
                    return Err(self.unsupported(
                        event,
                        "Poisson sampling is analysed under add/remove-one neighbours only",
                    ));
                }
                let q = *sample_rate;
                if let DpEvent::Laplace { scale } = **inner {
                    if q == 0.0 || mult == 0 {
                        return Ok(());
                    }
                    if scale == 0.0 {
                        out.non_private = true;
                    } else {
                        out.kernels.push((
                            RdpKernel::PoissonLaplace {
                                q,
                                eps: 1.0 / scale,
                            },
                            mult,
                        ));
                    }
                    return Ok(());
                }
                match effective_gaussian_noise_multiplier(inner) {
                    Ok(None) => Ok(()),
                    Ok(Some(sigma)) => {
                        if q == 0.0 || mult == 0 {
                        } else if sigma == 0.0 {
                            out.non_private = true;
                        } else if q == 1.0 {
                            out.kernels.push((RdpKernel::Gaussian { sigma }, mult));
                        } else {
                            out.kernels.push((RdpKernel::PoissonGaussian { q, sigma }, mult));
                        }
                        Ok(())
                    }
                    Err(bad) => Err(self.unsupported(
                        bad,
                        "inside PoissonSampled only Gaussians (possibly composed) or a single Laplace are supported",
                    )),
                }
            }
            DpEvent::SampledWithoutReplacement {
                dataset_size,
                batch_size,
                event: inner,
            } => {
                check_gaussians(inner)?;
                if *dataset_size == 0 || batch_size > dataset_size {
                    return Err(AccountingError::InvalidParameter {
                        name: "batch_size",
                        value: *batch_size as f64,
                        expected: "a batch size no larger than a non-empty dataset",
                    });
                }
                if self.relation != NeighbouringRelation::ReplaceOne {
                    return Err(self.unsupported(
                        event,
                        "sampling without replacement is analysed under replace-one neighbours only",
                    ));
                }
                let q = *batch_size as f64 / *dataset_size as f64;
                // The base mechanism of Wang et al.'s theorem is the release on the batch under
                // replace-one: distance 2 in units of the add/remove sensitivity (σ/2, ε = 2/b).
                if let DpEvent::Laplace { scale } = **inner {
                    if q == 0.0 || mult == 0 {
                        return Ok(());
                    }
                    if scale == 0.0 {
                        out.non_private = true;
                    } else if q == 1.0 {
                        out.kernels
                            .push((RdpKernel::Laplace { eps: k / scale }, mult));
                    } else {
                        out.kernels
                            .push((RdpKernel::WorLaplace { q, eps: k / scale }, mult));
                    }
                    return Ok(());
                }
                match effective_gaussian_noise_multiplier(inner) {
                    Ok(None) => Ok(()),
                    Ok(Some(sigma)) => {
                        let sigma = sigma / k;
                        if q == 0.0 || mult == 0 {
                        } else if sigma == 0.0 {
                            out.non_private = true;
                        } else if q == 1.0 {
                            out.kernels.push((RdpKernel::Gaussian { sigma }, mult));
                        } else {
                            out.kernels.push((RdpKernel::WorGaussian { q, sigma }, mult));
                        }
                        Ok(())
                    }
                    Err(bad) => Err(self.unsupported(
                        bad,
                        "inside SampledWithoutReplacement only Gaussians (possibly composed) or a single Laplace are supported",
                    )),
                }
            }
            DpEvent::SelfComposed { event, count } => {
                self.flatten(event, mult.saturating_mul(*count), out)
            }
            DpEvent::Composed(events) => {
                for e in events {
                    self.flatten(e, mult, out)?;
                }
                Ok(())
            }
        }
    }

    /// Total RDP of the history at order index `k`, extending the cached running sum.
    fn total_at(&self, cache: &mut [OrderTotal], k: usize) -> f64 {
        let entry = &mut cache[k];
        let alpha = self.orders[k];
        let new = &self.segments[entry.upto..];
        let sum_chunk = |chunk: &[(RdpKernel, u64)]| -> f64 {
            chunk
                .iter()
                .map(|(kernel, count)| kernel.rdp(alpha) * *count as f64)
                .sum()
        };
        // Long histories (schedules with many distinct σ) are summed in fixed chunks on the rayon
        // pool; the chunk sums are added in order, so the result does not depend on the number of
        // threads.
        let total = if new.len() >= 2 * PARALLEL_CHUNK {
            use rayon::prelude::*;
            let partial: Vec<f64> = new.par_chunks(PARALLEL_CHUNK).map(sum_chunk).collect();
            partial.iter().fold(entry.total, |acc, x| acc + x)
        } else {
            new.iter().fold(entry.total, |acc, (kernel, count)| {
                acc + kernel.rdp(alpha) * *count as f64
            })
        };
        entry.total = total;
        entry.upto = self.segments.len();
        total
    }

    /// Total RDP at every order of the grid.
    pub fn rdp_curve(&self) -> Vec<f64> {
        if self.non_private {
            return vec![f64::INFINITY; self.orders.len()];
        }
        let mut cache = self.lock_cache();
        (0..self.orders.len())
            .map(|k| self.total_at(&mut cache, k))
            .collect()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Vec<OrderTotal>> {
        // A poisoned cache only means a panic elsewhere; its values are still valid sums.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Minimise `objective(α, total RDP at α)` over the grid; `objective` is non-decreasing in the
    /// RDP. Returns (minimum, order index). Uses branch and bound when every kernel is exact.
    fn minimise(&self, objective: impl Fn(f64, f64) -> f64) -> (f64, usize) {
        let n = self.orders.len();
        let mut cache = self.lock_cache();
        if !self.all_exact || n <= 8 {
            let mut best = (f64::INFINITY, 0);
            for k in 0..n {
                let v = objective(self.orders[k], self.total_at(&mut cache, k));
                if v < best.0 {
                    best = (v, k);
                }
            }
            return best;
        }
        // Binned bounds when no order has a recent cached total (a fresh long history). Once some
        // orders are cached, the neighbour bounds below keep each later query incremental.
        let pending = cache
            .iter()
            .map(|e| self.segments.len() - e.upto)
            .min()
            .unwrap_or(0);
        if pending >= self.bin_min_segments {
            return self.minimise_binned(&mut cache, &objective);
        }
        let mut known: Vec<Option<f64>> = vec![None; n];
        let mut best = (f64::INFINITY, 0usize);
        let mut evaluate = |k: usize, known: &mut Vec<Option<f64>>, best: &mut (f64, usize)| {
            let r = self.total_at(&mut cache, k);
            known[k] = Some(r);
            let v = objective(self.orders[k], r);
            if v < best.0 || (v == best.0 && k < best.1) {
                *best = (v, k);
            }
        };
        // Seeds: the cheap integer orders 2, 4, …, 64 where the grid has them (integer orders
        // cost a few dozen terms; fractional ones a series each); else ~8 spread over the grid.
        let seeds: Vec<usize> = (0..n)
            .filter(|&k| {
                let a = self.orders[k];
                a.fract() == 0.0 && a <= 64.0 && (a as u64).is_power_of_two()
            })
            .collect();
        if seeds.len() >= 3 {
            for k in seeds {
                evaluate(k, &mut known, &mut best);
            }
        } else {
            for k in (0..n).step_by(n.div_ceil(8)) {
                evaluate(k, &mut known, &mut best);
            }
        }
        loop {
            let mut candidate: Option<(f64, usize)> = None;
            for k in 0..n {
                if known[k].is_some() {
                    continue;
                }
                let lb = objective(self.orders[k], self.rdp_lower_bound(k, &known));
                if candidate.is_none_or(|(c, _)| lb < c) {
                    candidate = Some((lb, k));
                }
            }
            match candidate {
                Some((lb, k)) if lb <= best.0 => evaluate(k, &mut known, &mut best),
                _ => break,
            }
        }
        best
    }

    /// Best-first branch and bound for long pending histories (every kernel exact). Each order
    /// has a lower bound on its total RDP: the larger of the binned bound of its current level
    /// ([`Binned::lower_bound`]), the binned bounds of smaller orders (RDP is non-decreasing in α)
    /// and the monotonicity/convexity bound from exactly evaluated orders
    /// ([`Self::rdp_lower_bound`]). The order with the smallest objective bound (ties: smaller
    /// order) is refined — next level, or the exact total when the next level would cost too
    /// much — until that order is exact: its exact value is then ≤ every other order's bound, so
    /// it is the minimum over the full grid.
    fn minimise_binned(
        &self,
        cache: &mut [OrderTotal],
        objective: &impl Fn(f64, f64) -> f64,
    ) -> (f64, usize) {
        let n = self.orders.len();
        let len = self.segments.len();
        let mut binned: Vec<Binned> = Vec::new();
        let mut level: Vec<Option<usize>> = vec![None; n];
        let mut binned_lb = vec![0.0f64; n];
        let mut known: Vec<Option<f64>> = vec![None; n];
        let mut convex_lb = vec![0.0f64; n];
        loop {
            // The order with the smallest bound on the objective.
            let mut pick = (f64::INFINITY, usize::MAX);
            let mut left_max = 0.0f64;
            for k in 0..n {
                left_max = left_max.max(binned_lb[k]);
                let v = match known[k] {
                    Some(r) => objective(self.orders[k], r),
                    None => objective(self.orders[k], left_max.max(convex_lb[k])),
                };
                if pick.1 == usize::MAX || v < pick.0 {
                    pick = (v, k);
                }
            }
            let (value, k) = pick;
            if known[k].is_some() || k == usize::MAX {
                return (value, k);
            }
            let start = cache[k].upto;
            let pending = len - start;
            let next = match level[k] {
                None => Some(0),
                Some(l) if l + 1 < BIN_WIDTHS.len() => Some(l + 1),
                Some(_) => None,
            };
            let index = if pending >= self.bin_min_segments && next.is_some() {
                Some(match binned.iter().position(|b| b.start == start) {
                    Some(i) => i,
                    None => {
                        binned.push(Binned::new(&self.segments, start));
                        binned.len() - 1
                    }
                })
            } else {
                None
            };
            let refined = match (index, next) {
                (Some(i), Some(l)) => {
                    let bins = &mut binned[i];
                    // Finer levels only have more cells: past the budget, evaluate exactly. Until
                    // some order is exact, the order with the smallest bound is probably the
                    // optimum, which needs its exact value anyway: a costly level is skipped.
                    let fraction = if known.iter().any(Option::is_some) {
                        BIN_MAX_FRACTION
                    } else {
                        BIN_FIRST_EXACT_FRACTION
                    };
                    let limit = fraction * bins.noisy.len() as f64;
                    if l > 0 && bins.cells(l).len() as f64 > limit {
                        None
                    } else {
                        let bound = cache[k].total + bins.lower_bound(l, self.orders[k]);
                        binned_lb[k] = binned_lb[k].max(bound);
                        level[k] = Some(l);
                        Some(())
                    }
                }
                _ => None,
            };
            if refined.is_none() {
                known[k] = Some(self.total_at(cache, k));
                for (j, lb) in convex_lb.iter_mut().enumerate() {
                    if known[j].is_none() {
                        *lb = self.rdp_lower_bound(j, &known);
                    }
                }
            }
        }
    }

    /// A lower bound on the total RDP at order index `k` from the computed orders, using that RDP is
    /// non-decreasing in α and f(α) = (α−1)·RDP(α) is convex with f(1) = 0.
    fn rdp_lower_bound(&self, k: usize, known: &[Option<f64>]) -> f64 {
        let alpha = self.orders[k];
        let point = |i: usize| known[i].map(|r| (self.orders[i], (self.orders[i] - 1.0) * r));
        let mut left: Vec<(f64, f64)> = Vec::with_capacity(2);
        for i in (0..k).rev() {
            if let Some(p) = point(i) {
                left.push(p);
                if left.len() == 2 {
                    break;
                }
            }
        }
        if left.len() < 2 {
            left.push((1.0, 0.0));
        }
        let mut right: Vec<(f64, f64)> = Vec::with_capacity(2);
        for i in k + 1..known.len() {
            if let Some(p) = point(i) {
                right.push(p);
                if right.len() == 2 {
                    break;
                }
            }
        }
        let mut f_lb = 0.0f64;
        let mut r_lb = 0.0f64;
        // Monotone: RDP(α) ≥ RDP(nearest computed order below).
        if let Some(&(a, f)) = left.first()
            && a > 1.0
        {
            r_lb = f / (a - 1.0);
        }
        // Convex: extend the chord of the two nearest points on each side.
        if left.len() == 2 {
            let (a2, f2) = left[0];
            let (a1, f1) = left[1];
            if f1.is_finite() && f2.is_finite() && a2 > a1 {
                f_lb = f_lb.max(f2 + (alpha - a2) * (f2 - f1) / (a2 - a1));
            }
        }
        if right.len() == 2 {
            let (a3, f3) = right[0];
            let (a4, f4) = right[1];
            if f3.is_finite() && f4.is_finite() && a4 > a3 {
                f_lb = f_lb.max(f3 - (a3 - alpha) * (f4 - f3) / (a4 - a3));
            }
        }
        let bound = r_lb.max(f_lb / (alpha - 1.0));
        // Slack for rounding in the computed totals.
        (bound * (1.0 - 1e-9)).max(0.0)
    }

    fn edge_note(&self, k: usize) -> Option<String> {
        let n = self.orders.len();
        if n > 1 && (k == 0 || k == n - 1) {
            Some(format!(
                "the optimal order {} is at the edge of the order grid [{}, {}]; a wider grid may give a smaller epsilon",
                self.orders[k],
                self.orders[0],
                self.orders[n - 1]
            ))
        } else {
            None
        }
    }
}

impl Accountant for RdpAccountant {
    fn kind(&self) -> AccountantKind {
        AccountantKind::Rdp
    }

    fn check(&self, event: &DpEvent) -> Result<(), AccountingError> {
        self.flatten(event, 1, &mut Flat::default())
    }

    fn compose(&mut self, event: &DpEvent, count: u64) -> Result<(), AccountingError> {
        let mut flat = Flat::default();
        self.flatten(event, count, &mut flat)?;
        self.non_private |= flat.non_private;
        for (kernel, n) in flat.kernels {
            self.all_exact &= kernel.is_exact();
            if self.sigma_grid.is_some() {
                let kernel = self.on_grid(kernel);
                let key = kernel_key(&kernel);
                match self.kernel_index.get(&key) {
                    Some(&index) => self.add_to_segment(index, kernel, n),
                    None => {
                        self.kernel_index.insert(key, self.segments.len());
                        self.segments.push((kernel, n));
                    }
                }
                continue;
            }
            match self.segments.last_mut() {
                Some((last, m)) if *last == kernel => {
                    // The merged segment may already be summed into cached totals: add the
                    // new steps there too.
                    *m += n;
                    let len = self.segments.len();
                    let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                    for (entry, &alpha) in cache.iter_mut().zip(&self.orders) {
                        if entry.upto == len {
                            entry.total += kernel.rdp(alpha) * n as f64;
                        }
                    }
                }
                _ => self.segments.push((kernel, n)),
            }
        }
        Ok(())
    }

    fn epsilon(&self, delta: f64) -> Result<PrivacyReport, AccountingError> {
        if delta.is_nan() || !(0.0..=1.0).contains(&delta) {
            return Err(AccountingError::InvalidParameter {
                name: "delta",
                value: delta,
                expected: "a number in [0, 1]",
            });
        }
        let mut report = PrivacyReport {
            epsilon: 0.0,
            delta,
            accountant: AccountantKind::Rdp,
            order: None,
            notes: Vec::new(),
            upper_bound: true,
        };
        if self.non_private {
            report.epsilon = f64::INFINITY;
            report
                .notes
                .push("a non-private release was composed".into());
            return Ok(report);
        }
        if self.segments.is_empty() {
            return Ok(report);
        }
        if delta == 0.0 {
            // Only the trivial RDP curve gives δ = 0 (dp_accounting `compute_epsilon`).
            report.epsilon = f64::INFINITY;
            return Ok(report);
        }
        let conversion = self.conversion;
        let (eps, k) = self.minimise(|a, r| epsilon_at_order(a, r, delta, conversion));
        report.epsilon = eps.max(0.0);
        report.order = Some(self.orders[k]);
        if conversion == RdpConversion::Classic {
            report
                .notes
                .push("classic conversion (Mironov 2017), looser than Balle et al. 2020".into());
        }
        if !self.all_exact {
            report
                .notes
                .push("uses an upper bound on the RDP of subsampled Laplace or sampling without replacement".into());
        }
        if report.epsilon > 0.0
            && let Some(note) = self.edge_note(k)
        {
            report.notes.push(note);
        }
        Ok(report)
    }

    fn delta(&self, epsilon: f64) -> Result<f64, AccountingError> {
        if epsilon.is_nan() || epsilon < 0.0 {
            return Err(AccountingError::InvalidParameter {
                name: "epsilon",
                value: epsilon,
                expected: "a number >= 0",
            });
        }
        if self.non_private {
            return Ok(1.0);
        }
        if self.segments.is_empty() {
            return Ok(0.0);
        }
        let conversion = self.conversion;
        let (log_delta, _) = self.minimise(|a, r| log_delta_at_order(a, r, epsilon, conversion));
        Ok(log_delta.exp().min(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigma_grid_is_conservative_and_sandwiched() {
        // A 3,000-step ramp of distinct σ_t at q = 256/50000. Rounding σ down to a grid of
        // relative step r can only raise ε (RDP is non-increasing in σ), and cannot exceed the
        // exact ε of the schedule σ_t/(1 + r), since every grid value is ≥ σ_t/(1 + r).
        let q = 256.0 / 50000.0;
        let sigmas: Vec<f64> = (0..3000).map(|t| 0.8 + 2.0 * t as f64 / 3000.0).collect();
        let eps = |scale: f64, grid: Option<f64>| {
            let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
            if let Some(r) = grid {
                acc = acc.with_sigma_grid(r).unwrap();
            }
            for &s in &sigmas {
                acc.compose(
                    &DpEvent::poisson_sampled(q, DpEvent::gaussian(s * scale)),
                    1,
                )
                .unwrap();
            }
            (acc.epsilon(1e-5).unwrap().epsilon, acc.segments().len())
        };
        let (exact, n_exact) = eps(1.0, None);
        assert_eq!(n_exact, 3000);
        for r in [1e-4, 1e-3, 1e-2] {
            let (grid, n_grid) = eps(1.0, Some(r));
            let (lower_noise, _) = eps(1.0 / (1.0 + r), None);
            assert!(grid >= exact, "r = {r}: {grid} < exact {exact}");
            assert!(
                grid <= lower_noise * (1.0 + 1e-12),
                "r = {r}: {grid} > {lower_noise}"
            );
            // ln(2.8/0.8)/ln(1 + r) + 1 grid values at most.
            assert!(
                n_grid as f64 <= (2.8f64 / 0.8).ln() / r.ln_1p() + 2.0,
                "{n_grid}"
            );
        }
        // Grid points never exceed σ, and σ on the grid stays.
        let ln_step = 1e-3f64.ln_1p();
        for &s in &sigmas {
            let g = round_down_to_grid(s, ln_step);
            assert!(
                g <= s && g * (1.0 + 1e-3) >= s * (1.0 - 1e-15),
                "{s} -> {g}"
            );
            assert_eq!(round_down_to_grid(g, ln_step), g);
        }
    }

    #[test]
    fn sigma_grid_merges_update_cached_totals() {
        // Equal kernels composed after an epsilon query join their (already summed) segment: the
        // result must equal composing everything before the first query.
        let q = 0.01;
        let make = || {
            RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne)
                .with_sigma_grid(1e-3)
                .unwrap()
        };
        let (mut a, mut b) = (make(), make());
        for s in [1.0, 1.5, 1.0, 2.0, 1.5] {
            b.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), 10)
                .unwrap();
        }
        for (i, s) in [1.0, 1.5, 1.0, 2.0, 1.5].into_iter().enumerate() {
            a.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), 10)
                .unwrap();
            if i == 1 {
                a.epsilon(1e-5).unwrap();
            }
        }
        assert_eq!(a.segments().len(), 3);
        let (ea, eb) = (
            a.epsilon(1e-5).unwrap().epsilon,
            b.epsilon(1e-5).unwrap().epsilon,
        );
        assert!((ea - eb).abs() <= 1e-12 * eb, "{ea} vs {eb}");
        assert!(
            RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne)
                .with_sigma_grid(0.0)
                .is_err()
        );
    }

    #[test]
    fn fast_integer_kernel_equals_the_full_sum() {
        // The peak-located partial sum must agree with summing every term.
        for &q in &[1e-6, 1e-3, 0.004, 0.01, 0.1, 0.3, 0.7, 0.99] {
            for &sigma in &[0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 3.0, 10.0, 50.0] {
                for &alpha in &[2u64, 3, 5, 8, 13, 21, 34, 63, 128, 256, 512, 1024] {
                    let fast = log_a_poisson_gaussian_int(q, sigma, alpha);
                    let full = log_a_poisson_gaussian_int_full(q, sigma, alpha);
                    assert!(
                        (fast - full).abs() <= 1e-10 * full.abs(),
                        "q={q} sigma={sigma} alpha={alpha}: {fast} vs {full}"
                    );
                }
            }
        }
    }

    #[test]
    fn fast_kernels_equal_the_reference() {
        // q in [1e-4, 0.5], sigma in [0.5, 20], every default order; compared on
        // ln A = (α − 1)·RDP. Relative 1e-12 above an absolute floor of 4e-15 (the reference forms
        // ln A as ln(sum) + shift with sum ~ 1 and stops at 1e-15 of the sum). Where the
        // alternating tail decays slowly (α < 2, small σ, large q) the reference stops after 4000
        // terms at the upper bracket, up to ~2e-13 high; in those cases the fast value must agree
        // with quadrature to 1e-15 and be closer to it than the reference.
        let mut worst = 0.0f64;
        let mut gave_up = 0;
        let mut loose = 0;
        for &q in &[
            1e-4,
            3e-4,
            1e-3,
            256.0 / 50000.0,
            0.01,
            0.03,
            0.1,
            0.2,
            0.35,
            0.5,
        ] {
            for &sigma in &[0.5, 0.6, 0.8, 1.0, 1.3, 1.7, 2.2, 3.0, 4.5, 7.0, 11.0, 20.0] {
                for alpha in default_orders() {
                    let fast = rdp_poisson_gaussian(q, sigma, alpha) * (alpha - 1.0);
                    let slow = rdp_poisson_gaussian_reference(q, sigma, alpha) * (alpha - 1.0);
                    if slow.is_infinite() && fast.is_finite() {
                        // The reference gives up (+∞, never optimal) when a term underflows to 0,
                        // since it then never sees both terms strictly decrease. RDP is
                        // non-decreasing in α: check the value against the integer order above.
                        let above = rdp_poisson_gaussian(q, sigma, alpha.ceil());
                        assert!(
                            fast >= 0.0 && fast / (alpha - 1.0) <= above * (1.0 + 1e-12),
                            "q={q} sigma={sigma} alpha={alpha}: {fast}"
                        );
                        gave_up += 1;
                        continue;
                    }
                    if slow.is_infinite() || fast.is_infinite() {
                        assert_eq!(fast, slow, "q={q} sigma={sigma} alpha={alpha}");
                        continue;
                    }
                    let err = (fast - slow).abs();
                    let tol = 1e-12 * slow.abs() + 4e-15;
                    worst = worst.max(err / tol);
                    if err > tol {
                        // Then the reference is the one off: the fast value must match quadrature.
                        loose += 1;
                        let quad = log_a_by_quadrature(q, sigma, alpha);
                        assert!(
                            (fast - quad).abs() <= 1e-12 * quad + 1e-15
                                && (fast - quad).abs() < (slow - quad).abs(),
                            "q={q} sigma={sigma} alpha={alpha}: {fast} vs {slow}, quadrature {quad}"
                        );
                    }
                }
            }
        }
        println!(
            "worst error / tolerance: {worst}; reference off (checked by quadrature): {loose}; reference gave up: {gave_up}"
        );
    }

    /// ln A_α by quadrature of its definition, E_{z∼N(0,σ²)}[(1 + q(e^{(2z−1)/(2σ²)} − 1))^α] − 1
    /// summed directly (step σ/400 over ±40σ; the integrand is smooth, so the trapezoid rule
    /// converges geometrically): an independent check to ~1e-16 absolute.
    fn log_a_by_quadrature(q: f64, sigma: f64, alpha: f64) -> f64 {
        let h = sigma / 400.0;
        let mut total = 0.0;
        for k in -16_000i32..=16_000 {
            let z = f64::from(k) * h;
            let w = (-z * z / (2.0 * sigma * sigma)).exp()
                / (sigma * (2.0 * std::f64::consts::PI).sqrt())
                * h;
            let u = q * ((2.0 * z - 1.0) / (2.0 * sigma * sigma)).exp_m1();
            total += w * (alpha * u.ln_1p()).exp_m1();
        }
        total.ln_1p()
    }

    #[test]
    fn fast_fractional_kernel_matches_quadrature() {
        // Where the reference stops at its 4000-term bracket (slow alternating tails), and where
        // it gives up (+∞), the fast kernel agrees with quadrature.
        for &(q, sigma, alpha) in &[
            (0.2, 0.8, 1.1),
            (0.35, 0.8, 1.1),
            (0.5, 0.5, 1.2),
            (0.03, 0.5, 1.1),
            (0.1, 1.0, 1.1),
            (256.0 / 50000.0, 0.6, 1.8),
            (256.0 / 50000.0, 0.8, 5.7),
            (0.01, 11.0, 2.5),
            (0.05, 20.0, 3.3),
            (0.01, 7.0, 5.5),
        ] {
            let fast = log_a_poisson_gaussian_frac(q, sigma, alpha);
            let quad = log_a_by_quadrature(q, sigma, alpha);
            assert!(
                (fast - quad).abs() <= 1e-12 * quad + 1e-15,
                "q={q} sigma={sigma} alpha={alpha}: {fast} vs {quad}"
            );
        }
    }

    #[test]
    fn alternating_sum_is_accurate() {
        // Σ (−1)^k/(k+1) = ln 2 (a_k = ∫₀¹ x^k dx); Σ (−1)^k/(k+1)² = π²/12.
        let a: Vec<f64> = (0..TAIL_TERMS).map(|k| 1.0 / (k as f64 + 1.0)).collect();
        assert!((alternating_sum(&a) - 2f64.ln()).abs() < 1e-15);
        let a: Vec<f64> = (0..TAIL_TERMS).map(|k| (k as f64 + 1.0).powi(-2)).collect();
        let want = std::f64::consts::PI.powi(2) / 12.0;
        assert!((alternating_sum(&a) - want).abs() < 1e-15);
    }

    #[test]
    fn erfcx_matches_libm_erfc() {
        let mut x = 0.0;
        while x < 26.0 {
            let want = libm::erfc(x) * (x * x).exp();
            // e^{x²} of a rounded x² is itself off by up to ~2x²·2⁻⁵³ relative.
            let tol = (4e-15 + 4e-16 * x * x) * want;
            assert!((erfcx(x) - want).abs() <= tol, "{x}");
            x += 0.01;
        }
        // Past 26 against Laplace's continued fraction √π·erfcx(x) = 1/(x + (1/2)/(x + 1/(x +
        // (3/2)/(x + …)))), 200 levels, evaluated at 26.5 in double precision.
        let v: f64 = 0.021_275_046_685_371_106;
        assert!((erfcx(26.5) - v).abs() <= 1e-15 * v, "{}", erfcx(26.5));
    }

    /// ε and the optimal order by the plain full-grid evaluation: the RDP at every order with
    /// the reference kernels, converted, minimised.
    fn full_grid_reference(steps: &[(f64, f64, u64)], delta: f64) -> (f64, f64) {
        use rayon::prelude::*;
        let orders = default_orders();
        let curve: Vec<f64> = orders
            .par_iter()
            .map(|&a| {
                steps
                    .iter()
                    .map(|&(q, s, n)| rdp_poisson_gaussian_reference(q, s, a) * n as f64)
                    .sum()
            })
            .collect();
        epsilon_from_rdp(&orders, &curve, delta, RdpConversion::Improved)
    }

    #[test]
    fn binned_minimum_equals_the_full_grid_on_the_40k_schedule() {
        // The benchmark schedule: q = 256/50000, 40,000 distinct σ_t from 0.8 to 2.8.
        let q = 256.0 / 50000.0;
        let steps: Vec<(f64, f64, u64)> = (0..40_000)
            .map(|t| (q, 0.8 + 2.0 * f64::from(t) / 40_000.0, 1))
            .collect();
        let (want, want_order) = full_grid_reference(&steps, 1e-5);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
                for &(q, s, n) in &steps {
                    acc.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), n)
                        .unwrap();
                }
                let report = acc.epsilon(1e-5).unwrap();
                (report.epsilon, report.order.unwrap())
            })
        };
        let (got, order) = run(2);
        println!("binned {got:.16} at {order}; full grid {want:.16} at {want_order}");
        assert_eq!(order, want_order);
        assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
        // Deterministic for any thread count.
        for threads in [1, 3] {
            let (again, again_order) = run(threads);
            assert_eq!(again.to_bits(), got.to_bits(), "{threads} threads");
            assert_eq!(again_order, order);
        }
    }

    #[test]
    fn binned_then_incremental_queries_agree_with_a_fresh_accountant() {
        // A long history queried once (binned bounds), then extended and queried again (the
        // neighbour bounds with cached totals): both answers equal a fresh accountant's.
        let q = 0.01;
        let sigma = |t: usize| 0.7 + t as f64 / 300.0;
        let compose = |acc: &mut RdpAccountant, range: std::ops::Range<usize>| {
            for t in range {
                acc.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma(t))), 1)
                    .unwrap();
            }
        };
        let fresh = |n: usize| {
            let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
            acc.bin_min_segments = usize::MAX;
            compose(&mut acc, 0..n);
            acc.epsilon(1e-6).unwrap()
        };
        let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
        acc.bin_min_segments = 100;
        compose(&mut acc, 0..600);
        let first = acc.epsilon(1e-6).unwrap();
        compose(&mut acc, 600..900);
        let second = acc.epsilon(1e-6).unwrap();
        for (got, want) in [(first, fresh(600)), (second, fresh(900))] {
            assert_eq!(got.order, want.order);
            assert!((got.epsilon - want.epsilon).abs() <= 1e-12 * want.epsilon);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(6))]

        #[test]
        fn binned_minimum_equals_the_full_grid(
            seed_steps in proptest::collection::vec((0usize..3, 0.6f64..3.0, 1u64..4), 150..400),
            rates in proptest::collection::vec(1e-3f64..0.1, 3),
            delta_exp in 3.0f64..8.0,
        ) {
            // Random schedules of a few sampling rates and many distinct σ; binning starts at 64
            // pending segments, so every bound level and the exact fallback are exercised.
            let steps: Vec<(f64, f64, u64)> =
                seed_steps.iter().map(|&(r, s, n)| (rates[r], s, n)).collect();
            let delta = 10f64.powf(-delta_exp);
            let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
            acc.bin_min_segments = 64;
            for &(q, s, n) in &steps {
                acc.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), n).unwrap();
            }
            let report = acc.epsilon(delta).unwrap();
            let (want, want_order) = full_grid_reference(&steps, delta);
            proptest::prop_assert!((report.epsilon - want).abs() <= 1e-9 * want,
                "{} vs {}", report.epsilon, want);
            proptest::prop_assert_eq!(report.order, Some(want_order));
            // δ at that ε through the same minimisation, against the full grid.
            let mut fresh = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
            fresh.bin_min_segments = 64;
            for &(q, s, n) in &steps {
                fresh.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), n).unwrap();
            }
            let got_delta = fresh.delta(want).unwrap();
            let curve = acc.rdp_curve();
            let (want_delta, _) = delta_from_rdp(acc.orders(), &curve, want, RdpConversion::Improved);
            proptest::prop_assert!((got_delta - want_delta).abs() <= 1e-9 * want_delta,
                "{} vs {}", got_delta, want_delta);
        }
    }

    #[test]
    fn orders_must_exceed_one() {
        let err = RdpAccountant::new(
            NeighbouringRelation::AddOrRemoveOne,
            vec![1.0, 2.0],
            RdpConversion::Improved,
        );
        assert!(err.is_err());
    }

    #[test]
    fn laplace_without_replacement_is_bounded_and_amplified() {
        // q = 1 is the plain Laplace RDP; for q < 1 the bound is below the unsampled RDP and
        // shrinks with q; it is never negative.
        let eps = 0.7;
        for alpha in [1.5, 2.0, 3.0, 8.0, 32.0] {
            assert_eq!(rdp_wor_laplace(1.0, eps, alpha), rdp_laplace(eps, alpha));
            let a = rdp_wor_laplace(0.01, eps, alpha);
            let b = rdp_wor_laplace(0.1, eps, alpha);
            assert!(
                a >= 0.0 && a < b && b < rdp_laplace(eps, alpha),
                "{alpha}: {a} {b}"
            );
        }
        // Small q: A ≈ 1 + C(α,2) q² min{…}, so RDP(2) ≈ q²·min{4(e^{ε(2)} − 1), e^{ε(2)}(e^ε − 1)²}.
        let q: f64 = 1e-3;
        let e2 = rdp_laplace(eps, 2.0);
        let lead = q * q * (4.0 * e2.exp_m1()).min(e2.exp() * eps.exp_m1().powi(2));
        assert!((rdp_wor_laplace(q, eps, 2.0) / lead - 1.0).abs() < 1e-3);
    }

    #[test]
    fn subsampled_laplace_bound_dominates_the_exact_gaussian_form() {
        // Zhu and Wang 2019 Thm. 6 applied to the Gaussian (ε(ℓ) = ℓ/(2σ²)) must upper-bound the
        // exact subsampled-Gaussian RDP; check the same formula through a Gaussian-shaped ε(ℓ).
        for &(q, sigma) in &[(0.01, 1.0), (0.1, 2.0), (0.3, 0.8)] {
            for alpha in 2u64..40 {
                let a = alpha as f64;
                let ln_q = f64::ln(q);
                let ln_1mq = (-q).ln_1p();
                let eps = |l: f64| l / (2.0 * sigma * sigma);
                let mut terms = vec![(a - 1.0) * ln_1mq + ((a - 1.0) * q).ln_1p()];
                terms.push(ln_binom(alpha, 2) + 2.0 * ln_q + (a - 2.0) * ln_1mq + eps(2.0));
                for l in 3..=alpha {
                    let lf = l as f64;
                    terms.push(
                        3f64.ln()
                            + ln_binom(alpha, l)
                            + (a - lf) * ln_1mq
                            + lf * ln_q
                            + (lf - 1.0) * eps(lf),
                    );
                }
                let bound = log_sum_exp(&terms) / (a - 1.0);
                let exact = rdp_poisson_gaussian(q, sigma, a);
                assert!(
                    bound >= exact * (1.0 - 1e-12),
                    "q={q} sigma={sigma} alpha={alpha}"
                );
            }
        }
    }
}
