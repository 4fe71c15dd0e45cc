//! Tests of [`super`]: the epoch PLD of random allocation against exact Rényi moments (remove
//! direction), the Gaussian mechanism at t = 1, Monte Carlo estimates of δ(ε) in both
//! directions, the RDP analysis and Poisson sampling at rate 1/t (large t).

use super::*;
use crate::privacy::accountant::pld::PldAccountant;
use crate::privacy::accountant::{Accountant, AccountantKind, AccountantOptions, new_accountant};
use crate::privacy::event::DpEvent;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};

const ADD_REMOVE: NeighbouringRelation = NeighbouringRelation::AddOrRemoveOne;

/// E_Q[(S/t)^α] exactly: the moments of S = Σ v_i by adding one term at a time,
/// m_k(S + v) = Σ_j C(k, j) m_j(S) E v^{k−j}, E v^k = e^{k(k−1)/(2σ²)}.
fn exact_remove_moment(sigma: f64, t: u64, alpha: usize) -> f64 {
    let ev = |k: usize| ((k * k.saturating_sub(1)) as f64 / (2.0 * sigma * sigma)).exp();
    let binom = |n: usize, k: usize| (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64);
    let mut m: Vec<f64> = (0..=alpha)
        .map(|k| ev(k) / (t as f64).powi(k as i32))
        .collect();
    for _ in 1..t {
        m = (0..=alpha)
            .map(|k| {
                (0..=k)
                    .map(|j| binom(k, j) * m[j] * ev(k - j) / (t as f64).powi((k - j) as i32))
                    .sum()
            })
            .collect();
    }
    m[alpha]
}

#[test]
fn remove_direction_renyi_moments_are_pessimistic_and_tight() {
    // E_P[e^{(α−1)L}] = E_Q[(S/t)^α] from the lattice distribution of S (finite mass), against
    // the exact multinomial moments: at least the exact value (S is rounded up; the tail above
    // the top carries < 1e−6 of these moments here), and within a few h·α of it.
    for (sigma, t) in [(2.0, 10u64), (3.0, 100), (2.0, 49)] {
        let lattice = direction_pmf(sigma, t, LATTICE_STEP, Direction::Remove).unwrap();
        for alpha in 2..=8usize {
            let got: f64 = lattice
                .probs()
                .iter()
                .enumerate()
                .map(|(i, &p)| {
                    let s = (lattice.lower() + i as i64) as f64 * lattice.interval();
                    p * (s / t as f64).powi(alpha as i32 - 1)
                })
                .sum();
            let exact = exact_remove_moment(sigma, t, alpha);
            // (the moment of P/Q under P is the α-th moment under Q)
            let ratio = got / exact;
            assert!(
                ratio >= 1.0,
                "σ={sigma} t={t} α={alpha}: {got} < exact {exact}"
            );
            assert!(
                ratio <= 1.0 + 3.0 * alpha as f64 * LATTICE_STEP,
                "σ={sigma} t={t} α={alpha}: {got} vs exact {exact} (ratio {ratio})"
            );
        }
    }
}

/// δ(ε) of the Gaussian mechanism with sensitivity 1 (Balle & Wang 2018, Thm 8).
fn gaussian_delta(sigma: f64, eps: f64) -> f64 {
    normal_cdf(-eps * sigma + 0.5 / sigma) - eps.exp() * normal_cdf(-eps * sigma - 0.5 / sigma)
}

#[test]
fn one_step_is_the_gaussian_mechanism() {
    // t = 1 by the lattice (not the accountant's shortcut): both directions are the Gaussian.
    let sigma = 1.5;
    let step = LATTICE_STEP;
    for direction in [Direction::Remove, Direction::Add] {
        let lattice = direction_pmf(sigma, 1, step, direction).unwrap();
        let pmf = loss_pmf(&lattice, 1, direction, 1e-4).unwrap();
        for eps in [0.0, 0.25, 0.5, 1.0, 1.5, 2.0] {
            let exact = gaussian_delta(sigma, eps);
            let got = pmf.delta_for_epsilon(eps);
            assert!(
                got >= exact - 1e-12,
                "{direction:?} ε={eps}: {got} < {exact}"
            );
            assert!(
                got <= exact * 1.01 + 1e-9,
                "{direction:?} ε={eps}: {got} ≫ {exact}"
            );
        }
    }
    // and the accountant's t = 1 is exactly the Gaussian's PLD
    let one = epoch_pld(sigma, 1, 1e-4).unwrap();
    let gaussian = PrivacyLossDistribution::from_gaussian(sigma, 1.0, ADD_REMOVE, 1e-4).unwrap();
    assert_eq!(one, gaussian);
}

/// Monte Carlo δ(ε) of one epoch for both directions (fixed seed): (remove, add, standard
/// error of each).
fn monte_carlo(sigma: f64, t: u64, eps: f64, samples: usize) -> [(f64, f64); 2] {
    let mut rng = StdRng::seed_from_u64(20261127);
    let s = 1.0 / sigma;
    let mut sums = [(0.0f64, 0.0f64); 2];
    for _ in 0..samples {
        for (which, present) in [(0usize, true), (1, false)] {
            let mut total = 0.0;
            for i in 0..t {
                let z: f64 = StandardNormal.sample(&mut rng);
                let mean = if present && i == 0 {
                    0.5 * s * s
                } else {
                    -0.5 * s * s
                };
                total += (mean + s * z).exp();
            }
            let loss = (total / t as f64).ln();
            let loss = if present { loss } else { -loss };
            let x = (-(eps - loss).exp_m1()).max(0.0);
            sums[which].0 += x;
            sums[which].1 += x * x;
        }
    }
    sums.map(|(a, b)| {
        let mean = a / samples as f64;
        let var = (b / samples as f64 - mean * mean).max(0.0);
        (mean, (var / samples as f64).sqrt())
    })
}

#[test]
fn both_directions_bound_a_monte_carlo_estimate() {
    for (sigma, t, eps) in [(1.0, 10u64, 0.2), (0.9, 4, 0.5), (2.0, 30, 0.02)] {
        let pld = epoch_pld(sigma, t, 1e-4).unwrap();
        let [(remove, se_r), (add, se_a)] = monte_carlo(sigma, t, eps, 200_000);
        let got_r = pld.pmf_remove().delta_for_epsilon(eps);
        let got_a = pld.pmf_add().delta_for_epsilon(eps);
        assert!(
            got_r >= remove - 4.0 * se_r,
            "σ={sigma} t={t} remove: {got_r} < MC {remove}±{se_r}"
        );
        assert!(
            got_a >= add - 4.0 * se_a,
            "σ={sigma} t={t} add: {got_a} < MC {add}±{se_a}"
        );
        // and close to it (the lattice moves losses by about h)
        assert!(
            got_r <= remove + 4.0 * se_r + 2e-3 * remove,
            "remove {got_r} vs {remove}"
        );
        assert!(
            got_a <= add + 4.0 * se_a + 2e-3 * add,
            "add {got_a} vs {add}"
        );
    }
}

fn epsilon_of(acc: &mut dyn Accountant, event: &DpEvent, count: u64, delta: f64) -> f64 {
    acc.compose(event, count).unwrap();
    acc.epsilon(delta).unwrap().epsilon
}

#[test]
fn between_the_lower_estimate_and_the_rdp_analysis() {
    for (sigma, t, epochs) in [(1.0156, 49u64, 60u64), (2.0, 20, 10), (0.9, 118, 40)] {
        let event = DpEvent::random_allocation(t, DpEvent::gaussian(sigma));
        let pld = epsilon_of(
            &mut PldAccountant::new(ADD_REMOVE, 1e-4),
            &event,
            epochs,
            1e-5,
        );
        let options = AccountantOptions::default();
        let mut rdp = new_accountant(AccountantKind::Rdp, &options).unwrap();
        let rdp = epsilon_of(rdp.as_mut(), &event, epochs, 1e-5);
        let lower = epsilon_of(
            &mut PldAccountant::lower_estimate(ADD_REMOVE, 1e-3),
            &event,
            epochs,
            1e-5,
        );
        assert!(pld < rdp, "σ={sigma} t={t}: PLD {pld} ≥ RDP {rdp}");
        assert!(
            pld > lower,
            "σ={sigma} t={t}: PLD {pld} ≤ lower estimate {lower}"
        );
    }
}

#[test]
fn many_steps_approach_poisson_sampling() {
    // t = 10⁴: one epoch is close to t steps of Poisson sampling at rate 1/t (Feldman &
    // Shenfeld 2025: as t grows, random allocation's privacy tends to Poisson sampling's).
    let (sigma, t, epochs) = (1.2, 10_000u64, 50u64);
    let allocation = epsilon_of(
        &mut PldAccountant::new(ADD_REMOVE, 1e-4),
        &DpEvent::random_allocation(t, DpEvent::gaussian(sigma)),
        epochs,
        1e-5,
    );
    // Poisson sampling on a loss grid of 1e-5: at 1e-4 its 500,000 tiny steps each round up
    // enough to make it 9% loose (ε 0.2567 against 0.2349 at 1e-5).
    let poisson = epsilon_of(
        &mut PldAccountant::new(ADD_REMOVE, 1e-5),
        &DpEvent::poisson_sampled(1.0 / t as f64, DpEvent::gaussian(sigma)),
        t * epochs,
        1e-5,
    );
    assert!(
        (allocation / poisson - 1.0).abs() < 0.05,
        "allocation {allocation} vs Poisson {poisson}"
    );
}

#[test]
fn small_noise_falls_back_to_the_unamplified_gaussian() {
    assert_eq!(epoch_method(0.5, 100), EpochMethod::Gaussian);
    assert!(matches!(
        epoch_method(1.0, 100),
        EpochMethod::Lattice { .. }
    ));
    let fallback = epoch_pld(0.5, 100, 1e-4).unwrap();
    let gaussian = PrivacyLossDistribution::from_gaussian(0.5, 1.0, ADD_REMOVE, 1e-4).unwrap();
    assert_eq!(fallback, gaussian);
}

#[test]
fn the_records_term_does_not_set_the_step_and_its_cut_is_bounded() {
    // σ = 0.71, t = 118 (MNIST, B = 512, ε ≈ 8): the record's term at tail 1e-13/t would need a
    // step 3.5× coarser than the absent terms' top; the step now reaches that top, and what the
    // record's term leaves above the lattice (loss +∞) stays within its budget.
    let (sigma, t) = (0.71, 118u64);
    let EpochMethod::Lattice { step } = epoch_method(sigma, t) else {
        panic!("σ = {sigma}, t = {t} should use the lattice");
    };
    let points = MAX_TERM_POINTS as f64;
    assert!(step * points >= term_top(sigma, t, false), "step {step}");
    assert!(
        step * points < term_top(sigma, t, true) / 3.0,
        "step {step}"
    );
    let lattice = direction_pmf(sigma, t, step, Direction::Remove).unwrap();
    let cut = lattice.infinity_mass();
    assert!(
        cut > TERM_TAIL_MASS && cut <= PRESENT_TAIL_MASS + TERM_TAIL_MASS + 1e-14,
        "mass at +∞: {cut}"
    );
    // The add direction never uses the record's term: its +∞ mass is the composition's only.
    let add = direction_pmf(sigma, t, step, Direction::Add).unwrap();
    assert!(add.infinity_mass() <= 1e-14, "{}", add.infinity_mass());
}
