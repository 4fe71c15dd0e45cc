//! Balls-in-bins batches (`train.sampler = "balls_in_bins"`) on the built binary: each epoch is
//! one random-allocation event, so the ε a run writes equals `dpx account --sampling
//! balls-in-bins` for the same plan and is marked guaranteed; results do not depend on the
//! thread count; the pld accountant's analysis is guaranteed too, and needs less noise than the
//! rdp one; and what the analyses do not cover (another accountant, replace-one
//! neighbours, a noise schedule, BandMF) is refused with exit code 2 naming the key. The RDP of
//! random allocation is tested in `src/privacy/accountant/rdp/random_allocation.rs`, the sampler
//! in `tests/data_sampler.rs`, resumption in `src/train/checkpoint/tests.rs`.

use predicates::prelude::*;

#[path = "support/cli.rs"]
mod cli;
use cli::{account_epsilon, account_json, dpx, summary_column, write};

const BASE: &str = r#"
[experiment]
name = "bib"
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
sampler = "balls_in_bins"
batch_size = 150
learning_rate = 0.2
eval_every_epochs = 2

[clip]
clip_norm = 1.0

[privacy]
epsilon = 2.0
delta = 1e-5
accountant = "rdp"
"#;

/// The σ and ε a finished run wrote: guaranteed, calibrated to BASE's ε = 2.
fn guaranteed_at_eps_2(out: &std::path::Path) -> (String, f64) {
    assert_eq!(summary_column(out, "epsilon_guaranteed")[0], "true");
    let sigma = summary_column(out, "noise_multiplier")[0].clone();
    let epsilon: f64 = summary_column(out, "epsilon")[0].parse().unwrap();
    assert!(
        (epsilon - 2.0).abs() < 1e-3,
        "calibrated to ε = 2, wrote {epsilon}"
    );
    (sigma, epsilon)
}

/// `dpx account` flags for BASE's plan: 6 epochs of balls-in-bins batches of 150 from 2,000
/// examples (⌈2000/150⌉ = 14 steps each).
const PLAN: [&str; 8] = [
    "--sampling",
    "balls-in-bins",
    "--dataset-size",
    "2000",
    "--batch-size",
    "150",
    "--epochs",
    "6",
];

#[test]
fn balls_in_bins_runs_are_one_allocation_per_epoch_and_guaranteed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "bib.toml", BASE);
    // ⌈2000 / 150⌉ = 14 batches per epoch, 6 epochs: 84 steps, 6 random allocations.
    dpx()
        .args(["run", "--threads", "1", "--out"])
        .arg(dir.path().join("1"))
        .arg(&cfg)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "balls in bins, 14 batches per epoch (each example in one, uniformly): accounted as one random allocation per epoch, 6 in all",
        ));
    dpx()
        .args(["run", "--quiet", "--threads", "2", "--out"])
        .arg(dir.path().join("2"))
        .arg(&cfg)
        .assert()
        .success();
    let a = std::fs::read(dir.path().join("1/metrics.csv")).unwrap();
    let b = std::fs::read(dir.path().join("2/metrics.csv")).unwrap();
    assert!(a == b, "metrics.csv depends on the thread count");
    let out = dir.path().join("1");
    assert_eq!(summary_column(&out, "steps")[0], "84");
    let (sigma, epsilon) = guaranteed_at_eps_2(&out);
    let sigma = sigma.as_str();
    let planned = account_epsilon(&[&PLAN[..], &["--noise-multiplier", sigma]].concat());
    assert!(
        (planned - epsilon).abs() <= 1e-12 * epsilon,
        "run ε {epsilon} vs 6 allocations of 14 steps: {planned}"
    );
    // The same steps accounted as Poisson sampling at q = 150/2000 need a larger σ for ε = 2
    // under RDP (random allocation is at least as private here).
    let poisson = account_json(&["--epsilon", "2", "--sample-rate", "0.075", "--steps", "84"]);
    let sigma: f64 = sigma.parse().unwrap();
    assert!(
        sigma < poisson["noise_multiplier"].as_f64().unwrap(),
        "balls-in-bins σ {sigma} vs Poisson {poisson}"
    );
}

#[test]
fn uncovered_combinations_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "gdp",
            BASE.replace("accountant = \"rdp\"", "accountant = \"gdp\""),
            "privacy.accountant",
        ),
        (
            "replace_one",
            format!("{BASE}neighbouring = \"replace_one\"\n"),
            "privacy.neighbouring",
        ),
        (
            "schedule",
            format!("{BASE}\n[noise]\nschedule = \"exponential\"\ndecay = 0.001\n"),
            "noise.schedule",
        ),
        (
            "bandmf",
            format!("{BASE}\n[noise]\nmechanism = \"bandmf\"\nbands = 4\n"),
            "noise.mechanism",
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
    // dpx account: the flags the analysis needs.
    dpx()
        .args([
            "account",
            "--delta",
            "1e-5",
            "--noise-multiplier",
            "1",
            "--sample-rate",
            "0.01",
            "--steps",
            "100",
            "--sampling",
            "balls-in-bins",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--dataset-size"));
    dpx()
        .args([
            "account",
            "--delta",
            "1e-5",
            "--noise-multiplier",
            "1",
            "--dataset-size",
            "1000",
            "--batch-size",
            "10",
            "--steps",
            "100",
            "--sampling",
            "balls-in-bins",
            "--accountant",
            "gdp",
        ])
        .assert()
        .code(2);
}

#[test]
fn balls_in_bins_with_the_pld_accountant_is_guaranteed_and_tighter_than_rdp() {
    // The PLD of random allocation (src/privacy/accountant/pld/allocation.rs): a run calibrated
    // with it is guaranteed, writes the ε of `dpx account --accountant pld` for its plan, and
    // needs less noise than the RDP analysis of the same epochs.
    let dir = tempfile::tempdir().unwrap();
    let text = BASE
        .replace("accountant = \"rdp\"", "accountant = \"pld\"")
        .replace("seeds = [0, 1]", "seeds = [0]");
    let cfg = write(dir.path(), "pld.toml", &text);
    let out = dir.path().join("pld");
    dpx()
        .args(["run", "--quiet", "--threads", "1", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success();
    let (sigma, epsilon) = guaranteed_at_eps_2(&out);
    let sigma = sigma.as_str();
    let planned = account_epsilon(
        &[
            &PLAN[..],
            &["--accountant", "pld", "--noise-multiplier", sigma],
        ]
        .concat(),
    );
    assert!(
        (planned - epsilon).abs() <= 1e-9 * epsilon,
        "run ε {epsilon} vs dpx account --accountant pld: {planned}"
    );
    let rdp = account_json(&[&PLAN[..], &["--epsilon", "2", "--accountant", "rdp"]].concat());
    let sigma: f64 = sigma.parse().unwrap();
    assert!(
        sigma < rdp["noise_multiplier"].as_f64().unwrap(),
        "PLD σ {sigma} vs RDP {rdp}"
    );
}
