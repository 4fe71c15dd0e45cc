//! `dpx account` on the built binary: outputs, JSON fields, and bad input (exit code 2, one line
//! naming the flag).

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

fn json_of(args: &[&str]) -> Value {
    let out = dpx()
        .arg("account")
        .args(args)
        .arg("--json")
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).expect("valid JSON")
}

#[test]
fn epsilon_for_a_plan_matches_reference_row_10() {
    // docs/reference_vectors.md row 10 (Opacus MNIST README setting): q = 240/60000, sigma 1.1, 60 epochs
    // (15000 steps), delta 1e-5: improved RDP 2.5029, GDP 2.2417 (recomputed upstream).
    let v = json_of(&[
        "--noise-multiplier",
        "1.1",
        "--delta",
        "1e-5",
        "--dataset-size",
        "60000",
        "--batch-size",
        "240",
        "--epochs",
        "60",
    ]);
    assert_eq!(v["accountant"], "rdp");
    assert_eq!(v["steps"], 15000);
    assert_eq!(v["sample_rate"], 0.004);
    assert_eq!(v["noise_multiplier"], 1.1);
    assert_eq!(v["delta"], 1e-5);
    assert!(
        (v["epsilon"].as_f64().unwrap() - 2.5029).abs() < 5e-5,
        "{v}"
    );
    assert!(v["order"].as_f64().is_some());
}

#[test]
fn classic_conversion_reproduces_the_opacus_readme() {
    // docs/reference_vectors.md row 10: the README's 2.91 is the classic conversion, 2.9050 at order 9.1
    // (Opacus orders).
    let v = json_of(&[
        "--noise-multiplier",
        "1.1",
        "--delta",
        "1e-5",
        "--sample-rate",
        "0.004",
        "--steps",
        "15000",
        "--rdp-conversion",
        "classic",
        "--orders",
        &(1..100)
            .map(|x| format!("{}", 1.0 + f64::from(x) / 10.0))
            .chain((12..64).map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(","),
    ]);
    assert!(
        (v["epsilon"].as_f64().unwrap() - 2.9050).abs() < 5e-5,
        "{v}"
    );
    assert_eq!(v["order"], 9.1);
}

#[test]
fn noise_multiplier_for_a_target_is_conservative() {
    let v = json_of(&[
        "--epsilon",
        "3",
        "--delta",
        "1e-5",
        "--sample-rate",
        "0.004",
        "--steps",
        "10000",
    ]);
    let sigma = v["noise_multiplier"].as_f64().unwrap();
    let eps = v["epsilon"].as_f64().unwrap();
    assert!(eps <= 3.0 && eps > 2.999, "{v}");
    // Recomputing epsilon at the printed sigma gives the same (within-target) value.
    let w = json_of(&[
        "--noise-multiplier",
        &sigma.to_string(),
        "--delta",
        "1e-5",
        "--sample-rate",
        "0.004",
        "--steps",
        "10000",
    ]);
    assert_eq!(w["epsilon"].as_f64().unwrap(), eps);
}

#[test]
fn human_output_names_the_accountant_and_steps() {
    dpx()
        .args([
            "account",
            "--noise-multiplier",
            "1.3",
            "--delta",
            "1e-5",
            "--dataset-size",
            "60000",
            "--batch-size",
            "150",
            "--epochs",
            "15",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("accountant: rdp"))
        .stdout(predicate::str::contains("steps 6000"))
        .stdout(predicate::str::contains("ceil(15 × 60000 / 150)"));
}

#[test]
fn all_prints_every_applicable_accountant() {
    let v = json_of(&[
        "--noise-multiplier",
        "1.1",
        "--delta",
        "1e-5",
        "--sample-rate",
        "0.004",
        "--steps",
        "15000",
        "--all",
    ]);
    let names: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["accountant"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"rdp") && names.contains(&"gdp"),
        "{names:?}"
    );
    let skipped: Vec<&str> = v["not_applicable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["accountant"].as_str().unwrap())
        .collect();
    assert!(
        skipped.contains(&"pure") && skipped.contains(&"zcdp"),
        "{skipped:?}"
    );
    dpx()
        .args([
            "account",
            "--noise-multiplier",
            "1.1",
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.004",
            "--steps",
            "15000",
            "--all",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("rdp").and(predicate::str::contains("gdp")));
}

#[test]
fn schedule_file_plain_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("sigma.txt");
    std::fs::write(&plain, "# constant\n1.1\n1.1\n\n1.1\n").unwrap();
    let csv = dir.path().join("sigma.csv");
    std::fs::write(&csv, "step,noise_multiplier\n0,1.1\n1,1.1\n2,1.1\n").unwrap();
    let constant = json_of(&[
        "--noise-multiplier",
        "1.1",
        "--delta",
        "1e-5",
        "--sample-rate",
        "0.01",
        "--steps",
        "3",
    ]);
    for file in [&plain, &csv] {
        let v = json_of(&[
            "--schedule",
            file.to_str().unwrap(),
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.01",
        ]);
        assert_eq!(v["steps"], 3);
        assert_eq!(v["epsilon"], constant["epsilon"]);
    }
    // With a target, one scale is calibrated: sigma_t = kappa * s_t.
    let v = json_of(&[
        "--schedule",
        csv.to_str().unwrap(),
        "--delta",
        "1e-5",
        "--sample-rate",
        "0.01",
        "--epsilon",
        "1",
    ]);
    let kappa = v["scale"].as_f64().unwrap();
    assert!((v["noise_multiplier_min"].as_f64().unwrap() - 1.1 * kappa).abs() < 1e-12);
    assert!(v["epsilon"].as_f64().unwrap() <= 1.0);
}

#[test]
fn laplace_pure_matches_accelerated_table() {
    // docs/methods/accelerated.md §2 item 6: S1 = 40, n = 1e5, m = 1e3, T = 100, epsilon 1 gives
    // b = 0.0575, i.e. a scale relative to the batch-mean sensitivity S1/m of 0.0575·1000/40 = 1.4375.
    let v = json_of(&[
        "--mechanism",
        "laplace",
        "--epsilon",
        "1",
        "--dataset-size",
        "100000",
        "--batch-size",
        "1000",
        "--steps",
        "100",
        "--accountant",
        "pure",
        "--sampling",
        "without-replacement",
        "--relation",
        "replace-one",
    ]);
    // Event scales are relative to the add/remove sensitivity (one example's L1 bound, S1/2 per
    // example, S1/(2m) for the batch mean), and replace-one moves the query by twice that:
    // the same b = 0.0575 is a scale of 0.0575·1000/20 = 2.875.
    assert!((v["scale"].as_f64().unwrap() - 2.875).abs() < 2e-4, "{v}");
    assert!(v["epsilon"].as_f64().unwrap() <= 1.0);
}

#[test]
fn replace_one_full_batch_counts_the_distance_two() {
    // Two full-batch Gaussian steps at σ = 2.1117 under replace-one: a swap moves the clipped
    // sum by up to 2C, so the exact ε at δ = 1e-5 is 6.162. Before the fix rdp and zcdp printed
    // 3.00 and gdp 2.77 while pld printed 6.16.
    let v = json_of(&[
        "--noise-multiplier",
        "2.111713409423828",
        "--sample-rate",
        "1",
        "--steps",
        "2",
        "--delta",
        "1e-5",
        "--relation",
        "replace-one",
        "--all",
    ]);
    let results = v["results"].as_array().unwrap();
    let mut seen = Vec::new();
    for r in results {
        let name = r["accountant"].as_str().unwrap();
        if name == "adp-paper" || name == "zcdp-paper" {
            continue;
        }
        let eps = r["epsilon"].as_f64().unwrap();
        assert!(eps >= 6.16, "{name}: {eps} ({v})");
        seen.push(name);
    }
    for name in ["rdp", "pld", "zcdp", "gdp"] {
        assert!(seen.contains(&name), "{name} missing: {v}");
    }
}

#[test]
fn zcdp_paper_reproduces_the_dynamic_noise_sigma() {
    // docs/methods/dynamic_noise.md §2: (4, 1e-8), uniform T = 100 gives sigma = 15.958.
    let v = json_of(&[
        "--epsilon",
        "4",
        "--delta",
        "1e-8",
        "--sample-rate",
        "1",
        "--steps",
        "100",
        "--accountant",
        "zcdp-paper",
    ]);
    assert!(
        (v["noise_multiplier"].as_f64().unwrap() - 15.958).abs() < 1e-3,
        "{v}"
    );
}

fn bad(args: &[&str], flag: &str) {
    let assert = dpx().arg("account").args(args).assert().code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains(flag), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    let base = ["--delta", "1e-5", "--sample-rate", "0.01", "--steps", "100"];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter()
            .chain(extra.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: Vec<String>, flag: &str| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        bad(&refs, flag);
    };
    run(with(&["--noise-multiplier", "0"]), "--noise-multiplier");
    run(with(&["--noise-multiplier", "-1"]), "--noise-multiplier");
    run(with(&["--noise-multiplier", "NaN"]), "--noise-multiplier");
    run(with(&["--epsilon", "0"]), "--epsilon");
    run(with(&["--epsilon", "-3"]), "--epsilon");
    bad(
        &[
            "--noise-multiplier",
            "1",
            "--delta",
            "1",
            "--sample-rate",
            "0.01",
            "--steps",
            "10",
        ],
        "--delta",
    );
    bad(
        &[
            "--noise-multiplier",
            "1",
            "--delta",
            "0",
            "--sample-rate",
            "0.01",
            "--steps",
            "10",
        ],
        "--delta",
    );
    bad(
        &[
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--sample-rate",
            "1.5",
            "--steps",
            "10",
        ],
        "--sample-rate",
    );
    bad(
        &[
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--sample-rate",
            "0",
            "--steps",
            "10",
        ],
        "--sample-rate",
    );
    bad(
        &[
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.1",
            "--steps",
            "0",
        ],
        "--steps",
    );
    bad(
        &[
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.1",
            "--epochs",
            "NaN",
        ],
        "--epochs",
    );
    bad(
        &[
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.1",
            "--schedule",
            "/nonexistent/sigma.txt",
        ],
        "--schedule",
    );
    bad(
        &[
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.01",
            "--steps",
            "10",
            "--accountant",
            "zcdp",
        ],
        "--accountant",
    );
    // An unreachable target says so.
    bad(
        &[
            "--epsilon",
            "1e-9",
            "--delta",
            "1e-10",
            "--sample-rate",
            "1",
            "--steps",
            "1000000000",
        ],
        "1e6",
    );
}

#[test]
fn bad_schedule_contents_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sigma.txt");
    std::fs::write(&file, "1.0\nabc\n").unwrap();
    bad(
        &[
            "--schedule",
            file.to_str().unwrap(),
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.01",
        ],
        "line 2",
    );
    std::fs::write(&file, "1.0\n-2\n").unwrap();
    bad(
        &[
            "--schedule",
            file.to_str().unwrap(),
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.01",
        ],
        "--schedule",
    );
    let csv = dir.path().join("sigma.csv");
    std::fs::write(&csv, "step,sigma\n0,1.0\n").unwrap();
    bad(
        &[
            "--schedule",
            csv.to_str().unwrap(),
            "--delta",
            "1e-5",
            "--sample-rate",
            "0.01",
        ],
        "noise_multiplier column",
    );
}

#[test]
fn rdp_sigma_grid_is_conservative_and_close() {
    // 2000 distinct noise multipliers from 0.8 to 1.6: the grid rounds each sigma down, so its
    // epsilon is an upper bound on the exact one, and at a 1e-3 relative step it stays within
    // the effect of dividing every sigma by 1.001 (RdpAccountant::with_sigma_grid).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sigma.txt");
    let sigmas: Vec<String> = (0..2000)
        .map(|i| {
            format!(
                "{}",
                0.8 + 0.8 * f64::from(i) / 2000.0 + 1e-7 * f64::from(i % 7)
            )
        })
        .collect();
    std::fs::write(&file, sigmas.join("\n")).unwrap();
    let base = [
        "--schedule",
        file.to_str().unwrap(),
        "--delta",
        "1e-5",
        "--sample-rate",
        "0.01",
    ];
    let exact = json_of(&base)["epsilon"].as_f64().unwrap();
    let mut with_grid = base.to_vec();
    with_grid.extend(["--rdp-sigma-grid", "1e-3"]);
    let grid = json_of(&with_grid)["epsilon"].as_f64().unwrap();
    assert!(grid >= exact, "grid {grid} < exact {exact}");
    assert!(grid <= exact * 1.01, "grid {grid} vs exact {exact}");
    let mut bad_grid = base.to_vec();
    bad_grid.extend(["--rdp-sigma-grid", "0.5"]);
    bad(&bad_grid, "--rdp-sigma-grid");
}
