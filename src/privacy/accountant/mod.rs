//! Privacy accountants: turn a history of [`DpEvent`]s into an (ε, δ) guarantee.
//!
//! One small interface (after dp_accounting's `PrivacyAccountant`): [`Accountant::check`] dry-runs
//! an event tree and never mutates; [`Accountant::compose`] checks first and mutates only after a
//! clean check (all or nothing); [`Accountant::epsilon`] and [`Accountant::delta`] convert.
//! Accountants match events exhaustively, so a new event variant forces each to decide.
//!
//! An accountant with no events composed reports ε = 0; one that has seen `NonPrivate` reports
//! ε = ∞ (δ(ε) = 1).

pub mod pld;

use serde::Serialize;

use crate::privacy::event::DpEvent;

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
