//! Topology export for cluster schedulers (issue 17, item 4): the fabric's
//! leaves and the servers behind them in the forms Slurm, Volcano and Kueue
//! read, so a scheduler keeps a job's servers where vClos can give it an
//! isolated slice.
//!
//! [`export`] is pure: a validated [`Topology`] in, one YAML text out, the
//! same bytes for the same topology (leaves and servers in file order).
//! Names are checked against each scheduler's own rules and an error names
//! the server or leaf that cannot be expressed; nothing is renamed, because a
//! sanitised node name would match no node the scheduler knows. Leaves
//! without servers are left out of every format (no scheduler accepts an
//! empty switch, block or HyperNode); a topology without any server is an
//! error.
//!
//! **Node names.** Every format names nodes by the topology's server names:
//! they must be the scheduler's node names (Slurm `NodeName`, the
//! Kubernetes `Node` object's name). Rename the servers in the topology file
//! if they differ.
//!
//! # Slurm (`--format slurm`)
//!
//! A `topology.yaml` (Slurm 25.05 and later; the file replaces
//! `topology.conf`) holding two topologies, as the man page
//! `topology.yaml(5)` defines them
//! (<https://slurm.schedmd.com/topology.yaml.html>, source
//! `doc/man/man5/topology.yaml.5` in SchedMD/slurm, and its parser
//! `src/plugins/data_parser/v0.0.45/parsers.c` at 284c3b95: `topology`
//! first, `cluster_default` a boolean, exactly one of `tree` / `block` /
//! `flat`; a switch is `switch` + `children` or `nodes`, a block `block` +
//! `nodes`, every node or switch list a hostlist *string*, `block_sizes` a
//! list of integers):
//!
//! * `<name>-tree` (`cluster_default: true`), for the `topology/tree`
//!   plugin: one switch per leaf named as the leaf, listing its servers, and
//!   one top switch named as the topology whose `children` are the leaves.
//!   The Topology Guide (<https://slurm.schedmd.com/topology.html>) advises
//!   exactly this shape, leaf switches plus one top switch; a switch name has
//!   at most 64 characters (`topology.conf(5)`).
//! * `<name>-block` (`cluster_default: false`; a partition selects it with
//!   `Topology=<name>-block`), for the `topology/block` plugin: one base
//!   block per leaf. `block_sizes` starts with the planning base block size,
//!   each block must hold at least that many nodes and every later size is
//!   the base times a power of two (`topology.yaml(5)`; the plugin,
//!   `src/plugins/topology/block/block_record.c`, takes levels until one
//!   covers every block, at most 16). The base is the smallest leaf's server
//!   count, so a base block is what vClos places without leaving a leaf.
//!   The larger sizes are the slice-feasible groups: in the vClos paper a
//!   job spanning L leaves gets a uniform shape, the same number of servers
//!   on each leaf, and in a full-bisection leaf-spine fabric (directly or
//!   through OCS) any L leaves can carry such a slice; Slurm can only name
//!   groups of 2^k contiguous base blocks, so the sizes are base x 2^k up to
//!   the first that covers every leaf. A user asks Slurm for the uniform
//!   shape itself with `--nodes L*s --segment s` (`sbatch(1)` and the
//!   Topology Guide: the allocation is built from segments of `s` nodes and
//!   `--nodes` must be a multiple of `s`; our reading is that with the block
//!   plugin a segment lies in one base block, and `--spread-segments` keeps
//!   two segments of the job off one base block).
//!
//! # Volcano (`--format volcano`)
//!
//! `HyperNode` objects, `apiVersion: topology.volcano.sh/v1alpha1`,
//! cluster-scoped, as the CRD `hypernodes.topology.volcano.sh` defines them
//! (volcano-sh/volcano `config/crd/volcano/bases/topology.volcano.sh_hypernodes.yaml`
//! at 178acf02; Go types in volcano-sh/apis
//! `pkg/apis/topology/v1alpha1/hypernode_types.go` at 536f121f;
//! user guide `docs/user-guide/how_to_use_network_topology_aware_scheduling.md`
//! and <https://volcano.sh/en/docs/network_topology_aware_scheduling/>):
//! `spec.tier` an integer >= 0 (required; tier 1 is the closest domain),
//! `spec.tierName` a string of at most 253 characters (optional, in the API
//! since Volcano 1.14), `spec.members` at least one, each with `type` `Node`
//! or `HyperNode` and a `selector` holding exactly one of `exactMatch`
//! (`name`: an RFC 1123 subdomain of at most 253 characters), `regexMatch`,
//! `labelMatch`.
//!
//! * tier 1, `tierName: leaf`: one HyperNode per leaf, named as the leaf,
//!   its servers as `Node` members by `exactMatch`;
//! * tier 2, `tierName: fabric`: one HyperNode named as the topology whose
//!   members are the tier-1 HyperNodes (`type: HyperNode`, `exactMatch`).
//!
//! A Volcano job's `partitionPolicy` (`totalPartitions: L`,
//! `partitionSize: s`, `highestTierAllowed: 1`) under
//! `networkTopology.highestTierAllowed: 2` asks for the vClos uniform shape.
//!
//! # Kueue (`--format kueue`)
//!
//! A `Topology`, `apiVersion: kueue.x-k8s.io/v1beta2` (the storage version;
//! `v1beta1` is served but deprecated: kubernetes-sigs/kueue
//! `config/components/crd/bases/kueue.x-k8s.io_topologies.yaml` and
//! `apis/kueue/v1beta2/topology_types.go` at ff69552e; the docs'
//! `site/static/examples/tas/sample-queues.yaml`, and Topology Aware
//! Scheduling, <https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/>):
//! cluster-scoped, `spec.levels` 1 to 16 entries, unique, each a
//! `nodeLabel` (a qualified label key), `kubernetes.io/hostname` allowed
//! only as the last level. Levels here, from the top: [`FABRIC_LABEL`],
//! [`LEAF_LABEL`], [`HOSTNAME_LABEL`] (set by the kubelet; it equals the
//! node name unless the kubelet is told otherwise).
//!
//! TAS reads the topology from node labels, so the output begins with the
//! label commands as comment lines, one per server, each of the form
//! `# kubectl label node <server> --overwrite <fabric label>=<topology> <leaf label>=<leaf>`;
//! run them with `sed -n 's/^# kubectl /kubectl /p' FILE | sh`, then
//! `kubectl apply -f FILE`. A ResourceFlavor names the Topology in
//! `spec.topologyName`; a PodSet asks for the uniform shape with
//! `kueue.x-k8s.io/podset-slice-required-topology: <leaf label>` and
//! `kueue.x-k8s.io/podset-slice-size: s`.
//!
//! # Kubernetes names
//!
//! Object and node names must be RFC 1123 subdomains (lower-case letters,
//! digits, `-`, `.`, each dot-separated part starting and ending with a
//! letter or digit, at most 253 characters); label values at most 63
//! characters of letters, digits, `-`, `_`, `.`, starting and ending with a
//! letter or digit (Kubernetes, "Object Names and IDs" and "Labels and
//! Selectors"; the same patterns stand in the CRDs above).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use thiserror::Error;

use super::Topology;

/// The scheduler whose format [`export`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum ExportFormat {
    /// Slurm `topology.yaml`: a tree and a block topology.
    Slurm,
    /// Volcano `HyperNode` objects: leaves (tier 1) and the fabric (tier 2).
    Volcano,
    /// Kueue `Topology` plus the node labels it reads.
    Kueue,
}

impl fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExportFormat::Slurm => "slurm",
            ExportFormat::Volcano => "volcano",
            ExportFormat::Kueue => "kueue",
        })
    }
}

/// Node label holding the topology's name (Kueue's top level).
pub const FABRIC_LABEL: &str = "topology.vclos.io/fabric";
/// Node label holding the leaf a server hangs off (Kueue's middle level).
pub const LEAF_LABEL: &str = "topology.vclos.io/leaf";
/// The kubelet's own node label, Kueue's lowest level.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Volcano's HyperNode API group and version.
pub const VOLCANO_API_VERSION: &str = "topology.volcano.sh/v1alpha1";
/// Kueue's Topology API group and its storage version.
pub const KUEUE_API_VERSION: &str = "kueue.x-k8s.io/v1beta2";
/// Longest Slurm switch name (`topology.conf(5)`).
pub const MAX_SLURM_NAME: usize = 64;
/// Slurm's block plugin keeps at most this many block levels.
pub const MAX_BLOCK_LEVELS: u32 = 16;

/// A rule a name has to follow in the exported text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A Kubernetes object or node name: an RFC 1123 subdomain.
    KubernetesName,
    /// A Kubernetes label value.
    LabelValue,
    /// A Slurm node, switch or block name inside a hostlist string.
    SlurmName,
}

impl fmt::Display for NameRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameRule::KubernetesName => {
                "a Kubernetes name (RFC 1123 subdomain: lower-case letters, digits, '-' \
                 and '.', each '.'-separated part starting and ending with a letter or \
                 digit, at most 253 characters)"
            }
            NameRule::LabelValue => {
                "a Kubernetes label value (at most 63 letters, digits, '-', '_' and '.', \
                 starting and ending with a letter or digit)"
            }
            NameRule::SlurmName => {
                "a Slurm name (at most 64 characters, none of whitespace, ',', '[' or ']')"
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExportError {
    /// A server, leaf or topology name the format cannot carry.
    #[error(
        "{what} `{name}` cannot be {rule}: {reason}; rename it in the topology file \
         (export never renames: the scheduler's names must match)"
    )]
    Name {
        what: &'static str,
        name: String,
        rule: NameRule,
        reason: String,
    },
    /// Two objects of one kind would share a name.
    #[error("{format}: the topology and leaf `{name}` would both be named `{name}`; rename one")]
    Clash { format: ExportFormat, name: String },
    #[error("the topology has no servers: there is nothing to export")]
    NoServers,
    #[error("writing the {format} YAML: {message}")]
    Serialize {
        format: ExportFormat,
        message: String,
    },
}

/// The topology as the schedulers see it: `name` and its leaves that have
/// servers, in file order.
struct Fabric<'a> {
    name: &'a str,
    leaves: Vec<LeafGroup<'a>>,
}

struct LeafGroup<'a> {
    name: &'a str,
    servers: Vec<&'a str>,
}

impl<'a> Fabric<'a> {
    fn of(t: &'a Topology) -> Result<Self, ExportError> {
        let leaves: Vec<LeafGroup> = t
            .leaves
            .iter()
            .filter(|l| !l.servers.is_empty())
            .map(|l| LeafGroup {
                name: &l.name,
                servers: l.servers.iter().map(|s| &*t.server(*s).name).collect(),
            })
            .collect();
        if leaves.is_empty() {
            return Err(ExportError::NoServers);
        }
        Ok(Fabric {
            name: &t.name,
            leaves,
        })
    }

    /// Every name (topology, leaves, servers) checked against `rule`, and
    /// no leaf named like the topology: both become switches (Slurm) or
    /// HyperNodes (Volcano).
    fn check(&self, format: ExportFormat, rule: NameRule) -> Result<(), ExportError> {
        check_name("topology", self.name, rule)?;
        for leaf in &self.leaves {
            check_name("leaf", leaf.name, rule)?;
            if leaf.name == self.name {
                return Err(ExportError::Clash {
                    format,
                    name: leaf.name.to_string(),
                });
            }
            for s in &leaf.servers {
                check_name("server", s, rule)?;
            }
        }
        Ok(())
    }
}

/// The fabric in `format`, as YAML text ending in a newline.
pub fn export(topo: &Topology, format: ExportFormat) -> Result<String, ExportError> {
    let fabric = Fabric::of(topo)?;
    match format {
        ExportFormat::Slurm => slurm(&fabric),
        ExportFormat::Volcano => volcano(&fabric),
        ExportFormat::Kueue => kueue(&fabric),
    }
}

fn check_name(what: &'static str, name: &str, rule: NameRule) -> Result<(), ExportError> {
    let problem = match rule {
        NameRule::KubernetesName => dns_subdomain_problem(name),
        NameRule::LabelValue => label_value_problem(name),
        NameRule::SlurmName => slurm_name_problem(name),
    };
    match problem {
        None => Ok(()),
        Some(reason) => Err(ExportError::Name {
            what,
            name: name.to_string(),
            rule,
            reason,
        }),
    }
}

/// Why `s` is empty, longer than `max` or holds a character `allowed`
/// refuses; `None` if it is none of these.
fn charset_problem(s: &str, max: usize, allowed: impl Fn(char) -> bool) -> Option<String> {
    if s.is_empty() {
        return Some("it is empty".into());
    }
    if s.len() > max {
        return Some(format!("{} characters, more than {max}", s.len()));
    }
    s.chars()
        .find(|c| !allowed(*c))
        .map(|c| format!("it contains {c:?}"))
}

/// `part` starts and ends with an ASCII letter or digit.
fn alnum_ends(part: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    alnum(part.chars().next()) && alnum(part.chars().last())
}

/// Why `s` is not an RFC 1123 subdomain (Kubernetes object and node names).
pub fn dns_subdomain_problem(s: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    charset_problem(s, 253, allowed).or_else(|| {
        s.split('.')
            .find(|part| !alnum_ends(part))
            .map(|part| format!("the part {part:?} does not start and end with a letter or digit"))
    })
}

/// Why `s` is not a Kubernetes label value (the empty value is allowed by
/// Kubernetes, but never written here, so it is refused too).
pub fn label_value_problem(s: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    charset_problem(s, 63, allowed).or_else(|| {
        (!alnum_ends(s)).then(|| "it does not start and end with a letter or digit".into())
    })
}

/// Why `s` cannot stand in a Slurm hostlist string or as a switch name.
pub fn slurm_name_problem(s: &str) -> Option<String> {
    charset_problem(s, MAX_SLURM_NAME, |c| {
        !(c.is_whitespace() || c.is_control() || matches!(c, ',' | '[' | ']' | '#'))
    })
}

/// Slurm's `block_sizes`: the base (the smallest leaf), then the base times
/// 2, 4, ... up to the first size whose block count covers every leaf (the
/// block plugin stops there), at most [`MAX_BLOCK_LEVELS`] sizes.
pub fn block_sizes(servers_per_leaf: &[usize]) -> Vec<u64> {
    let Some(base) = servers_per_leaf.iter().copied().filter(|&n| n > 0).min() else {
        return Vec::new();
    };
    let blocks = servers_per_leaf.iter().filter(|&&n| n > 0).count() as u64;
    let mut sizes = Vec::new();
    for level in 0..MAX_BLOCK_LEVELS {
        let count = 1u64 << level;
        sizes.push(base as u64 * count);
        if count >= blocks {
            break;
        }
    }
    sizes
}

fn to_yaml<T: Serialize>(format: ExportFormat, value: &T) -> Result<String, ExportError> {
    serde_yaml_ng::to_string(value).map_err(|e| ExportError::Serialize {
        format,
        message: e.to_string(),
    })
}

/// The comment lines that open every output: what it is, then `lines`.
fn header(fabric: &Fabric, format: ExportFormat, lines: &[String]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# {format} topology of `{}`, written by `vclos topology export --format {format}`.\n",
        fabric.name
    ));
    for l in lines {
        out.push_str("# ");
        out.push_str(l);
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------- Slurm

#[derive(Serialize)]
struct SlurmTopology {
    topology: String,
    cluster_default: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    tree: Option<SlurmTree>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block: Option<SlurmBlocks>,
}

#[derive(Serialize)]
struct SlurmTree {
    switches: Vec<SlurmSwitch>,
}

#[derive(Serialize)]
struct SlurmSwitch {
    switch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<String>,
}

#[derive(Serialize)]
struct SlurmBlocks {
    block_sizes: Vec<u64>,
    blocks: Vec<SlurmBlock>,
}

#[derive(Serialize)]
struct SlurmBlock {
    block: String,
    nodes: String,
}

fn slurm(fabric: &Fabric) -> Result<String, ExportError> {
    let format = ExportFormat::Slurm;
    fabric.check(format, NameRule::SlurmName)?;
    let mut switches: Vec<SlurmSwitch> = fabric
        .leaves
        .iter()
        .map(|l| SlurmSwitch {
            switch: l.name.to_string(),
            children: None,
            nodes: Some(l.servers.join(",")),
        })
        .collect();
    switches.push(SlurmSwitch {
        switch: fabric.name.to_string(),
        children: Some(
            fabric
                .leaves
                .iter()
                .map(|l| l.name)
                .collect::<Vec<_>>()
                .join(","),
        ),
        nodes: None,
    });
    let sizes: Vec<usize> = fabric.leaves.iter().map(|l| l.servers.len()).collect();
    let doc = vec![
        SlurmTopology {
            topology: format!("{}-tree", fabric.name),
            cluster_default: true,
            tree: Some(SlurmTree { switches }),
            block: None,
        },
        SlurmTopology {
            topology: format!("{}-block", fabric.name),
            cluster_default: false,
            tree: None,
            block: Some(SlurmBlocks {
                block_sizes: block_sizes(&sizes),
                blocks: fabric
                    .leaves
                    .iter()
                    .map(|l| SlurmBlock {
                        block: l.name.to_string(),
                        nodes: l.servers.join(","),
                    })
                    .collect(),
            }),
        },
    ];
    let mut out = header(
        fabric,
        format,
        &[
            "Node names are the topology's server names: they must be Slurm NodeNames.".into(),
            "Tree: a switch per leaf under one top switch. Block: a base block per leaf,".into(),
            "larger sizes for 2^k leaves; ask for L leaves x s servers with".into(),
            format!(
                "`--nodes L*s --segment s` in a partition with Topology={}-block.",
                fabric.name
            ),
        ],
    );
    out.push_str(&to_yaml(format, &doc)?);
    Ok(out)
}

// ---------------------------------------------------------------- Kubernetes

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<'a, S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata<'a>,
    spec: S,
}

#[derive(Serialize)]
struct Metadata<'a> {
    name: &'a str,
    labels: BTreeMap<&'static str, &'a str>,
}

impl<'a> Metadata<'a> {
    fn new(name: &'a str, fabric: &'a Fabric) -> Self {
        Metadata {
            name,
            labels: BTreeMap::from([
                ("app.kubernetes.io/managed-by", "vclos"),
                (FABRIC_LABEL, fabric.name),
            ]),
        }
    }
}

/// Documents as one YAML stream, each introduced by `---`.
fn stream<T: Serialize>(
    out: &mut String,
    format: ExportFormat,
    docs: &[T],
) -> Result<(), ExportError> {
    for d in docs {
        out.push_str("---\n");
        out.push_str(&to_yaml(format, d)?);
    }
    Ok(())
}

// ---------------------------------------------------------------- Volcano

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HyperNodeSpec<'a> {
    tier: u32,
    tier_name: &'static str,
    members: Vec<HyperNodeMember<'a>>,
}

#[derive(Serialize)]
struct HyperNodeMember<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    selector: MemberSelector<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MemberSelector<'a> {
    exact_match: ExactMatch<'a>,
}

#[derive(Serialize)]
struct ExactMatch<'a> {
    name: &'a str,
}

fn member<'a>(kind: &'static str, name: &'a str) -> HyperNodeMember<'a> {
    HyperNodeMember {
        kind,
        selector: MemberSelector {
            exact_match: ExactMatch { name },
        },
    }
}

fn hypernode<'a>(
    name: &'a str,
    fabric: &'a Fabric,
    tier: u32,
    tier_name: &'static str,
    members: Vec<HyperNodeMember<'a>>,
) -> Object<'a, HyperNodeSpec<'a>> {
    Object {
        api_version: VOLCANO_API_VERSION,
        kind: "HyperNode",
        metadata: Metadata::new(name, fabric),
        spec: HyperNodeSpec {
            tier,
            tier_name,
            members,
        },
    }
}

fn volcano(fabric: &Fabric) -> Result<String, ExportError> {
    let format = ExportFormat::Volcano;
    fabric.check(format, NameRule::KubernetesName)?;
    check_name("topology", fabric.name, NameRule::LabelValue)?;
    let mut docs: Vec<_> = fabric
        .leaves
        .iter()
        .map(|l| {
            let nodes = l.servers.iter().map(|s| member("Node", s)).collect();
            hypernode(l.name, fabric, 1, "leaf", nodes)
        })
        .collect();
    let leaves = fabric
        .leaves
        .iter()
        .map(|l| member("HyperNode", l.name))
        .collect();
    docs.push(hypernode(fabric.name, fabric, 2, "fabric", leaves));
    let mut out = header(
        fabric,
        format,
        &[
            "Node members are the topology's server names: they must be the Node names.".into(),
            "Tier 1: a HyperNode per leaf; tier 2: the fabric. `kubectl apply -f` this file."
                .into(),
        ],
    );
    stream(&mut out, format, &docs)?;
    Ok(out)
}

// ---------------------------------------------------------------- Kueue

#[derive(Serialize)]
struct TopologySpec {
    levels: Vec<TopologyLevel>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TopologyLevel {
    node_label: &'static str,
}

fn kueue(fabric: &Fabric) -> Result<String, ExportError> {
    let format = ExportFormat::Kueue;
    // The topology names the object and is a label value; leaves are only
    // label values; servers are node names.
    check_name("topology", fabric.name, NameRule::KubernetesName)?;
    check_name("topology", fabric.name, NameRule::LabelValue)?;
    for leaf in &fabric.leaves {
        check_name("leaf", leaf.name, NameRule::LabelValue)?;
        for s in &leaf.servers {
            check_name("server", s, NameRule::KubernetesName)?;
        }
    }
    let topology = Object {
        api_version: KUEUE_API_VERSION,
        kind: "Topology",
        metadata: Metadata::new(fabric.name, fabric),
        spec: TopologySpec {
            levels: [FABRIC_LABEL, LEAF_LABEL, HOSTNAME_LABEL]
                .into_iter()
                .map(|node_label| TopologyLevel { node_label })
                .collect(),
        },
    };
    let mut out = header(
        fabric,
        format,
        &[
            "Node names are the topology's server names. Label the nodes, then apply:".into(),
            "  sed -n 's/^# kubectl /kubectl /p' THIS_FILE | sh && kubectl apply -f THIS_FILE"
                .into(),
        ],
    );
    for leaf in &fabric.leaves {
        for s in &leaf.servers {
            out.push_str(&format!(
                "# kubectl label node {s} --overwrite {FABRIC_LABEL}={} {LEAF_LABEL}={}\n",
                fabric.name, leaf.name
            ));
        }
    }
    stream(&mut out, format, &[topology])?;
    Ok(out)
}

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;
