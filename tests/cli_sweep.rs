//! `dpx sweep`, `dpx collect` and `dpx report` on the built binary: expansion (grid, zip, stable
//! ids), dry-run, resume, shards covering every job once, collect, report numbers, bad input.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

/// A tiny private base experiment (fast: 2 epochs of 600 examples).
fn base(dir: &Path) -> PathBuf {
    let p = dir.join("base.toml");
    std::fs::write(
        &p,
        r#"
[experiment]
name = "tiny"
seeds = [0, 1]
[data]
dataset = "gaussian_mixture"
[data.synthetic]
n_train = 600
n_test = 200
n_features = 5
n_classes = 3
separation = 4.0
seed = 3
[model]
architecture = "logistic"
[train]
epochs = 2
expected_batch_size = 60
learning_rate = 1.0
[clip]
clip_norm = 1.0
[privacy]
epsilon = 2.0
delta = 1e-5
"#,
    )
    .unwrap();
    p
}

fn sweep_file(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("base = \"base.toml\"\n{body}")).unwrap();
    p
}

const GRID: &str = r#"
[grid]
"privacy.epsilon" = [1.0, 4.0]
"train.learning_rate" = [0.5, 1.0]
"#;

#[test]
fn expansion_grid_zip_and_stable_ids() {
    let dir = tempfile::tempdir().unwrap();
    base(dir.path());
    let a = sweep_file(dir.path(), "a.toml", GRID);
    // Same grid, keys in the other order and as nested tables.
    let b = sweep_file(
        dir.path(),
        "b.toml",
        "[grid]\ntrain.learning_rate = [0.5, 1.0]\nprivacy.epsilon = [1.0, 4.0]\n",
    );
    let sa = dpx::sweep::load(&a).unwrap();
    let sb = dpx::sweep::load(&b).unwrap();
    assert_eq!(sa.points.len(), 4);
    let ids = |s: &dpx::sweep::Sweep| {
        let mut v: Vec<(String, String)> = s
            .points
            .iter()
            .map(|p| (p.name.clone(), p.id.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids(&sa), ids(&sb));
    // Ids are FNV-1a 64 of the resolved TOML (the function's doc test pins the hash itself).
    for p in &sa.points {
        assert_eq!(
            p.id,
            format!("{:016x}", dpx::sweep::fnv1a64(p.resolved.as_bytes()))
        );
        assert_eq!(p.id.len(), 16);
    }
    assert_eq!(sa.points[1].name, "privacy.epsilon=1,train.learning_rate=1");
    assert_eq!(sa.jobs().len(), 8);

    // Zip: the lists move together, times the grid axis.
    let z = sweep_file(
        dir.path(),
        "z.toml",
        "seeds = [5]\n[grid]\n\"privacy.epsilon\" = [1.0, 2.0]\n[[zip]]\n\"train.epochs\" = [1, 3, 2]\n\"train.learning_rate\" = [0.1, 0.3, 0.2]\n",
    );
    let sz = dpx::sweep::load(&z).unwrap();
    assert_eq!(sz.points.len(), 6);
    for p in &sz.points {
        assert_eq!(p.spec.seeds, vec![5]);
        let ep = p
            .overrides
            .iter()
            .find(|(k, _)| k == "train.epochs")
            .unwrap()
            .1
            .clone();
        let lr = p
            .overrides
            .iter()
            .find(|(k, _)| k == "train.learning_rate")
            .unwrap()
            .1
            .clone();
        assert_eq!(
            ep.as_integer().unwrap() as f64 / 10.0,
            lr.as_float().unwrap()
        );
    }
}

#[test]
fn bad_sweeps_exit_2_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    base(dir.path());
    let cases: [(&str, &str); 7] = [
        (
            "[grid]\n\"privacy.epsilom\" = [1.0]\n",
            "did you mean `epsilon`",
        ),
        ("[grid]\n\"train.epochs\" = [\"ten\"]\n", "train.epochs"),
        ("", "no grid"),
        ("[grid]\n\"privacy.epsilon\" = []\n", "empty"),
        ("[grid]\n\"privacy.epsilon\" = 1.0\n", "expected a list"),
        (
            "[[zip]]\n\"train.epochs\" = [1, 2]\n\"train.learning_rate\" = [0.1]\n",
            "same length",
        ),
        (
            "gird = 1\n[grid]\n\"privacy.epsilon\" = [1.0]\n",
            "did you mean `grid`",
        ),
    ];
    for (i, (body, needle)) in cases.iter().enumerate() {
        let f = sweep_file(dir.path(), &format!("bad{i}.toml"), body);
        dpx()
            .args(["sweep", f.to_str().unwrap(), "--dry-run"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*needle));
    }
    let ok = sweep_file(dir.path(), "ok.toml", GRID);
    for shard in ["3/2", "2/2", "x/2", "1"] {
        dpx()
            .args(["sweep", ok.to_str().unwrap(), "--dry-run", "--shard", shard])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--shard"));
    }
    dpx()
        .args(["sweep", ok.to_str().unwrap(), "--slurm", "--time", "1h"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--time"));
}

/// (point id, seed) pairs listed by a dry run.
fn dry_jobs(file: &Path, extra: &[&str]) -> Vec<(String, String)> {
    let out = dpx()
        .args(["sweep", file.to_str().unwrap(), "--dry-run"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("job "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[3].to_string(), w[5].to_string())
        })
        .collect()
}

#[test]
fn dry_run_lists_jobs_and_shards_cover_each_job_once() {
    let dir = tempfile::tempdir().unwrap();
    base(dir.path());
    let f = sweep_file(dir.path(), "s.toml", GRID);
    let all = dry_jobs(&f, &[]);
    assert_eq!(all.len(), 8);
    assert!(
        !dir.path().join("results").exists(),
        "a dry run writes nothing"
    );
    for n in [1usize, 3, 8, 11] {
        let mut union = Vec::new();
        for i in 0..n {
            union.extend(dry_jobs(&f, &["--shard", &format!("{i}/{n}")]));
        }
        union.sort();
        let mut expected = all.clone();
        expected.sort();
        assert_eq!(union, expected, "N = {n}");
    }
}

fn summary_without_seconds(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let sec = header.iter().position(|h| *h == "seconds").unwrap();
    let mut out = Vec::new();
    let mut r = csv::Reader::from_path(path).unwrap();
    for rec in r.records() {
        let rec = rec.unwrap();
        let v: Vec<&str> = rec
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != sec)
            .map(|(_, s)| s)
            .collect();
        out.push(v.join("|"));
    }
    out.join("\n")
}

#[test]
fn run_resume_shard_collect_and_report() {
    let dir = tempfile::tempdir().unwrap();
    base(dir.path());
    let f = sweep_file(dir.path(), "s.toml", GRID);
    let full = dir.path().join("full");
    dpx()
        .args([
            "sweep",
            f.to_str().unwrap(),
            "--out",
            full.to_str().unwrap(),
            "--threads",
            "2",
        ])
        .assert()
        .success();
    let summary = std::fs::read_to_string(full.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 1 + 8);

    // Resume: everything is complete, nothing reruns, results unchanged.
    dpx()
        .args([
            "sweep",
            f.to_str().unwrap(),
            "--out",
            full.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("8 already complete"));
    assert_eq!(
        std::fs::read_to_string(full.join("summary.csv")).unwrap(),
        summary
    );

    // Remove one seed: only that job reruns, with the same numbers.
    let s = dpx::sweep::load(&f).unwrap();
    let p0 = full.join("points").join(&s.points[0].id);
    std::fs::remove_file(p0.join("seeds/1.summary.csv")).unwrap();
    dpx()
        .args([
            "sweep",
            f.to_str().unwrap(),
            "--out",
            full.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("7 already complete"));
    assert_eq!(
        summary_without_seconds(&full.join("summary.csv")),
        summary_without_seconds_str(&summary, dir.path())
    );

    // A sweep stopped before its aggregates were rebuilt (per-seed files only): `dpx report`
    // rebuilds them from the finished seeds and reports every point.
    for e in std::fs::read_dir(full.join("points")).unwrap() {
        let point = e.unwrap().path();
        std::fs::remove_file(point.join("summary.csv")).unwrap();
        std::fs::remove_file(point.join("metrics.csv")).unwrap();
    }
    std::fs::remove_file(full.join("summary.csv")).unwrap();
    dpx()
        .args(["report", full.to_str().unwrap(), "-q", "--no-plots"])
        .assert()
        .success();
    assert_eq!(
        summary_without_seconds(&full.join("summary.csv")),
        summary_without_seconds_str(&summary, dir.path())
    );

    // Three shards into separate directories, collected: same results as the full run.
    let mut shards = Vec::new();
    for i in 0..3 {
        let o = dir.path().join(format!("shard{i}"));
        dpx()
            .args(["sweep", f.to_str().unwrap(), "--out", o.to_str().unwrap()])
            .args(["--shard", &format!("{i}/3"), "--threads", "1", "--quiet"])
            .assert()
            .success();
        shards.push(o);
    }
    let merged = dir.path().join("merged");
    let mut cmd = dpx();
    cmd.args(["collect", "--out", merged.to_str().unwrap()]);
    for s in &shards {
        cmd.arg(s);
    }
    cmd.assert()
        .success()
        .stdout(predicate::str::contains("8 seed result(s) copied"));
    assert_eq!(
        summary_without_seconds(&merged.join("summary.csv")),
        summary_without_seconds(&full.join("summary.csv"))
    );
    // Idempotent.
    let before = std::fs::read(merged.join("summary.csv")).unwrap();
    let mut again = dpx();
    again.args(["collect", "--out", merged.to_str().unwrap()]);
    for s in &shards {
        again.arg(s);
    }
    again
        .assert()
        .success()
        .stdout(predicate::str::contains("0 seed result(s) copied"));
    assert_eq!(std::fs::read(merged.join("summary.csv")).unwrap(), before);

    // Report: numbers against a hand computation from the per-seed summaries.
    dpx()
        .args(["report", merged.to_str().unwrap(), "-q"])
        .assert()
        .success();
    let mut r = csv::Reader::from_path(merged.join("report.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|x| x == name).unwrap();
    let first = r.records().next().unwrap().unwrap();
    let accs: Vec<f64> = {
        let mut rr = csv::Reader::from_path(p0.join("summary.csv")).unwrap();
        let hh = rr.headers().unwrap().clone();
        let c = hh.iter().position(|x| x == "final_test_accuracy").unwrap();
        rr.records()
            .map(|x| x.unwrap()[c].parse().unwrap())
            .collect()
    };
    assert_eq!(accs.len(), 2);
    // Two seeds: mean (a+b)/2, sample std |a−b|/√2, max.
    let (a, b) = (accs[0], accs[1]);
    let get = |n: &str| first[col(n)].parse::<f64>().unwrap();
    assert!((get("final_test_accuracy_mean") - (a + b) / 2.0).abs() < 1e-12);
    assert!((get("final_test_accuracy_std") - (a - b).abs() / 2f64.sqrt()).abs() < 1e-12);
    assert_eq!(get("final_test_accuracy_max"), a.max(b));
    let md = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert!(md.contains("Papernot & Steinke 2022, Thm. 6"), "{md}");
    assert!(
        md.contains("| `privacy.epsilon` \\ `train.learning_rate` | 0.5 | 1 |"),
        "{md}"
    );
    for m in [
        "test_accuracy",
        "train_loss",
        "noise_multiplier",
        "epsilon",
        "privacy_utility",
    ] {
        for ext in ["svg", "png"] {
            let p = merged.join("plots").join(format!("{m}.{ext}"));
            assert!(
                std::fs::metadata(&p).unwrap().len() > 1000,
                "{}",
                p.display()
            );
        }
    }
    assert!(
        md.contains("![final test accuracy vs ε](plots/privacy_utility.svg)"),
        "{md}"
    );
    // The same numbers as JSON, for scripts: printed with --format json and in report.json.
    let out = dpx()
        .args([
            "report",
            merged.to_str().unwrap(),
            "--format",
            "json",
            "--no-plots",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(merged.join("report.json")).unwrap()).unwrap();
    assert_eq!(doc, file);
    assert_eq!(doc["sweep"], true);
    assert_eq!(
        doc["swept_keys"],
        serde_json::json!(["privacy.epsilon", "train.learning_rate"])
    );
    let first_point = &doc["points"][0];
    assert_eq!(first_point["id"].as_str().unwrap(), &first[col("point_id")]);
    assert_eq!(
        first_point["final_test_accuracy"]["mean"].as_f64().unwrap(),
        get("final_test_accuracy_mean")
    );
    assert_eq!(first_point["final_test_accuracy"]["n"], 2);
    assert!(
        doc["tuning_cost"]["basic_composition_epsilon"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // A point directory reads like a run directory.
    dpx()
        .args(["report", p0.to_str().unwrap(), "-q", "--no-plots"])
        .assert()
        .success();
    // Unknown pivot key: exit 2 with a suggestion.
    dpx()
        .args([
            "report",
            merged.to_str().unwrap(),
            "--rows",
            "privacy.epsilom",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `privacy.epsilon`"));
}

/// The text of a summary.csv held in memory, compared like [`summary_without_seconds`].
fn summary_without_seconds_str(text: &str, dir: &Path) -> String {
    let p = dir.join("summary_copy.csv");
    std::fs::write(&p, text).unwrap();
    summary_without_seconds(&p)
}

#[test]
fn failing_point_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    base(dir.path());
    // expected_batch_size 5000 > n_train 600: that point fails when its data is checked.
    let f = sweep_file(
        dir.path(),
        "f.toml",
        "[grid]\n\"train.expected_batch_size\" = [60, 5000]\n",
    );
    let out = dir.path().join("o");
    dpx()
        .args([
            "sweep",
            f.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("1 failure(s)"))
        .stderr(predicate::str::contains(
            "larger than the 600 training examples",
        ));
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 1 + 2, "the good point's two seeds");
}

#[test]
fn a_damaged_seed_reruns_and_collect_refuses_disagreeing_copies() {
    // Regressions: a garbage seeds/<seed>.summary.csv counted as complete and shrank the sweep's
    // summary.csv header to `point_id,point_name`; `dpx collect` kept whichever of two
    // disagreeing copies of a seed came first.
    let dir = tempfile::tempdir().unwrap();
    base(dir.path());
    let f = sweep_file(
        dir.path(),
        "s.toml",
        "[grid]\n\"privacy.epsilon\" = [1.0, 4.0]\n",
    );
    let full = dir.path().join("full");
    let sweep = |out: &Path| {
        let mut c = dpx();
        c.args(["sweep", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        c.args(["--threads", "1"]);
        c
    };
    sweep(&full).assert().success();
    let summary = std::fs::read_to_string(full.join("summary.csv")).unwrap();
    let s = dpx::sweep::load(&f).unwrap();
    let p0 = full.join("points").join(&s.points[0].id);
    std::fs::write(p0.join("seeds/0.summary.csv"), "garbage\n").unwrap();
    sweep(&full)
        .assert()
        .success()
        .stderr(predicate::str::contains("seed 0 is not complete"))
        .stderr(predicate::str::contains("1 already complete").not());
    assert_eq!(
        summary_without_seconds(&full.join("summary.csv")),
        summary_without_seconds_str(&summary, dir.path())
    );
    dpx()
        .args(["report", full.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains("non-private").not());

    // Two copies that disagree on one seed's accuracy: collect names both files, exit 2.
    let copy = dir.path().join("copy");
    sweep(&copy).assert().success();
    let m = copy
        .join("points")
        .join(&s.points[1].id)
        .join("seeds/1.metrics.csv");
    let text = std::fs::read_to_string(&m).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut rows: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    assert!(rows.len() > 1);
    let header: Vec<&str> = lines[0].split(',').collect();
    let acc = header.iter().position(|h| *h == "test_accuracy").unwrap();
    let n = rows.len() - 1;
    let mut cells: Vec<String> = rows[n].split(',').map(String::from).collect();
    cells[acc] = "0.123".into();
    rows[n] = cells.join(",");
    std::fs::write(&m, rows.join("\n") + "\n").unwrap();
    let merged = dir.path().join("merged");
    let o = dpx()
        .args(["collect", full.to_str().unwrap(), copy.to_str().unwrap()])
        .args(["--out", merged.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("1.metrics.csv") && err.contains("copy"),
        "{err}"
    );
    assert!(err.contains("merged") || err.contains("full"), "{err}");
}
