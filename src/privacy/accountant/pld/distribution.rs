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
        let curve = sparse_hockey_stick_curve(&losses[0], interval)?;
        let remove = curve.pmf(interval);
        let add = match losses.get(1) {
            None => None,
            Some(add_loss) => {
                let (add_lo, n) = grid(add_loss, interval)?;
                let hi = curve.lower + curve.n as i64 - 1;
                if add_lo == -hi && n == curve.n {
                    // Hockey-stick duality: H_γ(P‖Q) = 1 − γ + γ H_{1/γ}(Q‖P) (from
                    // ∫(p − γq)₊ − ∫(γq − p)₊ = 1 − γ). The add pair is the remove pair with
                    // the roles swapped (after x ↦ −x, using the symmetry of μ), so
                    // δ_add(ε) = 1 − e^ε + e^ε δ_remove(−ε), and the add grid is the negated
                    // remove grid: the curve needs no new noise-CDF evaluations. Its points
                    // are the negated remove points: the add pair's mass below −ε is the
                    // remove pair's μ_lower(ℓ ≥ ε), which chose the remove points' gaps.
                    let m = curve.offsets.len();
                    let mut offsets = Vec::with_capacity(m);
                    let mut deltas = Vec::with_capacity(m);
                    for j in (0..m).rev() {
                        let k = n - 1 - curve.offsets[j];
                        let em1 = ((add_lo + k as i64) as f64 * interval).exp_m1();
                        offsets.push(k);
                        deltas.push((-em1 + (1.0 + em1) * curve.deltas[j]).clamp(0.0, 1.0));
                    }
                    Some(DiscretePmf::from_connect_the_dots_at(
                        interval, add_lo, n, &offsets, &deltas,
                    ))
                } else {
                    Some(sparse_hockey_stick_curve(add_loss, interval)?.pmf(interval))
                }
            }
        };
        Ok(Self { remove, add })
    }

    /// A PLD from its two directions' PMFs (one grid), e.g. [`super::allocation::epoch_pld`].
    pub fn from_directions(remove: DiscretePmf, add: DiscretePmf) -> Self {
        Self {
            remove,
            add: Some(add),
        }
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

    /// Give the grid buffers to the factories' pool ([`DiscretePmf::recycle`]).
    pub fn recycle(self) {
        self.remove.recycle();
        if let Some(add) = self.add {
            add.recycle();
        }
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

/// The bound on (mass × width) of each gap between two chosen points of a sparse
/// hockey-stick curve (`sparse_hockey_stick_curve`).
pub const SPARSE_GAP_ERROR: f64 = 1e-15;

/// A hockey-stick curve at chosen points of a grid: δ at `offsets` of `lower..lower + n`.
struct SparseCurve {
    lower: i64,
    n: usize,
    offsets: Vec<usize>,
    deltas: Vec<f64>,
}

impl SparseCurve {
    fn pmf(&self, interval: f64) -> DiscretePmf {
        DiscretePmf::from_connect_the_dots_at(
            interval,
            self.lower,
            self.n,
            &self.offsets,
            &self.deltas,
        )
    }
}

/// The exact δ(ε) of one direction at the points of its grid where the distribution has mass,
/// and at ever sparser points in the tails, where it has almost none.
///
/// Connect-the-dots on a subset of the grid (Doroshenko et al. 2022, Alg. 1 allows any gaps) is
/// still an upper bound: nothing here is needed for the guarantee. What the gaps cost in
/// tightness: connect-the-dots splits the loss mass inside a gap [a, b] between a and b (keeping
/// E[e^{−ℓ}]), so it moves each loss by at most b − a. Composition adds the losses, and
/// δ(ε) = E[(1 − e^{ε − L})₊] is 1-Lipschitz in L, so the composed δ grows by at most
/// Σ over steps and gaps of (mass in the gap) × (width). The walk goes outwards from loss 0:
/// above it, the mass in the next gap is at most the mass of losses ≥ ε_j; below it, of losses
/// < ε_j, both known at ε_j from the same evaluation, in both neighbouring pairs (the add pair's
/// mass below −ε is the remove pair's μ_lower(ℓ ≥ ε), so the negated points serve the dual add
/// direction too). The next gap is the widest with mass × width ≤ [`SPARSE_GAP_ERROR`], at
/// most twice the last one. The sum over gaps is then about the integral of the tail mass over
/// the sparse region: for a subsampled Gaussian at q = 0.005 about 1e-12 per direction (a
/// thousand gaps at σ = 0.8), so 40,000 steps add at most about 1e-7 to δ; it keeps a third to a
/// half of its grid points.
fn sparse_hockey_stick_curve(
    loss: &AdditiveNoiseLoss,
    interval: f64,
) -> Result<SparseCurve, AccountingError> {
    let (lower, n) = grid(loss, interval)?;
    let eps = |k: usize| (lower + k as i64) as f64 * interval;
    let next_gap = |last: usize, mass: f64| -> usize {
        let widest = if mass > 0.0 {
            // Saturating cast: a vanishing mass allows any gap.
            (SPARSE_GAP_ERROR / (mass * interval)).floor() as usize
        } else {
            usize::MAX
        };
        widest.min(last.saturating_mul(2)).max(1)
    };
    let centre = (-lower).clamp(0, n as i64 - 1) as usize;
    let at_centre = loss.curve_point(eps(centre));
    // Downwards from the centre (excluded), written straight into the outputs and then reversed
    // in place; then the centre and upwards.
    let (mut offsets, mut deltas) = (Vec::new(), Vec::new());
    let (mut k, mut gap, mut point) = (centre, 1usize, at_centre);
    while k > 0 {
        let below = (1.0 - point.upper_mass).max(1.0 - point.lower_mass);
        gap = next_gap(gap, below);
        k = k.saturating_sub(gap);
        point = loss.curve_point(eps(k));
        offsets.push(k);
        deltas.push(point.delta);
    }
    offsets.reverse();
    deltas.reverse();
    offsets.push(centre);
    deltas.push(at_centre.delta);
    let (mut k, mut gap, mut point) = (centre, 1usize, at_centre);
    while k < n - 1 {
        gap = next_gap(gap, point.upper_mass.max(point.lower_mass));
        k = k.saturating_add(gap).min(n - 1);
        point = loss.curve_point(eps(k));
        offsets.push(k);
        deltas.push(point.delta);
    }
    Ok(SparseCurve {
        lower,
        n,
        offsets,
        deltas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::special::normal_cdf;

    const ADD_REMOVE: NeighbouringRelation = NeighbouringRelation::AddOrRemoveOne;

    /// The exact δ(ε) of one direction at every point of its grid: (first index, values).
    fn hockey_stick_curve(loss: &AdditiveNoiseLoss, interval: f64) -> (i64, Vec<f64>) {
        let (lo, n) = grid(loss, interval).unwrap();
        let deltas = (0..n)
            .map(|k| loss.delta_for_epsilon((lo + k as i64) as f64 * interval))
            .collect();
        (lo, deltas)
    }

    /// The factory's PLD built on every grid point instead of the sparse curve.
    fn dense(noise: Noise, q: f64, interval: f64) -> (DiscretePmf, DiscretePmf) {
        let pmf = |adjacency| {
            let loss = AdditiveNoiseLoss::new(noise, q, adjacency).unwrap();
            let (lo, deltas) = hockey_stick_curve(&loss, interval);
            DiscretePmf::from_connect_the_dots(interval, lo, &deltas)
        };
        (pmf(Adjacency::Remove), pmf(Adjacency::Add))
    }

    #[test]
    fn sparse_curve_keeps_the_mass_and_is_pessimistic() {
        // The tails of a small-q Gaussian are walked with wide gaps, the body point by point;
        // δ stays above the exact curve everywhere (also between grid points) and within the
        // documented (mass × width) budget of the dense connect-the-dots PMF.
        for (sigma, q) in [(0.8, 0.00512), (1.6, 0.00512), (0.6, 0.02), (3.0, 0.3)] {
            let noise = Noise::Gaussian {
                noise_multiplier: sigma,
            };
            let loss = AdditiveNoiseLoss::new(noise, q, Adjacency::Remove).unwrap();
            let curve = sparse_hockey_stick_curve(&loss, 1e-4).unwrap();
            // Measured: 52% (σ = 0.8) and 35% (σ = 1.6) at q = 0.00512, 69% (σ = 0.6, q = 0.02).
            let most = if q < 0.01 { 0.6 } else { 0.8 };
            assert!(
                (curve.offsets.len() as f64) < most * curve.n as f64,
                "σ={sigma} q={q}: {} of {} points kept",
                curve.offsets.len(),
                curve.n
            );
            assert!(curve.offsets.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(
                (curve.offsets[0], *curve.offsets.last().unwrap()),
                (0, curve.n - 1)
            );
            // The documented tightness budget: Σ over gaps of (mass bound × width), with the
            // mass bound the walk used (beyond the gap's inner end, in both pairs).
            let centre = (-curve.lower) as usize;
            let eps = |k: usize| (curve.lower + k as i64) as f64 * 1e-4;
            let mut budget = 0.0;
            let mut wide = 0;
            for w in curve.offsets.windows(2) {
                let (a, b) = (w[0], w[1]);
                if b - a > 1 {
                    wide += 1;
                    let mass = if a >= centre {
                        let p = loss.curve_point(eps(a));
                        p.upper_mass.max(p.lower_mass)
                    } else {
                        let p = loss.curve_point(eps(b));
                        (1.0 - p.upper_mass).max(1.0 - p.lower_mass)
                    };
                    assert!(mass * (b - a) as f64 * 1e-4 <= SPARSE_GAP_ERROR * (1.0 + 1e-12));
                    budget += mass * (b - a) as f64 * 1e-4;
                }
            }
            // Measured: 9.5e-13 (σ = 0.8) and 1.2e-13 (σ = 1.6) at q = 0.00512, over about
            // 1,000 and 130 wide gaps; 1.3e-12 at σ = 0.6, q = 0.02.
            assert!(
                budget < 2e-12,
                "σ={sigma} q={q}: {wide} wide gaps, budget {budget:e}"
            );
            let pld = PrivacyLossDistribution::from_gaussian(sigma, q, ADD_REMOVE, 1e-4).unwrap();
            let (dense_remove, dense_add) = dense(noise, q, 1e-4);
            let add_loss = AdditiveNoiseLoss::new(noise, q, Adjacency::Add).unwrap();
            for k in -300..=300 {
                let eps = k as f64 * 0.01 + 0.000_037;
                for (sparse, dense, exact) in [
                    (pld.pmf_remove(), &dense_remove, loss.delta_for_epsilon(eps)),
                    (pld.pmf_add(), &dense_add, add_loss.delta_for_epsilon(eps)),
                ] {
                    // Rounding: masses are second differences of δ over e^h − 1, so where δ
                    // is near 1 (ε ≪ 0) both PMFs carry ~1e-12 noise per point, and sums over
                    // thousands of points carry ~1e-8 relative (the dense one
                    // more: it has more points, and negative noise is clamped to 0, so its tails
                    // hold spurious mass the budget above does not see: measured up to 3e-12
                    // at σ = 3, q = 0.3). The sparse curve's gaps may loosen δ by the budget.
                    let tol = 1e-11 + 1e-8 * exact;
                    let (s, d) = (sparse.delta_for_epsilon(eps), dense.delta_for_epsilon(eps));
                    assert!(s >= exact - tol, "σ={sigma} ε={eps}: {s} < exact {exact}");
                    assert!(s <= d + tol, "σ={sigma} ε={eps}: {s} looser than dense {d}");
                }
            }
        }
    }

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
            let (lo, deltas) = hockey_stick_curve(&add_loss, 1e-3);
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
