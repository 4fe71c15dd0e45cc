//! The regularised binary logistic regression of the accelerated-methods paper (Kuru et al. 2020,
//! §5; method notes `docs/methods/accelerated.md` §1): F(x) = (1/n) Σ_i log(1 + exp(−z_i u_iᵀx)) + (μ/2)‖x‖²
//! with labels z_i ∈ {−1, +1} (dpx labels 0/1 map to −1/+1) and no intercept.
//!
//! dpx writes the penalty as (μ/2)‖x‖² with μ = `model.l2`, like every other dpx model; the paper's
//! λ‖x‖² is the case μ = 2λ (λ = 0.01 ↔ `model.l2 = 0.02`), so μ is the strong-convexity modulus.
//!
//! Room: `model`. Owns this problem's objective, gradients (of a batch, per example as
//! coefficients), its smoothness constants and a high-precision non-private solver for F*. Knows
//! nothing of DP: the caller clips and adds noise.
//!
//! f64 throughout (d = 20 in the paper), single-threaded sums in row order, so every value is
//! bit-identical whatever the thread count.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

/// One example's logistic term: ln(1 + e^{−s}) computed without overflow.
fn log1p_exp_neg(s: f64) -> f64 {
    if s > 0.0 {
        (-s).exp().ln_1p()
    } else {
        -s + s.exp().ln_1p()
    }
}

/// σ(s) = 1/(1 + e^{−s}).
fn sigmoid(s: f64) -> f64 {
    if s >= 0.0 {
        1.0 / (1.0 + (-s).exp())
    } else {
        let e = s.exp();
        e / (1.0 + e)
    }
}

/// The problem on one dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct BinaryLogistic {
    /// Features u_i, `[n, d]`.
    features: Array2<f64>,
    /// Labels z_i ∈ {−1, +1}.
    signs: Vec<f64>,
    /// μ of (μ/2)‖x‖².
    l2: f64,
}

/// How the smoothness constant L is obtained (docs/methods/accelerated.md §5, §10.9).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Smoothness {
    /// The paper's L = σ_max(UᵀU/n) + μ, without the logistic ¼ (so α = c/L is ~4× conservative).
    Gram,
    /// The true bound for the logistic loss: ¼ σ_max(UᵀU/n) + μ.
    Logistic,
}

/// A non-private minimiser of F.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimum {
    pub x: Array1<f64>,
    /// F(x*).
    pub objective: f64,
    /// ‖∇F(x*)‖₂ at the end.
    pub gradient_norm: f64,
    /// Newton iterations taken.
    pub iterations: u32,
}

impl BinaryLogistic {
    /// The problem on `features` (`[n, d]`) with 0/1 `labels` and penalty (l2/2)‖x‖².
    ///
    /// # Panics
    /// Never on user input: labels other than 0 count as +1 (the caller checks binary data).
    pub fn new(features: ArrayView2<'_, f32>, labels: &[usize], l2: f64) -> Self {
        BinaryLogistic {
            features: features.mapv(f64::from),
            signs: labels
                .iter()
                .map(|&l| if l == 0 { -1.0 } else { 1.0 })
                .collect(),
            l2,
        }
    }

    /// n.
    pub fn len(&self) -> usize {
        self.signs.len()
    }

    /// True when there are no examples.
    pub fn is_empty(&self) -> bool {
        self.signs.is_empty()
    }

    /// d.
    pub fn dim(&self) -> usize {
        self.features.ncols()
    }

    /// μ.
    pub fn l2(&self) -> f64 {
        self.l2
    }

    /// The features u_i, `[n, d]`.
    pub fn features(&self) -> ArrayView2<'_, f64> {
        self.features.view()
    }

    /// The labels z_i ∈ {−1, +1}.
    pub fn signs(&self) -> &[f64] {
        &self.signs
    }

    /// The L1 norm of every example's features, ‖u_i‖₁.
    pub fn feature_l1_norms(&self) -> Vec<f64> {
        self.features
            .rows()
            .into_iter()
            .map(|r| r.iter().map(|v| v.abs()).sum())
            .collect()
    }

    /// F(x): mean logistic loss plus (μ/2)‖x‖².
    pub fn objective(&self, x: ArrayView1<'_, f64>) -> f64 {
        self.mean_loss(x) + 0.5 * self.l2 * x.dot(&x)
    }

    /// (1/n) Σ_i log(1 + exp(−z_i u_iᵀx)), without the penalty.
    pub fn mean_loss(&self, x: ArrayView1<'_, f64>) -> f64 {
        let margins = self.features.dot(&x);
        let s: f64 = margins
            .iter()
            .zip(&self.signs)
            .map(|(m, z)| log1p_exp_neg(z * m))
            .sum();
        s / self.len().max(1) as f64
    }

    /// The fraction of examples with sign(u_iᵀx) = z_i (a margin of 0 counts as wrong).
    pub fn accuracy(&self, x: ArrayView1<'_, f64>) -> f64 {
        let margins = self.features.dot(&x);
        let right = margins
            .iter()
            .zip(&self.signs)
            .filter(|(m, z)| *z * **m > 0.0)
            .count();
        right as f64 / self.len().max(1) as f64
    }

    /// Per-example gradient coefficients of the loss part at x for the examples `rows`:
    /// ∇_x log(1 + e^{−z uᵀx}) = c·u with c = −z σ(−z uᵀx), so ‖∇‖₁ = |c|·‖u‖₁.
    pub fn coefficients(&self, x: ArrayView1<'_, f64>, rows: &[usize]) -> Vec<f64> {
        rows.iter()
            .map(|&i| {
                let z = self.signs[i];
                -z * sigmoid(-z * self.features.row(i).dot(&x))
            })
            .collect()
    }

    /// Σ_k w_k u_{rows\[k\]}: the weighted sum of the examples' features, in row order.
    ///
    /// # Shapes
    /// `rows` and `weights` have the same length; the result has length d.
    pub fn weighted_feature_sum(&self, rows: &[usize], weights: &[f64]) -> Array1<f64> {
        let mut out = Array1::<f64>::zeros(self.dim());
        for (&i, &w) in rows.iter().zip(weights) {
            out.scaled_add(w, &self.features.row(i));
        }
        out
    }

    /// ∇F(x) over all examples (loss mean plus μx).
    pub fn full_gradient(&self, x: ArrayView1<'_, f64>) -> Array1<f64> {
        let margins = self.features.dot(&x);
        let coef: Array1<f64> = margins
            .iter()
            .zip(&self.signs)
            .map(|(m, z)| -z * sigmoid(-z * m))
            .collect();
        let mut g = self.features.t().dot(&coef) / self.len().max(1) as f64;
        g.scaled_add(self.l2, &x);
        g
    }

    /// The largest eigenvalue of UᵀU/n (power iteration on the d×d matrix, to 1e−14 relative).
    pub fn gram_top_eigenvalue(&self) -> f64 {
        let d = self.dim();
        let gram = self.features.t().dot(&self.features) / self.len().max(1) as f64;
        let mut v = Array1::<f64>::from_elem(d, 1.0 / (d.max(1) as f64).sqrt());
        let mut lambda = 0.0;
        for _ in 0..10_000 {
            let w = gram.dot(&v);
            let norm = w.dot(&w).sqrt();
            if norm == 0.0 {
                return 0.0;
            }
            let next = v.dot(&w);
            v = w / norm;
            if (next - lambda).abs() <= 1e-14 * next.abs() {
                return next;
            }
            lambda = next;
        }
        lambda
    }

    /// The smoothness constant L of F under `rule`.
    pub fn smoothness(&self, rule: Smoothness) -> f64 {
        let top = self.gram_top_eigenvalue();
        match rule {
            Smoothness::Gram => top + self.l2,
            Smoothness::Logistic => 0.25 * top + self.l2,
        }
    }

    /// Minimise F by damped Newton from 0 until ‖∇F‖₂ ≤ `tolerance` (or no further decrease is
    /// possible in floating point). F is μ-strongly convex for μ > 0, so the minimiser is unique
    /// and Newton converges quadratically: F* is exact to rounding.
    pub fn minimise(&self, tolerance: f64) -> Optimum {
        let d = self.dim();
        let n = self.len().max(1) as f64;
        let mut x = Array1::<f64>::zeros(d);
        let mut f = self.objective(x.view());
        let mut iterations = 0;
        for _ in 0..200 {
            let g = self.full_gradient(x.view());
            let gnorm = g.dot(&g).sqrt();
            if gnorm <= tolerance {
                break;
            }
            // H = (1/n) Σ p(1−p) u uᵀ + μ I.
            let margins = self.features.dot(&x);
            let mut h = Array2::<f64>::zeros((d, d));
            for (row, m) in self.features.rows().into_iter().zip(margins.iter()) {
                let p = sigmoid(*m);
                let w = p * (1.0 - p) / n;
                for a in 0..d {
                    let wa = w * row[a];
                    for b in 0..=a {
                        h[[a, b]] += wa * row[b];
                    }
                }
            }
            for a in 0..d {
                h[[a, a]] += self.l2;
                for b in 0..a {
                    h[[b, a]] = h[[a, b]];
                }
            }
            let Some(step) = cholesky_solve(&h, &g) else {
                break;
            };
            let mut t = 1.0;
            let mut improved = false;
            for _ in 0..60 {
                let trial = &x - &(&step * t);
                let ft = self.objective(trial.view());
                if ft < f || (ft <= f && t == 1.0) {
                    x = trial;
                    f = ft;
                    improved = true;
                    break;
                }
                t *= 0.5;
            }
            iterations += 1;
            if !improved {
                break;
            }
        }
        let g = self.full_gradient(x.view());
        Optimum {
            objective: self.objective(x.view()),
            gradient_norm: g.dot(&g).sqrt(),
            x,
            iterations,
        }
    }
}

/// Solve H s = g for symmetric positive definite H (Cholesky); `None` when H is not.
fn cholesky_solve(h: &Array2<f64>, g: &Array1<f64>) -> Option<Array1<f64>> {
    let d = g.len();
    let mut l = Array2::<f64>::zeros((d, d));
    for i in 0..d {
        for j in 0..=i {
            let mut s = h[[i, j]];
            for k in 0..j {
                s -= l[[i, k]] * l[[j, k]];
            }
            if i == j {
                if s.is_nan() || s <= 0.0 {
                    return None;
                }
                l[[i, i]] = s.sqrt();
            } else {
                l[[i, j]] = s / l[[j, j]];
            }
        }
    }
    let mut y = Array1::<f64>::zeros(d);
    for i in 0..d {
        let mut s = g[i];
        for k in 0..i {
            s -= l[[i, k]] * y[k];
        }
        y[i] = s / l[[i, i]];
    }
    let mut x = Array1::<f64>::zeros(d);
    for i in (0..d).rev() {
        let mut s = y[i];
        for k in i + 1..d {
            s -= l[[k, i]] * x[k];
        }
        x[i] = s / l[[i, i]];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn toy() -> BinaryLogistic {
        let u = array![[1.0f32, 0.5], [0.2, 0.9], [0.7, 0.1], [0.4, 0.4]];
        BinaryLogistic::new(u.view(), &[1, 0, 1, 0], 0.02)
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let p = toy();
        let x = array![0.3, -1.2];
        let g = p.full_gradient(x.view());
        for j in 0..2 {
            let mut e = Array1::<f64>::zeros(2);
            e[j] = 1e-6;
            let fd = (p.objective((&x + &e).view()) - p.objective((&x - &e).view())) / 2e-6;
            assert!((fd - g[j]).abs() < 1e-8, "{j}: {fd} vs {}", g[j]);
        }
        // The batch form with unit weights, over all rows, plus μx, is the same gradient.
        let rows = [0, 1, 2, 3];
        let c = p.coefficients(x.view(), &rows);
        let mut b = p.weighted_feature_sum(&rows, &c) / 4.0;
        b.scaled_add(0.02, &x);
        assert!((&b - &g).iter().all(|v| v.abs() < 1e-15));
    }

    #[test]
    fn newton_reaches_the_minimiser() {
        let p = toy();
        // Quadratic convergence reaches the floating-point floor of ‖∇F‖ (~1e−13 here).
        let opt = p.minimise(1e-12);
        assert!(opt.gradient_norm <= 1e-11, "{}", opt.gradient_norm);
        assert!(opt.iterations < 30);
        // No nearby point is lower.
        for dx in [array![1e-3, 0.0], array![0.0, -1e-3], array![1e-3, 1e-3]] {
            assert!(p.objective((&opt.x + &dx).view()) > opt.objective);
        }
    }

    #[test]
    fn smoothness_is_the_top_eigenvalue_plus_mu() {
        // U = diag-like rows: UᵀU/n = diag(2, 0.5)/2 → top eigenvalue 1.
        let u = array![
            [std::f32::consts::SQRT_2, 0.0],
            [0.0, std::f32::consts::FRAC_1_SQRT_2]
        ];
        let p = BinaryLogistic::new(u.view(), &[1, 0], 0.5);
        assert!((p.smoothness(Smoothness::Gram) - 1.5).abs() < 1e-6);
        assert!((p.smoothness(Smoothness::Logistic) - 0.75).abs() < 1e-6);
    }
}
