//! `dpx run` on the built binary and the training library: determinism across thread counts,
//! the planned events equal the recorded ones, resume, non-private baselines and bad input.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use assert_cmd::Command;
use predicates::prelude::*;

use dpx::train::prepare::Experiment;
use dpx::train::{SeedEnd, Silent, train_seed};

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

/// A small private experiment on the synthetic Gaussian mixture; `extra` is appended as is.
fn tiny_config(dir: &Path, extra: &str) -> PathBuf {
    let text = format!(
        r#"
[experiment]
name = "tiny"
seeds = [0, 1, 2]

[data]
dataset = "gaussian_mixture"
validation_fraction = 0.1

[data.synthetic]
n_train = 3000
n_test = 500
n_features = 10
n_classes = 3
separation = 4.0
seed = 7

[model]
architecture = "mlp"
hidden = [16]
activation = "tanh"

[train]
epochs = 3
expected_batch_size = 100
learning_rate = 0.5
optimizer = "momentum"
momentum = 0.5
eval_every_steps = 20

[clip]
clip_norm = 1.0

{extra}
"#
    );
    let path = dir.join("tiny.toml");
    std::fs::write(&path, text).unwrap();
    path
}

const PRIVATE: &str = "[privacy]\nepsilon = 2.0\ndelta = 1e-5\n";

fn run_ok(config: &Path, out: &Path, threads: &str) {
    dpx()
        .args(["run", "--quiet", "--threads", threads, "--out"])
        .arg(out)
        .arg(config)
        .assert()
        .success();
}

#[test]
fn metrics_are_byte_identical_with_one_or_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run_ok(&cfg, &a, "1");
    run_ok(&cfg, &b, "2");
    let ma = std::fs::read(a.join("metrics.csv")).unwrap();
    let mb = std::fs::read(b.join("metrics.csv")).unwrap();
    assert!(!ma.is_empty());
    assert_eq!(ma, mb, "metrics.csv differs between 1 and 2 threads");
    assert_eq!(
        std::fs::read(a.join("config.toml")).unwrap(),
        std::fs::read(b.join("config.toml")).unwrap()
    );
}

#[test]
fn private_run_beats_chance_and_spends_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let out = dir.path().join("out");
    run_ok(&cfg, &out, "2");
    let mut r = csv::Reader::from_path(out.join("summary.csv")).unwrap();
    let headers = r.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 3);
    for row in rows {
        assert_eq!(&row[col("status")], "completed");
        let acc: f64 = row[col("final_test_accuracy")].parse().unwrap();
        assert!(
            acc > 0.6,
            "accuracy {acc} is not clearly above chance (1/3)"
        );
        let eps: f64 = row[col("epsilon")].parse().unwrap();
        assert!(
            eps <= 2.0 && eps > 1.9,
            "epsilon {eps} should be just under the target 2"
        );
        assert_eq!(&row[col("epsilon_guaranteed")], "true");
    }
}

#[test]
fn recorded_events_equal_the_planned_events() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let spec = dpx::config::load(&cfg).unwrap();
    let exp = Experiment::build(spec, dir.path()).unwrap();
    let planned = exp.plan.planned_ledger(exp.plan.steps);
    match train_seed(&exp, 5, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(res) => {
            assert_eq!(res.ledger, planned);
            // ε written on the last row is the plan's ε.
            let planned_eps = exp.plan.epsilon_of(&planned).unwrap().unwrap().epsilon;
            assert_eq!(res.rows.last().unwrap().epsilon, Some(planned_eps));
        }
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
}

#[test]
fn recorded_events_equal_the_planned_events_for_a_decaying_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(
        dir.path(),
        "[noise]\nschedule = \"time_decay\"\ndecay = 0.02\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n",
    );
    let spec = dpx::config::load(&cfg).unwrap();
    let exp = Experiment::build(spec, dir.path()).unwrap();
    let planned = exp.plan.planned_ledger(exp.plan.steps);
    // Every step has its own sigma_t.
    assert_eq!(planned.runs().len() as u64, exp.plan.steps);
    match train_seed(&exp, 5, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(res) => {
            assert_eq!(res.ledger, planned);
            let planned_eps = exp.plan.epsilon_of(&planned).unwrap().unwrap().epsilon;
            let last = res.rows.last().unwrap();
            assert_eq!(last.epsilon, Some(planned_eps));
            assert!(planned_eps <= 2.0);
            // The row reports sigma_t of the schedule at the row's last step.
            let sigma = exp.plan.noise_multiplier_at(last.step - 1).unwrap();
            assert_eq!(last.noise_multiplier, Some(sigma));
            assert_eq!(last.noise_std, Some(sigma * 1.0));
            assert!(res.rows[1].noise_multiplier > last.noise_multiplier);
        }
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
}

#[test]
fn resume_skips_complete_seeds_and_gives_the_same_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let out = dir.path().join("out");
    run_ok(&cfg, &out, "2");
    let full = std::fs::read(out.join("metrics.csv")).unwrap();
    // Forget seed 1, as if the run had been killed before it finished.
    std::fs::remove_file(out.join("seeds/1.summary.csv")).unwrap();
    std::fs::remove_file(out.join("seeds/1.metrics.csv")).unwrap();
    let seed0_before = std::fs::read(out.join("seeds/0.summary.csv")).unwrap();
    dpx()
        .args(["run", "--resume", "--threads", "1", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success()
        .stderr(predicate::str::contains("2 seed(s) already complete"));
    assert_eq!(std::fs::read(out.join("metrics.csv")).unwrap(), full);
    // Seed 0 was not re-run (its summary, seconds included, is unchanged).
    assert_eq!(
        std::fs::read(out.join("seeds/0.summary.csv")).unwrap(),
        seed0_before
    );
}

#[test]
fn existing_results_are_not_overwritten_without_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let out = dir.path().join("out");
    run_ok(&cfg, &out, "2");
    let before = std::fs::read(out.join("metrics.csv")).unwrap();
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--resume").and(predicate::str::contains("--overwrite")));
    assert_eq!(std::fs::read(out.join("metrics.csv")).unwrap(), before);
}

#[test]
fn resume_refuses_a_different_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cfg = tiny_config(dir.path(), PRIVATE);
    run_ok(&cfg, &out, "2");
    let other = tiny_config(dir.path(), "[privacy]\nepsilon = 4.0\ndelta = 1e-5\n");
    dpx()
        .args(["run", "--quiet", "--resume", "--out"])
        .arg(&out)
        .arg(&other)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("different experiment"));
}

#[test]
fn non_private_baseline_reports_no_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), "[privacy]\nenabled = false\n");
    let out = dir.path().join("out");
    run_ok(&cfg, &out, "2");
    let text = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let headers = r.headers().unwrap().clone();
    let eps = headers.iter().position(|h| h == "epsilon").unwrap();
    let guaranteed = headers
        .iter()
        .position(|h| h == "epsilon_guaranteed")
        .unwrap();
    for row in r.records().map(Result::unwrap) {
        assert_eq!(&row[eps], "", "a non-private run has no epsilon");
        assert_eq!(&row[guaranteed], "false");
    }
}

#[test]
fn shuffle_sampling_is_marked_not_guaranteed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE)
        .to_string_lossy()
        .into_owned();
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "expected_batch_size = 100",
        "sampler = \"shuffle\"\nbatch_size = 100",
    );
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("out");
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success()
        .stderr(predicate::str::contains("not guaranteed"));
    let text = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(
        text.lines().skip(1).all(|l| l.contains(",false,")),
        "{text}"
    );
}

#[test]
fn bad_inputs_exit_2_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(String, &str)> = vec![
        (
            PRIVATE.replace("delta = 1e-5", "delta = 1.5"),
            "privacy.delta",
        ),
        (
            PRIVATE.replace("epsilon = 2.0", "epsilon = -1.0"),
            "privacy.epsilon",
        ),
        (format!("{PRIVATE}\n[output]\nbogus = 1\n"), "output.bogus"),
        (
            PRIVATE.replace("[privacy]", "[privacy]\nepsilonn = 1"),
            "did you mean",
        ),
    ];
    for (extra, needle) in cases {
        let cfg = tiny_config(dir.path(), &extra);
        dpx()
            .args(["run", "--quiet", "--out"])
            .arg(dir.path().join("never"))
            .arg(&cfg)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(needle).and(predicate::str::contains("tiny.toml")));
        assert!(
            !dir.path().join("never").exists(),
            "nothing is written on bad input"
        );
    }
}

#[test]
fn batch_larger_than_dataset_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("expected_batch_size = 100", "expected_batch_size = 100000");
    std::fs::write(&cfg, text).unwrap();
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(dir.path().join("out"))
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("expected_batch_size"));
}

#[test]
fn missing_dataset_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mnist.toml");
    std::fs::write(
        &cfg,
        "[experiment]\nname = \"m\"\n[data]\ndataset = \"mnist\"\n[model]\narchitecture = \"logistic\"\n[train]\nepochs = 1\nexpected_batch_size = 256\nlearning_rate = 0.1\n[clip]\nclip_norm = 1.0\n[privacy]\nepsilon = 1.0\ndelta = 1e-5\n",
    )
    .unwrap();
    dpx()
        .env("DPX_DATA_DIR", dir.path().join("nodata"))
        .args(["run", "--quiet", "--out"])
        .arg(dir.path().join("out"))
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("dpx data fetch mnist")
                .and(predicate::str::contains("nodata")),
        );
}

#[cfg(unix)]
#[test]
fn unwritable_output_directory_is_bad_input() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    // root ignores permission bits: only assert when the directory really is read-only.
    if std::fs::write(ro.join("probe"), b"").is_ok() {
        return;
    }
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(ro.join("out"))
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("output directory"));
}

#[test]
fn account_config_prints_the_epsilon_a_run_records_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("eval_every_steps = 20", "eval_every_epochs = 1");
    std::fs::write(&cfg, text).unwrap();
    let out = dpx()
        .args(["account", "--json", "--config"])
        .arg(&cfg)
        .assert()
        .success();
    let plan: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(plan["accountant"], "rdp");
    let epochs = plan["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 3);

    let run_dir = dir.path().join("out");
    run_ok(&cfg, &run_dir, "2");
    let mut r = csv::Reader::from_path(run_dir.join("metrics.csv")).unwrap();
    let headers = r.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = r
        .records()
        .map(Result::unwrap)
        .filter(|row| &row[0] == "0")
        .collect();
    // Rows: step 0, then one per epoch end.
    assert_eq!(rows.len(), epochs.len() + 1);
    for (row, e) in rows[1..].iter().zip(epochs) {
        assert_eq!(
            row[col("step")].parse::<u64>().unwrap(),
            e["step"].as_u64().unwrap()
        );
        let recorded: f64 = row[col("epsilon")].parse().unwrap();
        assert_eq!(
            recorded,
            e["epsilon"].as_f64().unwrap(),
            "epoch {}",
            e["epoch"]
        );
    }
    let sigma_run: f64 = rows[1][col("noise_multiplier")].parse().unwrap();
    assert_eq!(sigma_run, plan["noise_multiplier"].as_f64().unwrap());
}

/// Start `dpx ARGS OUT CONFIG`, wait (at most 120 s) until `ready()`, send it SIGINT (Ctrl-C)
/// and return how it ended.
#[cfg(unix)]
fn interrupt_when(
    args: &[&str],
    out: &Path,
    config: &Path,
    ready: impl Fn() -> bool,
) -> std::process::Output {
    use std::time::{Duration, Instant};
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dpx"))
        .args(args)
        .arg(out)
        .arg(config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !ready() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "seed 0 never finished"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait_with_output().unwrap()
}

/// Ctrl-C (SIGINT) keeps the seeds already finished, exits 130, and `--resume` completes the
/// run with the same metrics as an uninterrupted one.
#[cfg(unix)]
#[test]
fn ctrl_c_keeps_finished_seeds_and_resume_completes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    // Long enough per seed that the interrupt lands while a later seed is training.
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("epochs = 3", "epochs = 60");
    std::fs::write(&cfg, text).unwrap();
    let full = dir.path().join("full");
    run_ok(&cfg, &full, "1");

    let out = dir.path().join("out");
    let output = interrupt_when(
        &["run", "--quiet", "--threads", "1", "--out"],
        &out,
        &cfg,
        || out.join("seeds/0.summary.csv").exists(),
    );
    if output.status.code() == Some(0) {
        // The run finished before the signal arrived: nothing to check on this machine.
        return;
    }
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("--resume"));
    let partial = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(partial.lines().count() >= 2, "seed 0 is kept: {partial}");
    dpx()
        .args(["run", "--quiet", "--resume", "--threads", "1", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success();
    assert_eq!(
        std::fs::read(out.join("metrics.csv")).unwrap(),
        std::fs::read(full.join("metrics.csv")).unwrap()
    );
}

#[test]
fn a_gdp_run_is_not_marked_guaranteed_and_says_so() {
    // GDP's central limit theorem on Poisson-sampled steps can under-report ε (PLD of the same
    // noise gave 4.96 for a GDP ε of 3): the run must not call its ε guaranteed.
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(
        dir.path(),
        "[privacy]\nepsilon = 2.0\ndelta = 1e-5\naccountant = \"gdp\"\n",
    );
    let out = dir.path().join("gdp");
    dpx()
        .args(["run", "--quiet", "--threads", "1", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success()
        .stderr(predicate::str::contains("not a proven upper bound"));
    let guaranteed = |out: &Path| -> Vec<String> {
        let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
        let mut lines = summary.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = header
            .iter()
            .position(|h| *h == "epsilon_guaranteed")
            .expect("summary has epsilon_guaranteed");
        lines
            .map(|row| row.split(',').nth(col).unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(guaranteed(&out), ["false", "false", "false"]);
    // The same run under rdp is guaranteed.
    let cfg = tiny_config(dir.path(), PRIVATE);
    let out = dir.path().join("rdp");
    run_ok(&cfg, &out, "1");
    assert_eq!(guaranteed(&out), ["true", "true", "true"]);
}

#[test]
fn the_saved_config_reloads_from_another_directory() {
    // A regression: `data.path` was saved relative to the working directory of the run, so the
    // saved config.toml named a file that did not exist from anywhere else.
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("data")).unwrap();
    let mut csv = String::from("label,a,b\n");
    for i in 0..200 {
        let y = i % 2;
        csv.push_str(&format!("{y},{}.5,{}\n", y * 3, i % 7));
    }
    std::fs::write(work.join("data/train.csv"), csv).unwrap();
    std::fs::write(
        work.join("exp.toml"),
        r#"
[experiment]
name = "csvrun"
[data]
dataset = "csv"
path = "data/train.csv"
header = true
[model]
architecture = "logistic"
[train]
steps = 3
expected_batch_size = 20
learning_rate = 0.5
[clip]
clip_norm = 1.0
[noise]
noise_multiplier = 1.0
[privacy]
delta = 1e-5
"#,
    )
    .unwrap();
    dpx()
        .current_dir(&work)
        .args(["run", "--quiet", "exp.toml", "--out", "out"])
        .assert()
        .success();
    let saved = work.join("out/config.toml");
    let text = std::fs::read_to_string(&saved).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    let path = table["data"]["path"].as_str().unwrap();
    assert!(Path::new(path).is_absolute(), "saved data.path {path:?}");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    dpx()
        .current_dir(&elsewhere)
        .args(["run", "--quiet"])
        .arg(&saved)
        .args(["--out", "again"])
        .assert()
        .success();
    assert_eq!(
        std::fs::read(work.join("out/metrics.csv")).unwrap(),
        std::fs::read(elsewhere.join("again/metrics.csv")).unwrap()
    );
}

/// An `--overwrite` run that does not finish (here: Ctrl-C) puts the previous results back; one
/// that finishes replaces them and leaves nothing set aside.
#[cfg(unix)]
#[test]
fn an_unfinished_overwrite_keeps_the_previous_results() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), PRIVATE);
    let out = dir.path().join("out");
    run_ok(&cfg, &out, "1");
    let before = std::fs::read(out.join("summary.csv")).unwrap();
    let before_metrics = std::fs::read(out.join("metrics.csv")).unwrap();
    let long = dir.path().join("long.toml");
    std::fs::write(
        &long,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("epochs = 3", "epochs = 60")
            .replace("name = \"tiny\"", "name = \"long\""),
    )
    .unwrap();
    // The new run's first seed is on disk (after the old results were set aside, so the old
    // seed 0 is not mistaken for it): Ctrl-C is handled by then.
    let output = interrupt_when(
        &["run", "--quiet", "--overwrite", "--threads", "1", "--out"],
        &out,
        &long,
        || out.join(".replaced/seeds").exists() && out.join("seeds/0.summary.csv").exists(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(0) {
        // Finished before the signal: the new results replaced the old, nothing is set aside.
        assert!(!out.join(".replaced").exists());
        return;
    }
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("put back"), "{stderr}");
    assert_eq!(std::fs::read(out.join("summary.csv")).unwrap(), before);
    assert_eq!(
        std::fs::read(out.join("metrics.csv")).unwrap(),
        before_metrics
    );
    assert!(!out.join(".replaced").exists());
    // A finished --overwrite replaces them.
    dpx()
        .args(["run", "--quiet", "--overwrite", "--threads", "1", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success();
    assert!(!out.join(".replaced").exists());
    assert!(out.join("seeds/2.summary.csv").exists());
}
