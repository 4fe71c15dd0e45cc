//! `data.pca_noise_multiplier`: the differentially private PCA of Abadi et al. 2016 (used by
//! AdaCliP's Table 2). Its release is one Gaussian event at the head of every seed's ledger,
//! counted in ε and covered by calibration; with negligible noise it is the plain PCA of
//! centred, unit-norm data; it is reproducible and thread-count independent; and the config
//! refuses what it cannot account, naming the key.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

use dpx::config;
use dpx::privacy::accountant::{AccountantOptions, new_accountant};
use dpx::privacy::event::DpEvent;
use dpx::train::prepare::{Experiment, prepare_data};

#[path = "support/head_releases.rs"]
mod head_releases;

use head_releases::{assert_head_releases_are_calibrated, planned_epsilon};

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

fn mixture_config(dir: &Path, data_extra: &str, extra: &str) -> PathBuf {
    head_releases::mixture_config(
        dir,
        12,
        "architecture = \"mlp\"\nhidden = [8]",
        data_extra,
        extra,
    )
}

const PRIVATE_PCA: &str = "pca_components = 4\npca_noise_multiplier = 14.0";
const BUDGET: &str = "[privacy]\nepsilon = 2.0\ndelta = 1e-5\n";
const FIXED_SIGMA: &str = "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5\n";

fn build(dir: &Path, data_extra: &str, extra: &str) -> Experiment {
    head_releases::build(dir, &mixture_config(dir, data_extra, extra))
}

#[test]
fn the_release_is_one_event_at_the_head_of_every_ledger_and_calibration_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let exp = build(dir.path(), PRIVATE_PCA, BUDGET);
    let plain = build(dir.path(), "", BUDGET);
    assert_eq!(exp.data.train.features.ncols(), 4);
    assert_head_releases_are_calibrated(&exp, &plain, &[(DpEvent::gaussian(14.0), 1)], 2.0);

    // With private standardisation too: its two events first, then the PCA's.
    let both = build(
        dir.path(),
        &format!(
            "{PRIVATE_PCA}\nstandardize = \"private\"\nstandardize_noise_multiplier = 8.0\nstandardize_mean_clip_norm = 10.0\nstandardize_second_moment_clip_norm = 50.0"
        ),
        BUDGET,
    );
    assert_eq!(
        both.plan.initial_ledger().runs(),
        &[(DpEvent::gaussian(8.0), 2), (DpEvent::gaussian(14.0), 1)]
    );
}

#[test]
fn at_a_fixed_noise_multiplier_epsilon_is_the_composition_with_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let with = build(dir.path(), PRIVATE_PCA, FIXED_SIGMA);
    let without = build(
        dir.path(),
        "pca_components = 4\nallow_nonprivate_statistics = true",
        FIXED_SIGMA,
    );
    let eps = planned_epsilon;
    assert!(eps(&with) > eps(&without));
    assert!(!without.plan.privacy.as_ref().unwrap().epsilon_guaranteed);
    assert!(with.plan.privacy.as_ref().unwrap().epsilon_guaranteed);

    // The accountant on the events written out by hand: the release, then T sampled steps.
    let p = with.plan.privacy.as_ref().unwrap();
    assert_eq!(p.options, AccountantOptions::default());
    let mut acc = new_accountant(p.accountant, &AccountantOptions::default()).unwrap();
    acc.compose(&DpEvent::gaussian(14.0), 1).unwrap();
    acc.compose(
        &DpEvent::poisson_sampled(100.0 / 2000.0, DpEvent::gaussian(1.0)),
        with.plan.steps,
    )
    .unwrap();
    let direct = acc.epsilon(1e-5).unwrap().epsilon;
    assert!(
        (direct - eps(&with)).abs() <= 1e-9 * direct,
        "{direct} vs {}",
        eps(&with)
    );
}

/// Rows x and −x of unit norm: the mean is 0 and x̂ = x, so the covariance is Σ x xᵀ/(n − 1)
/// and the private PCA with negligible noise has the plain PCA's components (both make each
/// component's largest coordinate positive).
fn symmetric_unit_rows(dir: &Path) -> (PathBuf, PathBuf) {
    let d = 6;
    let scales = [3.0, 2.2, 1.6, 1.1, 0.7, 0.4];
    let mut lines = Vec::new();
    for i in 0..150 {
        let raw: Vec<f64> = (0..d)
            .map(|j| ((i * 37 + j * 101 + 11) as f64).sin() * scales[j])
            .collect();
        let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt();
        for sign in [1.0, -1.0] {
            let row: Vec<String> = raw
                .iter()
                .map(|x| format!("{}", (sign * x / norm) as f32))
                .collect();
            lines.push(format!("{},{}", i % 2, row.join(",")));
        }
    }
    let (train, test) = (dir.join("train.csv"), dir.join("test.csv"));
    std::fs::write(&train, lines.join("\n") + "\n").unwrap();
    std::fs::write(&test, lines[..20].join("\n") + "\n").unwrap();
    (train, test)
}

#[test]
fn with_negligible_noise_it_is_the_plain_pca_of_centred_unit_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = symmetric_unit_rows(dir.path());
    let config = |pca: &str| {
        let text = format!(
            "[experiment]\nname = \"pca\"\n[data]\ndataset = \"csv\"\npath = {train:?}\ntest_path = {test:?}\nlabel_column = 0\n{pca}\n[model]\narchitecture = \"logistic\"\n[train]\nsteps = 2\nexpected_batch_size = 10\nlearning_rate = 0.1\n[clip]\nclip_norm = 1.0\n[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5\n"
        );
        let path = dir.path().join(format!("c{}.toml", pca.len()));
        std::fs::write(&path, text).unwrap();
        prepare_data(&config::load(&path).unwrap(), dir.path()).unwrap()
    };
    let private = config("pca_components = 3\npca_noise_multiplier = 1e-9");
    let plain = config("pca_components = 3\nallow_nonprivate_statistics = true");
    assert_eq!(private.train.features.dim(), (300, 3));
    let gap = private
        .train
        .features
        .iter()
        .zip(plain.train.features.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(gap < 1e-5, "{gap}");
    assert!(private.notes.iter().any(|n| n.contains("private PCA")));
    assert!(!private.notes.iter().any(|n| n.contains("without privacy")));
    assert!(plain.notes.iter().any(|n| n.contains("without privacy")));
    // Noise of multiplier 14 on a 300-row matrix moves the projection visibly.
    let noisy = config("pca_components = 3\npca_noise_multiplier = 14.0");
    let moved = noisy
        .train
        .features
        .iter()
        .zip(plain.train.features.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(moved > 1e-2, "{moved}");
}

#[test]
fn the_release_is_the_experiments_and_follows_its_own_seed() {
    let dir = tempfile::tempdir().unwrap();
    let spec = config::load(&mixture_config(dir.path(), PRIVATE_PCA, BUDGET)).unwrap();
    let a = prepare_data(&spec, dir.path()).unwrap();
    let b = prepare_data(&spec, dir.path()).unwrap();
    assert_eq!(a.train.features, b.train.features);
    assert_eq!(a.test.features, b.test.features);
    let mut other_seeds = spec.clone();
    other_seeds.seeds = vec![5, 0];
    assert_eq!(
        prepare_data(&other_seeds, dir.path())
            .unwrap()
            .train
            .features,
        a.train.features
    );
    let reseeded = config::load(&mixture_config(
        dir.path(),
        &format!("{PRIVATE_PCA}\npca_seed = 1"),
        BUDGET,
    ))
    .unwrap();
    assert_ne!(
        prepare_data(&reseeded, dir.path()).unwrap().train.features,
        a.train.features
    );
    let resolved = reseeded.to_resolved_toml();
    assert!(resolved.contains("pca_seed = 1"), "{resolved}");
    assert!(
        resolved.contains("pca_noise_multiplier = 14.0"),
        "{resolved}"
    );
}

#[test]
fn metrics_are_byte_identical_with_one_or_two_threads_and_account_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = mixture_config(dir.path(), PRIVATE_PCA, BUDGET);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (out, threads) in [(&a, "1"), (&b, "2")] {
        dpx()
            .args(["run", "--quiet", "--threads", threads, "--out"])
            .arg(out)
            .arg(&cfg)
            .assert()
            .success();
    }
    let ma = std::fs::read(a.join("metrics.csv")).unwrap();
    assert!(!ma.is_empty());
    assert_eq!(ma, std::fs::read(b.join("metrics.csv")).unwrap());
    // `dpx account --config` counts the release: the σ and final ε it prints are the run's.
    let out = dpx()
        .args(["account", "--json", "--config"])
        .arg(&cfg)
        .assert()
        .success();
    let plan: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let mut r = csv::Reader::from_path(a.join("metrics.csv")).unwrap();
    let headers = r.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let last = r
        .records()
        .map(Result::unwrap)
        .filter(|row| &row[0] == "0")
        .last()
        .unwrap();
    let recorded: f64 = last[col("epsilon")].parse().unwrap();
    let epochs = plan["epochs"].as_array().unwrap();
    assert_eq!(
        recorded,
        epochs.last().unwrap()["epsilon"].as_f64().unwrap()
    );
    let sigma_run: f64 = last[col("noise_multiplier")].parse().unwrap();
    assert_eq!(sigma_run, plan["noise_multiplier"].as_f64().unwrap());
}

fn refused(dir: &Path, data_extra: &str, extra: &str, key: &str) {
    let cfg = mixture_config(dir, data_extra, extra);
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(dir.join("never"))
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(key));
}

#[test]
fn what_cannot_be_accounted_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = "data.pca_noise_multiplier";
    refused(
        d,
        "pca_components = 4\npca_noise_multiplier = -1.0",
        BUDGET,
        key,
    );
    refused(
        d,
        "pca_components = 4\npca_noise_multiplier = 0.0",
        BUDGET,
        key,
    );
    refused(
        d,
        "pca_components = 4\npca_noise_multiplier = \"x\"",
        BUDGET,
        key,
    );
    refused(
        d,
        "pca_noise_multiplier = 14.0",
        BUDGET,
        "data.pca_components",
    );
    refused(
        d,
        "pca_components = 4\npca_seed = 1",
        BUDGET,
        "data.pca_seed",
    );
    refused(
        d,
        &format!("{PRIVATE_PCA}\npca_seed = -1"),
        BUDGET,
        "data.pca_seed",
    );
    refused(d, PRIVATE_PCA, "[privacy]\nenabled = false\n", key);
    refused(
        d,
        PRIVATE_PCA,
        "[privacy]\nepsilon = 2.0\ndelta = 1e-5\nsecure_noise = true\n",
        "privacy.secure_noise",
    );
    // More components than features: found when the release is read.
    refused(
        d,
        "pca_components = 13\npca_noise_multiplier = 14.0",
        BUDGET,
        "data.pca_components",
    );
    // Without the noise key a private run still refuses the plain PCA.
    refused(
        d,
        "pca_components = 4",
        BUDGET,
        "allow_nonprivate_statistics",
    );
}
