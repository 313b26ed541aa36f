//! Validated names: the only strings that may ever reach a device.
//!
//! Every identifier that ends up inside a rendered command (device, port, job,
//! VRF, ACL or policy names) goes through one of these checks first. The
//! charsets are deliberately strict: no whitespace, no line breaks, no `;`,
//! no quotes, so no name can smuggle a second command into a CLI session, a
//! TL1 line or an XML document.
//!
//! **Job ids** are also bounded by the names vclos derives from them
//! (listed with their device limits in `crate::intent::name`): the longest
//! is the per-port ACL / traffic policy `v-<id>-p<n>` for a leaf's last
//! possible server port, n = 65535 (a port list holds at most 65535 ports),
//! under the 31-character cap of Huawei CE and OpenConfig object names; so
//! [`MAX_JOB_ID`] = 31 - 4 - 5 = 22. A fabric may bound them further (SONiC
//! VRF names, chassis with many logical spines):
//! `crate::intent::name::check_job_id` applies the topology's own limit.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Longest VRF / ACL / policy name on Huawei CE (vpn-instance names are
/// 1-31 characters: Huawei CloudEngine `ip vpn-instance`, as Ansible's
/// `community.network.ce_vrf` documents it) and the cap vclos applies to
/// OpenConfig names too.
pub const MAX_OBJECT_NAME: usize = 31;

/// Largest 1-based server-port index on a leaf (a port list holds at most
/// `u16::MAX` ports; the topology loader refuses more).
pub const MAX_PORT_INDEX: u16 = u16::MAX;

/// Decimal digits of `n`.
pub const fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Longest job id: `v-<id>-p<MAX_PORT_INDEX>` fits [`MAX_OBJECT_NAME`].
pub const MAX_JOB_ID: usize =
    MAX_OBJECT_NAME - "v-".len() - "-p".len() - digits(MAX_PORT_INDEX as u64);

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

/// `text` with every control character written as an escape (`\u{1b}`),
/// newlines too unless `keep_newlines`: for messages that quote input
/// files, so that a name cannot clear a terminal or forge a line of its
/// own. Text without control characters is returned as it is.
pub fn escape_controls(text: &str, keep_newlines: bool) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && !(keep_newlines && c == '\n');
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if bad(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Longest port name (Huawei CE interface names are far shorter; 64
/// leaves room for any vendor's sub-interface names).
pub const MAX_PORT_NAME: usize = 64;

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
        NameKind::Port => (
            MAX_PORT_NAME,
            port,
            "letters, digits, '_', '-', '.', '/', ':'",
        ),
        // Job ids become part of VRF/ACL/policy names (see MAX_JOB_ID).
        NameKind::Job => (MAX_JOB_ID, job, "letters, digits, '_', '-'"),
        NameKind::Host => (253, host, "letters, digits, '-', '.', ':'"),
    }
}

/// Check `value` against the rule for `kind`.
pub fn validate(kind: NameKind, value: &str) -> Result<(), NameError> {
    let (max, _, _) = rule(kind);
    if value.chars().count() > max {
        let reason = match kind {
            NameKind::Job => format!(
                "longer than {max} characters: vclos names per-job device objects after the \
                 job id, the longest being the ACL / traffic policy `v-<id>-p{MAX_PORT_INDEX}` \
                 (a leaf's last possible server port), and Huawei CE and OpenConfig object \
                 names hold at most {MAX_OBJECT_NAME} characters"
            ),
            _ => format!("longer than {max} characters"),
        };
        return Err(NameError {
            kind,
            shown: format!("{value:?}"),
            reason,
        });
    }
    validate_chars(kind, value)
}

/// Check `value` against the charset rule for `kind` only (not its length):
/// for names embedded in longer names that have their own length rule.
pub fn validate_chars(kind: NameKind, value: &str) -> Result<(), NameError> {
    let (_, allowed, charset) = rule(kind);
    let err = |reason: String| NameError {
        kind,
        shown: format!("{value:?}"),
        reason,
    };
    if value.is_empty() {
        return Err(err("must not be empty".into()));
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
mod escape_tests {
    use super::escape_controls;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("leaf1", false), "leaf1");
        assert_eq!(
            escape_controls("leaf1\u{1b}[2J\nm.yaml:1: all good\r", false),
            "leaf1\\u{1b}[2J\\nm.yaml:1: all good\\r"
        );
        assert_eq!(escape_controls("a\nb\u{7}", true), "a\nb\\u{7}");
        assert!(matches!(
            escape_controls("plain\ntext", true),
            std::borrow::Cow::Borrowed(_)
        ));
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
    fn the_longest_job_id_is_bounded_by_its_longest_derived_name() {
        assert_eq!(MAX_JOB_ID, 22);
        let longest = "j".repeat(MAX_JOB_ID);
        JobId::new(longest.as_str()).unwrap();
        assert_eq!(
            format!("v-{longest}-p{MAX_PORT_INDEX}").len(),
            MAX_OBJECT_NAME
        );
        let e = JobId::new(format!("{longest}x")).unwrap_err().to_string();
        assert!(e.contains("longer than 22 characters"), "{e}");
        assert!(e.contains("v-<id>-p65535"), "{e}");
        assert!(e.contains("31 characters"), "{e}");
        // Serialised state is checked by the same rule.
        let r: Result<JobId, _> = serde_json::from_str(&format!("\"{longest}x\""));
        assert!(r.is_err());
    }

    #[test]
    fn deserializing_a_job_id_validates_it() {
        let r: Result<JobId, _> = serde_json::from_str("\"j1\\nreboot\"");
        assert!(r.is_err());
    }
}
