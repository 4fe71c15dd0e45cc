//! The data half of differentially private PCA (room: `data`; `data.pca_noise_multiplier`): the
//! second-moment matrix of the unit-normalised training rows, and the projection read from its
//! noisy release.
//!
//! Abadi et al. 2016, "Deep learning with differential privacy" (Sec. 4, "Differentially private
//! PCA"), as used by Pichapati et al. 2019, "AdaCliP: Adaptive clipping for private SGD"
//! (arXiv:1908.07643, Table 2): each training row is normalised to unit L2 norm,
//! x̂ = x/‖x‖₂ (a zero row stays zero), the matrix A = Σ_n x̂_n x̂_nᵀ is released with symmetric
//! Gaussian noise, and the data are projected onto the top-k eigenvectors of the released
//! matrix, x ↦ V x (no centring: a mean would be one more release).
//!
//! [`unit_second_moments`] returns the upper triangle of A (i ≤ j, row by row). Adding or removing
//! one example adds or removes the upper triangle of x̂x̂ᵀ, whose L2 norm is at most
//! ‖x̂x̂ᵀ‖_F = ‖x̂‖₂² ≤ 1 (the off-diagonal entries appear once, not twice): the vector's
//! add/remove-one L2 sensitivity is 1 (docs/accounting.md, "Private PCA"). The privacy room adds
//! N(0, σ²) to each of its entries (`privacy::mechanism::add_gaussian_noise`, sensitivity 1), and
//! [`PrivatePca::from_release`] mirrors the noisy triangle into a symmetric matrix and takes its
//! top-k eigenvectors by value ([`crate::eigen::top_eigenpairs`]: the noisy matrix is
//! indefinite), which is post-processing. The Abadi et al. code adds noise to the whole matrix
//! and averages it with its transpose (off-diagonal noise variance σ²/2 at the same cost); the
//! upper triangle is the release it implies.

use ndarray::{Array2, s};

use super::Dataset;
use super::error::DataError;

fn invalid(expected: impl Into<String>, found: impl ToString) -> DataError {
    DataError::InvalidParameter {
        name: "data.pca_components",
        expected: expected.into(),
        found: found.to_string(),
    }
}

/// Entries of the upper triangle (diagonal included) of a d × d matrix.
pub fn upper_len(d: usize) -> usize {
    d * (d + 1) / 2
}

/// The upper triangle (i ≤ j, row by row) of Σ_n x̂_n x̂_nᵀ over the rows of `train`, x̂ = x/‖x‖₂
/// (a zero row contributes nothing), in f64. Rows are summed in blocks of 2048 in row order by
/// one matrix product per block (no thread splits the sum, so the bits do not depend on the
/// thread count).
pub fn unit_second_moments(train: &Dataset) -> Vec<f64> {
    let (n, d) = train.features.dim();
    let mut a = Array2::<f64>::zeros((d, d));
    for start in (0..n).step_by(2048) {
        let end = (start + 2048).min(n);
        let mut chunk = train.features.slice(s![start..end, ..]).mapv(f64::from);
        for mut row in chunk.rows_mut() {
            let norm = row.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 0.0 {
                row.mapv_inplace(|x| x / norm);
            }
        }
        ndarray::linalg::general_mat_mul(1.0, &chunk.t(), &chunk, 1.0, &mut a);
    }
    let mut upper = Vec::with_capacity(upper_len(d));
    for i in 0..d {
        upper.extend(a.slice(s![i, i..]).iter());
    }
    upper
}

/// The projection onto the top-k eigenvectors of a released symmetric matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivatePca {
    /// Orthonormal components, `[k, d]`, by decreasing released eigenvalue; each one's largest
    /// coordinate positive.
    pub components: Array2<f64>,
    /// The released matrix's eigenvalues along them, `[k]`.
    pub eigenvalues: Vec<f64>,
}

impl PrivatePca {
    /// From the released upper triangle of a `d × d` matrix (`upper_len(d)` entries): mirrored
    /// into a symmetric matrix, and its `k` algebraically largest eigenpairs.
    pub fn from_release(upper: &[f64], d: usize, k: usize) -> Result<Self, DataError> {
        if k == 0 || k > d {
            return Err(invalid(format!("an integer in 1..={d}"), k));
        }
        if upper.len() != upper_len(d) {
            return Err(invalid(
                format!("{} released entries", upper_len(d)),
                upper.len(),
            ));
        }
        if let Some(x) = upper.iter().find(|x| !x.is_finite()) {
            return Err(invalid("a finite released matrix", x));
        }
        let mut full = vec![0.0f64; d * d];
        let mut at = 0;
        for i in 0..d {
            for j in i..d {
                full[i * d + j] = upper[at];
                full[j * d + i] = upper[at];
                at += 1;
            }
        }
        let (eigenvalues, vectors) = crate::eigen::top_eigenpairs(&full, d, k);
        let components = Array2::from_shape_fn((k, d), |(r, c)| vectors[r][c]);
        Ok(PrivatePca {
            components,
            eigenvalues,
        })
    }

    /// Number of components k.
    pub fn num_components(&self) -> usize {
        self.components.nrows()
    }

    /// Project each row x onto the components: `x · componentsᵀ` (the raw row, not x̂).
    ///
    /// # Shapes
    /// `[n, d]` → `[n, k]`; `sample_shape` becomes `[k]`.
    pub fn transform(&self, ds: &Dataset) -> Result<Dataset, DataError> {
        let d = self.components.ncols();
        if ds.features.ncols() != d {
            return Err(invalid(
                format!("examples of {d} features (the PCA's input)"),
                format!("{} features", ds.features.ncols()),
            ));
        }
        let projected = ds.features.mapv(f64::from).dot(&self.components.t());
        Ok(Dataset {
            features: projected.mapv(|x| x as f32),
            labels: ds.labels.clone(),
            sample_shape: vec![self.num_components()],
            num_classes: ds.num_classes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(rows: &[[f32; 3]]) -> Dataset {
        Dataset {
            features: Array2::from_shape_fn((rows.len(), 3), |(i, j)| rows[i][j]),
            labels: vec![0; rows.len()],
            sample_shape: vec![3],
            num_classes: 2,
        }
    }

    /// By hand: rows (3, 4, 0), (0, 0, 0) and (0, 0, 2) normalise to (0.6, 0.8, 0), 0 and
    /// (0, 0, 1); the upper triangle of their outer products' sum is
    /// [0.36, 0.48, 0, 0.64, 0, 1].
    #[test]
    fn second_moments_of_unit_rows_by_hand() {
        let got = unit_second_moments(&dataset(&[[3.0, 4.0, 0.0], [0.0; 3], [0.0, 0.0, 2.0]]));
        let want = [0.36, 0.48, 0.0, 0.64, 0.0, 1.0];
        assert_eq!(got.len(), upper_len(3));
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
        // Each example's triangle has L2 norm ≤ 1 (the sensitivity).
        let one = unit_second_moments(&dataset(&[[1.0, -2.0, 2.0]]));
        let norm: f64 = one.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!(norm <= 1.0 + 1e-12 && norm > 0.5, "{norm}");
    }

    /// The released matrix diag(1, 5, 3) with a coupling: top-2 components span coordinates 1
    /// and 2, ranked by eigenvalue; the transform is x · Vᵀ.
    #[test]
    fn projection_from_a_release() {
        // Upper triangle of [[1, 0, 0], [0, 5, 0], [0, 0, 3]].
        let pca = PrivatePca::from_release(&[1.0, 0.0, 0.0, 5.0, 0.0, 3.0], 3, 2).unwrap();
        assert_eq!(pca.eigenvalues, vec![5.0, 3.0]);
        assert_eq!(
            pca.components,
            ndarray::array![[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
        );
        let out = pca.transform(&dataset(&[[7.0, 2.0, -1.0]])).unwrap();
        assert_eq!(out.features, ndarray::array![[2.0f32, -1.0]]);
        assert_eq!(out.sample_shape, vec![2]);
        assert!(PrivatePca::from_release(&[1.0; 6], 3, 4).is_err());
        assert!(PrivatePca::from_release(&[1.0; 5], 3, 2).is_err());
        assert!(PrivatePca::from_release(&[f64::NAN; 6], 3, 2).is_err());
    }
}
