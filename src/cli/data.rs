//! `dpx data`: placeholder while the room is being built (replaced by the owning change).

/// Arguments of `dpx data`.
#[derive(Debug, clap::Args)]
pub struct DataArgs {}

/// Run `dpx data`.
pub fn run(_args: DataArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("dpx data is not built yet")
}
