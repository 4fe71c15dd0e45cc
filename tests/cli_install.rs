//! What `cargo install` users get beside `dpx` itself: `--version` naming the commit, shell
//! completions and man pages generated from the parser's own clap definitions.

use assert_cmd::Command;

fn dpx() -> Command {
    Command::cargo_bin("dpx").unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = dpx().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn version_names_the_package_version_and_the_commit() {
    let v = stdout_of(&["--version"]);
    let want = format!("dpx {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(v.starts_with(&want), "{v}");
    let commit = v[want.len()..].trim_end().trim_end_matches(')');
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{v}"
    );
}

#[test]
fn completions_cover_every_subcommand_in_each_shell() {
    let bash = stdout_of(&["completions", "bash"]);
    assert!(bash.contains("complete -F _dpx"), "{bash}");
    let zsh = stdout_of(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef dpx"), "{zsh}");
    let fish = stdout_of(&["completions", "fish"]);
    assert!(fish.contains("complete -c dpx"), "{fish}");
    for sub in [
        "run",
        "account",
        "sweep",
        "report",
        "audit",
        "completions",
        "man",
    ] {
        for (shell, text) in [("bash", &bash), ("zsh", &zsh), ("fish", &fish)] {
            assert!(text.contains(sub), "{shell} completion lacks `{sub}`");
        }
    }
    // Flags come from the same definitions as the parser.
    assert!(bash.contains("--log-scale") && fish.contains("log-scale"));
}

#[test]
fn an_unknown_shell_is_bad_input() {
    let out = dpx().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn man_pages_are_roff_for_dpx_and_each_subcommand() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH dpx"), "{page}");
    assert!(page.contains("report"), "{page}");
    let dir = tempfile::tempdir().unwrap();
    let out = dpx()
        .args(["man", "--out-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for name in ["dpx.1", "dpx-run.1", "dpx-report.1", "dpx-completions.1"] {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(text.contains(".TH"), "{name}");
    }
}
