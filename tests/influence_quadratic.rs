//! The dynamic-noise paper's `dyn` and `exp` schedules on the squared loss
//! (`noise.schedule = "influence_quadratic"` / `"influence_quadratic_exp"`, Hong, Wang, Zhou;
//! docs/methods/dynamic_noise.md §1.2(g)): the planned σ_t against Lemma 4.1 on an influence
//! computed independently from the training data by matrix powers, the budget, the guarantee
//! flag, training, and the refusals (exit 2, naming the key).

#[path = "support/cli.rs"]
mod cli;
#[path = "support/influence.rs"]
mod influence;

use std::sync::atomic::AtomicBool;

use cli::{dpx, write};
use dpx::train::prepare::Experiment;
use dpx::train::{SeedEnd, Silent, train_seed};
use influence::{build, influence_by_powers};

const STEPS: u64 = 30;

/// Full-batch GD on a 2-class Gaussian mixture (n = 400, 6 features), linear model, squared loss.
fn config(schedule: &str, extra_model: &str, allow: bool, lr: f64) -> String {
    format!(
        r#"
[experiment]
name = "dyn"
seeds = [0]

[data]
dataset = "gaussian_mixture"
max_norm = 3.0
allow_nonprivate_statistics = {allow}

[data.synthetic]
n_train = 400
n_test = 100
n_features = 6
n_classes = 2
separation = 2.0
seed = 5

[model]
architecture = "logistic"
{extra_model}

[train]
steps = {STEPS}
sampler = "poisson"
expected_batch_size = 400
optimizer = "sgd"
learning_rate = {lr}
eval_every_steps = 10

[clip]
clip_norm = 4.0

[noise]
schedule = "{schedule}"

[privacy]
epsilon = 4.0
delta = 1e-8
accountant = "zcdp-paper"
"#
    )
}

#[test]
fn dyn_is_lemma_4_1_on_the_training_data_hessian_within_the_budget() {
    let eta = 0.1;
    let exp = build(&config(
        "influence_quadratic",
        "loss = \"squared\"",
        true,
        eta,
    ));
    let p = exp.plan.privacy.as_ref().unwrap();
    let sigma: Vec<f64> = (0..STEPS)
        .map(|t| exp.plan.noise_multiplier_at(t).unwrap())
        .collect();
    let q = influence_by_powers(&exp, eta, STEPS as usize);
    // σ_t² ∝ 1/√q_t: σ_t⁴ q_t is the same at every step.
    let c = sigma[0].powi(4) * q[0];
    for t in 0..STEPS as usize {
        let v = sigma[t].powi(4) * q[t];
        assert!((v - c).abs() < 1e-9 * c, "step {t}: {v} vs {c}");
    }
    // Decaying: the noise of early steps is damped by the later ones.
    assert!(sigma.windows(2).all(|w| w[1] < w[0]), "{sigma:?}");
    // The zCDP-paper budget at (4, 1e-8): Σ 1/σ_t² = R = 0.3927037068805674.
    let r: f64 = sigma.iter().map(|s| s.powi(-2)).sum();
    assert!((r - 0.392_703_706_880_567_4).abs() < 3e-6 * r, "{r}");
    // Fitted on the private data without noise: not a guarantee, and said so.
    assert!(!p.epsilon_guaranteed);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("influence_quadratic") && w.contains("Hessian")),
        "{:?}",
        p.warnings
    );
    // It trains.
    match train_seed(&exp, 0, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(res) => assert!(res.rows.last().unwrap().test_loss.is_finite()),
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
}

#[test]
fn exp_is_the_exponential_fitted_to_dyn_at_the_same_budget() {
    let dyn_exp = build(&config(
        "influence_quadratic",
        "loss = \"squared\"",
        true,
        0.1,
    ));
    let fit = build(&config(
        "influence_quadratic_exp",
        "loss = \"squared\"",
        true,
        0.1,
    ));
    let sigma = |e: &Experiment| -> Vec<f64> {
        (0..STEPS)
            .map(|t| e.plan.noise_multiplier_at(t).unwrap())
            .collect()
    };
    let (d, f) = (sigma(&dyn_exp), sigma(&fit));
    // A constant ratio σ_{t+1}/σ_t < 1.
    let ratio = f[1] / f[0];
    assert!(ratio < 1.0);
    for w in f.windows(2) {
        assert!((w[1] / w[0] - ratio).abs() < 1e-12);
    }
    // The least-squares line through ln σ_t of dyn has that slope.
    let n = STEPS as f64;
    let mt = (n - 1.0) / 2.0;
    let ly: Vec<f64> = d.iter().map(|s| s.ln()).collect();
    let my = ly.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (t, y) in ly.iter().enumerate() {
        sxy += (t as f64 - mt) * (y - my);
        sxx += (t as f64 - mt).powi(2);
    }
    assert!((ratio.ln() - sxy / sxx).abs() < 1e-12);
    let r: f64 = f.iter().map(|s| s.powi(-2)).sum();
    assert!((r - 0.392_703_706_880_567_4).abs() < 3e-6 * r);
}

#[test]
fn refusals_name_the_key_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // Cross-entropy is not the quadratic the influence is derived for.
        (config("influence_quadratic", "", true, 0.1), "model.loss"),
        // A statistic of the private data: only with the explicit opt-out.
        (
            config("influence_quadratic", "loss = \"squared\"", false, 0.1),
            "data.allow_nonprivate_statistics",
        ),
        // η·λ_max ≥ 2: GD diverges on the quadratic.
        (
            config("influence_quadratic", "loss = \"squared\"", true, 50.0),
            "diverges",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = write(dir.path(), &format!("c{i}.toml"), text);
        let out = dpx()
            .args(["run"])
            .arg(&path)
            .args(["--out"])
            .arg(dir.path().join(format!("out{i}")))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}: {err}");
        assert!(err.contains("noise.schedule"), "case {i}: {err}");
        assert!(err.contains(needle), "case {i}: {err}");
        assert!(
            !dir.path()
                .join(format!("out{i}"))
                .join("summary.csv")
                .exists()
        );
    }
    // `dpx account --config` plans it from the whole training split, like `dpx run`.
    let path = write(
        dir.path(),
        "ok.toml",
        &config("influence_quadratic", "loss = \"squared\"", true, 0.1),
    );
    dpx()
        .args(["account", "--config"])
        .arg(&path)
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "noise schedule influence_quadratic",
        ));
}
