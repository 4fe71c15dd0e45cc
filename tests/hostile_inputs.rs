//! Hostile inputs (issue 9, item 1): every config key with wrong types, huge values, NaN and
//! ±∞, and every flag of `dpx run`, `dpx account`, `dpx bench`, `dpx sweep`, `dpx report`,
//! `dpx collect`, `dpx audit` and `dpx data fetch` with random values. Outcome in every case:
//! success, or exit 2 with one error line; never a panic (exit 101), never a hang (each
//! invocation is bounded in time).

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dpx::config::RawConfig;

#[path = "support/mnist.rs"]
mod mnist;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, TestRng, TestRunner};

const BASE: &str = r#"[experiment]
name = "hostile"
seeds = [0]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = 300
n_test = 100
n_features = 4
n_classes = 2

[model]
architecture = "logistic"

[train]
epochs = 1
expected_batch_size = 30
learning_rate = 0.5

[clip]
clip_norm = 1.0

[privacy]
epsilon = 3.0
delta = 1e-5
"#;

/// Hostile TOML values: wrong types, out-of-range and non-finite numbers, huge values.
const HOSTILE_VALUES: &[&str] = &[
    "nan",
    "+inf",
    "-inf",
    "\"NaN\"",
    "\"inf\"",
    "\"-inf\"",
    "1e308",
    "-1e308",
    "5e-324",
    "0",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "true",
    "\"\"",
    "\"not a value\"",
    "[1, 2, 3]",
    "[]",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
];

/// Dotted paths of every leaf key of the schema (arrays of tables as `name[].key`).
fn walk(prefix: &str, value: &toml::Value, out: &mut BTreeSet<String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                walk(&path, v, out);
            }
        }
        toml::Value::Array(items) if items.iter().any(|i| i.is_table()) => {
            for item in items {
                walk(&format!("{prefix}[]"), item, out);
            }
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

fn every_key() -> Vec<String> {
    let value = toml::Value::try_from(RawConfig::every_key_example()).expect("serialises");
    let mut keys = BTreeSet::new();
    walk("", &value, &mut keys);
    keys.into_iter().collect()
}

/// BASE with `key = value` set (keys of arrays of tables go into one `[[table]]` entry).
fn config_with(key: &str, value: &str) -> String {
    match key.split_once("[]") {
        Some((table, rest)) => format!(
            "{BASE}\n[[{table}]]\n{} = {value}\n",
            rest.trim_start_matches('.')
        ),
        None => {
            let (table, leaf) = key.rsplit_once('.').unwrap_or(("", key));
            let mut doc: toml::Table = BASE.parse().unwrap();
            // Drop the key if BASE sets it, then append it in its own table header.
            let mut t = &mut doc;
            for part in table.split('.').filter(|p| !p.is_empty()) {
                t = t
                    .entry(part)
                    .or_insert_with(|| toml::Value::Table(Default::default()))
                    .as_table_mut()
                    .expect("a table");
            }
            t.remove(leaf);
            let mut text = toml::to_string(&doc).unwrap();
            if table.is_empty() {
                text = format!("{leaf} = {value}\n{text}");
            } else {
                text.push_str(&format!("\n[{table}]\n{leaf} = {value}\n"));
            }
            text
        }
    }
}

/// The outcome of one bounded invocation of the binary.
struct Outcome {
    code: Option<i32>,
    stderr: String,
    timed_out: bool,
}

/// Run the binary in `cwd` (a temporary directory: a random relative `--out` or `--data-dir`
/// must not land in the repository).
fn run_bounded(cwd: &Path, args: &[&str], limit: Duration) -> Outcome {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("dpx"))
        .current_dir(cwd)
        .args(args)
        .env_remove("DPX_DATA_DIR")
        .env_remove("DPX_DATA_MIRROR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let (code, timed_out) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (status.code(), false);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break (None, true);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code,
        stderr: reader.join().unwrap(),
        timed_out,
    }
}

/// How an invocation may end besides success and exit 2.
#[derive(Clone, Copy, PartialEq)]
enum Allow {
    /// Only success or exit 2.
    Strict,
    /// Also exit 1 with one error line: an environment failure (network refused, disk).
    EnvFailure,
    /// Also running past the time bound: the flag sizes the work (`bench --steps 1e18` is a
    /// long benchmark the user asked for, not a hang).
    LongWork,
}

/// None when the outcome is acceptable, else a description of the failure.
fn judge(what: &str, o: &Outcome, allow: Allow) -> Option<String> {
    if o.timed_out {
        return (allow != Allow::LongWork)
            .then(|| format!("{what}: no answer within the time bound"));
    }
    match o.code {
        Some(0) => None,
        Some(1) if allow == Allow::EnvFailure => (o.stderr.lines().count() != 1)
            .then(|| format!("{what}: exit 1 without one line: {:?}", o.stderr)),
        Some(2) => {
            let lines: Vec<&str> = o
                .stderr
                .lines()
                .filter(|l| l.starts_with("error") || l.starts_with("Error"))
                .collect();
            (lines.len() != 1)
                .then(|| format!("{what}: exit 2 without one error line: {:?}", o.stderr))
        }
        c => Some(format!("{what}: exit {c:?}: {}", o.stderr.trim())),
    }
}

#[test]
fn every_key_with_every_hostile_value_never_panics_in_the_parser() {
    let keys = every_key();
    assert!(keys.len() > 60, "{} keys", keys.len());
    let mut tried = 0;
    for key in &keys {
        for value in HOSTILE_VALUES {
            let text = config_with(key, value);
            let r = std::panic::catch_unwind(|| dpx::config::load_str(&text, Path::new("h.toml")));
            assert!(r.is_ok(), "{key} = {value} panicked");
            tried += 1;
        }
    }
    eprintln!(
        "config parser: {tried} hostile configs ({} keys x {} values)",
        keys.len(),
        HOSTILE_VALUES.len()
    );
}

#[test]
fn a_sample_of_hostile_configs_through_the_binary() {
    let keys = every_key();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[9; 32]);
    let mut failures = Vec::new();
    let mut tried = 0;
    // Every key once (with a random hostile value), through `dpx account --config`, which
    // validates the config, prepares the data and plans the run without training.
    for (i, key) in keys.iter().enumerate() {
        let value = HOSTILE_VALUES[(rng.next_u32() as usize) % HOSTILE_VALUES.len()];
        let path = dir.path().join(format!("c{i}.toml"));
        std::fs::write(&path, config_with(key, value)).unwrap();
        let data = dir.path().join("data");
        let o = run_bounded(
            dir.path(),
            &[
                "account",
                "--config",
                path.to_str().unwrap(),
                "--data-dir",
                data.to_str().unwrap(),
            ],
            Duration::from_secs(30),
        );
        tried += 1;
        if let Some(f) = judge(&format!("{key} = {value}"), &o, Allow::Strict) {
            failures.push(f);
        }
    }
    eprintln!("config through the binary: {tried} invocations");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A random hostile flag value: numbers at the edges, non-finite spellings, junk text.
fn flag_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "nan",
            "NaN",
            "inf",
            "-inf",
            "+inf",
            "infinity",
            "0",
            "-0",
            "-1",
            "1e308",
            "-1e308",
            "5e-324",
            "1e-400",
            "18446744073709551616",
            "9223372036854775807",
            "",
            " ",
            "0x10",
            "1,5",
            "\u{00e9}",
            "--",
            "-",
        ])
        .prop_map(String::from),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        "[ -~]{0,12}",
    ]
}

#[test]
fn every_flag_with_random_values_answers_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("base.toml");
    std::fs::write(&cfg, BASE).unwrap();
    let data = dir.path().join("data");
    let cfg = cfg.to_str().unwrap().to_string();
    let data = data.to_str().unwrap().to_string();
    // A one-point sweep of the base config, and a finished run for `report` and `collect`.
    let sweep = dir.path().join("sweep.toml");
    std::fs::write(
        &sweep,
        "base = \"base.toml\"\nseeds = [0]\n[grid]\n\"train.learning_rate\" = [0.5]\n",
    )
    .unwrap();
    let sweep = sweep.to_str().unwrap().to_string();
    let finished = dir.path().join("finished");
    let o = run_bounded(
        dir.path(),
        &[
            "run",
            "--quiet",
            "--threads",
            "1",
            "--out",
            finished.to_str().unwrap(),
            &cfg,
        ],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let finished = finished.to_str().unwrap().to_string();
    // Each subcommand's flags, with defaults that keep a clean invocation fast; the mutated flag
    // replaces its default. `data fetch` always points at a closed local port.
    type Flags = Vec<(&'static str, Option<String>)>;
    let subcommands: Vec<(Vec<String>, Flags)> = vec![
        (
            vec![
                "run".into(),
                "--quiet".into(),
                "--overwrite".into(),
                cfg.clone(),
            ],
            vec![
                ("--out", None),
                ("--threads", Some("1".into())),
                ("--data-dir", Some(data.clone())),
                ("--max-memory", None),
                ("--checkpoint-every", None),
            ],
        ),
        (
            vec!["account".into()],
            vec![
                ("--epsilon", Some("1".into())),
                ("--delta", Some("1e-5".into())),
                ("--noise-multiplier", None),
                ("--sample-rate", Some("0.01".into())),
                ("--dataset-size", None),
                ("--batch-size", None),
                ("--steps", Some("100".into())),
                ("--epochs", None),
                ("--schedule", None),
                ("--mechanism", None),
                ("--scale", None),
                ("--accountant", None),
                ("--sampling", None),
                ("--relation", None),
                ("--rdp-conversion", None),
                ("--zcdp-conversion", None),
                ("--orders", None),
                ("--pld-interval", None),
                ("--config", None),
                ("--data-dir", None),
            ],
        ),
        (
            vec!["bench".into(), "--no-sgemm".into()],
            vec![
                ("--workload", Some("logreg_mnist".into())),
                ("--steps", Some("1".into())),
                ("--threads", Some("1".into())),
                ("--batch", Some("8".into())),
                ("--mode", Some("nonprivate".into())),
            ],
        ),
        (
            vec!["sweep".into(), sweep.clone()],
            vec![
                ("--out", None),
                ("--threads", Some("1".into())),
                ("--dry-run", None),
                ("--shard", None),
                ("--slurm", None),
                ("--partition", None),
                ("--time", None),
                ("--cpus", None),
                ("--shards", None),
                ("--data-dir", Some(data.clone())),
                ("--max-memory", None),
                ("--quiet", None),
            ],
        ),
        (
            vec!["report".into(), finished.clone()],
            vec![
                ("--rows", None),
                ("--cols", None),
                ("--no-plots", None),
                ("--quiet", None),
            ],
        ),
        (
            vec!["collect".into(), finished.clone()],
            vec![("--out", None), ("--quiet", None)],
        ),
        (
            vec!["audit".into(), cfg.clone()],
            vec![
                ("--canaries", Some("20".into())),
                ("--guess-included", None),
                ("--guess-excluded", None),
                ("--runs", Some("1".into())),
                ("--seed", None),
                ("--confidence", None),
                ("--out", None),
                ("--threads", Some("1".into())),
                ("--data-dir", Some(data.clone())),
                ("--max-memory", None),
            ],
        ),
        (
            vec!["data".into(), "fetch".into()],
            vec![
                ("NAME", Some("a9a".into())),
                ("--data-dir", Some(data.clone())),
                ("--mirror", Some("http://127.0.0.1:9/".into())),
            ],
        ),
    ];
    let mut runner = TestRunner::new_with_rng(
        PtConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[5; 32]),
    );
    let strategy = flag_value();
    let mut failures = Vec::new();
    let mut tried = 0;
    let rounds = 3;
    for (base, flags) in &subcommands {
        for (i, (flag, _)) in flags.iter().enumerate() {
            let allow = match (base[0].as_str(), *flag) {
                ("data", _) => Allow::EnvFailure,
                ("bench", "--steps" | "--batch") => Allow::LongWork,
                ("audit", "--canaries" | "--runs") => Allow::LongWork,
                _ => Allow::Strict,
            };
            for _ in 0..rounds {
                let value = strategy.new_tree(&mut runner).unwrap().current();
                let out = dir.path().join(format!("out{tried}"));
                let mut args: Vec<String> = base.clone();
                for (j, (f, default)) in flags.iter().enumerate() {
                    let v = if i == j {
                        Some(value.clone())
                    } else if *f == "--out" {
                        Some(out.to_str().unwrap().to_string())
                    } else {
                        default.clone()
                    };
                    match v {
                        Some(v) if *f == "NAME" => args.push(v),
                        // `--flag=value` keeps a value starting with '-' a value.
                        Some(v) => args.push(format!("{f}={v}")),
                        None => {}
                    }
                }
                let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = run_bounded(dir.path(), &argv, Duration::from_secs(30));
                tried += 1;
                if let Some(f) = judge(&format!("dpx {}", args.join(" ")), &o, allow) {
                    failures.push(f);
                }
            }
        }
    }
    eprintln!("CLI flags: {tried} invocations with random values");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn huge_thread_counts_are_refused_by_every_subcommand() {
    // A regression: `dpx sweep --threads 100000000` tried to start that many workers and hung.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("base.toml"), BASE).unwrap();
    std::fs::write(
        dir.path().join("sweep.toml"),
        "base = \"base.toml\"\nseeds = [0]\n[grid]\n\"train.learning_rate\" = [0.5]\n",
    )
    .unwrap();
    for args in [
        &["run", "--quiet", "base.toml"][..],
        &["sweep", "--quiet", "sweep.toml"],
        &["audit", "base.toml"],
        &["bench", "--steps", "1"],
    ] {
        let mut argv = args.to_vec();
        argv.push("--threads=100000000");
        let o = run_bounded(dir.path(), &argv, Duration::from_secs(30));
        assert!(!o.timed_out, "dpx {argv:?}: no answer");
        assert_eq!(o.code, Some(2), "dpx {argv:?}: {}", o.stderr);
        assert!(o.stderr.contains("--threads"), "{}", o.stderr);
    }
}

/// Run `dpx ARGS` in `dir` and require exit 2 with exactly one `error:` line; returns that line.
fn refused_with_one_line(dir: &Path, args: &[&str]) -> String {
    let o = run_bounded(dir, args, Duration::from_secs(60));
    assert!(!o.timed_out, "dpx {args:?}: no answer");
    assert_eq!(o.code, Some(2), "dpx {args:?}: {}", o.stderr);
    let lines: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.starts_with("error"))
        .collect();
    assert_eq!(lines.len(), 1, "dpx {args:?}: {}", o.stderr);
    lines[0].to_string()
}

#[test]
fn plans_too_long_to_hold_are_refused_before_allocating() {
    // A regression: `train.steps = 9223372036854775807` panicked with "capacity overflow" and
    // `steps = 1e12` tried to allocate 8 TB of per-step noise multipliers.
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("epochs = 1", "steps = 9223372036854775807", "train.steps"),
        ("epochs = 1", "steps = 1000000000000", "train.steps"),
        ("epochs = 1", "steps = 100000001", "train.steps"),
        // 10^6 epochs of 300 examples, one per batch: 3·10^8 steps.
        (
            "epochs = 1\nexpected_batch_size = 30",
            "epochs = 1000000\nexpected_batch_size = 1",
            "train.epochs",
        ),
    ];
    for (from, to, key) in cases {
        let text = BASE.replace(from, to);
        assert_ne!(text, BASE);
        std::fs::write(dir.path().join("long.toml"), &text).unwrap();
        for args in [
            &["account", "--config", "long.toml"][..],
            &["run", "--quiet", "long.toml"],
        ] {
            let line = refused_with_one_line(dir.path(), args);
            assert!(line.contains(key), "{to}: dpx {args:?}: {line}");
            assert!(line.contains("100000000"), "{to}: names the limit: {line}");
        }
    }
}

#[cfg(unix)]
#[test]
fn endless_text_inputs_are_refused_at_their_size_limit() {
    // A regression: every text input was read until memory ran out.
    let dir = tempfile::tempdir().unwrap();
    let schedule = BASE.replace(
        "[privacy]",
        "[noise]\nschedule = \"file\"\npath = \"/dev/zero\"\n\n[privacy]",
    );
    std::fs::write(dir.path().join("schedule.toml"), schedule).unwrap();
    for (args, names) in [
        (&["run", "--quiet", "/dev/zero"][..], "/dev/zero"),
        (&["account", "--config", "/dev/zero"], "/dev/zero"),
        (&["sweep", "--quiet", "/dev/zero"], "/dev/zero"),
        (
            &[
                "account",
                "--schedule",
                "/dev/zero",
                "--delta",
                "1e-5",
                "--sample-rate",
                "0.01",
            ],
            "--schedule",
        ),
        (&["account", "--config", "schedule.toml"], "noise.path"),
    ] {
        let line = refused_with_one_line(dir.path(), args);
        assert!(line.contains(names), "dpx {args:?}: {line}");
        assert!(
            line.contains("/dev/zero"),
            "dpx {args:?}: names the file: {line}"
        );
        assert!(
            line.contains("limit"),
            "dpx {args:?}: names the limit: {line}"
        );
    }
}

#[test]
fn an_error_chain_prints_each_cause_once() {
    // A regression: "Is a directory (os error 21): Is a directory (os error 21)".
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a_directory.toml")).unwrap();
    let line = refused_with_one_line(dir.path(), &["run", "--quiet", "a_directory.toml"]);
    assert!(line.contains("a_directory.toml"), "{line}");
    let causes: Vec<&str> = line.split(": ").collect();
    let mut seen = BTreeSet::new();
    for c in &causes {
        assert!(seen.insert(*c), "`{c}` printed twice: {line}");
    }
}

#[test]
fn an_empty_data_dir_variable_means_unset() {
    // A regression: `DPX_DATA_DIR=` made clap refuse even synthetic runs ("a value is required
    // for '--data-dir'").
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("base.toml"), BASE).unwrap();
    for args in [
        &["account", "--config", "base.toml"][..],
        &["run", "--quiet", "base.toml"],
        &["audit", "base.toml", "--canaries", "10"],
    ] {
        let out = Command::new(assert_cmd::cargo::cargo_bin("dpx"))
            .current_dir(dir.path())
            .args(args)
            .env("DPX_DATA_DIR", "")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "dpx {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn audit_seeds_that_would_wrap_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("base.toml"), BASE).unwrap();
    let line = refused_with_one_line(
        dir.path(),
        &[
            "audit",
            "base.toml",
            "--seed",
            "18446744073709551615",
            "--runs",
            "3",
        ],
    );
    assert!(line.contains("--seed") && line.contains("--runs"), "{line}");
}

#[test]
fn a_subsample_larger_than_the_dataset_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = BASE.replace(
        "dataset = \"gaussian_mixture\"",
        "dataset = \"gaussian_mixture\"\nsubsample = 5000",
    );
    std::fs::write(dir.path().join("sub.toml"), text).unwrap();
    let line = refused_with_one_line(dir.path(), &["account", "--config", "sub.toml"]);
    assert!(
        line.contains("sub.toml") && line.contains("data.subsample"),
        "{line}"
    );
    assert!(
        line.contains("5000") && line.contains("300"),
        "names both sizes: {line}"
    );
}

#[test]
fn a_model_too_large_to_hold_is_refused_before_overwriting_anything() {
    // A regression: a CNN with out_channels = 65536, kernel_size = 1 (within the documented
    // ranges) asked for 210 GB in the forward pass, and with --overwrite the old results were
    // deleted before the crash.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("mnist");
    std::fs::create_dir(&data).unwrap();
    mnist::tiny_mnist(&data, 1100, 1);
    let config = |channels: u32| {
        format!(
            r#"[experiment]
name = "wide"
[data]
dataset = "mnist"
path = "mnist"
scale = true
[model]
architecture = "cnn"
[[model.layers]]
kind = "conv2d"
out_channels = {channels}
kernel_size = 1
[train]
steps = 2
expected_batch_size = 10
learning_rate = 0.1
[clip]
clip_norm = 1.0
[noise]
noise_multiplier = 1.0
[privacy]
delta = 1e-5
"#
        )
    };
    std::fs::write(dir.path().join("small.toml"), config(2)).unwrap();
    std::fs::write(dir.path().join("wide.toml"), config(65536)).unwrap();
    let out = run_bounded(
        dir.path(),
        &["run", "--quiet", "small.toml", "--out", "out"],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let before = std::fs::read(dir.path().join("out/summary.csv")).unwrap();
    for extra in [&[][..], &["--max-memory", "64"]] {
        let mut args = vec!["run", "--quiet", "wide.toml", "--out", "out", "--overwrite"];
        args.extend_from_slice(extra);
        let line = refused_with_one_line(dir.path(), &args);
        assert!(line.contains("wide.toml") && line.contains("GiB"), "{line}");
        assert!(
            line.contains("--max-memory"),
            "says how to raise it: {line}"
        );
        assert_eq!(
            std::fs::read(dir.path().join("out/summary.csv")).unwrap(),
            before,
            "the old results are kept"
        );
        assert!(dir.path().join("out/seeds/0.summary.csv").exists());
    }
    // The same refusal from a sweep (as a failure of the point) and an audit.
    std::fs::write(
        dir.path().join("sweep.toml"),
        "base = \"wide.toml\"\nseeds = [0]\n[grid]\n\"train.learning_rate\" = [0.1]\n",
    )
    .unwrap();
    let o = run_bounded(
        dir.path(),
        &[
            "sweep",
            "--quiet",
            "sweep.toml",
            "--out",
            "sw",
            "--max-memory",
            "64",
        ],
        Duration::from_secs(120),
    );
    assert!(
        o.code.is_some_and(|c| c != 0 && c != 101),
        "{:?} {}",
        o.code,
        o.stderr
    );
    assert!(o.stderr.contains("GiB"), "{}", o.stderr);
    let line = refused_with_one_line(dir.path(), &["audit", "wide.toml", "--max-memory", "64"]);
    assert!(line.contains("GiB"), "{line}");
}

#[test]
fn preprocessing_errors_name_the_file_and_the_key() {
    // A regression: "classes: expected classes in 0..2, found 7" named neither file nor key.
    let dir = tempfile::tempdir().unwrap();
    let with = |data_extra: &str, synthetic: &str| {
        BASE.replace(
            "dataset = \"gaussian_mixture\"",
            &format!("dataset = \"gaussian_mixture\"\n{data_extra}"),
        )
        .replace("n_train = 300", synthetic)
    };
    for (text, key) in [
        (with("classes = [0, 7]", "n_train = 300"), "data.classes"),
        (
            with("pca_components = 9", "n_train = 300"),
            "data.pca_components",
        ),
        (
            with("validation_fraction = 0.5", "n_train = 1"),
            "data.validation_fraction",
        ),
    ] {
        std::fs::write(dir.path().join("prep.toml"), &text).unwrap();
        let line = refused_with_one_line(dir.path(), &["account", "--config", "prep.toml"]);
        assert!(
            line.contains("prep.toml") && line.contains(key),
            "{key}: {line}"
        );
    }
}
