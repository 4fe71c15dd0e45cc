//! PLD room, layer 2 (composition): convolution of discretised privacy-loss distributions in
//! the Fourier domain.
//!
//! Composition of independent mechanisms is convolution of their PLDs (Sommer, Meiser,
//! Mohammadi 2019, Thm 1; Koskela, Jälkö, Honkela 2020 eq. (3.2)). Owns the three ways dpx
//! computes it: a pairwise FFT convolution ([`convolve`]); the T-fold self-composition, the
//! transform raised to the power T on a window chosen by a Chernoff bound (dp_accounting
//! `common.self_convolve`, supplementary note eq. (5)); and the composition of many distinct
//! PMFs, each run a number of times, in one pass ([`compose_many`]): the product of their
//! transforms, the window bounded by the Chernoff bound of the whole sum. Transforms of one
//! length share a plan from a small per-thread cache of recent lengths.
//!
//! Aliasing: a length-L transform computes the sum modulo L. The window holds all but τ of the
//! mass; what lies outside folds into the window (only adding mass) and τ is put at +∞, so the
//! result's δ(ε) is at least the exact one: the pessimistic property survives.
//!
//! Must not: know mechanisms or events. All maths is f64.

use std::cell::RefCell;
use std::sync::Arc;

use rayon::prelude::*;
use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

use super::pmf::{DiscretePmf, MAX_SUPPORT, to_i64, too_large};
use crate::privacy::accountant::AccountingError;

/// How many transform lengths each thread keeps planned. A plan holds its twiddles (16 bytes per
/// point) and those of its sub-transforms; a planner that kept every length it was asked for grew
/// without bound when many windows were composed (the per-epoch ε curve of an 11,719-step ADP
/// plan peaked at 4.3 GiB).
const PLAN_CACHE: usize = 8;

/// A planned forward transform of one length.
type Plan = Arc<dyn Fft<f64>>;

thread_local! {
    /// The most recently used plans of this thread, oldest first: planning a length again costs
    /// its twiddles (recomputing them at every composition cost a fifth of a heterogeneous
    /// schedule's accounting), and a composition asks for the same few lengths over and over.
    static PLANS: RefCell<Vec<(usize, Plan)>> = const { RefCell::new(Vec::new()) };
}

/// The forward FFT of length `len`, from this thread's cache of recent plans.
fn forward_plan(len: usize) -> Plan {
    PLANS.with(|cell| {
        let mut plans = cell.borrow_mut();
        if let Some(i) = plans.iter().position(|(l, _)| *l == len) {
            let entry = plans.remove(i);
            let fft = Arc::clone(&entry.1);
            plans.push(entry);
            return fft;
        }
        let fft = FftPlanner::new().plan_fft_forward(len);
        if plans.len() >= PLAN_CACHE {
            plans.remove(0);
        }
        plans.push((len, Arc::clone(&fft)));
        fft
    })
}

/// Below this many multiply-adds, convolve directly rather than by FFT.
const DIRECT_CONVOLUTION_WORK: usize = 1 << 15;

/// A transform coefficient whose T-th power is below e^{−46} ≈ 1e−20 is set to zero: each output
/// bin moves by at most 1e−20 (inverse DFT normalised by 1/L).
const LOG_NEGLIGIBLE_COEFFICIENT: f64 = -46.0;

/// The window, grid offset and infinity mass of a T-fold self-composition.
struct Window {
    lo: i128,
    out_len: usize,
    lower: i64,
    infinity_mass: f64,
}

fn window(pmf: &DiscretePmf, count: u64, tau: f64) -> Result<Window, AccountingError> {
    let t = count as f64;
    let infinity_mass = (tau - (t * (-pmf.infinity_mass()).ln_1p()).exp_m1()).clamp(0.0, 1.0);
    let (lo, hi) = convolution_bounds(&[(pmf.probs(), count)], tau);
    let out_len = usize::try_from(hi - lo + 1).map_err(|_| too_large(usize::MAX))?;
    if out_len > MAX_SUPPORT {
        return Err(too_large(out_len));
    }
    let lower = to_i64((pmf.lower() as i128) * (count as i128) + lo)?;
    Ok(Window {
        lo,
        out_len,
        lower,
        infinity_mass,
    })
}

/// T-fold self-composition of one or two PMFs (same grid) with a single forward and a single
/// inverse complex FFT: the first sequence rides on the real part, the second on the imaginary
/// part; their spectra are separated by Hermitian symmetry,
/// A[k] = (X[k] + X̄[L−k])/2, B[k] = (X[k] − X̄[L−k])/(2i), raised to the power T, and
/// recombined as A^T + i·B^T so that the inverse gives a^{*T} in the real and b^{*T} in the
/// imaginary part.
pub(super) fn self_compose_packed(
    pmfs: &[&DiscretePmf],
    count: u64,
    tau: f64,
) -> Result<Vec<DiscretePmf>, AccountingError> {
    if count == 0 {
        return Ok(pmfs
            .iter()
            .map(|p| DiscretePmf::identity(p.interval()))
            .collect());
    }
    if count == 1 {
        return Ok(pmfs.iter().map(|p| (*p).clone()).collect());
    }
    let t = count as f64;
    let windows: Vec<Window> = pmfs
        .iter()
        .map(|p| window(p, count, tau))
        .collect::<Result<_, _>>()?;
    let widest = windows.iter().map(|w| w.out_len).max().unwrap_or(1);
    let len = fast_len(widest);
    let mut buf = vec![Complex64::new(0.0, 0.0); len];
    load_folded(&mut buf, pmfs[0].probs(), pmfs.get(1).map(|p| p.probs()));
    let fft = forward_plan(len);
    fft.process(&mut buf);
    let min_norm_sqr = (2.0 * LOG_NEGLIGIBLE_COEFFICIENT / t).exp();
    for k in 0..=len / 2 {
        let j = (len - k) % len;
        let xk = buf[k];
        let xj = buf[j].conj();
        let a = (xk + xj) * 0.5;
        let ya = power(a, t, min_norm_sqr);
        let yb = if pmfs.len() > 1 {
            power((xk - xj) * Complex64::new(0.0, -0.5), t, min_norm_sqr)
        } else {
            Complex64::new(0.0, 0.0)
        };
        // Y[k] = A^T + i B^T and Y[L−k] = conj(A^T) + i conj(B^T); stored conjugated so that
        // the forward plan computes the inverse: ifft(Y) = conj(fft(conj(Y)))/L.
        buf[k] = Complex64::new(ya.re - yb.im, -(ya.im + yb.re));
        buf[j] = Complex64::new(ya.re + yb.im, ya.im - yb.re);
    }
    fft.process(&mut buf);
    let scale = 1.0 / len as f64;
    Ok(pmfs
        .iter()
        .zip(&windows)
        .enumerate()
        .map(|(which, (pmf, w))| {
            // the window starts at lo mod L and may wrap around the end of the buffer
            let start = w.lo.rem_euclid(len as i128) as usize;
            let first = (len - start).min(w.out_len);
            let wrapped = &buf[..w.out_len - first];
            let probs: Vec<f64> = buf[start..start + first]
                .iter()
                .chain(wrapped)
                .map(|z| {
                    // undo the conjugation of the inverse-by-forward trick
                    let v = if which == 0 { z.re } else { -z.im };
                    (v * scale).max(0.0)
                })
                .collect();
            DiscretePmf::from_parts(pmf.interval(), w.lower, probs, w.infinity_mass)
        })
        .collect())
}

/// Above this count a transform coefficient is raised by the polar form, below it by repeated
/// squaring (≤ 2·log₂ T products: cheaper, and exact to a few ulps).
const SQUARING_MAX_COUNT: u64 = 64;

/// z ↦ z^T for transform coefficients (|z| ≤ 1), 0 when |z|^T < e^{−46} (so no product below
/// ever reaches subnormal numbers); e^{2·(−46)/T} is computed once per count, not per coefficient.
struct PowerOf {
    count: u64,
    min_norm_sqr: f64,
}

impl PowerOf {
    fn new(count: u64) -> Self {
        PowerOf {
            count,
            min_norm_sqr: (2.0 * LOG_NEGLIGIBLE_COEFFICIENT / count as f64).exp(),
        }
    }

    fn of(&self, z: Complex64) -> Complex64 {
        let count = self.count;
        if count > SQUARING_MAX_COUNT {
            return power(z, count as f64, self.min_norm_sqr);
        }
        if z.norm_sqr() <= self.min_norm_sqr {
            return Complex64::new(0.0, 0.0);
        }
        if count == 1 {
            return z;
        }
        let (mut base, mut k, mut out) = (z, count, Complex64::new(1.0, 0.0));
        loop {
            if k & 1 == 1 {
                out *= base;
            }
            k >>= 1;
            if k == 0 {
                return out;
            }
            base *= base;
        }
    }
}

/// z^T for a transform coefficient (|z| ≤ 1), 0 when |z|^T < e^{−46}.
#[cfg(test)]
fn integer_power(z: Complex64, count: u64) -> Complex64 {
    PowerOf::new(count).of(z)
}

/// `buf` ← `re` + i·`im`, each folded modulo the buffer's length (the transform of a sequence
/// folded modulo L is the length-L transform of the sequence); the imaginary part is zero without
/// `im`. Writes every element, so the buffer needs no zeroing first.
fn load_folded(buf: &mut [Complex64], re: &[f64], im: Option<&[f64]>) {
    let len = buf.len();
    let head = |p: &[f64]| p.len().min(len);
    let (re_head, im_head) = (head(re), im.map_or(0, head));
    for (i, z) in buf.iter_mut().enumerate() {
        let x = if i < re_head { re[i] } else { 0.0 };
        let y = match im {
            Some(im) if i < im_head => im[i],
            _ => 0.0,
        };
        *z = Complex64::new(x, y);
    }
    for wrap in re[re_head..].chunks(len) {
        for (z, &p) in buf.iter_mut().zip(wrap) {
            z.re += p;
        }
    }
    if let Some(im) = im {
        for wrap in im[im_head..].chunks(len) {
            for (z, &p) in buf.iter_mut().zip(wrap) {
                z.im += p;
            }
        }
    }
}

/// The PLD of composing `count` independent runs of each PMF of `parts` (all on one grid, at
/// least one part): the product of the parts' transforms raised to their counts, inverted once.
///
/// The window [lo, hi] of the sum holds all but τ of its finite mass (Chernoff bound of the whole
/// sum, [`convolution_bounds`]); the transform length is the smallest fast length ≥ hi − lo + 1,
/// parts longer than it are folded modulo it (the transform of a sum modulo L is unchanged). Two
/// parts share each complex FFT (real and imaginary part, separated by Hermitian symmetry), the
/// product is Hermitian and only its first half is formed. Infinity mass: τ + 1 − Π_b (1 − m_b)^{T_b}.
///
/// Equals, up to rounding (≈ 1e−15 per bin), the sequential composition without intermediate tail
/// truncation, restricted to the window: the composed PLD with one truncation instead of one per
/// step, so never more pessimistic than it.
pub(super) fn compose_many(
    parts: &[(&DiscretePmf, u64)],
    tau: f64,
) -> Result<DiscretePmf, AccountingError> {
    let parts: Vec<(&DiscretePmf, u64)> = parts.iter().copied().filter(|&(_, k)| k > 0).collect();
    let Some(&(first, _)) = parts.first() else {
        return Err(AccountingError::Numerical(
            "composing an empty list of privacy-loss distributions".to_string(),
        ));
    };
    let interval = first.interval();
    if parts.len() == 1 {
        let mut out = self_compose_packed(&[first], parts[0].1, tau)?;
        return Ok(out.remove(0));
    }
    let probs: Vec<(&[f64], u64)> = parts.iter().map(|&(p, k)| (p.probs(), k)).collect();
    let (lo, hi) = convolution_bounds(&probs, tau);
    let out_len = usize::try_from(hi - lo + 1).map_err(|_| too_large(usize::MAX))?;
    if out_len > MAX_SUPPORT {
        return Err(too_large(out_len));
    }
    let mut lower = lo;
    let mut log_finite = 0.0;
    for &(p, k) in &parts {
        lower += p.lower() as i128 * k as i128;
        log_finite += k as f64 * (-p.infinity_mass()).ln_1p();
    }
    let lower = to_i64(lower)?;
    let infinity_mass = (tau - log_finite.exp_m1()).clamp(0.0, 1.0);

    let len = fast_len(out_len);
    let half = len / 2;
    let fft = forward_plan(len);
    let mut scratch = vec![Complex64::new(0.0, 0.0); fft.get_inplace_scratch_len()];
    let mut product = vec![Complex64::new(1.0, 0.0); half + 1];
    let mut buf = vec![Complex64::new(0.0, 0.0); len];
    let negligible = (2.0 * LOG_NEGLIGIBLE_COEFFICIENT).exp();
    for pair in parts.chunks(2) {
        let second = pair.get(1).map(|&(b, _)| b.probs());
        load_folded(&mut buf, pair[0].0.probs(), second);
        fft.process_with_scratch(&mut buf, &mut scratch);
        let powers = (
            PowerOf::new(pair[0].1),
            pair.get(1).map(|&(_, count)| PowerOf::new(count)),
        );
        for (k, acc) in product.iter_mut().enumerate() {
            if acc.re == 0.0 && acc.im == 0.0 {
                continue;
            }
            let xk = buf[k];
            let xj = buf[if k == 0 { 0 } else { len - k }].conj();
            *acc *= powers.0.of((xk + xj) * 0.5);
            if let Some(power) = &powers.1 {
                *acc *= power.of((xk - xj) * Complex64::new(0.0, -0.5));
            }
            if acc.norm_sqr() < negligible {
                *acc = Complex64::new(0.0, 0.0);
            }
        }
    }
    // Inverse by the forward plan, ifft(Y) = conj(fft(conj(Y)))/L, with Y[L−k] = conj(Y[k]).
    for k in 0..len {
        buf[k] = if k <= half {
            product[k].conj()
        } else {
            product[len - k]
        };
    }
    fft.process_with_scratch(&mut buf, &mut scratch);
    let scale = 1.0 / len as f64;
    let start = lo.rem_euclid(len as i128) as usize;
    let head = (len - start).min(out_len);
    let probs: Vec<f64> = buf[start..start + head]
        .iter()
        .chain(&buf[..out_len - head])
        .map(|z| (z.re * scale).max(0.0))
        .collect();
    Ok(DiscretePmf::from_parts(
        interval,
        lower,
        probs,
        infinity_mass,
    ))
}

/// z^t through the polar form, with coefficients below e^{−46} set to zero. `min_norm_sqr`
/// = e^{2·(−46)/t} lets most coefficients be skipped before any logarithm.
fn power(z: Complex64, t: f64, min_norm_sqr: f64) -> Complex64 {
    let r2 = z.norm_sqr();
    if r2 <= min_norm_sqr || r2 == 0.0 {
        return Complex64::new(0.0, 0.0);
    }
    let log_mag = 0.5 * t * r2.ln();
    if log_mag < LOG_NEGLIGIBLE_COEFFICIENT {
        return Complex64::new(0.0, 0.0);
    }
    let angle = t * z.im.atan2(z.re);
    let mag = log_mag.exp();
    Complex64::new(mag * angle.cos(), mag * angle.sin())
}

/// The smallest n ≥ `min` whose only prime factors are 2, 3 and 5 (fast for rustfft).
pub fn fast_len(min: usize) -> usize {
    let min = min.max(1);
    let mut best = min.next_power_of_two();
    let mut p5 = 1usize;
    while p5 < best {
        let mut p35 = p5;
        while p35 < best {
            let mut n = p35;
            while n < min {
                n *= 2;
            }
            best = best.min(n);
            p35 *= 3;
        }
        p5 *= 5;
    }
    best
}

/// The linear convolution of `a` and `b`, negatives from rounding clamped to 0.
pub(super) fn convolve(a: &[f64], b: &[f64]) -> Vec<f64> {
    let out_len = a.len() + b.len() - 1;
    if a.len().saturating_mul(b.len()) <= DIRECT_CONVOLUTION_WORK || a.len().min(b.len()) <= 64 {
        let mut out = vec![0.0; out_len];
        for (i, &x) in a.iter().enumerate() {
            for (j, &y) in b.iter().enumerate() {
                out[i + j] += x * y;
            }
        }
        return out;
    }
    let len = fast_len(out_len);
    let mut fa = vec![Complex64::new(0.0, 0.0); len];
    let mut fb = vec![Complex64::new(0.0, 0.0); len];
    for (dst, &x) in fa.iter_mut().zip(a) {
        dst.re = x;
    }
    for (dst, &x) in fb.iter_mut().zip(b) {
        dst.re = x;
    }
    let fft = forward_plan(len);
    fft.process(&mut fa);
    fft.process(&mut fb);
    // inverse by the forward plan: ifft(Y) = conj(fft(conj(Y)))/L; only the real part is read
    for (x, y) in fa.iter_mut().zip(&fb) {
        *x = (*x * *y).conj();
    }
    fft.process(&mut fa);
    let scale = 1.0 / len as f64;
    fa[..out_len]
        .iter()
        .map(|z| (z.re * scale).max(0.0))
        .collect()
}

/// Window [lo, hi] (indices of the sum of `count` independent draws from each PMF of `parts`,
/// relative to the sum of their `lower`s) outside which each tail has mass ≤ τ/2, by Chernoff
/// bounds: P[S ≥ a] ≤ exp(Σ_b T_b K_b(λ) − λa), K_b the log-MGF of part b (Boucheron, Lugosi,
/// Massart, "Concentration inequalities", §2.2; for one part, dp_accounting
/// `compute_self_convolve_bounds`); the trivial window [0, Σ_b (n_b − 1)T_b] when τ = 0.
fn convolution_bounds(parts: &[(&[f64], u64)], tail_mass_truncation: f64) -> (i128, i128) {
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

    fn pmf(lower: i64, probs: &[f64], inf: f64) -> DiscretePmf {
        DiscretePmf::from_parts(0.1, lower, probs.to_vec(), inf)
    }

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

    #[test]
    fn fast_len_is_smooth_and_minimal() {
        assert_eq!(fast_len(1), 1);
        assert_eq!(fast_len(7), 8);
        assert_eq!(fast_len(11), 12);
        assert_eq!(fast_len(1001), 1024);
        assert_eq!(fast_len(246_802), 248_832); // 2^10·3^5
        for n in [17usize, 97, 1000, 12345] {
            let l = fast_len(n);
            let mut m = l;
            for p in [2, 3, 5] {
                while m.is_multiple_of(p) {
                    m /= p;
                }
            }
            assert_eq!(m, 1, "{l}");
            assert!(l >= n);
        }
    }

    #[test]
    fn fft_convolution_matches_direct() {
        let a: Vec<f64> = (0..400)
            .map(|i| ((i * 37 % 101) as f64) / 20_000.0)
            .collect();
        let b: Vec<f64> = (0..300)
            .map(|i| ((i * 53 % 89) as f64) / 13_000.0)
            .collect();
        let fft = convolve(&a, &b);
        let mut direct = vec![0.0; a.len() + b.len() - 1];
        for (i, x) in a.iter().enumerate() {
            for (j, y) in b.iter().enumerate() {
                direct[i + j] += x * y;
            }
        }
        for (x, y) in fft.iter().zip(&direct) {
            assert!((x - y).abs() < 1e-15, "{x} {y}");
        }
    }

    #[test]
    fn integer_power_matches_the_polar_form() {
        for z in [
            Complex64::new(0.3, -0.4),
            Complex64::new(-0.9, 0.1),
            Complex64::new(0.999, 0.01),
        ] {
            for k in [1u64, 2, 3, 17, 64, 65, 1000] {
                let a = integer_power(z, k);
                let b = power(z, k as f64, 0.0);
                assert!((a - b).norm() <= 1e-13 * b.norm().max(1e-20), "{z} ^ {k}");
            }
        }
        // below e^-46 after the power: exactly zero, never subnormal
        assert_eq!(
            integer_power(Complex64::new(1e-3, 0.0), 20),
            Complex64::new(0.0, 0.0)
        );
    }

    #[test]
    fn compose_many_equals_sequential_convolution() {
        let a = pmf(-2, &[0.1, 0.4, 0.3, 0.15, 0.05], 0.0);
        let b = pmf(1, &[0.2, 0.2, 0.1, 0.3, 0.1, 0.05, 0.05], 1e-3);
        let c = pmf(0, &[0.6, 0.25, 0.1, 0.049], 1e-3);
        let many = compose_many(&[(&a, 1), (&b, 3), (&c, 2)], 0.0).unwrap();
        let mut seq = a.clone();
        for p in [&b, &b, &b, &c, &c] {
            seq = seq.compose(p, 0.0).unwrap();
        }
        assert_eq!(many.lower(), seq.lower());
        assert_eq!(many.size(), seq.size());
        for (x, y) in many.probs().iter().zip(seq.probs()) {
            assert!((x - y).abs() < 1e-15, "{x} vs {y}");
        }
        assert!((many.infinity_mass() - seq.infinity_mass()).abs() < 1e-15);
        // a part with count 0 is left out; one part is its self-composition
        let one = compose_many(&[(&b, 3), (&c, 0)], 0.0).unwrap();
        assert_eq!(one, b.self_compose(3, 0.0).unwrap());
        assert!(compose_many(&[(&b, 0)], 0.0).is_err());
    }

    #[test]
    fn compose_many_with_a_window_is_pessimistic_and_close() {
        use crate::privacy::accountant::pld::PrivacyLossDistribution;
        use crate::privacy::event::NeighbouringRelation;
        let parts: Vec<(DiscretePmf, u64)> = [(0.9, 5u64), (1.2, 7), (1.7, 11), (2.5, 3)]
            .iter()
            .map(|&(sigma, k)| {
                let pld = PrivacyLossDistribution::from_gaussian(
                    sigma,
                    0.05,
                    NeighbouringRelation::AddOrRemoveOne,
                    1e-3,
                )
                .unwrap();
                (pld.pmf_remove().clone(), k)
            })
            .collect();
        let refs: Vec<(&DiscretePmf, u64)> = parts.iter().map(|(p, k)| (p, *k)).collect();
        let windowed = compose_many(&refs, 1e-15).unwrap();
        let mut exact = DiscretePmf::identity(1e-3);
        for (p, k) in &parts {
            for _ in 0..*k {
                exact = exact.compose(p, 0.0).unwrap();
            }
        }
        assert!(windowed.size() < exact.size(), "the window cut nothing");
        for eps in [0.0, 0.1, 0.5, 1.0, 2.0, 3.0] {
            let (w, e) = (
                windowed.delta_for_epsilon(eps),
                exact.delta_for_epsilon(eps),
            );
            // pessimistic up to the transforms' rounding (≈ 1e-16 of the largest mass per bin,
            // over ~1e4 bins)
            assert!(w >= e - 1e-13, "eps {eps}: {w} < {e}");
            assert!(w <= e + 1e-12, "eps {eps}: {w} ≫ {e}");
        }
    }
}
