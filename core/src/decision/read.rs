//! Reading a hand-written decision (`vclos plan/apply --decision FILE`):
//! YAML, or JSON when the text starts with `{`, under fixed bounds.
//!
//! YAML goes through [`crate::yaml::check`] first (size, nesting, alias
//! expansion; the reasons and sources are in that module). JSON needs no
//! alias bound (RFC 8259 has none) and serde_json stops at 128 nested
//! levels on its own (`remaining_depth`, serde_json's `de.rs`,
//! "RecursionLimitExceeded"); both share the size cap. The limits and the
//! errors are listed in docs/input-limits.md.

use std::path::Path;

use thiserror::Error;

use super::Decision;
use crate::yaml::{self, at, LimitError, Limits};

/// Largest decision file read. A decision for every GPU of a 2048-GPU
/// fabric is about 0.5 MB; 8 MiB leaves room for far larger fabrics.
pub const MAX_DECISION_BYTES: usize = 8 * 1024 * 1024;

/// Bounds for decision YAML: decisions nest 6 levels deep
/// (`vclos.links[].via.ocs`); aliases may repeat small parts only.
pub const DECISION_LIMITS: Limits = Limits {
    max_bytes: MAX_DECISION_BYTES,
    max_depth: 32,
    max_alias_nodes: 100_000,
};

/// Why a decision file could not be read.
#[derive(Debug, Error)]
pub enum DecisionError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { file: String, offset: usize },
    #[error("{}: {reason}", at(file, *line))]
    Limit {
        file: String,
        line: Option<usize>,
        reason: LimitError,
    },
    #[error("{}: not a valid decision: {message}", at(file, *line))]
    Parse {
        file: String,
        line: Option<usize>,
        message: String,
    },
}

/// Read and parse the decision in `path`.
pub fn read_file(path: &Path) -> Result<Decision, DecisionError> {
    let file = path.display().to_string();
    let bytes =
        yaml::read_capped(path, MAX_DECISION_BYTES).map_err(|source| DecisionError::Io {
            file: file.clone(),
            source,
        })?;
    from_bytes(&file, &bytes)
}

/// Parse a decision from bytes; `file` names it in errors.
pub fn from_bytes(file: &str, bytes: &[u8]) -> Result<Decision, DecisionError> {
    too_large(file, bytes.len())?;
    let text = std::str::from_utf8(bytes).map_err(|e| DecisionError::NotUtf8 {
        file: file.into(),
        offset: e.valid_up_to(),
    })?;
    from_text(file, text)
}

/// Parse a decision from text: JSON if it starts with `{`, else YAML.
pub fn from_text(file: &str, text: &str) -> Result<Decision, DecisionError> {
    too_large(file, text.len())?;
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| DecisionError::Parse {
            file: file.into(),
            line: Some(e.line()),
            message: e.to_string(),
        });
    }
    yaml::check(text, &DECISION_LIMITS).map_err(|e| limit(file, e))?;
    yaml::from_str(text).map_err(|e| DecisionError::Parse {
        file: file.into(),
        line: e.location().map(|l| l.line()),
        message: e.to_string(),
    })
}

fn too_large(file: &str, size: usize) -> Result<(), DecisionError> {
    if size > MAX_DECISION_BYTES {
        return Err(limit(
            file,
            LimitError::TooLarge {
                size,
                limit: MAX_DECISION_BYTES,
            },
        ));
    }
    Ok(())
}

fn limit(file: &str, reason: LimitError) -> DecisionError {
    DecisionError::Limit {
        file: file.into(),
        line: reason.line(),
        reason,
    }
}
