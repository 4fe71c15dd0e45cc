//! Reading a whole text file with a size limit: [`read_text_capped`].
//!
//! Every text input of dpx (experiment and sweep files, noise schedules, the CSVs that
//! `--resume`, `dpx collect` and `dpx report` read back) goes through this one function, so a
//! path such as `/dev/zero`, a FIFO fed forever or a runaway file is refused once it passes the
//! limit instead of being read until memory runs out. The limit is enforced on the bytes read,
//! not on the length the file system reports (a character device reports 0). Depends on no other
//! room.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The limit for experiment, sweep and schedule files and the CSVs dpx writes and reads back
/// (a resolved config is a few KiB; a per-seed metrics file of 10^5 evaluations is ~30 MB).
pub const MAX_TEXT_BYTES: u64 = 256 << 20;

/// The limit for a noise schedule (`noise.path`, `dpx account --schedule`): 256 MiB, some
/// 2·10^7 values of a dozen characters.
pub const MAX_SCHEDULE_BYTES: u64 = 256 << 20;

/// Why a text file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TextReadError {
    /// The operating system refused the read.
    #[error("{}: cannot read {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// More than `limit` bytes: nothing past the limit was read.
    #[error("{}: {what} is larger than the limit of {limit} bytes", path.display())]
    TooLarge {
        path: PathBuf,
        what: &'static str,
        limit: u64,
    },
    /// The bytes are not UTF-8.
    #[error("{}: {what} is not UTF-8 text (byte {valid_up_to})", path.display())]
    NotUtf8 {
        path: PathBuf,
        what: &'static str,
        valid_up_to: usize,
    },
}

impl TextReadError {
    /// The error as an `io::Error` whose message does not repeat the path, for callers that
    /// name the file themselves.
    pub fn into_io(self) -> std::io::Error {
        match self {
            TextReadError::Io { source, .. } => source,
            TextReadError::TooLarge { what, limit, .. } => std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{what} is larger than the limit of {limit} bytes"),
            ),
            TextReadError::NotUtf8 {
                what, valid_up_to, ..
            } => std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{what} is not UTF-8 text (byte {valid_up_to})"),
            ),
        }
    }

    /// The file at fault.
    pub fn path(&self) -> &Path {
        match self {
            TextReadError::Io { path, .. }
            | TextReadError::TooLarge { path, .. }
            | TextReadError::NotUtf8 { path, .. } => path,
        }
    }
}

/// Read the text file at `path` (`what` names it in errors, e.g. "a config file"), refusing it
/// once more than `limit` bytes have been read.
pub fn read_text_capped(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<String, TextReadError> {
    let bytes = read_bytes_capped(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| TextReadError::NotUtf8 {
        path: path.to_path_buf(),
        what,
        valid_up_to: e.utf8_error().valid_up_to(),
    })
}

/// [`read_text_capped`] without the UTF-8 check (for byte comparisons).
pub fn read_bytes_capped(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, TextReadError> {
    let io = |source| TextReadError::Io {
        path: path.to_path_buf(),
        what,
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // Reserve from the reported length (bounded by the limit), never from an untrusted number.
    let hint = file
        .metadata()
        .map(|m| m.len().min(limit))
        .unwrap_or(0)
        .min(1 << 24);
    let mut bytes = Vec::with_capacity(hint as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(TextReadError::TooLarge {
            path: path.to_path_buf(),
            what,
            limit,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_small_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.toml");
        std::fs::write(&p, "x = 1\n").unwrap();
        assert_eq!(read_text_capped(&p, 6, "a config file").unwrap(), "x = 1\n");
    }

    #[test]
    fn one_byte_over_the_limit_is_refused_naming_file_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.toml");
        std::fs::write(&p, "x = 1\n").unwrap();
        let e = read_text_capped(&p, 5, "a config file").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("a.toml") && msg.contains("limit of 5 bytes"),
            "{msg}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_endless_device_stops_at_the_limit() {
        let e = read_text_capped(Path::new("/dev/zero"), 1 << 20, "a schedule file").unwrap_err();
        assert!(matches!(e, TextReadError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn a_directory_is_an_io_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_text_capped(dir.path(), 10, "a config file").unwrap_err();
        assert!(matches!(e, TextReadError::Io { .. }), "{e}");
        assert_eq!(e.path(), dir.path());
    }
}
