//! The `dpx` binary: parse the command line, run it, map the outcome to an exit code.
//!
//! Exit codes: 0 success, 1 a run failed, 2 bad input (command line, config or data file).
//! All work lives in the library (`dpx::cli`); this file only prints the error once, with its
//! chain (`{:#}`), and chooses the code.

use std::process::ExitCode;

/// The process-wide allocator: mimalloc. A training step allocates and frees arrays of tens to
/// hundreds of MB; glibc's allocator returns each to the kernel (mmap/munmap), so every step paid
/// for page faults and page zeroing (about a fifth of a `cnn_cifar10` step in a profile).
/// mimalloc keeps freed pages for reuse.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    restore_default_sigpipe();
    match dpx::cli::run_from_env() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(dpx::cli::exit_code_for(&err))
        }
    }
}

/// Rust ignores SIGPIPE, so a `println!` into a closed pipe (`dpx account --all | head -1`)
/// panics. A command-line tool should end quietly instead, as `cat` does: restore the default
/// action. Output files are unaffected: they are written atomically (`report::atomic`).
fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first in `main`, before any thread exists; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
