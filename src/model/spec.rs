//! Model specifications: what a user asks for, before anything is built.
//!
//! Part of the model room. A [`ModelSpec`] is a plain value (serde-friendly, so the config room can
//! mirror it) naming an input shape, a list of [`LayerSpec`]s, a [`LossKind`] and an L2
//! coefficient. [`ModelSpec::build`] checks it and returns a [`crate::model::Model`]. Nothing here
//! allocates parameters or knows of privacy.

use serde::{Deserialize, Serialize};

/// An element-wise activation function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// max(0, x).
    Relu,
    /// tanh(x).
    Tanh,
    /// 1 / (1 + e^{-x}).
    Sigmoid,
}

impl Activation {
    /// The name used in specs and configs.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Tanh => "tanh",
            Activation::Sigmoid => "sigmoid",
        }
    }
}

/// One layer of a sequential model.
///
/// Shapes are inferred from the input shape: a layer never repeats its input size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum LayerSpec {
    /// Fully connected layer `y = W x + b` with `units` outputs. Its input must be a vector
    /// (use [`LayerSpec::Flatten`] after convolutions).
    Dense { units: usize },
    /// 2-D convolution (cross-correlation, as PyTorch's `Conv2d`) with `channels` output channels,
    /// a square `kernel`, `stride` and zero `padding`. Its input must be an image `[C, H, W]`.
    /// With `weight_standardization` each output channel's weights are standardised over their
    /// fan-in before use (Qiao et al. 2019; see [`crate::model::layer::weight_std`]); the stored
    /// parameter stays the raw weight. Absent from a spec (and from the saved JSON) when false.
    Conv2d {
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        #[serde(default, skip_serializing_if = "is_false")]
        weight_standardization: bool,
    },
    /// Max pooling over square windows of side `kernel`, moved by `stride` (no padding).
    MaxPool { kernel: usize, stride: usize },
    /// Average pooling over square windows of side `kernel`, moved by `stride` (no padding).
    AvgPool { kernel: usize, stride: usize },
    /// Image `[C, H, W]` to vector `[C·H·W]` in channel-major order (PyTorch's `Flatten`).
    Flatten,
    /// Group normalisation of each example over `groups` groups of channels (PyTorch's
    /// `GroupNorm(groups, C)`); on a vector, each feature is a channel.
    GroupNorm { groups: usize },
    /// An element-wise activation.
    Activation { function: Activation },
    /// Opens a residual block (He et al. 2016): the activation here is the block's skip source.
    /// Parameter-free, builds no layer (see [`crate::model::layer::residual`]).
    ResidualSave,
    /// Closes the innermost open residual block: its input plus the shortcut of the block's
    /// source — the identity, or when the block changed the shape, option A of He et al. 2016
    /// (§4.1): subsampling by the integer stride and zero-padding of the new channels.
    /// Parameter-free.
    ResidualAdd,
}

impl LayerSpec {
    /// Shorthand for an activation layer.
    pub fn act(function: Activation) -> Self {
        LayerSpec::Activation { function }
    }

    /// Shorthand for a convolution.
    pub fn conv(channels: usize, kernel: usize, stride: usize, padding: usize) -> Self {
        LayerSpec::Conv2d {
            channels,
            kernel,
            stride,
            padding,
            weight_standardization: false,
        }
    }

    /// Shorthand for a convolution with weight standardisation.
    pub fn conv_ws(channels: usize, kernel: usize, stride: usize, padding: usize) -> Self {
        LayerSpec::Conv2d {
            channels,
            kernel,
            stride,
            padding,
            weight_standardization: true,
        }
    }
}

/// For `skip_serializing_if`: a false flag is left out of the written spec.
fn is_false(b: &bool) -> bool {
    !*b
}

/// The loss applied to the model's output (the logits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossKind {
    /// Softmax cross-entropy over `k ≥ 2` logits: `ℓ = logsumexp(z) − z_y`, computed with the
    /// max shift so it never overflows.
    SoftmaxCrossEntropy,
    /// Binary logistic loss on one logit `z` with label `y ∈ {0, 1}`:
    /// `ℓ = log(1 + e^{−s z})` with `s = 2y − 1`, computed as `softplus(−s z)` stably.
    BinaryLogistic,
    /// Squared loss `ℓ = ½ ‖z − t‖²`, where `t` is the one-hot label for `k ≥ 2` outputs and the
    /// label itself (0 or 1) for one output.
    Squared,
}

/// A sequential model: input shape, layers, loss and L2 coefficient.
///
/// `input_shape` is `[d]` for vectors or `[C, H, W]` for images (flattened channel-major in the
/// data, as [`crate::data::Dataset`] stores them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub input_shape: Vec<usize>,
    pub layers: Vec<LayerSpec>,
    pub loss: LossKind,
    /// L2 regularisation coefficient λ: the penalty is `λ/2 ‖θ‖²` over all parameters. It is
    /// data-independent, so it is not part of per-sample gradients (see
    /// [`crate::model::Model::add_l2_gradient`]).
    #[serde(default)]
    pub l2: f64,
}

/// The names accepted by [`ModelSpec::named`].
pub const NAMED_ARCHITECTURES: &[&str] = &[
    "mnist_cnn",
    "cifar_cnn",
    "resnet20_gn",
    "logreg_mnist",
    "mlp_mnist",
];

impl ModelSpec {
    /// Multinomial logistic regression `d → k` with softmax cross-entropy (`k ≥ 2`).
    pub fn logistic_regression(input_dim: usize, num_classes: usize) -> Self {
        ModelSpec {
            input_shape: vec![input_dim],
            layers: vec![LayerSpec::Dense { units: num_classes }],
            loss: LossKind::SoftmaxCrossEntropy,
            l2: 0.0,
        }
    }

    /// Binary logistic regression `d → 1` with the logistic loss (labels 0/1).
    pub fn binary_logistic_regression(input_dim: usize) -> Self {
        ModelSpec {
            input_shape: vec![input_dim],
            layers: vec![LayerSpec::Dense { units: 1 }],
            loss: LossKind::BinaryLogistic,
            l2: 0.0,
        }
    }

    /// A multilayer perceptron `d → hidden[0] → … → k` with `activation` after each hidden layer
    /// and softmax cross-entropy.
    pub fn mlp(
        input_dim: usize,
        hidden: &[usize],
        activation: Activation,
        num_classes: usize,
    ) -> Self {
        let mut layers = Vec::with_capacity(2 * hidden.len() + 1);
        for &units in hidden {
            layers.push(LayerSpec::Dense { units });
            layers.push(LayerSpec::act(activation));
        }
        layers.push(LayerSpec::Dense { units: num_classes });
        ModelSpec {
            input_shape: vec![input_dim],
            layers,
            loss: LossKind::SoftmaxCrossEntropy,
            l2: 0.0,
        }
    }

    /// The small MNIST CNN of the DP-SGD literature (Papernot et al. 2021; the Opacus and TF
    /// Privacy examples), exactly as in `docs/benchmarks.md`: conv 16@8x8 s2 p3, tanh,
    /// maxpool 2 s1, conv 32@4x4 s2, tanh, maxpool 2 s1, flatten, dense 32, tanh, dense 10.
    /// Input `[1, 28, 28]`; 26,010 parameters.
    pub fn mnist_cnn() -> Self {
        use Activation::Tanh;
        ModelSpec {
            input_shape: vec![1, 28, 28],
            layers: vec![
                LayerSpec::conv(16, 8, 2, 3),
                LayerSpec::act(Tanh),
                LayerSpec::MaxPool {
                    kernel: 2,
                    stride: 1,
                },
                LayerSpec::conv(32, 4, 2, 0),
                LayerSpec::act(Tanh),
                LayerSpec::MaxPool {
                    kernel: 2,
                    stride: 1,
                },
                LayerSpec::Flatten,
                LayerSpec::Dense { units: 32 },
                LayerSpec::act(Tanh),
                LayerSpec::Dense { units: 10 },
            ],
            loss: LossKind::SoftmaxCrossEntropy,
            l2: 0.0,
        }
    }

    /// The tempered-sigmoid CIFAR-10 CNN (Papernot et al. 2021), exactly as in
    /// `docs/benchmarks.md`: 3 × [conv 3x3 p1, tanh, conv 3x3 p1, tanh, maxpool 2] with
    /// 32/64/128 channels, flatten, dense 128, tanh, dense 10. Input `[3, 32, 32]`; 550,570
    /// parameters.
    pub fn cifar_cnn() -> Self {
        use Activation::Tanh;
        let mut layers = Vec::new();
        for channels in [32, 64, 128] {
            layers.push(LayerSpec::conv(channels, 3, 1, 1));
            layers.push(LayerSpec::act(Tanh));
            layers.push(LayerSpec::conv(channels, 3, 1, 1));
            layers.push(LayerSpec::act(Tanh));
            layers.push(LayerSpec::MaxPool {
                kernel: 2,
                stride: 2,
            });
        }
        layers.push(LayerSpec::Flatten);
        layers.push(LayerSpec::Dense { units: 128 });
        layers.push(LayerSpec::act(Tanh));
        layers.push(LayerSpec::Dense { units: 10 });
        ModelSpec {
            input_shape: vec![3, 32, 32],
            layers,
            loss: LossKind::SoftmaxCrossEntropy,
            l2: 0.0,
        }
    }

    /// ResNet-20 for CIFAR-10 (He et al. 2016, §4.2) with group normalisation in place of batch
    /// normalisation: conv 3×3 16 p1, GN, ReLU; 3 stages × 3 basic blocks of 16, 32, 64
    /// channels, each block `[save] conv 3×3, GN, ReLU, conv 3×3, GN [add]` then ReLU, the first
    /// block of stages 2 and 3 with stride 2 and the parameter-free option-A shortcut
    /// (subsampling and zero-padded channels: [`crate::model::layer::residual`]); global average
    /// pooling (avg pool 8 s8), flatten, dense 10. Input `[3, 32, 32]`; 270,410 parameters
    /// (He et al.'s 0.27 M: 267,696 convolution weights, GN's γ and β 1,376, dense 650, and
    /// the 688 biases dpx's convolutions carry, which BN-followed ones usually drop).
    ///
    /// Group normalisation: batch normalisation mixes the examples of a batch, so per-sample
    /// gradients (and DP-SGD's clipping) would not be those of one example; GN normalises each
    /// example on its own (Wu & He 2018). De et al. 2022 (arXiv:2204.13650) use GN with 16
    /// groups on WRN-16-4, whose 64/128/256 channels give 4/8/16 channels per group. ResNet-20 is
    /// 4× narrower, where 16 groups of 16 channels would be instance normalisation (one channel
    /// per group, which Wu & He find worst); each GN here has `min(16, C/4)` groups: 4, 8 and 16
    /// groups of 4 channels, De et al.'s 16 groups where the width allows it.
    ///
    /// Scaled down from the DC-SGD paper (Wei et al., arXiv:2503.22988), which reports CIFAR-10
    /// with ResNet-18/34 (11–21 M parameters, stages of 64–512 channels): dpx trains on a 2-core
    /// CPU, and ResNet-18 has ~40× the parameters (the per-sample norm pass and the noise are
    /// O(P) per example and per step) and over 10× the multiply-adds per 32×32 image. ResNet-20
    /// keeps the residual structure (skips, stride-2 stages, global pooling) at a size a CPU can
    /// train; the depth, widths and the shortcut type are He et al.'s CIFAR ones, not the paper's.
    pub fn resnet20_gn() -> Self {
        use Activation::Relu;
        let gn = |channels: usize| LayerSpec::GroupNorm {
            groups: (channels / 4).clamp(1, 16),
        };
        let mut layers = vec![LayerSpec::conv(16, 3, 1, 1), gn(16), LayerSpec::act(Relu)];
        for (stage, channels) in [16, 32, 64].into_iter().enumerate() {
            for block in 0..3 {
                let stride = if stage > 0 && block == 0 { 2 } else { 1 };
                layers.extend([
                    LayerSpec::ResidualSave,
                    LayerSpec::conv(channels, 3, stride, 1),
                    gn(channels),
                    LayerSpec::act(Relu),
                    LayerSpec::conv(channels, 3, 1, 1),
                    gn(channels),
                    LayerSpec::ResidualAdd,
                    LayerSpec::act(Relu),
                ]);
            }
        }
        layers.extend([
            LayerSpec::AvgPool {
                kernel: 8,
                stride: 8,
            },
            LayerSpec::Flatten,
            LayerSpec::Dense { units: 10 },
        ]);
        ModelSpec {
            input_shape: vec![3, 32, 32],
            layers,
            loss: LossKind::SoftmaxCrossEntropy,
            l2: 0.0,
        }
    }

    /// A named architecture: `mnist_cnn`, `cifar_cnn`, `resnet20_gn`, `logreg_mnist` (784 → 10)
    /// or `mlp_mnist` (784 → 512 → 512 → 10, ReLU). `None` for an unknown name (see
    /// [`NAMED_ARCHITECTURES`]).
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "mnist_cnn" => Some(Self::mnist_cnn()),
            "cifar_cnn" => Some(Self::cifar_cnn()),
            "resnet20_gn" => Some(Self::resnet20_gn()),
            "logreg_mnist" => Some(Self::logistic_regression(784, 10)),
            "mlp_mnist" => Some(Self::mlp(784, &[512, 512], Activation::Relu, 10)),
            _ => None,
        }
    }

    /// The same spec with L2 coefficient `l2`.
    pub fn with_l2(mut self, l2: f64) -> Self {
        self.l2 = l2;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_from_toml() {
        let text = r#"
            input_shape = [1, 28, 28]
            loss = "softmax_cross_entropy"
            l2 = 0.001
            layers = [
                { type = "conv2d", channels = 16, kernel = 8, stride = 2, padding = 3 },
                { type = "activation", function = "tanh" },
                { type = "max_pool", kernel = 2, stride = 1 },
                { type = "flatten" },
                { type = "dense", units = 10 },
            ]
        "#;
        let spec: ModelSpec = toml::from_str(text).unwrap();
        assert_eq!(spec.layers[0], LayerSpec::conv(16, 8, 2, 3));
        assert_eq!(spec.layers[1], LayerSpec::act(Activation::Tanh));
        assert_eq!(spec.l2, 0.001);
        // Weight standardisation is read when given, and a false flag is not written back (so
        // saved specs without it stay byte-identical).
        let ws = text.replace(
            "padding = 3 }",
            "padding = 3, weight_standardization = true }",
        );
        let ws: ModelSpec = toml::from_str(&ws).unwrap();
        assert_eq!(ws.layers[0], LayerSpec::conv_ws(16, 8, 2, 3));
        let json = serde_json::to_string(&spec.layers[0]).unwrap();
        assert!(!json.contains("weight_standardization"), "{json}");
        let json = serde_json::to_string(&ws.layers[0]).unwrap();
        assert!(json.contains("\"weight_standardization\":true"), "{json}");
        let back: LayerSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ws.layers[0]);
        let unknown = text.replace("max_pool", "min_pool");
        let err = toml::from_str::<ModelSpec>(&unknown)
            .unwrap_err()
            .to_string();
        assert!(err.contains("min_pool"), "{err}");
    }
}
