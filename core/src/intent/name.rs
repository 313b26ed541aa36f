//! Validated words that may appear inside rendered device configuration.
//!
//! Renderers only accept these types (and [`JobId`]),
//! never a bare `String`, so a name that was not checked cannot reach a
//! device: the check happens when the value is built (including when it is
//! deserialised), long before anything is rendered. Every charset excludes
//! whitespace (except single inner spaces in descriptions), line breaks,
//! `;`, quotes, `<`, `>` and `&`, so no name can end a CLI line, a TL1
//! command, a JSON string or an XML element early.
//!
//! ## Names derived from a job id, and their device limits
//!
//! | name | dialect: where | limit |
//! |---|---|---|
//! | `v-<id>-p<n>` (n: 1-based server port on the leaf, at most 65535) | Huawei CE: `acl name`, `traffic classifier`, `traffic behavior`, `traffic policy`; SONiC: `ACL_TABLE` key (and `ACL_RULE` key `<table>\|RULE_<k>`); OpenConfig: policy-forwarding policy `policy-id` | 31, vclos's cap [`MAX_OBJECT_NAME`] (CE traffic behavior names allow 1-64, CloudEngine command reference "traffic behavior"; sonic-acl.yang `ACL_TABLE_NAME` is an unbounded string, `RULE_NAME` 1..255; OpenConfig policy ids are strings) |
//! | `Vrf-<id>`, `Vrf-<id>-<m>` (m: logical spine on a chassis, 1-based) | Huawei CE: `ip vpn-instance`; OpenConfig: `network-instance` `name` | 31: CE vpn-instance names are 1-31 characters (Ansible `community.network.ce_vrf`: "the length of vrf name is 1 - 31") |
//! | same | SONiC: `VRF` key | 15: sonic-vrf.yang `VRF_LIST/name` is `stypes:interface_name` (sonic-types.yang: length 1..15, "Represents IFNAMSIZ defined in <net/if.h>"), pattern `Vrf[a-zA-Z0-9_-]+`: a SONiC VRF is a Linux network device |
//! | `vclos <id>` | SONiC: `ACL_TABLE` `policy_desc` | 255 (sonic-acl.yang `length 1..255`) |
//! | (none) | TL1: the OCS patch table names only ports | - |
//!
//! [`JobId`] enforces the topology-independent bound
//! ([`crate::names::MAX_JOB_ID`], 22: `v-<id>-p65535` within 31);
//! [`check_job_id`] the bound of one fabric (its largest leaf, its chassis
//! sizes, its SONiC spines), so a job is refused at the id check before
//! anything is placed or rendered.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::{digits, validate, validate_chars, JobId, NameError, NameKind};
use crate::topology::{Member, Role, Topology};

pub use crate::names::MAX_OBJECT_NAME;

/// Longest VRF / policy name `dialect` accepts. SONiC VRFs are Linux
/// network devices, whose names are capped at 15 characters (IFNAMSIZ;
/// table above).
pub fn max_name_len(dialect: crate::topology::Dialect) -> usize {
    match dialect {
        crate::topology::Dialect::Sonic => 15,
        _ => MAX_OBJECT_NAME,
    }
}

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
    // `<id>` or `<id>-<m>`: the job charset; the length rule is the VRF's.
    validate_chars(NameKind::Job, rest)
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

/// The longest job id a fabric can carry, and the derived name that sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdLimit {
    /// Longest id, in characters.
    pub max: usize,
    /// The derived name at its longest, e.g. `Vrf-<id>` or `v-<id>-p48`.
    pub name: String,
    /// The device it is configured on (`None`: the fabric-independent bound).
    pub device: Option<String>,
    /// The device's limit for that name.
    pub limit: usize,
}

/// The longest job id `topo` can carry: the fabric-independent
/// [`crate::names::MAX_JOB_ID`], or less where one of its devices holds a
/// longer derived name than its limit allows (see the table above).
pub fn job_id_limit(topo: &Topology) -> JobIdLimit {
    let mut best = JobIdLimit {
        max: crate::names::MAX_JOB_ID,
        name: format!("v-<id>-p{}", crate::names::MAX_PORT_INDEX),
        device: None,
        limit: MAX_OBJECT_NAME,
    };
    for d in &topo.devices {
        let (name, fixed, limit) = match d.role {
            Role::Leaf => {
                let ports = d
                    .members
                    .iter()
                    .filter_map(|m| match m {
                        Member::Leaf(l) => Some(topo.leaf(*l).server_ports.len()),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0)
                    .max(1) as u64;
                (
                    format!("v-<id>-p{ports}"),
                    4 + digits(ports),
                    MAX_OBJECT_NAME,
                )
            }
            Role::Spine => {
                let limit = max_name_len(d.mgmt.dialect);
                match d.members.len() as u64 {
                    m if m > 1 => (format!("Vrf-<id>-{m}"), 5 + digits(m), limit),
                    _ => ("Vrf-<id>".to_string(), 4, limit),
                }
            }
            Role::Ocs => continue,
        };
        let max = limit.saturating_sub(fixed);
        if max < best.max {
            best = JobIdLimit {
                max,
                name,
                device: Some(d.name.clone()),
                limit,
            };
        }
    }
    best
}

/// Refuse `job` if a name derived from it would be too long for a device of
/// `topo`, with the longest id and the reason.
pub fn check_job_id(topo: &Topology, job: &JobId) -> Result<(), NameError> {
    let lim = job_id_limit(topo);
    let len = job.as_str().chars().count();
    if len <= lim.max {
        return Ok(());
    }
    let Some(device) = &lim.device else {
        // JobId's own rule already covers the fabric-independent bound.
        return validate(NameKind::Job, job.as_str());
    };
    let dialect = topo
        .devices
        .iter()
        .find(|d| &d.name == device)
        .map(|d| d.mgmt.dialect.to_string())
        .unwrap_or_default();
    Err(err(
        NameKind::Job,
        job.as_str(),
        format!(
            "longer than {} characters, the longest job id this fabric takes: {device} \
             ({dialect}) would be configured with `{}`, and its limit for that name is {} \
             characters",
            lim.max, lim.name, lim.limit
        ),
    ))
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
        let j = JobId::new("a".repeat(22)).unwrap();
        assert!(vrf_name(&j, None).is_ok());
        assert!(vrf_name(&j, Some(9998)).is_ok());
        assert!(vrf_name(&j, Some(9999)).is_err());
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
