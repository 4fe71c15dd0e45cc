//! Bad input in experiment files: every category gives the right `ConfigError` variant and a
//! one-line message naming the file and the key (issue 4, "Bad input").

use std::path::Path;

use dpx::config::{self, ConfigError, ExperimentSpec};

/// A small valid private experiment; each test breaks one thing.
const BASE: &str = r#"[experiment]
name = "base"
seeds = [0, 1, 2]

[data]
dataset = "gaussian_mixture"

[model]
architecture = "logistic"

[train]
epochs = 3
expected_batch_size = 64
learning_rate = 0.5

[clip]
clip_norm = 1.0

[privacy]
epsilon = 3.0
delta = 1e-5
"#;

const FILE: &str = "runs.toml";

fn load(text: &str) -> Result<ExperimentSpec, ConfigError> {
    config::load_str(text, Path::new(FILE))
}

/// BASE with the dotted `key` set to `value` (or removed when `value` is None), as file text.
fn edited(key: &str, value: Option<toml::Value>) -> String {
    let mut table: toml::Table = toml::from_str(BASE).expect("BASE parses");
    match value {
        Some(v) => config::set(&mut table, key, v).expect("settable"),
        None => {
            let (parent, last) = key.rsplit_once('.').expect("dotted");
            let t = table
                .get_mut(parent)
                .and_then(|v| v.as_table_mut())
                .expect("parent table");
            t.remove(last);
        }
    }
    toml::to_string(&table).expect("serialises")
}

fn err_with(key: &str, value: toml::Value) -> ConfigError {
    load(&edited(key, Some(value))).expect_err("must be rejected")
}

fn err_without(key: &str) -> ConfigError {
    load(&edited(key, None)).expect_err("must be rejected")
}

/// The message is one line and names the file and the key.
fn names_file_and_key(e: &ConfigError, key: &str) {
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(msg.starts_with(FILE), "names the file: {msg}");
    assert!(msg.contains(key), "names `{key}`: {msg}");
}

fn f(x: f64) -> toml::Value {
    toml::Value::Float(x)
}

fn i(x: i64) -> toml::Value {
    toml::Value::Integer(x)
}

fn s(x: &str) -> toml::Value {
    toml::Value::String(x.into())
}

#[test]
fn base_is_valid() {
    let spec = load(BASE).expect("valid");
    assert_eq!(spec.seeds, vec![0, 1, 2]);
}

#[test]
fn wrong_type_gives_line_and_column() {
    let text = BASE.replace("learning_rate = 0.5", "learning_rate = \"fast\"");
    let e = load(&text).expect_err("string where a float belongs");
    assert!(
        matches!(&e, ConfigError::WrongType { key, at, .. }
            if key == "train.learning_rate" && at.position == Some((14, 17))),
        "{e:?}"
    );
    names_file_and_key(&e, "train.learning_rate");
    assert!(e.to_string().starts_with("runs.toml:14:17: "), "{e}");
}

#[test]
fn wrong_type_in_a_list_names_the_element() {
    let text = BASE.replace("seeds = [0, 1, 2]", "seeds = [0, \"one\"]");
    let e = load(&text).expect_err("string seed");
    assert!(
        matches!(&e, ConfigError::WrongType { key, at, .. }
            if key == "experiment.seeds[1]" && at.position == Some((3, 13))),
        "{e:?}"
    );
}

#[test]
fn syntax_error_gives_line_and_column() {
    let text = BASE.replace("epochs = 3", "epochs = = 3");
    let e = load(&text).expect_err("bad TOML");
    assert!(
        matches!(&e, ConfigError::Syntax { at, .. } if at.position.map(|p| p.0) == Some(12)),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("runs.toml:12:"), "{e}");
}

#[test]
fn unknown_key_suggests_the_nearest() {
    let text = BASE.replace("learning_rate = 0.5", "lerning_rate = 0.5");
    let e = load(&text).expect_err("typo");
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, suggestion, at }
            if key == "train.lerning_rate"
            && suggestion.0.as_deref() == Some("learning_rate")
            && at.position == Some((14, 1))),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "runs.toml:14:1: unknown key `train.lerning_rate`; did you mean `learning_rate`?"
    );
}

#[test]
fn unknown_section_suggests_the_nearest() {
    let text = BASE.replace("[privacy]", "[privcy]");
    let e = load(&text).expect_err("typo in a section");
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, suggestion, .. }
            if key == "privcy" && suggestion.0.as_deref() == Some("privacy")),
        "{e:?}"
    );
}

#[test]
fn unknown_key_far_from_everything_has_no_suggestion() {
    let text = BASE.replace("[clip]", "[clip]\nzzzzzzzz = 1");
    let e = load(&text).expect_err("unknown");
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, suggestion, .. }
            if key == "clip.zzzzzzzz" && suggestion.0.is_none()),
        "{e:?}"
    );
}

#[test]
fn unknown_key_in_a_layer_names_its_index() {
    let text = BASE.replace(
        "architecture = \"logistic\"",
        "architecture = \"cnn\"\n[[model.layers]]\nkind = \"dense\"\nout_featres = 8",
    );
    let e = load(&text).expect_err("typo in a layer");
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, suggestion, .. }
            if key == "model.layers[0].out_featres"
            && suggestion.0.as_deref() == Some("out_features")),
        "{e:?}"
    );
}

#[test]
fn unknown_name_suggests_the_nearest() {
    let text = BASE.replace("[train]", "[train]\nsampler = \"poison\"");
    let e = load(&text).expect_err("unknown sampler");
    assert!(
        matches!(&e, ConfigError::WrongType { key, suggestion, at, .. }
            if key == "train.sampler"
            && suggestion.0.as_deref() == Some("poisson")
            && at.position.is_some()),
        "{e:?}"
    );
    let e = err_with("privacy.accountant", s("pdl"));
    assert!(
        matches!(&e, ConfigError::WrongType { key, suggestion, .. }
            if key == "privacy.accountant" && suggestion.0.as_deref() == Some("pld")),
        "{e:?}"
    );
}

#[test]
fn delta_must_be_in_open_unit_interval() {
    for bad in [1.5, 1.0, 0.0, -1e-5] {
        let e = err_with("privacy.delta", f(bad));
        assert!(
            matches!(&e, ConfigError::OutOfRange { key, .. } if key == "privacy.delta"),
            "{e:?}"
        );
        names_file_and_key(&e, "privacy.delta");
    }
    assert_eq!(
        err_with("privacy.delta", f(1.5)).to_string(),
        "runs.toml: privacy.delta: expected a value in (0, 1), found 1.5"
    );
}

#[test]
fn epsilon_must_be_positive() {
    for bad in [0.0, -3.0] {
        let e = err_with("privacy.epsilon", f(bad));
        assert!(
            matches!(&e, ConfigError::OutOfRange { key, .. } if key == "privacy.epsilon"),
            "{e:?}"
        );
        names_file_and_key(&e, "privacy.epsilon");
    }
}

#[test]
fn negative_learning_rate_is_rejected() {
    let e = err_with("train.learning_rate", f(-0.1));
    assert!(
        matches!(&e, ConfigError::OutOfRange { key, found, .. }
            if key == "train.learning_rate" && found == "-0.1"),
        "{e:?}"
    );
    names_file_and_key(&e, "train.learning_rate");
}

#[test]
fn nan_and_infinities_are_rejected() {
    for key in [
        "train.learning_rate",
        "clip.clip_norm",
        "privacy.epsilon",
        "privacy.delta",
    ] {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = err_with(key, f(bad));
            assert!(
                matches!(&e, ConfigError::OutOfRange { key: k, .. } if k == key),
                "{key} = {bad}: {e:?}"
            );
            names_file_and_key(&e, key);
        }
    }
    // Written as TOML's own spellings, too.
    let e = load(&BASE.replace("clip_norm = 1.0", "clip_norm = nan")).expect_err("nan");
    assert!(
        matches!(&e, ConfigError::OutOfRange { found, .. } if found == "NaN"),
        "{e:?}"
    );
    let e = load(&BASE.replace("epsilon = 3.0", "epsilon = inf")).expect_err("inf");
    assert!(
        matches!(&e, ConfigError::OutOfRange { found, .. } if found == "inf"),
        "{e:?}"
    );
}

#[test]
fn noise_multiplier_and_epsilon_together_conflict() {
    let e = err_with("noise.noise_multiplier", f(1.1));
    assert!(
        matches!(&e, ConfigError::Conflict { key, other, .. }
            if key == "noise.noise_multiplier" && other == "privacy.epsilon"),
        "{e:?}"
    );
    names_file_and_key(&e, "noise.noise_multiplier");
    assert!(e.to_string().contains("privacy.epsilon"), "{e}");
}

#[test]
fn neither_noise_multiplier_nor_epsilon_is_missing() {
    let e = err_without("privacy.epsilon");
    assert!(
        matches!(&e, ConfigError::Missing { key, .. } if key == "privacy.epsilon"),
        "{e:?}"
    );
    assert!(e.to_string().contains("noise.noise_multiplier"), "{e}");
}

#[test]
fn sigma_must_be_positive() {
    let text = edited("privacy.epsilon", None);
    let mut table: toml::Table = toml::from_str(&text).expect("parses");
    config::set(&mut table, "noise.noise_multiplier", f(0.0)).expect("set");
    let e = load(&toml::to_string(&table).expect("ser")).expect_err("σ = 0");
    assert!(
        matches!(&e, ConfigError::OutOfRange { key, .. } if key == "noise.noise_multiplier"),
        "{e:?}"
    );
}

#[test]
fn stop_when_spent_needs_both_sigma_and_epsilon() {
    let e = err_with("privacy.stop_when_spent", toml::Value::Boolean(true));
    assert!(
        matches!(&e, ConfigError::Missing { key, .. } if key == "noise.noise_multiplier"),
        "{e:?}"
    );
    let mut table: toml::Table = toml::from_str(BASE).expect("parses");
    config::set(
        &mut table,
        "privacy.stop_when_spent",
        toml::Value::Boolean(true),
    )
    .expect("set");
    config::set(&mut table, "noise.noise_multiplier", f(1.0)).expect("set");
    let spec = load(&toml::to_string(&table).expect("ser")).expect("valid");
    assert!(matches!(
        spec.privacy.map(|p| p.budget),
        Some(config::Budget::UntilSpent { noise_multiplier, epsilon })
            if noise_multiplier == 1.0 && epsilon == 3.0
    ));
}

#[test]
fn empty_and_duplicate_seeds_are_rejected() {
    let e = err_with("experiment.seeds", toml::Value::Array(vec![]));
    assert!(
        matches!(&e, ConfigError::OutOfRange { key, .. } if key == "experiment.seeds"),
        "{e:?}"
    );
    names_file_and_key(&e, "experiment.seeds");
    let e = err_with("experiment.seeds", i(0));
    assert!(
        matches!(&e, ConfigError::OutOfRange { key, .. } if key == "experiment.seeds"),
        "{e:?}"
    );
    let e = err_with(
        "experiment.seeds",
        toml::Value::Array(vec![i(1), i(2), i(1)]),
    );
    assert!(
        matches!(&e, ConfigError::OutOfRange { key, found, .. }
            if key == "experiment.seeds" && found == "1 twice"),
        "{e:?}"
    );
    let e = err_with("experiment.seeds", toml::Value::Array(vec![i(-1)]));
    assert!(matches!(&e, ConfigError::OutOfRange { .. }), "{e:?}");
    // A count is 0..n.
    let spec = load(&edited("experiment.seeds", Some(i(5)))).expect("valid");
    assert_eq!(spec.seeds, vec![0, 1, 2, 3, 4]);
}

#[test]
fn batch_and_length_ranges() {
    for (key, bad) in [
        ("train.expected_batch_size", 0),
        ("train.epochs", 0),
        ("train.epochs", -2),
    ] {
        let e = err_with(key, i(bad));
        assert!(
            matches!(&e, ConfigError::OutOfRange { key: k, .. } if k == key),
            "{key} = {bad}: {e:?}"
        );
        names_file_and_key(&e, key);
    }
}

#[test]
fn exclusive_pairs_conflict() {
    for (key, value, other) in [
        ("train.steps", i(100), "train.epochs"),
        ("train.batch_size", i(64), "train.expected_batch_size"),
        ("train.eval_every_steps", i(10), "train.eval_every_epochs"),
    ] {
        let mut table: toml::Table = toml::from_str(BASE).expect("parses");
        config::set(&mut table, key, value).expect("set");
        if key == "train.eval_every_steps" {
            config::set(&mut table, "train.eval_every_epochs", i(1)).expect("set");
        }
        let e = load(&toml::to_string(&table).expect("ser")).expect_err("conflict");
        // Both keys of the pair are named.
        let pair = |a: &str, b: &str| (a == key && b == other) || (a == other && b == key);
        assert!(
            matches!(&e, ConfigError::Conflict { key: k, other: o, .. } if pair(k, o)),
            "{key}: {e:?}"
        );
    }
    let e = err_without("train.epochs");
    assert!(
        matches!(&e, ConfigError::Missing { key, .. } if key == "train.epochs"),
        "{e:?}"
    );
}

#[test]
fn keys_that_do_not_apply_are_rejected() {
    for (key, value) in [
        ("train.momentum", f(0.9)),
        ("model.hidden", toml::Value::Array(vec![i(8)])),
        ("data.path", s("data/x")),
        ("data.label_column", i(0)),
        ("train.lr_schedule.a", f(1.0)),
    ] {
        let e = err_with(key, value);
        assert!(
            matches!(&e, ConfigError::NotApplicable { key: k, .. } if k == key),
            "{key}: {e:?}"
        );
        names_file_and_key(&e, key);
    }
    let text = edited("train.sampler", Some(s("shuffle")));
    let e = load(&text).expect_err("expected batch with shuffle");
    assert!(
        matches!(&e, ConfigError::NotApplicable { key, .. } if key == "train.expected_batch_size"),
        "{e:?}"
    );
}

#[test]
fn non_private_runs_reject_privacy_keys() {
    let e = err_with("privacy.enabled", toml::Value::Boolean(false));
    assert!(
        matches!(&e, ConfigError::NotApplicable { key, .. } if key == "privacy.epsilon"),
        "{e:?}"
    );
    let text = BASE.replace("epsilon = 3.0\ndelta = 1e-5", "enabled = false");
    let spec = load(&text).expect("non-private baseline");
    assert!(spec.privacy.is_none());
    // Clipping without noise is allowed when asked for.
    assert_eq!(spec.clip, config::ClipSpec::Flat { clip_norm: 1.0 });
    let text = text.replace("clip_norm = 1.0", "");
    assert_eq!(load(&text).expect("valid").clip, config::ClipSpec::None);
    // A private run cannot switch clipping off.
    let e = err_with("clip.policy", s("none"));
    assert!(
        matches!(&e, ConfigError::Conflict { key, .. } if key == "clip.policy"),
        "{e:?}"
    );
}

#[test]
fn required_keys_are_missing_errors() {
    for key in [
        "experiment.name",
        "data.dataset",
        "model.architecture",
        "train.learning_rate",
        "clip.clip_norm",
        "privacy.delta",
    ] {
        let e = err_without(key);
        assert!(
            matches!(&e, ConfigError::Missing { key: k, .. } if k == key),
            "{key}: {e:?}"
        );
        names_file_and_key(&e, key);
    }
}

#[test]
fn fractions_and_names_are_checked() {
    for bad in [1.0, -0.1, 2.0] {
        let e = err_with("data.validation_fraction", f(bad));
        assert!(matches!(&e, ConfigError::OutOfRange { .. }), "{e:?}");
    }
    for bad in [vec![3], vec![3, 5, 3], vec![3, -1]] {
        let e = err_with(
            "data.classes",
            toml::Value::Array(bad.iter().map(|&c| i(c)).collect()),
        );
        assert!(
            matches!(&e, ConfigError::OutOfRange { key, .. } if key == "data.classes"),
            "{bad:?}: {e:?}"
        );
    }
    for bad in ["", "../up", ".hidden", "has space"] {
        let e = err_with("experiment.name", s(bad));
        assert!(
            matches!(&e, ConfigError::OutOfRange { key, .. } if key == "experiment.name"),
            "{bad:?}: {e:?}"
        );
    }
    let mut table: toml::Table = toml::from_str(BASE).expect("parses");
    config::set(&mut table, "train.optimizer", s("momentum")).expect("set");
    config::set(&mut table, "train.momentum", f(1.0)).expect("set");
    let e = load(&toml::to_string(&table).expect("ser")).expect_err("μ = 1");
    assert!(
        matches!(&e, ConfigError::OutOfRange { key, .. } if key == "train.momentum"),
        "{e:?}"
    );
}

#[test]
fn cnn_layers_are_checked_per_kind() {
    let cnn = |layers: &str| {
        BASE.replace(
            "architecture = \"logistic\"",
            &format!("architecture = \"cnn\"\n{layers}"),
        )
    };
    let e = load(&cnn("[[model.layers]]\nkind = \"conv2d\"\nkernel_size = 3"))
        .expect_err("no channels");
    assert!(
        matches!(&e, ConfigError::Missing { key, .. } if key == "model.layers[0].out_channels"),
        "{e:?}"
    );
    let e = load(&cnn("[[model.layers]]\nkind = \"tanh\"\n[[model.layers]]\nkind = \"dense\"\nout_features = 8\nkernel_size = 3"))
        .expect_err("kernel on dense");
    assert!(
        matches!(&e, ConfigError::NotApplicable { key, .. } if key == "model.layers[1].kernel_size"),
        "{e:?}"
    );
    let e = load(&cnn(
        "[[model.layers]]\nkind = \"dense\"\nout_features = 100000000",
    ))
    .expect_err("huge");
    assert!(matches!(&e, ConfigError::OutOfRange { .. }), "{e:?}");
    let e = load(&cnn("[[model.layers]]\nkind = \"group_norm\""))
        .expect_err("group_norm without groups");
    assert!(
        matches!(&e, ConfigError::Missing { key, .. } if key == "model.layers[0].groups"),
        "{e:?}"
    );
    let e =
        load(&cnn("[[model.layers]]\nkind = \"relu\"\ngroups = 2")).expect_err("groups on relu");
    assert!(
        matches!(&e, ConfigError::NotApplicable { key, .. } if key == "model.layers[0].groups"),
        "{e:?}"
    );
    // Residual entries take no keys; their matching is checked when the model is built.
    let e = load(&cnn(
        "[[model.layers]]\nkind = \"residual_save\"\nout_channels = 4",
    ))
    .expect_err("out_channels on residual_save");
    assert!(
        matches!(&e, ConfigError::NotApplicable { key, .. } if key == "model.layers[0].out_channels"),
        "{e:?}"
    );
    let e = load(&cnn(
        "[[model.layers]]\nkind = \"residual_add\"\nstride = 2",
    ))
    .expect_err("stride on residual_add");
    assert!(
        matches!(&e, ConfigError::NotApplicable { key, .. } if key == "model.layers[0].stride"),
        "{e:?}"
    );
    let spec = load(&cnn(
        "[[model.layers]]\nkind = \"dense\"\nout_features = 8\n[[model.layers]]\nkind = \"group_norm\"\ngroups = 2",
    ))
    .expect("valid group_norm");
    assert!(matches!(
        &spec.model.architecture,
        config::ModelArchitecture::Cnn { layers } if layers[1] == config::LayerSpec::GroupNorm { groups: 2 }
    ));
    let spec = load(&cnn(
        "[[model.layers]]\nkind = \"conv2d\"\nout_channels = 4\nkernel_size = 3\nweight_standardization = true",
    ))
    .expect("valid weight_standardization");
    assert!(matches!(
        &spec.model.architecture,
        config::ModelArchitecture::Cnn { layers }
            if matches!(layers[0], config::LayerSpec::Conv2d { weight_standardization: true, .. })
    ));
    let e = load(&cnn(
        "[[model.layers]]\nkind = \"dense\"\nout_features = 8\nweight_standardization = true",
    ))
    .expect_err("weight_standardization on dense");
    assert!(
        matches!(&e, ConfigError::NotApplicable { key, .. } if key == "model.layers[0].weight_standardization"),
        "{e:?}"
    );
    assert_eq!(e.to_string().lines().count(), 1, "{e}");
    let e = load(&cnn(
        "[[model.layers]]\nkind = \"conv2d\"\nout_channels = 4\nkernel_size = 3\nweight_standardization = 1",
    ))
    .expect_err("weight_standardization = 1");
    assert!(
        matches!(&e, ConfigError::WrongType { key, .. } if key == "model.layers[0].weight_standardization"),
        "{e:?}"
    );
    assert_eq!(e.to_string().lines().count(), 1, "{e}");
    let e = load(&cnn(
        "[[model.layers]]\nkind = \"conv2d\"\nout_channels = 4\nkernel_size = 3\nweight_standardisation = true",
    ))
    .expect_err("misspelt key");
    assert!(
        e.to_string().contains("weight_standardisation"),
        "the unknown key is named: {e}"
    );
    assert_eq!(e.to_string().lines().count(), 1, "{e}");
    let e = load(&BASE.replace("architecture = \"logistic\"", "architecture = \"cnn\""))
        .expect_err("no layers");
    assert!(
        matches!(&e, ConfigError::Missing { key, .. } if key == "model.layers"),
        "{e:?}"
    );
    let spec = load(&cnn(
        "[[model.layers]]\nkind = \"conv2d\"\nout_channels = 4\nkernel_size = 3\n[[model.layers]]\nkind = \"max_pool2d\"\nkernel_size = 2\n[[model.layers]]\nkind = \"relu\"",
    ))
    .expect("valid");
    assert_eq!(
        spec.model.architecture,
        config::ModelArchitecture::Cnn {
            layers: vec![
                config::LayerSpec::Conv2d {
                    out_channels: 4,
                    kernel_size: 3,
                    stride: 1,
                    padding: 0,
                    weight_standardization: false,
                },
                config::LayerSpec::MaxPool2d {
                    kernel_size: 2,
                    stride: 2
                },
                config::LayerSpec::Relu,
            ]
        }
    );
}

#[test]
fn pca_with_a_cnn_conflicts() {
    let text = BASE
        .replace(
            "dataset = \"gaussian_mixture\"",
            "dataset = \"mnist\"\npca_components = 60",
        )
        .replace(
            "architecture = \"logistic\"",
            "architecture = \"mnist_cnn\"",
        );
    let e = load(&text).expect_err("PCA + CNN");
    assert!(
        matches!(&e, ConfigError::Conflict { key, .. } if key == "data.pca_components"),
        "{e:?}"
    );
}

#[test]
fn checks_against_data() {
    let spec = load(BASE).expect("valid");
    spec.check_against_data(1000, 20).expect("fits");
    let e = spec
        .check_against_data(50, 20)
        .expect_err("batch 64 > 50 examples");
    assert!(
        matches!(&e, ConfigError::DataMismatch { key, .. } if key == "train.expected_batch_size"),
        "{e:?}"
    );
    names_file_and_key(&e, "train.expected_batch_size");
    assert!(matches!(
        spec.check_against_data(0, 20),
        Err(ConfigError::DataMismatch { .. })
    ));
    let text = BASE
        .replace("dataset = \"gaussian_mixture\"", "dataset = \"mnist\"")
        .replace(
            "architecture = \"logistic\"",
            "architecture = \"mnist_cnn\"",
        );
    let spec = load(&text).expect("valid");
    spec.check_against_data(60_000, 784).expect("MNIST fits");
    let e = spec
        .check_against_data(50_000, 3072)
        .expect_err("CIFAR into mnist_cnn");
    assert!(
        matches!(&e, ConfigError::DataMismatch { key, .. } if key == "model.architecture"),
        "{e:?}"
    );
}

#[test]
fn planned_steps_and_sample_rate() {
    let spec = load(BASE).expect("valid");
    // ⌈3 × 1000 / 64⌉ = ⌈46.875⌉ = 47.
    assert_eq!(spec.planned_steps(1000), 47);
    assert_eq!(spec.sample_rate(1000), 0.064);
    // One epoch of 1000 examples at expected batch 64: ⌈1000 / 64⌉ = ⌈15.625⌉ = 16 steps.
    assert_eq!(spec.period_in_steps(config::Every::Epochs(1), 1000), 16);
    assert_eq!(spec.period_in_steps(config::Every::Epochs(2), 1000), 32);
    assert_eq!(spec.period_in_steps(config::Every::Steps(7), 1000), 7);
    let spec = load(&BASE.replace("epochs = 3", "steps = 10")).expect("valid");
    assert_eq!(spec.planned_steps(1000), 10);
}

#[test]
fn overrides_set_keys_and_report_unknown_ones() {
    let file = Path::new(FILE);
    let spec = config::load_str_with_overrides(
        BASE,
        file,
        &[
            ("privacy.epsilon".into(), f(1.0)),
            ("train.steps".into(), i(5)),
        ],
    );
    // `train.steps` with `train.epochs` from the file conflicts.
    let e = spec.expect_err("steps and epochs");
    assert!(
        matches!(&e, ConfigError::Conflict { at, .. } if at.from_override),
        "{e:?}"
    );

    let spec = config::load_str_with_overrides(
        BASE,
        file,
        &[
            ("privacy.epsilon".into(), f(1.0)),
            ("data.synthetic.n_train".into(), i(500)),
        ],
    )
    .expect("valid");
    assert!(matches!(
        spec.privacy.map(|p| p.budget),
        Some(config::Budget::Calibrated { epsilon }) if epsilon == 1.0
    ));

    let e = config::load_str_with_overrides(BASE, file, &[("privacy.epsilom".into(), f(1.0))])
        .expect_err("unknown");
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, suggestion, at }
            if key == "privacy.epsilom" && suggestion.0.as_deref() == Some("epsilon")
            && at.from_override),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "runs.toml (override): unknown key `privacy.epsilom`; did you mean `epsilon`?"
    );

    let e = config::load_str_with_overrides(BASE, file, &[("privacy.epsilon".into(), f(-1.0))])
        .expect_err("negative");
    assert!(
        matches!(&e, ConfigError::OutOfRange { key, at, .. }
            if key == "privacy.epsilon" && at.from_override),
        "{e:?}"
    );
    let e = config::load_str_with_overrides(BASE, file, &[("privacy.epsilon".into(), s("big"))])
        .expect_err("type");
    assert!(
        matches!(&e, ConfigError::WrongType { key, at, .. }
            if key == "privacy.epsilon" && at.from_override),
        "{e:?}"
    );
    let e = config::load_str_with_overrides(BASE, file, &[("train.epochs.x".into(), i(1))])
        .expect_err("through a value");
    assert!(
        matches!(&e, ConfigError::BadOverride { key, .. } if key == "train.epochs.x"),
        "{e:?}"
    );
    let e = config::load_str_with_overrides(BASE, file, &[("train..epochs".into(), i(1))])
        .expect_err("empty part");
    assert!(matches!(&e, ConfigError::BadOverride { .. }), "{e:?}");
}

#[test]
fn unreadable_file_names_it() {
    let e = config::load(Path::new("/nonexistent/dir/runs.toml")).expect_err("no file");
    assert!(matches!(&e, ConfigError::Read { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with("/nonexistent/dir/runs.toml: "),
        "{e}"
    );
}

#[test]
fn spec_and_error_are_send_and_sync() {
    fn check<T: Send + Sync + 'static>() {}
    check::<ExperimentSpec>();
    check::<ConfigError>();
}

#[test]
fn oversized_file_is_refused_before_reading() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("big.toml");
    let file = std::fs::File::create(&path).expect("create");
    file.set_len(config::MAX_FILE_BYTES + 1)
        .expect("sparse file");
    let e = config::load(&path).expect_err("too large");
    assert!(matches!(&e, ConfigError::Read { .. }), "{e:?}");
    assert!(e.to_string().contains("limit"), "{e}");
}

#[test]
fn statistics_of_the_private_data_need_an_explicit_opt_out_that_drops_the_guarantee() {
    // Training-set standardisation and PCA in a private run are refused, naming the key.
    for (key, value) in [
        ("data.standardize", toml::Value::from("per_feature")),
        ("data.pca_components", toml::Value::from(3)),
    ] {
        let e = err_with(key, value.clone());
        assert!(
            matches!(&e, ConfigError::Conflict { key: k, .. } if k == key),
            "{key}: {e:?}"
        );
        assert!(e.to_string().contains("allow_nonprivate_statistics"), "{e}");
        // With the opt-out the config loads, and the plan drops the guarantee with a warning.
        let mut table: toml::Table = toml::from_str(&edited(key, Some(value))).unwrap();
        config::set(
            &mut table,
            "data.allow_nonprivate_statistics",
            toml::Value::from(true),
        )
        .unwrap();
        let spec = load(&toml::to_string(&table).unwrap()).expect("opted out");
        let plan = dpx::train::plan::TrainingPlan::new(&spec, 10_000).unwrap();
        let privacy = plan.privacy.expect("private");
        assert!(!privacy.epsilon_guaranteed, "{key}");
        assert!(
            privacy.warnings.iter().any(|w| w.contains(key)),
            "{key}: {:?}",
            privacy.warnings
        );
    }
    // Fixed public constants keep the guarantee; they need both lists, of equal length.
    let mut table: toml::Table = toml::from_str(BASE).unwrap();
    config::set(&mut table, "data.standardize", "fixed".into()).unwrap();
    let e = load(&toml::to_string(&table).unwrap()).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Missing { key, .. } if key == "data.standardize_mean"),
        "{e:?}"
    );
    config::set(&mut table, "data.standardize_mean", vec![0.0; 20].into()).unwrap();
    config::set(&mut table, "data.standardize_std", vec![2.0; 19].into()).unwrap();
    let e = load(&toml::to_string(&table).unwrap()).unwrap_err();
    assert!(e.to_string().contains("data.standardize_std"), "{e}");
    config::set(&mut table, "data.standardize_std", vec![2.0; 20].into()).unwrap();
    let spec = load(&toml::to_string(&table).unwrap()).expect("fixed constants");
    let plan = dpx::train::plan::TrainingPlan::new(&spec, 10_000).unwrap();
    assert!(plan.privacy.expect("private").epsilon_guaranteed);
    // Constants without fixed are not applicable.
    let e = err_with("data.standardize_mean", vec![0.0].into());
    assert!(
        matches!(&e, ConfigError::NotApplicable { key, .. } if key == "data.standardize_mean"),
        "{e:?}"
    );
}
