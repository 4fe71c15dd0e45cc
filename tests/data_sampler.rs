//! Statistical tests of the batch samplers with fixed seeds. Each tolerance is 5 standard
//! deviations of the statistic under the sampler's exact distribution, so a correct sampler
//! fails with probability below about 1e−6 per check (and never, at these fixed seeds).

use dpx::data::DataError;
use dpx::data::sampler::{
    BallsInBinsSampler, CyclicPoissonSampler, FixedOrderSampler, FixedSizeSampler, PoissonSampler,
    Sampler, ShuffleSampler,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn assert_sorted_distinct_below(batch: &[usize], n: usize) {
    assert!(batch.windows(2).all(|w| w[0] < w[1]), "{batch:?}");
    assert!(batch.iter().all(|&i| i < n));
}

/// Poisson(q = 0.05) over n = 1000 for S = 4000 steps.
/// - total selections ~ Binomial(nS, q): mean 200000, sd √(nSq(1−q)) = 435.9;
/// - batch-size variance estimates nq(1−q) = 47.5 with relative sd ≈ √(2/S) = 0.0224;
/// - per-index counts ~ Binomial(S, q); Pearson's Σ(c − Sq)²/(Sq(1−q)) ~ χ²(n) (approx.):
///   mean 1000, sd √2000 = 44.7;
/// - adjacent pairs (i, i+1) both selected: mean (n−1)Sq² = 9990, sd ≤ √9990 ≈ 100 (a sum of
///   weakly dependent indicators; the gap sampler would distort it if gaps were wrong).
#[test]
fn poisson_inclusion_is_independent_with_rate_q() {
    let (n, q, steps) = (1000usize, 0.05f64, 4000usize);
    let s = PoissonSampler::new(n, q).unwrap();
    assert_eq!(s.expected_batch_size(), 50.0);
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let mut counts = vec![0u64; n];
    let (mut total, mut sum_sq, mut pairs) = (0u64, 0f64, 0u64);
    let mut batch = Vec::new();
    for _ in 0..steps {
        s.next_batch_into(&mut rng, &mut batch);
        assert_sorted_distinct_below(&batch, n);
        total += batch.len() as u64;
        sum_sq += (batch.len() as f64).powi(2);
        pairs += batch.windows(2).filter(|w| w[1] == w[0] + 1).count() as u64;
        for &i in &batch {
            counts[i] += 1;
        }
    }
    let mean_total = (n * steps) as f64 * q;
    assert!((total as f64 - mean_total).abs() < 5.0 * (mean_total * (1.0 - q)).sqrt());
    let mean_b = total as f64 / steps as f64;
    let var_b = sum_sq / steps as f64 - mean_b * mean_b;
    let want_var = n as f64 * q * (1.0 - q);
    assert!(
        (var_b / want_var - 1.0).abs() < 5.0 * (2.0 / steps as f64).sqrt(),
        "{var_b}"
    );
    let e = steps as f64 * q;
    let chi2: f64 = counts
        .iter()
        .map(|&c| (c as f64 - e).powi(2) / (e * (1.0 - q)))
        .sum();
    assert!(
        (chi2 - n as f64).abs() < 5.0 * (2.0 * n as f64).sqrt(),
        "{chi2}"
    );
    let want_pairs = (n - 1) as f64 * steps as f64 * q * q;
    assert!(
        (pairs as f64 - want_pairs).abs() < 5.0 * want_pairs.sqrt(),
        "{pairs}"
    );
}

/// n = 10, q = 0.1: P(empty batch) = 0.9^10 = 0.34868; over S = 20000 steps the empty count is
/// Binomial(S, 0.34868), sd 67.4.
#[test]
fn poisson_batches_may_be_empty_at_the_right_rate() {
    let s = PoissonSampler::new(10, 0.1).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let steps = 20_000;
    let empty = (0..steps)
        .filter(|_| s.next_batch(&mut rng).is_empty())
        .count();
    let p = 0.9f64.powi(10);
    let sd = (steps as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (empty as f64 - steps as f64 * p).abs() < 5.0 * sd,
        "{empty}"
    );
}

/// A tiny rate over a large n costs O(batch): 1e−6 over 1e9 "examples" runs instantly and
/// averages q·n = 1000 (Poisson-like, sd √1000 ≈ 31.6 per draw; mean of 20 draws sd 7.1).
#[test]
fn poisson_is_output_sensitive() {
    let s = PoissonSampler::new(1_000_000_000, 1e-6).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mean = (0..20).map(|_| s.next_batch(&mut rng).len()).sum::<usize>() as f64 / 20.0;
    assert!(
        (mean - 1000.0).abs() < 5.0 * (1000.0f64 / 20.0).sqrt(),
        "{mean}"
    );
}

#[test]
fn poisson_edge_rates() {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    assert!(
        PoissonSampler::new(5, 0.0)
            .unwrap()
            .next_batch(&mut rng)
            .is_empty()
    );
    assert_eq!(
        PoissonSampler::new(5, 1.0).unwrap().next_batch(&mut rng),
        vec![0, 1, 2, 3, 4]
    );
    assert!(
        PoissonSampler::new(0, 0.5)
            .unwrap()
            .next_batch(&mut rng)
            .is_empty()
    );
    for bad in [-0.1, 1.5, f64::NAN] {
        assert!(matches!(
            PoissonSampler::new(5, bad),
            Err(DataError::InvalidParameter { .. })
        ));
    }
}

#[test]
fn poisson_is_deterministic_from_the_rng_seed() {
    let s = PoissonSampler::new(500, 0.1).unwrap();
    let draw = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..5).map(|_| s.next_batch(&mut rng)).collect::<Vec<_>>()
    };
    assert_eq!(draw(1), draw(1));
    assert_ne!(draw(1), draw(2));
}

/// n = 10, B = 3: three disjoint batches per epoch (one example dropped), then a new
/// permutation. Over S = 30000 epochs each example is in the epoch's first batch with
/// probability 3/10: count ~ Binomial(S, 0.3), sd 79.4.
#[test]
fn shuffle_covers_each_epoch_and_is_uniform() {
    let mut s = ShuffleSampler::new(10, 3).unwrap();
    assert_eq!((s.batches_per_epoch(), s.expected_batch_size()), (3, 3.0));
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let epochs = 30_000;
    let mut first = [0u64; 10];
    for e in 0..epochs {
        let mut seen = Vec::new();
        for b in 0..3 {
            let batch = s.next_batch(&mut rng);
            assert_eq!(batch.len(), 3);
            assert_sorted_distinct_below(&batch, 10);
            if b == 0 {
                batch.iter().for_each(|&i| first[i] += 1);
            }
            seen.extend(batch);
        }
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 9, "epoch {e}: batches overlap");
        assert_eq!(s.epoch(), e as u64 + 1);
    }
    let sd = (epochs as f64 * 0.3 * 0.7).sqrt();
    for (i, &c) in first.iter().enumerate() {
        assert!(
            (c as f64 - epochs as f64 * 0.3).abs() < 5.0 * sd,
            "{i}: {c}"
        );
    }
    assert!(matches!(
        ShuffleSampler::new(3, 4),
        Err(DataError::InvalidParameter { .. })
    ));
    assert!(matches!(
        ShuffleSampler::new(3, 0),
        Err(DataError::InvalidParameter { .. })
    ));
}

/// n = 50, B = 10, S = 20000: every batch has exactly 10 distinct indices; each index is in a
/// step's batch with probability p = B/n = 0.2, independently across steps, so its count has
/// variance Sp(1−p) and Pearson's Σ(c − Sp)²/(Sp(1−p)) has mean exactly n = 50 and sd about
/// √(2n) = 10.
#[test]
fn fixed_size_batches_are_uniform_subsets() {
    let s = FixedSizeSampler::new(50, 10).unwrap();
    assert_eq!(s.expected_batch_size(), 10.0);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let steps = 20_000;
    let mut counts = vec![0u64; 50];
    for _ in 0..steps {
        let b = s.next_batch(&mut rng);
        assert_eq!(b.len(), 10);
        assert_sorted_distinct_below(&b, 50);
        b.iter().for_each(|&i| counts[i] += 1);
    }
    let e = steps as f64 * 0.2;
    let chi2: f64 = counts
        .iter()
        .map(|&c| (c as f64 - e).powi(2) / (e * 0.8))
        .sum();
    assert!((chi2 - 50.0).abs() < 5.0 * 100f64.sqrt(), "{chi2}");
    assert!(matches!(
        FixedSizeSampler::new(5, 6),
        Err(DataError::InvalidParameter { .. })
    ));
}

#[test]
fn sampler_enum_dispatches() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut samplers = [
        Sampler::Poisson(PoissonSampler::new(100, 0.2).unwrap()),
        Sampler::Shuffle(ShuffleSampler::new(100, 20).unwrap()),
        Sampler::FixedSize(FixedSizeSampler::new(100, 20).unwrap()),
    ];
    for s in &mut samplers {
        assert_eq!(s.expected_batch_size(), 20.0);
        let b = s.next_batch(&mut rng);
        assert_sorted_distinct_below(&b, 100);
    }
}

/// b-min-separated Poisson sampling, n = 3000, b = 6, q_group = 0.3 over S = 6000 steps:
/// - every example is drawn only in steps t ≡ g (mod b) for its group g, so two draws of one
///   example are at least b steps apart;
/// - group sizes ~ Binomial(n, 1/b): mean 500, sd √(n/b(1 − 1/b)) = 20.4;
/// - an example of group g is drawn in each of its S/b = 1000 slots with probability q: its
///   count ~ Binomial(1000, 0.3), and the total over all examples has mean n·1000·q = 900000,
///   sd √(n·1000·q(1 − q)) = 793.7.
#[test]
fn cyclic_poisson_draws_each_example_only_in_its_groups_steps() {
    let (n, b, q, steps) = (3000usize, 6usize, 0.3f64, 6000u64);
    let mut partition = ChaCha8Rng::seed_from_u64(5);
    let mut s = CyclicPoissonSampler::new(n, b, q, &mut partition).unwrap();
    assert_eq!(s.expected_batch_size(), q * n as f64 / b as f64);
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let mut group = vec![usize::MAX; n];
    let mut last = vec![None::<u64>; n];
    let mut total = 0u64;
    let mut batch = Vec::new();
    for t in 0..steps {
        assert_eq!(s.step(), t);
        s.next_batch_into(&mut rng, &mut batch);
        assert_sorted_distinct_below(&batch, n);
        total += batch.len() as u64;
        for &i in &batch {
            let g = (t % b as u64) as usize;
            assert!(
                group[i] == usize::MAX || group[i] == g,
                "example {i} in two groups"
            );
            group[i] = g;
            if let Some(prev) = last[i] {
                assert!(t - prev >= b as u64);
            }
            last[i] = Some(t);
        }
    }
    assert!(
        group.iter().all(|&g| g != usize::MAX),
        "an example never drawn"
    );
    for g in 0..b {
        let size = group.iter().filter(|&&x| x == g).count() as f64;
        assert!((size - 500.0).abs() < 5.0 * 20.4, "group {g}: {size}");
    }
    let mean = n as f64 * (steps / b as u64) as f64 * q;
    assert!(
        (total as f64 - mean).abs() < 5.0 * (mean * (1.0 - q)).sqrt(),
        "{total}"
    );
}

#[test]
fn cyclic_poisson_with_one_group_is_poisson_draw_for_draw() {
    let (n, q) = (500usize, 0.07f64);
    let plain = PoissonSampler::new(n, q).unwrap();
    let mut partition = ChaCha8Rng::seed_from_u64(1);
    let untouched = partition.clone();
    let mut cyclic = CyclicPoissonSampler::new(n, 1, q, &mut partition).unwrap();
    assert_eq!(partition, untouched, "one group draws nothing");
    let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(9), ChaCha8Rng::seed_from_u64(9));
    for _ in 0..200 {
        assert_eq!(plain.next_batch(&mut a), {
            let mut out = Vec::new();
            cyclic.next_batch_into(&mut b, &mut out);
            out
        });
    }
    // A resumed sampler continues from its step.
    let mut p1 = ChaCha8Rng::seed_from_u64(2);
    let mut p2 = ChaCha8Rng::seed_from_u64(2);
    let mut s1 = CyclicPoissonSampler::new(n, 3, 0.2, &mut p1).unwrap();
    let mut s2 = CyclicPoissonSampler::new(n, 3, 0.2, &mut p2).unwrap();
    let (mut r1, mut r2) = (ChaCha8Rng::seed_from_u64(4), ChaCha8Rng::seed_from_u64(4));
    let mut out1 = Vec::new();
    for _ in 0..5 {
        s1.next_batch_into(&mut r1, &mut out1);
    }
    s2.set_step(5);
    let mut r2b = r1.clone();
    let mut out2 = Vec::new();
    s1.next_batch_into(&mut r1, &mut out1);
    s2.next_batch_into(&mut r2b, &mut out2);
    assert_eq!(out1, out2);
    let _ = &mut r2;
    assert!(CyclicPoissonSampler::new(n, 0, 0.2, &mut p2).is_err());
}

#[test]
fn fixed_order_visits_the_same_batches_in_the_same_order_every_epoch() {
    let (n, b) = (1030usize, 100usize);
    let mut perm = ChaCha8Rng::seed_from_u64(3);
    let mut s = FixedOrderSampler::new(n, b, &mut perm).unwrap();
    assert_eq!(s.batches_per_epoch(), 10);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut first_epoch = Vec::new();
    let mut seen = vec![0u32; n];
    let mut batch = Vec::new();
    for t in 0..30 {
        s.next_batch_into(&mut batch);
        assert_sorted_distinct_below(&batch, n);
        assert_eq!(batch.len(), b);
        if t < 10 {
            first_epoch.push(batch.clone());
            for &i in &batch {
                seen[i] += 1;
            }
        } else {
            assert_eq!(batch, first_epoch[t % 10], "step {t}");
        }
    }
    // One epoch uses 1000 distinct examples once each; 30 are never used.
    assert_eq!(seen.iter().filter(|&&c| c == 1).count(), 1000);
    assert_eq!(seen.iter().filter(|&&c| c == 0).count(), 30);
    // Through the enum (no randomness drawn per step) and after a resume.
    let mut again = FixedOrderSampler::new(n, b, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
    again.set_step(13);
    let mut out = Vec::new();
    Sampler::FixedOrder(again).next_batch_into(&mut rng, &mut out);
    assert_eq!(out, first_epoch[3]);
    assert!(FixedOrderSampler::new(10, 11, &mut rng).is_err());
}

/// Balls in bins over n = 1000 examples into t = 8 batches, 400 epochs:
/// - every epoch uses each example exactly once;
/// - example i's batch is uniform: over E = 400 epochs each (example, batch) count is
///   Binomial(E, 1/t); Pearson's Σ over the n·t cells of (c − E/t)²/(E/t) ~ χ²(n(t−1)) (approx.):
///   mean 7000, sd √14000 = 118.3;
/// - batch sizes are Binomial(n, 1/t): variance n(1/t)(1−1/t) = 109.4, estimated from 3200 sizes
///   with relative sd ≈ √(2/3200) = 0.025;
/// - two examples share a batch with probability 1/t independently of which two:
///   pairs (0, 1) over 400 epochs ~ Binomial(400, 1/8): mean 50, sd 6.6.
#[test]
fn balls_in_bins_puts_every_example_in_one_uniform_batch_per_epoch() {
    let (n, t, epochs) = (1000usize, 8usize, 400usize);
    let mut s = BallsInBinsSampler::new(n, t, &mut ChaCha8Rng::seed_from_u64(11)).unwrap();
    assert_eq!(s.batches_per_epoch(), t);
    assert_eq!(s.expected_batch_size(), 125.0);
    let mut counts = vec![0u32; n * t];
    let mut sizes = Vec::new();
    let mut together = 0u32;
    let mut batch = Vec::new();
    let mut first_epoch = Vec::new();
    for e in 0..epochs {
        let mut seen = vec![0u8; n];
        for k in 0..t {
            s.next_batch_into(&mut batch);
            assert_sorted_distinct_below(&batch, n);
            if e == 0 {
                first_epoch.push(batch.clone());
            }
            sizes.push(batch.len() as f64);
            for &i in &batch {
                seen[i] += 1;
                counts[i * t + k] += 1;
            }
            if batch.contains(&0) && batch.contains(&1) {
                together += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "epoch {e}");
    }
    let expected = epochs as f64 / t as f64;
    let chi2: f64 = counts
        .iter()
        .map(|&c| (f64::from(c) - expected).powi(2) / expected)
        .sum();
    assert!((chi2 - 7000.0).abs() < 5.0 * 118.3, "chi2 {chi2}");
    let mean = sizes.iter().sum::<f64>() / sizes.len() as f64;
    assert!((mean - 125.0).abs() < 1e-9);
    let var = sizes.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (sizes.len() - 1) as f64;
    assert!((var / 109.375 - 1.0).abs() < 5.0 * 0.025, "variance {var}");
    assert!((f64::from(together) - 50.0).abs() < 5.0 * 6.6, "{together}");
    // A resumed sampler rebuilds the epoch from the step; the key decides everything.
    let mut again = BallsInBinsSampler::new(n, t, &mut ChaCha8Rng::seed_from_u64(11)).unwrap();
    again.set_step(5);
    let mut out = Vec::new();
    Sampler::BallsInBins(again).next_batch_into(&mut ChaCha8Rng::seed_from_u64(0), &mut out);
    assert_eq!(out, first_epoch[5]);
    let mut other = BallsInBinsSampler::new(n, t, &mut ChaCha8Rng::seed_from_u64(12)).unwrap();
    other.next_batch_into(&mut out);
    assert_ne!(out, first_epoch[0]);
    assert!(BallsInBinsSampler::new(n, 0, &mut ChaCha8Rng::seed_from_u64(0)).is_err());
}
