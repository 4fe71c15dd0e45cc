//! Eigenvalues of small symmetric matrices in f64, by cyclic Jacobi rotations: the one solver
//! for the training Hessian of `train::influence` (d ≤ 512) and the 2×2 / 3×3 matrices whose
//! definiteness `optim::certificate::lmi` re-checks; and the algebraically largest eigenpairs of
//! a symmetric, possibly indefinite matrix of a few hundred rows by Householder
//! tridiagonalisation and the implicit symmetric QR algorithm ([`top_eigenpairs`]: the noisy
//! second-moment matrix of `data.pca_noise_multiplier`, d = 784 for MNIST). Depends on no room.

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

/// The `k` algebraically largest eigenvalues (descending) of the symmetric matrix `a` (`d × d`,
/// row-major, only its lower triangle read) and their unit eigenvectors (`k` rows of length d).
///
/// Golub & Van Loan, "Matrix Computations" (4th ed.): Householder tridiagonalisation
/// `A = Q T Qᵀ` (Alg. 8.3.1), then the implicit symmetric QR algorithm with Wilkinson shifts on T
/// (Alg. 8.3.2 and 8.3.3: a chase of the bulge by Givens rotations, deflating an off-diagonal
/// entry once it is below machine precision relative to its two diagonal neighbours), the
/// rotations accumulated so that T = Pᵀ Λ P; eigenvector i of A is Q Pᵢᵀ. O(d³) flops with
/// contiguous row updates, and unlike subspace iteration it ranks
/// by value, not magnitude, so a noisy, indefinite matrix is handled. Ties keep the smaller
/// index first, so the result is a function of `a` alone; each vector's largest coordinate is
/// made positive.
pub fn top_eigenpairs(a: &[f64], d: usize, k: usize) -> (Vec<f64>, Vec<Vec<f64>>) {
    assert_eq!(a.len(), d * d, "a d × d matrix");
    let k = k.min(d);
    if d == 0 || k == 0 {
        return (Vec::new(), Vec::new());
    }
    // Symmetrise from the lower triangle into a working copy.
    let mut w = vec![0.0f64; d * d];
    for i in 0..d {
        for j in 0..=i {
            w[i * d + j] = a[i * d + j];
            w[j * d + i] = a[i * d + j];
        }
    }
    let (diag, off, reflectors) = tridiagonalize(&mut w, d);
    let (values, p) = tridiagonal_qr(diag, off);
    let mut order: Vec<usize> = (0..d).collect();
    order.sort_by(|&i, &j| values[j].total_cmp(&values[i]).then(i.cmp(&j)));
    let mut vectors = Vec::with_capacity(k);
    let mut top = Vec::with_capacity(k);
    for &i in order.iter().take(k) {
        let mut u = p[i * d..(i + 1) * d].to_vec();
        // Q = H_0 H_1 … H_{d−3}: apply the last reflector first.
        for (j, (v, beta)) in reflectors.iter().enumerate().rev() {
            let tail = &mut u[j + 1..];
            let dot: f64 = v.iter().zip(tail.iter()).map(|(x, y)| x * y).sum();
            let f = beta * dot;
            tail.iter_mut().zip(v).for_each(|(t, x)| *t -= f * x);
        }
        let norm = u.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-300);
        let big = u
            .iter()
            .fold(0.0f64, |acc, &v| if v.abs() > acc.abs() { v } else { acc });
        let sign = if big < 0.0 { -1.0 } else { 1.0 };
        u.iter_mut().for_each(|x| *x *= sign / norm);
        top.push(values[i]);
        vectors.push(u);
    }
    (top, vectors)
}

/// Householder reflector (vector of length m, β) per column: `w` becomes `Hᵀ w H`, tridiagonal.
type Reflectors = Vec<(Vec<f64>, f64)>;

/// Householder tridiagonalisation of the symmetric `w` (`d × d`, row-major, overwritten):
/// `A = Q T Qᵀ` with `Q = H_0 … H_{d−3}`, `H_j = I − β v vᵀ` acting on coordinates j+1.. (Golub &
/// Van Loan Alg. 8.3.1). Returns T's diagonal, its off-diagonal and the reflectors.
fn tridiagonalize(w: &mut [f64], d: usize) -> (Vec<f64>, Vec<f64>, Reflectors) {
    let mut off = vec![0.0f64; d.saturating_sub(1)];
    let mut reflectors = Vec::with_capacity(d.saturating_sub(2));
    for j in 0..d.saturating_sub(2) {
        let m = d - j - 1;
        // x = column j below the diagonal (= row j right of it).
        let mut v: Vec<f64> = w[j * d + j + 1..j * d + d].to_vec();
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let tail: f64 = v[1..].iter().map(|x| x * x).sum();
        if tail == 0.0 {
            // Already reduced in this column: H = I.
            off[j] = v[0];
            reflectors.push((vec![0.0; m], 0.0));
            continue;
        }
        let alpha = if v[0] > 0.0 { -norm } else { norm };
        v[0] -= alpha;
        let vv: f64 = v.iter().map(|x| x * x).sum();
        let beta = 2.0 / vv;
        // p = β B v on the trailing block B = w[j+1.., j+1..].
        let base = j + 1;
        let mut p = vec![0.0f64; m];
        for (r, pr) in p.iter_mut().enumerate() {
            let row = &w[(base + r) * d + base..(base + r) * d + d];
            *pr = beta * row.iter().zip(&v).map(|(x, y)| x * y).sum::<f64>();
        }
        let kk = 0.5 * beta * p.iter().zip(&v).map(|(x, y)| x * y).sum::<f64>();
        let q: Vec<f64> = p.iter().zip(&v).map(|(x, y)| x - kk * y).collect();
        // B ← B − v qᵀ − q vᵀ.
        for r in 0..m {
            let (vr, qr) = (v[r], q[r]);
            let row = &mut w[(base + r) * d + base..(base + r) * d + d];
            for ((x, vc), qc) in row.iter_mut().zip(&v).zip(&q) {
                *x -= vr * qc + qr * vc;
            }
        }
        off[j] = alpha;
        reflectors.push((v, beta));
    }
    if d >= 2 {
        off[d - 2] = w[(d - 1) * d + d - 2];
    }
    let diag = (0..d).map(|i| w[i * d + i]).collect();
    (diag, off, reflectors)
}

/// The implicit symmetric QR algorithm with Wilkinson shifts on the tridiagonal matrix with
/// diagonal `a` and off-diagonal `e` (Golub & Van Loan Alg. 8.3.2, 8.3.3). Returns the
/// eigenvalues (in place of the diagonal, unsorted) and P (row-major `d × d`) whose row i is the
/// unit eigenvector of eigenvalue i.
fn tridiagonal_qr(mut a: Vec<f64>, mut e: Vec<f64>) -> (Vec<f64>, Vec<f64>) {
    let d = a.len();
    let mut p = vec![0.0f64; d * d];
    (0..d).for_each(|i| p[i * d + i] = 1.0);
    let small = |e: f64, x: f64, y: f64| e.abs() <= f64::EPSILON * (x.abs() + y.abs());
    let mut h = d.saturating_sub(1);
    let mut sweeps = 0usize;
    while h > 0 && sweeps < 64 * d {
        if small(e[h - 1], a[h - 1], a[h]) {
            e[h - 1] = 0.0;
            h -= 1;
            continue;
        }
        // The unreduced block [l, h].
        let mut l = h - 1;
        while l > 0 && !small(e[l - 1], a[l - 1], a[l]) {
            l -= 1;
        }
        if l > 0 {
            e[l - 1] = 0.0;
        }
        // Wilkinson shift: the eigenvalue of the trailing 2 × 2 closer to a_h.
        let dd = 0.5 * (a[h - 1] - a[h]);
        let b = e[h - 1];
        let sign = if dd >= 0.0 { 1.0 } else { -1.0 };
        let mu = a[h] - b * b / (dd + sign * dd.hypot(b));
        let mut x = a[l] - mu;
        let mut z = e[l];
        for i in l..h {
            // R = [[c, s], [−s, c]] on coordinates (i, i+1) with R (x, z)ᵀ = (r, 0)ᵀ.
            let r = x.hypot(z);
            let (c, s) = if r == 0.0 { (1.0, 0.0) } else { (x / r, z / r) };
            if i > l {
                e[i - 1] = r;
            }
            let (ai, bi, di) = (a[i], e[i], a[i + 1]);
            a[i] = c * c * ai + 2.0 * c * s * bi + s * s * di;
            a[i + 1] = s * s * ai - 2.0 * c * s * bi + c * c * di;
            e[i] = c * s * (di - ai) + (c * c - s * s) * bi;
            if i + 1 < h {
                z = s * e[i + 1];
                e[i + 1] *= c;
            }
            x = e[i];
            // P ← R P (rows i and i+1).
            let (top, bottom) = p.split_at_mut((i + 1) * d);
            let row_i = &mut top[i * d..];
            let row_j = &mut bottom[..d];
            for (u, v) in row_i.iter_mut().zip(row_j.iter_mut()) {
                let (pu, pv) = (*u, *v);
                *u = c * pu + s * pv;
                *v = c * pv - s * pu;
            }
        }
        sweeps += 1;
    }
    (a, p)
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

    /// The top eigenpairs of Q D Qᵀ with a known, indefinite spectrum (negative eigenvalues of
    /// larger magnitude than the top ones): values to 1e−12, and A v = λ v for each vector.
    #[test]
    fn top_eigenpairs_rank_by_value_on_indefinite_matrices() {
        let spectrum = [
            -50.0, -9.0, 0.0, 1e-6, 0.5, 2.0, 2.0, 7.25, 40.0, -40.0, 3.0,
        ];
        let a = rotated(&spectrum);
        let d = spectrum.len();
        let flat: Vec<f64> = a.iter().copied().collect();
        let (values, vectors) = top_eigenpairs(&flat, d, 4);
        let expected = [40.0, 7.25, 3.0, 2.0];
        for (g, e) in values.iter().zip(expected) {
            assert!((g - e).abs() < 1e-12 * 50.0, "{values:?}");
        }
        for (lambda, v) in values.iter().zip(&vectors) {
            let av = a.dot(&ndarray::Array1::from(v.clone()));
            let norm: f64 = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!((norm - 1.0).abs() < 1e-12);
            for (x, y) in av.iter().zip(v) {
                assert!((x - lambda * y).abs() < 1e-10, "A v ≠ λ v for λ = {lambda}");
            }
        }
        // The whole spectrum agrees with Jacobi's.
        let (all, _) = top_eigenpairs(&flat, d, d);
        let mut jacobi = symmetric_eigenvalues(a.clone());
        jacobi.reverse();
        for (x, y) in all.iter().zip(&jacobi) {
            assert!((x - y).abs() < 1e-11, "{all:?} vs {jacobi:?}");
        }
        // Degenerate sizes and an already diagonal matrix.
        assert_eq!(top_eigenpairs(&[5.0], 1, 1), (vec![5.0], vec![vec![1.0]]));
        let (v, u) = top_eigenpairs(&[1.0, 0.0, 0.0, 3.0], 2, 1);
        assert_eq!((v, u), (vec![3.0], vec![vec![0.0, 1.0]]));
        let (v, _) = top_eigenpairs(&[0.0; 9], 3, 2);
        assert_eq!(v, vec![0.0, 0.0]);
    }

    /// A random symmetric 120 × 120 matrix: each returned pair satisfies A v = λ v and the values
    /// are the largest of Jacobi's spectrum.
    #[test]
    fn top_eigenpairs_of_a_random_symmetric_matrix() {
        let d = 120;
        let mut a = Array2::<f64>::zeros((d, d));
        for i in 0..d {
            for j in 0..=i {
                let x = ((i * 131 + j * 71 + 7) as f64).sin() * 3.0;
                a[[i, j]] = x;
                a[[j, i]] = x;
            }
        }
        let flat: Vec<f64> = a.iter().copied().collect();
        let (values, vectors) = top_eigenpairs(&flat, d, 10);
        let mut jacobi = symmetric_eigenvalues(a.clone());
        jacobi.reverse();
        for (x, y) in values.iter().zip(&jacobi) {
            assert!((x - y).abs() < 1e-9, "{x} vs {y}");
        }
        for (lambda, v) in values.iter().zip(&vectors) {
            let av = a.dot(&ndarray::Array1::from(v.clone()));
            for (x, y) in av.iter().zip(v) {
                assert!((x - lambda * y).abs() < 1e-9);
            }
        }
    }
}
