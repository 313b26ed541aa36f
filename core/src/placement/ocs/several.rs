//! OCS-vClos Stage 3 (Appendix A.3): `l` virtual leaves x `s` ports over
//! several spines, with rewiring of idle OCS ports.
//!
//! Two passes over the shapes, each in the paper's order (fewest leaves
//! first), cheapest pass first; the first slice found wins:
//! 1. per shape, a few leaf sets (fewest idle servers first), each with one
//!    slot layout ([`slot_layout`]: as few spines as possible) and the flow
//!    heuristic of [`super::super::assign`]: cheap, and it finds most
//!    slices (about 80% of Stage 3 admissions on the hard traces). The
//!    sets of every shape are tried together, those whose leaves keep the
//!    fewest units idle first (best fit across shapes: the rule eq. 12
//!    applies to the leaves of one shape, fullest leaves first; the
//!    paper's shape order breaks ties). Shape by shape, the first shape
//!    (fewest, so largest, virtual leaves) took whole idle leaves while
//!    partly used ones stayed partly used, and the large jobs that need
//!    whole leaves later found none: on `u2k` seeds 1-3 with `--backfill
//!    slices --round-up 2`, together with the spread OCS assignment
//!    ([`super::super::assign`] module doc), avg JCT fell by 12-31% (and
//!    by 18-31% at 8192 GPUs), and the FIFO cutoffs by 58-82%
//!    (docs/performance.md, "OCS drift and leaf leftovers");
//! 2. per shape the heuristic missed, vClos's search on the links as
//!    patched now (a slice there needs no rewiring), then the exact search
//!    of [`super::super::stage3`], which finds a slice whenever the shape
//!    has one, walking the roomiest leaves and spines first, where a slice
//!    is found (or ruled out) fastest. A shape whose exact search runs out
//!    of budget gets one more, cheap try, slots first and then leaves
//!    ([`super::spines_first`]); only if that fails too is it counted as
//!    cut off, never silently taken as "no slice".
//!
//! Until issue 13 the passes were interleaved per shape, so a job whose
//! first shapes had no slice paid their exact searches (often the whole
//! budget) before the heuristic of a later shape found one at once. With
//! the heuristic pass first, on 6 hard 2048-GPU traces (loads 0.7 and 0.9,
//! seeds 1-3) cutoffs fell by 1-14% and the decision p99 by 5-10%; avg JCT
//! moved by -8% to +5% per trace with no trend (docs/performance.md).
//!
//! **Bounded per call** (issue 13): the exact search may spend at most
//! [`SEARCH_BUDGET`] units per shape and [`CALL_BUDGET`] over all shapes of
//! one `place` call (over both grains with `--partial-servers` and every
//! size `--round-up` tries, too), a unit being one search node or one
//! max-flow it runs (a node at the spine level runs one flow per chosen
//! leaf, so counting nodes alone let one node cost a hundred flows);
//! shapes left without budget count as cut off, unless the search's
//! bounds rule them out, which [`no_budget`] checks without building
//! their instances. Before, each shape had a 2 000-node pass in the
//! paper's preference order and then 20 000 nodes roomiest-first: the
//! preference pass rarely settled a shape, and a blocked call could take a
//! second. On the 5000-job hard traces of docs/performance.md ("Placement
//! at scale", 3 seeds at load 0.7) this cut the decision p99 from ~110 ms
//! to ~9 ms, the worst from ~1 s to ~60-120 ms and the replay from ~50 s to
//! ~12 s, with avg JCT no worse (the cut-off shapes were mostly ones no
//! search found a slice for anyway). The budget counts work, not time, so a
//! decision does not depend on the machine's speed or load. Since the
//! heuristic pass also tries the roomiest leaf set ([`windows`]), the exact
//! search rarely finds what the heuristic missed, and the budgets were cut
//! (2 000 / 1 000 -> 700 / 400): at 8192 GPUs the decision p99 fell by 40%
//! with avg JCT within -1..+6% on every trace measured; before that change
//! halving them cost up to +200% avg JCT there. The price is more shapes
//! left unsettled (`search_cutoffs`, +5..15%): they are the hard instances,
//! most of which stay unsettled after a thousand times the budget
//! (docs/performance.md, "Placement at scale"). An ILP of A.3 (HiGHS,
//! `tools/stage3_ilp.py`) shows 86-89% of them have a slice, thin in
//! leaves (one virtual leaf per leaf), which the exact search's
//! compact-first order reaches too late; a second search in another order
//! (three were tried) settled a sixth to a half of them but did not lower
//! avg JCT (-2% to +7% per trace) and raised the decision p99, so it was
//! not kept (docs/performance.md, "What the cut-off shapes are").
//!
//! The uniform cabling (vClos's slice, no rewiring) is no longer tried
//! first: on it a virtual leaf of `s` ports needs `s` different spines, so
//! every such job held a few ports of nearly every spine. See
//! [`slot_layout`] for why that matters.

use std::cmp::Reverse;

use super::super::assign::{assign, Assignment, Budget, Cutoff};
use super::super::stage3::{self, Problem};
use super::spines_first::spines_first;
use super::{spine_order, Pools, STAGE3_TRIES};
use crate::decision::Stage;
use crate::placement::local::Grain;
use crate::placement::plan::Plan;
use crate::placement::view::{LinkView, OcsView};
use crate::placement::{ocs_shapes, take_first, vclos};
use crate::state::FabricState;
use crate::topology::{LeafId, SpineId};

/// Nodes the exact search may visit per shape before it gives up.
pub const SEARCH_BUDGET: u64 = 400;
/// Nodes of vClos's quick search (no rewiring) before the exact search of
/// a shape: bitset steps, far cheaper than the exact search's units.
const QUICK_LIMIT: u64 = 2_000;
/// Nodes the exact search may visit over every shape of one call.
pub const CALL_BUDGET: u64 = 700;
/// Leaf flows [`spines_first`] may run over every shape of one call.
const RESCUE_FLOWS: u64 = 400;

/// Stage 3: `l` virtual leaves x `s` ports over several spines, rewiring
/// idle OCS ports; a leaf may host several virtual leaves (A.3, eq. 7-8):
/// the OCS can give it parallel links to a spine, one per virtual leaf.
pub(super) fn several_spines(
    (st, grain): (&FabricState, Grain),
    view: &OcsView,
    k: u32,
    cutoffs: &mut u64,
    call: &mut Budget,
) -> Option<Plan> {
    several_spines_with((st, grain), view, k, &mut windows, cutoffs, call)
}

/// Candidate leaf sets: windows of the candidate list (fewest idle servers
/// first, the paper's best fit), each taking `l` virtual leaves, then one
/// set from the other end (roomiest leaves first, the order the exact
/// search starts from).
///
/// Why the roomiest set (issue 13): on the hard traces most slices the
/// exact search had to find (often after hundreds of units, so they were
/// the decision-time tail) sit on the roomiest leaves, which the best-fit
/// windows never reach when many leaves are partly used. With it the exact
/// search has to find a slice 2.5-5 times less often (hard traces at load
/// 0.7, seed 1: 1 096 -> 215 times at 8192 GPUs, 853 -> 333 at 2048), with
/// fewer cutoffs and a lower avg JCT (docs/performance.md, "Placement at
/// scale").
fn windows(cand: &[(LeafId, u32)], l: u32) -> Vec<Vec<(LeafId, u32)>> {
    let mut sets: Vec<Vec<(LeafId, u32)>> = (0..cand.len().min(STAGE3_TRIES))
        .map_while(|start| take_vleaves(&cand[start..], l))
        .collect();
    if let Some(roomy) = take_first(cand.iter().rev().copied(), l) {
        if !sets.contains(&roomy) {
            sets.push(roomy);
        }
    }
    sets
}

/// The first `l` virtual leaves of `cand` (leaf, how many it can host).
fn take_vleaves(cand: &[(LeafId, u32)], l: u32) -> Option<Vec<(LeafId, u32)>> {
    take_first(cand.iter().copied(), l)
}

/// Diagnostic only (`examples/ocs_rescue.rs`): can Stage 3 place `gpus`
/// when, besides its usual leaf sets, it also tries `rounds` random ones
/// per shape? Now that the exact search follows them, a "yes" after the
/// engine said "blocked" can only follow a search cutoff.
#[doc(hidden)]
pub fn stage3_wide(st: &FabricState, gpus: u32, rounds: usize, seed: u64) -> bool {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let grain = Grain::Servers;
    let k = grain.needed(st.topology(), gpus);
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
    let call = &mut Budget(CALL_BUDGET);
    several_spines_with((st, grain), &view, k, &mut pick, &mut 0, call).is_some()
}

/// Proposes candidate leaf sets `(leaf, virtual leaves)` of `l` virtual
/// leaves from the candidates of one shape.
type LeafSets<'a> = dyn FnMut(&[(LeafId, u32)], u32) -> Vec<Vec<(LeafId, u32)>> + 'a;

/// Stage 3 over the leaf sets `pick` proposes for each shape, then the
/// exact search within `call` (nodes left for this call); `cutoffs` counts
/// shapes whose search ran out of budget.
fn several_spines_with(
    (st, grain): (&FabricState, Grain),
    view: &OcsView,
    k: u32,
    pick: &mut LeafSets,
    cutoffs: &mut u64,
    call: &mut Budget,
) -> Option<Plan> {
    let topo = st.topology();
    let t = grain.size(topo);
    // (shape, candidate leaves) of every shape with enough of them, and
    // (units its leaves keep idle, shape index, leaf set) of their sets.
    let mut tried = Vec::new();
    let mut sets = Vec::new();
    let leaves = leaves_by_fit(st, view, grain);
    for (l, s) in ocs_shapes(topo, k, t) {
        let per_vleaf = s / t;
        let cand = candidates(&leaves, per_vleaf, s);
        if cand.iter().map(|&(_, a)| a).sum::<u32>() < l {
            continue;
        }
        for set in pick(&cand, l) {
            let left = set
                .iter()
                .map(|&(n, a)| grain.free(st, n).saturating_sub(a * per_vleaf))
                .sum::<u32>();
            sets.push((left, tried.len(), set));
        }
        tried.push(((l, s), cand));
    }
    // Fewest units left idle first; a stable sort keeps the paper's shape
    // order (and `pick`'s) among equals.
    sets.sort_by_key(|&(left, _, _)| left);
    for (_, i, set) in sets {
        let ((_, s), _) = tried[i];
        if let Some(plan) = fill_spines(st, view, &set, s as usize, (grain, s / t)) {
            return Some(plan);
        }
    }
    // The links as patched now, for vClos's quick search in `exact`: built
    // only when the heuristic found nothing.
    let links = LinkView::of(st);
    let mut flows = RESCUE_FLOWS;
    for ((l, s), cand) in tried {
        let grant = SEARCH_BUDGET.min(call.0);
        let mut shape = Budget(grant);
        let found = exact(
            (st, view, &links),
            &cand,
            (l, s),
            (grain, s / t),
            &mut shape,
        );
        call.0 -= grant - shape.0;
        match found {
            Ok(Some(plan)) => return Some(plan),
            Ok(None) => {}
            Err(Cutoff) => {
                // Unsettled: slots first, then leaves (module
                // `spines_first`), before counting it as cut off.
                let rescue = spines_first(st, view, &cand, (l, s), (grain, s / t), &mut flows);
                if rescue.is_some() {
                    stage3::mark_rescued();
                    return rescue;
                }
                *cutoffs += 1;
            }
        }
    }
    None
}

/// (leaf, free units, usable uplinks) of every leaf with a free unit,
/// fewest free units first (the paper's best fit): the same for every shape.
pub(super) fn leaves_by_fit(
    st: &FabricState,
    view: &OcsView,
    grain: Grain,
) -> Vec<(LeafId, u32, u32)> {
    let mut leaves: Vec<(LeafId, u32, u32)> = (0..st.topology().leaves.len() as u32)
        .map(LeafId)
        .map(|n| (n, grain.free(st, n), view.leaf_usable(n) as u32))
        .filter(|&(_, free, _)| free > 0)
        .collect();
    leaves.sort_unstable_by_key(|&(n, free, _)| (free, n));
    leaves
}

/// A shape's candidate leaves (leaf, virtual leaves of `per_vleaf` units
/// and `s` uplinks it can host), in [`leaves_by_fit`] order.
pub(super) fn candidates(
    leaves: &[(LeafId, u32, u32)],
    per_vleaf: u32,
    s: u32,
) -> Vec<(LeafId, u32)> {
    leaves
        .iter()
        .map(|&(n, free, usable)| (n, (free / per_vleaf).min(usable / s)))
        .filter(|&(_, a)| a > 0)
        .collect()
}

/// Slots per spine for `set` (leaf, virtual leaves): as few spines as
/// possible (most slots each); among spines taking as many, fewest free
/// ports first (the paper's best fit), so partly used spines go before
/// whole idle ones. Each spine's count is bounded by what every leaf of
/// `set` reaches.
///
/// Why fewest spines rather than the paper's plain best fit: a job spread
/// thinly over many spines keeps all of them partly held for its whole run,
/// long after the jobs whose leftovers it filled are gone, and a half-fabric
/// job needs whole idle spines (on CLUSTER512 a 256-GPU job needs 8 of 16).
/// Replays measured it (docs/performance.md, "Spine packing").
fn slot_layout(
    st: &FabricState,
    view: &OcsView,
    set: &[(LeafId, u32)],
    s: usize,
) -> Option<Vec<(SpineId, u32)>> {
    let l: u32 = set.iter().map(|&(_, a)| a).sum();
    // (slots it can take, best-fit rank, spine)
    let mut room: Vec<(Reverse<u32>, usize, SpineId)> = Vec::new();
    for (rank, m) in spine_order(st, view, l as usize).into_iter().enumerate() {
        let per_slot = set
            .iter()
            .map(|&(n, a)| view.reach(n, m) / a)
            .min()
            .unwrap_or(0);
        let most = (view.spine_usable(m) as u32 / l).min(per_slot);
        if most > 0 {
            room.push((Reverse(most), rank, m));
        }
    }
    room.sort_unstable();
    take_first(
        room.into_iter().map(|(Reverse(most), _, m)| (m, most)),
        s as u32,
    )
}

/// The heuristic for `set` (leaf, virtual leaves): [`slot_layout`], then
/// the flow heuristic's OCS assignment; direct cables first.
fn fill_spines(
    st: &FabricState,
    view: &OcsView,
    set: &[(LeafId, u32)],
    s: usize,
    per_vleaf: (Grain, u32),
) -> Option<Plan> {
    let leaf_cap: Vec<&[u32]> = set.iter().map(|&(n, _)| view.leaf_caps(n)).collect();
    let slots = slot_layout(st, view, set, s)?;
    let dx: Vec<Vec<u32>> = set
        .iter()
        .map(|&(n, a)| {
            slots
                .iter()
                .map(|&(m, c)| (a * c).min(view.direct_count(n, m) as u32))
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
    let spine_cap: Vec<&[u32]> = slots.iter().map(|&(m, _)| view.spine_caps(m)).collect();
    let x = assign(&need, &leaf_cap, &spine_cap)?;
    build(st, view, set, &slots, &x, &dx, per_vleaf)
}

/// The exact search for one shape over the candidate leaves `cand` (leaf,
/// virtual leaves it can host) and every spine with room for a slot.
fn exact(
    (st, view, links): (&FabricState, &OcsView, &LinkView),
    cand: &[(LeafId, u32)],
    (l, s): (u32, u32),
    per_vleaf: (Grain, u32),
    budget: &mut Budget,
) -> Result<Option<Plan>, Cutoff> {
    // vClos's quick search on the links as patched (a slice there needs no
    // rewiring), then the complete search, roomiest leaves and spines
    // first, where a slice is found (or ruled out) fastest (module doc).
    // Bounded by its own node limit: a cut-off quick search is no answer,
    // and the complete search below still decides.
    let grain = per_vleaf.0;
    let quick = (l as usize, s as usize);
    let found = vclos::find_slice(st, grain, links, quick, vclos::DEFAULT_BUDGET, QUICK_LIMIT);
    if let Ok(Some(plan)) = found {
        return Ok(Some(plan));
    }
    if budget.0 == 0 && !stage3::recording() {
        return no_budget((st, view), cand, (l, s));
    }
    let ns = st.topology().spines.len();
    let mut direct = vec![vec![0u32; ns]; st.topology().leaves.len()];
    for &(n, _, m, _) in view.direct() {
        direct[n.index()][m.index()] += 1;
    }
    // Preference order; equal leaves (spines) end up adjacent, which is
    // what the search's symmetry cut looks at.
    // Rows of direct cables are compared only when there are any (a row
    // has an entry per spine: on a fabric without direct cables, comparing
    // equal rows of zeros was most of this sort).
    let rows = !view.direct().is_empty();
    let row = |n: LeafId| {
        if rows {
            &direct[n.index()][..]
        } else {
            &[][..]
        }
    };
    let mut leaves: Vec<(u32, &[u32], LeafId, u32)> = cand
        .iter()
        .map(|&(n, a)| (grain.free(st, n), view.leaf_caps(n), n, a))
        .collect();
    // Unstable: no two entries are equal (one per leaf).
    leaves.sort_unstable_by(|x, y| (x.0, x.1, row(x.2), x.2).cmp(&(y.0, y.1, row(y.2), y.2)));
    let mut spines: Vec<(u32, &[u32], SpineId)> = spine_order(st, view, l as usize)
        .into_iter()
        .map(|m| (st.free_spine_ports(m), view.spine_caps(m), m))
        .collect();
    spines.sort_unstable();
    let solve = |leaves: &[(u32, &[u32], LeafId, u32)],
                 spines: &[(u32, &[u32], SpineId)],
                 budget: &mut Budget| {
        let p = Problem {
            leaf_max: leaves.iter().map(|x| x.3).collect(),
            leaf_cap: leaves.iter().map(|x| x.1.to_vec()).collect(),
            spine_cap: spines.iter().map(|x| x.1.to_vec()).collect(),
            direct: leaves
                .iter()
                .map(|x| {
                    spines
                        .iter()
                        .map(|y| direct[x.2.index()][y.2.index()])
                        .collect()
                })
                .collect(),
        };
        let sol = stage3::solve(&p, l, s, budget)?;
        Ok(sol.map(|sol| {
            let set: Vec<(LeafId, u32)> = sol.set.iter().map(|&(i, a)| (leaves[i].2, a)).collect();
            let slots: Vec<(SpineId, u32)> =
                sol.slots.iter().map(|&(j, t)| (spines[j].2, t)).collect();
            (set, slots, sol.x, sol.dx)
        }))
    };
    leaves.reverse();
    spines.reverse();
    let found = solve(&leaves, &spines, budget)?;
    Ok(found.and_then(|(set, slots, x, dx)| build(st, view, &set, &slots, &x, &dx, per_vleaf)))
}

/// [`exact`] with no budget left: what [`stage3::solve`] answers before its
/// first node, without building its instance (sorting the leaves and
/// spines, a row of direct cables per leaf). The search's bounds say "no
/// slice" (`Ok(None)`) when the leaves' or the spines' ports cannot hold
/// `l` x `s`, and otherwise its first node runs out of budget (a cutoff).
/// The same answers as building the instance and calling `solve`
/// (`a_search_without_budget_answers_as_solve_does`): on the hard traces
/// most shapes of a refused call reach the exact search after the call's
/// budget is spent, and building their instances was a fifth of the wall
/// with `--partial-servers` (issue 13; docs/performance.md).
fn no_budget(
    (st, view): (&FabricState, &OcsView),
    cand: &[(LeafId, u32)],
    (l, s): (u32, u32),
) -> Result<Option<Plan>, Cutoff> {
    let spines = spine_order(st, view, l as usize);
    if l == 0 || s == 0 || cand.is_empty() || spines.is_empty() {
        return Ok(None);
    }
    // Direct cables between the candidate leaves and the spines, per side
    // (none on an all-OCS fabric).
    let topo = st.topology();
    let (mut leaf_direct, mut spine_direct) =
        (vec![0; topo.leaves.len()], vec![0; topo.spines.len()]);
    if !view.direct().is_empty() {
        let mut in_cand = vec![false; topo.leaves.len()];
        cand.iter().for_each(|&(n, _)| in_cand[n.index()] = true);
        let mut in_spines = vec![false; topo.spines.len()];
        spines.iter().for_each(|m| in_spines[m.index()] = true);
        for &(n, _, m, _) in view.direct() {
            if in_cand[n.index()] && in_spines[m.index()] {
                leaf_direct[n.index()] += 1;
                spine_direct[m.index()] += 1;
            }
        }
    }
    let sum = |caps: &[u32]| caps.iter().sum::<u32>();
    let leaves: u32 = (cand.iter())
        .map(|&(n, a)| stage3::leaf_slots(a, sum(view.leaf_caps(n)) + leaf_direct[n.index()], s))
        .sum();
    let slots: u32 = (spines.iter())
        .map(|&m| stage3::spine_slots(sum(view.spine_caps(m)) + spine_direct[m.index()], l))
        .sum();
    if stage3::too_few(leaves, slots, (l, s)) {
        Ok(None)
    } else {
        Err(Cutoff)
    }
}

/// The plan for a slice: `set` (leaf, virtual leaves), `slots` (spine,
/// slots), links per (leaf, spine, OCS) in `x` and over direct cables in
/// `dx`. Each virtual leaf gets exactly one link to every slot and
/// `per_vleaf` units of the grain.
pub(super) fn build(
    st: &FabricState,
    view: &OcsView,
    set: &[(LeafId, u32)],
    slots: &[(SpineId, u32)],
    x: &Assignment,
    dx: &[Vec<u32>],
    (grain, per_vleaf): (Grain, u32),
) -> Option<Plan> {
    let topo = st.topology();
    let s: u32 = slots.iter().map(|&(_, c)| c).sum();
    let mut pools = Pools::new(st, view);
    let mut plan = Plan::local(Stage::OcsVclos, Vec::new());
    plan.leaves = set.iter().map(|&(n, _)| n).collect();
    plan.spines = slots.iter().map(|&(m, _)| m).collect();
    for (i, &(n, a)) in set.iter().enumerate() {
        let from = plan.gpus.len();
        plan.gpus.extend(grain.take(st, n, a * per_vleaf));
        // Per spine, the leaf's `a * t_m` links; virtual leaf `q` takes
        // the `q`-th run of `t_m` of them, so that uplink `j` of every
        // virtual leaf goes to the same (spine, slot).
        let mut per_spine = Vec::with_capacity(slots.len());
        for (j, &(m, c)) in slots.iter().enumerate() {
            let mut links = Vec::new();
            for (o, &y) in x[i][j].iter().enumerate() {
                if y > 0 {
                    links.extend(pools.take(view, n, m, o, y as usize));
                }
            }
            links.extend(pools.take_direct(n, m, dx[i][j] as usize));
            if links.len() != (a * c) as usize {
                return None;
            }
            per_spine.push(links);
        }
        let mut ups = Vec::with_capacity((a * s) as usize);
        for q in 0..a as usize {
            for (j, links) in per_spine.iter().enumerate() {
                let c = slots[j].1 as usize;
                for k in &links[q * c..(q + 1) * c] {
                    ups.push(k.uplink);
                    plan.links.push(*k);
                }
            }
        }
        plan.route_in_order_since(topo, n, from, &ups);
    }
    Some(plan)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::placement::tests::random_walk_on;
    use crate::placement::Policy;
    use crate::topology::generate::uniform_topology;

    /// What [`exact`] answered: a slice, none, or cut off.
    fn answer(r: Result<Option<Plan>, Cutoff>) -> &'static str {
        match r {
            Ok(Some(_)) => "slice",
            Ok(None) => "none",
            Err(Cutoff) => "cutoff",
        }
    }

    /// On states of random walks (all-OCS fabrics, and one of direct
    /// cables only), [`exact`] without budget answers every
    /// Stage 3 shape as it does when it builds the instance and calls
    /// `stage3::solve` (forced by recording the instances): the fast path
    /// of [`no_budget`] changes no decision.
    #[test]
    fn a_search_without_budget_answers_as_solve_does() {
        let mut seen = std::collections::BTreeMap::new();
        for (leaves, spines, t, ocs) in [(8, 8, 2, 2), (12, 8, 2, 4), (8, 8, 1, 4), (8, 8, 2, 0)] {
            for seed in [3, 5] {
                let topo = uniform_topology(leaves, spines, t, ocs);
                // OCS-vClos refuses a fabric without OCS: its states then
                // come from vClos.
                let policy = if ocs == 0 {
                    Policy::Vclos
                } else {
                    Policy::OcsVclos
                };
                random_walk_on(topo, policy, seed, |st, job| {
                    let grain = Grain::Servers;
                    let k = grain.needed(st.topology(), job.gpus);
                    let (view, links) = (OcsView::new(st), LinkView::new(st));
                    let leaves = leaves_by_fit(st, &view, grain);
                    for (l, s) in ocs_shapes(st.topology(), k, t) {
                        let cand = candidates(&leaves, s / t, s);
                        let run = |record: bool| {
                            stage3::record_instances(record);
                            let shape = (grain, s / t);
                            let r =
                                exact((st, &view, &links), &cand, (l, s), shape, &mut Budget(0));
                            stage3::record_instances(false);
                            answer(r)
                        };
                        let (fast, full) = (run(false), run(true));
                        assert_eq!(fast, full, "{ocs} OCS, seed {seed}, {l}x{s}");
                        *seen.entry((ocs == 0, fast)).or_insert(0u32) += 1;
                    }
                });
            }
        }
        // Without OCS every shape vClos's quick search misses is ruled out
        // by the bounds: no cutoff there.
        for key in [(false, "none"), (false, "cutoff"), (true, "none")] {
            assert!(seen.get(&key).is_some_and(|&n| n > 20), "{key:?}: {seen:?}");
        }
    }
}
