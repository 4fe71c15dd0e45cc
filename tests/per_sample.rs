//! Per-sample gradients against two independent oracles, for every layer type and the named
//! architectures: a batch-of-1 loop of the non-private gradient (Opacus's
//! `compute_microbatch_grad_sample` idea) and central finite differences of the loss. Norms,
//! group norms and weighted sums are checked against the materialised `[B, P]` matrix. The
//! harness itself is `support/per_sample_harness.rs` (shared with `tests/residual.rs`).

use dpx::grad::{GradError, PerSampleGradients};
use dpx::model::{Activation, LayerSpec, LossKind, ModelError, ModelSpec};
use ndarray::{Array1, Array2, s};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[path = "support/per_sample_harness.rs"]
mod harness;
use harness::{
    assert_close, assert_thread_independent, check_model, check_model_with_step, image_spec,
    random_batch,
};

#[test]
fn named_architectures_have_the_reference_parameter_counts() {
    // docs/benchmarks.md, "params" column.
    for (name, params) in [
        ("logreg_mnist", 7_850),
        ("mlp_mnist", 669_706),
        ("mnist_cnn", 26_010),
        ("cifar_cnn", 550_570),
        ("resnet20_gn", 270_410),
    ] {
        let model = ModelSpec::named(name).unwrap().build().unwrap();
        assert_eq!(model.num_params(), params, "{name}");
    }
    assert!(ModelSpec::named("resnet").is_none());
}

#[test]
fn logistic_regression_multinomial_and_binary() {
    check_model(ModelSpec::logistic_regression(7, 4), 5, 10);
    check_model(ModelSpec::binary_logistic_regression(6), 5, 11);
}

#[test]
fn mlp_with_each_activation_and_squared_loss() {
    check_model(ModelSpec::mlp(9, &[8, 6], Activation::Relu, 3), 4, 20);
    check_model(ModelSpec::mlp(9, &[8], Activation::Tanh, 3), 4, 21);
    let mut spec = ModelSpec::mlp(5, &[4], Activation::Sigmoid, 3);
    spec.loss = LossKind::Squared;
    check_model(spec, 4, 22);
    let mut spec = ModelSpec::mlp(5, &[4], Activation::Tanh, 1);
    spec.loss = LossKind::Squared;
    check_model(spec, 4, 23);
}

#[test]
fn conv_with_stride_padding_and_channels() {
    use LayerSpec::{Dense, Flatten};
    check_model(
        image_spec(
            [3, 7, 6],
            vec![
                LayerSpec::conv(4, 3, 2, 1),
                act(Activation::Tanh),
                Flatten,
                Dense { units: 3 },
            ],
            LossKind::SoftmaxCrossEntropy,
        ),
        3,
        30,
    );
    check_model(
        image_spec(
            [2, 5, 5],
            vec![
                LayerSpec::conv(3, 2, 1, 0),
                act(Activation::Sigmoid),
                LayerSpec::conv(2, 3, 1, 1),
                Flatten,
                Dense { units: 2 },
            ],
            LossKind::SoftmaxCrossEntropy,
        ),
        3,
        31,
    );
}

#[test]
fn max_and_average_pooling() {
    use LayerSpec::{AvgPool, Dense, Flatten, MaxPool};
    check_model_with_step(
        image_spec(
            [2, 8, 8],
            vec![
                LayerSpec::conv(3, 3, 1, 1),
                act(Activation::Relu),
                MaxPool {
                    kernel: 2,
                    stride: 2,
                },
                LayerSpec::conv(2, 2, 1, 0),
                MaxPool {
                    kernel: 2,
                    stride: 1,
                },
                Flatten,
                Dense { units: 3 },
            ],
            LossKind::SoftmaxCrossEntropy,
        ),
        3,
        40,
        1.0 / 4096.0,
    );
    check_model(
        image_spec(
            [1, 6, 6],
            vec![
                AvgPool {
                    kernel: 2,
                    stride: 2,
                },
                LayerSpec::conv(2, 2, 1, 0),
                act(Activation::Tanh),
                AvgPool {
                    kernel: 2,
                    stride: 1,
                },
                Flatten,
                Dense { units: 1 },
            ],
            LossKind::BinaryLogistic,
        ),
        3,
        41,
    );
}

fn act(function: Activation) -> LayerSpec {
    LayerSpec::act(function)
}

#[test]
fn mnist_cnn_per_sample_gradients() {
    check_model(ModelSpec::mnist_cnn(), 3, 50);
}

#[test]
fn cifar_cnn_per_sample_gradients() {
    check_model(ModelSpec::cifar_cnn(), 2, 60);
}

#[test]
fn results_do_not_depend_on_thread_count() {
    assert_thread_independent(&ModelSpec::cifar_cnn(), 6);
}

/// One of each layer kind the registry builds (every activation function included).
fn every_layer() -> Vec<LayerSpec> {
    vec![
        LayerSpec::Dense { units: 4 },
        LayerSpec::conv(3, 3, 2, 1),
        LayerSpec::conv(2, 3, 1, 1),
        // Weight standardisation: direct (stride 2) and Winograd (3x3 stride 1 padding 1)
        // forward products.
        LayerSpec::conv_ws(3, 3, 2, 1),
        LayerSpec::conv_ws(2, 3, 1, 1),
        LayerSpec::MaxPool {
            kernel: 2,
            stride: 2,
        },
        LayerSpec::AvgPool {
            kernel: 3,
            stride: 1,
        },
        LayerSpec::Flatten,
        LayerSpec::GroupNorm { groups: 3 },
        LayerSpec::GroupNorm { groups: 1 },
        act(Activation::Relu),
        act(Activation::Tanh),
        act(Activation::Sigmoid),
        LayerSpec::ResidualSave,
        LayerSpec::ResidualAdd,
    ]
}

/// A small model with `layer` in its middle, between a trainable layer below (so the layer's
/// input gradient is used) and a dense layer above, and the finite-difference step it needs
/// (piecewise-linear layers need one small enough not to cross a kink: max pooling straight after
/// a convolution crossed one at 1/4096 with seed 73, where two entries of a window were within
/// the perturbation of each other). The match is exhaustive:
/// a new `LayerSpec` variant does not compile until it has a case here, so every layer runs the
/// same harness (batch-of-1 loop, finite differences, both convolution norm methods, thread
/// counts).
fn layer_case(layer: LayerSpec) -> (ModelSpec, f32) {
    use LayerSpec::{Dense, Flatten};
    let image =
        |layers: Vec<LayerSpec>| image_spec([2, 6, 6], layers, LossKind::SoftmaxCrossEntropy);
    let below = LayerSpec::conv(3, 3, 1, 1);
    match layer {
        LayerSpec::Dense { .. } => (
            ModelSpec {
                input_shape: vec![6],
                layers: vec![
                    Dense { units: 5 },
                    act(Activation::Tanh),
                    layer,
                    act(Activation::Tanh),
                    Dense { units: 3 },
                ],
                loss: LossKind::SoftmaxCrossEntropy,
                l2: 0.0,
            },
            1.0 / 64.0,
        ),
        LayerSpec::Conv2d { .. } | LayerSpec::AvgPool { .. } | LayerSpec::GroupNorm { .. } => (
            image(vec![
                below,
                act(Activation::Tanh),
                layer,
                act(Activation::Tanh),
                Flatten,
                Dense { units: 3 },
            ]),
            1.0 / 64.0,
        ),
        LayerSpec::MaxPool { .. } => (
            image(vec![below, layer, Flatten, Dense { units: 3 }]),
            1.0 / 16384.0,
        ),
        LayerSpec::Flatten => (
            image(vec![
                below,
                act(Activation::Tanh),
                layer,
                Dense { units: 3 },
            ]),
            1.0 / 64.0,
        ),
        // A residual block (tests/residual.rs has more): on images, a channel-changing stride-2
        // block (3 → 4 channels, 6×6 → 3×3, option A); on vectors, a block zero-padding 5 → 7
        // features with an identity block nested in it.
        LayerSpec::ResidualSave => (
            image(vec![
                below,
                act(Activation::Tanh),
                layer,
                LayerSpec::conv(4, 3, 2, 1),
                LayerSpec::GroupNorm { groups: 2 },
                act(Activation::Tanh),
                LayerSpec::conv(4, 3, 1, 1),
                LayerSpec::ResidualAdd,
                act(Activation::Tanh),
                Flatten,
                Dense { units: 3 },
            ]),
            1.0 / 64.0,
        ),
        LayerSpec::ResidualAdd => (
            ModelSpec {
                input_shape: vec![6],
                layers: vec![
                    Dense { units: 5 },
                    act(Activation::Tanh),
                    LayerSpec::ResidualSave,
                    Dense { units: 5 },
                    act(Activation::Tanh),
                    LayerSpec::ResidualSave,
                    Dense { units: 5 },
                    act(Activation::Tanh),
                    layer,
                    Dense { units: 7 },
                    layer,
                    act(Activation::Tanh),
                    Dense { units: 3 },
                ],
                loss: LossKind::SoftmaxCrossEntropy,
                l2: 0.0,
            },
            1.0 / 64.0,
        ),
        LayerSpec::Activation { function } => (
            ModelSpec {
                input_shape: vec![7],
                layers: vec![Dense { units: 6 }, layer, Dense { units: 3 }],
                loss: LossKind::SoftmaxCrossEntropy,
                l2: 0.0,
            },
            if function == Activation::Relu {
                1.0 / 4096.0
            } else {
                1.0 / 64.0
            },
        ),
    }
}

#[test]
fn group_norm_on_vectors_and_its_parameters() {
    use LayerSpec::{Dense, GroupNorm};
    for groups in [1, 2, 6] {
        let spec = ModelSpec {
            input_shape: vec![5],
            layers: vec![
                Dense { units: 6 },
                GroupNorm { groups },
                act(Activation::Tanh),
                Dense { units: 3 },
            ],
            loss: LossKind::SoftmaxCrossEntropy,
            l2: 0.0,
        };
        check_model(spec.clone(), 4, 90 + groups as u64);
        assert_thread_independent(&spec, 5);
    }
    // A group count that does not divide the channels is refused, naming the layer; γ and β
    // add 2C parameters, initialised to 1 and 0 (PyTorch's GroupNorm).
    let spec = ModelSpec {
        input_shape: vec![4],
        layers: vec![GroupNorm { groups: 2 }, Dense { units: 2 }],
        loss: LossKind::SoftmaxCrossEntropy,
        l2: 0.0,
    };
    let model = spec.build().unwrap();
    assert!(matches!(
        (ModelSpec {
            layers: vec![GroupNorm { groups: 3 }, Dense { units: 2 }],
            ..spec.clone()
        })
        .build(),
        Err(ModelError::InvalidLayer { index: 0, .. })
    ));
    assert_eq!(model.num_params(), 4 + 4 + 4 * 2 + 2);
    let init = model.init_params(0);
    assert_eq!(
        init.slice(s![..8]).to_vec(),
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(model.groups()[0].0, "0.weight");
    assert_eq!(model.groups()[1].0, "0.bias");
}

#[test]
fn every_layer_passes_the_same_harness() {
    for (k, layer) in every_layer().into_iter().enumerate() {
        eprintln!("layer case {k}: {layer:?}");
        let (spec, h) = layer_case(layer);
        for seed in [70u64, 170] {
            check_model_with_step(spec.clone(), 4, seed + k as u64, h);
        }
        assert_thread_independent(&spec, 5);
    }
}

/// Ŵ of a raw weight stored as rows of `fan_in` (eq. 2 of Qiao et al. 2019, in f64, apart from
/// the library).
fn standardise_rows(w: &[f32], fan_in: usize) -> Vec<f32> {
    w.chunks_exact(fan_in)
        .flat_map(|row| {
            let n = fan_in as f64;
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
            row.iter()
                .map(move |&v| ((v as f64 - mean) / (var + 1e-5).sqrt()) as f32)
        })
        .collect()
}

#[test]
fn weight_standardised_conv_is_a_plain_conv_with_standardised_weights() {
    use LayerSpec::{Dense, Flatten};
    // Winograd (3x3 s1 p1) and direct products, as first and as middle layer.
    for (layers, fan_ins) in [
        (
            vec![
                LayerSpec::conv_ws(4, 3, 1, 1),
                act(Activation::Tanh),
                Flatten,
                Dense { units: 3 },
            ],
            vec![(0, 18)],
        ),
        (
            vec![
                LayerSpec::conv(3, 3, 1, 1),
                act(Activation::Tanh),
                LayerSpec::conv_ws(5, 2, 2, 0),
                act(Activation::Tanh),
                Flatten,
                Dense { units: 3 },
            ],
            vec![(2, 12)],
        ),
    ] {
        let ws_spec = image_spec([2, 6, 6], layers.clone(), LossKind::SoftmaxCrossEntropy);
        let plain_layers: Vec<LayerSpec> = layers
            .iter()
            .map(|l| match *l {
                LayerSpec::Conv2d {
                    channels,
                    kernel,
                    stride,
                    padding,
                    ..
                } => LayerSpec::conv(channels, kernel, stride, padding),
                other => other,
            })
            .collect();
        let plain_spec = image_spec([2, 6, 6], plain_layers, LossKind::SoftmaxCrossEntropy);
        let ws = ws_spec.build().unwrap();
        let plain = plain_spec.build().unwrap();
        assert_eq!(ws.num_params(), plain.num_params());
        // Weights away from the initialisation.
        let mut rng = ChaCha8Rng::seed_from_u64(80);
        let params = ws
            .init_params(80)
            .mapv(|v| v + 0.3 * rng.random_range(-1.0..1.0f32));
        let mut standardised = params.clone();
        for &(layer, fan_in) in &fan_ins {
            let name = format!("{layer}.weight");
            let range = ws
                .groups()
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, r)| r.clone())
                .unwrap();
            let raw = params.slice(s![range.clone()]).to_vec();
            let hat = standardise_rows(&raw, fan_in);
            standardised.slice_mut(s![range]).assign(&Array1::from(hat));
        }
        let (x, _) = random_batch(&ws, 5, 81);
        let got = ws.forward(params.view(), x.view()).unwrap();
        let want = plain.forward(standardised.view(), x.view()).unwrap();
        let raw = plain.forward(params.view(), x.view()).unwrap();
        let (got, want, raw): (Vec<f64>, Vec<f64>, Vec<f64>) = (
            got.iter().map(|&v| v as f64).collect(),
            want.iter().map(|&v| v as f64).collect(),
            raw.iter().map(|&v| v as f64).collect(),
        );
        assert_close(&got, &want, 1e-5, 1e-6, "WS forward vs plain forward of Ŵ");
        // The standardisation does something: the raw weights give other logits.
        let moved = got
            .iter()
            .zip(&raw)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(moved > 1e-2, "{moved}");
    }
}

#[test]
fn weight_standardisation_needs_a_fan_in_of_two() {
    // 1 input channel, 1x1 kernel: every Ŵ would be 0.
    let spec = image_spec(
        [1, 4, 4],
        vec![
            LayerSpec::conv_ws(2, 1, 1, 0),
            LayerSpec::Flatten,
            LayerSpec::Dense { units: 2 },
        ],
        LossKind::SoftmaxCrossEntropy,
    );
    let err = spec.build().unwrap_err();
    assert!(
        matches!(err, ModelError::InvalidLayer { index: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("fan-in"), "{err}");
    // The same layer on 2 input channels builds (its W-gradients are of order ε, too small for
    // the ghost cross-check of the shared harness: see model/layer/weight_std.rs).
    let ok = image_spec(
        [2, 4, 4],
        vec![
            LayerSpec::conv_ws(2, 1, 1, 0),
            LayerSpec::Flatten,
            LayerSpec::Dense { units: 2 },
        ],
        LossKind::SoftmaxCrossEntropy,
    );
    assert!(ok.build().is_ok());
}

#[test]
fn materialize_is_refused_over_the_memory_limit() {
    let model = ModelSpec::named("mlp_mnist")
        .unwrap()
        .build()
        .unwrap()
        .with_materialize_limit(1 << 20);
    let params = model.init_params(0);
    let (x, labels) = random_batch(&model, 4, 0);
    let grads = model.per_sample(params.view(), x.view(), &labels).unwrap();
    match grads.materialize() {
        Err(GradError::MemoryLimit {
            batch_size: 4,
            num_params: 669_706,
            max_batch_size: 0,
            ..
        }) => {}
        other => panic!(
            "expected a memory-limit refusal, got {:?}",
            other.map(|m| m.dim())
        ),
    }
    // Norms and weighted sums never materialise, so they still work.
    assert_eq!(grads.norms().len(), 4);
}

#[test]
fn empty_batch_gives_zero_sums() {
    let model = ModelSpec::mnist_cnn().build().unwrap();
    let params = model.init_params(0);
    let x = Array2::<f32>::zeros((0, 784));
    let grads = model.per_sample(params.view(), x.view(), &[]).unwrap();
    assert_eq!(grads.norms().len(), 0);
    let sum = grads.weighted_sum(&Array1::zeros(0));
    assert!(sum.iter().all(|&v| v == 0.0) && sum.len() == 26_010);
}

#[test]
fn input_size_and_label_errors_are_clear() {
    let model = ModelSpec::mnist_cnn().build().unwrap();
    let params = model.init_params(0);
    let x = Array2::<f32>::zeros((2, 3072));
    let err = model
        .per_sample(params.view(), x.view(), &[0, 1])
        .err()
        .unwrap();
    assert!(matches!(
        err,
        ModelError::InputSize {
            expected: 784,
            found: 3072,
            ..
        }
    ));
    assert!(
        err.to_string().contains("expects 784 input features"),
        "{err}"
    );
    let x = Array2::<f32>::zeros((2, 784));
    let err = model
        .per_sample(params.view(), x.view(), &[0, 10])
        .err()
        .unwrap();
    assert!(matches!(
        err,
        ModelError::LabelOutOfRange {
            index: 1,
            label: 10,
            num_classes: 10
        }
    ));
}

#[test]
fn invalid_specs_are_rejected_with_the_layer_named() {
    let dense_on_image = image_spec(
        [1, 4, 4],
        vec![LayerSpec::Dense { units: 2 }],
        LossKind::SoftmaxCrossEntropy,
    );
    let err = dense_on_image.build().unwrap_err();
    assert!(
        matches!(err, ModelError::InvalidLayer { index: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("flatten"), "{err}");
    let big_kernel = image_spec(
        [1, 4, 4],
        vec![
            LayerSpec::conv(2, 7, 1, 0),
            LayerSpec::Flatten,
            LayerSpec::Dense { units: 2 },
        ],
        LossKind::SoftmaxCrossEntropy,
    );
    assert!(matches!(
        big_kernel.build().unwrap_err(),
        ModelError::InvalidLayer { index: 0, .. }
    ));
    let huge = ModelSpec::mlp(1 << 20, &[1 << 20], Activation::Relu, 10);
    assert!(matches!(
        huge.build().unwrap_err(),
        ModelError::InvalidLayer { index: 0, .. }
    ));
    let mut binary_with_two = ModelSpec::logistic_regression(3, 2);
    binary_with_two.loss = LossKind::BinaryLogistic;
    assert!(matches!(
        binary_with_two.build().unwrap_err(),
        ModelError::LossMismatch { outputs: 2, .. }
    ));
    let bad_shape = ModelSpec {
        input_shape: vec![28, 28],
        ..ModelSpec::logistic_regression(3, 2)
    };
    assert!(matches!(
        bad_shape.build().unwrap_err(),
        ModelError::InvalidInputShape { .. }
    ));
}

#[test]
fn initialisation_is_seeded_and_within_pytorch_bounds() {
    let model = ModelSpec::mnist_cnn().build().unwrap();
    let a = model.init_params(7);
    assert_eq!(a, model.init_params(7));
    assert_ne!(a, model.init_params(8));
    // PyTorch default: U(−1/√fan_in, 1/√fan_in); fan_in of the first conv is 1·8·8 = 64 → 0.125;
    // of the last dense 32 → 0.1768.
    let groups = model.groups().to_vec();
    let max_abs =
        |r: std::ops::Range<usize>| a.slice(s![r]).iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(max_abs(groups[0].1.clone()) <= 0.125 && max_abs(groups[0].1.clone()) > 0.1);
    let last = groups.last().unwrap().1.clone();
    assert!(max_abs(last) <= 1.0 / 32f32.sqrt());
}

#[test]
fn l2_penalty_and_gradient() {
    let model = ModelSpec::logistic_regression(3, 2)
        .with_l2(0.5)
        .build()
        .unwrap();
    let params = Array1::from(vec![1.0f32, -2.0, 0.0, 0.5, 1.0, 1.0, 2.0, 0.0]);
    // ½·0.5·(1 + 4 + 0 + 0.25 + 1 + 1 + 4 + 0) = 2.8125.
    assert!((model.l2_penalty(params.view()) - 2.8125).abs() < 1e-12);
    let mut g = Array1::zeros(8);
    model.add_l2_gradient(params.view(), &mut g);
    assert_eq!(g[1], -1.0);
}

#[test]
fn datasets_that_do_not_fit_are_refused() {
    let model = ModelSpec::logistic_regression(4, 3).build().unwrap();
    let data = |d: usize, classes: usize| dpx::data::Dataset {
        features: Array2::zeros((2, d)),
        labels: vec![0, 1],
        sample_shape: vec![d],
        num_classes: classes,
    };
    assert!(model.check_dataset(&data(4, 3)).is_ok());
    assert!(matches!(
        model.check_dataset(&data(5, 3)),
        Err(ModelError::InputSize {
            expected: 4,
            found: 5,
            ..
        })
    ));
    assert!(matches!(
        model.check_dataset(&data(4, 10)),
        Err(ModelError::ClassCount {
            dataset: 10,
            model: 3
        })
    ));
}
