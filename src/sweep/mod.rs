//! The sweep room: sweep files → points (validated experiment specs with stable ids) → jobs
//! (point × seed), shards of the jobs, and the on-disk layout of a sweep directory.
//!
//! A sweep file (TOML) names a base experiment and the keys to vary:
//!
//! ```toml
//! base = "../quickstart.toml"          # relative to the sweep file
//! seeds = [0, 1, 2]                    # optional: replaces experiment.seeds of every point
//! out = "results/eps_lr"               # optional: the output directory
//! [grid]                               # cartesian product of the lists
//! "privacy.epsilon" = [1, 2, 4]
//! [[zip]]                              # lists that move together (one axis of the product)
//! "train.epochs" = [5, 10]
//! "train.learning_rate" = [1.0, 2.0]
//! ```
//!
//! Each point is the base plus its overrides, validated by [`crate::config::load_with_overrides`]
//! (so unknown keys get the config room's suggestion). Its id is the FNV-1a 64-bit hash
//! ([`fnv1a64`]) of its resolved TOML ([`crate::config::ExperimentSpec::to_resolved_toml`]),
//! written as 16 hex digits: the same experiment has the same id whatever the key order of the
//! sweep file, across runs, machines and Rust versions.
//!
//! This room reads sweep files and lays out directories; it never trains (the CLI schedules
//! jobs) and computes no privacy quantity.

pub mod layout;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{ConfigError, ExperimentSpec};

/// Sweep files larger than this are refused before reading.
pub const MAX_SWEEP_BYTES: u64 = 1 << 20;
/// At most this many points in one sweep (a guard against a typo'd range exploding the product).
pub const MAX_POINTS: usize = 100_000;

/// Why a sweep file could not be expanded. All are the user's input (exit code 2 in the CLI).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: unknown key `{key}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownKey {
        path: PathBuf,
        key: String,
        suggestion: Option<String>,
    },
    #[error("{path}: `{key}`: {message}")]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error(
        "{path}: the sweep has no grid: add a [grid] table or a [[zip]] group with at least one key"
    )]
    EmptyGrid { path: PathBuf },
    #[error("{path}: point `{point}`: {source}")]
    Point {
        path: PathBuf,
        point: String,
        #[source]
        source: Box<ConfigError>,
    },
    #[error("{path}: points `{first}` and `{second}` resolve to the same experiment")]
    Duplicate {
        path: PathBuf,
        first: String,
        second: String,
    },
    #[error("{path}: {count} points is more than the limit of {MAX_POINTS}")]
    TooMany { path: PathBuf, count: usize },
}

/// FNV-1a, 64 bits (Fowler–Noll–Vo; offset basis 0xcbf29ce484222325, prime 0x100000001b3).
///
/// Chosen because it is tiny, fixed by its definition (unlike `std`'s `DefaultHasher`, whose
/// output may change between Rust releases) and good enough to tell experiments apart; ids are
/// not a security boundary.
///
/// ```
/// // Reference values of the FNV test suite (draft-eastlake-fnv).
/// assert_eq!(dpx::sweep::fnv1a64(b""), 0xcbf29ce484222325);
/// assert_eq!(dpx::sweep::fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
/// assert_eq!(dpx::sweep::fnv1a64(b"foobar"), 0x85944171f73967e8);
/// ```
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One point of a sweep: the base experiment with some keys set.
#[derive(Debug, Clone)]
pub struct Point {
    /// Position in the sweep's expansion order.
    pub index: usize,
    /// 16 hex digits: FNV-1a 64 of `resolved`.
    pub id: String,
    /// `key=value` pairs, keys sorted, joined by commas, e.g. `privacy.epsilon=2,train.learning_rate=0.5`.
    pub name: String,
    /// The overrides (sorted by key).
    pub overrides: Vec<(String, toml::Value)>,
    pub spec: ExperimentSpec,
    /// The resolved TOML (every default explicit); written as the point's `config.toml`.
    pub resolved: String,
}

/// One unit of work: a seed of a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Position among all jobs of the sweep (points in order, then their seeds in order).
    pub index: usize,
    pub point: usize,
    pub seed: u64,
}

/// An expanded sweep file.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub file: PathBuf,
    /// The base experiment file (resolved against the sweep file's directory).
    pub base: PathBuf,
    /// The swept keys, in the order of [`Point::overrides`] (sorted).
    pub keys: Vec<String>,
    pub points: Vec<Point>,
    /// `out` of the sweep file, if given (relative to the working directory, like `output.dir`).
    pub out: Option<PathBuf>,
}

impl Sweep {
    /// All jobs: every point's seeds, points in order.
    pub fn jobs(&self) -> Vec<Job> {
        let mut jobs = Vec::new();
        for p in &self.points {
            for &seed in &p.spec.seeds {
                jobs.push(Job {
                    index: jobs.len(),
                    point: p.index,
                    seed,
                });
            }
        }
        jobs
    }

    /// The default output directory: `out` of the file, else `results/sweeps/<file stem>`.
    pub fn default_out(&self) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            let stem = self
                .file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "sweep".into());
            PathBuf::from("results").join("sweeps").join(stem)
        })
    }
}

/// A deterministic share of the jobs: job `k` belongs to shard `k mod count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 0-based, `< count` (Slurm's `$SLURM_ARRAY_TASK_ID` with `--array=0-(count-1)`).
    pub index: usize,
    pub count: usize,
}

/// Why a `--shard` spec is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shard `{spec}`: {reason} (expected i/N with 0 <= i < N, e.g. 0/4)")]
pub struct ShardError {
    pub spec: String,
    pub reason: &'static str,
}

impl Shard {
    /// Parse `i/N`.
    pub fn parse(spec: &str) -> Result<Self, ShardError> {
        let err = |reason| ShardError {
            spec: spec.to_string(),
            reason,
        };
        let (i, n) = spec.split_once('/').ok_or_else(|| err("no `/`"))?;
        let index: usize = i
            .trim()
            .parse()
            .map_err(|_| err("i is not a whole number"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| err("N is not a whole number"))?;
        if count == 0 {
            return Err(err("N must be at least 1"));
        }
        if index >= count {
            return Err(err("i must be less than N"));
        }
        Ok(Shard { index, count })
    }

    /// Whether job number `job_index` is this shard's.
    pub fn contains(&self, job_index: usize) -> bool {
        job_index % self.count == self.index
    }
}

const TOP_KEYS: [&str; 5] = ["base", "seeds", "out", "grid", "zip"];

/// Flatten nested tables into dotted keys down to the lists: `{privacy = {epsilon = [..]}}` and
/// `{"privacy.epsilon" = [..]}` both give `privacy.epsilon`.
fn flatten(
    prefix: &str,
    table: &toml::Table,
    out: &mut Vec<(String, Vec<toml::Value>)>,
    path: &Path,
) -> Result<(), SweepError> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out, path)?,
            toml::Value::Array(a) => {
                if a.is_empty() {
                    return Err(SweepError::Invalid {
                        path: path.to_path_buf(),
                        key,
                        message: "the list of values is empty".into(),
                    });
                }
                out.push((key, a.clone()));
            }
            other => {
                return Err(SweepError::Invalid {
                    path: path.to_path_buf(),
                    key,
                    message: format!(
                        "expected a list of values, found the {} {other}",
                        other.type_str()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// How a value appears in a point's name: strings without quotes, floats in shortest form.
pub fn value_label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Float(f) => format!("{f}"),
        other => other.to_string(),
    }
}

/// Read and expand a sweep file; every point is validated.
pub fn load(path: &Path) -> Result<Sweep, SweepError> {
    let read_err = |source| SweepError::Read {
        path: path.to_path_buf(),
        source,
    };
    use crate::text_file::{TextReadError, read_text_capped};
    let text = read_text_capped(path, MAX_SWEEP_BYTES, "a sweep file").map_err(|e| match e {
        TextReadError::Io { source, .. } => read_err(source),
        TextReadError::TooLarge { limit, .. } => SweepError::Invalid {
            path: path.to_path_buf(),
            key: "(file)".into(),
            message: format!("more than the {limit}-byte limit for a sweep file"),
        },
        TextReadError::NotUtf8 { valid_up_to, .. } => SweepError::Invalid {
            path: path.to_path_buf(),
            key: "(file)".into(),
            message: format!("not UTF-8 text (byte {valid_up_to})"),
        },
    })?;
    load_str(&text, path)
}

/// [`load`] on text already read; `path` names the file and anchors `base`.
pub fn load_str(text: &str, path: &Path) -> Result<Sweep, SweepError> {
    let invalid = |key: &str, message: String| SweepError::Invalid {
        path: path.to_path_buf(),
        key: key.to_string(),
        message,
    };
    let doc: toml::Table = toml::from_str(text).map_err(|e| SweepError::Syntax {
        path: path.to_path_buf(),
        message: e.to_string().trim().replace('\n', " "),
    })?;
    for k in doc.keys() {
        if !TOP_KEYS.contains(&k.as_str()) {
            return Err(SweepError::UnknownKey {
                path: path.to_path_buf(),
                key: k.clone(),
                suggestion: crate::config::suggest::nearest(k, TOP_KEYS).map(str::to_string),
            });
        }
    }
    let base_rel = match doc.get("base") {
        Some(toml::Value::String(s)) => PathBuf::from(s),
        Some(other) => {
            return Err(invalid(
                "base",
                format!("expected a path string, found {other}"),
            ));
        }
        None => {
            return Err(invalid(
                "base",
                "missing: name the base experiment file".into(),
            ));
        }
    };
    let base = if base_rel.is_absolute() {
        base_rel
    } else {
        path.parent().unwrap_or(Path::new("")).join(base_rel)
    };
    let out = match doc.get("out") {
        None => None,
        Some(toml::Value::String(s)) => Some(PathBuf::from(s)),
        Some(other) => {
            return Err(invalid(
                "out",
                format!("expected a path string, found {other}"),
            ));
        }
    };
    let seeds = match doc.get("seeds") {
        None => None,
        Some(v @ toml::Value::Array(a)) if !a.is_empty() => Some(v.clone()),
        Some(other) => {
            return Err(invalid(
                "seeds",
                format!("expected a non-empty list of seeds, found {other}"),
            ));
        }
    };

    // Axes of the product: each grid key alone (sorted), then each zip group.
    let mut axes: Vec<Vec<Vec<(String, toml::Value)>>> = Vec::new();
    let mut seen: BTreeMap<String, &'static str> = BTreeMap::new();
    if let Some(g) = doc.get("grid") {
        let toml::Value::Table(t) = g else {
            return Err(invalid("grid", "expected a table of key = [values]".into()));
        };
        let mut keys = Vec::new();
        flatten("", t, &mut keys, path)?;
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        for (k, values) in keys {
            seen.insert(k.clone(), "grid");
            axes.push(values.into_iter().map(|v| vec![(k.clone(), v)]).collect());
        }
    }
    if let Some(z) = doc.get("zip") {
        let toml::Value::Array(groups) = z else {
            return Err(invalid("zip", "expected [[zip]] tables".into()));
        };
        for (gi, g) in groups.iter().enumerate() {
            let toml::Value::Table(t) = g else {
                return Err(invalid("zip", format!("group {gi} is not a table")));
            };
            let mut keys = Vec::new();
            flatten("", t, &mut keys, path)?;
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            let Some(len) = keys.first().map(|k| k.1.len()) else {
                return Err(invalid("zip", format!("group {gi} has no keys")));
            };
            for (k, v) in &keys {
                if v.len() != len {
                    return Err(invalid(
                        k,
                        format!(
                            "zip group {gi}: this list has {} values but `{}` has {len}; zipped lists must have the same length",
                            v.len(),
                            keys[0].0
                        ),
                    ));
                }
                if let Some(prev) = seen.insert(k.clone(), "zip") {
                    return Err(invalid(k, format!("set twice (in {prev} and in zip)")));
                }
            }
            axes.push(
                (0..len)
                    .map(|i| {
                        keys.iter()
                            .map(|(k, v)| (k.clone(), v[i].clone()))
                            .collect()
                    })
                    .collect(),
            );
        }
    }
    if axes.is_empty() {
        return Err(SweepError::EmptyGrid {
            path: path.to_path_buf(),
        });
    }
    let count = axes
        .iter()
        .try_fold(1usize, |acc, a| acc.checked_mul(a.len()))
        .unwrap_or(usize::MAX);
    if count > MAX_POINTS {
        return Err(SweepError::TooMany {
            path: path.to_path_buf(),
            count,
        });
    }
    let keys: Vec<String> = seen.keys().cloned().collect();

    // Expand the product (the last axis moves fastest).
    let mut points = Vec::with_capacity(count);
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for n in 0..count {
        let mut rem = n;
        let mut overrides: Vec<(String, toml::Value)> = Vec::new();
        for axis in axes.iter().rev() {
            let i = rem % axis.len();
            rem /= axis.len();
            overrides.extend(axis[i].iter().cloned());
        }
        overrides.sort_by(|a, b| a.0.cmp(&b.0));
        let name = overrides
            .iter()
            .map(|(k, v)| format!("{k}={}", value_label(v)))
            .collect::<Vec<_>>()
            .join(",");
        let mut all = overrides.clone();
        if let Some(s) = &seeds {
            all.push(("experiment.seeds".to_string(), s.clone()));
        }
        let spec = crate::config::load_with_overrides(&base, &all).map_err(|source| {
            SweepError::Point {
                path: path.to_path_buf(),
                point: name.clone(),
                source: Box::new(source),
            }
        })?;
        let resolved = spec.with_absolute_paths().to_resolved_toml();
        let id = format!("{:016x}", fnv1a64(resolved.as_bytes()));
        if let Some(first) = ids.insert(id.clone(), name.clone()) {
            return Err(SweepError::Duplicate {
                path: path.to_path_buf(),
                first,
                second: name,
            });
        }
        points.push(Point {
            index: n,
            id,
            name,
            overrides,
            spec,
            resolved,
        });
    }
    Ok(Sweep {
        file: path.to_path_buf(),
        base,
        keys,
        points,
        out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_parse_and_partition() {
        assert_eq!(Shard::parse("1/3"), Ok(Shard { index: 1, count: 3 }));
        for bad in ["3/2", "2/2", "0/0", "a/2", "1", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        // Every job index belongs to exactly one shard.
        for n in 1..6 {
            let shards: Vec<Shard> = (0..n).map(|i| Shard { index: i, count: n }).collect();
            for j in 0..50 {
                assert_eq!(shards.iter().filter(|s| s.contains(j)).count(), 1);
            }
        }
    }

    #[test]
    fn value_labels() {
        assert_eq!(value_label(&toml::Value::Float(2.0)), "2");
        assert_eq!(value_label(&toml::Value::Float(0.5)), "0.5");
        assert_eq!(value_label(&toml::Value::Integer(7)), "7");
        assert_eq!(value_label(&toml::Value::String("rdp".into())), "rdp");
    }
}
