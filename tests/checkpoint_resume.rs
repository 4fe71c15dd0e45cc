//! Mid-run checkpoints on the built binary: a run SIGKILLed at a random point after its first
//! checkpoint, or stopped by SIGTERM, and then resumed with `--resume` writes the same bytes as
//! an uninterrupted run (every CSV; `summary.csv` but for `seconds`); the checkpoints are
//! owner-only and gone once their seeds finish; with secure noise a resumed seed draws fresh
//! noise and every ε equals an uninterrupted run's; a checkpoint of another seed is refused with
//! exit 2 naming the file, a damaged one is noted and its seed trained again from step 0; an
//! `[accelerated]` run checkpoints too (its resumption is tested bit for bit in
//! `src/train/checkpoint/tests.rs`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant, SystemTime};

use assert_cmd::Command;
use predicates::prelude::*;

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

const SEEDS: [u64; 3] = [0, 1, 2];
const EVERY: &str = "40";

fn config(dir: &Path) -> PathBuf {
    config_with(dir, "")
}

/// The experiment with `privacy_extra` appended to its `[privacy]` table.
fn config_with(dir: &Path, privacy_extra: &str) -> PathBuf {
    let text = r#"
[experiment]
name = "ckpt"
seeds = [0, 1, 2]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = 4000
n_test = 500
n_features = 20
n_classes = 3
separation = 4.0
seed = 3

[model]
architecture = "mlp"
hidden = [32]

[train]
epochs = 60
expected_batch_size = 50
learning_rate = 0.3
optimizer = "momentum"
momentum = 0.5
eval_every_steps = 70
# A diagnostic kept across windows: its sums must survive a resume too.
eval_gradient_error = true

[clip]
policy = "quantile"
clip_norm = 0.5

[privacy]
epsilon = 3.0
delta = 1e-5
"#;
    let path = dir.join("ckpt.toml");
    std::fs::write(&path, format!("{text}{privacy_extra}\n")).unwrap();
    path
}

fn spawn(cfg: &Path, out: &Path, extra: &[&str]) -> Child {
    Process::new(assert_cmd::cargo::cargo_bin("dpx"))
        .args(["run", "--quiet", "--threads", "1", "--out"])
        .arg(out)
        .arg(cfg)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn checkpoints(out: &Path) -> Vec<PathBuf> {
    SEEDS
        .iter()
        .map(|s| out.join(format!("seeds/{s}.checkpoint")))
        .filter(|p| p.exists())
        .collect()
}

/// A pseudo-random number of milliseconds below `max` (from the clock: each run kills elsewhere).
fn random_ms(max: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    nanos.wrapping_mul(0x9E37_79B9_7F4A_7C15) % max
}

/// Wait until a checkpoint exists, then a random while longer, then SIGKILL.
fn kill_after_a_checkpoint(mut child: Child, out: &Path) {
    let start = Instant::now();
    while checkpoints(out).is_empty() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("dpx finished ({status}) before its first checkpoint");
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(random_ms(150)));
    assert!(
        child.try_wait().unwrap().is_none(),
        "dpx finished before the kill"
    );
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
}

fn reference(dir: &Path, cfg: &Path) -> PathBuf {
    let out = dir.join("reference");
    dpx()
        .args(["run", "--quiet", "--threads", "2", "--out"])
        .arg(&out)
        .arg(cfg)
        .assert()
        .success();
    out
}

/// A CSV's rows with the `seconds` column removed (wall-clock time legitimately differs).
fn without_seconds(path: &Path) -> Vec<Vec<String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().clone();
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| &header[i] != "seconds")
        .collect();
    let mut rows = vec![keep.iter().map(|&i| header[i].to_string()).collect()];
    for rec in r.records() {
        let rec = rec.unwrap();
        rows.push(keep.iter().map(|&i| rec[i].to_string()).collect());
    }
    rows
}

fn assert_same_outputs(reference: &Path, out: &Path) {
    let mut files = vec![PathBuf::from("metrics.csv"), PathBuf::from("config.toml")];
    for s in SEEDS {
        files.push(PathBuf::from(format!("seeds/{s}.metrics.csv")));
    }
    for f in &files {
        let a = std::fs::read(reference.join(f)).unwrap();
        let b = std::fs::read(out.join(f)).unwrap();
        assert!(a == b, "{} differs from the uninterrupted run", f.display());
    }
    let mut summaries = vec![PathBuf::from("summary.csv")];
    for s in SEEDS {
        summaries.push(PathBuf::from(format!("seeds/{s}.summary.csv")));
    }
    for f in &summaries {
        assert_eq!(
            without_seconds(&reference.join(f)),
            without_seconds(&out.join(f)),
            "{} differs from the uninterrupted run",
            f.display()
        );
    }
    assert!(checkpoints(out).is_empty(), "checkpoints left behind");
}

#[test]
fn sigkill_after_a_checkpoint_then_resume_equals_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let reference = reference(dir.path(), &cfg);
    let out = dir.path().join("killed");
    kill_after_a_checkpoint(spawn(&cfg, &out, &["--checkpoint-every", EVERY]), &out);
    let left = checkpoints(&out);
    assert!(!left.is_empty());
    #[cfg(unix)]
    for p in &left {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is readable by others", p.display());
    }
    // Killed again while resuming, once any checkpoint has changed (the resumed seed's next
    // one, or the next seed's first).
    let contents = |out: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        checkpoints(out)
            .into_iter()
            .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
            .collect()
    };
    let before = contents(&out);
    let mut child = spawn(&cfg, &out, &["--resume", "--checkpoint-every", EVERY]);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        let now = contents(&out);
        if (!now.is_empty() && now != before) || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = child.kill();
    child.wait().unwrap();

    dpx()
        .args([
            "run",
            "--threads",
            "1",
            "--resume",
            "--checkpoint-every",
            EVERY,
            "--out",
        ])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success()
        .stderr(predicate::str::contains("from its checkpoint at step"));
    assert_same_outputs(&reference, &out);
}

/// Start a run that never checkpoints periodically, SIGTERM it `delay` into training and check
/// that it exits as interrupted (the checkpoint it leaves is the interrupt's). Returns `false`
/// when the run had already finished (a fast machine): then nothing was interrupted.
#[cfg(unix)]
fn sigterm_mid_run(cfg: &Path, out: &Path, delay: Duration) -> bool {
    let mut child = spawn(cfg, out, &["--checkpoint-every", "100000000"]);
    let start = Instant::now();
    while !out.join("seeds").exists() {
        assert!(start.elapsed() < Duration::from_secs(120), "no output");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(delay);
    if child.try_wait().unwrap().is_some() {
        return false;
    }
    let pid = child.id().to_string();
    let sent = Process::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success());
    match child.wait().unwrap().code() {
        Some(130) => true,
        // It finished between the check above and the signal.
        Some(0) => false,
        other => panic!("SIGTERM is an interruption (exit 130), got {other:?}"),
    }
}

/// SIGTERM runs of `cfg` (in `dir/{prefix}{attempt}`) until one stops a seed in flight, which
/// must leave exactly one checkpoint; returns that run's output directory. A signal that lands
/// between two seeds, or before the first step on a loaded machine, finds no seed in flight and
/// leaves no checkpoint (also correct); a run that finishes before its signal is due was too fast
/// for the delay, which is then halved.
#[cfg(unix)]
fn sigterm_a_seed_in_flight(cfg: &Path, dir: &Path, prefix: &str) -> PathBuf {
    let mut max_delay_ms = 450;
    for attempt in 0..12 {
        let out = dir.join(format!("{prefix}{attempt}"));
        let delay = Duration::from_millis(max_delay_ms / 3 + random_ms(max_delay_ms * 2 / 3));
        if !sigterm_mid_run(cfg, &out, delay) {
            max_delay_ms = (max_delay_ms / 2).max(3);
            continue;
        }
        let n = checkpoints(&out).len();
        assert!(n <= 1, "at most the seed in flight checkpoints, found {n}");
        if n == 1 {
            return out;
        }
    }
    panic!("no attempt stopped a seed in flight");
}

#[cfg(unix)]
#[test]
fn sigterm_writes_a_checkpoint_and_resume_equals_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let reference = reference(dir.path(), &cfg);
    let out = sigterm_a_seed_in_flight(&cfg, dir.path(), "stopped");
    dpx()
        .args(["run", "--threads", "1", "--resume", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success()
        .stderr(predicate::str::contains("from its checkpoint at step"));
    assert_same_outputs(&reference, &out);
}

#[test]
fn another_seeds_checkpoint_is_refused_and_a_damaged_one_restarts_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out = dir.path().join("tampered");
    kill_after_a_checkpoint(spawn(&cfg, &out, &["--checkpoint-every", EVERY]), &out);
    // With one thread the seeds train in order: seed 0 has the checkpoint, seed 2 nothing yet.
    let ours = out.join("seeds/0.checkpoint");
    let theirs = out.join("seeds/2.checkpoint");
    assert!(ours.exists() && !theirs.exists());
    std::fs::copy(&ours, &theirs).unwrap();
    let assert = dpx()
        .args(["run", "--quiet", "--resume", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("2.checkpoint") && stderr.contains("refused"),
        "{stderr}"
    );
    // Cut short: noted, and seed 2 trains from step 0 to the same result.
    let bytes = std::fs::read(&theirs).unwrap();
    std::fs::write(&theirs, &bytes[..bytes.len() / 2]).unwrap();
    dpx()
        .args(["run", "--quiet", "--threads", "2", "--resume", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success()
        .stderr(
            predicate::str::contains("2.checkpoint")
                .and(predicate::str::contains("seed 2 starts again from step 0")),
        );
    let reference = reference(dir.path(), &cfg);
    assert_same_outputs(&reference, &out);
}

#[test]
fn an_accelerated_run_checkpoints_to_the_same_results_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("acc.toml");
    std::fs::write(
        &cfg,
        r#"
[experiment]
name = "acc"
seeds = [0, 1]
[data]
dataset = "logistic_synthetic"
[data.synthetic]
n_train = 500
n_test = 100
n_features = 5
seed = 1
[model]
architecture = "logistic"
l2 = 0.02
[train]
steps = 20
sampler = "fixed_size"
batch_size = 100
eval_every_steps = 4
[accelerated]
method = "heavy_ball"
epsilon = 1.0
"#,
    )
    .unwrap();
    let run = |out: &str, extra: &[&str]| {
        dpx()
            .args(["run", "--quiet", "--out"])
            .arg(dir.path().join(out))
            .arg(&cfg)
            .args(extra)
            .env("DPX_DATA_DIR", dir.path())
            .assert()
            .success();
        dir.path().join(out)
    };
    let plain = run("plain", &[]);
    let checkpointed = run("checkpointed", &["--checkpoint-every", "3"]);
    for f in ["metrics.csv", "seeds/0.metrics.csv", "seeds/1.metrics.csv"] {
        assert_eq!(
            std::fs::read(plain.join(f)).unwrap(),
            std::fs::read(checkpointed.join(f)).unwrap(),
            "{f}"
        );
    }
    assert!(
        checkpoints(&checkpointed).is_empty(),
        "checkpoints left behind"
    );
}

/// Secure noise: the checkpoint holds no noise state, the resumed seed draws fresh noise, and the
/// ledger is complete: ε in every row and summary equals an uninterrupted secure run's.
#[cfg(unix)]
#[test]
fn secure_noise_resumes_with_fresh_noise_and_the_same_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with(dir.path(), "secure_noise = true");
    let reference = reference(dir.path(), &cfg);
    let out = sigterm_a_seed_in_flight(&cfg, dir.path(), "secure");
    dpx()
        .args(["run", "--threads", "1", "--resume", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "secure noise: fresh noise from here on",
        ));
    let columns = |path: &Path, names: &[&str]| -> Vec<Vec<String>> {
        let mut r = csv::Reader::from_path(path).unwrap();
        let header = r.headers().unwrap().clone();
        let idx: Vec<usize> = names
            .iter()
            .map(|n| header.iter().position(|h| h == *n).unwrap())
            .collect();
        r.records()
            .map(|rec| {
                let rec = rec.unwrap();
                idx.iter().map(|&i| rec[i].to_string()).collect()
            })
            .collect()
    };
    let metrics = ["seed", "step", "epsilon", "delta", "noise_multiplier"];
    let summary = ["seed", "status", "steps", "epsilon", "noise_mode"];
    assert_eq!(
        columns(&reference.join("metrics.csv"), &metrics),
        columns(&out.join("metrics.csv"), &metrics)
    );
    let resumed = columns(&out.join("summary.csv"), &summary);
    assert_eq!(columns(&reference.join("summary.csv"), &summary), resumed);
    assert!(resumed.iter().all(|r| r[4] == "secure"));
    assert!(checkpoints(&out).is_empty());
}
