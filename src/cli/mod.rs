//! Command-line interface: the clap definitions and one file per subcommand.
//!
//! This room owns orchestration only: it parses flags, loads files, calls the library and prints.
//! No maths lives here. Errors are `anyhow` with context; an error caused by what the user gave
//! (a flag, a config value, a data file) is wrapped in [`BadInput`] so `main` exits with code 2.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod account;
pub mod audit;
pub mod bench;
pub mod collect;
pub mod data;
pub mod eval;
mod output_dir;
pub mod plan;
pub mod plan_accelerated;
pub mod report;
pub mod run;
pub mod shell;
pub mod sweep;

/// An error caused by the user's input (flag, config key, data file): exit code 2.
///
/// The message is printed as is, so it should name the flag, file or key at fault.
#[derive(Debug, thiserror::Error)]
#[error("{}", error_line(.0))]
pub struct BadInput(pub anyhow::Error);

/// An error and its chain of causes as one line, `outer: cause: cause`, each cause printed once:
/// a cause whose text a message already includes (`"{path}: {source}"` with `#[source]` set) is
/// not repeated, and line breaks become spaces.
pub fn error_line(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        let text = text.trim();
        if text.is_empty() || out.contains(text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(text);
    }
    out.replace(['\r', '\n'], " ")
}

/// Wrap any error as bad input (exit code 2).
pub fn bad_input(err: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(BadInput(err.into()))
}

/// Build a bad-input error from a message.
#[macro_export]
macro_rules! bad_input {
    ($($arg:tt)*) => {
        $crate::cli::bad_input(anyhow::anyhow!($($arg)*))
    };
}

/// The exit code for an error: 2 when any error in the chain is [`BadInput`], 1 otherwise.
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<BadInput>()) {
        2
    } else {
        1
    }
}

/// The most worker threads a `--threads` flag accepts (the same bound as `train.threads`).
pub const MAX_THREADS: usize = 1024;

/// Parse a `--threads` value: a whole number from 1 to [`MAX_THREADS`].
pub fn parse_threads(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number from 1 to {MAX_THREADS}, found `{text}`"
        )),
    }
}

/// Parse a `--data-dir` value (or `DPX_DATA_DIR`): any path; an empty value is accepted and means
/// "not set" (see [`data_dir_or_default`]), so `DPX_DATA_DIR=` does not break a command.
pub fn parse_data_dir(text: &str) -> Result<std::path::PathBuf, String> {
    Ok(std::path::PathBuf::from(text))
}

/// The data directory of a command: `--data-dir` / `DPX_DATA_DIR` when set and non-empty, else
/// the default (`data`).
pub fn data_dir_or_default(arg: Option<&std::path::Path>) -> std::path::PathBuf {
    match arg {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => crate::data::source::data_dir_from_env(None),
    }
}

/// The largest `--max-memory` in GiB (1 PiB).
const MAX_MEMORY_GIB: f64 = 1_048_576.0;

/// Parse a `--max-memory` value: a number of GiB, finite and > 0.
pub fn parse_max_memory(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(g) if g.is_finite() && g > 0.0 && g <= MAX_MEMORY_GIB => Ok(g),
        _ => Err(format!(
            "expected a number of GiB greater than 0 and at most {MAX_MEMORY_GIB}, found `{text}`"
        )),
    }
}

/// The memory limit in bytes of `--max-memory GIB` (default: three quarters of the physical
/// memory), and how to name it in a message.
pub fn memory_limit(max_memory_gib: Option<f64>) -> (u64, &'static str) {
    match max_memory_gib {
        Some(g) => ((g * (1u64 << 30) as f64) as u64, "--max-memory"),
        None => (
            crate::train::memory::default_limit_bytes(),
            "the default, 3/4 of physical memory; raise it with --max-memory GIB",
        ),
    }
}

/// Refuse (bad input) an experiment whose estimated peak memory with `concurrent_seeds` seeds
/// training at once is over `--max-memory` (default: three quarters of the physical memory).
pub fn check_memory(
    exp: &crate::train::prepare::Experiment,
    concurrent_seeds: usize,
    max_memory_gib: Option<f64>,
) -> anyhow::Result<()> {
    use crate::train::memory::{estimate, gib};
    let (limit, why) = memory_limit(max_memory_gib);
    let e = estimate(exp, concurrent_seeds);
    let total = e.total();
    if total <= limit {
        return Ok(());
    }
    let largest = e
        .largest()
        .map(|p| format!(", most of it {} ({})", p.what, gib(p.bytes)))
        .unwrap_or_default();
    Err(bad_input(anyhow::anyhow!(
        "{}: the run needs an estimated {} of memory ({concurrent_seeds} seed(s) at once{largest}), over the limit of {} ({why}); use a smaller model, batch or dataset",
        exp.spec.source.display(),
        gib(total),
        gib(limit)
    )))
}

/// The rayon pool of a command: `threads` workers, or one per available core when `None`.
/// A pool that cannot be built is bad input naming `--threads`.
pub fn thread_pool(threads: Option<usize>) -> anyhow::Result<rayon::ThreadPool> {
    let threads = threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| bad_input(anyhow::anyhow!("--threads {threads}: {e}")))
}

/// The version `dpx --version` prints: the package version and the commit it was built from
/// (recorded by `build.rs`; `unknown` for a build outside a git checkout without
/// `DPX_GIT_COMMIT`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DPX_GIT_COMMIT"),
    ")"
);

/// dpx: differentially private training experiments, accounting and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "dpx", version = VERSION, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train every seed of an experiment (a TOML file) and write its CSVs.
    Run(run::RunArgs),
    /// Privacy accounting: the noise multiplier for a target epsilon, or epsilon for a plan.
    Account(account::AccountArgs),
    /// Step throughput of the reference workloads (non-private and DP-SGD).
    Bench(bench::BenchArgs),
    /// Dataset management: fetch the standard datasets into the data directory.
    Data(data::DataArgs),
    /// Run a grid of experiments (point x seed jobs), resumable and shardable, or write a Slurm
    /// array script for it.
    Sweep(sweep::SweepArgs),
    /// Merge sweep directories (e.g. the shards of a Slurm array) into one.
    Collect(collect::CollectArgs),
    /// Tables (mean ± std over seeds), a pivot, plots and the tuning privacy cost of a run or
    /// sweep directory.
    Report(report::ReportArgs),
    /// Empirical privacy audit by canaries: a lower bound on epsilon next to the accountant's.
    Audit(audit::AuditArgs),
    /// Score a saved model (seeds/<seed>.model.safetensors) on a config's test set.
    // The doc comment is the `--help` text, where the angle brackets are meant literally.
    #[allow(rustdoc::invalid_html_tags)]
    Eval(eval::EvalArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(shell::CompletionsArgs),
    /// Print the man page, or write one page per command into a directory.
    Man(shell::ManArgs),
}

/// Parse `std::env::args_os()` and run. Clap prints help/version and usage errors itself
/// (usage errors exit with code 2).
pub fn run_from_env() -> anyhow::Result<ExitCode> {
    run(std::env::args_os())
}

/// Parse the given arguments and run the subcommand.
pub fn run<I, T>(args: I) -> anyhow::Result<ExitCode>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // clap formats help, version and usage errors; usage errors exit 2.
            let _ = e.print();
            return Ok(ExitCode::from(e.exit_code() as u8));
        }
    };
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Account(args) => account::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Data(args) => data::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Collect(args) => collect::run(args),
        Command::Report(args) => report::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Completions(args) => shell::completions(args),
        Command::Man(args) => shell::man(args),
    }
}
