//! OCS-vClos (paper Section 7, Algorithm 2, Appendix A.3).
//!
//! Stages 0-1 are vClos's. Beyond one leaf the OCS layer lets the engine
//! rewire IDLE OCS ports, so a job's uplinks need not follow the uniform
//! cabling. In order:
//!
//! 1. **Two-leaf** (Section 7.2, Fig. 3): a job of an even number of
//!    servers split evenly over two leaves is joined leaf-to-leaf through
//!    the OCS (each leaf's uplink patched to one of the other leaf's), using
//!    no spine port at all. Pair of leaves: fewest idle servers first.
//! 2. **One spine** (Stage 2): every uplink of the job goes to ONE spine, the
//!    one with the fewest but enough usable ports. Servers come from leaves
//!    with the fewest idle servers first, any number per leaf; how many
//!    uplinks each leaf can patch to the spine is a transportation problem
//!    (per OCS, the leaf's idle uplink-side ports and the spine's idle
//!    spine-side ports bound the links) solved by max-flow ([`super::flow`]),
//!    so an earlier leaf is re-routed through another OCS when that makes
//!    room for the next.
//! 3. **Several spines** (Stage 3, A.3): `l` virtual leaves x `s` ports,
//!    tried in [`super::shapes`] order. For each shape the links as patched
//!    now are tried first with vClos's exact search (no rewiring), so every
//!    vClos placement is also an OCS-vClos placement. Then rewiring: a leaf
//!    may host several virtual leaves of the job (eq. 7-8: the OCS gives it
//!    parallel links, one per virtual leaf), and a spine may carry several
//!    virtual-spine slots. Leaves come fewest idle servers first (a few
//!    candidate windows); slots per spine are tried in three orders (packed
//!    onto the spines with fewest free ports, one per spine, roomiest first);
//!    which OCS carries each link is decided by [`super::assign`]. This
//!    stage is a HEURISTIC (the exact problem is NP-hard in general): it may
//!    miss a slice an exact ILP would find; what it returns is always valid.
//!
//! Only idle OCS ports are ever rewired: every port counted as usable is
//! unheld (the fabric state also refuses anything else). When a usable
//! uplink's OCS port is already patched to a usable port of the target, that
//! patch is reused and no cross-connect is emitted.
//!
//! Parallel links (one spine, or Stage 3 slots sharing a spine) mean the
//! spine has several links to one leaf: the controller must pin each
//! destination server port's route to the link of its slot.

use std::collections::HashMap;
use std::sync::Arc;

use super::assign::assign;
use super::flow::Flow;
use super::plan::{LinkPick, Plan};
use super::view::{ocs_id, LinkView, OcsView};
use super::{
    local, place_staged, release_held, shapes, vclos, JobRequest, Outcome, PlacementError, Placer,
};
use crate::decision::{Decision, Stage};
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{LeafId, PortRef, ServerId, SpineId, Topology};

/// A leaf in a one-spine plan: servers taken, (OCS, flow edge) pairs and
/// the direct-cable flow edge.
type Chosen = (LeafId, u32, Vec<(usize, usize)>, Option<usize>);

/// Candidate leaf sets tried per Stage 3 shape.
const STAGE3_TRIES: usize = 4;

/// The OCS-vClos placer.
#[derive(Debug, Clone)]
pub struct OcsVclosPlacer {
    state: FabricState,
}

impl OcsVclosPlacer {
    pub fn new(topology: Arc<Topology>) -> Self {
        Self::with_state(FabricState::new(topology))
    }
    pub fn with_state(state: FabricState) -> Self {
        OcsVclosPlacer { state }
    }
    pub fn state(&self) -> &FabricState {
        &self.state
    }
}

impl Placer for OcsVclosPlacer {
    fn name(&self) -> &'static str {
        "ocs-vclos"
    }

    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        place_staged(&mut self.state, "ocs-vclos", job, network)
    }

    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        release_held(&mut self.state, job)
    }

    fn fabric(&self) -> Option<&FabricState> {
        Some(&self.state)
    }
}

/// OCS-vClos beyond one leaf: two-leaf, one spine, then several spines.
pub fn network(st: &FabricState, gpus: u32) -> Option<Plan> {
    let t = u32::from(st.topology().gpus_per_server);
    let k = local::servers_needed(gpus, t);
    let view = OcsView::new(st);
    two_leaf(st, &view, k)
        .or_else(|| one_spine(st, &view, k))
        .or_else(|| several_spines(st, &view, k))
}

/// Mutable pools of usable ports while one plan is being built.
struct Pools<'a> {
    st: &'a FabricState,
    leaf: HashMap<(LeafId, usize), Vec<(u16, u16)>>,
    spine: HashMap<(SpineId, usize), Vec<(u16, u16)>>,
    direct: Vec<(LeafId, u16, SpineId, u16)>,
}

impl<'a> Pools<'a> {
    fn new(st: &'a FabricState, view: &OcsView) -> Self {
        Pools {
            st,
            leaf: HashMap::new(),
            spine: HashMap::new(),
            direct: view.direct.clone(),
        }
    }

    fn leaf_pool(&mut self, view: &OcsView, n: LeafId, o: usize) -> &mut Vec<(u16, u16)> {
        self.leaf
            .entry((n, o))
            .or_insert_with(|| view.leaf_on(n, o).to_vec())
    }

    /// Take `x` links leaf `n` -> spine `m` through OCS `o`, reusing live
    /// patches first.
    fn take(&mut self, view: &OcsView, n: LeafId, m: SpineId, o: usize, x: usize) -> Vec<LinkPick> {
        let oid = ocs_id(o);
        let mut lp = std::mem::take(self.leaf_pool(view, n, o));
        let sp = self
            .spine
            .entry((m, o))
            .or_insert_with(|| view.spine_on(m, o).to_vec());
        let mut out = Vec::with_capacity(x);
        let mut i = 0;
        while out.len() < x && i < lp.len() {
            let (u, a) = lp[i];
            let partner = self.st.patch(oid, a);
            if let Some(j) = sp.iter().position(|&(_, b)| Some(b) == partner) {
                let (p, b) = sp.swap_remove(j);
                lp.swap_remove(i);
                out.push(LinkPick {
                    leaf: n,
                    uplink: u,
                    far: PortRef::Spine(m, p),
                    via: Some((oid, a, b)),
                    rewire: false,
                });
            } else {
                i += 1;
            }
        }
        while out.len() < x {
            let (Some((u, a)), Some((p, b))) = (lp.pop(), sp.pop()) else {
                break;
            };
            out.push(LinkPick {
                leaf: n,
                uplink: u,
                far: PortRef::Spine(m, p),
                via: Some((oid, a, b)),
                rewire: self.st.patch(oid, a) != Some(b),
            });
        }
        *self.leaf_pool(view, n, o) = lp;
        out
    }

    fn take_direct(&mut self, n: LeafId, m: SpineId, x: usize) -> Vec<LinkPick> {
        let mut out = Vec::new();
        self.direct.retain(|&(l, u, s, p)| {
            if out.len() < x && l == n && s == m {
                out.push(LinkPick {
                    leaf: n,
                    uplink: u,
                    far: PortRef::Spine(m, p),
                    via: None,
                    rewire: false,
                });
                false
            } else {
                true
            }
        });
        out
    }
}

fn first_idle(st: &FabricState, n: LeafId, r: u32) -> Vec<ServerId> {
    st.idle_server_ids(n).take(r as usize).collect()
}

/// Leaf-to-leaf through the OCS: `k` (even) servers, half on each leaf.
fn two_leaf(st: &FabricState, view: &OcsView, k: u32) -> Option<Plan> {
    if k % 2 != 0 {
        return None;
    }
    let topo = st.topology();
    let t = u32::from(topo.gpus_per_server);
    let half = k / 2;
    let need = (half * t) as usize;
    let mut cand: Vec<LeafId> = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&n| st.idle_servers(n) >= half && view.leaf_usable(n) >= need)
        .collect();
    cand.sort_by_key(|&n| (st.idle_servers(n), n));
    for (i, &a) in cand.iter().enumerate() {
        for &b in &cand[i + 1..] {
            let cap: usize = (0..view.k)
                .map(|o| view.leaf_on(a, o).len().min(view.leaf_on(b, o).len()))
                .sum();
            if cap < need {
                continue;
            }
            let mut plan = Plan::local(Stage::OcsTwoLeaf, Vec::new());
            for n in [a, b] {
                plan.gpus
                    .extend(local::whole(&first_idle(st, n, half), topo.gpus_per_server));
            }
            plan.leaves = vec![a, b];
            let (mut ua, mut ub) = (Vec::new(), Vec::new());
            for o in 0..view.k {
                let oid = ocs_id(o);
                let mut la = view.leaf_on(a, o).to_vec();
                let mut lb = view.leaf_on(b, o).to_vec();
                // Live leaf-to-leaf patches first, then rewire.
                let mut pairs = Vec::new();
                la.retain(|&(u, pa)| {
                    let partner = st.patch(oid, pa);
                    match lb.iter().position(|&(_, pb)| Some(pb) == partner) {
                        Some(j) if ua.len() + pairs.len() < need => {
                            pairs.push(((u, pa), lb.swap_remove(j), false));
                            false
                        }
                        _ => true,
                    }
                });
                while ua.len() + pairs.len() < need {
                    let (Some(x), Some(y)) = (la.pop(), lb.pop()) else {
                        break;
                    };
                    pairs.push((x, y, true));
                }
                for ((u, pa), (v, pb), rewire) in pairs {
                    plan.links.push(LinkPick {
                        leaf: a,
                        uplink: u,
                        far: PortRef::Leaf(b, v),
                        via: Some((oid, pa, pb)),
                        rewire,
                    });
                    ua.push(u);
                    ub.push(v);
                }
            }
            plan.route_in_order(topo, a, &ua);
            plan.route_in_order(topo, b, &ub);
            return Some(plan);
        }
    }
    None
}

/// Spines by the paper's preference: fewest free ports first.
fn spine_order(st: &FabricState, view: &OcsView, min_usable: usize) -> Vec<SpineId> {
    let topo = st.topology();
    let mut v: Vec<(u32, SpineId)> = (0..topo.spines.len() as u32)
        .map(SpineId)
        .filter(|&m| view.spine_usable(m) >= min_usable)
        .map(|m| (st.free_spine_ports(m), m))
        .collect();
    v.sort();
    v.into_iter().map(|(_, m)| m).collect()
}

/// Stage 2: all of the job's uplinks to one spine.
fn one_spine(st: &FabricState, view: &OcsView, k: u32) -> Option<Plan> {
    let topo = st.topology();
    let t = u32::from(topo.gpus_per_server);
    let need = (k * t) as usize;
    let mut leaves: Vec<LeafId> = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&n| st.idle_servers(n) > 0)
        .collect();
    leaves.sort_by_key(|&n| (st.idle_servers(n), n));
    for m in spine_order(st, view, need) {
        // Nodes: 0 source, 1 sink, 2.. OCS, then leaves as added.
        let mut f = Flow::new(2 + view.k);
        for o in 0..view.k {
            let c = view.spine_on(m, o).len() as u32;
            if c > 0 {
                f.add_edge(2 + o, 1, c);
            }
        }
        let mut chosen: Vec<Chosen> = Vec::new();
        let mut remaining = k;
        for &n in &leaves {
            let reach: usize = (0..view.k)
                .map(|o| view.leaf_on(n, o).len().min(view.spine_on(m, o).len()))
                .sum::<usize>()
                + view.direct_count(n, m);
            let rmax = st.idle_servers(n).min(remaining).min(reach as u32 / t);
            if rmax == 0 {
                continue;
            }
            let before = f.clone();
            let add = |f: &mut Flow, cap: u32| {
                let node = f.add_node();
                f.add_edge(0, node, cap);
                let edges: Vec<(usize, usize)> = (0..view.k)
                    .filter(|&o| !view.leaf_on(n, o).is_empty())
                    .map(|o| (o, f.add_edge(node, 2 + o, view.leaf_on(n, o).len() as u32)))
                    .collect();
                let d = view.direct_count(n, m) as u32;
                let de = (d > 0).then(|| f.add_edge(node, 1, d));
                (edges, de)
            };
            let base = f.value();
            let (mut edges, mut de) = add(&mut f, rmax * t);
            let got = f.run(0, 1) - base;
            let r = got / t;
            if got % t != 0 {
                f = before;
                if r == 0 {
                    continue;
                }
                (edges, de) = add(&mut f, r * t);
                f.run(0, 1);
            }
            if r == 0 {
                continue;
            }
            chosen.push((n, r, edges, de));
            remaining -= r;
            if remaining == 0 {
                break;
            }
        }
        if remaining > 0 {
            continue;
        }
        let mut pools = Pools::new(st, view);
        let mut plan = Plan::local(Stage::OcsSpine, Vec::new());
        plan.spines = vec![m];
        for (n, r, edges, de) in &chosen {
            plan.gpus
                .extend(local::whole(&first_idle(st, *n, *r), topo.gpus_per_server));
            plan.leaves.push(*n);
            let mut links = Vec::new();
            for &(o, e) in edges {
                links.extend(pools.take(view, *n, m, o, f.flow_on(e) as usize));
            }
            if let Some(e) = de {
                links.extend(pools.take_direct(*n, m, f.flow_on(*e) as usize));
            }
            let ups: Vec<u16> = links.iter().map(|l| l.uplink).collect();
            plan.links.extend(links);
            plan.route_in_order(topo, *n, &ups);
        }
        return Some(plan);
    }
    None
}

/// Stage 3: `l` virtual leaves x `s` ports over several spines. For each
/// shape the uniform links as patched now are tried first (vClos's exact
/// search, no rewiring: every vClos slice is an OCS-vClos slice), then
/// rewiring, where a leaf may host several virtual leaves (A.3, eq. 7-8):
/// the OCS can give it parallel links to a spine, one per virtual leaf.
fn several_spines(st: &FabricState, view: &OcsView, k: u32) -> Option<Plan> {
    several_spines_with(st, view, k, &mut windows)
}

/// Candidate leaf sets: windows of the candidate list (fewest idle servers
/// first), each taking `l` virtual leaves.
fn windows(cand: &[(LeafId, u32)], l: u32) -> Vec<Vec<(LeafId, u32)>> {
    (0..cand.len().min(STAGE3_TRIES))
        .map_while(|start| take_vleaves(&cand[start..], l))
        .collect()
}

/// The first `l` virtual leaves of `cand` (leaf, how many it can host).
fn take_vleaves(cand: &[(LeafId, u32)], l: u32) -> Option<Vec<(LeafId, u32)>> {
    let mut set = Vec::new();
    let mut left = l;
    for &(n, a) in cand {
        if left == 0 {
            break;
        }
        let take = a.min(left);
        set.push((n, take));
        left -= take;
    }
    (left == 0).then_some(set)
}

/// Diagnostic only (`examples/ocs_rescue.rs`): can Stage 3 place `gpus`
/// when, besides its usual leaf sets, it also tries `rounds` random ones
/// per shape? Measures what the bounded search misses.
#[doc(hidden)]
pub fn stage3_wide(st: &FabricState, gpus: u32, rounds: usize, seed: u64) -> bool {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let t = u32::from(st.topology().gpus_per_server);
    let k = local::servers_needed(gpus, t);
    let view = OcsView::new(st);
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let mut pick = |cand: &[(LeafId, u32)], l: u32| {
        let mut sets = windows(cand, l);
        for _ in 0..rounds {
            let mut c = cand.to_vec();
            c.shuffle(&mut rng);
            sets.extend(take_vleaves(&c, l));
        }
        sets
    };
    several_spines_with(st, &view, k, &mut pick).is_some()
}

/// Proposes candidate leaf sets `(leaf, virtual leaves)` of `l` virtual
/// leaves from the candidates of one shape.
type LeafSets<'a> = dyn FnMut(&[(LeafId, u32)], u32) -> Vec<Vec<(LeafId, u32)>> + 'a;

/// Stage 3 over the leaf sets `pick` proposes for each shape.
fn several_spines_with(
    st: &FabricState,
    view: &OcsView,
    k: u32,
    pick: &mut LeafSets,
) -> Option<Plan> {
    let topo = st.topology();
    let t = u32::from(topo.gpus_per_server);
    let max_up = topo
        .leaves
        .iter()
        .map(|l| l.uplinks.len())
        .max()
        .unwrap_or(0) as u32;
    let links = LinkView::new(st);
    for (l, s) in shapes(k, t, topo.leaves.len() as u32 * max_up / t, max_up) {
        if let Some(plan) =
            vclos::find_slice(st, &links, l as usize, s as usize, vclos::DEFAULT_BUDGET)
        {
            return Some(plan);
        }
        let per_vleaf = s / t;
        // (leaf, virtual leaves it can host), fewest idle servers first.
        let mut cand: Vec<(LeafId, u32)> = (0..topo.leaves.len() as u32)
            .map(LeafId)
            .map(|n| {
                let by_servers = st.idle_servers(n) / per_vleaf;
                let by_ports = (view.leaf_usable(n) / s as usize) as u32;
                (n, by_servers.min(by_ports))
            })
            .filter(|&(_, a)| a > 0)
            .collect();
        cand.sort_by_key(|&(n, _)| (st.idle_servers(n), n));
        if cand.iter().map(|&(_, a)| a).sum::<u32>() < l {
            continue;
        }
        for set in pick(&cand, l) {
            if let Some(plan) = fill_spines(st, view, &set, s as usize, per_vleaf) {
                return Some(plan);
            }
        }
    }
    None
}

/// Slots per spine for `set` (leaf, virtual leaves): candidate vectors
/// (fewest free ports first, as many slots per spine as fit; one slot per
/// spine; roomiest spines first), each bounded by what every leaf reaches.
fn slot_plans(
    st: &FabricState,
    view: &OcsView,
    set: &[(LeafId, u32)],
    s: usize,
    direct: &HashMap<(LeafId, SpineId), u32>,
) -> Vec<Vec<(SpineId, u32)>> {
    let l: u32 = set.iter().map(|&(_, a)| a).sum();
    let mut room: Vec<SpineId> = Vec::new();
    let mut tmax: Vec<u32> = Vec::new();
    for m in spine_order(st, view, l as usize) {
        let per_slot = set
            .iter()
            .map(|&(n, a)| {
                let reach = (0..view.k)
                    .map(|o| view.leaf_on(n, o).len().min(view.spine_on(m, o).len()))
                    .sum::<usize>() as u32
                    + direct.get(&(n, m)).copied().unwrap_or(0);
                reach / a
            })
            .min()
            .unwrap_or(0);
        let cap = view.spine_usable(m) as u32 / l;
        if cap.min(per_slot) > 0 {
            room.push(m);
            tmax.push(cap.min(per_slot));
        }
    }
    let fill = |order: &mut dyn Iterator<Item = usize>, per: u32| {
        let mut left = s as u32;
        let mut v = Vec::new();
        for i in order {
            if left == 0 {
                break;
            }
            let take = tmax[i].min(per).min(left);
            v.push((room[i], take));
            left -= take;
        }
        (left == 0).then_some(v)
    };
    let mut out: Vec<Vec<(SpineId, u32)>> = Vec::new();
    let candidates = [
        fill(&mut (0..room.len()), u32::MAX),
        fill(&mut (0..room.len()), 1),
        fill(&mut (0..room.len()).rev(), u32::MAX),
    ];
    for c in candidates.into_iter().flatten() {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Give each virtual leaf of `set` (leaf, count) exactly `s` links over
/// several spines: `count * t_m` links from the leaf to each spine `m`
/// carrying `t_m` slots.
fn fill_spines(
    st: &FabricState,
    view: &OcsView,
    set: &[(LeafId, u32)],
    s: usize,
    per_vleaf: u32,
) -> Option<Plan> {
    let topo = st.topology();
    let mut direct: HashMap<(LeafId, SpineId), u32> = HashMap::new();
    for &(n, _, m, _) in &view.direct {
        *direct.entry((n, m)).or_default() += 1;
    }
    let leaf_cap: Vec<Vec<u32>> = set
        .iter()
        .map(|&(n, _)| {
            (0..view.k)
                .map(|o| view.leaf_on(n, o).len() as u32)
                .collect()
        })
        .collect();
    for slots in slot_plans(st, view, set, s, &direct) {
        // Direct cables first, the rest through the OCS layer.
        let dx: Vec<Vec<u32>> = set
            .iter()
            .map(|&(n, a)| {
                slots
                    .iter()
                    .map(|&(m, c)| (a * c).min(direct.get(&(n, m)).copied().unwrap_or(0)))
                    .collect()
            })
            .collect();
        let need: Vec<Vec<u32>> = dx
            .iter()
            .zip(set)
            .map(|(row, &(_, a))| {
                row.iter()
                    .zip(&slots)
                    .map(|(d, (_, c))| a * c - d)
                    .collect()
            })
            .collect();
        let spine_cap: Vec<Vec<u32>> = slots
            .iter()
            .map(|&(m, _)| {
                (0..view.k)
                    .map(|o| view.spine_on(m, o).len() as u32)
                    .collect()
            })
            .collect();
        let Some(x) = assign(&need, &leaf_cap, &spine_cap) else {
            continue;
        };
        let mut pools = Pools::new(st, view);
        let mut plan = Plan::local(Stage::OcsVclos, Vec::new());
        plan.leaves = set.iter().map(|&(n, _)| n).collect();
        plan.spines = slots.iter().map(|&(m, _)| m).collect();
        for (i, &(n, a)) in set.iter().enumerate() {
            plan.gpus.extend(local::whole(
                &first_idle(st, n, a * per_vleaf),
                topo.gpus_per_server,
            ));
            // Per spine, the leaf's `a * t_m` links; virtual leaf `q` takes
            // the `q`-th run of `t_m` of them, so that uplink `j` of every
            // virtual leaf goes to the same (spine, slot).
            let mut per_spine = Vec::with_capacity(slots.len());
            for (j, &(m, _)) in slots.iter().enumerate() {
                let mut links = Vec::new();
                for (o, &c) in x[i][j].iter().enumerate() {
                    if c > 0 {
                        links.extend(pools.take(view, n, m, o, c as usize));
                    }
                }
                links.extend(pools.take_direct(n, m, dx[i][j] as usize));
                if links.len() != (a * slots[j].1) as usize {
                    return None;
                }
                per_spine.push(links);
            }
            let mut ups = Vec::with_capacity(a as usize * s);
            for q in 0..a as usize {
                for (j, links) in per_spine.iter().enumerate() {
                    let c = slots[j].1 as usize;
                    for k in &links[q * c..(q + 1) * c] {
                        ups.push(k.uplink);
                        plan.links.push(*k);
                    }
                }
            }
            plan.route_in_order(topo, n, &ups);
        }
        return Some(plan);
    }
    None
}
