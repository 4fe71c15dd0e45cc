//! Crash safety of `dpx run` and `dpx sweep` (issue 9, item 2) on the built binary: SIGKILL at
//! several points leaves no partial or corrupt CSV, `--resume` (for a sweep, the same command)
//! finishes with the outputs of an uninterrupted run; a read-only output directory and a full
//! disk are reported clearly.
//!
//! The full-disk and read-only cases mount a small tmpfs and need root; without it they say so
//! on stderr and check nothing else.

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::*;

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

fn dpx_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("dpx")
}

const SEEDS: [u64; 5] = [0, 1, 2, 3, 4];

fn config(dir: &Path, eval_every_steps: u32) -> PathBuf {
    let text = format!(
        r#"
[experiment]
name = "crash"
seeds = [0, 1, 2, 3, 4]

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
epochs = 40
expected_batch_size = 50
learning_rate = 0.3
eval_every_steps = {eval_every_steps}

[clip]
clip_norm = 1.0

[noise]
noise_multiplier = 1.0

[privacy]
delta = 1e-5
"#
    );
    let path = dir.join("crash.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn seed_summaries(out: &Path) -> usize {
    SEEDS
        .iter()
        .filter(|s| out.join(format!("seeds/{s}.summary.csv")).exists())
        .count()
}

/// Start `dpx run`, wait until `done` seed summaries exist (or `delay` passed when `done` is 0),
/// then SIGKILL it. Returns the seed files present at the kill.
fn run_and_kill(cfg: &Path, out: &Path, resume: bool, done: usize, delay: Duration) -> usize {
    let mut cmd = Process::new(dpx_path());
    cmd.args(["run", "--quiet", "--threads", "1", "--out"])
        .arg(out)
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if resume {
        cmd.arg("--resume");
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("dpx finished ({status}) before the kill point {done}");
        }
        let ready = if done == 0 {
            start.elapsed() >= delay
        } else {
            seed_summaries(out) >= done
        };
        if ready {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    seed_summaries(out)
}

/// Every CSV under `out` parses with a constant number of fields and at least a header and a row;
/// the experiment-level files are absent or list only complete seeds.
fn assert_no_partial_csv(out: &Path) {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [out.to_path_buf(), out.join("seeds")] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "csv") {
                files.push(p);
            }
        }
    }
    for p in &files {
        let mut r = csv::Reader::from_path(p).unwrap();
        let width = r
            .headers()
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .len();
        let mut rows = 0;
        for rec in r.records() {
            let rec = rec.unwrap_or_else(|e| panic!("{} is corrupt: {e}", p.display()));
            assert_eq!(rec.len(), width, "{} has a short row", p.display());
            rows += 1;
        }
        assert!(rows > 0, "{} has no rows", p.display());
        let text = std::fs::read_to_string(p).unwrap();
        assert!(text.ends_with('\n'), "{} is cut off", p.display());
    }
    // A seed's summary is written after its metrics: a summary without metrics is corrupt.
    for s in SEEDS {
        if out.join(format!("seeds/{s}.summary.csv")).exists() {
            assert!(out.join(format!("seeds/{s}.metrics.csv")).exists());
        }
    }
    // The experiment-level summary names only seeds whose own files are complete.
    if out.join("summary.csv").exists() {
        let mut r = csv::Reader::from_path(out.join("summary.csv")).unwrap();
        for rec in r.records() {
            let seed = rec.unwrap()[0].to_string();
            assert!(
                out.join(format!("seeds/{seed}.summary.csv")).exists(),
                "summary.csv lists seed {seed}"
            );
        }
    }
}

/// summary.csv without its wall-clock `seconds` column (the only column that varies).
fn summary_without_seconds(out: &Path) -> Vec<Vec<String>> {
    let mut r = csv::Reader::from_path(out.join("summary.csv")).unwrap();
    let i = r
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "seconds")
        .unwrap();
    r.records()
        .map(|rec| {
            rec.unwrap()
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, v)| v.to_string())
                .collect()
        })
        .collect()
}

#[test]
fn sigkill_then_resume_equals_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 20);
    let reference = dir.path().join("reference");
    let started = Instant::now();
    dpx()
        .args(["run", "--quiet", "--threads", "1", "--out"])
        .arg(&reference)
        .arg(&cfg)
        .assert()
        .success();
    // The timed kill points are fractions of an uninterrupted run, so they land inside the run
    // whatever the machine's speed (fixed delays raced a fast, idle machine).
    let whole = started.elapsed().as_millis() as u64;
    let want_metrics = std::fs::read(reference.join("metrics.csv")).unwrap();
    let want_summary = summary_without_seconds(&reference);

    // Kill points: early (before any seed: at 3% and 12% of an uninterrupted run), after 1, 2, 3
    // and 4 seeds, and a kill of the resumed run itself after it completed one more seed.
    let plans: Vec<Vec<(usize, u64)>> = vec![
        vec![(0, whole * 3 / 100)],
        vec![(0, whole * 12 / 100)],
        vec![(1, 0)],
        vec![(2, 0)],
        vec![(3, 0)],
        vec![(4, 0)],
        vec![(1, 0), (3, 0)],
    ];
    let mut cycles = 0;
    for (i, kills) in plans.iter().enumerate() {
        let out = dir.path().join(format!("killed{i}"));
        for (k, &(done, ms)) in kills.iter().enumerate() {
            let present = run_and_kill(&cfg, &out, k > 0, done, Duration::from_millis(ms));
            assert!(
                present < SEEDS.len(),
                "plan {i}: the run finished before the kill"
            );
            assert_no_partial_csv(&out);
            cycles += 1;
        }
        dpx()
            .args(["run", "--quiet", "--resume", "--threads", "1", "--out"])
            .arg(&out)
            .arg(&cfg)
            .assert()
            .success();
        assert_no_partial_csv(&out);
        assert_eq!(
            std::fs::read(out.join("metrics.csv")).unwrap(),
            want_metrics,
            "plan {i}: metrics.csv differs from the uninterrupted run"
        );
        assert_eq!(summary_without_seconds(&out), want_summary, "plan {i}");
    }
    eprintln!("kill-and-resume cycles passed: {cycles}");
    assert_eq!(cycles, 8);
}

/// A tmpfs of `size` mounted at `dir` (root only); unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, options: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Process::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Process::new("umount").arg(&self.0).status();
    }
}

#[test]
fn read_only_output_directory_is_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 20);
    let Some(fs) = Tmpfs::mount(&dir.path().join("ro"), "size=64k,ro") else {
        eprintln!("skipped: mounting a read-only tmpfs needs root");
        return;
    };
    let assert = dpx()
        .args(["run", "--quiet", "--out"])
        .arg(fs.0.join("out"))
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("output directory").and(predicate::str::contains("Read-only")),
        );
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn full_disk_is_reported_with_the_file_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    // eval_every_steps = 1: each seed's metrics file is tens of kilobytes, more than the disk.
    let cfg = config(dir.path(), 1);
    let Some(fs) = Tmpfs::mount(&dir.path().join("full"), "size=64k") else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let out = fs.0.join("out");
    let assert = dpx()
        .args(["run", "--quiet", "--threads", "1", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("No space left on device"));
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains(".csv"),
        "the error names the file: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Whatever was written is whole: no partial CSV and no temporary file left behind.
    assert_no_partial_csv(&out);
    for d in [out.clone(), out.join("seeds")] {
        for e in std::fs::read_dir(&d).into_iter().flatten() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.ends_with(".tmp"), "left behind: {name}");
        }
    }
}

/// Sweep jobs complete so far (`points/<id>/seeds/<seed>.summary.csv` files).
fn sweep_jobs_done(out: &Path) -> usize {
    let Ok(points) = std::fs::read_dir(out.join("points")) else {
        return 0;
    };
    points
        .flatten()
        .flat_map(|p| {
            std::fs::read_dir(p.path().join("seeds"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().ends_with(".summary.csv"))
        .count()
}

fn point_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out.join("points"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn sigkill_of_a_sweep_then_the_same_command_equals_an_uninterrupted_sweep() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), 20);
    // 2 points x 2 seeds = 4 jobs, one at a time (--threads 1).
    let sweep = dir.path().join("sweep.toml");
    std::fs::write(
        &sweep,
        "base = \"crash.toml\"\nseeds = [0, 1]\n[grid]\n\"train.learning_rate\" = [0.2, 0.3]\n",
    )
    .unwrap();
    let command = |out: &Path| {
        let mut cmd = Process::new(dpx_path());
        cmd.args(["sweep", "--quiet", "--threads", "1", "--out"])
            .arg(out)
            .arg(&sweep)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    };
    let reference = dir.path().join("reference");
    assert!(command(&reference).status().unwrap().success());
    let want_summary = summary_without_seconds(&reference);
    let want_metrics: Vec<Vec<u8>> = point_dirs(&reference)
        .iter()
        .map(|p| std::fs::read(p.join("metrics.csv")).unwrap())
        .collect();
    assert_eq!(want_metrics.len(), 2);

    // Kill points: early (50 ms), after 1 and 3 jobs, and twice in a row (after 1, then 2).
    let plans: Vec<Vec<(usize, u64)>> = vec![
        vec![(0, 50)],
        vec![(1, 0)],
        vec![(3, 0)],
        vec![(1, 0), (2, 0)],
    ];
    let mut cycles = 0;
    for (i, kills) in plans.iter().enumerate() {
        let out = dir.path().join(format!("killed{i}"));
        for &(done, ms) in kills {
            let mut child = command(&out).spawn().unwrap();
            let start = Instant::now();
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("plan {i}: dpx sweep finished ({status}) before the kill point");
                }
                let ready = if done == 0 {
                    start.elapsed() >= Duration::from_millis(ms)
                } else {
                    sweep_jobs_done(&out) >= done
                };
                if ready {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(120), "no progress");
                std::thread::sleep(Duration::from_millis(2));
            }
            child.kill().unwrap(); // SIGKILL on Unix
            child.wait().unwrap();
            assert!(sweep_jobs_done(&out) < 4, "plan {i}: the sweep finished");
            assert_no_partial_csv(&out);
            for p in point_dirs(&out) {
                assert_no_partial_csv(&p);
            }
            cycles += 1;
        }
        // The same command again resumes the sweep and finishes it.
        assert!(command(&out).status().unwrap().success(), "plan {i}");
        assert_eq!(summary_without_seconds(&out), want_summary, "plan {i}");
        let got: Vec<Vec<u8>> = point_dirs(&out)
            .iter()
            .map(|p| std::fs::read(p.join("metrics.csv")).unwrap())
            .collect();
        assert_eq!(got, want_metrics, "plan {i}: a point's metrics.csv differs");
    }
    eprintln!("sweep kill-and-resume cycles passed: {cycles}");
    assert_eq!(cycles, 5);
}

/// A fast three-seed experiment for the damaged-file cases.
fn small_config(dir: &Path) -> PathBuf {
    let path = dir.join("small.toml");
    std::fs::write(
        &path,
        r#"
[experiment]
name = "small"
seeds = [0, 1, 2]
[data]
dataset = "gaussian_mixture"
[data.synthetic]
n_train = 600
n_test = 200
n_features = 5
n_classes = 3
seed = 3
[model]
architecture = "logistic"
[train]
epochs = 2
expected_batch_size = 60
learning_rate = 1.0
eval_every_steps = 5
[clip]
clip_norm = 1.0
[noise]
noise_multiplier = 1.0
[privacy]
delta = 1e-5
"#,
    )
    .unwrap();
    path
}

#[test]
fn resume_reruns_seeds_whose_files_are_damaged() {
    // A regression: a truncated, empty or garbage seeds/<seed>.summary.csv made --resume exit 0
    // with that seed missing from summary.csv, and a metrics file cut in its last line was
    // glued to the next seed's first row.
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(dir.path());
    let out = dir.path().join("out");
    dpx()
        .args(["run", "--quiet", "--out"])
        .arg(&out)
        .arg(&cfg)
        .assert()
        .success();
    let metrics = std::fs::read(out.join("metrics.csv")).unwrap();
    let summary = summary_without_seconds(&out);
    assert_eq!(summary.len(), 3);
    let seed_file = |s: u64, kind: &str| out.join(format!("seeds/{s}.{kind}.csv"));
    type Damage<'a> = (&'a str, &'a dyn Fn(Vec<u8>) -> Vec<u8>);
    let damage: [Damage; 5] = [
        ("an empty summary", &|_| Vec::new()),
        ("a summary cut in its row", &|b: Vec<u8>| {
            b[..b.len() - 9].to_vec()
        }),
        ("a garbage summary", &|_| b"\x00\x01garbage,,\n".to_vec()),
        ("a summary without its row", &|b: Vec<u8>| {
            let end = b.iter().position(|&c| c == b'\n').unwrap() + 1;
            b[..end].to_vec()
        }),
        ("a metrics file cut in its last row", &|b: Vec<u8>| {
            b[..b.len() - 7].to_vec()
        }),
    ];
    for (what, cut) in damage {
        let (seed, kind) = if what.starts_with("a metrics") {
            (2, "metrics")
        } else {
            (1, "summary")
        };
        let path = seed_file(seed, kind);
        std::fs::write(&path, cut(std::fs::read(&path).unwrap())).unwrap();
        dpx()
            .args(["run", "--quiet", "--resume", "--out"])
            .arg(&out)
            .arg(&cfg)
            .assert()
            .success()
            .stderr(predicate::str::contains(format!(
                "seed {seed} is not complete"
            )))
            .stderr(predicate::str::contains("running it again"));
        assert_eq!(
            std::fs::read(out.join("metrics.csv")).unwrap(),
            metrics,
            "{what}: metrics.csv after the resume"
        );
        assert_eq!(summary_without_seconds(&out), summary, "{what}");
    }
}
