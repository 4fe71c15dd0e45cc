//! Data room: preprocessing, as pure functions on [`Dataset`]s.
//!
//! Statistics are always fitted on the training set and applied to train and test alike
//! ([`Standardizer`], [`Pca`], [`scale_max_row_norm`]). Random choices ([`subsample`],
//! [`train_validation_split`]) are deterministic from a `u64` seed (ChaCha8).
//!
//! None of this is differentially private: statistics fitted on the training data (means,
//! standard deviations, norms, principal components) leak information about it, and a DP
//! analysis must either treat them as public or pay for them. [`Pca::NOTE`] says so in
//! outputs. This module must not know of models or privacy accounting.

use ndarray::{Array1, Array2, ArrayView2, Axis, s};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use super::error::DataError;
use super::{Dataset, TrainTest};

fn invalid(name: &'static str, expected: impl Into<String>, found: impl ToString) -> DataError {
    DataError::InvalidParameter {
        name,
        expected: expected.into(),
        found: found.to_string(),
    }
}

/// Multiply every feature by `factor`.
pub fn scale(ds: &mut Dataset, factor: f32) {
    ds.features.mapv_inplace(|x| x * factor);
}

/// Map byte-valued pixels (0..=255, as the loaders return them) to [0, 1]: x / 255.
pub fn scale_to_unit(ds: &mut Dataset) {
    ds.features.mapv_inplace(|x| x / 255.0);
}

/// How [`Standardizer`] groups features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandardizeMode {
    /// Mean and standard deviation per feature (column).
    PerFeature,
    /// Per channel of image data: `sample_shape[0]` channels, each a contiguous block of
    /// `d / channels` features (the `[C, H, W]` layout).
    PerChannel,
    /// Mean per feature, then one standard deviation over all centred values (the
    /// "centre, then std 1" of the dynamic-noise paper, Sec. 5).
    CenterGlobalStd,
}

/// Standardisation fitted on training data: x_j ← (x_j − mean_j) / std_j.
///
/// Standard deviations are population ones (divide by n); a zero standard deviation (a
/// constant feature) is replaced by 1 so that feature becomes 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Standardizer {
    /// Per-feature mean (expanded from channels when per channel).
    pub mean: Vec<f64>,
    /// Per-feature standard deviation (expanded likewise), never 0.
    pub std: Vec<f64>,
    pub mode: StandardizeMode,
}

impl Standardizer {
    /// Fit on `train`, accumulating in f64.
    pub fn fit(train: &Dataset, mode: StandardizeMode) -> Result<Self, DataError> {
        let (n, d) = train.features.dim();
        if n == 0 {
            return Err(DataError::Empty { path: None });
        }
        let groups = match mode {
            StandardizeMode::PerFeature | StandardizeMode::CenterGlobalStd => d,
            StandardizeMode::PerChannel => {
                let c = train.sample_shape.first().copied().unwrap_or(1);
                if c == 0 || d % c != 0 || train.sample_shape.len() < 2 {
                    return Err(invalid(
                        "standardize per channel",
                        "image data with sample shape [C, H, W]",
                        format!("{:?}", train.sample_shape),
                    ));
                }
                c
            }
        };
        let width = d / groups;
        let mut sum = vec![0.0f64; groups];
        let mut sum_sq = vec![0.0f64; groups];
        for row in train.features.rows() {
            for (j, &x) in row.iter().enumerate() {
                let g = j / width;
                sum[g] += f64::from(x);
            }
        }
        let count = (n * width) as f64;
        let mean_g: Vec<f64> = sum.iter().map(|s| s / count).collect();
        for row in train.features.rows() {
            for (j, &x) in row.iter().enumerate() {
                let g = j / width;
                let c = f64::from(x) - mean_g[g];
                sum_sq[g] += c * c;
            }
        }
        let mut std_g: Vec<f64> = sum_sq.iter().map(|s| (s / count).sqrt()).collect();
        if mode == StandardizeMode::CenterGlobalStd {
            let total = (sum_sq.iter().sum::<f64>() / (n * d) as f64).sqrt();
            std_g.iter_mut().for_each(|s| *s = total);
        }
        let std_g: Vec<f64> = std_g
            .into_iter()
            .map(|s| if s > 0.0 && s.is_finite() { s } else { 1.0 })
            .collect();
        Ok(Standardizer {
            mean: (0..d).map(|j| mean_g[j / width]).collect(),
            std: (0..d).map(|j| std_g[j / width]).collect(),
            mode,
        })
    }

    /// Apply to a dataset with the fitted number of features.
    pub fn apply(&self, ds: &mut Dataset) -> Result<(), DataError> {
        check_width(ds, self.mean.len(), "standardizer")?;
        for mut row in ds.features.rows_mut() {
            for ((x, &m), &s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                *x = ((f64::from(*x) - m) / s) as f32;
            }
        }
        Ok(())
    }
}

fn check_width(ds: &Dataset, d: usize, what: &str) -> Result<(), DataError> {
    if ds.num_features() != d {
        return Err(DataError::Inconsistent {
            what: format!("number of features for the fitted {what}"),
            expected: d.to_string(),
            found: ds.num_features().to_string(),
        });
    }
    Ok(())
}

/// Fit a [`Standardizer`] on train and apply it to train and test.
pub fn standardize(data: &mut TrainTest, mode: StandardizeMode) -> Result<Standardizer, DataError> {
    let s = Standardizer::fit(&data.train, mode)?;
    s.apply(&mut data.train)?;
    s.apply(&mut data.test)?;
    Ok(s)
}

/// The L2 norm of each row, in f64.
pub fn row_norms(ds: &Dataset) -> Vec<f64> {
    ds.features
        .rows()
        .into_iter()
        .map(|r| r.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt())
        .collect()
}

/// Rescale every row whose L2 norm exceeds `max_norm` to norm `max_norm` (others unchanged).
pub fn clip_row_norms(ds: &mut Dataset, max_norm: f64) -> Result<(), DataError> {
    if !(max_norm.is_finite() && max_norm > 0.0) {
        return Err(invalid("max_norm", "a finite number > 0", max_norm));
    }
    for mut row in ds.features.rows_mut() {
        let norm = row
            .iter()
            .map(|&x| f64::from(x).powi(2))
            .sum::<f64>()
            .sqrt();
        if norm > max_norm {
            let f = (max_norm / norm) as f32;
            row.mapv_inplace(|x| x * f);
        }
    }
    Ok(())
}

/// Scale train and test by one factor so that the largest training row norm is `max_norm`
/// (the "data scale" of the dynamic-noise paper, Sec. 5: max_n ‖x_n‖ = scale). Returns the
/// factor. Test rows may exceed `max_norm`.
pub fn scale_max_row_norm(data: &mut TrainTest, max_norm: f64) -> Result<f64, DataError> {
    if !(max_norm.is_finite() && max_norm > 0.0) {
        return Err(invalid("max_norm", "a finite number > 0", max_norm));
    }
    let largest = row_norms(&data.train).into_iter().fold(0.0, f64::max);
    if largest <= 0.0 {
        return Err(invalid(
            "max_norm",
            "training data with a non-zero row",
            "every row is zero",
        ));
    }
    let factor = max_norm / largest;
    scale(&mut data.train, factor as f32);
    scale(&mut data.test, factor as f32);
    Ok(factor)
}

/// The rows `indices` of `ds`, in that order.
pub fn select_rows(ds: &Dataset, indices: &[usize]) -> Dataset {
    Dataset {
        features: ds.features.select(Axis(0), indices),
        labels: indices.iter().map(|&i| ds.labels[i]).collect(),
        sample_shape: ds.sample_shape.clone(),
        num_classes: ds.num_classes,
    }
}

/// Keep only the examples of `classes` and relabel class `classes[i]` as `i`
/// (MNIST 3 vs 5: `keep_classes(&mnist, &[3, 5])` gives labels 0 for 3 and 1 for 5).
pub fn keep_classes(ds: &Dataset, classes: &[usize]) -> Result<Dataset, DataError> {
    if classes.is_empty() {
        return Err(invalid("classes", "at least one class", "an empty list"));
    }
    let mut new_label = vec![None; ds.num_classes];
    for (i, &c) in classes.iter().enumerate() {
        if c >= ds.num_classes {
            return Err(invalid(
                "classes",
                format!("classes in 0..{}", ds.num_classes),
                c,
            ));
        }
        if new_label[c].is_some() {
            return Err(invalid("classes", "distinct classes", format!("{c} twice")));
        }
        new_label[c] = Some(i);
    }
    let keep: Vec<usize> = (0..ds.len())
        .filter(|&i| new_label[ds.labels[i]].is_some())
        .collect();
    let mut out = select_rows(ds, &keep);
    out.labels = keep
        .iter()
        .map(|&i| new_label[ds.labels[i]].unwrap_or_default())
        .collect();
    out.num_classes = classes.len();
    Ok(out)
}

/// A uniform random subset of `n` examples (without replacement), kept in their original
/// order; deterministic from `seed`.
pub fn subsample(ds: &Dataset, n: usize, seed: u64) -> Result<Dataset, DataError> {
    if n > ds.len() {
        return Err(invalid(
            "subsample size",
            format!("at most the {} examples available", ds.len()),
            n,
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut idx = rand::seq::index::sample(&mut rng, ds.len(), n).into_vec();
    idx.sort_unstable();
    Ok(select_rows(ds, &idx))
}

/// Split into (train, validation) with `validation_size` examples in validation, chosen
/// uniformly at random; both keep the original order. Deterministic from `seed`.
pub fn train_validation_split(
    ds: &Dataset,
    validation_size: usize,
    seed: u64,
) -> Result<(Dataset, Dataset), DataError> {
    if validation_size >= ds.len() {
        return Err(invalid(
            "validation size",
            format!("fewer than the {} examples available", ds.len()),
            validation_size,
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut in_validation = vec![false; ds.len()];
    for i in rand::seq::index::sample(&mut rng, ds.len(), validation_size).iter() {
        in_validation[i] = true;
    }
    let (val, train): (Vec<usize>, Vec<usize>) = (0..ds.len()).partition(|&i| in_validation[i]);
    Ok((select_rows(ds, &train), select_rows(ds, &val)))
}

/// Principal component analysis fitted on training data.
///
/// Components are the top-`k` eigenvectors of the sample covariance (divisor n − 1, as
/// scikit-learn's `explained_variance_`), found by subspace iteration with Rayleigh–Ritz
/// (Golub & Van Loan, *Matrix Computations*, 4th ed., Sec. 8.2.4) and a cyclic Jacobi
/// eigensolver for the small projected matrix (ibid. Sec. 8.5). Each component's largest
/// coordinate is made positive, so the result is deterministic.
///
/// Not private: see [`Pca::NOTE`].
#[derive(Debug, Clone, PartialEq)]
pub struct Pca {
    /// Training mean, `[d]`.
    pub mean: Array1<f64>,
    /// Orthonormal components, `[k, d]`, by decreasing variance.
    pub components: Array2<f64>,
    /// The variance along each component (covariance eigenvalue), `[k]`.
    pub explained_variance: Vec<f64>,
    /// Total variance (trace of the covariance).
    pub total_variance: f64,
}

impl Pca {
    /// The note every output using PCA carries.
    pub const NOTE: &'static str = "PCA was fitted on the training data without privacy: the projection is not differentially private";

    /// Fit `k` components on `train`.
    pub fn fit(train: &Dataset, k: usize) -> Result<Self, DataError> {
        let (n, d) = train.features.dim();
        if k == 0 || k > d {
            return Err(invalid(
                "pca components",
                format!("an integer in 1..={d}"),
                k,
            ));
        }
        if n < 2 {
            return Err(invalid("pca", "at least 2 training examples", n));
        }
        let mean = train
            .features
            .mapv(f64::from)
            .mean_axis(Axis(0))
            .unwrap_or_else(|| Array1::zeros(d));
        let mut cov = Array2::<f64>::zeros((d, d));
        for start in (0..n).step_by(2048) {
            let end = (start + 2048).min(n);
            let chunk = train.features.slice(s![start..end, ..]).mapv(f64::from) - &mean;
            ndarray::linalg::general_mat_mul(1.0, &chunk.t(), &chunk, 1.0, &mut cov);
        }
        cov /= (n - 1) as f64;
        let total_variance = cov.diag().sum();
        let (values, vectors) = top_eigenpairs(cov.view(), k);
        let mut components = vectors.reversed_axes(); // [k, d]
        for mut c in components.rows_mut() {
            let big = c
                .iter()
                .fold(0.0f64, |acc, &v| if v.abs() > acc.abs() { v } else { acc });
            if big < 0.0 {
                c.mapv_inplace(|x| -x);
            }
        }
        Ok(Pca {
            mean,
            components,
            explained_variance: values,
            total_variance,
        })
    }

    /// Number of components k.
    pub fn num_components(&self) -> usize {
        self.components.nrows()
    }

    /// Project onto the components: `(x − mean) · componentsᵀ`.
    ///
    /// # Shapes
    /// `[n, d]` → `[n, k]`; `sample_shape` becomes `[k]`.
    pub fn transform(&self, ds: &Dataset) -> Result<Dataset, DataError> {
        check_width(ds, self.mean.len(), "PCA")?;
        let centred = ds.features.mapv(f64::from) - &self.mean;
        let projected = centred.dot(&self.components.t());
        Ok(Dataset {
            features: projected.mapv(|x| x as f32),
            labels: ds.labels.clone(),
            sample_shape: vec![self.num_components()],
            num_classes: ds.num_classes,
        })
    }
}

/// Fit PCA on train and project train and test.
pub fn pca(data: &TrainTest, k: usize) -> Result<(TrainTest, Pca), DataError> {
    let p = Pca::fit(&data.train, k)?;
    Ok((
        TrainTest {
            train: p.transform(&data.train)?,
            test: p.transform(&data.test)?,
        },
        p,
    ))
}

/// The `k` largest eigenvalues (descending) and eigenvectors (columns, `[d, k]`) of a symmetric
/// positive semi-definite matrix, by subspace iteration with Rayleigh–Ritz.
fn top_eigenpairs(a: ArrayView2<f64>, k: usize) -> (Vec<f64>, Array2<f64>) {
    let d = a.nrows();
    let p = (k + 10).min(d);
    let (values, vectors) = if p == d {
        jacobi_eigen(a.to_owned())
    } else {
        let mut rng = ChaCha8Rng::seed_from_u64(0x05ee_d9ca);
        let mut q = Array2::from_shape_fn((d, p), |_| rng.sample::<f64, _>(StandardNormal));
        orthonormalize(&mut q, &mut rng);
        let mut last: Vec<f64> = vec![f64::INFINITY; k];
        let mut result = (Vec::new(), Array2::zeros((d, p)));
        for _ in 0..2000 {
            let z = a.dot(&q);
            let h = q.t().dot(&z);
            let h = (&h + &h.t()) * 0.5;
            let (vals, v) = jacobi_eigen(h);
            let ritz = q.dot(&v);
            let converged = vals
                .iter()
                .zip(&last)
                .take(k)
                .all(|(a, b)| (a - b).abs() <= 1e-12 * vals[0].abs().max(1e-300));
            last = vals.clone();
            result = (vals, ritz);
            if converged {
                break;
            }
            q = z;
            orthonormalize(&mut q, &mut rng);
        }
        result
    };
    (
        values.into_iter().take(k).collect(),
        vectors.slice(s![.., ..k]).to_owned(),
    )
}

/// Modified Gram–Schmidt on the columns of `q`, in place; a column that vanishes (rank
/// deficiency) is replaced by a fresh random direction.
fn orthonormalize(q: &mut Array2<f64>, rng: &mut ChaCha8Rng) {
    let (d, p) = q.dim();
    for j in 0..p {
        for attempt in 0..4 {
            let before = q.column(j).dot(&q.column(j)).sqrt();
            for _ in 0..2 {
                for i in 0..j {
                    let dot = q.column(i).dot(&q.column(j));
                    let qi = q.column(i).to_owned();
                    q.column_mut(j).scaled_add(-dot, &qi);
                }
            }
            let norm = q.column(j).dot(&q.column(j)).sqrt();
            if norm > 1e-10 * before.max(1e-300) || attempt == 3 {
                q.column_mut(j).mapv_inplace(|x| x / norm.max(1e-300));
                break;
            }
            for r in 0..d {
                q[[r, j]] = rng.sample(StandardNormal);
            }
        }
    }
}

/// Eigen-decomposition of a symmetric matrix by cyclic Jacobi rotations (Golub & Van Loan,
/// Alg. 8.5.3). Returns eigenvalues in decreasing order and eigenvectors as columns.
fn jacobi_eigen(mut a: Array2<f64>) -> (Vec<f64>, Array2<f64>) {
    let m = a.nrows();
    let mut v = Array2::<f64>::eye(m);
    for _sweep in 0..100 {
        let off: f64 = (0..m)
            .flat_map(|i| (i + 1..m).map(move |j| (i, j)))
            .map(|(i, j)| a[[i, j]] * a[[i, j]])
            .sum();
        let diag: f64 = a.diag().iter().map(|x| x * x).sum();
        if off <= 1e-30 * diag.max(1e-300) {
            break;
        }
        for p in 0..m {
            for q in p + 1..m {
                let apq = a[[p, q]];
                if apq == 0.0 {
                    continue;
                }
                let theta = (a[[q, q]] - a[[p, p]]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..m {
                    let (akp, akq) = (a[[k, p]], a[[k, q]]);
                    a[[k, p]] = c * akp - s * akq;
                    a[[k, q]] = s * akp + c * akq;
                }
                for k in 0..m {
                    let (apk, aqk) = (a[[p, k]], a[[q, k]]);
                    a[[p, k]] = c * apk - s * aqk;
                    a[[q, k]] = s * apk + c * aqk;
                }
                for k in 0..m {
                    let (vkp, vkq) = (v[[k, p]], v[[k, q]]);
                    v[[k, p]] = c * vkp - s * vkq;
                    v[[k, q]] = s * vkp + c * vkq;
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| a[[j, j]].total_cmp(&a[[i, i]]));
    let values = order.iter().map(|&i| a[[i, i]]).collect();
    let vectors = v.select(Axis(1), &order);
    (values, vectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jacobi on a 2x2 with known eigenpairs: [[2, 1], [1, 2]] has eigenvalues 3 and 1 with
    /// eigenvectors (1, 1)/√2 and (1, −1)/√2 (by hand).
    #[test]
    fn jacobi_two_by_two() {
        let (vals, vecs) = jacobi_eigen(ndarray::array![[2.0, 1.0], [1.0, 2.0]]);
        assert!((vals[0] - 3.0).abs() < 1e-14 && (vals[1] - 1.0).abs() < 1e-14);
        let r = std::f64::consts::FRAC_1_SQRT_2;
        assert!((vecs[[0, 0]].abs() - r).abs() < 1e-14);
        assert!((vecs[[0, 0]] - vecs[[1, 0]]).abs() < 1e-14);
    }

    /// Subspace iteration agrees with full Jacobi on a random 40x40 PSD matrix: A v = λ v to
    /// 1e-9 relative and the same top eigenvalues.
    #[test]
    fn subspace_iteration_matches_jacobi() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let b = Array2::from_shape_fn((40, 40), |_| rng.sample::<f64, _>(StandardNormal));
        let a = b.t().dot(&b);
        let (full, _) = jacobi_eigen(a.clone());
        let (top, vecs) = top_eigenpairs(a.view(), 5);
        for i in 0..5 {
            assert!((top[i] - full[i]).abs() <= 1e-9 * full[0], "{i}");
            let v = vecs.column(i);
            let r = a.dot(&v) - &v * top[i];
            assert!(r.dot(&r).sqrt() <= 1e-6 * full[0], "residual {i}");
        }
    }
}
