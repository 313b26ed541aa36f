//! SONiC config_db JSON.
//!
//! The rendering is a config_db document holding only what vclos manages
//! (tables `DEVICE_METADATA`, `PORT` descriptions, `VRF`, `INTERFACE`,
//! `VLAN_SUB_INTERFACE`, `STATIC_ROUTE`, `ACL_TABLE`, `ACL_RULE`); it is meant for `config load`
//! (merge). Source routing of a server port is an L3 ingress ACL table
//! `v-<job>-p<n>` bound to the port, with one rule per remote job leaf:
//! `PRIORITY` 9999 down (sonic-acl.yang.j2 `PRIORITY`, uint32 0..999999,
//! mandatory), `IP_TYPE: IPV4ANY`, `DST_IP` the remote leaf's prefix, and
//! `REDIRECT_ACTION: <uplink>`. Routed ports are implicit in SONiC (a port
//! with an `INTERFACE` entry routes), so [`ItemKind::Routed`] is not claimed.
//!
//! # The redirect form
//! sonic-net/sonic-swss `orchagent/aclorch.cpp`
//! `AclRulePacket::validateAddAction` executes a redirect from the field
//! `REDIRECT_ACTION: <target>` (`ACTION_REDIRECT_ACTION`, acltable.h) or,
//! "for backward compatibility", `PACKET_ACTION: REDIRECT:<target>`; the
//! target is a physical port or LAG (`getRedirectObjectId`). `PACKET_ACTION:
//! REDIRECT` alone is refused there ("Redirect action rule must have ':'
//! after REDIRECT"). The models the Generic Config Updater validates against
//! (sonic-net/sonic-buildimage `src/sonic-yang-models/yang-templates/
//! sonic-acl.yang.j2` `ACL_RULE_LIST`, `stypes:packet_action` in
//! sonic-types.yang.j2) allow `PACKET_ACTION` `REDIRECT` without a target and
//! have no `REDIRECT_ACTION` leaf: no executable redirect passes them. vclos
//! writes the current key, `REDIRECT_ACTION`, and the driver excludes
//! `/ACL_RULE` from the model check with the updater's `-i` option (see
//! `vclos_drivers::sonic`). The parser reads both forms.
//!
//! # Sub-interfaces
//! An [`Item::Subinterface`] `Ethernet64.101` (VLAN 101) is the entry
//! `VLAN_SUB_INTERFACE|Ethernet64.101` `{"admin_status": "up", "vlan":
//! "101"}`, plus `"vrf_name"` when its address is in a VRF (the spine end);
//! its address is the key `VLAN_SUB_INTERFACE|Ethernet64.101|172.16.0.2/31`
//! (sonic-net/SONiC `doc/subport/sonic-sub-port-intf-hld.md` 2.1;
//! sonic-net/sonic-buildimage `src/sonic-yang-models/yang-models/
//! sonic-vlan-sub-interface.yang`). vclos writes the long name (the parent
//! port's own name) and always the `vlan` field, which a short name
//! (`Eth64.101`) needs (the model's `must`; sonic-buildimage issue 10802).
//! An address goes to `VLAN_SUB_INTERFACE` when its port's name is
//! `<parent>.<vlan>` (SONiC port names hold no dot), else to `INTERFACE`.
//!
//! A redirect onto a sub-interface cannot name it: aclorch's
//! `getRedirectObjectId` (sonic-swss `orchagent/aclorch.cpp`) refuses any
//! port that is not physical or a LAG ("Wrong port type for REDIRECT
//! action") and a sub-port is a `Port::SUBPORT` (`PortsOrch::addSubPort`).
//! It also takes a next hop `<ip>@<alias>` (`NextHopKey`) that exists on the
//! switch, so the rule is `REDIRECT_ACTION: "<far end>@<sub-interface>"`,
//! the far end being the other address of the sub-interface's /31
//! ([`next_hops`]). The parser maps it back to the sub-interface, and
//! refuses a next hop that is on no subnet of the named interface (aclorch
//! would find no such next hop: the redirect is not programmed).
//!
//! Reading a sub-interface back: its VLAN is its `vlan` field. An entry
//! without one yields no [`Item::Subinterface`] (the HLD provisions no
//! sub-interface whose VLAN is not configured), nor
//! does one with `admin_status: down`; its addresses still parse. A `vlan`
//! that disagrees with the name's suffix is reported as written: such an
//! entry is not the sub-interface vclos writes (its VLAN is the suffix), so
//! it never passes for it — the difference is drift and vclos rewrites the
//! entry. (On a long name sonic-swss `cfgmgr/intfmgr.cpp`
//! `doIntfGeneralTask` appends the suffix as the VLAN after the fields, so
//! the kernel netdev may well carry the suffix: the config is ambiguous
//! either way, and vclos does not trust it.)
//!
//! Changes are RFC 6902 JSON Patch operations, one per line, for `config
//! apply-patch`: removals first (rules before tables, addresses before their
//! port, routes before their VRF), then additions in the reverse order, each
//! missing parent object added first. `PORT` and `DEVICE_METADATA` are
//! touched field by field, never replaced, as they hold hardware settings.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use serde_json::{json, Map, Value};

use super::{Dialect, ParseError};
use crate::intent::addressing::{next_hops, port_of_next_hop, split_subinterface};
use crate::intent::name::{parse_policy_name, policy_name};
use crate::intent::{Description, Hostname, Ipv4Net, Item, ItemKind, PortName, VrfName};
use crate::names::JobId;
use crate::topology::Dialect as DialectId;

/// The table of sub-interfaces.
const SUBIF: &str = "VLAN_SUB_INTERFACE";

/// The SONiC dialect.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sonic;

/// Table order for additions; removals use the reverse.
const TABLES: [&str; 8] = [
    "DEVICE_METADATA",
    "PORT",
    "VRF",
    "INTERFACE",
    "VLAN_SUB_INTERFACE",
    "STATIC_ROUTE",
    "ACL_TABLE",
    "ACL_RULE",
];

type Path = Vec<String>;

/// Sort key making additions safe: table order, then interface entries
/// (`INTERFACE`, `VLAN_SUB_INTERFACE`) before their addresses.
fn order(p: &Path) -> (usize, bool, Path) {
    let t = TABLES
        .iter()
        .position(|t| *t == p[0])
        .unwrap_or(TABLES.len());
    (t, p.get(1).is_some_and(|k| k.contains('|')), p.clone())
}

/// Whether `name` is a sub-interface name: `<parent>.<vlan>` with a parent
/// of letters and digits (the model's `name` pattern, `(\w+)\.<vlan>`;
/// SONiC port names hold no dot, and an IPv4 address is no such name).
fn is_subinterface(name: &str) -> bool {
    split_subinterface(name).is_some_and(|(p, _)| p.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The table of an interface's entries: a sub-interface in
/// `VLAN_SUB_INTERFACE`, a port in `INTERFACE`.
fn interface_table(port: &PortName) -> &'static str {
    if is_subinterface(port.as_str()) {
        SUBIF
    } else {
        "INTERFACE"
    }
}

/// The `REDIRECT_ACTION` of a redirect onto `uplink`: the port itself, or
/// for a sub-interface, which aclorch does not take as a target, the next
/// hop `<far end>@<sub-interface>` (module doc). A sub-interface without a
/// /31 keeps its bare name, which the switch refuses.
fn redirect_value(uplink: &PortName, hops: &BTreeMap<&PortName, Ipv4Addr>) -> String {
    match hops.get(uplink) {
        Some(ip) if interface_table(uplink) == SUBIF => format!("{ip}@{uplink}"),
        _ => uplink.to_string(),
    }
}

/// The `ACL_TABLE` entry and `ACL_RULE` entries of one redirect.
fn redirect_leaves(
    job: &JobId,
    index: u16,
    port: &PortName,
    target: &str,
    destinations: &[Ipv4Net],
    put: &mut impl FnMut(&[&str], Value),
) {
    let n = policy_name(job, index).unwrap_or_else(|_| format!("v-{job}-p{index}"));
    put(
        &["ACL_TABLE", &n],
        json!({"type": "L3", "stage": "ingress", "ports": [port.as_str()], "policy_desc": format!("vclos {job}")}),
    );
    for (k, d) in destinations.iter().enumerate() {
        put(
            &["ACL_RULE", &format!("{n}|RULE_{}", k + 1)],
            json!({
                "PRIORITY": 9999usize.saturating_sub(k).to_string(),
                "IP_TYPE": "IPV4ANY",
                "DST_IP": d.to_string(),
                "REDIRECT_ACTION": target,
            }),
        );
    }
}

fn leaves(items: &BTreeSet<Item>) -> BTreeMap<Path, Value> {
    let hops = next_hops(items);
    let mut out = BTreeMap::new();
    // ECMP routes share one key, with a comma-separated next-hop list.
    let mut routes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Interface entries take fields from several items (a sub-interface's
    // VLAN, its address's VRF).
    let mut ifaces: BTreeMap<(&str, String), Map<String, Value>> = BTreeMap::new();
    let mut put = |p: &[&str], v: Value| {
        out.insert(p.iter().map(|s| s.to_string()).collect::<Path>(), v);
    };
    for item in items {
        match item {
            Item::Subinterface { port, vlan } => {
                let e = ifaces.entry((SUBIF, port.to_string())).or_default();
                e.insert("admin_status".into(), json!("up"));
                e.insert("vlan".into(), json!(vlan.to_string()));
            }
            Item::Hostname { name } => put(
                &["DEVICE_METADATA", "localhost", "hostname"],
                json!(name.as_str()),
            ),
            Item::Description { port, text } => put(
                &["PORT", port.as_str(), "description"],
                json!(text.as_str()),
            ),
            Item::Vrf { name } => put(&["VRF", name.as_str()], json!({})),
            Item::Address { port, vrf, net } => {
                let t = interface_table(port);
                let e = ifaces.entry((t, port.to_string())).or_default();
                if let Some(v) = vrf {
                    e.insert("vrf_name".into(), json!(v.as_str()));
                }
                put(&[t, &format!("{port}|{net}")], json!({}));
            }
            Item::Route {
                vrf,
                prefix,
                nexthop,
            } => routes
                .entry(format!("{vrf}|{prefix}"))
                .or_default()
                .push(nexthop.to_string()),
            Item::Redirect {
                job,
                index,
                port,
                uplink,
                destinations,
            } => {
                let target = redirect_value(uplink, &hops);
                redirect_leaves(job, *index, port, &target, destinations, &mut put);
            }
            Item::Routed { .. } | Item::Patch { .. } | Item::ForeignSteering { .. } => {}
        }
    }
    for ((t, k), e) in ifaces {
        out.insert(vec![t.to_string(), k], Value::Object(e));
    }
    for (key, nhs) in routes {
        out.insert(
            vec!["STATIC_ROUTE".to_string(), key],
            json!({ "nexthop": nhs.join(",") }),
        );
    }
    out
}

/// The port an ACL rule redirects to, as aclorch reads it: `REDIRECT_ACTION`,
/// else the legacy `PACKET_ACTION: REDIRECT:<target>` (the keyword in any
/// case, as aclorch upper-cases the value before matching).
fn redirect_target(rule: &Value) -> Option<&str> {
    if let Some(t) = rule.get("REDIRECT_ACTION").and_then(Value::as_str) {
        return Some(t);
    }
    let a = rule.get("PACKET_ACTION").and_then(Value::as_str)?;
    let (kw, t) = a.split_once(':')?;
    (kw.eq_ignore_ascii_case("REDIRECT") && !t.is_empty()).then_some(t)
}

/// The uplink a redirect target names: a port, or the interface of a next
/// hop `<ip>@<interface>` (aclorch's `NextHopKey` form), whose subnet must
/// hold `ip` (as the other address) — else the switch has no such next hop
/// and aclorch does not program the rule, as it does not a rule naming a
/// sub-interface itself (module doc).
fn uplink_of(target: &str, items: &BTreeSet<Item>) -> Result<String, String> {
    let Some((ip, alias)) = target.split_once('@') else {
        if is_subinterface(target) {
            return Err(format!(
                "redirect target {target} is a sub-interface: aclorch redirects to physical ports and LAGs only"
            ));
        }
        return Ok(target.to_string());
    };
    let hop: Ipv4Addr = ip
        .parse()
        .map_err(|_| format!("redirect next hop {ip:?} is not an IPv4 address"))?;
    let nets = items.iter().filter_map(|i| match i {
        Item::Address { port, net, .. } if port.as_str() == alias => Some((net, port)),
        _ => None,
    });
    match port_of_next_hop(nets, hop) {
        Some(_) => Ok(alias.to_string()),
        None => Err(format!(
            "redirect next hop {hop} is on no subnet of {alias}: the switch has no such next hop"
        )),
    }
}

/// The VLAN a `VLAN_SUB_INTERFACE` entry terminates, as vclos reads it: its
/// `vlan` field (what vclos writes, and what a short name needs). No VLAN
/// (no item) when the field is absent — the HLD provisions no sub-interface
/// without one — or when the sub-interface is administratively down; a
/// field that disagrees with the name's suffix is reported as written
/// (module doc).
fn subinterface_vlan(e: &Value) -> Result<Option<u16>, String> {
    if e.get("admin_status").and_then(Value::as_str) == Some("down") {
        return Ok(None);
    }
    let v = match e.get("vlan") {
        None => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => return Err(format!("vlan {other} is not a VLAN id")),
    };
    match v.parse::<u16>() {
        Ok(n) if (1..=4094).contains(&n) => Ok(Some(n)),
        _ => Err(format!("vlan {v:?} is not a VLAN id 1..4094")),
    }
}

fn insert(map: &mut Map<String, Value>, path: &[String], v: Value) {
    match path {
        [] => {}
        [last] => {
            map.insert(last.clone(), v);
        }
        [first, rest @ ..] => {
            if let Some(m) = map
                .entry(first.clone())
                .or_insert_with(|| json!({}))
                .as_object_mut()
            {
                insert(m, rest, v);
            }
        }
    }
}

fn pointer(p: &[String]) -> String {
    p.iter()
        .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
        .collect()
}

impl Dialect for Sonic {
    fn id(&self) -> DialectId {
        DialectId::Sonic
    }

    fn claims(&self, kind: ItemKind) -> bool {
        !matches!(
            kind,
            ItemKind::Routed | ItemKind::Patch | ItemKind::ForeignSteering
        )
    }

    fn render(&self, items: &BTreeSet<Item>) -> String {
        let mut doc = Map::new();
        for (path, v) in leaves(items) {
            insert(&mut doc, &path, v);
        }
        let mut s = serde_json::to_string_pretty(&Value::Object(doc)).unwrap_or_default();
        s.push('\n');
        s
    }

    fn changes(&self, running: &BTreeSet<Item>, candidate: &BTreeSet<Item>) -> Vec<String> {
        let (old, new) = (leaves(running), leaves(candidate));
        let mut out = Vec::new();
        let mut gone: Vec<&Path> = old.keys().filter(|p| !new.contains_key(*p)).collect();
        gone.sort_by_key(|p| std::cmp::Reverse(order(p)));
        for p in gone {
            out.push(json!({"op": "remove", "path": pointer(p)}).to_string());
        }
        let mut exists: BTreeSet<Path> = old
            .keys()
            .flat_map(|p| (1..p.len()).map(|n| p[..n].to_vec()))
            .collect();
        let mut set: Vec<(&Path, &Value)> = new
            .iter()
            .filter(|(p, v)| old.get(*p) != Some(*v))
            .collect();
        set.sort_by_key(|(p, _)| order(p));
        for (p, v) in set {
            for n in 1..p.len() {
                let parent = p[..n].to_vec();
                if exists.insert(parent.clone()) {
                    out.push(
                        json!({"op": "add", "path": pointer(&parent), "value": {}}).to_string(),
                    );
                }
            }
            let op = if old.contains_key(p) {
                "replace"
            } else {
                "add"
            };
            out.push(json!({"op": op, "path": pointer(p), "value": v}).to_string());
        }
        out
    }

    fn parse(&self, device: &str, text: &str) -> Result<BTreeSet<Item>, ParseError> {
        if text.trim().is_empty() {
            return Ok(BTreeSet::new());
        }
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| ParseError::at(device, Some(e.line()), format!("not JSON: {e}")))?;
        let Some(doc) = doc.as_object() else {
            return Err(ParseError::at(
                device,
                Some(1),
                "config_db must be a JSON object",
            ));
        };
        let db = Tables { device, text, doc };

        let mut items = BTreeSet::new();
        db.port_items(&mut items)?;
        db.address_items(&mut items)?;
        db.route_items(&mut items)?;
        db.redirect_items(&mut items)?;
        let foreign = super::foreign::acl_steering(doc, &items);
        items.extend(foreign);
        Ok(items)
    }
}

/// String field `f` of a config_db entry.
fn str_of(v: &Value, f: &str) -> Option<String> {
    v.get(f).and_then(Value::as_str).map(str::to_string)
}

/// The config_db tables of one device's reply, with its text for error lines.
#[derive(Debug, Clone, Copy)]
struct Tables<'a> {
    device: &'a str,
    text: &'a str,
    doc: &'a Map<String, Value>,
}

impl Tables<'_> {
    /// The first line of the text quoting `key`.
    fn line_of(self, key: &str) -> Option<usize> {
        self.text
            .lines()
            .position(|l| l.contains(&format!("\"{key}\"")))
            .map(|i| i + 1)
    }

    /// An error about `key`, at the line that quotes it.
    fn err(self, key: &str, m: String) -> ParseError {
        ParseError::at(self.device, self.line_of(key), format!("{key}: {m}"))
    }

    /// Table `t`, empty when absent or not an object.
    fn table(self, t: &str) -> Map<String, Value> {
        self.doc
            .get(t)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    /// Key `k` as a port name.
    fn port(self, k: &str) -> Result<PortName, ParseError> {
        PortName::new(k).map_err(|e| self.err(k, e.to_string()))
    }

    /// `v` as a VRF name, the error about key `k`.
    fn vrf(self, k: &str, v: &str) -> Result<VrfName, ParseError> {
        VrfName::new(v).map_err(|e| self.err(k, e.to_string()))
    }

    /// `v` as a prefix, the error about key `k`.
    fn net(self, k: &str, v: &str) -> Result<Ipv4Net, ParseError> {
        v.parse::<Ipv4Net>().map_err(|e| self.err(k, e))
    }

    /// The hostname (DEVICE_METADATA), port descriptions (PORT) and vclos VRFs (VRF).
    fn port_items(self, items: &mut BTreeSet<Item>) -> Result<(), ParseError> {
        if let Some(h) = self
            .table("DEVICE_METADATA")
            .get("localhost")
            .and_then(|v| str_of(v, "hostname"))
        {
            let name = Hostname::new(h.clone()).map_err(|e| self.err(&h, e.to_string()))?;
            items.insert(Item::Hostname { name });
        }
        for (k, v) in self.table("PORT") {
            if let Some(d) = str_of(&v, "description") {
                if let Ok(text) = Description::new(d) {
                    items.insert(Item::Description {
                        port: self.port(&k)?,
                        text,
                    });
                }
            }
        }
        for k in self.table("VRF").keys() {
            if k.starts_with("Vrf-") {
                items.insert(Item::Vrf {
                    name: self.vrf(k, k)?,
                });
            }
        }
        Ok(())
    }

    /// The addresses of INTERFACE and VLAN_SUB_INTERFACE, then the subinterfaces.
    fn address_items(self, items: &mut BTreeSet<Item>) -> Result<(), ParseError> {
        for t in ["INTERFACE", SUBIF] {
            let ifaces = self.table(t);
            for k in ifaces.keys() {
                if let Some((p, a)) = k.split_once('|') {
                    let v = ifaces.get(p).and_then(|e| str_of(e, "vrf_name"));
                    let v = match v {
                        Some(v) if v.starts_with("Vrf-") => Some(self.vrf(k, &v)?),
                        _ => None,
                    };
                    items.insert(Item::Address {
                        port: self.port(p)?,
                        vrf: v,
                        net: self.net(k, a)?,
                    });
                }
            }
        }
        for (k, e) in self.table(SUBIF).iter().filter(|(k, _)| !k.contains('|')) {
            if let Some(vlan) = subinterface_vlan(e).map_err(|m| self.err(k, m))? {
                items.insert(Item::Subinterface {
                    port: self.port(k)?,
                    vlan,
                });
            }
        }
        Ok(())
    }

    /// The static routes of vclos VRFs (STATIC_ROUTE), one item per next hop.
    fn route_items(self, items: &mut BTreeSet<Item>) -> Result<(), ParseError> {
        for (k, v) in self.table("STATIC_ROUTE") {
            if let Some((name, p)) = k.split_once('|') {
                if name.starts_with("Vrf-") {
                    let nhs = str_of(&v, "nexthop").unwrap_or_default();
                    for nh in nhs.split(',') {
                        let nexthop = nh.trim().parse().map_err(|_| {
                            self.err(&k, format!("nexthop {nh:?} is not an IPv4 address"))
                        })?;
                        items.insert(Item::Route {
                            vrf: self.vrf(&k, name)?,
                            prefix: self.net(&k, p)?,
                            nexthop,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// A redirect for each vclos ACL table (ACL_TABLE with its ACL_RULE rows).
    fn redirect_items(self, items: &mut BTreeSet<Item>) -> Result<(), ParseError> {
        let rules = self.table("ACL_RULE");
        for (k, v) in self.table("ACL_TABLE") {
            let Some((job, index)) = parse_policy_name(&k) else {
                continue;
            };
            let redirect = self.redirect(&k, &v, job, index, &rules, items)?;
            items.insert(redirect);
        }
        Ok(())
    }

    /// The redirect of vclos ACL table `k`: one bound port, rules that all
    /// redirect to one uplink among `items`' addressed ports.
    fn redirect(
        self,
        k: &str,
        v: &Value,
        job: JobId,
        index: u16,
        rules: &Map<String, Value>,
        items: &BTreeSet<Item>,
    ) -> Result<Item, ParseError> {
        let ports: Vec<&str> = v
            .get("ports")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let [p] = ports.as_slice() else {
            return Err(self.err(
                k,
                format!(
                    "vclos ACL table must bind exactly one port, found {}",
                    ports.len()
                ),
            ));
        };
        let mut uplink: Option<String> = None;
        let mut destinations = Vec::new();
        for (rk, rv) in rules
            .iter()
            .filter(|(rk, _)| rk.split_once('|').is_some_and(|(t, _)| t == k))
        {
            let target = redirect_target(rv).ok_or_else(|| {
                let action = str_of(rv, "PACKET_ACTION").unwrap_or_default();
                self.err(rk, format!("action {action:?} is not a redirect"))
            })?;
            let up = uplink_of(target, items).map_err(|m| self.err(rk, m))?;
            if uplink.as_deref().is_some_and(|u| u != up) {
                return Err(self.err(
                    rk,
                    "rules of one vclos ACL redirect to different ports".into(),
                ));
            }
            uplink = Some(up);
            destinations.push(self.net(rk, &str_of(rv, "DST_IP").unwrap_or_default())?);
        }
        let uplink = uplink.ok_or_else(|| self.err(k, "vclos ACL table has no rules".into()))?;
        destinations.sort();
        destinations.dedup();
        Ok(Item::Redirect {
            job,
            index,
            port: self.port(p)?,
            uplink: self.port(&uplink)?,
            destinations,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn redirect() -> Item {
        Item::Redirect {
            job: crate::names::JobId::new("j1").unwrap(),
            index: 1,
            port: PortName::new("Ethernet0").unwrap(),
            uplink: PortName::new("Ethernet64").unwrap(),
            destinations: vec!["10.128.1.0/24".parse().unwrap()],
        }
    }

    /// A config_db with one vclos ACL on Ethernet0 whose rule is `rule`.
    fn with_rule(rule: Value) -> String {
        json!({
            "ACL_TABLE": {"v-j1-p1": {"type": "L3", "stage": "ingress", "ports": ["Ethernet0"]}},
            "ACL_RULE": {"v-j1-p1|RULE_1": rule},
        })
        .to_string()
    }

    #[test]
    fn rules_redirect_with_redirect_action_and_a_priority_in_range() {
        let doc: Value =
            serde_json::from_str(&Sonic.render(&BTreeSet::from([redirect()]))).unwrap();
        assert_eq!(
            doc["ACL_RULE"]["v-j1-p1|RULE_1"],
            json!({"PRIORITY": "9999", "IP_TYPE": "IPV4ANY", "DST_IP": "10.128.1.0/24", "REDIRECT_ACTION": "Ethernet64"})
        );
    }

    #[test]
    fn the_parser_reads_both_redirect_forms_aclorch_executes() {
        let rule = |action: Value| {
            let mut r = json!({"PRIORITY": "9999", "DST_IP": "10.128.1.0/24"});
            for (k, v) in action.as_object().unwrap() {
                r[k] = v.clone();
            }
            with_rule(r)
        };
        for form in [
            json!({"REDIRECT_ACTION": "Ethernet64"}),
            json!({"PACKET_ACTION": "REDIRECT:Ethernet64"}),
            json!({"PACKET_ACTION": "redirect:Ethernet64"}),
        ] {
            let items = Sonic.parse("leaf1", &rule(form.clone())).unwrap();
            assert_eq!(items, BTreeSet::from([redirect()]), "{form}");
        }
        for not in [
            json!({"PACKET_ACTION": "REDIRECT"}),
            json!({"PACKET_ACTION": "REDIRECT:"}),
            json!({"PACKET_ACTION": "DROP"}),
        ] {
            let e = Sonic.parse("leaf1", &rule(not.clone())).unwrap_err();
            assert!(e.to_string().contains("is not a redirect"), "{not}: {e}");
        }
    }
}

#[cfg(test)]
mod subinterface_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use vclos_drivers::configdb;

    fn p(s: &str) -> PortName {
        PortName::new(s).unwrap()
    }

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    /// A leaf whose uplink Ethernet64 is shared: the main interface keeps
    /// its address, job `b` gets Ethernet64.101 and source-routes onto it.
    fn leaf() -> BTreeSet<Item> {
        BTreeSet::from([
            Item::Address {
                port: p("Ethernet64"),
                vrf: None,
                net: net("10.0.0.0/31"),
            },
            Item::Subinterface {
                port: p("Ethernet64.101"),
                vlan: 101,
            },
            Item::Address {
                port: p("Ethernet64.101"),
                vrf: None,
                net: net("172.16.0.2/31"),
            },
            onto("Ethernet64.101"),
        ])
    }

    /// b's source route of Ethernet0 onto `uplink`.
    fn onto(uplink: &str) -> Item {
        Item::Redirect {
            job: JobId::new("b").unwrap(),
            index: 1,
            port: p("Ethernet0"),
            uplink: p(uplink),
            destinations: vec![net("10.128.1.0/24")],
        }
    }

    /// The spine end of the same link: b's VRF on Ethernet8.101.
    fn spine() -> BTreeSet<Item> {
        let vrf = VrfName::new("Vrf-b").unwrap();
        BTreeSet::from([
            Item::Vrf { name: vrf.clone() },
            Item::Subinterface {
                port: p("Ethernet8.101"),
                vlan: 101,
            },
            Item::Address {
                port: p("Ethernet8.101"),
                vrf: Some(vrf.clone()),
                net: net("172.16.0.3/31"),
            },
            Item::Route {
                vrf,
                prefix: net("10.128.0.0/24"),
                nexthop: "172.16.0.2".parse().unwrap(),
            },
        ])
    }

    fn doc(items: &BTreeSet<Item>) -> Value {
        serde_json::from_str(&Sonic.render(items)).unwrap()
    }

    #[test]
    fn a_subinterface_is_a_vlan_sub_interface_entry_with_its_vlan_and_address() {
        let d = doc(&leaf());
        assert_eq!(
            d["VLAN_SUB_INTERFACE"],
            json!({
                "Ethernet64.101": {"admin_status": "up", "vlan": "101"},
                "Ethernet64.101|172.16.0.2/31": {},
            })
        );
        assert_eq!(
            d["INTERFACE"],
            json!({"Ethernet64": {}, "Ethernet64|10.0.0.0/31": {}}),
            "the main interface stays in INTERFACE"
        );
        let s = doc(&spine());
        assert_eq!(
            s["VLAN_SUB_INTERFACE"]["Ethernet8.101"],
            json!({"admin_status": "up", "vlan": "101", "vrf_name": "Vrf-b"})
        );
        assert!(s.get("INTERFACE").is_none(), "{s}");
    }

    #[test]
    fn a_redirect_onto_a_subinterface_names_the_far_end_at_the_subinterface() {
        let d = doc(&leaf());
        assert_eq!(
            d["ACL_RULE"]["v-b-p1|RULE_1"]["REDIRECT_ACTION"],
            "172.16.0.3@Ethernet64.101"
        );
        // A redirect onto the main interface still names the port.
        let mut main = leaf();
        main.remove(&onto("Ethernet64.101"));
        main.insert(onto("Ethernet64"));
        assert_eq!(
            doc(&main)["ACL_RULE"]["v-b-p1|RULE_1"]["REDIRECT_ACTION"],
            "Ethernet64"
        );
    }

    #[test]
    fn leaf_and_spine_ends_parse_back_to_the_same_items() {
        for items in [leaf(), spine()] {
            assert_eq!(Sonic.parse("d", &Sonic.render(&items)).unwrap(), items);
        }
    }

    /// `changes` from `old` to `new`, merged onto `old`'s document as the
    /// driver does, make `new`'s document.
    fn patched(old: &BTreeSet<Item>, new: &BTreeSet<Item>) -> configdb::ConfigDb {
        let lines = Sonic.changes(old, new).join("\n");
        let patch = configdb::patch_from_lines(&lines).unwrap();
        let start = configdb::parse(&Sonic.render(old)).unwrap();
        configdb::merge(&start, &patch).unwrap().1
    }

    #[test]
    fn changes_add_and_remove_a_subinterface_with_its_address_and_redirect() {
        let mut before = leaf();
        before.retain(|i| matches!(i, Item::Address { port, .. } if port.as_str() == "Ethernet64"));
        for (old, new) in [(&before, &leaf()), (&leaf(), &before)] {
            assert_eq!(
                patched(old, new),
                configdb::parse(&Sonic.render(new)).unwrap()
            );
        }
        // Additions: the entry before its address, both before the rule
        // naming it; removals the other way round.
        let ops = Sonic.changes(&before, &leaf());
        let at = |ops: &[String], s: &str| ops.iter().position(|o| o.contains(s)).unwrap();
        assert!(at(&ops, "/Ethernet64.101\"") < at(&ops, "Ethernet64.101|172"));
        assert!(at(&ops, "Ethernet64.101|172") < at(&ops, "RULE_1"));
        let ops = Sonic.changes(&leaf(), &before);
        assert!(at(&ops, "RULE_1") < at(&ops, "Ethernet64.101|172"));
        assert!(at(&ops, "Ethernet64.101|172") < at(&ops, "/Ethernet64.101\""));
    }

    /// `leaf()`'s document with the sub-interface entry replaced by `entry`.
    fn with_entry(entry: Value) -> String {
        let mut d = doc(&leaf());
        d["VLAN_SUB_INTERFACE"]["Ethernet64.101"] = entry;
        d.to_string()
    }

    fn subifs(items: &BTreeSet<Item>) -> Vec<&Item> {
        items
            .iter()
            .filter(|i| matches!(i, Item::Subinterface { .. }))
            .collect()
    }

    #[test]
    fn a_vlan_field_that_disagrees_or_is_missing_is_not_the_subinterface_vclos_wrote() {
        let addr = Item::Address {
            port: p("Ethernet64.101"),
            vrf: None,
            net: net("172.16.0.2/31"),
        };
        // Another VLAN than the name's: reported as written, so it differs
        // from the intent's Subinterface { Ethernet64.101, 101 }.
        let items = Sonic
            .parse(
                "leaf1",
                &with_entry(json!({"admin_status": "up", "vlan": "102"})),
            )
            .unwrap();
        assert_eq!(
            subifs(&items),
            vec![&Item::Subinterface {
                port: p("Ethernet64.101"),
                vlan: 102
            }]
        );
        assert!(!items.is_superset(&leaf()));
        // No VLAN, or administratively down: no sub-interface at all; the
        // address still reads.
        for e in [
            json!({"admin_status": "up"}),
            json!({"admin_status": "down", "vlan": "101"}),
        ] {
            let items = Sonic.parse("leaf1", &with_entry(e.clone())).unwrap();
            assert!(subifs(&items).is_empty(), "{e}");
            assert!(items.contains(&addr), "{e}");
        }
        // A number as the HLD's example writes it reads as the string.
        let items = Sonic
            .parse("leaf1", &with_entry(json!({"vlan": 101})))
            .unwrap();
        assert!(items.is_superset(&leaf()));
        for bad in ["0", "4095", "x"] {
            let e = Sonic
                .parse("leaf1", &with_entry(json!({"vlan": bad})))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("leaf1") && e.contains("Ethernet64.101: vlan") && e.contains(bad),
                "{e}"
            );
        }
    }

    /// `leaf()`'s document with the rule's `REDIRECT_ACTION` set to `target`.
    fn redirecting(target: &str) -> Result<BTreeSet<Item>, String> {
        let mut d = doc(&leaf());
        d["ACL_RULE"]["v-b-p1|RULE_1"]["REDIRECT_ACTION"] = json!(target);
        Sonic
            .parse("leaf1", &d.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn redirects_read_back_from_next_hops_that_exist_only() {
        let mut d = doc(&leaf());
        let rule = &mut d["ACL_RULE"]["v-b-p1|RULE_1"];
        rule.as_object_mut().unwrap().remove("REDIRECT_ACTION");
        rule["PACKET_ACTION"] = json!("REDIRECT:172.16.0.3@Ethernet64.101");
        assert_eq!(Sonic.parse("leaf1", &d.to_string()).unwrap(), leaf());
        for (target, why) in [
            (
                "Ethernet64.101",
                "redirect target Ethernet64.101 is a sub-interface",
            ),
            (
                "172.16.0.2@Ethernet64.101",
                "next hop 172.16.0.2 is on no subnet of Ethernet64.101",
            ),
            (
                "10.0.0.1@Ethernet64.101",
                "next hop 10.0.0.1 is on no subnet of Ethernet64.101",
            ),
            ("x@Ethernet64.101", "next hop \"x\" is not an IPv4 address"),
        ] {
            let e = redirecting(target).unwrap_err();
            assert!(
                e.contains("v-b-p1|RULE_1") && e.contains(why),
                "{target}: {e}"
            );
        }
        // The main interface's far end through the main interface is fine.
        let items = redirecting("10.0.0.1@Ethernet64").unwrap();
        assert!(items.iter().any(
            |i| matches!(i, Item::Redirect { uplink, .. } if uplink.as_str() == "Ethernet64")
        ));
    }
}
