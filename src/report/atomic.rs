//! Atomic file writes: temporary file in the target's directory, `fsync`, rename, `fsync` of the
//! directory.
//!
//! A reader (or a resumed run) sees either the old file or the new one, never a prefix.
//! [`write_atomic_private`] creates the file readable and writable by its owner only (mode 0600
//! on Unix), for files that must not be shared (a run's checkpoints hold its noise stream). The
//! temporary name starts with `.` and ends with `.tmp`, so a crash leaves at most a hidden
//! temporary file, which the next write to the same target replaces.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What went wrong writing a file.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The target has no parent directory or no file name.
    #[error("{path}: not a file path")]
    NotAFilePath { path: PathBuf },
    /// An I/O error while writing, syncing or renaming.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The temporary path used while writing `target`.
pub fn temp_path(target: &Path) -> Result<PathBuf, WriteError> {
    let name = target.file_name().ok_or_else(|| WriteError::NotAFilePath {
        path: target.to_path_buf(),
    })?;
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{}.tmp", std::process::id()));
    Ok(target.with_file_name(tmp))
}

/// Write `bytes` to `target` atomically.
pub fn write_atomic(target: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_atomic_with(target, |f| f.write_all(bytes))
}

/// Write `bytes` to `target` atomically, readable and writable by the owner only (0600 on
/// Unix; the mode is set when the temporary file is created, so no other user ever sees it).
pub fn write_atomic_private(target: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_atomic_mode(target, true, |f| f.write_all(bytes))
}

/// Write `target` atomically with a closure that fills the file.
pub fn write_atomic_with(
    target: &Path,
    fill: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<()>,
) -> Result<(), WriteError> {
    write_atomic_mode(target, false, fill)
}

fn create(path: &Path, private: bool) -> io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let file = options.open(path)?;
    // A temporary left by a killed write keeps its old mode: set it again.
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

fn write_atomic_mode(
    target: &Path,
    private: bool,
    fill: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<()>,
) -> Result<(), WriteError> {
    let tmp = temp_path(target)?;
    let result = (|| {
        let file = create(&tmp, private).map_err(io_err(&tmp))?;
        {
            let mut w = io::BufWriter::new(&file);
            fill(&mut w).map_err(io_err(&tmp))?;
            w.flush().map_err(io_err(&tmp))?;
        }
        file.sync_all().map_err(io_err(&tmp))?;
        fs::rename(&tmp, target).map_err(io_err(target))?;
        if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Persist the rename itself; not every filesystem supports syncing a directory.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("metrics.csv");
        write_atomic(&target, b"a,b\n1,2\n").unwrap();
        write_atomic(&target, b"a,b\n3,4\n").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "a,b\n3,4\n");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "only the target remains: {names:?}");
    }

    #[test]
    fn failure_inside_fill_keeps_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("summary.csv");
        write_atomic(&target, b"old\n").unwrap();
        let err = write_atomic_with(&target, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("disk full"))
        });
        assert!(matches!(err, Err(WriteError::Io { .. })));
        assert_eq!(fs::read_to_string(&target).unwrap(), "old\n");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn private_files_are_owner_only_even_over_a_world_readable_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("0.checkpoint");
        fs::write(&target, b"old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic_private(&target, b"state").unwrap();
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(fs::read(&target).unwrap(), b"state");
    }

    #[test]
    fn missing_directory_is_an_io_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("no/such/dir/x.csv");
        let err = write_atomic(&target, b"x").unwrap_err();
        assert!(err.to_string().contains("no/such/dir"), "{err}");
    }
}
