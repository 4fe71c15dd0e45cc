//! Config room: the one error type of loading and validating an experiment file.
//!
//! Every variant names the file (and, where the TOML parser gives a position, the line and
//! column) and the dotted key at fault, so the CLI can print it as the single line a user sees,
//! e.g. `runs.toml: privacy.delta: expected a value in (0, 1), found 1.5`.
//! This module only describes errors; it decides nothing about which values are valid.

use std::fmt;
use std::path::PathBuf;

/// Where a problem was found: a file, optionally a 1-based line and column in it, or a
/// dotted-key override applied on top of the file (`dpx sweep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The config file as the user named it.
    pub file: PathBuf,
    /// 1-based line and column (in characters) when the TOML parser reported a span.
    pub position: Option<(u32, u32)>,
    /// True when the value came from an override (`set("privacy.epsilon", ..)`), not the file.
    pub from_override: bool,
}

impl Location {
    /// The file alone.
    pub fn file(file: impl Into<PathBuf>) -> Self {
        Self {
            file: file.into(),
            position: None,
            from_override: false,
        }
    }

    /// A line and column (both 1-based) in the file.
    pub fn at(file: impl Into<PathBuf>, line: usize, column: usize) -> Self {
        let clamp = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        Self {
            file: file.into(),
            position: Some((clamp(line), clamp(column))),
            from_override: false,
        }
    }

    /// An override applied on top of the file.
    pub fn overridden(file: impl Into<PathBuf>) -> Self {
        Self {
            file: file.into(),
            position: None,
            from_override: true,
        }
    }

    /// The 1-based (line, column) of byte `offset` in `text`; the column counts characters.
    pub fn position_of(text: &str, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        if self.from_override {
            f.write_str(" (override)")?;
        }
        Ok(())
    }
}

/// An optional "did you mean" hint, displayed as `; did you mean `x`?` or as nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Suggestion(pub Option<String>);

impl fmt::Display for Suggestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(s) => write!(f, "; did you mean `{s}`?"),
            None => Ok(()),
        }
    }
}

/// Why an experiment file could not be turned into an [`ExperimentSpec`](super::ExperimentSpec).
///
/// All are caused by the user's input: the CLI wraps them as bad input (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{at}: cannot read the file: {source}")]
    Read {
        at: Location,
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("{at}: {message}")]
    Syntax { at: Location, message: String },
    /// A key the schema does not have.
    #[error("{at}: unknown key `{key}`{suggestion}")]
    UnknownKey {
        at: Location,
        /// Dotted path, e.g. `train.lerning_rate`.
        key: String,
        suggestion: Suggestion,
    },
    /// A value of the wrong type or an unknown name (e.g. a string where a number belongs).
    #[error("{at}: {key}: {message}{suggestion}")]
    WrongType {
        at: Location,
        key: String,
        message: String,
        suggestion: Suggestion,
    },
    /// A required key is absent.
    #[error("{at}: {key}: missing; {reason}")]
    Missing {
        at: Location,
        key: String,
        reason: &'static str,
    },
    /// A value outside its allowed range (including NaN and ±∞ where a finite number belongs).
    #[error("{at}: {key}: expected {expected}, found {found}")]
    OutOfRange {
        at: Location,
        key: String,
        expected: String,
        found: String,
    },
    /// Two keys that must not be given together (or of which exactly one is needed).
    #[error("{at}: {key}: {reason}")]
    Conflict {
        at: Location,
        key: String,
        /// The other key involved.
        other: String,
        reason: String,
    },
    /// A key that has no meaning in the configuration it appears in (e.g. `train.momentum`
    /// with `optimizer = "sgd"`): an error rather than silently ignored.
    #[error("{at}: {key}: {reason}")]
    NotApplicable {
        at: Location,
        key: String,
        reason: String,
    },
    /// An override (`--set`, sweep grid) that cannot be applied to the document.
    #[error("{at}: {key}: {reason}{suggestion}")]
    BadOverride {
        at: Location,
        key: String,
        reason: String,
        suggestion: Suggestion,
    },
    /// The configuration does not fit the loaded data (e.g. a batch larger than the dataset).
    #[error("{at}: {key}: {reason}")]
    DataMismatch {
        at: Location,
        key: String,
        reason: String,
    },
}

impl ConfigError {
    /// Where the error was found.
    pub fn location(&self) -> &Location {
        match self {
            ConfigError::Read { at, .. }
            | ConfigError::Syntax { at, .. }
            | ConfigError::UnknownKey { at, .. }
            | ConfigError::WrongType { at, .. }
            | ConfigError::Missing { at, .. }
            | ConfigError::OutOfRange { at, .. }
            | ConfigError::Conflict { at, .. }
            | ConfigError::NotApplicable { at, .. }
            | ConfigError::BadOverride { at, .. }
            | ConfigError::DataMismatch { at, .. } => at,
        }
    }

    /// The dotted key at fault, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Read { .. } | ConfigError::Syntax { .. } => None,
            ConfigError::UnknownKey { key, .. }
            | ConfigError::WrongType { key, .. }
            | ConfigError::Missing { key, .. }
            | ConfigError::OutOfRange { key, .. }
            | ConfigError::Conflict { key, .. }
            | ConfigError::NotApplicable { key, .. }
            | ConfigError::BadOverride { key, .. }
            | ConfigError::DataMismatch { key, .. } => Some(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_counts_lines_and_characters_from_one() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(Location::position_of(text, 0), (1, 1));
        assert_eq!(Location::position_of(text, 6), (2, 1));
        // 'é' is two bytes; the column counts characters.
        let eq = text.rfind('=').expect("the text has an `=`");
        assert_eq!(Location::position_of(text, eq), (2, 4));
        // Offsets past the end (or inside a character) are clamped, never panic.
        assert_eq!(Location::position_of(text, 1000), (3, 1));
        assert_eq!(Location::position_of(text, 8), (2, 2));
    }

    #[test]
    fn display_is_one_line_with_file_key_and_values() {
        let e = ConfigError::OutOfRange {
            at: Location::file("runs.toml"),
            key: "privacy.delta".into(),
            expected: "a value in (0, 1)".into(),
            found: "1.5".into(),
        };
        assert_eq!(
            e.to_string(),
            "runs.toml: privacy.delta: expected a value in (0, 1), found 1.5"
        );
        let e = ConfigError::UnknownKey {
            at: Location::at("runs.toml", 7, 1),
            key: "train.lerning_rate".into(),
            suggestion: Suggestion(Some("learning_rate".into())),
        };
        assert_eq!(
            e.to_string(),
            "runs.toml:7:1: unknown key `train.lerning_rate`; did you mean `learning_rate`?"
        );
    }
}
