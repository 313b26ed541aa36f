//! Foreign steering: redirects in a running configuration that vclos did not
//! write (docs/devices/foreign-steering.md).
//!
//! Every steering configuration on a switch counts, whoever wrote it: a
//! redirect onto an uplink makes that uplink's link busy (the emulated OCS
//! refuses to move it), and a policy on a port vclos must configure stops
//! the apply. The parsers report each one as an [`Item::ForeignSteering`]
//! (port, policy, redirect target when it resolves to a port of the device);
//! no dialect claims the kind, so it is never rendered and no change command
//! deletes or overwrites it.
//!
//! What counts, per dialect (the sources are cited where each is parsed):
//! * Huawei CE (`huawei_ce::foreign_steering`): a `traffic-policy P inbound`
//!   on an interface, `P` not named `v-<job>-p<n>`, whose behaviors redirect
//!   (`redirect interface X`, or a next-hop form: `redirect nexthop A`,
//!   `redirect ip-nexthop A`, `redirect ipv4-multinhp nhp A ...`).
//! * SONiC ([`acl_steering`]): an `ACL_TABLE` entry not named by vclos,
//!   bound to ports, with an `ACL_RULE` whose `PACKET_ACTION` is
//!   `REDIRECT:<target>` or which has a `REDIRECT_ACTION` field.
//! * OpenConfig (`openconfig::foreign_forwarding`): an
//!   `apply-forwarding-policy` naming a policy not named by vclos.
//!
//! A next hop resolves to the port whose own subnet holds it (the /31 of a
//! routed uplink), as the device's forwarding would.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::{Map, Value};

use crate::intent::name::parse_policy_name;
use crate::intent::{Item, PortName};

/// The port whose address's subnet holds `hop` (and which is not `hop`
/// itself), from the device's parsed `Address` items.
pub fn next_hop_port(items: &BTreeSet<Item>, hop: Ipv4Addr) -> Option<PortName> {
    let addrs = items.iter().filter_map(|i| match i {
        Item::Address { port, net, .. } => Some((net, port)),
        _ => None,
    });
    crate::intent::addressing::port_of_next_hop(addrs, hop).cloned()
}

/// Targets of one CE `redirect ...` line: the interface it names, else each
/// IPv4 next hop it names (resolved, or `None`), else one unresolved target
/// (a redirect to a VPN instance, the CPU, ...: still steering). On a
/// routed port (`routed`: `undo portswitch`) `redirect interface` acts on
/// Layer-2 forwarded packets only (Huawei CloudEngine QoS guide,
/// EDOC1100075349, "Overview of Redirection"), so it steers nowhere: the
/// policy is still reported, its target is unresolved.
pub fn redirect_targets(line: &str, routed: bool, items: &BTreeSet<Item>) -> Vec<Option<PortName>> {
    let w: Vec<&str> = line.split_whitespace().collect();
    if let Some(i) = w.iter().position(|x| *x == "interface") {
        let port = w.get(i + 1).and_then(|p| PortName::new(*p).ok());
        return vec![port.filter(|_| !routed)];
    }
    let hops: Vec<Option<PortName>> = w
        .iter()
        .filter_map(|x| x.parse::<Ipv4Addr>().ok())
        .map(|h| next_hop_port(items, h))
        .collect();
    if hops.is_empty() {
        vec![None]
    } else {
        hops
    }
}

/// One item per distinct target of `policy` on `port` (none without targets).
pub fn items(
    port: &PortName,
    policy: &str,
    targets: impl IntoIterator<Item = Option<PortName>>,
) -> BTreeSet<Item> {
    targets
        .into_iter()
        .map(|target| Item::ForeignSteering {
            port: port.clone(),
            policy: policy.to_string(),
            target,
        })
        .collect()
}

/// The target of one SONiC redirect value. sonic-swss `orchagent/aclorch.cpp`
/// (`AclRule::validateAddAction`, redirect action) takes a port or LAG name,
/// a next-hop IP, `IP@interface`, or a comma-separated next-hop group.
fn sonic_targets(value: &str, items: &BTreeSet<Item>) -> Vec<Option<PortName>> {
    value
        .split(',')
        .map(str::trim)
        .map(|v| match v.split_once('@') {
            Some((_, alias)) => PortName::new(alias).ok(),
            None => match v.parse::<Ipv4Addr>() {
                Ok(h) => next_hop_port(items, h),
                Err(_) => PortName::new(v).ok(),
            },
        })
        .collect()
}

/// Foreign SONiC ACL steering in a config_db document `doc`, whose
/// vclos-managed items (addresses, for next hops) are `items`.
///
/// SONiC config_db (sonic-buildimage `src/sonic-yang-models/yang-models/
/// sonic-acl.yang`): `ACL_TABLE|<name>` binds `ports`; `ACL_RULE|<table>|
/// <rule>` carries the action, `PACKET_ACTION` (`REDIRECT:<target>` as
/// written by SONiC's ACL loader and read by aclorch) or the separate
/// `REDIRECT_ACTION` field.
pub fn acl_steering(doc: &Map<String, Value>, items: &BTreeSet<Item>) -> BTreeSet<Item> {
    let table = |t: &str| doc.get(t).and_then(Value::as_object);
    let (Some(tables), rules) = (table("ACL_TABLE"), table("ACL_RULE")) else {
        return BTreeSet::new();
    };
    let mut out = BTreeSet::new();
    for (name, t) in tables {
        if parse_policy_name(name).is_some() {
            continue;
        }
        let prefix = format!("{name}|");
        let mut targets = Vec::new();
        for (_, r) in rules
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with(&prefix))
        {
            let field = |f: &str| r.get(f).and_then(Value::as_str);
            let packet = field("PACKET_ACTION").and_then(|a| {
                let (verb, to) = a.split_once(':')?;
                verb.eq_ignore_ascii_case("REDIRECT").then_some(to)
            });
            for v in packet.into_iter().chain(field("REDIRECT_ACTION")) {
                targets.extend(sonic_targets(v, items));
            }
        }
        if targets.is_empty() {
            continue;
        }
        let ports = t
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|p| PortName::new(p).ok());
        for port in ports {
            out.extend(self::items(&port, name, targets.iter().cloned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::intent::Ipv4Net;

    fn p(s: &str) -> PortName {
        PortName::new(s).unwrap()
    }

    fn addressed() -> BTreeSet<Item> {
        [Item::Address {
            port: p("Ethernet8"),
            vrf: None,
            net: "10.0.0.4/31".parse::<Ipv4Net>().unwrap(),
        }]
        .into_iter()
        .collect()
    }

    #[test]
    fn redirect_lines_resolve_interfaces_and_next_hops() {
        let a = addressed();
        assert_eq!(
            redirect_targets("redirect interface 100GE1/0/17", false, &a),
            vec![Some(p("100GE1/0/17"))]
        );
        assert_eq!(
            redirect_targets("redirect interface 100GE1/0/17", true, &a),
            vec![None],
            "redirect interface acts on Layer-2 traffic only: nowhere on a routed port"
        );
        assert_eq!(
            redirect_targets("redirect nexthop 10.0.0.5", true, &a),
            vec![Some(p("Ethernet8"))]
        );
        assert_eq!(
            redirect_targets("redirect ip-nexthop 10.0.0.4", true, &a),
            vec![None],
            "the port's own address is not a next hop through it"
        );
        assert_eq!(redirect_targets("redirect cpu", false, &a), vec![None]);
    }

    #[test]
    fn sonic_redirect_values() {
        let a = addressed();
        assert_eq!(sonic_targets("Ethernet4", &a), vec![Some(p("Ethernet4"))]);
        assert_eq!(
            sonic_targets("10.0.0.5,9.9.9.9", &a),
            vec![Some(p("Ethernet8")), None]
        );
        assert_eq!(
            sonic_targets("10.0.0.5@Ethernet12", &a),
            vec![Some(p("Ethernet12"))]
        );
    }
}
