//! The Rényi-DP accountant (room: `privacy::accountant`). Owns the RDP maths kernels (free
//! functions), the RDP → (ε, δ) conversions, and [`RdpAccountant`], which only accumulates events
//! into per-order RDP totals. Must not: read training code, print, or allocate from untrusted sizes.
//!
//! # Maths
//!
//! - Poisson-subsampled Gaussian (add/remove one): RDP(α) = ln A_α / (α − 1) with
//!   A_α = E_{z∼N(0,σ²)}[((1 − q) + q·e^{(2z − 1)/(2σ²)})^α] (Mironov, Talwar, Zhang 2019, "Rényi
//!   Differential Privacy of the Sampled Gaussian Mechanism", §3.3). Integer α: the binomial
//!   expansion, summed as A_α − 1 = Σ_{i≥2} C(α,i) q^i (1−q)^{α−i} (e^{i(i−1)/(2σ²)} − 1) so that
//!   small RDP keeps its relative precision. Fractional α: the exact *signed* series of §3.3 (the
//!   binomial coefficients of a fractional α alternate in sign), as Opacus does — not dp_accounting's
//!   sum of absolute values, which is an upper bound (0.00531657 vs 0.00531629 at q=.04, σ=1.5,
//!   α=3.9).
//! - Sensitivity: every noise parameter is relative to the add/remove-one sensitivity; under
//!   replace-one a release is analysed at distance 2 (σ/2, Laplace ε = 2/b), also as the base
//!   mechanism of sampling without replacement (`NeighbouringRelation::sensitivity_factor`).
//!   Poisson sampling is analysed under add/remove-one only.
//! - Full-batch Gaussian: RDP(α) = α/(2σ²) (Mironov 2017, "Rényi Differential Privacy", Prop. 7).
//! - Laplace with scale b (ε = 1/b): Mironov 2017 Prop. 6,
//!   RDP(α) = ε + ln(1 + (α−1)(e^{(1−2α)ε} − 1)/(2α−1)) / (α−1).
//! - Poisson-subsampled Laplace: the general subsampled-RDP upper bound of Zhu and Wang 2019
//!   ("Poisson Subsampled Rényi Differential Privacy", Thm. 6) at integer α ≥ 2, see
//!   [`rdp_poisson_laplace`]; a fractional order uses the bound at ⌈α⌉ (RDP is non-decreasing
//!   in α).
//! - Gaussian on a batch sampled without replacement (replace one): Wang, Balle, Kasiviswanathan
//!   2019 ("Subsampled Rényi Differential Privacy and Analytical Moments Accountant", Thm. 9 with
//!   ε(∞) = ∞), see [`rdp_wor_gaussian`]; fractional α interpolates the cumulant linearly between
//!   ⌊α⌋ and ⌈α⌉ (their Cor. 10). dp_accounting additionally tightens the j ≥ 3 terms with
//!   forward differences for α ≤ 256; dpx uses the plain bound, so it can be slightly larger
//!   (more conservative) there. Both without-replacement bounds are capped by the base
//!   mechanism's RDP (joint quasi-convexity of the Rényi divergence), which they exceed near
//!   q = 1, so ε never grows when the batch grows to the whole dataset.
//! - Laplace on a batch sampled without replacement (replace one): the same Thm. 9 of Wang,
//!   Balle, Kasiviswanathan 2019 with ε(∞) = 1/scale (Laplace is pure DP), see [`rdp_wor_laplace`].
//! - Composition: RDP vectors add (Mironov 2017 Prop. 1), also across heterogeneous steps.
//! - Conversion to (ε, δ): Balle, Barthe, Gaboardi, Hsu, Sato 2020 ("Hypothesis testing
//!   interpretations and Rényi DP", Thm. 21), exactly as dp_accounting's `compute_epsilon` /
//!   `compute_delta` (KL shortcut δ² + e^{−r} − 1 > 0 ⇒ ε = 0, orders ≤ 1.01 skipped, ε clamped at
//!   0); `Classic` is Mironov 2017 Prop. 3, ε = r + ln(1/δ)/(α − 1), for reproducing older numbers.
//!
//! # Speed
//!
//! The accountant keeps the run-length history of per-step kernels and, per order, a cached
//! running total. When every kernel is an exact Rényi divergence (all but the two bounds above),
//! (α − 1)·RDP(α) is a cumulant generating function — convex in α, zero at α = 1 — and RDP is
//! non-decreasing in α. So ε(δ) = min over the grid is found by branch and bound: orders whose
//! lower bound cannot beat the best are never evaluated. The minimum is the same as over the full
//! grid.
//!
//! Short pending histories use lower bounds from exactly evaluated neighbours (monotonicity and
//! convexity), seeded at the cheap integer orders 2, 4, …, 64; their cached totals make repeated
//! queries incremental. When every order has a long pending history (≥ 4,096 segments, e.g. a
//! fresh schedule of thousands of distinct σ_t), the orders first get rigorous *binned* lower
//! bounds instead: RDP is
//! non-increasing in σ (data processing), so sorting the Gaussian steps by (q, σ), cutting them
//! into cells of relative width w and charging every step the RDP at its cell's largest σ gives
//! a lower bound on the exact total for one evaluation per cell (slack 1e-9 relative for
//! rounding). Best-first search then refines the order whose bound on the objective is smallest —
//! one cell per sampling rate, then w = 5e-2, 1.25e-2, 3e-3, 8e-4, 2e-4, then the exact total
//! (directly once a level would have more than 40% as many cells as segments, or 10% before any
//! order is exact) — and stops when that order is exact: its exact ε is at most every other
//! order's lower bound. Bounds from smaller orders (RDP non-decreasing in α) and the convexity
//! bounds from exact orders are used too. On the 40,000-step ramp of the benchmark only the two
//! orders nearest the optimum (5.6 and 5.7) are summed exactly; the others are excluded by
//! bounds costing a few hundred to a few thousand kernel evaluations each. Exact totals and large
//! bound sums run on the rayon pool in fixed chunks added in order, so results do not depend on
//! the thread count.
//!
//! The fractional-order kernel ([`log_a_poisson_gaussian_frac`]) evaluates the same exact series
//! as the reference ([`log_a_poisson_gaussian_frac_reference`]) without an exp or erfc per term:
//! every term is a Mills-ratio multiple of one constant, products give the rest, the Mills ratio
//! is computed only to the precision a term needs, and the slowly decaying alternating tail is
//! summed by a convergence acceleration with a proven error bound.
//!
//! [`RdpAccountant::with_sigma_grid`] remains an opt-in conservative approximation: σ rounded down
//! to a fine geometric grid, equal steps grouped (ε can only grow; the sandwich against the exact
//! value is tested).

//! # Files
//!
//! `orders.rs` (order grids), `kernels.rs` (per-step kernels: full-batch Gaussian and Laplace,
//! Poisson-subsampled Laplace, [`RdpKernel`]), `poisson_gaussian.rs` (the Poisson-subsampled
//! Gaussian at integer and fractional orders, with its reference twins),
//! `without_replacement.rs` (Wang, Balle, Kasiviswanathan 2019), `conversion.rs` (RDP → (ε, δ)),
//! `search.rs` (branch and bound and the binned best-first search over orders),
//! `accountant.rs` ([`RdpAccountant`]); special functions (log-factorials, erfcx, Mills ratios,
//! log-sum-exp, series acceleration) are in `privacy::special`, the event checks shared by all
//! accountants in `privacy::accountant::checks`.

mod accountant;
mod conversion;
mod kernels;
mod orders;
mod poisson_gaussian;
mod random_allocation;
mod search;
#[cfg(test)]
mod tests;
mod without_replacement;

pub use accountant::*;
pub use conversion::*;
pub use kernels::*;
pub use orders::*;
pub use poisson_gaussian::*;
pub use random_allocation::*;
use search::*;
pub use without_replacement::*;
