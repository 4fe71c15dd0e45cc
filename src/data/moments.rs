//! Clipped per-example moments of feature groups (room: `data`): the data half of private
//! standardisation (`data.standardize = "private"`; Tramèr & Boneh 2021, "Differentially private
//! learning needs better features (or much more data)", Appendix B, Algorithm 2).
//!
//! A group is one channel of an image (sample shape `[C, H, W]`: C groups of H·W features, also
//! for scattering features) or one feature of a vector. For each example i, `m_i[g]` is the mean
//! of its features in group g and `s_i[g]` the mean of their squares. Each vector is scaled to an
//! L2 norm of at most its clip norm, `m̃_i = m_i · min(1, C_m / ‖m_i‖₂)` (likewise `s̃_i` with
//! C_s), and both are summed over the examples, in f64 and in example order (the same bits on
//! every machine and thread count). Adding or removing one example adds or removes one clipped
//! vector, so the sums' add/remove-one L2 sensitivities are C_m and C_s: the privacy room adds the
//! Gaussian noise (`privacy::mechanism::add_gaussian_noise`), and [`standardizer_from_sums`] turns
//! the released sums into a [`Standardizer`], which is post-processing.
//!
//! Unlike the paper's code, the clip norms are configuration values, never a quantile of the
//! private norms (the paper's code takes the median, a release its ε does not count).

use super::Dataset;
use super::error::DataError;
use super::preprocess::{StandardizeMode, Standardizer};

/// ε added to the released variance before the square root (the paper's code and PyTorch's
/// normalisation layers use 1e-5).
pub const VARIANCE_EPS: f64 = 1e-5;

/// The clipped per-example moments of a training set, summed over its examples.
#[derive(Debug, Clone, PartialEq)]
pub struct MomentSums {
    /// Σ_i m̃_i, one entry per group.
    pub mean: Vec<f64>,
    /// Σ_i s̃_i, one entry per group.
    pub second_moment: Vec<f64>,
    /// Features per group (H·W for images, 1 for vectors).
    pub width: usize,
    /// Whether the groups are image channels (else single features).
    pub per_channel: bool,
}

/// The groups of `data`: (number of groups, features per group, whether they are channels).
fn groups_of(data: &Dataset) -> Result<(usize, usize, bool), DataError> {
    let d = data.num_features();
    match data.sample_shape[..] {
        [c, _, _] if c > 0 && d.is_multiple_of(c) => Ok((c, d / c, true)),
        [_, _, _] => Err(DataError::InvalidParameter {
            name: "private standardisation",
            expected: "image data whose features split evenly into its channels".into(),
            found: format!("{:?} for {d} features", data.sample_shape),
        }),
        _ => Ok((d, 1, false)),
    }
}

/// Scale `v` to L2 norm at most `clip_norm`.
fn clip(v: &mut [f64], clip_norm: f64) {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm > clip_norm {
        let factor = clip_norm / norm;
        v.iter_mut().for_each(|x| *x *= factor);
    }
}

/// Σ_i of the clipped per-group means and means of squares of `train`'s examples.
pub fn clipped_moment_sums(
    train: &Dataset,
    mean_clip_norm: f64,
    second_moment_clip_norm: f64,
) -> Result<MomentSums, DataError> {
    for (name, c) in [
        ("standardize mean clip norm", mean_clip_norm),
        (
            "standardize second-moment clip norm",
            second_moment_clip_norm,
        ),
    ] {
        if !(c.is_finite() && c > 0.0) {
            return Err(DataError::InvalidParameter {
                name,
                expected: "a finite number > 0".into(),
                found: c.to_string(),
            });
        }
    }
    if train.is_empty() {
        return Err(DataError::Empty { path: None });
    }
    let (groups, width, per_channel) = groups_of(train)?;
    let mut mean = vec![0.0f64; groups];
    let mut second_moment = vec![0.0f64; groups];
    let mut m = vec![0.0f64; groups];
    let mut s = vec![0.0f64; groups];
    for row in train.features.rows() {
        let row = row
            .to_slice()
            .map_or_else(|| row.to_vec().into(), std::borrow::Cow::Borrowed);
        for ((mg, sg), group) in m.iter_mut().zip(s.iter_mut()).zip(row.chunks_exact(width)) {
            (*mg, *sg) = (0.0, 0.0);
            for &x in group {
                let x = f64::from(x);
                *mg += x;
                *sg += x * x;
            }
        }
        let inv = 1.0 / width as f64;
        m.iter_mut().chain(s.iter_mut()).for_each(|x| *x *= inv);
        clip(&mut m, mean_clip_norm);
        clip(&mut s, second_moment_clip_norm);
        mean.iter_mut().zip(&m).for_each(|(a, b)| *a += b);
        second_moment.iter_mut().zip(&s).for_each(|(a, b)| *a += b);
    }
    Ok(MomentSums {
        mean,
        second_moment,
        width,
        per_channel,
    })
}

/// The standardizer of released (noisy) sums over `n` examples: per group, μ = mean / n,
/// v = second_moment / n − μ², and x ← (x − μ) / √(v + [`VARIANCE_EPS`]).
///
/// Without a `variance_floor`, a group whose released variance is not positive is set to 0
/// (std = ∞), as in the paper's code. With one, v ← max(v, floor) and no group is dropped: a
/// group whose true variance is below the release's noise keeps its (noisily centred) values,
/// scaled by at most 1/√(floor + ε). Both are post-processing of the release. Also returns how
/// many groups were set to 0 (without a floor) or raised to the floor (with one).
pub fn standardizer_from_sums(
    released: &MomentSums,
    n: usize,
    variance_floor: Option<f64>,
) -> (Standardizer, usize) {
    let n = n.max(1) as f64;
    let mut dropped = 0;
    let (mean_g, std_g): (Vec<f64>, Vec<f64>) = released
        .mean
        .iter()
        .zip(&released.second_moment)
        .map(|(&m, &s)| {
            let mu = m / n;
            let var = s / n - mu * mu;
            if let Some(floor) = variance_floor.filter(|_| mu.is_finite() && !var.is_nan()) {
                if var < floor {
                    dropped += 1;
                }
                (mu, (var.max(floor) + VARIANCE_EPS).sqrt())
            } else if var > 0.0 && var.is_finite() {
                (mu, (var + VARIANCE_EPS).sqrt())
            } else {
                dropped += 1;
                (0.0, f64::INFINITY)
            }
        })
        .unzip();
    let width = released.width;
    let d = mean_g.len() * width;
    let standardizer = Standardizer {
        mean: (0..d).map(|j| mean_g[j / width]).collect(),
        std: (0..d).map(|j| std_g[j / width]).collect(),
        mode: if released.per_channel {
            StandardizeMode::PerChannel
        } else {
            StandardizeMode::PerFeature
        },
    };
    (standardizer, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn images(rows: Vec<Vec<f32>>, shape: Vec<usize>) -> Dataset {
        let n = rows.len();
        let d = rows[0].len();
        let flat: Vec<f32> = rows.into_iter().flatten().collect();
        Dataset {
            features: Array2::from_shape_vec((n, d), flat).unwrap(),
            labels: vec![0; n],
            num_classes: 2,
            sample_shape: shape,
        }
    }

    #[test]
    fn moments_are_per_channel_means_and_clipped_to_their_norms() {
        // Two examples of 2 channels × 2 pixels.
        let ds = images(
            vec![vec![1.0, 3.0, 0.0, 0.0], vec![0.0, 0.0, 6.0, 8.0]],
            vec![2, 1, 2],
        );
        // No clipping binds at large norms: means (2, 0) and (0, 7); squares (5, 0), (0, 50).
        let big = clipped_moment_sums(&ds, 1e9, 1e9).unwrap();
        assert_eq!(big.mean, vec![2.0, 7.0]);
        assert_eq!(big.second_moment, vec![5.0, 50.0]);
        assert!(big.per_channel && big.width == 2);
        // Clip norm 1: (2, 0) → (1, 0), (0, 7) → (0, 1); (5, 0) → (1, 0), (0, 50) → (0, 1).
        let clipped = clipped_moment_sums(&ds, 1.0, 1.0).unwrap();
        assert_eq!(clipped.mean, vec![1.0, 1.0]);
        assert_eq!(clipped.second_moment, vec![1.0, 1.0]);
    }

    #[test]
    fn one_example_moves_each_sum_by_at_most_its_clip_norm() {
        let rows: Vec<Vec<f32>> = (0..20)
            .map(|i| {
                (0..12)
                    .map(|j| ((i * 7 + j * 3) % 11) as f32 - 4.0)
                    .collect()
            })
            .collect();
        let all = images(rows.clone(), vec![3, 2, 2]);
        let fewer = images(rows[..19].to_vec(), vec![3, 2, 2]);
        let (cm, cs) = (0.7, 1.3);
        let a = clipped_moment_sums(&all, cm, cs).unwrap();
        let b = clipped_moment_sums(&fewer, cm, cs).unwrap();
        let dist = |x: &[f64], y: &[f64]| {
            x.iter()
                .zip(y)
                .map(|(p, q)| (p - q) * (p - q))
                .sum::<f64>()
                .sqrt()
        };
        assert!(dist(&a.mean, &b.mean) <= cm + 1e-12);
        assert!(dist(&a.second_moment, &b.second_moment) <= cs + 1e-12);
    }

    #[test]
    fn vectors_are_standardised_per_feature_and_flat_groups_drop() {
        let ds = images(vec![vec![1.0, 2.0], vec![3.0, 2.0]], vec![2]);
        let sums = clipped_moment_sums(&ds, 1e9, 1e9).unwrap();
        assert!(!sums.per_channel && sums.width == 1);
        let (st, dropped) = standardizer_from_sums(&sums, 2, None);
        // Feature 0: mean 2, variance 1; feature 1: constant, variance 0, so dropped.
        assert_eq!(dropped, 1);
        assert_eq!(st.mean[0], 2.0);
        assert!((st.std[0] - (1.0 + VARIANCE_EPS).sqrt()).abs() < 1e-15);
        let mut out = ds.clone();
        st.apply(&mut out).unwrap();
        assert_eq!(out.features[[0, 1]], 0.0);
        assert_eq!(out.features[[1, 1]], 0.0);
        assert!((out.features[[0, 0]] + 1.0).abs() < 1e-4);
    }

    #[test]
    fn a_variance_floor_keeps_flat_groups_and_raises_only_them() {
        let ds = images(vec![vec![1.0, 2.0, 5.0], vec![3.0, 2.0, 5.5]], vec![3]);
        let mut sums = clipped_moment_sums(&ds, 1e9, 1e9).unwrap();
        // A released second moment that noise pushed below μ²: variance −0.5 for feature 2.
        sums.second_moment[2] -= 2.0 * (0.0625 + 0.5);
        let floor = 0.01;
        let (st, raised) = standardizer_from_sums(&sums, 2, Some(floor));
        // Feature 1 (variance 0) and feature 2 (negative) are raised; feature 0 (1.0) is not.
        assert_eq!(raised, 2);
        assert!((st.std[0] - (1.0 + VARIANCE_EPS).sqrt()).abs() < 1e-15);
        for j in [1, 2] {
            assert!((st.std[j] - (floor + VARIANCE_EPS).sqrt()).abs() < 1e-15);
        }
        assert_eq!(st.mean[1], 2.0);
        assert!((st.mean[2] - 5.25).abs() < 1e-15);
        // Without the floor both are dropped, and feature 0 is standardised the same way.
        let (plain, dropped) = standardizer_from_sums(&sums, 2, None);
        assert_eq!(dropped, 2);
        assert_eq!(plain.std[0], st.std[0]);
        assert!(plain.std[1].is_infinite() && plain.std[2].is_infinite());
    }

    #[test]
    fn bad_clip_norms_are_refused() {
        let ds = images(vec![vec![1.0, 2.0]], vec![2]);
        assert!(clipped_moment_sums(&ds, 0.0, 1.0).is_err());
        assert!(clipped_moment_sums(&ds, 1.0, f64::NAN).is_err());
    }
}
