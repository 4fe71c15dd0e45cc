//! The LMI of Proposition 3.4 (Kuru et al., arXiv:2008.01989, eq. 22; proof in App. B.2): a rate
//! ρ for heavy ball on every μ-strongly convex, L-smooth F is certified by P ⪰ 0 (2×2), c_0, c ≥ 0
//! with
//!
//! ```text
//! c_0 X_0 + c [X_1 + (1 − ρ²) X_2] − Φ(A, B, P, ρ) ⪰ 0        (3×3)
//! ```
//!
//! X_0 (the sector condition of ∇F), X_1 (L-smoothness along the step), X_2 (strong convexity) and
//! Φ = [[AᵀPA − ρ²P, AᵀPB], [BᵀPA, BᵀPB]] as in the paper, with A = [[1 + β, −β], [1, 0]],
//! C = [1, 0] and **B = [−α, 0]ᵀ**: eq. (18) prints B = [α, 0]ᵀ, which with u_t = ∇F(x_t) in (17)
//! would be gradient ascent; X_1 is derived (App. B.2) from the descent step, so the sign here is
//! the one the proof uses. The certificate bounds the Lyapunov function V_{P,c}(ξ) =
//! (ξ − ξ*)ᵀ(P ⊗ I)(ξ − ξ*) + c(F(x) − F*): E V_{P,c}(ξ_{t+1}) ≤ ρ² E V_{P,c}(ξ_t) + noise, so
//! E[F(x_t) − F*] ≤ ρ^{2t} V_{P,c}(ξ_0)/c + noise terms (eq. 23) when c > 0.
//!
//! The smallest certified ρ is found by bisection on ρ; each step decides the strict feasibility
//! of the LMI at that ρ by a small semidefinite program, solved here by a log-barrier
//! interior-point method (Boyd & Vandenberghe, Convex Optimization, §11.3) on five unknowns:
//! maximise s subject to LMI ⪰ sI, P ⪰ sI, c_0 ≥ s, c ≥ s and tr P + c_0 + c = 1 (the LMI is
//! homogeneous, so this normalisation loses nothing). A point with s > 0 is a certificate, checked
//! again by an independent eigenvalue computation; s* < 0, proven by the barrier's duality gap, is
//! infeasibility; anything else counts as "not certified", so errors can only make ρ larger.
//! (The `clarabel` conic solver was the first choice; its semidefinite cones need a system
//! BLAS/LAPACK, which the repository's build does not assume.)

/// Heavy ball's parameters and the function class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LmiProblem {
    pub alpha: f64,
    pub beta: f64,
    pub mu: f64,
    pub l: f64,
}

/// A verified solution of the LMI at rate `rho`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Certificate {
    pub rho: f64,
    /// P, symmetric positive definite.
    pub p: [[f64; 2]; 2],
    pub c0: f64,
    /// c > 0: the weight of F − F* in the Lyapunov function.
    pub c: f64,
    /// The smallest eigenvalue of the LMI's matrix (> 0).
    pub margin: f64,
}

type M3 = [[f64; 3]; 3];
type M2 = [[f64; 2]; 2];

impl LmiProblem {
    /// The sector matrix X_0 (y = x − x*, u = ∇F(x)): [y; u]ᵀ X_0 [y; u] ≤ 0 on S_{μ,L}.
    fn x0(&self) -> M3 {
        let (mu, l) = (self.mu, self.l);
        [
            [2.0 * mu * l, 0.0, -(mu + l)],
            [0.0, 0.0, 0.0],
            [-(mu + l), 0.0, 2.0],
        ]
    }

    /// X_1 + (1 − ρ²) X_2 (Prop. 3.4).
    fn y(&self, rho: f64) -> M3 {
        let (a, b, l, mu) = (self.alpha, self.beta, self.l, self.mu);
        let k = (1.0 - l * a) * b;
        let x1 = [
            [-l * b * b, l * b * b, -k],
            [l * b * b, -l * b * b, k],
            [-k, k, a * (2.0 - l * a)],
        ];
        let x2 = [[mu, 0.0, -1.0], [0.0, 0.0, 0.0], [-1.0, 0.0, 0.0]];
        let w = 1.0 - rho * rho;
        let mut y = [[0.0; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                y[i][j] = 0.5 * (x1[i][j] + w * x2[i][j]);
            }
        }
        y
    }

    /// Φ(A, B, P, ρ), linear in P.
    fn phi(&self, p: M2, rho: f64) -> M3 {
        let a = [[1.0 + self.beta, -self.beta], [1.0, 0.0]];
        let b = [-self.alpha, 0.0];
        let mut ab = [[0.0; 3]; 2]; // [A B], 2×3
        for i in 0..2 {
            ab[i][0] = a[i][0];
            ab[i][1] = a[i][1];
            ab[i][2] = b[i];
        }
        let mut out = [[0.0; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                let mut s = 0.0;
                for k in 0..2 {
                    for m in 0..2 {
                        s += ab[k][i] * p[k][m] * ab[m][j];
                    }
                }
                if i < 2 && j < 2 {
                    s -= rho * rho * p[i][j];
                }
                out[i][j] = s;
            }
        }
        out
    }

    /// c_0 X_0 + c [X_1 + (1 − ρ²) X_2] − Φ(A, B, P, ρ).
    pub fn matrix(&self, rho: f64, p: M2, c0: f64, c: f64) -> M3 {
        let (x0, y, phi) = (self.x0(), self.y(rho), self.phi(p, rho));
        let mut m = [[0.0; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                m[i][j] = c0 * x0[i][j] + c * y[i][j] - phi[i][j];
            }
        }
        m
    }

    /// The certificate at `rho` if the LMI is strictly feasible there (decided as in the module
    /// notes), else `None`.
    pub fn certificate_at(&self, rho: f64) -> Option<Certificate> {
        self.certificate_from(rho, Barrier::new(self, rho).solve(true)?)
    }

    /// The certificate at `rho` with the largest margin s (the solution of the program in the
    /// module notes, not its first strictly feasible point): better conditioned, so with a larger
    /// c and smaller noise factors for eq. (23).
    pub fn central_certificate_at(&self, rho: f64) -> Option<Certificate> {
        self.certificate_from(rho, Barrier::new(self, rho).solve(false)?)
    }

    fn certificate_from(&self, rho: f64, z: [f64; NZ]) -> Option<Certificate> {
        let p = [[z[0], z[1]], [z[1], z[2]]];
        let c0 = z[3];
        let c = 1.0 - z[0] - z[2] - z[3];
        let margin = min_eigenvalue(self.matrix(rho, p, c0, c));
        let p_min = min_eigenvalue(p);
        (margin > 0.0 && p_min > 0.0 && c0 >= 0.0 && c > 0.0).then_some(Certificate {
            rho,
            p,
            c0,
            c,
            margin,
        })
    }

    /// The smallest certified ρ in (0, 1), to within `tol`, by bisection (assuming, as holds in
    /// every case tested, that feasibility is monotone in ρ); `None` when no ρ < 1 is certified.
    pub fn certified_rate(&self, tol: f64) -> Option<Certificate> {
        let mut hi = 1.0 - 1e-9;
        let mut best = self.certificate_at(hi)?;
        let mut lo = 0.0;
        while hi - lo > tol {
            let mid = 0.5 * (lo + hi);
            match self.certificate_at(mid) {
                Some(c) => {
                    hi = mid;
                    best = c;
                }
                None => lo = mid,
            }
        }
        Some(best)
    }
}

impl Certificate {
    /// V_{P,c}(ξ_0)/c for x_0 − x* = `e0` and x_{−1} − x* = `e_prev` (per coordinate) and
    /// F(x_0) − F* = `excess0`.
    pub fn initial_term(&self, e0: &[f64], e_prev: &[f64], excess0: f64) -> f64 {
        let p = self.p;
        let vp: f64 = e0
            .iter()
            .zip(e_prev)
            .map(|(&a, &b)| p[0][0] * a * a + 2.0 * p[0][1] * a * b + p[1][1] * b * b)
            .sum();
        vp / self.c + excess0
    }

    /// The factor 1 + 2P_12²/(P_22 c L + 2|P|) of eq. (23) as printed (0/0 = 0).
    pub fn noise_factor_printed(&self, l: f64) -> f64 {
        let p = self.p;
        let num = 2.0 * p[0][1] * p[0][1];
        let den = p[1][1] * self.c * l + 2.0 * (p[0][0] * p[1][1] - p[0][1] * p[0][1]);
        1.0 + if num == 0.0 { 0.0 } else { num / den }
    }

    /// The factor the Lyapunov step gives with the noise kept: a step adds α²P_11 E‖w‖² to V_P and
    /// (Lα²/2) E‖w‖² to c(F − F*) (Lemma B.1), so 1 + 2P_11/(cL).
    pub fn noise_factor_derived(&self, l: f64) -> f64 {
        1.0 + 2.0 * self.p[0][0] / (self.c * l)
    }

    /// Eq. (23): ρ^{2t} V_{P,c}(ξ_0)/c + (1 − ρ^{2t})/(1 − ρ²) · (L d α²/2) E_T · factor, with
    /// `d_noise` = d·E_T ≥ E‖w_t‖².
    pub fn bound(
        &self,
        initial_term: f64,
        l: f64,
        alpha: f64,
        d_noise: f64,
        factor: f64,
        t: u32,
    ) -> f64 {
        let r2t = self.rho.powi(2 * t as i32);
        let r2 = self.rho * self.rho;
        r2t * initial_term + (1.0 - r2t) / (1.0 - r2) * (l * alpha * alpha / 2.0) * d_noise * factor
    }
}

/// The smallest eigenvalue of a symmetric matrix ([`crate::eigen::symmetric_eigenvalues`]).
pub fn min_eigenvalue<const N: usize>(a: [[f64; N]; N]) -> f64 {
    let eigenvalues =
        crate::eigen::symmetric_eigenvalues(ndarray::Array2::from_shape_fn((N, N), |(i, j)| {
            a[i][j]
        }));
    eigenvalues.first().copied().unwrap_or(f64::INFINITY)
}

/// Cholesky factor of a symmetric positive-definite matrix, `None` if not positive definite.
fn cholesky<const N: usize>(a: &[[f64; N]; N]) -> Option<[[f64; N]; N]> {
    let mut l = [[0.0; N]; N];
    for i in 0..N {
        for j in 0..=i {
            let s = a[i][j] - (0..j).map(|k| l[i][k] * l[j][k]).sum::<f64>();
            if i == j {
                if s <= 0.0 || !s.is_finite() {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    Some(l)
}

/// Inverse and log-determinant of a symmetric positive-definite matrix.
#[allow(clippy::needless_range_loop)]
fn inverse_logdet<const N: usize>(a: &[[f64; N]; N]) -> Option<([[f64; N]; N], f64)> {
    let l = cholesky(a)?;
    let logdet = 2.0 * (0..N).map(|i| l[i][i].ln()).sum::<f64>();
    // Solve L Lᵀ X = I column by column.
    let mut inv = [[0.0; N]; N];
    for col in 0..N {
        let mut y = [0.0; N];
        for i in 0..N {
            let rhs = if i == col { 1.0 } else { 0.0 };
            y[i] = (rhs - (0..i).map(|k| l[i][k] * y[k]).sum::<f64>()) / l[i][i];
        }
        let mut x = [0.0; N];
        for i in (0..N).rev() {
            x[i] = (y[i] - (i + 1..N).map(|k| l[k][i] * x[k]).sum::<f64>()) / l[i][i];
        }
        for i in 0..N {
            inv[i][col] = x[i];
        }
    }
    Some((inv, logdet))
}

fn matmul<const N: usize>(a: &[[f64; N]; N], b: &[[f64; N]; N]) -> [[f64; N]; N] {
    let mut out = [[0.0; N]; N];
    for i in 0..N {
        for j in 0..N {
            out[i][j] = (0..N).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    out
}

fn trace_prod<const N: usize>(a: &[[f64; N]; N], b: &[[f64; N]; N]) -> f64 {
    (0..N)
        .map(|i| (0..N).map(|k| a[i][k] * b[k][i]).sum::<f64>())
        .sum()
}

/// Unknowns z = (P_11, P_12, P_22, c_0, s); c = 1 − P_11 − P_22 − c_0.
const NZ: usize = 5;
/// The barrier parameter θ: 3 + 2 (the two matrix cones) + 1 + 1 (c_0 ≥ s, c ≥ s).
const THETA: f64 = 7.0;

/// max s subject to G(z) = G_0 + Σ z_k G_k ⪰ 0 (3×3: LMI − sI), H(z) = Σ z_k H_k ⪰ 0 (2×2: P − sI),
/// c_0 − s ≥ 0, c − s ≥ 0.
struct Barrier {
    g0: M3,
    g: [M3; NZ],
    h: [M2; NZ],
}

const SCALAR_A: [[f64; NZ]; 2] = [[0.0, 0.0, 0.0, 1.0, -1.0], [-1.0, 0.0, -1.0, -1.0, -1.0]];
const SCALAR_B: [f64; 2] = [0.0, 1.0];

impl Barrier {
    fn new(pb: &LmiProblem, rho: f64) -> Self {
        let y = pb.y(rho);
        let x0 = pb.x0();
        let basis: [M2; 3] = [
            [[1.0, 0.0], [0.0, 0.0]],
            [[0.0, 1.0], [1.0, 0.0]],
            [[0.0, 0.0], [0.0, 1.0]],
        ];
        let mut g = [[[0.0; 3]; 3]; NZ];
        let mut h = [[[0.0; 2]; 2]; NZ];
        for (k, e) in basis.iter().enumerate() {
            let phi = pb.phi(*e, rho);
            // P_11 and P_22 also lower c by one each (the normalisation); P_12 does not.
            let wc = if k == 1 { 0.0 } else { 1.0 };
            for i in 0..3 {
                for j in 0..3 {
                    g[k][i][j] = -phi[i][j] - wc * y[i][j];
                }
            }
            h[k] = *e;
        }
        for i in 0..3 {
            for j in 0..3 {
                g[3][i][j] = x0[i][j] - y[i][j];
            }
            g[4][i][i] = -1.0;
        }
        h[4] = [[-1.0, 0.0], [0.0, -1.0]];
        Barrier { g0: y, g, h }
    }

    fn gmat(&self, z: &[f64; NZ]) -> M3 {
        let mut m = self.g0;
        for (k, gk) in self.g.iter().enumerate() {
            for i in 0..3 {
                for j in 0..3 {
                    m[i][j] += z[k] * gk[i][j];
                }
            }
        }
        m
    }

    fn hmat(&self, z: &[f64; NZ]) -> M2 {
        let mut m = [[0.0; 2]; 2];
        for (k, hk) in self.h.iter().enumerate() {
            for i in 0..2 {
                for j in 0..2 {
                    m[i][j] += z[k] * hk[i][j];
                }
            }
        }
        m
    }

    fn scalars(&self, z: &[f64; NZ]) -> [f64; 2] {
        let mut s = SCALAR_B;
        for (r, a) in SCALAR_A.iter().enumerate() {
            s[r] += (0..NZ).map(|k| a[k] * z[k]).sum::<f64>();
        }
        s
    }

    /// −τ s + barrier, or `None` outside the domain.
    fn value(&self, z: &[f64; NZ], tau: f64) -> Option<f64> {
        let (_, ldg) = inverse_logdet(&self.gmat(z))?;
        let (_, ldh) = inverse_logdet(&self.hmat(z))?;
        let sc = self.scalars(z);
        if sc.iter().any(|&v| v <= 0.0) {
            return None;
        }
        Some(-tau * z[4] - ldg - ldh - sc.iter().map(|v| v.ln()).sum::<f64>())
    }

    /// Gradient and Hessian of [`Self::value`] at a point of the domain.
    fn newton_system(&self, z: &[f64; NZ], tau: f64) -> Option<([f64; NZ], [[f64; NZ]; NZ])> {
        let (gi, _) = inverse_logdet(&self.gmat(z))?;
        let (hi, _) = inverse_logdet(&self.hmat(z))?;
        let sc = self.scalars(z);
        let wg: Vec<M3> = self.g.iter().map(|gk| matmul(&gi, gk)).collect();
        let wh: Vec<M2> = self.h.iter().map(|hk| matmul(&hi, hk)).collect();
        let mut grad = [0.0; NZ];
        let mut hess = [[0.0; NZ]; NZ];
        for k in 0..NZ {
            grad[k] = -(0..3).map(|i| wg[k][i][i]).sum::<f64>()
                - (0..2).map(|i| wh[k][i][i]).sum::<f64>();
            for (r, a) in SCALAR_A.iter().enumerate() {
                grad[k] -= a[k] / sc[r];
            }
            for l in 0..NZ {
                hess[k][l] = trace_prod(&wg[k], &wg[l]) + trace_prod(&wh[k], &wh[l]);
                for (r, a) in SCALAR_A.iter().enumerate() {
                    hess[k][l] += a[k] * a[l] / (sc[r] * sc[r]);
                }
            }
        }
        grad[4] -= tau;
        Some((grad, hess))
    }

    /// A strictly feasible point with s > 0 (the first one met when `first`, else the maximiser
    /// to a duality gap of 1e-9), or `None` (proven s* < 0, or undecided).
    fn solve(&self, first: bool) -> Option<[f64; NZ]> {
        let mut z = [0.25, 0.0, 0.25, 0.25, 0.0];
        let g = self.gmat(&z);
        z[4] = min_eigenvalue(g).min(0.25) - 1.0;
        let mut tau = 1.0;
        for _outer in 0..16 {
            for _newton in 0..100 {
                let (grad, hess) = self.newton_system(&z, tau)?;
                let step = solve_linear(hess, grad.map(|v| -v))?;
                let slope: f64 = (0..NZ).map(|k| grad[k] * step[k]).sum();
                if -slope / 2.0 < 1e-12 {
                    break;
                }
                let f0 = self.value(&z, tau)?;
                let mut s = 1.0;
                let next = loop {
                    let cand: [f64; NZ] = std::array::from_fn(|k| z[k] + s * step[k]);
                    if let Some(f) = self.value(&cand, tau)
                        && f <= f0 + 0.25 * s * slope
                    {
                        break Some(cand);
                    }
                    s *= 0.5;
                    if s < 1e-14 {
                        break None;
                    }
                };
                let Some(next) = next else { break };
                z = next;
                if first && z[4] > 0.0 {
                    return Some(z);
                }
            }
            if z[4] + 2.0 * THETA / tau < 0.0 {
                return None;
            }
            if THETA / tau < 1e-9 {
                break;
            }
            tau *= 8.0;
        }
        (z[4] > 0.0).then_some(z)
    }
}

/// Solve a small linear system by Gaussian elimination with partial pivoting.
#[allow(clippy::needless_range_loop)]
fn solve_linear<const N: usize>(mut a: [[f64; N]; N], mut b: [f64; N]) -> Option<[f64; N]> {
    for col in 0..N {
        let piv = (col..N).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-300 || !a[piv][col].is_finite() {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for r in col + 1..N {
            let f = a[r][col] / a[col][col];
            for c in col..N {
                a[r][c] -= f * a[col][c];
            }
            b[r] -= f * b[col];
        }
    }
    let mut x = [0.0; N];
    for i in (0..N).rev() {
        x[i] = (b[i] - (i + 1..N).map(|k| a[i][k] * x[k]).sum::<f64>()) / a[i][i];
    }
    Some(x)
}
