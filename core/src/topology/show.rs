//! Views of a topology: the one-line summary, a JSON object, a text listing
//! and a Graphviz (DOT) picture drawn from the petgraph graph.

use std::fmt::Write as _;

use petgraph::visit::EdgeRef;
use serde::Serialize;

use super::{Edge, Member, Node, Topology};

/// Counts used by `validate`, `show --format json` and tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub name: String,
    pub leaves: usize,
    pub spines: usize,
    pub servers: usize,
    pub gpus: usize,
    pub gpus_per_server: usize,
    pub ocs: usize,
    /// Fabric cables (leaf-spine, leaf-OCS, OCS-spine); NIC cables excluded.
    pub links: usize,
    pub patches: usize,
    /// Managed devices (a chassis hosting several logical spines counts once).
    pub devices: usize,
}

pub fn summary(t: &Topology) -> Summary {
    Summary {
        name: t.name.clone(),
        leaves: t.leaves.len(),
        spines: t.spines.len(),
        servers: t.servers.len(),
        gpus: t.gpu_count(),
        gpus_per_server: t.gpus_per_server as usize,
        ocs: t.ocs.len(),
        links: t.links.len(),
        patches: t.ocs.iter().map(|o| o.patches.len()).sum(),
        devices: t.devices.len(),
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} leaves, {} spines, {} OCS, {} servers x {} GPUs = {} GPUs, {} links, {} patches, {} managed devices",
            self.name, self.leaves, self.spines, self.ocs, self.servers, self.gpus_per_server, self.gpus, self.links, self.patches, self.devices
        )
    }
}

#[derive(Serialize)]
struct DeviceView<'a> {
    name: &'a str,
    role: String,
    protocol: String,
    dialect: String,
    host: &'a str,
    port: u16,
    members: Vec<&'a str>,
}

/// The JSON object of `topology show --format json`.
pub fn json(t: &Topology) -> serde_json::Value {
    let mut v = serde_json::to_value(summary(t)).unwrap_or_default();
    let devices: Vec<DeviceView> = t
        .devices
        .iter()
        .map(|d| DeviceView {
            name: &d.name,
            role: d.role.to_string(),
            protocol: d.mgmt.protocol.to_string(),
            dialect: d.mgmt.dialect.to_string(),
            host: &d.mgmt.host,
            port: d.mgmt.port,
            members: d.members.iter().map(|m| member_name(t, *m)).collect(),
        })
        .collect();
    v["device_list"] = serde_json::to_value(devices).unwrap_or_default();
    v
}

fn member_name(t: &Topology, m: Member) -> &str {
    match m {
        Member::Leaf(l) => &t.leaf(l).name,
        Member::Spine(s) => &t.spine(s).name,
        Member::Ocs(o) => &t.ocs_dev(o).name,
    }
}

/// A human-readable listing.
pub fn text(t: &Topology) -> String {
    let mut out = format!("{}\n\nmanaged devices:\n", summary(t));
    for d in &t.devices {
        let members: Vec<&str> = d.members.iter().map(|m| member_name(t, *m)).collect();
        let hosted = if members.len() > 1 || members.first() != Some(&d.name.as_str()) {
            format!("  hosts {}", members.join(", "))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {:<16} {:<5} {}:{} {} {}{hosted}",
            d.name, d.role, d.mgmt.host, d.mgmt.port, d.mgmt.protocol, d.mgmt.dialect
        );
    }
    out.push_str("\nleaves:\n");
    for l in &t.leaves {
        let _ = writeln!(
            out,
            "  {:<16} {} server ports, {} uplinks, {} servers",
            l.name,
            l.server_ports.len(),
            l.uplinks.len(),
            l.servers.len()
        );
    }
    out
}

fn node_name(t: &Topology, n: Node) -> &str {
    match n {
        Node::Server(s) => &t.server(s).name,
        Node::Leaf(l) => &t.leaf(l).name,
        Node::Spine(s) => &t.spine(s).name,
        Node::Ocs(o) => &t.ocs_dev(o).name,
    }
}

/// Graphviz picture: spines on top, OCS in the middle, leaves, then servers;
/// VRF-virtualised spines are grouped in a cluster per chassis. Parallel
/// cables between two nodes are drawn once with a count.
pub fn dot(t: &Topology) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "graph \"{}\" {{", t.name);
    let _ = writeln!(
        out,
        "  rankdir=BT; splines=false; node [fontname=\"Helvetica\", fontsize=10];"
    );
    let rank = |out: &mut String, shape: &str, color: &str, nodes: Vec<Node>| {
        let _ = writeln!(
            out,
            "  {{ rank=same; node [shape={shape}, style=filled, fillcolor=\"{color}\"];"
        );
        for n in nodes {
            let _ = writeln!(out, "    \"{}\";", node_name(t, n));
        }
        let _ = writeln!(out, "  }}");
    };
    rank(
        &mut out,
        "box3d",
        "#dddddd",
        (0..t.servers.len())
            .map(|i| Node::Server(super::ServerId(i as u32)))
            .collect(),
    );
    rank(
        &mut out,
        "box",
        "#9ecae1",
        (0..t.leaves.len())
            .map(|i| Node::Leaf(super::LeafId(i as u32)))
            .collect(),
    );
    if !t.ocs.is_empty() {
        rank(
            &mut out,
            "octagon",
            "#fdd0a2",
            (0..t.ocs.len())
                .map(|i| Node::Ocs(super::OcsId(i as u32)))
                .collect(),
        );
    }
    rank(
        &mut out,
        "box",
        "#a1d99b",
        (0..t.spines.len())
            .map(|i| Node::Spine(super::SpineId(i as u32)))
            .collect(),
    );
    for d in t.devices.iter().filter(|d| d.members.len() > 1) {
        let _ = writeln!(
            out,
            "  subgraph \"cluster_{}\" {{ label=\"{} (chassis)\"; style=dashed;",
            d.name, d.name
        );
        for m in &d.members {
            let _ = writeln!(out, "    \"{}\";", member_name(t, *m));
        }
        let _ = writeln!(out, "  }}");
    }
    let mut counts: std::collections::BTreeMap<(usize, usize), (usize, bool)> = Default::default();
    for e in t.graph.edge_references() {
        let (a, b) = (e.source().index(), e.target().index());
        let key = (a.min(b), a.max(b));
        let entry = counts
            .entry(key)
            .or_insert((0, matches!(e.weight(), Edge::Nic { .. })));
        entry.0 += 1;
    }
    for ((a, b), (n, nic)) in counts {
        let (na, nb) = (
            t.graph[petgraph::graph::NodeIndex::new(a)],
            t.graph[petgraph::graph::NodeIndex::new(b)],
        );
        let style = if nic { ", color=\"#888888\"" } else { "" };
        let label = if n > 1 {
            format!(" [label=\"{n}\"{style}]")
        } else if nic {
            format!(" [{}]", &style[2..])
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  \"{}\" -- \"{}\"{label};",
            node_name(t, na),
            node_name(t, nb)
        );
    }
    out.push_str("}\n");
    out
}
