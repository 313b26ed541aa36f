//! Foreign steering in running configurations (docs/devices/foreign-steering.md):
//! each dialect's parser reports a redirect vclos did not write as an
//! `Item::ForeignSteering` (interface and next-hop forms), ignores foreign
//! policies that do not redirect, and no dialect renders it or emits a
//! command that deletes or overwrites it.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use vclos::dialect::{all, claimed, dialect};
use vclos::intent::{baseline, Item, PortName};
use vclos::topology::{self, Dialect};

fn leaf1(file: &str) -> BTreeSet<Item> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let t = topology::load(&path).unwrap();
    baseline(&t).unwrap().device("leaf1").unwrap().items.clone()
}

fn p(s: &str) -> PortName {
    PortName::new(s).unwrap()
}

fn foreign(port: &str, policy: &str, target: Option<&str>) -> Item {
    Item::ForeignSteering {
        port: p(port),
        policy: policy.into(),
        target: target.map(p),
    }
}

/// The peer address on `port`'s /31 in `items`.
fn peer(items: &BTreeSet<Item>, port: &str) -> String {
    items
        .iter()
        .find_map(|i| match i {
            Item::Address { port: q, net, .. } if q.as_str() == port => {
                Some(net.other_end().to_string())
            }
            _ => None,
        })
        .unwrap()
}

fn foreign_of(items: &BTreeSet<Item>) -> BTreeSet<Item> {
    items.iter().filter(|i| i.is_foreign()).cloned().collect()
}

/// Parsing `text` gives `base` plus exactly `want`; the dialect renders
/// none of it, and no change command from it touches a foreign name.
fn check(d: Dialect, base: &BTreeSet<Item>, text: &str, want: &[Item]) {
    let base = &claimed(dialect(d), base);
    let got = dialect(d).parse("leaf1", text).unwrap();
    let want: BTreeSet<Item> = want.iter().cloned().collect();
    assert_eq!(foreign_of(&got), want, "{d:?}\n{text}");
    let own: BTreeSet<Item> = got.iter().filter(|i| !i.is_foreign()).cloned().collect();
    assert!(&own == base, "{d:?}: vclos's own items changed");
    assert!(!dialect(d).render(&got).contains("FOREIGN"));
    for cmd in dialect(d)
        .changes(&got, base)
        .iter()
        .chain(&dialect(d).changes(&got, &BTreeSet::new()))
    {
        assert!(
            !cmd.contains("FOREIGN"),
            "{d:?} touches foreign config: {cmd}"
        );
    }
    assert!(
        dialect(d).changes(&got, base).is_empty(),
        "{d:?}: foreign items alone produce commands"
    );
}

#[test]
fn no_dialect_claims_foreign_steering() {
    for d in all() {
        assert!(
            !d.claims(vclos::intent::ItemKind::ForeignSteering),
            "{:?}",
            d.id()
        );
    }
}

#[test]
fn huawei_ce_traffic_policies() {
    let base = leaf1("topologies/testbed-ocs.yaml");
    let hop = peer(&base, "100GE1/0/18");
    let text = dialect(Dialect::HuaweiCe).render(&base);
    let extra = format!(
        "traffic classifier FOREIGN-C type or\n if-match any\n#\n\
         traffic behavior FOREIGN-IF\n redirect interface 100GE1/0/17\n#\n\
         traffic behavior FOREIGN-NH\n redirect nexthop {hop}\n#\n\
         traffic behavior FOREIGN-IPNH\n redirect ip-nexthop 192.0.2.1\n#\n\
         traffic behavior FOREIGN-DENY\n deny\n#\n\
         traffic policy FOREIGN-A\n classifier FOREIGN-C behavior FOREIGN-IF\n#\n\
         traffic policy FOREIGN-B\n classifier FOREIGN-C behavior FOREIGN-NH\n classifier FOREIGN-C behavior FOREIGN-IPNH\n#\n\
         traffic policy FOREIGN-D\n classifier FOREIGN-C behavior FOREIGN-DENY\n#\n\
         interface 100GE1/0/1\n traffic-policy FOREIGN-A inbound\n#\n\
         interface 100GE1/0/2\n traffic-policy FOREIGN-B inbound\n#\n\
         interface 100GE1/0/3\n traffic-policy FOREIGN-D inbound\n#\n\
         interface 100GE1/0/4\n traffic-policy FOREIGN-A outbound\n#\n\
         traffic policy v-FOREIGN\n classifier FOREIGN-C behavior FOREIGN-IF\n#\n\
         interface 100GE1/0/5\n traffic-policy v-FOREIGN inbound\n#\n"
    );
    let text = text.replace("return\n", &format!("{extra}return\n"));
    check(
        Dialect::HuaweiCe,
        &base,
        &text,
        &[
            // `redirect interface` on a routed port (leaf server ports are
            // `undo portswitch`) acts on Layer-2 traffic only: unresolved.
            foreign("100GE1/0/1", "FOREIGN-A", None),
            foreign("100GE1/0/2", "FOREIGN-B", Some("100GE1/0/18")),
            // A next hop on no subnet of the device: steering, unresolved.
            foreign("100GE1/0/2", "FOREIGN-B", None),
            // vclos's prefix alone does not make a policy vclos's.
            foreign("100GE1/0/5", "v-FOREIGN", None),
        ],
    );
}

#[test]
fn sonic_acl_tables() {
    let base = leaf1("topologies/testbed-sonic.yaml");
    let hop = peer(&base, "Ethernet68");
    let mut db: serde_json::Value =
        serde_json::from_str(&dialect(Dialect::Sonic).render(&base)).unwrap();
    db["ACL_TABLE"] = serde_json::json!({
        "FOREIGN_PA": {"type": "L3", "stage": "ingress", "ports": ["Ethernet0", "Ethernet4"]},
        "FOREIGN_RA": {"type": "L3", "stage": "ingress", "ports": ["Ethernet8"]},
        "FOREIGN_DROP": {"type": "L3", "stage": "ingress", "ports": ["Ethernet12"]},
        "DATAACL": {"type": "L3", "stage": "ingress", "ports": []},
    });
    db["ACL_RULE"] = serde_json::json!({
        "FOREIGN_PA|R1": {"PRIORITY": "10", "PACKET_ACTION": "REDIRECT:Ethernet64"},
        "FOREIGN_RA|R1": {"PRIORITY": "10", "PACKET_ACTION": "REDIRECT", "REDIRECT_ACTION": hop},
        "FOREIGN_DROP|R1": {"PRIORITY": "10", "PACKET_ACTION": "DROP"},
    });
    let text = serde_json::to_string_pretty(&db).unwrap();
    check(
        Dialect::Sonic,
        &base,
        &text,
        &[
            foreign("Ethernet0", "FOREIGN_PA", Some("Ethernet64")),
            foreign("Ethernet4", "FOREIGN_PA", Some("Ethernet64")),
            foreign("Ethernet8", "FOREIGN_RA", Some("Ethernet68")),
        ],
    );
}

#[test]
fn openconfig_forwarding_policies() {
    let base = leaf1("topologies/testbed-ocs.yaml");
    let hop = peer(&base, "100GE1/0/17");
    let text = dialect(Dialect::Openconfig).render(&base);
    let pf = format!(
        "<network-instances xmlns=\"http://openconfig.net/yang/network-instance\">\
         <network-instance><name>default</name><policy-forwarding>\
         <policies>\
         <policy><policy-id>FOREIGN-NH</policy-id><rules><rule><sequence-id>1</sequence-id>\
         <action><config><next-hop>{hop}</next-hop></config></action></rule></rules></policy>\
         <policy><policy-id>FOREIGN-VRF</policy-id><rules><rule><sequence-id>1</sequence-id>\
         <action><config><network-instance>other</network-instance></config></action></rule></rules></policy>\
         </policies>\
         <interfaces>\
         <interface><interface-id>100GE1/0/1</interface-id><config><interface-id>100GE1/0/1</interface-id>\
         <apply-forwarding-policy>FOREIGN-NH</apply-forwarding-policy></config></interface>\
         <interface><interface-id>100GE1/0/2</interface-id><config><interface-id>100GE1/0/2</interface-id>\
         <apply-forwarding-policy>FOREIGN-VRF</apply-forwarding-policy></config></interface>\
         </interfaces></policy-forwarding></network-instance></network-instances>"
    );
    let at = text.rfind("</config>").unwrap();
    let text = format!("{}{pf}{}", &text[..at], &text[at..]);
    check(
        Dialect::Openconfig,
        &base,
        &text,
        &[
            foreign("100GE1/0/1", "FOREIGN-NH", Some("100GE1/0/17")),
            foreign("100GE1/0/2", "FOREIGN-VRF", None),
        ],
    );
}
