//! Parameter averaging (`train.ema_decay`) and augmentation multiplicity
//! (`[train.augmentation]`), end to end and against oracles:
//!
//! - an example's gradient under K views is the mean of its views' gradients, checked against a
//!   batch-of-1 loop (norms, group norms, weighted sums, the materialised rows, losses), whatever
//!   the thread count;
//! - views that change nothing (K = 1, no crop, no flip) train exactly the plain run;
//! - the moving average is post-processing: the raw parameters' columns are byte-identical with
//!   and without it, its step-0 row scores the initial parameters, and its saved model scores
//!   what the CSV says;
//! - a run with views, EMA and kept models gives the same bytes on 1 and 2 threads, and resumes
//!   from a checkpoint to the same bytes;
//! - bad keys and data are one-line errors naming the key.
//!
//! Image data: a small CIFAR-10 directory in the real binary format, written per test.

use std::path::{Path, PathBuf};

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use assert_cmd::Command;
use dpx::grad::PerSampleGradients;
use dpx::model::{ModelSpec, with_threads};
use dpx::train::artifact::model_files;
use dpx::train::checkpoint::{self, CheckpointSink, Checkpointing};
use dpx::train::prepare::Experiment;
use dpx::train::{Observer, SeedEnd, Silent, train_seed, train_seed_checkpointed};
use ndarray::{Array1, Array2, s};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

fn dpx() -> Command {
    Command::cargo_bin("dpx").unwrap()
}

// ---------------------------------------------------------------- the gradient of the views

#[test]
fn an_examples_gradient_is_the_mean_of_its_views_gradients() {
    let model = ModelSpec::named("mnist_cnn").unwrap().build().unwrap();
    let params = model.init_params(5);
    let (b, k) = (3usize, 4usize);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let x = Array2::from_shape_fn((b * k, model.input_size()), |_| {
        rng.sample::<f32, _>(StandardNormal)
    });
    let labels: Vec<usize> = (0..b)
        .flat_map(|i| std::iter::repeat_n((3 * i + 1) % 10, k))
        .collect();

    // The oracle: each view's gradient alone (a batch of one), averaged per example in f64.
    let p = model.num_params();
    let mut oracle = Array2::<f64>::zeros((b, p));
    let mut oracle_loss = vec![0.0f64; b];
    for r in 0..b * k {
        let (loss, g) = model
            .loss_and_gradient(params.view(), x.slice(s![r..r + 1, ..]), &labels[r..r + 1])
            .unwrap();
        let mut row = oracle.row_mut(r / k);
        row.zip_mut_with(&g, |o, &v| *o += v / k as f64);
        oracle_loss[r / k] += loss / k as f64;
    }

    // Once with the shards the model chooses (one, here) and once cut into two data-parallel
    // shards of whole examples (each its own forward and backward pass).
    for model in [model.clone(), model.clone().with_shards(2)] {
        let grads = model
            .per_sample_views(params.view(), x.view(), &labels, k)
            .unwrap();
        assert_eq!(grads.batch_size(), b);
        let close = |a: f64, e: f64, what: &str| {
            let tol = 1e-6 + 1e-4 * a.abs().max(e.abs());
            assert!((a - e).abs() <= tol, "{what}: {a} vs {e}");
        };
        for (i, &loss) in oracle_loss.iter().enumerate() {
            close(grads.losses()[i], loss, "loss");
            let norm = oracle.row(i).iter().map(|v| v * v).sum::<f64>().sqrt();
            close(grads.norms()[i], norm, "norm of the mean");
            for (g, (_, range)) in grads.groups().iter().enumerate() {
                let n = oracle
                    .slice(s![i, range.clone()])
                    .iter()
                    .map(|v| v * v)
                    .sum::<f64>()
                    .sqrt();
                close(grads.group_norms()[[i, g]], n, "group norm of the mean");
            }
        }
        // The mean is not the views' own norms: the check above could fail.
        let view_norms = model
            .per_sample(params.view(), x.view(), &labels)
            .unwrap()
            .norms();
        assert!((grads.norms()[0] - view_norms[0]).abs() > 1e-3 * view_norms[0]);

        // After the norms, the weighted sum is a pass over the kept mean rows; before them (a fresh
        // set of gradients, as a non-private step has), one product over the views' rows.
        let w = Array1::from(vec![0.3, 1.0, 0.7]);
        let sum = grads.weighted_sum(&w);
        let fresh = model
            .per_sample_views(params.view(), x.view(), &labels, k)
            .unwrap()
            .weighted_sum(&w);
        for j in (0..p).step_by(97) {
            let e: f64 = (0..b).map(|i| w[i] * oracle[[i, j]]).sum();
            close(sum[j], e, "weighted sum of the kept means");
            close(fresh[j], e, "weighted sum by one product");
        }
        let gw = Array2::from_shape_fn((b, grads.groups().len()), |(i, g)| {
            0.1 + 0.2 * i as f64 + 0.05 * g as f64
        });
        let gsum = grads.group_weighted_sum(&gw);
        for (g, (_, range)) in grads.groups().iter().enumerate() {
            for j in range.clone().step_by(53) {
                let e: f64 = (0..b).map(|i| gw[[i, g]] * oracle[[i, j]]).sum();
                close(gsum[j], e, "group weighted sum");
            }
        }
        let mat = grads.materialize().unwrap();
        assert_eq!(mat.dim(), (b, p));
        for i in 0..b {
            for j in (0..p).step_by(61) {
                close(mat[[i, j]] as f64, oracle[[i, j]], "materialised row");
            }
        }

        // Whatever the thread count: the same bits.
        let at = |threads: usize| {
            with_threads(threads, || {
                let g = model
                    .per_sample_views(params.view(), x.view(), &labels, k)
                    .unwrap();
                (g.norms(), g.group_norms(), g.weighted_sum(&w))
            })
            .unwrap()
        };
        assert_eq!(at(1), at(3));
    }
}

// ---------------------------------------------------------------- runs on image data

/// A CIFAR-10 directory in the binary format: 5 training batches of `per_batch` records and a
/// test batch of 60, whose class shows as a brighter 8 × 8 block at a class-dependent place.
fn write_cifar(dir: &Path, per_batch: usize) {
    let record = |i: usize, rng: &mut ChaCha8Rng| -> Vec<u8> {
        let label = i % 10;
        let mut r = vec![label as u8];
        let (by, bx) = (4 * (label / 5) + 8, 4 * (label % 5) + 2);
        for c in 0..3 {
            for y in 0..32 {
                for x in 0..32 {
                    let inside = (by..by + 8).contains(&y) && (bx..bx + 8).contains(&x);
                    let base = if inside { 170 + 20 * c } else { 60 };
                    r.push((base + rng.random_range(0..40usize)) as u8);
                }
            }
        }
        r
    };
    let sub = dir.join("cifar10");
    std::fs::create_dir_all(&sub).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for k in 1..=5 {
        let bytes: Vec<u8> = (0..per_batch)
            .flat_map(|i| record(k * per_batch + i, &mut rng))
            .collect();
        std::fs::write(sub.join(format!("data_batch_{k}.bin")), bytes).unwrap();
    }
    let test: Vec<u8> = (0..60).flat_map(|i| record(i, &mut rng)).collect();
    std::fs::write(sub.join("test_batch.bin"), test).unwrap();
}

/// A small CNN on the CIFAR-10 directory, with `train_extra` lines in `[train]` and `extra`
/// tables at the end.
fn config(dir: &Path, name: &str, train_extra: &str, extra: &str) -> PathBuf {
    let text = format!(
        r#"
[experiment]
name = "{name}"
seeds = [1, 2]

[data]
dataset = "cifar10"
standardize = "fixed"
standardize_mean = [0.5, 0.5, 0.5]
standardize_std = [0.25, 0.25, 0.25]

[model]
architecture = "cnn"

[[model.layers]]
kind = "conv2d"
out_channels = 4
kernel_size = 4
stride = 4

[[model.layers]]
kind = "group_norm"
groups = 2

[[model.layers]]
kind = "tanh"

[[model.layers]]
kind = "avg_pool2d"
kernel_size = 2

[train]
epochs = 2
expected_batch_size = 20
learning_rate = 0.5
optimizer = "momentum"
eval_every_steps = 4
{train_extra}

[clip]
clip_norm = 1.0

[privacy]
epsilon = 8.0
delta = 1e-4
{extra}
"#
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn run(cfg: &Path, data: &Path, out: &Path, threads: &str, extra: &[&str]) {
    dpx()
        .args(["run", "--quiet", "--threads", threads, "--data-dir"])
        .arg(data)
        .arg("--out")
        .arg(out)
        .args(extra)
        .arg(cfg)
        .assert()
        .success();
}

/// The CSV's columns `names`, row by row.
fn columns(path: &Path, names: &[&str]) -> Vec<Vec<String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().clone();
    let idx: Vec<usize> = names
        .iter()
        .map(|n| {
            header
                .iter()
                .position(|h| h == *n)
                .unwrap_or_else(|| panic!("no column {n} in {}", path.display()))
        })
        .collect();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            idx.iter().map(|&i| rec[i].to_string()).collect()
        })
        .collect()
}

fn header(path: &Path) -> Vec<String> {
    let mut r = csv::Reader::from_path(path).unwrap();
    r.headers().unwrap().iter().map(String::from).collect()
}

const RAW: &[&str] = &[
    "seed",
    "step",
    "noise_multiplier",
    "epsilon",
    "train_loss",
    "test_loss",
    "test_accuracy",
];

#[test]
fn views_that_change_nothing_train_the_plain_run() {
    let dir = tempfile::tempdir().unwrap();
    write_cifar(dir.path(), 24);
    let plain = config(dir.path(), "plain", "", "");
    let same = config(
        dir.path(),
        "same",
        "",
        "[train.augmentation]\nmultiplicity = 1\ncrop_padding = 0\nhorizontal_flip = false",
    );
    let views = config(
        dir.path(),
        "views",
        "",
        "[train.augmentation]\nmultiplicity = 3",
    );
    let out = |n: &str| dir.path().join(n);
    run(&plain, dir.path(), &out("plain"), "2", &[]);
    run(&same, dir.path(), &out("same"), "2", &[]);
    run(&views, dir.path(), &out("views"), "2", &[]);
    let m = |n: &str| out(n).join("metrics.csv");
    assert_eq!(
        std::fs::read(m("plain")).unwrap(),
        std::fs::read(m("same")).unwrap()
    );
    // Real views change the training (so the comparison above could fail), not the accounting.
    let (p, v) = (columns(&m("plain"), RAW), columns(&m("views"), RAW));
    assert_ne!(p, v);
    let accounting = |rows: &[Vec<String>]| -> Vec<(String, String)> {
        rows.iter().map(|r| (r[2].clone(), r[3].clone())).collect()
    };
    assert_eq!(accounting(&p), accounting(&v), "views change σ or ε");
}

#[test]
fn the_moving_average_is_post_processing_and_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    write_cifar(dir.path(), 24);
    let plain = config(dir.path(), "plain", "", "");
    let ema = config(dir.path(), "ema", "ema_decay = 0.9", "");
    let out = |n: &str| dir.path().join(n);
    run(&plain, dir.path(), &out("plain"), "2", &[]);
    run(&ema, dir.path(), &out("ema"), "2", &[]);
    let m = |n: &str| out(n).join("metrics.csv");
    // The raw parameters' columns are the same bytes: averaging changes nothing it reads.
    assert_eq!(header(&m("plain")), dpx::train::metrics::METRICS_COLUMNS);
    // No validation split here: no `ema_validation_accuracy` column.
    let with: Vec<&str> = dpx::train::metrics::METRICS_COLUMNS
        .iter()
        .chain(&dpx::train::metrics::METRICS_EMA_COLUMNS[..2])
        .copied()
        .collect();
    assert_eq!(header(&m("ema")), with);
    let all_raw: Vec<&str> = dpx::train::metrics::METRICS_COLUMNS.to_vec();
    assert_eq!(columns(&m("plain"), &all_raw), columns(&m("ema"), &all_raw));

    let rows = columns(
        &m("ema"),
        &[
            "step",
            "test_accuracy",
            "test_loss",
            "ema_test_accuracy",
            "ema_test_loss",
        ],
    );
    // Step 0: the average is the initial parameters.
    assert_eq!(rows[0][0], "0");
    assert_eq!((&rows[0][1], &rows[0][2]), (&rows[0][3], &rows[0][4]));
    // Later it differs from the raw parameters (so the check above could fail).
    assert!(rows.iter().skip(1).any(|r| r[2] != r[4]));

    // The saved average scores what the CSV says, and says what it is.
    let summary = columns(
        &out("ema").join("summary.csv"),
        &["seed", "final_ema_test_accuracy"],
    );
    let model = out("ema").join("seeds/1.ema.model.safetensors");
    assert!(out("ema").join("seeds/1.model.safetensors").exists());
    let scored = dpx()
        .args(["eval", "--format", "json", "--data-dir"])
        .arg(dir.path())
        .arg(&model)
        .arg(&ema)
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&scored.get_output().stdout).unwrap();
    assert_eq!(json["scores"][0]["set"], "test");
    let acc = json["scores"][0]["accuracy"].as_f64().unwrap();
    assert_eq!(acc, summary[0][1].parse::<f64>().unwrap());
    assert_eq!(json["metadata"]["parameters"], "ema");
    assert_eq!(json["metadata"]["ema_decay"], 0.9);
}

#[test]
fn views_ema_and_kept_models_are_thread_independent_and_resume_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    write_cifar(dir.path(), 24);
    let cfg = config(
        dir.path(),
        "all",
        "ema_decay = 0.8",
        "[train.augmentation]\nmultiplicity = 2\ncrop_padding = 2\n\n[output]\nsave_model_every_evals = 2",
    );
    let out = |n: &str| dir.path().join(n);
    run(&cfg, dir.path(), &out("one"), "1", &[]);
    run(&cfg, dir.path(), &out("two"), "2", &[]);
    let files = |root: &Path| -> Vec<(String, Vec<u8>)> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(root.join("seeds"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        let mut v: Vec<(String, Vec<u8>)> = names
            .into_iter()
            .filter(|p| !p.to_string_lossy().ends_with(".summary.csv"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&p).unwrap())
            })
            .collect();
        v.push((
            "metrics.csv".into(),
            std::fs::read(root.join("metrics.csv")).unwrap(),
        ));
        v
    };
    let one = files(&out("one"));
    assert_eq!(one, files(&out("two")));
    // 2 epochs of 120 examples at batch 20: 12 steps, evaluations at 4, 8, 12; every 2nd keeps
    // the parameters at step 8.
    let names: Vec<&str> = one.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "1.model.safetensors",
        "1.ema.model.safetensors",
        "1.step8.model.safetensors",
        "2.step8.model.safetensors",
    ] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }
    assert!(
        !names
            .iter()
            .any(|n| n.contains("step4") || n.contains("step12"))
    );

    // Stopped after step 5 (a checkpoint every 2 steps and the interrupt's), each checkpoint
    // resumes to the same result and the same model files: the views' stream, the average and
    // the kept parameters are in the checkpoint.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let spec = dpx::config::load_str(&text, &cfg).unwrap();
    let resolved = spec.to_resolved_toml();
    let exp = Experiment::build(spec, dir.path()).unwrap();
    let finished = |end: SeedEnd| match end {
        SeedEnd::Finished(r) => {
            let mut r = *r;
            r.summary.seconds = 0.0;
            r
        }
        SeedEnd::Interrupted => panic!("interrupted"),
    };
    let straight = finished(train_seed(&exp, 1, &Silent, &AtomicBool::new(false)).unwrap());
    let sink = Memory::default();
    let c = Checkpointing {
        every: Some(2),
        on_interrupt: true,
        resolved_config: &resolved,
        sink: &sink,
    };
    let cancel = AtomicBool::new(false);
    let stop = StopAt {
        at: 5,
        cancel: &cancel,
    };
    let end = train_seed_checkpointed(&exp, 1, &stop, &cancel, Some(&c), None).unwrap();
    assert_eq!(end, SeedEnd::Interrupted);
    let saved = sink.0.into_inner().unwrap();
    assert_eq!(saved.len(), 3, "checkpoints at steps 2, 4 and 5");
    for bytes in &saved {
        let state = checkpoint::decode(bytes, &resolved, 1).unwrap();
        checkpoint::validate(&exp, 1, &state).unwrap();
        let resumed = finished(
            train_seed_checkpointed(&exp, 1, &Silent, &AtomicBool::new(false), None, Some(state))
                .unwrap(),
        );
        assert_eq!(resumed, straight, "resumed from a checkpoint");
        assert_eq!(
            model_files(&exp, &resumed).unwrap(),
            model_files(&exp, &straight).unwrap()
        );
    }
}

/// Keeps every checkpoint a seed writes, in order.
#[derive(Default)]
struct Memory(Mutex<Vec<Vec<u8>>>);

impl CheckpointSink for Memory {
    fn save(&self, _seed: u64, bytes: &[u8]) -> Result<(), String> {
        self.0.lock().unwrap().push(bytes.to_vec());
        Ok(())
    }
}

/// Sets `cancel` once `at` steps are done (the seed then checkpoints and stops).
struct StopAt<'a> {
    at: u64,
    cancel: &'a AtomicBool,
}

impl Observer for StopAt<'_> {
    fn on_step(&self, _seed: u64, steps_done: u64, _total: u64) {
        if steps_done == self.at {
            self.cancel.store(true, Ordering::SeqCst);
        }
    }
}

#[test]
fn bad_keys_and_data_are_one_line_errors_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    write_cifar(dir.path(), 4);
    for (train_extra, extra, key) in [
        ("ema_decay = 1.0", "", "train.ema_decay"),
        ("ema_decay = 0.0", "", "train.ema_decay"),
        (
            "",
            "[train.augmentation]\nmultiplicity = 0",
            "train.augmentation.multiplicity",
        ),
        (
            "",
            "[train.augmentation]\ncrop_padding = 40",
            "train.augmentation.crop_padding",
        ),
        ("", "[train.augmentation]\nviews = 4", "views"),
        (
            "",
            "[output]\nsave_model_every_evals = 0",
            "output.save_model_every_evals",
        ),
    ] {
        let cfg = config(dir.path(), "bad", train_extra, extra);
        let assert = dpx()
            .args(["run", "--quiet", "--data-dir"])
            .arg(dir.path())
            .arg("--out")
            .arg(dir.path().join("bad_out"))
            .arg(&cfg)
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
        assert!(err.contains(key), "{key}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{key}: {err}");
        assert!(!dir.path().join("bad_out/seeds").exists());
    }
    // Views need images: a vector dataset is refused naming the table.
    let text = r#"
[experiment]
name = "vectors"
[data]
dataset = "gaussian_mixture"
[data.synthetic]
n_train = 100
n_test = 50
n_features = 4
n_classes = 2
[model]
architecture = "logistic"
[train]
epochs = 1
expected_batch_size = 10
learning_rate = 0.1
[train.augmentation]
multiplicity = 2
[clip]
clip_norm = 1.0
[privacy]
epsilon = 1.0
delta = 1e-5
"#;
    let cfg = dir.path().join("vectors.toml");
    std::fs::write(&cfg, text).unwrap();
    let assert = dpx()
        .args(["run", "--quiet", "--out"])
        .arg(dir.path().join("vec_out"))
        .arg(&cfg)
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        err.contains("train.augmentation") && err.contains("images"),
        "{err}"
    );
}
