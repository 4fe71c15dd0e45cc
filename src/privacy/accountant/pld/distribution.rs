//! PLD room, layer 3: privacy-loss distributions of mechanisms (factories) and their algebra.
//!
//! Owns [`PrivacyLossDistribution`]: under add/remove-one with Poisson subsampling the two
//! directions differ, so it holds the PLD of the "remove" pair (μ_upper = M(D), D ∋ x) and of
//! the "add" pair, composes each with its own kind, and reports δ(ε) = max of the two (Zhu, Dong,
//! Wang 2022, "Optimal accounting of differential privacy via characteristic function", Prop. 30;
//! dp_accounting `privacy_loss_distribution.PrivacyLossDistribution`). When both directions
//! coincide (full batch, or replace-one) only one PMF is kept.
//!
//! Factories discretise a mechanism's privacy loss (layer 1, [`super::mechanism`]) with the
//! pessimistic connect-the-dots algorithm (Doroshenko et al. 2022, Alg. 1) on the grid
//! `interval·ℤ` covering the loss range, as dp_accounting's `from_gaussian_mechanism` and
//! `from_laplace_mechanism` do by default.
//!
//! Must not: know events or accountant state.

use super::mechanism::{AdditiveNoiseLoss, Adjacency, Noise};
use super::pmf::{DiscretePmf, MAX_SUPPORT};
use crate::privacy::accountant::{AccountantKind, AccountingError};
use crate::privacy::event::NeighbouringRelation;

/// Mass that each composition may cut from the tails of a PMF (half per side); it is added to
/// the infinity mass (dp_accounting's default `tail_mass_truncation`).
pub const TAIL_MASS_TRUNCATION: f64 = 1e-15;

/// A privacy-loss distribution for the remove direction and, when different, the add direction.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivacyLossDistribution {
    remove: DiscretePmf,
    add: Option<DiscretePmf>,
}

impl PrivacyLossDistribution {
    /// The PLD of releasing nothing (composition identity).
    pub fn identity(interval: f64) -> Self {
        Self {
            remove: DiscretePmf::identity(interval),
            add: None,
        }
    }

    /// The PLD of the Gaussian mechanism N(0, σ²) on a sensitivity-1 query, Poisson subsampled
    /// at `sample_rate` ∈ (0, 1], discretised on `interval`.
    pub fn from_gaussian(
        noise_multiplier: f64,
        sample_rate: f64,
        relation: NeighbouringRelation,
        interval: f64,
    ) -> Result<Self, AccountingError> {
        Self::from_additive_noise(
            Noise::Gaussian { noise_multiplier },
            sample_rate,
            relation,
            interval,
        )
    }

    /// The PLD of the Laplace mechanism with scale `scale` on a sensitivity-1 query, Poisson
    /// subsampled at `sample_rate` ∈ (0, 1], discretised on `interval`.
    pub fn from_laplace(
        scale: f64,
        sample_rate: f64,
        relation: NeighbouringRelation,
        interval: f64,
    ) -> Result<Self, AccountingError> {
        Self::from_additive_noise(Noise::Laplace { scale }, sample_rate, relation, interval)
    }

    fn from_additive_noise(
        noise: Noise,
        sample_rate: f64,
        relation: NeighbouringRelation,
        interval: f64,
    ) -> Result<Self, AccountingError> {
        let losses = directions(noise, sample_rate, relation)?;
        let (lo, deltas) = hockey_stick_curve(&losses[0], interval)?;
        let remove = DiscretePmf::from_connect_the_dots(interval, lo, &deltas);
        let add = match losses.get(1) {
            None => None,
            Some(add_loss) => {
                let (add_lo, n) = grid(add_loss, interval)?;
                let hi = lo + deltas.len() as i64 - 1;
                if add_lo == -hi && n == deltas.len() {
                    // Hockey-stick duality: H_γ(P‖Q) = 1 − γ + γ H_{1/γ}(Q‖P) (from
                    // ∫(p − γq)₊ − ∫(γq − p)₊ = 1 − γ). The add pair is the remove pair with
                    // the roles swapped (after x ↦ −x, using the symmetry of μ), so
                    // δ_add(ε) = 1 − e^ε + e^ε δ_remove(−ε), and the add grid is the negated
                    // remove grid: the curve needs no new noise-CDF evaluations.
                    let add_deltas: Vec<f64> = (0..n)
                        .map(|k| {
                            let eps = (add_lo + k as i64) as f64 * interval;
                            (-eps.exp_m1() + eps.exp() * deltas[n - 1 - k]).clamp(0.0, 1.0)
                        })
                        .collect();
                    Some(DiscretePmf::from_connect_the_dots(
                        interval,
                        add_lo,
                        &add_deltas,
                    ))
                } else {
                    let (add_lo, add_deltas) = hockey_stick_curve(add_loss, interval)?;
                    Some(DiscretePmf::from_connect_the_dots(
                        interval,
                        add_lo,
                        &add_deltas,
                    ))
                }
            }
        };
        Ok(Self { remove, add })
    }

    /// A *lower* estimate of the PLD of a (Poisson-subsampled, `sample_rate` ∈ (0, 1]) Gaussian
    /// or Laplace mechanism: each direction's privacy loss L is rounded **down** to the grid
    /// `interval·ℤ` (mass P[L ∈ [kΔ, (k+1)Δ)] at kΔ, from the exact loss CDF), losses below the
    /// covered range are dropped and losses above it are put at its top point. Each change can
    /// only lower δ(ε) = E[(1 − e^{ε−L})₊] (a non-decreasing function of L on a sub-probability
    /// measure), and so can every composition of such PMFs without tail truncation (pass 0).
    /// For the cross-accountant test: an upper-bound accountant must never report less.
    ///
    /// Under replace-one every sampling rate (Laplace included) uses the symmetric pair of
    /// [`super::mechanism`]: a realisable pair of neighbouring datasets (one record's clipped
    /// contribution +Δe₁ swapped for −Δe₁, all others zero), hence a valid lower bound for
    /// Poisson sampling and for sampling without replacement at q = m/n alike.
    pub fn lower_estimate(
        noise: Noise,
        sample_rate: f64,
        relation: NeighbouringRelation,
        interval: f64,
    ) -> Result<Self, AccountingError> {
        let losses = adjacencies(sample_rate, relation)
            .into_iter()
            .map(|adjacency| AdditiveNoiseLoss::any(noise, sample_rate, adjacency));
        let mut pmfs = Vec::with_capacity(2);
        for loss in losses {
            let (lo, n) = grid(&loss, interval)?;
            let at_least: Vec<f64> = (0..n)
                .map(|k| loss.upper_mass_at_least((lo + k as i64) as f64 * interval))
                .collect();
            let probs: Vec<f64> = (0..n)
                .map(|k| {
                    let above = at_least.get(k + 1).copied().unwrap_or(0.0);
                    (at_least[k] - above).max(0.0)
                })
                .collect();
            pmfs.push(DiscretePmf::from_parts(interval, lo, probs, 0.0));
        }
        let add = if pmfs.len() > 1 { pmfs.pop() } else { None };
        let remove = pmfs.pop().ok_or_else(|| {
            AccountingError::Numerical("no privacy-loss direction was built".to_string())
        })?;
        Ok(Self { remove, add })
    }

    /// The number of grid points the factory for this mechanism would allocate (per direction),
    /// without allocating: lets a dry run refuse what could not be built.
    pub fn grid_points(
        noise: Noise,
        sample_rate: f64,
        relation: NeighbouringRelation,
        interval: f64,
    ) -> Result<usize, AccountingError> {
        let losses = directions(noise, sample_rate, relation)?;
        let mut most = 0usize;
        for l in &losses {
            let (_, n) = grid(l, interval)?;
            most = most.max(n);
        }
        Ok(most)
    }

    /// The remove-direction PMF (the only one when symmetric).
    pub fn pmf_remove(&self) -> &DiscretePmf {
        &self.remove
    }

    /// The add-direction PMF (the remove one when symmetric).
    pub fn pmf_add(&self) -> &DiscretePmf {
        self.add.as_ref().unwrap_or(&self.remove)
    }

    /// The larger mass at +∞ of the two directions.
    pub fn infinity_mass(&self) -> f64 {
        self.remove
            .infinity_mass()
            .max(self.pmf_add().infinity_mass())
    }

    /// True when both directions share one PMF.
    pub fn is_symmetric(&self) -> bool {
        self.add.is_none()
    }

    /// The PLD of running both mechanisms (independent noise, adaptive composition).
    pub fn compose(
        &self,
        other: &PrivacyLossDistribution,
        tail_mass_truncation: f64,
    ) -> Result<Self, AccountingError> {
        let remove = self.remove.compose(&other.remove, tail_mass_truncation)?;
        let add = if self.is_symmetric() && other.is_symmetric() {
            None
        } else {
            Some(
                self.pmf_add()
                    .compose(other.pmf_add(), tail_mass_truncation)?,
            )
        };
        Ok(Self { remove, add })
    }

    /// The PLD of `count` runs of each distribution of `parts` (one grid, at least one part with
    /// a positive count), each direction composed in one pass ([`DiscretePmf::compose_many`]).
    pub fn compose_many(
        parts: &[(&PrivacyLossDistribution, u64)],
        tail_mass_truncation: f64,
    ) -> Result<Self, AccountingError> {
        let remove: Vec<(&DiscretePmf, u64)> = parts.iter().map(|&(p, k)| (&p.remove, k)).collect();
        let remove = DiscretePmf::compose_many(&remove, tail_mass_truncation)?;
        let add = if parts.iter().all(|(p, _)| p.is_symmetric()) {
            None
        } else {
            let add: Vec<(&DiscretePmf, u64)> =
                parts.iter().map(|&(p, k)| (p.pmf_add(), k)).collect();
            Some(DiscretePmf::compose_many(&add, tail_mass_truncation)?)
        };
        Ok(Self { remove, add })
    }

    /// The PLD of `count` runs of this mechanism.
    pub fn self_compose(
        &self,
        count: u64,
        tail_mass_truncation: f64,
    ) -> Result<Self, AccountingError> {
        match &self.add {
            Some(a) => {
                let (remove, add) =
                    DiscretePmf::self_compose_pair(&self.remove, a, count, tail_mass_truncation)?;
                Ok(Self {
                    remove,
                    add: Some(add),
                })
            }
            None => Ok(Self {
                remove: self.remove.self_compose(count, tail_mass_truncation)?,
                add: None,
            }),
        }
    }

    /// δ(ε) = max(δ_remove(ε), δ_add(ε)).
    pub fn delta_for_epsilon(&self, epsilon: f64) -> f64 {
        let r = self.remove.delta_for_epsilon(epsilon);
        match &self.add {
            Some(a) => r.max(a.delta_for_epsilon(epsilon)),
            None => r,
        }
    }

    /// ε(δ) = max(ε_remove(δ), ε_add(δ)).
    pub fn epsilon_for_delta(&self, delta: f64) -> f64 {
        let r = self.remove.epsilon_for_delta(delta);
        match &self.add {
            Some(a) => r.max(a.epsilon_for_delta(delta)),
            None => r,
        }
    }
}

/// The privacy-loss pairs a mechanism needs: [remove, add] for subsampled add/remove, one
/// otherwise (full batch: both directions give the same PLD; replace-one is symmetric).
fn directions(
    noise: Noise,
    sample_rate: f64,
    relation: NeighbouringRelation,
) -> Result<Vec<AdditiveNoiseLoss>, AccountingError> {
    let make = |adjacency| {
        AdditiveNoiseLoss::new(noise, sample_rate, adjacency).ok_or_else(|| {
            AccountingError::Unsupported {
                accountant: AccountantKind::Pld,
                event: format!(
                    "Poisson-subsampled Laplace (sample_rate {sample_rate}) under replace-one"
                ),
            }
        })
    };
    adjacencies(sample_rate, relation)
        .into_iter()
        .map(make)
        .collect()
}

/// The neighbouring pairs a mechanism needs: remove and add for subsampled add/remove, remove
/// alone for a full batch (both directions give the same PLD), replace for replace-one.
fn adjacencies(sample_rate: f64, relation: NeighbouringRelation) -> Vec<Adjacency> {
    match relation {
        NeighbouringRelation::AddOrRemoveOne if sample_rate == 1.0 => vec![Adjacency::Remove],
        NeighbouringRelation::AddOrRemoveOne => vec![Adjacency::Remove, Adjacency::Add],
        NeighbouringRelation::ReplaceOne => vec![Adjacency::Replace],
    }
}

/// The grid (first index, number of points) covering the loss range of `loss`.
fn grid(loss: &AdditiveNoiseLoss, interval: f64) -> Result<(i64, usize), AccountingError> {
    let range = loss.loss_range();
    let lo = (range.epsilon_lower / interval).floor();
    let hi = (range.epsilon_upper / interval).ceil();
    let span = hi - lo + 1.0;
    if !(lo.is_finite() && hi.is_finite()) || span > MAX_SUPPORT as f64 || span < 1.0 {
        return Err(AccountingError::Numerical(format!(
            "the privacy loss spans [{}, {}]: {} grid points of {interval} (limit {MAX_SUPPORT}); \
             use a coarser PLD discretisation interval (dpx account --pld-interval) or the rdp accountant",
            range.epsilon_lower, range.epsilon_upper, span
        )));
    }
    Ok((lo as i64, span as usize))
}

/// The exact δ(ε) of one direction at every point of its grid: (first index, values).
fn hockey_stick_curve(
    loss: &AdditiveNoiseLoss,
    interval: f64,
) -> Result<(i64, Vec<f64>), AccountingError> {
    let (lo, n) = grid(loss, interval)?;
    let deltas: Vec<f64> = (0..n)
        .map(|k| loss.delta_for_epsilon((lo + k as i64) as f64 * interval))
        .collect();
    Ok((lo, deltas))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::special::normal_cdf;

    const ADD_REMOVE: NeighbouringRelation = NeighbouringRelation::AddOrRemoveOne;

    #[test]
    fn single_gaussian_pld_is_tight_and_pessimistic() {
        // One Gaussian step, σ = 1: exact δ(ε) = Φ(−ε + ½) − e^ε Φ(−ε − ½) (Balle & Wang 2018,
        // Thm 8). Connect-the-dots reproduces it on the grid and exceeds it between points.
        let pld = PrivacyLossDistribution::from_gaussian(1.0, 1.0, ADD_REMOVE, 1e-3).unwrap();
        assert!(pld.is_symmetric());
        for &eps in &[0.0, 0.5, 1.0, 1.0005, 2.0, 3.3333] {
            let exact = normal_cdf(-eps + 0.5) - eps.exp() * normal_cdf(-eps - 0.5);
            let got = pld.delta_for_epsilon(eps);
            assert!(got >= exact - 1e-13, "{eps}: {got} < {exact}");
            assert!(
                got <= exact * (1.0 + 1e-3) + 1e-12,
                "{eps}: {got} ≫ {exact}"
            );
        }
    }

    #[test]
    fn subsampled_pld_has_two_directions() {
        let pld = PrivacyLossDistribution::from_gaussian(0.8, 0.05, ADD_REMOVE, 1e-3).unwrap();
        assert!(!pld.is_symmetric());
        let mass: f64 =
            pld.pmf_remove().probs().iter().sum::<f64>() + pld.pmf_remove().infinity_mass();
        assert!((mass - 1.0).abs() < 1e-9, "{mass}");
        let replace = PrivacyLossDistribution::from_gaussian(
            0.8,
            0.05,
            NeighbouringRelation::ReplaceOne,
            1e-3,
        )
        .unwrap();
        assert!(replace.is_symmetric());
        // Replace-one is at least as costly as either add/remove direction.
        for &eps in &[0.1, 0.5, 1.0] {
            assert!(replace.delta_for_epsilon(eps) >= pld.delta_for_epsilon(eps));
        }
    }

    #[test]
    fn add_direction_by_duality_matches_direct_evaluation() {
        // The add PMF built from the remove curve by hockey-stick duality must equal the one
        // built from the add pair's own δ(ε) (layer 1, evaluated point by point).
        for (noise, q) in [
            (
                Noise::Gaussian {
                    noise_multiplier: 0.9,
                },
                0.05,
            ),
            (
                Noise::Gaussian {
                    noise_multiplier: 2.0,
                },
                0.3,
            ),
            (Noise::Laplace { scale: 1.5 }, 0.2),
        ] {
            let pld =
                PrivacyLossDistribution::from_additive_noise(noise, q, ADD_REMOVE, 1e-3).unwrap();
            let add_loss = AdditiveNoiseLoss::new(noise, q, Adjacency::Add).unwrap();
            let (lo, deltas) = hockey_stick_curve(&add_loss, 1e-3).unwrap();
            let direct = DiscretePmf::from_connect_the_dots(1e-3, lo, &deltas);
            let dual = pld.pmf_add();
            assert!((dual.infinity_mass() - direct.infinity_mass()).abs() < 1e-15);
            for eps in [-1.0, -0.1, 0.0, 0.01, 0.2] {
                let (x, y) = (dual.delta_for_epsilon(eps), direct.delta_for_epsilon(eps));
                assert!((x - y).abs() < 1e-12, "{noise:?} q={q} ε={eps}: {x} vs {y}");
            }
        }
    }

    #[test]
    fn laplace_full_batch_is_pure_dp() {
        // Laplace(b = 2) is (0.5, 0)-DP: δ(0.5) = 0 exactly on a grid containing 0.5.
        let pld = PrivacyLossDistribution::from_laplace(2.0, 1.0, ADD_REMOVE, 1e-4).unwrap();
        assert!(pld.delta_for_epsilon(0.5) < 1e-15);
        assert!(pld.epsilon_for_delta(1e-9) <= 0.5 + 1e-4);
        // δ(0) = total variation = 1 − e^{−1/(2b)} (closed form).
        let tv = -(-0.25f64).exp_m1();
        assert!((pld.delta_for_epsilon(0.0) - tv).abs() < 1e-9);
    }

    #[test]
    fn subsampled_laplace_under_replace_is_refused() {
        let err =
            PrivacyLossDistribution::from_laplace(1.0, 0.5, NeighbouringRelation::ReplaceOne, 1e-4)
                .unwrap_err();
        assert!(matches!(err, AccountingError::Unsupported { .. }));
    }

    #[test]
    fn huge_grids_are_refused() {
        let err = PrivacyLossDistribution::grid_points(
            Noise::Gaussian {
                noise_multiplier: 0.001,
            },
            1.0,
            ADD_REMOVE,
            1e-4,
        )
        .unwrap_err();
        assert!(matches!(err, AccountingError::Numerical(_)));
    }
}
