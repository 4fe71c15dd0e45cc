//! From a validated spec to the model: the model room's [`ModelSpec`] for `[model]` on the
//! prepared data's shape, the parameters of `model.init_from`, and the checks that the model fits
//! the data (input width, class count).
//!
//! Must not: load or transform data (that is `prepare`).

use crate::config::kinds::{Activation as SpecActivation, Loss as SpecLoss};
use crate::config::spec::{ExperimentSpec, LayerSpec as SpecLayer, ModelArchitecture};
use crate::model::Model;
use crate::model::spec::{Activation, LayerSpec, LossKind, ModelSpec};

use super::TrainError;
use super::prepare::PreparedData;

fn activation(a: SpecActivation) -> Activation {
    match a {
        SpecActivation::Relu => Activation::Relu,
        SpecActivation::Tanh => Activation::Tanh,
    }
}

/// The model room's spec for `spec.model` on data with this sample shape and class count.
pub fn model_spec(spec: &ExperimentSpec, sample_shape: &[usize], num_classes: usize) -> ModelSpec {
    let input_dim: usize = sample_shape.iter().product();
    let m = match &spec.model.architecture {
        ModelArchitecture::Logistic if num_classes <= 2 => {
            ModelSpec::binary_logistic_regression(input_dim)
        }
        ModelArchitecture::Logistic => ModelSpec::logistic_regression(input_dim, num_classes),
        ModelArchitecture::Mlp {
            hidden,
            activation: a,
        } => ModelSpec::mlp(input_dim, hidden, activation(*a), num_classes.max(2)),
        ModelArchitecture::MnistCnn => ModelSpec::mnist_cnn(),
        ModelArchitecture::CifarCnn => ModelSpec::cifar_cnn(),
        ModelArchitecture::Resnet20Gn => ModelSpec::resnet20_gn(),
        ModelArchitecture::Cnn { layers } => {
            let mut out = Vec::with_capacity(layers.len() + 2);
            let mut spatial = sample_shape.len() == 3;
            for l in layers {
                match *l {
                    SpecLayer::Conv2d {
                        out_channels,
                        kernel_size,
                        stride,
                        padding,
                        weight_standardization,
                    } => {
                        out.push(LayerSpec::Conv2d {
                            channels: out_channels,
                            kernel: kernel_size,
                            stride,
                            padding,
                            weight_standardization,
                        });
                        spatial = true;
                    }
                    SpecLayer::MaxPool2d {
                        kernel_size,
                        stride,
                    } => out.push(LayerSpec::MaxPool {
                        kernel: kernel_size,
                        stride,
                    }),
                    SpecLayer::AvgPool2d {
                        kernel_size,
                        stride,
                    } => out.push(LayerSpec::AvgPool {
                        kernel: kernel_size,
                        stride,
                    }),
                    SpecLayer::Flatten => {
                        out.push(LayerSpec::Flatten);
                        spatial = false;
                    }
                    SpecLayer::Dense { out_features } => {
                        // A dense layer after a spatial layer flattens its input (docs/config.md).
                        if spatial {
                            out.push(LayerSpec::Flatten);
                            spatial = false;
                        }
                        out.push(LayerSpec::Dense {
                            units: out_features,
                        });
                    }
                    SpecLayer::GroupNorm { groups } => out.push(LayerSpec::GroupNorm { groups }),
                    SpecLayer::Relu => out.push(LayerSpec::act(Activation::Relu)),
                    SpecLayer::Tanh => out.push(LayerSpec::act(Activation::Tanh)),
                    SpecLayer::ResidualSave => out.push(LayerSpec::ResidualSave),
                    SpecLayer::ResidualAdd => out.push(LayerSpec::ResidualAdd),
                }
            }
            if spatial {
                out.push(LayerSpec::Flatten);
            }
            out.push(LayerSpec::Dense {
                units: num_classes.max(2),
            });
            ModelSpec {
                input_shape: sample_shape.to_vec(),
                layers: out,
                loss: LossKind::SoftmaxCrossEntropy,
                l2: 0.0,
            }
        }
    };
    let m = match spec.model.loss {
        SpecLoss::CrossEntropy => m,
        SpecLoss::Squared => ModelSpec {
            loss: LossKind::Squared,
            ..m
        },
    };
    m.with_l2(spec.model.l2)
}

/// The parameters of `model.init_from` for `model`, shape-checked (`None` without it).
pub fn load_init_from(
    spec: &ExperimentSpec,
    model: &Model,
) -> Result<Option<ndarray::Array1<f32>>, TrainError> {
    let Some(path) = &spec.model.init_from else {
        return Ok(None);
    };
    model
        .load_safetensors(path)
        .map(Some)
        .map_err(|source| TrainError::InitFrom {
            path: spec.source.clone(),
            source: Box::new(source),
        })
}

/// Build the model for `spec` and check it fits the data.
pub fn build_model(spec: &ExperimentSpec, data: &PreparedData) -> Result<Model, TrainError> {
    let path = spec.source.clone();
    let num_classes = data.train.num_classes.max(data.test.num_classes);
    let ms = model_spec(spec, &data.train.sample_shape, num_classes);
    let model = ms
        .build()
        .and_then(|m| m.with_frozen(&spec.model.freeze))
        .map_err(|source| TrainError::Model {
            path: path.clone(),
            source,
        })?;
    model
        .check_input(data.train.num_features())
        .map_err(|source| TrainError::Model {
            path: path.clone(),
            source,
        })?;
    if model.num_classes() < num_classes {
        return Err(TrainError::ClassMismatch {
            path,
            model_classes: model.num_classes(),
            data_classes: num_classes,
        });
    }
    Ok(model)
}
