//! `dpx bench` on the built binary: JSON output fields, and bad flags exit 2 naming the flag.

use assert_cmd::Command;
use predicates::str::contains;

#[test]
fn json_lines_carry_the_documented_fields() {
    let out = Command::cargo_bin("dpx")
        .unwrap()
        .args([
            "bench",
            "--workload",
            "logreg_mnist",
            "--steps",
            "1",
            "--threads",
            "1",
            "--json",
            "--no-sgemm",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
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
