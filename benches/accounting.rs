//! Accounting speed (criterion). Targets from issue 2: RDP ε for a constant-σ plan < 1 ms; a
//! 40,000-step schedule with all-distinct σ_t < 50 ms; RDP calibration < 20 ms.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use dpx::privacy::accountant::Accountant;
use dpx::privacy::accountant::rdp::RdpAccountant;
use dpx::privacy::accountant::{AccountantKind, AccountantOptions, new_accountant};
use dpx::privacy::calibrate::{Target, calibrate_noise_multiplier, dp_sgd_event};
use dpx::privacy::event::{DpEvent, NeighbouringRelation};

fn constant_plan(c: &mut Criterion) {
    let options = AccountantOptions::default();
    c.bench_function("rdp_constant_sigma_plan", |b| {
        b.iter(|| {
            let mut acc = new_accountant(AccountantKind::Rdp, &options).unwrap();
            acc.compose(
                &dp_sgd_event(black_box(240.0 / 60000.0), black_box(1.1), 15000),
                1,
            )
            .unwrap();
            acc.epsilon(1e-5).unwrap().epsilon
        })
    });
}

fn distinct_schedule(c: &mut Criterion) {
    let options = AccountantOptions::default();
    let q = 256.0 / 50000.0;
    // 40,000 steps, every σ_t distinct: a linear ramp from 0.8 to 2.8.
    let steps: Vec<DpEvent> = (0..40_000)
        .map(|t| {
            DpEvent::poisson_sampled(q, DpEvent::gaussian(0.8 + 2.0 * f64::from(t) / 40_000.0))
        })
        .collect();
    c.bench_function("rdp_40000_distinct_sigma_schedule", |b| {
        b.iter(|| {
            let mut acc = new_accountant(AccountantKind::Rdp, &options).unwrap();
            for step in &steps {
                acc.compose(step, 1).unwrap();
            }
            acc.epsilon(1e-5).unwrap().epsilon
        })
    });
}

fn distinct_schedule_grid(c: &mut Criterion) {
    // The same schedule with σ rounded down to a geometric grid of relative step 1e-3
    // (conservative; RdpAccountant::with_sigma_grid).
    let q = 256.0 / 50000.0;
    let steps: Vec<DpEvent> = (0..40_000)
        .map(|t| {
            DpEvent::poisson_sampled(q, DpEvent::gaussian(0.8 + 2.0 * f64::from(t) / 40_000.0))
        })
        .collect();
    c.bench_function("rdp_40000_distinct_sigma_schedule_grid_1e-3", |b| {
        b.iter(|| {
            let mut acc = RdpAccountant::with_defaults(NeighbouringRelation::AddOrRemoveOne)
                .with_sigma_grid(1e-3)
                .unwrap();
            for step in &steps {
                acc.compose(step, 1).unwrap();
            }
            acc.epsilon(1e-5).unwrap().epsilon
        })
    });
}

fn calibration(c: &mut Criterion) {
    let options = AccountantOptions::default();
    c.bench_function("rdp_calibrate_noise_multiplier", |b| {
        b.iter(|| {
            let factory = || new_accountant(AccountantKind::Rdp, &options);
            let target = Target {
                epsilon: black_box(3.0),
                delta: 1e-5,
            };
            calibrate_noise_multiplier(&factory, &|s| dp_sgd_event(0.004, s, 10_000), target)
                .unwrap()
                .value
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = constant_plan, distinct_schedule, distinct_schedule_grid, calibration
}
criterion_main!(benches);
