//! Spines first: a rescue for the Stage 3 shapes the exact search leaves
//! unsettled (issue 13, "cutoffs must fall as the fabric grows").
//!
//! The exact search ([`super::super::stage3`]) picks leaves first, most
//! virtual leaves on the roomiest leaves, then slots, then the OCS that
//! carries each link. The shapes it runs out of budget on mostly *have* a
//! slice (an ILP of Appendix A.3 finds one for 86-89% of them,
//! docs/performance.md "What the cut-off shapes are"), which a
//! leaves-first order reaches late. This heuristic goes the other way
//! round, as a scheduler fills a reservation:
//!
//! 1. **Slots first.** Spines with the most idle OCS ports first, each
//!    taking as many slots as its ports allow for `l` virtual leaves
//!    (`floor(ports / l)`, A.3's `l * t_m` ports per spine), at most 2,
//!    then 3, 4 and 1 per spine: four layouts, tried in that order.
//! 2. **Then leaves, one at a time**, fewest idle servers first (the
//!    paper's best fit, the order the candidates come in): a leaf joins with
//!    the most virtual leaves `a` (eq. 7-8) for which its idle ports, OCS
//!    by OCS, can carry `a * t_m` links to every chosen spine within what
//!    earlier leaves left of each spine's ports on that OCS (A.3's port
//!    constraints): a transportation problem from the leaf's OCSes to the
//!    spines, one small max-flow ([`super::super::flow`]), after a counting
//!    check that skips most hopeless ones. Its flow is the leaf's OCS
//!    assignment, taken off the spines' ports.
//!
//! Every link it plans runs through an OCS (free direct cables, on a
//! fabric that has some, are left to the exact search) whose ports at both
//! ends are idle and counted once, so a slice it returns is valid by construction
//! (the state admits it with the full check, tested). It is a heuristic:
//! a `None` proves nothing, and the shape stays counted as cut off. Each
//! leaf's flow is one unit of [`FLOWS`] per shape (and of a per-call
//! budget in [`super::several`]), so a shape costs bounded work whatever
//! the fabric; each flow has at most `k + spines + 2` nodes, against the
//! exact search's whole leaves-OCS-spines graph.
//!
//! Why these choices (measured offline on every cut-off instance of the
//! hard traces, FIFO, load 0.9, seed 1, `examples/stage3_instances.rs`):
//! one virtual leaf per leaf ("thin") or as many slots per spine as fit
//! ("compact") found fewer slices than as many virtual leaves per leaf as
//! fit with 2-4 slots per spine, which alone finds 216 of 485 at 2048
//! GPUs and 497 of 981 at 8192; all four layouts 57-63%. In the engine it
//! halves the cutoffs at both sizes (docs/performance.md, "Spines first").
//!
//! Leaves best fit first, not roomiest first (as it was at first): a
//! roomy leaf joins with many virtual leaves and its flow spends the slot
//! spines' ports on whichever OCSes it reaches, which the leaves after it
//! may have no other way to; small leaves join with one or two virtual
//! leaves each, as the ILP's slices for these shapes look. On the shapes
//! roomiest-first left cut off (FIFO, load 0.9, seed 1) best fit places
//! 67 of 214 at 2048 GPUs and 178 of 470 at 8192 (a Python model of this
//! module), and in the engine it cuts the cutoffs by another 11-35% under
//! FIFO and 36-45% with `--backfill slices --round-up 2`, avg JCT -7.1% to
//! +2.6% (docs/performance.md, "Spines first, best fit first").

use std::cmp::Reverse;

use super::super::assign::Assignment;
use super::super::flow::Flow;
use super::several::build;
use crate::placement::local::Grain;
use crate::placement::plan::Plan;
use crate::placement::view::OcsView;
use crate::state::FabricState;
use crate::topology::{LeafId, SpineId};

/// Most slots per spine in each layout tried, in order (module doc).
const LAYOUTS: [u32; 4] = [2, 3, 4, 1];

/// Leaf flows one shape may run.
pub const FLOWS: u64 = 200;

/// A slice of `l` virtual leaves x `s` slots from the candidate leaves
/// `cand` (leaf, virtual leaves it can host; best fit first), slots first
/// (module doc); `None` if none is found within [`FLOWS`] leaf flows, nor
/// within `call` (flows left for the whole `place` call, charged).
pub(super) fn spines_first(
    st: &FabricState,
    view: &OcsView,
    cand: &[(LeafId, u32)],
    (l, s): (u32, u32),
    per_vleaf: (Grain, u32),
    call: &mut u64,
) -> Option<Plan> {
    search(st, view, cand, (l, s), per_vleaf, (call, true))
}

/// [`spines_first`]; `prune`: skip the flows the counts already answer
/// (off only in the tests, which check that it changes nothing but the
/// flows run).
fn search(
    st: &FabricState,
    view: &OcsView,
    cand: &[(LeafId, u32)],
    (l, s): (u32, u32),
    per_vleaf: (Grain, u32),
    (call, prune): (&mut u64, bool),
) -> Option<Plan> {
    let spines = spines_by_room(st, view);
    let mut layouts: Vec<Vec<(SpineId, u32)>> = Vec::new();
    for most in LAYOUTS {
        if let Some(t) = slot_layout(&spines, l, s, most) {
            if !layouts.contains(&t) {
                layouts.push(t);
            }
        }
    }
    // Each candidate's idle ports per OCS, the same for every layout.
    let caps: Vec<Vec<u32>> = cand
        .iter()
        .map(|&(n, _)| view.leaf_caps(n).to_vec())
        .collect();
    let grant = FLOWS.min(*call);
    let mut flows = grant;
    let mut graph = Flow::default();
    let mut found = None;
    for slots in &layouts {
        let mut fill = Fill {
            slots,
            room: slots
                .iter()
                .map(|&(m, _)| view.spine_caps(m).to_vec())
                .collect(),
            flows: &mut flows,
            graph: &mut graph,
            prune,
        };
        match fill.leaves(cand, &caps, l, s) {
            Ok(Some((set, x))) => {
                let dx = vec![vec![0; slots.len()]; set.len()];
                found = build(st, view, &set, slots, &x, &dx, per_vleaf);
                break;
            }
            Ok(None) => {}
            Err(OutOfFlows) => break,
        }
    }
    *call -= grant - flows;
    found
}

/// Spines with idle OCS ports, most first: (spine, idle OCS ports).
fn spines_by_room(st: &FabricState, view: &OcsView) -> Vec<(SpineId, u32)> {
    let mut spines: Vec<(SpineId, u32)> = (0..st.topology().spines.len() as u32)
        .map(SpineId)
        .map(|m| (m, view.spine_caps(m).iter().sum()))
        .filter(|&(_, ports)| ports > 0)
        .collect();
    spines.sort_unstable_by_key(|&(m, ports)| (Reverse(ports), m));
    spines
}

/// `s` slots over `spines` (most room first), each spine taking as many as
/// its ports allow for `l` virtual leaves, at most `most`.
fn slot_layout(
    spines: &[(SpineId, u32)],
    l: u32,
    s: u32,
    most: u32,
) -> Option<Vec<(SpineId, u32)>> {
    let mut left = s;
    let mut out = Vec::new();
    for &(m, ports) in spines {
        let take = (ports / l).min(most).min(left);
        if take > 0 {
            out.push((m, take));
            left -= take;
        }
        if left == 0 {
            return Some(out);
        }
    }
    None
}

/// The flow budget ran out.
struct OutOfFlows;

/// The leaves that joined (leaf, virtual leaves) and their links per
/// (leaf, slot spine, OCS).
type Joined = (Vec<(LeafId, u32)>, Assignment);

/// One slot layout being filled with leaves.
struct Fill<'a> {
    slots: &'a [(SpineId, u32)],
    /// `room[j][o]`: idle ports of slot spine `j` on OCS `o` not yet taken.
    room: Vec<Vec<u32>>,
    flows: &'a mut u64,
    graph: &'a mut Flow,
    prune: bool,
}

impl Fill<'_> {
    /// Leaves from `cand` (their idle ports per OCS in `caps`), best fit
    /// first, until `l` virtual leaves are placed: the set and its links
    /// per (leaf, slot spine, OCS).
    fn leaves(
        &mut self,
        cand: &[(LeafId, u32)],
        caps: &[Vec<u32>],
        l: u32,
        s: u32,
    ) -> Result<Option<Joined>, OutOfFlows> {
        let mut left = l;
        // Virtual leaves the leaves not yet tried could host.
        let mut rest: u32 = cand.iter().map(|&(_, a)| a).sum();
        let mut set = Vec::new();
        let mut x: Assignment = Vec::new();
        for (&(n, most), caps) in cand.iter().zip(caps) {
            if rest < left {
                return Ok(None);
            }
            rest -= most;
            let ports: u32 = caps.iter().sum();
            for a in (1..=most.min(left)).rev() {
                if ports < a * s {
                    continue;
                }
                if let Some(links) = self.carry(caps, a)? {
                    set.push((n, a));
                    x.push(links);
                    left -= a;
                    break;
                }
            }
            if left == 0 {
                return Ok(Some((set, x)));
            }
        }
        Ok(None)
    }

    /// Can a leaf with idle ports `caps` per OCS send `a * t_m` links to
    /// every slot spine through the room left? If so, take that room and
    /// return the links per (slot spine, OCS).
    fn carry(&mut self, caps: &[u32], a: u32) -> Result<Option<Vec<Vec<u32>>>, OutOfFlows> {
        if self.prune && !self.counts_fit(caps, a) {
            return Ok(None);
        }
        if *self.flows == 0 {
            return Err(OutOfFlows);
        }
        *self.flows -= 1;
        let (k, j) = (caps.len(), self.slots.len());
        let (src, sink) = (0, 1 + k + j);
        let g = &mut *self.graph;
        g.reset(sink + 1);
        for (o, &c) in caps.iter().enumerate() {
            g.add_cap(src, 1 + o, c);
        }
        let mut edges = vec![vec![None; k]; j];
        for (jj, row) in self.room.iter().enumerate() {
            for (o, &r) in row.iter().enumerate() {
                if r > 0 && caps[o] > 0 {
                    edges[jj][o] = Some(g.add_edge(1 + o, 1 + k + jj, r));
                }
            }
        }
        let need: u32 = self.slots.iter().map(|&(_, t)| a * t).sum();
        for (jj, &(_, t)) in self.slots.iter().enumerate() {
            g.add_edge(1 + k + jj, sink, a * t);
        }
        if g.run(src, sink) < need {
            return Ok(None);
        }
        let links: Vec<Vec<u32>> = edges
            .iter()
            .map(|row| row.iter().map(|e| e.map_or(0, |e| g.flow_on(e))).collect())
            .collect();
        for (jj, row) in links.iter().enumerate() {
            for (o, &y) in row.iter().enumerate() {
                self.room[jj][o] -= y;
            }
        }
        Ok(Some(links))
    }

    /// Necessary for [`Fill::carry`], by counting: every slot spine can
    /// take its `a * t_m` links from this leaf through the OCSes both have
    /// ports on, and so can all of them together.
    fn counts_fit(&self, caps: &[u32], a: u32) -> bool {
        let mut total = 0;
        let mut per_ocs = vec![0u32; caps.len()];
        for (row, &(_, t)) in self.room.iter().zip(self.slots) {
            let mut reach = 0;
            for (o, (&r, &c)) in row.iter().zip(caps).enumerate() {
                reach += r.min(c);
                per_ocs[o] += r;
            }
            if reach < a * t {
                return false;
            }
            total += a * t;
        }
        per_ocs
            .iter()
            .zip(caps)
            .map(|(&r, &c)| r.min(c))
            .sum::<u32>()
            >= total
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashSet;

    use super::super::several::{candidates, leaves_by_fit};
    use super::*;
    use crate::placement::tests::random_walk_on;
    use crate::placement::{commit, ocs_shapes, JobRequest, Outcome, Policy};
    use crate::topology::generate::uniform_topology;

    /// On states reached by random arrivals and departures under OCS-vClos
    /// (`random_walk_on`), every Stage 3 shape of each job across leaves is
    /// given to `spines_first`: each slice it returns has the shape asked
    /// for and the state admits it with the full check (no held port, no
    /// OCS port counted twice). Returns (shapes tried, slices found).
    fn walk(leaves: u32, spines: u32, t: u32, ocs: u32, seed: u64, saved: &mut u64) -> (u32, u32) {
        let topo = uniform_topology(leaves, spines, t, ocs);
        let per_leaf = topo.leaves[0].servers.len() as u32;
        let (mut tried, mut found) = (0, 0);
        random_walk_on(topo, Policy::OcsVclos, seed, |st, job| {
            let k = Grain::Servers.needed(st.topology(), job.gpus);
            if k > per_leaf && Grain::Servers.free_total(st) >= k {
                let (t1, f1) = every_shape(st, job, k, saved);
                (tried, found) = (tried + t1, found + f1);
            }
        });
        (tried, found)
    }

    fn every_shape(st: &FabricState, job: &JobRequest, k: u32, saved: &mut u64) -> (u32, u32) {
        let topo = st.topology();
        let t = u32::from(topo.gpus_per_server);
        let view = OcsView::new(st);
        let leaves = leaves_by_fit(st, &view, Grain::Servers);
        let (mut tried, mut found) = (0, 0);
        for (l, s) in ocs_shapes(topo, k, t) {
            let cand = candidates(&leaves, s / t, s);
            tried += 1;
            let mut call = 400;
            let shape = (Grain::Servers, s / t);
            let slice = spines_first(st, &view, &cand, (l, s), shape, &mut call);
            // Pruning saves flows and changes nothing else.
            let mut all = 400;
            let unpruned = search(st, &view, &cand, (l, s), shape, (&mut all, false));
            assert_eq!(slice, unpruned, "{l}x{s}");
            assert!(
                call >= all,
                "{l}x{s}: pruned {} flows, unpruned {}",
                400 - call,
                400 - all
            );
            *saved += u64::from(call > all);
            let Some(plan) = slice else {
                continue;
            };
            found += 1;
            assert!(call < 400, "a slice without a flow charged");
            // The shape: l virtual leaves of s/t servers, s uplinks each,
            // one route per GPU over distinct uplinks.
            assert_eq!(plan.gpus.len() as u32, k * t, "{l}x{s}");
            assert_eq!(plan.links.len() as u32, l * s, "{l}x{s}");
            let mut st2 = st.clone();
            let out = commit(&mut st2, "ocs-vclos", job, &plan).unwrap();
            let Outcome::Placed(d) = out else {
                panic!("{l}x{s} refused: {out:?}")
            };
            let ups: HashSet<_> = d
                .source_routes
                .iter()
                .map(|r| (&r.leaf, &r.uplink))
                .collect();
            assert_eq!(ups.len() as u32, k * t);
        }
        (tried, found)
    }

    #[test]
    fn every_slice_it_finds_has_its_shape_and_is_admitted() {
        let (mut tried, mut found, mut saved) = (0, 0, 0);
        for (leaves, spines, t, ocs) in [(8, 8, 2, 2), (12, 8, 2, 4), (8, 8, 1, 4), (16, 8, 1, 4)] {
            for seed in [3, 5, 9] {
                let (t1, f1) = walk(leaves, spines, t, ocs, seed, &mut saved);
                eprintln!("{leaves}x{spines}x{t}, {ocs} OCS, seed {seed}: {f1} of {t1}");
                (tried, found) = (tried + t1, found + f1);
            }
        }
        assert!(tried > 1_000, "only {tried} shapes tried");
        assert!(found > 600, "only {found} slices found");
        assert!(saved > 20, "pruning saved flows on only {saved} shapes");
    }
}
