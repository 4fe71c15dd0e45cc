//! `[accelerated]` runs end to end (Kuru et al. 2020; docs/methods/accelerated.md): the events a run records
//! equal the plan's, ε sums to the budget, the excess risk uses a correct F*, the two heavy-ball
//! forms give the same run, determinism, and clear errors for bad configs and data.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use dpx::train::prepare::Experiment;
use dpx::train::{SeedEnd, SeedResult, Silent, train_seed};

/// A small version of the paper's problem (n = 2000, d = 20) with `accelerated` as the
/// `[accelerated]` table and `batch` the batch size.
fn config(dir: &Path, name: &str, accelerated: &str, batch: usize, steps: u64) -> PathBuf {
    let text = format!(
        r#"
[experiment]
name = "{name}"
seeds = [0, 1]
[data]
dataset = "logistic_synthetic"
[data.synthetic]
n_train = 2000
n_test = 500
n_features = 20
seed = 1
[model]
architecture = "logistic"
l2 = 0.02
[train]
steps = {steps}
sampler = "fixed_size"
batch_size = {batch}
eval_every_steps = 5
[accelerated]
{accelerated}
"#
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `dpx account --config CFG [--json]` with `dir` as the data directory.
fn account_config(dir: &Path, cfg: &Path, json: bool) -> std::process::Output {
    let mut cmd = assert_cmd::Command::cargo_bin("dpx").unwrap();
    cmd.args(["account", "--config"]).arg(cfg);
    if json {
        cmd.arg("--json");
    }
    cmd.env("DPX_DATA_DIR", dir).output().unwrap()
}

fn build(dir: &Path, cfg: &Path) -> Experiment {
    let spec = dpx::config::load(cfg).unwrap();
    Experiment::build(spec, dir).unwrap()
}

fn train(exp: &Experiment, seed: u64) -> SeedResult {
    match train_seed(exp, seed, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(r) => *r,
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
}

#[test]
fn recorded_events_equal_the_planned_events_and_spend_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    for (name, acc, batch) in [
        (
            "nag_opt_full",
            "method = \"nesterov\"\nepsilon = 1.0\nnoise_dividing = true",
            2000,
        ),
        (
            "masg_opt_swor",
            "method = \"masg\"\nepsilon = 1.0\nnoise_dividing = true\nselect_steps = false",
            200,
        ),
        ("gd_swor", "method = \"gd\"\nepsilon = 2.0", 100),
    ] {
        let cfg = config(dir.path(), name, acc, batch, 60);
        let exp = build(dir.path(), &cfg);
        let acc = exp.accelerated.as_ref().unwrap();
        let plan = &acc.plan;
        let planned = plan.planned_ledger(plan.steps);
        let res = train(&exp, 3);
        assert_eq!(res.ledger, planned, "{name}");
        let eps = plan.epsilon_of(&planned).unwrap();
        let last = res.rows.last().unwrap();
        assert_eq!(last.epsilon, Some(eps), "{name}");
        assert_eq!(last.step, plan.steps);
        // The whole budget is spent, exactly (the split is inverted exactly also for m < n).
        assert!((eps - plan.epsilon).abs() < 1e-12, "{name}: {eps}");
        let sum: f64 = plan.step_epsilons.iter().sum();
        assert!((sum - plan.epsilon).abs() < 1e-12, "{name}: {sum}");
        assert_eq!(res.summary.epsilon, Some(eps));
        // The RDP accountant's ε of the same releases is reported beside the pure ε.
        let rdp = res.summary.epsilon_rdp.unwrap();
        assert!(rdp.is_finite() && rdp > 0.0, "{name}: {rdp}");
    }
}

#[test]
fn noise_dividing_gives_late_steps_the_budget_and_selects_fewer_steps() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "opt",
        "method = \"nesterov\"\nepsilon = 1.0\nnoise_dividing = true",
        2000,
        1000,
    );
    let exp = build(dir.path(), &cfg);
    let plan = &exp.accelerated.as_ref().unwrap().plan;
    assert!(plan.steps < 1000, "T' = {}", plan.steps);
    assert_eq!(plan.scales.len() as u64, plan.steps);
    for w in plan.step_epsilons.windows(2) {
        assert!(w[1] > w[0]);
    }
    for t in 1..plan.scales.len() {
        assert!(plan.laplace_scale_at(t) < plan.laplace_scale_at(t - 1));
    }
    // Full batch: b_t = S1/(n ε_t) exactly (eq. 31).
    let b0 = 40.0 / (2000.0 * plan.step_epsilons[0]);
    assert!((plan.laplace_scale_at(0) / b0 - 1.0).abs() < 1e-12);
}

#[test]
fn heavy_ball_forms_give_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let a = build(
        dir.path(),
        &config(
            dir.path(),
            "hb",
            "method = \"heavy_ball\"\nepsilon = 1.0",
            500,
            40,
        ),
    );
    let b = build(
        dir.path(),
        &config(
            dir.path(),
            "hb_ema",
            "method = \"heavy_ball_ema\"\nepsilon = 1.0",
            500,
            40,
        ),
    );
    let ra = train(&a, 7);
    let rb = train(&b, 7);
    assert_eq!(ra.ledger, rb.ledger);
    for (x, y) in ra.rows.iter().zip(&rb.rows) {
        let (fx, fy) = (x.objective.unwrap(), y.objective.unwrap());
        assert!((fx - fy).abs() <= 1e-9 * fx.abs(), "{fx} vs {fy}");
    }
}

#[test]
fn a_huge_budget_converges_to_the_optimum_and_runs_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "nag_big_eps",
        "method = \"nesterov\"\nepsilon = 1e7",
        2000,
        600,
    );
    let exp = build(dir.path(), &cfg);
    let acc = exp.accelerated.as_ref().unwrap();
    // F* was cached under the data directory, one file per dataset and μ.
    let cached = std::fs::read_dir(dir.path().join("cache/binary_logistic_optimum"))
        .unwrap()
        .count();
    assert_eq!(cached, 1);
    let r = train(&exp, 0);
    let first = r.rows[0].excess_risk.unwrap();
    let last = r.rows.last().unwrap().excess_risk.unwrap();
    assert!(first > 10.0, "x_0 = 10·1 starts far away: {first}");
    assert!((-1e-9..1e-6).contains(&last), "excess risk {last}");
    assert!((4.0..6.0).contains(&acc.plan.constants.smoothness));
    // Same seed, same rows; another seed, other noise.
    assert_eq!(train(&exp, 0).rows, r.rows);
    let small = build(
        dir.path(),
        &config(
            dir.path(),
            "nag_eps1",
            "method = \"nesterov\"\nepsilon = 1.0",
            2000,
            30,
        ),
    );
    assert_ne!(train(&small, 0).rows, train(&small, 1).rows);
    // A second build reads F* back from the cache: the same value.
    let again = build(dir.path(), &cfg);
    assert_eq!(
        again.accelerated.as_ref().unwrap().optimum_objective,
        acc.optimum_objective
    );
    assert!(
        again
            .accelerated
            .unwrap()
            .optimum_note
            .contains("read from")
    );
}

#[test]
fn the_code_compatible_laplace_parameter_reports_the_larger_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "compat",
        "method = \"gd\"\nepsilon = 1.0\nlaplace_parameter = \"std_compat\"",
        2000,
        20,
    );
    let exp = build(dir.path(), &cfg);
    let plan = &exp.accelerated.as_ref().unwrap().plan;
    let eps = plan.epsilon_of(&plan.planned_ledger(plan.steps)).unwrap();
    assert!((eps - 2f64.sqrt()).abs() < 1e-9, "{eps}");
    assert!(!plan.warnings.is_empty());
}

#[test]
fn bad_configs_and_data_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let load_err = |name: &str, acc: &str, extra: &str| -> String {
        let cfg = config(dir.path(), name, acc, 100, 10);
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str(extra);
        std::fs::write(&cfg, text).unwrap();
        match dpx::config::load(&cfg) {
            Ok(spec) => match Experiment::build(spec, dir.path()) {
                Ok(_) => panic!("{name}: accepted"),
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        }
    };
    let e = load_err(
        "a",
        "method = \"gd\"\nepsilon = 1.0",
        "[privacy]\nepsilon = 1.0\n",
    );
    assert!(e.contains("privacy"), "{e}");
    let e = load_err(
        "b",
        "method = \"gd\"\nepsilon = 1.0\nnoise_dividing = true",
        "",
    );
    assert!(e.contains("accelerated.noise_dividing"), "{e}");
    let e = load_err(
        "c",
        "method = \"nesterov\"\nepsilon = 1.0\nsensitivity = \"l1_clip\"",
        "",
    );
    assert!(e.contains("accelerated.l1_clip_norm"), "{e}");
    let e = load_err("d", "method = \"nesterov\"\nepsilon = 0.0", "");
    assert!(e.contains("accelerated.epsilon"), "{e}");
    let e = load_err(
        "e",
        "method = \"nesterov\"\nepsilon = 1.0\nstep_constant = 2.0",
        "",
    );
    assert!(e.contains("accelerated.step_constant"), "{e}");
    let e = load_err("f", "method = \"newton\"\nepsilon = 1.0", "");
    assert!(e.contains("newton"), "{e}");
    // Features with ‖u‖₁ up to 20 break a declared bound of 5: refused, naming the key.
    let e = load_err(
        "g",
        "method = \"nesterov\"\nepsilon = 1.0\nfeature_l1_bound = 5.0",
        "",
    );
    assert!(e.contains("accelerated.feature_l1_bound"), "{e}");
    // With L1 clipping at 5 the same data is fine, and S1 = 10.
    let cfg = config(
        dir.path(),
        "h",
        "method = \"nesterov\"\nepsilon = 1.0\nsensitivity = \"l1_clip\"\nl1_clip_norm = 5.0",
        100,
        10,
    );
    let exp = build(dir.path(), &cfg);
    assert_eq!(exp.accelerated.as_ref().unwrap().plan.l1_sensitivity, 10.0);
    train(&exp, 0);
}

#[test]
fn account_config_prints_the_plan_of_an_accelerated_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "acct",
        "method = \"nesterov\"\nepsilon = 1.0\nnoise_dividing = true",
        200,
        300,
    );
    let out = account_config(dir.path(), &cfg, true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["steps"].as_u64().unwrap();
    assert!(steps < 300);
    assert!((v["epsilon"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    let table = v["steps_table"].as_array().unwrap();
    assert_eq!(table.len() as u64, steps);
    let last = &table[table.len() - 1];
    assert!((last["epsilon"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    // T' minimises the printed score.
    let scores: Vec<f64> = v["step_scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_f64().unwrap())
        .collect();
    assert_eq!(scores.len(), 300);
    let best = scores[steps as usize - 1];
    assert!(scores.iter().all(|s| *s >= best));
    assert!(v["epsilon_rdp"].as_f64().unwrap() > 0.0);
    // A bad key is a one-line error with exit code 2.
    let bad = config(
        dir.path(),
        "bad",
        "method = \"nesterov\"\nepsilon = -1.0",
        200,
        10,
    );
    let out = account_config(dir.path(), &bad, false);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("accelerated.epsilon"));
}

#[test]
fn account_config_prints_heavy_balls_certified_rates() {
    // The rates of optim::certificate for the run's α = c/L, β and the plan's μ, L: Prop. 3.4's
    // LMI certifies small momenta at κ ≈ 255, never below the worst quadratic's rate, and nothing
    // for NAG's β; Nesterov's runs print no certificate.
    let dir = tempfile::tempdir().unwrap();
    let json = |name: &str, acc: &str| -> serde_json::Value {
        let cfg = config(dir.path(), name, acc, 2000, 50);
        let out = account_config(dir.path(), &cfg, true);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let v = json(
        "hb_small",
        "method = \"heavy_ball\"\nepsilon = 1.0\nmomentum = 0.3",
    );
    let r = &v["rate_certificate"];
    let (alpha, l, mu) = (
        r["step_size"].as_f64().unwrap(),
        r["smoothness"].as_f64().unwrap(),
        r["strong_convexity"].as_f64().unwrap(),
    );
    assert!((alpha * l - 1.0).abs() < 1e-12 && mu == 0.02);
    let certified = r["certified_rate"].as_f64().unwrap();
    let quadratic = r["quadratic_rate"].as_f64().unwrap();
    assert!(certified >= quadratic - 1e-6 && certified < 1.0, "{r}");
    let v = json("hb_nag_beta", "method = \"heavy_ball\"\nepsilon = 1.0");
    assert!(
        v["rate_certificate"]["certified_rate"].is_null(),
        "{}",
        v["rate_certificate"]
    );
    let v = json("gd", "method = \"gd\"\nepsilon = 1.0");
    let r = &v["rate_certificate"];
    // GD: the LMI's rate is the exact 1 − αμ.
    let gd = 1.0 - r["step_size"].as_f64().unwrap() * mu;
    assert!(
        (r["certified_rate"].as_f64().unwrap() - gd).abs() < 2e-6,
        "{r}"
    );
    let v = json("nag", "method = \"nesterov\"\nepsilon = 1.0");
    assert!(v.get("rate_certificate").is_none());
}

#[test]
fn rounding_never_writes_more_than_the_budget_and_overflowing_budgets_are_refused() {
    // Σ ε_t in floating point gave 0.30000000000000004 for a budget of 0.3 (marked
    // guaranteed): the scales are widened by a few ulps until the accounted ε is within it.
    let dir = tempfile::tempdir().unwrap();
    for (name, acc, batch) in [
        ("gd_03", "method = \"gd\"\nepsilon = 0.3", 2000),
        (
            "nag_03",
            "method = \"nesterov\"\nepsilon = 0.3\nnoise_dividing = true",
            2000,
        ),
        ("gd_swor_03", "method = \"gd\"\nepsilon = 0.3", 100),
        ("gd_07", "method = \"gd\"\nepsilon = 0.7", 100),
    ] {
        let cfg = config(dir.path(), name, acc, batch, 30);
        let exp = build(dir.path(), &cfg);
        let plan = &exp.accelerated.as_ref().unwrap().plan;
        let eps = plan.epsilon_of(&plan.planned_ledger(plan.steps)).unwrap();
        assert!(eps <= plan.epsilon, "{name}: {eps} > {}", plan.epsilon);
        assert!(plan.epsilon - eps < 1e-12, "{name}: {eps}");
        let res = train(&exp, 0);
        assert!(res.summary.epsilon.unwrap() <= plan.epsilon, "{name}");
    }
    // ε = 1e300: the per-step inversion overflows (ε = inf would be written): refused.
    let cfg = config(
        dir.path(),
        "huge",
        "method = \"gd\"\nepsilon = 1e300",
        100,
        30,
    );
    let spec = dpx::config::load(&cfg).unwrap();
    let err = match Experiment::build(spec, dir.path()) {
        Ok(_) => panic!("a budget of 1e300 was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("accelerated.epsilon"), "{err}");
}
