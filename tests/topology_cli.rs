//! `vclos topology generate | validate | show` through the real binary:
//! generate -> validate -> show round trips, with and without OCS, and DOT.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn vclos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn generate_to(dir: &tempfile::TempDir, name: &str, args: &[&str]) -> String {
    let out = vclos(&[&["topology", "generate"], args].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let path = dir.path().join(name);
    std::fs::write(&path, &out.stdout).unwrap();
    path.display().to_string()
}

fn show_json(path: &str) -> serde_json::Value {
    let out = vclos(&["topology", "show", path, "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn generate_validate_show_round_trip_without_ocs() {
    let dir = tempfile::tempdir().unwrap();
    let f = generate_to(
        &dir,
        "a.yaml",
        &["--leaves", "4", "--spines", "8", "--gpus-per-server", "4"],
    );
    let v = vclos(&["topology", "validate", &f]);
    assert!(v.status.success(), "{}", text(&v.stderr));
    let line = text(&v.stdout);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.contains("4 leaves, 8 spines, 0 OCS, 8 servers x 4 GPUs = 32 GPUs, 32 links"),
        "{line}"
    );
    let j = show_json(&f);
    for (k, want) in [
        ("leaves", 4),
        ("spines", 8),
        ("servers", 8),
        ("gpus", 32),
        ("ocs", 0),
        ("links", 32),
    ] {
        assert_eq!(j[k].as_u64(), Some(want), "{k} in {j}");
    }
}

#[test]
fn generate_validate_show_round_trip_with_ocs() {
    let dir = tempfile::tempdir().unwrap();
    let f = generate_to(
        &dir,
        "o.yaml",
        &[
            "--leaves",
            "4",
            "--spines",
            "8",
            "--gpus-per-server",
            "4",
            "--ocs",
            "2",
        ],
    );
    assert!(vclos(&["topology", "validate", &f]).status.success());
    let j = show_json(&f);
    // L*S leaf-spine connections, each as two cables through an OCS.
    for (k, want) in [
        ("leaves", 4),
        ("spines", 8),
        ("gpus", 32),
        ("ocs", 2),
        ("links", 64),
        ("patches", 32),
    ] {
        assert_eq!(j[k].as_u64(), Some(want), "{k} in {j}");
    }
    // Spread evenly: each OCS has L*S/K leaf-facing and as many spine-facing ports.
    let t = vclos::topology::load(std::path::Path::new(&f)).unwrap();
    for o in &t.ocs {
        assert_eq!(o.ports.len(), 32);
        assert_eq!(o.port_peer.iter().filter(|p| p.is_some()).count(), 32);
    }
    for l in &t.leaves {
        let mut per_ocs = [0; 2];
        for p in l.uplink_peer.iter().flatten() {
            if let vclos::topology::PortRef::Ocs(o, _) = p {
                per_ocs[o.index()] += 1;
            }
        }
        assert_eq!(per_ocs, [4, 4], "{}", l.name);
    }
    assert_eq!(t.initial_fabric_links().len(), 32);
}

#[test]
fn servers_per_leaf_and_impossible_combinations() {
    let dir = tempfile::tempdir().unwrap();
    let f = generate_to(
        &dir,
        "s.yaml",
        &[
            "--leaves",
            "2",
            "--spines",
            "8",
            "--gpus-per-server",
            "2",
            "--servers-per-leaf",
            "4",
        ],
    );
    assert_eq!(show_json(&f)["servers"].as_u64(), Some(8));
    for (args, needle) in [
        (
            vec!["--leaves", "2", "--spines", "6", "--gpus-per-server", "4"],
            "does not divide 6",
        ),
        (
            vec![
                "--leaves",
                "3",
                "--spines",
                "8",
                "--gpus-per-server",
                "4",
                "--ocs",
                "2",
            ],
            "must divide both",
        ),
        (
            vec![
                "--leaves",
                "2",
                "--spines",
                "8",
                "--gpus-per-server",
                "4",
                "--servers-per-leaf",
                "3",
            ],
            "not full bisection",
        ),
        (
            vec!["--leaves", "0", "--spines", "8", "--gpus-per-server", "4"],
            "--leaves must be at least 1",
        ),
    ] {
        let out = vclos(&[&["topology", "generate"], &args[..]].concat());
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(out.stdout.is_empty());
        assert!(
            text(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn dot_output_draws_the_fabric() {
    let dir = tempfile::tempdir().unwrap();
    let f = generate_to(
        &dir,
        "d.yaml",
        &[
            "--leaves",
            "2",
            "--spines",
            "4",
            "--gpus-per-server",
            "2",
            "--ocs",
            "2",
        ],
    );
    let out = vclos(&["topology", "show", &f, "--format", "dot"]);
    assert!(out.status.success());
    let dot = text(&out.stdout);
    assert!(
        dot.starts_with("graph \"fabric\" {") && dot.trim_end().ends_with('}'),
        "{dot}"
    );
    for node in ["\"leaf1\"", "\"spine4\"", "\"ocs2\"", "\"srv2-2\""] {
        assert!(dot.contains(node), "missing {node}");
    }
    // Servers attach with one NIC per GPU (2 parallel edges drawn as one).
    assert!(
        dot.contains("\"srv1-1\" -- \"leaf1\" [label=\"2\""),
        "{dot}"
    );
    // Each leaf reaches each OCS through 2 uplinks; no leaf-spine cable exists.
    assert!(dot.contains("\"leaf1\" -- \"ocs1\" [label=\"2\"]"), "{dot}");
    assert!(!dot.contains("\"leaf1\" -- \"spine1\""), "{dot}");
    let edges = dot.lines().filter(|l| l.contains(" -- ")).count();
    // 4 server-leaf + 2x2 leaf-OCS + 4x2 OCS-spine bundles.
    assert_eq!(edges, 4 + 4 + 8, "{dot}");
}

#[test]
fn chassis_clusters_in_dot_and_json() {
    let f = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/testbed.yaml");
    let dot = text(&vclos(&["topology", "show", f, "--format", "dot"]).stdout);
    assert!(dot.contains("subgraph \"cluster_spine1\""), "{dot}");
    let j = show_json(f);
    assert_eq!(j["devices"].as_u64(), Some(4));
    assert_eq!(j["device_list"][0]["members"].as_array().unwrap().len(), 8);
}

#[test]
fn validate_reports_problems_and_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.yaml");
    std::fs::write(&p, "gpus_per_server: 4\nleaves:\n  - name: leaf1\n").unwrap();
    let out = vclos(&["topology", "validate", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad.yaml:3"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(&p, [0u8, 159, 146, 150, b'\n', b':', b'[']).unwrap();
    let out = vclos(&["topology", "validate", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!text(&out.stderr).contains("panicked"));
}
