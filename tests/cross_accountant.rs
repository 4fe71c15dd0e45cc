//! The cross-accountant property: for random plans (both neighbouring relations; Poisson
//! sampling, sampling without replacement, balls-in-bins epochs, unsampled releases; Gaussian and Laplace; one or two
//! segments of steps), every accountant whose report claims a proven upper bound
//! (`PrivacyReport::upper_bound`) reports an ε at least the **lower** estimate of the PLD
//! accountant (`PldAccountant::lower_estimate`: losses rounded down, realisable neighbouring
//! pairs, no tail truncation), minus a numerical tolerance. This is the test that catches an
//! accountant under-reporting ε: a wrong sensitivity under replace-one, an approximation marked
//! as a guarantee.
//!
//! `cargo test` runs a fixed sample of plans; `cargo test --test cross_accountant -- --ignored`
//! runs many more.

use dpx::privacy::accountant::pld::PldAccountant;
use dpx::privacy::accountant::{ALL_KINDS, AccountantKind, AccountantOptions, new_accountant};
use dpx::privacy::event::{DpEvent, NeighbouringRelation};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Grid of the lower estimate: coarse enough to keep un-truncated compositions small.
const LOWER_INTERVAL: f64 = 2e-3;

#[derive(Debug, Clone, Copy)]
enum Sampling {
    Poisson(f64),
    WithoutReplacement {
        dataset: u64,
        batch: u64,
    },
    /// Balls in bins: one random allocation over this many steps (the PLD lower estimate uses
    /// the epoch's first step, Poisson at rate 1/t).
    RandomAllocation(u64),
    Unsampled,
}

#[derive(Debug, Clone, Copy)]
enum Release {
    Gaussian(f64),
    Laplace(f64),
}

#[derive(Debug, Clone)]
struct Plan {
    relation: NeighbouringRelation,
    segments: Vec<(Sampling, Release, u64)>,
    delta: f64,
}

impl Plan {
    fn event(&self) -> DpEvent {
        let parts: Vec<DpEvent> = self
            .segments
            .iter()
            .map(|&(sampling, release, steps)| {
                let inner = match release {
                    Release::Gaussian(s) => DpEvent::gaussian(s),
                    Release::Laplace(b) => DpEvent::laplace(b),
                };
                let one = match sampling {
                    Sampling::Poisson(q) => DpEvent::poisson_sampled(q, inner),
                    Sampling::WithoutReplacement { dataset, batch } => {
                        DpEvent::sampled_without_replacement(dataset, batch, inner)
                    }
                    Sampling::RandomAllocation(t) => DpEvent::random_allocation(t, inner),
                    Sampling::Unsampled => inner,
                };
                one.self_composed(steps)
            })
            .collect();
        if parts.len() == 1 {
            parts.into_iter().next().unwrap_or(DpEvent::NoOp)
        } else {
            DpEvent::Composed(parts)
        }
    }
}

fn random_plan(rng: &mut StdRng) -> Plan {
    let relation = if rng.random_bool(0.5) {
        NeighbouringRelation::AddOrRemoveOne
    } else {
        NeighbouringRelation::ReplaceOne
    };
    let segments = (0..rng.random_range(1..=2))
        .map(|_| {
            let sampling = match rng.random_range(0..4) {
                3 => Sampling::RandomAllocation(rng.random_range(1..200u64)),
                0 => Sampling::Poisson(10f64.powf(rng.random_range(-2.5..0.0))),
                1 => {
                    let dataset = rng.random_range(10..5000u64);
                    let batch = if rng.random_bool(0.2) {
                        dataset
                    } else {
                        rng.random_range(1..=dataset)
                    };
                    Sampling::WithoutReplacement { dataset, batch }
                }
                _ => Sampling::Unsampled,
            };
            let release = if rng.random_bool(0.6) {
                Release::Gaussian(rng.random_range(0.6..6.0))
            } else {
                Release::Laplace(rng.random_range(1.0..20.0))
            };
            (sampling, release, rng.random_range(1..=60u64))
        })
        .collect();
    let delta = [1e-3, 1e-5, 1e-7][rng.random_range(0..3)];
    Plan {
        relation,
        segments,
        delta,
    }
}

/// ε of every accountant that accepts the plan and claims an upper bound, and the lower
/// estimate; panics with the plan when an upper bound is below the lower estimate.
/// Returns how many (accountant, plan) comparisons were made.
fn check_plan(plan: &Plan) -> usize {
    let event = plan.event();
    let mut lower = PldAccountant::lower_estimate(plan.relation, LOWER_INTERVAL);
    use dpx::privacy::accountant::Accountant;
    if lower.compose(&event, 1).is_err() {
        return 0;
    }
    let lower_eps = lower
        .epsilon(plan.delta)
        .expect("lower estimate converts")
        .epsilon;
    let options = AccountantOptions {
        relation: plan.relation,
        ..AccountantOptions::default()
    };
    let mut compared = 0;
    for kind in ALL_KINDS {
        let mut acc = new_accountant(kind, &options).expect("accountant builds");
        if acc.compose(&event, 1).is_err() {
            continue; // outside what this accountant analyses: it refuses, which is fine
        }
        let Ok(report) = acc.epsilon(plan.delta) else {
            continue;
        };
        if !report.upper_bound {
            continue;
        }
        let tolerance = 1e-4 * lower_eps.max(1.0);
        assert!(
            report.epsilon >= lower_eps - tolerance,
            "{kind} reports epsilon {} below the PLD lower estimate {lower_eps} for {plan:?} \
             (notes: {:?})",
            report.epsilon,
            report.notes
        );
        compared += 1;
    }
    compared
}

#[test]
fn upper_bounds_stay_above_the_pld_lower_estimate() {
    let mut rng = StdRng::seed_from_u64(20261125);
    let compared: usize = (0..40).map(|_| check_plan(&random_plan(&mut rng))).sum();
    assert!(compared >= 40, "only {compared} comparisons were made");
}

#[test]
#[ignore = "many plans: cargo test --test cross_accountant -- --ignored"]
fn upper_bounds_stay_above_the_pld_lower_estimate_many() {
    let mut rng = StdRng::seed_from_u64(7);
    let compared: usize = (0..1500).map(|_| check_plan(&random_plan(&mut rng))).sum();
    assert!(compared >= 1500, "only {compared} comparisons were made");
}

/// The two under-reports this test was written for, as fixed cases.
#[test]
fn replace_one_full_batch_is_the_gaussian_of_distance_two() {
    // σ = 2.1117, q = 1, T = 2, δ = 1e-5, replace-one: the Gaussian mechanism with
    // sensitivity 2 has ε ≈ 6.162 (exact), and every upper-bound accountant must say at least
    // that (before the fix RDP and zCDP said 3.00, GDP 2.77).
    let event = DpEvent::gaussian(2.111713409423828).self_composed(2);
    let options = AccountantOptions {
        relation: NeighbouringRelation::ReplaceOne,
        ..AccountantOptions::default()
    };
    for kind in [
        AccountantKind::Rdp,
        AccountantKind::Pld,
        AccountantKind::Zcdp,
        AccountantKind::Gdp,
    ] {
        let mut acc = new_accountant(kind, &options).unwrap();
        acc.compose(&event, 1).unwrap();
        let eps = acc.epsilon(1e-5).unwrap().epsilon;
        assert!(eps >= 6.16, "{kind}: {eps}");
    }
    // Laplace of scale 1, replace-one: pure ε = 2 (distance 2), not 1.
    let mut pure = new_accountant(AccountantKind::Pure, &options).unwrap();
    pure.compose(&DpEvent::laplace(1.0), 1).unwrap();
    assert_eq!(pure.epsilon(0.0).unwrap().epsilon, 2.0);
}

#[test]
fn gdp_on_subsampled_steps_is_not_an_upper_bound() {
    let mut acc = new_accountant(AccountantKind::Gdp, &AccountantOptions::default()).unwrap();
    acc.compose(
        &DpEvent::poisson_sampled(0.01, DpEvent::gaussian(1.0)).self_composed(1000),
        1,
    )
    .unwrap();
    assert!(!acc.epsilon(1e-5).unwrap().upper_bound);
    let mut full = new_accountant(AccountantKind::Gdp, &AccountantOptions::default()).unwrap();
    full.compose(&DpEvent::gaussian(3.0).self_composed(10), 1)
        .unwrap();
    assert!(full.epsilon(1e-5).unwrap().upper_bound);
}

#[test]
fn without_replacement_is_monotone_up_to_the_full_batch() {
    // Before the fix, 100 records under replace-one: batch 99 gave 3.62 and batch 100 gave
    // 3.00 (Wang et al.'s bound exceeds the base mechanism near q = 1). Now the bound is capped
    // by the base mechanism, and the full batch is the distance-2 Gaussian.
    let options = AccountantOptions {
        relation: NeighbouringRelation::ReplaceOne,
        ..AccountantOptions::default()
    };
    let eps = |batch: u64| {
        let mut acc = new_accountant(AccountantKind::Rdp, &options).unwrap();
        acc.compose(
            &DpEvent::sampled_without_replacement(100, batch, DpEvent::gaussian(2.111713409423828))
                .self_composed(2),
            1,
        )
        .unwrap();
        acc.epsilon(1e-5).unwrap().epsilon
    };
    let (e99, e100) = (eps(99), eps(100));
    assert!(e99 <= e100 + 1e-12, "batch 99: {e99}, batch 100: {e100}");
    assert!(e100 >= 6.16, "{e100}");
}

/// The PLD accountant's own analysis of random allocation (balls-in-bins epochs) is an upper
/// bound: above its lower estimate (the epoch's first step alone), and below the RDP analysis.
#[test]
fn pld_random_allocation_stays_above_its_lower_estimate() {
    use dpx::privacy::accountant::Accountant;
    for (sigma, t, epochs, delta) in [
        (0.8, 20u64, 10u64, 1e-5),
        (1.5, 100, 5, 1e-3),
        (3.0, 7, 30, 1e-7),
        (1.2, 2, 50, 1e-5),
    ] {
        let event = DpEvent::random_allocation(t, DpEvent::gaussian(sigma)).self_composed(epochs);
        let mut lower = PldAccountant::lower_estimate(NeighbouringRelation::AddOrRemoveOne, 1e-3);
        lower.compose(&event, 1).unwrap();
        let lower = lower.epsilon(delta).unwrap().epsilon;
        let options = AccountantOptions::default();
        let mut eps = [0.0; 2];
        for (e, kind) in eps
            .iter_mut()
            .zip([AccountantKind::Pld, AccountantKind::Rdp])
        {
            let mut acc = new_accountant(kind, &options).unwrap();
            acc.compose(&event, 1).unwrap();
            let report = acc.epsilon(delta).unwrap();
            assert!(report.upper_bound, "{kind}");
            *e = report.epsilon;
        }
        let [pld, rdp] = eps;
        assert!(
            pld >= lower,
            "σ={sigma} t={t}: PLD {pld} < lower estimate {lower}"
        );
        assert!(pld <= rdp, "σ={sigma} t={t}: PLD {pld} > RDP {rdp}");
    }
}
