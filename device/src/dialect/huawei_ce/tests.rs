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
