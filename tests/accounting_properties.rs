//! Properties of the accountants and of calibration (proptest): ε decreases in σ and increases in
//! q and T; ε(δ) and δ(ε) are inverse; calibration meets its target, conservatively, to 1e-6 in σ.

use dpx::privacy::accountant::{AccountantKind, AccountantOptions, new_accountant};
use dpx::privacy::calibrate::{Target, calibrate_noise_multiplier, dp_sgd_event, epsilon_of};
use proptest::prelude::*;

fn eps(kind: AccountantKind, q: f64, sigma: f64, steps: u64, delta: f64) -> f64 {
    let options = AccountantOptions::default();
    let factory = || new_accountant(kind, &options);
    epsilon_of(&factory, &dp_sgd_event(q, sigma, steps), delta)
        .unwrap()
        .epsilon
}

const SAMPLED: [AccountantKind; 2] = [AccountantKind::Rdp, AccountantKind::Gdp];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn epsilon_decreases_in_sigma(q in 0.001f64..0.2, sigma in 0.5f64..5.0, bump in 1.001f64..2.0,
                                  steps in 1u64..5000) {
        for kind in SAMPLED {
            let a = eps(kind, q, sigma, steps, 1e-5);
            let b = eps(kind, q, sigma * bump, steps, 1e-5);
            prop_assert!(b <= a * (1.0 + 1e-12), "{kind}: {a} then {b}");
        }
        let a = eps(AccountantKind::Zcdp, 1.0, sigma, steps, 1e-5);
        let b = eps(AccountantKind::Zcdp, 1.0, sigma * bump, steps, 1e-5);
        prop_assert!(b <= a * (1.0 + 1e-12));
    }

    #[test]
    fn epsilon_increases_in_rate_and_steps(q in 0.001f64..0.2, bump in 1.001f64..3.0,
                                           sigma in 0.6f64..4.0, steps in 1u64..5000,
                                           more in 1u64..5000) {
        for kind in SAMPLED {
            let base = eps(kind, q, sigma, steps, 1e-6);
            let higher_q = eps(kind, (q * bump).min(1.0), sigma, steps, 1e-6);
            let longer = eps(kind, q, sigma, steps + more, 1e-6);
            prop_assert!(higher_q >= base * (1.0 - 1e-12), "{kind}: q {base} then {higher_q}");
            prop_assert!(longer >= base * (1.0 - 1e-12), "{kind}: T {base} then {longer}");
        }
    }

    #[test]
    fn epsilon_and_delta_round_trip(q in 0.001f64..0.2, sigma in 0.6f64..4.0, steps in 10u64..5000,
                                    log10_delta in -10.0f64..-3.0) {
        let delta = 10f64.powf(log10_delta);
        for kind in [AccountantKind::Rdp, AccountantKind::Gdp, AccountantKind::Zcdp] {
            let q = if kind == AccountantKind::Zcdp { 1.0 } else { q };
            let sigma = if kind == AccountantKind::Zcdp { sigma * 30.0 } else { sigma };
            let mut acc = new_accountant(kind, &AccountantOptions::default()).unwrap();
            acc.compose(&dp_sgd_event(q, sigma, steps), 1).unwrap();
            let e = acc.epsilon(delta).unwrap().epsilon;
            prop_assume!(e > 1e-6);
            let d = acc.delta(e).unwrap();
            prop_assert!(d <= delta * (1.0 + 1e-6), "{kind}: delta {delta} -> eps {e} -> {d}");
            prop_assert!(d >= delta * (1.0 - 1e-6), "{kind}: delta {delta} -> eps {e} -> {d}");
        }
    }

    #[test]
    fn calibration_round_trips_and_is_conservative(q in 0.001f64..0.1, steps in 100u64..20000,
                                                   target_eps in 0.5f64..10.0) {
        let options = AccountantOptions::default();
        let factory = || new_accountant(AccountantKind::Rdp, &options);
        let target = Target { epsilon: target_eps, delta: 1e-5 };
        let found = calibrate_noise_multiplier(&factory, &|s| dp_sgd_event(q, s, steps), target)
            .unwrap();
        prop_assert!(found.report.epsilon <= target_eps, "{}", found.report.epsilon);
        let again = eps(AccountantKind::Rdp, q, found.value, steps, 1e-5);
        prop_assert_eq!(again, found.report.epsilon);
        let below = eps(AccountantKind::Rdp, q, found.value * (1.0 - 2e-6), steps, 1e-5);
        prop_assert!(below > target_eps, "not the smallest: {} at {}", below, found.value);
    }
}

#[test]
fn branch_and_bound_equals_full_grid() {
    // The pruned search over orders must give exactly the minimum of the full RDP curve.
    use dpx::privacy::accountant::Accountant;
    use dpx::privacy::accountant::RdpConversion;
    use dpx::privacy::accountant::rdp::{RdpAccountant, default_orders, epsilon_from_rdp};
    use dpx::privacy::event::{DpEvent, NeighbouringRelation};
    for (q, sigma, steps, delta) in [
        (0.04, 1.5, 2250, 1e-5),
        (0.004, 0.8, 10000, 1e-5),
        (0.1, 3.0, 512, 1e-6),
        (0.01, 0.5, 100, 1e-8),
        (0.5, 10.0, 30, 1e-5),
    ] {
        let mut acc = RdpAccountant::new(
            NeighbouringRelation::AddOrRemoveOne,
            default_orders(),
            RdpConversion::Improved,
        )
        .unwrap();
        acc.compose(
            &DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma)),
            steps,
        )
        .unwrap();
        acc.compose(&DpEvent::laplace(50.0), 3).unwrap();
        let fast = acc.epsilon(delta).unwrap();
        let curve = acc.rdp_curve();
        let (full, order) = epsilon_from_rdp(acc.orders(), &curve, delta, RdpConversion::Improved);
        assert_eq!(fast.epsilon, full, "q={q} sigma={sigma}");
        assert_eq!(fast.order, Some(order));
    }
}

#[test]
fn long_schedules_do_not_depend_on_thread_count() {
    // 10,000 distinct noise multipliers: the per-order sums run in fixed chunks on the rayon pool.
    use dpx::privacy::event::DpEvent;
    let eps_with_threads = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut acc =
                new_accountant(AccountantKind::Rdp, &AccountantOptions::default()).unwrap();
            for t in 0..10_000 {
                let sigma = 0.9 + f64::from(t) * 1e-4;
                acc.compose(&DpEvent::poisson_sampled(0.01, DpEvent::gaussian(sigma)), 1)
                    .unwrap();
            }
            acc.epsilon(1e-5).unwrap()
        })
    };
    let one = eps_with_threads(1);
    let two = eps_with_threads(2);
    assert_eq!(one.epsilon.to_bits(), two.epsilon.to_bits());
    assert_eq!(one.order, two.order);
    // And it agrees with the same schedule composed as one event of merged runs.
    let order = one.order.unwrap();
    let direct: f64 = (0..10_000)
        .map(|t| {
            dpx::privacy::accountant::rdp::rdp_poisson_gaussian(
                0.01,
                0.9 + f64::from(t) * 1e-4,
                order,
            )
        })
        .sum();
    let eps_direct = dpx::privacy::accountant::rdp::epsilon_at_order(
        order,
        direct,
        1e-5,
        dpx::privacy::accountant::RdpConversion::Improved,
    );
    assert!((eps_direct - one.epsilon).abs() <= 1e-12 * one.epsilon);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// PLD (pessimistic discretisation, an upper bound on the exact privacy curve) is never looser
    /// than RDP, whose conversion to (ε, δ) loses tightness (issue property "PLD ε ≤ RDP ε").
    /// A tiny slack covers the PLD grid (1e-4 in the privacy loss).
    #[test]
    fn pld_epsilon_is_at_most_rdp_epsilon(q in 0.001f64..0.1, sigma in 0.7f64..4.0,
                                          steps in 1u64..3000, delta_exp in 3i32..9) {
        let delta = 10f64.powi(-delta_exp);
        let pld = eps(AccountantKind::Pld, q, sigma, steps, delta);
        let rdp = eps(AccountantKind::Rdp, q, sigma, steps, delta);
        prop_assert!(pld <= rdp + 1e-3, "q={q} sigma={sigma} T={steps} delta={delta}: pld {pld} > rdp {rdp}");
    }
}
