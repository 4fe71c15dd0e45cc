//! Reliability of `dpx run` (issue 9): the noise mode (secure vs seeded), numerical faults
//! (a diverging seed is marked and stopped, the others go on) and the assumption checks that
//! set `epsilon_guaranteed = false`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use assert_cmd::Command;
use predicates::prelude::*;

use dpx::train::metrics::SeedStatus;
use dpx::train::prepare::Experiment;
use dpx::train::{SeedEnd, Silent, train_seed};

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

/// A small experiment on the synthetic Gaussian mixture; `train` and `privacy` are appended.
fn config(dir: &Path, name: &str, train: &str, privacy: &str) -> PathBuf {
    let text = format!(
        r#"
[experiment]
name = "{name}"
seeds = [0, 1]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = 1000
n_test = 200
n_features = 8
n_classes = 2
separation = 4.0
seed = 3

[model]
architecture = "logistic"

[train]
epochs = 2
eval_every_steps = 5
{train}

[clip]
clip_norm = 1.0

{privacy}
"#
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

const TRAIN: &str = "expected_batch_size = 50\nlearning_rate = 0.5";

fn run(cfg: &Path, out: &Path) -> assert_cmd::assert::Assert {
    dpx()
        .args(["run", "--threads", "1", "--out"])
        .arg(out)
        .arg(cfg)
        .assert()
}

/// The named column of every data row of a CSV file.
fn column(path: &Path, name: &str) -> Vec<String> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let i = r
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {}", path.display()));
    r.records().map(|rec| rec.unwrap()[i].to_string()).collect()
}

#[test]
fn secure_noise_runs_differ_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let privacy = "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5\nsecure_noise = true";
    let cfg = config(dir.path(), "secure", TRAIN, privacy);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run(&cfg, &a).success().stdout(
        predicate::str::contains("noise secure").and(predicate::str::contains("not reproducible")),
    );
    run(&cfg, &b).success();
    assert_eq!(
        column(&a.join("summary.csv"), "noise_mode"),
        ["secure", "secure"]
    );
    // Same config and seeds: only the noise differs, and it comes from the OS.
    assert_ne!(
        column(&a.join("metrics.csv"), "test_loss"),
        column(&b.join("metrics.csv"), "test_loss")
    );
    // The accounting does not depend on the noise source.
    assert_eq!(
        column(&a.join("metrics.csv"), "epsilon"),
        column(&b.join("metrics.csv"), "epsilon")
    );
}

#[test]
fn seeded_noise_runs_are_byte_identical_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let privacy = "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5";
    let cfg = config(dir.path(), "seeded", TRAIN, privacy);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run(&cfg, &a).success().stdout(predicate::str::contains(
        "noise seeded (reproducible; not for deployment)",
    ));
    run(&cfg, &b).success();
    assert_eq!(
        std::fs::read(a.join("metrics.csv")).unwrap(),
        std::fs::read(b.join("metrics.csv")).unwrap()
    );
    assert_eq!(
        column(&a.join("summary.csv"), "noise_mode"),
        ["seeded", "seeded"]
    );
}

#[test]
fn huge_learning_rate_marks_the_seed_diverged_without_nan_rows() {
    // Non-private, unclipped: nothing bounds the update, so lr = 1e300 overflows at once.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "diverge",
        "expected_batch_size = 50\nlearning_rate = 1e300",
        "[privacy]\nenabled = false",
    );
    let cfg_text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("[clip]\nclip_norm = 1.0", "");
    std::fs::write(&cfg, cfg_text).unwrap();
    let out = dir.path().join("out");
    run(&cfg, &out).success().stderr(
        predicate::str::contains("seed 0 diverged")
            .and(predicate::str::contains("seed 1 diverged")),
    );
    assert_eq!(
        column(&out.join("summary.csv"), "status"),
        ["diverged", "diverged"]
    );
    for col in ["train_loss", "test_loss", "test_accuracy"] {
        for v in column(&out.join("metrics.csv"), col) {
            assert!(
                v.is_empty() || v.parse::<f64>().unwrap().is_finite(),
                "{col} = {v} written as a result"
            );
        }
    }
    let text = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert!(
        !text.to_lowercase().contains("nan") && !text.contains("inf"),
        "{text}"
    );
}

#[test]
fn a_diverging_seed_stops_early_and_the_others_go_on() {
    // Through the library: the diverging seed stops before its last step with only finite
    // rows, and a healthy experiment on the same data still runs every step.
    let dir = tempfile::tempdir().unwrap();
    let bad = config(
        dir.path(),
        "bad",
        "expected_batch_size = 50\nlearning_rate = 1e300",
        "[privacy]\nenabled = false",
    );
    let text = std::fs::read_to_string(&bad)
        .unwrap()
        .replace("[clip]\nclip_norm = 1.0", "");
    std::fs::write(&bad, text).unwrap();
    let exp = Experiment::build(dpx::config::load(&bad).unwrap(), dir.path()).unwrap();
    let total = exp.plan.steps;
    match train_seed(&exp, 0, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(res) => {
            assert_eq!(res.summary.status, SeedStatus::Diverged);
            assert!(
                res.summary.steps < total,
                "stopped at {} of {total}",
                res.summary.steps
            );
            assert!(res.rows.iter().all(|r| r.test_loss.is_finite()));
        }
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
    let good = config(
        dir.path(),
        "good",
        TRAIN,
        "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5",
    );
    let exp = Experiment::build(dpx::config::load(&good).unwrap(), dir.path()).unwrap();
    match train_seed(&exp, 1, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(res) => {
            assert_eq!(res.summary.status, SeedStatus::Completed);
            assert_eq!(res.summary.steps, exp.plan.steps);
        }
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
}

#[test]
fn every_assumption_check_warns_and_drops_the_guarantee() {
    let dir = tempfile::tempdir().unwrap();
    // (train, privacy, words the warning must contain). n_train = 1000, so 1/n = 1e-3.
    let cases = [
        (
            "sampler = \"shuffle\"\nbatch_size = 50\nlearning_rate = 0.5",
            "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5",
            "assumes Poisson sampling",
        ),
        (
            TRAIN,
            "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-3",
            "at least 1/n",
        ),
        (
            TRAIN,
            "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 0.5",
            "at least 1/n",
        ),
        (
            "optimizer = \"adagrad_norm\"\nexpected_batch_size = 50\nlearning_rate = 0.5\n\
             [train.adagrad_norm]\nnorm_source = \"clean\"",
            "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5",
            "norm_source = clean",
        ),
    ];
    for (i, (train, privacy, words)) in cases.iter().enumerate() {
        let cfg = config(dir.path(), &format!("case{i}"), train, privacy);
        let exp = Experiment::build(dpx::config::load(&cfg).unwrap(), dir.path()).unwrap();
        let p = exp.plan.privacy.as_ref().unwrap();
        assert!(!p.epsilon_guaranteed, "case {i}");
        assert!(
            p.warnings.iter().any(|w| w.contains(words)),
            "case {i}: {:?}",
            p.warnings
        );
        let out = dir.path().join(format!("out{i}"));
        dpx()
            .args(["run", "--quiet", "--threads", "1", "--out"])
            .arg(&out)
            .arg(&cfg)
            .assert()
            .success()
            .stderr(predicate::str::contains("warning: ").and(predicate::str::contains(*words)));
        assert_eq!(
            column(&out.join("summary.csv"), "epsilon_guaranteed"),
            ["false", "false"]
        );
    }
    // The control: Poisson sampling and delta = 1e-5 < 1/n keep the guarantee, with no warning.
    let cfg = config(
        dir.path(),
        "control",
        TRAIN,
        "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5",
    );
    let exp = Experiment::build(dpx::config::load(&cfg).unwrap(), dir.path()).unwrap();
    let p = exp.plan.privacy.as_ref().unwrap();
    assert!(
        p.epsilon_guaranteed && p.warnings.is_empty(),
        "{:?}",
        p.warnings
    );
}

/// Output into a pipe whose reader has gone (`dpx account --all | head -1`) ends the process
/// quietly, as for any Unix tool: no panic message and no backtrace on stderr.
#[test]
fn a_closed_stdout_pipe_is_not_a_panic() {
    use std::io::Read;
    use std::process::{Command as Process, Stdio};
    let mut child = Process::new(assert_cmd::cargo::cargo_bin("dpx"))
        .args([
            "account",
            "--noise-multiplier",
            "1.1",
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.004",
            "--steps",
            "1000",
            "--all",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away before dpx prints
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}
