//! Data room: CSV files with one label column and numeric feature columns.
//!
//! The label column is chosen by index (0-based) or by header name; every other column is a
//! feature. Labels follow [`super::labels::LabelMap`] (±1 → 0/1, else class indices). With a
//! header, the first record is names; without, every record is data. Input may be gzipped.
//!
//! Owns parsing and validation: a non-numeric or NaN/infinite feature, a ragged row, or a label
//! column that does not exist is an error naming the line. Must not impute or scale.

use std::io::Read;
use std::path::{Path, PathBuf};

use ndarray::Array2;

use super::Dataset;
use super::error::{DataError, MAX_ELEMENTS};
use super::io::{maybe_gunzip, open_maybe_gzip};
use super::labels::{LabelMap, RawLabels, parse_label};

/// Which column holds the label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelColumn {
    /// 0-based column index.
    Index(usize),
    /// Header name (requires `has_header`).
    Name(String),
}

/// How to read a CSV file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// The first record holds column names.
    pub has_header: bool,
    /// The label column.
    pub label: LabelColumn,
    /// Field delimiter (default `b','`).
    pub delimiter: u8,
}

impl Default for CsvOptions {
    /// A header row, the label in a column named `label`, comma-separated.
    fn default() -> Self {
        CsvOptions {
            has_header: true,
            label: LabelColumn::Name("label".to_string()),
            delimiter: b',',
        }
    }
}

/// A parsed CSV file: dense features and raw labels.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvTable {
    pub features: Vec<f32>,
    pub num_features: usize,
    pub labels: RawLabels,
    /// Feature column names (from the header, or `column_<i>`).
    pub feature_names: Vec<String>,
}

fn csv_error(e: ::csv::Error) -> DataError {
    let line = e.position().map(|p| p.line() as usize);
    match e.into_kind() {
        ::csv::ErrorKind::Io(io) => DataError::io(io),
        ::csv::ErrorKind::Utf8 { err, .. } => DataError::Parse {
            path: None,
            line,
            field: "record".to_string(),
            expected: "UTF-8 text",
            found: err.to_string(),
        },
        other => DataError::Parse {
            path: None,
            line,
            field: "record".to_string(),
            expected: "a CSV record",
            found: format!("{other:?}"),
        },
    }
}

/// Parse CSV (raw or gzip) from a reader.
pub fn read_csv<R: Read>(reader: R, options: &CsvOptions) -> Result<CsvTable, DataError> {
    let reader = maybe_gunzip(reader).map_err(DataError::io)?;
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(options.delimiter)
        .trim(::csv::Trim::All)
        .from_reader(reader);
    let mut records = rdr.records().peekable();
    let mut header: Option<Vec<String>> = None;
    // The line the expected width comes from (the header's, else the first row's).
    let mut width_line = None;
    if options.has_header {
        match records.next() {
            Some(r) => {
                let r = r.map_err(csv_error)?;
                width_line = r.position().map(|p| p.line() as usize);
                header = Some(r.iter().map(String::from).collect());
            }
            None => return Err(DataError::Empty { path: None }),
        }
    }
    let mut rows_read = 0usize;
    let label_col = match (&options.label, &header) {
        (LabelColumn::Index(i), _) => *i,
        (LabelColumn::Name(name), Some(h)) => {
            h.iter()
                .position(|c| c == name)
                .ok_or_else(|| DataError::BadHeader {
                    path: None,
                    expected: format!("a column named {name:?}"),
                    found: format!("columns {h:?}"),
                })?
        }
        (LabelColumn::Name(name), None) => {
            return Err(DataError::InvalidParameter {
                name: "label column",
                expected: "a column index when the file has no header".to_string(),
                found: format!("name {name:?}"),
            });
        }
    };
    let mut width = header.as_ref().map(Vec::len);
    let mut features = Vec::new();
    let mut labels = RawLabels::default();
    while let Some(record) = records.next() {
        let record = record.map_err(csv_error)?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        if record.len() == 1 && record.get(0) == Some("") {
            continue;
        }
        if width.is_none() {
            width_line = Some(line);
        }
        let w = *width.get_or_insert(record.len());
        if record.len() != w {
            // The first line against the second: when the third agrees with the second, the
            // first line is the odd one out, so blame it rather than the second.
            let first_is_odd = rows_read == usize::from(header.is_none())
                && records
                    .peek()
                    .and_then(|r| r.as_ref().ok())
                    .is_some_and(|next| next.len() == record.len());
            return Err(if first_is_odd {
                DataError::RaggedRow {
                    path: None,
                    line: width_line,
                    expected: record.len(),
                    found: w,
                }
            } else {
                DataError::RaggedRow {
                    path: None,
                    line: Some(line),
                    expected: w,
                    found: record.len(),
                }
            });
        }
        rows_read += 1;
        if label_col >= w {
            return Err(DataError::InvalidParameter {
                name: "label column",
                expected: format!("an index below the {w} columns"),
                found: label_col.to_string(),
            });
        }
        if (features.len() as u64).saturating_add(w as u64) > MAX_ELEMENTS {
            return Err(DataError::TooLarge {
                path: None,
                what: "number of CSV feature values".to_string(),
                claimed: features.len() as u64 + w as u64,
                limit: MAX_ELEMENTS,
            });
        }
        for (j, field) in record.iter().enumerate() {
            if j == label_col {
                labels.values.push(parse_label(field, line)?);
                labels.lines.push(line);
                continue;
            }
            let name = || {
                header
                    .as_ref()
                    .map_or(format!("column {j}"), |h| format!("column {:?}", h[j]))
            };
            let v: f32 = field.parse().map_err(|_| DataError::Parse {
                path: None,
                line: Some(line),
                field: name(),
                expected: "a number",
                found: field.to_string(),
            })?;
            if !v.is_finite() {
                return Err(super::libsvm::non_finite(field, Some(line), name()));
            }
            features.push(v);
        }
    }
    let Some(w) = width.filter(|_| !labels.values.is_empty()) else {
        return Err(DataError::Empty { path: None });
    };
    if w < 2 {
        return Err(DataError::BadHeader {
            path: None,
            expected: "a label column and at least one feature column".to_string(),
            found: format!("{w} column"),
        });
    }
    let feature_names = (0..w)
        .filter(|&j| j != label_col)
        .map(|j| {
            header
                .as_ref()
                .map_or(format!("column_{j}"), |h| h[j].clone())
        })
        .collect();
    Ok(CsvTable {
        features,
        num_features: w - 1,
        labels,
        feature_names,
    })
}

/// [`read_csv`] on a file; errors name the file.
pub fn read_csv_file(path: &Path, options: &CsvOptions) -> Result<CsvTable, DataError> {
    read_csv(open_maybe_gzip(path)?, options).map_err(|e| e.with_path(path))
}

impl CsvTable {
    /// Into a [`Dataset`] under a label map (see [`LabelMap::infer`]).
    ///
    /// # Shapes
    /// `features`: `[n, num_features]`; `sample_shape`: `[num_features]`.
    pub fn into_dataset(self, map: LabelMap) -> Dataset {
        let n = self.labels.values.len();
        let d = self.num_features;
        let features = Array2::from_shape_vec((n, d), self.features)
            .expect("read_csv pushes exactly num_features values per label");
        Dataset {
            features,
            labels: map.apply(&self.labels),
            sample_shape: vec![d],
            num_classes: map.num_classes(),
        }
    }
}

/// Load a train and a test CSV file with a common label map; both must have the same number
/// of feature columns.
pub fn load_csv_pair(
    train_path: &Path,
    test_path: &Path,
    options: &CsvOptions,
) -> Result<(Dataset, Dataset), DataError> {
    let train = read_csv_file(train_path, options)?;
    let test = read_csv_file(test_path, options)?;
    if train.num_features != test.num_features {
        return Err(DataError::Inconsistent {
            what: format!(
                "feature columns of {} (train {})",
                test_path.display(),
                train_path.display()
            ),
            expected: train.num_features.to_string(),
            found: test.num_features.to_string(),
        });
    }
    let map = LabelMap::infer(&[
        (&train.labels, Some(PathBuf::from(train_path))),
        (&test.labels, Some(PathBuf::from(test_path))),
    ])?;
    Ok((train.into_dataset(map), test.into_dataset(map)))
}
