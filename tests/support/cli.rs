//! What the command-line tests share: the built binary, config files written into a temporary
//! directory, a column of `summary.csv`, and ε from `dpx account --json`.

// Each test file includes this module and uses some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

pub fn dpx() -> Command {
    Command::cargo_bin("dpx").expect("the dpx binary is built")
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

pub fn summary_column(out: &Path, column: &str) -> Vec<String> {
    let mut r = csv::Reader::from_path(out.join("summary.csv")).unwrap();
    let i = r
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == column)
        .unwrap();
    r.records().map(|rec| rec.unwrap()[i].to_string()).collect()
}

/// `dpx account --json --delta 1e-5` with the given flags, parsed.
pub fn account_json(flags: &[&str]) -> serde_json::Value {
    account_json_at("1e-5", flags)
}

/// `dpx account --json --delta <delta>` with the given flags, parsed.
pub fn account_json_at(delta: &str, flags: &[&str]) -> serde_json::Value {
    let out = dpx()
        .args(["account", "--json", "--delta", delta])
        .args(flags)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

/// ε of `dpx account --json` with the given flags (and δ = 1e-5).
pub fn account_epsilon(flags: &[&str]) -> f64 {
    account_json(flags)["epsilon"].as_f64().unwrap()
}
