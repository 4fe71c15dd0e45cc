//! The dynamic-noise paper's `dyn` and `exp` from the influence q_t estimated by retraining
//! (`noise.schedule = "influence_retrained"` / `"influence_retrained_exp"`, Hong, Wang, Zhou §3;
//! docs/methods/dynamic_noise.md §1.2(h)): on the squared loss the estimate agrees with the
//! analytic influence (computed independently by matrix powers) in scale and shape; the schedule
//! spends the uniform schedule's budget; runs are the same for 1 and 2 threads; refusals exit 2
//! naming the key.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/influence.rs"]
mod influence;

use cli::{dpx, write};
use dpx::train::influence_retrain::retrained_influence;
use dpx::train::prepare::Experiment;
use influence::{build, influence_by_powers};

/// The zCDP-paper budget R = Σ 1/σ_t² at (4, 1e-8).
const BUDGET_R: f64 = 0.392_703_706_880_567_4;

/// Full-batch GD on a 2-class Gaussian mixture (n = 400, 6 features), linear model; `model` and
/// `noise` are extra lines of those sections.
fn config(steps: u64, model: &str, train: &str, noise: &str, allow: bool) -> String {
    format!(
        r#"
[experiment]
name = "retrained"
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
{model}

[train]
steps = {steps}
sampler = "poisson"
expected_batch_size = 400
learning_rate = 0.1
eval_every_steps = 1
{train}

[clip]
clip_norm = 1000.0

[noise]
{noise}

[privacy]
epsilon = 4.0
delta = 1e-8
accountant = "zcdp-paper"
"#
    )
}

#[test]
fn on_the_squared_loss_the_retrained_influence_is_the_analytic_one() {
    // Every step estimated, 64 antithetic pairs, σ_t from 1 to 10: with C = 1000 no gradient is
    // clipped, so the loss is exactly quadratic in the noise and the estimate's only error is the
    // spread of ½η²σ²(C/B)² νᵀAᵀHAν over the pairs' noise vectors ν.
    const T: usize = 30;
    let text = config(
        T as u64,
        "loss = \"squared\"",
        "optimizer = \"sgd\"",
        "schedule = \"influence_retrained\"\nretrain_steps = 0\nretrain_repeats = 64\nretrain_points = 3\nretrain_sigma_min = 1.0\nretrain_sigma_max = 10.0",
        true,
    );
    let exp = build(&text);
    let est = retrained_influence(&exp.spec, &exp.model, &exp.data.train)
        .unwrap()
        .expect("an influence_retrained run");
    assert_eq!(est.estimated_steps, (0..T as u64).collect::<Vec<_>>());
    assert_eq!(est.raised, 0);
    assert_eq!(est.clipped_fraction, 0.0);
    // The noise of the mean gradient is σ_t C/B ν (B = 400): its expected share of the final loss
    // is ½ η² (C/B)² q_t σ_t² (docs/methods/dynamic_noise.md §1.2(g)), so c₂ = ½ η² (C/B)² q_t.
    let q = influence_by_powers(&exp, 0.1, T);
    let scale = 0.5 * 0.1f64.powi(2) * (1000.0f64 / 400.0).powi(2);
    for (t, (&qt, (&c2, &se))) in q
        .iter()
        .zip(est.estimates.iter().zip(&est.relative_se))
        .enumerate()
    {
        let ratio = c2 / (scale * qt);
        // Within four of the estimate's own standard errors (and a 2% floor for the f32
        // parameters' rounding); the standard errors themselves must be small enough for this
        // to be a test of the shape (q_t spans a factor of 15 over the run).
        assert!(se < 0.15, "step {t}: relative SE {se}");
        assert!(
            (ratio - 1.0).abs() < 4.0 * se + 0.02,
            "step {t}: retrained / analytic = {ratio} (relative SE {se})"
        );
    }
    // The shape over the run: q_t grows 15-fold from the first step to the last here, and the
    // least-squares slope of ln ĉ₂ against ln q_t is 1 (measured 0.97 with the per-step errors
    // of about 7% above; a flat estimate would give 0, one of the wrong power of q_t 0.5 or 2).
    assert!(q[T - 1] > 10.0 * q[0], "{q:?}");
    let (lx, ly): (Vec<f64>, Vec<f64>) = (0..T).map(|t| (q[t].ln(), est.estimates[t].ln())).unzip();
    let (mx, my) = (
        lx.iter().sum::<f64>() / T as f64,
        ly.iter().sum::<f64>() / T as f64,
    );
    let sxy: f64 = lx.iter().zip(&ly).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = lx.iter().map(|a| (a - mx).powi(2)).sum();
    let slope = sxy / sxx;
    assert!((slope - 1.0).abs() < 0.15, "slope of ln q̂ on ln q: {slope}");
    // The plan is Lemma 4.1 on the estimate: σ_t⁴ q̂_t is the same at every step.
    let sigma: Vec<f64> = (0..T as u64)
        .map(|t| exp.plan.noise_multiplier_at(t).unwrap())
        .collect();
    let c = sigma[0].powi(4) * est.influence[0];
    for (t, (s, qt)) in sigma.iter().zip(&est.influence).enumerate() {
        let v = s.powi(4) * qt;
        assert!((v - c).abs() < 1e-9 * c, "step {t}: {v} vs {c}");
    }
}

#[test]
fn dyn_and_exp_spend_the_uniform_budget_and_are_not_guaranteed() {
    let noise = "retrain_steps = 6\nretrain_repeats = 2\nretrain_points = 3";
    let sigmas = |schedule: &str| -> (Experiment, Vec<f64>) {
        let exp = build(&config(
            20,
            "",
            "optimizer = \"sgd\"",
            &format!("schedule = \"{schedule}\"\n{noise}"),
            true,
        ));
        let s = (0..20)
            .map(|t| exp.plan.noise_multiplier_at(t).unwrap())
            .collect();
        (exp, s)
    };
    let uniform = build(&config(20, "", "optimizer = \"sgd\"", "", true));
    let u = uniform.plan.noise_multiplier_at(0).unwrap();
    // Uniform at (4, 1e-8) over 20 steps: σ = √(T/R).
    assert!((u - (20.0 / BUDGET_R).sqrt()).abs() < 1e-5 * u, "{u}");
    for schedule in ["influence_retrained", "influence_retrained_exp"] {
        let (exp, s) = sigmas(schedule);
        let r: f64 = s.iter().map(|v| v.powi(-2)).sum();
        assert!(
            (r - BUDGET_R).abs() < 3e-6 * r,
            "{schedule}: Σ 1/σ_t² = {r}"
        );
        assert!(s.iter().all(|v| v.is_finite() && *v > 0.0));
        let p = exp.plan.privacy.as_ref().unwrap();
        assert!(!p.epsilon_guaranteed, "{schedule}");
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains(schedule) && w.contains("retraining")),
            "{:?}",
            p.warnings
        );
        // ε of the whole planned run is the budget's: the same as uniform's.
        let eps_of = |e: &Experiment| {
            e.plan
                .epsilon_of(&e.plan.planned_ledger(20))
                .unwrap()
                .unwrap()
                .epsilon
        };
        let (eps, eps_u) = (eps_of(&exp), eps_of(&uniform));
        assert!(
            (eps - eps_u).abs() < 1e-6 && (eps - 4.0).abs() < 1e-3,
            "{eps} {eps_u}"
        );
        if schedule == "influence_retrained_exp" {
            let ratio = s[1] / s[0];
            for w in s.windows(2) {
                assert!((w[1] / w[0] - ratio).abs() < 1e-12);
            }
        }
    }
}

#[test]
fn a_run_is_the_same_for_one_and_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "r.toml",
        &config(
            12,
            "",
            "optimizer = \"sgd\"",
            "schedule = \"influence_retrained\"\nretrain_steps = 4\nretrain_repeats = 2\nretrain_points = 3\nretrain_seed = 7",
            true,
        ),
    );
    for threads in ["1", "2"] {
        dpx()
            .args(["run", "--quiet", "--threads", threads, "--out"])
            .arg(dir.path().join(threads))
            .arg(&cfg)
            .assert()
            .success();
    }
    let a = std::fs::read(dir.path().join("1/metrics.csv")).unwrap();
    let b = std::fs::read(dir.path().join("2/metrics.csv")).unwrap();
    assert!(a == b, "metrics.csv depends on the thread count");
    // The schedule is not uniform (the estimate did something) and is in the metrics.
    let text = String::from_utf8(a).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "noise_multiplier")
        .unwrap();
    let sigma: Vec<f64> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(col)?.parse().ok())
        .collect();
    assert!(sigma.len() >= 12, "{sigma:?}");
    assert!(
        sigma.iter().any(|s| (s / sigma[0] - 1.0).abs() > 1e-3),
        "{sigma:?}"
    );
}

#[test]
fn refusals_name_the_key_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let sched = "schedule = \"influence_retrained\"\nretrain_steps = 3\nretrain_repeats = 1";
    let sgd = "optimizer = \"sgd\"";
    let cases = [
        // The estimate's runs are private gradient steps of a fixed size.
        (
            config(10, "", "optimizer = \"adam\"", sched, true),
            "train.optimizer",
        ),
        // A statistic of the private data: only with the explicit opt-out.
        (
            config(10, "", sgd, sched, false),
            "data.allow_nonprivate_statistics",
        ),
        // Not full batch.
        (
            config(10, "", sgd, sched, true)
                .replace("expected_batch_size = 400", "expected_batch_size = 100"),
            "train.sampler",
        ),
        // An empty sweep.
        (
            config(
                10,
                "",
                sgd,
                &format!("{sched}\nretrain_sigma_min = 50.0\nretrain_sigma_max = 20.0"),
                true,
            ),
            "noise.retrain_sigma_max",
        ),
        // A key of another schedule.
        (
            config(10, "", sgd, "retrain_repeats = 3", true),
            "noise.retrain_repeats",
        ),
    ];
    for (i, (text, key)) in cases.iter().enumerate() {
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
        assert!(err.contains(key), "case {i}: {err}");
        assert!(
            !dir.path()
                .join(format!("out{i}"))
                .join("summary.csv")
                .exists()
        );
    }
}
