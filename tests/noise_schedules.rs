//! Noise schedules through configs: calibration under each accountant (the papers' test
//! vectors), conservativeness, budget exhaustion, rounding, and the ADP-SGD scale-invariance
//! determinism check (docs/methods/adp_sgd.md §6 item 10).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use dpx::privacy::calibrate::epsilon_of;
use dpx::privacy::event::{DpEvent, EventLedger};
use dpx::train::plan::TrainingPlan;
use dpx::train::prepare::Experiment;
use dpx::train::{SeedEnd, Silent, train_seed};

/// A config on the synthetic Gaussian mixture (n_train = `n`); `train` and `rest` are appended
/// to the `[train]` table and the end.
fn config(n: usize, train: &str, rest: &str) -> String {
    format!(
        r#"
[experiment]
name = "sched"

[data]
dataset = "gaussian_mixture"
max_norm = 0.1

[data.synthetic]
n_train = {n}
n_test = 200
n_features = 5
n_classes = 2
separation = 2.0
seed = 3

[model]
architecture = "logistic"

[train]
learning_rate = 0.1
{train}

{rest}
"#
    )
}

fn plan(text: &str, n: usize) -> TrainingPlan {
    let spec = dpx::config::load_str(text, Path::new("test.toml")).expect("valid config");
    TrainingPlan::new(&spec, n).expect("plannable")
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

/// ε of the first `steps` planned steps under the plan's accountant.
fn plan_epsilon(p: &TrainingPlan, steps: u64) -> f64 {
    p.epsilon_of(&p.planned_ledger(steps))
        .unwrap()
        .unwrap()
        .epsilon
}

#[test]
fn zcdp_paper_uniform_full_batch_matches_the_paper() {
    // docs/methods/dynamic_noise.md §2: (4, 1e-8) -> rho = 0.196352, R = 0.392704, uniform T = 100 gives
    // sigma = sqrt(T/R) = 15.958 (mpmath, 40 digits: 15.957597242611548).
    let text = config(
        1000,
        "steps = 100\nexpected_batch_size = 1000",
        "[clip]\nclip_norm = 4.0\n[privacy]\nepsilon = 4.0\ndelta = 1e-8\naccountant = \"zcdp-paper\"",
    );
    let p = plan(&text, 1000);
    assert_eq!(p.sample_rate, 1.0);
    // Full batch: a plain Gaussian per step, no sampling wrapper.
    assert_eq!(
        p.planned_ledger(1).to_event(),
        DpEvent::gaussian(p.noise_multiplier_at(0).unwrap())
    );
    let sigma = p.privacy.as_ref().unwrap().noise_multiplier;
    assert!(rel(sigma, 15.957_597_242_611_548) < 2e-6, "{sigma}");
    assert_eq!(format!("{sigma:.3}"), "15.958");
}

#[test]
fn influence_gd_under_zcdp_paper_is_the_closed_form() {
    // docs/methods/dynamic_noise.md §1.2(c): sigma_t^2 = (gamma^{-T/2} - 1) gamma^{t/2} / (R (1 - sqrt gamma)),
    // paper t = 1..T; gamma = 0.9, T = 50, R = 0.3927037068805674 (mpmath, 40 digits):
    // sigma_1 = 24.671216191109319, sigma_25 = 13.111295803819328, sigma_50 = 6.786741373934802.
    let text = config(
        1000,
        "steps = 50\nexpected_batch_size = 1000",
        "[clip]\nclip_norm = 4.0\n[noise]\nschedule = \"influence_gd\"\ngamma = 0.9\n\
         [privacy]\nepsilon = 4.0\ndelta = 1e-8\naccountant = \"zcdp-paper\"",
    );
    let p = plan(&text, 1000);
    let s = |t| p.noise_multiplier_at(t).unwrap();
    assert!(rel(s(0), 24.671_216_191_109_32) < 2e-6, "{}", s(0));
    assert!(rel(s(24), 13.111_295_803_819_33) < 2e-6, "{}", s(24));
    assert!(rel(s(49), 6.786_741_373_934_802) < 2e-6, "{}", s(49));
    let summary = p.schedule_summary().unwrap();
    assert_eq!((summary.first, summary.last), (s(0), s(49)));
    assert_eq!((summary.max, summary.min), (s(0), s(49)));
}

/// The ADP-SGD test vector (docs/methods/adp_sgd.md §2.1): n = 50000, m = 256, T = 11760, delta = 1e-5,
/// G = C = 1, epsilon = 16 * 0.8 = 12.8, B_delta with m.
fn adp_vector(noise: &str) -> TrainingPlan {
    let text = config(
        50_000,
        "steps = 11760\nexpected_batch_size = 256\nlearning_rate = 1.0\n\
         [train.lr_schedule]\nkind = \"inv_sqrt\"\na = 20.0\nc = 1.0",
        &format!(
            "[clip]\nclip_norm = 1.0\n{noise}\n[privacy]\nepsilon = 12.8\ndelta = 1e-5\naccountant = \"adp-paper\""
        ),
    )
    .replace("learning_rate = 0.1\n", "");
    plan(&text, 50_000)
}

#[test]
fn adp_paper_test_vector_dp_sgd() {
    // DP-SGD: z = 10.1943 (docs/methods/adp_sgd.md §2.1).
    let p = adp_vector("");
    let z = p.noise_multiplier_at(0).unwrap();
    assert!(rel(z, 10.1943) < 1e-4, "{z}");
}

#[test]
fn adp_paper_test_vector_adp_s1() {
    // ADP with S1: z_0 = 2.869, z_{T-1} = 14.13 (docs/methods/adp_sgd.md §2.1; s_0 = 0.0112059 and
    // s_{T-1} = 0.0552036 times m = 256 give 2.86871 and 14.1321).
    let p = adp_vector("[noise]\nschedule = \"adp\"");
    let z0 = p.noise_multiplier_at(0).unwrap();
    let zl = p.noise_multiplier_at(11_759).unwrap();
    assert!(rel(z0, 0.011_205_9 * 256.0) < 1e-4, "{z0}");
    assert!(rel(zl, 0.055_203_6 * 256.0) < 1e-4, "{zl}");
    // The run's epsilon under the paper's bound is the target, from below.
    let eps = plan_epsilon(&p, p.steps);
    assert!(eps <= 12.8 && eps > 12.8 * (1.0 - 1e-5), "{eps}");
}

fn rdp_exponential(extra_noise: &str, privacy: &str) -> TrainingPlan {
    let text = config(
        1000,
        "steps = 300\nexpected_batch_size = 100",
        &format!(
            "[clip]\nclip_norm = 1.0\n[noise]\nschedule = \"exponential\"\ndecay = 0.003\n{extra_noise}\n\
             [privacy]\ndelta = 1e-5\n{privacy}"
        ),
    );
    plan(&text, 1000)
}

#[test]
fn calibrated_schedule_meets_the_target_and_is_tight() {
    let p = rdp_exponential("", "epsilon = 2.0");
    let kappa = p.privacy.as_ref().unwrap().noise_multiplier;
    // sigma_t = kappa * e^{-0.003 t} exactly as planned.
    let s299 = p.noise_multiplier_at(299).unwrap();
    assert!(rel(s299, kappa * (-0.003f64 * 299.0).exp()) < 1e-15);
    let eps = plan_epsilon(&p, 300);
    assert!(eps <= 2.0, "{eps}");
    // A slightly smaller scale spends more than the target: the search is tight.
    let mut ledger = EventLedger::new();
    for t in 0..300u64 {
        let sigma = 0.9999 * kappa * (-0.003f64 * t as f64).exp();
        ledger.record(DpEvent::poisson_sampled(0.1, DpEvent::gaussian(sigma)));
    }
    let factory = || {
        dpx::privacy::accountant::new_accountant(
            dpx::privacy::accountant::AccountantKind::Rdp,
            &dpx::privacy::accountant::AccountantOptions::default(),
        )
    };
    let smaller = epsilon_of(&factory, &ledger.to_event(), 1e-5)
        .unwrap()
        .epsilon;
    assert!(smaller > 2.0, "{smaller}");
}

#[test]
fn rounding_down_is_conservative_and_recorded() {
    let exact = rdp_exponential("", "epsilon = 2.0");
    let rounded = rdp_exponential("round_digits = 2", "epsilon = 2.0");
    let (pe, pr) = (
        exact.privacy.as_ref().unwrap(),
        rounded.privacy.as_ref().unwrap(),
    );
    for t in 0..300 {
        let r = pr.sigmas[t];
        let unrounded = pr.noise_multiplier * (-0.003f64 * t as f64).exp();
        assert!(r <= unrounded, "step {t}: {r} > {unrounded}");
        // Two significant digits.
        let scaled = r / 10f64.powi(r.log10().floor() as i32 - 1);
        assert!((scaled - scaled.round()).abs() < 1e-9, "{r}");
    }
    // The rounded run still meets the target; it needs a larger scale than the exact one.
    assert!(plan_epsilon(&rounded, 300) <= 2.0);
    assert!(pr.noise_multiplier >= pe.noise_multiplier);
    // Rounding merges consecutive equal steps.
    assert!(rounded.planned_ledger(300).runs().len() < 300);
}

#[test]
fn stop_when_spent_trains_the_longest_prefix_within_budget() {
    let p = rdp_exponential(
        "noise_multiplier = 1.5",
        "epsilon = 1.0\nstop_when_spent = true",
    );
    assert!(p.steps < 300, "{}", p.steps);
    assert!(plan_epsilon(&p, p.steps) <= 1.0);
    // One more step of the planned schedule would overspend.
    let mut longer = p.clone();
    longer.steps += 1;
    assert!(plan_epsilon(&longer, p.steps + 1) > 1.0);
}

#[test]
fn schedule_that_reaches_zero_noise_is_bad_input() {
    // adp with a learning rate decaying to 0 at the last step has sigma_T = infinity.
    let text = config(
        1000,
        "steps = 10\nexpected_batch_size = 100\n[train.lr_schedule]\nkind = \"cosine\"",
        "[clip]\nclip_norm = 1.0\n[noise]\nschedule = \"adp\"\n[privacy]\nepsilon = 1.0\ndelta = 1e-5",
    );
    let spec = dpx::config::load_str(&text, Path::new("test.toml")).unwrap();
    // Cosine to 0 at t = T is outside the run (t < T), so this plan is fine...
    assert!(TrainingPlan::new(&spec, 1000).is_ok());
    // ...but a values list shorter than the run is refused with the key named.
    let text = config(
        1000,
        "steps = 10\nexpected_batch_size = 100",
        "[clip]\nclip_norm = 1.0\n[noise]\nschedule = \"file\"\nvalues = [1.0, 2.0]\n\
         noise_multiplier = 1.0\n[privacy]\ndelta = 1e-5",
    );
    let spec = dpx::config::load_str(&text, Path::new("test.toml")).unwrap();
    let err = TrainingPlan::new(&spec, 1000).unwrap_err().to_string();
    assert!(
        err.contains("noise.schedule") && err.contains("2 noise multipliers"),
        "{err}"
    );
}

#[test]
fn keys_of_other_schedules_are_rejected() {
    let text = config(
        1000,
        "steps = 10\nexpected_batch_size = 100",
        "[clip]\nclip_norm = 1.0\n[noise]\nschedule = \"exponential\"\ndecay = 0.1\ngamma = 0.5\n\
         [privacy]\nepsilon = 1.0\ndelta = 1e-5",
    );
    let err = dpx::config::load_str(&text, Path::new("test.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("noise.gamma"), "{err}");
}

/// Train one seed of a config and return its evaluation rows' model-dependent columns.
fn train_rows(text: &str) -> Vec<(u64, Option<f64>, f64, f64)> {
    let dir = tempfile::tempdir().unwrap();
    let spec = dpx::config::load_str(text, &dir.path().join("c.toml")).unwrap();
    let exp = Experiment::build(spec, dir.path()).unwrap();
    match train_seed(&exp, 11, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(res) => res
            .rows
            .iter()
            .map(|r| (r.step, r.train_loss, r.test_loss, r.test_accuracy))
            .collect(),
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
}

#[test]
fn adp_scale_invariance_gives_bit_identical_runs() {
    // docs/methods/adp_sgd.md §6 item 10: under the paper's bound sigma is proportional to C / eps_bar, so the
    // noise std sigma*C on the sum is the same for (C = 4, eps_bar = 1.6) and (C = 1,
    // eps_bar = 0.4). With clipping inactive (max_norm 0.1 and a binary logistic model keep every
    // per-sample gradient norm below 1) the clipped sums are equal too, so the runs are the same
    // bit for bit. Calibration brackets from 1 by powers of two, interpolates in ratios, and the
    // paper's epsilon scales exactly with 1/z, so the two calibrated scales differ by exactly 4.
    let run = |clip: f64, eps: f64| {
        let text = config(
            400,
            "steps = 20\nexpected_batch_size = 200\neval_every_steps = 5\n\
             [train.lr_schedule]\nkind = \"inv_sqrt\"\na = 20.0\nc = 1.0",
            &format!(
                "[clip]\nclip_norm = {clip}\n[noise]\nschedule = \"adp\"\n\
                 [privacy]\nepsilon = {eps}\ndelta = 1e-5\naccountant = \"adp-paper\""
            ),
        );
        (plan(&text, 400), train_rows(&text))
    };
    let (p4, rows4) = run(4.0, 16.0 * 1.6);
    let (p1, rows1) = run(1.0, 16.0 * 0.4);
    let (k4, k1) = (
        p4.privacy.as_ref().unwrap().noise_multiplier,
        p1.privacy.as_ref().unwrap().noise_multiplier,
    );
    assert_eq!(k4 * 4.0, k1);
    for t in [0, 7, 19] {
        assert_eq!(
            p4.noise_multiplier_at(t).unwrap() * 4.0,
            p1.noise_multiplier_at(t).unwrap() * 1.0
        );
    }
    assert_eq!(rows4, rows1);
    // And the runs are not trivially equal: a different clip norm with the same epsilon differs.
    let (_, rows_other) = run(1.0, 16.0 * 1.6);
    assert_ne!(rows4, rows_other);
}

#[test]
fn account_config_prints_the_schedule_summary() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    let text = config(
        1000,
        "epochs = 2\nexpected_batch_size = 100",
        "[clip]\nclip_norm = 1.0\n[noise]\nschedule = \"step\"\nfactor = 0.5\nevery_epochs = 1\n\
         [privacy]\nepsilon = 3.0\ndelta = 1e-5",
    );
    std::fs::write(&cfg, &text).unwrap();
    let out = assert_cmd::Command::cargo_bin("dpx")
        .unwrap()
        .args(["account", "--json", "--config"])
        .arg(&cfg)
        .assert()
        .success();
    let plan: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(plan["noise_schedule"], "step");
    let s = &plan["noise_multiplier_summary"];
    let kappa = plan["noise_multiplier"].as_f64().unwrap();
    // Step decay by 0.5 after the first epoch (10 steps): first = max = kappa, last = min = kappa/2.
    assert_eq!(s["first"].as_f64().unwrap(), kappa);
    assert_eq!(s["max"].as_f64().unwrap(), kappa);
    assert_eq!(s["last"].as_f64().unwrap(), kappa * 0.5);
    assert_eq!(s["min"].as_f64().unwrap(), kappa * 0.5);
    let epochs = plan["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 2);
    assert!(epochs[1]["epsilon"].as_f64().unwrap() <= 3.0);
    let text_out = assert_cmd::Command::cargo_bin("dpx")
        .unwrap()
        .args(["account", "--config"])
        .arg(&cfg)
        .assert()
        .success();
    let printed = String::from_utf8_lossy(&text_out.get_output().stdout).to_string();
    assert!(printed.contains("noise schedule step"), "{printed}");
}

#[test]
fn adagrad_norm_clean_source_is_marked_not_private() {
    let cfg = |source: &str| {
        config(
            1000,
            &format!(
                "steps = 30\nexpected_batch_size = 100\noptimizer = \"adagrad_norm\"\n\
                 [train.adagrad_norm]\nb0_sq = 20.0\nbeta = 512.0\nbeta_period = 10\nnorm_source = \"{source}\""
            ),
            "[clip]\nclip_norm = 1.0\n[noise]\nschedule = \"adp_adagrad\"\nb0_sq = 20.0\nc_alpha = 1e-4\n\
             [privacy]\nepsilon = 2.0\ndelta = 1e-5",
        )
    };
    let noisy = plan(&cfg("noisy"), 1000);
    let clean = plan(&cfg("clean"), 1000);
    assert!(noisy.privacy.as_ref().unwrap().epsilon_guaranteed);
    let p = clean.privacy.as_ref().unwrap();
    assert!(!p.epsilon_guaranteed);
    assert!(p.warnings.iter().any(|w| w.contains("norm_source = clean")));
    // Both train; the step sizes differ, so the runs differ.
    let (a, b) = (train_rows(&cfg("noisy")), train_rows(&cfg("clean")));
    assert_eq!(a.len(), b.len());
    assert_ne!(a, b);
}

#[test]
fn bias_corrected_momentum_with_influence_momentum_schedule_trains() {
    let text = config(
        1000,
        "steps = 40\nexpected_batch_size = 1000\noptimizer = \"bias_corrected_momentum\"\nmomentum = 0.5",
        "[clip]\nclip_norm = 4.0\n[noise]\nschedule = \"influence_momentum\"\ngamma = 0.9\nbeta = 0.5\n\
         [privacy]\nepsilon = 4.0\ndelta = 1e-8\naccountant = \"zcdp-paper\"",
    );
    let p = plan(&text, 1000);
    // zCDP-paper budget: sum of 1/sigma_t^2 = R = 0.3927037068805674 (docs/methods/dynamic_noise.md §2).
    let r: f64 = (0..40)
        .map(|t| p.noise_multiplier_at(t).unwrap().powi(-2))
        .sum();
    assert!(rel(r, 0.392_703_706_880_567_4) < 3e-6, "{r}");
    let rows = train_rows(&text);
    assert!(rows.last().unwrap().2.is_finite());
}

#[test]
fn train_set_loss_is_the_loss_of_the_parameters_at_each_evaluation() {
    // docs/methods/dynamic_noise.md §6 item 11: the paper compares the final training loss f(θ_T). With
    // full-batch gradient descent evaluated every step, step t+1's mean batch loss (taken before
    // its update) is the full training loss at θ_t, which the row of step t reports as
    // `train_set_loss`.
    let run = |eval_train_set: bool| {
        let text = config(
            300,
            &format!(
                "steps = 6\nexpected_batch_size = 300\neval_every_steps = 1\neval_train_set = {eval_train_set}"
            ),
            "[clip]\nclip_norm = 4.0\n[noise]\nschedule = \"exponential\"\ndecay = 0.1\n\
             [privacy]\nepsilon = 4.0\ndelta = 1e-8\naccountant = \"zcdp-paper\"",
        );
        let dir = tempfile::tempdir().unwrap();
        let spec = dpx::config::load_str(&text, &dir.path().join("c.toml")).unwrap();
        let exp = Experiment::build(spec, dir.path()).unwrap();
        match train_seed(&exp, 5, &Silent, &AtomicBool::new(false)).unwrap() {
            SeedEnd::Finished(res) => *res,
            SeedEnd::Interrupted => panic!("not interrupted"),
        }
    };
    let on = run(true);
    assert_eq!(on.rows.len(), 7);
    for w in on.rows.windows(2) {
        let at_theta_t = w[0].train_set_loss.unwrap();
        let batch_loss_next = w[1].train_loss.unwrap();
        assert!(
            rel(at_theta_t, batch_loss_next) < 1e-6,
            "{at_theta_t} vs {batch_loss_next}"
        );
        assert!(w[0].train_set_accuracy.unwrap() > 0.0);
    }
    let last = on.rows.last().unwrap();
    assert_eq!(on.summary.final_train_set_loss, last.train_set_loss);
    // The losses move: the check above is not comparing constants.
    assert_ne!(on.rows[0].train_set_loss, last.train_set_loss);
    // Off by default: the columns are empty and the run is otherwise the same.
    let off = run(false);
    assert!(off.rows.iter().all(|r| r.train_set_loss.is_none()));
    assert_eq!(off.summary.final_train_set_loss, None);
    assert_eq!(
        off.rows.iter().map(|r| r.test_loss).collect::<Vec<_>>(),
        on.rows.iter().map(|r| r.test_loss).collect::<Vec<_>>()
    );
}
