//! The shipped configs validate, and every spec survives the resolved-TOML round trip
//! (spec → `to_resolved_toml` → parse → validate gives an equal spec).

use std::path::{Path, PathBuf};

use dpx::config::{self, ExperimentSpec};

fn configs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("configs/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

fn round_trip(spec: &ExperimentSpec) {
    let text = spec.to_resolved_toml();
    let back = config::load_str(&text, Path::new("resolved.toml"))
        .unwrap_or_else(|e| panic!("resolved TOML does not validate: {e}\n{text}"));
    assert_eq!(
        ExperimentSpec {
            source: spec.source.clone(),
            ..back
        },
        *spec,
        "round trip changed the spec:\n{text}"
    );
    // Writing is deterministic and a fixed point.
    assert_eq!(
        config::load_str(&text, Path::new("resolved.toml"))
            .expect("valid")
            .to_resolved_toml(),
        text
    );
}

#[test]
fn every_shipped_config_validates_and_round_trips() {
    let files = configs();
    for required in ["quickstart.toml", "mnist_dpsgd.toml", "cifar_dpsgd.toml"] {
        assert!(
            files.iter().any(|f| f.ends_with(required)),
            "configs/{required} is missing"
        );
    }
    for file in files {
        let spec = config::load(&file).unwrap_or_else(|e| panic!("{e}"));
        round_trip(&spec);
    }
}

#[test]
fn shipped_configs_state_their_privacy_targets() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    for (name, epsilon) in [
        ("quickstart.toml", 3.0),
        ("mnist_dpsgd.toml", 3.0),
        ("cifar_dpsgd.toml", 8.0),
    ] {
        let spec = config::load(&dir.join(name)).expect("valid");
        let p = spec.privacy.expect("private");
        assert_eq!(p.delta, 1e-5, "{name}");
        assert_eq!(p.budget, config::Budget::Calibrated { epsilon }, "{name}");
    }
    let quick = config::load(&dir.join("quickstart.toml")).expect("valid");
    assert!(quick.data.source.dataset().is_synthetic());
    assert_eq!(quick.seeds.len(), 3);
    let mnist = config::load(&dir.join("mnist_dpsgd.toml")).expect("valid");
    assert_eq!(
        mnist.model.architecture,
        config::ModelArchitecture::MnistCnn
    );
    let cifar = config::load(&dir.join("cifar_dpsgd.toml")).expect("valid");
    assert_eq!(
        cifar.model.architecture,
        config::ModelArchitecture::CifarCnn
    );
}

/// Variants not covered by the shipped configs: every schedule, sampler, budget and source kind.
#[test]
fn variants_round_trip() {
    let head = "[experiment]\nname = \"v\"\n";
    let cases = [
        // Non-private MLP on a CSV file with a held-out fraction and every preprocessing step.
        r#"[data]
dataset = "csv"
path = "data/x.csv"
label_column = 3
header = true
standardize = "per_feature"
max_norm = 10.0
classes = [3, 5]
subsample = 1000
pca_components = 8
validation_fraction = 0.25
[model]
architecture = "mlp"
hidden = [100, 50]
activation = "tanh"
l2 = 0.01
[train]
steps = 500
sampler = "shuffle"
batch_size = 32
optimizer = "momentum"
momentum = 0.5
learning_rate = 0.1
eval_every_steps = 50
threads = 2
[train.lr_schedule]
kind = "step"
factor = 0.5
every_epochs = 3
[privacy]
enabled = false
"#,
        // LIBSVM with a test file, fixed-size sampling, a given noise multiplier.
        r#"[data]
dataset = "libsvm"
path = "a.svm"
test_path = "a.t.svm"
[model]
architecture = "logistic"
[train]
epochs = 2
sampler = "fixed_size"
batch_size = 10
learning_rate = 1.5
[train.lr_schedule]
kind = "exponential"
factor = 0.9
every_steps = 10
[clip]
clip_norm = 0.5
[noise]
noise_multiplier = 1.1
[privacy]
delta = 1e-6
accountant = "pld"
neighbouring = "replace_one"
secure_noise = true
"#,
        // Fixed public standardisation constants (one per channel).
        r#"[data]
dataset = "cifar10"
standardize = "fixed"
standardize_mean = [0.4914, 0.4822, 0.4465]
standardize_std = [0.247, 0.2435, 0.2616]
[model]
architecture = "cifar_cnn"
[train]
epochs = 1
expected_batch_size = 256
learning_rate = 1.0
[clip]
clip_norm = 0.1
[privacy]
epsilon = 8.0
delta = 1e-5
"#,
        // Explicit CNN, budget exhaustion, inv_sqrt.
        r#"[data]
dataset = "fashion-mnist"
path = "/data/fm"
standardize = "per_channel"
allow_nonprivate_statistics = true
[model]
architecture = "cnn"
[[model.layers]]
kind = "conv2d"
out_channels = 8
kernel_size = 5
stride = 2
padding = 2
weight_standardization = true
[[model.layers]]
kind = "tanh"
[[model.layers]]
kind = "avg_pool2d"
kernel_size = 2
stride = 1
[[model.layers]]
kind = "flatten"
[[model.layers]]
kind = "dense"
out_features = 16
[[model.layers]]
kind = "relu"
[train]
epochs = 1
expected_batch_size = 128
learning_rate = 1.0
[train.lr_schedule]
kind = "inv_sqrt"
a = 20.0
c = 1.0
[clip]
clip_norm = 1.0
[noise]
noise_multiplier = 2.0
[privacy]
epsilon = 10.0
delta = 1e-5
stop_when_spent = true
[output]
dir = "elsewhere/out"
"#,
        // The two paper generators, cosine and sqrt_to_zero schedules.
        r#"[data]
dataset = "two_cluster"
max_norm = 10.0
[model]
architecture = "logistic"
[train]
epochs = 5
batch_size = 100
learning_rate = 0.1
[train.lr_schedule]
kind = "cosine"
final_learning_rate = 0.001
[clip]
clip_norm = 4.0
[privacy]
epsilon = 4.0
delta = 1e-8
accountant = "zcdp"
"#,
        r#"[data]
dataset = "logistic_synthetic"
[data.synthetic]
n_train = 1000
seed = 7
[model]
architecture = "logistic"
l2 = 0.01
[train]
epochs = 5
expected_batch_size = 100
learning_rate = 0.1
[train.lr_schedule]
kind = "sqrt_to_zero"
final_learning_rate = 1e-10
[clip]
clip_norm = 1.0
[privacy]
epsilon = 1.0
delta = 1e-5
"#,
        // Standard dataset with its default location (no path written back).
        r#"[data]
dataset = "a9a"
[model]
architecture = "logistic"
[train]
epochs = 1
expected_batch_size = 256
learning_rate = 0.5
[clip]
clip_norm = 1.0
[privacy]
epsilon = 1.0
delta = 1e-5
"#,
        // ResNet-20 with group normalisation, and residual blocks written by hand.
        r#"[data]
dataset = "cifar10"
[model]
architecture = "resnet20_gn"
[train]
epochs = 1
expected_batch_size = 256
learning_rate = 1.0
[clip]
clip_norm = 0.1
[privacy]
epsilon = 8.0
delta = 1e-5
"#,
        r#"[data]
dataset = "cifar10"
[model]
architecture = "cnn"
[[model.layers]]
kind = "conv2d"
out_channels = 8
kernel_size = 3
padding = 1
[[model.layers]]
kind = "residual_save"
[[model.layers]]
kind = "conv2d"
out_channels = 16
kernel_size = 3
stride = 2
padding = 1
[[model.layers]]
kind = "group_norm"
groups = 4
[[model.layers]]
kind = "residual_add"
[[model.layers]]
kind = "relu"
[train]
epochs = 1
expected_batch_size = 256
learning_rate = 1.0
[clip]
clip_norm = 0.1
[privacy]
epsilon = 8.0
delta = 1e-5
"#,
    ];
    for case in cases {
        let text = format!("{head}{case}");
        let spec = config::load_str(&text, Path::new("v.toml")).unwrap_or_else(|e| panic!("{e}"));
        round_trip(&spec);
    }
}

#[test]
fn defaults_are_explicit_in_the_resolved_toml() {
    let text = r#"[experiment]
name = "d"
[data]
dataset = "mnist"
[model]
architecture = "mnist_cnn"
[train]
epochs = 1
batch_size = 256
learning_rate = 1.0
[clip]
clip_norm = 1.0
[privacy]
epsilon = 3.0
delta = 1e-5
"#;
    let spec = config::load_str(text, Path::new("d.toml")).expect("valid");
    let resolved: toml::Table = toml::from_str(&spec.to_resolved_toml()).expect("TOML");
    let get = |path: &str| {
        let mut v = toml::Value::Table(resolved.clone());
        for part in path.split('.') {
            v = v
                .get(part)
                .unwrap_or_else(|| panic!("{path} missing"))
                .clone();
        }
        v
    };
    assert_eq!(
        get("experiment.seeds"),
        toml::Value::Array(vec![toml::Value::Integer(0)])
    );
    assert_eq!(get("data.scale"), toml::Value::Boolean(true));
    assert_eq!(get("train.sampler").as_str(), Some("poisson"));
    // `batch_size` with Poisson sampling is written back as `expected_batch_size`.
    assert_eq!(get("train.expected_batch_size").as_integer(), Some(256));
    assert!(resolved["train"].get("batch_size").is_none());
    assert_eq!(get("train.optimizer").as_str(), Some("sgd"));
    assert_eq!(get("train.eval_every_epochs").as_integer(), Some(1));
    assert_eq!(get("train.threads").as_str(), Some("auto"));
    assert_eq!(get("train.lr_schedule.kind").as_str(), Some("constant"));
    assert_eq!(get("clip.policy").as_str(), Some("flat"));
    assert_eq!(get("noise.schedule").as_str(), Some("constant"));
    assert_eq!(get("privacy.enabled"), toml::Value::Boolean(true));
    assert_eq!(get("privacy.accountant").as_str(), Some("rdp"));
    assert_eq!(
        get("privacy.neighbouring").as_str(),
        Some("add_or_remove_one")
    );
    assert_eq!(get("privacy.secure_noise"), toml::Value::Boolean(false));
    assert_eq!(get("privacy.stop_when_spent"), toml::Value::Boolean(false));
    assert_eq!(get("output.dir").as_str(), Some("results/d"));
    assert_eq!(get("model.l2").as_float(), Some(0.0));
}
