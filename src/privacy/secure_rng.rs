//! Secure noise: a cryptographic random source for the Gaussian mechanism, with Opacus's
//! defence against floating-point attacks on the sampler.
//!
//! Part of the privacy room; owns [`SecureGaussian`], the noise source of runs with
//! `privacy.secure_noise = true`. It must not be used where reproducibility is wanted: every
//! instance is seeded from the operating system, so two runs never draw the same noise.
//!
//! What it does:
//! - Bits come from ChaCha20 (`rand_chacha::ChaCha20Rng`, 20 rounds: a cryptographic stream
//!   cipher) seeded with 256 bits from the OS (`getrandom` through `rand`'s `OsRng`). The
//!   seeded mode's ChaCha12 is not weak, but its seed is the run's (public) seed.
//! - A standard normal is formed as (z₁ + z₂ + z₃ + z₄) / 2 with z_k ~ N(0, 1) i.i.d.
//!   (ziggurat, f64). The sum has exactly unit variance. This is the defence Opacus uses in
//!   `secure_mode` (`opacus/optimizers/optimizer.py::_generate_noise`, after Holohan & Braghin
//!   2021, "Secure random sampling in differential privacy"): Mironov (2012, "On significance
//!   of the least significant bits for differential privacy", §3–4) shows that the set of
//!   doubles a single floating-point normal (or Laplace) sample can take depends on its mean,
//!   so the low bits of one noisy value can reveal which neighbour was released. Summing
//!   several independent samples spreads each output over many more representable values and
//!   defeats the published attack.
//!
//! Limits (also in docs/security.md): the sum-of-normals defence is a heuristic, not a proof.
//! No formal (ε, δ) statement covers the floating-point output; a discrete Gaussian on a grid
//! (Canonne, Kamath & Steinke 2020) would give one and is not implemented. Timing side
//! channels of the ziggurat sampler are not addressed, and neither are the model's other
//! floating-point operations (clipping, the optimiser).

use rand::rngs::OsRng;
use rand::{Rng, SeedableRng, TryRngCore};
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;

use super::mechanism::GaussianSource;

/// The OS random source could not be read.
#[derive(Debug, thiserror::Error)]
#[error("could not read the operating system's random source: {reason}")]
pub struct SecureRngError {
    pub reason: String,
}

/// Number of independent normals summed per output (Opacus `secure_mode`: 4, divided by 2).
pub const NORMALS_PER_SAMPLE: usize = 4;

/// A cryptographic, OS-seeded standard-normal source (ChaCha20, sum of four normals over two).
///
/// It deliberately implements neither `Clone` nor `RngCore`: its draws are only for noise.
pub struct SecureGaussian {
    rng: ChaCha20Rng,
}

impl SecureGaussian {
    /// A new source seeded with 256 bits from the operating system.
    pub fn from_os() -> Result<Self, SecureRngError> {
        let mut seed = <ChaCha20Rng as SeedableRng>::Seed::default();
        OsRng
            .try_fill_bytes(&mut seed)
            .map_err(|e| SecureRngError {
                reason: e.to_string(),
            })?;
        Ok(Self {
            rng: ChaCha20Rng::from_seed(seed),
        })
    }
}

impl std::fmt::Debug for SecureGaussian {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the generator's state.
        f.write_str("SecureGaussian { .. }")
    }
}

impl GaussianSource for SecureGaussian {
    fn standard_normal(&mut self) -> f64 {
        let mut s = 0.0f64;
        for _ in 0..NORMALS_PER_SAMPLE {
            let z: f64 = self.rng.sample(StandardNormal);
            s += z;
        }
        // Var(Σ z_k) = 4, so the sum over √4 = 2 is standard normal.
        s / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::mechanism::add_gaussian_noise;
    use ndarray::Array1;

    #[test]
    fn secure_noise_has_the_declared_std_and_mean() {
        // 200,000 draws with noise_std = 1.3·2 = 2.6. The sample std's standard error is
        // 2.6/√(2n) ≈ 0.0041 and the mean's 2.6/√n ≈ 0.0058: ±6 standard errors cannot fail
        // by chance in practice (two-sided p ≈ 2e-9).
        let n = 200_000usize;
        let mut sum = Array1::<f64>::zeros(n);
        let mut rng = SecureGaussian::from_os().unwrap();
        let std = add_gaussian_noise(sum.view_mut(), 1.3, 2.0, &mut rng).unwrap();
        assert_eq!(std, 2.6);
        let mean = sum.sum() / n as f64;
        let var = sum.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let nf = n as f64;
        assert!(mean.abs() < 6.0 * 2.6 / nf.sqrt(), "mean {mean}");
        assert!(
            (var.sqrt() - 2.6).abs() < 6.0 * 2.6 / (2.0 * nf).sqrt(),
            "std {}",
            var.sqrt()
        );
        // Gaussian shape: the excess kurtosis of N(0, s²) is 0, with standard error √(24/n)
        // ≈ 0.011; a single uniform or a Laplace would give -1.2 or +3.
        let m4 = sum.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / nf;
        let kurt = m4 / var.powi(2) - 3.0;
        assert!(
            kurt.abs() < 6.0 * (24.0 / nf).sqrt(),
            "excess kurtosis {kurt}"
        );
    }

    #[test]
    fn two_secure_sources_differ() {
        let draw = || {
            let mut s = Array1::<f64>::zeros(8);
            add_gaussian_noise(
                s.view_mut(),
                1.0,
                1.0,
                &mut SecureGaussian::from_os().unwrap(),
            )
            .unwrap();
            s
        };
        // Equal only if two 256-bit OS seeds collide.
        assert_ne!(draw(), draw());
    }

    #[test]
    fn debug_does_not_print_the_state() {
        let rng = SecureGaussian::from_os().unwrap();
        assert_eq!(format!("{rng:?}"), "SecureGaussian { .. }");
    }
}
