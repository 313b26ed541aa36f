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
//!    tried in [`super::shapes`] order (the cheap pass takes the leaf
//!    sets of every shape together, fewest units stranded first). A leaf
//!    may host several virtual leaves of the job (eq. 7-8: the OCS gives
//!    it parallel links, one per virtual leaf), and a spine may carry
//!    several virtual-spine slots. A cheap heuristic (leaf windows, a
//!    fewest-spines slot layout, the flow assignment of
//!    [`super::assign`]) runs first; then the exact search of
//!    [`super::stage3`], which finds a slice whenever the shape has one,
//!    within a node budget whose exhaustion is counted (`search_cutoffs`).
//!    Details and the reasons for the order: [`several`].
//!
//! Before any stage runs, counts of free units and usable ports that every
//! slice of the three stages meets are checked ([`counts`]): when none
//! holds, the answer is "no slice" at once, the one the stages would give.
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

use foldhash::fast::FixedState;

use super::assign::Budget;
use super::flow::Flow;
use super::local::Grain;
use super::plan::{LinkPick, Plan};
use super::rearrange;
use super::refusals::Refusals;
use super::sizing::{Probe, Sizes};
use super::view::{ocs_id, OcsView};
use super::{
    place_staged, release_held, JobRequest, Outcome, PlacementError, Placer, Policy, SliceOptions,
};
use crate::decision::{Decision, Stage};
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{LeafId, PortRef, SpineId, Topology};

/// A leaf in a one-spine plan: servers taken, (OCS, flow edge) pairs and
/// the direct-cable flow edge.
type Chosen = (LeafId, u32, Vec<(usize, usize)>, Option<usize>);

mod counts;
mod several;
mod spines_first;

#[doc(hidden)]
pub use several::stage3_wide;
use several::{several_spines, CALL_BUDGET};

/// Candidate leaf sets tried per Stage 3 shape.
const STAGE3_TRIES: usize = 4;

/// The OCS-vClos placer.
#[derive(Debug, Clone)]
pub struct OcsVclosPlacer {
    state: FabricState,
    /// Stage 3 shapes whose exact search ran out of budget.
    cutoffs: u64,
    options: SliceOptions,
    sizes: Sizes,
    refusals: Refusals,
}

impl OcsVclosPlacer {
    pub fn new(topology: Arc<Topology>) -> Self {
        Self::with_state(FabricState::new(topology))
    }
    pub fn with_state(state: FabricState) -> Self {
        OcsVclosPlacer {
            state,
            cutoffs: 0,
            options: SliceOptions::default(),
            sizes: Sizes::default(),
            refusals: Refusals::default(),
        }
    }
    /// Let the engine round jobs up ([`super::sizing`]) or take partly
    /// used servers ([`super::Grain`]).
    pub fn with_options(mut self, options: SliceOptions) -> Self {
        self.options = options;
        self
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
        let (cutoffs, refusals) = (&mut self.cutoffs, &mut self.refusals);
        // One exact-search budget for the whole call: every grain and
        // every `--round-up` size draw on it ([`several`] module doc).
        let mut call = Budget(CALL_BUDGET);
        // On the empty fabric: a cut-off search proves nothing.
        let mut probe = |st: &FabricState, grain, gpus| {
            let mut cut = 0;
            let fresh = &mut Budget(CALL_BUDGET);
            match network(st, grain, gpus, (&mut cut, fresh)) {
                Some(_) => Probe::Yes,
                None if cut == 0 => Probe::No,
                None => Probe::Unknown,
            }
        };
        place_staged(
            &mut self.state,
            "ocs-vclos",
            job,
            (self.options, &mut self.sizes),
            &mut |st, grain, gpus| {
                refusals.search((st, grain, gpus), &mut call.0, cutoffs, |left, cut| {
                    let mut budget = Budget(*left);
                    let plan = network(st, grain, gpus, (cut, &mut budget));
                    *left = budget.0;
                    plan
                })
            },
            &mut probe,
        )
    }

    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        release_held(&mut self.state, job)
    }

    fn fabric(&self) -> Option<&FabricState> {
        Some(&self.state)
    }

    fn search_cutoffs(&self) -> u64 {
        self.cutoffs
    }

    fn unsettled_searches(&self) -> u64 {
        self.refusals.unsettled(self.cutoffs)
    }

    rearrange::rearranging_methods!();
}

rearrange::rearranges!(OcsVclosPlacer, Policy::OcsVclos);

/// OCS-vClos beyond one leaf: two-leaf, one spine, then several spines,
/// unless their counts rule all of them out ([`counts`]);
/// `cutoffs` counts Stage 3 searches stopped by their budget, `call` is
/// what the exact search may still spend in this `place` call.
pub fn network(
    st: &FabricState,
    grain: Grain,
    gpus: u32,
    (cutoffs, call): (&mut u64, &mut Budget),
) -> Option<Plan> {
    let k = grain.needed(st.topology(), gpus);
    let view = OcsView::of(st);
    if counts::rules_out(st, grain, &view, k) {
        return None;
    }
    stages((st, grain), &view, k, (cutoffs, call))
}

/// The three stages of [`network`] in order, the first slice winning.
fn stages(
    (st, grain): (&FabricState, Grain),
    view: &OcsView,
    k: u32,
    (cutoffs, call): (&mut u64, &mut Budget),
) -> Option<Plan> {
    two_leaf(st, grain, view, k)
        .or_else(|| one_spine(st, grain, view, k))
        .or_else(|| several_spines((st, grain), view, k, cutoffs, call))
}

/// Mutable pools of usable ports while one plan is being built, hashed
/// with foldhash (SipHash's keyed hashing guards against flooding by
/// chosen keys, which ids of one topology are not, and cost 1% of a
/// backfilling replay).
struct Pools<'a> {
    st: &'a FabricState,
    leaf: HashMap<(LeafId, usize), Vec<(u16, u16)>, FixedState>,
    spine: HashMap<(SpineId, usize), Vec<(u16, u16)>, FixedState>,
    direct: Vec<(LeafId, u16, SpineId, u16)>,
}

impl<'a> Pools<'a> {
    fn new(st: &'a FabricState, view: &OcsView) -> Self {
        Pools {
            st,
            leaf: HashMap::default(),
            spine: HashMap::default(),
            direct: view.direct().to_vec(),
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

/// Leaf-to-leaf through the OCS: `k` (even) units, half on each leaf.
fn two_leaf(st: &FabricState, grain: Grain, view: &OcsView, k: u32) -> Option<Plan> {
    if !k.is_multiple_of(2) {
        return None;
    }
    let topo = st.topology();
    let t = grain.size(topo);
    let half = k / 2;
    let need = (half * t) as usize;
    let mut cand: Vec<LeafId> = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&n| grain.free(st, n) >= half && view.leaf_usable(n) >= need)
        .collect();
    cand.sort_by_key(|&n| (grain.free(st, n), n));
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
                plan.gpus.extend(grain.take(st, n, half));
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
fn one_spine(st: &FabricState, grain: Grain, view: &OcsView, k: u32) -> Option<Plan> {
    let topo = st.topology();
    let t = grain.size(topo);
    let need = (k * t) as usize;
    let mut leaves: Vec<LeafId> = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&n| grain.free(st, n) > 0)
        .collect();
    leaves.sort_by_key(|&n| (grain.free(st, n), n));
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
            let rmax = grain.free(st, n).min(remaining).min(view.reach(n, m) / t);
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
            if !got.is_multiple_of(t) {
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
            let from = plan.gpus.len();
            plan.gpus.extend(grain.take(st, *n, *r));
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
            plan.route_in_order_since(topo, *n, from, &ups);
        }
        return Some(plan);
    }
    None
}
