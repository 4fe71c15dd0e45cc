//! Residual networks (`ResidualSave` / `ResidualAdd`, He et al. 2016 with option-A shortcuts):
//! the shared per-sample harness (`support/per_sample_harness.rs`: batch-of-1 loop, finite
//! differences, shards, 1/2/3 threads) on channel-changing stride-2 blocks, nested blocks, two
//! blocks from one point and frozen layers; `resnet20_gn`'s size and output; and the build-time
//! refusals of blocks that cannot be matched.

use dpx::grad::PerSampleGradients;
use dpx::model::{Activation, LayerSpec, LossKind, ModelError, ModelSpec};
use ndarray::Array2;

#[path = "support/per_sample_harness.rs"]
mod harness;
use harness::{
    assert_thread_independent, check_built, check_model, check_model_with_step, image_spec,
    random_batch,
};

use LayerSpec::{Dense, Flatten, GroupNorm, ResidualAdd, ResidualSave};

fn tanh() -> LayerSpec {
    LayerSpec::act(Activation::Tanh)
}

/// A small residual CNN on `[2, 8, 8]`: a stem, a channel-changing stride-2 block (3 → 5
/// channels, 8×8 → 4×4) with an identity block nested inside it, then an identity block, with
/// `act` after each add.
fn small_resnet(act: LayerSpec) -> ModelSpec {
    image_spec(
        [2, 8, 8],
        vec![
            LayerSpec::conv(3, 3, 1, 1), // 0
            act,
            ResidualSave, // 2: outer block from [3, 8, 8]
            LayerSpec::conv(5, 3, 2, 1),
            GroupNorm { groups: 1 },
            act,
            ResidualSave, // 6: nested identity block from [5, 4, 4]
            LayerSpec::conv(5, 3, 1, 1),
            // Not 5 groups: a bias before instance normalisation has a zero gradient, whose
            // rounding noise no relative tolerance can compare.
            GroupNorm { groups: 1 },
            ResidualAdd, // 9: closes 6
            act,
            LayerSpec::conv(5, 3, 1, 1), // 11
            ResidualAdd,                 // 12: closes 2 (option A: stride 2, 3 → 5 channels)
            act,
            ResidualSave, // 14
            LayerSpec::conv(5, 3, 1, 1),
            act,
            ResidualAdd, // 17
            LayerSpec::AvgPool {
                kernel: 2,
                stride: 2,
            },
            Flatten,
            Dense { units: 3 },
        ],
        LossKind::SoftmaxCrossEntropy,
    )
}

#[test]
fn residual_cnn_per_sample_gradients() {
    check_model(small_resnet(tanh()), 4, 300);
    check_model(small_resnet(tanh()), 3, 301);
    // ReLU after the adds (as in ResNets): a small step so finite differences cross no kink.
    check_model_with_step(
        small_resnet(LayerSpec::act(Activation::Relu)),
        3,
        302,
        1.0 / 4096.0,
    );
    assert_thread_independent(&small_resnet(tanh()), 5);
}

#[test]
fn residual_blocks_on_vectors_nested_and_from_one_point() {
    // Two blocks opened at the same activation (both read it), the inner one zero-padding
    // 5 → 7 features and the outer 5 → 8, and an empty block (y = 2x).
    let spec = ModelSpec {
        input_shape: vec![6],
        layers: vec![
            Dense { units: 5 },
            tanh(),
            ResidualSave,
            ResidualSave,
            Dense { units: 7 },
            tanh(),
            ResidualAdd,
            Dense { units: 8 },
            ResidualAdd,
            tanh(),
            ResidualSave,
            ResidualAdd,
            Dense { units: 3 },
        ],
        loss: LossKind::SoftmaxCrossEntropy,
        l2: 0.0,
    };
    check_model(spec.clone(), 4, 310);
    assert_thread_independent(&spec, 5);
    // A block opened at the model's input (the borrowed batch is the skip source).
    let at_input = ModelSpec {
        input_shape: vec![4],
        layers: vec![
            ResidualSave,
            Dense { units: 6 },
            tanh(),
            ResidualAdd,
            Dense { units: 2 },
        ],
        loss: LossKind::SoftmaxCrossEntropy,
        l2: 0.0,
    };
    check_model(at_input, 3, 311);
}

#[test]
fn frozen_layers_inside_and_below_residual_blocks() {
    let spec = small_resnet(tanh());
    // Frozen stem: the first trained layer sits inside the outer block, whose source is below
    // it (the skip's gradient is then not needed); frozen convolutions inside blocks too.
    for frozen in [vec!["0"], vec!["0", "3"], vec!["7", "15"]] {
        let frozen: Vec<String> = frozen.into_iter().map(String::from).collect();
        let model = spec.build().unwrap().with_frozen(&frozen).unwrap();
        check_built(&model, 3, 320, 1.0 / 64.0);
        let params = model.init_params(3);
        let (x, labels) = random_batch(&model, 3, 4);
        let g = model.per_sample(params.view(), x.view(), &labels).unwrap();
        let m = g.materialize().unwrap();
        for r in model.frozen_ranges() {
            assert!(m.slice(ndarray::s![.., r]).iter().all(|&v| v == 0.0));
        }
    }
}

#[test]
fn forward_and_training_passes_agree() {
    // The forward pass that keeps nothing (evaluation: sources dropped after their last add)
    // and the training pass (everything kept) give the same losses.
    let model = small_resnet(tanh()).build().unwrap();
    let params = model.init_params(9);
    let (x, labels) = random_batch(&model, 6, 10);
    let g = model.per_sample(params.view(), x.view(), &labels).unwrap();
    let (mean, _) = model.evaluate(params.view(), x.view(), &labels).unwrap();
    let train_mean = g.losses().sum() / 6.0;
    assert!(
        (mean - train_mean).abs() <= 1e-6 * mean.abs().max(1.0),
        "{mean} vs {train_mean}"
    );
}

#[test]
fn resnet20_gn_size_and_output() {
    let spec = ModelSpec::named("resnet20_gn").unwrap();
    assert_eq!(spec, ModelSpec::resnet20_gn());
    let model = spec.build().unwrap();
    assert_eq!(model.num_params(), 270_410);
    assert_eq!(model.input_size(), 3 * 32 * 32);
    assert_eq!(model.output_size(), 10);
    // 19 convolutions, 19 group norms and the dense layer, each a weight and a bias.
    assert_eq!(model.groups().len(), 2 * (19 + 19 + 1));
    let params = model.init_params(1);
    let x = Array2::from_shape_fn((3, model.input_size()), |(i, j)| {
        ((i * 31 + j * 7) % 17) as f32 / 17.0
    });
    let logits = model.forward(params.view(), x.view()).unwrap();
    assert_eq!(logits.dim(), (3, 10));
    assert!(logits.iter().all(|v| v.is_finite()));
    let g = model
        .per_sample(params.view(), x.view(), &[1, 2, 3])
        .unwrap();
    assert_eq!(g.norms().len(), 3);
    assert!(g.norms().iter().all(|n| n.is_finite() && *n > 0.0));
}

#[test]
fn resnet20_gn_is_thread_independent() {
    assert_thread_independent(&ModelSpec::resnet20_gn(), 2);
}

/// The build error of `layers` on `input`, as the user sees it.
fn build_error(input: &[usize], layers: Vec<LayerSpec>) -> String {
    let e = ModelSpec {
        input_shape: input.to_vec(),
        layers,
        loss: LossKind::SoftmaxCrossEntropy,
        l2: 0.0,
    }
    .build()
    .unwrap_err();
    assert!(matches!(e, ModelError::InvalidLayer { .. }), "{e:?}");
    let text = e.to_string();
    assert!(!text.contains('\n'), "{text}");
    text
}

#[test]
fn blocks_that_cannot_be_matched_are_refused_at_build_time() {
    let conv = LayerSpec::conv;
    // An add with no open block.
    let e = build_error(
        &[4],
        vec![Dense { units: 4 }, ResidualAdd, Dense { units: 2 }],
    );
    assert!(
        e.contains("model layer 1") && e.contains("without an open residual_save"),
        "{e}"
    );
    // A save never closed (the inner one closes; the outer is named).
    let e = build_error(
        &[4],
        vec![
            ResidualSave,
            ResidualSave,
            Dense { units: 4 },
            ResidualAdd,
            Dense { units: 2 },
        ],
    );
    assert!(
        e.contains("model layer 0") && e.contains("no residual_add closes"),
        "{e}"
    );
    // Channels that shrink (option A only zero-pads).
    let e = build_error(
        &[4, 6, 6],
        vec![
            ResidualSave,
            conv(2, 3, 1, 1),
            ResidualAdd,
            Flatten,
            Dense { units: 2 },
        ],
    );
    assert!(
        e.contains("model layer 2") && e.contains("shrinks 4 channels to 2"),
        "{e}"
    );
    // A spatial change that is no integer stride: 7x7 → 4x4 (stride 2, padding 1).
    let e = build_error(
        &[2, 7, 7],
        vec![
            ResidualSave,
            conv(4, 3, 2, 1),
            ResidualAdd,
            Flatten,
            Dense { units: 2 },
        ],
    );
    assert!(e.contains("7x7 positions to 4x4"), "{e}");
    // An image block ending in a vector.
    let e = build_error(
        &[2, 4, 4],
        vec![
            ResidualSave,
            Flatten,
            Dense { units: 40 },
            ResidualAdd,
            Dense { units: 2 },
        ],
    );
    assert!(e.contains("both ends"), "{e}");
    // Features that shrink on vectors.
    let e = build_error(&[6], vec![ResidualSave, Dense { units: 3 }, ResidualAdd]);
    assert!(e.contains("shrinks 6 features to 3"), "{e}");
}

#[test]
fn residual_entries_round_trip_through_json_and_toml() {
    let spec = ModelSpec::resnet20_gn();
    let json = serde_json::to_string(&spec).unwrap();
    assert!(json.contains(r#"{"type":"residual_save"}"#), "{json}");
    assert!(json.contains(r#"{"type":"residual_add"}"#), "{json}");
    let back: ModelSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(back, spec);
    let toml_spec: ModelSpec = toml::from_str(
        r#"
        input_shape = [4]
        loss = "softmax_cross_entropy"
        layers = [{ type = "residual_save" }, { type = "dense", units = 4 }, { type = "residual_add" }]
        "#,
    )
    .unwrap();
    assert_eq!(
        toml_spec.layers,
        vec![ResidualSave, Dense { units: 4 }, ResidualAdd]
    );
}

/// A private run of a residual MLP written in TOML (`residual_save` / `residual_add`) succeeds;
/// the same config with the save removed, or a block that shrinks its features, exits 2 with a
/// one-line error naming the entry.
#[test]
fn residual_layers_from_toml_train_or_are_refused() {
    let dir = std::env::temp_dir().join(format!("dpx-residual-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let layer = |kind: &str, extra: &str| format!("[[model.layers]]\nkind = \"{kind}\"\n{extra}\n");
    let config = |layers: &str| {
        format!(
            "[experiment]\nname = \"residual\"\nseeds = [0]\n\n[data]\ndataset = \"gaussian_mixture\"\n\n\
             [data.synthetic]\nn_train = 600\nn_test = 200\nn_features = 8\nn_classes = 3\nseed = 3\n\n\
             [model]\narchitecture = \"cnn\"\n\n{layers}\n[train]\nepochs = 2\nexpected_batch_size = 100\n\
             learning_rate = 0.5\n\n[clip]\nclip_norm = 1.0\n\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n"
        )
    };
    let run = |name: &str, layers: String| {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, config(&layers)).unwrap();
        assert_cmd::Command::cargo_bin("dpx")
            .unwrap()
            .args(["run", "--quiet", "--threads", "1", "--out"])
            .arg(dir.join(name))
            .arg(&path)
            .output()
            .unwrap()
    };
    let block = |width: usize, save: bool| {
        [
            layer("dense", "out_features = 8"),
            if save {
                layer("residual_save", "")
            } else {
                String::new()
            },
            layer("dense", &format!("out_features = {width}")),
            layer("tanh", ""),
            layer("residual_add", ""),
            layer("tanh", ""),
        ]
        .concat()
    };
    let ok = run("ok", block(12, true));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for (name, layers, want) in [
        (
            "unmatched",
            block(12, false),
            "without an open residual_save",
        ),
        ("shrinks", block(4, true), "shrinks 8 features to 4"),
    ] {
        let out = run(name, layers);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(want) && err.trim().lines().count() == 1,
            "{name}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
