//! Build script: records the commit dpx is built from, for `dpx --version`.
//!
//! In order: the `DPX_GIT_COMMIT` environment variable (for packagers), `git rev-parse` when the
//! package is the top of a git checkout (`cargo build`, `cargo install --path .`,
//! `cargo install --git`), the `.cargo_vcs_info.json` that `cargo package` writes (a crates.io
//! build), else `unknown`. Needs no tool beyond cargo: a missing `git` only means `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// The short hash of HEAD when `dir` is the top of a git work tree (not a parent's repository),
/// asking cargo to rerun this script when HEAD or the branch it names moves.
fn from_git(dir: &Path) -> Option<String> {
    let top = PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let hash = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(dir, &["rev-parse", "--symbolic-full-name", "HEAD"])
        && branch.starts_with("refs/")
    {
        watched.push(branch);
    }
    for name in watched {
        if let Some(p) = git(dir, &["rev-parse", "--git-path", &name]) {
            let p = dir.join(p);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    Some(hash)
}

/// The commit `cargo package` recorded (`{"git": {"sha1": "..."}}`), shortened.
fn from_vcs_info(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let rest = &text[text.find("\"sha1\"")? + 6..];
    let start = rest.find('"')? + 1;
    let hash: String = rest[start..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .take(12)
        .collect();
    (hash.len() >= 7).then_some(hash)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DPX_GIT_COMMIT");
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let commit = std::env::var("DPX_GIT_COMMIT")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| from_git(&dir))
        .or_else(|| from_vcs_info(&dir))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=DPX_GIT_COMMIT={commit}");
}
