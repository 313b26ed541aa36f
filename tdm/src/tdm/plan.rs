//! `vclos tdm plan`: from a topology and a jobs file to one [`Schedule`] per
//! pod group (issue 19 item 3).
//!
//! **Pods and pod groups.** A pod is a leaf with uplinks cabled to OCS
//! ports. Pods whose uplinks share an OCS are in one pod group (003 Section
//! IV-A: 256 pods in 32 groups of 8, one OXC each); every job must lie in
//! one group (003 Section IV-B: "each job is deployed exclusively within a
//! single pod group"), and each group with jobs is planned on its own
//! (rayon: the groups are independent).
//!
//! **Bandwidths.** B = `port_gbps` per OCS port (003: 150 Gbit/s); B_tor =
//! a pod's server-facing ports x `port_gbps` (003: oversubscription 1:1).
//!
//! **Cross-connects.** Each circuit between pods i and j is one OCS
//! cross-connect between an OCS port cabled to an uplink of i and one cabled
//! to an uplink of j on the same OCS (uplinks are fixed-cabled). The
//! schedule names OCS devices and ports as the topology does.

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;
use thiserror::Error;

use super::circuits::{self, GroupPorts};
use super::grouping::{self, Ctx, Evaluation, Outcome};
use super::job::{JobKind, Jobs};
use super::schedule::{Circuit, Schedule, Stage, Variant};
use super::traffic::GroupJob;
use crate::topology::{LeafId, OcsId, PortRef, Topology};

/// Most jobs in one pod group: the hill climbing evaluates every job's move
/// per step, so its cost grows with the square of this (003's groups hold
/// at most 128 GPUs).
pub const MAX_GROUP_JOBS: usize = 128;

/// Planner settings (the CLI flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub variant: Variant,
    /// One OCS reconfiguration, ms (003/000: 50 for MEMS).
    pub switch_ms: f64,
    /// B: bandwidth of an OCS port and of a server port, Gbit/s.
    pub port_gbps: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            variant: Variant::Tdm,
            switch_ms: 50.0,
            port_gbps: 150.0,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum PlanError {
    #[error("--switch-ms {0} must be a finite number >= 0")]
    SwitchMs(f64),
    #[error("--port-gbps {0} must be a finite number > 0")]
    PortGbps(f64),
    #[error("{}: job `{job}`: {message}", at(file, *line))]
    Job {
        file: String,
        line: Option<usize>,
        job: String,
        message: String,
    },
    #[error("pod group of {ocs}: {jobs} jobs; at most {MAX_GROUP_JOBS} per pod group")]
    TooManyJobs { ocs: String, jobs: usize },
    #[error("pod `{pod}`: its jobs hold {gpus} GPUs but it has {capacity} ({jobs})")]
    Overfull {
        pod: String,
        gpus: u64,
        capacity: usize,
        jobs: String,
    },
    #[error(
        "pod group of {ocs}: even the non-TDM baseline needs a circuit between `{a}` and `{b}` \
         and no OCS has a free port of both (003 Algorithm 2 line 9, Eq. 6): too much \
         pod-to-pod demand for these ports"
    )]
    Ports { ocs: String, a: String, b: String },
}

fn at(file: &str, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_string(),
    }
}

/// A pod group: its pods (leaves), OCS devices and who is cabled where.
#[derive(Debug, Clone, PartialEq)]
pub struct PodGroup {
    pub pods: Vec<LeafId>,
    pub ocs: Vec<OcsId>,
    pub ports: GroupPorts,
}

/// The pod groups of `t` (module doc), ordered by their first pod.
pub fn pod_groups(t: &Topology) -> Vec<PodGroup> {
    // Union-find over OCS devices joined by a pod cabled to several.
    let mut parent: Vec<usize> = (0..t.ocs.len()).collect();
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    let pod_ocs: Vec<Vec<OcsId>> = t
        .leaves
        .iter()
        .map(|l| {
            let mut o: Vec<OcsId> = l
                .uplink_peer
                .iter()
                .filter_map(|p| match p {
                    Some(PortRef::Ocs(o, _)) => Some(*o),
                    _ => None,
                })
                .collect();
            o.sort_unstable();
            o.dedup();
            o
        })
        .collect();
    for o in &pod_ocs {
        for w in o.windows(2) {
            let (a, b) = (
                root(&mut parent, w[0].index()),
                root(&mut parent, w[1].index()),
            );
            parent[a] = b;
        }
    }
    let mut groups: Vec<PodGroup> = Vec::new();
    let mut by_root: HashMap<usize, usize> = HashMap::new();
    for (li, o) in pod_ocs.iter().enumerate() {
        let Some(first) = o.first() else { continue };
        let r = root(&mut parent, first.index());
        let g = *by_root.entry(r).or_insert_with(|| {
            groups.push(PodGroup {
                pods: Vec::new(),
                ocs: Vec::new(),
                ports: GroupPorts { ports: Vec::new() },
            });
            groups.len() - 1
        });
        groups[g].pods.push(LeafId(li as u32));
    }
    for g in &mut groups {
        g.ocs = g
            .pods
            .iter()
            .flat_map(|p| pod_ocs[p.index()].clone())
            .collect();
        g.ocs.sort_unstable();
        g.ocs.dedup();
        g.ports.ports = g
            .pods
            .iter()
            .map(|&p| {
                let mut per: Vec<Vec<u16>> = vec![Vec::new(); g.ocs.len()];
                for peer in &t.leaf(p).uplink_peer {
                    if let Some(PortRef::Ocs(o, port)) = peer {
                        if let Ok(k) = g.ocs.binary_search(o) {
                            per[k].push(*port);
                        }
                    }
                }
                per.iter_mut().for_each(|v| v.sort_unstable());
                per
            })
            .collect();
    }
    groups
}

/// The jobs of each pod group, resolved (group index, its jobs).
fn resolve(
    t: &Topology,
    groups: &[PodGroup],
    jobs: &Jobs,
    file: &str,
) -> Result<Vec<(usize, Vec<GroupJob>)>, PlanError> {
    let mut where_: HashMap<LeafId, (usize, usize)> = HashMap::new();
    for (g, group) in groups.iter().enumerate() {
        for (k, &p) in group.pods.iter().enumerate() {
            where_.insert(p, (g, k));
        }
    }
    let mut per_group: BTreeMap<usize, Vec<GroupJob>> = BTreeMap::new();
    let mut load: HashMap<LeafId, (u64, Vec<&str>)> = HashMap::new();
    for job in &jobs.jobs {
        let err = |message: String| PlanError::Job {
            file: file.into(),
            line: job.line,
            job: job.name.clone(),
            message,
        };
        if job.pods.is_empty() {
            return Err(err("no pods".into()));
        }
        let mut gpus = Vec::new();
        let mut group = None;
        for (pod, g) in &job.pods {
            let leaf = t.leaf_id(pod).ok_or_else(|| {
                err(format!(
                    "pod `{pod}` is not a leaf of topology `{}`",
                    t.name
                ))
            })?;
            let &(gi, local) = where_
                .get(&leaf)
                .ok_or_else(|| err(format!("pod `{pod}` has no uplink cabled to an OCS")))?;
            if *group.get_or_insert(gi) != gi {
                return Err(err(format!(
                    "pod `{pod}` is in another pod group than `{}` (no OCS joins them; \
                     003 Section IV-B keeps a job in one pod group)",
                    job.pods[0].0
                )));
            }
            let e = load.entry(leaf).or_default();
            e.0 += u64::from(*g);
            e.1.push(&job.name);
            gpus.push((local, *g));
        }
        let ps = job.kind == JobKind::Ps;
        let ps_local = gpus[job
            .pods
            .iter()
            .position(|p| p.0 == job.ps_pod())
            .unwrap_or(0)]
        .0;
        per_group
            .entry(group.unwrap_or(0))
            .or_default()
            .push(GroupJob {
                name: job.name.clone(),
                kind: job.kind,
                f_gbit: job.per_gpu_gbit(&jobs.defaults),
                unit: job.unit,
                train_s: job.train_s(&jobs.defaults),
                gpus,
                ps: if ps { ps_local } else { 0 },
            });
    }
    if let Some((&g, jobs)) = per_group.iter().find(|(_, j)| j.len() > MAX_GROUP_JOBS) {
        return Err(PlanError::TooManyJobs {
            ocs: ocs_names(t, &groups[g]),
            jobs: jobs.len(),
        });
    }
    let mut over: Vec<_> = load.into_iter().collect();
    over.sort_by_key(|e| e.0);
    for (leaf, (gpus, names)) in over {
        let capacity = t.leaf(leaf).server_ports.len();
        if gpus > capacity as u64 {
            return Err(PlanError::Overfull {
                pod: t.leaf(leaf).name.to_string(),
                gpus,
                capacity,
                jobs: names.join(", "),
            });
        }
    }
    Ok(per_group.into_iter().collect())
}

/// The OCS of a pod group, for messages.
fn ocs_names(t: &Topology, group: &PodGroup) -> String {
    let names: Vec<String> = group
        .ocs
        .iter()
        .map(|&o| t.ocs_dev(o).name.to_string())
        .collect();
    names.join(", ")
}

/// One pod group planned: its jobs, ToR bandwidths and the hill climbing's
/// outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Index into the pod groups.
    pub group: usize,
    pub jobs: Vec<GroupJob>,
    pub b_tor: Vec<f64>,
    pub outcome: Outcome,
}

impl Planned {
    /// The planner's view of the group, as it was planned.
    pub fn ctx<'a>(&'a self, groups: &'a [PodGroup], s: Settings) -> Ctx<'a> {
        ctx(&self.jobs, &groups[self.group].ports, &self.b_tor, s)
    }
}

fn ctx<'a>(jobs: &'a [GroupJob], ports: &'a GroupPorts, b_tor: &'a [f64], s: Settings) -> Ctx<'a> {
    Ctx {
        jobs,
        variant: s.variant,
        ports,
        gbps: s.port_gbps,
        b_tor,
        switch_s: s.switch_ms / 1000.0,
    }
}

/// Plan every pod group that has jobs; `file` names the jobs file in errors.
pub fn plan(
    t: &Topology,
    jobs: &Jobs,
    file: &str,
    s: Settings,
) -> Result<Vec<Schedule>, PlanError> {
    let (groups, planned) = plan_groups(t, jobs, file, s)?;
    Ok(planned
        .iter()
        .map(|p| schedule(t, &groups[p.group], &p.ctx(&groups, s), &p.outcome))
        .collect())
}

/// [`plan`] before the documents: the pod groups and each planned one.
pub fn plan_groups(
    t: &Topology,
    jobs: &Jobs,
    file: &str,
    s: Settings,
) -> Result<(Vec<PodGroup>, Vec<Planned>), PlanError> {
    if !(s.switch_ms.is_finite() && s.switch_ms >= 0.0) {
        return Err(PlanError::SwitchMs(s.switch_ms));
    }
    if !(s.port_gbps.is_finite() && s.port_gbps > 0.0) {
        return Err(PlanError::PortGbps(s.port_gbps));
    }
    let groups = pod_groups(t);
    let work = resolve(t, &groups, jobs, file)?;
    let planned = work
        .into_par_iter()
        .map(|(g, gjobs)| plan_group(t, &groups, g, gjobs, s))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((groups, planned))
}

fn plan_group(
    t: &Topology,
    groups: &[PodGroup],
    g: usize,
    jobs: Vec<GroupJob>,
    s: Settings,
) -> Result<Planned, PlanError> {
    let group = &groups[g];
    let b_tor: Vec<f64> = group
        .pods
        .iter()
        .map(|&p| t.leaf(p).server_ports.len() as f64 * s.port_gbps)
        .collect();
    let ctx = ctx(&jobs, &group.ports, &b_tor, s);
    let outcome = grouping::hill_climb(&ctx).map_err(|e| PlanError::Ports {
        ocs: ocs_names(t, group),
        a: t.leaf(group.pods[e.a]).name.to_string(),
        b: t.leaf(group.pods[e.b]).name.to_string(),
    })?;
    Ok(Planned {
        group: g,
        jobs,
        b_tor,
        outcome,
    })
}

/// The [`Schedule`] document of an outcome.
pub fn schedule(t: &Topology, group: &PodGroup, ctx: &Ctx, out: &Outcome) -> Schedule {
    let plan: &Evaluation = &out.plan;
    let force = grouping::maps_in_force(&plan.stages);
    let stages = plan
        .stages
        .iter()
        .zip(&force)
        .map(|(st, f)| Stage {
            jobs: st.comm.iter().map(|&n| ctx.jobs[n].name.clone()).collect(),
            time_s: st.time_s,
            ocs: f.map_or_else(BTreeMap::new, |k| {
                let own = std::ptr::eq(st, &plan.stages[k]);
                ocs_map(t, group, ctx, &plan.stages[k], own)
            }),
        })
        .collect();
    Schedule {
        topology: t.name.clone(),
        variant: ctx.variant,
        switch_ms: ctx.switch_s * 1000.0,
        round_s: plan.round_s,
        baseline_round_s: out.baseline.round_s,
        reconfiguration_s: plan.reconfigurations as f64 * ctx.switch_s,
        stages,
    }
}

/// The cross-connect map of `st` per OCS name; circuits name the jobs using
/// them if `own` (a stage that only keeps another's map uses none).
fn ocs_map(
    t: &Topology,
    group: &PodGroup,
    ctx: &Ctx,
    st: &grouping::StagePlan,
    own: bool,
) -> BTreeMap<String, Vec<Circuit>> {
    let Some(alloc) = &st.alloc else {
        return BTreeMap::new();
    };
    let users = if own {
        link_users(ctx, st, alloc)
    } else {
        vec![Vec::new(); alloc.links.len()]
    };
    let mut xc = circuits::cross_connects(alloc, &group.ports);
    // In port order per OCS (port names need not sort like their indices).
    xc.sort_unstable_by_key(|c| (c.0, c.1.min(c.2), c.1.max(c.2)));
    let mut map: BTreeMap<String, Vec<Circuit>> = BTreeMap::new();
    for (o, pa, pb, k) in xc {
        let ocs = t.ocs_dev(group.ocs[o as usize]);
        map.entry(ocs.name.to_string()).or_default().push(Circuit {
            a: ocs.ports[pa as usize].to_string(),
            b: ocs.ports[pb as usize].to_string(),
            jobs: users[k].clone(),
        });
    }
    map
}

/// The jobs whose traffic each link of `alloc` carries (Eq. 4 per job).
fn link_users(ctx: &Ctx, st: &grouping::StagePlan, alloc: &circuits::Alloc) -> Vec<Vec<String>> {
    let mut users = vec![Vec::new(); alloc.links.len()];
    let full = ctx.variant == Variant::BiStage;
    for &n in &st.comm {
        let job = &ctx.jobs[n];
        let mut used = vec![false; alloc.links.len()];
        st.pair_edges(ctx, n, |i, j, g| {
            if g <= 0.0 {
                return;
            }
            for (k, l) in alloc.links.iter().enumerate() {
                if (l.a, l.b) == (i, j) || (full && (l.b, l.a) == (i, j)) {
                    used[k] = true;
                }
            }
        });
        for (k, u) in used.iter().enumerate() {
            if *u && !alloc.links[k].circuits.is_empty() {
                users[k].push(job.name.clone());
            }
        }
    }
    users
}
