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

    /// A standardizer from public constants, one per image channel (when `mean` has as many
    /// entries as `data`'s sample shape has channels and that is not the feature count) or one
    /// per feature. No statistic of `data` is used; its shape only says how to expand.
    pub fn fixed(data: &Dataset, mean: &[f64], std: &[f64]) -> Result<Self, DataError> {
        let d = data.num_features();
        let channels = (data.sample_shape.len() == 3).then(|| data.sample_shape[0]);
        let (groups, mode) = match channels {
            Some(c) if mean.len() == c && c > 0 && d.is_multiple_of(c) => {
                (c, StandardizeMode::PerChannel)
            }
            _ if mean.len() == d => (d, StandardizeMode::PerFeature),
            _ => {
                return Err(invalid(
                    "fixed standardisation",
                    match channels {
                        Some(c) => {
                            format!("{c} numbers (one per channel) or {d} (one per feature)")
                        }
                        None => format!("{d} numbers (one per feature)"),
                    },
                    format!("{} numbers", mean.len()),
                ));
            }
        };
        if std.len() != mean.len() || std.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(invalid(
                "fixed standardisation",
                "one finite std > 0 per mean".to_string(),
                format!("{} stds", std.len()),
            ));
        }
        let width = d / groups;
        Ok(Standardizer {
            mean: (0..d).map(|j| mean[j / width]).collect(),
            std: (0..d).map(|j| std[j / width]).collect(),
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
        features: super::gather_rows(ds.features.view(), indices),
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

/// One preprocessing step, as a config lists them; see [`apply_steps`].
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// x / 255 ([`scale_to_unit`]).
    ScaleToUnit,
    /// [`Standardizer`] fitted on train, applied to both.
    Standardize(StandardizeMode),
    /// Each row to L2 norm at most `max_norm` ([`clip_row_norms`]), train and test.
    ClipRowNorm { max_norm: f64 },
    /// One factor so the largest train row norm is `max_norm` ([`scale_max_row_norm`]).
    ScaleMaxRowNorm { max_norm: f64 },
    /// Keep these classes, relabelled in order ([`keep_classes`]), train and test.
    KeepClasses(Vec<usize>),
    /// A uniform subset of `n` training examples ([`subsample`]).
    SubsampleTrain { n: usize },
    /// A uniform subset of `n` test examples ([`subsample`]).
    SubsampleTest { n: usize },
    /// Hold out `size` training examples and use them as the evaluation set in place of the
    /// test set ([`train_validation_split`]), e.g. for tuning without touching the test set.
    ValidationAsTest { size: usize },
    /// PCA to `components` dimensions fitted on train ([`Pca`]).
    Pca { components: usize },
}

/// Preprocessed data and the notes outputs should carry (e.g. [`Pca::NOTE`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub data: TrainTest,
    pub notes: Vec<String>,
}

/// A seed for step `index` derived from the pipeline seed (SplitMix64 finaliser, Steele et
/// al. 2014), so each random step draws an independent stream.
fn step_seed(seed: u64, index: usize) -> u64 {
    let mut z = seed.wrapping_add((index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Apply `steps` in order. Random steps are deterministic from `seed`; statistics are fitted
/// on the training set as it stands at that step.
pub fn apply_steps(mut data: TrainTest, steps: &[Step], seed: u64) -> Result<Prepared, DataError> {
    let mut notes = Vec::new();
    let fitted = "fitted on the training data without privacy (not differentially private)";
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::ScaleToUnit => {
                scale_to_unit(&mut data.train);
                scale_to_unit(&mut data.test);
            }
            Step::Standardize(mode) => {
                standardize(&mut data, *mode)?;
                notes.push(format!("standardisation statistics {fitted}"));
            }
            Step::ClipRowNorm { max_norm } => {
                clip_row_norms(&mut data.train, *max_norm)?;
                clip_row_norms(&mut data.test, *max_norm)?;
            }
            Step::ScaleMaxRowNorm { max_norm } => {
                scale_max_row_norm(&mut data, *max_norm)?;
                notes.push(format!("the row-norm scale factor was {fitted}"));
            }
            Step::KeepClasses(classes) => {
                data.train = keep_classes(&data.train, classes)?;
                data.test = keep_classes(&data.test, classes)?;
            }
            Step::SubsampleTrain { n } => {
                data.train = subsample(&data.train, *n, step_seed(seed, i))?;
            }
            Step::SubsampleTest { n } => {
                data.test = subsample(&data.test, *n, step_seed(seed, i))?;
            }
            Step::ValidationAsTest { size } => {
                let (train, validation) =
                    train_validation_split(&data.train, *size, step_seed(seed, i))?;
                data = TrainTest {
                    train,
                    test: validation,
                };
                notes.push(format!(
                    "evaluation uses {size} held-out training examples, not the test set"
                ));
            }
            Step::Pca { components } => {
                let (projected, _) = pca(&data, *components)?;
                data = projected;
                notes.push(Pca::NOTE.to_string());
            }
        }
    }
    Ok(Prepared { data, notes })
}

/// The `k` largest eigenvalues (descending) and eigenvectors (columns, `[d, k]`) of a symmetric
/// positive semi-definite matrix, by subspace iteration with Rayleigh–Ritz on a block of
/// `p = min(d, max(2k, k + 10))` vectors (Golub & Van Loan, Sec. 8.2.4), stopping when the top-k
/// Ritz values change by at most 1e−12 of the largest.
fn top_eigenpairs(a: ArrayView2<f64>, k: usize) -> (Vec<f64>, Array2<f64>) {
    let d = a.nrows();
    let p = (2 * k).max(k + 10).min(d);
    if p == d {
        let (values, vectors) = jacobi_eigen(a.to_owned());
        return (
            values.into_iter().take(k).collect(),
            vectors.slice(s![.., ..k]).to_owned(),
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(0x05ee_d9ca);
    // Basis vectors are the rows of `q` ([p, d]), so each is contiguous.
    let mut q = Array2::from_shape_fn((p, d), |_| rng.sample::<f64, _>(StandardNormal));
    orthonormalize_rows(&mut q, &mut rng);
    let mut last = vec![f64::INFINITY; k];
    let mut values = Vec::new();
    let mut ritz = Array2::zeros((p, d));
    for _ in 0..1000 {
        let z = q.dot(&a); // rows A q_i (A symmetric)
        let h = z.dot(&q.t());
        let h = (&h + &h.t()) * 0.5;
        let (vals, v) = jacobi_eigen(h);
        ritz = v.t().dot(&q);
        let tol = 1e-12 * vals[0].abs().max(1e-300);
        let converged = vals
            .iter()
            .zip(&last)
            .take(k)
            .all(|(x, y)| (x - y).abs() <= tol);
        last.copy_from_slice(&vals[..k]);
        values = vals;
        if converged {
            break;
        }
        q = v.t().dot(&z); // A times the Ritz vectors: the next subspace
        orthonormalize_rows(&mut q, &mut rng);
    }
    values.truncate(k);
    (values, ritz.slice(s![..k, ..]).t().to_owned())
}

/// Modified Gram–Schmidt (twice) on the rows of `q`, in place; a row that vanishes (rank
/// deficiency) is replaced by a fresh random direction.
fn orthonormalize_rows(q: &mut Array2<f64>, rng: &mut ChaCha8Rng) {
    let (p, d) = q.dim();
    let mut rows: Vec<Vec<f64>> = q.rows().into_iter().map(|r| r.to_vec()).collect();
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
    for j in 0..p {
        let (done, rest) = rows.split_at_mut(j);
        let row = &mut rest[0];
        for attempt in 0..4 {
            let before = dot(row, row).sqrt();
            for _ in 0..2 {
                for prev in done.iter() {
                    let c = dot(prev, row);
                    row.iter_mut().zip(prev).for_each(|(x, y)| *x -= c * y);
                }
            }
            let norm = dot(row, row).sqrt();
            if norm > 1e-10 * before.max(1e-300) || attempt == 3 {
                row.iter_mut().for_each(|x| *x /= norm.max(1e-300));
                break;
            }
            row.iter_mut().for_each(|x| *x = rng.sample(StandardNormal));
        }
    }
    for (mut dst, src) in q.rows_mut().into_iter().zip(&rows) {
        dst.assign(&ndarray::ArrayView1::from(&src[..d]));
    }
}

/// Eigen-decomposition of a symmetric matrix by cyclic Jacobi rotations (Golub & Van Loan,
/// Alg. 8.5.3). Returns eigenvalues in decreasing order and eigenvectors as columns.
fn jacobi_eigen(a: Array2<f64>) -> (Vec<f64>, Array2<f64>) {
    let m = a.nrows();
    // Row-major flat storage: a[i * m + j]; v holds eigenvectors as rows (transposed).
    let mut a: Vec<f64> = a.iter().copied().collect();
    let mut v = vec![0.0f64; m * m];
    (0..m).for_each(|i| v[i * m + i] = 1.0);
    for _sweep in 0..100 {
        let mut off = 0.0;
        let mut diag = 0.0;
        for i in 0..m {
            diag += a[i * m + i] * a[i * m + i];
            for j in i + 1..m {
                off += a[i * m + j] * a[i * m + j];
            }
        }
        if off <= 1e-30 * diag.max(1e-300) {
            break;
        }
        for p in 0..m {
            for q in p + 1..m {
                let apq = a[p * m + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (a[q * m + q] - a[p * m + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                // A ← Jᵀ A J: columns p, q, then rows p, q (symmetric, so rows mirror columns).
                for k in 0..m {
                    let (akp, akq) = (a[k * m + p], a[k * m + q]);
                    a[k * m + p] = c * akp - s * akq;
                    a[k * m + q] = s * akp + c * akq;
                }
                let (rp, rq) = (p * m, q * m);
                for k in 0..m {
                    let (apk, aqk) = (a[rp + k], a[rq + k]);
                    a[rp + k] = c * apk - s * aqk;
                    a[rq + k] = s * apk + c * aqk;
                }
                for k in 0..m {
                    let (vpk, vqk) = (v[rp + k], v[rq + k]);
                    v[rp + k] = c * vpk - s * vqk;
                    v[rq + k] = s * vpk + c * vqk;
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| a[j * m + j].total_cmp(&a[i * m + i]));
    let values = order.iter().map(|&i| a[i * m + i]).collect();
    let vectors = Array2::from_shape_fn((m, m), |(r, c)| v[order[c] * m + r]);
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

    /// A rank-2 matrix u uᵀ·3 + w wᵀ (u ⟂ w unit vectors in 30 dimensions) has eigenvalues 3
    /// and 1 (by construction); the block of 12 vectors collapses onto rank 2 and the vanishing
    /// rows are replaced, not divided by zero.
    #[test]
    fn subspace_iteration_on_a_rank_deficient_matrix() {
        let d = 30;
        let u: Vec<f64> = (0..d)
            .map(|i| if i < 2 { 0.5f64.sqrt() } else { 0.0 })
            .collect();
        let w: Vec<f64> = (0..d).map(|i| if i == 5 { 1.0 } else { 0.0 }).collect();
        let a = Array2::from_shape_fn((d, d), |(i, j)| 3.0 * u[i] * u[j] + w[i] * w[j]);
        let (vals, vecs) = top_eigenpairs(a.view(), 2);
        assert!(
            (vals[0] - 3.0).abs() < 1e-12 && (vals[1] - 1.0).abs() < 1e-12,
            "{vals:?}"
        );
        assert!((vecs[[0, 0]].abs() - 0.5f64.sqrt()).abs() < 1e-9);
        assert!((vecs[[5, 1]].abs() - 1.0).abs() < 1e-9);
        assert!(vecs.iter().all(|x| x.is_finite()));
    }
}
