//! PLD accountant benchmarks (issue 2 performance target and reference rows).
//!
//! `cargo bench --bench pld` (pin to one core with `taskset -c 0` to match the target).
//! Target: ε for q = 256/50000, σ = 1.0, 39,200 steps, interval 1e-4 (δ = 1e-5) in < 2 s on
//! one core and ≥ 10× faster than dp_accounting's PLDAccountant (scripts/compare_pld.py).
//! Each iteration builds a fresh accountant, composes and converts: the whole user-visible cost.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

use dpx::privacy::accountant::Accountant;
use dpx::privacy::accountant::pld::{DEFAULT_VALUE_DISCRETIZATION_INTERVAL, PldAccountant};
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

criterion_group!(benches, bench_pld);
criterion_main!(benches);
