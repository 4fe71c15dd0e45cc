//! The trained model as an artifact, on the built binary: `dpx run` saves every seed's model,
//! `dpx eval` scores it to the accuracy the run wrote, `model.init_from` starts training from
//! a saved model (refusing one that does not fit, naming the tensor), and `model.freeze` keeps
//! the named layers' parameters exactly as loaded while the privacy accounting is unchanged.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dpx-cli-model-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small private MLP with group normalisation on the Gaussian mixture; `model_extra` goes
/// into `[model]`.
fn config(dir: &Path, file: &str, hidden: usize, model_extra: &str) -> PathBuf {
    let text = format!(
        r#"
[experiment]
name = "model_artifact"
seeds = [0, 1]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = 2000
n_test = 400
n_features = 8
n_classes = 3
seed = 3

[model]
architecture = "cnn"
{model_extra}

[[model.layers]]
kind = "dense"
out_features = {hidden}

[[model.layers]]
kind = "group_norm"
groups = 2

[[model.layers]]
kind = "tanh"

[train]
epochs = 2
expected_batch_size = 100
learning_rate = 0.5

[clip]
clip_norm = 1.0

[privacy]
epsilon = 2.0
delta = 1e-5
"#
    );
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path
}

fn summary_field(out: &Path, seed: u64, field: &str) -> String {
    let text = std::fs::read_to_string(out.join(format!("seeds/{seed}.summary.csv"))).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header.iter().position(|h| *h == field).unwrap();
    row[i].to_string()
}

fn tensor(file: &Path, name: &str) -> Vec<u8> {
    let bytes = std::fs::read(file).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    st.tensor(name).unwrap().data().to_vec()
}

#[test]
fn run_saves_models_that_eval_scores_and_init_from_and_freeze_reuse() {
    let dir = temp_dir("flow");
    let cfg = config(&dir, "base.toml", 8, "");
    let out = dir.join("base");
    dpx()
        .args(["run", "--quiet", "--threads", "2", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success();
    let model0 = out.join("seeds/0.model.safetensors");
    assert!(model0.exists() && out.join("seeds/1.model.safetensors").exists());

    // Same config and seed, another thread count: the same model bytes.
    let again = dir.join("again");
    dpx()
        .args(["run", "--quiet", "--threads", "1", "--out"])
        .arg(&again)
        .arg(&cfg)
        .assert()
        .success();
    assert_eq!(
        std::fs::read(&model0).unwrap(),
        std::fs::read(again.join("seeds/0.model.safetensors")).unwrap()
    );

    // dpx eval gives the final test accuracy the run wrote.
    let eval = dpx()
        .args(["eval", "--format", "json"])
        .arg(&model0)
        .arg(&cfg)
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&eval.get_output().stdout).unwrap();
    let acc = json["scores"][0]["accuracy"].as_f64().unwrap();
    let written: f64 = summary_field(&out, 0, "final_test_accuracy")
        .parse()
        .unwrap();
    assert_eq!(acc, written);
    assert_eq!(json["metadata"]["seed"], 0);
    assert_eq!(json["metadata"]["epsilon_guaranteed"], true);

    // Another architecture: eval and init_from refuse, naming the file and the tensor.
    let wide = config(&dir, "wide.toml", 12, "");
    dpx()
        .arg("eval")
        .arg(&model0)
        .arg(&wide)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("another architecture"));
    let wide_from = config(
        &dir,
        "wide_from.toml",
        12,
        &format!("init_from = {:?}", model0.display().to_string()),
    );
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(dir.join("wide_from"))
        .arg(&wide_from)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("model.init_from").and(predicate::str::contains(
                "tensor 0.weight is F32 [8, 8], but the model needs F32 [12, 8]",
            )),
        );

    // Warm start with the first two layers frozen: their tensors stay exactly as loaded,
    // the last layer trains, and ε is the same as the run from scratch.
    let tuned_cfg = config(
        &dir,
        "tuned.toml",
        8,
        &format!(
            "init_from = {:?}\nfreeze = [\"0\", \"1\"]",
            model0.display().to_string()
        ),
    );
    let tuned = dir.join("tuned");
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(&tuned)
        .arg(&tuned_cfg)
        .assert()
        .success();
    let tuned0 = tuned.join("seeds/0.model.safetensors");
    for frozen in ["0.weight", "0.bias", "1.weight", "1.bias"] {
        assert_eq!(tensor(&tuned0, frozen), tensor(&model0, frozen), "{frozen}");
    }
    assert_ne!(tensor(&tuned0, "3.weight"), tensor(&model0, "3.weight"));
    assert_eq!(
        summary_field(&tuned, 0, "epsilon"),
        summary_field(&out, 0, "epsilon")
    );
    // A freeze entry that names no layer with parameters is a config error.
    let bad = config(&dir, "bad_freeze.toml", 8, "freeze = [\"2\"]");
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(dir.join("bad"))
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("model.freeze entry \"2\""));
}

/// The public and private parts of `data.public_fraction` are disjoint, cover the training set,
/// and are the same for every config with the same data; `train_on` without the fraction is
/// refused.
#[test]
fn the_public_and_private_parts_split_the_training_set() {
    use dpx::train::prepare::prepare_data;
    let base = |extra: &str| {
        format!(
            "[experiment]\nname = \"split\"\n[data]\ndataset = \"gaussian_mixture\"\n{extra}\n[data.synthetic]\nn_train = 1000\nn_test = 100\nn_features = 4\n[model]\narchitecture = \"logistic\"\n[train]\nepochs = 1\nexpected_batch_size = 50\nlearning_rate = 0.1\n[clip]\nclip_norm = 1.0\n[privacy]\nepsilon = 1.0\ndelta = 1e-5\n"
        )
    };
    let load = |extra: &str| {
        let spec = dpx::config::load_str(&base(extra), Path::new("split.toml")).unwrap();
        prepare_data(&spec, Path::new("unused")).unwrap()
    };
    let all = load("");
    let public = load("public_fraction = 0.25\ntrain_on = \"public\"");
    let private = load("public_fraction = 0.25");
    assert_eq!(public.train.len(), 250);
    assert_eq!(private.train.len(), 750);
    assert!(
        private
            .notes
            .iter()
            .any(|n| n.contains("covers these 750 only"))
    );
    let rows = |d: &dpx::data::Dataset| -> Vec<Vec<u32>> {
        d.features
            .rows()
            .into_iter()
            .map(|r| r.iter().map(|v| v.to_bits()).collect())
            .collect()
    };
    let mut both: Vec<Vec<u32>> = rows(&public.train);
    both.extend(rows(&private.train));
    let mut whole = rows(&all.train);
    both.sort();
    whole.sort();
    assert_eq!(both, whole, "the parts partition the training set");
    assert_eq!(
        rows(&load("public_fraction = 0.25").train),
        rows(&private.train)
    );
    let e =
        dpx::config::load_str(&base("train_on = \"public\""), Path::new("split.toml")).unwrap_err();
    assert!(e.to_string().contains("data.train_on"), "{e}");
    let e =
        dpx::config::load_str(&base("public_fraction = 1.0"), Path::new("split.toml")).unwrap_err();
    assert!(e.to_string().contains("data.public_fraction"), "{e}");
}
