use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;
use rand_distr::StandardNormal;

use super::lmi::{LmiProblem, min_eigenvalue};
use super::*;

/// ρ(T) = lim ‖T^k‖^{1/k} (Gelfand), with renormalisation: independent of the root formula.
fn gelfand_radius(alpha: f64, beta: f64, lambda: f64) -> f64 {
    let m = [[1.0 + beta - alpha * lambda, -beta], [1.0, 0.0]];
    let mut p = [[1.0, 0.0], [0.0, 1.0]];
    let mut log_scale = 0.0;
    let k = 4000;
    for _ in 0..k {
        p = mul2x2(m, p);
        let n = norm2x2(p);
        if n == 0.0 {
            return 0.0;
        }
        log_scale += n.ln();
        p = p.map(|r| r.map(|v| v / n));
    }
    (log_scale / k as f64).exp()
}

#[test]
fn heavy_ball_rate_is_the_spectral_radius_of_its_iteration_matrix() {
    let mut rng = ChaCha12Rng::seed_from_u64(7);
    for _ in 0..200 {
        let alpha: f64 = rng.random_range(0.01..1.9);
        let beta: f64 = rng.random_range(0.0..0.95);
        let lambda: f64 = rng.random_range(0.05..1.0);
        let r = eigen_rate(alpha, beta, lambda, Polynomial::HeavyBall);
        let g = gelfand_radius(alpha, beta, lambda);
        // ‖T^k‖^{1/k} overshoots ρ by at most (Ck)^{1/k} − 1 ≈ 0.3% at k = 4000.
        assert!(
            g >= r * (1.0 - 1e-9) && g <= r * 1.004 + 1e-12,
            "α {alpha} β {beta} λ {lambda}: {r} vs {g}"
        );
    }
    // The printed polynomial is not heavy ball's: at α = 1/L its roots for λ = L vanish, heavy
    // ball's have modulus √β.
    let (a, b) = (1.0, 0.25);
    assert_eq!(eigen_rate(a, b, 1.0, Polynomial::Eq26AsPrinted), 0.0);
    assert!((eigen_rate(a, b, 1.0, Polynomial::HeavyBall) - 0.5).abs() < 1e-15);
}

#[test]
fn quadratic_rate_is_the_maximum_over_the_interval() {
    for &(a, b) in &[
        (0.1, 0.0),
        (0.5, 0.3),
        (1.0, 0.1716),
        (1.0, 0.7),
        (0.3, 0.95),
        (1.5, 0.2),
    ] {
        for poly in [Polynomial::HeavyBall, Polynomial::Eq26AsPrinted] {
            let ends = quadratic_rate(a, b, 0.5, 1.0, poly);
            let inner = (0..=1000)
                .map(|k| eigen_rate(a, b, 0.5 + 0.5 * k as f64 / 1000.0, poly))
                .fold(0.0, f64::max);
            assert!(
                (ends - inner).abs() < 1e-12,
                "α {a} β {b} {poly:?}: {ends} vs {inner}"
            );
        }
    }
}

#[test]
fn rate_optimal_momentum_minimises_the_rate() {
    for &(alpha, mu, l) in &[
        (0.1, 0.5, 1.0),
        (0.5, 0.5, 1.0),
        (1.0, 0.5, 1.0),
        (0.2, 0.02, 5.0),
    ] {
        for poly in [Polynomial::HeavyBall, Polynomial::Eq26AsPrinted] {
            let (beta, rho) = rate_optimal_momentum(alpha, mu, poly);
            // At a double root the radius is √(discriminant)-sensitive: 1e-16 rounding gives 1e-8.
            assert!((quadratic_rate(alpha, beta, mu, l, poly) - rho).abs() < 1e-7);
            let grid_min = (0..100_000)
                .map(|k| quadratic_rate(alpha, k as f64 / 100_000.0, mu, l, poly))
                .fold(f64::INFINITY, f64::min);
            assert!(
                grid_min >= rho - 1e-9 && grid_min <= rho + 1e-3,
                "{poly:?} α {alpha}: {grid_min} vs {rho}"
            );
        }
    }
}

#[test]
fn lmi_certifies_gradient_descent_at_its_exact_rate() {
    for &(mu, l) in &[(0.5f64, 1.0f64), (0.1, 2.0), (0.02, 5.1156)] {
        for &al in &[0.2f64, 0.5, 1.0, 1.5, 1.9] {
            let alpha = al / l;
            let exact = (1.0 - alpha * mu).abs().max((1.0 - alpha * l).abs());
            let c = LmiProblem {
                alpha,
                beta: 0.0,
                mu,
                l,
            }
            .certified_rate(1e-8)
            .expect("GD with α < 2/L");
            assert!(
                (c.rho - exact).abs() < 1e-6,
                "μ {mu} L {l} αL {al}: {} vs {exact}",
                c.rho
            );
        }
        // Divergent step: nothing is certified.
        assert!(
            LmiProblem {
                alpha: 2.05 / l,
                beta: 0.0,
                mu,
                l
            }
            .certified_rate(1e-6)
            .is_none()
        );
    }
}

#[test]
fn lmi_rate_is_at_least_the_worst_quadratic_rate_and_the_certificate_checks() {
    let (mu, l) = (0.5, 1.0);
    let mut certified = 0;
    for ai in 1..=10 {
        for bi in 0..10 {
            let (alpha, beta) = (ai as f64 / 10.0, bi as f64 / 10.0);
            let pb = LmiProblem { alpha, beta, mu, l };
            let quad = quadratic_rate(alpha, beta, mu, l, Polynomial::HeavyBall);
            if let Some(c) = pb.certified_rate(1e-7) {
                certified += 1;
                assert!(
                    c.rho >= quad - 1e-7,
                    "α {alpha} β {beta}: LMI {} < quadratic {quad}",
                    c.rho
                );
                // Independent check of the returned certificate.
                assert!(min_eigenvalue(pb.matrix(c.rho, c.p, c.c0, c.c)) > 0.0);
                assert!(min_eigenvalue(c.p) > 0.0 && c.c > 0.0 && c.c0 >= 0.0);
                // Just below the certified rate, nothing is certified (bisection consistency).
                assert!(pb.certificate_at(c.rho - 1e-6).is_none());
            }
        }
    }
    assert!(
        certified > 50,
        "only {certified} of 100 grid points certified"
    );
}

#[test]
fn lmi_feasibility_is_monotone_in_rho() {
    for &(alpha, beta) in &[(1.0, 0.1716), (0.5, 0.5), (0.1, 0.6), (1.0, 0.0)] {
        let pb = LmiProblem {
            alpha,
            beta,
            mu: 0.5,
            l: 1.0,
        };
        let feas: Vec<bool> = (1..1000)
            .map(|k| pb.certificate_at(k as f64 / 1000.0).is_some())
            .collect();
        let first = feas.iter().position(|&f| f).expect("some rate certified");
        assert!(
            feas[first..].iter().all(|&f| f),
            "α {alpha} β {beta}: not monotone"
        );
    }
}

#[test]
fn lmi_does_not_certify_heavy_ball_where_it_is_known_to_cycle() {
    // Lessard, Recht & Packard (2016), Sec. 4.6: Polyak's tuning α = 4/(√μ + √L)²,
    // β = ((√κ − 1)/(√κ + 1))² with μ = 1, L = 25 has a limit cycle on a function of S_{1,25}, so
    // no valid certificate of a rate < 1 exists.
    let pb = LmiProblem {
        alpha: 4.0 / 36.0,
        beta: (4.0f64 / 6.0).powi(2),
        mu: 1.0,
        l: 25.0,
    };
    assert!(pb.certified_rate(1e-6).is_none());
    // On quadratics the same tuning converges at (√κ − 1)/(√κ + 1) = 2/3.
    assert!(
        (quadratic_rate(pb.alpha, pb.beta, 1.0, 25.0, Polynomial::HeavyBall) - 2.0 / 3.0).abs()
            < 1e-12
    );
}

#[test]
fn exact_moments_match_monte_carlo() {
    let (alpha, beta, s2) = (0.5, 0.3, 0.04);
    let eigs = [0.5, 1.0];
    let e0 = [1.0, -2.0];
    let steps = 30;
    let exact = exact_moments(alpha, beta, &eigs, s2, &e0, steps);
    let mut rng = ChaCha12Rng::seed_from_u64(3);
    let runs = 20_000;
    let (mut d, mut f) = (0.0, 0.0);
    for _ in 0..runs {
        let mut x = e0;
        let mut prev = e0;
        for _ in 0..steps {
            for i in 0..2 {
                let w: f64 = rng.sample::<f64, _>(StandardNormal) * s2.sqrt();
                let next = x[i] - alpha * (eigs[i] * x[i] + w) + beta * (x[i] - prev[i]);
                prev[i] = x[i];
                x[i] = next;
            }
        }
        d += x[0] * x[0] + x[1] * x[1];
        f += 0.5 * (eigs[0] * x[0] * x[0] + eigs[1] * x[1] * x[1]);
    }
    let (d, f) = (d / runs as f64, f / runs as f64);
    let ex = exact[steps as usize];
    assert!(
        (d - ex.sq_distance).abs() < 0.03 * ex.sq_distance,
        "{d} vs {}",
        ex.sq_distance
    );
    assert!(
        (f - ex.excess).abs() < 0.03 * ex.excess,
        "{f} vs {}",
        ex.excess
    );
}

#[test]
fn stationary_distance_is_the_limit_of_the_exact_recursion() {
    for &(alpha, beta) in &[(0.1, 0.0), (0.5, 0.3), (1.0, 0.1716), (1.0, 0.7)] {
        let eigs = [0.5, 1.0];
        let m = stationary_distance(alpha, beta, &eigs, 2.0);
        let last = *exact_moments(alpha, beta, &eigs, 2.0, &[0.0, 0.0], 5000)
            .last()
            .unwrap();
        assert!(
            (last.sq_distance - m).abs() < 1e-9 * m,
            "α {alpha} β {beta}: {} vs {m}",
            last.sq_distance
        );
    }
}

fn inputs(alpha: f64, beta: f64, eigs: &[f64], s2: f64, t: u32) -> Thm35Inputs<'_> {
    let (mu, l) = (eigs[0], eigs[eigs.len() - 1]);
    Thm35Inputs {
        alpha,
        beta,
        eigenvalues: eigs,
        noise_var: s2,
        initial_sq_distance: 10.0,
        rho: quadratic_rate(alpha, beta, mu, l, Polynomial::HeavyBall),
        c_t: transient_constant(alpha, beta, eigs, t),
        t,
    }
}

#[test]
fn thm35_bound_holds_on_figure_1_problem_with_a_valid_c_t() {
    let eigs = [0.5, 1.0];
    let e = 2.5f64.sqrt(); // E‖ξ_0 − ξ*‖² = 10 with x_{−1} = x_0
    for &cw in &[1e-4, 1e-2] {
        for &alpha in &[0.1, 0.5, 1.0] {
            for &beta in &[
                0.0,
                0.3,
                0.7,
                rate_optimal_momentum(alpha, 0.5, Polynomial::Eq26AsPrinted).0,
            ] {
                for t in 0..=250u32 {
                    let s2 = (t.max(1) as f64 * cw).powi(2);
                    let ex = exact_moments(alpha, beta, &eigs, s2, &[e, e], t)[t as usize];
                    let inp = inputs(alpha, beta, &eigs, s2, t);
                    assert!(
                        thm35_bound(&inp) >= ex.excess,
                        "c_w {cw} α {alpha} β {beta} t {t}"
                    );
                    // Once the transient has decayed both sides are m(α, β) up to rounding.
                    assert!(
                        distance_bound(&inp) >= ex.sq_distance * (1.0 - 1e-12),
                        "c_w {cw} α {alpha} β {beta} t {t}"
                    );
                }
            }
        }
    }
}

#[test]
fn thm35_distance_bound_holds_for_large_l_where_the_printed_form_fails() {
    // L = 10: the proof's bound on E‖x_t − x*‖² holds, but the printed bound on F lacks the factor
    // L/2 on its first term and fails at t = 0 with no noise.
    let eigs = [1.0, 10.0];
    let (alpha, beta) = (0.08, 0.3);
    let x0 = [0.0, 5.0f64.sqrt()]; // E‖ξ_0 − ξ*‖² = 10, all of it along λ = L
    for t in 0..=200u32 {
        let s2 = 1e-3;
        let ex = exact_moments(alpha, beta, &eigs, s2, &x0, t)[t as usize];
        let b = distance_bound(&inputs(alpha, beta, &eigs, s2, t));
        assert!(b >= ex.sq_distance * (1.0 - 1e-12), "t {t}");
    }
    let ex0 = exact_moments(alpha, beta, &eigs, 0.0, &x0, 0)[0];
    assert!(thm35_bound(&inputs(alpha, beta, &eigs, 0.0, 0)) < ex0.excess);
}

#[test]
fn prop34_bound_holds_on_a_noisy_quadratic() {
    let eigs = [0.5, 1.0];
    let e0 = [1.0, 1.0];
    for &(alpha, beta) in &[(1.0, 0.0), (0.5, 0.25), (0.1, 0.6), (1.0, 0.1716)] {
        let pb = LmiProblem {
            alpha,
            beta,
            mu: 0.5,
            l: 1.0,
        };
        let rho = pb.certified_rate(1e-6).unwrap().rho;
        let c = pb.central_certificate_at(rho + 0.1 * (1.0 - rho)).unwrap();
        let s2 = 0.01;
        let excess0 = 0.5 * (0.5 + 1.0);
        let exact = exact_moments(alpha, beta, &eigs, s2, &e0, 200);
        for (t, ex) in exact.iter().enumerate() {
            let b = c.bound(
                c.initial_term(&e0, &e0, excess0),
                1.0,
                alpha,
                2.0 * s2,
                c.noise_factor_derived(1.0),
                t as u32,
            );
            assert!(
                b >= ex.excess,
                "α {alpha} β {beta} t {t}: {b} < {}",
                ex.excess
            );
        }
    }
}
