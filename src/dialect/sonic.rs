//! SONiC config_db JSON.
//!
//! The rendering is a config_db document holding only what vclos manages
//! (tables `DEVICE_METADATA`, `PORT` descriptions, `VRF`, `INTERFACE`,
//! `STATIC_ROUTE`, `ACL_TABLE`, `ACL_RULE`); it is meant for `config load`
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
//! Changes are RFC 6902 JSON Patch operations, one per line, for `config
//! apply-patch`: removals first (rules before tables, addresses before their
//! port, routes before their VRF), then additions in the reverse order, each
//! missing parent object added first. `PORT` and `DEVICE_METADATA` are
//! touched field by field, never replaced, as they hold hardware settings.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::{Dialect, ParseError};
use crate::intent::name::{parse_policy_name, policy_name};
use crate::intent::{Description, Hostname, Ipv4Net, Item, ItemKind, PortName, VrfName};
use crate::topology::Dialect as DialectId;

/// The SONiC dialect.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sonic;

/// Table order for additions; removals use the reverse.
const TABLES: [&str; 7] = [
    "DEVICE_METADATA",
    "PORT",
    "VRF",
    "INTERFACE",
    "STATIC_ROUTE",
    "ACL_TABLE",
    "ACL_RULE",
];

type Path = Vec<String>;

/// Sort key making additions safe: table order, then port entries of
/// `INTERFACE` before their addresses.
fn order(p: &Path) -> (usize, bool, Path) {
    let t = TABLES
        .iter()
        .position(|t| *t == p[0])
        .unwrap_or(TABLES.len());
    (t, p.get(1).is_some_and(|k| k.contains('|')), p.clone())
}

fn leaves(items: &BTreeSet<Item>) -> BTreeMap<Path, Value> {
    let mut out = BTreeMap::new();
    // ECMP routes share one key, with a comma-separated next-hop list.
    let mut routes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut put = |p: &[&str], v: Value| {
        out.insert(p.iter().map(|s| s.to_string()).collect::<Path>(), v);
    };
    for item in items {
        match item {
            Item::Subinterface { .. } => {} // SUBIF-TODO
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
                let v = match vrf {
                    Some(v) => json!({ "vrf_name": v.as_str() }),
                    None => json!({}),
                };
                put(&["INTERFACE", port.as_str()], v);
                put(&["INTERFACE", &format!("{port}|{net}")], json!({}));
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
                let n = policy_name(job, *index).unwrap_or_else(|_| format!("v-{job}-p{index}"));
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
                            "REDIRECT_ACTION": uplink.as_str(),
                        }),
                    );
                }
            }
            Item::Routed { .. } | Item::Patch { .. } | Item::ForeignSteering { .. } => {}
        }
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
        let line_of = |key: &str| {
            text.lines()
                .position(|l| l.contains(&format!("\"{key}\"")))
                .map(|i| i + 1)
        };
        let err =
            |key: &str, m: String| ParseError::at(device, line_of(key), format!("{key}: {m}"));
        let table = |t: &str| {
            doc.get(t)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let str_of = |v: &Value, f: &str| v.get(f).and_then(Value::as_str).map(str::to_string);
        let port = |k: &str| PortName::new(k).map_err(|e| err(k, e.to_string()));
        let vrf = |k: &str, v: &str| VrfName::new(v).map_err(|e| err(k, e.to_string()));
        let net = |k: &str, v: &str| v.parse::<Ipv4Net>().map_err(|e| err(k, e));

        let mut items = BTreeSet::new();
        if let Some(h) = table("DEVICE_METADATA")
            .get("localhost")
            .and_then(|v| str_of(v, "hostname"))
        {
            let name = Hostname::new(h.clone()).map_err(|e| err(&h, e.to_string()))?;
            items.insert(Item::Hostname { name });
        }
        for (k, v) in table("PORT") {
            if let Some(d) = str_of(&v, "description") {
                if let Ok(text) = Description::new(d) {
                    items.insert(Item::Description {
                        port: port(&k)?,
                        text,
                    });
                }
            }
        }
        for k in table("VRF").keys() {
            if k.starts_with("Vrf-") {
                items.insert(Item::Vrf { name: vrf(k, k)? });
            }
        }
        let ifaces = table("INTERFACE");
        for k in ifaces.keys() {
            if let Some((p, a)) = k.split_once('|') {
                let v = ifaces.get(p).and_then(|e| str_of(e, "vrf_name"));
                let v = match v {
                    Some(v) if v.starts_with("Vrf-") => Some(vrf(k, &v)?),
                    _ => None,
                };
                items.insert(Item::Address {
                    port: port(p)?,
                    vrf: v,
                    net: net(k, a)?,
                });
            }
        }
        for (k, v) in table("STATIC_ROUTE") {
            if let Some((name, p)) = k.split_once('|') {
                if name.starts_with("Vrf-") {
                    let nhs = str_of(&v, "nexthop").unwrap_or_default();
                    for nh in nhs.split(',') {
                        let nexthop = nh.trim().parse().map_err(|_| {
                            err(&k, format!("nexthop {nh:?} is not an IPv4 address"))
                        })?;
                        items.insert(Item::Route {
                            vrf: vrf(&k, name)?,
                            prefix: net(&k, p)?,
                            nexthop,
                        });
                    }
                }
            }
        }
        let rules = table("ACL_RULE");
        for (k, v) in table("ACL_TABLE") {
            let Some((job, index)) = parse_policy_name(&k) else {
                continue;
            };
            let ports: Vec<&str> = v
                .get("ports")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let [p] = ports.as_slice() else {
                return Err(err(
                    &k,
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
                let up = redirect_target(rv).ok_or_else(|| {
                    let action = str_of(rv, "PACKET_ACTION").unwrap_or_default();
                    err(rk, format!("action {action:?} is not a redirect"))
                })?;
                if uplink.as_deref().is_some_and(|u| u != up) {
                    return Err(err(
                        rk,
                        "rules of one vclos ACL redirect to different ports".into(),
                    ));
                }
                uplink = Some(up.to_string());
                destinations.push(net(rk, &str_of(rv, "DST_IP").unwrap_or_default())?);
            }
            let uplink = uplink.ok_or_else(|| err(&k, "vclos ACL table has no rules".into()))?;
            destinations.sort();
            destinations.dedup();
            items.insert(Item::Redirect {
                job,
                index,
                port: port(p)?,
                uplink: port(&uplink)?,
                destinations,
            });
        }
        let foreign = super::foreign::acl_steering(doc, &items);
        items.extend(foreign);
        Ok(items)
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
