//! Eigenvalues of small symmetric matrices in f64, by cyclic Jacobi rotations: the one solver
//! for the training Hessian of `train::influence` (d ≤ 512) and the 2×2 / 3×3 matrices whose
//! definiteness `optim::certificate::lmi` re-checks. Depends on no room.

use ndarray::Array2;

/// The eigenvalues of a symmetric matrix, ascending: cyclic Jacobi rotations (Golub & Van Loan,
/// "Matrix Computations", §8.5) until the off-diagonal mass is below 1e−30 of the whole.
/// Accurate to a few ulps of the largest eigenvalue; O(d³) per sweep, a handful of sweeps.
pub fn symmetric_eigenvalues(mut a: Array2<f64>) -> Vec<f64> {
    let n = a.nrows();
    debug_assert_eq!(n, a.ncols(), "a square matrix");
    let total: f64 = a.iter().map(|v| v * v).sum();
    for _sweep in 0..64 {
        let mut off = 0.0;
        for p in 0..n {
            for q in p + 1..n {
                off += 2.0 * a[[p, q]] * a[[p, q]];
            }
        }
        if off <= 1e-30 * total || off == 0.0 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[[p, q]];
                if apq == 0.0 {
                    continue;
                }
                // The rotation that zeroes a_pq: tan φ = t, the smaller root of
                // t² + 2θt − 1 = 0 with θ = (a_qq − a_pp)/(2 a_pq).
                let theta = (a[[q, q]] - a[[p, p]]) / (2.0 * apq);
                let t = if theta.abs() > 1e150 {
                    0.5 / theta
                } else {
                    theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt())
                };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                a[[p, p]] -= t * apq;
                a[[q, q]] += t * apq;
                a[[p, q]] = 0.0;
                a[[q, p]] = 0.0;
                for k in 0..n {
                    if k == p || k == q {
                        continue;
                    }
                    let (akp, akq) = (a[[k, p]], a[[k, q]]);
                    let new_kp = c * akp - s * akq;
                    let new_kq = s * akp + c * akq;
                    a[[k, p]] = new_kp;
                    a[[p, k]] = new_kp;
                    a[[k, q]] = new_kq;
                    a[[q, k]] = new_kq;
                }
            }
        }
    }
    let mut out: Vec<f64> = a.diag().to_vec();
    out.sort_by(f64::total_cmp);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// Q D Qᵀ with Q a product of Householder reflections (I − 2vvᵀ/vᵀv).
    fn rotated(d: &[f64]) -> Array2<f64> {
        let n = d.len();
        let mut a = Array2::from_diag(&ndarray::Array1::from(d.to_vec()));
        for seed in 0..3 {
            let v: Vec<f64> = (0..n)
                .map(|i| ((i * 7 + seed * 13 + 1) as f64).sin())
                .collect();
            let vv: f64 = v.iter().map(|x| x * x).sum();
            let mut q = Array2::<f64>::eye(n);
            for i in 0..n {
                for j in 0..n {
                    q[[i, j]] -= 2.0 * v[i] * v[j] / vv;
                }
            }
            a = q.dot(&a).dot(&q.t());
        }
        a
    }

    #[test]
    fn jacobi_recovers_known_spectra() {
        let d = [-3.0, 0.0, 1e-6, 0.5, 2.0, 2.0, 7.25, 40.0];
        let got = symmetric_eigenvalues(rotated(&d));
        for (g, e) in got.iter().zip(d) {
            assert!((g - e).abs() < 1e-12 * 40.0, "{got:?}");
        }
        // 2 × 2 closed form: [[a, b], [b, c]] → (a + c)/2 ± √(((a − c)/2)² + b²).
        let got = symmetric_eigenvalues(array![[2.0, 1.0], [1.0, 3.0]]);
        let r = (0.25f64 + 1.0).sqrt();
        assert!((got[0] - (2.5 - r)).abs() < 1e-15 && (got[1] - (2.5 + r)).abs() < 1e-15);
        // Already diagonal: no rotation.
        assert_eq!(
            symmetric_eigenvalues(array![[3.0, 0.0], [0.0, -1.0]]),
            vec![-1.0, 3.0]
        );
    }
}
