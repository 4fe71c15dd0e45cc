//! Data room: synthetic datasets, each deterministic from a `u64` seed (ChaCha8).
//!
//! - [`TwoClusters`]: the separable two-cluster set of Wang et al., "On dynamic noise influence
//!   in differential private learning" (Sec. 5, "Synthetic data"): D = 100, two clusters whose
//!   centres are opposite vertices of a hypercube at Euclidean distance 10, N = 1000.
//! - [`UniformLogistic`]: the regularised-logistic set of Kuru et al., "Differentially Private
//!   Accelerated Optimization Algorithms" (Sec. 5 and the authors' code): u ~ U\[0,1\]^d,
//!   w ~ N(0, I_d), z = sign(u·w), rows rescaled to ‖u‖₁ ≤ 20; n = 1e5, d = 20.
//! - [`GaussianMixture`]: k classes with orthogonal means, for a quickstart that trains well
//!   above chance in seconds.
//!
//! Train and test are drawn from the same fixed distribution (the same centres / w), train
//! first. Owns generation only; must not preprocess (that is `preprocess`).

use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use super::error::{DataError, MAX_ELEMENTS};
use super::{Dataset, TrainTest};

/// The separable two-cluster set (dynamic-noise paper, Sec. 5).
///
/// Centres are `±a·s` with `s ∈ {−1, +1}^dim` uniform and `a = distance / (2√dim)`: opposite
/// vertices of the hypercube `[−a, a]^dim`, at Euclidean distance `distance`. Each example picks
/// a class with probability 1/2 and adds `N(0, noise_std² I)`. A draw that falls on the wrong
/// side of the mid-plane `s·x = 0` is redrawn, so the set is linearly separable by construction
/// (the paper says "linearly separable"; at distance 10 and unit noise a redraw happens with
/// probability Φ(−5) ≈ 2.9e−7 per example).
#[derive(Debug, Clone, PartialEq)]
pub struct TwoClusters {
    pub n_train: usize,
    pub n_test: usize,
    pub dim: usize,
    pub distance: f64,
    pub noise_std: f64,
}

impl Default for TwoClusters {
    /// The paper's setting: N = 1000 train, D = 100, distance 10; unit noise; 1000 test.
    fn default() -> Self {
        TwoClusters {
            n_train: 1000,
            n_test: 1000,
            dim: 100,
            distance: 10.0,
            noise_std: 1.0,
        }
    }
}

/// The regularised-logistic set (accelerated-methods paper, Sec. 5).
///
/// `u ~ U[0,1]^dim`, rescaled so that `‖u‖₁ ≤ l1_radius` (a no-op when `dim ≤ l1_radius`),
/// `w ~ N(0, I_dim)` drawn once, label `z = sign(u·w)` mapped −1 → 0, +1 → 1. Noise-free, so
/// separable through the origin.
#[derive(Debug, Clone, PartialEq)]
pub struct UniformLogistic {
    pub n_train: usize,
    pub n_test: usize,
    pub dim: usize,
    pub l1_radius: f64,
}

impl Default for UniformLogistic {
    /// The paper's setting: n = 1e5, d = 20, ‖u‖₁ ≤ 20; 10000 test examples (the paper has none).
    fn default() -> Self {
        UniformLogistic {
            n_train: 100_000,
            n_test: 10_000,
            dim: 20,
            l1_radius: 20.0,
        }
    }
}

/// A Gaussian mixture with `num_classes` equally likely classes.
///
/// Means are `separation/√2 · q_c` with `q_1..q_k` orthonormal (Gram–Schmidt on Gaussian draws)
/// when `k ≤ dim`, so every pair of means is exactly `separation` apart; when `k > dim` the
/// `q_c` are independent random unit vectors. Each example adds `N(0, noise_std² I)`.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianMixture {
    pub n_train: usize,
    pub n_test: usize,
    pub dim: usize,
    pub num_classes: usize,
    pub separation: f64,
    pub noise_std: f64,
}

impl Default for GaussianMixture {
    /// A quickstart: 4 classes in 20 dimensions, means 4 noise-standard-deviations apart.
    fn default() -> Self {
        GaussianMixture {
            n_train: 2000,
            n_test: 1000,
            dim: 20,
            num_classes: 4,
            separation: 4.0,
            noise_std: 1.0,
        }
    }
}

/// One of the synthetic generators.
#[derive(Debug, Clone, PartialEq)]
pub enum SyntheticSpec {
    TwoClusters(TwoClusters),
    UniformLogistic(UniformLogistic),
    GaussianMixture(GaussianMixture),
}

impl SyntheticSpec {
    /// Generate train and test, deterministic from `seed`.
    pub fn generate(&self, seed: u64) -> Result<TrainTest, DataError> {
        match self {
            SyntheticSpec::TwoClusters(s) => s.generate(seed),
            SyntheticSpec::UniformLogistic(s) => s.generate(seed),
            SyntheticSpec::GaussianMixture(s) => s.generate(seed),
        }
    }
}

fn check_sizes(n_train: usize, n_test: usize, dim: usize) -> Result<(), DataError> {
    if n_train == 0 {
        return Err(invalid("n_train", "at least 1", n_train));
    }
    if dim == 0 {
        return Err(invalid("dim", "at least 1", dim));
    }
    let elements = (n_train as u64)
        .saturating_add(n_test as u64)
        .saturating_mul(dim as u64);
    if elements > MAX_ELEMENTS {
        return Err(DataError::TooLarge {
            path: None,
            what: format!("synthetic dataset of {n_train}+{n_test} examples x {dim} features"),
            claimed: elements,
            limit: MAX_ELEMENTS,
        });
    }
    Ok(())
}

fn invalid(name: &'static str, expected: &str, found: impl std::fmt::Display) -> DataError {
    DataError::InvalidParameter {
        name,
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

fn finite_nonneg(name: &'static str, v: f64) -> Result<(), DataError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(invalid(name, "a finite number >= 0", v))
    }
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    rng.sample(StandardNormal)
}

/// Fill a dataset of `n` rows, each drawn by `row(rng, out) -> label`.
fn draw(
    rng: &mut ChaCha8Rng,
    n: usize,
    dim: usize,
    num_classes: usize,
    mut row: impl FnMut(&mut ChaCha8Rng, &mut [f64]) -> Result<usize, DataError>,
) -> Result<Dataset, DataError> {
    let mut features = Array2::<f32>::zeros((n, dim));
    let mut labels = Vec::with_capacity(n);
    let mut buf = vec![0.0f64; dim];
    for mut out in features.rows_mut() {
        labels.push(row(rng, &mut buf)?);
        for (o, &v) in out.iter_mut().zip(&buf) {
            *o = v as f32;
        }
    }
    Ok(Dataset {
        features,
        labels,
        sample_shape: vec![dim],
        num_classes,
    })
}

impl TwoClusters {
    /// Generate train and test, deterministic from `seed`.
    pub fn generate(&self, seed: u64) -> Result<TrainTest, DataError> {
        check_sizes(self.n_train, self.n_test, self.dim)?;
        if !(self.distance.is_finite() && self.distance > 0.0) {
            return Err(invalid("distance", "a finite number > 0", self.distance));
        }
        finite_nonneg("noise_std", self.noise_std)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let signs: Vec<f64> = (0..self.dim)
            .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
            .collect();
        let a = self.distance / (2.0 * (self.dim as f64).sqrt());
        let row = |rng: &mut ChaCha8Rng, x: &mut [f64]| {
            let label = usize::from(rng.random::<bool>());
            let side = if label == 1 { 1.0 } else { -1.0 };
            // Redraw until on the correct side of the mid-plane; at least half of all draws
            // land there whenever distance > 0, so 200 attempts fail with probability < 2^-200.
            for _ in 0..200 {
                let mut proj = 0.0;
                for (xj, &sj) in x.iter_mut().zip(&signs) {
                    *xj = side * a * sj + self.noise_std * normal(rng);
                    proj += *xj * sj;
                }
                if side * proj > 0.0 {
                    return Ok(label);
                }
            }
            Err(invalid(
                "two_clusters",
                "a distance large enough for separable draws",
                format!(
                    "distance {} with noise_std {}",
                    self.distance, self.noise_std
                ),
            ))
        };
        let mut row = row;
        let train = draw(&mut rng, self.n_train, self.dim, 2, &mut row)?;
        let test = draw(&mut rng, self.n_test, self.dim, 2, &mut row)?;
        Ok(TrainTest { train, test })
    }
}

impl UniformLogistic {
    /// Generate train and test, deterministic from `seed`.
    pub fn generate(&self, seed: u64) -> Result<TrainTest, DataError> {
        check_sizes(self.n_train, self.n_test, self.dim)?;
        if !(self.l1_radius.is_finite() && self.l1_radius > 0.0) {
            return Err(invalid("l1_radius", "a finite number > 0", self.l1_radius));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let w: Vec<f64> = (0..self.dim).map(|_| normal(&mut rng)).collect();
        let mut row = |rng: &mut ChaCha8Rng, u: &mut [f64]| {
            for uj in u.iter_mut() {
                *uj = rng.random::<f64>();
            }
            let l1: f64 = u.iter().sum();
            if l1 > self.l1_radius {
                u.iter_mut().for_each(|uj| *uj *= self.l1_radius / l1);
            }
            let dot: f64 = u.iter().zip(&w).map(|(a, b)| a * b).sum();
            Ok(usize::from(dot >= 0.0))
        };
        let train = draw(&mut rng, self.n_train, self.dim, 2, &mut row)?;
        let test = draw(&mut rng, self.n_test, self.dim, 2, &mut row)?;
        Ok(TrainTest { train, test })
    }
}

impl GaussianMixture {
    /// The class means, `num_classes` vectors of length `dim` (drawn first by `generate`).
    fn means(&self, rng: &mut ChaCha8Rng) -> Vec<Vec<f64>> {
        let mut q: Vec<Vec<f64>> = Vec::with_capacity(self.num_classes);
        for _ in 0..self.num_classes {
            let mut v: Vec<f64> = (0..self.dim).map(|_| normal(rng)).collect();
            if q.len() < self.dim {
                // Gram–Schmidt against the previous directions (twice, for orthogonality in f64).
                for _ in 0..2 {
                    for p in &q {
                        let dot: f64 = v.iter().zip(p).map(|(a, b)| a * b).sum();
                        v.iter_mut().zip(p).for_each(|(a, b)| *a -= dot * b);
                    }
                }
            }
            let norm = v
                .iter()
                .map(|a| a * a)
                .sum::<f64>()
                .sqrt()
                .max(f64::MIN_POSITIVE);
            v.iter_mut().for_each(|a| *a /= norm);
            q.push(v);
        }
        let scale = self.separation / std::f64::consts::SQRT_2;
        q.into_iter()
            .map(|v| v.into_iter().map(|a| a * scale).collect())
            .collect()
    }

    /// Generate train and test, deterministic from `seed`.
    pub fn generate(&self, seed: u64) -> Result<TrainTest, DataError> {
        check_sizes(self.n_train, self.n_test, self.dim)?;
        if !(2..=65_536).contains(&self.num_classes) {
            return Err(invalid(
                "num_classes",
                "an integer in 2..=65536",
                self.num_classes,
            ));
        }
        finite_nonneg("separation", self.separation)?;
        finite_nonneg("noise_std", self.noise_std)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let means = self.means(&mut rng);
        let k = self.num_classes;
        let mut row = |rng: &mut ChaCha8Rng, x: &mut [f64]| {
            let c = rng.random_range(0..k);
            for (xj, &mj) in x.iter_mut().zip(&means[c]) {
                *xj = mj + self.noise_std * normal(rng);
            }
            Ok(c)
        };
        let train = draw(&mut rng, self.n_train, self.dim, k, &mut row)?;
        let test = draw(&mut rng, self.n_test, self.dim, k, &mut row)?;
        Ok(TrainTest { train, test })
    }
}
