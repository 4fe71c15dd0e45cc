//! Tests of the PLD accountant adapter (`accountant.rs`): reference values, the contract every
//! accountant meets, one-pass composition of distinct steps against step-by-step composition, and
//! the conservative σ grid.

use super::*;
use crate::privacy::special::normal_cdf;
use proptest::prelude::*;

const ADD_REMOVE: NeighbouringRelation = NeighbouringRelation::AddOrRemoveOne;

fn acc() -> PldAccountant {
    PldAccountant::new(ADD_REMOVE, DEFAULT_VALUE_DISCRETIZATION_INTERVAL)
}

fn sgm(q: f64, sigma: f64) -> DpEvent {
    DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma))
}

#[test]
fn delta_below_the_truncated_mass_is_refused_not_infinite() {
    // δ ≤ 1e-15 used to give ε = ∞ (the truncation's mass at +∞), and calibration then
    // blamed σ > 1e6; it is now an error that names delta and the rdp alternative.
    let mut acc = PldAccountant::new(ADD_REMOVE, 1e-4);
    acc.compose(&sgm(0.01, 1.0), 100).unwrap();
    let err = acc.epsilon(1e-16).unwrap_err();
    assert!(
        matches!(&err, AccountingError::InvalidParameter { name: "delta", expected, .. } if expected.contains("rdp")),
        "{err}"
    );
    assert!(acc.epsilon(1e-12).unwrap().epsilon.is_finite());
}

#[test]
fn lower_estimate_is_below_the_upper_bound_and_close_to_it() {
    for relation in [ADD_REMOVE, NeighbouringRelation::ReplaceOne] {
        let mut upper = PldAccountant::new(relation, 1e-3);
        let mut lower = PldAccountant::lower_estimate(relation, 1e-3);
        upper.compose(&sgm(0.05, 1.2), 40).unwrap();
        lower.compose(&sgm(0.05, 1.2), 40).unwrap();
        let (u, l) = (upper.epsilon(1e-5).unwrap(), lower.epsilon(1e-5).unwrap());
        assert!(u.upper_bound && !l.upper_bound);
        assert!(
            l.epsilon <= u.epsilon,
            "{relation:?}: {} > {}",
            l.epsilon,
            u.epsilon
        );
        assert!(
            u.epsilon - l.epsilon < 0.05 * u.epsilon,
            "{relation:?}: {} vs {}",
            l.epsilon,
            u.epsilon
        );
    }
}

/// Exact δ(ε) of μ-GDP (Dong, Roth, Su 2019, Cor. 2.13): Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
fn gaussian_delta(mu: f64, eps: f64) -> f64 {
    normal_cdf(-eps / mu + mu / 2.0) - eps.exp() * normal_cdf(-eps / mu - mu / 2.0)
}

#[test]
fn accountant_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PldAccountant>();
    let boxed: Box<dyn Accountant> = Box::new(acc());
    assert_eq!(boxed.kind(), AccountantKind::Pld);
}

#[test]
fn contract_no_events_is_zero_epsilon() {
    let a = acc();
    assert_eq!(a.kind(), AccountantKind::Pld);
    assert_eq!(a.epsilon(1e-5).unwrap().epsilon, 0.0);
    assert_eq!(a.delta(0.0).unwrap(), 0.0);
}

#[test]
fn contract_non_private_is_infinite() {
    let mut a = acc();
    a.compose(&sgm(0.01, 1.0), 100).unwrap();
    a.compose(&DpEvent::NonPrivate, 1).unwrap();
    assert_eq!(a.epsilon(1e-5).unwrap().epsilon, f64::INFINITY);
    assert_eq!(a.delta(10.0).unwrap(), 1.0);
    let mut b = acc();
    b.compose(&DpEvent::gaussian(0.0), 1).unwrap();
    assert_eq!(b.epsilon(0.5).unwrap().epsilon, f64::INFINITY);
}

#[test]
fn contract_noop_and_empty_sampling_cost_nothing() {
    let mut a = acc();
    a.compose(&DpEvent::NoOp, 5).unwrap();
    a.compose(&DpEvent::poisson_sampled(0.0, DpEvent::gaussian(1.0)), 5)
        .unwrap();
    a.compose(&DpEvent::poisson_sampled(0.3, DpEvent::NoOp), 5)
        .unwrap();
    a.compose(&DpEvent::gaussian(1.0), 0).unwrap();
    assert_eq!(a.epsilon(1e-6).unwrap().epsilon, 0.0);
}

#[test]
fn gaussians_composed_on_one_batch_are_the_gaussian_of_the_combined_multiplier() {
    // DC-SGD Thm 2: gradient at σ_T and histogram at σ_H on the same Poisson batch cost
    // exactly the subsampled Gaussian with σ^−2 = σ_T^−2 + σ_H^−2.
    let (sigma_t, sigma_h) = (1.2f64, 5.0f64);
    let sigma = (sigma_t.powi(-2) + sigma_h.powi(-2)).powf(-0.5);
    let mut split = acc();
    split
        .compose(
            &DpEvent::poisson_sampled(
                0.02,
                DpEvent::Composed(vec![DpEvent::gaussian(sigma_t), DpEvent::gaussian(sigma_h)]),
            ),
            200,
        )
        .unwrap();
    let mut one = acc();
    one.compose(&sgm(0.02, sigma), 200).unwrap();
    let (a, b) = (
        split.epsilon(1e-5).unwrap().epsilon,
        one.epsilon(1e-5).unwrap().epsilon,
    );
    assert_eq!(a, b);
    // A composed Laplace inside the sampling is still refused.
    assert!(matches!(
        acc().check(&DpEvent::poisson_sampled(
            0.1,
            DpEvent::Composed(vec![DpEvent::gaussian(1.0), DpEvent::laplace(1.0)])
        )),
        Err(AccountingError::Unsupported { .. })
    ));
}

#[test]
fn contract_unsupported_nested_event_changes_nothing() {
    let mut a = acc();
    a.compose(&sgm(0.02, 1.1), 50).unwrap();
    let before = a.epsilon(1e-5).unwrap().epsilon;
    let bad = DpEvent::Composed(vec![
        sgm(0.02, 1.1),
        DpEvent::Composed(vec![DpEvent::sampled_without_replacement(
            1000,
            10,
            DpEvent::gaussian(1.0),
        )]),
    ]);
    let err = a.check(&bad).unwrap_err();
    assert!(
        matches!(&err, AccountingError::Unsupported { accountant: AccountantKind::Pld, event } if event.contains("SampledWithoutReplacement")),
        "{err:?}"
    );
    assert_eq!(a.compose(&bad, 3).unwrap_err(), err);
    assert_eq!(a.epsilon(1e-5).unwrap().epsilon, before);
    // a sampled composition is not a mechanism this accountant can subsample
    let nested = DpEvent::poisson_sampled(0.1, DpEvent::gaussian(1.0).self_composed(2));
    assert!(matches!(
        a.check(&nested),
        Err(AccountingError::Unsupported { .. })
    ));
}

#[test]
fn contract_bad_parameters_are_named() {
    let a = acc();
    for (event, name) in [
        (DpEvent::gaussian(f64::NAN), "noise_multiplier"),
        (DpEvent::gaussian(-1.0), "noise_multiplier"),
        (DpEvent::laplace(f64::INFINITY), "scale"),
        (sgm(1.5, 1.0), "sample_rate"),
        (sgm(f64::NAN, 1.0), "sample_rate"),
    ] {
        match a.check(&event) {
            Err(AccountingError::InvalidParameter { name: got, .. }) => assert_eq!(got, name),
            other => panic!("{event:?}: {other:?}"),
        }
    }
    assert!(matches!(
        a.epsilon(1.5),
        Err(AccountingError::InvalidParameter { name: "delta", .. })
    ));
    assert!(a.delta(f64::NAN).is_err());
    let bad_grid = PldAccountant::new(ADD_REMOVE, 0.0);
    assert!(matches!(
        bad_grid.check(&DpEvent::gaussian(1.0)),
        Err(AccountingError::InvalidParameter {
            name: "value_discretization_interval",
            ..
        })
    ));
}

#[test]
fn grids_too_fine_are_refused_by_the_dry_run() {
    // 10^8 full-batch Gaussian steps at σ = 1 are one Gaussian with σ = 1e-4: its losses
    // reach ~5e7, far beyond 2^25 grid points of 1e-4.
    let mut a = acc();
    let err = a.check(&DpEvent::gaussian(1.0).self_composed(100_000_000));
    assert!(matches!(err, Err(AccountingError::Numerical(_))), "{err:?}");
    assert!(a.compose(&DpEvent::gaussian(1.0), 100_000_000).is_err());
    assert_eq!(a.epsilon(1e-5).unwrap().epsilon, 0.0);
}

#[test]
fn check_never_mutates() {
    let a = acc();
    a.check(&sgm(0.5, 0.8).self_composed(10)).unwrap();
    assert_eq!(a.epsilon(1e-5).unwrap().epsilon, 0.0);
    assert_eq!(a.distribution(), &PrivacyLossDistribution::identity(1e-4));
}

#[test]
fn report_says_upper_bound() {
    let mut a = acc();
    a.compose(&DpEvent::gaussian(2.0), 1).unwrap();
    let r = a.epsilon(1e-5).unwrap();
    assert_eq!(r.accountant, AccountantKind::Pld);
    assert_eq!(r.order, None);
    assert_eq!(r.delta, 1e-5);
    assert!(r.notes.iter().any(|n| n.contains("upper bound")));
    assert!(r.notes.iter().any(|n| n.contains("pessimistic")));
}

#[test]
fn laplace_composition_is_at_most_basic_composition() {
    // k Laplace(b) releases are (k/b, 0)-DP by basic composition (Dwork & Roth, Thm 3.16);
    // the PLD ε at tiny δ must not exceed it (plus one grid step per release).
    let mut a = acc();
    a.compose(&DpEvent::laplace(4.0), 8).unwrap();
    let eps = a.epsilon(1e-12).unwrap().epsilon;
    assert!(eps <= 2.0 + 8.0 * 1e-4, "{eps}");
    assert!(eps > 1.0, "{eps}");
    // subsampled: amplification ln(1 + q(e^{1/b} − 1)) per step (Balle, Barthe, Gaboardi
    // 2018, Thm 8) bounds the pure-DP ε of each step.
    let mut s = acc();
    s.compose(&DpEvent::poisson_sampled(0.1, DpEvent::laplace(1.0)), 10)
        .unwrap();
    let per_step = (0.1 * (1f64.exp() - 1.0)).ln_1p();
    let eps = s.epsilon(1e-12).unwrap().epsilon;
    assert!(eps <= 10.0 * per_step + 10.0 * 1e-4, "{eps}");
}

#[test]
fn nested_poisson_sampling_multiplies_rates() {
    let mut nested = acc();
    nested
        .compose(
            &DpEvent::poisson_sampled(0.5, sgm(0.1, 1.0)).self_composed(20),
            1,
        )
        .unwrap();
    let mut flat = acc();
    flat.compose(&sgm(0.05, 1.0), 20).unwrap();
    assert_eq!(
        nested.epsilon(1e-5).unwrap().epsilon,
        flat.epsilon(1e-5).unwrap().epsilon
    );
}

#[test]
fn equal_events_are_grouped_across_the_tree() {
    // Composition is commutative: [a, b, a] composed = a twice and b once.
    let a_ev = sgm(0.05, 0.9);
    let b_ev = DpEvent::gaussian(3.0);
    let mut tree = acc();
    tree.compose(
        &DpEvent::Composed(vec![
            a_ev.clone(),
            b_ev.clone(),
            a_ev.clone().self_composed(9),
        ]),
        2,
    )
    .unwrap();
    let mut grouped = acc();
    grouped.compose(&a_ev, 20).unwrap();
    grouped.compose(&b_ev, 2).unwrap();
    let (x, y) = (
        tree.epsilon(1e-6).unwrap().epsilon,
        grouped.epsilon(1e-6).unwrap().epsilon,
    );
    assert!((x - y).abs() <= 1e-9 * y, "{x} vs {y}");
}

#[test]
fn replace_one_costs_more_than_add_remove() {
    let mut replace = PldAccountant::new(NeighbouringRelation::ReplaceOne, 1e-4);
    replace.compose(&sgm(0.05, 1.0), 50).unwrap();
    let mut add_remove = acc();
    add_remove.compose(&sgm(0.05, 1.0), 50).unwrap();
    assert!(replace.epsilon(1e-5).unwrap().epsilon > add_remove.epsilon(1e-5).unwrap().epsilon);
    // full batch: replace-one with σ equals add/remove with σ/2 (shift 2)
    let mut r = PldAccountant::new(NeighbouringRelation::ReplaceOne, 1e-4);
    r.compose(&DpEvent::gaussian(4.0), 3).unwrap();
    let mut h = acc();
    h.compose(&DpEvent::gaussian(2.0), 3).unwrap();
    let (x, y) = (r.delta(1.0).unwrap(), h.delta(1.0).unwrap());
    assert!((x - y).abs() <= 1e-12 * y, "{x} vs {y}");
    // subsampled Laplace under replace-one is refused by name
    assert!(matches!(
        r.check(&DpEvent::poisson_sampled(0.5, DpEvent::laplace(1.0))),
        Err(AccountingError::Unsupported { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    /// For q = 1 the PLD brackets the exact Gaussian δ(ε) from above: T Gaussians with σ are
    /// μ-GDP with μ = √T/σ (Dong, Roth, Su 2019, Cor. 3.3).
    #[test]
    fn full_batch_gaussian_brackets_exact_delta(
        sigma in 0.6f64..6.0, steps in 1u64..200, eps in 0.0f64..4.0,
    ) {
        let mut a = acc();
        a.compose(&DpEvent::gaussian(sigma), steps).unwrap();
        let mu = (steps as f64).sqrt() / sigma;
        let exact = gaussian_delta(mu, eps);
        let got = a.delta(eps).unwrap();
        // Rounding: δ near 1 is a sum of ~1e5 masses of ~1e-16 relative error each.
        prop_assert!(got >= exact - 1e-12 - 1e-11 * exact, "below exact: {} < {}", got, exact);
        prop_assert!(got <= exact * (1.0 + 1e-3) + 1e-10, "too loose: {} vs {}", got, exact);
    }

    /// More noise never costs more privacy (a gap of ≥ 5% in σ keeps grid effects out).
    #[test]
    fn epsilon_decreases_in_sigma(
        q in 0.01f64..0.3, sigma in 0.8f64..3.0, gap in 0.05f64..0.5, steps in 1u64..60,
    ) {
        let eps = |s: f64| {
            let mut a = acc();
            a.compose(&sgm(q, s), steps).unwrap();
            a.epsilon(1e-5).unwrap().epsilon
        };
        let (lo, hi) = (eps(sigma * (1.0 + gap)), eps(sigma));
        prop_assert!(lo <= hi, "ε(σ(1+gap)) = {} > ε(σ) = {}", lo, hi);
    }

    /// ε(δ) and δ(ε) are inverse to each other on the discrete PLD.
    #[test]
    fn epsilon_delta_round_trip(
        q in 0.01f64..1.0, sigma in 0.8f64..3.0, steps in 1u64..60, log_delta in -9.0f64..-2.0,
    ) {
        let mut a = acc();
        a.compose(&sgm(q, sigma), steps).unwrap();
        let delta = 10f64.powf(log_delta);
        let eps = a.epsilon(delta).unwrap().epsilon;
        prop_assert!(a.delta(eps).unwrap() <= delta * (1.0 + 1e-9));
        if eps > 1e-3 {
            prop_assert!(a.delta(eps - 1e-3).unwrap() > delta);
        }
    }

    /// T separate compositions equal one T-fold self-composition (up to truncation).
    #[test]
    fn repeated_compose_equals_self_composition(
        q in 0.02f64..0.5, sigma in 0.8f64..2.0, steps in 2u64..12,
    ) {
        let mut one_by_one = acc();
        for _ in 0..steps {
            one_by_one.compose(&sgm(q, sigma), 1).unwrap();
        }
        let mut at_once = acc();
        at_once.compose(&sgm(q, sigma).self_composed(steps), 1).unwrap();
        let (x, y) = (
            one_by_one.epsilon(1e-5).unwrap().epsilon,
            at_once.epsilon(1e-5).unwrap().epsilon,
        );
        prop_assert!((x - y).abs() <= 1e-6 * y.max(1e-3), "{} vs {}", x, y);
    }
}

/// A schedule of `n` distinct σ, linear from `lo` to `hi`, at sampling rate `q`.
fn schedule(n: usize, lo: f64, hi: f64, q: f64) -> DpEvent {
    DpEvent::Composed(
        (0..n)
            .map(|i| sgm(q, lo + (hi - lo) * i as f64 / (n - 1).max(1) as f64))
            .collect(),
    )
}

#[test]
fn distinct_steps_in_one_pass_equal_step_by_step_composition() {
    for relation in [ADD_REMOVE, NeighbouringRelation::ReplaceOne] {
        let event = schedule(90, 0.8, 1.6, 0.01);
        let mut at_once = PldAccountant::new(relation, 1e-3);
        at_once.compose(&event, 1).unwrap();
        let mut one_by_one = PldAccountant::new(relation, 1e-3);
        let DpEvent::Composed(steps) = &event else {
            unreachable!()
        };
        for step in steps {
            one_by_one.compose(step, 1).unwrap();
        }
        let mut lower = PldAccountant::lower_estimate(relation, 1e-3);
        lower.compose(&event, 1).unwrap();
        for delta in [1e-3, 1e-5, 1e-7] {
            let x = at_once.epsilon(delta).unwrap().epsilon;
            let y = one_by_one.epsilon(delta).unwrap().epsilon;
            let low = lower.epsilon(delta).unwrap().epsilon;
            // one truncation instead of 90 (each puts up to 1e-15 of mass at +∞, which
            // moves ε at δ = 1e-7 by ~1e-7 relative): never above, and that close
            assert!(x <= y * (1.0 + 1e-12), "{relation:?} {delta}: {x} > {y}");
            assert!(x >= y * (1.0 - 1e-6), "{relation:?} {delta}: {x} ≪ {y}");
            assert!(
                x >= low,
                "{relation:?} {delta}: {x} below the lower estimate {low}"
            );
        }
    }
}

#[test]
fn the_sigma_grid_is_conservative_and_within_half_a_percent() {
    let exact_event = schedule(EXACT_DISTINCT_LIMIT, 0.8, 2.0, 0.01);
    let long = schedule(600, 0.8, 2.0, 0.01);
    for relation in [ADD_REMOVE, NeighbouringRelation::ReplaceOne] {
        let gridded = || {
            PldAccountant::new(relation, 1e-3)
                .with_sigma_grid(Some(DEFAULT_SIGMA_GRID))
                .unwrap()
        };
        // at most EXACT_DISTINCT_LIMIT distinct: the grid does not apply
        let (mut a, mut b) = (gridded(), PldAccountant::new(relation, 1e-3));
        a.compose(&exact_event, 1).unwrap();
        b.compose(&exact_event, 1).unwrap();
        assert_eq!(
            a.epsilon(1e-5).unwrap().epsilon,
            b.epsilon(1e-5).unwrap().epsilon
        );
        assert_eq!(a.epsilon(1e-5).unwrap().notes.len(), 1);
        // above it: rounded down, so never below the exact value, and close to it
        let (mut a, mut b) = (gridded(), PldAccountant::new(relation, 1e-3));
        a.compose(&long, 1).unwrap();
        b.compose(&long, 1).unwrap();
        for delta in [1e-3, 1e-5, 1e-7] {
            let (x, y) = (a.epsilon(delta).unwrap(), b.epsilon(delta).unwrap().epsilon);
            assert!(x.epsilon >= y, "{relation:?} {delta}: {} < {y}", x.epsilon);
            assert!(
                x.epsilon <= y * 1.005,
                "{relation:?} {delta}: {} ≫ {y}",
                x.epsilon
            );
            assert!(
                x.notes.iter().any(|n| n.contains("600 distinct")),
                "{:?}",
                x.notes
            );
        }
    }
    assert!(acc().with_sigma_grid(Some(0.5)).is_err());
    assert!(acc().with_sigma_grid(Some(0.0)).is_err());
}
