//! `dpx collect DIR...`: merge sweep directories (e.g. the shards of a Slurm array) into one.
//!
//! Orchestration only; the merge is [`crate::sweep::layout::collect`]: per-seed files are copied
//! when missing, shared files must agree, the aggregates are rebuilt; running it twice changes
//! nothing.

use std::path::PathBuf;
use std::process::ExitCode;

use super::bad_input;
use crate::sweep::layout::{LayoutError, SweepDir, collect};

/// Arguments of `dpx collect`.
#[derive(Debug, clap::Args)]
pub struct CollectArgs {
    /// Sweep directories to merge (e.g. `results/sweeps/x/shards/*`).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// The merged sweep directory (default: the first DIR, rebuilt in place with the others).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print nothing on success.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Run `dpx collect`.
pub fn run(args: CollectArgs) -> anyhow::Result<ExitCode> {
    for d in &args.dirs {
        if !SweepDir::is_sweep(d) {
            return Err(crate::bad_input!(
                "{}: not a sweep directory (no points.csv)",
                d.display()
            ));
        }
    }
    let dest = args.out.clone().unwrap_or_else(|| args.dirs[0].clone());
    let stats = collect(&args.dirs, &dest).map_err(|e| match e {
        LayoutError::Conflict { .. } | LayoutError::Csv { .. } => bad_input(e),
        other => other.into(),
    })?;
    if !args.quiet {
        println!(
            "{}: {} points, {} seed result(s) copied from {} director{}",
            dest.display(),
            stats.points,
            stats.seeds_copied,
            args.dirs.len(),
            if args.dirs.len() == 1 { "y" } else { "ies" }
        );
    }
    Ok(ExitCode::SUCCESS)
}
