//! `[privacy]` (room: `config::spec`): the budget (ε or σ, δ), accountant, neighbouring
//! relation and noise source, and their checks.

use super::*;

/// `[privacy]` (with `[noise]`) of a private run.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivacySpec {
    /// `privacy.delta`, in (0, 1).
    pub delta: f64,
    pub budget: Budget,
    pub noise_schedule: NoiseSchedule,
    /// `noise.mechanism` (default independent noise).
    pub mechanism: NoiseMechanism,
    /// `privacy.accountant` (default `rdp`).
    pub accountant: AccountantKind,
    /// `privacy.neighbouring` (default `add_or_remove_one`).
    pub neighbouring: NeighbouringRelation,
    /// `privacy.secure_noise`: draw noise from a cryptographic RNG.
    pub secure_noise: bool,
    /// `noise.round_digits`: σ_t rounded DOWN to this many significant digits (conservative;
    /// fewer distinct events, faster accounting). `None`: σ_t exactly.
    pub round_digits: Option<u32>,
}

/// How the noise scale and the privacy budget relate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// `privacy.epsilon` given: the noise scale κ is calibrated before training so the whole
    /// planned run spends ε at `delta` under the accountant.
    Calibrated { epsilon: f64 },
    /// `noise.noise_multiplier` given: κ = noise_multiplier; the ε spent is reported.
    NoiseMultiplier { noise_multiplier: f64 },
    /// `privacy.stop_when_spent = true`: κ = noise_multiplier and training stops before the step
    /// that would take the spent ε above `epsilon` (the planned length is then a maximum).
    UntilSpent { noise_multiplier: f64, epsilon: f64 },
}

impl Checker<'_> {
    pub(super) fn privacy(&self, raw: &RawConfig, enabled: bool) -> R<Option<PrivacySpec>> {
        let p: &RawPrivacy = &raw.privacy;
        let n = &raw.noise;
        if !enabled {
            let why = || "not used with privacy.enabled = false".to_string();
            self.absent("privacy.epsilon", &p.epsilon, why)?;
            self.absent("privacy.delta", &p.delta, why)?;
            self.absent("privacy.accountant", &p.accountant, why)?;
            self.absent("privacy.neighbouring", &p.neighbouring, why)?;
            self.absent("privacy.secure_noise", &p.secure_noise, why)?;
            self.absent("privacy.stop_when_spent", &p.stop_when_spent, why)?;
            self.absent("noise.schedule", &n.schedule, why)?;
            self.absent("noise.noise_multiplier", &n.noise_multiplier, why)?;
            if *n != RawNoise::default() {
                return Err(self.not_applicable("noise", why()));
            }
            return Ok(None);
        }
        let delta = p
            .delta
            .ok_or_else(|| self.missing("privacy.delta", "a private run needs δ (e.g. 1e-5)"))?;
        let delta = self.float("privacy.delta", delta, "a value in (0, 1)", |x| {
            x > 0.0 && x < 1.0
        })?;
        let epsilon = p
            .epsilon
            .map(|e| self.positive("privacy.epsilon", e))
            .transpose()?;
        let sigma = n
            .noise_multiplier
            .map(|s| self.positive("noise.noise_multiplier", s))
            .transpose()?;
        let budget = if p.stop_when_spent.unwrap_or(false) {
            match (sigma, epsilon) {
                (Some(noise_multiplier), Some(epsilon)) => Budget::UntilSpent {
                    noise_multiplier,
                    epsilon,
                },
                (None, _) => {
                    return Err(self.missing(
                        "noise.noise_multiplier",
                        "privacy.stop_when_spent = true trains at a given noise multiplier until privacy.epsilon is spent",
                    ));
                }
                (Some(_), None) => {
                    return Err(self.missing(
                        "privacy.epsilon",
                        "privacy.stop_when_spent = true needs the budget ε to stop at",
                    ));
                }
            }
        } else {
            match (sigma, epsilon) {
                (Some(_), Some(_)) => {
                    return Err(self.conflict(
                        "noise.noise_multiplier",
                        "privacy.epsilon",
                        "give either `noise.noise_multiplier` (ε is then reported) or `privacy.epsilon` (σ is then calibrated), not both",
                    ));
                }
                (Some(noise_multiplier), None) => Budget::NoiseMultiplier { noise_multiplier },
                (None, Some(epsilon)) => Budget::Calibrated { epsilon },
                (None, None) => {
                    return Err(self.missing(
                        "privacy.epsilon",
                        "a private run needs `privacy.epsilon` (to calibrate σ) or `noise.noise_multiplier`",
                    ));
                }
            }
        };
        let noise_schedule = self.noise_schedule(n)?;
        let mechanism = self.noise_mechanism(n)?;
        let round_digits = n
            .round_digits
            .map(|d| self.int("noise.round_digits", d, 1, 15))
            .transpose()?
            .map(|d| d as u32);
        Ok(Some(PrivacySpec {
            delta,
            budget,
            noise_schedule,
            mechanism,
            accountant: p.accountant.unwrap_or(AccountantKind::Rdp),
            neighbouring: p.neighbouring.unwrap_or_default(),
            secure_noise: p.secure_noise.unwrap_or(false),
            round_digits,
        }))
    }
}
