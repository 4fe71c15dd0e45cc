//! Public reference vectors for the accountants (docs/reference_vectors.md). Each
//! test names the row and the upstream file its number comes from.

use dpx::privacy::accountant::rdp::{
    self, RdpAccountant, default_orders, epsilon_from_rdp, opacus_orders, tfp_orders,
};
use dpx::privacy::accountant::zcdp::{paper_rho_budget, zcdp_epsilon_standard, zcdp_epsilon_tight};
use dpx::privacy::accountant::{
    Accountant, AccountantKind, AccountantOptions, RdpConversion, new_accountant,
};
use dpx::privacy::event::{DpEvent, NeighbouringRelation};

fn rel_err(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

fn poisson_steps(q: f64, sigma: f64, steps: u64) -> DpEvent {
    DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma)).self_composed(steps)
}

fn rdp_with_orders(orders: Vec<f64>) -> RdpAccountant {
    RdpAccountant::new(
        NeighbouringRelation::AddOrRemoveOne,
        orders,
        RdpConversion::Improved,
    )
    .expect("valid orders")
}

#[test]
fn row1_opacus_rdp_accountant() {
    // docs/reference_vectors.md row 1: pytorch/opacus opacus/tests/accountants_test.py::test_rdp_accountant
    // asserts 7.32911117143 (Opacus alphas, improved conversion).
    let mut acc = rdp_with_orders(opacus_orders());
    acc.compose(&poisson_steps(0.04, 1.5, 2250), 1).unwrap();
    let report = acc.epsilon(1e-5).unwrap();
    assert!(
        rel_err(report.epsilon, 7.32911117143) < 1e-6,
        "{}",
        report.epsilon
    );
}

#[test]
fn row4_tfp_test0() {
    // docs/reference_vectors.md row 4: tensorflow/privacy compute_dp_sgd_privacy_test.py Test0 asserts
    // 0.7242234026109595 at order 19 (TFP orders).
    let mut acc = rdp_with_orders(tfp_orders());
    acc.compose(&poisson_steps(150.0 / 60000.0, 1.3, 6000), 1)
        .unwrap();
    let report = acc.epsilon(1e-5).unwrap();
    assert!(
        rel_err(report.epsilon, 0.7242234026109595) < 1e-6,
        "{}",
        report.epsilon
    );
    assert_eq!(report.order, Some(19.0));
}

#[test]
fn row5_tfp_test1() {
    // docs/reference_vectors.md row 5: same file, Test1 asserts 1.4154988495444842 at order 13.
    let mut acc = rdp_with_orders(tfp_orders());
    acc.compose(&poisson_steps(100.0 / 100000.0, 1.0, 30000), 1)
        .unwrap();
    let report = acc.epsilon(1e-7).unwrap();
    assert!(
        rel_err(report.epsilon, 1.4154988495444842) < 1e-6,
        "{}",
        report.epsilon
    );
    assert_eq!(report.order, Some(13.0));
}

#[test]
fn row16_dp_accounting_raw_rdp() {
    // docs/reference_vectors.md row 16: google/differential-privacy rdp_privacy_accountant_test.py::
    // test_compute_rdp_poisson_sampled_gaussian asserts these (rtol 1e-4). At integer orders its
    // kernel is exact, so dpx matches; at fractional orders dp_accounting sums |terms| (an upper
    // bound), so dpx's exact value must lie below it (and matches mpmath, next test).
    let integer_orders = [5.0, 50.0, 100.0];
    let expected = [2.18075656e-3, 2.38460375e-2, 1.67416308e2];
    for (a, e) in integer_orders.iter().zip(expected) {
        let got = 50.0 * rdp::rdp_poisson_gaussian(0.01, 2.5, *a);
        assert!(rel_err(got, e) < 1e-6, "order {a}: {got} vs {e}");
    }
    for (a, upper) in [(1.5, 6.70579741e-4), (2.5, 1.08548710e-3)] {
        let got = 50.0 * rdp::rdp_poisson_gaussian(0.01, 2.5, a);
        assert!(
            got < upper && got > 0.9 * upper,
            "order {a}: {got} vs bound {upper}"
        );
    }
}

#[test]
fn fractional_orders_match_multiprecision_integral() {
    // A_α = ∫ μ0 (μ/μ0)^α by mpmath quadrature (40 digits), RDP = ln A_α / (α − 1):
    // the exact values the signed series must reproduce.
    let cases = [
        (0.01, 2.5, 1.5, 1.300141794376079e-5),
        (0.01, 2.5, 2.5, 2.170836113836249e-5),
        (0.04, 1.5, 3.9, 1.833202199583859e-3),
        (0.01, 0.7, 7.3, 2.113131032718328),
        (0.2, 0.5, 1.1, 0.2025809276713016),
    ];
    for (q, sigma, alpha, exact) in cases {
        let got = rdp::rdp_poisson_gaussian(q, sigma, alpha);
        assert!(
            rel_err(got, exact) < 1e-9,
            "q={q} sigma={sigma} alpha={alpha}: {got} vs {exact}"
        );
    }
}

#[test]
fn row17_autodp_tfp_values() {
    // docs/reference_vectors.md row 17: yuxiangw/autodp test/unit_test_dp_sgd_poisson_sampling_add_remove.py.
    let got = rdp::rdp_poisson_gaussian(0.01, 0.5, 2.0);
    assert!(rel_err(got, 0.005345502314345245) < 1e-9, "{got}");
    let got = rdp::rdp_poisson_gaussian(0.2, 10.0, 4.0);
    assert!(rel_err(got, 0.0008064504053491498) < 1e-9, "{got}");
    // q = 1: α/(2σ²) exactly.
    for a in [1.5, 2.0, 7.3, 64.0] {
        assert_eq!(rdp::rdp_poisson_gaussian(1.0, 2.0, a), a / 8.0);
    }
}

#[test]
fn row20_opacus_heterogeneous_docstring() {
    // docs/reference_vectors.md row 20: pytorch/opacus opacus/accountants/analysis/rdp.py docstring:
    // 0.336 at order 23 with orders 2..32 (0.33634 recomputed).
    let mut acc = rdp_with_orders((2..=32).map(f64::from).collect());
    acc.compose(&poisson_steps(1e-5, 1.0, 10), 1).unwrap();
    acc.compose(&poisson_steps(1e-4, 3.0, 4), 1).unwrap();
    let report = acc.epsilon(1e-5).unwrap();
    assert!(
        (report.epsilon - 0.33634).abs() < 1e-5,
        "{}",
        report.epsilon
    );
    assert_eq!(report.order, Some(23.0));
}

#[test]
fn row21_zcdp_tight_and_standard() {
    // docs/reference_vectors.md row 21: opendp zCDP_to_approxDP test: rho = 1/32, delta = 1e-3 gives
    // 0.6880024554878086 (tight CKS conversion); the standard conversion gives 0.9605 (row text).
    let tight = zcdp_epsilon_tight(1.0 / 32.0, 1e-3);
    assert!(rel_err(tight, 0.6880024554878086) < 1e-9, "{tight}");
    let standard = zcdp_epsilon_standard(1.0 / 32.0, 1e-3);
    assert!((standard - 0.9605).abs() < 5e-5, "{standard}");
}

#[test]
fn row22_pure_dp_rdp_conversion() {
    // docs/reference_vectors.md row 22: rdp_privacy_accountant_test.py::test_compute_epsilon_delta_pure_dp:
    // RDP 1.1 at orders 2..32, delta 1e-5 gives 1.32783806176 at order 32.
    let orders: Vec<f64> = (2..=32).map(f64::from).collect();
    let rdp = vec![1.1; orders.len()];
    let (eps, order) = epsilon_from_rdp(&orders, &rdp, 1e-5, RdpConversion::Improved);
    assert!(rel_err(eps, 1.32783806176) < 1e-9, "{eps}");
    assert_eq!(order, 32.0);
}

#[test]
fn row3_gdp_poisson_clt() {
    // docs/reference_vectors.md row 3: opacus accountants_test.py::test_gdp_accountant asserts
    // eps in (6.59, 6.60); 6.59982 recomputed.
    let mut acc = new_accountant(AccountantKind::Gdp, &AccountantOptions::default()).unwrap();
    acc.compose(&poisson_steps(0.04, 1.5, 2249), 1).unwrap();
    let report = acc.epsilon(1e-5).unwrap();
    assert!(
        report.epsilon > 6.59 && report.epsilon < 6.60,
        "{}",
        report.epsilon
    );
    assert!(
        (report.epsilon - 6.59982).abs() < 1e-5,
        "{}",
        report.epsilon
    );
    assert!(report.notes.iter().any(|n| n.contains("approximate")));
}

#[test]
fn zcdp_paper_budget_vector() {
    // docs/methods/dynamic_noise.md §2: (epsilon, delta) = (4, 1e-8) gives rho = 0.196352,
    // and uniform T = 100 gives sigma = sqrt(T/(2 rho)) = 15.958.
    let rho = paper_rho_budget(4.0, 1e-8);
    assert!((rho - 0.196352).abs() < 5e-7, "{rho}");
    let sigma = (100.0 / (2.0 * rho)).sqrt();
    assert!((sigma - 15.958).abs() < 5e-4, "{sigma}");
    // The zcdp-paper accountant reproduces epsilon = 4 for that run.
    let mut acc = new_accountant(AccountantKind::ZcdpPaper, &AccountantOptions::default()).unwrap();
    acc.compose(&DpEvent::gaussian(sigma), 100).unwrap();
    let report = acc.epsilon(1e-8).unwrap();
    assert!(rel_err(report.epsilon, 4.0) < 1e-12, "{}", report.epsilon);
}

#[test]
fn adp_paper_test_vector() {
    // docs/methods/adp_sgd.md §2.1 test vector: n = 50000, m = 256, T = 11760, delta = 1e-5,
    // epsilon-bar = 0.8 (epsilon = 12.8): B_delta = 215.7485 and the DP-SGD z = 10.1943.
    let q = 256.0 / 50000.0;
    let b = dpx::privacy::accountant::adp_paper::adp_paper_b_delta(11760.0, q, 1e-5);
    assert!((b - 215.7485).abs() < 5e-4, "{b}");
    let options = AccountantOptions {
        relation: NeighbouringRelation::ReplaceOne,
        ..AccountantOptions::default()
    };
    let mut acc = new_accountant(AccountantKind::AdpPaper, &options).unwrap();
    let step = DpEvent::sampled_without_replacement(50000, 256, DpEvent::gaussian(10.1943));
    acc.compose(&step, 11760).unwrap();
    let report = acc.epsilon(1e-5).unwrap();
    // z is given to 6 significant figures, so epsilon matches 12.8 to about 1e-5.
    assert!(rel_err(report.epsilon, 12.8) < 2e-5, "{}", report.epsilon);
}

#[test]
fn default_orders_are_dp_accounting_grid() {
    // docs/reference_vectors.md, default orders of dp_accounting: [1 + x/10 for x in 1..99] + range(11, 64) + [128, 256, 512, 1024].
    let orders = default_orders();
    assert_eq!(orders.len(), 99 + 53 + 4);
    assert_eq!(orders[0], 1.1);
    assert_eq!(orders[98], 10.9);
    assert_eq!(orders[99], 11.0);
    assert_eq!(*orders.last().unwrap(), 1024.0);
}

mod calibration_table {
    //! docs/reference_vectors.md, "Calibration vectors". Upstream searches stop at a
    //! tolerance of 0.01 in epsilon and return the upper end, so their sigma is an upper bound
    //! on ours; dpx bisects to 1e-6 relative in sigma.
    use super::*;
    use dpx::privacy::calibrate::{Target, calibrate_noise_multiplier, dp_sgd_event, epsilon_of};

    fn check(
        kind: AccountantKind,
        orders: Vec<f64>,
        q: f64,
        steps: u64,
        upstream: f64,
        digits: f64,
    ) {
        let options = AccountantOptions {
            rdp_orders: orders,
            ..AccountantOptions::default()
        };
        let factory = || new_accountant(kind, &options);
        let target = Target {
            epsilon: 8.0,
            delta: 1e-5,
        };
        let found = calibrate_noise_multiplier(&factory, &|s| dp_sgd_event(q, s, steps), target)
            .expect("reachable");
        assert!(
            found.report.epsilon <= 8.0,
            "conservative: {}",
            found.report.epsilon
        );
        assert!(
            found.value <= upstream + digits,
            "{} vs upstream {upstream}",
            found.value
        );
        assert!(
            (found.value - upstream).abs() < digits,
            "{} vs upstream {upstream}",
            found.value
        );
        // One tolerance step below the answer overshoots the target.
        let below = epsilon_of(
            &factory,
            &dp_sgd_event(q, found.value * (1.0 - 2e-6), steps),
            1e-5,
        )
        .unwrap();
        assert!(below.epsilon > 8.0);
    }

    #[test]
    fn rdp_eps8_q004_90_epochs() {
        // opacus/tests/accountants_test.py: RDP sigma 1.416 (1.416015625) for q .04, T 2250.
        check(
            AccountantKind::Rdp,
            opacus_orders(),
            0.04,
            2250,
            1.416015625,
            1e-3,
        );
    }

    #[test]
    fn rdp_eps8_q004_2000_steps() {
        // opacus/tests/accountants_test.py: RDP sigma 1.3562 for q .04, 2000 steps.
        check(
            AccountantKind::Rdp,
            opacus_orders(),
            0.04,
            2000,
            1.3562,
            1e-3,
        );
    }

    #[test]
    fn gdp_eps8_q004_90_epochs() {
        // opacus/tests/accountants_test.py: GDP sigma 1.3232421875 for q .04, T 2250.
        check(
            AccountantKind::Gdp,
            default_orders(),
            0.04,
            2250,
            1.3232421875,
            1e-3,
        );
    }
}

#[test]
fn sampled_without_replacement_gaussian_bounds_dp_accounting() {
    // dp_accounting 0.6.0 `_compute_rdp_sample_wor_gaussian` (run here with pip dp-accounting):
    // it tightens the j >= 3 terms of Wang, Balle, Kasiviswanathan 2019 Thm. 9 with forward
    // differences for orders <= 256; dpx uses the plain theorem, so it must be >= these values,
    // equal at order 2 (no j >= 3 terms) and above 256 (same Stirling-free formula).
    let cases: [(f64, f64, [f64; 6]); 2] = [
        (
            0.01,
            1.0,
            [
                0.0005435086381094331,
                0.0008348726849544131,
                0.0016596427069916393,
                0.06742238451337361,
                11.26863552351778,
                145.38174612503053,
            ],
        ),
        (
            0.1,
            2.0,
            [
                0.011296964989239874,
                0.017630092271796027,
                0.03520997240450257,
                0.06675802851688276,
                1.650021505380192,
                35.192032171512864,
            ],
        ),
    ];
    let orders = [2.0, 3.0, 5.5, 10.0, 32.0, 300.0];
    for (q, sigma, expected) in cases {
        for (a, e) in orders.iter().zip(expected) {
            let got = rdp::rdp_wor_gaussian(q, sigma, *a);
            assert!(
                got >= e * (1.0 - 1e-9),
                "q={q} sigma={sigma} alpha={a}: {got} < {e}"
            );
            if *a == 2.0 || *a == 300.0 {
                assert!(
                    rel_err(got, e) < 1e-9,
                    "q={q} sigma={sigma} alpha={a}: {got} vs {e}"
                );
            }
        }
    }
}

#[test]
fn laplace_rdp_matches_dp_accounting() {
    // dp_accounting 0.6.0 `_laplace_rdp(0.5, a)` (Mironov 2017 Prop. 6), run here.
    for (a, e) in [
        (1.5, 0.15597787848573952),
        (2.0, 0.200303896173616),
        (10.0, 0.4286903864672748),
    ] {
        let got = rdp::rdp_laplace(0.5, a);
        assert!(rel_err(got, e) < 1e-12, "alpha={a}: {got} vs {e}");
    }
}
