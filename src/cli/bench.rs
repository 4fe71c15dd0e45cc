//! `dpx bench`: placeholder while the room is being built (replaced by the owning change).

/// Arguments of `dpx bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Run `dpx bench`.
pub fn run(_args: BenchArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("dpx bench is not built yet")
}
