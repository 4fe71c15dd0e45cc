//! Convergence-rate certificates for (DP) stochastic heavy ball, after Kuru, Birbil, Gürbüzbalaban
//! and Yıldırım, "Differentially Private Accelerated Optimization Algorithms" (arXiv:2008.01989),
//! Section 3: the quadratic rate ρ and the bound of Theorem 3.5 (eqs. 25–26, App. B.3), and the
//! LMI of Proposition 3.4 (eqs. 22–23, App. B.2) in [`lmi`].
//!
//! Room: `optim`. Owns pure functions of (α, β, μ, L) and of a noise variance: rates, bounds, and
//! the exact second moments of noisy heavy ball on a quadratic that test them. Must not: see data,
//! gradients or a run's state.
//!
//! Heavy ball x_{t+1} = x_t − α(∇F(x_t) + w_t) + β(x_t − x_{t−1}) on F(x) = ½xᵀQx + aᵀx + b moves
//! each eigen-coordinate of x − x* by the 2×2 matrix T_λ = [[1 + β − αλ, −β], [1, 0]] (App. B.3),
//! whose characteristic polynomial is
//!
//! ```text
//! z² − (1 + β − αλ) z + β                        (heavy ball's own; used here)
//! ```
//!
//! Eq. (26) as printed writes the roots of z² − (1 + β)(1 − αλ) z + β(1 − αλ), which is
//! Nesterov's polynomial (the look-ahead gradient); App. B.3 derives (26) from T_λ, so the printed
//! a_{λ,±} is a slip. [`Polynomial::Eq26AsPrinted`] keeps it for comparison only: at α = 1/L it
//! can be below the true rate (for λ = L its roots are 0, heavy ball's have modulus √β). Both
//! polynomials reach the same best rate 1 − √(αμ) for α ≤ 1/L, at different β:
//! (1 − √(αμ))² for heavy ball, (1 − √(αμ))/(1 + √(αμ)) for the printed one ([`rate_optimal_momentum`]).
//!
//! Theorem 3.5 states E[F(x_t)] − F* ≤ V(ξ_0) C_t² ρ^{2t} + L m(α, β) with ‖M^t‖ ≤ C_t ρ^t. Its
//! proof bounds E‖x_t − x*‖² (the trace of the x-block of the covariance); the step to F costs a
//! factor L/2 that the first term omits, so the printed form holds when L ≤ 2 (as in Figure 1,
//! L = 1) and can fail for larger L (tested). [`thm35_bound`] is the printed right-hand side;
//! [`distance_bound`] is the bound the proof establishes, valid for every L. The paper plots
//! C_t = t; [`transient_constant`] is the smallest valid C_t, ‖M^t‖₂/ρ^t.

pub mod lmi;

#[cfg(test)]
mod tests;

/// Which characteristic polynomial the quadratic rate is read from (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polynomial {
    /// z² − (1 + β − αλ) z + β: heavy ball's iteration matrix T_λ (App. B.3).
    HeavyBall,
    /// z² − (1 + β)(1 − αλ) z + β(1 − αλ): eq. (26) as printed (Nesterov's polynomial).
    Eq26AsPrinted,
}

/// The largest modulus of the roots of z² − b z + c.
fn root_radius(b: f64, c: f64) -> f64 {
    let disc = b * b - 4.0 * c;
    if disc < 0.0 {
        c.sqrt()
    } else {
        let s = disc.sqrt();
        ((b + s).abs()).max((b - s).abs()) / 2.0
    }
}

/// ρ_λ: the spectral radius of one eigen-coordinate's iteration under `poly`.
pub fn eigen_rate(alpha: f64, beta: f64, lambda: f64, poly: Polynomial) -> f64 {
    match poly {
        Polynomial::HeavyBall => root_radius(1.0 + beta - alpha * lambda, beta),
        Polynomial::Eq26AsPrinted => {
            let q = 1.0 - alpha * lambda;
            root_radius((1.0 + beta) * q, beta * q)
        }
    }
}

/// ρ of eq. (26): max of ρ_λ over λ ∈ {μ, L}. (ρ_λ is quasi-convex in λ, App. B.3, so this is also
/// the maximum over the interval [μ, L]; tested.)
pub fn quadratic_rate(alpha: f64, beta: f64, mu: f64, l: f64, poly: Polynomial) -> f64 {
    eigen_rate(alpha, beta, mu, poly).max(eigen_rate(alpha, beta, l, poly))
}

/// The momentum that minimises [`quadratic_rate`] for a step size α ≤ 1/L, and that rate,
/// 1 − √(αμ) for both polynomials: heavy ball's β is (1 − √(αμ))² (both eigen-coordinates then have
/// complex roots of modulus √β), the printed polynomial's is (1 − √(αμ))/(1 + √(αμ)) (a double root
/// at λ = μ), which is the β the paper's code uses.
pub fn rate_optimal_momentum(alpha: f64, mu: f64, poly: Polynomial) -> (f64, f64) {
    let r = (alpha * mu).sqrt();
    let beta = match poly {
        Polynomial::HeavyBall => (1.0 - r) * (1.0 - r),
        Polynomial::Eq26AsPrinted => (1.0 - r) / (1.0 + r),
    };
    (beta, 1.0 - r)
}

/// m(α, β) of Theorem 3.5: Σ_i α(1 + β)σ² / ((1 − β) λ_i (2 + 2β − αλ_i)), the stationary
/// E‖x_t − x*‖² of heavy ball with noise covariance σ²I (the AR(2) variance of each coordinate).
/// Infinite when some λ_i is outside the stable range.
pub fn stationary_distance(alpha: f64, beta: f64, eigenvalues: &[f64], noise_var: f64) -> f64 {
    eigenvalues
        .iter()
        .map(|&l| {
            let den = (1.0 - beta) * l * (2.0 + 2.0 * beta - alpha * l);
            if den > 0.0 && beta < 1.0 {
                alpha * (1.0 + beta) * noise_var / den
            } else {
                f64::INFINITY
            }
        })
        .sum()
}

/// The spectral norm of a 2×2 matrix [[a, b], [c, d]].
fn norm2x2(m: [[f64; 2]; 2]) -> f64 {
    let [[a, b], [c, d]] = m;
    // Singular values: σ² are the eigenvalues of mᵀm, whose trace and determinant are below.
    let tr = a * a + b * b + c * c + d * d;
    let det = a * d - b * c;
    let disc = (tr * tr - 4.0 * det * det).max(0.0).sqrt();
    ((tr + disc) / 2.0).sqrt()
}

fn mul2x2(x: [[f64; 2]; 2], y: [[f64; 2]; 2]) -> [[f64; 2]; 2] {
    let mut out = [[0.0; 2]; 2];
    for (i, row) in out.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = x[i][0] * y[0][j] + x[i][1] * y[1][j];
        }
    }
    out
}

/// ‖M^t‖₂ = max_i ‖T_{λ_i}^t‖₂ for heavy ball on a quadratic with these Hessian eigenvalues.
pub fn iteration_norm(alpha: f64, beta: f64, eigenvalues: &[f64], t: u32) -> f64 {
    eigenvalues
        .iter()
        .map(|&l| {
            let m = [[1.0 + beta - alpha * l, -beta], [1.0, 0.0]];
            let mut p = [[1.0, 0.0], [0.0, 1.0]];
            for _ in 0..t {
                p = mul2x2(m, p);
            }
            norm2x2(p)
        })
        .fold(0.0, f64::max)
}

/// The smallest C_t with ‖M^t‖₂ ≤ C_t ρ^t (ρ: heavy ball's [`quadratic_rate`] over the extreme
/// eigenvalues). O(t) (a 2×2 block with a double eigenvalue grows like t).
pub fn transient_constant(alpha: f64, beta: f64, eigenvalues: &[f64], t: u32) -> f64 {
    let (lo, hi) = extremes(eigenvalues);
    let rho = quadratic_rate(alpha, beta, lo, hi, Polynomial::HeavyBall);
    iteration_norm(alpha, beta, eigenvalues, t) / rho.powi(t as i32)
}

fn extremes(eigenvalues: &[f64]) -> (f64, f64) {
    eigenvalues
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &l| {
            (a.min(l), b.max(l))
        })
}

/// The inputs of Theorem 3.5's right-hand side at one t.
#[derive(Debug, Clone, Copy)]
pub struct Thm35Inputs<'a> {
    pub alpha: f64,
    pub beta: f64,
    /// The eigenvalues λ_i of Q (μ and L are their extremes).
    pub eigenvalues: &'a [f64],
    /// σ_T²: the bound on the noise covariance, E[w wᵀ | x] ⪯ σ_T² I.
    pub noise_var: f64,
    /// E‖ξ_0 − ξ*‖² with ξ_0 = (x_0, x_{−1}).
    pub initial_sq_distance: f64,
    /// The rate ρ used (eq. 26; see [`Polynomial`]).
    pub rho: f64,
    /// C_t (the paper's Figure 1: t; valid: [`transient_constant`]).
    pub c_t: f64,
    pub t: u32,
}

impl Thm35Inputs<'_> {
    /// V(ξ_0) = E‖ξ_0 − ξ*‖² + σ_T²α²/(1 − ρ²) (infinite when ρ ≥ 1).
    pub fn v0(&self) -> f64 {
        if self.rho >= 1.0 {
            return f64::INFINITY;
        }
        self.initial_sq_distance
            + self.noise_var * self.alpha * self.alpha / (1.0 - self.rho * self.rho)
    }

    fn transient(&self) -> f64 {
        self.v0() * self.c_t * self.c_t * self.rho.powi(2 * self.t as i32)
    }
}

/// Theorem 3.5's right-hand side as printed: V(ξ_0) C_t² ρ^{2t} + L m(α, β), a bound on
/// E[F(x_t)] − F* (valid for L ≤ 2 with a valid C_t; see the module notes).
pub fn thm35_bound(inp: &Thm35Inputs<'_>) -> f64 {
    let (_, l) = extremes(inp.eigenvalues);
    inp.transient() + l * stationary_distance(inp.alpha, inp.beta, inp.eigenvalues, inp.noise_var)
}

/// What the proof of Theorem 3.5 bounds: E‖x_t − x*‖² ≤ V(ξ_0) C_t² ρ^{2t} + m(α, β), valid for
/// every L when C_t ≥ ‖M^t‖₂/ρ^t and E[w wᵀ | x] ⪯ σ_T² I.
pub fn distance_bound(inp: &Thm35Inputs<'_>) -> f64 {
    inp.transient() + stationary_distance(inp.alpha, inp.beta, inp.eigenvalues, inp.noise_var)
}

/// E‖x_t − x*‖² and E[F(x_t)] − F* at one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moments {
    pub sq_distance: f64,
    pub excess: f64,
}

/// The exact second moments of heavy ball on F = ½ Σ λ_i (x_i − x*_i)² (Q diagonal, which is no
/// loss for isotropic noise) with independent zero-mean noise of covariance σ²I, from x_{−1} = x_0,
/// for t = 0..=steps.
///
/// The covariance of ξ_t − ξ* obeys Σ_{t+1} = M Σ_t Mᵀ + diag(α²σ²I, 0) (App. B.3, with equality);
/// M is block-diagonal in the eigen-coordinates, so the 2×2 diagonal blocks, which carry every
/// quantity here, evolve on their own (for d = 2 these are the diagonal blocks of the 4×4 recursion).
pub fn exact_moments(
    alpha: f64,
    beta: f64,
    eigenvalues: &[f64],
    noise_var: f64,
    x0_minus_opt: &[f64],
    steps: u32,
) -> Vec<Moments> {
    assert_eq!(eigenvalues.len(), x0_minus_opt.len());
    // Per coordinate: (E[e_t²], E[e_t e_{t−1}], E[e_{t−1}²]) with e = x − x*.
    let mut cov: Vec<[f64; 3]> = x0_minus_opt
        .iter()
        .map(|&e| [e * e, e * e, e * e])
        .collect();
    let mut out = Vec::with_capacity(steps as usize + 1);
    let moments = |cov: &[[f64; 3]]| {
        let sq_distance = cov.iter().map(|c| c[0]).sum();
        let excess = cov
            .iter()
            .zip(eigenvalues)
            .map(|(c, l)| 0.5 * l * c[0])
            .sum();
        Moments {
            sq_distance,
            excess,
        }
    };
    out.push(moments(&cov));
    for _ in 0..steps {
        for (c, &l) in cov.iter_mut().zip(eigenvalues) {
            let a = 1.0 + beta - alpha * l;
            let [s00, s01, s11] = *c;
            // e_{t+1} = a e_t − β e_{t−1} − α w_t.
            let n00 =
                a * a * s00 - 2.0 * a * beta * s01 + beta * beta * s11 + alpha * alpha * noise_var;
            let n01 = a * s00 - beta * s01;
            *c = [n00, n01, s00];
        }
        out.push(moments(&cov));
    }
    out
}
