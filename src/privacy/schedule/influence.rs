//! The analytic noise influence of gradient descent on a quadratic, and the schedules made from it
//! (Hong, Wang, Zhou, "On dynamic noise influence in differential private learning": the `dyn`
//! schedule of its experiments, Lemma 4.1 applied to the influence of the squared loss, and
//! `exp`, an exponential decay fitted to it; docs/methods/dynamic_noise.md §1.2(g)).
//!
//! Part of `privacy::schedule`: pure functions of numbers fixed before training (the Hessian's
//! eigenvalues, the learning rate, the planned steps). Where the eigenvalues come from, and what
//! that costs in privacy, is the training room's business (`train::influence`).
//!
//! # The influence
//! GD on F(θ) = ½ (θ − θ*)ᵀ H (θ − θ*) + c with step η, noise e_t ~ N(0, s² I) added to the
//! gradient at the 0-based step t of T: the noise reaches θ_T as −η (I − ηH)^{T−1−t} e_t, so its
//! expected share of the final excess loss is ½ η² s² tr(H (I − ηH)^{2(T−1−t)}) = ½ η² s² q_t with
//!
//! q_t = Σ_j λ_j (1 − ηλ_j)^{2(T−1−t)}        (λ_j the eigenvalues of H)
//!
//! (the paper's 1-based t has T − t). The influence grows with t when every |1 − ηλ_j| < 1, i.e.
//! 0 < ηλ_j < 2; at ηλ_max ≥ 2 gradient descent diverges on the quadratic and q_t does not describe
//! a run (refused). Lemma 4.1 then minimises Σ_t q_t σ_t² at a fixed Σ_t σ_t^{−2}:
//! σ_t² ∝ 1/√q_t, so the shape is s_t = (q_{T−1}/q_t)^{1/4} (s_{T−1} = 1), computed in logarithms.

/// What the analytic influence cannot describe.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InfluenceError {
    /// η·λ_max ≥ 2: gradient descent diverges on the quadratic.
    #[error(
        "learning_rate × the Hessian's largest eigenvalue is {product:.4} ≥ 2: gradient descent diverges on this quadratic and its analytic influence does not describe the run (lower train.learning_rate below {limit:.4e}, or scale the data down with data.max_norm)"
    )]
    Diverges { product: f64, limit: f64 },
    /// No eigenvalue is positive (a zero Hessian: the loss is flat).
    #[error(
        "the Hessian has no positive eigenvalue: the loss is flat and no step has an influence"
    )]
    Flat,
    /// A value is not finite.
    #[error("the influence is not finite at step {step}")]
    NotFinite { step: u64 },
}

/// ln q_t for t = 0 … steps − 1 (module documentation), from the eigenvalues of H (those ≤ 0, from
/// rounding, have no influence and are skipped) and the learning rate η > 0.
pub fn ln_quadratic_influence(
    eigenvalues: &[f64],
    learning_rate: f64,
    steps: u64,
) -> Result<Vec<f64>, InfluenceError> {
    let positive: Vec<f64> = eigenvalues.iter().copied().filter(|&l| l > 0.0).collect();
    let Some(max) = positive.iter().copied().reduce(f64::max) else {
        return Err(InfluenceError::Flat);
    };
    let product = learning_rate * max;
    if product >= 2.0 || product.is_nan() {
        return Err(InfluenceError::Diverges {
            product,
            limit: 2.0 / max,
        });
    }
    // ln λ_j and 2 ln|1 − ηλ_j| (−∞ where ηλ_j = 1: that direction is solved in one step).
    let ln_l: Vec<f64> = positive.iter().map(|l| l.ln()).collect();
    let ln_c: Vec<f64> = positive
        .iter()
        .map(|l| 2.0 * (1.0 - learning_rate * l).abs().ln())
        .collect();
    let mut out = Vec::with_capacity(steps as usize);
    let mut terms = vec![0.0; positive.len()];
    for t in 0..steps {
        let m = (steps - 1 - t) as f64;
        for ((term, &a), &c) in terms.iter_mut().zip(&ln_l).zip(&ln_c) {
            // (1 − ηλ)^0 = 1 even where ηλ = 1.
            *term = if m == 0.0 { a } else { a + m * c };
        }
        let v = log_sum_exp(&terms);
        if !v.is_finite() {
            return Err(InfluenceError::NotFinite { step: t });
        }
        out.push(v);
    }
    Ok(out)
}

/// ln Σ_i e^{x_i} without overflow (−∞ terms contribute nothing).
fn log_sum_exp(x: &[f64]) -> f64 {
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + x.iter().map(|&v| (v - m).exp()).sum::<f64>().ln()
}

/// The influence-optimal shape of Lemma 4.1, s_t = (q_{T−1}/q_t)^{1/4}, from ln q_t.
pub fn influence_shape(ln_q: &[f64]) -> Vec<f64> {
    let Some(&last) = ln_q.last() else {
        return Vec::new();
    };
    ln_q.iter().map(|&l| ((last - l) / 4.0).exp()).collect()
}

/// The exponential decay e^{−k t} least-squares fitted to `shape` in logarithms (ln s_t ≈ a − k t
/// over t = 0 … T − 1; the paper's `exp` baseline fits σ_0 e^{−kt} to its `dyn` schedule, and the
/// scale a is re-calibrated anyway). Returns k and the fitted shape normalised to s_0 = 1.
pub fn fit_exponential(shape: &[f64]) -> (f64, Vec<f64>) {
    let n = shape.len();
    if n < 2 {
        return (0.0, vec![1.0; n]);
    }
    let nf = n as f64;
    let mean_t = (nf - 1.0) / 2.0;
    let ys: Vec<f64> = shape.iter().map(|s| s.ln()).collect();
    let mean_y = ys.iter().sum::<f64>() / nf;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (t, y) in ys.iter().enumerate() {
        let dt = t as f64 - mean_t;
        sxy += dt * (y - mean_y);
        sxx += dt * dt;
    }
    let decay = -sxy / sxx;
    let fitted = (0..n).map(|t| (-decay * t as f64).exp()).collect();
    (decay, fitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// H = Q diag(d) Qᵀ with Q a Householder reflection (row-major d × d).
    fn rotated(d: &[f64]) -> Vec<Vec<f64>> {
        let n = d.len();
        let v: Vec<f64> = (0..n).map(|i| (i as f64 * 1.7 + 0.3).cos()).collect();
        let vv: f64 = v.iter().map(|x| x * x).sum();
        let q = |i: usize, j: usize| f64::from(u8::from(i == j)) - 2.0 * v[i] * v[j] / vv;
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| (0..n).map(|k| q(i, k) * d[k] * q(j, k)).sum())
                    .collect()
            })
            .collect()
    }

    fn matmul(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let n = a.len();
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| (0..n).map(|k| a[i][k] * b[k][j]).sum())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn influence_is_the_trace_of_the_noise_propagated_to_the_end() {
        // q_t = tr(H (I − ηH)^{2(T−1−t)}), by matrix powers of H itself (no eigenvalues).
        let d = [0.05, 0.3, 1.0, 4.0, 12.5];
        let (eta, steps) = (0.1, 12u64);
        let h = rotated(&d);
        let n = d.len();
        let a: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| f64::from(u8::from(i == j)) - eta * h[i][j])
                    .collect()
            })
            .collect();
        let a2 = matmul(&a, &a);
        let ln_q = ln_quadratic_influence(&d, eta, steps).unwrap();
        // Walk t from the last step back: the power grows by (I − ηH)² per step.
        let mut power: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
            .collect();
        for t in (0..steps as usize).rev() {
            let hp = matmul(&h, &power);
            let trace: f64 = (0..n).map(|i| hp[i][i]).sum();
            assert!(
                (ln_q[t] - trace.ln()).abs() < 1e-12,
                "t {t}: {} vs {}",
                ln_q[t].exp(),
                trace
            );
            power = matmul(&power, &a2);
        }
    }

    #[test]
    fn lemma_4_1_shape_beats_uniform_and_perturbed_schedules() {
        // At a fixed R = Σ σ_t^{−2}, σ_t = c·s_t minimises Σ q_t σ_t² (Lemma 4.1).
        let d = [0.02, 0.4, 1.1, 3.0, 9.0];
        let (eta, steps) = (0.15, 40u64);
        let q: Vec<f64> = ln_quadratic_influence(&d, eta, steps)
            .unwrap()
            .iter()
            .map(|l| l.exp())
            .collect();
        let cost = |shape: &[f64]| {
            // Calibrate to R = 1: c² = Σ s_t^{−2}.
            let c2: f64 = shape.iter().map(|s| s.powi(-2)).sum();
            shape
                .iter()
                .zip(&q)
                .map(|(s, q)| q * c2 * s * s)
                .sum::<f64>()
        };
        let best = influence_shape(&q.iter().map(|v| v.ln()).collect::<Vec<_>>());
        let optimum = cost(&best);
        // The closed form (Σ √q_t)² of the paper.
        let closed: f64 = q.iter().map(|v| v.sqrt()).sum::<f64>().powi(2);
        assert!((optimum - closed).abs() < 1e-10 * closed);
        assert!(optimum < cost(&vec![1.0; steps as usize]));
        for k in 0..steps as usize {
            let mut other = best.clone();
            other[k] *= 1.05;
            assert!(cost(&other) > optimum);
        }
        // The shape falls: early noise is damped by the later steps.
        assert!(best.windows(2).all(|w| w[1] <= w[0]));
        assert_eq!(*best.last().unwrap(), 1.0);
    }

    #[test]
    fn one_eigenvalue_gives_an_exponential_that_the_fit_recovers() {
        // q_t = λ c^{2(T−1−t)} with c = |1 − ηλ|, so s_t ∝ c^{t/2}: k = −ln(c)/2.
        let (lambda, eta, steps) = (3.0, 0.2, 25u64);
        let shape = influence_shape(&ln_quadratic_influence(&[lambda], eta, steps).unwrap());
        let (k, fitted) = fit_exponential(&shape);
        let want = -(1.0f64 - eta * lambda).abs().ln() / 2.0;
        assert!((k - want).abs() < 1e-12, "{k} vs {want}");
        for (s, f) in shape.iter().zip(&fitted) {
            assert!((s / shape[0] - f).abs() < 1e-12);
        }
    }

    #[test]
    fn divergent_and_flat_problems_are_refused() {
        match ln_quadratic_influence(&[0.5, 10.0], 0.25, 5) {
            Err(InfluenceError::Diverges { product, limit }) => {
                assert_eq!(product, 2.5);
                assert_eq!(limit, 0.2);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            ln_quadratic_influence(&[0.0, -1e-18], 0.1, 5),
            Err(InfluenceError::Flat)
        );
        // ηλ = 1 solves that direction in one step: only the last step feels it.
        let ln_q = ln_quadratic_influence(&[1.0, 0.5], 1.0, 3).unwrap();
        assert!((ln_q[2] - 1.5f64.ln()).abs() < 1e-15);
        assert!((ln_q[1] - (0.5f64 * 0.25).ln()).abs() < 1e-15);
    }
}
