//! Forwarding verification from device state.
//!
//! Given what is *installed* on the devices — leaf redirects, spine VRFs with
//! their bound ports and routes, OCS patch tables — follow every GPU-to-GPU
//! flow of a job hop by hop over the physical cabling and report what a real
//! packet would meet: no redirect, a dark OCS port, a spine port in no VRF, a
//! route out of the VRF, a wrong destination leaf. Then check the job stays
//! inside its virtual Clos, shares no link with another job (isolation), and
//! that the Leaf-wise permutation patterns of the paper's Section 5.3 (ring
//! all-reduce, halving-doubling, pair-wise all-to-all) put at most one flow of
//! a step on any link (contention).
//!
//! This deliberately does not read the scheduler's view: the state comes from
//! the devices (parsed running configs, or the emulator's models), so a
//! controller or rendering bug shows up here.
//!
//! Layers: [`fetch`] reads running configs through the real drivers;
//! `configs` parses them by dialect ([`verify_fabric`]); `from_config` maps
//! parsed items to a [`ForwardingState`]; [`verify`] walks it.

mod configs;
pub mod fetch;
mod from_config;
mod patterns;
pub mod sample;
mod state;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::Serialize;

pub use configs::{
    forwarding_from_configs, parse_configs, verify_fabric, verify_state, VerifyError,
    DEVICES_REPORT,
};
pub use from_config::forwarding_state;
pub use patterns::{Pattern, ALL_PATTERNS};
pub use state::{ForwardingState, Vrf};

use crate::topology::{LeafId, PortRef, ServerId, SpineId, Topology};

/// One GPU of a job: where its NIC enters the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct GpuPort {
    pub server: ServerId,
    pub gpu: u16,
    pub leaf: LeafId,
    /// Index into the leaf's server-facing ports.
    pub port: u16,
}

impl GpuPort {
    /// The GPU's leaf port per the topology, if the server has that GPU.
    pub fn of(topo: &Topology, server: ServerId, gpu: u16) -> Option<GpuPort> {
        let s = topo.servers.get(server.index())?;
        Some(GpuPort {
            server,
            gpu,
            leaf: s.leaf,
            port: *s.ports.get(gpu as usize)?,
        })
    }
}

/// The path a flow took: the egress port of every switch hop (a directed link).
pub type Path = Vec<PortRef>;

/// What went wrong for one flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Violation {
    /// The flow cannot reach its destination.
    Unreachable {
        src: String,
        dst: String,
        reason: String,
    },
    /// The flow uses a port outside the job's virtual Clos.
    LeavesVclos {
        src: String,
        dst: String,
        port: String,
    },
    /// A directed link carries flows of this job and of `other`.
    SharedLink { port: String, other: String },
    /// A directed link carries two flows of one step of a pattern.
    Contention {
        pattern: Pattern,
        step: usize,
        port: String,
        flows: usize,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Unreachable { src, dst, reason } => {
                write!(f, "{src} -> {dst} unreachable: {reason}")
            }
            Violation::LeavesVclos { src, dst, port } => {
                write!(f, "{src} -> {dst} leaves the job's virtual Clos at {port}")
            }
            Violation::SharedLink { port, other } => {
                write!(f, "link out of {port} is shared with job {other}")
            }
            Violation::Contention {
                pattern,
                step,
                port,
                flows,
            } => {
                write!(
                    f,
                    "{pattern} step {step}: {flows} flows on the link out of {port}"
                )
            }
        }
    }
}

/// A job as the verifier sees it.
#[derive(Debug, Clone)]
pub struct JobView {
    pub name: String,
    /// GPUs in the job's rank order.
    pub gpus: Vec<GpuPort>,
    /// Fabric ports the job's virtual Clos may use (leaf uplinks, spine ports,
    /// OCS ports); `None` skips the containment check.
    pub allowed: Option<BTreeSet<PortRef>>,
    /// Ports of the links the job's decision shares (issue 16) -> the jobs
    /// it shares them with: agreed sharing, not an isolation violation.
    pub shared: BTreeMap<PortRef, BTreeSet<String>>,
}

impl JobView {
    /// Whether this job agreed to share port `p` with `other`.
    fn shares(&self, p: &PortRef, other: &str) -> bool {
        self.shared.get(p).is_some_and(|w| w.contains(other))
    }
}

/// The verdict for one job.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub job: String,
    pub flows: usize,
    pub violations: Vec<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Follow one flow from `src` to `dst`. Returns the egress ports used.
pub fn trace(
    topo: &Topology,
    fwd: &ForwardingState,
    src: GpuPort,
    dst: GpuPort,
) -> Result<Path, String> {
    let mut path = Vec::new();
    walk(topo, fwd, src, dst, &mut path).map(|()| path)
}

/// Like [`trace`], but keeps the hops taken before a failure in `path`, so a
/// flow that goes astray is also caught leaving its virtual Clos.
fn walk(
    topo: &Topology,
    fwd: &ForwardingState,
    src: GpuPort,
    dst: GpuPort,
    path: &mut Path,
) -> Result<(), String> {
    if src.leaf == dst.leaf {
        return Ok(()); // switched inside the leaf
    }
    let leaf = &topo.leaf(src.leaf).name;
    let sport = &topo.leaf(src.leaf).server_ports[src.port as usize];
    if let Some(why) = fwd.broken_redirect(src.leaf, src.port) {
        return Err(format!("{leaf}:{sport}: {why}"));
    }
    let Some(uplink) = fwd.redirect(src.leaf, src.port) else {
        return Err(format!("{leaf}:{sport} has no redirect"));
    };
    let vlan = fwd.redirect_vlan(src.leaf, src.port);
    if let Some(scope) = fwd.redirect_scope(src.leaf, src.port) {
        if !scope.contains(&dst.leaf) {
            return Err(format!(
                "{leaf}:{sport} redirects no traffic for leaf {}",
                topo.leaf(dst.leaf).name
            ));
        }
    }
    let out = PortRef::Leaf(src.leaf, uplink);
    path.push(out);
    match fwd.far_end(topo, out)? {
        PortRef::Leaf(l, _) if l == dst.leaf => Ok(()),
        PortRef::Leaf(l, _) => Err(format!(
            "{} reaches leaf {} instead of {}",
            topo.port_label(out),
            topo.leaf(l).name,
            topo.leaf(dst.leaf).name
        )),
        PortRef::Spine(s, ingress) => {
            let (egress, tag) = spine_hop(topo, fwd, s, (ingress, vlan), dst)?;
            let out = PortRef::Spine(s, egress);
            path.push(out);
            match fwd.far_end(topo, out)? {
                PortRef::Leaf(l, u) if l == dst.leaf && !fwd.leaf_accepts(l, u, tag) => {
                    Err(format!(
                        "{} sends VLAN {} to {}, which has no sub-interface for it",
                        topo.port_label(out),
                        tag.unwrap_or_default(),
                        topo.port_label(PortRef::Leaf(l, u))
                    ))
                }
                PortRef::Leaf(l, _) if l == dst.leaf => Ok(()),
                other => Err(format!(
                    "{} leads to {} instead of leaf {}",
                    topo.port_label(out),
                    topo.port_label(other),
                    topo.leaf(dst.leaf).name
                )),
            }
        }
        PortRef::Ocs(..) => Err("an OCS port leads to another OCS".into()),
    }
}

/// The spine's forwarding decision: the VRF of the ingress port (of its
/// sub-interface for the frames' VLAN, if tagged), its route to the GPU
/// `dst` (its host route if the VRF has one, else its leaf's prefix).
/// Returns the egress port and the VLAN it tags with, if any.
fn spine_hop(
    topo: &Topology,
    fwd: &ForwardingState,
    s: SpineId,
    (ingress, vlan): (u16, Option<u16>),
    dst: GpuPort,
) -> Result<(u16, Option<u16>), String> {
    let label = || match vlan {
        None => topo.port_label(PortRef::Spine(s, ingress)),
        Some(v) => format!("{} (VLAN {v})", topo.port_label(PortRef::Spine(s, ingress))),
    };
    let vrf = fwd
        .vrf_of(s, ingress, vlan)
        .ok_or_else(|| format!("{} is bound to no VRF", label()))?;
    let leaf = dst.leaf;
    let host = (leaf, Some(dst.port));
    let key = if vrf.routes.contains_key(&host) || vrf.unresolved.contains_key(&host) {
        host
    } else {
        (leaf, None)
    };
    let out_vlan = vrf.egress_vlans.get(&key).copied();
    let out = vrf.routes.get(&key).map(|&p| (p, out_vlan));
    for (port, tag) in [Some((ingress, vlan)), out].into_iter().flatten() {
        let names = fwd.vrf_names_binding(s, port, tag);
        if names.len() > 1 {
            return Err(format!(
                "{}{} is bound to several VRFs ({})",
                topo.port_label(PortRef::Spine(s, port)),
                tag.map(|v| format!(" (VLAN {v})")).unwrap_or_default(),
                names.join(", ")
            ));
        }
    }
    if let Some(why) = vrf.unresolved.get(&key) {
        return Err(format!("VRF {} on {}: {why}", vrf.name, topo.spine(s).name));
    }
    let egress = *vrf.routes.get(&key).ok_or_else(|| {
        let mut m = format!(
            "VRF {} on {} has no route to leaf {}",
            vrf.name,
            topo.spine(s).name,
            topo.leaf(leaf).name
        );
        if !vrf.strays.is_empty() {
            m.push_str(&format!(" (it holds {})", vrf.strays.join("; ")));
        }
        m
    })?;
    if !vrf.binds(egress, out_vlan) {
        return Err(format!(
            "VRF {} routes leaf {} out of {}{}, which is not bound to it",
            vrf.name,
            topo.leaf(leaf).name,
            topo.port_label(PortRef::Spine(s, egress)),
            out_vlan.map(|v| format!(" (VLAN {v})")).unwrap_or_default()
        ));
    }
    Ok((egress, out_vlan))
}

fn gpu_label(topo: &Topology, g: GpuPort) -> String {
    format!("{}/gpu{}", topo.server(g.server).name, g.gpu)
}

/// Verify every job: reachability of all pairs, containment, isolation
/// between jobs, and contention for each pattern.
pub fn verify(topo: &Topology, fwd: &ForwardingState, jobs: &[JobView]) -> Vec<Report> {
    // Directed links used by each job's all-pairs traffic, for isolation.
    let mut users: HashMap<PortRef, BTreeSet<usize>> = HashMap::new();
    let mut reports: Vec<Report> = Vec::new();
    for (ji, job) in jobs.iter().enumerate() {
        let mut r = Report {
            job: job.name.clone(),
            ..Default::default()
        };
        for &src in &job.gpus {
            for &dst in &job.gpus {
                if src == dst {
                    continue;
                }
                r.flows += 1;
                let mut path = Vec::new();
                if let Err(reason) = walk(topo, fwd, src, dst, &mut path) {
                    let v = Violation::Unreachable {
                        src: gpu_label(topo, src),
                        dst: gpu_label(topo, dst),
                        reason,
                    };
                    r.violations.push(v.to_string());
                }
                for p in path {
                    users.entry(p).or_default().insert(ji);
                    if !job.allowed.as_ref().is_none_or(|a| a.contains(&p)) {
                        let v = Violation::LeavesVclos {
                            src: gpu_label(topo, src),
                            dst: gpu_label(topo, dst),
                            port: topo.port_label(p),
                        };
                        r.violations.push(v.to_string());
                    }
                }
            }
        }
        for pattern in ALL_PATTERNS {
            for (step, flows) in pattern.steps(job.gpus.len()).into_iter().enumerate() {
                let mut load: BTreeMap<PortRef, usize> = BTreeMap::new();
                for (a, b) in flows {
                    if let Ok(path) = trace(topo, fwd, job.gpus[a], job.gpus[b]) {
                        for p in path {
                            *load.entry(p).or_default() += 1;
                        }
                    }
                }
                for (p, n) in load.into_iter().filter(|(_, n)| *n > 1) {
                    r.violations.push(
                        Violation::Contention {
                            pattern,
                            step,
                            port: topo.port_label(p),
                            flows: n,
                        }
                        .to_string(),
                    );
                }
            }
        }
        reports.push(r);
    }
    let mut shared: Vec<(PortRef, BTreeSet<usize>)> =
        users.into_iter().filter(|(_, u)| u.len() > 1).collect();
    shared.sort();
    for (p, u) in shared {
        for &ji in &u {
            let agreed =
                |o: usize| jobs[ji].shares(&p, &jobs[o].name) || jobs[o].shares(&p, &jobs[ji].name);
            for &other in u.iter().filter(|&&o| o != ji && !agreed(o)) {
                let v = Violation::SharedLink {
                    port: topo.port_label(p),
                    other: jobs[other].name.clone(),
                };
                reports[ji].violations.push(v.to_string());
            }
        }
    }
    reports
}

#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod tests;

impl JobView {
    /// The job of a decision: its GPUs in rank order (grouped by leaf, as the
    /// paper's patterns assume) and the ports of its reserved links.
    pub fn from_decision(
        topo: &Topology,
        d: &crate::decision::Decision,
    ) -> Result<JobView, String> {
        let mut gpus = Vec::new();
        for g in &d.gpus {
            let server = topo
                .server_id(&g.server)
                .ok_or_else(|| format!("job {}: unknown server `{}`", d.job, g.server))?;
            gpus.push(GpuPort::of(topo, server, g.gpu).ok_or_else(|| {
                format!("job {}: server `{}` has no GPU {}", d.job, g.server, g.gpu)
            })?);
        }
        gpus.sort_by_key(|g| (g.leaf, g.port));
        let mut allowed = BTreeSet::new();
        let mut shared: BTreeMap<PortRef, BTreeSet<String>> = BTreeMap::new();
        let port = |dev: &str, name: &str| {
            switch_port(topo, dev, name)
                .ok_or_else(|| format!("job {}: unknown port {dev}:{name}", d.job))
        };
        for l in &d.vclos.links {
            let ends = [port(&l.leaf, &l.uplink)?, port(&l.peer, &l.peer_port)?];
            allowed.extend(ends);
            let with = d.sharing.as_ref().and_then(|sh| {
                sh.links
                    .iter()
                    .find(|x| x.leaf == l.leaf && x.uplink == l.uplink)
            });
            for w in with.map(|x| &x.with).into_iter().flatten() {
                for e in ends {
                    shared.entry(e).or_default().insert(w.to_string());
                }
            }
        }
        Ok(JobView {
            name: d.job.to_string(),
            gpus,
            allowed: Some(allowed),
            shared,
        })
    }
}

/// A leaf uplink or spine port by name.
fn switch_port(topo: &Topology, device: &str, port: &str) -> Option<PortRef> {
    if let Some(l) = topo.leaf_id(device) {
        let i = topo.leaf(l).uplinks.iter().position(|p| **p == *port)?;
        return Some(PortRef::Leaf(l, i as u16));
    }
    let s = topo.spine_id(device)?;
    let i = topo.spine(s).ports.iter().position(|p| **p == *port)?;
    Some(PortRef::Spine(s, i as u16))
}
