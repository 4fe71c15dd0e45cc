//! `[model]` (room: `config::spec`): the architecture and its layers, and their checks.

use super::*;

/// `[model]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub architecture: ModelArchitecture,
    /// `model.loss`: cross-entropy (default) or squared.
    pub loss: Loss,
    /// `model.l2`: coefficient λ of the penalty (λ/2)‖θ‖² added to the mean loss; ≥ 0.
    pub l2: f64,
    /// `model.init_from`: a saved model (safetensors) whose parameters start training instead
    /// of the seeded initialisation (relative paths are read from the working directory).
    pub init_from: Option<std::path::PathBuf>,
    /// `model.freeze`: layers (by their index in the built model, as the saved model's tensor
    /// names give them) whose parameters are not trained.
    pub freeze: Vec<String>,
}

/// The network. The output layer (one unit per class, or one logit for two classes with
/// `Logistic`) is always added by the model room; the lists here are the hidden part.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelArchitecture {
    Logistic,
    Mlp {
        hidden: Vec<usize>,
        activation: Activation,
    },
    /// Explicit layers, then the output dense layer. A dense layer after a spatial layer
    /// flattens its input.
    Cnn {
        layers: Vec<LayerSpec>,
    },
    MnistCnn,
    CifarCnn,
    Resnet20Gn,
}

impl ModelArchitecture {
    /// The `model.architecture` name.
    pub fn kind(&self) -> Architecture {
        match self {
            ModelArchitecture::Logistic => Architecture::Logistic,
            ModelArchitecture::Mlp { .. } => Architecture::Mlp,
            ModelArchitecture::Cnn { .. } => Architecture::Cnn,
            ModelArchitecture::MnistCnn => Architecture::MnistCnn,
            ModelArchitecture::CifarCnn => Architecture::CifarCnn,
            ModelArchitecture::Resnet20Gn => Architecture::Resnet20Gn,
        }
    }
}

/// One layer of an explicit CNN (`[[model.layers]]`).
#[derive(Debug, Clone, PartialEq)]
pub enum LayerSpec {
    Conv2d {
        out_channels: usize,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        /// `weight_standardization`: standardise each output channel's weights over its fan-in
        /// (Qiao et al. 2019); default false.
        weight_standardization: bool,
    },
    MaxPool2d {
        kernel_size: usize,
        stride: usize,
    },
    AvgPool2d {
        kernel_size: usize,
        stride: usize,
    },
    Flatten,
    Dense {
        out_features: usize,
    },
    /// Group normalisation over `groups` groups of channels (Wu & He 2018).
    GroupNorm {
        groups: usize,
    },
    Relu,
    Tanh,
    /// Opens a residual block: the activation here is its skip source.
    ResidualSave,
    /// Closes the innermost open residual block: adds its source through the parameter-free
    /// shortcut (He et al. 2016, option A).
    ResidualAdd,
}

impl Checker<'_> {
    pub(super) fn model(&self, m: &RawModel) -> R<ModelSpec> {
        let arch = m.architecture.ok_or_else(|| {
            self.missing(
                "model.architecture",
                "choose logistic, mlp, cnn, mnist_cnn, cifar_cnn or resnet20_gn",
            )
        })?;
        let name = arch.name();
        let only = |what: &'static str| {
            move || format!("only used with {what}; model.architecture is \"{name}\"")
        };
        if arch != Architecture::Mlp {
            self.absent("model.hidden", &m.hidden, only("mlp"))?;
            self.absent("model.activation", &m.activation, only("mlp"))?;
        }
        if arch != Architecture::Cnn {
            self.absent("model.layers", &m.layers, only("cnn"))?;
        }
        let architecture = match arch {
            Architecture::Logistic => ModelArchitecture::Logistic,
            Architecture::MnistCnn => ModelArchitecture::MnistCnn,
            Architecture::CifarCnn => ModelArchitecture::CifarCnn,
            Architecture::Resnet20Gn => ModelArchitecture::Resnet20Gn,
            Architecture::Mlp => {
                let hidden = m.hidden.as_ref().ok_or_else(|| {
                    self.missing(
                        "model.hidden",
                        "an mlp needs its hidden sizes, e.g. [512, 512]",
                    )
                })?;
                if hidden.is_empty() || hidden.len() > 64 {
                    return Err(self.range(
                        "model.hidden",
                        "1 to 64 hidden sizes",
                        format!("{} sizes", hidden.len()),
                    ));
                }
                let hidden = hidden
                    .iter()
                    .map(|&h| self.size("model.hidden", h, 1, MAX_WIDTH))
                    .collect::<R<Vec<_>>>()?;
                ModelArchitecture::Mlp {
                    hidden,
                    activation: m.activation.unwrap_or(Activation::Relu),
                }
            }
            Architecture::Cnn => {
                let layers = m.layers.as_ref().ok_or_else(|| {
                    self.missing("model.layers", "a cnn needs its [[model.layers]] list")
                })?;
                if layers.is_empty() || layers.len() > 1024 {
                    return Err(self.range(
                        "model.layers",
                        "1 to 1024 layers",
                        format!("{} layers", layers.len()),
                    ));
                }
                let layers = layers
                    .iter()
                    .enumerate()
                    .map(|(i, l)| self.layer(i, l))
                    .collect::<R<Vec<_>>>()?;
                ModelArchitecture::Cnn { layers }
            }
        };
        let l2 = self.float(
            "model.l2",
            m.l2.unwrap_or(0.0),
            "a finite number ≥ 0",
            |x| x >= 0.0,
        )?;
        let init_from = match &m.init_from {
            None => None,
            Some(p) if p.trim().is_empty() => {
                return Err(self.range(
                    "model.init_from",
                    "the path of a saved model (.safetensors)",
                    "an empty string".into(),
                ));
            }
            Some(p) => Some(std::path::PathBuf::from(p)),
        };
        let freeze = m.freeze.clone().unwrap_or_default();
        if freeze.len() > 1024 {
            return Err(self.range(
                "model.freeze",
                "at most 1024 layer names",
                format!("{} names", freeze.len()),
            ));
        }
        for (i, name) in freeze.iter().enumerate() {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_digit()) {
                return Err(self.range(
                    "model.freeze",
                    "layer indices written as strings, e.g. [\"0\", \"2\"] (the prefix of the saved model's tensor names)",
                    format!("{name:?}"),
                ));
            }
            if freeze[..i].contains(name) {
                return Err(self.range(
                    "model.freeze",
                    "distinct layer names",
                    format!("{name:?} twice"),
                ));
            }
        }
        Ok(ModelSpec {
            architecture,
            loss: m.loss.unwrap_or_default(),
            l2,
            init_from,
            freeze,
        })
    }

    pub(super) fn layer(&self, i: usize, l: &RawLayer) -> R<LayerSpec> {
        let key = |k: &str| format!("model.layers[{i}].{k}");
        let kind = l
            .kind
            .ok_or_else(|| self.missing(&key("kind"), "every layer needs a kind"))?;
        let why = || format!("not a parameter of a {} layer", kind.name());
        let need = |k: &str, v: Option<i64>, lo: usize, hi: usize| -> R<usize> {
            let v = v.ok_or_else(|| ConfigError::Missing {
                at: self.at(),
                key: key(k),
                reason: "required for this layer kind",
            })?;
            self.size(&key(k), v, lo, hi)
        };
        let opt = |k: &str, v: Option<i64>, default: usize, lo: usize, hi: usize| -> R<usize> {
            match v {
                Some(v) => self.size(&key(k), v, lo, hi),
                None => Ok(default),
            }
        };
        let uses = |out_channels: bool, kernel: bool, padding: bool, out_features: bool| -> R<()> {
            if !out_channels {
                self.absent(&key("out_channels"), &l.out_channels, why)?;
            }
            if !kernel {
                self.absent(&key("kernel_size"), &l.kernel_size, why)?;
                self.absent(&key("stride"), &l.stride, why)?;
            }
            if !padding {
                self.absent(&key("padding"), &l.padding, why)?;
            }
            if !out_features {
                self.absent(&key("out_features"), &l.out_features, why)?;
            }
            if kind != LayerKind::GroupNorm {
                self.absent(&key("groups"), &l.groups, why)?;
            }
            if kind != LayerKind::Conv2d {
                self.absent(
                    &key("weight_standardization"),
                    &l.weight_standardization,
                    why,
                )?;
            }
            Ok(())
        };
        Ok(match kind {
            LayerKind::Conv2d => {
                uses(true, true, true, false)?;
                LayerSpec::Conv2d {
                    out_channels: need("out_channels", l.out_channels, 1, MAX_WIDTH)?,
                    kernel_size: need("kernel_size", l.kernel_size, 1, 64)?,
                    stride: opt("stride", l.stride, 1, 1, 64)?,
                    padding: opt("padding", l.padding, 0, 0, 64)?,
                    weight_standardization: l.weight_standardization.unwrap_or(false),
                }
            }
            LayerKind::MaxPool2d | LayerKind::AvgPool2d => {
                uses(false, true, false, false)?;
                let kernel_size = need("kernel_size", l.kernel_size, 1, 64)?;
                let stride = opt("stride", l.stride, kernel_size, 1, 64)?;
                if kind == LayerKind::MaxPool2d {
                    LayerSpec::MaxPool2d {
                        kernel_size,
                        stride,
                    }
                } else {
                    LayerSpec::AvgPool2d {
                        kernel_size,
                        stride,
                    }
                }
            }
            LayerKind::Dense => {
                uses(false, false, false, true)?;
                LayerSpec::Dense {
                    out_features: need("out_features", l.out_features, 1, MAX_WIDTH)?,
                }
            }
            LayerKind::Flatten => {
                uses(false, false, false, false)?;
                LayerSpec::Flatten
            }
            LayerKind::GroupNorm => {
                uses(false, false, false, false)?;
                LayerSpec::GroupNorm {
                    groups: need("groups", l.groups, 1, MAX_WIDTH)?,
                }
            }
            LayerKind::Relu => {
                uses(false, false, false, false)?;
                LayerSpec::Relu
            }
            LayerKind::Tanh => {
                uses(false, false, false, false)?;
                LayerSpec::Tanh
            }
            LayerKind::ResidualSave => {
                uses(false, false, false, false)?;
                LayerSpec::ResidualSave
            }
            LayerKind::ResidualAdd => {
                uses(false, false, false, false)?;
                LayerSpec::ResidualAdd
            }
        })
    }
}
