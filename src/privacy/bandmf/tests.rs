use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

/// Dense T×T lower-triangular Toeplitz matrix of coefficients `c` (zero past its length).
fn toeplitz(c: &[f64], t: usize) -> Vec<Vec<f64>> {
    (0..t)
        .map(|i| {
            (0..t)
                .map(|j| {
                    if j <= i && i - j < c.len() {
                        c[i - j]
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect()
}

/// The inverse of a dense lower-triangular matrix, column by column by forward substitution.
#[allow(clippy::needless_range_loop)]
fn lower_inverse(m: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let t = m.len();
    let mut inv = vec![vec![0.0; t]; t];
    for col in 0..t {
        for i in 0..t {
            let mut acc = if i == col { 1.0 } else { 0.0 };
            for k in 0..i {
                acc -= m[i][k] * inv[k][col];
            }
            inv[i][col] = acc / m[i][i];
        }
    }
    inv
}

fn matmul(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let t = a.len();
    (0..t)
        .map(|i| {
            (0..t)
                .map(|j| (0..t).map(|k| a[i][k] * b[k][j]).sum())
                .collect()
        })
        .collect()
}

/// ‖A C⁻¹‖_F² · max_j ‖C_{:,j}‖², from dense matrices (the test's own oracle).
fn dense_loss(c: &[f64], workload: Workload, t: usize) -> f64 {
    let cm = toeplitz(c, t);
    let a = toeplitz(&workload.coefficients(t), t);
    let m = matmul(&a, &lower_inverse(&cm));
    let frob: f64 = m.iter().flatten().map(|v| v * v).sum();
    let max_col = (0..t)
        .map(|j| (0..t).map(|i| cm[i][j] * cm[i][j]).sum::<f64>())
        .fold(0.0, f64::max);
    frob * max_col
}

const WORKLOADS: [Workload; 2] = [Workload::PrefixSum, Workload::Momentum { momentum: 0.9 }];

#[test]
fn loss_matches_dense_matrices() {
    let c = [1.0, 0.4, -0.15, 0.07];
    for w in WORKLOADS {
        for t in [1, 3, 4, 12] {
            let fast = loss_and_gradient(&c, w, t, false).0;
            let dense = dense_loss(&c[..c.len().min(t)], w, t);
            assert!(
                ((fast - dense) / dense).abs() < 1e-12,
                "{w:?} T={t}: {fast} vs {dense}"
            );
        }
    }
}

#[test]
fn square_root_factorization_of_prefix_sums() {
    // c_k = binom(2k, k)/4^k are the coefficients of (1 − x)^(−1/2): C·C = A, so with b = T,
    // A C⁻¹ = C (Fichtenberger, Henzinger, Upadhyay 2023).
    let t = 10;
    let s = series_sqrt(&Workload::PrefixSum.coefficients(t), t);
    let mut binom = 1.0;
    for (k, v) in s.iter().enumerate() {
        if k > 0 {
            binom *= (2 * k - 1) as f64 / (2 * k) as f64;
        }
        assert!((v - binom).abs() < 1e-15, "k={k}: {v} vs {binom}");
    }
    let cm = toeplitz(&s, t);
    let a = toeplitz(&Workload::PrefixSum.coefficients(t), t);
    let sq = matmul(&cm, &cm);
    for i in 0..t {
        for j in 0..t {
            assert!((sq[i][j] - a[i][j]).abs() < 1e-14);
        }
    }
}

#[test]
fn gradient_matches_finite_differences() {
    let c = [1.0, 0.45, 0.2, -0.05, 0.1];
    for w in WORKLOADS {
        let t = 40;
        let (_, g) = loss_and_gradient(&c, w, t, true);
        assert_eq!(g.len(), c.len() - 1);
        for j in 1..c.len() {
            let h = 1e-6;
            let mut up = c;
            let mut down = c;
            up[j] += h;
            down[j] -= h;
            let fd = (loss_and_gradient(&up, w, t, false).0
                - loss_and_gradient(&down, w, t, false).0)
                / (2.0 * h);
            let rel = (g[j - 1] - fd).abs() / fd.abs().max(1.0);
            assert!(
                rel < 1e-6,
                "{w:?} c_{j}: analytic {} vs finite differences {fd}",
                g[j - 1]
            );
        }
    }
}

#[test]
fn optimised_strategy_beats_its_start_and_dp_sgd() {
    for w in WORKLOADS {
        let steps = 256;
        let mut previous = 1.0;
        for bands in [1, 2, 4, 16] {
            let o = optimize(steps, bands, w).unwrap();
            assert_eq!(o.strategy.bands(), bands);
            assert!((o.strategy.max_column_norm() - 1.0).abs() < 1e-12);
            assert!(o.loss <= o.initial_loss * (1.0 + 1e-12), "{w:?} b={bands}");
            let ratio = o.strategy.error_ratio(w, steps as usize);
            // More bands never hurt (the b-band family contains the smaller ones).
            assert!(
                ratio <= previous * (1.0 + 1e-9),
                "{w:?} b={bands}: {ratio} after {previous}"
            );
            if bands > 1 {
                assert!(ratio < 1.0, "{w:?} b={bands}: ratio {ratio}");
            }
            previous = ratio;
            // Deterministic.
            assert_eq!(optimize(steps, bands, w).unwrap(), o);
        }
    }
}

#[test]
fn one_band_is_the_identity_and_bands_are_capped_at_the_steps() {
    let o = optimize(100, 1, Workload::PrefixSum).unwrap();
    assert_eq!(o.strategy, BandedStrategy::identity());
    assert_eq!(o.strategy.error_ratio(Workload::PrefixSum, 100), 1.0);
    assert_eq!(
        optimize(3, 8, Workload::PrefixSum)
            .unwrap()
            .strategy
            .bands(),
        3
    );
    assert!(optimize(10, 0, Workload::PrefixSum).is_err());
    assert!(optimize(0, 2, Workload::PrefixSum).is_err());
    assert!(optimize(10, 2, Workload::Momentum { momentum: 1.0 }).is_err());
}

#[test]
fn correlated_noise_solves_the_banded_system() {
    let strategy = BandedStrategy::normalised(&[1.0, 0.5, 0.25]).unwrap();
    let c = strategy.coefficients().to_vec();
    let mut state = CorrelatedNoise::new(&strategy);
    let p = 5;
    let mut rng = ChaCha12Rng::seed_from_u64(7);
    let (mut zs, mut ws) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        let mut z = vec![0.0; p];
        rng.add_scaled_normals(&mut z, 1.0);
        let mut w = z.clone();
        state.correlate(&mut w);
        zs.push(z);
        ws.push(w);
        assert!(state.history().len() <= 2);
    }
    // C w = z, row by row.
    for t in 0..7 {
        for i in 0..p {
            let cw: f64 = (0..3)
                .filter(|&j| j <= t)
                .map(|j| c[j] * ws[t - j][i])
                .sum();
            assert!((cw - zs[t][i]).abs() < 1e-12, "t={t} i={i}");
        }
    }
    assert_eq!(state.history()[0], ws[6]);
    assert_eq!(state.history()[1], ws[5]);
}

#[test]
fn one_band_passes_the_noise_through_bit_for_bit() {
    let mut plain = ChaCha12Rng::seed_from_u64(3);
    let mut wrapped = ChaCha12Rng::seed_from_u64(3);
    let mut state = CorrelatedNoise::new(&BandedStrategy::identity());
    for _ in 0..3 {
        let base: Vec<f64> = (0..40_000).map(|i| (i as f64).sin()).collect();
        let mut a = base.clone();
        let mut b = base;
        plain.add_scaled_normals(&mut a, 0.37);
        Correlated {
            inner: &mut wrapped,
            noise: &mut state,
        }
        .add_scaled_normals(&mut b, 0.37);
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
    assert!(state.history().is_empty());
}

#[test]
fn correlation_does_not_depend_on_the_thread_count() {
    let strategy = optimize(64, 6, Workload::PrefixSum).unwrap().strategy;
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut rng = ChaCha12Rng::seed_from_u64(11);
            let mut state = CorrelatedNoise::new(&strategy);
            let mut out = Vec::new();
            for _ in 0..8 {
                let mut v = vec![0.0; 3 * BLOCK + 17];
                Correlated {
                    inner: &mut rng,
                    noise: &mut state,
                }
                .add_scaled_normals(&mut v, 1.5);
                out.push(v);
            }
            out
        })
    };
    assert_eq!(run(1), run(3));
}

#[test]
fn restore_checks_the_history_shape() {
    let strategy = BandedStrategy::normalised(&[1.0, 0.5, 0.25]).unwrap();
    let mut state = CorrelatedNoise::new(&strategy);
    assert!(state.restore(vec![vec![0.0; 4]; 2], 4).is_ok());
    assert!(state.restore(vec![vec![0.0; 4]; 3], 4).is_err());
    assert!(state.restore(vec![vec![0.0; 3]], 4).is_err());
    assert_eq!(CorrelatedNoise::history_bytes(3, 1000), 16_000);
    assert_eq!(CorrelatedNoise::history_bytes(1, 1000), 0);
}
