//! vClos (paper Section 6, Algorithms 1 and 3, Appendix A.2).
//!
//! Stage 0 and 1 are in [`super::local`]. Stage 2 builds a virtual Clos of
//! `l` virtual leaves x `s` virtual spines over UNUSED links only: each
//! chosen leaf gives `s / T` whole idle servers (`s` server ports) and one
//! unused link to each of the `s` chosen spines, i.e. a `K_{l,s}` biclique
//! in the unused-link graph, found by [`super::biclique`] with the eq. 6
//! objective (leaves with fewer idle servers, spines with fewer free ports).
//! Shapes are tried in [`super::shapes`] order (fewest leaves first); the
//! first shape with a solution wins. The `j`-th server port of every leaf is
//! source-routed to its link to the `j`-th virtual spine.
//!
//! On an OCS fabric vClos uses the links as currently patched and never
//! rewires (that is OCS-vClos).
//!
//! With partial servers ([`Grain::Gpus`], [`super::local`] module doc) a
//! leaf gives `s` free GPUs instead of `s / T` whole idle servers, so `s`
//! is any divisor of `N` up to the spines, and the eq. 6 leaf cost is the
//! leaf's free GPUs.

use std::sync::Arc;

use super::assign::Cutoff;
use super::biclique::{self, Graph};
use super::local::Grain;
use super::plan::{LinkPick, Plan};
use super::rearrange;
use super::refusals::Refusals;
use super::sizing::{Probe, Sizes};
use super::view::LinkView;
use super::{
    place_staged, release_held, shapes, JobRequest, Outcome, PlacementError, Placer, Policy,
    SliceOptions,
};
use crate::decision::{Decision, Stage};
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{LeafId, SpineId, Topology};

/// Search nodes allowed after the first solution (quality vs. latency).
pub const DEFAULT_BUDGET: u64 = 256;
/// Search nodes allowed per shape in all ([`super::biclique`]: bounded);
/// a search stopped before any solution is a cutoff. Searches that settle
/// take far fewer (all of the hard traces' vClos decisions at 2048 and 8192
/// GPUs are unchanged by it).
pub const SEARCH_LIMIT: u64 = 20_000;

/// The vClos placer.
#[derive(Debug, Clone)]
pub struct VclosPlacer {
    state: FabricState,
    budget: u64,
    /// Shapes whose search stopped at [`SEARCH_LIMIT`].
    cutoffs: u64,
    pub(super) options: SliceOptions,
    sizes: Sizes,
    refusals: Refusals,
}

impl VclosPlacer {
    pub fn new(topology: Arc<Topology>) -> Self {
        Self::with_state(FabricState::new(topology))
    }

    /// Continue from an existing state (e.g. loaded from a state directory).
    pub fn with_state(state: FabricState) -> Self {
        VclosPlacer {
            state,
            budget: DEFAULT_BUDGET,
            cutoffs: 0,
            refusals: Refusals::default(),
            options: SliceOptions::default(),
            sizes: Sizes::default(),
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

impl Placer for VclosPlacer {
    fn name(&self) -> &'static str {
        "vclos"
    }

    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let budget = self.budget;
        let (cutoffs, refusals) = (&mut self.cutoffs, &mut self.refusals);
        // The biclique search is complete for feasibility (biclique module
        // doc): an empty-fabric "no" is a proof, unless it was cut off.
        let mut probe = |st: &FabricState, grain, gpus| {
            let mut cut = 0;
            match stage2(st, grain, gpus, budget, &mut cut) {
                Some(_) => Probe::Yes,
                None if cut == 0 => Probe::No,
                None => Probe::Unknown,
            }
        };
        place_staged(
            &mut self.state,
            "vclos",
            job,
            (self.options, &mut self.sizes),
            &mut |st, grain, gpus| {
                refusals.search((st, grain, gpus), &mut 0, cutoffs, |_, cut| {
                    stage2(st, grain, gpus, budget, cut)
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

rearrange::rearranges!(VclosPlacer, Policy::Vclos);

/// vClos Stage 2 for a job of `gpus` GPUs (already known not to fit stages
/// 0-1); `cutoffs` counts shapes whose search stopped at [`SEARCH_LIMIT`].
pub fn stage2(
    st: &FabricState,
    grain: Grain,
    gpus: u32,
    budget: u64,
    cutoffs: &mut u64,
) -> Option<Plan> {
    let topo = st.topology();
    let t = grain.size(topo);
    let k = grain.needed(topo, gpus);
    let view = LinkView::of(st);
    let max_up = topo
        .leaves
        .iter()
        .map(|l| l.uplinks.len())
        .max()
        .unwrap_or(0);
    let max_s = (topo.spines.len().min(max_up)) as u32;
    shapes(k, t, topo.leaves.len() as u32, max_s)
        .into_iter()
        .find_map(|(l, s)| {
            find_slice(
                st,
                grain,
                &view,
                (l as usize, s as usize),
                budget,
                SEARCH_LIMIT,
            )
            .unwrap_or_else(|Cutoff| {
                *cutoffs += 1;
                None
            })
        })
}

/// A virtual Clos of exactly `l` leaves x `s` spines over unused links, if
/// one exists (the search is complete within `limit` nodes; see
/// [`super::biclique`]).
pub fn find_slice(
    st: &FabricState,
    grain: Grain,
    view: &LinkView,
    (l, s): (usize, usize),
    budget: u64,
    limit: u64,
) -> Result<Option<Plan>, Cutoff> {
    let topo = st.topology();
    let t = grain.size(topo) as usize;
    if !s.is_multiple_of(t) {
        return Ok(None);
    }
    let per_leaf = (s / t) as u32;
    let cand: Vec<LeafId> = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&n| grain.free(st, n) >= per_leaf)
        .collect();
    if cand.len() < l {
        return Ok(None);
    }
    let g = Graph {
        words: view.words,
        right_cost: view.spine_free.clone(),
        left_bits: cand.iter().map(|n| view.bits[n.index()].clone()).collect(),
        left_cost: cand
            .iter()
            .map(|&n| u64::from(grain.free(st, n)) * t as u64)
            .collect(),
    };
    let Some(sol) = biclique::solve(&g, l, s, budget, limit)? else {
        return Ok(None);
    };
    Ok(slice_plan(st, grain, view, (&cand, &sol), per_leaf))
}

/// The plan for biclique `sol` over candidate leaves `cand`, `per_leaf`
/// units from each leaf.
fn slice_plan(
    st: &FabricState,
    grain: Grain,
    view: &LinkView,
    (cand, sol): (&[LeafId], &biclique::Biclique),
    per_leaf: u32,
) -> Option<Plan> {
    let topo = st.topology();
    let s = sol.right.len();
    let leaves: Vec<LeafId> = sol.left.iter().map(|&i| cand[i]).collect();
    let spines: Vec<SpineId> = sol.right.iter().map(|&r| SpineId(r as u32)).collect();
    let mut plan = Plan::local(Stage::Vclos, Vec::new());
    for &n in &leaves {
        plan.gpus.extend(grain.take(st, n, per_leaf));
    }
    plan.leaves = leaves.clone();
    plan.spines = spines.clone();
    for &n in &leaves {
        let mut ups = Vec::with_capacity(s);
        for &m in &spines {
            let u = view.uplink(n, m)?;
            let (far, via) = st.uplink_far_end(n, u)?;
            plan.links.push(LinkPick {
                leaf: n,
                uplink: u,
                far,
                via,
                rewire: false,
            });
            ups.push(u);
        }
        plan.route_in_order(topo, n, &ups);
    }
    Some(plan)
}
