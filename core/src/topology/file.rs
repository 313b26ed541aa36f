//! The on-disk YAML schema (docs/topology.md), deserialised as written.
//!
//! These structs mirror the file one to one and carry no meaning of their
//! own; `build` turns them into the validated model. Unknown keys are
//! rejected so that a typo never silently drops a setting.

use serde::{Deserialize, Serialize};

/// Management protocol of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    SshCli,
    Netconf,
    TelnetTl1,
}

/// Configuration language of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    HuaweiCe,
    Sonic,
    Openconfig,
    Tl1,
}

/// SSH host-key checking; `verify` unless a device explicitly opts out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKeyPolicy {
    #[default]
    Verify,
    /// Accept any host key (labs only; logged as a warning on every connect).
    InsecureAcceptAny,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::SshCli => "ssh-cli",
            Protocol::Netconf => "netconf",
            Protocol::TelnetTl1 => "telnet-tl1",
        })
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dialect::HuaweiCe => "huawei-ce",
            Dialect::Sonic => "sonic",
            Dialect::Openconfig => "openconfig",
            Dialect::Tl1 => "tl1",
        })
    }
}

/// A list of port names, each of which may be a range like `100GE1/0/[1-16]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PortList {
    One(String),
    Many(Vec<String>),
}

impl PortList {
    pub fn items(&self) -> &[String] {
        match self {
            PortList::One(s) => std::slice::from_ref(s),
            PortList::Many(v) => v,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileMgmt {
    pub host: String,
    /// Wider than a TCP port so that validation, not the parser, refuses
    /// 0 or 70000 with the device named.
    pub port: Option<i64>,
    pub protocol: Protocol,
    pub dialect: Dialect,
    pub credential: String,
    #[serde(default, skip_serializing_if = "is_default")]
    pub host_key: HostKeyPolicy,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileCredential {
    pub username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<String>,
    /// Only present so that the loader can reject it with a clear message.
    #[serde(default, skip_serializing)]
    pub password: Option<serde_yaml_ng::Value>,
}

/// The `credentials` map, with errors that never quote a value: a
/// password written where a credential's mapping belongs (`lab: s3cret`)
/// would otherwise come back in serde's "invalid type: string ..."
/// message. Unknown and missing fields are named (field names only).
fn credentials<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<std::collections::BTreeMap<String, FileCredential>, D::Error> {
    use serde::de::Error;
    let raw: std::collections::BTreeMap<String, serde_yaml_ng::Value> = Deserialize::deserialize(d)
        .map_err(|_| {
            D::Error::custom("`credentials` must map names to credentials (values not shown)")
        })?;
    raw.into_iter()
        .map(|(name, value)| match FileCredential::deserialize(value) {
            Ok(c) => Ok((name, c)),
            Err(e) => {
                let e = e.to_string();
                let said = if e.starts_with("unknown field") || e.starts_with("missing field") {
                    e
                } else {
                    "must be a mapping of `username` and `password_env` or `password_file`, \
                     each a string"
                        .into()
                };
                Err(D::Error::custom(format!(
                    "credentials.{name}: {said} (values are not shown: they may be secrets)"
                )))
            }
        })
        .collect()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileChassis {
    pub name: String,
    pub mgmt: FileMgmt,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLeaf {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mgmt: Option<FileMgmt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis: Option<String>,
    pub server_ports: PortList,
    pub uplink_ports: PortList,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpine {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mgmt: Option<FileMgmt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis: Option<String>,
    pub ports: PortList,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileOcs {
    pub name: String,
    pub mgmt: FileMgmt,
    pub ports: PortList,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileServer {
    pub name: String,
    pub leaf: String,
    /// Leaf server-facing ports, GPU 0 first.
    pub ports: PortList,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileTopology {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub gpus_per_server: u16,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_oversubscription: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_hosts: Option<String>,
    #[serde(default, deserialize_with = "credentials")]
    pub credentials: std::collections::BTreeMap<String, FileCredential>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chassis: Vec<FileChassis>,
    #[serde(default)]
    pub leaves: Vec<FileLeaf>,
    #[serde(default)]
    pub spines: Vec<FileSpine>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ocs: Vec<FileOcs>,
    #[serde(default)]
    pub servers: Vec<FileServer>,
    /// Cables as `[device:port, device:port]`.
    #[serde(default)]
    pub links: Vec<(String, String)>,
}

impl Protocol {
    /// The well-known port of the protocol, used when `mgmt.port` is omitted.
    pub fn default_port(self) -> u16 {
        match self {
            Protocol::SshCli => 22,
            Protocol::Netconf => 830,
            Protocol::TelnetTl1 => 3082,
        }
    }
}
