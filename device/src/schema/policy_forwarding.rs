//! The `policy-forwarding` subtree of an OpenConfig network instance,
//! checked by rules encoded by hand.
//!
//! The models bundle the tests use (PyPI `ydk-models-openconfig`, 2020
//! bundle) has no `openconfig-policy-forwarding` module: its
//! `openconfig-network-instance` (0.6.0, revision 2017-01-13) predates the
//! `uses oc-pf:policy-forwarding-top` that network instances gained in
//! 0.8.0, so libyang alone would refuse every source-routing policy as an
//! unknown element. [`split`] cuts each
//! `/network-instances/network-instance/policy-forwarding` element out of a
//! document (the rest goes to libyang unchanged) and [`check`] validates it
//! against these rules, read from openconfig/public
//! `release/models/policy-forwarding/`, module `openconfig-policy-forwarding`
//! version 0.2.1, revision 2018-11-21 (submodules
//! `openconfig-pf-forwarding-policies`, `openconfig-pf-interfaces`, same
//! revision) — the revision of the bundle's own era (its
//! `openconfig-types`, `openconfig-if-ip` and `openconfig-system` are
//! 2018-11-21 to 2019-01-08), imported by `openconfig-network-instance`
//! 0.11.1 (2018-11-21) as `uses oc-pf:policy-forwarding-top` directly
//! under `network-instance`, so every node is in the network-instance
//! namespace. The match fields come from the bundle's
//! `openconfig-packet-match` 1.0.0 (2017-05-26, grouping
//! `ipv4-protocol-fields-top`), the types from its `openconfig-inet-types`
//! and `openconfig-interfaces`.
//!
//! Nodes encoded (path below `policy-forwarding`, type):
//!
//! - `policies/policy` list, key `policy-id` (leafref to
//!   `../config/policy-id`); `config/policy-id` string
//!   (`pf-forwarding-policy-config`). Revision 2018-11-21 has no policy
//!   `type` leaf (added in 0.3.0, 2021-05-19, as an enumeration defaulting
//!   to `PBR_POLICY`), so a `type` is an unknown element here and vclos
//!   omits it, which means `PBR_POLICY` on later revisions too.
//! - `policies/policy/rules/rule` list, key `sequence-id` (leafref);
//!   `config/sequence-id` uint32 (`pf-forwarding-policy-rule-config`).
//! - `rule/ipv4/config/{source-address,destination-address}`
//!   `oc-inet:ipv4-prefix` (dotted quad of decimal octets without leading
//!   zeros, `/`, a length 0-32 without leading zeros).
//! - `rule/action/config/next-hop` `oc-inet:ip-address` (the union of
//!   `ipv4-address` and `ipv6-address`, unzoned); `discard` and
//!   `decapsulate-gre` boolean (`pf-forwarding-policy-action-config`).
//! - `interfaces/interface` list, key `interface-id` (leafref);
//!   `config/interface-id` `oc-if:interface-id` (string);
//!   `config/apply-forwarding-policy` leafref to
//!   `../../../../policies/policy/config/policy-id`
//!   (`pf-interface-config`); `interface-ref/config/interface` leafref to
//!   `/interfaces/interface/name` and `interface-ref/config/subinterface`
//!   uint32 (`oc-if:interface-ref`).
//!
//! Everything else the module defines (l2, ipv6 and transport match
//! fields, `encapsulate-gre`, `path-selection-groups`, the
//! `network-instance`/`path-selection-group` actions) is refused as an
//! unknown element, as a device deviating it `not-supported` would; so are
//! `state` containers (config false).
//!
//! Errors use the tags libyang's refusals of the same kind get in
//! [`super`]: an element the rules do not define `unknown-element` (in a
//! namespace no module owns, `unknown-namespace`), a value outside its type
//! `invalid-value`, a list entry without its key `missing-element`, a key
//! whose `config` leaf is missing or differs, or an
//! `apply-forwarding-policy` naming no policy, `data-missing` (leafrefs,
//! RFC 7950 Section 15.5); a state node or a duplicate instance
//! `operation-failed`. As with libyang, edits (`yanglint -t edit`) are
//! checked for structure and types, and whole datastores also for key
//! leaf targets, references and duplicates; a key that differs from its
//! `config` leaf is refused in both.

use std::net::{Ipv4Addr, Ipv6Addr};

use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::NsReader;

use super::{ErrorTag, Violation};

/// The namespace of `openconfig-network-instance`, which the
/// policy-forwarding nodes take (they are used from its groupings).
pub const NI: &str = "http://openconfig.net/yang/network-instance";
const IF: &str = "http://openconfig.net/yang/interfaces";
const NC: &str = "urn:ietf:params:xml:ns:netconf:base:1.0";

/// Deeper than any node the rules define (7 levels below
/// `policy-forwarding`): a deeper element is refused before it is stored.
const MAX_DEPTH: usize = 10;

/// What is being validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A whole datastore: references, key targets and duplicates too.
    Config,
    /// The content of an `edit-config`: structure and types.
    Edit,
}

/// One parsed element of a policy-forwarding subtree.
#[derive(Debug, Clone, Default)]
struct Node {
    ns: Option<String>,
    name: String,
    /// Attributes other than namespace declarations: (namespace, local
    /// name, value).
    attrs: Vec<(Option<String>, String, String)>,
    text: String,
    children: Vec<Node>,
}

/// A document with its policy-forwarding subtrees cut out.
#[derive(Debug, Default)]
pub struct Split {
    /// The document without them, for libyang.
    pub rest: String,
    subtrees: Vec<Node>,
    /// `/interfaces/interface/name` values (targets of `interface-ref`).
    interfaces: Vec<String>,
}

/// Cut every `network-instances/network-instance/policy-forwarding`
/// (network-instance namespace) out of `xml`. A document the scanner
/// cannot read is returned whole, for libyang to refuse with its own
/// message.
pub fn split(xml: &str) -> Result<Split, Violation> {
    match scan(xml) {
        Ok(s) => Ok(s),
        Err(Scan::Refused(v)) => Err(v),
        Err(Scan::Malformed) => Ok(Split {
            rest: xml.to_string(),
            ..Split::default()
        }),
    }
}

enum Scan {
    Refused(Violation),
    Malformed,
}

fn ns_of(r: ResolveResult<'_>) -> Option<String> {
    match r {
        ResolveResult::Bound(ns) => Some(AsRef::<str>::as_ref(&ns).to_string()),
        _ => None,
    }
}

fn node(reader: &NsReader<&[u8]>, s: &BytesStart<'_>) -> Result<Node, Scan> {
    let (ns, local) = reader.resolver().resolve_element(s.name());
    let mut n = Node {
        ns: ns_of(ns),
        name: AsRef::<str>::as_ref(&local).to_string(),
        ..Node::default()
    };
    for a in s.attributes() {
        let a = a.map_err(|_| Scan::Malformed)?;
        let key: &str = a.key.as_ref();
        if key == "xmlns" || key.starts_with("xmlns:") {
            continue;
        }
        let (ns, local) = reader.resolver().resolve_attribute(a.key);
        let value = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|_| Scan::Malformed)?;
        n.attrs.push((
            ns_of(ns),
            AsRef::<str>::as_ref(&local).to_string(),
            value.into_owned(),
        ));
    }
    Ok(n)
}

fn scan(xml: &str) -> Result<Split, Scan> {
    let mut reader = NsReader::from_reader(xml.as_bytes());
    let mut out = Split::default();
    // (namespace, name) of the open elements outside policy-forwarding.
    let mut path: Vec<(Option<String>, String)> = Vec::new();
    // The policy-forwarding subtree being read: its open elements.
    let mut open: Vec<Node> = Vec::new();
    let mut cut_from = 0usize;
    let mut kept = 0usize;
    let at_pf = |path: &[(Option<String>, String)], n: &Node| {
        n.name == "policy-forwarding"
            && n.ns.as_deref() == Some(NI)
            && path.len() == 2
            && path
                .iter()
                .zip(["network-instances", "network-instance"])
                .all(|((ns, name), want)| ns.as_deref() == Some(NI) && name == want)
    };
    loop {
        let pos = reader.buffer_position() as usize;
        let ev = reader.read_event().map_err(|_| Scan::Malformed)?;
        let empty = matches!(ev, Event::Empty(_));
        match ev {
            Event::Start(s) | Event::Empty(s) if !open.is_empty() => {
                if open.len() >= MAX_DEPTH {
                    return Err(Scan::Refused(refuse(
                        ErrorTag::UnknownElement,
                        &open,
                        "element nested deeper than any policy-forwarding node",
                    )));
                }
                let n = node(&reader, &s)?;
                if empty {
                    if let Some(top) = open.last_mut() {
                        top.children.push(n);
                    }
                } else {
                    open.push(n);
                }
            }
            Event::Start(s) | Event::Empty(s) => {
                let n = node(&reader, &s)?;
                if at_pf(&path, &n) {
                    cut_from = pos;
                    if empty {
                        out.rest.push_str(&xml[kept..cut_from]);
                        kept = reader.buffer_position() as usize;
                        out.subtrees.push(n);
                    } else {
                        open.push(n);
                    }
                } else if !empty {
                    path.push((n.ns, n.name));
                }
            }
            Event::Text(t) => {
                let text = t.xml10_content();
                if let Some(top) = open.last_mut() {
                    top.text.push_str(&text);
                } else if path.len() == 3
                    && path
                        .iter()
                        .zip(["interfaces", "interface", "name"])
                        .all(|((ns, name), want)| ns.as_deref() == Some(IF) && name == want)
                {
                    out.interfaces.push(text.trim().to_string());
                }
            }
            Event::GeneralRef(r) => {
                let c =
                    vclos_drivers::netconf::xml::resolve_entity(&r).map_err(|_| Scan::Malformed)?;
                if let Some(top) = open.last_mut() {
                    top.text.push(c);
                }
            }
            Event::End(_) if !open.is_empty() => {
                let done = open.pop().ok_or(Scan::Malformed)?;
                match open.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => {
                        out.rest.push_str(&xml[kept..cut_from]);
                        kept = reader.buffer_position() as usize;
                        out.subtrees.push(done);
                    }
                }
            }
            Event::End(_) => {
                path.pop().ok_or(Scan::Malformed)?;
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !open.is_empty() || !path.is_empty() {
        return Err(Scan::Malformed);
    }
    out.rest.push_str(&xml[kept..]);
    Ok(out)
}

/// A leaf's type.
#[derive(Debug, Clone, Copy)]
enum Type {
    /// `string` (and `oc-if:interface-id`, a string).
    String,
    /// `uint32`.
    Uint32,
    /// `boolean`.
    Boolean,
    /// `oc-inet:ipv4-prefix`.
    Ipv4Prefix,
    /// `oc-inet:ip-address`.
    IpAddress,
    /// A leafref to a policy of the same policy-forwarding (a string).
    PolicyRef,
    /// A leafref to `/interfaces/interface/name` (a string).
    InterfaceRef,
}

/// A schema node the rules define.
#[derive(Debug)]
enum Kind {
    Container(&'static [Spec]),
    /// A list: its key leaf, and the children of each entry.
    List(&'static str, &'static [Spec]),
    Leaf(Type),
}

#[derive(Debug)]
struct Spec {
    name: &'static str,
    kind: Kind,
}

const fn leaf(name: &'static str, t: Type) -> Spec {
    Spec {
        name,
        kind: Kind::Leaf(t),
    }
}
const fn container(name: &'static str, c: &'static [Spec]) -> Spec {
    Spec {
        name,
        kind: Kind::Container(c),
    }
}
const fn list(name: &'static str, key: &'static str, c: &'static [Spec]) -> Spec {
    Spec {
        name,
        kind: Kind::List(key, c),
    }
}

/// `pf-forwarding-policy-structural` (openconfig-pf-forwarding-policies).
const RULE: &[Spec] = &[
    leaf("sequence-id", Type::Uint32),
    container("config", &[leaf("sequence-id", Type::Uint32)]),
    container(
        "ipv4",
        &[container(
            "config",
            &[
                leaf("source-address", Type::Ipv4Prefix),
                leaf("destination-address", Type::Ipv4Prefix),
            ],
        )],
    ),
    container(
        "action",
        &[container(
            "config",
            &[
                leaf("discard", Type::Boolean),
                leaf("decapsulate-gre", Type::Boolean),
                leaf("next-hop", Type::IpAddress),
            ],
        )],
    ),
];
const POLICY: &[Spec] = &[
    leaf("policy-id", Type::String),
    container("config", &[leaf("policy-id", Type::String)]),
    container("rules", &[list("rule", "sequence-id", RULE)]),
];
/// `pf-interfaces-structural` (openconfig-pf-interfaces).
const INTERFACE: &[Spec] = &[
    leaf("interface-id", Type::String),
    container(
        "config",
        &[
            leaf("interface-id", Type::String),
            leaf("apply-forwarding-policy", Type::PolicyRef),
        ],
    ),
    container(
        "interface-ref",
        &[container(
            "config",
            &[
                leaf("interface", Type::InterfaceRef),
                leaf("subinterface", Type::Uint32),
            ],
        )],
    ),
];
/// `policy-forwarding-top` (openconfig-policy-forwarding).
const TOP: &[Spec] = &[
    container("policies", &[list("policy", "policy-id", POLICY)]),
    container(
        "interfaces",
        &[list("interface", "interface-id", INTERFACE)],
    ),
];

/// Check every cut-out subtree (see the module doc). `knows_namespace`
/// tells an unknown namespace from a known one in the wrong place.
pub fn check(
    split: &Split,
    mode: Mode,
    knows_namespace: &dyn Fn(&str) -> bool,
) -> Result<(), Violation> {
    for pf in &split.subtrees {
        let cx = Cx {
            mode,
            knows_namespace,
            policies: policy_ids(pf),
            interfaces: &split.interfaces,
        };
        let mut path = vec![
            "/openconfig-network-instance:network-instances/network-instance/policy-forwarding"
                .to_string(),
        ];
        cx.inner(pf, TOP, &mut path)?;
    }
    Ok(())
}

/// The `config/policy-id` of every policy of a subtree.
fn policy_ids(pf: &Node) -> Vec<&str> {
    let named = |n: &Node, name: &str| n.name == name && n.ns.as_deref() == Some(NI);
    pf.children
        .iter()
        .filter(|c| named(c, "policies"))
        .flat_map(|c| c.children.iter().filter(|p| named(p, "policy")))
        .flat_map(|p| p.children.iter().filter(|c| named(c, "config")))
        .flat_map(|c| c.children.iter().filter(|l| named(l, "policy-id")))
        .map(|l| l.text.trim())
        .collect()
}

struct Cx<'a> {
    mode: Mode,
    knows_namespace: &'a dyn Fn(&str) -> bool,
    policies: Vec<&'a str>,
    interfaces: &'a [String],
}

fn refuse_at(tag: ErrorTag, path: &[String], message: impl Into<String>) -> Violation {
    Violation {
        tag,
        path: Some(path.join("/")),
        message: message.into(),
    }
}

fn refuse(tag: ErrorTag, open: &[Node], message: &str) -> Violation {
    let mut path =
        vec!["/openconfig-network-instance:network-instances/network-instance".to_string()];
    path.extend(open.iter().map(|n| n.name.clone()));
    refuse_at(tag, &path, message)
}

impl Cx<'_> {
    /// Attributes: only `nc:operation` (RFC 6241 Section 7.2) with one of
    /// its values, as libyang allows in both modes.
    fn attrs(&self, n: &Node, path: &[String]) -> Result<(), Violation> {
        for (ns, name, value) in &n.attrs {
            if ns.as_deref() != Some(NC) || name != "operation" {
                return Err(refuse_at(
                    ErrorTag::OperationFailed,
                    path,
                    format!("attribute \"{name}\" is not allowed on \"{}\"", n.name),
                ));
            }
            if !["merge", "replace", "create", "delete", "remove"].contains(&value.as_str()) {
                return Err(refuse_at(
                    ErrorTag::InvalidValue,
                    path,
                    format!("Invalid enumeration value \"{value}\" of operation"),
                ));
            }
        }
        Ok(())
    }

    /// The children of a container or list entry `n` against `specs`.
    fn inner(&self, n: &Node, specs: &[Spec], path: &mut Vec<String>) -> Result<(), Violation> {
        self.attrs(n, path)?;
        if !n.text.trim().is_empty() {
            return Err(refuse_at(
                ErrorTag::InvalidValue,
                path,
                format!(
                    "Invalid character sequence {:?} inside \"{}\"",
                    n.text.trim(),
                    n.name
                ),
            ));
        }
        for (i, c) in n.children.iter().enumerate() {
            let spec = self.spec_of(c, specs, path)?;
            if let Kind::List(key, _) = spec.kind {
                path.push(format!(
                    "{}[{key}='{}']",
                    c.name,
                    key_of(c, key).unwrap_or("")
                ));
            } else {
                path.push(c.name.clone());
            }
            if self.mode == Mode::Config
                && n.children[..i].iter().any(|d| same_instance(d, c, spec))
            {
                return Err(refuse_at(
                    ErrorTag::OperationFailed,
                    path,
                    format!("Duplicate instance of \"{}\".", c.name),
                ));
            }
            match spec.kind {
                Kind::Leaf(t) => self.leaf(c, t, path)?,
                Kind::Container(children) => self.inner(c, children, path)?,
                Kind::List(key, children) => {
                    self.inner(c, children, path)?;
                    self.key(c, key, path)?;
                }
            }
            path.pop();
        }
        Ok(())
    }

    fn spec_of<'s>(
        &self,
        c: &Node,
        specs: &'s [Spec],
        path: &[String],
    ) -> Result<&'s Spec, Violation> {
        match c.ns.as_deref() {
            Some(NI) => {}
            Some(ns) if !(self.knows_namespace)(ns) => {
                return Err(refuse_at(
                    ErrorTag::UnknownNamespace,
                    path,
                    format!("No module with namespace \"{ns}\" in the context."),
                ))
            }
            _ => {
                return Err(refuse_at(
                    ErrorTag::UnknownElement,
                    path,
                    format!(
                        "Node \"{}\" not found as a child of \"{}\" in its namespace.",
                        c.name,
                        path.last().map(String::as_str).unwrap_or("")
                    ),
                ))
            }
        }
        if c.name == "state" {
            return Err(refuse_at(
                ErrorTag::OperationFailed,
                path,
                "Unexpected data state node \"state\" found.",
            ));
        }
        specs.iter().find(|s| s.name == c.name).ok_or_else(|| {
            refuse_at(
                ErrorTag::UnknownElement,
                path,
                format!(
                    "Node \"{}\" not found as a child of \"{}\".",
                    c.name,
                    path.last().map(String::as_str).unwrap_or("")
                ),
            )
        })
    }

    /// A list entry's key: present; equal to its `config` leaf when that
    /// is given; in a datastore, that leaf present (the key is a leafref
    /// to it).
    fn key(&self, entry: &Node, key: &str, path: &[String]) -> Result<(), Violation> {
        let value = key_of(entry, key).ok_or_else(|| {
            refuse_at(
                ErrorTag::MissingElement,
                path,
                format!("List instance is missing its key \"{key}\"."),
            )
        })?;
        let configured: Vec<&str> = entry
            .children
            .iter()
            .filter(|c| c.name == "config")
            .flat_map(|c| c.children.iter().filter(|l| l.name == key))
            .map(|l| l.text.trim())
            .collect();
        let target = format!("../config/{key}");
        if configured.iter().any(|v| *v != value)
            || (self.mode == Mode::Config && configured.is_empty())
        {
            return Err(refuse_at(
                ErrorTag::DataMissing,
                path,
                format!("Invalid leafref value \"{value}\" - no target instance \"{target}\" with the same value."),
            ));
        }
        Ok(())
    }

    fn leaf(&self, n: &Node, t: Type, path: &[String]) -> Result<(), Violation> {
        self.attrs(n, path)?;
        if let Some(c) = n.children.first() {
            return Err(refuse_at(
                ErrorTag::UnknownElement,
                path,
                format!(
                    "Node \"{}\" not found as a child of leaf \"{}\".",
                    c.name, n.name
                ),
            ));
        }
        let v = n.text.trim();
        let ok = match t {
            Type::String | Type::PolicyRef | Type::InterfaceRef => true,
            Type::Uint32 => uint32(v),
            Type::Boolean => v == "true" || v == "false",
            Type::Ipv4Prefix => ipv4_prefix(v),
            Type::IpAddress => ip_address(v),
        };
        if !ok {
            return Err(refuse_at(
                ErrorTag::InvalidValue,
                path,
                format!("Invalid {} value \"{v}\".", type_name(t)),
            ));
        }
        if self.mode == Mode::Config {
            let (found, target) = match t {
                Type::PolicyRef => (
                    self.policies.contains(&v),
                    "../../../../policies/policy/config/policy-id",
                ),
                Type::InterfaceRef => (
                    self.interfaces.iter().any(|i| i == v),
                    "/openconfig-interfaces:interfaces/interface/name",
                ),
                _ => (true, ""),
            };
            if !found {
                return Err(refuse_at(
                    ErrorTag::DataMissing,
                    path,
                    format!("Invalid leafref value \"{v}\" - no target instance \"{target}\" with the same value."),
                ));
            }
        }
        Ok(())
    }
}

fn type_name(t: Type) -> &'static str {
    match t {
        Type::String | Type::PolicyRef | Type::InterfaceRef => "string",
        Type::Uint32 => "uint32",
        Type::Boolean => "boolean",
        Type::Ipv4Prefix => "ipv4-prefix",
        Type::IpAddress => "ip-address",
    }
}

/// The key leaf's value of a list entry.
fn key_of<'a>(entry: &'a Node, key: &str) -> Option<&'a str> {
    entry
        .children
        .iter()
        .find(|c| c.name == key && c.ns.as_deref() == Some(NI))
        .map(|c| c.text.trim())
}

/// Two siblings that are the same data node: same name and, for a list,
/// the same key.
fn same_instance(a: &Node, b: &Node, spec: &Spec) -> bool {
    a.name == b.name
        && match spec.kind {
            Kind::List(key, _) => key_of(a, key) == key_of(b, key),
            _ => true,
        }
}

/// RFC 7950 Section 9.2.1: an optional `+`, decimal digits, 0..=2^32-1.
fn uint32(v: &str) -> bool {
    let digits = v.strip_prefix('+').unwrap_or(v);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits.parse::<u32>().is_ok()
}

/// `oc-inet:ipv4-address`: four decimal octets 0-255 without leading
/// zeros (what `Ipv4Addr`'s parser accepts).
fn ipv4(v: &str) -> bool {
    v.parse::<Ipv4Addr>().is_ok()
}

/// `oc-inet:ipv4-prefix`: an `ipv4-address`, `/`, a length `[0-9]`,
/// `[1-2][0-9]` or `3[0-2]`.
fn ipv4_prefix(v: &str) -> bool {
    v.split_once('/').is_some_and(|(a, len)| {
        ipv4(a)
            && !len.is_empty()
            && len.len() <= 2
            && len.bytes().all(|b| b.is_ascii_digit())
            && !(len.len() == 2 && len.starts_with('0'))
            && len.parse::<u8>().is_ok_and(|l| l <= 32)
    })
}

/// `oc-inet:ip-address`: an `ipv4-address` or an `ipv6-address` (hex
/// groups with `::` compression; the pattern has no embedded dotted quad
/// and no zone).
fn ip_address(v: &str) -> bool {
    ipv4(v) || (!v.contains(['.', '%']) && v.parse::<Ipv6Addr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: &str = "http://openconfig.net/yang/network-instance";

    fn pf(inner: &str) -> String {
        format!(
            "<network-instances xmlns=\"{NS}\"><network-instance><name>default</name>\
             <policy-forwarding>{inner}</policy-forwarding></network-instance></network-instances>"
        )
    }

    fn policy(id: &str, rules: &str) -> String {
        format!(
            "<policy><policy-id>{id}</policy-id><config><policy-id>{id}</policy-id></config>\
             <rules>{rules}</rules></policy>"
        )
    }

    fn rule(seq: &str, dest: &str, nh: &str) -> String {
        format!(
            "<rule><sequence-id>{seq}</sequence-id><config><sequence-id>{seq}</sequence-id></config>\
             <ipv4><config><destination-address>{dest}</destination-address></config></ipv4>\
             <action><config><next-hop>{nh}</next-hop></config></action></rule>"
        )
    }

    fn binding(port: &str, id: &str) -> String {
        format!(
            "<interfaces><interface><interface-id>{port}</interface-id><config>\
             <interface-id>{port}</interface-id><apply-forwarding-policy>{id}</apply-forwarding-policy>\
             </config></interface></interfaces>"
        )
    }

    fn good() -> String {
        pf(&format!(
            "<policies>{}</policies>{}",
            policy("p1", &rule("5", "10.0.1.0/24", "10.0.0.1")),
            binding("e1", "p1")
        ))
    }

    fn run(xml: &str, mode: Mode) -> Result<Split, Violation> {
        let s = split(xml)?;
        check(&s, mode, &|ns| ns == NS || ns == IF)?;
        Ok(s)
    }

    fn tag(xml: &str, mode: Mode) -> ErrorTag {
        match run(xml, mode) {
            Ok(_) => panic!("accepted in {mode:?}: {xml}"),
            Err(v) => v.tag,
        }
    }

    #[test]
    fn what_vclos_writes_is_valid_and_cut_out() {
        let doc = format!("<system/>{}<other/>", good());
        for mode in [Mode::Config, Mode::Edit] {
            let s = run(&doc, mode).unwrap();
            assert_eq!(
                s.rest,
                format!(
                    "<system/><network-instances xmlns=\"{NS}\"><network-instance>\
                     <name>default</name></network-instance></network-instances><other/>"
                )
            );
            assert_eq!(s.subtrees.len(), 1);
        }
        // Only under network-instances/network-instance, in its namespace.
        let elsewhere = format!("<policy-forwarding xmlns=\"{NS}\"><x/></policy-forwarding>");
        assert_eq!(split(&elsewhere).unwrap().rest, elsewhere);
        let foreign = good().replace("<policy-forwarding>", "<policy-forwarding xmlns=\"urn:x\">");
        assert!(split(&foreign).unwrap().subtrees.is_empty());
        // A prefixed form is the same element.
        let prefixed = format!(
            "<n:network-instances xmlns:n=\"{NS}\"><n:network-instance><n:name>default</n:name>\
             <n:policy-forwarding><n:policies/></n:policy-forwarding></n:network-instance></n:network-instances>"
        );
        assert_eq!(split(&prefixed).unwrap().subtrees.len(), 1);
    }

    #[test]
    fn unknown_elements_are_refused() {
        for extra in [
            "<path-selection-groups/>",
            "<policies><policy><policy-id>p</policy-id><config><policy-id>p</policy-id><type>PBR_POLICY</type></config></policy></policies>",
            "<policies><policy><policy-id>p</policy-id><colour/></policy></policies>",
        ] {
            assert_eq!(tag(&pf(extra), Mode::Edit), ErrorTag::UnknownElement, "{extra}");
        }
        let deep = pf(&"<policies>".repeat(2000));
        assert_eq!(
            tag(&(deep + &"</policies>".repeat(2000)), Mode::Edit),
            ErrorTag::UnknownElement
        );
        // A child of a leaf.
        let child = good().replace("10.0.0.1</next-hop>", "10.0.0.1<x/></next-hop>");
        assert_eq!(tag(&child, Mode::Edit), ErrorTag::UnknownElement);
        // Another namespace: known -> unknown-element, unknown -> unknown-namespace.
        let known = good().replace(
            "<rules>",
            "<rules><rule xmlns=\"http://openconfig.net/yang/interfaces\"/>",
        );
        assert_eq!(tag(&known, Mode::Edit), ErrorTag::UnknownElement);
        let unknown = good().replace("<rules>", "<rules><rule xmlns=\"urn:nope\"/>");
        assert_eq!(tag(&unknown, Mode::Edit), ErrorTag::UnknownNamespace);
        let state = good().replace("<rules>", "<state><policy-id>p1</policy-id></state><rules>");
        assert_eq!(tag(&state, Mode::Config), ErrorTag::OperationFailed);
    }

    #[test]
    fn leaf_types_are_checked() {
        let bad = [
            (
                "<sequence-id>5</sequence-id></config>",
                "<sequence-id>x</sequence-id></config>",
            ),
            (
                "<sequence-id>5</sequence-id></config>",
                "<sequence-id>4294967296</sequence-id></config>",
            ),
            ("10.0.1.0/24", "10.0.1.0/33"),
            ("10.0.1.0/24", "10.0.1.0"),
            ("10.0.1.0/24", "10.0.01.0/24"),
            ("10.0.1.0/24", "10.0.1.0/08"),
            ("10.0.0.1</next-hop>", "999.1.1.1</next-hop>"),
            ("10.0.0.1</next-hop>", "::ffff:10.0.0.1</next-hop>"),
        ];
        for (from, to) in bad {
            let doc = good().replacen(from, to, 1);
            assert_ne!(doc, good());
            assert_eq!(tag(&doc, Mode::Edit), ErrorTag::InvalidValue, "{to}");
        }
        let v6 = good().replace("10.0.0.1</next-hop>", "2001:db8::1</next-hop>");
        run(&v6, Mode::Config).unwrap();
        let flag = good().replace("<next-hop>", "<discard>maybe</discard><next-hop>");
        assert_eq!(tag(&flag, Mode::Edit), ErrorTag::InvalidValue);
        let op = good().replace(
            "<policies>",
            "<policies xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\" nc:operation=\"zap\">",
        );
        assert_eq!(tag(&op, Mode::Edit), ErrorTag::InvalidValue);
        let op = good().replace("<policies>", "<policies xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\" nc:operation=\"delete\">");
        run(&op, Mode::Edit).unwrap();
        let attr = good().replace("<policies>", "<policies colour=\"red\">");
        assert_eq!(tag(&attr, Mode::Edit), ErrorTag::OperationFailed);
        let text = good().replace("<rules>", "<rules>hello");
        assert_eq!(tag(&text, Mode::Edit), ErrorTag::InvalidValue);
    }

    #[test]
    fn list_keys_are_present_and_match_their_config_leaf() {
        let no_key = good().replacen("<policy-id>p1</policy-id><config>", "<config>", 1);
        assert_eq!(tag(&no_key, Mode::Edit), ErrorTag::MissingElement);
        let no_seq = good().replacen("<sequence-id>5</sequence-id><config>", "<config>", 1);
        assert_eq!(tag(&no_seq, Mode::Edit), ErrorTag::MissingElement);
        let no_if = good().replacen("<interface-id>e1</interface-id><config>", "<config>", 1);
        assert_eq!(tag(&no_if, Mode::Edit), ErrorTag::MissingElement);
        let differs = good().replacen(
            "<config><policy-id>p1</policy-id>",
            "<config><policy-id>p2</policy-id>",
            1,
        );
        assert_eq!(tag(&differs, Mode::Edit), ErrorTag::DataMissing);
        let differs = good().replacen("<config><sequence-id>5", "<config><sequence-id>6", 1);
        assert_eq!(tag(&differs, Mode::Edit), ErrorTag::DataMissing);
        // A datastore needs the key's target; an edit may omit it.
        let bare = good().replacen("<config><policy-id>p1</policy-id></config>", "", 1);
        assert_eq!(tag(&bare, Mode::Config), ErrorTag::DataMissing);
        run(
            &bare.replace("<apply-forwarding-policy>p1</apply-forwarding-policy>", ""),
            Mode::Edit,
        )
        .unwrap();
        let twice = good().replace("</policies>", &format!("{}</policies>", policy("p1", "")));
        assert_eq!(tag(&twice, Mode::Config), ErrorTag::OperationFailed);
        run(&twice, Mode::Edit).unwrap();
    }

    #[test]
    fn applied_policies_and_interfaces_must_exist_in_a_datastore() {
        let dangling = good().replace(
            "<apply-forwarding-policy>p1</apply-forwarding-policy>",
            "<apply-forwarding-policy>p9</apply-forwarding-policy>",
        );
        assert_eq!(tag(&dangling, Mode::Config), ErrorTag::DataMissing);
        run(&dangling, Mode::Edit).unwrap();
        let iref =
            "<interface-ref><config><interface>e1</interface></config></interface-ref></interface>";
        let doc = good().replace("</config></interface>", &format!("</config>{iref}"));
        assert_eq!(tag(&doc, Mode::Config), ErrorTag::DataMissing);
        let ifs = "<interfaces xmlns=\"http://openconfig.net/yang/interfaces\"><interface><name>e1</name></interface></interfaces>";
        run(&format!("{ifs}{doc}"), Mode::Config).unwrap();
    }
}
