//! The Huawei CE dialect's sub-interface changes, typed into the emulated
//! CE ([`super::vrp`]) as the driver types them: the commands the dialect
//! writes are ones the device accepts, in an order it accepts
//! (`crate::dialect::huawei_ce` module doc, "Sub-interfaces").
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use super::vrp::{VrpConfig, VrpError};
use crate::dialect::huawei_ce::HuaweiCe;
use crate::dialect::Dialect;
use crate::intent::{Item, PortName, VrfName};

// ---- Sub-interfaces (module doc, "Sub-interfaces") ----

/// Leaf: job a on the main uplink 17, job b's server port 2 redirected to
/// its sub-interface 17.101 (peer 172.16.0.3).
const LEAF: &str = "#\nsysname leaf1\n#\n\
acl name v-b-p2 advance\n rule 5 permit ip destination 10.128.2.0 0.0.0.255\n#\n\
traffic classifier v-b-p2 type or\n if-match acl v-b-p2\n#\n\
traffic behavior v-b-p2\n redirect nexthop 172.16.0.3\n#\n\
traffic policy v-b-p2\n classifier v-b-p2 behavior v-b-p2\n#\n\
interface 100GE1/0/2\n undo portswitch\n ip address 10.128.1.2 31\n traffic-policy v-b-p2 inbound\n#\n\
interface 100GE1/0/17\n description spine1:100GE1/0/1\n undo portswitch\n ip address 10.0.0.0 31\n#\n\
interface 100GE1/0/17.101\n dot1q termination vid 101\n ip address 172.16.0.2 31\n#\n\
interface 100GE1/0/18\n undo portswitch\n ip address 10.0.0.2 31\n#\nreturn\n";

/// Spine: job a's VRF on the main port, job b's on the sub-interface.
const SPINE: &str = "#\nsysname spine1\n#\n\
ip vpn-instance Vrf-a\n ipv4-family\n  route-distinguisher 65000:1\n#\n\
ip vpn-instance Vrf-b\n ipv4-family\n  route-distinguisher 65000:2\n#\n\
interface 100GE1/0/1\n undo portswitch\n ip binding vpn-instance Vrf-a\n ip address 10.0.0.1 31\n#\n\
interface 100GE1/0/1.101\n dot1q termination vid 101\n ip binding vpn-instance Vrf-b\n ip address 172.16.0.3 31\n#\n\
ip route-static vpn-instance Vrf-b 10.128.1.0 24 172.16.0.2\n#\nreturn\n";

fn items(text: &str) -> BTreeSet<Item> {
    HuaweiCe.parse("dev", text).unwrap()
}

/// The uplink the (one) redirect of `text` steers to.
fn redirect_uplink(text: &str) -> Option<String> {
    let redirect = |i: Item| match i {
        Item::Redirect { uplink, .. } => Some(uplink.to_string()),
        _ => None,
    };
    items(text).into_iter().find_map(redirect)
}

fn p(s: &str) -> PortName {
    PortName::new(s).unwrap()
}

fn subif(s: &str, vlan: u16) -> Item {
    Item::Subinterface { port: p(s), vlan }
}

/// Items without those on `port` (and the redirects onto it, the VRF
/// and routes of `vrf`): the device before the joiner arrived.
fn without(items: &BTreeSet<Item>, port: &str, vrf: &str) -> BTreeSet<Item> {
    items
        .iter()
        .filter(|i| i.port().is_none_or(|q| q.as_str() != port))
        .filter(|i| !matches!(i, Item::Redirect { uplink, .. } if uplink.as_str() == port))
        .filter(|i| !i.to_string().contains(vrf))
        .cloned()
        .collect()
}

/// Type `cmds` from system view into `cfg` as the driver does (`quit`
/// leaves a view).
fn type_into(cfg: &mut VrpConfig, cmds: &[String]) -> Result<(), (String, VrpError)> {
    let mut cursor = Vec::new();
    for c in cmds {
        if c == "quit" {
            cursor.pop();
        } else {
            cfg.apply(&mut cursor, c).map_err(|e| (c.clone(), e))?;
        }
    }
    Ok(())
}

/// The running items' display loaded into the emulator, `changes`
/// applied, and the result read back.
fn applied(running: &BTreeSet<Item>, candidate: &BTreeSet<Item>) -> BTreeSet<Item> {
    let mut cfg = VrpConfig::parse(&HuaweiCe.render(running)).unwrap();
    let cmds = HuaweiCe.changes(running, candidate);
    type_into(&mut cfg, &cmds).unwrap_or_else(|e| panic!("{e:?} in {cmds:#?}"));
    HuaweiCe.parse("dev", &cfg.render()).unwrap()
}

#[test]
fn subinterfaces_are_read_with_their_address_vrf_and_redirect() {
    let leaf = items(LEAF);
    assert!(leaf.contains(&subif("100GE1/0/17.101", 101)));
    assert!(leaf.contains(&Item::Address {
        port: p("100GE1/0/17.101"),
        vrf: None,
        net: "172.16.0.2/31".parse().unwrap(),
    }));
    assert_eq!(redirect_uplink(LEAF).as_deref(), Some("100GE1/0/17.101"));
    let spine = items(SPINE);
    assert!(spine.contains(&subif("100GE1/0/1.101", 101)));
    assert!(spine.contains(&Item::Address {
        port: p("100GE1/0/1.101"),
        vrf: Some(VrfName::new("Vrf-b").unwrap()),
        net: "172.16.0.3/31".parse().unwrap(),
    }));
}

#[test]
fn subinterfaces_render_after_their_port_and_round_trip_through_the_emulator() {
    for text in [LEAF, SPINE] {
        let items = items(text);
        let out = HuaweiCe.render(&items);
        // The device lists a sub-interface right after its main interface,
        // its VLAN termination first in vclos's rendering.
        let main = out.find("interface 100GE1/0/").unwrap();
        let sub = out.find(".101\n dot1q termination vid 101\n").unwrap();
        assert!(main < sub, "{out}");
        if text == LEAF {
            let next = out.find("interface 100GE1/0/18\n").unwrap();
            assert!(out.find("interface 100GE1/0/17\n").unwrap() < sub && sub < next);
        }
        assert_eq!(HuaweiCe.parse("dev", &out).unwrap(), items);
        // The emulated device accepts the text and displays it back.
        let emu = VrpConfig::parse(&out).unwrap().render();
        assert_eq!(HuaweiCe.parse("dev", &emu).unwrap(), items, "{emu}");
    }
}

#[test]
fn a_subinterface_terminating_no_vlan_of_its_name_is_not_read() {
    let ok = "interface 100GE1/0/17.101\n dot1q termination vid 101\n";
    for bad in [
        "interface 100GE1/0/17.101\n",
        "interface 100GE1/0/17.101\n dot1q termination vid 102\n",
    ] {
        let text = LEAF.replace(ok, bad);
        let items = items(&text);
        // Neither the sub-interface nor its address: the redirect through
        // it resolves nowhere and is not read either.
        assert!(
            items
                .iter()
                .all(|i| i.port().is_none_or(|q| q.as_str() != "100GE1/0/17.101")),
            "{items:#?}"
        );
        assert_eq!(redirect_uplink(&text), None);
        // The plan types the termination and the address again.
        let cmds = HuaweiCe.changes(&items, &self::items(LEAF));
        assert!(cmds.contains(&"dot1q termination vid 101".to_string()));
        assert!(cmds.contains(&"ip address 172.16.0.2 31".to_string()));
    }
    // A range holding the VLAN terminates it.
    let range = LEAF.replace("vid 101\n", "vid 100 to 102\n");
    assert_eq!(redirect_uplink(&range).as_deref(), Some("100GE1/0/17.101"));
    // A sub-interface of a Layer-2 main interface forwards nothing.
    let l2 = LEAF.replace(
        "description spine1:100GE1/0/1\n undo portswitch\n",
        "description spine1:100GE1/0/1\n",
    );
    assert!(!self::items(&l2).contains(&subif("100GE1/0/17.101", 101)));
    assert_eq!(redirect_uplink(&l2), None);
    // A malformed VLAN id is an error naming the line.
    let e = HuaweiCe
        .parse("leaf1", &LEAF.replace("vid 101\n", "vid 5000\n"))
        .unwrap_err();
    assert!(e.to_string().contains("5000"), "{e}");
}

fn at(cmds: &[String], line: &str) -> usize {
    cmds.iter()
        .position(|c| c == line)
        .unwrap_or_else(|| panic!("no `{line}` in {cmds:#?}"))
}

/// The plan from `from` to `to`: it holds `lines` in this order, and
/// typed into the emulator it reads back as `to`.
fn plan(from: &BTreeSet<Item>, to: &BTreeSet<Item>, lines: &[&str]) -> Vec<String> {
    let cmds = HuaweiCe.changes(from, to);
    let pos: Vec<usize> = lines.iter().map(|l| at(&cmds, l)).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{cmds:#?}");
    assert_eq!(&applied(from, to), to);
    cmds
}

#[test]
fn adding_a_subinterface_creates_it_before_its_address_and_behavior() {
    let full = items(LEAF);
    let before = without(&full, "100GE1/0/17.101", "Vrf-b");
    plan(
        &before,
        &full,
        &[
            "interface 100GE1/0/17.101",
            "dot1q termination vid 101",
            "ip address 172.16.0.2 31",
            "traffic behavior v-b-p2",
            "redirect nexthop 172.16.0.3",
            "traffic-policy v-b-p2 inbound",
        ],
    );

    let spine = items(SPINE);
    let before = without(&spine, "100GE1/0/1.101", "Vrf-b");
    plan(
        &before,
        &spine,
        &[
            "ip vpn-instance Vrf-b",
            "interface 100GE1/0/1.101",
            "dot1q termination vid 101",
            "ip binding vpn-instance Vrf-b",
            "ip address 172.16.0.3 31",
            "ip route-static vpn-instance Vrf-b 10.128.1.0 24 172.16.0.2",
        ],
    );
}

#[test]
fn removing_a_subinterface_unbinds_its_users_first_and_its_vrf_last() {
    let full = items(LEAF);
    let after = without(&full, "100GE1/0/17.101", "Vrf-b");
    let cmds = plan(
        &full,
        &after,
        &[
            "undo traffic-policy v-b-p2 inbound",
            "undo traffic behavior v-b-p2",
            "undo interface 100GE1/0/17.101",
        ],
    );
    // Deleted whole: no line-by-line undo inside it.
    assert!(!cmds.iter().any(|c| c == "undo ip address 172.16.0.2 31"));

    let spine = items(SPINE);
    let after = without(&spine, "100GE1/0/1.101", "Vrf-b");
    plan(
        &spine,
        &after,
        &[
            "undo ip route-static vpn-instance Vrf-b 10.128.1.0 24 172.16.0.2",
            "undo interface 100GE1/0/1.101",
            "undo ip vpn-instance Vrf-b",
        ],
    );
}

#[test]
fn a_subinterface_moved_to_another_vlan_keeps_its_view() {
    let full = items(LEAF);
    let mut moved = full.clone();
    moved.remove(&subif("100GE1/0/17.101", 101));
    moved.insert(subif("100GE1/0/17.101", 102));
    let cmds = HuaweiCe.changes(&full, &moved);
    assert!(
        !cmds.iter().any(|c| c.starts_with("undo interface")),
        "{cmds:#?}"
    );
    assert!(at(&cmds, "undo dot1q termination vid 101") < at(&cmds, "dot1q termination vid 102"));
    // On the device it terminates 102 now, so vclos (whose sub-interface
    // names carry their VLAN) no longer reads it as its own.
    let mut cfg = VrpConfig::parse(&HuaweiCe.render(&full)).unwrap();
    type_into(&mut cfg, &cmds).unwrap();
    assert!(cfg.render().contains(
        "interface 100GE1/0/17.101\n ip address 172.16.0.2 31\n dot1q termination vid 102\n"
    ));
}
