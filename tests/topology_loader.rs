//! The topology loader: every class of invalid file gets a clear error that
//! names the file, the line and the device/port; no input ever panics.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use vclos::topology::{self, Problem, TopologyError};

const TINY: &str = r#"name: tiny
gpus_per_server: 2
credentials:
  lab: {username: admin, password_env: VCLOS_PASSWORD}
leaves:
  - name: leaf1
    mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: huawei-ce, credential: lab}
    server_ports: "p[1-2]"
    uplink_ports: "p[3-4]"
  - name: leaf2
    mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: huawei-ce, credential: lab}
    server_ports: "p[1-2]"
    uplink_ports: "p[3-4]"
spines:
  - name: spine1
    mgmt: {host: 127.0.0.1, protocol: netconf, dialect: openconfig, credential: lab}
    ports: "e[1-2]"
  - name: spine2
    mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: sonic, credential: lab}
    ports: "e[1-2]"
servers:
  - {name: s1, leaf: leaf1, ports: "p[1-2]"}
  - {name: s2, leaf: leaf2, ports: "p[1-2]"}
links:
  - [leaf1:p3, spine1:e1]
  - [leaf1:p4, spine2:e1]
  - [leaf2:p3, spine1:e2]
  - [leaf2:p4, spine2:e2]
"#;

const TINY_OCS: &str = r#"name: tiny-ocs
gpus_per_server: 2
credentials:
  lab: {username: admin, password_file: /etc/vclos/lab.secret}
leaves:
  - name: leaf1
    mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: huawei-ce, credential: lab}
    server_ports: "p[1-2]"
    uplink_ports: "p[3-4]"
spines:
  - name: spine1
    mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: huawei-ce, credential: lab}
    ports: "e[1-2]"
ocs:
  - name: ocs1
    mgmt: {host: 127.0.0.1, protocol: telnet-tl1, dialect: tl1, credential: lab}
    ports: "[1-4]"
    patches:
      - ["1", "3"]
      - ["2", "4"]
servers:
  - {name: s1, leaf: leaf1, ports: "p[1-2]"}
links:
  - [leaf1:p3, ocs1:1]
  - [leaf1:p4, ocs1:2]
  - [ocs1:3, spine1:e1]
  - [ocs1:4, spine1:e2]
"#;

fn problems(text: &str) -> (String, Vec<Problem>) {
    match topology::from_str("fixture.yaml", text) {
        Ok(_) => panic!("expected an invalid topology"),
        Err(e) => (e.to_string(), e.problems()),
    }
}

/// Assert one problem mentions `needle` and carries the given line/device/port.
fn expect(text: &str, needle: &str, line: usize, device: &str, port: Option<&str>) -> String {
    let (msg, ps) = problems(text);
    let p = ps
        .iter()
        .find(|p| p.message.contains(needle))
        .unwrap_or_else(|| panic!("no problem containing {needle:?} in:\n{msg}"));
    assert_eq!(p.line, Some(line), "line of {p:?}\n{msg}");
    assert_eq!(p.device.as_deref(), Some(device), "device of {p:?}");
    assert_eq!(p.port.as_deref(), port, "port of {p:?}");
    assert!(
        msg.contains(&format!("fixture.yaml:{line}:")),
        "file:line missing in:\n{msg}"
    );
    msg
}

#[test]
fn fixtures_are_valid() {
    let t = topology::from_str("tiny.yaml", TINY).unwrap();
    assert_eq!(
        (
            t.leaves.len(),
            t.spines.len(),
            t.servers.len(),
            t.gpu_count()
        ),
        (2, 2, 2, 4)
    );
    assert_eq!(t.initial_fabric_links().len(), 4);
    let o = topology::from_str("tiny-ocs.yaml", TINY_OCS).unwrap();
    // Both uplinks reach spine1 through the OCS patches.
    assert_eq!(o.initial_fabric_links().len(), 2);
    assert_eq!(o.ocs[0].patches, vec![(0, 2), (1, 3)]);
}

#[test]
fn unknown_device_in_a_link() {
    let bad = TINY.replace("[leaf2:p4, spine2:e2]", "[leaf2:p4, spine9:e2]");
    let msg = expect(&bad, "unknown device", 28, "spine9", Some("e2"));
    assert!(msg.contains("device `spine9` port `e2`"), "{msg}");
}

#[test]
fn unknown_leaf_of_a_server() {
    let bad = TINY.replace("{name: s2, leaf: leaf2", "{name: s2, leaf: leaf7");
    expect(&bad, "`leaf7` is not a declared leaf", 23, "s2", None);
}

#[test]
fn port_cabled_twice() {
    let bad = TINY.replace("[leaf2:p4, spine2:e2]", "[leaf1:p3, spine2:e2]");
    let msg = expect(
        &bad,
        "port used twice in links (first cabled at line 25)",
        28,
        "leaf1",
        Some("p3"),
    );
    assert!(msg.contains("port `p3`"), "{msg}");
}

#[test]
fn server_port_used_by_two_servers() {
    let bad = TINY.replace("{name: s2, leaf: leaf2", "{name: s2, leaf: leaf1");
    let msg = expect(&bad, "port used twice", 23, "leaf1", Some("p1"));
    assert!(msg.contains("server `s1` and server `s2`"), "{msg}");
}

#[test]
fn port_listed_twice_on_a_device() {
    let bad = TINY.replacen(
        "uplink_ports: \"p[3-4]\"",
        "uplink_ports: [\"p3\", \"p2\"]",
        1,
    );
    expect(
        &bad,
        "port used twice in the device's port lists",
        6,
        "leaf1",
        Some("p2"),
    );
}

#[test]
fn link_to_a_missing_port() {
    let bad = TINY.replace("[leaf1:p4, spine2:e1]", "[leaf1:p4, spine2:e7]");
    expect(&bad, "missing port", 26, "spine2", Some("e7"));
    let bad = TINY.replace("[leaf1:p4, spine2:e1]", "[leaf1:p9, spine2:e1]");
    expect(&bad, "missing port", 26, "leaf1", Some("p9"));
}

#[test]
fn server_port_cabled_to_the_fabric() {
    let bad = TINY.replace("[leaf1:p4, spine2:e1]", "[leaf1:p1, spine2:e1]");
    expect(
        &bad,
        "server-facing port cannot be cabled",
        26,
        "leaf1",
        Some("p1"),
    );
}

#[test]
fn ocs_port_patched_twice() {
    let bad = TINY_OCS.replace("[\"2\", \"4\"]", "[\"2\", \"3\"]");
    let msg = expect(&bad, "OCS port patched twice", 20, "ocs1", Some("3"));
    assert!(msg.contains("also in patch [1, 3]"), "{msg}");
}

#[test]
fn ocs_patch_to_a_missing_port() {
    let bad = TINY_OCS.replace("[\"2\", \"4\"]", "[\"2\", \"9\"]");
    expect(
        &bad,
        "patch names a port the OCS does not have",
        20,
        "ocs1",
        Some("9"),
    );
}

#[test]
fn leaf_port_counts_must_match_unless_allowed() {
    let bad = TINY.replacen("uplink_ports: \"p[3-4]\"", "uplink_ports: \"p[3-5]\"", 1);
    expect(
        &bad,
        "2 server-facing ports but 3 uplinks",
        6,
        "leaf1",
        None,
    );
    let allowed = bad.replace(
        "gpus_per_server: 2\n",
        "gpus_per_server: 2\nallow_oversubscription: true\n",
    );
    topology::from_str("fixture.yaml", &allowed).unwrap();
}

#[test]
fn gpus_per_server_must_divide_server_ports() {
    let bad = TINY
        .replace("gpus_per_server: 2", "gpus_per_server: 3")
        .replace("allow_oversubscription", "x");
    let msg = expect(
        &bad,
        "not a multiple of gpus_per_server (3)",
        6,
        "leaf1",
        None,
    );
    assert!(msg.contains("2 server-facing ports"), "{msg}");
}

#[test]
fn plain_text_password_is_rejected() {
    let bad = TINY.replace(
        "lab: {username: admin, password_env: VCLOS_PASSWORD}",
        "lab:\n    username: admin\n    password: hunter2",
    );
    let (msg, ps) = problems(&bad);
    let p = ps
        .iter()
        .find(|p| p.message.contains("plain-text `password`"))
        .unwrap();
    assert_eq!(p.line, Some(6));
    assert!(msg.contains("password_env"), "{msg}");
    assert!(
        !msg.contains("hunter2"),
        "the secret must not be echoed: {msg}"
    );
}

#[test]
fn unknown_credential_and_bad_protocol_pairing() {
    let bad = TINY.replacen("credential: lab}", "credential: nope}", 1);
    expect(&bad, "credential `nope` is not defined", 6, "leaf1", None);
    let bad = TINY.replacen(
        "protocol: ssh-cli, dialect: huawei-ce",
        "protocol: telnet-tl1, dialect: huawei-ce",
        1,
    );
    expect(&bad, "not supported for a leaf", 6, "leaf1", None);
}

#[test]
fn duplicate_names_and_bad_names() {
    let bad = TINY.replace("name: spine2", "name: spine1");
    let (msg, _) = problems(&bad);
    assert!(
        msg.contains("name declared twice (first declared at line 15)"),
        "{msg}"
    );
    let bad = TINY.replace("name: spine2", "name: \"spine;2\"");
    let (msg, _) = problems(&bad);
    assert!(msg.contains("character ';' is not allowed"), "{msg}");
}

#[test]
fn syntax_and_type_errors_carry_a_line() {
    let bad = TINY.replace("gpus_per_server: 2", "gpus_per_server: two");
    match topology::from_str("fixture.yaml", &bad) {
        Err(TopologyError::Parse {
            line: Some(2),
            message,
            ..
        }) => assert!(message.contains("gpus_per_server"), "{message}"),
        other => panic!("{other:?}"),
    }
    let bad = TINY.replace(
        "    ports: \"e[1-2]\"\n  - name: spine2",
        "    ports: \"e[1-2]\"\n    colour: red\n  - name: spine2",
    );
    let e = topology::from_str("fixture.yaml", &bad)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("fixture.yaml:") && e.contains("unknown field `colour`"),
        "{e}"
    );
}

#[test]
fn errors_collect_every_problem() {
    let bad = TINY
        .replace("[leaf2:p4, spine2:e2]", "[leaf2:p4, spine9:e2]")
        .replace("[leaf1:p4, spine2:e1]", "[leaf1:p4, spine2:e7]");
    let (_, ps) = problems(&bad);
    assert_eq!(ps.len(), 2, "{ps:?}");
}

#[test]
fn non_utf8_and_missing_files() {
    let e = topology::from_bytes("x.yaml", b"name: \xff\xfe").unwrap_err();
    assert!(matches!(e, TopologyError::NotUtf8 { offset: 6, .. }), "{e}");
    let e = topology::load(std::path::Path::new("/nonexistent/t.yaml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/t.yaml: cannot read"),
        "{e}"
    );
}

#[test]
fn reference_topologies_are_valid() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies");
    for (file, leaves, spines, ocs, gpus) in [
        ("testbed.yaml", 2, 16, 0, 32),
        ("testbed-ocs.yaml", 2, 16, 1, 32),
        ("testbed-sonic.yaml", 2, 16, 1, 32),
        ("cluster512.yaml", 32, 16, 0, 512),
        ("cluster512-ocs.yaml", 32, 16, 4, 512),
        ("cluster2048.yaml", 64, 32, 0, 2048),
        ("cluster2048-ocs.yaml", 64, 32, 8, 2048),
    ] {
        let t = topology::load(&std::path::Path::new(dir).join(file)).unwrap();
        assert_eq!(
            (t.leaves.len(), t.spines.len(), t.ocs.len(), t.gpu_count()),
            (leaves, spines, ocs, gpus),
            "{file}"
        );
        // Every leaf reaches every spine exactly once as initially patched.
        let links = t.initial_fabric_links();
        assert_eq!(links.len(), leaves * spines, "{file}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = topology::from_bytes("fuzz.yaml", &bytes);
    }

    #[test]
    fn mutated_fixtures_never_panic(cut in 0usize..TINY_OCS.len(), insert in "[ -~\n]{0,12}") {
        let mut text = TINY_OCS.as_bytes()[..cut].to_vec();
        text.extend_from_slice(insert.as_bytes());
        text.extend_from_slice(&TINY_OCS.as_bytes()[cut..]);
        if let Err(e) = topology::from_bytes("fuzz.yaml", &text) {
            prop_assert!(e.to_string().starts_with("fuzz.yaml"));
        }
    }
}

#[test]
fn leaf_to_leaf_cable_is_rejected_with_its_line() {
    let bad = TINY
        .replace("[leaf2:p4, spine2:e2]", "[leaf2:p4, leaf1:p4]")
        .replace("[leaf1:p4, spine2:e1]", "[leaf1:p4x, spine2:e1]");
    let bad = bad
        .replace("uplink_ports: \"p[3-4]\"", "uplink_ports: [p3, p4, p4x]")
        .replace(
            "gpus_per_server: 2\n",
            "gpus_per_server: 2\nallow_oversubscription: true\n",
        );
    let (msg, ps) = problems(&bad);
    let p = ps
        .iter()
        .find(|p| p.message.contains("a cable joins two of"))
        .unwrap_or_else(|| panic!("{msg}"));
    assert_eq!(p.line, Some(29), "{msg}");
}
