//! Each format read back with serde_yaml_ng and checked against the shapes
//! the schedulers' schemas define (the patterns below are the ones the
//! Volcano and Kueue CRDs and Kubernetes validation use, written out here
//! independently of the exporter's own checks).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use serde_yaml_ng::Value;

use super::*;
use crate::topology::generate::{self, Params};
use crate::topology::testbed_ocs as testbed;

/// RFC 1123 subdomain: HyperNode `exactMatch.name` in the Volcano CRD,
/// Kubernetes object and node names.
const DNS_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Kueue's `nodeLabel` (a qualified label key), max 316.
const LABEL_KEY: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
/// A Kubernetes label value, max 63.
const LABEL_VALUE: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

fn k8s_name(s: &str) -> bool {
    s.len() <= 253 && Regex::new(DNS_SUBDOMAIN).unwrap().is_match(s)
}

fn label_value(s: &str) -> bool {
    s.len() <= 63 && Regex::new(LABEL_VALUE).unwrap().is_match(s)
}

fn generated(leaves: u32, servers_per_leaf: u32, ocs: u32) -> Topology {
    let p = Params {
        name: "gen".into(),
        leaves,
        spines: 8,
        gpus_per_server: 4,
        servers_per_leaf: Some(servers_per_leaf),
        ocs,
        allow_oversubscription: true,
    };
    (*generate::loaded(&p)).clone()
}

/// Servers by leaf, leaves without servers left out, as the exporter sees it.
fn servers_by_leaf(t: &Topology) -> BTreeMap<String, BTreeSet<String>> {
    t.leaves
        .iter()
        .filter(|l| !l.servers.is_empty())
        .map(|l| {
            let names = l
                .servers
                .iter()
                .map(|s| t.server(*s).name.to_string())
                .collect();
            (l.name.to_string(), names)
        })
        .collect()
}

fn all_servers(t: &Topology) -> Vec<String> {
    let mut v: Vec<String> = t.servers.iter().map(|s| s.name.to_string()).collect();
    v.sort();
    v
}

fn docs(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .collect()
}

fn str_of<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str()
        .unwrap_or_else(|| panic!("{path:?} is not a string in {v:?}"))
}

/// A hostlist string as this exporter writes it: names joined by ','.
fn hostlist(v: &Value) -> Vec<String> {
    let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"));
    s.split(',').map(str::to_string).collect()
}

fn check_slurm(t: &Topology) {
    let text = export(t, ExportFormat::Slurm).unwrap();
    let d = docs(&text);
    assert_eq!(d.len(), 1, "{text}");
    let list = d[0].as_sequence().unwrap();
    assert_eq!(list.len(), 2, "{text}");
    let by_leaf = servers_by_leaf(t);
    for (entry, (name, default, kind)) in list.iter().zip([
        (format!("{}-tree", t.name), true, "tree"),
        (format!("{}-block", t.name), false, "block"),
    ]) {
        let map = entry.as_mapping().unwrap();
        // `topology` must be the first attribute (topology.yaml(5)).
        assert_eq!(map.keys().next().unwrap().as_str(), Some("topology"));
        assert_eq!(
            map.len(),
            3,
            "topology, cluster_default, one type: {entry:?}"
        );
        assert_eq!(str_of(entry, &["topology"]), name);
        assert_eq!(entry["cluster_default"].as_bool(), Some(default));
        assert!(entry[kind].is_mapping(), "{kind} in {entry:?}");
    }

    // Tree: one switch per leaf with its servers, then the top switch.
    let switches = list[0]["tree"]["switches"].as_sequence().unwrap();
    assert_eq!(switches.len(), by_leaf.len() + 1);
    let mut seen = Vec::new();
    let mut leaf_switches = BTreeSet::new();
    for sw in &switches[..by_leaf.len()] {
        let name = str_of(sw, &["switch"]);
        assert!(sw.get("children").is_none(), "{sw:?}");
        let nodes = hostlist(&sw["nodes"]);
        assert_eq!(
            nodes.iter().cloned().collect::<BTreeSet<_>>(),
            by_leaf[name],
            "switch {name}"
        );
        seen.extend(nodes);
        leaf_switches.insert(name.to_string());
    }
    seen.sort();
    assert_eq!(
        seen,
        all_servers(t),
        "every server exactly once in the tree"
    );
    let top = switches.last().unwrap();
    assert_eq!(str_of(top, &["switch"]), t.name);
    assert!(top.get("nodes").is_none());
    let children: BTreeSet<String> = hostlist(&top["children"]).into_iter().collect();
    assert_eq!(children, leaf_switches);
    for sw in switches {
        assert!(str_of(sw, &["switch"]).len() <= 64);
    }

    // Block: a block per leaf; sizes base x 2^k, the base the smallest leaf,
    // the last the first to cover every block.
    let block = &list[1]["block"];
    let blocks = block["blocks"].as_sequence().unwrap();
    let mut seen = Vec::new();
    for b in blocks {
        let name = str_of(b, &["block"]);
        let nodes = hostlist(&b["nodes"]);
        assert_eq!(
            nodes.iter().cloned().collect::<BTreeSet<_>>(),
            by_leaf[name]
        );
        seen.extend(nodes);
    }
    seen.sort();
    assert_eq!(
        seen,
        all_servers(t),
        "every server exactly once in the blocks"
    );
    let sizes: Vec<u64> = block["block_sizes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let base = by_leaf.values().map(|s| s.len() as u64).min().unwrap();
    assert_eq!(sizes[0], base);
    for w in sizes.windows(2) {
        let ratio = w[1] / w[0];
        assert!(
            w[1] % w[0] == 0 && ratio > 1 && ratio.is_power_of_two(),
            "{sizes:?}"
        );
    }
    let top_blocks = sizes.last().unwrap() / base;
    assert!(top_blocks >= blocks.len() as u64, "{sizes:?}");
    assert!(
        sizes.len() == 1 || top_blocks / 2 < blocks.len() as u64,
        "{sizes:?}"
    );
    for b in blocks {
        assert!(
            hostlist(&b["nodes"]).len() as u64 >= base,
            "block smaller than the base"
        );
    }
}

fn check_volcano(t: &Topology) {
    let text = export(t, ExportFormat::Volcano).unwrap();
    let d = docs(&text);
    let by_leaf = servers_by_leaf(t);
    assert_eq!(d.len(), by_leaf.len() + 1, "{text}");
    let mut tier1 = BTreeMap::new();
    let mut tier2 = Vec::new();
    for h in &d {
        assert_eq!(str_of(h, &["apiVersion"]), "topology.volcano.sh/v1alpha1");
        assert_eq!(str_of(h, &["kind"]), "HyperNode");
        let name = str_of(h, &["metadata", "name"]);
        assert!(k8s_name(name), "{name}");
        assert!(h["metadata"].get("namespace").is_none(), "cluster-scoped");
        // tier: an integer >= 0, required; tierName at most 253.
        let tier = h["spec"]["tier"].as_u64().expect("tier is an integer");
        assert!(str_of(h, &["spec", "tierName"]).len() <= 253);
        let members = h["spec"]["members"].as_sequence().unwrap();
        assert!(!members.is_empty(), "minItems 1");
        let mut names = Vec::new();
        for m in members {
            let kind = str_of(m, &["type"]);
            assert!(kind == "Node" || kind == "HyperNode", "{kind}");
            let sel = m["selector"].as_mapping().unwrap();
            assert_eq!(
                sel.len(),
                1,
                "exactly one of exactMatch/regexMatch/labelMatch"
            );
            let n = str_of(m, &["selector", "exactMatch", "name"]);
            assert!(k8s_name(n), "{n}");
            names.push((kind.to_string(), n.to_string()));
        }
        match tier {
            1 => {
                assert_eq!(str_of(h, &["spec", "tierName"]), "leaf");
                assert!(names.iter().all(|(k, _)| k == "Node"));
                tier1.insert(name.to_string(), names);
            }
            2 => {
                assert_eq!(str_of(h, &["spec", "tierName"]), "fabric");
                assert_eq!(name, t.name);
                assert!(names.iter().all(|(k, _)| k == "HyperNode"));
                tier2.push(names);
            }
            other => panic!("tier {other}"),
        }
    }
    let mut seen: Vec<String> = tier1.values().flatten().map(|(_, n)| n.clone()).collect();
    seen.sort();
    assert_eq!(seen, all_servers(t), "every server exactly once");
    for (leaf, members) in &tier1 {
        let got: BTreeSet<String> = members.iter().map(|(_, n)| n.clone()).collect();
        assert_eq!(&got, &by_leaf[leaf]);
    }
    assert_eq!(tier2.len(), 1);
    let fabric: BTreeSet<String> = tier2[0].iter().map(|(_, n)| n.clone()).collect();
    assert_eq!(fabric, tier1.keys().cloned().collect());
}

/// The label commands: node name -> its labels.
fn kueue_labels(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# kubectl label node "))
        .map(|rest| {
            let mut words = rest.split(' ');
            let node = words.next().unwrap().to_string();
            assert_eq!(words.next(), Some("--overwrite"));
            let labels = words
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect();
            (node, labels)
        })
        .collect()
}

fn check_kueue(t: &Topology) {
    let text = export(t, ExportFormat::Kueue).unwrap();
    let d = docs(&text);
    assert_eq!(d.len(), 1, "{text}");
    let topo = &d[0];
    assert_eq!(str_of(topo, &["apiVersion"]), "kueue.x-k8s.io/v1beta2");
    assert_eq!(str_of(topo, &["kind"]), "Topology");
    assert!(k8s_name(str_of(topo, &["metadata", "name"])));
    let levels: Vec<&str> = topo["spec"]["levels"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|l| str_of(l, &["nodeLabel"]))
        .collect();
    assert!((1..=16).contains(&levels.len()));
    assert_eq!(
        levels.iter().collect::<BTreeSet<_>>().len(),
        levels.len(),
        "unique"
    );
    let key = Regex::new(LABEL_KEY).unwrap();
    for l in &levels {
        assert!(l.len() <= 316 && key.is_match(l), "{l}");
    }
    // kubernetes.io/hostname only as the lowest level.
    assert_eq!(levels.last(), Some(&"kubernetes.io/hostname"));
    assert_eq!(levels, [FABRIC_LABEL, LEAF_LABEL, HOSTNAME_LABEL]);

    let labels = kueue_labels(&text);
    let mut nodes: Vec<String> = labels.iter().map(|(n, _)| n.clone()).collect();
    nodes.sort();
    assert_eq!(nodes, all_servers(t), "every server labelled exactly once");
    let by_leaf = servers_by_leaf(t);
    for (node, l) in &labels {
        assert!(k8s_name(node), "{node}");
        // Every level but the kubelet's hostname gets a value.
        assert_eq!(
            l.keys().map(String::as_str).collect::<Vec<_>>(),
            &levels[..2]
        );
        for (k, v) in l {
            assert!(key.is_match(k) && label_value(v), "{k}={v}");
        }
        assert_eq!(l[FABRIC_LABEL], t.name);
        assert!(by_leaf[&l[LEAF_LABEL]].contains(node));
    }
}

fn check_all(t: &Topology) {
    check_slurm(t);
    check_volcano(t);
    check_kueue(t);
}

#[test]
fn testbed_in_every_format() {
    check_all(&testbed());
    let slurm = export(&testbed(), ExportFormat::Slurm).unwrap();
    assert!(
        slurm.contains("block_sizes:\n    - 4\n    - 8\n"),
        "{slurm}"
    );
    assert!(slurm.contains("nodes: srv1,srv2,srv3,srv4\n"), "{slurm}");
}

#[test]
fn generated_topologies_in_every_format() {
    for (leaves, per_leaf, ocs) in [(1, 2, 0), (3, 2, 0), (5, 1, 0), (4, 2, 2), (8, 2, 0)] {
        check_all(&generated(leaves, per_leaf, ocs));
    }
}

#[test]
fn the_shipped_topologies_export() {
    for (file, text) in [
        (
            "testbed.yaml",
            include_str!("../../../topologies/testbed.yaml"),
        ),
        (
            "testbed-sonic.yaml",
            include_str!("../../../topologies/testbed-sonic.yaml"),
        ),
        (
            "cluster512.yaml",
            include_str!("../../../topologies/cluster512.yaml"),
        ),
    ] {
        check_all(&crate::topology::from_str(file, text).unwrap());
    }
}

#[test]
fn output_is_deterministic() {
    for f in [
        ExportFormat::Slurm,
        ExportFormat::Volcano,
        ExportFormat::Kueue,
    ] {
        assert_eq!(export(&testbed(), f), export(&testbed(), f));
    }
}

#[test]
fn block_sizes_cover_every_leaf_in_powers_of_two() {
    assert_eq!(block_sizes(&[4]), [4]);
    assert_eq!(block_sizes(&[4, 4]), [4, 8]);
    assert_eq!(block_sizes(&[4, 4, 4]), [4, 8, 16]);
    assert_eq!(block_sizes(&[2, 2, 2, 2]), [2, 4, 8]);
    assert_eq!(block_sizes(&[3, 5, 0]), [3, 6], "smallest non-empty leaf");
    assert_eq!(block_sizes(&[]), Vec::<u64>::new());
    let many = vec![1; 1 << 20];
    assert_eq!(block_sizes(&many).len(), MAX_BLOCK_LEVELS as usize);
}

fn renamed(from: &str, to: &str) -> Topology {
    let text = include_str!("../../../topologies/testbed-ocs.yaml").replace(from, to);
    crate::topology::from_str("renamed.yaml", &text).unwrap()
}

#[test]
fn names_kubernetes_cannot_carry_are_errors_naming_them() {
    // Upper case and '_' are fine for vclos and Slurm, not for a Node name.
    let t = renamed("srv3", "Srv_3");
    check_slurm(&t);
    for f in [ExportFormat::Volcano, ExportFormat::Kueue] {
        let e = export(&t, f).unwrap_err();
        assert!(
            matches!(&e, ExportError::Name { what: "server", name, rule: NameRule::KubernetesName, .. } if name == "Srv_3"),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("server `Srv_3`") && msg.contains("'S'"),
            "{msg}"
        );
    }
    // An upper-case leaf is a fine label value (Kueue) but no HyperNode name.
    let t = renamed("leaf2", "Leaf2");
    check_kueue(&t);
    check_slurm(&t);
    assert!(matches!(
        export(&t, ExportFormat::Volcano),
        Err(ExportError::Name { what: "leaf", .. })
    ));
    // A leaf ending in '-' is neither a label value nor an object name.
    let t = renamed("leaf2", "leaf2-");
    for f in [ExportFormat::Volcano, ExportFormat::Kueue] {
        assert!(
            matches!(export(&t, f), Err(ExportError::Name { what: "leaf", ref name, .. }) if name == "leaf2-"),
            "{f}"
        );
    }
    // A topology named like a leaf: two switches / HyperNodes of one name.
    let t = renamed("name: testbed-ocs", "name: leaf1");
    for f in [ExportFormat::Slurm, ExportFormat::Volcano] {
        assert!(
            matches!(export(&t, f), Err(ExportError::Clash { .. })),
            "{f}"
        );
    }
    check_kueue(&t);
}

#[test]
fn name_checks_agree_with_the_schema_patterns() {
    let dns = Regex::new(DNS_SUBDOMAIN).unwrap();
    let value = Regex::new(LABEL_VALUE).unwrap();
    for s in [
        "a", "srv1", "srv1-1", "a.b", "A", "a_b", "-a", "a-", "a..b", ".a", "a.", "1", "a.-b",
        "x.y.z", "é",
    ] {
        assert_eq!(dns_subdomain_problem(s).is_none(), dns.is_match(s), "{s:?}");
        assert_eq!(label_value_problem(s).is_none(), value.is_match(s), "{s:?}");
    }
    assert!(dns_subdomain_problem(&"a".repeat(254)).is_some());
    assert!(dns_subdomain_problem(&"a".repeat(253)).is_none());
    assert!(label_value_problem(&"a".repeat(64)).is_some());
    assert!(label_value_problem("").is_some());
    assert!(slurm_name_problem("sw[1]").is_some());
    assert!(slurm_name_problem(&"a".repeat(65)).is_some());
    assert!(slurm_name_problem("Srv_3").is_none());
}

#[test]
fn leaves_without_servers_are_left_out_and_no_servers_is_an_error() {
    let text = "name: empty\ngpus_per_server: 1\n\
        credentials: {lab: {username: a}}\n\
        leaves:\n  - {name: l1, mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: sonic, credential: lab}, server_ports: [e1], uplink_ports: [e2]}\n\
        \x20 - {name: l2, mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: sonic, credential: lab}, server_ports: [e1], uplink_ports: [e2]}\n\
        spines:\n  - {name: s1, mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: sonic, credential: lab}, ports: [p1, p2]}\n\
        links:\n  - [l1:e2, s1:p1]\n  - [l2:e2, s1:p2]\n";
    let t = crate::topology::from_str("empty.yaml", text).unwrap();
    assert_eq!(export(&t, ExportFormat::Slurm), Err(ExportError::NoServers));
    let with_one = text.replace(
        "links:",
        "servers:\n  - {name: h1, leaf: l2, ports: [e1]}\nlinks:",
    );
    let t = crate::topology::from_str("one.yaml", &with_one).unwrap();
    check_all(&t);
    let volcano = export(&t, ExportFormat::Volcano).unwrap();
    assert!(!volcano.contains("name: l1"), "{volcano}");
}
