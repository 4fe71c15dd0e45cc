//! The output directory of `dpx run`: its paths (the per-seed files, the experiment CSVs, the
//! saved config, checkpoints and model files), the check that it is writable, and the results an
//! `--overwrite` run sets aside until it has finished, so that nothing already written is lost
//! or half-written. Every file is written by `report::atomic`.
//!
//! Must not: train or decide what a run does (that is `run`).

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::bad_input;
use crate::sweep::layout::PointDir;

/// The paths of one output directory: a sweep point's layout ([`PointDir`]: config, CSVs,
/// per-seed files, model files) plus the checkpoints only `dpx run` writes.
pub(super) use crate::sweep::layout::PointDir as OutputDir;

impl PointDir {
    pub(super) fn seed_checkpoint(&self, seed: u64) -> PathBuf {
        self.seeds().join(format!("{seed}.checkpoint"))
    }
    /// Delete seed `seed`'s checkpoint, if any (its seed has finished).
    pub(super) fn remove_checkpoint(&self, seed: u64) -> anyhow::Result<()> {
        let path = self.seed_checkpoint(seed);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(anyhow::anyhow!("{}: {e}", path.display()))
            }
            _ => Ok(()),
        }
    }
    pub(super) fn has_results(&self) -> bool {
        self.summary().exists() || self.metrics().exists() || self.seeds().exists()
    }
}

/// The results an `--overwrite` run replaces, moved into `<out>/.replaced/` until the new run
/// has finished every seed.
pub(super) struct Replaced {
    dir: PathBuf,
}

impl Replaced {
    const DIR: &'static str = ".replaced";

    /// Move the seeds, the experiment CSVs and the saved config aside (renames: nothing copied).
    pub(super) fn set_aside(out: &OutputDir) -> anyhow::Result<Self> {
        let dir = out.root.join(Self::DIR);
        if dir.exists() {
            return Err(bad_input(anyhow::anyhow!(
                "{} holds the results an earlier --overwrite run set aside and did not finish; move them back or delete that folder first",
                dir.display()
            )));
        }
        std::fs::create_dir(&dir).with_context(|| dir.display().to_string())?;
        for path in Self::parts(out) {
            if let Some(name) = path.file_name()
                && path.exists()
            {
                std::fs::rename(&path, dir.join(name))
                    .with_context(|| path.display().to_string())?;
            }
        }
        Ok(Self { dir })
    }

    fn parts(out: &OutputDir) -> [PathBuf; 4] {
        [out.seeds(), out.metrics(), out.summary(), out.config()]
    }

    /// The new run finished: the old results go.
    pub(super) fn discard(self) -> anyhow::Result<()> {
        std::fs::remove_dir_all(&self.dir).with_context(|| self.dir.display().to_string())
    }

    /// The new run did not finish: its files go and the old ones come back.
    pub(super) fn restore(self, out: &OutputDir) -> anyhow::Result<()> {
        for path in Self::parts(out) {
            if path.is_dir() {
                std::fs::remove_dir_all(&path).with_context(|| path.display().to_string())?;
            } else if path.exists() {
                std::fs::remove_file(&path).with_context(|| path.display().to_string())?;
            }
            if let Some(name) = path.file_name() {
                let kept = self.dir.join(name);
                if kept.exists() {
                    std::fs::rename(&kept, &path).with_context(|| kept.display().to_string())?;
                }
            }
        }
        std::fs::remove_dir(&self.dir).with_context(|| self.dir.display().to_string())
    }
}

pub(super) fn csv_bytes<T: serde::Serialize>(rows: &[T]) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r)?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}

/// Check that `dir` can be created and written, without leaving anything behind.
pub(super) fn check_writable(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| bad_input(anyhow::anyhow!("output directory {}: {e}", dir.display())))?;
    let probe = dir.join(format!(".dpx-write-test.{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        bad_input(anyhow::anyhow!(
            "output directory {} is not writable: {e}",
            dir.display()
        ))
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
