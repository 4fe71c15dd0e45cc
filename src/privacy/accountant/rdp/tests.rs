//! Unit tests of the RDP kernels, conversions, search and accountant (room:
//! `privacy::accountant::rdp`).

use super::*;
use crate::privacy::accountant::checks::round_down_to_grid;
use crate::privacy::accountant::{Accountant, RdpConversion};
use crate::privacy::event::{DpEvent, NeighbouringRelation};
use crate::privacy::special::{alternating_sum, erfcx, ln_binom, log_sum_exp};

#[test]
fn sigma_grid_is_conservative_and_sandwiched() {
    // A 3,000-step ramp of distinct σ_t at q = 256/50000. Rounding σ down to a grid of
    // relative step r can only raise ε (RDP is non-increasing in σ), and cannot exceed the
    // exact ε of the schedule σ_t/(1 + r), since every grid value is ≥ σ_t/(1 + r).
    let q = 256.0 / 50000.0;
    let sigmas: Vec<f64> = (0..3000).map(|t| 0.8 + 2.0 * t as f64 / 3000.0).collect();
    let eps = |scale: f64, grid: Option<f64>| {
        let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
        if let Some(r) = grid {
            acc = acc.with_sigma_grid(r).unwrap();
        }
        for &s in &sigmas {
            acc.compose(
                &DpEvent::poisson_sampled(q, DpEvent::gaussian(s * scale)),
                1,
            )
            .unwrap();
        }
        (acc.epsilon(1e-5).unwrap().epsilon, acc.segments().len())
    };
    let (exact, n_exact) = eps(1.0, None);
    assert_eq!(n_exact, 3000);
    for r in [1e-4, 1e-3, 1e-2] {
        let (grid, n_grid) = eps(1.0, Some(r));
        let (lower_noise, _) = eps(1.0 / (1.0 + r), None);
        assert!(grid >= exact, "r = {r}: {grid} < exact {exact}");
        assert!(
            grid <= lower_noise * (1.0 + 1e-12),
            "r = {r}: {grid} > {lower_noise}"
        );
        // ln(2.8/0.8)/ln(1 + r) + 1 grid values at most.
        assert!(
            n_grid as f64 <= (2.8f64 / 0.8).ln() / r.ln_1p() + 2.0,
            "{n_grid}"
        );
    }
    // Grid points never exceed σ, and σ on the grid stays.
    let ln_step = 1e-3f64.ln_1p();
    for &s in &sigmas {
        let g = round_down_to_grid(s, ln_step);
        assert!(
            g <= s && g * (1.0 + 1e-3) >= s * (1.0 - 1e-15),
            "{s} -> {g}"
        );
        assert_eq!(round_down_to_grid(g, ln_step), g);
    }
}

#[test]
fn sigma_grid_merges_update_cached_totals() {
    // Equal kernels composed after an epsilon query join their (already summed) segment: the
    // result must equal composing everything before the first query.
    let q = 0.01;
    let make = || {
        RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne)
            .with_sigma_grid(1e-3)
            .unwrap()
    };
    let (mut a, mut b) = (make(), make());
    for s in [1.0, 1.5, 1.0, 2.0, 1.5] {
        b.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), 10)
            .unwrap();
    }
    for (i, s) in [1.0, 1.5, 1.0, 2.0, 1.5].into_iter().enumerate() {
        a.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), 10)
            .unwrap();
        if i == 1 {
            a.epsilon(1e-5).unwrap();
        }
    }
    assert_eq!(a.segments().len(), 3);
    let (ea, eb) = (
        a.epsilon(1e-5).unwrap().epsilon,
        b.epsilon(1e-5).unwrap().epsilon,
    );
    assert!((ea - eb).abs() <= 1e-12 * eb, "{ea} vs {eb}");
    assert!(
        RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne)
            .with_sigma_grid(0.0)
            .is_err()
    );
}

#[test]
fn fast_integer_kernel_equals_the_full_sum() {
    // The peak-located partial sum must agree with summing every term.
    for &q in &[1e-6, 1e-3, 0.004, 0.01, 0.1, 0.3, 0.7, 0.99] {
        for &sigma in &[0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 3.0, 10.0, 50.0] {
            for &alpha in &[2u64, 3, 5, 8, 13, 21, 34, 63, 128, 256, 512, 1024] {
                let fast = log_a_poisson_gaussian_int(q, sigma, alpha);
                let full = log_a_poisson_gaussian_int_full(q, sigma, alpha);
                assert!(
                    (fast - full).abs() <= 1e-10 * full.abs(),
                    "q={q} sigma={sigma} alpha={alpha}: {fast} vs {full}"
                );
            }
        }
    }
}

#[test]
fn fast_kernels_equal_the_reference() {
    // q in [1e-4, 0.5], sigma in [0.5, 20], every default order; compared on
    // ln A = (α − 1)·RDP. Relative 1e-12 above an absolute floor of 4e-15 (the reference forms
    // ln A as ln(sum) + shift with sum ~ 1 and stops at 1e-15 of the sum). Where the
    // alternating tail decays slowly (α < 2, small σ, large q) the reference stops after 4000
    // terms at the upper bracket, up to ~2e-13 high; in those cases the fast value must agree
    // with quadrature to 1e-15 and be closer to it than the reference.
    let mut worst = 0.0f64;
    let mut gave_up = 0;
    let mut loose = 0;
    for &q in &[
        1e-4,
        3e-4,
        1e-3,
        256.0 / 50000.0,
        0.01,
        0.03,
        0.1,
        0.2,
        0.35,
        0.5,
    ] {
        for &sigma in &[0.5, 0.6, 0.8, 1.0, 1.3, 1.7, 2.2, 3.0, 4.5, 7.0, 11.0, 20.0] {
            for alpha in default_orders() {
                let fast = rdp_poisson_gaussian(q, sigma, alpha) * (alpha - 1.0);
                let slow = rdp_poisson_gaussian_reference(q, sigma, alpha) * (alpha - 1.0);
                if slow.is_infinite() && fast.is_finite() {
                    // The reference gives up (+∞, never optimal) when a term underflows to 0,
                    // since it then never sees both terms strictly decrease. RDP is
                    // non-decreasing in α: check the value against the integer order above.
                    let above = rdp_poisson_gaussian(q, sigma, alpha.ceil());
                    assert!(
                        fast >= 0.0 && fast / (alpha - 1.0) <= above * (1.0 + 1e-12),
                        "q={q} sigma={sigma} alpha={alpha}: {fast}"
                    );
                    gave_up += 1;
                    continue;
                }
                if slow.is_infinite() || fast.is_infinite() {
                    assert_eq!(fast, slow, "q={q} sigma={sigma} alpha={alpha}");
                    continue;
                }
                let err = (fast - slow).abs();
                let tol = 1e-12 * slow.abs() + 4e-15;
                worst = worst.max(err / tol);
                if err > tol {
                    // Then the reference is the one off: the fast value must match quadrature.
                    loose += 1;
                    let quad = log_a_by_quadrature(q, sigma, alpha);
                    assert!(
                        (fast - quad).abs() <= 1e-12 * quad + 1e-15
                            && (fast - quad).abs() < (slow - quad).abs(),
                        "q={q} sigma={sigma} alpha={alpha}: {fast} vs {slow}, quadrature {quad}"
                    );
                }
            }
        }
    }
    println!(
        "worst error / tolerance: {worst}; reference off (checked by quadrature): {loose}; reference gave up: {gave_up}"
    );
}

/// ln A_α by quadrature of its definition, E_{z∼N(0,σ²)}[(1 + q(e^{(2z−1)/(2σ²)} − 1))^α] − 1
/// summed directly (step σ/400 over ±40σ; the integrand is smooth, so the trapezoid rule
/// converges geometrically): an independent check to ~1e-16 absolute.
fn log_a_by_quadrature(q: f64, sigma: f64, alpha: f64) -> f64 {
    let h = sigma / 400.0;
    let mut total = 0.0;
    for k in -16_000i32..=16_000 {
        let z = f64::from(k) * h;
        let w = (-z * z / (2.0 * sigma * sigma)).exp()
            / (sigma * (2.0 * std::f64::consts::PI).sqrt())
            * h;
        let u = q * ((2.0 * z - 1.0) / (2.0 * sigma * sigma)).exp_m1();
        total += w * (alpha * u.ln_1p()).exp_m1();
    }
    total.ln_1p()
}

#[test]
fn fast_fractional_kernel_matches_quadrature() {
    // Where the reference stops at its 4000-term bracket (slow alternating tails), and where
    // it gives up (+∞), the fast kernel agrees with quadrature.
    for &(q, sigma, alpha) in &[
        (0.2, 0.8, 1.1),
        (0.35, 0.8, 1.1),
        (0.5, 0.5, 1.2),
        (0.03, 0.5, 1.1),
        (0.1, 1.0, 1.1),
        (256.0 / 50000.0, 0.6, 1.8),
        (256.0 / 50000.0, 0.8, 5.7),
        (0.01, 11.0, 2.5),
        (0.05, 20.0, 3.3),
        (0.01, 7.0, 5.5),
    ] {
        let fast = log_a_poisson_gaussian_frac(q, sigma, alpha);
        let quad = log_a_by_quadrature(q, sigma, alpha);
        assert!(
            (fast - quad).abs() <= 1e-12 * quad + 1e-15,
            "q={q} sigma={sigma} alpha={alpha}: {fast} vs {quad}"
        );
    }
}

#[test]
fn alternating_sum_is_accurate() {
    // Σ (−1)^k/(k+1) = ln 2 (a_k = ∫₀¹ x^k dx); Σ (−1)^k/(k+1)² = π²/12.
    let a: Vec<f64> = (0..TAIL_TERMS).map(|k| 1.0 / (k as f64 + 1.0)).collect();
    assert!((alternating_sum(&a) - 2f64.ln()).abs() < 1e-15);
    let a: Vec<f64> = (0..TAIL_TERMS).map(|k| (k as f64 + 1.0).powi(-2)).collect();
    let want = std::f64::consts::PI.powi(2) / 12.0;
    assert!((alternating_sum(&a) - want).abs() < 1e-15);
}

#[test]
fn erfcx_matches_libm_erfc() {
    let mut x = 0.0;
    while x < 26.0 {
        let want = libm::erfc(x) * (x * x).exp();
        // e^{x²} of a rounded x² is itself off by up to ~2x²·2⁻⁵³ relative.
        let tol = (4e-15 + 4e-16 * x * x) * want;
        assert!((erfcx(x) - want).abs() <= tol, "{x}");
        x += 0.01;
    }
    // Past 26 against Laplace's continued fraction √π·erfcx(x) = 1/(x + (1/2)/(x + 1/(x +
    // (3/2)/(x + …)))), 200 levels, evaluated at 26.5 in double precision.
    let v: f64 = 0.021_275_046_685_371_106;
    assert!((erfcx(26.5) - v).abs() <= 1e-15 * v, "{}", erfcx(26.5));
}

/// ε and the optimal order by the plain full-grid evaluation: the RDP at every order with
/// the reference kernels, converted, minimised.
fn full_grid_reference(steps: &[(f64, f64, u64)], delta: f64) -> (f64, f64) {
    use rayon::prelude::*;
    let orders = default_orders();
    let curve: Vec<f64> = orders
        .par_iter()
        .map(|&a| {
            steps
                .iter()
                .map(|&(q, s, n)| rdp_poisson_gaussian_reference(q, s, a) * n as f64)
                .sum()
        })
        .collect();
    epsilon_from_rdp(&orders, &curve, delta, RdpConversion::Improved)
}

#[test]
fn binned_minimum_equals_the_full_grid_on_the_40k_schedule() {
    // The benchmark schedule: q = 256/50000, 40,000 distinct σ_t from 0.8 to 2.8.
    let q = 256.0 / 50000.0;
    let steps: Vec<(f64, f64, u64)> = (0..40_000)
        .map(|t| (q, 0.8 + 2.0 * f64::from(t) / 40_000.0, 1))
        .collect();
    let (want, want_order) = full_grid_reference(&steps, 1e-5);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
            for &(q, s, n) in &steps {
                acc.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), n)
                    .unwrap();
            }
            let report = acc.epsilon(1e-5).unwrap();
            (report.epsilon, report.order.unwrap())
        })
    };
    let (got, order) = run(2);
    println!("binned {got:.16} at {order}; full grid {want:.16} at {want_order}");
    assert_eq!(order, want_order);
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    // Deterministic for any thread count.
    for threads in [1, 3] {
        let (again, again_order) = run(threads);
        assert_eq!(again.to_bits(), got.to_bits(), "{threads} threads");
        assert_eq!(again_order, order);
    }
}

#[test]
fn binned_then_incremental_queries_agree_with_a_fresh_accountant() {
    // A long history queried once (binned bounds), then extended and queried again (the
    // neighbour bounds with cached totals): both answers equal a fresh accountant's.
    let q = 0.01;
    let sigma = |t: usize| 0.7 + t as f64 / 300.0;
    let compose = |acc: &mut RdpAccountant, range: std::ops::Range<usize>| {
        for t in range {
            acc.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma(t))), 1)
                .unwrap();
        }
    };
    let fresh = |n: usize| {
        let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
        acc.bin_min_segments = usize::MAX;
        compose(&mut acc, 0..n);
        acc.epsilon(1e-6).unwrap()
    };
    let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
    acc.bin_min_segments = 100;
    compose(&mut acc, 0..600);
    let first = acc.epsilon(1e-6).unwrap();
    compose(&mut acc, 600..900);
    let second = acc.epsilon(1e-6).unwrap();
    for (got, want) in [(first, fresh(600)), (second, fresh(900))] {
        assert_eq!(got.order, want.order);
        assert!((got.epsilon - want.epsilon).abs() <= 1e-12 * want.epsilon);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(6))]

    #[test]
    fn binned_minimum_equals_the_full_grid(
        seed_steps in proptest::collection::vec((0usize..3, 0.6f64..3.0, 1u64..4), 150..400),
        rates in proptest::collection::vec(1e-3f64..0.1, 3),
        delta_exp in 3.0f64..8.0,
    ) {
        // Random schedules of a few sampling rates and many distinct σ; binning starts at 64
        // pending segments, so every bound level and the exact fallback are exercised.
        let steps: Vec<(f64, f64, u64)> =
            seed_steps.iter().map(|&(r, s, n)| (rates[r], s, n)).collect();
        let delta = 10f64.powf(-delta_exp);
        let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
        acc.bin_min_segments = 64;
        for &(q, s, n) in &steps {
            acc.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), n).unwrap();
        }
        let report = acc.epsilon(delta).unwrap();
        let (want, want_order) = full_grid_reference(&steps, delta);
        proptest::prop_assert!((report.epsilon - want).abs() <= 1e-9 * want,
            "{} vs {}", report.epsilon, want);
        proptest::prop_assert_eq!(report.order, Some(want_order));
        // δ at that ε through the same minimisation, against the full grid.
        let mut fresh = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne);
        fresh.bin_min_segments = 64;
        for &(q, s, n) in &steps {
            fresh.compose(&DpEvent::poisson_sampled(q, DpEvent::gaussian(s)), n).unwrap();
        }
        let got_delta = fresh.delta(want).unwrap();
        let curve = acc.rdp_curve();
        let (want_delta, _) = delta_from_rdp(acc.orders(), &curve, want, RdpConversion::Improved);
        proptest::prop_assert!((got_delta - want_delta).abs() <= 1e-9 * want_delta,
            "{} vs {}", got_delta, want_delta);
    }
}

#[test]
fn orders_must_exceed_one() {
    let err = RdpAccountant::new(
        NeighbouringRelation::AddOrRemoveOne,
        vec![1.0, 2.0],
        RdpConversion::Improved,
    );
    assert!(err.is_err());
}

#[test]
fn laplace_without_replacement_is_bounded_and_amplified() {
    // q = 1 is the plain Laplace RDP; for q < 1 the bound is below the unsampled RDP and
    // shrinks with q; it is never negative.
    let eps = 0.7;
    for alpha in [1.5, 2.0, 3.0, 8.0, 32.0] {
        assert_eq!(rdp_wor_laplace(1.0, eps, alpha), rdp_laplace(eps, alpha));
        let a = rdp_wor_laplace(0.01, eps, alpha);
        let b = rdp_wor_laplace(0.1, eps, alpha);
        assert!(
            a >= 0.0 && a < b && b < rdp_laplace(eps, alpha),
            "{alpha}: {a} {b}"
        );
    }
    // Small q: A ≈ 1 + C(α,2) q² min{…}, so RDP(2) ≈ q²·min{4(e^{ε(2)} − 1), e^{ε(2)}(e^ε − 1)²}.
    let q: f64 = 1e-3;
    let e2 = rdp_laplace(eps, 2.0);
    let lead = q * q * (4.0 * e2.exp_m1()).min(e2.exp() * eps.exp_m1().powi(2));
    assert!((rdp_wor_laplace(q, eps, 2.0) / lead - 1.0).abs() < 1e-3);
}

#[test]
fn subsampled_laplace_bound_dominates_the_exact_gaussian_form() {
    // Zhu and Wang 2019 Thm. 6 applied to the Gaussian (ε(ℓ) = ℓ/(2σ²)) must upper-bound the
    // exact subsampled-Gaussian RDP; check the same formula through a Gaussian-shaped ε(ℓ).
    for &(q, sigma) in &[(0.01, 1.0), (0.1, 2.0), (0.3, 0.8)] {
        for alpha in 2u64..40 {
            let a = alpha as f64;
            let ln_q = f64::ln(q);
            let ln_1mq = (-q).ln_1p();
            let eps = |l: f64| l / (2.0 * sigma * sigma);
            let mut terms = vec![(a - 1.0) * ln_1mq + ((a - 1.0) * q).ln_1p()];
            terms.push(ln_binom(alpha, 2) + 2.0 * ln_q + (a - 2.0) * ln_1mq + eps(2.0));
            for l in 3..=alpha {
                let lf = l as f64;
                terms.push(
                    3f64.ln()
                        + ln_binom(alpha, l)
                        + (a - lf) * ln_1mq
                        + lf * ln_q
                        + (lf - 1.0) * eps(lf),
                );
            }
            let bound = log_sum_exp(&terms) / (a - 1.0);
            let exact = rdp_poisson_gaussian(q, sigma, a);
            assert!(
                bound >= exact * (1.0 - 1e-12),
                "q={q} sigma={sigma} alpha={alpha}"
            );
        }
    }
}
