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

use std::sync::Mutex;

use super::fourier::{compose_many, convolve, self_compose_packed};
use crate::privacy::accountant::AccountingError;

/// Grid buffers of composed single-step PMFs ([`DiscretePmf::recycle`]), handed to the next
/// factories ([`zeroed_buffer`]). Memory touched for the first time costs a page fault and the
/// kernel's zeroing (a quarter of a 200-step schedule's accounting in one profile), and a buffer
/// freed on another thread than the factory's is not reused by that factory's heap soon; a
/// shared pool reuses the same pages chunk after chunk. Contents are reset on reuse, so which
/// buffer a factory gets never changes a result.
static BUFFERS: Mutex<Vec<Vec<f64>>> = Mutex::new(Vec::new());

/// At most this many buffers holding at most this many points (128 MiB) are kept.
const POOL_BUFFERS: usize = 256;
const POOL_POINTS: usize = 1 << 24;

/// A buffer of `n` zeros, from the pool when one is large enough (the smallest such).
fn zeroed_buffer(n: usize) -> Vec<f64> {
    let reused = BUFFERS.lock().ok().and_then(|mut pool| {
        let (i, _) = pool
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= n)
            .min_by_key(|(_, b)| b.capacity())?;
        Some(pool.swap_remove(i))
    });
    match reused {
        Some(mut buffer) => {
            buffer.clear();
            buffer.resize(n, 0.0);
            buffer
        }
        None => vec![0.0; n],
    }
}

/// The largest grid (points) any PMF or FFT buffer may have: 2^25 points (256 MiB of f64,
/// twice that as complex). Beyond it the caller must use a coarser interval.
pub const MAX_SUPPORT: usize = 1 << 25;

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
        let d = non_increasing(deltas);
        if n == 1 {
            return Self::from_parts(interval, lower, vec![1.0 - d[0]], d[0]);
        }
        let em1 = interval.exp_m1();
        let eh = interval.exp();
        let mut probs = zeroed_buffer(n);
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

    /// Pessimistic connect-the-dots PMF on the grid `lower..=lower + n − 1` from δ_j = δ(ε_j) at
    /// a subset of its points, `offsets` (strictly increasing, first 0, last n − 1), with mass
    /// only at those points (Doroshenko et al. 2022, Algorithm 1, which allows any gaps). On
    /// γ = e^ε the discrete PLD's δ is piecewise linear between the points, with slopes
    /// s_j = (δ_{j+1} − δ_j)/(γ_{j+1} − γ_j); its masses are p_j = γ_j (s_j − s_{j−1}), i.e. with
    /// gaps g_j = ε_{j+1} − ε_j:
    ///
    /// p_1 = 1 − δ_1 + (δ_2 − δ_1)/(e^{g_1} − 1),
    /// p_j = (δ_{j+1} − δ_j)/(e^{g_j} − 1) + (δ_j − δ_{j−1})/(e^{−g_{j−1}} − 1),
    /// p_n = (δ_n − δ_{n−1})/(e^{−g_{n−1}} − 1),  mass at +∞ = δ_n.
    ///
    /// δ(ε) is convex in e^ε, so the chords lie above it: an upper bound for every choice of
    /// points (ibid., Theorem 3.2). With every grid point chosen this is
    /// [`DiscretePmf::from_connect_the_dots`] (same bits).
    pub fn from_connect_the_dots_at(
        interval: f64,
        lower: i64,
        n: usize,
        offsets: &[usize],
        deltas: &[f64],
    ) -> Self {
        debug_assert_eq!(offsets.len(), deltas.len());
        let m = deltas.len();
        if m == n || m < 2 {
            return Self::from_connect_the_dots(interval, lower, deltas);
        }
        let d = non_increasing(deltas);
        // (e^{g} − 1, e^{−g} − 1) of gap j; most gaps are one grid step.
        let one_step = (interval.exp_m1(), (-interval).exp_m1());
        let em1 = |j: usize| match offsets[j + 1] - offsets[j] {
            1 => one_step,
            k => {
                let g = k as f64 * interval;
                (g.exp_m1(), (-g).exp_m1())
            }
        };
        let mut probs = zeroed_buffer(n);
        let mut right = em1(0);
        probs[offsets[0]] = 1.0 - d[0] + (d[1] - d[0]) / right.0;
        for j in 1..m - 1 {
            let left = right;
            right = em1(j);
            probs[offsets[j]] = (d[j + 1] - d[j]) / right.0 + (d[j] - d[j - 1]) / left.1;
        }
        probs[offsets[m - 1]] = (d[m - 1] - d[m - 2]) / right.1;
        for p in &mut probs {
            *p = p.max(0.0);
        }
        Self::from_parts(interval, lower, probs, d[m - 1])
    }

    /// Give this PMF's grid buffer to the pool the factories draw from (a composition calls it
    /// on the single-step PMFs it has composed; [`DiscretePmf::release_buffers`] empties the pool).
    pub fn recycle(self) {
        if let Ok(mut pool) = BUFFERS.lock() {
            let held: usize = pool.iter().map(Vec::capacity).sum();
            if pool.len() < POOL_BUFFERS && held + self.probs.capacity() <= POOL_POINTS {
                pool.push(self.probs);
            }
        }
    }

    /// Free the buffers kept by [`DiscretePmf::recycle`].
    pub fn release_buffers() {
        if let Ok(mut pool) = BUFFERS.lock() {
            *pool = Vec::new();
        }
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
                // In place: no second buffer of the grid's size.
                self.probs.truncate(last + 1);
                if first > 0 {
                    self.probs.drain(..first);
                    self.lower += first as i64;
                }
                if self.probs.capacity() > 2 * self.probs.len() {
                    self.probs.shrink_to_fit();
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

    /// The PLD of `count` independent runs of each PMF of `parts` (one grid, at least one part
    /// with a positive count), in one pass in the Fourier domain with a single tail truncation of
    /// mass ≤ `tail_mass_truncation` (the window of the whole sum; see `fourier::compose_many`).
    pub fn compose_many(
        parts: &[(&DiscretePmf, u64)],
        tail_mass_truncation: f64,
    ) -> Result<DiscretePmf, AccountingError> {
        if let Some((first, _)) = parts.first() {
            for (p, _) in parts {
                check_same_interval(first.interval, p.interval)?;
            }
        }
        compose_many(parts, tail_mass_truncation)
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

/// δ is non-increasing in ε: clamp to [0, 1] and remove rounding wiggles by a running minimum,
/// as dp_accounting does, before connecting the dots.
fn non_increasing(deltas: &[f64]) -> Vec<f64> {
    let mut running = f64::INFINITY;
    deltas
        .iter()
        .map(|&x| {
            running = running.min(x.clamp(0.0, 1.0));
            running
        })
        .collect()
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

pub(super) fn too_large(points: usize) -> AccountingError {
    AccountingError::Numerical(format!(
        "the privacy-loss distribution would need {points} grid points (limit {MAX_SUPPORT}); \
         use a larger value_discretization_interval"
    ))
}

pub(super) fn to_i64(x: i128) -> Result<i64, AccountingError> {
    i64::try_from(x)
        .map_err(|_| AccountingError::Numerical(format!("privacy-loss grid index {x} overflows")))
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
#[cfg(test)]
mod tests {
    use super::*;

    fn pmf(lower: i64, probs: &[f64], inf: f64) -> DiscretePmf {
        DiscretePmf::from_parts(0.1, lower, probs.to_vec(), inf)
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
