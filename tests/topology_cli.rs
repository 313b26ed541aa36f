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

const TESTBED_OCS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/testbed-ocs.yaml");

fn export(file: &str, format: &str) -> Output {
    vclos(&["topology", "export", file, "--format", format])
}

fn yaml_docs(out: &Output) -> Vec<serde_yaml_ng::Value> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_yaml_ng::Deserializer::from_slice(&out.stdout)
        .map(|d| <serde_yaml_ng::Value as serde::Deserialize>::deserialize(d).unwrap())
        .collect()
}

#[test]
fn export_slurm_writes_a_tree_and_a_block_topology() {
    let docs = yaml_docs(&export(TESTBED_OCS, "slurm"));
    assert_eq!(docs.len(), 1);
    let topologies = docs[0].as_sequence().unwrap();
    let names: Vec<&str> = topologies
        .iter()
        .map(|t| t["topology"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["testbed-ocs-tree", "testbed-ocs-block"]);
    let switches = topologies[0]["tree"]["switches"].as_sequence().unwrap();
    assert_eq!(switches[0]["switch"].as_str(), Some("leaf1"));
    assert_eq!(switches[0]["nodes"].as_str(), Some("srv1,srv2,srv3,srv4"));
    assert_eq!(switches[2]["children"].as_str(), Some("leaf1,leaf2"));
    let sizes = &topologies[1]["block"]["block_sizes"];
    assert_eq!(sizes[0].as_u64(), Some(4));
    assert_eq!(sizes[1].as_u64(), Some(8));
    assert_eq!(
        topologies[1]["block"]["blocks"][1]["nodes"].as_str(),
        Some("srv5,srv6,srv7,srv8")
    );
}

#[test]
fn export_volcano_writes_leaf_and_fabric_hypernodes() {
    let docs = yaml_docs(&export(TESTBED_OCS, "volcano"));
    let tiers: Vec<(&str, u64, usize)> = docs
        .iter()
        .map(|d| {
            assert_eq!(
                d["apiVersion"].as_str(),
                Some("topology.volcano.sh/v1alpha1")
            );
            assert_eq!(d["kind"].as_str(), Some("HyperNode"));
            (
                d["metadata"]["name"].as_str().unwrap(),
                d["spec"]["tier"].as_u64().unwrap(),
                d["spec"]["members"].as_sequence().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        tiers,
        [("leaf1", 1, 4), ("leaf2", 1, 4), ("testbed-ocs", 2, 2)]
    );
    let fabric_member = &docs[2]["spec"]["members"][1];
    assert_eq!(fabric_member["type"].as_str(), Some("HyperNode"));
    assert_eq!(
        fabric_member["selector"]["exactMatch"]["name"].as_str(),
        Some("leaf2")
    );
}

#[test]
fn export_kueue_writes_a_topology_and_the_node_labels() {
    let out = export(TESTBED_OCS, "kueue");
    let docs = yaml_docs(&out);
    assert_eq!(docs.len(), 1);
    assert_eq!(
        docs[0]["apiVersion"].as_str(),
        Some("kueue.x-k8s.io/v1beta2")
    );
    assert_eq!(docs[0]["kind"].as_str(), Some("Topology"));
    let levels: Vec<&str> = docs[0]["spec"]["levels"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|l| l["nodeLabel"].as_str().unwrap())
        .collect();
    assert_eq!(
        levels,
        [
            "topology.vclos.io/fabric",
            "topology.vclos.io/leaf",
            "kubernetes.io/hostname"
        ]
    );
    let stdout = text(&out.stdout);
    let commands: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("# kubectl "))
        .collect();
    assert_eq!(commands.len(), 8, "{stdout}");
    assert!(commands.contains(
        &"label node srv8 --overwrite topology.vclos.io/fabric=testbed-ocs topology.vclos.io/leaf=leaf2"
    ));
}

#[test]
fn export_refuses_a_name_kubernetes_cannot_carry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("upper.yaml");
    let yaml = std::fs::read_to_string(TESTBED_OCS)
        .unwrap()
        .replace("srv6", "GPU_Node6");
    std::fs::write(&path, yaml).unwrap();
    let f = path.to_str().unwrap();
    for format in ["volcano", "kueue"] {
        let out = export(f, format);
        assert_eq!(out.status.code(), Some(1), "{format}");
        assert!(out.stdout.is_empty(), "{format}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(
            err.contains("server `GPU_Node6` cannot be a Kubernetes name"),
            "{format}: {err}"
        );
    }
    // Slurm node names may hold upper case and '_'.
    assert!(export(f, "slurm").status.success());
    let out = export(f, "torque");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("possible values"),
        "{}",
        text(&out.stderr)
    );
}
