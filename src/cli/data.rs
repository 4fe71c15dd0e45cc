//! `dpx data`: dataset management. `dpx data fetch NAME` downloads a standard dataset into the
//! data directory (`--data-dir`, else `DPX_DATA_DIR`, else `data`), verifying MD5 checksums.
//!
//! Orchestration only: the downloading, checksums and atomic writes live in
//! [`crate::data::fetch`]; this file parses flags and shows progress (a bar on a terminal,
//! plain lines otherwise).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use crate::data::fetch::{self, FetchError, FetchObserver, FileOutcome};
use crate::data::source::{DATA_DIR_ENV, DEFAULT_DATA_DIR, NamedDataset};

/// Arguments of `dpx data`.
#[derive(Debug, clap::Args)]
pub struct DataArgs {
    #[command(subcommand)]
    pub command: DataCommand,
}

/// The `dpx data` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum DataCommand {
    /// Download a standard dataset into <data-dir>/<name>, verifying MD5 checksums.
    // The doc comment is the `--help` text, where the angle brackets are meant literally.
    #[allow(rustdoc::invalid_html_tags)]
    Fetch(FetchArgs),
}

/// The datasets `dpx data fetch` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FetchName {
    Mnist,
    FashionMnist,
    Cifar10,
    A9a,
    Svhn,
}

impl From<FetchName> for NamedDataset {
    fn from(n: FetchName) -> Self {
        match n {
            FetchName::Mnist => NamedDataset::Mnist,
            FetchName::FashionMnist => NamedDataset::FashionMnist,
            FetchName::Cifar10 => NamedDataset::Cifar10,
            FetchName::A9a => NamedDataset::A9a,
            FetchName::Svhn => NamedDataset::Svhn,
        }
    }
}

/// Arguments of `dpx data fetch`.
#[derive(Debug, clap::Args)]
pub struct FetchArgs {
    /// The dataset to download.
    #[arg(value_enum)]
    pub name: FetchName,
    /// The data directory; files go into <data-dir>/<name>.
    #[allow(rustdoc::invalid_html_tags)]
    #[arg(long, env = DATA_DIR_ENV, default_value = DEFAULT_DATA_DIR, value_parser = super::parse_data_dir)]
    pub data_dir: PathBuf,
    /// Download every file from this base URL instead of the canonical ones.
    #[arg(long, env = fetch::MIRROR_ENV)]
    pub mirror: Option<String>,
}

/// Run `dpx data`.
pub fn run(args: DataArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        DataCommand::Fetch(a) => run_fetch(a),
    }
}

fn run_fetch(args: FetchArgs) -> anyhow::Result<ExitCode> {
    let dataset = NamedDataset::from(args.name);
    let mut plan = fetch::plan(dataset);
    if let Some(mirror) = &args.mirror {
        if !(mirror.starts_with("http://") || mirror.starts_with("https://")) {
            return Err(crate::bad_input!(
                "--mirror: expected an http:// or https:// URL, found {mirror:?}"
            ));
        }
        plan = plan.with_mirror(mirror);
    }
    let dest = super::data_dir_or_default(Some(&args.data_dir)).join(dataset.name());
    let mut observer = Progress::new();
    let outcomes = fetch::fetch(&plan, &dest, &mut observer)
        .with_context(|| format!("fetching {} into {}", dataset, dest.display()))?;
    let downloaded = outcomes
        .iter()
        .filter(|o| matches!(o, FileOutcome::Downloaded(_)))
        .count();
    println!(
        "{}: {} file(s) in {} ({} downloaded, {} already present), MD5 verified",
        dataset,
        outcomes.len(),
        dest.display(),
        downloaded,
        outcomes.len() - downloaded
    );
    Ok(ExitCode::SUCCESS)
}

/// Progress on stderr: a byte bar on a terminal, one line per event otherwise.
struct Progress {
    terminal: bool,
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new() -> Self {
        Progress {
            terminal: std::io::stderr().is_terminal(),
            bar: None,
        }
    }

    fn finish_bar(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl FetchObserver for Progress {
    fn skipped(&mut self, file: &str, path: &Path) {
        eprintln!(
            "{file}: already present at {} (MD5 verified)",
            path.display()
        );
    }

    fn started(&mut self, url: &str, total: Option<u64>) {
        if self.terminal {
            let bar = match total {
                Some(t) => ProgressBar::new(t).with_style(
                    ProgressStyle::with_template(
                        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                ),
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("{msg} {spinner} {bytes} {bytes_per_sec}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                ),
            };
            bar.set_message(url.rsplit('/').next().unwrap_or(url).to_string());
            self.bar = Some(bar);
        } else {
            match total {
                Some(t) => eprintln!("downloading {url} ({t} bytes)"),
                None => eprintln!("downloading {url}"),
            }
        }
    }

    fn progress(&mut self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(bytes);
        }
    }

    fn finished(&mut self, url: &str, path: &Path) {
        self.finish_bar();
        eprintln!("{url} -> {} (MD5 verified)", path.display());
    }

    fn failed(&mut self, _url: &str, error: &FetchError, next_source: bool) {
        self.finish_bar();
        if next_source {
            eprintln!("warning: {error}; trying the next source");
        }
    }
}
