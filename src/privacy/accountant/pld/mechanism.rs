//! PLD room, layer 1: privacy-loss functions of additive-noise mechanisms.
//!
//! Owns the continuous maths of the Gaussian and Laplace mechanisms and their Poisson-subsampled
//! forms: the privacy loss ℓ(x) = ln(μ_upper(x)/μ_lower(x)), its inverse, the CDFs of the two
//! output distributions and the exact hockey-stick divergence δ(ε). Knows nothing of grids,
//! PMFs or events (layers 2–4 do).
//!
//! Conventions follow Google's PLD design (`dp_accounting/pld/privacy_loss_mechanism.py` and its
//! supplementary note "Privacy Loss Distributions"): μ is the noise density (symmetric), s the
//! sensitivity (here always 1, since dpx events carry noise relative to the sensitivity), q the
//! Poisson sampling rate:
//!
//! | adjacency | μ_upper(x)                  | μ_lower(x)                  |
//! |-----------|-----------------------------|-----------------------------|
//! | Remove    | q μ(x + s) + (1 − q) μ(x)   | μ(x)                        |
//! | Add       | μ(x)                        | q μ(x − s) + (1 − q) μ(x)   |
//! | Replace   | q μ(x + s) + (1 − q) μ(x)   | q μ(x − s) + (1 − q) μ(x)   |
//!
//! For q < 1 under add/remove both directions are needed (the PLD is not symmetric): the
//! mechanism is (ε, δ)-DP with δ = max(δ_remove(ε), δ_add(ε)) (Zhu, Dong, Wang 2022, Prop. 30;
//! dp_accounting's `PrivacyLossDistribution`). ℓ is non-increasing in x, so
//! δ(ε) = μ_upper(X ≤ x_ε) − e^ε μ_lower(X ≤ x_ε) with x_ε = sup{x : ℓ(x) ≥ ε}
//! (supplementary note, Observation 1 and §2).
//!
//! Must not: allocate grids, or decide which events are supported.

use crate::privacy::special::{log_add_exp, log_normal_cdf, normal_cdf};

/// Which pair of neighbouring output distributions a privacy loss describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adjacency {
    /// The larger dataset is the "upper" one: a record is removed from D to give D'.
    Remove,
    /// A record is added to D to give D'.
    Add,
    /// A record of D is replaced (sensitivity shift s in both directions, distance 2s).
    Replace,
}

/// The noise distribution of an additive mechanism, relative to the sensitivity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    /// N(0, σ²), σ = `noise_multiplier`.
    Gaussian { noise_multiplier: f64 },
    /// Laplace(0, b), density e^{−|x|/b}/(2b), b = `scale`.
    Laplace { scale: f64 },
}

/// ln of the mass that may be cut from each tail of the Gaussian noise before discretisation;
/// the cut lower tail becomes infinite loss (pessimistic). dp_accounting cuts e^{−50}; dpx cuts
/// e^{−38} ≈ 3e-17 per side and step (40,000 steps add at most 1.3e-12 to δ), which drops about a
/// third of the grid points of a small-q Gaussian (its loss range is set by this tail) and so of
/// the cost of every distinct step of a schedule; ε moved by 1e-11 relative on the 200-step
/// schedule of docs/accounting.md.
const LOG_MASS_TRUNCATION_BOUND: f64 = -38.0;

/// The privacy loss of one additive-noise mechanism (sensitivity 1), optionally Poisson
/// subsampled with rate `sample_rate` ∈ (0, 1].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdditiveNoiseLoss {
    noise: Noise,
    sample_rate: f64,
    adjacency: Adjacency,
    /// ln q and ln(1 − q), cached: the loss and its inverse use them at every grid point.
    log_q: f64,
    log_1m_q: f64,
}

/// The range of privacy losses the connect-the-dots grid must cover (Doroshenko et al. 2022,
/// Algorithm 1 input): every loss of μ_upper outside the noise truncation lies in
/// [`epsilon_lower`, `epsilon_upper`] or is counted as infinite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossRange {
    pub epsilon_lower: f64,
    pub epsilon_upper: f64,
}

/// One point of a hockey-stick curve: δ(ε) and the masses μ_upper(ℓ ≥ ε) and μ_lower(ℓ ≥ ε)
/// it is made of (δ = upper_mass − e^ε·lower_mass).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub delta: f64,
    pub upper_mass: f64,
    pub lower_mass: f64,
}

impl AdditiveNoiseLoss {
    /// A mechanism's privacy loss. Callers guarantee a positive finite noise parameter and
    /// `sample_rate` ∈ (0, 1]. Returns `None` for the one pair without a closed-form inverse
    /// here: subsampled Laplace under replace-one (dp_accounting refuses it too).
    pub fn new(noise: Noise, sample_rate: f64, adjacency: Adjacency) -> Option<Self> {
        let laplace = matches!(noise, Noise::Laplace { .. });
        if laplace && adjacency == Adjacency::Replace && sample_rate < 1.0 {
            return None;
        }
        Some(Self::any(noise, sample_rate, adjacency))
    }

    /// Like [`AdditiveNoiseLoss::new`], also for subsampled Laplace under replace-one, whose
    /// inverse loss is found by bisection: good enough for a lower estimate (an inexact x_ε
    /// only moves mass between neighbouring rounded-down bins), not for the pessimistic
    /// factories, which need δ(ε) exactly at the grid points.
    pub fn any(noise: Noise, sample_rate: f64, adjacency: Adjacency) -> Self {
        Self {
            noise,
            sample_rate,
            adjacency,
            log_q: sample_rate.ln(),
            log_1m_q: (-sample_rate).ln_1p(),
        }
    }

    /// P[ℓ(X) ≥ ε] for X ~ μ_upper, = μ_upper(X ≤ x_ε) (ℓ is non-increasing).
    pub fn upper_mass_at_least(&self, epsilon: f64) -> f64 {
        let x = self.inverse_privacy_loss(epsilon);
        if x == f64::INFINITY {
            1.0
        } else if x == f64::NEG_INFINITY {
            0.0
        } else {
            self.mu_upper_cdf(x)
        }
    }

    /// The sampling rate q.
    pub fn sample_rate(&self) -> f64 {
        self.sample_rate
    }

    /// The noise CDF F(x).
    fn noise_cdf(&self, x: f64) -> f64 {
        match self.noise {
            Noise::Gaussian { noise_multiplier } => normal_cdf(x / noise_multiplier),
            Noise::Laplace { scale } => {
                if x < 0.0 {
                    0.5 * (x / scale).exp()
                } else {
                    1.0 - 0.5 * (-x / scale).exp()
                }
            }
        }
    }

    /// ln F(x), accurate deep in the lower tail.
    fn noise_log_cdf(&self, x: f64) -> f64 {
        match self.noise {
            Noise::Gaussian { noise_multiplier } => log_normal_cdf(x / noise_multiplier),
            Noise::Laplace { scale } => {
                if x < 0.0 {
                    (0.5f64).ln() + x / scale
                } else {
                    (-0.5 * (-x / scale).exp()).ln_1p()
                }
            }
        }
    }

    /// P[X ≤ x] for X ~ μ_upper.
    pub fn mu_upper_cdf(&self, x: f64) -> f64 {
        let q = self.sample_rate;
        match self.adjacency {
            Adjacency::Add => self.noise_cdf(x),
            Adjacency::Remove | Adjacency::Replace => {
                if q == 1.0 {
                    self.noise_cdf(x + 1.0)
                } else {
                    (1.0 - q) * self.noise_cdf(x) + q * self.noise_cdf(x + 1.0)
                }
            }
        }
    }

    /// ln P[X ≤ x] for X ~ μ_lower.
    pub fn mu_lower_log_cdf(&self, x: f64) -> f64 {
        let q = self.sample_rate;
        match self.adjacency {
            Adjacency::Remove => self.noise_log_cdf(x),
            Adjacency::Add | Adjacency::Replace => {
                if q == 1.0 {
                    self.noise_log_cdf(x - 1.0)
                } else {
                    log_add_exp(
                        self.log_1m_q + self.noise_log_cdf(x),
                        self.log_q + self.noise_log_cdf(x - 1.0),
                    )
                }
            }
        }
    }

    /// ℓ₀(x) = ln(μ(x + 1)/μ(x)), the unsubsampled loss for the remove direction.
    fn loss_unsampled_remove(&self, x: f64) -> f64 {
        match self.noise {
            Noise::Gaussian { noise_multiplier } => {
                (-0.5 - x) / (noise_multiplier * noise_multiplier)
            }
            // (|x| − |x + 1|)/b, written piecewise so that x = ±∞ is defined.
            Noise::Laplace { scale } => {
                if x >= 0.0 {
                    -1.0 / scale
                } else if x <= -1.0 {
                    1.0 / scale
                } else {
                    (-2.0 * x - 1.0) / scale
                }
            }
        }
    }

    /// sup{x : ℓ₀(x) ≥ l} for the unsubsampled remove direction (±∞ when empty/everything).
    fn inverse_loss_unsampled_remove(&self, l: f64) -> f64 {
        match self.noise {
            Noise::Gaussian { noise_multiplier } => -0.5 - l * noise_multiplier * noise_multiplier,
            Noise::Laplace { scale } => {
                let t = l * scale;
                if t > 1.0 {
                    f64::NEG_INFINITY
                } else if t <= -1.0 {
                    f64::INFINITY
                } else {
                    0.5 * (-1.0 - t)
                }
            }
        }
    }

    /// Remove-direction loss with subsampling: ln(1 − q + q e^{ℓ₀(x)}).
    fn loss_remove(&self, x: f64) -> f64 {
        let l0 = self.loss_unsampled_remove(x);
        let q = self.sample_rate;
        if q == 1.0 {
            l0
        } else {
            log_add_exp(self.log_1m_q, self.log_q + l0)
        }
    }

    /// ln(1 + (e^ε − 1)/q) = ln(e^ε − (1 − q)) − ln q for q ∈ (0, 1), stable; −∞ when the
    /// argument of the logarithm is ≤ 0.
    fn log_one_plus_expm1_over_q(&self, epsilon: f64) -> f64 {
        self.log_one_plus_expm1_over_q_and_exp(epsilon).0
    }

    /// [`Self::log_one_plus_expm1_over_q`] and e^ε from one exponential: with
    /// y = e^{ln(1 − q) − ε} − 1 ∈ (−1, 0), ln(e^ε − (1 − q)) − ln q = ε + ln(−y) − ln q
    /// (the operations of `log_sub_exp(ε, ln(1 − q)) − ln q`) and e^ε = (1 − q)/(1 + y).
    fn log_one_plus_expm1_over_q_and_exp(&self, epsilon: f64) -> (f64, f64) {
        if epsilon <= self.log_1m_q {
            return (f64::NEG_INFINITY, epsilon.exp());
        }
        let y = (self.log_1m_q - epsilon).exp_m1();
        (
            epsilon + (-y).ln() - self.log_q,
            (1.0 - self.sample_rate) / (1.0 + y),
        )
    }

    /// The privacy loss ℓ(x) = ln(μ_upper(x)/μ_lower(x)); non-increasing in x.
    pub fn privacy_loss(&self, x: f64) -> f64 {
        match self.adjacency {
            Adjacency::Remove => self.loss_remove(x),
            // By symmetry of μ: ℓ_add(x) = −ℓ_remove(−x).
            Adjacency::Add => -self.loss_remove(-x),
            Adjacency::Replace => self.loss_remove(x) - self.loss_remove(-x),
        }
    }

    /// x_ε = sup{x : ℓ(x) ≥ ε}. Callers keep ε inside the range where it is finite
    /// (see [`AdditiveNoiseLoss::delta_for_epsilon`]).
    pub fn inverse_privacy_loss(&self, epsilon: f64) -> f64 {
        let q = self.sample_rate;
        match self.adjacency {
            Adjacency::Remove => {
                if q == 1.0 {
                    return self.inverse_loss_unsampled_remove(epsilon);
                }
                // ℓ₀ = ln(1 + (e^ε − 1)/q)
                let l0 = self.log_one_plus_expm1_over_q(epsilon);
                self.inverse_loss_unsampled_remove(l0)
            }
            Adjacency::Add => {
                // ℓ_add(x) = −ln(1 − q + q e^{−ℓ₀ᵃ(x)}) with ℓ₀ᵃ(x) = ln(μ(x)/μ(x − 1)) =
                // ℓ₀(x − 1); solving ℓ_add(x) = ε gives ℓ₀(x − 1) = −ln(1 + (e^{−ε} − 1)/q), so
                // x_ε = 1 + ℓ₀⁻¹(−ln(1 + (e^{−ε} − 1)/q)) (dp_accounting
                // `_inverse_privacy_loss_add`).
                let l0 = if q == 1.0 {
                    -epsilon
                } else {
                    self.log_one_plus_expm1_over_q(-epsilon)
                };
                1.0 + self.inverse_loss_unsampled_remove(-l0)
            }
            Adjacency::Replace => self.inverse_loss_replace(epsilon),
        }
    }

    /// Inverse of the replace-one loss of the (subsampled) Gaussian, sensitivity 1:
    /// x = σ² (asinh(−α sinh(ε/2)) − ε/2) with α = e^{1/(2σ²)} (1 − q)/q (solving the quadratic
    /// in e^{x/σ²}; dp_accounting `GaussianPrivacyLoss._inverse_privacy_loss_replace`).
    fn inverse_loss_replace(&self, epsilon: f64) -> f64 {
        let sigma2 = match self.noise {
            Noise::Gaussian { noise_multiplier } => noise_multiplier * noise_multiplier,
            // Subsampled Laplace under replace-one (only through `any`): ℓ is continuous,
            // non-increasing, and constant outside [−1, 1]; bisect there.
            Noise::Laplace { .. } if self.sample_rate < 1.0 => {
                let (top, bottom) = (self.privacy_loss(-1.0), self.privacy_loss(1.0));
                if epsilon > top {
                    return f64::NEG_INFINITY;
                }
                if epsilon <= bottom {
                    return f64::INFINITY;
                }
                let (mut lo, mut hi) = (-1.0f64, 1.0f64);
                for _ in 0..200 {
                    let mid = 0.5 * (lo + hi);
                    if mid <= lo || mid >= hi {
                        break;
                    }
                    if self.privacy_loss(mid) >= epsilon {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                return lo;
            }
            // Full-batch Laplace under replace-one:
            // ℓ(x) = (|1 − x| − |1 + x|)/b = −2x/b on [−1, 1], constant ∓2/b outside.
            Noise::Laplace { scale } => {
                let t = epsilon * scale / 2.0;
                return if t > 1.0 {
                    f64::NEG_INFINITY
                } else if t <= -1.0 {
                    f64::INFINITY
                } else {
                    -t
                };
            }
        };
        if epsilon == 0.0 {
            return 0.0;
        }
        let q = self.sample_rate;
        if q == 1.0 {
            return -epsilon * sigma2 / 2.0;
        }
        let log_alpha = 0.5 / sigma2 + self.log_1m_q - self.log_q;
        let a = epsilon.abs();
        let log_sinh = a / 2.0 + (-(-a).exp()).ln_1p() - std::f64::consts::LN_2;
        let asinh_term = -epsilon.signum() * asinh_exp(log_alpha + log_sinh);
        sigma2 * (asinh_term - epsilon / 2.0)
    }

    /// The exact hockey-stick divergence δ(ε) = sup_S μ_upper(S) − e^ε μ_lower(S)
    /// (supplementary note, Observation 1), clamped to [0, 1].
    pub fn delta_for_epsilon(&self, epsilon: f64) -> f64 {
        self.curve_point(epsilon).delta
    }

    /// δ(ε) with the two masses it is made of, from one evaluation of x_ε and the noise CDFs.
    pub fn curve_point(&self, epsilon: f64) -> CurvePoint {
        let q = self.sample_rate;
        let point = |delta: f64, upper_mass: f64, lower_mass: f64| CurvePoint {
            delta,
            upper_mass,
            lower_mass,
        };
        if epsilon == f64::INFINITY {
            return point(0.0, 0.0, 0.0);
        }
        if q < 1.0 {
            match self.adjacency {
                // μ_lower ≥ (1 − q) μ_upper pointwise: δ = 0 for ε ≥ −ln(1 − q), and no loss
                // reaches ε.
                Adjacency::Add if epsilon >= -self.log_1m_q => return point(0.0, 0.0, 0.0),
                // μ_upper ≥ (1 − q) μ_lower pointwise: δ = 1 − e^ε for ε ≤ ln(1 − q), and every
                // loss is at least ε.
                Adjacency::Remove if epsilon <= self.log_1m_q => {
                    return point(-epsilon.exp_m1(), 1.0, 1.0);
                }
                _ => {}
            }
        }
        let (x, exp_epsilon) = match self.adjacency {
            // The subsampled remove direction (the factories' hot path): x_ε as
            // `inverse_privacy_loss` computes it, and e^ε from the same exponential.
            Adjacency::Remove if q < 1.0 => {
                let (l0, exp_epsilon) = self.log_one_plus_expm1_over_q_and_exp(epsilon);
                (self.inverse_loss_unsampled_remove(l0), exp_epsilon)
            }
            _ => (self.inverse_privacy_loss(epsilon), epsilon.exp()),
        };
        // Fast path: both CDFs in linear space (each noise CDF evaluated once), valid while
        // μ_lower(X ≤ x) is a normal number and e^ε does not overflow.
        let (upper, lower) = self.cdfs(x);
        if lower > 1e-290 && epsilon < 700.0 {
            return point((upper - exp_epsilon * lower).clamp(0.0, 1.0), upper, lower);
        }
        let upper = self.mu_upper_cdf(x);
        let lower_log = self.mu_lower_log_cdf(x);
        let delta = if upper > 0.0 {
            upper - (epsilon + lower_log).exp()
        } else {
            0.0
        };
        point(delta.clamp(0.0, 1.0), upper, lower_log.exp())
    }

    /// (P[X ≤ x] for X ~ μ_upper, P[X ≤ x] for X ~ μ_lower) in linear space.
    fn cdfs(&self, x: f64) -> (f64, f64) {
        let q = self.sample_rate;
        let mix = |f0: f64, f_shift: f64| {
            if q == 1.0 {
                f_shift
            } else {
                (1.0 - q) * f0 + q * f_shift
            }
        };
        match self.adjacency {
            Adjacency::Remove => {
                let f0 = self.noise_cdf(x);
                (mix(f0, self.noise_cdf(x + 1.0)), f0)
            }
            Adjacency::Add => {
                let f0 = self.noise_cdf(x);
                (f0, mix(f0, self.noise_cdf(x - 1.0)))
            }
            Adjacency::Replace => {
                let f0 = if q == 1.0 { 0.0 } else { self.noise_cdf(x) };
                (
                    mix(f0, self.noise_cdf(x + 1.0)),
                    mix(f0, self.noise_cdf(x - 1.0)),
                )
            }
        }
    }

    /// The loss range to discretise. Gaussian: the noise is cut at F(x) = ½e^{−38} on each
    /// side (as dp_accounting's `GaussianPrivacyLoss.privacy_loss_tail`, which cuts ½e^{−50});
    /// Laplace: the loss is bounded, ℓ ∈ [ℓ(∞), ℓ(−∞)] (`LaplacePrivacyLoss.connect_dots_bounds`).
    pub fn loss_range(&self) -> LossRange {
        match self.noise {
            Noise::Gaussian { noise_multiplier } => {
                // A constant, found by bisection once per process (each factory asks twice).
                static Z: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
                let z = *Z.get_or_init(|| {
                    normal_quantile_from_log(LOG_MASS_TRUNCATION_BOUND - std::f64::consts::LN_2)
                });
                let mut lower_x = noise_multiplier * z;
                let mut upper_x = -lower_x;
                match self.adjacency {
                    Adjacency::Add => upper_x += 1.0,
                    Adjacency::Remove | Adjacency::Replace => lower_x -= 1.0,
                }
                LossRange {
                    epsilon_lower: self.privacy_loss(upper_x),
                    epsilon_upper: self.privacy_loss(lower_x),
                }
            }
            Noise::Laplace { .. } => LossRange {
                epsilon_lower: self.privacy_loss(f64::INFINITY),
                epsilon_upper: self.privacy_loss(f64::NEG_INFINITY),
            },
        }
    }
}

/// asinh(±e^a) magnitude: ln(√(e^{2a} + 1) + e^a), stable for large |a|.
fn asinh_exp(a: f64) -> f64 {
    log_add_exp(0.5 * log_add_exp(0.0, 2.0 * a), a)
}

/// z with ln Φ(z) = `log_p` (log_p < ln ½), by bisection on the monotone ln Φ.
fn normal_quantile_from_log(log_p: f64) -> f64 {
    let (mut lo, mut hi) = (-60.0f64, 0.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if log_normal_cdf(mid) < log_p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-15 {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauss(sigma: f64, q: f64, adj: Adjacency) -> AdditiveNoiseLoss {
        AdditiveNoiseLoss::new(
            Noise::Gaussian {
                noise_multiplier: sigma,
            },
            q,
            adj,
        )
        .expect("Gaussian is defined for every adjacency")
    }

    fn laplace(b: f64, q: f64, adj: Adjacency) -> AdditiveNoiseLoss {
        AdditiveNoiseLoss::new(Noise::Laplace { scale: b }, q, adj).expect("supported")
    }

    #[test]
    fn gaussian_delta_matches_closed_form() {
        // q = 1: δ(ε) = Φ(−εσ + 1/(2σ)) − e^ε Φ(−εσ − 1/(2σ)) (Balle & Wang 2018, Thm 8).
        for &(sigma, eps) in &[(1.0, 1.0), (0.7, 0.3), (2.0, 2.5), (5.0, 0.01)] {
            let l = gauss(sigma, 1.0, Adjacency::Remove);
            let mu = 1.0 / sigma;
            let exact =
                normal_cdf(-eps / mu + mu / 2.0) - eps.exp() * normal_cdf(-eps / mu - mu / 2.0);
            let got = l.delta_for_epsilon(eps);
            assert!(
                (got - exact).abs() < 1e-14,
                "{sigma} {eps}: {got} vs {exact}"
            );
            let add = gauss(sigma, 1.0, Adjacency::Add).delta_for_epsilon(eps);
            assert!((add - exact).abs() < 1e-14);
        }
    }

    #[test]
    fn inverse_inverts_the_loss() {
        for adj in [Adjacency::Remove, Adjacency::Add, Adjacency::Replace] {
            for &q in &[1.0, 0.3, 0.01] {
                let l = gauss(0.9, q, adj);
                for &x in &[-3.0, -0.7, 0.0, 0.4, 2.0] {
                    let loss = l.privacy_loss(x);
                    let back = l.inverse_privacy_loss(loss);
                    assert!((back - x).abs() < 1e-7, "{adj:?} q={q} x={x}: {back}");
                }
            }
            if adj != Adjacency::Replace {
                let lap = laplace(1.5, 0.2, adj);
                for &x in &[-0.9, -0.5, -0.1, 0.3, 0.8] {
                    let loss = lap.privacy_loss(x);
                    let back = lap.inverse_privacy_loss(loss);
                    // strictly monotone only on (−1, 0) (remove) or (0, 1) (add)
                    if (adj == Adjacency::Remove && x < 0.0) || (adj == Adjacency::Add && x > 0.0) {
                        assert!((back - x).abs() < 1e-9, "laplace {adj:?} x={x}: {back}");
                    }
                }
            }
        }
    }

    #[test]
    fn laplace_delta_is_pure_at_its_epsilon() {
        // Laplace(b) is (1/b, 0)-DP and not (ε, 0) for smaller ε.
        let l = laplace(2.0, 1.0, Adjacency::Remove);
        assert!(l.delta_for_epsilon(0.5) < 1e-15);
        assert!(l.delta_for_epsilon(0.4) > 0.0);
        // δ(0) = TV distance = 1 − e^{−1/(2b)} for Laplace (closed form).
        let tv = -(-0.25f64).exp_m1();
        assert!((l.delta_for_epsilon(0.0) - tv).abs() < 1e-15);
    }

    #[test]
    fn subsampled_remove_dominates_add_for_positive_epsilon() {
        // dp_accounting's note on `from_privacy_guarantee`: for ε > 0 the remove divergence
        // is at least the add one.
        for &eps in &[0.1, 0.5, 1.0, 2.0] {
            let r = gauss(0.8, 0.05, Adjacency::Remove).delta_for_epsilon(eps);
            let a = gauss(0.8, 0.05, Adjacency::Add).delta_for_epsilon(eps);
            assert!(r >= a, "{eps}: {r} < {a}");
        }
    }

    #[test]
    fn full_batch_replace_is_twice_the_shift() {
        // Replace-one with q = 1 shifts by 2: Gaussian σ under replace = Gaussian σ/2 under
        // remove; Laplace b under replace = Laplace b/2 under remove.
        for &eps in &[0.0, 0.3, 1.0, 3.0] {
            let r = gauss(1.3, 1.0, Adjacency::Replace).delta_for_epsilon(eps);
            let h = gauss(0.65, 1.0, Adjacency::Remove).delta_for_epsilon(eps);
            assert!((r - h).abs() < 1e-14, "{eps}: {r} vs {h}");
            let r = laplace(1.3, 1.0, Adjacency::Replace).delta_for_epsilon(eps);
            let h = laplace(0.65, 1.0, Adjacency::Remove).delta_for_epsilon(eps);
            assert!((r - h).abs() < 1e-14, "{eps}: {r} vs {h}");
        }
        assert!(
            AdditiveNoiseLoss::new(Noise::Laplace { scale: 1.0 }, 0.5, Adjacency::Replace)
                .is_none()
        );
    }

    #[test]
    fn gaussian_truncation_quantile() {
        // Φ⁻¹(½ e⁻³⁸) = −8.44127 (scipy.stats.norm.ppf: −8.441268073): ln Φ at the solution
        // equals the target.
        let target = LOG_MASS_TRUNCATION_BOUND - std::f64::consts::LN_2;
        let z = normal_quantile_from_log(target);
        assert!((log_normal_cdf(z) - target).abs() < 1e-10);
        assert!((z + 8.441268073).abs() < 1e-8, "{z}");
    }
}
