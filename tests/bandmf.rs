//! Banded matrix-factorization noise (`noise.mechanism = "bandmf"`) on the built binary: one band
//! is DP-SGD byte for byte; more bands are accounted as ⌈T/b⌉ rounds of the Poisson-subsampled
//! Gaussian at rate b·q (the ε a run writes equals `dpx account`'s for that plan); results do
//! not depend on the thread count; and every combination the banded sensitivity does not cover
//! is refused with exit code 2 naming the key. The strategy, the noise recursion and the
//! checkpointed noise state are tested in `src/privacy/bandmf/tests.rs` and
//! `src/train/checkpoint/tests.rs`, the sampler in `tests/data_sampler.rs`.

use std::path::Path;

use predicates::prelude::*;

#[path = "support/cli.rs"]
mod cli;
use cli::{account_epsilon, dpx, summary_column, write};

const BASE: &str = r#"
[experiment]
name = "bandmf"
seeds = [0, 1]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = 2000
n_test = 500
n_features = 12
n_classes = 3
separation = 3.0
seed = 3

[model]
architecture = "mlp"
hidden = [16]

[train]
epochs = 6
expected_batch_size = 100
learning_rate = 0.2
optimizer = "momentum"
momentum = 0.9
eval_every_epochs = 2

[clip]
clip_norm = 1.0

[privacy]
epsilon = 2.0
delta = 1e-5
"#;

fn run(cfg: &Path, out: &Path, threads: &str) {
    dpx()
        .args(["run", "--quiet", "--threads", threads, "--out"])
        .arg(out)
        .arg(cfg)
        .assert()
        .success();
}

#[test]
fn one_band_is_dp_sgd_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let plain = write(dir.path(), "plain.toml", BASE);
    let banded = write(
        dir.path(),
        "banded.toml",
        &format!("{BASE}\n[noise]\nmechanism = \"bandmf\"\nbands = 1\n"),
    );
    run(&plain, &dir.path().join("plain"), "2");
    run(&banded, &dir.path().join("banded"), "2");
    for f in ["metrics.csv", "seeds/0.metrics.csv", "seeds/1.metrics.csv"] {
        let a = std::fs::read(dir.path().join("plain").join(f)).unwrap();
        let b = std::fs::read(dir.path().join("banded").join(f)).unwrap();
        assert!(a == b, "{f} differs between DP-SGD and one-band BandMF");
    }
}

#[test]
fn banded_runs_are_accounted_as_rounds_and_do_not_depend_on_threads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "b5.toml",
        &format!("{BASE}\n[noise]\nmechanism = \"bandmf\"\nbands = 5\n"),
    );
    // 6 epochs of 20 steps: 120 steps, 24 rounds of rate 5 · 100/2000 = 0.25.
    dpx()
        .args(["run", "--threads", "1", "--out"])
        .arg(dir.path().join("one"))
        .arg(&cfg)
        .assert()
        .success()
        .stdout(predicate::str::contains("5 bands (momentum 0.9 workload)"))
        .stdout(predicate::str::contains("accounted as 24 rounds"));
    run(&cfg, &dir.path().join("two"), "2");
    let a = std::fs::read(dir.path().join("one/metrics.csv")).unwrap();
    let b = std::fs::read(dir.path().join("two/metrics.csv")).unwrap();
    assert!(a == b, "metrics.csv depends on the thread count");

    let sigma = &summary_column(&dir.path().join("one"), "noise_multiplier")[0];
    let epsilon: f64 = summary_column(&dir.path().join("one"), "epsilon")[0]
        .parse()
        .unwrap();
    assert!(
        (epsilon - 2.0).abs() < 1e-3,
        "calibrated to ε = 2, wrote {epsilon}"
    );
    let planned = account_epsilon(&[
        "--sample-rate",
        "0.25",
        "--steps",
        "24",
        "--noise-multiplier",
        sigma,
    ]);
    assert!(
        (planned - epsilon).abs() <= 1e-12 * epsilon,
        "run ε {epsilon} vs 24 rounds at rate 0.25: {planned}"
    );
}

#[test]
fn fixed_order_batches_are_one_release_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let fixed = BASE
        .replace(
            "expected_batch_size = 100",
            "sampler = \"fixed_order\"\nbatch_size = 100",
        )
        .replace(
            "delta = 1e-5",
            "delta = 1e-5\nneighbouring = \"replace_one\"",
        );
    // 20 batches per epoch, 6 epochs: 6 unsampled Gaussian releases under replace-one, for DP-SGD
    // and for 8-band BandMF alike.
    for (name, text) in [
        ("dpsgd", fixed.clone()),
        (
            "bandmf",
            format!("{fixed}\n[noise]\nmechanism = \"bandmf\"\nbands = 8\n"),
        ),
    ] {
        let cfg = write(dir.path(), &format!("{name}.toml"), &text);
        let out = dir.path().join(name);
        dpx()
            .args(["run", "--threads", "2", "--out"])
            .arg(&out)
            .arg(&cfg)
            .assert()
            .success()
            .stdout(predicate::str::contains("fixed-order batches"));
        let sigma = &summary_column(&out, "noise_multiplier")[0];
        let epsilon: f64 = summary_column(&out, "epsilon")[0].parse().unwrap();
        let planned = account_epsilon(&[
            "--sample-rate",
            "1",
            "--steps",
            "6",
            "--relation",
            "replace-one",
            "--noise-multiplier",
            sigma,
        ]);
        assert!(
            (planned - epsilon).abs() <= 1e-12 * epsilon,
            "{name}: run ε {epsilon} vs 6 releases: {planned}"
        );
    }
    // Add/remove neighbours, a schedule, or more bands than batches per epoch are refused.
    for (name, text, key) in [
        (
            "add_remove",
            fixed.replace("neighbouring = \"replace_one\"", ""),
            "privacy.neighbouring",
        ),
        (
            "schedule",
            format!("{fixed}\n[noise]\nschedule = \"exponential\"\ndecay = 0.001\n"),
            "noise.schedule",
        ),
        (
            "bands",
            format!("{fixed}\n[noise]\nmechanism = \"bandmf\"\nbands = 21\n"),
            "noise.bands",
        ),
    ] {
        let cfg = write(dir.path(), &format!("bad_{name}.toml"), &text);
        dpx()
            .args(["run", "--out"])
            .arg(dir.path().join(format!("bad_{name}")))
            .arg(&cfg)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(key));
    }
}

#[test]
fn uncovered_combinations_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let noise = "\n[noise]\nmechanism = \"bandmf\"\nbands = 4\n";
    let cases: [(&str, String, &str); 7] = [
        (
            "replace_one",
            format!("{BASE}neighbouring = \"replace_one\"\n{noise}"),
            "privacy.neighbouring",
        ),
        (
            "shuffle",
            format!(
                "{}{noise}",
                BASE.replace(
                    "expected_batch_size = 100",
                    "sampler = \"shuffle\"\nbatch_size = 100"
                )
            ),
            "train.sampler",
        ),
        (
            "quantile",
            format!(
                "{}{noise}",
                BASE.replace(
                    "[clip]\nclip_norm = 1.0",
                    "[clip]\npolicy = \"quantile\"\nclip_norm = 1.0"
                )
            ),
            "clip.policy",
        ),
        (
            "schedule",
            format!("{BASE}{noise}schedule = \"exponential\"\ndecay = 0.001\n"),
            "noise.schedule",
        ),
        (
            "no_bands",
            format!("{BASE}\n[noise]\nmechanism = \"bandmf\"\n"),
            "noise.bands",
        ),
        (
            "bands_without_bandmf",
            format!("{BASE}\n[noise]\nbands = 4\n"),
            "noise.bands",
        ),
        (
            // n / B = 20 steps per epoch: 21 groups would need a rate above 1.
            "too_many_bands",
            format!("{BASE}\n[noise]\nmechanism = \"bandmf\"\nbands = 21\n"),
            "noise.bands",
        ),
    ];
    for (name, text, key) in cases {
        let cfg = write(dir.path(), &format!("{name}.toml"), &text);
        dpx()
            .args(["run", "--out"])
            .arg(dir.path().join(name))
            .arg(&cfg)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(key));
    }
    // The audit refuses correlated noise.
    let cfg = write(dir.path(), "audit.toml", &format!("{BASE}{noise}"));
    dpx()
        .args(["audit"])
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("noise.mechanism"));
}
