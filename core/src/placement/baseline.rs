//! The comparison baselines of paper Section 9.3, as placers.
//!
//! * `best`: an ideal non-blocking fabric. Only GPUs and locality matter:
//!   stages 0 and 1 as vClos, otherwise any `ceil(N/T)` whole idle servers
//!   (leaves with the fewest idle servers first). Decisions have no network
//!   part. With partial servers (`--partial-servers`) a job whole servers
//!   cannot hold now takes exactly `N` free GPUs instead ([`Grain::Gpus`]):
//!   the ideal fabric under the same rule as `vclos --partial-servers`.
//! * `sr`: source routing without isolation. GPUs are chosen as for `best`;
//!   every server port of a multi-leaf job is routed to a FIXED uplink (the
//!   uplink with the same index as the server port, modulo the uplinks),
//!   whatever other jobs use it, so jobs share links and spines. Its
//!   decisions list the links used so the replay can count sharing; the
//!   placer's [`FabricState`] holds only the GPUs (links are not exclusive).
//! * `ecmp`, `balanced-ecmp` (issue 14): `best`'s GPUs under another name;
//!   they differ from `best` only in how the replay's network model routes
//!   their flows ([`crate::network::routes`]), since a fabric routing by
//!   ECMP needs no per-job configuration.
//!
//! Both keep their state in the ideal-network model
//! ([`FabricState::ideal_network`]): a multi-leaf `manual` decision holding
//! GPUs only is admitted there, and nowhere else.

use std::collections::HashMap;
use std::sync::Arc;

use super::local::Grain;
use super::plan::{LinkPick, Plan};
use super::{
    commit, local, precheck, release_held, Blocked, JobRequest, Outcome, PlacementError, Placer,
    SliceOptions,
};
use crate::decision::{Decision, Stage};
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{LeafId, PortRef, SpineId, Topology};

/// GPUs under locality only, with the first of `grains` that has them.
fn gpus_only(st: &FabricState, grains: &[Grain], gpus: u32) -> Result<Plan, Blocked> {
    let mut last = Err(Blocked::Gpu);
    for &grain in grains {
        last = gpus_with(st, grain, gpus);
        if last.is_ok() {
            break;
        }
    }
    last
}

/// Stage 0, stage 1, else `grain`'s free units anywhere (whole idle
/// servers by default; leaves with the fewest free units first).
fn gpus_with(st: &FabricState, grain: Grain, gpus: u32) -> Result<Plan, Blocked> {
    let topo = st.topology();
    let t = u32::from(topo.gpus_per_server);
    if gpus <= t {
        return local::stage0(st, gpus)
            .map(|g| Plan::local(Stage::Server, g))
            .ok_or(Blocked::Gpu);
    }
    let k = grain.needed(topo, gpus);
    if let Some(g) = local::stage1(st, grain, k) {
        return Ok(Plan::local(Stage::Leaf, g));
    }
    let gpus = local::fewest_free_first(st, grain, k).ok_or(Blocked::Gpu)?;
    Ok(Plan::local(Stage::Manual, gpus))
}

/// The ideal-fabric baseline.
#[derive(Debug, Clone)]
pub struct BestPlacer {
    state: FabricState,
    /// `best`, or the ECMP policy placing GPUs the same way.
    name: &'static str,
    grains: &'static [Grain],
}

impl BestPlacer {
    pub fn new(topology: Arc<Topology>) -> Self {
        Self::with_state(FabricState::new(topology))
    }
    /// Continue from `state`, in the baselines' ideal-network model.
    pub fn with_state(state: FabricState) -> Self {
        BestPlacer {
            state: state.ideal_network(),
            name: "best",
            grains: &[Grain::Servers],
        }
    }

    /// With partial servers ([`SliceOptions::grains`]).
    pub fn with_options(mut self, options: SliceOptions) -> Self {
        self.grains = options.grains();
        self
    }

    /// The same placement under another policy's name (`ecmp` and
    /// `balanced-ecmp` place GPUs as `best` and differ in routing only).
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }
}

impl Placer for BestPlacer {
    fn name(&self) -> &'static str {
        self.name
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        precheck(&self.state, job)?;
        match gpus_only(&self.state, self.grains, job.gpus) {
            Ok(plan) => commit(&mut self.state, self.name, job, &plan),
            Err(b) => Ok(Outcome::Blocked(b)),
        }
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        release_held(&mut self.state, job)
    }
    fn fabric(&self) -> Option<&FabricState> {
        Some(&self.state)
    }
}

/// The shared source-routing baseline.
#[derive(Debug, Clone)]
pub struct SrPlacer {
    state: FabricState,
    /// Full decisions (with shared links), by job.
    full: HashMap<JobId, Decision>,
    grains: &'static [Grain],
}

impl SrPlacer {
    pub fn new(topology: Arc<Topology>) -> Self {
        Self::with_state(FabricState::new(topology))
    }
    /// Continue from `state`, in the baselines' ideal-network model (held
    /// jobs are released with the decisions the state has for them).
    pub fn with_state(state: FabricState) -> Self {
        let state = state.ideal_network();
        let full = state
            .decisions()
            .into_iter()
            .map(|d| (d.job.clone(), d.clone()))
            .collect();
        SrPlacer {
            state,
            full,
            grains: &[Grain::Servers],
        }
    }

    /// With partial servers ([`SliceOptions::grains`]).
    pub fn with_options(mut self, options: SliceOptions) -> Self {
        self.grains = options.grains();
        self
    }
}

/// Add the fixed source routes of a multi-leaf plan, and as links every
/// leaf-spine link its traffic can cross: up from its own ports, and down
/// from each spine it uses to each of its leaves (where jobs collide).
fn add_fixed_routes(st: &FabricState, plan: &mut Plan) {
    let topo = st.topology();
    let mut leaves: Vec<LeafId> = plan
        .gpus
        .iter()
        .map(|&(s, _)| topo.server(s).leaf)
        .collect();
    leaves.sort();
    leaves.dedup();
    if leaves.len() < 2 {
        return;
    }
    let mut spines: Vec<SpineId> = Vec::new();
    for &l in &leaves {
        let n_up = topo.leaf(l).uplinks.len();
        if n_up == 0 {
            continue;
        }
        for sp in plan.server_ports(topo, l) {
            let u = (sp as usize % n_up) as u16;
            if let Some((PortRef::Spine(s, _), _)) = st.uplink_far_end(l, u) {
                if !spines.contains(&s) {
                    spines.push(s);
                }
                plan.routes.push((l, sp, u));
            }
        }
    }
    spines.sort();
    for &l in &leaves {
        for &m in &spines {
            // One link per (leaf, spine): the routed uplink if there is one.
            let reach = |u: &u16| matches!(st.uplink_far_end(l, *u), Some((PortRef::Spine(x, _), _)) if x == m);
            let routed = plan
                .routes
                .iter()
                .find(|r| r.0 == l && reach(&r.2))
                .map(|r| r.2);
            let u = routed.or_else(|| (0..topo.leaf(l).uplinks.len() as u16).find(reach));
            if let Some((u, Some((far, via)))) = u.map(|u| (u, st.uplink_far_end(l, u))) {
                plan.links.push(LinkPick {
                    leaf: l,
                    uplink: u,
                    far,
                    via,
                    rewire: false,
                });
            }
        }
    }
    plan.leaves = leaves;
    plan.spines = spines;
}

impl Placer for SrPlacer {
    fn name(&self) -> &'static str {
        "sr"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        precheck(&self.state, job)?;
        let mut plan = match gpus_only(&self.state, self.grains, job.gpus) {
            Ok(p) => p,
            Err(b) => return Ok(Outcome::Blocked(b)),
        };
        // Hold the GPUs only; the links are shared by design.
        commit(&mut self.state, "sr", job, &plan)?;
        add_fixed_routes(&self.state, &mut plan);
        let mut d = plan.to_decision(self.state.topology(), &job.id);
        d.requested_gpus = Some(job.gpus);
        self.full.insert(job.id.clone(), d.clone());
        Ok(Outcome::Placed(Arc::new(d)))
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        release_held(&mut self.state, job)?;
        self.full
            .remove(job)
            .ok_or_else(|| PlacementError::UnknownJob(job.clone()))
    }
    fn fabric(&self) -> Option<&FabricState> {
        Some(&self.state)
    }
}
