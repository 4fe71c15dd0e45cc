//! The Poisson-subsampled Gaussian kernel (room: `privacy::accountant::rdp`): ln A_α at integer
//! and fractional orders (Mironov, Talwar, Zhang 2019, "Rényi Differential Privacy of the Sampled
//! Gaussian Mechanism", §3.3), the fast fractional series and its reference twins.

use super::*;
use crate::privacy::special::{
    LN_SQRT_2PI, alternating_sum, ln_binom, log_add_exp, log_normal_cdf, mills_ratio,
    mills_ratio_bound,
};

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
pub(super) const MAX_SERIES_TERMS: usize = 4000;

/// Terms of the alternating tail of the fractional series summed by [`alternating_sum`] when it has
/// not converged directly: its error is at most 2·(3 + √8)^{−22} < 3e-17 of the tail.
pub(super) const TAIL_TERMS: usize = 22;

/// A term below this fraction of the partial sum (and of its own leading factor) is not
/// evaluated: it cannot change the sum in double precision.
pub(super) const NEGLIGIBLE: f64 = 1e-20;

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
/// first n ≤ 22 terms by the Cohen–Rodriguez Villegas–Zagier acceleration (`alternating_sum`),
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
pub(super) fn series_converged(decreasing: bool, largest: f64, sum: f64, reference: f64) -> bool {
    decreasing
        && largest < 9.4e-14 * sum
        && largest < sum * (1e-12 * (sum.ln() + reference)).max(1e-15)
}

/// ln A when the fractional series stops at term `fi` (converged, or out of terms). Past i > α
/// the terms alternate in sign, so consecutive partial sums bracket the limit: the larger one is
/// returned, an upper bound. Out of terms without that bracket: +∞ (conservative).
pub(super) fn series_end(
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
pub(super) fn exp_times_normal_cdf(e: f64, x: f64) -> f64 {
    if x > -20.0 && e < 700.0 {
        e.exp() * crate::privacy::special::normal_cdf(x)
    } else {
        (e + log_normal_cdf(x)).exp()
    }
}

/// The same series as [`log_a_poisson_gaussian_frac`], accumulated in log space with signs (slower;
/// used only when terms overflow linear space).
pub(super) fn log_a_poisson_gaussian_frac_logspace(q: f64, sigma: f64, alpha: f64) -> f64 {
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
pub(super) fn poisson_gaussian_with(
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
