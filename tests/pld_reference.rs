//! Reference vectors for the PLD accountant (docs/reference_vectors.md), each
//! test naming its row. dp_accounting (PLDAccountant, interval 1e-4, connect-the-dots) is the
//! reference implementation; its values were re-run with scripts/compare_pld.py
//! (dp-accounting 0.6.0) where the table gives only a rounded number.

use dpx::privacy::accountant::Accountant;
use dpx::privacy::accountant::pld::{DEFAULT_VALUE_DISCRETIZATION_INTERVAL, PldAccountant};
use dpx::privacy::event::{DpEvent, NeighbouringRelation};

fn sgm(q: f64, sigma: f64, steps: u64) -> DpEvent {
    let step = if q < 1.0 {
        DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma))
    } else {
        DpEvent::gaussian(sigma)
    };
    step.self_composed(steps)
}

fn pld_epsilon(q: f64, sigma: f64, steps: u64, delta: f64) -> f64 {
    let mut acc = PldAccountant::new(
        NeighbouringRelation::AddOrRemoveOne,
        DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    );
    acc.compose(&sgm(q, sigma, steps), 1).unwrap();
    let report = acc.epsilon(delta).unwrap();
    assert!(report.notes.iter().any(|n| n.contains("upper bound")));
    report.epsilon
}

fn pld_delta(q: f64, sigma: f64, steps: u64, epsilon: f64) -> f64 {
    let mut acc = PldAccountant::new(
        NeighbouringRelation::AddOrRemoveOne,
        DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    );
    acc.compose(&sgm(q, sigma, steps), 1).unwrap();
    acc.delta(epsilon).unwrap()
}

/// |got − want| ≤ rel·want.
fn assert_rel(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want.abs(),
        "{what}: got {got}, want {want} (rel {:.2e})",
        (got - want).abs() / want.abs()
    );
}

#[test]
fn row7_tf_privacy_pld_2_4612381() {
    // docs/reference_vectors.md row 7: q 0.01, σ 0.7, T 120, δ 1e-5 → PLD 2.4612381 (asserted in
    // tensorflow/privacy compute_dp_sgd_privacy_test, no_microbatching_with_subsampling_pld).
    assert_rel(pld_epsilon(0.01, 0.7, 120, 1e-5), 2.4612381, 1e-3, "row 7");
}

#[test]
fn row8_tf_privacy_statement_pld_1_199() {
    // Row 8: q 64/10000, σ 1.0, T 782, δ 1e-6 → PLD 1.199 (asserted text; dp_accounting
    // 1.1986507747 by scripts/compare_pld.py).
    let eps = pld_epsilon(64.0 / 10000.0, 1.0, 782, 1e-6);
    assert!((eps - 1.199).abs() < 5e-4, "row 8: {eps}");
    assert_rel(eps, 1.1986507747, 1e-3, "row 8 vs dp_accounting");
}

#[test]
fn row9_jax_privacy_pld_3_77() {
    // Row 9: q 0.1, σ 3.0, T 512, δ 1e-6 → PLD 3.77 (jax_privacy docstring; dp_accounting
    // 3.7696865815 by scripts/compare_pld.py).
    let eps = pld_epsilon(0.1, 3.0, 512, 1e-6);
    assert!((eps - 3.77).abs() < 5e-3, "row 9: {eps}");
    assert_rel(eps, 3.7696865815, 1e-3, "row 9 vs dp_accounting");
}

#[test]
fn row10_opacus_mnist_pld_2_2955() {
    // Row 10: q 240/60000, σ 1.1, T 15000, δ 1e-5 → PLD 2.2955 [run]
    // (dp_accounting 2.2954679391 by scripts/compare_pld.py).
    assert_rel(
        pld_epsilon(240.0 / 60000.0, 1.1, 15000, 1e-5),
        2.2954679391,
        1e-3,
        "row 10",
    );
}

#[test]
fn row13_tf_tutorial_pld_2_3818() {
    // Row 13: q 256/60000, σ 1.1, T 14063, δ 1e-5 → PLD 2.3818 [run]
    // (dp_accounting 2.3817788126).
    assert_rel(
        pld_epsilon(256.0 / 60000.0, 1.1, 14063, 1e-5),
        2.3817788126,
        1e-3,
        "row 13",
    );
}

#[test]
fn row14_tf_tutorial_pld_0_8646_and_5_6397() {
    // Row 14: q 256/60000, σ 1.3, T 3516 → PLD 0.8646; σ 0.7, T 10547 → 5.6397 [run]
    // (dp_accounting 0.8645889420 and 5.6397164364).
    assert_rel(
        pld_epsilon(256.0 / 60000.0, 1.3, 3516, 1e-5),
        0.8645889420,
        1e-3,
        "row 14 (σ 1.3)",
    );
    assert_rel(
        pld_epsilon(256.0 / 60000.0, 0.7, 10547, 1e-5),
        5.6397164364,
        1e-3,
        "row 14 (σ 0.7)",
    );
}

#[test]
fn row18_gaussian_three_compositions_delta_0_126936() {
    // Row 18: q 1, σ √3, 3 compositions (μ = 1): δ(ε = 1) = 0.126936 (dp_accounting
    // pld_privacy_accountant_test::test_gaussian_basic, tol 1e-3); exact
    // Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = 0.1269367 [run].
    let delta = pld_delta(1.0, 3f64.sqrt(), 3, 1.0);
    assert!((delta - 0.126936).abs() < 1e-3, "row 18: {delta}");
    // upper bound of the exact value 0.12693673750664397 (mpmath, 30 digits)
    assert!(
        delta >= 0.126_936_737_506_643_97 - 1e-12,
        "row 18 not an upper bound: {delta}"
    );
}

#[test]
fn row19_poisson_gaussian_delta_0_15594() {
    // Row 19: q 0.2, σ 0.5, 3 compositions: δ(ε = 1) = 0.15594 (dp_accounting
    // test_poisson_subsampled_gaussian, tol 1e-3; dp_accounting 0.1559327762 today).
    let delta = pld_delta(0.2, 0.5, 3, 1.0);
    assert!((delta - 0.15594).abs() < 1e-3, "row 19: {delta}");
}

fn epsilon_of(relation: NeighbouringRelation, event: &DpEvent, delta: f64) -> f64 {
    let mut acc = PldAccountant::new(relation, DEFAULT_VALUE_DISCRETIZATION_INTERVAL);
    acc.compose(event, 1).unwrap();
    acc.epsilon(delta).unwrap().epsilon
}

#[test]
fn laplace_matches_dp_accounting() {
    // dp_accounting 0.6.0 PLDAccountant (scripts/compare_pld.py laplace_sampled laplace_full):
    // 50 × Poisson(0.1)-sampled Laplace(1), δ 1e-6 → 3.2019041335;
    // 10 × Laplace(2), δ 1e-6 → 4.9989780937.
    let sampled = DpEvent::poisson_sampled(0.1, DpEvent::laplace(1.0)).self_composed(50);
    let full = DpEvent::laplace(2.0).self_composed(10);
    let ar = NeighbouringRelation::AddOrRemoveOne;
    assert_rel(
        epsilon_of(ar, &sampled, 1e-6),
        3.2019041335,
        1e-3,
        "sampled Laplace",
    );
    assert_rel(
        epsilon_of(ar, &full, 1e-6),
        4.9989780937,
        1e-3,
        "full-batch Laplace",
    );
}

#[test]
fn tiny_sample_rate_matches_dp_accounting() {
    // dp_accounting 0.6.0 (scripts/compare_pld.py tiny_q): 1000 × Poisson(1e-5)-sampled
    // Gaussian(0.5), δ 1e-9 → 0.9100069793.
    let event = DpEvent::poisson_sampled(1e-5, DpEvent::gaussian(0.5)).self_composed(1000);
    assert_rel(
        epsilon_of(NeighbouringRelation::AddOrRemoveOne, &event, 1e-9),
        0.9100069793,
        1e-3,
        "tiny q",
    );
}

#[test]
fn replace_one_matches_dp_accounting() {
    // dp_accounting 0.6.0 with REPLACE_ONE (scripts/compare_pld.py replace_one): 100 ×
    // Poisson(0.05)-sampled Gaussian(1.0), δ 1e-5 → 4.8894908445.
    let event = DpEvent::poisson_sampled(0.05, DpEvent::gaussian(1.0)).self_composed(100);
    assert_rel(
        epsilon_of(NeighbouringRelation::ReplaceOne, &event, 1e-5),
        4.8894908445,
        1e-3,
        "replace-one",
    );
}

#[test]
#[ignore = "prints the dpx side of scripts/compare_pld.py; run with --release --ignored"]
fn print_cases() {
    let cases: [(&str, f64, f64, u64, f64); 8] = [
        ("target", 256.0 / 50000.0, 1.0, 39200, 1e-5),
        ("row7", 0.01, 0.7, 120, 1e-5),
        ("row8", 64.0 / 10000.0, 1.0, 782, 1e-6),
        ("row9", 0.1, 3.0, 512, 1e-6),
        ("row10", 240.0 / 60000.0, 1.1, 15000, 1e-5),
        ("row13", 256.0 / 60000.0, 1.1, 14063, 1e-5),
        ("row14a", 256.0 / 60000.0, 1.3, 3516, 1e-5),
        ("row14b", 256.0 / 60000.0, 0.7, 10547, 1e-5),
    ];
    for (name, q, sigma, steps, delta) in cases {
        let start = std::time::Instant::now();
        let eps = pld_epsilon(q, sigma, steps, delta);
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{name:8} q={q:.6} sigma={sigma} steps={steps} delta={delta:e} epsilon={eps:.10} \
             seconds={secs:.4}"
        );
    }
    for (name, q, sigma, steps, eps) in [
        ("row18", 1.0, 3f64.sqrt(), 3, 1.0),
        ("row19", 0.2, 0.5, 3, 1.0),
    ] {
        let start = std::time::Instant::now();
        let delta = pld_delta(q, sigma, steps, eps);
        let secs = start.elapsed().as_secs_f64();
        println!("{name:8} epsilon={eps} delta={delta:.10} seconds={secs:.4}");
    }
}
