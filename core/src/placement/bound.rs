//! A measuring tool, not a policy (issue 13, item 3): OCS-vClos with every
//! port-level constraint relaxed to counting, to tell how much of the gap
//! between OCS-vClos and `best` any better search could close.
//!
//! It runs OCS-vClos's stages in the engine's order (`super::ocs`) with
//! the same choices of leaves and spines, but admits a job as soon as the
//! counts allow it:
//!
//! * stages 0-1 as every policy (`super::place_local`);
//! * **two leaves** (Section 7.2): two leaves with `k/2` idle servers each
//!   (no OCS port is checked);
//! * **one spine** (Stage 2): one spine with `k * T` free ports, servers
//!   from the leaves with the fewest idle servers;
//! * **several spines** (Stage 3, A.3), per shape `(l, s)` in the paper's
//!   order: enough virtual leaves (`sum floor(idle_n / (s/T)) >= l`) and
//!   enough slots (`sum floor(free_m / l) >= s`, each slot needing `l`
//!   ports on one spine). Every OCS-vClos slice meets both counts, since
//!   each virtual leaf needs its `s/T` idle servers and each slot one port
//!   per virtual leaf; which OCS carries each link is never checked.
//!
//! Sizes with no slice even on the empty fabric run one size up, decided
//! by the same counting (as the engine does, [`super::sizing`]).
//!
//! So on any one state it places every job OCS-vClos places and more: it
//! stands for a perfect search with perfect OCS port assignment. A replay
//! of it is not a proof about every possible history, but a lower bound on
//! what search alone can win under the engine's packing rules: if it is
//! still far from `best`, the gap is in the isolation model (a prime
//! number of servers needs `l` nearly idle spines), not in the search.
//!
//! Spine ports are counted per spine here; GPUs are held in an
//! ideal-network [`FabricState`], as `best` does, and decisions carry GPUs
//! only.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::Arc;

use super::plan::Plan;
use super::sizing::{Probe, Sizes};
use super::{
    local, ocs_shapes, place_staged, release_held, take_first, JobRequest, Outcome, PlacementError,
    Placer,
};
use crate::decision::{Decision, Stage};
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{LeafId, ServerId, SpineId, Topology};

/// The counting relaxation of OCS-vClos (module doc).
#[derive(Debug, Clone)]
pub struct CountingPlacer {
    state: FabricState,
    /// Free ports per spine.
    pub(crate) free: Vec<u32>,
    /// Ports each held job takes per spine.
    held: HashMap<JobId, Vec<(usize, u32)>>,
    sizes: Sizes,
}

impl CountingPlacer {
    pub fn new(topology: Arc<Topology>) -> Self {
        Self::with_state(FabricState::new(topology))
    }

    /// Continue from `state` (e.g. the state another placer reached): its
    /// jobs keep their GPUs and the spine ports they hold.
    pub fn with_state(state: FabricState) -> Self {
        let topo = Arc::clone(state.topology());
        let mut free = Vec::with_capacity(topo.spines.len());
        let mut held: HashMap<JobId, Vec<(usize, u32)>> = HashMap::new();
        for (m, spine) in topo.spines.iter().enumerate() {
            let id = SpineId(m as u32);
            free.push(state.free_spine_ports(id));
            for p in 0..spine.ports.len() as u16 {
                if let Some(job) = state.spine_port_holder(id, p) {
                    let ports = held.entry(job.clone()).or_default();
                    match ports.last_mut() {
                        Some((last, c)) if *last == m => *c += 1,
                        _ => ports.push((m, 1)),
                    }
                }
            }
        }
        CountingPlacer {
            state: state.ideal_network(),
            free,
            held,
            sizes: Sizes::default(),
        }
    }
}

/// The servers a job gets and the ports it takes per spine.
type Booking = (Vec<ServerId>, Vec<(usize, u32)>);

/// Servers and spine ports for a job of `k` servers beyond one leaf, with
/// `free` ports per spine.
fn counting(st: &FabricState, free: &[u32], k: u32) -> Option<Booking> {
    let topo = st.topology();
    let t = u32::from(topo.gpus_per_server);
    let mut leaves: Vec<LeafId> = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&n| st.idle_servers(n) > 0)
        .collect();
    leaves.sort_by_key(|&n| (st.idle_servers(n), n));
    // Two leaves, k/2 idle servers each, no spine.
    if k.is_multiple_of(2) {
        let two: Vec<LeafId> = leaves
            .iter()
            .copied()
            .filter(|&n| st.idle_servers(n) >= k / 2)
            .take(2)
            .collect();
        if two.len() == 2 {
            return Some((servers_of(st, two.iter().map(|&n| (n, k / 2))), vec![]));
        }
    }
    // One spine with k * T free ports (the fewest that suffice).
    let one = (0..free.len())
        .filter(|&m| free[m] >= k * t)
        .min_by_key(|&m| (free[m], m));
    if let Some(m) = one {
        let take = take_first(leaves.iter().map(|&n| (n, st.idle_servers(n))), k)?;
        return Some((servers_of(st, take.into_iter()), vec![(m, k * t)]));
    }
    ocs_shapes(topo, k, u32::from(topo.gpus_per_server))
        .into_iter()
        .find_map(|(l, s)| several(st, free, &leaves, k / l, (l, s)))
}

/// Stage 3 by counting for shape `(l, s)`, `d` servers per virtual leaf.
fn several(
    st: &FabricState,
    free: &[u32],
    leaves: &[LeafId],
    d: u32,
    (l, s): (u32, u32),
) -> Option<Booking> {
    let vleaves = take_first(leaves.iter().map(|&n| (n, st.idle_servers(n) / d)), l)?;
    // Slots: spines taking the most slots first, then the fewest free
    // ports (the engine's slot layout, `ocs::several`).
    let mut room: Vec<(Reverse<u32>, u32, usize)> = (0..free.len())
        .map(|m| (Reverse(free[m] / l), free[m], m))
        .filter(|r| r.0 .0 > 0)
        .collect();
    room.sort_unstable();
    let slots = take_first(room.into_iter().map(|(Reverse(c), _, m)| (m, c)), s)?;
    let ports = slots.into_iter().map(|(m, c)| (m, c * l)).collect();
    Some((
        servers_of(st, vleaves.into_iter().map(|(n, a)| (n, a * d))),
        ports,
    ))
}

/// The first `r` idle servers of each `(leaf, r)`.
fn servers_of(st: &FabricState, picks: impl Iterator<Item = (LeafId, u32)>) -> Vec<ServerId> {
    picks
        .flat_map(|(n, r)| st.idle_server_ids(n).take(r as usize))
        .collect()
}

impl Placer for CountingPlacer {
    fn name(&self) -> &'static str {
        "counting-bound"
    }

    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let topo = Arc::clone(self.state.topology());
        let t = u32::from(topo.gpus_per_server);
        let full: Vec<u32> = topo.spines.iter().map(|s| s.ports.len() as u32).collect();
        let free = &self.free;
        let mut ports = Vec::new();
        // Sizes with no slice even on the empty fabric run one size up,
        // decided by the same counting (as the engine, `super::sizing`).
        let mut probe = |st: &FabricState, _: super::Grain, gpus: u32| match counting(
            st,
            &full,
            local::servers_needed(gpus, t),
        ) {
            Some(_) => Probe::Yes,
            None => Probe::No,
        };
        let mut network = |st: &FabricState, _: super::Grain, gpus: u32| {
            let (servers, p) = counting(st, free, local::servers_needed(gpus, t))?;
            ports = p;
            Some(Plan::local(Stage::Manual, local::whole(&servers, t as u16)))
        };
        let out = place_staged(
            &mut self.state,
            "counting-bound",
            job,
            (super::SliceOptions::default(), &mut self.sizes),
            &mut network,
            &mut probe,
        )?;
        if matches!(out, Outcome::Placed(_)) {
            for &(m, c) in &ports {
                self.free[m] -= c;
            }
            self.held.insert(job.id.clone(), ports);
        }
        Ok(out)
    }

    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        for (m, c) in self.held.remove(job).unwrap_or_default() {
            self.free[m] += c;
        }
        release_held(&mut self.state, job)
    }

    fn fabric(&self) -> Option<&FabricState> {
        Some(&self.state)
    }
}
