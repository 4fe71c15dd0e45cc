//! The PLD room: privacy accounting with privacy-loss distributions.
//!
//! Owns everything under `privacy::accountant::pld`; re-exports the accountant and the pieces a
//! caller may want (a discretised distribution, its factories). Layered after Google's
//! dp_accounting PLD package (`dp_accounting/pld/`), one file per layer:
//!
//! 1. [`mechanism`]: privacy-loss functions of the Gaussian and Laplace mechanisms and their
//!    Poisson-subsampled forms, and their exact hockey-stick curves δ(ε).
//! 2. [`pmf`]: a PLD discretised on a grid with a separate mass at +∞; δ(ε) and ε(δ);
//!    connect-the-dots construction; composition, carried out by `fourier` (pairwise FFT
//!    convolution, T-fold self-composition, and many distinct PMFs with counts in one pass under
//!    one Chernoff window).
//! 3. [`distribution`]: the remove/add pair and the factories (`from_gaussian`, `from_laplace`);
//!    [`allocation`]: the factory for one epoch of random allocation (balls-in-bins batches)
//!    with the Gaussian mechanism, by convolution of lattice-rounded likelihood-ratio terms.
//! 4. [`accountant`]: [`PldAccountant`], the thin adapter from [`crate::privacy::event::DpEvent`]s.
//!
//! References: Meiser & Mohammadi 2018 ("Tight on budget?", privacy buckets, pessimistic
//! rounding); Sommer, Meiser, Mohammadi 2019 (PLD composition = convolution); Koskela, Jälkö,
//! Honkela 2020 (FFT accountant); Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022 ("Connect
//! the dots", the pessimistic discretisation used here); Zhu, Dong, Wang 2022 (add/remove
//! directions of subsampled mechanisms).
//!
//! Must not: touch other accountants, calibration or the CLI.
//!
//! ```
//! use dpx::privacy::accountant::Accountant;
//! use dpx::privacy::accountant::pld::{PldAccountant, DEFAULT_VALUE_DISCRETIZATION_INTERVAL};
//! use dpx::privacy::event::{DpEvent, NeighbouringRelation};
//!
//! // Three Gaussian releases with σ = √3 are 1-GDP: exact δ(1) = 0.1269367
//! // (docs/reference_vectors.md row 18); the PLD gives an upper bound within 1e-6 of it.
//! let mut acc = PldAccountant::new(
//!     NeighbouringRelation::AddOrRemoveOne,
//!     DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
//! );
//! acc.compose(&DpEvent::gaussian(3f64.sqrt()), 3).unwrap();
//! let delta = acc.delta(1.0).unwrap();
//! assert!(delta >= 0.1269367375 && delta < 0.1269377);
//! let report = acc.epsilon(delta).unwrap();
//! assert!((report.epsilon - 1.0).abs() < 1e-3);
//! ```

pub mod accountant;
pub mod allocation;
mod chernoff;
pub mod distribution;
mod fourier;
pub mod mechanism;
pub mod pmf;

pub use accountant::{
    DEFAULT_SIGMA_GRID, DEFAULT_VALUE_DISCRETIZATION_INTERVAL, EXACT_DISTINCT_LIMIT, PldAccountant,
};
pub use distribution::PrivacyLossDistribution;
pub use pmf::DiscretePmf;
