//! The layout of a sweep directory, and the files rebuilt from per-seed results.
//!
//! ```text
//! <out>/points.csv                  index, id, name, one column per swept key
//! <out>/summary.csv                 point_id, point_name, then every point's summary.csv rows
//! <out>/points/<id>/config.toml     the point's resolved experiment (as `dpx run` writes it)
//! <out>/points/<id>/rdp.csv         order, rdp: the planned RDP curve of one run of the point
//! <out>/points/<id>/seeds/<seed>.metrics.csv, <seed>.summary.csv   (summary last = complete)
//! <out>/points/<id>/metrics.csv, summary.csv                      (rebuilt, seed order)
//! ```
//!
//! A point directory is laid out like a `dpx run` output directory, so `dpx report` reads
//! either. Every file is written atomically; rebuilding is idempotent.

use std::path::{Path, PathBuf};

use crate::report::atomic::{WriteError, write_atomic};
use crate::text_file::{MAX_TEXT_BYTES, TextReadError, read_bytes_capped, read_text_capped};

/// Errors reading or writing a sweep directory.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Csv { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Conflict { path: PathBuf, message: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LayoutError + '_ {
    move |source| LayoutError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn text_err(e: TextReadError) -> LayoutError {
    let path = e.path().to_path_buf();
    LayoutError::Io {
        path,
        source: e.into_io(),
    }
}

/// The paths of one point (or of a `dpx run` output directory).
#[derive(Debug, Clone)]
pub struct PointDir {
    pub root: PathBuf,
}

impl PointDir {
    pub fn config(&self) -> PathBuf {
        self.root.join("config.toml")
    }
    pub fn rdp(&self) -> PathBuf {
        self.root.join("rdp.csv")
    }
    pub fn metrics(&self) -> PathBuf {
        self.root.join("metrics.csv")
    }
    pub fn summary(&self) -> PathBuf {
        self.root.join("summary.csv")
    }
    pub fn seeds(&self) -> PathBuf {
        self.root.join("seeds")
    }
    pub fn seed_metrics(&self, seed: u64) -> PathBuf {
        self.seeds().join(format!("{seed}.metrics.csv"))
    }
    pub fn seed_summary(&self, seed: u64) -> PathBuf {
        self.seeds().join(format!("{seed}.summary.csv"))
    }
    /// Seed `seed`'s saved model (written before its summary).
    pub fn seed_model(&self, seed: u64) -> PathBuf {
        self.seeds()
            .join(crate::train::artifact::model_file_name(seed))
    }

    /// Every model file of seed `seed` (final, averaged, kept at a step), sorted by name.
    pub fn seed_model_files(&self, seed: u64) -> Result<Vec<PathBuf>, LayoutError> {
        let dir = self.seeds();
        if !dir.exists() {
            return Ok(Vec::new());
        }
        let mut files = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let e = e.map_err(io(&dir))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if crate::train::artifact::is_model_file_of(&name, seed) {
                files.push(e.path());
            }
        }
        files.sort();
        Ok(files)
    }
    /// Whether the seed finished: its summary exists (it is written last) and both its files
    /// parse whole ([`check_seed_files`]).
    pub fn is_complete(&self, seed: u64) -> bool {
        self.seed_summary(seed).exists() && self.check_seed(seed).is_ok()
    }

    /// [`check_seed_files`] on this seed's files.
    pub fn check_seed(&self, seed: u64) -> Result<(), LayoutError> {
        check_seed_files(&self.seed_metrics(seed), &self.seed_summary(seed), seed)
    }

    /// The complete seeds ([`is_complete`](Self::is_complete)), in ascending order.
    pub fn complete_seeds(&self) -> Result<Vec<u64>, LayoutError> {
        let mut seeds = self.seeds_with_summary()?;
        seeds.retain(|&s| self.check_seed(s).is_ok());
        Ok(seeds)
    }

    /// The seeds with a summary file, whole or not, in ascending order.
    pub fn seeds_with_summary(&self) -> Result<Vec<u64>, LayoutError> {
        let dir = self.seeds();
        if !dir.exists() {
            return Ok(Vec::new());
        }
        let mut seeds = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let e = e.map_err(io(&dir))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(s) = name.strip_suffix(".summary.csv")
                && let Ok(seed) = s.parse::<u64>()
            {
                seeds.push(seed);
            }
        }
        seeds.sort_unstable();
        Ok(seeds)
    }

    /// Rebuild `metrics.csv` and `summary.csv` from the complete seeds, in `order` (seeds not
    /// in `order` follow in ascending order). Nothing is written when no seed is complete.
    pub fn rebuild(&self, order: &[u64]) -> Result<usize, LayoutError> {
        let done = self.complete_seeds()?;
        let mut seeds: Vec<u64> = order.iter().copied().filter(|s| done.contains(s)).collect();
        seeds.extend(done.iter().filter(|s| !order.contains(s)));
        if seeds.is_empty() {
            return Ok(0);
        }
        let m: Vec<PathBuf> = seeds.iter().map(|&s| self.seed_metrics(s)).collect();
        let s: Vec<PathBuf> = seeds.iter().map(|&s| self.seed_summary(s)).collect();
        write_atomic(&self.metrics(), &concat_csv(&m)?)?;
        write_atomic(&self.summary(), &concat_csv(&s)?)?;
        Ok(seeds.len())
    }
}

/// The paths of a sweep directory.
#[derive(Debug, Clone)]
pub struct SweepDir {
    pub root: PathBuf,
}

impl SweepDir {
    pub fn points_csv(&self) -> PathBuf {
        self.root.join("points.csv")
    }
    pub fn summary(&self) -> PathBuf {
        self.root.join("summary.csv")
    }
    pub fn point(&self, id: &str) -> PointDir {
        PointDir {
            root: self.root.join("points").join(id),
        }
    }
    /// Whether `dir` looks like a sweep directory (has `points.csv`).
    pub fn is_sweep(dir: &Path) -> bool {
        dir.join("points.csv").is_file()
    }

    /// Read `points.csv`: the header (index, id, name, keys...) and its rows.
    pub fn read_points(&self) -> Result<(Vec<String>, Vec<Vec<String>>), LayoutError> {
        read_table(&self.points_csv())
    }

    /// Rebuild every point's aggregates (seed order from its config.toml when readable) and the
    /// sweep-level `summary.csv` (points in `points.csv` order).
    pub fn rebuild(&self) -> Result<(), LayoutError> {
        let (_, rows) = self.read_points()?;
        let mut out: Vec<u8> = Vec::new();
        let mut header_done = false;
        for row in &rows {
            let (id, name) = (&row[1], &row[2]);
            let p = self.point(id);
            let order = seed_order(&p.config());
            if p.rebuild(&order)? == 0 {
                continue;
            }
            let (h, srows) = read_table(&p.summary())?;
            let mut w = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(Vec::new());
            let csv_err = |e: csv::Error| LayoutError::Csv {
                path: self.summary(),
                message: e.to_string(),
            };
            if !header_done {
                let mut hh = vec!["point_id".to_string(), "point_name".to_string()];
                hh.extend(h.iter().cloned());
                w.write_record(&hh).map_err(csv_err)?;
                header_done = true;
            }
            for r in srows {
                let mut rr = vec![id.clone(), name.clone()];
                rr.extend(r);
                w.write_record(&rr).map_err(csv_err)?;
            }
            out.extend(w.into_inner().map_err(|e| LayoutError::Csv {
                path: self.summary(),
                message: e.to_string(),
            })?);
        }
        if header_done {
            write_atomic(&self.summary(), &out)?;
        }
        Ok(())
    }
}

/// The seeds of a resolved config.toml in their order (empty when unreadable).
fn seed_order(config: &Path) -> Vec<u64> {
    read_text_capped(config, MAX_TEXT_BYTES, "a config file")
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| {
            t.get("experiment")?.get("seeds")?.as_array().map(|a| {
                a.iter()
                    .filter_map(|v| v.as_integer())
                    .filter_map(|i| u64::try_from(i).ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Check that a seed's files are whole, as `dpx run` writes them: `metrics.csv` and
/// `summary.csv` each end with a line break and have the expected header (the columns of
/// [`crate::train::metrics`], an accelerated run's extra columns allowed), every row has the
/// header's field count and well-typed values for this seed, the summary has exactly one row,
/// and its `steps` is the step of the last metrics row. The error names the file at fault.
pub fn check_seed_files(metrics: &Path, summary: &Path, seed: u64) -> Result<(), LayoutError> {
    use crate::train::metrics::{
        METRICS_COLUMNS, METRICS_DIAGNOSTIC_COLUMNS, METRICS_EMA_COLUMNS, METRICS_EXTRA_COLUMNS,
        SUMMARY_COLUMNS, SUMMARY_DIAGNOSTIC_COLUMNS, SUMMARY_EMA_COLUMNS, SUMMARY_EXTRA_COLUMNS,
    };
    let optional = |lists: &[&[&'static str]]| -> Vec<&'static str> {
        lists.iter().flat_map(|l| l.iter().copied()).collect()
    };
    let summary_extra = optional(&[
        SUMMARY_EXTRA_COLUMNS,
        SUMMARY_EMA_COLUMNS,
        SUMMARY_DIAGNOSTIC_COLUMNS,
    ]);
    let metrics_extra = optional(&[
        METRICS_EXTRA_COLUMNS,
        METRICS_EMA_COLUMNS,
        METRICS_DIAGNOSTIC_COLUMNS,
    ]);
    let (sh, srows) = parse_whole(summary, SUMMARY_COLUMNS, &summary_extra, seed)?;
    let bad = |path: &Path, message: String| LayoutError::Csv {
        path: path.to_path_buf(),
        message,
    };
    if srows.len() != 1 {
        return Err(bad(
            summary,
            format!("expected one row for seed {seed}, found {}", srows.len()),
        ));
    }
    let (mh, mrows) = parse_whole(metrics, METRICS_COLUMNS, &metrics_extra, seed)?;
    let step_of = |h: &[String], row: &csv::StringRecord, col: &str| -> Option<u64> {
        let i = h.iter().position(|c| c == col)?;
        row.get(i)?.parse().ok()
    };
    let mut last = None;
    for (k, row) in mrows.iter().enumerate() {
        let step = step_of(&mh, row, "step");
        if step < last {
            return Err(bad(
                metrics,
                format!("line {}: the steps go backwards", k + 2),
            ));
        }
        last = step;
    }
    let Some(last) = last else {
        return Err(bad(metrics, "no rows".into()));
    };
    let steps = step_of(&sh, &srows[0], "steps");
    if steps != Some(last) {
        return Err(bad(
            metrics,
            format!(
                "its last row is step {last} but {} says {} steps (cut short?)",
                summary.display(),
                steps.map_or("no".to_string(), |s| s.to_string())
            ),
        ));
    }
    Ok(())
}

/// A per-seed CSV read whole and checked cell by cell (see [`check_seed_files`]).
fn parse_whole(
    path: &Path,
    columns: &[&str],
    extra: &[&str],
    seed: u64,
) -> Result<(Vec<String>, Vec<csv::StringRecord>), LayoutError> {
    let bad = |message: String| LayoutError::Csv {
        path: path.to_path_buf(),
        message,
    };
    let bytes = read_bytes_capped(path, MAX_TEXT_BYTES, "a per-seed CSV file").map_err(text_err)?;
    if !bytes.ends_with(b"\n") {
        return Err(bad(if bytes.is_empty() {
            "empty file".into()
        } else {
            "the last line has no line break (cut short)".into()
        }));
    }
    let mut r = csv::Reader::from_reader(bytes.as_slice());
    let header: Vec<String> = r
        .headers()
        .map_err(|e| bad(e.to_string()))?
        .iter()
        .map(String::from)
        .collect();
    let expected_start =
        header.len() >= columns.len() && header.iter().zip(columns).all(|(h, c)| h == c);
    let mut rest = extra.iter();
    let extras_ok = header[columns.len().min(header.len())..]
        .iter()
        .all(|h| rest.any(|c| c == h));
    if !expected_start || !extras_ok {
        return Err(bad(format!(
            "unexpected header (expected {}, ...)",
            columns[..3.min(columns.len())].join(",")
        )));
    }
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| bad(e.to_string()))?;
        let line = rec.position().map_or(0, |p| p.line());
        for (col, cell) in header.iter().zip(rec.iter()) {
            let ok = match col.as_str() {
                "seed" => cell.parse::<u64>() == Ok(seed),
                "step" | "steps" => cell.parse::<u64>().is_ok(),
                "status" => matches!(cell, "completed" | "diverged"),
                "epsilon_guaranteed" => matches!(cell, "true" | "false"),
                "noise_mode" => !cell.is_empty(),
                "accountant" => true,
                _ => cell.is_empty() || cell.parse::<f64>().is_ok(),
            };
            if !ok {
                return Err(bad(format!(
                    "line {line}: column {col}: unexpected value {cell:?}{}",
                    if col == "seed" {
                        format!(" (expected {seed})")
                    } else {
                        String::new()
                    }
                )));
            }
        }
        rows.push(rec);
    }
    Ok((header, rows))
}

/// Read a CSV file with a header into (header, rows).
pub fn read_table(path: &Path) -> Result<(Vec<String>, Vec<Vec<String>>), LayoutError> {
    let csv_err = |e: csv::Error| LayoutError::Csv {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let bytes = read_bytes_capped(path, MAX_TEXT_BYTES, "a CSV file").map_err(text_err)?;
    let mut r = csv::Reader::from_reader(bytes.as_slice());
    let header: Vec<String> = r
        .headers()
        .map_err(csv_err)?
        .iter()
        .map(String::from)
        .collect();
    let mut rows = Vec::new();
    for rec in r.records() {
        rows.push(rec.map_err(csv_err)?.iter().map(String::from).collect());
    }
    Ok((header, rows))
}

/// Concatenate CSV files that share a header, in order.
pub fn concat_csv(paths: &[PathBuf]) -> Result<Vec<u8>, LayoutError> {
    let mut out = Vec::new();
    let mut first_header: Option<String> = None;
    for p in paths {
        let text = read_text_capped(p, MAX_TEXT_BYTES, "a CSV file").map_err(text_err)?;
        let mut lines = text.split_inclusive('\n');
        let header = lines.next().unwrap_or_default().to_string();
        match &first_header {
            None => {
                out.extend_from_slice(header.as_bytes());
                first_header = Some(header);
            }
            Some(h) if *h != header => {
                return Err(LayoutError::Conflict {
                    path: p.clone(),
                    message: "its header differs from the other seeds' files".into(),
                });
            }
            Some(_) => {}
        }
        for l in lines {
            out.extend_from_slice(l.as_bytes());
        }
    }
    Ok(out)
}

/// Copy one file into `dest` unless an identical one is there; a different one is a conflict.
fn merge_file(src: &Path, dest: &Path) -> Result<bool, LayoutError> {
    let bytes = read_bytes_capped(src, MAX_TEXT_BYTES, "a result file").map_err(text_err)?;
    if dest.exists() {
        let old = read_bytes_capped(dest, MAX_TEXT_BYTES, "a result file").map_err(text_err)?;
        return if old == bytes {
            Ok(false)
        } else {
            Err(LayoutError::Conflict {
                path: dest.to_path_buf(),
                message: format!("differs from {}", src.display()),
            })
        };
    }
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    write_atomic(dest, &bytes)?;
    Ok(true)
}

/// Copy a saved model (binary, up to the largest model dpx builds).
fn copy_model(src: &Path, dest: &Path) -> Result<(), LayoutError> {
    const MAX_MODEL_BYTES: u64 = ((crate::model::layer::MAX_PARAMS as u64) << 2) + (16 << 20);
    copy_capped(src, dest, MAX_MODEL_BYTES, "a model file")
}

fn copy_file(src: &Path, dest: &Path) -> Result<(), LayoutError> {
    copy_capped(src, dest, MAX_TEXT_BYTES, "a result file")
}

/// Copy `src` (at most `cap` bytes) to `dest` atomically, creating its folder.
fn copy_capped(src: &Path, dest: &Path, cap: u64, what: &'static str) -> Result<(), LayoutError> {
    let bytes = read_bytes_capped(src, cap, what).map_err(text_err)?;
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    write_atomic(dest, &bytes)?;
    Ok(())
}

/// Check that two copies of one seed's results agree: `metrics.csv` byte for byte, and
/// `summary.csv` in every column but `seconds` (wall-clock time, which differs between two
/// runs of the same seed). A disagreement names both files.
fn same_seed_results(src: &PointDir, dest: &PointDir, seed: u64) -> Result<(), LayoutError> {
    let read = |p: &Path| read_bytes_capped(p, MAX_TEXT_BYTES, "a result file").map_err(text_err);
    let conflict = |a: PathBuf, b: PathBuf| LayoutError::Conflict {
        message: format!(
            "differs from {}: two results for one seed disagree",
            b.display()
        ),
        path: a,
    };
    let (sm, dm) = (src.seed_metrics(seed), dest.seed_metrics(seed));
    if read(&sm)? != read(&dm)? {
        return Err(conflict(dm, sm));
    }
    let (ss, ds) = (src.seed_summary(seed), dest.seed_summary(seed));
    if without_seconds(&ss)? != without_seconds(&ds)? {
        return Err(conflict(ds, ss));
    }
    Ok(())
}

/// A summary file's header and rows with the `seconds` column left out.
fn without_seconds(path: &Path) -> Result<Vec<Vec<String>>, LayoutError> {
    let (header, rows) = read_table(path)?;
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| header[i] != "seconds")
        .collect();
    Ok(std::iter::once(header)
        .chain(rows)
        .map(|r| keep.iter().filter_map(|&i| r.get(i).cloned()).collect())
        .collect())
}

/// What [`collect`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectStats {
    pub points: usize,
    /// Seeds copied (files already present and identical are not counted).
    pub seeds_copied: usize,
}

/// Merge sweep directories (e.g. one per shard) into `dest`, then rebuild its aggregates.
///
/// Sources must agree on `points.csv`. Per-seed files are copied when missing (or damaged in
/// `dest`); a seed present in both must agree: its metrics byte for byte, its summary in every
/// column but `seconds` (which varies), and the copy already in `dest` is kept. A damaged seed
/// in a source is an error naming its file. A metrics file is copied only with its summary. Idempotent: collecting again changes
/// nothing. A source equal to `dest` is only rebuilt.
pub fn collect(sources: &[PathBuf], dest: &Path) -> Result<CollectStats, LayoutError> {
    let d = SweepDir {
        root: dest.to_path_buf(),
    };
    std::fs::create_dir_all(dest).map_err(io(dest))?;
    let mut stats = CollectStats::default();
    let dest_canon = dest.canonicalize().map_err(io(dest))?;
    for src in sources {
        let s = SweepDir { root: src.clone() };
        if !SweepDir::is_sweep(src) {
            return Err(LayoutError::Conflict {
                path: src.clone(),
                message: "not a sweep directory (no points.csv)".into(),
            });
        }
        if src.canonicalize().map_err(io(src))? == dest_canon {
            continue;
        }
        merge_file(&s.points_csv(), &d.points_csv())?;
        let (_, rows) = s.read_points()?;
        for row in rows {
            let (sp, dp) = (s.point(&row[1]), d.point(&row[1]));
            if sp.config().exists() {
                merge_file(&sp.config(), &dp.config())?;
            }
            if sp.rdp().exists() {
                merge_file(&sp.rdp(), &dp.rdp())?;
            }
            for seed in sp.seeds_with_summary()? {
                // A damaged seed in a source cannot be re-run here: refuse it, naming the file.
                sp.check_seed(seed)?;
                if dp.is_complete(seed) {
                    same_seed_results(&sp, &dp, seed)?;
                    continue;
                }
                // An incomplete or damaged seed in dest is replaced.
                copy_file(&sp.seed_metrics(seed), &dp.seed_metrics(seed))?;
                for model in sp.seed_model_files(seed)? {
                    if let Some(name) = model.file_name() {
                        copy_model(&model, &dp.seeds().join(name))?;
                    }
                }
                copy_file(&sp.seed_summary(seed), &dp.seed_summary(seed))?;
                stats.seeds_copied += 1;
            }
        }
    }
    if SweepDir::is_sweep(dest) {
        stats.points = d.read_points()?.1.len();
        d.rebuild()?;
    }
    Ok(stats)
}
