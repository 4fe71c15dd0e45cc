//! `dpx completions SHELL` and `dpx man`: shell completion scripts and man pages, generated at
//! run time from the same clap definitions the parser uses (`clap_complete`, `clap_mangen`), so
//! they can never drift from the flags.
//!
//! Orchestration only: it prints or writes what the generators produce.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use super::Cli;

/// Arguments of `dpx completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for. Install e.g. with
    /// `dpx completions bash > ~/.local/share/bash-completion/completions/dpx`,
    /// `dpx completions zsh > "${fpath[1]}/_dpx"` or
    /// `dpx completions fish > ~/.config/fish/completions/dpx.fish`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `dpx man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write `dpx.1` and one page per subcommand (`dpx-run.1`, ...) into this directory instead
    /// of printing `dpx.1` (roff) to standard output.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Run `dpx completions`.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, "dpx", &mut out);
    out.flush().context("writing the completion script")?;
    Ok(ExitCode::SUCCESS)
}

/// Run `dpx man`.
pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    let cmd = Cli::command();
    match args.out_dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .context("rendering the man page")?;
            let mut out = std::io::stdout().lock();
            out.write_all(&page).context("writing the man page")?;
            out.flush().context("writing the man page")?;
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("--out-dir {}", dir.display()))
                .map_err(super::bad_input)?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("--out-dir {}: writing the man pages", dir.display()))
                .map_err(super::bad_input)?;
            println!("wrote the man pages into {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
