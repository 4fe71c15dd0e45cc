//! `dpx data fetch` and `data::fetch` against a local HTTP server on 127.0.0.1 serving small
//! generated files: success and skip, checksum mismatch (error, nothing left behind), 404,
//! fallback to the next source, and the CLI's exit codes.

#[path = "support/http_server.rs"]
mod http_server;

use std::path::Path;

use assert_cmd::Command;
use dpx::data::fetch::{
    self, FetchError, FetchObserver, FetchPlan, FileOutcome, RemoteFile, Silent, md5_hex,
};

/// Deterministic pseudo-random bytes (an LCG; content is irrelevant, size and MD5 matter).
fn bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect()
}

fn remote(name: &str, content: &[u8]) -> RemoteFile {
    RemoteFile {
        name: name.to_string(),
        md5: md5_hex(content).unwrap(),
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[derive(Default)]
struct Record {
    events: Vec<String>,
    bytes: u64,
}

impl FetchObserver for Record {
    fn skipped(&mut self, file: &str, _: &Path) {
        self.events.push(format!("skipped {file}"));
    }
    fn started(&mut self, url: &str, total: Option<u64>) {
        self.events.push(format!("started {url} {total:?}"));
    }
    fn progress(&mut self, bytes: u64) {
        self.bytes += bytes;
    }
    fn finished(&mut self, url: &str, _: &Path) {
        self.events.push(format!("finished {url}"));
    }
    fn failed(&mut self, url: &str, _: &FetchError, next_source: bool) {
        self.events.push(format!("failed {url} next={next_source}"));
    }
}

#[test]
fn errors_are_send_and_sync() {
    fn check<T: Send + Sync + 'static>() {}
    check::<FetchError>();
    check::<dpx::data::DataError>();
}

#[test]
fn md5_of_known_strings() {
    // RFC 1321, appendix A.5 test suite.
    assert_eq!(
        md5_hex(&b""[..]).unwrap(),
        "d41d8cd98f00b204e9800998ecf8427e"
    );
    assert_eq!(
        md5_hex(&b"abc"[..]).unwrap(),
        "900150983cd24fb0d6963f7d28e17f72"
    );
}

#[test]
fn downloads_verify_then_skip_when_present() {
    let a = bytes(300_000, 1);
    let b = bytes(10, 2);
    let base = http_server::serve(vec![("a.bin", a.clone()), ("b.txt", b.clone())], 2);
    let plan = FetchPlan {
        dataset: "toy".into(),
        files: vec![remote("a.bin", &a), remote("b.txt", &b)],
        base_urls: vec![base.clone()],
    };
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("toy");
    let mut rec = Record::default();
    let out = fetch::fetch(&plan, &dest, &mut rec).unwrap();
    assert_eq!(
        out,
        vec![
            FileOutcome::Downloaded(dest.join("a.bin")),
            FileOutcome::Downloaded(dest.join("b.txt"))
        ]
    );
    assert_eq!(std::fs::read(dest.join("a.bin")).unwrap(), a);
    assert_eq!(std::fs::read(dest.join("b.txt")).unwrap(), b);
    assert_eq!(listing(&dest), vec!["a.bin", "b.txt"]);
    assert_eq!(rec.bytes, 300_010);
    assert_eq!(rec.events[0], format!("started {base}a.bin Some(300000)"));

    // Present and verified: skipped without any request (the server has stopped serving).
    let mut rec = Record::default();
    let out = fetch::fetch(&plan, &dest, &mut rec).unwrap();
    assert!(matches!(out[0], FileOutcome::Skipped(_)));
    assert_eq!(rec.events, vec!["skipped a.bin", "skipped b.txt"]);
}

#[test]
fn a_corrupt_local_copy_is_replaced() {
    let a = bytes(1000, 3);
    let base = http_server::serve(vec![("a.bin", a.clone())], 1);
    let plan = FetchPlan {
        dataset: "toy".into(),
        files: vec![remote("a.bin", &a)],
        base_urls: vec![base],
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.bin"), b"garbage").unwrap();
    let out = fetch::fetch(&plan, dir.path(), &mut Silent).unwrap();
    assert!(matches!(out[0], FileOutcome::Downloaded(_)));
    assert_eq!(std::fs::read(dir.path().join("a.bin")).unwrap(), a);
}

#[test]
fn checksum_mismatch_is_an_error_and_leaves_nothing_behind() {
    let a = bytes(5000, 4);
    let base = http_server::serve(vec![("a.bin", a)], 1);
    let plan = FetchPlan {
        dataset: "toy".into(),
        files: vec![RemoteFile {
            name: "a.bin".into(),
            md5: "00000000000000000000000000000000".into(),
        }],
        base_urls: vec![base],
    };
    let dir = tempfile::tempdir().unwrap();
    let err = fetch::fetch(&plan, dir.path(), &mut Silent).unwrap_err();
    assert!(
        matches!(err, FetchError::ChecksumMismatch { ref expected, .. } if expected == "00000000000000000000000000000000"),
        "{err}"
    );
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

#[test]
fn not_found_is_an_http_status_error() {
    let base = http_server::serve(vec![], 1);
    let plan = FetchPlan {
        dataset: "toy".into(),
        files: vec![remote("missing.bin", b"x")],
        base_urls: vec![base],
    };
    let dir = tempfile::tempdir().unwrap();
    let err = fetch::fetch(&plan, dir.path(), &mut Silent).unwrap_err();
    assert!(
        matches!(err, FetchError::Status { status: 404, .. }),
        "{err}"
    );
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn falls_back_to_the_next_source() {
    let a = bytes(2000, 5);
    let base = http_server::serve(vec![("good/a.bin", a.clone())], 2);
    let plan = FetchPlan {
        dataset: "toy".into(),
        files: vec![remote("a.bin", &a)],
        base_urls: vec![format!("{base}bad"), format!("{base}good/")],
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rec = Record::default();
    fetch::fetch(&plan, dir.path(), &mut rec).unwrap();
    assert_eq!(rec.events[0], format!("failed {base}bad/a.bin next=true"));
    assert_eq!(
        rec.events.last().unwrap(),
        &format!("finished {base}good/a.bin")
    );
    assert_eq!(std::fs::read(dir.path().join("a.bin")).unwrap(), a);

    // Every source failing reports each failure.
    let base = http_server::serve(vec![], 2);
    let plan = FetchPlan {
        base_urls: vec![format!("{base}x/"), format!("{base}y/")],
        ..plan
    };
    let empty = tempfile::tempdir().unwrap();
    let err = fetch::fetch(&plan, empty.path(), &mut Silent).unwrap_err();
    assert!(
        matches!(err, FetchError::AllSourcesFailed { ref failures, .. } if failures.len() == 2),
        "{err}"
    );
}

#[test]
fn canonical_plans_name_the_official_files() {
    use dpx::data::NamedDataset;
    let mnist = fetch::plan(NamedDataset::Mnist);
    assert_eq!(mnist.files.len(), 4);
    assert!(mnist.base_urls[0].contains("ossci-datasets.s3.amazonaws.com/mnist"));
    assert!(mnist.base_urls[1].contains("yann.lecun.com"));
    assert_eq!(
        fetch::plan(NamedDataset::Cifar10).files[0].name,
        "cifar-10-binary.tar.gz"
    );
    let a9a = fetch::plan(NamedDataset::A9a).with_mirror("http://127.0.0.1:1/");
    assert_eq!(a9a.base_urls, vec!["http://127.0.0.1:1/"]);
    for d in NamedDataset::ALL {
        for f in fetch::plan(d).files {
            assert_eq!(f.md5.len(), 32);
            assert!(f.md5.chars().all(|c| c.is_ascii_hexdigit()));
        }
    }
}

// ---------------------------------------------------------------- the binary

fn dpx() -> Command {
    let mut c = Command::cargo_bin("dpx").unwrap();
    c.env_remove("DPX_DATA_DIR").env_remove("DPX_DATA_MIRROR");
    c
}

#[test]
fn cli_checksum_mismatch_exits_1_and_leaves_nothing() {
    let base = http_server::serve(vec![("a9a", b"+1 1:1\n".to_vec())], 1);
    let dir = tempfile::tempdir().unwrap();
    let out = dpx()
        .args(["data", "fetch", "a9a", "--data-dir"])
        .arg(dir.path())
        .env("DPX_DATA_MIRROR", &base)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MD5 checksum mismatch"), "{stderr}");
    assert!(
        stderr.contains("fb3596510d780aaf76a06dc721d49662"),
        "{stderr}"
    );
    assert!(listing(&dir.path().join("a9a")).is_empty());
}

#[test]
fn cli_not_found_exits_1_naming_the_url() {
    let base = http_server::serve(vec![], 1);
    let dir = tempfile::tempdir().unwrap();
    let out = dpx()
        .args(["data", "fetch", "fashion-mnist", "--mirror", &base])
        .env("DPX_DATA_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("train-images-idx3-ubyte.gz: HTTP status 404"),
        "{stderr}"
    );
    assert!(listing(&dir.path().join("fashion-mnist")).is_empty());
}

#[test]
fn cli_bad_input_exits_2() {
    let out = dpx()
        .args(["data", "fetch", "mnist", "--mirror", "ftp://example.org/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mirror"));
    let out = dpx().args(["data", "fetch", "imagenet"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
