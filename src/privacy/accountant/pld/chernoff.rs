//! PLD room, layer 2 (composition): where a composition's mass lives. The window of a sum of
//! independent draws outside which each tail holds at most τ/2, by Chernoff bounds on the
//! log-moment-generating function (Boucheron, Lugosi, Massart, "Concentration inequalities",
//! §2.2; for one part, dp_accounting `compute_self_convolve_bounds`).
//!
//! Owns [`convolution_bounds`] and the search for its Chernoff order: a Newton search on block
//! summaries of each PMF that only steers, the bound itself always the exact log-MGF at the
//! chosen λ, so the window's tail mass is at most τ whatever the search finds. `fourier` sizes
//! its transforms with it.
//!
//! Must not: transform or convolve (that is `fourier`), or know mechanisms or events. All maths
//! is f64.

use rayon::prelude::*;

/// Window [lo, hi] (indices of the sum of `count` independent draws from each PMF of `parts`,
/// relative to the sum of their `lower`s) outside which each tail has mass ≤ τ/2, by Chernoff
/// bounds: P[S ≥ a] ≤ exp(Σ_b T_b K_b(λ) − λa), K_b the log-MGF of part b (Boucheron, Lugosi,
/// Massart, "Concentration inequalities", §2.2; for one part, dp_accounting
/// `compute_self_convolve_bounds`); the trivial window [0, Σ_b (n_b − 1)T_b] when τ = 0.
pub(super) fn convolution_bounds(
    parts: &[(&[f64], u64)],
    tail_mass_truncation: f64,
) -> (i128, i128) {
    let full: i128 = parts
        .iter()
        .map(|(p, t)| (p.len() as i128 - 1) * *t as i128)
        .sum();
    let (mut lo, mut hi) = (0i128, full);
    if tail_mass_truncation <= 0.0 {
        return (lo, hi);
    }
    // The search for λ runs on block summaries (a 64th of the points each); only the chosen λ
    // is evaluated exactly, and any λ gives a valid bound.
    let summaries: Vec<BlockSummary> = parts
        .par_iter()
        .map(|&(probs, _)| BlockSummary::new(probs))
        .collect();
    let mut var_t = 0.0;
    for (summary, &(_, count)) in summaries.iter().zip(parts) {
        let Some(var) = summary.variance() else {
            return (lo, hi);
        };
        var_t += count as f64 * var;
    }
    let log_2_over_tau = (2.0 / tail_mass_truncation).ln();
    let sd_t = var_t.sqrt().max(1e-3);
    let lambda_star = (2.0 * log_2_over_tau).sqrt() / sd_t;
    // Each part's term on the rayon pool, summed in order: the same bits on any thread count.
    let total = |term: &(dyn Fn(usize) -> f64 + Sync)| -> f64 {
        if parts.len() == 1 {
            return term(0);
        }
        let terms: Vec<f64> = (0..parts.len()).into_par_iter().map(term).collect();
        terms.iter().sum()
    };
    let exact_log_mgf = |lambda: f64| {
        let mgf = LogMgf::new(lambda);
        total(&|b: usize| parts[b].1 as f64 * mgf.of(parts[b].0))
    };
    // (K, K', K'') of Σ T_b K_b at λ from the summaries, summed in order as `total` does.
    let approx = |lambda: f64| -> (f64, f64, f64) {
        let term = |b: usize| {
            let t = parts[b].1 as f64;
            let (k, k1, k2) = summaries[b].approx_log_mgf_derivatives(lambda);
            (t * k, t * k1, t * k2)
        };
        let terms: Vec<(f64, f64, f64)> = if parts.len() == 1 {
            vec![term(0)]
        } else {
            (0..parts.len()).into_par_iter().map(term).collect()
        };
        terms.iter().fold((0.0, 0.0, 0.0), |acc, x| {
            (acc.0 + x.0, acc.1 + x.1, acc.2 + x.2)
        })
    };
    // a(λ) = (Σ T_b K_b(λ) + ln(2/τ))/λ is quasi-convex in λ > 0 (its sublevel sets are those of
    // the convex Σ T_b K_b(λ) − aλ + ln(2/τ)), with a'(λ) of the sign of the non-decreasing
    // g(λ) = λK'(λ) − K(λ) − ln(2/τ); its root is found by Newton's method on the summaries,
    // safeguarded by bisection on ln λ. An inexact minimum only widens the window.
    let upper = |k: &dyn Fn(f64) -> f64, lambda: f64| (k(lambda) + log_2_over_tau) / lambda;
    let lower = |k: &dyn Fn(f64) -> f64, lambda: f64| (k(-lambda) + log_2_over_tau) / lambda;
    // Search λ from well below the Gaussian optimum (heavy, thin tails such as a subsampled
    // mechanism at tiny q want λ ~ 1/n, as in dp_accounting's orders k/n) to well above it.
    let n_f = parts.iter().map(|(p, _)| p.len()).max().unwrap_or(1) as f64;
    let log_lo = (lambda_star * (-4.0f64).exp()).min(0.5 / n_f).ln();
    let log_hi = (lambda_star * 3.0f64.exp()).max(20.0 / n_f).ln();
    let start = lambda_star.ln().clamp(log_lo, log_hi);
    let u = chernoff_order(&approx, log_2_over_tau, log_lo, log_hi, start);
    let a = upper(&exact_log_mgf, u.exp());
    if a.is_finite() {
        hi = hi.min(a.ceil() as i128 + 1);
    }
    // The lower tail: the same search on λ ↦ K(−λ), whose derivatives are (−K'(−λ), K''(−λ)).
    let mirrored = |lambda: f64| {
        let (k, k1, k2) = approx(-lambda);
        (k, -k1, k2)
    };
    let u = chernoff_order(&mirrored, log_2_over_tau, log_lo, log_hi, start);
    let b = lower(&exact_log_mgf, u.exp());
    if b.is_finite() {
        lo = lo.max((-b).floor() as i128 - 1);
    }
    if hi < lo {
        // Only possible through rounding when the mass is tiny; fall back to the full range.
        return (0, full);
    }
    (lo, hi)
}

/// ln λ between `log_lo` and `log_hi` minimising (K(λ) + c)/λ for a convex K given with its first two
/// derivatives by `k`: the root of g(λ) = λK'(λ) − K(λ) − c (non-decreasing, g' = λK''), by
/// Newton steps in λ kept inside a shrinking bracket on ln λ, bisecting when a step leaves it;
/// an end of the range when g keeps one sign there. Stops when a step moves ln λ by < 1e-4 (the
/// golden-section search it replaced stopped at a bracket of 1e-4), after at most 60 evaluations.
fn chernoff_order(
    k: &dyn Fn(f64) -> (f64, f64, f64),
    c: f64,
    log_lo: f64,
    log_hi: f64,
    start: f64,
) -> f64 {
    let (mut a, mut b) = (log_lo, log_hi);
    let mut u = start;
    for _ in 0..60 {
        let lambda = u.exp();
        let (k0, k1, k2) = k(lambda);
        let g = lambda * k1 - k0 - c;
        if !g.is_finite() {
            // Only when λ is far too large for the summaries' range: look lower.
            b = u;
            u = 0.5 * (a + b);
            continue;
        }
        if g > 0.0 {
            b = u;
        } else {
            a = u;
        }
        let newton = lambda - g / (lambda * k2);
        let next = if newton > 0.0 && newton.is_finite() && newton.ln() > a && newton.ln() < b {
            newton.ln()
        } else {
            0.5 * (a + b)
        };
        if (next - u).abs() < 1e-4 || b - a < 1e-4 {
            return next;
        }
        u = next;
    }
    u
}

/// The argument of the smallest value of `f` found by golden-section search on [lo, hi]
/// (`iterations` steps, plus both ends), ignoring non-finite values (`lo` if none is finite).
#[cfg(test)]
fn golden_argmin(f: impl Fn(f64) -> f64, lo: f64, hi: f64, iterations: usize) -> f64 {
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (lo, hi);
    let finite = |v: f64| if v.is_finite() { v } else { f64::INFINITY };
    let mut best = (finite(f(lo)), lo);
    let mut consider = |v: f64, x: f64| {
        if v < best.0 {
            best = (v, x);
        }
    };
    consider(finite(f(hi)), hi);
    let mut c = b - ratio * (b - a);
    let mut d = a + ratio * (b - a);
    let (mut fc, mut fd) = (finite(f(c)), finite(f(d)));
    for _ in 0..iterations {
        consider(fc, c);
        consider(fd, d);
        if fc <= fd {
            b = d;
            d = c;
            fd = fc;
            c = b - ratio * (b - a);
            fc = finite(f(c));
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + ratio * (b - a);
            fd = finite(f(d));
        }
    }
    consider(fc, c);
    consider(fd, d);
    best.1
}

/// A PMF summarised in blocks of [`BlockSummary::BLOCK`] points for the search of the Chernoff
/// order λ: per block its mass P, mean index m and variance v, and the log-MGF approximated by
/// ln Σ_B P_B e^{λ m_B + λ² v_B / 2} (each block's cumulants to second order; exact for λ → 0).
/// It only steers the search; the bound itself is always [`log_mgf`] at the chosen λ.
struct BlockSummary {
    /// (ln P_B, m_B, v_B / 2) of every block with mass.
    blocks: Vec<(f64, f64, f64)>,
}

impl BlockSummary {
    const BLOCK: usize = 64;

    fn new(probs: &[f64]) -> Self {
        // One pass per block: mass, first and second moments of the offset in the block.
        let blocks = probs
            .chunks(Self::BLOCK)
            .enumerate()
            .filter_map(|(b, chunk)| {
                let (mut mass, mut first, mut second) = (0.0f64, 0.0f64, 0.0f64);
                for (j, &p) in chunk.iter().enumerate() {
                    let j = j as f64;
                    mass += p;
                    first += j * p;
                    second += j * j * p;
                }
                if mass <= 0.0 {
                    return None;
                }
                let mean = first / mass;
                let var = (second / mass - mean * mean).max(0.0);
                Some((mass.ln(), (b * Self::BLOCK) as f64 + mean, var / 2.0))
            })
            .collect();
        BlockSummary { blocks }
    }

    /// The variance of the index, from the blocks' masses, means and variances (law of total
    /// variance); `None` without mass.
    fn variance(&self) -> Option<f64> {
        let (mut mass, mut first, mut second) = (0.0, 0.0, 0.0);
        for &(log_mass, mean, half_var) in &self.blocks {
            let p = log_mass.exp();
            mass += p;
            first += p * mean;
            second += p * (2.0 * half_var + mean * mean);
        }
        if mass <= 0.0 {
            return None;
        }
        let mean = first / mass;
        Some((second / mass - mean * mean).max(0.0))
    }

    /// The approximate log-MGF of [`BlockSummary::approx_log_mgf`] and its first two
    /// derivatives in λ (one exponential per block): with t_B = ln P_B + λm_B + λ²v_B/2 and
    /// w_B ∝ e^{t_B}, K' = Σ w_B t_B' and K'' = Σ w_B (t_B'² + v_B) − K'², t_B' = m_B + λv_B.
    fn approx_log_mgf_derivatives(&self, lambda: f64) -> (f64, f64, f64) {
        let term = |&(log_mass, mean, half_var): &(f64, f64, f64)| {
            log_mass + lambda * mean + lambda * lambda * half_var
        };
        let Some((top, top_slope)) = self
            .blocks
            .iter()
            .map(|b| (term(b), b.1 + 2.0 * lambda * b.2))
            .max_by(|x, y| x.0.total_cmp(&y.0))
        else {
            return (f64::NEG_INFINITY, 0.0, 0.0);
        };
        if !top.is_finite() {
            return (top, 0.0, 0.0);
        }
        // Slopes relative to the top block's, so that K'' is not a difference of large squares.
        let (mut sum, mut s1, mut s2, mut curvature) = (0.0, 0.0, 0.0, 0.0);
        for b in &self.blocks {
            let w = (term(b) - top).exp();
            let slope = b.1 + 2.0 * lambda * b.2 - top_slope;
            sum += w;
            s1 += w * slope;
            s2 += w * slope * slope;
            curvature += w * 2.0 * b.2;
        }
        let (m1, m2) = (s1 / sum, s2 / sum);
        (
            top + sum.ln(),
            top_slope + m1,
            (m2 - m1 * m1).max(0.0) + curvature / sum,
        )
    }

    #[cfg(test)]
    fn approx_log_mgf(&self, lambda: f64) -> f64 {
        let term = |&(log_mass, mean, half_var): &(f64, f64, f64)| {
            log_mass + lambda * mean + lambda * lambda * half_var
        };
        let top = self
            .blocks
            .iter()
            .map(term)
            .fold(f64::NEG_INFINITY, f64::max);
        if !top.is_finite() {
            return top;
        }
        top + self
            .blocks
            .iter()
            .map(|b| (term(b) - top).exp())
            .sum::<f64>()
            .ln()
    }
}

/// ln Σ_i p_i e^{λ i}, in blocks of B = min(4096, ⌊200/|λ|⌋) points: within a block the
/// weights e^{λ j} ≤ e^{200} are precomputed (by recurrence, re-anchored with an exact `exp`
/// every 64 points), across blocks a running log-sum-exp. The bound built on it tolerates the
/// ~1e−13 relative error (the window gets a one-point margin on each side).
#[cfg(test)]
fn log_mgf(probs: &[f64], lambda: f64) -> f64 {
    LogMgf::new(lambda).of(probs)
}

/// The weights of [`log_mgf`] at one λ, computed once for all the parts of a composition.
struct LogMgf {
    lambda: f64,
    weights: Vec<f64>,
}

impl LogMgf {
    fn new(lambda: f64) -> Self {
        let block = ((200.0 / lambda.abs()).floor() as usize).clamp(1, 4096);
        let step = lambda.exp();
        let mut weights = Vec::with_capacity(block);
        let mut w = 1.0f64;
        for j in 0..block {
            if j % 64 == 0 {
                w = (lambda * j as f64).exp();
            }
            weights.push(w);
            w *= step;
        }
        LogMgf { lambda, weights }
    }

    fn of(&self, probs: &[f64]) -> f64 {
        let block = self.weights.len();
        let mut acc = f64::NEG_INFINITY;
        for (b, chunk) in probs.chunks(block).enumerate() {
            let s = dot(chunk, &self.weights[..chunk.len()]);
            if s > 0.0 {
                let term = self.lambda * (b * block) as f64 + s.ln();
                acc = crate::privacy::special::log_add_exp(acc, term);
            }
        }
        acc
    }
}

/// Σ a_i b_i with four partial sums (lets the compiler vectorise).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (a4, a_rest) = a.split_at(a.len() - a.len() % 4);
    let (b4, b_rest) = b.split_at(a4.len());
    for (x, y) in a4.chunks_exact(4).zip(b4.chunks_exact(4)) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    let rest: f64 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_summaries_steer_the_search_like_the_exact_log_mgf() {
        // A discretised Gaussian bump (sd 300 points) over 5,000 points: at the orders the window
        // search visits (λ·sd of order 1), the block summaries' log-MGF is within 1e-3 of the
        // exact one, and the argument of the minimum of a(λ) found on each agrees.
        let probs: Vec<f64> = (0..5000)
            .map(|i| (-((i as f64 - 2100.0) / 300.0).powi(2) / 2.0).exp())
            .collect();
        let total: f64 = probs.iter().sum();
        let probs: Vec<f64> = probs.iter().map(|p| p / total).collect();
        let summary = BlockSummary::new(&probs);
        for lambda in [-1e-2, -3e-3, -1e-4, 1e-4, 1e-3, 3e-3, 1e-2] {
            let (exact, approx) = (log_mgf(&probs, lambda), summary.approx_log_mgf(lambda));
            assert!(
                (exact - approx).abs() <= 1e-3 * exact.abs().max(1.0),
                "λ = {lambda}: {exact} vs {approx}"
            );
        }
        let exact = golden_argmin(
            |u| (log_mgf(&probs, u.exp()) + 20.0) / u.exp(),
            -12.0,
            0.0,
            30,
        );
        let approx = golden_argmin(
            |u| (summary.approx_log_mgf(u.exp()) + 20.0) / u.exp(),
            -12.0,
            0.0,
            30,
        );
        assert!((exact - approx).abs() < 1e-2, "ln λ: {exact} vs {approx}");
    }

    #[test]
    fn newton_finds_the_order_the_golden_section_search_found() {
        // A skewed PMF (a bump plus a heavy right tail), both tails, two counts: the Newton search
        // on the summaries' derivatives lands where the golden-section search on the summaries'
        // log-MGF does, and the bound a(λ) there is no larger (up to 1e-6 relative).
        let probs: Vec<f64> = (0..6000)
            .map(|i| {
                let x = i as f64;
                (-((x - 1500.0) / 200.0).powi(2) / 2.0).exp()
                    + 1e-4 * (-(x - 1500.0).abs() / 900.0).exp()
            })
            .collect();
        let total: f64 = probs.iter().sum();
        let probs: Vec<f64> = probs.iter().map(|p| p / total).collect();
        let summary = BlockSummary::new(&probs);
        let c = (2.0f64 / 1e-15).ln();
        for count in [1u64, 50] {
            let t = count as f64;
            for sign in [1.0, -1.0] {
                let k = |lambda: f64| {
                    let (k0, k1, k2) = summary.approx_log_mgf_derivatives(sign * lambda);
                    (t * k0, sign * t * k1, t * k2)
                };
                let a = |u: f64| (t * summary.approx_log_mgf(sign * u.exp()) + c) / u.exp();
                let golden = golden_argmin(a, -14.0, 0.0, 40);
                let newton = chernoff_order(&k, c, -14.0, 0.0, -6.0);
                assert!(
                    (golden - newton).abs() < 1e-3,
                    "T = {count}, sign {sign}: ln λ {golden} vs {newton}"
                );
                // Newton stops at steps of 1e-4 in ln λ, the golden search here at a bracket of
                // 1e-7: near the minimum a(λ) differs by ~(1e-4)² relative.
                assert!(
                    a(newton) <= a(golden) + 1e-6 * a(golden).abs(),
                    "T = {count}, sign {sign}: {} vs {}",
                    a(newton),
                    a(golden)
                );
            }
        }
    }
}
