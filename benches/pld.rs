//! PLD accountant benchmarks (issue 2 performance target and reference rows).
//!
//! `cargo bench --bench pld` (pin to one core with `taskset -c 0` to match the target).
//! Target: ε for q = 256/50000, σ = 1.0, 39,200 steps, interval 1e-4 (δ = 1e-5) in < 2 s on
//! one core and ≥ 10× faster than dp_accounting's PLDAccountant (scripts/compare_pld.py).
//! Each iteration builds a fresh accountant, composes and converts: the whole user-visible cost.
//!
//! Heterogeneous schedules (issue: tight accounting of long, changing schedules): 200 distinct σ
//! from 0.8 to 1.6 (exact: below the σ grid's threshold), and 40,000 distinct σ from 0.8 to 2.8
//! (σ rounded down to the default 2e-3 grid), q = 256/50000, δ = 1e-5. Targets: ≥ 100× faster
//! than dp_accounting's PLDAccountant on the first (scripts/compare_pld.py schedule200), under 2 s
//! for the second.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

use dpx::privacy::accountant::pld::{DEFAULT_VALUE_DISCRETIZATION_INTERVAL, PldAccountant};
use dpx::privacy::accountant::{Accountant, AccountantKind, AccountantOptions, new_accountant};
use dpx::privacy::event::{DpEvent, NeighbouringRelation};

fn epsilon(q: f64, sigma: f64, steps: u64, delta: f64) -> f64 {
    let mut acc = PldAccountant::new(
        NeighbouringRelation::AddOrRemoveOne,
        DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    );
    let step = DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma));
    acc.compose(&step.self_composed(steps), 1)
        .expect("supported event");
    acc.epsilon(delta).expect("valid delta").epsilon
}

/// ε of `n` steps with σ linear from `lo` to `hi` (every σ distinct), default accountant options.
fn schedule_epsilon(n: usize, lo: f64, hi: f64) -> f64 {
    let options = AccountantOptions::default();
    let mut acc = new_accountant(AccountantKind::Pld, &options).expect("pld builds");
    let q = 256.0 / 50000.0;
    let steps: Vec<DpEvent> = (0..n)
        .map(|i| {
            let sigma = lo + (hi - lo) * i as f64 / (n - 1) as f64;
            DpEvent::poisson_sampled(q, DpEvent::gaussian(sigma))
        })
        .collect();
    acc.compose(&DpEvent::Composed(steps), 1)
        .expect("supported event");
    acc.epsilon(1e-5).expect("valid delta").epsilon
}

fn bench_schedules(c: &mut Criterion) {
    let mut group = c.benchmark_group("pld_schedule");
    group.sample_size(10);
    group.bench_function("distinct_200_sigma_0.8_to_1.6", |b| {
        b.iter(|| schedule_epsilon(black_box(200), 0.8, 1.6))
    });
    group.bench_function("distinct_40000_sigma_0.8_to_2.8_grid_2e-3", |b| {
        b.iter(|| schedule_epsilon(black_box(40_000), 0.8, 2.8))
    });
    group.finish();
}

fn bench_pld(c: &mut Criterion) {
    let mut group = c.benchmark_group("pld_epsilon");
    group.sample_size(20);
    group.bench_function("target_q256of50000_sigma1_T39200", |b| {
        b.iter(|| epsilon(black_box(256.0 / 50000.0), black_box(1.0), 39_200, 1e-5))
    });
    // docs/reference_vectors.md row 7
    group.bench_function("row7_q0.01_sigma0.7_T120", |b| {
        b.iter(|| epsilon(black_box(0.01), black_box(0.7), 120, 1e-5))
    });
    // docs/reference_vectors.md row 9
    group.bench_function("row9_q0.1_sigma3_T512", |b| {
        b.iter(|| epsilon(black_box(0.1), black_box(3.0), 512, 1e-6))
    });
    group.finish();
}

criterion_group!(benches, bench_pld, bench_schedules);
criterion_main!(benches);
