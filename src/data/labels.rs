//! Data room: mapping the raw numeric labels of text formats (LIBSVM, CSV) to class indices.
//!
//! Rule: when every label is −1 or +1 the data are binary and map −1 → 0, +1 → 1 (the
//! [`super::Dataset`] convention); otherwise every label must be a non-negative integer and is
//! its own class index. The map is inferred from train and test together so both agree.
//! Owns only this rule; parsers check that each raw label is a finite integer.

use std::path::PathBuf;

use super::error::DataError;

/// The largest class index a text label may name (guards `num_classes` and any allocation
/// sized by it).
pub const MAX_CLASS: f64 = 65_535.0;

/// Raw labels of one file, with the 1-based line each came from (for error messages).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawLabels {
    pub values: Vec<f64>,
    pub lines: Vec<usize>,
}

/// How raw labels become class indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelMap {
    /// −1 → 0, +1 → 1; two classes.
    PlusMinusOne,
    /// Non-negative integer labels are class indices; `num_classes = max + 1`.
    Identity { num_classes: usize },
}

impl LabelMap {
    /// Infer the map from every file's labels (train first). `paths` name the files for errors.
    pub fn infer(files: &[(&RawLabels, Option<PathBuf>)]) -> Result<Self, DataError> {
        let all = || files.iter().flat_map(|(r, _)| r.values.iter().copied());
        if all().all(|v| v == -1.0 || v == 1.0) {
            return Ok(LabelMap::PlusMinusOne);
        }
        let mut max = 0.0f64;
        for (raw, path) in files {
            for (&v, &line) in raw.values.iter().zip(&raw.lines) {
                if !(0.0..=MAX_CLASS).contains(&v) || v.fract() != 0.0 {
                    return Err(DataError::BadLabel {
                        path: path.clone(),
                        line: Some(line),
                        expected: format!(
                            "-1/+1 for every example, or a class index in 0..={MAX_CLASS}"
                        ),
                        found: v.to_string(),
                    });
                }
                max = max.max(v);
            }
        }
        Ok(LabelMap::Identity {
            num_classes: max as usize + 1,
        })
    }

    /// Number of classes under this map.
    pub fn num_classes(&self) -> usize {
        match self {
            LabelMap::PlusMinusOne => 2,
            LabelMap::Identity { num_classes } => *num_classes,
        }
    }

    /// Map raw labels (already validated by [`LabelMap::infer`]) to class indices.
    pub fn apply(&self, raw: &RawLabels) -> Vec<usize> {
        match self {
            LabelMap::PlusMinusOne => raw.values.iter().map(|&v| usize::from(v > 0.0)).collect(),
            LabelMap::Identity { .. } => raw.values.iter().map(|&v| v as usize).collect(),
        }
    }
}

/// Parse one label field: a finite number with no fractional part.
pub(crate) fn parse_label(field: &str, line: usize) -> Result<f64, DataError> {
    let v: f64 = field.trim().parse().map_err(|_| DataError::Parse {
        path: None,
        line: Some(line),
        field: "label".to_string(),
        expected: "a number",
        found: field.to_string(),
    })?;
    if !v.is_finite() || v.fract() != 0.0 {
        return Err(DataError::BadLabel {
            path: None,
            line: Some(line),
            expected: "an integer class label".to_string(),
            found: field.to_string(),
        });
    }
    Ok(v)
}
