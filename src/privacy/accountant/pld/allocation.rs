//! PLD room, layer 3 (continued): the privacy-loss distribution of one epoch of random
//! allocation ("balls-in-bins" batches) with the Gaussian mechanism, both directions.
//!
//! Owns [`epoch_pld`]: a pessimistic discrete PLD of the pair that dominates one epoch of t
//! steps in which each record takes part in exactly one step, chosen uniformly (Chua et al.
//! 2025, "Balls-and-bins sampling for DP-SGD", AISTATS, arXiv 2412.16802; Feldman & Shenfeld
//! 2025, "Privacy amplification by random allocation", arXiv 2502.08202):
//!
//! ```text
//! P = (1/t) Σ_i N(e_i, σ² I_t)   (the record present)        Q = N(0, σ² I_t)   (absent)
//! ```
//!
//! **The loss.** With v_i = exp(x_i/σ² − 1/(2σ²)), the likelihood ratio of N(e_i, σ²I) to Q at
//! x, P/Q = (1/t) Σ_i v_i, so the privacy loss is L = ln(S/t), S = Σ_i v_i. Under Q the v_i are
//! i.i.d. lognormal, ln v ~ N(−1/(2σ²), 1/σ²). Under P, by symmetry condition on the record
//! being in step 1: then x_1 ~ N(1, σ²), so ln v_1 ~ N(+1/(2σ²), 1/σ²), and v_2..v_t are as
//! under Q. The discrete PLD layer ([`DiscretePmf`]) holds, per direction, the loss under the
//! first distribution of the pair, with δ(ε) = E[(1 − e^{ε − loss})₊] + m_∞:
//!
//! - **remove** (P against Q): the loss L under P, S = v_1^P + Σ_{i=2}^t v_i^Q;
//! - **add** (Q against P): the loss −L under Q, S = Σ_{i=1}^t v_i^Q.
//!
//! In both, the loss is a monotone function of S (increasing for remove, decreasing for add),
//! so it is a monotone function of the *lattice variable* X = S (remove) or X = −S (add),
//! increasing in X.
//!
//! **The computation.** Each term v is rounded to the lattice h·ℤ in the direction that raises
//! X (remove: v up to the next multiple of h; add: v down), so X is rounded up; the rounded
//! terms are independent and on one lattice, so their sum is an exact convolution, computed by
//! the FFT of the PLD layer (the (t−1)- or t-fold self-composition of the Q term, then the P
//! term). Tails: a term's mass above its top point v_max (at most [`TERM_TAIL_MASS`]/t per
//! term) goes to X = +∞ (loss +∞, the δ's infinity mass) for remove, and is rounded down to
//! v_max (X up) for add; the compositions' own truncations move mass up or to +∞ (the PLD
//! layer's rules). The record's term (remove only) has the same tail mass when the lattice
//! reaches that far; when its top would set a coarser step, it is cut at the absent terms' top
//! or at tail mass [`PRESENT_TAIL_MASS`], whichever is higher, and the mass above goes to +∞
//! too (at most 10⁻¹² per epoch added to δ(ε) for every ε). The discrete X is then mapped to
//! losses, its exact hockey-stick curve δ(ε_j) is evaluated at the PLD grid ε_j = j·Δ, and the
//! dots are connected (Doroshenko et al. 2022, Alg. 1), which dominates that curve.
//!
//! **Why it is an upper bound.** Couple each rounded term with its exact value under the same
//! draw: the rounded X is pointwise ≥ the exact one, so each direction's loss is pointwise ≥
//! (and X's +∞ mass is loss +∞). δ(ε) = E[(1 − e^{ε − loss})₊] is non-decreasing in the loss,
//! so δ can only grow; the discrete distribution with the larger loss is itself a valid PLD
//! (E[e^{−loss}] ≤ 1; the missing mass of the second distribution sits at loss −∞), and
//! connect-the-dots dominates it (ibid., Thm 3.2). Epochs are independent, and composition
//! preserves dominance (Zhu, Dong, Wang 2022, Thm 10), so the composed δ(ε) is an upper bound
//! (up to floating-point rounding of the FFTs, as for every PLD of this room).
//!
//! **What it costs in tightness.** Each of the t terms moves by at most h, so
//! loss' − loss ≤ ln(1 + t h/S) ≤ h·e^{−L} (remove) and −ln(1 − t h/S) (add): where the loss
//! matters (S/t ≈ 1) at most h and on average h/2 per epoch, and the errors add up over epochs
//! (E epochs move ε by about E·h/2). With h = [`LATTICE_STEP`] = 10⁻⁴ that is 0.003 over 60
//! epochs. The term's top point v_max = exp(±1/(2σ²) + z/σ) (z the standard-normal quantile
//! of the tail mass) grows fast as σ falls, and the lattice is capped at [`MAX_TERM_POINTS`]
//! points by coarsening h. The step follows the absent terms' top (and the record's at tail
//! 10⁻¹²), not the record's term at 10⁻¹³/t, which is e^{1/σ²} higher: h = 3.9·10⁻⁴ at
//! σ = 1.0156, t = 49 (8.8·10⁻⁴ from the record's top); 1.3·10⁻² at σ = 0.71, t = 118
//! (4.6·10⁻²); when h would exceed [`MAX_LATTICE_STEP`] (σ below about 0.61 at t = 118;
//! 0.67 with the step from the record's top) the epoch is accounted as one unamplified
//! Gaussian release of noise multiplier σ, a valid bound for both directions: the hockey-stick
//! divergence is convex in each argument, so H_γ(P‖Q) ≤ (1/t) Σ_i H_γ(N(e_i, σ²I)‖Q) and
//! H_γ(Q‖P) ≤ (1/t) Σ_i H_γ(Q‖N(e_i, σ²I)), each term the Gaussian mechanism's. t = 1 is
//! that Gaussian exactly.
//!
//! Must not: know events or accountant state.

use super::distribution::{PrivacyLossDistribution, TAIL_MASS_TRUNCATION};
use super::pmf::{DiscretePmf, MAX_SUPPORT, too_large};
use crate::privacy::accountant::AccountingError;
use crate::privacy::event::NeighbouringRelation;
use crate::privacy::special::{normal_cdf, normal_sf};

/// The lattice step h of the terms v (in units of E_Q v = 1) when their range allows it.
pub const LATTICE_STEP: f64 = 1e-4;

/// The most lattice points one term may have; beyond, h is coarsened to fit.
pub const MAX_TERM_POINTS: usize = 1 << 22;

/// The coarsest lattice step used; above it the epoch is one unamplified Gaussian release.
pub const MAX_LATTICE_STEP: f64 = 0.1;

/// The tail mass above the terms' top point, summed over the t terms of one epoch.
pub const TERM_TAIL_MASS: f64 = 1e-13;

/// The most tail mass the record's term may leave above the lattice (loss +∞ in the remove
/// direction) when its top would otherwise set the lattice step.
pub const PRESENT_TAIL_MASS: f64 = 1e-12;

/// Which neighbouring pair of the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// P against Q: the loss ln(S/t) under P.
    Remove,
    /// Q against P: the loss −ln(S/t) under Q.
    Add,
}

/// How an epoch of random allocation is accounted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EpochMethod {
    /// The lattice computation with this step h.
    Lattice { step: f64 },
    /// One unamplified Gaussian release (t = 1, or σ too small for the lattice).
    Gaussian,
}

/// The method [`epoch_pld`] uses for (σ, t).
pub fn epoch_method(noise_multiplier: f64, steps: u64) -> EpochMethod {
    method_with_cap(noise_multiplier, steps, MAX_TERM_POINTS)
}

/// [`epoch_method`] with a cap on the points of a term.
fn method_with_cap(noise_multiplier: f64, steps: u64, max_points: usize) -> EpochMethod {
    if steps <= 1 {
        return EpochMethod::Gaussian;
    }
    // The lattice must reach the absent terms' top; the record's term, whose top is e^{1/σ²}
    // higher at the same tail mass, may leave up to PRESENT_TAIL_MASS above the lattice.
    let widest = term_top(noise_multiplier, steps, false).max(top_at_tail(
        noise_multiplier,
        true,
        PRESENT_TAIL_MASS,
    ));
    let step = LATTICE_STEP.max(widest / max_points as f64);
    if step.is_finite() && step <= MAX_LATTICE_STEP {
        EpochMethod::Lattice { step }
    } else {
        EpochMethod::Gaussian
    }
}

/// The pessimistic PLD (remove and add directions) of one epoch of `steps` steps of random
/// allocation with Gaussian noise multiplier `noise_multiplier`, on the loss grid `interval`.
pub fn epoch_pld(
    noise_multiplier: f64,
    steps: u64,
    interval: f64,
) -> Result<PrivacyLossDistribution, AccountingError> {
    epoch_pld_with(
        noise_multiplier,
        steps,
        interval,
        epoch_method(noise_multiplier, steps),
    )
}

/// [`epoch_pld`] by a given method.
pub fn epoch_pld_with(
    noise_multiplier: f64,
    steps: u64,
    interval: f64,
    method: EpochMethod,
) -> Result<PrivacyLossDistribution, AccountingError> {
    match method {
        EpochMethod::Gaussian => PrivacyLossDistribution::from_gaussian(
            noise_multiplier,
            1.0,
            NeighbouringRelation::AddOrRemoveOne,
            interval,
        ),
        EpochMethod::Lattice { step } => {
            // The absent term's masses serve both directions: computed once.
            let absent = TermMasses::new(noise_multiplier, steps, step, false);
            let present = TermMasses::new(noise_multiplier, steps, step, true);
            let remove = remove_lattice_pmf(&absent, &present, steps)?;
            let add = add_lattice_pmf(&absent, steps)?;
            Ok(PrivacyLossDistribution::from_directions(
                loss_pmf(&remove, steps, Direction::Remove, interval)?,
                loss_pmf(&add, steps, Direction::Add, interval)?,
            ))
        }
    }
}

/// The distribution of the lattice variable X (S for remove, −S for add) of one epoch on the
/// lattice `step`·ℤ, X rounded up.
pub fn direction_pmf(
    noise_multiplier: f64,
    steps: u64,
    step: f64,
    direction: Direction,
) -> Result<DiscretePmf, AccountingError> {
    let absent = TermMasses::new(noise_multiplier, steps, step, false);
    match direction {
        Direction::Remove => {
            let present = TermMasses::new(noise_multiplier, steps, step, true);
            remove_lattice_pmf(&absent, &present, steps)
        }
        Direction::Add => add_lattice_pmf(&absent, steps),
    }
}

/// The remove direction's X = S: (t − 1) absent terms and the record's term, in one pass in the
/// Fourier domain.
fn remove_lattice_pmf(
    absent: &TermMasses,
    present: &TermMasses,
    steps: u64,
) -> Result<DiscretePmf, AccountingError> {
    let present = present.pmf(Direction::Remove);
    if steps == 1 {
        return Ok(present);
    }
    let absent = absent.pmf(Direction::Remove);
    DiscretePmf::compose_many(&[(&absent, steps - 1), (&present, 1)], TAIL_MASS_TRUNCATION)
}

/// The add direction's X = −S: t absent terms.
fn add_lattice_pmf(absent: &TermMasses, steps: u64) -> Result<DiscretePmf, AccountingError> {
    absent
        .pmf(Direction::Add)
        .self_compose(steps, TAIL_MASS_TRUNCATION)
}

/// z with 1 − Φ(z) ≤ `mass` (bisection to 1e-9 on [0, 40], rounded up).
fn tail_quantile(mass: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    while hi - lo > 1e-9 {
        let mid = 0.5 * (lo + hi);
        if normal_sf(mid) > mass {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// The top point v_max of a term: mass ≤ [`TERM_TAIL_MASS`]/t above it (`present`: the term of
/// the record, ln v ~ N(+1/(2σ²), 1/σ²); else ln v ~ N(−1/(2σ²), 1/σ²)).
fn term_top(noise_multiplier: f64, steps: u64, present: bool) -> f64 {
    top_at_tail(
        noise_multiplier,
        present,
        TERM_TAIL_MASS / steps.max(1) as f64,
    )
}

/// The point of a term with mass ≤ `tail_mass` above it.
fn top_at_tail(noise_multiplier: f64, present: bool, tail_mass: f64) -> f64 {
    let s = 1.0 / noise_multiplier;
    let mean = if present { 0.5 * s * s } else { -0.5 * s * s };
    (mean + s * tail_quantile(tail_mass)).exp()
}

/// P[v ∈ (a, b]] for ln v ~ N(mean, s²), from whichever tail keeps precision.
fn lognormal_mass(mean: f64, s: f64, a: f64, b: f64) -> f64 {
    let z = |x: f64| {
        if x <= 0.0 {
            f64::NEG_INFINITY
        } else {
            (x.ln() - mean) / s
        }
    };
    let (za, zb) = (z(a), z(b));
    let mass = if zb <= 0.0 {
        normal_cdf(zb) - normal_cdf(za)
    } else if za >= 0.0 {
        normal_sf(za) - normal_sf(zb)
    } else {
        1.0 - normal_cdf(za) - normal_sf(zb)
    };
    mass.max(0.0)
}

/// One term v on the lattice `step`·ℤ: the masses of (kh, (k+1)h], k = 0..points, and the mass
/// above the top point·h (`present`: the record's term).
struct TermMasses {
    step: f64,
    masses: Vec<f64>,
    above: f64,
}

impl TermMasses {
    fn new(noise_multiplier: f64, steps: u64, step: f64, present: bool) -> Self {
        let s = 1.0 / noise_multiplier;
        let mean = if present { 0.5 * s * s } else { -0.5 * s * s };
        // Up to the term's top at the tail mass TERM_TAIL_MASS/t, within the points a term may
        // have (for the record's term at a coarsened step: its tail is then at most
        // PRESENT_TAIL_MASS, by the choice of the step in `method_with_cap`).
        let points = (term_top(noise_multiplier, steps, present) / step)
            .ceil()
            .clamp(1.0, MAX_TERM_POINTS as f64) as usize;
        let masses = (0..points)
            .map(|k| lognormal_mass(mean, s, k as f64 * step, (k + 1) as f64 * step))
            .collect();
        let above = lognormal_mass(mean, s, points as f64 * step, f64::INFINITY);
        Self {
            step,
            masses,
            above,
        }
    }

    /// The term as the lattice variable of `direction`: X = v rounded up for remove (the mass
    /// of (k−1)h, kh] at kh, k = 1..=points; the mass above the top at +∞); X = −v with v
    /// rounded down for add (the mass of (kh, (k+1)h] at kh and the tail at the top; index i of
    /// the result is −(points − i)).
    fn pmf(&self, direction: Direction) -> DiscretePmf {
        let points = self.masses.len();
        match direction {
            Direction::Remove => {
                DiscretePmf::from_parts(self.step, 1, self.masses.clone(), self.above)
            }
            Direction::Add => {
                let mut probs = Vec::with_capacity(points + 1);
                probs.extend_from_slice(&self.masses);
                probs.push(self.above);
                probs.reverse();
                DiscretePmf::from_parts(self.step, -(points as i64), probs, 0.0)
            }
        }
    }
}

/// The loss PLD of a direction from its lattice variable X: each atom's loss (ln(X/t) for
/// remove, −ln(−X/t) for add; X ≤ 0 for add is S = 0, loss +∞), the exact hockey-stick curve of
/// these atoms at the grid `interval`·ℤ over their range, and connect-the-dots on it.
pub fn loss_pmf(
    lattice: &DiscretePmf,
    steps: u64,
    direction: Direction,
    interval: f64,
) -> Result<DiscretePmf, AccountingError> {
    let ln_t = (steps as f64).ln();
    let h = lattice.interval();
    let mut infinity = lattice.infinity_mass();
    // (loss, mass), increasing in loss (the loss is increasing in X)
    let mut atoms: Vec<(f64, f64)> = Vec::with_capacity(lattice.size());
    for (i, &p) in lattice.probs().iter().enumerate() {
        if p <= 0.0 {
            continue;
        }
        let x = (lattice.lower() + i as i64) as f64 * h;
        match direction {
            // X = S > 0 always (every term is at least h); S ≤ 0 would be loss −∞: no δ.
            Direction::Remove if x > 0.0 => atoms.push((x.ln() - ln_t, p)),
            Direction::Remove => {}
            Direction::Add if x < 0.0 => atoms.push((ln_t - (-x).ln(), p)),
            Direction::Add => infinity += p,
        }
    }
    let (Some(&(lowest, _)), Some(&(highest, _))) = (atoms.first(), atoms.last()) else {
        return Ok(DiscretePmf::from_parts(interval, 0, vec![0.0], infinity));
    };
    let lo = (lowest / interval).floor();
    let hi = (highest / interval).ceil();
    let span = hi - lo + 1.0;
    if !(span.is_finite() && span >= 1.0 && span <= MAX_SUPPORT as f64) {
        return Err(too_large(if span.is_finite() {
            span as usize
        } else {
            usize::MAX
        }));
    }
    let n = span as usize;
    let lo = lo as i64;
    // δ_j = Σ_{ℓ > ε_j} p (1 − e^{ε_j − ℓ}), from the top down:
    // δ_j = M(1 − e^{−Δ}) + e^{−Δ} δ_{j+1} + Σ_{new atoms} p (1 − e^{ε_j − ℓ}), with M the mass
    // above ε_{j+1} (no cancellation).
    let shrink = (-interval).exp();
    let grow = -(-interval).exp_m1();
    let mut deltas = vec![0.0; n];
    let (mut mass_above, mut finite_delta) = (0.0f64, 0.0f64);
    let mut next = atoms.len();
    for j in (0..n).rev() {
        let eps = (lo + j as i64) as f64 * interval;
        finite_delta = mass_above * grow + shrink * finite_delta;
        while next > 0 && atoms[next - 1].0 > eps {
            next -= 1;
            let (loss, p) = atoms[next];
            finite_delta += -(eps - loss).exp_m1() * p;
            mass_above += p;
        }
        deltas[j] = (infinity + finite_delta).min(1.0);
    }
    Ok(DiscretePmf::from_connect_the_dots(interval, lo, &deltas))
}

#[cfg(test)]
#[path = "allocation_tests.rs"]
mod tests;
