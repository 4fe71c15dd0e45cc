//! `[clip]` (room: `config::spec`): the clipping policy and its tables (adaptive, AdaCliP,
//! DC-SGD, quantile), and their checks.

use super::*;

/// `[clip]`: the clipping policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClipSpec {
    /// No clipping (non-private runs only).
    None,
    /// g_i ← g_i · min(1, C / ‖g_i‖) with C = `clip_norm` (Abadi et al. 2016, Alg. 1).
    Flat { clip_norm: f64 },
    /// Group k clipped to C_k, Σ_k C_k² = `clip_norm`² (`privacy::clip::per_layer`).
    PerLayer {
        clip_norm: f64,
        split: LayerSplitKind,
    },
    /// Flat clipping at C_t = `clip_norm`·`final_ratio`^(t/T) (Du et al. 2021).
    Decay { clip_norm: f64, final_ratio: f64 },
    /// g_i/(‖g_i‖ + γ), sensitivity 1 (Bu et al.).
    Automatic { gamma: f64 },
    /// Andrew et al. 2021: C_0 = `initial_clip_norm`, geometric update toward `target_quantile`.
    Quantile {
        initial_clip_norm: f64,
        target_quantile: f64,
        learning_rate: f64,
        count_noise_std: f64,
    },
    /// AdaCliP (Pichapati et al. 2019).
    Adaclip {
        gamma: f64,
        beta1: f64,
        beta2: f64,
        h1: f64,
        h2: f64,
        initial_std: AdaclipInitialStd,
        variance_scale: AdaclipVarianceScale,
    },
    /// DC-SGD-P (`percentile: Some(p)`) or DC-SGD-E (`None`).
    Dcsgd {
        initial_clip_norm: f64,
        percentile: Option<f64>,
        bins: usize,
        histogram_noise_multiplier: f64,
        initial_range: f64,
    },
}

impl ClipSpec {
    /// The kind of policy.
    pub fn kind(&self) -> ClipPolicyKind {
        match self {
            ClipSpec::None => ClipPolicyKind::None,
            ClipSpec::Flat { .. } => ClipPolicyKind::Flat,
            ClipSpec::PerLayer { .. } => ClipPolicyKind::PerLayer,
            ClipSpec::Decay { .. } => ClipPolicyKind::Decay,
            ClipSpec::Automatic { .. } => ClipPolicyKind::Automatic,
            ClipSpec::Quantile { .. } => ClipPolicyKind::Quantile,
            ClipSpec::Adaclip { .. } => ClipPolicyKind::Adaclip,
            ClipSpec::Dcsgd {
                percentile: Some(_),
                ..
            } => ClipPolicyKind::DcsgdP,
            ClipSpec::Dcsgd {
                percentile: None, ..
            } => ClipPolicyKind::DcsgdE,
        }
    }
}

impl Checker<'_> {
    pub(super) fn clip(&self, raw: &RawConfig, private: bool) -> R<ClipSpec> {
        let c = &raw.clip;
        // Without a policy: flat when private or when a clip norm is given, else none.
        let default = if private || c.clip_norm.is_some() {
            ClipPolicyKind::Flat
        } else {
            ClipPolicyKind::None
        };
        let kind = c.policy.unwrap_or(default);
        self.clip_tables(c, kind)?;
        Ok(match kind {
            ClipPolicyKind::None => {
                if private {
                    return Err(self.conflict(
                        "clip.policy",
                        "privacy.enabled",
                        "a private run must clip (\"none\" is only for privacy.enabled = false)",
                    ));
                }
                self.absent("clip.clip_norm", &c.clip_norm, || {
                    "not used with clip.policy = \"none\"".into()
                })?;
                ClipSpec::None
            }
            ClipPolicyKind::Flat => {
                let clip_norm = c.clip_norm.ok_or_else(|| {
                    self.missing("clip.clip_norm", "flat clipping needs the norm bound C")
                })?;
                ClipSpec::Flat {
                    clip_norm: self.positive("clip.clip_norm", clip_norm)?,
                }
            }
            other => self.adaptive_clip(raw, other)?,
        })
    }

    /// Each `[clip.<policy>]` table only with its policy.
    pub(super) fn clip_tables(
        &self,
        c: &crate::config::raw::RawClip,
        kind: ClipPolicyKind,
    ) -> R<()> {
        let why = |table: &str| {
            let table = table.to_string();
            move || format!("only used with clip.policy = \"{table}\"")
        };
        let only = |table: &str, present: bool, k: ClipPolicyKind| -> R<()> {
            if present && kind != k {
                Err(self.not_applicable(&format!("clip.{table}"), why(table)()))
            } else {
                Ok(())
            }
        };
        only("per_layer", c.per_layer.is_some(), ClipPolicyKind::PerLayer)?;
        only("decay", c.decay.is_some(), ClipPolicyKind::Decay)?;
        only(
            "automatic",
            c.automatic.is_some(),
            ClipPolicyKind::Automatic,
        )?;
        only("quantile", c.quantile.is_some(), ClipPolicyKind::Quantile)?;
        only("adaclip", c.adaclip.is_some(), ClipPolicyKind::Adaclip)?;
        only("dcsgd_p", c.dcsgd_p.is_some(), ClipPolicyKind::DcsgdP)?;
        only("dcsgd_e", c.dcsgd_e.is_some(), ClipPolicyKind::DcsgdE)?;
        Ok(())
    }

    /// The policies beyond `none` and `flat`, from their `[clip.<policy>]` tables.
    pub(super) fn adaptive_clip(&self, raw: &RawConfig, kind: ClipPolicyKind) -> R<ClipSpec> {
        let c = &raw.clip;
        if raw.train.adagrad_norm.as_ref().and_then(|a| a.norm_source) == Some(NormSource::Clean) {
            return Err(self.conflict(
                "train.adagrad_norm.norm_source",
                "clip.policy",
                "the clean norm is defined for flat clipping only",
            ));
        }
        let unit =
            |key: &str, v: f64| self.float(key, v, "a number in (0, 1)", |x| x > 0.0 && x < 1.0);
        let beta = |key: &str, v: f64| {
            self.float(key, v, "a number in [0, 1)", |x| (0.0..1.0).contains(&x))
        };
        // C_0 of the adaptive policies: docs/methods/dc_sgd.md's default 1.
        let initial = || self.positive("clip.clip_norm", c.clip_norm.unwrap_or(1.0));
        let required = |why: &'static str| {
            c.clip_norm
                .ok_or_else(|| self.missing("clip.clip_norm", why))
                .and_then(|v| self.positive("clip.clip_norm", v))
        };
        Ok(match kind {
            ClipPolicyKind::None | ClipPolicyKind::Flat => {
                unreachable!("handled by clip()")
            }
            ClipPolicyKind::PerLayer => ClipSpec::PerLayer {
                clip_norm: required("per-layer clipping needs the total norm bound C")?,
                split: c
                    .per_layer
                    .as_ref()
                    .and_then(|p| p.split)
                    .unwrap_or(LayerSplitKind::Equal),
            },
            ClipPolicyKind::Decay => {
                let ratio = c.decay.as_ref().and_then(|d| d.final_ratio).unwrap_or(0.5);
                ClipSpec::Decay {
                    clip_norm: required("decay needs the initial norm bound C_0")?,
                    final_ratio: self.float(
                        "clip.decay.final_ratio",
                        ratio,
                        "a number in (0, 1]",
                        |x| x > 0.0 && x <= 1.0,
                    )?,
                }
            }
            ClipPolicyKind::Automatic => {
                self.absent("clip.clip_norm", &c.clip_norm, || {
                    "automatic clipping has sensitivity 1 and no clip norm".into()
                })?;
                let gamma = c.automatic.as_ref().and_then(|a| a.gamma).unwrap_or(0.01);
                ClipSpec::Automatic {
                    gamma: self.positive("clip.automatic.gamma", gamma)?,
                }
            }
            ClipPolicyKind::Quantile => {
                let q = c.quantile.clone().unwrap_or_default();
                // Andrew et al. 2021 (and DC-SGD's runs of it): σ_b = B/20.
                let batch = raw
                    .train
                    .expected_batch_size
                    .or(raw.train.batch_size)
                    .unwrap_or(20) as f64;
                ClipSpec::Quantile {
                    initial_clip_norm: initial()?,
                    target_quantile: unit(
                        "clip.quantile.target_quantile",
                        q.target_quantile.unwrap_or(0.5),
                    )?,
                    learning_rate: self.positive(
                        "clip.quantile.learning_rate",
                        q.learning_rate.unwrap_or(0.2),
                    )?,
                    // Bounded so that the count's multiplier 2σ_b stays finite.
                    count_noise_std: self.float(
                        "clip.quantile.count_noise_std",
                        q.count_noise_std.unwrap_or(batch / 20.0),
                        "a number in (0, 1e100]",
                        |x| x > 0.0 && x <= 1e100,
                    )?,
                }
            }
            ClipPolicyKind::Adaclip => {
                self.absent("clip.clip_norm", &c.clip_norm, || {
                    "AdaCliP clips at 1 after its own transform (tune clip.adaclip.h2)".into()
                })?;
                let a = c.adaclip.clone().unwrap_or_default();
                let h1 = self.positive("clip.adaclip.h1", a.h1.unwrap_or(1e-12))?;
                let h2 = a.h2.ok_or_else(|| {
                    self.missing(
                        "clip.adaclip.h2",
                        "AdaCliP needs the variance cap h2 (the paper tunes it; about C²/d matches DP-SGD at C)",
                    )
                })?;
                let h2 = self.float(
                    "clip.adaclip.h2",
                    h2,
                    &format!("a number > clip.adaclip.h1 = {h1}"),
                    |x| x > h1,
                )?;
                ClipSpec::Adaclip {
                    gamma: self.positive("clip.adaclip.gamma", a.gamma.unwrap_or(1.0))?,
                    beta1: beta("clip.adaclip.beta1", a.beta1.unwrap_or(0.99))?,
                    beta2: beta("clip.adaclip.beta2", a.beta2.unwrap_or(0.9))?,
                    h1,
                    h2,
                    initial_std: a.initial_std.unwrap_or(AdaclipInitialStd::Paper),
                    variance_scale: a.variance_scale.unwrap_or(AdaclipVarianceScale::PerExample),
                }
            }
            ClipPolicyKind::DcsgdP | ClipPolicyKind::DcsgdE => {
                let p_rule = kind == ClipPolicyKind::DcsgdP;
                let (table, d) = if p_rule {
                    ("clip.dcsgd_p", c.dcsgd_p.clone().unwrap_or_default())
                } else {
                    ("clip.dcsgd_e", c.dcsgd_e.clone().unwrap_or_default())
                };
                let key = |k: &str| format!("{table}.{k}");
                let percentile = if p_rule {
                    Some(self.float(
                        &key("percentile"),
                        d.percentile.unwrap_or(0.9),
                        "a number in (0, 1]",
                        |x| x > 0.0 && x <= 1.0,
                    )?)
                } else {
                    self.absent(&key("percentile"), &d.percentile, || {
                        "only used with clip.policy = \"dcsgd_p\"".into()
                    })?;
                    None
                };
                let bins = self.size(&key("bins"), d.bins.unwrap_or(20), 2, 100_000)?;
                // docs/methods/dc_sgd.md §1.3-1.4: R_0 = 1 for P, b for E.
                let default_range = if p_rule { 1.0 } else { bins as f64 };
                ClipSpec::Dcsgd {
                    initial_clip_norm: initial()?,
                    percentile,
                    bins,
                    histogram_noise_multiplier: self.positive(
                        &key("histogram_noise_multiplier"),
                        d.histogram_noise_multiplier.unwrap_or(5.0),
                    )?,
                    initial_range: self.positive(
                        &key("initial_range"),
                        d.initial_range.unwrap_or(default_range),
                    )?,
                }
            }
        })
    }
}
