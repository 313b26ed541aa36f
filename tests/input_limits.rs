//! Bounded input: hostile topology and decision files are refused before
//! anything expensive, with file, line and a clear reason (issue 12 item 5;
//! docs/input-limits.md). Bounds are proven by counting (problems kept and
//! counted, nodes refused), never by timing.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

use vclos::decision::{self, Decision, DecisionError};
use vclos::topology::{self, TopologyError};
use vclos::yaml::LimitError;

const TESTBED: &str = include_str!("../topologies/testbed.yaml");

fn vclos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args(args)
        .output()
        .unwrap()
}

/// "Billion laughs" through a credential's `password` (read as a YAML
/// value): `leaf` names, `mid` copies of them, `top` copies of those.
fn alias_bomb(leaf: usize, mid: usize, top: usize) -> String {
    let list =
        |n: usize, item: &dyn Fn(usize) -> String| (0..n).map(item).collect::<Vec<_>>().join(", ");
    format!(
        "name: bomb\ngpus_per_server: 1\ncredentials:\n  c:\n    username: u\n    password:\n      - &l0 [{}]\n      - &l1 [{}]\n      - [{}]\n",
        list(leaf, &|i| format!("p{i}")),
        list(mid, &|_| "*l0".into()),
        list(top, &|_| "*l1".into()),
    )
}

#[test]
fn alias_bomb_topology_is_refused_at_the_alias_line() {
    // 2 million names from 38 KB: refused at the alias of line 8 that
    // crosses the 100 000-node budget (line 8), before serde_yaml_ng runs.
    let text = alias_bomb(1000, 100, 20);
    match topology::from_str("bomb.yaml", &text) {
        Err(TopologyError::Parse {
            line: Some(8),
            message,
            ..
        }) => assert!(
            message.contains("aliases expand to more than 100000 nodes"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_issue_alias_bomb_is_refused_by_the_cli() {
    // The issue's shape: ~150 KB that serde_yaml_ng expands to 40 million
    // strings (4.3 GB) when nothing bounds it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.yaml");
    let text = alias_bomb(20_000, 100, 20);
    assert!(text.len() > 140_000, "{}", text.len());
    std::fs::write(&path, text).unwrap();
    let p = path.display().to_string();
    let out = vclos(&["topology", "validate", &p]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{p}:8: aliases expand to more than 100000 nodes")),
        "{err}"
    );
}

#[test]
fn a_small_alias_in_a_topology_still_loads() {
    let plain = topology::from_str("testbed.yaml", TESTBED).unwrap();
    let mgmt =
        "mgmt: {host: 127.0.0.1, port: 22, protocol: ssh-cli, dialect: huawei-ce, credential: lab}";
    let mut aliased = TESTBED.replacen(mgmt, &format!("mgmt: &ce {}", &mgmt[6..]), 1);
    let first = aliased.find("&ce").unwrap();
    while let Some(i) = aliased[first + 4..].find(mgmt) {
        let at = first + 4 + i;
        aliased.replace_range(at..at + mgmt.len(), "mgmt: *ce");
    }
    assert_eq!(aliased.matches("*ce").count(), 3, "{aliased}");
    let shape = vclos::yaml::check(&aliased, &topology::TOPOLOGY_LIMITS).unwrap();
    assert_eq!(shape.alias_nodes, 3 * 11, "a mgmt map is 11 nodes");
    let t = topology::from_str("aliased.yaml", &aliased).unwrap();
    assert_eq!(t.devices, plain.devices);
}

#[test]
fn nesting_200k_deep_is_refused_with_a_depth_error() {
    let n = 200_000;
    let text = format!(
        "name: deep\ngpus_per_server: 1\nlinks: {}{}\n",
        "[".repeat(n),
        "]".repeat(n)
    );
    match topology::from_str("deep.yaml", &text) {
        Err(TopologyError::Parse {
            line: Some(3),
            message,
            ..
        }) => assert!(
            message.contains("nesting deeper than 32 levels"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    // Block nesting counts the same.
    let block = format!(
        "name: deep\ngpus_per_server: 1\nlinks:\n{}x\n",
        "- ".repeat(n)
    );
    let e = topology::from_str("deep.yaml", &block).unwrap_err();
    assert!(
        e.to_string().contains("nesting deeper than 32 levels"),
        "{e}"
    );
}

#[test]
fn forty_thousand_bad_links_give_100_problems_and_a_count() {
    let mut text = TESTBED.to_string();
    for i in 0..40_000 {
        text.push_str(&format!("  - [nodev{i}:p1, leaf1:nosuch{i}]\n"));
    }
    let e = topology::from_str("links.yaml", &text).unwrap_err();
    let TopologyError::Invalid { problems, more, .. } = &e else {
        panic!("{e:?}");
    };
    // Two problems per link: an unknown device and a missing port.
    assert_eq!(problems.len(), topology::MAX_PROBLEMS);
    assert_eq!(*more, 80_000 - topology::MAX_PROBLEMS);
    assert!(problems.iter().all(|p| p.line.is_some()), "{problems:?}");
    let first_bad = TESTBED.lines().count() + 1;
    assert_eq!(problems[0].line, Some(first_bad));
    assert_eq!(problems[0].device.as_deref(), Some("nodev0"));
    let msg = e.to_string();
    assert!(msg.starts_with("links.yaml: 80000 problem(s):"), "{msg}");
    assert!(msg.ends_with("\n  … and 79900 more"), "{msg}");
    assert_eq!(msg.lines().count(), 1 + 100 + 1);
}

#[test]
fn management_ports_outside_1_65535_are_refused_naming_the_device() {
    let text = TESTBED.replacen(
        "  - name: leaf1\n    mgmt: {host: 127.0.0.1, port: 22,",
        "  - name: leaf1\n    mgmt: {host: 127.0.0.1, port: 0,",
        1,
    );
    assert_ne!(text, TESTBED);
    let e = topology::from_str("port0.yaml", &text).unwrap_err();
    let problems = e.problems();
    assert_eq!(problems.len(), 1, "{e}");
    assert_eq!(problems[0].device.as_deref(), Some("leaf1"));
    assert_eq!(problems[0].line, Some(18));
    assert!(
        problems[0]
            .message
            .contains("port 0 is not a TCP port (1-65535)"),
        "{e}"
    );
    for bad in ["70000", "-1"] {
        let e = topology::from_str(
            "port.yaml",
            &text.replacen("port: 0,", &format!("port: {bad},"), 1),
        )
        .unwrap_err();
        let p = e.problems();
        assert_eq!(p.len(), 1, "{e}");
        assert_eq!(
            (p[0].device.as_deref(), p[0].line),
            (Some("leaf1"), Some(18))
        );
        assert!(
            p[0].message
                .contains(&format!("port {bad} is not a TCP port")),
            "{e}"
        );
    }
}

#[test]
fn port_ranges_expand_to_a_bounded_total() {
    let mut text = String::from("name: ports\ngpus_per_server: 1\nspines:\n");
    for i in 0..20 {
        text.push_str(&format!("  - {{name: s{i}, ports: \"p[0-65535]\"}}\n"));
    }
    let e = topology::from_str("ports.yaml", &text).unwrap_err();
    let expanded: Vec<_> = e
        .problems()
        .into_iter()
        .filter(|p| {
            p.message
                .contains("port lists expand to more than 1048576 ports")
        })
        .collect();
    assert_eq!(expanded.len(), 1, "{e}");
    // s0..s15 expand to exactly 16 x 65536 = 2^20 names; s16 crosses.
    assert_eq!(expanded[0].device.as_deref(), Some("s16"));
}

fn sample_decision() -> Decision {
    serde_yaml_ng::from_str(
        "job: j1\nstage: leaf\ngpus:\n  - {server: srv1, gpu: 0}\n  - {server: srv2, gpu: 0}\n",
    )
    .unwrap()
}

#[test]
fn decisions_read_as_yaml_or_json() {
    let d = sample_decision();
    let yaml = serde_yaml_ng::to_string(&d).unwrap();
    let json = serde_json::to_string_pretty(&d).unwrap();
    assert_eq!(decision::from_text("d.yaml", &yaml).unwrap(), d);
    assert_eq!(decision::from_text("d.json", &json).unwrap(), d);
    let e = decision::from_text("d.yaml", "job: j1\nstage: sideways\ngpus: []\n").unwrap_err();
    assert!(
        matches!(e, DecisionError::Parse { line: Some(2), .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with("d.yaml:2: not a valid decision"),
        "{e}"
    );
}

#[test]
fn decision_alias_bomb_is_refused() {
    // The issue's 140 KB decision: one list of 7000 ports repeated 3000
    // times (21 million strings, 1.2 GB when nothing bounds it).
    let ports: Vec<String> = (0..7000).map(|i| format!("p{i}")).collect();
    let mut text = format!(
        "job: j1\nstage: manual\ngpus: []\nvclos:\n  spines: []\n  links: []\n  leaves:\n    - {{leaf: a, server_ports: &p [{}]}}\n",
        ports.join(", ")
    );
    for _ in 0..3000 {
        text.push_str("    - {leaf: a, server_ports: *p}\n");
    }
    assert!(text.len() > 140_000);
    match decision::from_text("d.yaml", &text) {
        Err(DecisionError::Limit {
            // 14 copies of 7001 nodes fit in 100 000; the 15th (line 23) does not.
            line: Some(23),
            reason: LimitError::AliasBudget { limit: 100_000, .. },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn decision_size_and_json_depth_are_bounded() {
    let big = vec![b' '; decision::MAX_DECISION_BYTES + 1];
    let e = decision::from_bytes("big.yaml", &big).unwrap_err();
    assert!(
        matches!(
            e,
            DecisionError::Limit {
                reason: LimitError::TooLarge { .. },
                ..
            }
        ),
        "{e:?}"
    );
    // Deep JSON where the schema expects a flat value is a type error at
    // the second bracket (serde_json also stops recursion at 128 levels).
    let deep = format!(
        "{{\"job\": \"j1\", \"stage\": \"leaf\", \"gpus\": {}{}}}",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    match decision::from_text("deep.json", &deep) {
        Err(DecisionError::Parse {
            line: Some(1),
            message,
            ..
        }) => assert!(message.contains("line 1 column 41"), "{message}"),
        other => panic!("{other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.json");
    std::fs::write(&path, &big).unwrap();
    let p = path.display().to_string();
    let out = vclos(&[
        "plan",
        "--topology",
        "topologies/testbed.yaml",
        "--decision",
        &p,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{p}: {} bytes is larger than the",
            decision::MAX_DECISION_BYTES + 1
        )),
        "{err}"
    );
}
