//! Data room: downloading the standard datasets into the data directory.
//!
//! For each file of a dataset: if it is already present with the right MD5 it is skipped;
//! otherwise it is streamed from each base URL in turn (the canonical mirror first) into a
//! temporary file beside the destination while its MD5 is computed, and renamed into place
//! only when the checksum matches, so an interrupted or corrupt download never leaves a file
//! under the final name. A base-URL override (`DPX_DATA_MIRROR` / `--mirror`) replaces the
//! canonical URLs, which also makes this testable against a local server.
//!
//! Checksums: MNIST, CIFAR-10 and a9a are the official ones (MNIST and a9a as listed in the
//! project's dataset notes; CIFAR-10's archive as published on the dataset page);
//! Fashion-MNIST's are those published in the zalandoresearch/fashion-mnist README; SVHN's are
//! those torchvision's `SVHN` dataset class checks (the dataset page publishes none).
//!
//! Owns HTTP, checksums and atomic writes. Reports progress through [`FetchObserver`] and
//! never draws to a terminal itself (that is `cli/`). Must not parse the files.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use md5::{Digest, Md5};

use super::source::NamedDataset;

/// The environment variable holding a base-URL override for every file.
pub const MIRROR_ENV: &str = "DPX_DATA_MIRROR";

/// The most bytes accepted for one downloaded file (the largest, CIFAR-10, is 170 MB).
pub const MAX_DOWNLOAD_BYTES: u64 = 1 << 30;

/// One file to download and the MD5 (lower-case hex) it must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    pub name: String,
    pub md5: String,
}

/// What to download: files, and the base URLs to try for each file, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPlan {
    /// The dataset's name (also the sub-directory it goes into).
    pub dataset: String,
    pub files: Vec<RemoteFile>,
    pub base_urls: Vec<String>,
}

fn files(list: &[(&str, &str)]) -> Vec<RemoteFile> {
    list.iter()
        .map(|(name, md5)| RemoteFile {
            name: name.to_string(),
            md5: md5.to_string(),
        })
        .collect()
}

/// The canonical plan for a named dataset.
pub fn plan(dataset: NamedDataset) -> FetchPlan {
    let (files, base_urls): (Vec<RemoteFile>, Vec<&str>) = match dataset {
        NamedDataset::Mnist => (
            files(&[
                (
                    "train-images-idx3-ubyte.gz",
                    "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                ),
                (
                    "train-labels-idx1-ubyte.gz",
                    "d53e105ee54ea40749a09fcbcd1e9432",
                ),
                (
                    "t10k-images-idx3-ubyte.gz",
                    "9fb629c4189551a2d022fa330f9573f3",
                ),
                (
                    "t10k-labels-idx1-ubyte.gz",
                    "ec29112dd5afa0611ce80d1b7f02629c",
                ),
            ]),
            vec![
                "https://ossci-datasets.s3.amazonaws.com/mnist/",
                "http://yann.lecun.com/exdb/mnist/",
            ],
        ),
        NamedDataset::FashionMnist => (
            files(&[
                (
                    "train-images-idx3-ubyte.gz",
                    "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                ),
                (
                    "train-labels-idx1-ubyte.gz",
                    "25c81989df183df01b3e8a0aad5dffbe",
                ),
                (
                    "t10k-images-idx3-ubyte.gz",
                    "bef4ecab320f06d8554ea6380940ec79",
                ),
                (
                    "t10k-labels-idx1-ubyte.gz",
                    "bb300cfdad3c16e7a12a480ee83cd310",
                ),
            ]),
            vec!["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"],
        ),
        NamedDataset::Cifar10 => (
            files(&[("cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530")]),
            vec!["https://www.cs.toronto.edu/~kriz/"],
        ),
        NamedDataset::Svhn => (
            files(&[
                ("train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373"),
                ("test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3"),
            ]),
            vec!["http://ufldl.stanford.edu/housenumbers/"],
        ),
        NamedDataset::A9a => (
            files(&[
                ("a9a", "fb3596510d780aaf76a06dc721d49662"),
                ("a9a.t", "f0bb16cf1ee3e80ff560e9d132ee647e"),
            ]),
            vec!["https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/"],
        ),
    };
    FetchPlan {
        dataset: dataset.name().to_string(),
        files,
        base_urls: base_urls.into_iter().map(String::from).collect(),
    }
}

impl FetchPlan {
    /// Replace every base URL by `mirror` (files are fetched as `<mirror>/<name>`).
    pub fn with_mirror(mut self, mirror: &str) -> Self {
        self.base_urls = vec![mirror.to_string()];
        self
    }
}

/// A failed download.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The server answered with an HTTP error status.
    #[error("{url}: HTTP status {status}")]
    Status { url: String, status: u16 },
    /// No answer: connection, TLS, timeout or a body cut short.
    #[error("{url}: {message}")]
    Network { url: String, message: String },
    /// The bytes received do not have the expected MD5; nothing was written.
    #[error("{url}: MD5 checksum mismatch: expected {expected}, found {found} (file discarded)")]
    ChecksumMismatch {
        url: String,
        expected: String,
        found: String,
    },
    /// The server sent more than [`MAX_DOWNLOAD_BYTES`].
    #[error("{url}: body larger than the limit of {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    /// Every base URL failed for one file.
    #[error("{file}: every source failed: {}", .failures.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("; "))]
    AllSourcesFailed {
        file: String,
        failures: Vec<FetchError>,
    },
    /// A local file operation failed.
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Progress callbacks, so the caller decides how to show them.
pub trait FetchObserver {
    /// `file` is already present with the right checksum.
    fn skipped(&mut self, file: &str, path: &Path);
    /// A download of `url` started; `total` is the Content-Length when the server sent one.
    fn started(&mut self, url: &str, total: Option<u64>);
    /// `bytes` more bytes arrived.
    fn progress(&mut self, bytes: u64);
    /// The download verified and was moved to `path`.
    fn finished(&mut self, url: &str, path: &Path);
    /// The download from `url` failed; `next_source` says whether another URL will be tried.
    fn failed(&mut self, url: &str, error: &FetchError, next_source: bool);
}

/// An observer that ignores everything.
pub struct Silent;

impl FetchObserver for Silent {
    fn skipped(&mut self, _: &str, _: &Path) {}
    fn started(&mut self, _: &str, _: Option<u64>) {}
    fn progress(&mut self, _: u64) {}
    fn finished(&mut self, _: &str, _: &Path) {}
    fn failed(&mut self, _: &str, _: &FetchError, _: bool) {}
}

/// What happened to each file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// Already present and verified.
    Skipped(PathBuf),
    /// Downloaded, verified and moved into place.
    Downloaded(PathBuf),
}

/// The lower-case hex MD5 of everything `reader` yields.
pub fn md5_hex<R: Read>(mut reader: R) -> std::io::Result<String> {
    let mut hasher = Md5::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The lower-case hex MD5 of a file.
pub fn md5_file(path: &Path) -> Result<String, FetchError> {
    let io = |source| FetchError::Io {
        path: path.to_path_buf(),
        source,
    };
    md5_hex(File::open(path).map_err(io)?).map_err(io)
}

/// Download every file of `plan` into `dest_dir` (created if needed).
pub fn fetch(
    plan: &FetchPlan,
    dest_dir: &Path,
    observer: &mut dyn FetchObserver,
) -> Result<Vec<FileOutcome>, FetchError> {
    fs::create_dir_all(dest_dir).map_err(|source| FetchError::Io {
        path: dest_dir.to_path_buf(),
        source,
    })?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .user_agent(concat!("dpx/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut outcomes = Vec::with_capacity(plan.files.len());
    for file in &plan.files {
        let dest = dest_dir.join(&file.name);
        if dest.is_file() && md5_file(&dest)? == file.md5 {
            observer.skipped(&file.name, &dest);
            outcomes.push(FileOutcome::Skipped(dest));
            continue;
        }
        let mut failures = Vec::new();
        for (k, base) in plan.base_urls.iter().enumerate() {
            let url = format!("{}/{}", base.trim_end_matches('/'), file.name);
            match download(&agent, &url, &file.md5, &dest, observer) {
                Ok(()) => {
                    observer.finished(&url, &dest);
                    break;
                }
                Err(e) => {
                    let fatal = matches!(e, FetchError::Io { .. });
                    let next_source = !fatal && k + 1 < plan.base_urls.len();
                    observer.failed(&url, &e, next_source);
                    if fatal {
                        return Err(e);
                    }
                    failures.push(e);
                }
            }
        }
        if failures.len() == plan.base_urls.len() {
            return Err(if failures.len() == 1 {
                failures.remove(0)
            } else {
                FetchError::AllSourcesFailed {
                    file: file.name.clone(),
                    failures,
                }
            });
        }
        outcomes.push(FileOutcome::Downloaded(dest));
    }
    Ok(outcomes)
}

/// Removes the temporary file unless disarmed.
struct TempFile(Option<PathBuf>);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

fn download(
    agent: &ureq::Agent,
    url: &str,
    md5: &str,
    dest: &Path,
    observer: &mut dyn FetchObserver,
) -> Result<(), FetchError> {
    let network = |e: &dyn std::fmt::Display| FetchError::Network {
        url: url.to_string(),
        message: e.to_string(),
    };
    let mut response = match agent.get(url).call() {
        Ok(r) => r,
        Err(ureq::Error::StatusCode(status)) => {
            return Err(FetchError::Status {
                url: url.to_string(),
                status,
            });
        }
        Err(e) => return Err(network(&e)),
    };
    let total = response.body().content_length();
    observer.started(url, total);
    let file_name = dest
        .file_name()
        .map_or_else(|| "download".into(), |n| n.to_string_lossy().into_owned());
    let temp_path = dest.with_file_name(format!(".{file_name}.part-{}", std::process::id()));
    let io = |source| FetchError::Io {
        path: temp_path.clone(),
        source,
    };
    let mut guard = TempFile(Some(temp_path.clone()));
    let mut out = File::create(&temp_path).map_err(io)?;
    let mut reader = response.body_mut().as_reader();
    let mut hasher = Md5::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut received: u64 = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(network(&e)),
        };
        received += n as u64;
        if received > MAX_DOWNLOAD_BYTES {
            return Err(FetchError::TooLarge {
                url: url.to_string(),
                limit: MAX_DOWNLOAD_BYTES,
            });
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io)?;
        observer.progress(n as u64);
    }
    let found = hex(&hasher.finalize());
    if found != md5 {
        return Err(FetchError::ChecksumMismatch {
            url: url.to_string(),
            expected: md5.to_string(),
            found,
        });
    }
    out.sync_all().map_err(io)?;
    drop(out);
    fs::rename(&temp_path, dest).map_err(|source| FetchError::Io {
        path: dest.to_path_buf(),
        source,
    })?;
    guard.0 = None;
    Ok(())
}
