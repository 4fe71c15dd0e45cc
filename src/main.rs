//! The `dpx` binary: parse the command line, run it, map the outcome to an exit code.
//!
//! Exit codes: 0 success, 1 a run failed, 2 bad input (command line, config or data file).
//! All work lives in the library (`dpx::cli`); this file only prints the error once, with its
//! chain on one line (`dpx::cli::error_line`, which prints each cause once), and chooses the code.

use std::process::ExitCode;

/// The process-wide allocator: mimalloc. A training step allocates and frees arrays of tens to
/// hundreds of MB; glibc's allocator returns each to the kernel (mmap/munmap), so every step paid
/// for page faults and page zeroing (about a fifth of a `cnn_cifar10` step in a profile).
/// mimalloc keeps freed pages for reuse, but by default hands them back to the kernel after about
/// a second, and large blocks sooner: a `cnn_cifar10` DP step still spent about 100 ms of system
/// time faulting in and zeroing pages (`MIMALLOC_SHOW_STATS`: 644 purges in 9 steps; 118 and a
/// ninth of the system time with purging off). [`keep_freed_memory`] turns purging off.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc v3's `mi_option_purge_delay` and `mi_option_arena_purge_mult` (their places in
/// `mi_option_e`, mimalloc.h; `tests/allocator.rs` checks them against their defaults).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const MI_OPTION_ARENA_PURGE_MULT: libmimalloc_sys::mi_option_t = 24;

fn main() -> ExitCode {
    restore_default_sigpipe();
    keep_freed_memory();
    match dpx::cli::run_from_env() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", dpx::cli::error_line(&err));
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

/// Freed memory stays mapped for reuse (`purge_delay = -1`: never purge), so a training step
/// reuses the pages of the last one instead of faulting in zeroed ones. The resident size stays at
/// the peak of a step, which training reaches every step anyway.
fn keep_freed_memory() {
    // SAFETY: sets plain integer options; mimalloc reads them whenever it decides to purge.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_PURGE_MULT, 1000);
    }
}
