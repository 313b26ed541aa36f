//! Validated names: the only strings that may ever reach a device.
//!
//! Every identifier that ends up inside a rendered command (device, port, job,
//! VRF, ACL or policy names) goes through one of these checks first. The
//! charsets are deliberately strict: no whitespace, no line breaks, no `;`,
//! no quotes, so no name can smuggle a second command into a CLI session, a
//! TL1 line or an XML document.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What kind of name failed validation; used in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    Device,
    Port,
    Job,
    Credential,
    Host,
    Topology,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::Device => "device name",
            NameKind::Port => "port name",
            NameKind::Job => "job id",
            NameKind::Credential => "credential name",
            NameKind::Host => "host",
            NameKind::Topology => "topology name",
        })
    }
}

/// A name that does not satisfy its charset or length rule.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid {kind} {shown}: {reason}")]
pub struct NameError {
    pub kind: NameKind,
    /// The offending value, escaped so that control characters are visible.
    pub shown: String,
    pub reason: String,
}

fn rule(kind: NameKind) -> (usize, fn(char) -> bool, &'static str) {
    fn ident(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
    }
    fn port(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':')
    }
    fn job(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '_' | '-')
    }
    fn host(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':')
    }
    match kind {
        NameKind::Device | NameKind::Credential | NameKind::Topology => {
            (63, ident, "letters, digits, '_', '-', '.'")
        }
        NameKind::Port => (64, port, "letters, digits, '_', '-', '.', '/', ':'"),
        // Job ids become part of VRF/ACL/policy names, which vendors cap at
        // ~31 characters; 24 leaves room for a prefix and a spine suffix.
        NameKind::Job => (24, job, "letters, digits, '_', '-'"),
        NameKind::Host => (253, host, "letters, digits, '-', '.', ':'"),
    }
}

/// Check `value` against the rule for `kind`.
pub fn validate(kind: NameKind, value: &str) -> Result<(), NameError> {
    let (max, allowed, charset) = rule(kind);
    let err = |reason: String| NameError {
        kind,
        shown: format!("{value:?}"),
        reason,
    };
    if value.is_empty() {
        return Err(err("must not be empty".into()));
    }
    if value.chars().count() > max {
        return Err(err(format!("longer than {max} characters")));
    }
    if let Some(bad) = value.chars().find(|c| !allowed(*c)) {
        return Err(err(format!(
            "character {bad:?} is not allowed (allowed: {charset})"
        )));
    }
    if !value.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(err("must start with a letter or digit".into()));
    }
    Ok(())
}

/// A job identifier that has passed [`validate`]; the only way to build one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    pub fn new(value: impl Into<String>) -> Result<Self, NameError> {
        let value = value.into();
        validate(NameKind::Job, &value)?;
        Ok(JobId(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for JobId {
    type Error = NameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        JobId::new(value)
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

impl std::str::FromStr for JobId {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobId::new(s)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injection_attempts_are_rejected() {
        for bad in [
            "j1\nreboot",
            "j1;reload",
            "j 1",
            "",
            "-j1",
            "j1\"",
            "j1\r",
            "ä",
        ] {
            assert!(JobId::new(bad).is_err(), "{bad:?} accepted");
        }
        let e = JobId::new("j1;reload").unwrap_err();
        assert!(e.to_string().contains("';'"), "{e}");
    }

    #[test]
    fn ordinary_names_pass() {
        assert_eq!(JobId::new("train-42_a").unwrap().as_str(), "train-42_a");
        validate(NameKind::Port, "100GE1/0/17").unwrap();
        validate(NameKind::Port, "et-0/0/1:2").unwrap();
        validate(NameKind::Device, "spine1-1").unwrap();
        assert!(validate(NameKind::Device, "leaf:1").is_err());
        assert!(validate(NameKind::Job, &"a".repeat(25)).is_err());
    }

    #[test]
    fn deserializing_a_job_id_validates_it() {
        let r: Result<JobId, _> = serde_json::from_str("\"j1\\nreboot\"");
        assert!(r.is_err());
    }
}
