//! `[accelerated]` (room: `config::spec`): the accelerated DP methods of Kuru et al. (2020),
//! and their checks.

use super::*;

/// `[accelerated]`: the accelerated DP methods of Kuru, Birbil, Gürbüzbalaban and Yıldırım
/// (2020) on the paper's regularised binary logistic regression (method notes docs/methods/accelerated.md).
#[derive(Debug, Clone, PartialEq)]
pub struct AcceleratedSpec {
    pub method: AcceleratedMethodKind,
    /// The pure-DP budget ε (δ = 0), spent by the Laplace mechanism over the run.
    pub epsilon: f64,
    /// c of the step size α = c/L, in (0, 1].
    pub step_constant: f64,
    pub smoothness: SmoothnessSpec,
    pub momentum: MomentumSpec,
    /// The cube-root split of ε (the `-opt` variants; NAG and MASG only).
    pub noise_dividing: bool,
    /// With `noise_dividing`: run T' ≤ T steps, T' minimising the error bound.
    pub select_steps: bool,
    pub bound_constants: BoundConstantsKind,
    /// E_0 of the T' score.
    pub initial_error: f64,
    /// x_0 = init_value · 1.
    pub init_value: f64,
    pub sensitivity: SensitivitySpec,
    pub laplace_parameter: LaplaceParameterKind,
    /// MASG's p (n_k = 2^k ⌈√κ ln 2^{p+2}⌉).
    pub masg_p: u32,
    /// MASG's n_1 (`None`: ⌈2√κ ln √κ⌉).
    pub masg_first_stage: Option<u64>,
    /// δ at which the RDP ε of the same Laplace releases is reported beside the pure ε.
    pub rdp_delta: f64,
}

/// `accelerated.smoothness`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SmoothnessSpec {
    /// σ_max(UᵀU/n) + μ (the paper's).
    Gram,
    /// ¼σ_max(UᵀU/n) + μ.
    Logistic,
    /// A given L.
    Value(f64),
}

/// `accelerated.momentum`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MomentumSpec {
    /// β = (1 − √(αμ))/(1 + √(αμ)).
    StronglyConvex,
    Value(f64),
}

/// `accelerated.sensitivity` with its bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SensitivitySpec {
    /// ‖u‖₁ ≤ `feature_l1_bound` for every example; S1 = 2·bound.
    FeatureBound { feature_l1_bound: f64 },
    /// Loss gradients clipped to L1 norm `l1_clip_norm`; S1 = 2·norm.
    L1Clip { l1_clip_norm: f64 },
}

impl SensitivitySpec {
    /// S1: the L1 distance between two examples' loss gradients can reach (replace one).
    pub fn l1_sensitivity(&self) -> f64 {
        match *self {
            SensitivitySpec::FeatureBound { feature_l1_bound } => 2.0 * feature_l1_bound,
            SensitivitySpec::L1Clip { l1_clip_norm } => 2.0 * l1_clip_norm,
        }
    }
}

impl Checker<'_> {
    pub(super) fn accelerated(&self, raw: &RawConfig, a: &RawAccelerated) -> R<AcceleratedSpec> {
        // The budget lives in [accelerated]; the Gaussian-mechanism sections do not apply.
        let own = "the accelerated methods set their own privacy in [accelerated] (epsilon, pure DP, Laplace noise)";
        if raw.privacy.enabled == Some(true)
            || (RawPrivacy {
                enabled: None,
                ..raw.privacy.clone()
            }) != RawPrivacy::default()
        {
            return Err(self.conflict("privacy", "accelerated", own));
        }
        if raw.noise != RawNoise::default() {
            return Err(self.conflict("noise", "accelerated", own));
        }
        let clip_ok = raw.clip.clip_norm.is_none()
            && matches!(raw.clip.policy, None | Some(ClipPolicyKind::None));
        if !clip_ok {
            return Err(self.conflict(
                "clip",
                "accelerated",
                "the accelerated methods clip (optionally) with accelerated.sensitivity = \"l1_clip\"",
            ));
        }
        if !matches!(raw.train.sampler, Some(SamplerKind::FixedSize)) {
            return Err(self.conflict(
                "train.sampler",
                "accelerated",
                "the accelerated methods sample a fixed-size batch without replacement: set train.sampler = \"fixed_size\" (batch_size = n is full batch)",
            ));
        }
        if !matches!(raw.train.optimizer, None | Some(OptimizerKind::Sgd)) {
            return Err(self.conflict(
                "train.optimizer",
                "accelerated",
                "the update rule is accelerated.method",
            ));
        }
        if !matches!(raw.model.architecture, None | Some(Architecture::Logistic)) {
            return Err(self.conflict(
                "model.architecture",
                "accelerated",
                "the accelerated methods train the paper's binary logistic regression (\"logistic\")",
            ));
        }
        if !raw.model.l2.is_some_and(|l2| l2.is_finite() && l2 > 0.0) {
            return Err(self.range(
                "model.l2",
                "μ > 0 for the accelerated methods (the penalty (μ/2)‖x‖²; the paper's λ = 0.01 is μ = 0.02)",
                format!("{:?}", raw.model.l2),
            ));
        }
        let method = a.method.ok_or_else(|| {
            self.missing(
                "accelerated.method",
                "name the method: gd, heavy_ball, heavy_ball_ema, nesterov or masg",
            )
        })?;
        let epsilon = a.epsilon.ok_or_else(|| {
            self.missing(
                "accelerated.epsilon",
                "the accelerated methods need a pure-DP budget ε",
            )
        })?;
        let epsilon = self.positive("accelerated.epsilon", epsilon)?;
        let step_constant = self.float(
            "accelerated.step_constant",
            a.step_constant.unwrap_or(1.0),
            "a number in (0, 1]",
            |x| x > 0.0 && x <= 1.0,
        )?;
        let smoothness = match &a.smoothness {
            None => SmoothnessSpec::Gram,
            Some(RawNumberOrWord::Word(w)) if w == "gram" => SmoothnessSpec::Gram,
            Some(RawNumberOrWord::Word(w)) if w == "logistic" => SmoothnessSpec::Logistic,
            Some(RawNumberOrWord::Word(w)) => {
                return Err(self.range(
                    "accelerated.smoothness",
                    "\"gram\", \"logistic\" or a number > 0",
                    format!("{w:?}"),
                ));
            }
            Some(RawNumberOrWord::Number(x)) => {
                SmoothnessSpec::Value(self.positive("accelerated.smoothness", *x)?)
            }
        };
        let momentum = match &a.momentum {
            None => MomentumSpec::StronglyConvex,
            Some(RawNumberOrWord::Word(w)) if w == "strongly_convex" => {
                MomentumSpec::StronglyConvex
            }
            Some(RawNumberOrWord::Word(w)) => {
                return Err(self.range(
                    "accelerated.momentum",
                    "\"strongly_convex\" or a number in [0, 1)",
                    format!("{w:?}"),
                ));
            }
            Some(RawNumberOrWord::Number(x)) => MomentumSpec::Value(self.float(
                "accelerated.momentum",
                *x,
                "\"strongly_convex\" or a number in [0, 1)",
                |b| (0.0..1.0).contains(&b),
            )?),
        };
        if method == AcceleratedMethodKind::Gd {
            self.absent("accelerated.momentum", &a.momentum, || {
                "gradient descent has no momentum".into()
            })?;
        }
        let noise_dividing = a.noise_dividing.unwrap_or(false);
        if noise_dividing
            && !matches!(
                method,
                AcceleratedMethodKind::Nesterov | AcceleratedMethodKind::Masg
            )
        {
            return Err(self.conflict(
                "accelerated.noise_dividing",
                "accelerated.method",
                "the noise-dividing split is derived for nesterov and masg only",
            ));
        }
        let why = || "only used with accelerated.noise_dividing = true".to_string();
        if !noise_dividing {
            self.absent("accelerated.select_steps", &a.select_steps, why)?;
            self.absent("accelerated.bound_constants", &a.bound_constants, why)?;
            self.absent("accelerated.initial_error", &a.initial_error, why)?;
        }
        let initial_error =
            self.positive("accelerated.initial_error", a.initial_error.unwrap_or(10.0))?;
        let init_value = self.float(
            "accelerated.init_value",
            a.init_value.unwrap_or(10.0),
            "a finite number",
            |_| true,
        )?;
        let sensitivity = match a.sensitivity.unwrap_or(L1SensitivityKind::FeatureBound) {
            L1SensitivityKind::FeatureBound => {
                self.absent("accelerated.l1_clip_norm", &a.l1_clip_norm, || {
                    "only used with accelerated.sensitivity = \"l1_clip\"".into()
                })?;
                SensitivitySpec::FeatureBound {
                    feature_l1_bound: self.positive(
                        "accelerated.feature_l1_bound",
                        a.feature_l1_bound.unwrap_or(20.0),
                    )?,
                }
            }
            L1SensitivityKind::L1Clip => {
                self.absent("accelerated.feature_l1_bound", &a.feature_l1_bound, || {
                    "only used with accelerated.sensitivity = \"feature_bound\"".into()
                })?;
                let c = a.l1_clip_norm.ok_or_else(|| {
                    self.missing(
                        "accelerated.l1_clip_norm",
                        "L1 clipping needs the norm bound",
                    )
                })?;
                SensitivitySpec::L1Clip {
                    l1_clip_norm: self.positive("accelerated.l1_clip_norm", c)?,
                }
            }
        };
        if method != AcceleratedMethodKind::Masg {
            let why = || "only used with accelerated.method = \"masg\"".to_string();
            self.absent("accelerated.masg_p", &a.masg_p, why)?;
            self.absent("accelerated.masg_first_stage", &a.masg_first_stage, why)?;
        }
        let masg_p = self.int("accelerated.masg_p", a.masg_p.unwrap_or(1), 0, 60)? as u32;
        let masg_first_stage = match a.masg_first_stage {
            Some(n1) => Some(self.int("accelerated.masg_first_stage", n1, 1, i64::MAX)?),
            None => None,
        };
        let rdp_delta = self.float(
            "accelerated.rdp_delta",
            a.rdp_delta.unwrap_or(1e-6),
            "a value in (0, 1)",
            |x| x > 0.0 && x < 1.0,
        )?;
        Ok(AcceleratedSpec {
            method,
            epsilon,
            step_constant,
            smoothness,
            momentum,
            noise_dividing,
            select_steps: noise_dividing && a.select_steps.unwrap_or(true),
            bound_constants: a.bound_constants.unwrap_or(BoundConstantsKind::Code),
            initial_error,
            init_value,
            sensitivity,
            laplace_parameter: a.laplace_parameter.unwrap_or(LaplaceParameterKind::Scale),
            masg_p,
            masg_first_stage,
            rdp_delta,
        })
    }
}
