//! Noise mechanisms: the one place in dpx where a noise scale is formed.
//!
//! Part of the privacy room. [`add_gaussian_noise`] is the Gaussian mechanism: it adds
//! N(0, noise_std²) to every coordinate with `noise_std = noise_multiplier × sensitivity`
//! (Dwork & Roth 2014, Thm. A.1; Abadi et al. 2016, Alg. 1, line "Add noise", with
//! sensitivity = the clip norm C). No other function multiplies a noise multiplier by a
//! sensitivity: clipping policies call this one, and the event they record carries the same
//! `noise_multiplier` (see [`crate::privacy::event::DpEvent::Gaussian`]).
//!
//! Randomness: the caller passes a [`GaussianSource`]. Every `rand` RNG is one (a per-run
//! noise stream seeded from the run's seed: reproducible, for research): its standard normals
//! come from `rand_distr::StandardNormal` (ziggurat), drawn in f64. Floating-point noise is
//! known to leak through the low bits of the samples (Mironov 2012, "On significance of the
//! least significant bits for differential privacy"); like Opacus's default mode, seeded noise
//! does not defend against that attack. With `privacy.secure_noise = true` the source is
//! [`crate::privacy::secure_rng::SecureGaussian`]: ChaCha20 seeded from the OS, each normal a
//! sum of four normals over two (Opacus's `secure_mode` defence; limits in docs/security.md).
//!
//! [`add_laplace_noise`] is the Laplace mechanism (Dwork & Roth 2014, Def. 3.3, Thm. 3.6): it adds
//! Laplace(0, b) to every coordinate with the scale `b = scale × sensitivity` (density
//! e^{−|x|/b}/(2b), variance 2b²; `sensitivity` is the L1 sensitivity). The event it is recorded
//! as, [`crate::privacy::event::DpEvent::Laplace`], carries the same relative `scale`. Laplace
//! draws are b·(E₁ − E₂) with E₁, E₂ standard exponentials (ziggurat, `rand_distr::Exp1`) from the
//! run's seeded noise stream.
//!
//! This module never imports `model` or `train`.

use ndarray::ArrayViewMut1;
use rand::Rng;
use rand_distr::{Exp1, StandardNormal};

/// A source of i.i.d. standard normal draws for the noise mechanisms.
///
/// Every `rand` RNG is one: single draws are `rand_distr`'s ziggurat, and a whole vector of noise
/// ([`GaussianSource::add_scaled_normals`]) comes from [`crate::privacy::normal`]'s bulk sampler
/// (a xoshiro256++ stream seeded with 256 bits of this RNG, filled in blocks on the rayon pool,
/// the same samples for any thread count). The secure mode's
/// [`crate::privacy::secure_rng::SecureGaussian`] is a source without being an `RngCore`, so its
/// bits cannot leak into anything but noise; it keeps the per-draw default.
pub trait GaussianSource {
    /// One draw of N(0, 1).
    fn standard_normal(&mut self) -> f64;

    /// `out[j] += scale · z_j` with z_j i.i.d. N(0, 1). The default draws one at a time.
    fn add_scaled_normals(&mut self, out: &mut [f64], scale: f64) {
        for v in out {
            *v += scale * self.standard_normal();
        }
    }
}

impl<R: Rng + ?Sized> GaussianSource for R {
    fn standard_normal(&mut self) -> f64 {
        self.sample(StandardNormal)
    }

    fn add_scaled_normals(&mut self, out: &mut [f64], scale: f64) {
        crate::privacy::normal::add_scaled_normals(out, scale, self);
    }
}

/// Errors in a mechanism's parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MechanismError {
    #[error("noise_multiplier must be finite and non-negative, found {noise_multiplier}")]
    InvalidNoiseMultiplier { noise_multiplier: f64 },
    #[error("sensitivity must be finite and positive, found {sensitivity}")]
    InvalidSensitivity { sensitivity: f64 },
    #[error("Laplace scale must be finite and non-negative, found {scale}")]
    InvalidScale { scale: f64 },
}

/// The Gaussian mechanism in place: `sum[j] += noise_std · z_j`, `z_j ~ N(0, 1)` i.i.d., with
/// `noise_std = noise_multiplier × sensitivity`. Returns `noise_std`.
///
/// `sensitivity` is the L2 sensitivity of `sum` (for flat clipping, the clip norm C).
/// `noise_multiplier = 0` adds nothing (a non-private release: record it as such).
///
/// ```
/// use dpx::privacy::mechanism::add_gaussian_noise;
/// use ndarray::Array1;
/// use rand::SeedableRng;
/// let mut sum = Array1::<f64>::zeros(3);
/// let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
/// let noise_std = add_gaussian_noise(sum.view_mut(), 1.1, 2.0, &mut rng).unwrap();
/// assert_eq!(noise_std, 1.1 * 2.0);
/// ```
pub fn add_gaussian_noise<R: GaussianSource + ?Sized>(
    mut sum: ArrayViewMut1<'_, f64>,
    noise_multiplier: f64,
    sensitivity: f64,
    rng: &mut R,
) -> Result<f64, MechanismError> {
    if !(noise_multiplier.is_finite() && noise_multiplier >= 0.0) {
        return Err(MechanismError::InvalidNoiseMultiplier { noise_multiplier });
    }
    if !(sensitivity.is_finite() && sensitivity > 0.0) {
        return Err(MechanismError::InvalidSensitivity { sensitivity });
    }
    let noise_std = noise_multiplier * sensitivity;
    if noise_std > 0.0 {
        match sum.as_slice_mut() {
            Some(values) => rng.add_scaled_normals(values, noise_std),
            None => {
                let mut noise = vec![0.0; sum.len()];
                rng.add_scaled_normals(&mut noise, noise_std);
                sum.iter_mut().zip(noise).for_each(|(v, z)| *v += z);
            }
        }
    }
    Ok(noise_std)
}

/// The Laplace mechanism in place: `sum[j] += b · (E₁ − E₂)_j` i.i.d. Laplace(0, b), with
/// `b = scale × sensitivity`. Returns `b`.
///
/// `sensitivity` is the L1 sensitivity of `sum` (for the accelerated methods, S1/m for the mean
/// of a batch of m examples whose per-example gradients differ by at most S1 in L1 norm); the
/// release is then (1/`scale`)-DP. `scale = 0` adds nothing (a non-private release).
///
/// ```
/// use dpx::privacy::mechanism::add_laplace_noise;
/// use ndarray::Array1;
/// use rand::SeedableRng;
/// let mut g = Array1::<f64>::zeros(3);
/// let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
/// let b = add_laplace_noise(g.view_mut(), 2.5, 0.04, &mut rng).unwrap();
/// assert_eq!(b, 2.5 * 0.04);
/// ```
pub fn add_laplace_noise<R: Rng + ?Sized>(
    mut sum: ArrayViewMut1<'_, f64>,
    scale: f64,
    sensitivity: f64,
    rng: &mut R,
) -> Result<f64, MechanismError> {
    if !(scale.is_finite() && scale >= 0.0) {
        return Err(MechanismError::InvalidScale { scale });
    }
    if !(sensitivity.is_finite() && sensitivity > 0.0) {
        return Err(MechanismError::InvalidSensitivity { sensitivity });
    }
    let b = scale * sensitivity;
    if b > 0.0 {
        for v in sum.iter_mut() {
            let e1: f64 = rng.sample(Exp1);
            let e2: f64 = rng.sample(Exp1);
            *v += b * (e1 - e2);
        }
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array1;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    #[test]
    fn noise_has_the_formed_standard_deviation() {
        // 200,000 draws with σ·s = 0.5·3 = 1.5: the sample std's standard error is
        // 1.5/√(2·200000) ≈ 0.0024, so ±0.012 (5 standard errors) cannot fail by chance in practice.
        let n = 200_000;
        let mut sum = Array1::<f64>::from_elem(n, 10.0);
        let mut rng = ChaCha12Rng::seed_from_u64(3);
        let std = add_gaussian_noise(sum.view_mut(), 0.5, 3.0, &mut rng).unwrap();
        assert_eq!(std, 1.5);
        let mean = sum.iter().sum::<f64>() / n as f64;
        let var = sum.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        assert!(
            (mean - 10.0).abs() < 5.0 * 1.5 / (n as f64).sqrt(),
            "mean {mean}"
        );
        assert!((var.sqrt() - 1.5).abs() < 0.012, "std {}", var.sqrt());
    }

    #[test]
    fn laplace_noise_has_the_declared_scale() {
        // 200,000 draws of Laplace(0, b), b = 0.75·2 = 1.5. For X ~ Laplace(0, b), |X| ~ Exp(b):
        // E|X| = b and sd|X| = b, so the mean of |X| has standard error b/√n ≈ 0.00335; ±5
        // standard errors. The variance 2b² is checked too: Var(X²) = E X⁴ − (E X²)² =
        // 24b⁴ − 4b⁴ = 20b⁴, so the sample second moment has standard error √20·b²/√n.
        // A scale-vs-std mix-up (b/√2, the authors' code) is off by 29% and fails both.
        let n = 200_000;
        let b_want = 1.5;
        let mut sum = Array1::<f64>::zeros(n);
        let mut rng = ChaCha12Rng::seed_from_u64(7);
        let b = add_laplace_noise(sum.view_mut(), 0.75, 2.0, &mut rng).unwrap();
        assert_eq!(b, b_want);
        let nf = n as f64;
        let mean = sum.sum() / nf;
        let mean_abs = sum.iter().map(|v| v.abs()).sum::<f64>() / nf;
        let second = sum.iter().map(|v| v * v).sum::<f64>() / nf;
        assert!(
            mean.abs() < 5.0 * (2.0f64).sqrt() * b / nf.sqrt(),
            "mean {mean}"
        );
        assert!(
            (mean_abs - b).abs() < 5.0 * b / nf.sqrt(),
            "E|X| {mean_abs}"
        );
        let se2 = 20f64.sqrt() * b * b / nf.sqrt();
        assert!((second - 2.0 * b * b).abs() < 5.0 * se2, "E X^2 {second}");
        // Zero scale adds nothing; bad parameters are refused.
        let mut s = Array1::<f64>::ones(4);
        add_laplace_noise(s.view_mut(), 0.0, 1.0, &mut rng).unwrap();
        assert_eq!(s, Array1::<f64>::ones(4));
        assert!(matches!(
            add_laplace_noise(s.view_mut(), f64::NAN, 1.0, &mut rng),
            Err(MechanismError::InvalidScale { .. })
        ));
        assert!(matches!(
            add_laplace_noise(s.view_mut(), 1.0, 0.0, &mut rng),
            Err(MechanismError::InvalidSensitivity { .. })
        ));
    }

    #[test]
    fn same_seed_same_noise_and_zero_multiplier_adds_nothing() {
        let draw = |seed| {
            let mut s = Array1::<f64>::zeros(5);
            add_gaussian_noise(
                s.view_mut(),
                1.0,
                1.0,
                &mut ChaCha12Rng::seed_from_u64(seed),
            )
            .unwrap();
            s
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
        let mut s = Array1::<f64>::ones(5);
        add_gaussian_noise(s.view_mut(), 0.0, 1.0, &mut ChaCha12Rng::seed_from_u64(0)).unwrap();
        assert_eq!(s, Array1::<f64>::ones(5));
    }

    #[test]
    fn invalid_parameters_are_refused() {
        let mut s = Array1::<f64>::zeros(2);
        let mut rng = ChaCha12Rng::seed_from_u64(0);
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                add_gaussian_noise(s.view_mut(), bad, 1.0, &mut rng),
                Err(MechanismError::InvalidNoiseMultiplier { .. })
            ));
        }
        for bad in [0.0, -1.0, f64::NAN] {
            assert!(matches!(
                add_gaussian_noise(s.view_mut(), 1.0, bad, &mut rng),
                Err(MechanismError::InvalidSensitivity { .. })
            ));
        }
    }
}
