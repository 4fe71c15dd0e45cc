//! Privacy accountants: turn a history of [`DpEvent`]s into an (ε, δ) guarantee.
//!
//! One small interface (after dp_accounting's `PrivacyAccountant`): [`Accountant::check`] dry-runs
//! an event tree and never mutates; [`Accountant::compose`] checks first and mutates only after a
//! clean check (all or nothing); [`Accountant::epsilon`] and [`Accountant::delta`] convert.
//! Accountants match events exhaustively, so a new event variant forces each to decide.
//!
//! An accountant with no events composed reports ε = 0; one that has seen `NonPrivate` reports
//! ε = ∞ (δ(ε) = 1).
//!
//! [`new_accountant`] is the one name → implementation table; [`AccountantOptions`] carries every
//! accountant's settings so callers (calibration, the CLI, the training loop) never special-case.

use serde::Serialize;

use crate::privacy::event::{DpEvent, NeighbouringRelation};

pub mod adp_paper;
pub(crate) mod checks;
pub mod gdp;
pub mod pld;
pub mod pure;
pub mod rdp;
pub mod zcdp;

/// How RDP is converted to (ε, δ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum RdpConversion {
    /// Balle et al. 2020, Thm. 21, as dp_accounting and Opacus today.
    #[default]
    Improved,
    /// Mironov 2017, Prop. 3: ε = RDP + ln(1/δ)/(α − 1), as Opacus before 2021 and TF Privacy docs.
    Classic,
}

/// How zCDP is converted to (ε, δ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum ZcdpConversion {
    /// Canonne, Kamath, Steinke 2020, Cor. 13 (optimised over the order).
    #[default]
    Tight,
    /// Bun and Steinke 2016, Prop. 1.3: ε = ρ + 2√(ρ ln(1/δ)).
    Standard,
}

/// Settings of every accountant; each uses the fields that concern it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountantOptions {
    /// Which datasets are neighbours (default add/remove one).
    pub relation: NeighbouringRelation,
    /// RDP orders (default: dp_accounting's grid, [`rdp::default_orders`]).
    pub rdp_orders: Vec<f64>,
    /// RDP → (ε, δ) conversion (default Balle et al. 2020).
    pub rdp_conversion: RdpConversion,
    /// PLD discretisation interval of the privacy loss (default 1e-4).
    pub pld_value_discretization_interval: f64,
    /// zCDP → (ε, δ) conversion (default tight).
    pub zcdp_conversion: ZcdpConversion,
    /// Opt-in conservative RDP approximation for long schedules of distinct noise multipliers:
    /// σ rounded down to a geometric grid of this relative step
    /// ([`rdp::RdpAccountant::with_sigma_grid`]); `None` (default) is exact.
    pub rdp_sigma_grid: Option<f64>,
    /// The PLD accountant's σ grid for compositions of more than
    /// [`pld::EXACT_DISTINCT_LIMIT`] distinct noise multipliers
    /// ([`pld::PldAccountant::with_sigma_grid`]; default [`pld::DEFAULT_SIGMA_GRID`]); `None`
    /// is always exact.
    pub pld_sigma_grid: Option<f64>,
}

impl Default for AccountantOptions {
    fn default() -> Self {
        Self {
            relation: NeighbouringRelation::AddOrRemoveOne,
            rdp_orders: rdp::default_orders(),
            rdp_conversion: RdpConversion::Improved,
            pld_value_discretization_interval: 1e-4,
            zcdp_conversion: ZcdpConversion::Tight,
            rdp_sigma_grid: None,
            pld_sigma_grid: Some(pld::DEFAULT_SIGMA_GRID),
        }
    }
}

/// A fresh accountant of the given kind with the given options.
///
/// Errors: invalid options (e.g. an empty order grid, a non-positive PLD interval), or an
/// accountant not built into this binary.
pub fn new_accountant(
    kind: AccountantKind,
    options: &AccountantOptions,
) -> Result<Box<dyn Accountant>, AccountingError> {
    Ok(match kind {
        AccountantKind::Rdp => {
            let acc = rdp::RdpAccountant::new(
                options.relation,
                options.rdp_orders.clone(),
                options.rdp_conversion,
            )?;
            match options.rdp_sigma_grid {
                Some(step) => Box::new(acc.with_sigma_grid(step)?),
                None => Box::new(acc),
            }
        }
        AccountantKind::Pld => {
            let interval = options.pld_value_discretization_interval;
            if !(interval.is_finite() && interval > 0.0) {
                return Err(AccountingError::InvalidParameter {
                    name: "pld_value_discretization_interval",
                    value: interval,
                    expected: "a positive number",
                });
            }
            Box::new(
                pld::PldAccountant::new(options.relation, interval)
                    .with_sigma_grid(options.pld_sigma_grid)?,
            )
        }
        AccountantKind::Zcdp => Box::new(zcdp::ZcdpAccountant::new(
            options.relation,
            options.zcdp_conversion,
        )),
        AccountantKind::ZcdpPaper => Box::new(zcdp::ZcdpAccountant::paper(options.relation)),
        AccountantKind::Gdp => Box::new(gdp::GdpAccountant::new(options.relation)),
        AccountantKind::Pure => Box::new(pure::PureAccountant::new(options.relation)),
        AccountantKind::AdpPaper => Box::new(adp_paper::AdpPaperAccountant::new(options.relation)),
    })
}

/// Every accountant kind, in the order `--all` prints them.
pub const ALL_KINDS: [AccountantKind; 7] = [
    AccountantKind::Rdp,
    AccountantKind::Pld,
    AccountantKind::Gdp,
    AccountantKind::Zcdp,
    AccountantKind::Pure,
    AccountantKind::AdpPaper,
    AccountantKind::ZcdpPaper,
];

/// Names of the accountants, as typed on the command line and written in outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum AccountantKind {
    /// Rényi DP of the (Poisson-subsampled) Gaussian and Laplace mechanisms (Mironov 2017;
    /// Mironov, Talwar, Zhang 2019), converted with Balle et al. 2020.
    Rdp,
    /// Privacy-loss distributions with pessimistic discretisation and FFT composition.
    Pld,
    /// Zero-concentrated DP for full-batch Gaussian steps (Bun and Steinke 2016).
    Zcdp,
    /// Gaussian DP by the central limit theorem (Dong, Roth, Su 2019): approximate.
    Gdp,
    /// Pure ε-DP: basic composition with amplification by subsampling.
    Pure,
    /// The advanced-composition bound of the ADP-SGD paper (Wu et al., Thm 4.1), for reproductions.
    AdpPaper,
    /// The zCDP budget of the dynamic-noise paper, for reproductions.
    ZcdpPaper,
}

impl AccountantKind {
    /// The name as written on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            AccountantKind::Rdp => "rdp",
            AccountantKind::Pld => "pld",
            AccountantKind::Zcdp => "zcdp",
            AccountantKind::Gdp => "gdp",
            AccountantKind::Pure => "pure",
            AccountantKind::AdpPaper => "adp-paper",
            AccountantKind::ZcdpPaper => "zcdp-paper",
        }
    }
}

impl std::fmt::Display for AccountantKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What an accountant could not do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AccountingError {
    /// The event (or a sub-event) is outside what this accountant can analyse.
    #[error("the {accountant} accountant does not support {event}")]
    Unsupported {
        accountant: AccountantKind,
        event: String,
    },
    /// A parameter is outside its valid range.
    #[error("{name}: expected {expected}, found {value}")]
    InvalidParameter {
        name: &'static str,
        value: f64,
        expected: &'static str,
    },
    /// A numerical procedure failed (e.g. no bracket found).
    #[error("{0}")]
    Numerical(String),
}

/// An (ε, δ) guarantee with how it was obtained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrivacyReport {
    pub epsilon: f64,
    pub delta: f64,
    pub accountant: AccountantKind,
    /// The optimal Rényi order (RDP only).
    pub order: Option<f64>,
    /// Caveats the user must see: "upper bound", "approximate", "optimal order at the grid edge".
    pub notes: Vec<String>,
    /// True when `epsilon` is a proven upper bound on the privacy loss of the composed events
    /// (up to floating-point rounding). False for approximations (GDP's central limit theorem on
    /// subsampled steps) and for a paper's bound used outside its stated conditions. A run whose
    /// report is not an upper bound is marked `epsilon_guaranteed = false`.
    pub upper_bound: bool,
}

/// An accountant: accumulates events and converts the total to (ε, δ).
pub trait Accountant: Send {
    /// Which accountant this is.
    fn kind(&self) -> AccountantKind;

    /// Check that every sub-event of `event` is supported, without changing any state.
    fn check(&self, event: &DpEvent) -> Result<(), AccountingError>;

    /// Compose `event` `count` times into the state. Checks first: on error nothing changes.
    fn compose(&mut self, event: &DpEvent, count: u64) -> Result<(), AccountingError>;

    /// The smallest ε (under this accountant's analysis) for which the composed events are
    /// (ε, `delta`)-DP.
    fn epsilon(&self, delta: f64) -> Result<PrivacyReport, AccountingError>;

    /// The δ for which the composed events are (`epsilon`, δ)-DP.
    fn delta(&self, epsilon: f64) -> Result<f64, AccountingError>;
}
