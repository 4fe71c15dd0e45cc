//! PLD room, layer 2: a privacy-loss distribution discretised on a grid, and its composition.
//!
//! Owns [`DiscretePmf`]: probabilities on the losses `(lower + i)·interval`, plus a separate mass
//! at +∞ (Koskela, Jälkö, Honkela 2020 §3; dp_accounting `pld_pmf.DensePLDPmf`). Composition of
//! independent mechanisms is convolution of their PLDs (Sommer, Meiser, Mohammadi 2019, Thm 1;
//! Koskela et al. 2020 eq. (3.2)), computed by FFT; T-fold self-composition raises the transform
//! to the power T on a window chosen by a Chernoff bound (dp_accounting `common.self_convolve`,
//! supplementary note eq. (5)). Every truncation moves mass upwards or to +∞, so each result's
//! hockey-stick divergence is at least the untruncated one: the pessimistic property survives.
//!
//! Also owns the two conversions: δ(ε) = m_∞ + Σ_{ℓ > ε} (1 − e^{ε − ℓ}) p(ℓ)
//! (supplementary note Observation 1) and its exact inverse over the discrete support
//! (`pld_pmf._get_epsilon_for_delta`), and the connect-the-dots discretisation of a continuous
//! mechanism from its δ(ε) curve (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, Alg. 1).
//!
//! Must not: know mechanisms or events. All maths is f64.

use rustfft::FftPlanner;
use rustfft::num_complex::Complex64;

use crate::privacy::accountant::AccountingError;

/// The largest grid (points) any PMF or FFT buffer may have: 2^25 points (256 MiB of f64,
/// twice that as complex). Beyond it the caller must use a coarser interval.
pub const MAX_SUPPORT: usize = 1 << 25;

/// Below this many multiply-adds, convolve directly rather than by FFT.
const DIRECT_CONVOLUTION_WORK: usize = 1 << 15;

/// A transform coefficient whose T-th power is below e^{−46} ≈ 1e−20 is set to zero: each output
/// bin moves by at most 1e−20 (inverse DFT normalised by 1/L).
const LOG_NEGLIGIBLE_COEFFICIENT: f64 = -46.0;

/// A discretised privacy-loss distribution: mass `probs[i]` at loss `(lower + i)·interval`,
/// and `infinity_mass` at +∞.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscretePmf {
    interval: f64,
    lower: i64,
    probs: Vec<f64>,
    infinity_mass: f64,
}

impl DiscretePmf {
    /// The PLD of a mechanism that releases nothing: all mass at loss 0.
    pub fn identity(interval: f64) -> Self {
        Self {
            interval,
            lower: 0,
            probs: vec![1.0],
            infinity_mass: 0.0,
        }
    }

    /// A PMF from its parts; leading and trailing exact zeros are dropped.
    pub fn from_parts(interval: f64, lower: i64, probs: Vec<f64>, infinity_mass: f64) -> Self {
        let mut pmf = Self {
            interval,
            lower,
            probs,
            infinity_mass: infinity_mass.clamp(0.0, 1.0),
        };
        pmf.trim_zeros();
        pmf
    }

    /// Pessimistic connect-the-dots PMF on the contiguous grid `lower..=lower + deltas.len() − 1`
    /// (times `interval`) from the mechanism's exact hockey-stick curve δ_i = δ(ε_i)
    /// (Doroshenko et al. 2022, Algorithm 1 with equal gaps h = `interval`):
    ///
    /// p_1 = 1 − δ_1 + (δ_2 − δ_1)/(e^h − 1),
    /// p_i = ((δ_{i+1} − δ_i) − e^h (δ_i − δ_{i−1}))/(e^h − 1),
    /// p_n = (δ_n − δ_{n−1})/(e^{−h} − 1),  mass at +∞ = δ_n.
    ///
    /// The resulting PLD's δ(ε) agrees with the mechanism's at every grid point and dominates
    /// it between them (ibid., Theorem 3.2), so it is an upper bound.
    pub fn from_connect_the_dots(interval: f64, lower: i64, deltas: &[f64]) -> Self {
        let n = deltas.len();
        if n == 0 {
            return Self::identity(interval);
        }
        // δ is non-increasing in ε; remove rounding wiggles as dp_accounting does.
        let mut d: Vec<f64> = Vec::with_capacity(n);
        let mut running = f64::INFINITY;
        for &x in deltas {
            running = running.min(x.clamp(0.0, 1.0));
            d.push(running);
        }
        if n == 1 {
            return Self::from_parts(interval, lower, vec![1.0 - d[0]], d[0]);
        }
        let em1 = interval.exp_m1();
        let eh = interval.exp();
        let mut probs = vec![0.0; n];
        probs[0] = 1.0 - d[0] + (d[1] - d[0]) / em1;
        for i in 1..n - 1 {
            probs[i] = ((d[i + 1] - d[i]) - eh * (d[i] - d[i - 1])) / em1;
        }
        probs[n - 1] = (d[n - 1] - d[n - 2]) / (-interval).exp_m1();
        for p in &mut probs {
            *p = p.max(0.0);
        }
        Self::from_parts(interval, lower, probs, d[n - 1])
    }

    /// The grid step.
    pub fn interval(&self) -> f64 {
        self.interval
    }

    /// Index of the first grid point (loss = `lower`·interval).
    pub fn lower(&self) -> i64 {
        self.lower
    }

    /// The finite masses.
    pub fn probs(&self) -> &[f64] {
        &self.probs
    }

    /// Number of grid points held.
    pub fn size(&self) -> usize {
        self.probs.len()
    }

    /// The mass at +∞ (outputs only one neighbour can produce, plus pessimistic truncation).
    pub fn infinity_mass(&self) -> f64 {
        self.infinity_mass
    }

    fn trim_zeros(&mut self) {
        let first = self.probs.iter().position(|&p| p != 0.0);
        match first {
            None => {
                // No finite mass: keep one zero so that `lower` stays meaningful.
                self.probs = vec![0.0];
            }
            Some(first) => {
                let last = self.probs.iter().rposition(|&p| p != 0.0).unwrap_or(first);
                if first > 0 || last + 1 < self.probs.len() {
                    self.probs = self.probs[first..=last].to_vec();
                    self.lower += first as i64;
                }
            }
        }
    }

    /// The PLD of the composition of the two mechanisms: the convolution of the PMFs, with
    /// infinity masses combined as 1 − (1 − a)(1 − b). Tails of mass ≤ `tail_mass_truncation`/2
    /// each are cut: the left one is added to the first kept point (a larger loss), the right
    /// one to +∞ (dp_accounting `_truncate_tails`, pessimistic).
    pub fn compose(
        &self,
        other: &DiscretePmf,
        tail_mass_truncation: f64,
    ) -> Result<DiscretePmf, AccountingError> {
        check_same_interval(self.interval, other.interval)?;
        let out_len = self.probs.len() + other.probs.len() - 1;
        if out_len > MAX_SUPPORT {
            return Err(too_large(out_len));
        }
        let probs = convolve(&self.probs, &other.probs);
        let infinity_mass =
            self.infinity_mass + other.infinity_mass - self.infinity_mass * other.infinity_mass;
        let (offset, probs, right_mass) = truncate_tails(probs, tail_mass_truncation);
        Ok(Self::from_parts(
            self.interval,
            self.lower + other.lower + offset as i64,
            probs,
            infinity_mass + right_mass,
        ))
    }

    /// The PLD of `count` independent runs of this mechanism.
    ///
    /// The window [lo, hi] of the T-fold sum outside which each tail has mass ≤ τ/2 comes from
    /// the Chernoff bound P[S ≥ a] ≤ exp(T K(λ) − λa), K the log-MGF of one step, minimised
    /// over λ (dp_accounting `compute_self_convolve_bounds`, supplementary note eq. (5); here
    /// λ is searched continuously from ~1/n to well above the Gaussian optimum
    /// √(2 ln(2/τ))/sd_T rather than over dp_accounting's fixed orders k/n, |k| ≤ 20, so the
    /// window is tighter).
    /// The T-th power of the DFT of length L ≥ hi − lo + 1 is inverted and read from offset lo:
    /// the mass outside the window (≤ τ) aliases into it, which can only add mass, and τ is
    /// added to +∞ (so δ is still an upper bound). Infinity mass: τ + 1 − (1 − m_∞)^T.
    pub fn self_compose(
        &self,
        count: u64,
        tail_mass_truncation: f64,
    ) -> Result<DiscretePmf, AccountingError> {
        let mut out = self_compose_packed(&[self], count, tail_mass_truncation)?;
        Ok(out.remove(0))
    }

    /// [`DiscretePmf::self_compose`] of two PMFs at once: one complex FFT carries both real
    /// sequences (a + i·b), halving the transforms. Used for the remove/add pair.
    pub fn self_compose_pair(
        a: &DiscretePmf,
        b: &DiscretePmf,
        count: u64,
        tail_mass_truncation: f64,
    ) -> Result<(DiscretePmf, DiscretePmf), AccountingError> {
        check_same_interval(a.interval, b.interval)?;
        let mut out = self_compose_packed(&[a, b], count, tail_mass_truncation)?;
        let second = out.pop();
        let first = out.pop();
        match (first, second) {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(AccountingError::Numerical(
                "self-composition returned fewer PMFs than given".to_string(),
            )),
        }
    }

    /// δ(ε) = m_∞ + Σ_{ℓ > ε} (1 − e^{ε − ℓ}) p(ℓ): the ε-hockey-stick divergence of the pair
    /// this PLD describes (supplementary note, Observation 1).
    pub fn delta_for_epsilon(&self, epsilon: f64) -> f64 {
        if epsilon == f64::INFINITY {
            return self.infinity_mass;
        }
        let mut delta = 0.0;
        for (i, &p) in self.probs.iter().enumerate().rev() {
            let loss = (self.lower + i as i64) as f64 * self.interval;
            if loss <= epsilon {
                break;
            }
            delta += -(epsilon - loss).exp_m1() * p;
        }
        (self.infinity_mass + delta).min(1.0)
    }

    /// The smallest ε ≥ 0 with δ(ε) ≤ `delta` for this discrete PLD (∞ when the infinity mass
    /// alone exceeds `delta`). Exact over the support: walking down from the largest loss,
    /// δ(ε) = M_up − e^ε M_low on each gap, solved for ε (dp_accounting
    /// `pld_pmf._get_epsilon_for_delta`).
    pub fn epsilon_for_delta(&self, delta: f64) -> f64 {
        if self.infinity_mass > delta {
            return f64::INFINITY;
        }
        let Some(top) = self.probs.len().checked_sub(1) else {
            return 0.0;
        };
        // M_low = Σ p e^{−ℓ} is kept as `scaled`·e^{−reference} so that it neither underflows
        // for losses beyond ~745 nor overflows; `reference` follows the walk down in steps of
        // at most 600.
        let loss_at = |i: usize| (self.lower + i as i64) as f64 * self.interval;
        let mut reference = loss_at(top);
        let mut scaled = 0.0f64;
        let mut mass_upper = self.infinity_mass;
        for (i, &p) in self.probs.iter().enumerate().rev() {
            let loss = loss_at(i);
            // On the gap just above `loss`, δ(ε) = M_up − e^ε M_low; its root is the answer
            // when it lies in the gap.
            if mass_upper > delta
                && scaled > 0.0
                && ((mass_upper - delta) / scaled).ln() + reference >= loss
            {
                break;
            }
            if reference - loss > 600.0 {
                scaled *= (loss - reference).exp();
                reference = loss;
            }
            mass_upper += p;
            scaled += (reference - loss).exp() * p;
        }
        if mass_upper <= delta || scaled == 0.0 {
            return 0.0;
        }
        (((mass_upper - delta) / scaled).ln() + reference).max(0.0)
    }
}

/// The window, grid offset and infinity mass of a T-fold self-composition.
struct Window {
    lo: i128,
    out_len: usize,
    lower: i64,
    infinity_mass: f64,
}

fn window(pmf: &DiscretePmf, count: u64, tau: f64) -> Result<Window, AccountingError> {
    let t = count as f64;
    let infinity_mass = (tau - (t * (-pmf.infinity_mass).ln_1p()).exp_m1()).clamp(0.0, 1.0);
    let (lo, hi) = self_convolution_bounds(&pmf.probs, count, tau);
    let out_len = usize::try_from(hi - lo + 1).map_err(|_| too_large(usize::MAX))?;
    if out_len > MAX_SUPPORT {
        return Err(too_large(out_len));
    }
    let lower = to_i64((pmf.lower as i128) * (count as i128) + lo)?;
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
fn self_compose_packed(
    pmfs: &[&DiscretePmf],
    count: u64,
    tau: f64,
) -> Result<Vec<DiscretePmf>, AccountingError> {
    if count == 0 {
        return Ok(pmfs
            .iter()
            .map(|p| DiscretePmf::identity(p.interval))
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
    for (which, pmf) in pmfs.iter().enumerate() {
        for (i, &p) in pmf.probs.iter().enumerate() {
            if which == 0 {
                buf[i % len].re += p;
            } else {
                buf[i % len].im += p;
            }
        }
    }
    let fft = FftPlanner::<f64>::new().plan_fft_forward(len);
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
            DiscretePmf::from_parts(pmf.interval, w.lower, probs, w.infinity_mass)
        })
        .collect())
}

fn check_same_interval(a: f64, b: f64) -> Result<(), AccountingError> {
    if a == b {
        Ok(())
    } else {
        Err(AccountingError::Numerical(format!(
            "cannot compose PLDs on different grids ({a} and {b})"
        )))
    }
}

fn too_large(points: usize) -> AccountingError {
    AccountingError::Numerical(format!(
        "the privacy-loss distribution would need {points} grid points (limit {MAX_SUPPORT}); \
         use a larger value_discretization_interval"
    ))
}

fn to_i64(x: i128) -> Result<i64, AccountingError> {
    i64::try_from(x)
        .map_err(|_| AccountingError::Numerical(format!("privacy-loss grid index {x} overflows")))
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
fn convolve(a: &[f64], b: &[f64]) -> Vec<f64> {
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
    let fft = FftPlanner::<f64>::new().plan_fft_forward(len);
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

/// Cut the longest prefix and suffix of mass ≤ τ/2 each. Returns (prefix length, kept
/// probabilities with the prefix mass added to the first, suffix mass for +∞).
fn truncate_tails(probs: Vec<f64>, tail_mass_truncation: f64) -> (usize, Vec<f64>, f64) {
    if tail_mass_truncation <= 0.0 || probs.len() < 2 {
        return (0, probs, 0.0);
    }
    let half = tail_mass_truncation / 2.0;
    let n = probs.len();
    let left = prefix_within(probs.iter(), half);
    let right = prefix_within(probs.iter().rev(), half);
    let start = left.min(n - 1);
    let end = (n - right.min(n)).max(start + 1);
    let left_mass: f64 = probs[..start].iter().sum();
    let right_mass: f64 = probs[end..].iter().sum();
    let mut kept = probs[start..end].to_vec();
    kept[0] += left_mass;
    (start, kept, right_mass)
}

/// The length of the longest prefix whose sum is ≤ `limit`.
fn prefix_within<'a>(values: impl Iterator<Item = &'a f64>, limit: f64) -> usize {
    let mut sum = 0.0;
    let mut k = 0usize;
    for &v in values {
        if sum + v > limit {
            break;
        }
        sum += v;
        k += 1;
    }
    k
}

/// Window [lo, hi] (indices of the T-fold sum, relative to T·lower) outside which each tail of
/// the T-fold convolution of `probs` has mass ≤ τ/2, by Chernoff bounds; the trivial window
/// [0, (n − 1)T] when τ = 0.
fn self_convolution_bounds(probs: &[f64], count: u64, tail_mass_truncation: f64) -> (i128, i128) {
    let n = probs.len();
    let t = count as f64;
    let mut lo: i128 = 0;
    let mut hi: i128 = (n as i128 - 1) * count as i128;
    if tail_mass_truncation <= 0.0 {
        return (lo, hi);
    }
    let mass: f64 = probs.iter().sum();
    if mass <= 0.0 {
        return (lo, hi);
    }
    let mean = probs
        .iter()
        .enumerate()
        .map(|(i, &p)| i as f64 * p)
        .sum::<f64>()
        / mass;
    let var = probs
        .iter()
        .enumerate()
        .map(|(i, &p)| (i as f64 - mean).powi(2) * p)
        .sum::<f64>()
        / mass;
    let log_2_over_tau = (2.0 / tail_mass_truncation).ln();
    let sd_t = (t * var).sqrt().max(1e-3);
    let lambda_star = (2.0 * log_2_over_tau).sqrt() / sd_t;
    // a(λ) = (T K(λ) + ln(2/τ))/λ is quasi-convex in λ > 0 (its sublevel sets are those of the
    // convex T K(λ) − aλ + ln(2/τ)), so a golden-section search on ln λ finds its minimum; any
    // λ gives a valid bound, so an inexact minimum only widens the window.
    let upper_bound = |lambda: f64| (t * log_mgf(probs, lambda) + log_2_over_tau) / lambda;
    let lower_bound = |lambda: f64| (t * log_mgf(probs, -lambda) + log_2_over_tau) / lambda;
    // Search λ from well below the Gaussian optimum (heavy, thin tails such as a subsampled
    // mechanism at tiny q want λ ~ 1/n, as in dp_accounting's orders k/n) to well above it.
    let n_f = n as f64;
    let log_lo = (lambda_star * (-4.0f64).exp()).min(0.5 / n_f).ln();
    let log_hi = (lambda_star * 3.0f64.exp()).max(20.0 / n_f).ln();
    let a = golden_min(|u| upper_bound(u.exp()), log_lo, log_hi);
    if a.is_finite() {
        hi = hi.min(a.ceil() as i128 + 1);
    }
    let b = golden_min(|u| lower_bound(u.exp()), log_lo, log_hi);
    if b.is_finite() {
        lo = lo.max((-b).floor() as i128 - 1);
    }
    if hi < lo {
        // Only possible through rounding when the mass is tiny; fall back to the full range.
        return (0, (n as i128 - 1) * count as i128);
    }
    (lo, hi)
}

/// The smallest value of `f` found by golden-section search on [lo, hi] (18 steps, plus both
/// ends), ignoring non-finite values.
fn golden_min(f: impl Fn(f64) -> f64, lo: f64, hi: f64) -> f64 {
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (lo, hi);
    let finite = |v: f64| if v.is_finite() { v } else { f64::INFINITY };
    let mut best = finite(f(lo)).min(finite(f(hi)));
    let mut c = b - ratio * (b - a);
    let mut d = a + ratio * (b - a);
    let (mut fc, mut fd) = (finite(f(c)), finite(f(d)));
    for _ in 0..18 {
        best = best.min(fc).min(fd);
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
    best.min(fc).min(fd)
}

/// ln Σ_i p_i e^{λ i}, in blocks of B = min(4096, ⌊200/|λ|⌋) points: within a block the
/// weights e^{λ j} ≤ e^{200} are precomputed (by recurrence, re-anchored with an exact `exp`
/// every 64 points), across blocks a running log-sum-exp. The bound built on it tolerates the
/// ~1e−13 relative error (the window gets a one-point margin on each side).
fn log_mgf(probs: &[f64], lambda: f64) -> f64 {
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
    let mut acc = f64::NEG_INFINITY;
    for (b, chunk) in probs.chunks(block).enumerate() {
        let s = dot(chunk, &weights[..chunk.len()]);
        if s > 0.0 {
            let term = lambda * (b * block) as f64 + s.ln();
            acc = crate::privacy::special::log_add_exp(acc, term);
        }
    }
    acc
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
    fn compose_is_convolution() {
        let a = pmf(-1, &[0.2, 0.5, 0.3], 0.0);
        let b = pmf(2, &[0.6, 0.4], 0.1);
        let c = a.compose(&b, 0.0).unwrap();
        assert_eq!(c.lower(), 1);
        let want = [0.12, 0.38, 0.38, 0.12];
        assert_eq!(c.size(), want.len());
        for (x, y) in c.probs().iter().zip(want) {
            assert!((x - y).abs() < 1e-15, "{x} vs {y}");
        }
        assert!((c.infinity_mass() - 0.1).abs() < 1e-15);
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
    fn self_compose_equals_repeated_compose() {
        let base = pmf(-3, &[0.05, 0.2, 0.3, 0.25, 0.15, 0.05], 1e-3);
        let mut repeated = base.clone();
        for _ in 1..7 {
            repeated = repeated.compose(&base, 0.0).unwrap();
        }
        let power = base.self_compose(7, 0.0).unwrap();
        assert_eq!(power.lower(), repeated.lower());
        assert_eq!(power.size(), repeated.size());
        for (x, y) in power.probs().iter().zip(repeated.probs()) {
            assert!((x - y).abs() < 1e-14);
        }
        assert!((power.infinity_mass() - repeated.infinity_mass()).abs() < 1e-15);
    }

    #[test]
    fn chernoff_window_holds_the_mass() {
        // A two-point step composed 1000 times is binomial; the window must keep all but 1e-15.
        let base = pmf(0, &[0.7, 0.3], 0.0);
        let full = base.self_compose(1000, 0.0).unwrap();
        let cut = base.self_compose(1000, 1e-15).unwrap();
        assert!(cut.size() < full.size());
        let kept: f64 = cut.probs().iter().sum();
        assert!(kept > 1.0 - 1e-14 && kept < 1.0 + 1e-12, "{kept}");
        // and the cut PMF is pessimistic: δ at any ε is at least the exact one (up to FFT noise)
        for eps in [0.0, 10.0, 30.0, 40.0] {
            assert!(cut.delta_for_epsilon(eps) >= full.delta_for_epsilon(eps) - 1e-13);
        }
    }

    #[test]
    fn delta_and_epsilon_on_a_small_pmf() {
        // losses −0.1, 0.1, 0.3 with masses 0.3, 0.5, 0.2 and 0.01 at +∞; by hand:
        // δ(0) = 0.01 + 0.5(1 − e^{−0.1}) + 0.2(1 − e^{−0.3})
        let p = DiscretePmf::from_parts(0.1, -1, vec![0.3, 0.0, 0.5, 0.0, 0.2], 0.01);
        let want = 0.01 + 0.5 * (1.0 - (-0.1f64).exp()) + 0.2 * (1.0 - (-0.3f64).exp());
        assert!((p.delta_for_epsilon(0.0) - want).abs() < 1e-15);
        assert!((p.delta_for_epsilon(0.3) - 0.01).abs() < 1e-15);
        assert_eq!(p.epsilon_for_delta(0.005), f64::INFINITY);
        for d in [0.011, 0.02, 0.05, want] {
            let e = p.epsilon_for_delta(d);
            assert!((p.delta_for_epsilon(e) - d).abs() < 1e-12, "{d}: {e}");
        }
        assert_eq!(p.epsilon_for_delta(0.2), 0.0);
    }

    #[test]
    fn epsilon_for_delta_survives_losses_beyond_exp_underflow() {
        // Masses ½ at losses 800 and 900 (e^{−800} underflows): for ε ∈ [800, 900),
        // δ(ε) = ½(1 − e^{ε − 900}), so ε(1e−6) = 900 + ln(1 − 2e−6) (by hand).
        let p = DiscretePmf::from_parts(100.0, 8, vec![0.5, 0.5], 0.0);
        let eps = p.epsilon_for_delta(1e-6);
        let want = 900.0 + (-2e-6f64).ln_1p();
        assert!((eps - want).abs() < 1e-9, "{eps} vs {want}");
        assert!((p.delta_for_epsilon(eps) - 1e-6).abs() < 1e-12);
        // and below the lower mass: δ(ε) = 1 − ½e^{ε−800} − ½e^{ε−900} = 0.6 at ε ≈ 799.0837
        let eps = p.epsilon_for_delta(0.6);
        assert!((p.delta_for_epsilon(eps) - 0.6).abs() < 1e-12, "{eps}");
    }

    #[test]
    fn connect_the_dots_keeps_the_curve() {
        // δ at the grid points is reproduced exactly (Doroshenko et al. 2022, Prop. 3.1).
        let h = 0.05;
        let deltas: Vec<f64> = (0..40)
            .map(|k| {
                let eps = (k as f64 - 10.0) * h;
                // a valid hockey-stick curve: Laplace(1), δ(ε) = 1 − e^{(ε−1)/2} for |ε| ≤ 1
                if eps >= 1.0 {
                    0.0
                } else if eps <= -1.0 {
                    1.0 - eps.exp()
                } else {
                    1.0 - ((eps - 1.0) / 2.0).exp()
                }
            })
            .collect();
        let p = DiscretePmf::from_connect_the_dots(h, -10, &deltas);
        for (k, &d) in deltas.iter().enumerate() {
            let eps = (k as f64 - 10.0) * h;
            assert!((p.delta_for_epsilon(eps) - d).abs() < 1e-12, "{eps}");
        }
    }

    #[test]
    fn truncation_moves_mass_up() {
        let probs = vec![1e-17, 2e-17, 0.5, 0.5 - 1e-16, 3e-17, 4e-17];
        let (off, kept, right) = truncate_tails(probs, 1e-15);
        assert_eq!(off, 2);
        assert_eq!(kept.len(), 2);
        assert!((kept[0] - (0.5 + 3e-17)).abs() < 1e-18);
        assert!((right - 7e-17).abs() < 1e-20);
    }
}
