//! Banded matrix-factorization noise (BandMF): Gaussian noise correlated across steps, the
//! banded strategy it comes from, and the optimisation of that strategy.
//!
//! Part of the privacy room. The matrix mechanism for training (Denisov, McMahan, Rush, Smith,
//! Thakurta 2022, "Improved differential privacy for SGD via optimal private linear operators on
//! adaptive streams"; Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta, Xu 2023,
//! "(Amplified) banded matrix factorization: a unified approach to private training", arXiv
//! 2306.08153) factors the workload A (the linear map from the T gradients to what training
//! uses of them: their prefix sums for SGD) as A = B·C, releases C·X + Z and trains on
//! C⁻¹(C·X + Z) = X + C⁻¹Z. Step t's gradient therefore gets the noise
//!
//! ```text
//! w_t = (C⁻¹ Z)_t,   i.e.   Σ_{j<b} c_j w_{t−j} = z_t,   w_t = (z_t − Σ_{j=1}^{b−1} c_j w_{t−j}) / c_0
//! ```
//!
//! with z_t the step's fresh Gaussian vector (noise multiplier × clip norm, as in DP-SGD) and C
//! the b-banded lower-triangular Toeplitz matrix of coefficients c_0, …, c_{b−1}. Forward
//! substitution needs the last b − 1 noise vectors only: [`CorrelatedNoise`] keeps them
//! ((b − 1) × P floats) and [`Correlated`] applies it to a noise source. With b = 1 (C = I) the
//! noise is exactly DP-SGD's.
//!
//! **Sensitivity** (derived in docs/accounting.md, "Banded matrix factorization"). One example
//! changes rows p_1 < p_2 < … of X (one per participation, each of norm ≤ the clip norm). Column p
//! of a b-banded lower-triangular C is supported on rows p, …, p + b − 1, so columns of
//! participations at least b steps apart are orthogonal and ‖C·ΔX‖_F² = Σ_i ‖C_{:,p_i}‖²‖Δx_i‖².
//! The strategies here are normalised so that every column has norm ≤ 1 (the longest columns,
//! those with b entries, have norm exactly 1), so each participation is a Gaussian release of
//! sensitivity ≤ the clip norm: with b-min-separated Poisson sampling the run is dominated by
//! ⌈T/b⌉ rounds of the Poisson-subsampled Gaussian (the amplification theorem of Choquette-Choo et al. 2023 for b-min-separated, "cyclic Poisson", sampling).
//!
//! **Strategy.** For a workload A that is lower-triangular Toeplitz with coefficients a_k (prefix
//! sums: a_k = 1; heavy-ball momentum β: a_k = (1 − β^{k+1})/(1 − β)), the expected squared
//! error of what training uses is proportional to the loss
//!
//! ```text
//! L(c) = ‖A C⁻¹‖_F² · max_j ‖C_{:,j}‖²  =  Σ_{k<T} (T − k) d_k² · Σ_{j<b} c_j²,   d = a * r,   r = c⁻¹
//! ```
//!
//! (r the power-series inverse of c, so C⁻¹ is Toeplitz with coefficients r; the error is
//! invariant to scaling c). [`optimize`] minimises it over c_1, …, c_{b−1} with c_0 = 1 by L-BFGS
//! on ln L from the truncated square root of the workload (the series of √a, optimal among
//! Toeplitz factorizations when b = T up to lower-order terms: Fichtenberger, Henzinger, Upadhyay
//! 2023), then normalises. Every evaluation of L and its gradient is O(T·b): no dense matrix is
//! formed (McKenna 2024, "Scaling up the banded matrix factorization mechanism", optimises the
//! same banded Toeplitz family).
//!
//! Must not: know models, data or the training loop.

use std::collections::VecDeque;

use rayon::prelude::*;

use super::mechanism::GaussianSource;

/// Errors of a banded strategy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BandMfError {
    #[error("bands must be at least 1, found {bands}")]
    NoBands { bands: usize },
    #[error("the strategy needs at least one step, found {steps}")]
    NoSteps { steps: u64 },
    #[error("momentum must be in [0, 1), found {momentum}")]
    InvalidMomentum { momentum: f64 },
    #[error("the strategy coefficients must be finite with c_0 > 0, found {found}")]
    InvalidCoefficients { found: String },
    #[error(
        "the noise history holds {found} vectors of {len} values, expected at most {bands} − 1 of {expected}"
    )]
    HistoryShape {
        found: usize,
        len: usize,
        bands: usize,
        expected: usize,
    },
}

/// The workload whose error the strategy minimises: what training does with the noisy
/// gradients, as a lower-triangular Toeplitz matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// Prefix sums (SGD with a constant learning rate): a_k = 1.
    PrefixSum,
    /// Heavy-ball momentum β (m_t = β m_{t−1} + g_t, θ_t = θ_{t−1} − η m_t) with a constant
    /// learning rate: θ_t − θ_0 = −η Σ_s a_{t−s} g_s with a_k = (1 − β^{k+1})/(1 − β).
    Momentum { momentum: f64 },
}

impl Workload {
    /// a_0, …, a_{T−1}.
    pub fn coefficients(&self, steps: usize) -> Vec<f64> {
        match *self {
            Workload::PrefixSum => vec![1.0; steps],
            Workload::Momentum { momentum } => {
                let mut out = Vec::with_capacity(steps);
                let mut a = 0.0;
                let mut power = 1.0;
                for _ in 0..steps {
                    a += power;
                    power *= momentum;
                    out.push(a);
                }
                out
            }
        }
    }

    /// d = a * r (first T terms) by the workload's recurrence, O(T).
    fn apply(&self, r: &[f64]) -> Vec<f64> {
        let mut d = Vec::with_capacity(r.len());
        let mut cumulative = 0.0;
        let mut previous = 0.0;
        let beta = match *self {
            Workload::PrefixSum => 0.0,
            Workload::Momentum { momentum } => momentum,
        };
        for &rk in r {
            cumulative += rk;
            // a = 1/((1 − x)(1 − βx)): cumulative sum, then the first-order filter.
            let dk = cumulative + beta * previous;
            d.push(dk);
            previous = dk;
        }
        d
    }

    /// g_i = Σ_{k≥i} e_k a_{k−i}: the adjoint of [`Self::apply`], O(T).
    fn adjoint(&self, e: &[f64]) -> Vec<f64> {
        let beta = match *self {
            Workload::PrefixSum => 0.0,
            Workload::Momentum { momentum } => momentum,
        };
        let n = e.len();
        let mut p = vec![0.0; n];
        let mut next = 0.0;
        for k in (0..n).rev() {
            next = e[k] + beta * next;
            p[k] = next;
        }
        let mut g = vec![0.0; n];
        let mut tail = 0.0;
        for k in (0..n).rev() {
            tail += p[k];
            g[k] = tail;
        }
        g
    }

    fn check(&self) -> Result<(), BandMfError> {
        match *self {
            Workload::PrefixSum => Ok(()),
            Workload::Momentum { momentum } => {
                if (0.0..1.0).contains(&momentum) {
                    Ok(())
                } else {
                    Err(BandMfError::InvalidMomentum { momentum })
                }
            }
        }
    }
}

/// A b-banded lower-triangular Toeplitz strategy C, normalised so that its longest columns have
/// norm 1 (Σ_j c_j² = 1).
#[derive(Debug, Clone, PartialEq)]
pub struct BandedStrategy {
    coefficients: Vec<f64>,
}

impl BandedStrategy {
    /// The strategy of coefficients `c` scaled to Σ c_j² = 1.
    pub fn normalised(c: &[f64]) -> Result<Self, BandMfError> {
        let norm = c.iter().map(|v| v * v).sum::<f64>().sqrt();
        if c.is_empty()
            || !c.iter().all(|v| v.is_finite())
            || c[0] <= 0.0
            || norm.is_nan()
            || norm <= 0.0
        {
            return Err(BandMfError::InvalidCoefficients {
                found: format!("{c:?}"),
            });
        }
        Ok(Self {
            coefficients: c.iter().map(|v| v / norm).collect(),
        })
    }

    /// DP-SGD's strategy, C = I (one band).
    pub fn identity() -> Self {
        Self {
            coefficients: vec![1.0],
        }
    }

    /// c_0, …, c_{b−1}.
    pub fn coefficients(&self) -> &[f64] {
        &self.coefficients
    }

    /// b.
    pub fn bands(&self) -> usize {
        self.coefficients.len()
    }

    /// The largest column norm of C (1 up to rounding: the sensitivity factor).
    pub fn max_column_norm(&self) -> f64 {
        self.coefficients.iter().map(|v| v * v).sum::<f64>().sqrt()
    }

    /// L(c) = ‖A C⁻¹‖_F² · max-column-norm² for `steps` steps of `workload` (module doc).
    pub fn loss(&self, workload: Workload, steps: usize) -> f64 {
        loss_and_gradient(&self.coefficients, workload, steps, false).0
    }

    /// The ratio of this strategy's loss to DP-SGD's (C = I) on the same workload: the factor by
    /// which the expected squared error of the workload changes at equal noise multiplier.
    pub fn error_ratio(&self, workload: Workload, steps: usize) -> f64 {
        self.loss(workload, steps) / BandedStrategy::identity().loss(workload, steps)
    }
}

/// The first `n` coefficients of the power-series inverse r = 1/c.
fn inverse_series(c: &[f64], n: usize) -> Vec<f64> {
    let mut r = Vec::with_capacity(n);
    for k in 0..n {
        let mut acc = if k == 0 { 1.0 } else { 0.0 };
        for j in 1..c.len().min(k + 1) {
            acc -= c[j] * r[k - j];
        }
        r.push(acc / c[0]);
    }
    r
}

/// L(c) and, when asked, ∂L/∂c_j for j = 1, …, b − 1 (c_0 held fixed).
///
/// With L_A = Σ_k (T − k) d_k², d = a * r, r = c⁻¹ and S = Σ c_j²: ∂L_A/∂d_k = 2(T − k)d_k = e_k,
/// ∂L_A/∂r_i = g_i = Σ_{k≥i} e_k a_{k−i} (the workload's adjoint), and from c * r = δ,
/// ∂r_k/∂c_j = −(r * r)_{k−j}, so ∂L_A/∂c_j = −Σ_m r_m v_{j+m} with v = (C⁻¹)ᵀ g (back
/// substitution with Cᵀ). Then ∂L/∂c_j = S ∂L_A/∂c_j + 2 c_j L_A.
fn loss_and_gradient(
    c: &[f64],
    workload: Workload,
    steps: usize,
    gradient: bool,
) -> (f64, Vec<f64>) {
    let b = c.len().min(steps);
    let c = &c[..b];
    let r = inverse_series(c, steps);
    let d = workload.apply(&r);
    let weight = |k: usize| (steps - k) as f64;
    let la: f64 = d.iter().enumerate().map(|(k, v)| weight(k) * v * v).sum();
    let s: f64 = c.iter().map(|v| v * v).sum();
    let loss = la * s;
    if !gradient || !loss.is_finite() {
        return (loss, Vec::new());
    }
    let e: Vec<f64> = d
        .iter()
        .enumerate()
        .map(|(k, v)| 2.0 * weight(k) * v)
        .collect();
    let g = workload.adjoint(&e);
    // v = (C⁻¹)ᵀ g: Cᵀ v = g, Cᵀ upper triangular with (Cᵀ)_{i,i+j} = c_j.
    let mut v = vec![0.0; steps];
    for i in (0..steps).rev() {
        let mut acc = g[i];
        for j in 1..b.min(steps - i) {
            acc -= c[j] * v[i + j];
        }
        v[i] = acc / c[0];
    }
    let mut grad = Vec::with_capacity(b.saturating_sub(1));
    for j in 1..b {
        let dla: f64 = -(0..steps - j).map(|m| r[m] * v[j + m]).sum::<f64>();
        grad.push(s * dla + 2.0 * c[j] * la);
    }
    (loss, grad)
}

/// The first `n` coefficients of √a (power-series square root, a_0 > 0).
fn series_sqrt(a: &[f64], n: usize) -> Vec<f64> {
    let mut s: Vec<f64> = Vec::with_capacity(n);
    for k in 0..n.min(a.len()) {
        if k == 0 {
            s.push(a[0].sqrt());
        } else {
            let cross: f64 = (1..k).map(|j| s[j] * s[k - j]).sum();
            s.push((a[k] - cross) / (2.0 * s[0]));
        }
    }
    s
}

/// How far the optimiser went.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimized {
    pub strategy: BandedStrategy,
    /// L at the start (truncated √A) and at the end.
    pub initial_loss: f64,
    pub loss: f64,
    pub iterations: usize,
}

/// The b-banded Toeplitz strategy minimising L for `steps` steps of `workload` (module doc),
/// normalised. `bands` is capped at `steps`. Deterministic: the same inputs give the same bits.
pub fn optimize(steps: u64, bands: usize, workload: Workload) -> Result<Optimized, BandMfError> {
    if bands == 0 {
        return Err(BandMfError::NoBands { bands });
    }
    if steps == 0 {
        return Err(BandMfError::NoSteps { steps });
    }
    workload.check()?;
    let t = usize::try_from(steps).unwrap_or(usize::MAX);
    let b = bands.min(t);
    let start = series_sqrt(&workload.coefficients(b), b);
    let initial_loss = loss_and_gradient(&start, workload, t, false).0;
    if b == 1 {
        return Ok(Optimized {
            strategy: BandedStrategy::identity(),
            initial_loss,
            loss: initial_loss,
            iterations: 0,
        });
    }
    // L-BFGS on f(x) = ln L(1, x), x = (c_1, …, c_{b−1}).
    let f = |x: &[f64]| -> (f64, Vec<f64>) {
        let mut c = Vec::with_capacity(b);
        c.push(1.0);
        c.extend_from_slice(x);
        let (l, g) = loss_and_gradient(&c, workload, t, true);
        if !(l.is_finite() && l > 0.0) {
            return (f64::INFINITY, Vec::new());
        }
        (l.ln(), g.iter().map(|v| v / l).collect())
    };
    let mut x: Vec<f64> = start[1..].iter().map(|v| v / start[0]).collect();
    let (mut fx, mut gx) = f(&x);
    let memory = 10;
    let mut history: VecDeque<(Vec<f64>, Vec<f64>, f64)> = VecDeque::new();
    let mut iterations = 0;
    let mut stalled = 0;
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(u, v)| u * v).sum::<f64>();
    while iterations < 2000 && fx.is_finite() {
        iterations += 1;
        // Two-loop recursion: direction = −H·g.
        let mut q = gx.clone();
        let mut alphas = Vec::with_capacity(history.len());
        for (s, y, rho) in history.iter().rev() {
            let a = rho * dot(s, &q);
            for (qi, yi) in q.iter_mut().zip(y) {
                *qi -= a * yi;
            }
            alphas.push(a);
        }
        if let Some((s, y, _)) = history.back() {
            let gamma = dot(s, y) / dot(y, y);
            q.iter_mut().for_each(|v| *v *= gamma);
        }
        for ((s, y, rho), a) in history.iter().zip(alphas.iter().rev()) {
            let beta = rho * dot(y, &q);
            for (qi, si) in q.iter_mut().zip(s) {
                *qi += (a - beta) * si;
            }
        }
        let mut dir: Vec<f64> = q.iter().map(|v| -v).collect();
        let mut slope = dot(&dir, &gx);
        if slope.is_nan() || slope >= 0.0 {
            history.clear();
            dir = gx.iter().map(|v| -v).collect();
            slope = dot(&dir, &gx);
        }
        if slope.is_nan() || slope >= 0.0 {
            break;
        }
        // Backtracking (Armijo) line search from a unit step.
        let mut step = if history.is_empty() {
            (1e-2 / dot(&dir, &dir).sqrt()).min(1.0)
        } else {
            1.0
        };
        let mut accepted = None;
        for _ in 0..60 {
            let xn: Vec<f64> = x.iter().zip(&dir).map(|(a, d)| a + step * d).collect();
            let (fnew, gnew) = f(&xn);
            if fnew.is_finite() && fnew <= fx + 1e-4 * step * slope {
                accepted = Some((xn, fnew, gnew));
                break;
            }
            step *= 0.5;
        }
        let Some((xn, fnew, gnew)) = accepted else {
            break;
        };
        let s: Vec<f64> = xn.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gnew.iter().zip(&gx).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-300 {
            history.push_back((s, y, 1.0 / sy));
            if history.len() > memory {
                history.pop_front();
            }
        }
        let improvement = fx - fnew;
        x = xn;
        fx = fnew;
        gx = gnew;
        stalled = if improvement < 1e-13 { stalled + 1 } else { 0 };
        if stalled >= 3 || dot(&gx, &gx).sqrt() < 1e-12 {
            break;
        }
    }
    let mut c = Vec::with_capacity(b);
    c.push(1.0);
    c.extend_from_slice(&x);
    let strategy = BandedStrategy::normalised(&c)?;
    let loss = strategy.loss(workload, t);
    // Never worse than where it started (the start is a valid strategy too).
    if loss > initial_loss {
        return Ok(Optimized {
            strategy: BandedStrategy::normalised(&start)?,
            initial_loss,
            loss: initial_loss,
            iterations,
        });
    }
    Ok(Optimized {
        strategy,
        initial_loss,
        loss,
        iterations,
    })
}

/// Coordinates per parallel block of [`CorrelatedNoise::correlate`].
const BLOCK: usize = 1 << 14;

/// The noise state of BandMF: the strategy's coefficients and the last b − 1 noise vectors w,
/// most recent first ((b − 1) × P floats), plus one spare vector that the next step's draw is
/// made in (the one the history let go of), so a step neither allocates nor copies a vector.
#[derive(Debug, Clone, PartialEq)]
pub struct CorrelatedNoise {
    coefficients: Vec<f64>,
    history: VecDeque<Vec<f64>>,
    spare: Vec<f64>,
}

impl CorrelatedNoise {
    /// A fresh state (before step 0) for `strategy`.
    pub fn new(strategy: &BandedStrategy) -> Self {
        Self {
            coefficients: strategy.coefficients().to_vec(),
            history: VecDeque::new(),
            spare: Vec::new(),
        }
    }

    /// Bytes of the full history for `num_params` parameters: (b − 1) × P × 8.
    pub fn history_bytes(bands: usize, num_params: usize) -> u64 {
        (bands.saturating_sub(1) as u64)
            .saturating_mul(num_params as u64)
            .saturating_mul(8)
    }

    /// Turn the fresh noise `z` (z_t) into the correlated noise w_t in place, and remember it:
    /// w_t = (z_t − Σ_{j=1}^{b−1} c_j w_{t−j}) / c_0 (fewer terms before step b − 1). Each
    /// coordinate's sum runs in the order j = 1, 2, …, whatever the thread count.
    pub fn correlate(&mut self, z: &mut [f64]) {
        self.solve(z);
        self.remember(z.to_vec());
    }

    /// w_t from z_t in place, from the remembered vectors (nothing is remembered).
    fn solve(&self, z: &mut [f64]) {
        let c = &self.coefficients;
        let history = &self.history;
        let c0 = c[0];
        z.par_chunks_mut(BLOCK)
            .enumerate()
            .for_each(|(block, out)| {
                let offset = block * BLOCK;
                for (i, v) in out.iter_mut().enumerate() {
                    let mut acc = *v;
                    for (j, w) in history.iter().enumerate() {
                        acc -= c[j + 1] * w[offset + i];
                    }
                    *v = acc / c0;
                }
            });
    }

    /// Remember w_t as the most recent vector; the oldest one past b − 1 becomes the spare.
    fn remember(&mut self, w: Vec<f64>) {
        if self.coefficients.len() == 1 {
            self.spare = w;
            return;
        }
        self.history.push_front(w);
        if self.history.len() == self.coefficients.len() {
            self.spare = self.history.pop_back().unwrap_or_default();
        }
    }

    /// The remembered noise vectors, most recent first (for checkpoints).
    pub fn history(&self) -> &VecDeque<Vec<f64>> {
        &self.history
    }

    /// Restore the remembered vectors (from a checkpoint), most recent first; each must hold
    /// `num_params` values and there may be at most b − 1 of them.
    pub fn restore(
        &mut self,
        history: Vec<Vec<f64>>,
        num_params: usize,
    ) -> Result<(), BandMfError> {
        let bands = self.coefficients.len();
        if history.len() >= bands || history.iter().any(|w| w.len() != num_params) {
            return Err(BandMfError::HistoryShape {
                found: history.len(),
                len: history.first().map_or(0, Vec::len),
                bands,
                expected: num_params,
            });
        }
        self.history = history.into();
        Ok(())
    }
}

/// A noise source whose vector draws are BandMF's correlated noise: each
/// [`GaussianSource::add_scaled_normals`] call is one step's release (it draws z_t from `inner`
/// exactly as DP-SGD would, turns it into w_t and adds w_t). Scalar draws
/// ([`GaussianSource::standard_normal`]) pass through uncorrelated: BandMF is offered only with
/// clipping policies whose whole noise is the one vector of the gradient sum (`config::spec`
/// refuses the others).
pub struct Correlated<'a, S: GaussianSource + ?Sized> {
    pub inner: &'a mut S,
    pub noise: &'a mut CorrelatedNoise,
}

impl<S: GaussianSource + ?Sized> GaussianSource for Correlated<'_, S> {
    fn standard_normal(&mut self) -> f64 {
        self.inner.standard_normal()
    }

    fn add_scaled_normals(&mut self, out: &mut [f64], scale: f64) {
        let mut z = std::mem::take(&mut self.noise.spare);
        z.clear();
        z.resize(out.len(), 0.0);
        self.inner.add_scaled_normals(&mut z, scale);
        self.noise.solve(&mut z);
        for (o, w) in out.iter_mut().zip(&z) {
            *o += w;
        }
        self.noise.remember(z);
    }
}

#[cfg(test)]
mod tests;
