//! Data room: the LIBSVM sparse text format (Chang & Lin, LIBSVM; the format of a9a).
//!
//! One example per line: `label index:value index:value ...`, indices 1-based, separated by
//! white space; `#` starts a comment; blank lines are skipped. Labels follow
//! [`super::labels::LabelMap`] (±1 → 0/1). The number of features is either fixed (123 for
//! a9a, so train and test agree even when the last feature never occurs in one of them) or
//! inferred as the largest index seen across the files loaded together.
//!
//! Owns parsing, validation and densification. A NaN or infinite value, index 0, an index
//! above the fixed feature count, or a dense matrix beyond [`MAX_ELEMENTS`] is an error.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use ndarray::Array2;

use super::Dataset;
use super::error::{DataError, MAX_ELEMENTS};
use super::io::{maybe_gunzip, open_maybe_gzip};
use super::labels::{LabelMap, RawLabels, parse_label};

/// The largest feature index accepted when inferring the feature count.
pub const MAX_FEATURES: u64 = 1 << 24;

/// A parsed LIBSVM file, still sparse.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LibsvmFile {
    /// Raw labels and their line numbers.
    pub labels: RawLabels,
    /// Per example: (0-based feature index, value).
    pub rows: Vec<Vec<(u32, f32)>>,
    /// The largest 1-based index seen (0 when every row is empty).
    pub max_index: usize,
}

/// The error for a number that is not a finite f32: [`DataError::Overflow`] when the text is a
/// finite number too large for f32 (e.g. `1e308`), [`DataError::NonFinite`] for NaN and ±∞.
pub(crate) fn non_finite(text: &str, line: Option<usize>, field: String) -> DataError {
    let found = text.to_string();
    if text.trim().parse::<f64>().is_ok_and(f64::is_finite) {
        DataError::Overflow {
            path: None,
            line,
            field,
            found,
        }
    } else {
        DataError::NonFinite {
            path: None,
            line,
            field,
            found,
        }
    }
}

/// Parse LIBSVM text (raw or gzip) from a reader.
pub fn read_libsvm<R: Read>(reader: R) -> Result<LibsvmFile, DataError> {
    let reader = BufReader::new(maybe_gunzip(reader).map_err(DataError::io)?);
    let mut out = LibsvmFile::default();
    for (i, line) in reader.lines().enumerate() {
        let line_no = i + 1;
        let line = line.map_err(DataError::io)?;
        let content = line.split('#').next().unwrap_or("");
        let mut fields = content.split_whitespace();
        let Some(label) = fields.next() else { continue };
        let label = parse_label(label, line_no)?;
        let mut row = Vec::new();
        for field in fields {
            let Some((idx, val)) = field.split_once(':') else {
                return Err(DataError::Parse {
                    path: None,
                    line: Some(line_no),
                    field: "feature".to_string(),
                    expected: "index:value",
                    found: field.to_string(),
                });
            };
            if idx == "qid" {
                continue;
            }
            let index: u64 = idx.parse().map_err(|_| DataError::Parse {
                path: None,
                line: Some(line_no),
                field: "feature index".to_string(),
                expected: "a positive integer",
                found: idx.to_string(),
            })?;
            if index == 0 || index > MAX_FEATURES {
                return Err(DataError::FeatureIndex {
                    path: None,
                    line: Some(line_no),
                    index,
                    num_features: MAX_FEATURES as usize,
                });
            }
            let value: f32 = val.parse().map_err(|_| DataError::Parse {
                path: None,
                line: Some(line_no),
                field: format!("feature {index}"),
                expected: "a number",
                found: val.to_string(),
            })?;
            if !value.is_finite() {
                let field = format!("feature {index}");
                return Err(non_finite(val, Some(line_no), field));
            }
            out.max_index = out.max_index.max(index as usize);
            row.push(((index - 1) as u32, value));
        }
        out.labels.values.push(label);
        out.labels.lines.push(line_no);
        out.rows.push(row);
    }
    if out.rows.is_empty() {
        return Err(DataError::Empty { path: None });
    }
    Ok(out)
}

/// [`read_libsvm`] on a file; errors name the file.
pub fn read_libsvm_file(path: &Path) -> Result<LibsvmFile, DataError> {
    read_libsvm(open_maybe_gzip(path)?).map_err(|e| e.with_path(path))
}

impl LibsvmFile {
    /// Densify into a [`Dataset`] with `num_features` columns and the given label map.
    ///
    /// # Shapes
    /// `features`: `[n, num_features]`; `sample_shape`: `[num_features]`.
    pub fn into_dataset(self, num_features: usize, map: LabelMap) -> Result<Dataset, DataError> {
        let n = self.rows.len();
        let elements = (n as u64).saturating_mul(num_features as u64);
        if elements > MAX_ELEMENTS {
            return Err(DataError::TooLarge {
                path: None,
                what: format!("dense matrix of {n} examples x {num_features} features"),
                claimed: elements,
                limit: MAX_ELEMENTS,
            });
        }
        let mut features = Array2::<f32>::zeros((n, num_features));
        for (r, (row, &line)) in self.rows.iter().zip(&self.labels.lines).enumerate() {
            for &(j, v) in row {
                let j = j as usize;
                if j >= num_features {
                    return Err(DataError::FeatureIndex {
                        path: None,
                        line: Some(line),
                        index: j as u64 + 1,
                        num_features,
                    });
                }
                features[[r, j]] = v;
            }
        }
        Ok(Dataset {
            features,
            labels: map.apply(&self.labels),
            sample_shape: vec![num_features],
            num_classes: map.num_classes(),
        })
    }
}

/// Load a train and a test LIBSVM file with a common feature count (`num_features`, or the
/// largest index in either file) and a common label map.
pub fn load_libsvm_pair(
    train_path: &Path,
    test_path: &Path,
    num_features: Option<usize>,
) -> Result<(Dataset, Dataset), DataError> {
    let train = read_libsvm_file(train_path)?;
    let test = read_libsvm_file(test_path)?;
    let d = num_features.unwrap_or(train.max_index.max(test.max_index));
    if d == 0 {
        return Err(DataError::Inconsistent {
            what: format!("feature count of {}", train_path.display()),
            expected: "at least one feature".to_string(),
            found: "0".to_string(),
        });
    }
    let map = LabelMap::infer(&[
        (&train.labels, Some(train_path.to_path_buf())),
        (&test.labels, Some(test_path.to_path_buf())),
    ])?;
    Ok((
        train
            .into_dataset(d, map)
            .map_err(|e| e.with_path(train_path))?,
        test.into_dataset(d, map)
            .map_err(|e| e.with_path(test_path))?,
    ))
}
