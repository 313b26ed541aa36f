//! Steering vclos did not write, on the emulated fabric over the real
//! drivers (docs/devices/foreign-steering.md): a hand-made redirect on a
//! leaf (a Huawei CE traffic policy typed over the CLI, a SONiC ACL applied
//! as a JSON Patch, an OpenConfig forwarding policy over NETCONF) makes the
//! uplink it redirects onto busy (the emulated OCS refuses to move its
//! link), `reconcile` lists it as drift naming device, port and policy, an
//! apply that must configure its port (or rewire the link it steers onto)
//! is refused before anything is sent, and `reconcile --fix` refuses to
//! configure its port.
#![allow(clippy::unwrap_used)]

#[path = "lifecycle_common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use vclos::controller::{DriverFactory, NoProgress};
use vclos::emulator::ocs::OcsError;
use vclos::intent::{Item, PortName};
use vclos::jobs::{foreign, Fabric, ForeignConflict, JobsError};
use vclos::names::JobId;
use vclos::plan::Plan;
use vclos::topology::{Dialect, OcsId};
use vclos_drivers::LoadMode;

const POLICY: &str = "FOREIGN-P";

/// testbed-ocs with leaf1 speaking OpenConfig over NETCONF.
fn openconfig_testbed() -> String {
    let mut lines: Vec<&str> = common::TESTBED.lines().collect();
    let at = lines.iter().position(|l| *l == "  - name: leaf1").unwrap();
    lines[at + 1] =
        "    mgmt: {host: 127.0.0.1, port: 830, protocol: netconf, dialect: openconfig, credential: lab}";
    lines.join("\n")
}

fn dialect_of(emu: &common::Emu, device: &str) -> Dialect {
    emu.topo
        .device(emu.topo.device_id(device).unwrap())
        .mgmt
        .dialect
}

/// Load `payload` on `device` through its real driver and commit.
async fn push(emu: &common::Emu, device: &str, payload: &str) {
    let mut drv = emu.drivers().driver(device).unwrap();
    drv.open().await.unwrap();
    drv.load_candidate(payload, LoadMode::Merge)
        .await
        .unwrap_or_else(|e| panic!("{device}: {e}\n{payload}"));
    drv.commit(None).await.unwrap();
    drv.close().await.unwrap();
}

/// `vclos ARGS --topology emu.yaml --state DIR` through the binary (off the
/// runtime serving the emulated fabric): success and stdout + stderr.
async fn cli(emu: &common::Emu, args: &[&str]) -> (bool, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_vclos"));
    cmd.args(args)
        .arg("--topology")
        .arg(emu.dir.path().join("emu.yaml"))
        .arg("--state")
        .arg(emu.state_dir());
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The device's running items, parsed in its dialect.
fn items(emu: &common::Emu, device: &str) -> BTreeSet<Item> {
    let sw = emu.fab.switch(device).unwrap();
    sw.items(dialect_of(emu, device)).unwrap()
}

/// The peer address on `port`'s /31 (a next hop through it).
fn peer(emu: &common::Emu, device: &str, port: &str) -> Ipv4Addr {
    items(emu, device)
        .iter()
        .find_map(|i| match i {
            Item::Address { port: p, net, .. } if p.as_str() == port => Some(net.other_end()),
            _ => None,
        })
        .unwrap()
}

/// A hand-made policy `POLICY` on `port` of `device` redirecting onto
/// `onto`, in the device's own language. `next_hop` selects the next-hop
/// form (CE and SONiC; OpenConfig always names a next hop).
fn foreign_payload(
    emu: &common::Emu,
    device: &str,
    port: &str,
    onto: &str,
    next_hop: bool,
) -> String {
    let hop = peer(emu, device, onto);
    match dialect_of(emu, device) {
        Dialect::HuaweiCe => {
            let redirect = if next_hop {
                format!("redirect nexthop {hop}")
            } else {
                format!("redirect interface {onto}")
            };
            format!(
                "traffic classifier FOREIGN-C type or\nif-match any\nquit\n\
                 traffic behavior FOREIGN-B\n{redirect}\nquit\n\
                 traffic policy {POLICY}\nclassifier FOREIGN-C behavior FOREIGN-B\nquit\n\
                 interface {port}\ntraffic-policy {POLICY} inbound\nquit\n"
            )
        }
        Dialect::Sonic => {
            let running = emu.fab.switch(device).unwrap().running_text();
            let db: serde_json::Value = serde_json::from_str(&running).unwrap();
            let action = if next_hop {
                format!(r#""REDIRECT_ACTION":"{hop}""#)
            } else {
                format!(r#""PACKET_ACTION":"REDIRECT:{onto}""#)
            };
            let mut ops = vec![format!(
                r#"{{"op":"add","path":"/ACL_TABLE/{POLICY}","value":{{"type":"L3","stage":"ingress","ports":["{port}"],"policy_desc":"hand-made"}}}}"#
            )];
            if db.get("ACL_RULE").is_none() {
                ops.push(r#"{"op":"add","path":"/ACL_RULE","value":{}}"#.into());
            }
            ops.push(format!(
                r#"{{"op":"add","path":"/ACL_RULE/{POLICY}|RULE_1","value":{{"PRIORITY":"100","IP_TYPE":"IPV4ANY",{action}}}}}"#
            ));
            ops.join("\n") + "\n"
        }
        Dialect::Openconfig => format!(
            "<config xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\">\
             <network-instances xmlns=\"http://openconfig.net/yang/network-instance\">\
             <network-instance><name>default</name>\
             <config><name>default</name>\
             <type xmlns:oc-ni-types=\"http://openconfig.net/yang/network-instance-types\">oc-ni-types:DEFAULT_INSTANCE</type></config>\
             <policy-forwarding><policies><policy><policy-id>{POLICY}</policy-id>\
             <config><policy-id>{POLICY}</policy-id></config>\
             <rules><rule><sequence-id>10</sequence-id><config><sequence-id>10</sequence-id></config>\
             <action><config><next-hop>{hop}</next-hop></config></action></rule></rules>\
             </policy></policies>\
             <interfaces><interface><interface-id>{port}</interface-id>\
             <config><interface-id>{port}</interface-id><apply-forwarding-policy>{POLICY}</apply-forwarding-policy></config>\
             </interface></interfaces></policy-forwarding></network-instance></network-instances></config>"
        ),
        Dialect::Tl1 => unreachable!("an OCS carries no steering"),
    }
}

fn foreign_item(port: &str, onto: &str) -> Item {
    Item::ForeignSteering {
        port: PortName::new(port).unwrap(),
        policy: POLICY.into(),
        target: Some(PortName::new(onto).unwrap()),
    }
}

/// The plan of a 24-GPU OCS-vClos job on the fresh testbed: leaf source
/// routes on both leaves and OCS rewiring.
fn plan(f: &Fabric) -> Plan {
    let p = f.plan_submit(&JobId::new("j").unwrap(), 24).unwrap();
    assert!(
        p.devices.iter().any(|d| d.diff.device == "ocs1"),
        "no OCS rewiring"
    );
    p
}

/// A server port of `leaf` that the plan gives a vclos source route.
fn routed_server_port(p: &Plan, leaf: &str) -> String {
    p.devices
        .iter()
        .filter(|d| d.diff.device == leaf)
        .flat_map(|d| &d.diff.added)
        .find_map(|i| match i {
            Item::Redirect { port, .. } => Some(port.to_string()),
            _ => None,
        })
        .unwrap()
}

/// The apply of `p` is refused with a conflict on `device`:`port` naming
/// the foreign policy, and nothing changed anywhere.
async fn assert_refused(emu: &common::Emu, f: &mut Fabric, p: &Plan, device: &str, port: &str) {
    let configs = emu.configs(f).await;
    let state = emu.state_bytes();
    let patches = emu.fab.ocs(OcsId(0)).patches();
    let err = f.apply(p, &NoProgress).await.unwrap_err();
    let text = err.to_string();
    let JobsError::ForeignSteering(conflicts) = err else {
        panic!("not a foreign-steering refusal: {text}");
    };
    let hit: Vec<&ForeignConflict> = conflicts
        .iter()
        .filter(|c| c.device == device && c.port == port && c.policy == POLICY)
        .collect();
    assert!(!hit.is_empty(), "{conflicts:?}");
    for w in [device, port, POLICY] {
        assert!(text.contains(w), "{w} not named in: {text}");
    }
    assert_eq!(emu.configs(f).await, configs, "a device changed");
    assert_eq!(emu.state_bytes(), state, "state.json changed");
    assert_eq!(emu.fab.ocs(OcsId(0)).patches(), patches, "the OCS changed");
    assert!(f.pending_journal().await.unwrap().is_none());
    assert!(f.state().decision(&p.job).is_none());
}

/// Foreign steering of leaf1's server port `port` onto uplink 1 (cabled to
/// ocs1 port index 0, patched to index 32): the OCS refuses to disconnect
/// that link, and reconcile lists the policy.
async fn steer_onto_first_uplink(emu: &common::Emu, f: &mut Fabric, port: &str, next_hop: bool) {
    let leaf = &emu.topo.leaves[0];
    let uplink = leaf.uplinks[0].clone();
    let ocs = emu.fab.ocs(OcsId(0));
    // Idle before: the link may be moved (and is put back).
    ocs.disconnect(0).await.unwrap();
    ocs.connect(0, 32).await.unwrap();
    push(
        emu,
        "leaf1",
        &foreign_payload(emu, "leaf1", port, &uplink, next_hop),
    )
    .await;
    assert!(
        matches!(ocs.disconnect(0).await, Err(OcsError::Busy { .. })),
        "the foreign redirect onto {uplink} does not make its link busy"
    );
    assert_eq!(ocs.partner(0), Some(32));
    let r = f.reconcile(false, &NoProgress).await.unwrap();
    let d = r.drift.iter().find(|d| d.device == "leaf1").unwrap();
    assert_eq!(d.foreign, vec![foreign_item(port, &uplink)], "{d:?}");
    assert!(d.holds_intent(), "{d:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huawei_ce_traffic_policy_counts_is_reported_and_stops_apply_and_fix() {
    let emu = common::emu(Duration::ZERO).await;
    let mut f = emu.fabric().await;
    let p = plan(&f);
    let port = routed_server_port(&p, "leaf1");
    steer_onto_first_uplink(&emu, &mut f, &port, true).await;
    // The command line names device, port and policy, and says vclos
    // leaves it alone.
    let uplink = emu.topo.leaves[0].uplinks[0].clone();
    for cmd in ["reconcile", "status"] {
        let (ok, out) = cli(&emu, &[cmd]).await;
        assert!(!ok, "{cmd}: {out}");
        let line = out
            .lines()
            .find(|l| l.contains("! foreign"))
            .unwrap_or_default();
        for w in [port.as_str(), POLICY, &*uplink] {
            assert!(line.contains(w), "{cmd}: {w} not in {line:?}\n{out}");
        }
        assert!(
            out.contains("leaf1") && out.contains("never deleted"),
            "{out}"
        );
    }
    assert_refused(&emu, &mut f, &p, "leaf1", &port).await;

    // `reconcile --fix` that must configure the port refuses, sends nothing.
    let description = items(&emu, "leaf1")
        .iter()
        .find_map(|i| match i {
            Item::Description { port: p, text } if p.as_str() == port => Some(text.to_string()),
            _ => None,
        })
        .unwrap();
    push(
        &emu,
        "leaf1",
        &format!("interface {port}\nundo description\nquit\n"),
    )
    .await;
    let before = emu.configs(&f).await;
    let r = f.reconcile(true, &NoProgress).await.unwrap();
    assert!(r.fix.is_none(), "{r:?}");
    assert!(
        r.fix_refused
            .iter()
            .any(|c| c.device == "leaf1" && c.port == port && c.policy == POLICY),
        "{r:?}"
    );
    assert_eq!(emu.configs(&f).await, before);
    let (ok, out) = cli(&emu, &["reconcile", "--fix"]).await;
    assert!(!ok, "{out}");
    let refused = out.split("--fix REFUSED").nth(1).unwrap_or_default();
    for w in ["leaf1", &port, POLICY] {
        assert!(refused.contains(w), "{w} not named: {out}");
    }
    assert_eq!(emu.configs(&f).await, before);
    push(
        &emu,
        "leaf1",
        &format!("interface {port}\ndescription {description}\nquit\n"),
    )
    .await;

    // Rewriting the behavior keeps it counted: it resolves to the same uplink.
    let uplink = emu.topo.leaves[0].uplinks[0].clone();
    let hop = peer(&emu, "leaf1", &uplink);
    push(
        &emu,
        "leaf1",
        &format!("traffic behavior FOREIGN-B\nundo redirect\nredirect nexthop {hop}\nquit\n"),
    )
    .await;
    assert!(items(&emu, "leaf1").contains(&foreign_item(&port, &uplink)));
    assert!(matches!(
        emu.fab.ocs(OcsId(0)).disconnect(0).await,
        Err(OcsError::Busy { .. })
    ));

    // The OCS guard: foreign steering onto an uplink whose link the plan
    // rewires, from a port the plan does not configure.
    let touched = foreign::touched(&emu.topo, &p.devices);
    let (dev, rewired) = touched
        .iter()
        .filter(|(d, _)| d.starts_with("leaf"))
        .find_map(|(d, ports)| {
            ports
                .iter()
                .find(|(_, why)| why.contains("rewires"))
                .map(|(port, _)| (d.clone(), port.to_string()))
        })
        .unwrap();
    let leaf = emu.topo.leaves.iter().find(|l| *l.name == *dev).unwrap();
    let free = leaf
        .server_ports
        .iter()
        .chain(&leaf.uplinks)
        .find(|q| !touched[&dev].contains_key(&PortName::new(&***q).unwrap()))
        .unwrap()
        .clone();
    push(
        &emu,
        "leaf1",
        &format!("interface {port}\nundo traffic-policy {POLICY} inbound\nquit\n"),
    )
    .await;
    push(
        &emu,
        &dev,
        &foreign_payload(&emu, &dev, &free, &rewired, true),
    )
    .await;
    assert_refused(&emu, &mut f, &p, &dev, &rewired).await;

    // Once the foreign policy is gone, the same plan applies.
    push(
        &emu,
        &dev,
        &format!("interface {free}\nundo traffic-policy {POLICY} inbound\nquit\n"),
    )
    .await;
    let r = f.apply(&p, &NoProgress).await.unwrap();
    assert!(r.is_committed(), "{r}");
}

/// A hand-made `redirect interface` policy on a routed CE port steers
/// nothing on a real switch (Layer-2 only, Huawei "Overview of
/// Redirection"): the uplink stays idle for the OCS, yet the policy is
/// foreign configuration on a port vclos must configure, so it is
/// reported (target unresolved) and the apply is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huawei_ce_layer2_redirect_on_a_routed_port_is_foreign_but_not_busy() {
    let emu = common::emu(Duration::ZERO).await;
    let mut f = emu.fabric().await;
    let p = plan(&f);
    let port = routed_server_port(&p, "leaf1");
    let uplink = emu.topo.leaves[0].uplinks[0].clone();
    push(
        &emu,
        "leaf1",
        &foreign_payload(&emu, "leaf1", &port, &uplink, false),
    )
    .await;
    let ocs = emu.fab.ocs(OcsId(0));
    ocs.disconnect(0)
        .await
        .expect("a Layer-2 redirect on a routed port does not make its link busy");
    ocs.connect(0, 32).await.unwrap();
    let r = f.reconcile(false, &NoProgress).await.unwrap();
    let d = r.drift.iter().find(|d| d.device == "leaf1").unwrap();
    let unresolved = Item::ForeignSteering {
        port: PortName::new(&port).unwrap(),
        policy: POLICY.into(),
        target: None,
    };
    assert_eq!(d.foreign, vec![unresolved], "{d:?}");
    assert_refused(&emu, &mut f, &p, "leaf1", &port).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sonic_acl_counts_is_reported_and_stops_apply() {
    let emu = common::emu_on(common::SONIC, Duration::ZERO).await;
    let mut f = emu.fabric().await;
    let p = plan(&f);
    let port = routed_server_port(&p, "leaf1");
    steer_onto_first_uplink(&emu, &mut f, &port, false).await;
    assert_refused(&emu, &mut f, &p, "leaf1", &port).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openconfig_forwarding_policy_counts_is_reported_and_stops_apply() {
    let yaml = openconfig_testbed();
    let emu = common::emu_on(&yaml, Duration::ZERO).await;
    let mut f = emu.fabric().await;
    let p = plan(&f);
    let port = routed_server_port(&p, "leaf1");
    steer_onto_first_uplink(&emu, &mut f, &port, true).await;
    assert_refused(&emu, &mut f, &p, "leaf1", &port).await;
}
