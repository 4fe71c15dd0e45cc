//! Saved models: the safetensors file round-trips bit for bit, names every tensor it refuses,
//! gives the same bytes for the same model, is read by an independent NumPy forward pass
//! (`scripts/check_model_file.py`) to the same logits, and frozen layers get no per-sample
//! gradients.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dpx::grad::PerSampleGradients;
use dpx::model::artifact::{ArtifactError, read_metadata, saved_spec};
use dpx::model::{Activation, LayerSpec, LossKind, Model, ModelSpec};
use ndarray::{Array1, Array2, s};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// Every layer kind with parameters and a multi-channel image input (so the convolution's
/// layout conversion and the channels-last permutation are both exercised); the second
/// convolution is weight-standardised (the file holds its raw weight).
fn spec() -> ModelSpec {
    ModelSpec {
        input_shape: vec![3, 8, 8],
        layers: vec![
            LayerSpec::conv(4, 3, 1, 1),
            LayerSpec::GroupNorm { groups: 2 },
            LayerSpec::act(Activation::Tanh),
            LayerSpec::MaxPool {
                kernel: 2,
                stride: 2,
            },
            LayerSpec::conv_ws(6, 3, 2, 1),
            LayerSpec::act(Activation::Relu),
            LayerSpec::AvgPool {
                kernel: 2,
                stride: 1,
            },
            LayerSpec::Flatten,
            LayerSpec::Dense { units: 5 },
            LayerSpec::act(Activation::Sigmoid),
            LayerSpec::Dense { units: 3 },
        ],
        loss: LossKind::SoftmaxCrossEntropy,
        l2: 0.0,
    }
}

/// A small residual network: a channel-changing stride-2 block (3 → 4 channels, 8×8 → 4×4)
/// around an identity block, then a block on vectors zero-padding 6 → 7 features.
fn residual_spec() -> ModelSpec {
    use LayerSpec::{ResidualAdd, ResidualSave};
    let tanh = LayerSpec::act(Activation::Tanh);
    ModelSpec {
        input_shape: vec![3, 8, 8],
        layers: vec![
            ResidualSave,
            LayerSpec::conv(4, 3, 2, 1),
            LayerSpec::GroupNorm { groups: 2 },
            tanh,
            ResidualSave,
            LayerSpec::conv(4, 3, 1, 1),
            ResidualAdd,
            LayerSpec::conv(4, 3, 1, 1),
            ResidualAdd,
            tanh,
            LayerSpec::AvgPool {
                kernel: 2,
                stride: 2,
            },
            LayerSpec::Flatten,
            LayerSpec::Dense { units: 6 },
            tanh,
            ResidualSave,
            LayerSpec::Dense { units: 7 },
            ResidualAdd,
            LayerSpec::Dense { units: 3 },
        ],
        loss: LossKind::SoftmaxCrossEntropy,
        l2: 0.0,
    }
}

#[test]
fn a_residual_model_file_round_trips_with_its_spec() {
    for spec in [residual_spec(), ModelSpec::resnet20_gn()] {
        let model = spec.build().unwrap();
        let params = random_params(&model, 11);
        let bytes = model.to_safetensors(params.view(), &meta()).unwrap();
        let back = model
            .params_from_safetensors(&bytes, Path::new("r.safetensors"))
            .unwrap();
        assert!(
            back.iter()
                .zip(params.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        let m = read_metadata(&bytes, Path::new("r")).unwrap().unwrap();
        let saved = saved_spec(&m, Path::new("r")).unwrap().unwrap();
        assert_eq!(saved, spec);
        // The spec read back builds the same model (names by spec index skip the markers).
        let rebuilt = saved.build().unwrap();
        assert_eq!(rebuilt.tensors(), model.tensors());
    }
    let model = residual_spec().build().unwrap();
    let bytes = model
        .to_safetensors(random_params(&model, 1).view(), &meta())
        .unwrap();
    let names = safetensors::SafeTensors::deserialize(&bytes)
        .unwrap()
        .names()
        .len();
    // 3 convolutions, 1 group norm, 3 dense layers: 7 weights, 7 biases.
    assert_eq!(names, 14);
}

/// Parameters away from the initialisation (group-norm γ = 1, β = 0 would hide a swap).
fn random_params(model: &Model, seed: u64) -> Array1<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array1::from_shape_fn(model.num_params(), |_| {
        0.5 * rng.sample::<f32, _>(StandardNormal)
    })
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dpx-artifacts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn meta() -> BTreeMap<String, serde_json::Value> {
    BTreeMap::from([("seed".to_string(), 7.into())])
}

#[test]
fn a_model_file_round_trips_bit_for_bit_with_pytorch_names_and_shapes() {
    let model = spec().build().unwrap();
    let params = random_params(&model, 1);
    let bytes = model.to_safetensors(params.view(), &meta()).unwrap();
    assert_eq!(bytes, model.to_safetensors(params.view(), &meta()).unwrap());
    let back = model
        .params_from_safetensors(&bytes, Path::new("m.safetensors"))
        .unwrap();
    assert!(
        back.iter()
            .zip(params.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let shape = |n: &str| file.tensor(n).unwrap().shape().to_vec();
    assert_eq!(shape("0.weight"), [4, 3, 3, 3]); // [C_out, C_in, kh, kw]
    assert_eq!(shape("1.weight"), [4]);
    assert_eq!(shape("4.weight"), [6, 4, 3, 3]);
    assert_eq!(shape("8.weight"), [5, 6]); // [out, in]
    assert_eq!(shape("10.bias"), [3]);
    let mut names = file.names();
    names.sort_unstable();
    assert_eq!(names.len(), 10);
    let m = read_metadata(&bytes, Path::new("m")).unwrap().unwrap();
    assert_eq!(m["format"], "dpx-model/1");
    assert_eq!(m["seed"], 7);
    assert_eq!(saved_spec(&m, Path::new("m")).unwrap().unwrap(), spec());
}

#[test]
fn a_file_that_does_not_fit_is_refused_naming_the_tensor() {
    let model = spec().build().unwrap();
    let bytes = model
        .to_safetensors(random_params(&model, 2).view(), &meta())
        .unwrap();
    let path = Path::new("other.safetensors");
    // Another width of the first convolution: its weight is named, with both shapes.
    let mut other = spec();
    other.layers[0] = LayerSpec::conv(8, 3, 1, 1);
    other.layers[1] = LayerSpec::GroupNorm { groups: 2 };
    let e = other
        .build()
        .unwrap()
        .params_from_safetensors(&bytes, path)
        .unwrap_err();
    assert!(
        matches!(&e, ArtifactError::Shape { name, found, expected, .. }
            if name == "0.weight" && found == &[4, 3, 3, 3] && expected == &[8, 3, 3, 3]),
        "{e}"
    );
    assert!(e.to_string().contains("other.safetensors"), "{e}");
    // A model with one more layer: its tensor is missing from the file.
    let mut longer = spec();
    longer.layers.push(LayerSpec::act(Activation::Tanh));
    longer.layers.push(LayerSpec::Dense { units: 3 });
    let e = longer
        .build()
        .unwrap()
        .params_from_safetensors(&bytes, path)
        .unwrap_err();
    assert!(
        matches!(&e, ArtifactError::Shape { name, .. } | ArtifactError::Missing { name, .. } if name == "10.weight" || name == "12.weight"),
        "{e}"
    );
    // A model with fewer layers: the file has a tensor the model lacks.
    let logistic = ModelSpec::logistic_regression(192, 3).build().unwrap();
    let e = logistic.params_from_safetensors(&bytes, path).unwrap_err();
    assert!(
        matches!(&e, ArtifactError::Shape { name, .. } if name == "0.weight"),
        "{e}"
    );
    // Not a safetensors file at all, and a file larger than the model could need.
    let e = model
        .params_from_safetensors(b"\xff\xff\xff\xff\xff\xff\xff\x7fjunk", path)
        .unwrap_err();
    assert!(matches!(e, ArtifactError::Format { .. }), "{e}");
    let dir = temp_dir("large");
    let big = dir.join("big.safetensors");
    std::fs::write(&big, vec![0u8; model.saved_size_limit() as usize + 1]).unwrap();
    let e = model.load_safetensors(&big).unwrap_err();
    assert!(matches!(e, ArtifactError::TooLarge { .. }), "{e}");
    let e = model
        .load_safetensors(&dir.join("absent.safetensors"))
        .unwrap_err();
    assert!(matches!(e, ArtifactError::Io { .. }), "{e}");
}

#[test]
fn an_extra_tensor_in_the_file_is_refused() {
    let small = ModelSpec::logistic_regression(4, 3).build().unwrap();
    let mut two = ModelSpec::mlp(4, &[5], Activation::Tanh, 3);
    two.layers.truncate(1);
    two.layers[0] = LayerSpec::Dense { units: 3 };
    let model = two.build().unwrap();
    let params = random_params(&model, 3);
    // Same architecture: accepted.
    let bytes = model.to_safetensors(params.view(), &meta()).unwrap();
    assert!(
        small
            .params_from_safetensors(&bytes, Path::new("m"))
            .is_ok()
    );
    // A file with a tensor beyond the model's.
    let big = ModelSpec::mlp(4, &[3], Activation::Tanh, 3)
        .build()
        .unwrap();
    let bytes = big
        .to_safetensors(random_params(&big, 4).view(), &meta())
        .unwrap();
    let e = small
        .params_from_safetensors(&bytes, Path::new("m"))
        .unwrap_err();
    assert!(
        matches!(&e, ArtifactError::Extra { name, .. } if name == "2.bias" || name == "2.weight"),
        "{e}"
    );
}

/// `python3` with numpy and safetensors, or why not.
fn python_with_numpy() -> Result<(), String> {
    let out = Command::new("python3")
        .args(["-c", "import numpy, safetensors"])
        .output()
        .map_err(|e| format!("python3 not found ({e})"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err("python3 lacks numpy or safetensors (pip install numpy safetensors)".into())
    }
}

#[test]
fn numpy_reads_the_file_and_computes_the_same_logits() {
    if let Err(why) = python_with_numpy() {
        if std::env::var_os("DPX_REQUIRE_PYTHON").is_some() {
            panic!("DPX_REQUIRE_PYTHON is set but {why}");
        }
        println!("skipped: {why}; set up Python to run the cross-check");
        return;
    }
    let dir = temp_dir("numpy");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check_model_file.py");
    let check = |spec: ModelSpec, name: &str| {
        let model = spec.build().unwrap();
        // PyTorch's initialisation, moved a little (so group norm's γ, β are not 1, 0).
        let params = model.init_params(5) + 0.05 * &random_params(&model, 5);
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        // 10 inputs in [0, 1], as scaled images.
        let x = Array2::from_shape_fn((10, model.input_size()), |_| rng.random_range(0.0..1.0f32));
        let logits = model.forward(params.view(), x.view()).unwrap();
        let file = dir.join(format!("{name}.safetensors"));
        std::fs::write(&file, model.to_safetensors(params.view(), &meta()).unwrap()).unwrap();
        let raw = |a: &Array2<f32>| -> Vec<u8> { a.iter().flat_map(|v| v.to_le_bytes()).collect() };
        std::fs::write(dir.join(format!("{name}.x")), raw(&x)).unwrap();
        std::fs::write(dir.join(format!("{name}.z")), raw(&logits)).unwrap();
        let out = Command::new("python3")
            .arg(&script)
            .arg(&file)
            .arg(dir.join(format!("{name}.x")))
            .arg(dir.join(format!("{name}.z")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        println!("{name}: {}", String::from_utf8_lossy(&out.stdout).trim());
    };
    check(spec(), "every_layer");
    // The metadata says which layer is standardised; a 3x3 stride-1 padding-1 one (Winograd
    // forward) too.
    let ws = ModelSpec {
        input_shape: vec![2, 6, 6],
        layers: vec![
            LayerSpec::conv_ws(4, 3, 1, 1),
            LayerSpec::act(Activation::Tanh),
            LayerSpec::Flatten,
            LayerSpec::Dense { units: 3 },
        ],
        loss: LossKind::SoftmaxCrossEntropy,
        l2: 0.0,
    };
    check(ws, "weight_standardized");
    let file = dir.join("weight_standardized.safetensors");
    let meta = read_metadata(&std::fs::read(&file).unwrap(), &file)
        .unwrap()
        .unwrap();
    let layers = &meta["model_spec"]["layers"];
    assert_eq!(layers[0]["weight_standardization"], true, "{layers}");
    assert!(
        layers[3].get("weight_standardization").is_none(),
        "{layers}"
    );
    check(ModelSpec::cifar_cnn(), "cifar_cnn");
    // Residual blocks: option A's subsampling and channel padding, nested and on vectors.
    check(ModelSpec::resnet20_gn(), "resnet20_gn");
    check(residual_spec(), "residual");
    check(ModelSpec::mlp(12, &[7], Activation::Relu, 4), "mlp");
    // A file whose logits were perturbed is caught (the check can fail).
    let model = ModelSpec::mlp(12, &[7], Activation::Relu, 4)
        .build()
        .unwrap();
    let z = std::fs::read(dir.join("mlp.z")).unwrap();
    let mut bad: Vec<f32> = z
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    bad[3] += 1e-3 * bad[3].abs().max(1.0);
    let bad: Vec<u8> = bad.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("bad.z"), bad).unwrap();
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir.join("mlp.safetensors"))
        .arg(dir.join("mlp.x"))
        .arg(dir.join("bad.z"))
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a perturbed logit must fail the check"
    );
    assert_eq!(model.num_params(), 12 * 7 + 7 + 7 * 4 + 4);
}

#[test]
fn frozen_layers_get_no_per_sample_gradients() {
    let model = spec().build().unwrap();
    let frozen = spec()
        .build()
        .unwrap()
        .with_frozen(&["0".into(), "1".into()])
        .unwrap();
    assert_eq!(frozen.groups().len(), model.groups().len() - 4);
    assert_eq!(frozen.groups()[0].0, "4.weight");
    assert_eq!(frozen.frozen_ranges().len(), 4);
    let params = random_params(&model, 8);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let x = Array2::from_shape_fn((4, model.input_size()), |_| rng.random_range(0.0..1.0f32));
    let labels = vec![0, 1, 2, 1];
    let all = model.per_sample(params.view(), x.view(), &labels).unwrap();
    let some = frozen.per_sample(params.view(), x.view(), &labels).unwrap();
    // The unfrozen layers' per-sample gradients are unchanged; the frozen ones are absent.
    let (ga, gs) = (all.group_norms(), some.group_norms());
    assert_eq!(gs.ncols(), ga.ncols() - 4);
    assert_eq!(gs, ga.slice(s![.., 4..]).to_owned());
    let m = some.materialize().unwrap();
    let end = frozen.frozen_ranges().last().unwrap().end;
    assert!(m.slice(s![.., ..end]).iter().all(|&v| v == 0.0));
    let mut g = all.sum();
    frozen.mask_frozen(&mut g);
    assert!(g.slice(s![..end]).iter().all(|&v| v == 0.0));
    assert_eq!(g.slice(s![end..]), some.sum().slice(s![end..]));
    // Names that are not layers with parameters, and freezing everything, are refused.
    for bad in [vec!["2".to_string()], vec!["99".to_string()]] {
        let e = spec().build().unwrap().with_frozen(&bad).unwrap_err();
        assert!(e.to_string().contains("model.freeze"), "{e}");
    }
    let every: Vec<String> = ["0", "1", "4", "8", "10"].map(String::from).to_vec();
    let e = spec().build().unwrap().with_frozen(&every).unwrap_err();
    assert!(e.to_string().contains("nothing is left to train"), "{e}");
}
