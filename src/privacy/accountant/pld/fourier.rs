//! PLD room, layer 2 (composition): convolution of discretised privacy-loss distributions in
//! the Fourier domain.
//!
//! Composition of independent mechanisms is convolution of their PLDs (Sommer, Meiser,
//! Mohammadi 2019, Thm 1; Koskela, Jälkö, Honkela 2020 eq. (3.2)). Owns the three ways dpx
//! computes it: a pairwise FFT convolution ([`convolve`]); the T-fold self-composition, the
//! transform raised to the power T on a window chosen by a Chernoff bound (dp_accounting
//! `common.self_convolve`, supplementary note eq. (5)); and the composition of many distinct
//! PMFs, each run a number of times, in one pass ([`compose_many`]): the product of their
//! transforms, the window bounded by the Chernoff bound of the whole sum (`chernoff`).
//! Transforms of one length share a plan from a small per-thread cache of recent lengths.
//!
//! Aliasing: a length-L transform computes the sum modulo L. The window holds all but τ of the
//! mass; what lies outside folds into the window (only adding mass) and τ is put at +∞, so the
//! result's δ(ε) is at least the exact one: the pessimistic property survives.
//!
//! Must not: know mechanisms or events. All maths is f64.

use std::cell::RefCell;
use std::sync::Arc;

use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

use super::chernoff::convolution_bounds;
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
