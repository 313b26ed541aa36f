//! The Layer-2/Layer-3 redirect rule end to end on the testbed's Huawei CE
//! leaves: the plan for a two-leaf job steers routed traffic by next hop;
//! a routed server port whose only redirect is `redirect interface` steers
//! nothing, so `vclos verify` reports the job unreachable and the emulated
//! OCS sees the uplink idle; the next-hop form verifies clean and makes the
//! uplink busy.
//!
//! Shared links (issue 16): a job joining job a's links gets 802.1Q
//! sub-interfaces at both ends; their configurations go through the
//! emulated CE (display, typed changes, commit, rollback) and read back as
//! the intent.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use vclos::decision::{Decision, SharedLink, Sharing, SharingPhase};
use vclos::dialect::{claimed, dialect, huawei_ce::HuaweiCe, Dialect as _};
use vclos::emulator::busy::BusyOracle;
use vclos::emulator::cli::{CliSession, SwitchDevice};
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

/// Job a as [`job`], and job b (srv2 on leaf1, srv6 on leaf2) joining
/// each of a's links with VLAN 101.
fn shared(t: &Topology) -> [Decision; 2] {
    let a = job(t);
    let spines = ["spine1-1", "spine1-2", "spine1-3", "spine1-4"];
    let mut b = sample::vclos_decision(t, "b", &["srv2", "srv6"], &spines).unwrap();
    let ends = |d: &Decision| -> Vec<(String, String)> {
        (d.vclos.links.iter())
            .map(|l| (l.leaf.to_string(), l.uplink.to_string()))
            .collect()
    };
    assert_eq!(ends(&a), ends(&b), "b reserves a's links");
    b.sharing = Some(Box::new(Sharing {
        time_shift_ms: 0,
        score: 1.0,
        profile: vec![SharingPhase {
            ms: 1000,
            demand: 0.5,
        }],
        links: (a.vclos.links.iter())
            .map(|l| SharedLink {
                leaf: l.leaf.clone(),
                uplink: l.uplink.clone(),
                with: vec![a.job.clone()],
                vlan: 101,
            })
            .collect(),
        time_shared: Vec::new(),
    }));
    [a, b]
}

/// The CE items of `device` for `held`.
fn ce_items(
    t: &Topology,
    held: &[Decision],
    device: &str,
) -> std::collections::BTreeSet<intent::Item> {
    let all = intent::build(t, held).unwrap();
    claimed(&HuaweiCe, &all.device(device).unwrap().items)
}

#[test]
fn shared_link_configs_round_trip_through_the_emulated_ce() {
    let t = testbed();
    let held = shared(&t);
    for dev in ["leaf1", "leaf2", "spine1"] {
        let items = ce_items(&t, &held, dev);
        assert!(
            items
                .iter()
                .any(|i| matches!(i, intent::Item::Subinterface { vlan: 101, .. })),
            "{dev} has a sub-interface"
        );
        let text = HuaweiCe.render(&items);
        let emu = VrpConfig::parse(&text).unwrap_or_else(|e| panic!("{dev}: {e:?}\n{text}"));
        assert_eq!(HuaweiCe.parse(dev, &emu.render()).unwrap(), items, "{dev}");
    }
    // Job b's source routes on leaf1 go to the sub-interfaces' far ends.
    let leaf1 = HuaweiCe.render(&ce_items(&t, &held, "leaf1"));
    let hops: Vec<&str> = (leaf1.split("traffic behavior v-b-").skip(1))
        .filter_map(|b| b.split("redirect nexthop ").nth(1))
        .collect();
    assert!(!hops.is_empty(), "{leaf1}");
    assert!(hops.iter().all(|h| h.starts_with("172.16.")), "{leaf1}");
}

/// Type `lines` into a CLI session, asserting no error; the outputs.
fn type_all(s: &mut CliSession, lines: &[String]) {
    for l in lines {
        let r = s.handle_line(l);
        assert!(!r.output.contains("Error"), "{l:?} -> {}", r.output);
    }
}

#[test]
fn the_joiners_plan_commits_and_rolls_back_on_the_emulated_ce() {
    let t = testbed();
    let held = shared(&t);
    for dev in ["leaf1", "spine1"] {
        let before = ce_items(&t, &held[..1], dev);
        let after = ce_items(&t, &held, dev);
        let ports: Vec<String> = (before.iter().chain(&after))
            .filter_map(|i| i.port())
            .map(|p| p.as_str().split('.').next().unwrap().to_string())
            .collect();
        let sw = SwitchDevice::with_interfaces(
            dev,
            VrpConfig::parse(&HuaweiCe.render(&before)).unwrap(),
            Arc::new(Faults::new()),
            ports,
        );
        let read = || HuaweiCe.parse(dev, &sw.running_config().render()).unwrap();
        let mut s = CliSession::new(sw.clone(), "vclos");
        type_all(&mut s, &["system-view".into()]);
        // A sub-interface of a port the box does not have is refused.
        let r = s.handle_line("interface 100GE1/0/99.101");
        assert!(r.output.contains("Error: Wrong parameter"), "{}", r.output);
        type_all(&mut s, &HuaweiCe.changes(&before, &after));
        type_all(&mut s, &["commit".into()]);
        assert_eq!(read(), after, "{dev} after the joiner's plan");
        // Rolling the commit back removes the sub-interfaces.
        type_all(
            &mut s,
            &["return".into(), "rollback configuration last 1".into()],
        );
        assert_eq!(read(), before, "{dev} rolled back");
        // And b's release, typed, does the same.
        let sw2 = SwitchDevice::new(
            dev,
            VrpConfig::parse(&HuaweiCe.render(&after)).unwrap(),
            Arc::new(Faults::new()),
        );
        let mut s = CliSession::new(sw2.clone(), "vclos");
        type_all(&mut s, &["system-view".into()]);
        type_all(&mut s, &HuaweiCe.changes(&after, &before));
        type_all(&mut s, &["commit".into()]);
        let got = HuaweiCe.parse(dev, &sw2.running_config().render()).unwrap();
        assert_eq!(got, before, "{dev} after b's release");
    }
}
