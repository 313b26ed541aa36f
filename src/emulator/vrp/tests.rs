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
