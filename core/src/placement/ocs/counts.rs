//! Counting bounds before OCS-vClos's multi-leaf search (issue 13, item 1:
//! "strong lower bounds before search").
//!
//! Every slice OCS-vClos's stages can build for `k` units of `t` GPUs
//! meets counts of idle units and usable (idle) ports, whatever OCS ports
//! carry its links:
//!
//! * **two leaves** (paper Section 7.2, Fig. 3): two leaves, each with
//!   `k/2` free units and `k/2 * t` usable uplinks;
//! * **one spine** (Stage 2): a spine with `k * t` usable ports, and leaves
//!   whose free units, each capped by its usable uplinks over `t`, add up
//!   to `k`;
//! * **several spines** (Stage 3, Appendix A.3, eq. 7-8): for a shape
//!   `(l, s)`, `l` virtual leaves (a leaf hosts at most one per `s/t` free
//!   units and per `s` usable uplinks) and `s` slots (a spine takes at most
//!   one per `l` usable ports). These are the exact search's own bounds
//!   before its first node ([`crate::placement::stage3::too_few`], with
//!   [`stage3::leaf_slots`] and [`stage3::spine_slots`]), and the
//!   heuristic pass skips a shape with too few virtual leaves.
//!
//! Two sums decide most sizes before any shape is looked at. With a
//! leaf's *reach* `min(free units, usable uplinks / t)`, every stage needs
//! the reaches to add up to `k` (a leaf hosts at most `reach / (s/t)`
//! virtual leaves of a shape, and `l * s/t = k`); one spine and every
//! Stage 3 shape need `k * t` usable spine ports in all (`l * s = k * t`).
//!
//! When no stage's counts hold, every stage would come back empty: the
//! heuristic and the exact search find only slices, vClos's quick search
//! on the links as patched only slices too, and the exact search answers
//! such a shape at its root bound, spending none of the call's budget and
//! cutting nothing off. So [`rules_out`] answers "no slice" without
//! building a single plan, flow or search instance, and every decision,
//! budget and `search_cutoffs` count is what the full search gives.
//!
//! Why it matters: on the hard traces of docs/performance.md nearly every
//! refused multi-leaf search is refused by these counts alone (340 170 of
//! 342 302 on `u8k` seed 2 with `--backfill slices --round-up 2
//! --partial-servers`), because a backfilling replay asks about every
//! queued job, in both grains, at up to 16 `--round-up` sizes, while the
//! fabric is nearly full. Each such search cost ~40 µs of leaf sorting,
//! flows and shape setup before its stages gave up.
//!
//! The counts themselves then took 9% of that replay (per size, a pass over
//! every leaf and spine for each shape), so they are kept ([`Tally`]): per
//! state version and grain, the leaves' and spines' counts once, each
//! shape side's count once, and each size's verdict once.

use std::cell::RefCell;

use super::super::local::Grain;
use super::super::stage3;
use super::super::view::OcsView;
use crate::placement::ocs_shapes;
use crate::state::FabricState;
use crate::topology::{LeafId, SpineId};

/// Whether no OCS-vClos stage can place `k` units of `grain` on `st`, by
/// counts alone (module doc): `true` only when the full search would find
/// nothing, spend no budget and cut nothing off. Never for `k < 2` (a job
/// within one server or leaf never reaches the stages). `view` is `st`'s
/// [`OcsView`]: the answer is kept per state version, grain and `k`
/// ([`Tally`]).
pub(super) fn rules_out(st: &FabricState, grain: Grain, view: &OcsView, k: u32) -> bool {
    if k < 2 {
        return false;
    }
    let at = (st.version(), grain);
    TALLIES.with_borrow_mut(|kept| {
        let mut tally = match kept.iter().position(|x| x.at == at) {
            Some(i) => kept.remove(i),
            None => Tally::new(st, grain, view),
        };
        let ruled = match tally.verdicts.get(k) {
            Some(ruled) => ruled != 0,
            None => {
                let ruled = tally.rules_out(st, k);
                tally.verdicts.set(k, u32::from(ruled));
                ruled
            }
        };
        kept.insert(0, tally);
        kept.truncate(KEPT);
        ruled
    })
}

/// The counts of one state version and grain, with the verdict of every
/// size asked about so far: a backfilling replay asks about hundreds of
/// queued jobs on one state, many of one size, in both grains, while it
/// alternates between the state and the state with the head's slice
/// masked (as `view.rs` keeps its views). Versions are unique in the
/// process (`FabricState::version`), so a kept tally is never stale.
struct Tally {
    at: (u64, Grain),
    /// (free units, usable uplinks) of each leaf with a free unit.
    leaves: Vec<(u32, u32)>,
    /// Usable ports of each spine that has one.
    spines: Vec<u32>,
    /// Grain units per unit of `k` (GPUs per unit).
    t: u32,
    /// The leaves' reaches summed: units within reach of one spine or
    /// partner leaf, each leaf's free units capped by its usable uplinks
    /// over `t`.
    reached: u32,
    verdicts: Kept,
    /// [`vleaves`] by `s`, [`slots`] by `l`, as asked.
    vleaves: Kept,
    slots: Kept,
}

/// Counts kept by a small key (a size, a shape's side: at most the
/// fabric's GPUs), in a vector: a hashed map's lookups were 4% of a
/// backfilling replay at 8192 GPUs.
#[derive(Default)]
struct Kept(Vec<u32>);

/// No count kept for this key.
const UNSET: u32 = u32::MAX;

impl Kept {
    fn get(&self, key: u32) -> Option<u32> {
        self.0.get(key as usize).copied().filter(|&v| v != UNSET)
    }

    fn set(&mut self, key: u32, value: u32) {
        let i = key as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, UNSET);
        }
        self.0[i] = value;
    }

    fn get_or(&mut self, key: u32, count: impl FnOnce() -> u32) -> u32 {
        self.get(key).unwrap_or_else(|| {
            let value = count();
            self.set(key, value);
            value
        })
    }
}

/// Tallies kept per thread: two grains on the state and on its masked
/// copy.
const KEPT: usize = 4;

thread_local! {
    static TALLIES: RefCell<Vec<Tally>> = const { RefCell::new(Vec::new()) };
}

impl Tally {
    fn new(st: &FabricState, grain: Grain, view: &OcsView) -> Self {
        let topo = st.topology();
        let leaves: Vec<(u32, u32)> = (0..topo.leaves.len() as u32)
            .map(LeafId)
            .map(|n| (grain.free(st, n), view.leaf_usable(n) as u32))
            .filter(|&(free, _)| free > 0)
            .collect();
        let spines = (0..topo.spines.len() as u32)
            .map(|m| view.spine_usable(SpineId(m)) as u32)
            .filter(|&usable| usable > 0)
            .collect();
        let t = grain.size(topo);
        let reached = leaves.iter().map(|&l| reach(l, t)).sum();
        Tally {
            at: (st.version(), grain),
            leaves,
            spines,
            t,
            reached,
            verdicts: Kept::default(),
            vleaves: Kept::default(),
            slots: Kept::default(),
        }
    }

    /// [`rules_out`], computed.
    fn rules_out(&mut self, st: &FabricState, k: u32) -> bool {
        let (leaves, spines, t, reached) = (&self.leaves, &self.spines, self.t, self.reached);
        if reached < k {
            // Every stage needs `k` units within reach (aggregate bound).
            return true;
        }
        if two_leaf(leaves, k, t) {
            return false;
        }
        // One spine and every Stage 3 shape need `k * t` spine ports.
        spines.iter().sum::<u32>() < k * t
            || !(one_spine(spines, (k, t), reached)
                || ocs_shapes(st.topology(), k, t)
                    .into_iter()
                    .any(|shape| self.several_spines(shape)))
    }

    /// Enough virtual leaves and spine slots for shape `(l, s)`; the
    /// leaves' count depends on `s` alone and the spines' on `l` alone,
    /// so each is counted once per tally (sizes share most shapes' sides).
    fn several_spines(&mut self, (l, s): (u32, u32)) -> bool {
        let (leaves, spines, t) = (&self.leaves, &self.spines, self.t);
        let hosted = self.vleaves.get_or(s, || vleaves(leaves, s, t));
        let taken = self.slots.get_or(l, || slots(spines, l));
        !stage3::too_few(hosted, taken, (l, s))
    }
}

/// Units a leaf of `(free units, usable uplinks)` can take toward one
/// spine or one partner leaf.
fn reach((free, usable): (u32, u32), t: u32) -> u32 {
    free.min(usable / t)
}

/// Two leaves that can each take `k/2` units ([`super::two_leaf`]'s
/// candidates).
fn two_leaf(leaves: &[(u32, u32)], k: u32, t: u32) -> bool {
    k.is_multiple_of(2)
        && leaves
            .iter()
            .filter(|&&l| reach(l, t) >= k / 2)
            .nth(1)
            .is_some()
}

/// A spine with room for all `k * t` uplinks ([`super::spine_order`]), and
/// leaves whose reaches add up to `reached` >= `k` units
/// ([`super::one_spine`]).
fn one_spine(spines: &[u32], (k, t): (u32, u32), reached: u32) -> bool {
    spines.iter().any(|&usable| usable >= k * t) && reached >= k
}

/// Virtual leaves of `s` spines the leaves can host: one per `s / t` free
/// units and per `s` usable uplinks on each.
fn vleaves(leaves: &[(u32, u32)], s: u32, t: u32) -> u32 {
    let per_vleaf = s / t;
    (leaves.iter())
        .map(|&(free, usable)| stage3::leaf_slots(free / per_vleaf, usable, s))
        .sum()
}

/// Slots of `l`-leaf virtual spines the spines can take.
fn slots(spines: &[u32], l: u32) -> u32 {
    spines
        .iter()
        .map(|&usable| stage3::spine_slots(usable, l))
        .sum()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::super::assign::Budget;
    use super::super::stages;
    use super::*;
    use crate::decision::Stage;
    use crate::placement::tests::random_walk_on;
    use crate::placement::Policy;
    use crate::topology::generate::uniform_topology;

    /// On states of random walks (fabrics of 1, 2 and 4 OCS, whole servers
    /// and single GPUs), every size the counts rule out is one the three
    /// stages refuse without spending budget or cutting a shape off; and
    /// the counts rule out most refusals, with slices of every stage found
    /// where they do not.
    #[test]
    fn what_the_counts_rule_out_the_stages_refuse_at_no_cost() {
        let mut seen = BTreeMap::new();
        for (leaves, spines, t, ocs) in [(8, 8, 2, 2), (12, 8, 2, 4), (8, 8, 1, 4), (6, 6, 2, 1)] {
            let topo = uniform_topology(leaves, spines, t, ocs);
            random_walk_on(topo, Policy::OcsVclos, 7, |st, _| {
                let view = OcsView::new(st);
                for grain in [Grain::Servers, Grain::Gpus] {
                    for k in 2..=grain.free_total(st) {
                        let ruled = rules_out(st, grain, &view, k);
                        let (mut cut, mut call) = (0, Budget(100));
                        let plan = stages((st, grain), &view, k, (&mut cut, &mut call));
                        if ruled {
                            assert!(plan.is_none(), "{ocs} OCS, {grain:?}, k {k}: a slice");
                            assert_eq!((cut, call.0), (0, 100), "{ocs} OCS, {grain:?}, k {k}");
                        }
                        let found = plan.map(|p| format!("{:?}", p.stage));
                        *seen.entry((ruled, found)).or_insert(0u32) += 1;
                    }
                }
            });
        }
        let count = |key| seen.get(&key).copied().unwrap_or(0);
        assert!(count((true, None)) > 5 * count((false, None)), "{seen:?}");
        for stage in [Stage::OcsTwoLeaf, Stage::OcsSpine, Stage::OcsVclos] {
            assert!(
                count((false, Some(format!("{stage:?}")))) > 20,
                "{stage:?}: {seen:?}"
            );
        }
    }

    /// The verdicts kept per state version and grain are those of the
    /// state asked about: on every state of a walk (whose placer keeps
    /// tallies of its own states on this thread), in both grains, each
    /// size asked twice answers as a tally made afresh.
    #[test]
    fn kept_verdicts_are_the_states_own() {
        let topo = uniform_topology(8, 8, 2, 2);
        let mut asked = 0;
        random_walk_on(topo, Policy::OcsVclos, 11, |st, _| {
            let view = OcsView::new(st);
            for grain in [Grain::Servers, Grain::Gpus] {
                let mut fresh = Tally::new(st, grain, &view);
                for k in 2..=grain.free_total(st) + 1 {
                    let want = fresh.rules_out(st, k);
                    assert_eq!(rules_out(st, grain, &view, k), want, "{grain:?}, k {k}");
                    assert_eq!(rules_out(st, grain, &view, k), want, "{grain:?}, k {k}");
                    asked += 1;
                }
            }
        });
        assert!(asked > 1000, "{asked}");
    }

    /// Each stage's counts on their own: on the uniform fabrics of the
    /// walk above, a two-leaf or one-spine slice also meets the counts of
    /// a Stage 3 shape, so only these catch a wrong two-leaf or one-spine
    /// count (they matter on irregular fabrics).
    #[test]
    fn two_leaf_and_one_spine_counts() {
        let t = 2;
        // Two leaves of k/2 units each, with k/2 * t uplinks each.
        assert!(two_leaf(&[(2, 4), (3, 6)], 4, t));
        assert!(!two_leaf(&[(2, 4), (3, 6)], 6, t));
        assert!(!two_leaf(&[(2, 4), (3, 3)], 4, t));
        assert!(!two_leaf(&[(2, 4), (2, 4), (2, 4)], 3, t));
        assert!(!two_leaf(&[(4, 8)], 4, t));
        // One spine with k * t ports; leaves reaching k units in all.
        let reached = |leaves: &[(u32, u32)]| leaves.iter().map(|&l| reach(l, t)).sum();
        assert!(one_spine(
            &[3, 8],
            (4, t),
            reached(&[(2, 4), (1, 2), (1, 8)])
        ));
        assert!(!one_spine(
            &[7, 7],
            (4, t),
            reached(&[(2, 4), (1, 2), (1, 8)])
        ));
        assert!(!one_spine(&[8], (4, t), reached(&[(2, 4), (1, 1), (1, 8)])));
    }
}
