//! `dpx audit` (issue 9, item 6): the one-run canary audit finds a run without noise far above
//! its claim, never puts the real mechanism above its accountant's ε, audits the very training
//! `dpx run` does, and refuses bad input with exit code 2.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use assert_cmd::Command;
use predicates::prelude::*;

use dpx::audit::{AuditNoise, AuditOptions, audit_seed, claimed_epsilon};
use dpx::train::prepare::Experiment;
use dpx::train::{SeedEnd, Silent, train_seed};

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

/// A small private experiment: logistic regression on a 4-class Gaussian mixture with 50
/// features (P = 204 parameters), q = 50/2000, 10 epochs (400 steps), ε = 1 at δ = 1e-5.
/// `extra` is appended to `[train]`; `privacy` replaces the `[privacy]` table.
fn config_text(train_extra: &str, privacy: &str) -> String {
    format!(
        r#"
[experiment]
name = "audit_test"
seeds = [0]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = 2000
n_test = 500
n_features = 50
n_classes = 4
separation = 4.0
seed = 3

[model]
architecture = "logistic"

[train]
epochs = 10
expected_batch_size = 50
learning_rate = 0.5
{train_extra}

[clip]
clip_norm = 1.0

{privacy}
"#
    )
}

const PRIVACY: &str = "[privacy]\nepsilon = 1.0\ndelta = 1e-5";

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("audit_test.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn experiment(text: &str) -> Experiment {
    let spec = dpx::config::load_str(text, Path::new("audit_test.toml")).unwrap();
    Experiment::build(spec, Path::new("data")).unwrap()
}

fn options(canaries: usize, k_in: usize, k_out: usize, noise: AuditNoise) -> AuditOptions {
    AuditOptions {
        canaries,
        guess_included: k_in,
        guess_excluded: k_out,
        confidence: 0.95,
        noise,
    }
}

#[test]
fn without_noise_the_audit_finds_epsilon_far_above_the_claim() {
    let exp = experiment(&config_text("", PRIVACY));
    let claim = claimed_epsilon(&exp).unwrap().epsilon;
    assert!((claim - 1.0).abs() < 0.01, "claimed ε {claim}");
    // 200 canaries on 204 coordinates: every canary is active at every step and an included one
    // is sampled about q·T = 10 times, so without noise both kinds of guess are nearly all right.
    let run = audit_seed(&exp, 0, &options(200, 60, 60, AuditNoise::Off)).unwrap();
    assert_eq!(run.slots, 1);
    assert_eq!(run.noise_mode, "off");
    assert_eq!(run.guesses, 120);
    assert!(run.correct >= 118, "{} of 120 right", run.correct);
    assert!(
        run.epsilon_lower > 3.0 * claim,
        "ε_lower {} is not far above the claim {claim}",
        run.epsilon_lower
    );
}

#[test]
fn with_the_real_mechanism_epsilon_lower_stays_below_the_claim_across_seeds() {
    let exp = experiment(&config_text("", PRIVACY));
    let claim = claimed_epsilon(&exp).unwrap().epsilon;
    let opts = options(200, 40, 0, AuditNoise::Configured);
    let planned = exp.plan.planned_ledger(exp.plan.steps);
    for seed in 0..5 {
        let run = audit_seed(&exp, seed, &opts).unwrap();
        assert_eq!(run.noise_mode, "seeded");
        assert!(
            run.epsilon_lower <= claim,
            "seed {seed}: ε_lower {} > ε {claim}",
            run.epsilon_lower
        );
        // The audited run released exactly what the plan (and so `dpx account`) says.
        assert_eq!(run.ledger, planned, "seed {seed}");
        // The canaries do not break training: accuracy stays far above chance (25%).
        assert!(run.final_test_accuracy > 0.6, "{}", run.final_test_accuracy);
    }
}

#[test]
fn more_canaries_than_parameters_take_turns_and_stay_below_the_claim() {
    let exp = experiment(&config_text("", PRIVACY));
    let claim = claimed_epsilon(&exp).unwrap().epsilon;
    let off = audit_seed(&exp, 1, &options(1000, 100, 0, AuditNoise::Off)).unwrap();
    assert_eq!(off.slots, 5); // ⌈1000 / 204⌉
    assert!(off.epsilon_lower > 2.0 * claim, "{}", off.epsilon_lower);
    let on = audit_seed(&exp, 1, &options(1000, 100, 0, AuditNoise::Configured)).unwrap();
    assert!(on.epsilon_lower <= claim, "{}", on.epsilon_lower);
}

#[test]
fn with_no_canaries_the_audit_trains_exactly_what_dpx_run_trains() {
    let exp = experiment(&config_text("", PRIVACY));
    let run = match train_seed(&exp, 4, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(r) => r,
        SeedEnd::Interrupted => panic!("not cancelled"),
    };
    let audit = audit_seed(&exp, 4, &options(0, 0, 0, AuditNoise::Configured)).unwrap();
    let last = run.rows.last().unwrap();
    // Bit-for-bit: same sampler, gradients, clipping, noise stream and updates.
    assert_eq!(audit.final_test_loss, last.test_loss);
    assert_eq!(audit.final_test_accuracy, last.test_accuracy);
    assert_eq!(audit.ledger, run.ledger);
}

#[test]
fn cli_prints_the_bound_next_to_epsilon_and_writes_csv_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), &config_text("", PRIVACY));
    let json = |threads: &str, out: &Path| {
        let assert = dpx()
            .args(["audit", "--canaries", "150", "--runs", "2", "--json"])
            .args(["--threads", threads, "--out"])
            .arg(out)
            .arg(&cfg)
            .assert()
            .success();
        String::from_utf8(assert.get_output().stdout.clone()).unwrap()
    };
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let one = json("1", &a);
    assert_eq!(one, json("2", &b));
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    assert_eq!(v["runs"][0]["guesses"], 15); // --guess-included defaults to canaries / 10
    assert_eq!(v["pooled"]["guesses"], 30);
    let eps = v["runs"][0]["epsilon"].as_f64().unwrap();
    assert!((eps - 1.0).abs() < 0.01, "{eps}");
    assert_eq!(
        std::fs::read(a.join("audit.csv")).unwrap(),
        std::fs::read(b.join("audit.csv")).unwrap()
    );
    let csv = std::fs::read_to_string(a.join("audit.csv")).unwrap();
    assert!(csv.starts_with(
        "run,seed,canaries,included,guesses,correct,confidence,epsilon_lower,epsilon,"
    ));
    assert_eq!(csv.lines().count(), 4, "{csv}"); // header, two runs, pooled
    assert!(a.join("config.toml").exists());

    dpx()
        .args(["audit", "--canaries", "200", "--guess-included", "60"])
        .args(["--guess-excluded", "60", "--no-noise"])
        .arg(&cfg)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("control: noise OFF").and(predicate::str::contains(
                "above the claim, as a run without noise must be",
            )),
        );
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_config(dir.path(), &config_text("", PRIVACY));
    let check = |args: &[&str], cfg: &Path, needle: &str| {
        let out = dpx().arg("audit").args(args).arg(cfg).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    check(&["--canaries", "0"], &good, "--canaries");
    check(&["--canaries=-3"], &good, "--canaries");
    check(&["--runs", "0"], &good, "--runs");
    check(&["--confidence", "1"], &good, "--confidence");
    check(&["--confidence", "NaN"], &good, "--confidence");
    check(
        &[
            "--canaries",
            "10",
            "--guess-included",
            "8",
            "--guess-excluded",
            "3",
        ],
        &good,
        "exceed --canaries 10",
    );
    check(&["--guess-included", "0"], &good, "make no guess");
    check(&[], &dir.path().join("missing.toml"), "missing.toml");

    let dir2 = tempfile::tempdir().unwrap();
    let nonprivate = write_config(dir2.path(), &config_text("", "[privacy]\nenabled = false"));
    check(&[], &nonprivate, "not private");
    let dir3 = tempfile::tempdir().unwrap();
    let shuffled = write_config(
        dir3.path(),
        &config_text("sampler = \"shuffle\"", PRIVACY).replace("expected_batch_size", "batch_size"),
    );
    check(&[], &shuffled, "train.sampler");
}
