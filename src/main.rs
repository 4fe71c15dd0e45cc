//! The `dpx` binary: parse the command line, run it, map the outcome to an exit code.
//!
//! Exit codes: 0 success, 1 a run failed, 2 bad input (command line, config or data file).
//! All work lives in the library (`dpx::cli`); this file only prints the error once, with its
//! chain (`{:#}`), and chooses the code.

use std::process::ExitCode;

fn main() -> ExitCode {
    match dpx::cli::run_from_env() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(dpx::cli::exit_code_for(&err))
        }
    }
}
