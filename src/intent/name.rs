//! Validated words that may appear inside rendered device configuration.
//!
//! Renderers only accept these types (and [`JobId`](crate::names::JobId)),
//! never a bare `String`, so a name that was not checked cannot reach a
//! device: the check happens when the value is built (including when it is
//! deserialised), long before anything is rendered. Every charset excludes
//! whitespace (except single inner spaces in descriptions), line breaks,
//! `;`, quotes, `<`, `>` and `&`, so no name can end a CLI line, a TL1
//! command, a JSON string or an XML element early.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::{validate, JobId, NameError, NameKind};

/// Vendors cap VRF / ACL / policy names at 31 characters (Huawei VRP).
pub const MAX_OBJECT_NAME: usize = 31;

macro_rules! checked_string {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Result<Self, NameError> {
                let value = value.into();
                let check: fn(&str) -> Result<(), NameError> = $check;
                check(&value)?;
                Ok($name(value))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(value: String) -> Result<Self, NameError> {
                $name::new(value)
            }
        }
        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for $name {
            fn cmp(&self, other: &Self) -> Ordering {
                natural_cmp(&self.0, &other.0)
            }
        }
    };
}

checked_string!(
    /// A port (interface) name, e.g. `100GE1/0/17`, `Ethernet8`, `33`.
    PortName,
    |v| validate(NameKind::Port, v)
);
checked_string!(
    /// A device host name (`sysname`).
    Hostname,
    |v| validate(NameKind::Device, v)
);
checked_string!(
    /// A VRF (Huawei vpn-instance) name: `Vrf-<job>[-<n>]`. The `Vrf` prefix
    /// is what SONiC demands and what marks a VRF as vclos-managed.
    VrfName,
    check_vrf
);
checked_string!(
    /// Free text for an interface description: letters, digits, `_-.:/`
    /// and single inner spaces, at most 80 characters.
    Description,
    check_description
);

fn err(kind: NameKind, value: &str, reason: impl Into<String>) -> NameError {
    NameError {
        kind,
        shown: format!("{value:?}"),
        reason: reason.into(),
    }
}

fn check_vrf(v: &str) -> Result<(), NameError> {
    let rest = v
        .strip_prefix("Vrf-")
        .ok_or_else(|| err(NameKind::Job, v, "VRF names must start with `Vrf-`"))?;
    if v.len() > MAX_OBJECT_NAME {
        return Err(err(
            NameKind::Job,
            v,
            format!("VRF name longer than {MAX_OBJECT_NAME} characters"),
        ));
    }
    validate(NameKind::Job, rest)
}

fn check_description(v: &str) -> Result<(), NameError> {
    let kind = NameKind::Port;
    if v.is_empty() || v.len() > 80 {
        return Err(err(kind, v, "description must have 1 to 80 characters"));
    }
    if let Some(bad) = v
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/' | ' ')))
    {
        return Err(err(
            kind,
            v,
            format!("character {bad:?} is not allowed in a description"),
        ));
    }
    if v.starts_with(' ') || v.ends_with(' ') || v.contains("  ") {
        return Err(err(
            kind,
            v,
            "description has leading, trailing or double spaces",
        ));
    }
    Ok(())
}

/// The VRF of `job` on one logical spine: `Vrf-<job>` on a plain switch,
/// `Vrf-<job>-<n>` for the n-th logical spine of a chassis.
pub fn vrf_name(job: &JobId, member: Option<usize>) -> Result<VrfName, NameError> {
    match member {
        None => VrfName::new(format!("Vrf-{job}")),
        Some(n) => VrfName::new(format!("Vrf-{job}-{}", n + 1)),
    }
}

/// The name shared by the ACL, classifier, behavior and policy that pin one
/// server-facing port (1-based `index` on its leaf) of `job` to an uplink.
pub fn policy_name(job: &JobId, index: u16) -> Result<String, NameError> {
    let name = format!("v-{job}-p{index}");
    if name.len() > MAX_OBJECT_NAME {
        return Err(err(
            NameKind::Job,
            &name,
            format!("policy name longer than {MAX_OBJECT_NAME} characters"),
        ));
    }
    Ok(name)
}

/// Split a policy name made by [`policy_name`] back into job and index.
pub fn parse_policy_name(name: &str) -> Option<(JobId, u16)> {
    let rest = name.strip_prefix("v-")?;
    let (job, idx) = rest.rsplit_once("-p")?;
    let index: u16 = idx.parse().ok()?;
    if index == 0 || idx.starts_with('0') {
        return None;
    }
    Some((JobId::new(job).ok()?, index))
}

/// Compare with digit runs as numbers, so `100GE1/0/2` < `100GE1/0/10`.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    // Skip the common prefix (port names share long ones), backing up to
    // the start of a digit run so that numbers are compared whole.
    let mut i = x.iter().zip(y).take_while(|(p, q)| p == q).count();
    if i == x.len() && i == y.len() {
        return Ordering::Equal;
    }
    while i > 0 && x[i - 1].is_ascii_digit() {
        i -= 1;
    }
    let (mut x, mut y) = (&x[i..], &y[i..]);
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (p, q) = (trim_zeros(&x[..n]), trim_zeros(&y[..m]));
                let ord = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if ord != Ordering::Equal {
                    return ord;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let z = d.iter().take_while(|c| **c == b'0').count();
    &d[z..]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn natural_order_of_ports() {
        let mut v = vec!["100GE1/0/10", "100GE1/0/2", "100GE1/0/1", "10", "9"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["9", "10", "100GE1/0/1", "100GE1/0/2", "100GE1/0/10"]);
    }

    #[test]
    fn names_reject_injection() {
        assert!(PortName::new("100GE1/0/1\nreboot").is_err());
        assert!(Description::new("x;reload").is_err());
        assert!(Description::new("a\rb").is_err());
        assert!(VrfName::new("Vrf-a b").is_err());
        assert!(VrfName::new("job1").is_err());
        assert!(serde_json::from_str::<PortName>("\"a\\nb\"").is_err());
        let j = JobId::new("a".repeat(24)).unwrap();
        assert!(vrf_name(&j, None).is_ok());
        assert!(vrf_name(&j, Some(99)).is_err());
    }

    #[test]
    fn policy_names_round_trip() {
        let j = JobId::new("train-p3").unwrap();
        let n = policy_name(&j, 12).unwrap();
        assert_eq!(n, "v-train-p3-p12");
        assert_eq!(parse_policy_name(&n), Some((j, 12)));
        assert_eq!(parse_policy_name("v-x-p0"), None);
        assert_eq!(parse_policy_name("policy1"), None);
    }
}
