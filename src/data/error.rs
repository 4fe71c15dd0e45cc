//! Data room: the one error type of `data/`, [`DataError`].
//!
//! Every variant has named fields saying where (file, line), what was expected and what was
//! found, so the CLI can print one clear line. Parsers that read from an in-memory reader leave
//! `path` as `None`; the path-taking wrappers fill it in with [`DataError::with_path`].
//! This module must not format for a terminal or decide exit codes (that is `cli/`).

use std::path::{Path, PathBuf};

/// Render an optional file location as a message prefix (`"path: "` or nothing).
fn at(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!("{}: ", p.display()),
        None => String::new(),
    }
}

/// Render an optional line number as `"line N: "`.
fn line_at(line: &Option<usize>) -> String {
    match line {
        Some(l) => format!("line {l}: "),
        None => String::new(),
    }
}

/// Everything that can go wrong reading, locating, generating or transforming data.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The operating system refused a read (or the gzip stream is corrupt).
    #[error("{}{source}", at(.path))]
    Io {
        path: Option<PathBuf>,
        #[source]
        source: std::io::Error,
    },

    /// A binary file does not start with the magic number of its format.
    #[error("{}not a {format} file: expected magic {expected}, found {found}", at(.path))]
    BadMagic {
        path: Option<PathBuf>,
        format: &'static str,
        expected: String,
        found: String,
    },

    /// A file ended before the size its header (or record structure) promises.
    #[error("{}truncated {what}: expected {expected_bytes} bytes, found {found_bytes}", at(.path))]
    Truncated {
        path: Option<PathBuf>,
        what: &'static str,
        expected_bytes: u64,
        found_bytes: u64,
    },

    /// A file holds more bytes than its header promises.
    #[error("{}trailing data after {what}: expected {expected_bytes} bytes, found more", at(.path))]
    TrailingData {
        path: Option<PathBuf>,
        what: &'static str,
        expected_bytes: u64,
    },

    /// A header (or data) claims a size beyond the sane bound; nothing was allocated for it.
    #[error("{}{what} of {claimed} exceeds the limit of {limit}", at(.path))]
    TooLarge {
        path: Option<PathBuf>,
        what: String,
        claimed: u64,
        limit: u64,
    },

    /// A header's shape is not what the format requires (e.g. 2-D labels).
    #[error("{}bad header: expected {expected}, found {found}", at(.path))]
    BadHeader {
        path: Option<PathBuf>,
        expected: String,
        found: String,
    },

    /// The images file and the labels file disagree on the number of examples.
    #[error(
        "{} has {images} images but {} has {labels} labels",
        .images_path.as_ref().map_or("images file".to_string(), |p| p.display().to_string()),
        .labels_path.as_ref().map_or("labels file".to_string(), |p| p.display().to_string())
    )]
    CountMismatch {
        images_path: Option<PathBuf>,
        labels_path: Option<PathBuf>,
        images: usize,
        labels: usize,
    },

    /// A text field could not be parsed.
    #[error("{}{}{field}: expected {expected}, found {found:?}", at(.path), line_at(.line))]
    Parse {
        path: Option<PathBuf>,
        line: Option<usize>,
        field: String,
        expected: &'static str,
        found: String,
    },

    /// A feature value is NaN or infinite.
    #[error("{}{}{field}: expected a finite number, found {found}", at(.path), line_at(.line))]
    NonFinite {
        path: Option<PathBuf>,
        line: Option<usize>,
        field: String,
        found: String,
    },

    /// A label is outside the classes the format allows.
    #[error("{}{}label: expected {expected}, found {found}", at(.path), line_at(.line))]
    BadLabel {
        path: Option<PathBuf>,
        line: Option<usize>,
        expected: String,
        found: String,
    },

    /// A sparse feature index is 0 (LIBSVM indices are 1-based) or above the feature count.
    #[error(
        "{}{}feature index {index}: expected an index in 1..={num_features}",
        at(.path),
        line_at(.line)
    )]
    FeatureIndex {
        path: Option<PathBuf>,
        line: Option<usize>,
        index: u64,
        num_features: usize,
    },

    /// A row has a different number of fields from the first row.
    #[error("{}{}expected {expected} fields, found {found}", at(.path), line_at(.line))]
    RaggedRow {
        path: Option<PathBuf>,
        line: Option<usize>,
        expected: usize,
        found: usize,
    },

    /// A record-structured file whose size is not a whole number of records.
    #[error(
        "{}{what} of {found_bytes} bytes is not a multiple of the {record_bytes}-byte record ({} whole records and {} bytes over)",
        at(.path),
        found_bytes / record_bytes,
        found_bytes % record_bytes
    )]
    RecordSize {
        path: Option<PathBuf>,
        what: &'static str,
        record_bytes: u64,
        found_bytes: u64,
    },

    /// A finite number too large in magnitude for f32.
    #[error(
        "{}{}{field}: {found} overflows f32 (the largest magnitude is about 3.4e38)",
        at(.path),
        line_at(.line)
    )]
    Overflow {
        path: Option<PathBuf>,
        line: Option<usize>,
        field: String,
        found: String,
    },

    /// A path where a data file should be is a directory, FIFO or other special file.
    #[error("{}: not a regular file ({kind}); expected {expected}", .path.display())]
    NotRegularFile {
        path: PathBuf,
        kind: &'static str,
        expected: String,
    },

    /// A file (or archive) holds no examples.
    #[error("{}no examples found", at(.path))]
    Empty { path: Option<PathBuf> },

    /// A named dataset is not where dpx looked; says every place and how to get it.
    #[error(
        "dataset {dataset} not found; looked for {expected} in: {}. {hint}",
        .looked_in.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotFound {
        dataset: String,
        expected: String,
        looked_in: Vec<PathBuf>,
        hint: String,
    },

    /// Two parts of a dataset disagree (e.g. train and test feature counts).
    #[error("{what}: expected {expected}, found {found}")]
    Inconsistent {
        what: String,
        expected: String,
        found: String,
    },

    /// A parameter of a generator, preprocessing step or sampler is out of range.
    #[error("{name}: expected {expected}, found {found}")]
    InvalidParameter {
        name: &'static str,
        expected: String,
        found: String,
    },
}

impl DataError {
    /// Attach a file path to an error produced by a reader-level parser (keeps an existing one).
    pub fn with_path(self, file: &Path) -> Self {
        let fill = |p: Option<PathBuf>| p.or_else(|| Some(file.to_path_buf()));
        match self {
            DataError::Io { path, source } => DataError::Io {
                path: fill(path),
                source,
            },
            DataError::BadMagic {
                path,
                format,
                expected,
                found,
            } => DataError::BadMagic {
                path: fill(path),
                format,
                expected,
                found,
            },
            DataError::Truncated {
                path,
                what,
                expected_bytes,
                found_bytes,
            } => DataError::Truncated {
                path: fill(path),
                what,
                expected_bytes,
                found_bytes,
            },
            DataError::TrailingData {
                path,
                what,
                expected_bytes,
            } => DataError::TrailingData {
                path: fill(path),
                what,
                expected_bytes,
            },
            DataError::TooLarge {
                path,
                what,
                claimed,
                limit,
            } => DataError::TooLarge {
                path: fill(path),
                what,
                claimed,
                limit,
            },
            DataError::BadHeader {
                path,
                expected,
                found,
            } => DataError::BadHeader {
                path: fill(path),
                expected,
                found,
            },
            DataError::Parse {
                path,
                line,
                field,
                expected,
                found,
            } => DataError::Parse {
                path: fill(path),
                line,
                field,
                expected,
                found,
            },
            DataError::NonFinite {
                path,
                line,
                field,
                found,
            } => DataError::NonFinite {
                path: fill(path),
                line,
                field,
                found,
            },
            DataError::BadLabel {
                path,
                line,
                expected,
                found,
            } => DataError::BadLabel {
                path: fill(path),
                line,
                expected,
                found,
            },
            DataError::FeatureIndex {
                path,
                line,
                index,
                num_features,
            } => DataError::FeatureIndex {
                path: fill(path),
                line,
                index,
                num_features,
            },
            DataError::RaggedRow {
                path,
                line,
                expected,
                found,
            } => DataError::RaggedRow {
                path: fill(path),
                line,
                expected,
                found,
            },
            DataError::Empty { path } => DataError::Empty { path: fill(path) },
            DataError::RecordSize {
                path,
                what,
                record_bytes,
                found_bytes,
            } => DataError::RecordSize {
                path: fill(path),
                what,
                record_bytes,
                found_bytes,
            },
            DataError::Overflow {
                path,
                line,
                field,
                found,
            } => DataError::Overflow {
                path: fill(path),
                line,
                field,
                found,
            },
            other @ (DataError::CountMismatch { .. }
            | DataError::NotRegularFile { .. }
            | DataError::NotFound { .. }
            | DataError::Inconsistent { .. }
            | DataError::InvalidParameter { .. }) => other,
        }
    }

    /// An I/O error without a path yet.
    pub(crate) fn io(source: std::io::Error) -> Self {
        DataError::Io { path: None, source }
    }
}

/// The largest number of bytes any single data file may claim (4 GiB): every header-declared
/// size is checked against this before anything is read.
pub const MAX_FILE_BYTES: u64 = 1 << 32;

/// The largest dense feature matrix any loader builds, in elements (2^30 f32 = 4 GiB).
pub const MAX_ELEMENTS: u64 = 1 << 30;
