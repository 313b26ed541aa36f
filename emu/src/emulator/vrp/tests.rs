#![allow(clippy::unwrap_used)]

use super::*;

fn typed(cfg: &mut VrpConfig, lines: &[&str]) -> Vec<String> {
    let mut cursor = Vec::new();
    for l in lines {
        cfg.apply(&mut cursor, l).unwrap();
    }
    cursor
}

#[test]
fn display_format_matches_the_contract() {
    let mut cfg = VrpConfig::new("LEAF1");
    typed(
        &mut cfg,
        &[
            "traffic policy P1",
            "interface 100GE1/0/1",
            " traffic-policy P1 inbound",
            "acl number 3001",
            " rule 5 permit ip source 10.1.0.0 0.0.255.255",
            "ip vpn-instance JOB7",
            " ipv4-family",
            "  route-distinguisher 65000:7",
            "ip route-static vpn-instance JOB7 10.7.16.0 24 10.7.0.0",
        ],
    );
    let want = "\
#
sysname LEAF1
#
ip vpn-instance JOB7
 ipv4-family
  route-distinguisher 65000:7
#
acl number 3001
 rule 5 permit ip source 10.1.0.0 0.0.255.255
#
traffic policy P1
#
interface 100GE1/0/1
 traffic-policy P1 inbound
#
ip route-static vpn-instance JOB7 10.7.16.0 24 10.7.0.0
#
return
";
    assert_eq!(cfg.render(), want);
    // The display text parses back to the same tree.
    assert_eq!(VrpConfig::parse(want).unwrap(), cfg);
}

#[test]
fn parent_view_commands_leave_the_current_view() {
    let mut cfg = VrpConfig::new("S");
    let cursor = typed(
        &mut cfg,
        &[
            "acl number 3001",
            "rule 5 permit ip",
            "interface 100GE1/0/2",
        ],
    );
    assert_eq!(cursor, vec!["interface 100GE1/0/2".to_string()]);
    let mut c = vec!["ip vpn-instance V".to_string()];
    cfg.apply(&mut Vec::new(), "ip vpn-instance V").unwrap();
    cfg.apply(&mut c, "ipv4-family").unwrap();
    assert_eq!(
        c,
        vec!["ip vpn-instance V".to_string(), "ipv4-family".to_string()]
    );
    // ipv4-family is not a system-view command.
    assert_eq!(
        cfg.apply(&mut Vec::new(), "ipv4-family"),
        Err(VrpError::Unrecognized { column: 0 })
    );
}

#[test]
fn entering_an_existing_view_reuses_it() {
    let mut cfg = VrpConfig::new("S");
    typed(
        &mut cfg,
        &["traffic classifier C1 type or", "if-match acl 3001"],
    );
    typed(&mut cfg, &["traffic classifier C1", "if-match acl 3002"]);
    let views: Vec<_> = cfg.top.iter().filter(|n| n.view).collect();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].text, "traffic classifier C1 type or");
    assert_eq!(views[0].children.len(), 2);
}

#[test]
fn undo_removes_exact_then_prefix_and_fails_when_absent() {
    let mut cfg = VrpConfig::new("S");
    let mut c = typed(
        &mut cfg,
        &["interface 100GE1/0/1", "description uplink to spine"],
    );
    cfg.apply(&mut c, "undo description").unwrap();
    assert!(!cfg.render().contains("description"));
    assert_eq!(
        cfg.apply(&mut c, "undo description"),
        Err(VrpError::NotExist)
    );
    // Undoing a view header removes the whole view.
    typed(&mut cfg, &["acl number 3001", "rule 5 permit ip"]);
    cfg.apply(&mut Vec::new(), "undo acl number 3001").unwrap();
    assert!(!cfg.render().contains("acl"));
    assert_eq!(
        cfg.apply(&mut Vec::new(), "undo acl number 3001"),
        Err(VrpError::NotExist)
    );
}

#[test]
fn replace_keys_overwrite_single_valued_leaves() {
    let mut cfg = VrpConfig::new("S");
    typed(
        &mut cfg,
        &[
            "interface 100GE1/0/1",
            "description a",
            "description b",
            "undo portswitch",
            "ip address 10.0.0.1 31",
            "ip address 10.0.0.3 31",
        ],
    );
    let r = cfg.render();
    assert!(r.contains(" description b\n") && !r.contains("description a"));
    assert!(r.contains(" ip address 10.0.0.3 31\n") && !r.contains("10.0.0.1"));
}

#[test]
fn vpn_binding_needs_the_instance_and_clears_the_address() {
    let mut cfg = VrpConfig::new("S");
    let mut c = typed(
        &mut cfg,
        &[
            "interface 100GE1/0/10",
            "undo portswitch",
            "ip address 10.7.0.1 31",
        ],
    );
    assert_eq!(
        cfg.apply(&mut c, "ip binding vpn-instance JOB7"),
        Err(VrpError::NoVpnInstance)
    );
    typed(&mut cfg, &["ip vpn-instance JOB7", "ipv4-family"]);
    let mut c = typed(
        &mut cfg,
        &["interface 100GE1/0/10", "ip binding vpn-instance JOB7"],
    );
    assert!(!cfg.render().contains("ip address"));
    cfg.apply(&mut c, "ip address 10.7.0.1 31").unwrap();
    let r = cfg.render();
    assert!(r.contains(
        "interface 100GE1/0/10\n undo portswitch\n ip binding vpn-instance JOB7\n ip address 10.7.0.1 31\n"
    ));
    cfg.apply(&mut c, "portswitch").unwrap();
    assert!(!cfg.render().contains("undo portswitch"));
}

#[test]
fn unknown_commands_point_the_caret_at_the_command() {
    let mut cfg = VrpConfig::new("S");
    assert_eq!(
        cfg.apply(&mut Vec::new(), "frobnicate now"),
        Err(VrpError::Unrecognized { column: 0 })
    );
    assert_eq!(
        cfg.apply(&mut Vec::new(), "undo frobnicate"),
        Err(VrpError::Unrecognized { column: 5 })
    );
    assert!(matches!(
        cfg.apply(&mut Vec::new(), "interface"),
        Err(VrpError::Incomplete { .. })
    ));
}

#[test]
fn diff_marks_added_removed_and_changed_lines() {
    let mut old = VrpConfig::new("S");
    typed(
        &mut old,
        &[
            "interface 100GE1/0/1",
            "description a",
            "acl number 3001",
            "rule 5 permit ip",
        ],
    );
    let mut new = old.clone();
    typed(&mut new, &["interface 100GE1/0/1", "description b"]);
    new.apply(&mut Vec::new(), "undo acl number 3001").unwrap();
    typed(&mut new, &["ip route-static 10.0.0.0 8 10.1.1.1"]);
    let d = old.diff(&new);
    assert_eq!(
        d,
        "#\n-acl number 3001\n- rule 5 permit ip\n#\n interface 100GE1/0/1\n- description a\n+ description b\n#\n+ip route-static 10.0.0.0 8 10.1.1.1\n"
    );
    assert_eq!(new.diff(&new), "");
}

/// The error of typing `lines` (the last one fails) from system view.
fn refused(cfg: &mut VrpConfig, lines: &[&str]) -> VrpError {
    let mut cursor = Vec::new();
    let (last, before) = lines.split_last().unwrap();
    for l in before {
        cfg.apply(&mut cursor, l).unwrap();
    }
    cfg.apply(&mut cursor, last).unwrap_err()
}

#[test]
fn addresses_and_masks_are_validated() {
    let mut cfg = VrpConfig::new("S");
    let i = "interface 100GE1/0/1";
    // Ethernet interfaces start in Layer 2 mode: no address before
    // `undo portswitch`.
    assert_eq!(
        refused(&mut cfg, &[i, "ip address 10.0.0.0 31"]),
        VrpError::Layer2Interface
    );
    typed(&mut cfg, &[i, "undo portswitch"]);
    typed(&mut cfg, &["interface LoopBack0", "ip address 10.9.9.9 32"]);
    let wrong = |column| VrpError::WrongParameter { column };
    // `ip address ` is 11 wide: the caret is under the address or the mask.
    for (line, want) in [
        ("ip address 10.0.0.300 31", wrong(11)),
        ("ip address 10.0.0.1 33", wrong(20)),
        ("ip address 10.0.0.1 255.0.255.0", wrong(20)),
        ("ip address 10.0.0.0 24", wrong(11)), // the subnet's network address
        ("ip address 10.0.0.255 24", wrong(11)), // its broadcast address
        ("ip address 224.0.0.1 31", wrong(11)),
        ("ip address 10.0.0.1", VrpError::Incomplete { column: 20 }),
        (
            "ip address 10.0.0.1 31 bogus",
            VrpError::Unrecognized { column: 23 },
        ),
    ] {
        assert_eq!(refused(&mut cfg, &[i, line]), want, "{line}");
    }
    typed(
        &mut cfg,
        &[
            i,
            "ip address 10.0.0.0 31",
            "ip address 10.1.0.1 255.255.255.0",
        ],
    );
    // Static routes: a network destination, a valid next hop.
    assert_eq!(
        refused(&mut cfg, &["ip route-static 10.0.0.1 8 10.1.1.1"]),
        wrong(16)
    );
    assert_eq!(
        refused(&mut cfg, &["ip route-static 10.0.0.0 8 10.1.1"]),
        wrong(27)
    );
    assert_eq!(
        refused(
            &mut cfg,
            &["ip route-static vpn-instance NOPE 10.0.0.0 8 10.1.1.1"]
        ),
        VrpError::NoVpnInstance
    );
    typed(
        &mut cfg,
        &["ip route-static 10.0.0.0 255.0.0.0 100GE1/0/1 10.1.1.1"],
    );
}

#[test]
fn interface_names_follow_ce_numbering() {
    let mut cfg = VrpConfig::new("S");
    for bad in [
        "interface 100GE1/0",
        "interface Ethernet0",
        "interface 100GE1/0/x",
    ] {
        assert_eq!(
            refused(&mut cfg, &[bad]),
            VrpError::WrongParameter { column: 10 },
            "{bad}"
        );
    }
    typed(
        &mut cfg,
        &[
            "interface 100GE1/0/1",
            "interface 25GE1/0/1:2",
            "interface Eth-Trunk1",
            "interface Vlanif10",
            "interface LoopBack0",
        ],
    );
    // Redirecting to a malformed interface is refused as well.
    assert_eq!(
        refused(&mut cfg, &["traffic behavior B", "redirect interface eth0"]),
        VrpError::WrongParameter { column: 19 }
    );
}

#[test]
fn redirect_takes_the_documented_forms_only() {
    let mut cfg = VrpConfig::new("S");
    let b = "traffic behavior B";
    let un = |column| VrpError::Unrecognized { column };
    for (line, want) in [
        // S-series and NetEngine spellings are not CE syntax.
        ("redirect ip-nexthop 10.0.0.1", un(9)),
        ("redirect next-hop 10.0.0.1", un(9)),
        (
            "redirect nexthop 10.0.0.256",
            VrpError::WrongParameter { column: 17 },
        ),
        (
            "redirect nexthop 0.0.0.0",
            VrpError::WrongParameter { column: 17 },
        ),
        ("redirect nexthop", VrpError::Incomplete { column: 17 }),
        ("redirect nexthop 10.0.0.1 forced", un(26)),
        ("redirect nexthop 10.0.0.1 fail-action forward", un(38)),
        (
            "redirect vpn-instance V1 nexthop 10.0.0.1",
            VrpError::NoVpnInstance,
        ),
    ] {
        assert_eq!(refused(&mut cfg, &[b, line]), want, "{line}");
    }
    typed(&mut cfg, &["ip vpn-instance V1", "ipv4-family"]);
    typed(
        &mut cfg,
        &[
            b,
            "redirect nexthop 10.0.0.1",
            "redirect nexthop 10.0.0.1 10.0.0.3 fail-action discard",
            "redirect vpn-instance V1 nexthop 10.0.0.1 low-precedence",
            "redirect interface 100GE1/0/17",
        ],
    );
    // One redirect action per behavior: the last replaces the others.
    let r = cfg.render();
    assert!(
        r.contains("traffic behavior B\n redirect interface 100GE1/0/17\n#"),
        "{r}"
    );
}

#[test]
fn acl_rules_and_other_commands_are_checked() {
    let mut cfg = VrpConfig::new("S");
    let a = "acl name v-j1-p1 advance";
    assert_eq!(
        refused(&mut cfg, &[a, "rule 5 allow ip"]),
        VrpError::Unrecognized { column: 7 }
    );
    assert_eq!(
        refused(
            &mut cfg,
            &[a, "rule 5 permit ip destination 10.1.0.0 0.255.0.255"]
        ),
        VrpError::WrongParameter { column: 38 }
    );
    typed(
        &mut cfg,
        &[a, "rule 5 permit ip destination 10.128.1.0 0.0.0.255"],
    );
    assert_eq!(
        refused(&mut cfg, &["acl number 1999"]),
        VrpError::WrongParameter { column: 11 }
    );
    assert_eq!(
        refused(&mut cfg, &["traffic classifier C type xor"]),
        VrpError::Unrecognized { column: 26 }
    );
    // Commands the emulated CE does not model are not accepted silently.
    for l in [
        "snmp-agent community read public",
        "ntp-service unicast-server 1.2.3.4",
    ] {
        assert_eq!(
            refused(&mut cfg, &[l]),
            VrpError::Unrecognized { column: 0 }
        );
    }
    assert_eq!(
        refused(&mut cfg, &["interface 100GE1/0/1", "mtu 10000"]),
        VrpError::WrongParameter { column: 4 }
    );
}

#[test]
fn policies_need_their_objects_and_objects_in_use_stay() {
    let mut cfg = VrpConfig::new("S");
    assert_eq!(
        refused(&mut cfg, &["traffic policy P", "classifier C behavior B"]),
        VrpError::Missing("traffic classifier")
    );
    typed(
        &mut cfg,
        &["traffic classifier C type or", "if-match acl 3001"],
    );
    assert_eq!(
        refused(&mut cfg, &["traffic policy P", "classifier C behavior B"]),
        VrpError::Missing("traffic behavior")
    );
    assert_eq!(
        refused(
            &mut cfg,
            &["interface 100GE1/0/1", "traffic-policy Q inbound"]
        ),
        VrpError::Missing("traffic policy")
    );
    typed(
        &mut cfg,
        &[
            "traffic behavior B",
            "redirect nexthop 10.0.0.1",
            "traffic policy P",
            "classifier C behavior B",
            "interface 100GE1/0/1",
            "traffic-policy P inbound",
        ],
    );
    let mut top = Vec::new();
    for (line, what) in [
        ("undo traffic policy P", "traffic policy"),
        ("undo traffic classifier C", "traffic classifier"),
        ("undo traffic behavior B", "traffic behavior"),
    ] {
        assert_eq!(
            cfg.apply(&mut top, line),
            Err(VrpError::InUse(what)),
            "{line}"
        );
    }
    // In the order the dialect removes them, every step is accepted.
    typed(
        &mut cfg,
        &[
            "interface 100GE1/0/1",
            "undo traffic-policy P inbound",
            "undo traffic policy P",
            "undo traffic behavior B",
            "undo traffic classifier C",
        ],
    );
    assert!(!cfg.render().contains("traffic"));
}

#[test]
fn subinterfaces_need_a_layer3_main_interface() {
    let mut cfg = VrpConfig::new("S");
    let sub = "interface 100GE1/0/17.101";
    // A port not yet configured is in its default Layer 2 mode.
    assert_eq!(refused(&mut cfg, &[sub]), VrpError::MainLayer2);
    typed(&mut cfg, &["interface 100GE1/0/17", "description up"]);
    assert_eq!(refused(&mut cfg, &[sub]), VrpError::MainLayer2);
    // An Eth-Trunk that does not exist is a wrong parameter.
    assert_eq!(
        refused(&mut cfg, &["interface Eth-Trunk5.101"]),
        VrpError::WrongParameter { column: 10 }
    );
    typed(&mut cfg, &["interface 100GE1/0/17", "undo portswitch", sub]);
    assert!(cfg.render().contains("interface 100GE1/0/17.101\n"));
    // Switched to Layer 2 again, the main interface takes no new ones.
    typed(&mut cfg, &["interface 100GE1/0/17", "portswitch"]);
    assert_eq!(
        refused(&mut cfg, &["interface 100GE1/0/17.102"]),
        VrpError::MainLayer2
    );
    // An existing sub-interface's view can still be entered.
    typed(&mut cfg, &[sub, "description x"]);
}

#[test]
fn dot1q_termination_is_checked_and_one_sub_interface_per_vlan() {
    let mut cfg = VrpConfig::new("S");
    typed(&mut cfg, &["interface 100GE1/0/17", "undo portswitch"]);
    typed(&mut cfg, &["interface 100GE1/0/18", "undo portswitch"]);
    let main = "interface 100GE1/0/17";
    let (a, b) = ("interface 100GE1/0/17.101", "interface 100GE1/0/17.102");
    // A sub-interface command: not in a main interface's view.
    assert_eq!(
        refused(&mut cfg, &[main, "dot1q termination vid 101"]),
        VrpError::Unrecognized { column: 0 }
    );
    // `dot1q termination vid ` is 22 wide.
    let wrong = |column| VrpError::WrongParameter { column };
    for (line, want) in [
        ("dot1q termination vid 0", wrong(22)),
        ("dot1q termination vid 4095", wrong(22)),
        ("dot1q termination vid x", wrong(22)),
        ("dot1q termination vid 200 to 100", wrong(29)),
        ("dot1q termination vid 200 to 200", wrong(29)),
        ("dot1q termination vid", VrpError::Incomplete { column: 22 }),
        (
            "dot1q termination vlan 10",
            VrpError::Unrecognized { column: 18 },
        ),
        (
            "dot1q termination vid 10 20",
            VrpError::Unrecognized { column: 25 },
        ),
    ] {
        assert_eq!(refused(&mut cfg, &[a, line]), want, "{line}");
    }
    typed(
        &mut cfg,
        &[a, "dot1q termination vid 101", "dot1q termination vid 101"],
    );
    // The same VLAN on another sub-interface of the same port, alone or
    // in a range, is refused; on another port it is fine.
    for line in [
        "dot1q termination vid 101",
        "dot1q termination vid 100 to 110",
    ] {
        assert_eq!(
            refused(&mut cfg, &[b, line]),
            VrpError::VlanTerminated,
            "{line}"
        );
    }
    typed(&mut cfg, &[b, "dot1q termination vid 102"]);
    typed(
        &mut cfg,
        &["interface 100GE1/0/18.101", "dot1q termination vid 101"],
    );
    // Undone, the VLAN is free again.
    typed(&mut cfg, &[a, "undo dot1q termination vid 101"]);
    typed(&mut cfg, &[b, "dot1q termination vid 101"]);
}

#[test]
fn subinterface_vpn_binding_follows_the_interface_rule() {
    let mut cfg = VrpConfig::new("S");
    typed(&mut cfg, &["interface 100GE1/0/1", "undo portswitch"]);
    let sub = "interface 100GE1/0/1.101";
    typed(
        &mut cfg,
        &[sub, "dot1q termination vid 101", "ip address 172.16.0.3 31"],
    );
    assert_eq!(
        refused(&mut cfg, &[sub, "ip binding vpn-instance Vrf-b"]),
        VrpError::NoVpnInstance
    );
    typed(&mut cfg, &["ip vpn-instance Vrf-b", "ipv4-family"]);
    typed(&mut cfg, &[sub, "ip binding vpn-instance Vrf-b"]);
    assert!(
        !cfg.render().contains("172.16.0.3"),
        "binding clears the address"
    );
    typed(&mut cfg, &[sub, "ip address 172.16.0.3 31"]);
    assert!(cfg.render().contains(
        "interface 100GE1/0/1.101\n dot1q termination vid 101\n ip binding vpn-instance Vrf-b\n ip address 172.16.0.3 31\n"
    ));
}

#[test]
fn subinterfaces_are_deleted_whole_physical_ports_never() {
    let mut cfg = VrpConfig::new("S");
    typed(&mut cfg, &["interface 100GE1/0/1", "undo portswitch"]);
    typed(
        &mut cfg,
        &["interface 100GE1/0/1.101", "dot1q termination vid 101"],
    );
    let top = &mut Vec::new();
    assert_eq!(
        cfg.apply(top, "undo interface 100GE1/0/1"),
        Err(VrpError::PhysicalInterface)
    );
    cfg.apply(top, "undo interface 100GE1/0/1.101").unwrap();
    assert!(!cfg.render().contains(".101"));
    assert_eq!(
        cfg.apply(top, "undo interface 100GE1/0/1.101"),
        Err(VrpError::NotExist)
    );
    // Logical interfaces are created and deleted by configuration.
    typed(&mut cfg, &["interface LoopBack1"]);
    cfg.apply(top, "undo interface LoopBack1").unwrap();
}

#[test]
fn subinterfaces_are_displayed_after_their_main_interface() {
    let mut cfg = VrpConfig::new("S");
    for port in ["100GE1/0/17", "100GE1/0/18"] {
        typed(&mut cfg, &[&format!("interface {port}"), "undo portswitch"]);
    }
    typed(
        &mut cfg,
        &[
            "interface 100GE1/0/17.102",
            "dot1q termination vid 102",
            "interface 100GE1/0/17.101",
            "dot1q termination vid 101",
        ],
    );
    let r = cfg.render();
    let ifaces: Vec<&str> = r.lines().filter(|l| l.starts_with("interface ")).collect();
    assert_eq!(
        ifaces,
        [
            "interface 100GE1/0/17",
            "interface 100GE1/0/17.101",
            "interface 100GE1/0/17.102",
            "interface 100GE1/0/18"
        ]
    );
    assert_eq!(VrpConfig::parse(&r).unwrap(), cfg);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Any typed line, in any view, is applied or refused with an error:
    /// never a panic (the grammar indexes words and columns).
    #[test]
    fn any_line_in_any_view_is_answered(
        view in proptest::sample::select(vec![
            "interface 100GE1/0/1", "interface 100GE1/0/1.7", "acl name A advance", "traffic classifier C",
            "traffic behavior B", "traffic policy P", "ip vpn-instance V",
        ]),
        line in "(undo )?(ip|rule|redirect|classifier|if-match|description|interface|traffic|route-distinguisher|sysname|mtu|vlan|dot1q termination vid)( [a-z0-9./:-]{0,12}){0,7}",
    ) {
        let mut cfg = VrpConfig::new("S");
        // A routed port, so its sub-interface view can be opened.
        typed(&mut cfg, &["interface 100GE1/0/1", "undo portswitch"]);
        let mut cursor = Vec::new();
        cfg.apply(&mut cursor, view).unwrap();
        let _ = cfg.apply(&mut cursor, &line);
        let _ = cfg.render();
    }
}
