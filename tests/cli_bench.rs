//! `dpx bench` on the built binary: JSON output fields, and bad flags exit 2 naming the flag.

use assert_cmd::Command;
use predicates::str::contains;

/// `dpx bench --json` on `workload`, one thread, without the sgemm line, plus `extra`: one JSON
/// object per line.
fn bench_json(workload: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::cargo_bin("dpx")
        .unwrap()
        .args([
            "bench",
            "--workload",
            workload,
            "--threads",
            "1",
            "--json",
            "--no-sgemm",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn json_lines_carry_the_documented_fields() {
    let lines = bench_json("logreg_mnist", &["--steps", "1"]);
    assert_eq!(lines.len(), 2);
    for (line, mode) in lines.iter().zip(["nonprivate", "dp"]) {
        assert_eq!(line["workload"], "logreg_mnist");
        assert_eq!(line["mode"], mode);
        assert_eq!(line["threads"], 1);
        assert_eq!(line["batch"], 256);
        assert_eq!(line["params"], 7850);
        assert!(line["step_ms"].as_f64().unwrap() > 0.0);
        assert!(line["examples_per_s"].as_f64().unwrap() > 0.0);
        assert!(line["gflops"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn phases_break_down_the_dp_step_only() {
    let lines = bench_json("logreg_mnist", &["--steps", "2", "--phases"]);
    assert_eq!(lines.len(), 2);
    assert!(lines[0].get("phases_ms").is_none(), "{}", lines[0]);
    let phases = &lines[1]["phases_ms"];
    for key in [
        "forward_backward",
        "norms",
        "clipped_sum",
        "noise",
        "update",
    ] {
        let ms = phases[key].as_f64().unwrap_or(-1.0);
        assert!(ms >= 0.0, "{key}: {phases}");
    }
    assert!(phases["forward_backward"].as_f64().unwrap() > 0.0);

    // The table shows them on a line of their own under the DP row.
    Command::cargo_bin("dpx")
        .unwrap()
        .args([
            "bench",
            "--workload",
            "logreg_mnist",
            "--steps",
            "1",
            "--threads",
            "1",
            "--mode",
            "dp",
            "--no-sgemm",
            "--phases",
        ])
        .assert()
        .success()
        .stdout(contains("phases (ms): forward_backward"));
}

#[test]
fn the_bandmf_workload_runs_its_correlated_noise() {
    let lines = bench_json(
        "cnn_cifar10_bandmf8",
        &["--steps", "2", "--batch", "2", "--mode", "dp", "--phases"],
    );
    let line = &lines[0];
    assert_eq!(line["workload"], "cnn_cifar10_bandmf8");
    assert_eq!(line["params"], 550570);
    assert!(line["phases_ms"]["noise"].as_f64().unwrap() > 0.0);
}

#[test]
fn unknown_workload_and_zero_threads_are_bad_input() {
    Command::cargo_bin("dpx")
        .unwrap()
        .args(["bench", "--workload", "resnet"])
        .assert()
        .code(2)
        .stderr(contains("--workload"));
    Command::cargo_bin("dpx")
        .unwrap()
        .args(["bench", "--threads", "0"])
        .assert()
        .code(2)
        .stderr(contains("--threads"));
    Command::cargo_bin("dpx")
        .unwrap()
        .args(["bench", "--mode", "fast"])
        .assert()
        .code(2)
        .stderr(contains("--mode"));
}
