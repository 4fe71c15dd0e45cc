//! `dpx account`: placeholder while the room is being built (replaced by the owning change).

/// Arguments of `dpx account`.
#[derive(Debug, clap::Args)]
pub struct AccountArgs {}

/// Run `dpx account`.
pub fn run(_args: AccountArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("dpx account is not built yet")
}
