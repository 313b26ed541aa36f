//! The Layer-2/Layer-3 redirect rule and the next-hop form (module doc).
#![allow(clippy::unwrap_used)]

use super::*;

/// A leaf with server port 1 and uplink 17 (/31 10.0.0.0, peer 10.0.0.1)
/// and a vclos policy on port 1 whose behavior holds `action`; port 1 is
/// routed when `routed`.
fn leaf(action: &str, routed: bool) -> String {
    let l3 = if routed { " undo portswitch\n" } else { "" };
    format!(
        "#\nsysname leaf1\n#\nacl name v-j1-p1 advance\n rule 5 permit ip destination 10.128.1.0 0.0.0.255\n#\n\
         traffic classifier v-j1-p1 type or\n if-match acl v-j1-p1\n#\n\
         traffic behavior v-j1-p1\n {action}\n#\n\
         traffic policy v-j1-p1\n classifier v-j1-p1 behavior v-j1-p1\n#\n\
         interface 100GE1/0/1\n{l3} ip address 10.128.0.0 31\n traffic-policy v-j1-p1 inbound\n#\n\
         interface 100GE1/0/17\n undo portswitch\n ip address 10.0.0.0 31\n#\n\
         interface 100GE1/0/18\n undo portswitch\n ip address 10.0.0.2 31\n#\nreturn\n"
    )
}

fn redirect_uplink(text: &str) -> Option<String> {
    HuaweiCe
        .parse("leaf1", text)
        .unwrap()
        .into_iter()
        .find_map(|i| match i {
            Item::Redirect { uplink, .. } => Some(uplink.to_string()),
            _ => None,
        })
}

#[test]
fn redirect_interface_on_a_routed_port_steers_nothing() {
    let text = leaf("redirect interface 100GE1/0/17", true);
    assert_eq!(redirect_uplink(&text), None, "{text}");
    // The same behavior on a Layer-2 port acts (Layer-2 forwarding).
    let l2 = leaf("redirect interface 100GE1/0/17", false);
    assert_eq!(redirect_uplink(&l2).as_deref(), Some("100GE1/0/17"));
}

#[test]
fn next_hop_redirect_maps_to_the_uplink_holding_it() {
    for routed in [true, false] {
        let text = leaf("redirect nexthop 10.0.0.3", routed);
        assert_eq!(redirect_uplink(&text).as_deref(), Some("100GE1/0/18"));
    }
    // Options after the address do not change the primary next hop.
    let text = leaf(
        "redirect nexthop 10.0.0.1 10.0.0.3 fail-action discard",
        true,
    );
    assert_eq!(redirect_uplink(&text).as_deref(), Some("100GE1/0/17"));
    // A next hop on no addressed port, or the leaf's own address, steers
    // nowhere vclos knows.
    assert_eq!(
        redirect_uplink(&leaf("redirect nexthop 10.9.9.9", true)),
        None
    );
    assert_eq!(
        redirect_uplink(&leaf("redirect nexthop 10.0.0.0", true)),
        None
    );
    // A next hop in a VPN instance is looked up in that instance only.
    let vpn = leaf("redirect vpn-instance Vrf-x nexthop 10.0.0.1", true);
    assert_eq!(redirect_uplink(&vpn), None);
    // A malformed next hop is a parse error naming the line.
    let bad = HuaweiCe
        .parse("leaf1", &leaf("redirect nexthop 10.0.0.300", true))
        .unwrap_err();
    assert!(bad.to_string().contains("10.0.0.300"), "{bad}");
}

#[test]
fn render_writes_the_uplink_peer_and_round_trips() {
    let items = HuaweiCe
        .parse("leaf1", &leaf("redirect nexthop 10.0.0.1", true))
        .unwrap();
    let text = HuaweiCe.render(&items);
    assert!(
        text.contains("traffic behavior v-j1-p1\n redirect nexthop 10.0.0.1\n"),
        "{text}"
    );
    assert!(!text.contains("redirect interface"), "{text}");
    assert_eq!(HuaweiCe.parse("leaf1", &text).unwrap(), items);
}

#[test]
fn a_plan_rewrites_an_interface_redirect_on_a_routed_port() {
    let intent = HuaweiCe
        .parse("leaf1", &leaf("redirect nexthop 10.0.0.1", true))
        .unwrap();
    let old = HuaweiCe
        .parse("leaf1", &leaf("redirect interface 100GE1/0/17", true))
        .unwrap();
    let cmds = HuaweiCe.changes(&old, &intent);
    let at = cmds
        .iter()
        .position(|c| c == "traffic behavior v-j1-p1")
        .unwrap();
    assert_eq!(cmds[at + 1], "redirect nexthop 10.0.0.1", "{cmds:#?}");
}

#[test]
fn a_moved_uplink_address_rewrites_the_next_hop() {
    let old = HuaweiCe
        .parse("leaf1", &leaf("redirect nexthop 10.0.0.1", true))
        .unwrap();
    let mut new = old.clone();
    let up = PortName::new("100GE1/0/17").unwrap();
    new.retain(|i| !matches!(i, Item::Address { port, .. } if *port == up));
    new.insert(Item::Address {
        port: up,
        vrf: None,
        net: "10.0.0.9/31".parse().unwrap(),
    });
    let cmds = HuaweiCe.changes(&old, &new);
    let addr = cmds
        .iter()
        .position(|c| c == "ip address 10.0.0.9 31")
        .unwrap();
    let at = cmds
        .iter()
        .position(|c| c == "traffic behavior v-j1-p1")
        .unwrap();
    assert!(addr < at, "{cmds:#?}");
    assert_eq!(cmds[at + 1], "redirect nexthop 10.0.0.8", "{cmds:#?}");
}

// ---- Sub-interfaces (module doc, "Sub-interfaces") ----

use crate::emulator::vrp::{VrpConfig, VrpError};

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
