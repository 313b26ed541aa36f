//! The Layer-2/Layer-3 redirect rule end to end on the testbed's Huawei CE
//! leaves: the plan for a two-leaf job steers routed traffic by next hop;
//! a routed server port whose only redirect is `redirect interface` steers
//! nothing, so `vclos verify` reports the job unreachable and the emulated
//! OCS sees the uplink idle; the next-hop form verifies clean and makes the
//! uplink busy.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use vclos::decision::Decision;
use vclos::dialect::dialect;
use vclos::emulator::busy::BusyOracle;
use vclos::emulator::cli::SwitchDevice;
use vclos::emulator::fabric::Switch;
use vclos::emulator::faults::Faults;
use vclos::emulator::steering::SteeredBusy;
use vclos::emulator::vrp::VrpConfig;
use vclos::intent;
use vclos::topology::{self, PortRef, Topology};
use vclos::verification::{sample, verify_fabric};

fn testbed() -> Topology {
    topology::from_str(
        "testbed-ocs.yaml",
        include_str!("../topologies/testbed-ocs.yaml"),
    )
    .unwrap()
}

/// A two-leaf vClos job: srv1 on leaf1, srv5 on leaf2.
fn job(t: &Topology) -> Decision {
    let spines = ["spine1-1", "spine1-2", "spine1-3", "spine1-4"];
    sample::vclos_decision(t, "a", &["srv1", "srv5"], &spines).unwrap()
}

fn configs(t: &Topology, held: &[Decision]) -> BTreeMap<String, String> {
    intent::build(t, held)
        .unwrap()
        .devices
        .iter()
        .map(|d| (d.device.clone(), dialect(d.dialect).render(&d.items)))
        .collect()
}

/// The leaf text with every next-hop redirect turned into the older
/// `redirect interface <uplink>` form, on the same (routed) ports.
fn interface_form(text: &str, uplink_of: &BTreeMap<String, String>) -> String {
    text.lines()
        .map(|l| match l.strip_prefix(" redirect nexthop ") {
            Some(hop) => format!(" redirect interface {}", uplink_of[hop]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Next hop -> uplink port, from the leaf's own interface addresses.
fn uplinks_by_hop(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut port = "";
    for l in text.lines() {
        if let Some(p) = l.strip_prefix("interface ") {
            port = p;
        } else if let Some(a) = l.strip_prefix(" ip address ") {
            let addr: std::net::Ipv4Addr = a.split(' ').next().unwrap().parse().unwrap();
            let peer = std::net::Ipv4Addr::from(u32::from(addr) ^ 1);
            out.insert(peer.to_string(), port.to_string());
        }
    }
    out
}

#[test]
fn leaf_plan_steers_routed_traffic_by_next_hop() {
    let t = testbed();
    let held = [job(&t)];
    let cfg = configs(&t, &held);
    let leaf1 = &cfg["leaf1"];
    assert!(leaf1.contains(" redirect nexthop "), "{leaf1}");
    assert!(!leaf1.contains("redirect interface"), "{leaf1}");
    // Each server port bound to a policy is routed.
    assert!(leaf1.contains("interface 100GE1/0/1\n description srv1"));
    let port1 = leaf1
        .split("interface 100GE1/0/1\n")
        .nth(1)
        .unwrap()
        .split('#')
        .next()
        .unwrap();
    assert!(port1.contains(" undo portswitch\n"), "{port1}");
    assert!(
        port1.contains(" traffic-policy v-a-p1 inbound\n"),
        "{port1}"
    );
    // Verified clean from the devices' own configurations.
    let reports = verify_fabric(&t, &held, &cfg).unwrap();
    assert!(reports.iter().all(|r| r.ok()), "{reports:?}");
}

#[test]
fn interface_redirect_on_routed_ports_fails_verification() {
    let t = testbed();
    let held = [job(&t)];
    let mut cfg = configs(&t, &held);
    for leaf in ["leaf1", "leaf2"] {
        let text = cfg[leaf].clone();
        let old = interface_form(&text, &uplinks_by_hop(&text));
        assert!(old.contains(" redirect interface 100GE1/0/"), "{old}");
        cfg.insert(leaf.to_string(), old);
    }
    let reports = verify_fabric(&t, &held, &cfg).unwrap();
    let v: Vec<&String> = reports.iter().flat_map(|r| &r.violations).collect();
    assert!(
        v.iter()
            .any(|s| s.contains("leaf1:100GE1/0/1 has no redirect")),
        "{v:#?}"
    );
}

/// The OCS port the uplink `leaf`:`port` is cabled to.
fn ocs_port_of(t: &Topology, leaf: &str, port: &str) -> (vclos::topology::OcsId, u16) {
    let l = t.leaf_id(leaf).unwrap();
    let u = t.leaf(l).uplinks.iter().position(|p| **p == *port).unwrap();
    match t.peer(PortRef::Leaf(l, u as u16)) {
        Some(PortRef::Ocs(o, p)) => (o, p),
        other => panic!("{leaf}:{port} is cabled to {other:?}"),
    }
}

#[test]
fn only_the_next_hop_form_makes_the_uplink_busy() {
    let t = Arc::new(testbed());
    let held = [job(&t)];
    let text = configs(&t, &held)["leaf1"].clone();
    let hops = uplinks_by_hop(&text);
    // Server port 1's policy redirects onto this uplink.
    let hop = text
        .split("traffic behavior v-a-p1\n redirect nexthop ")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let uplink = hops[&hop].clone();
    let (ocs, port) = ocs_port_of(&t, "leaf1", &uplink);
    let busy = |text: &str| {
        let dev = SwitchDevice::new(
            "leaf1",
            VrpConfig::parse(text).unwrap(),
            Arc::new(Faults::new()),
        );
        let oracle = SteeredBusy::new(t.clone(), |name| {
            (name == "leaf1").then(|| Switch::Cli(dev.clone()))
        });
        oracle.busy(ocs, port)
    };
    assert!(busy(&text), "next-hop redirect onto {uplink} steers");
    let old = interface_form(&text, &hops);
    assert!(old.contains(&format!(" redirect interface {uplink}")));
    assert!(
        !busy(&old),
        "redirect interface on a routed port does not steer onto {uplink}"
    );
}
