//! Snapshots of free network resources, computed from the fabric state.
//!
//! A view is derived from the state, which stays the single source of
//! truth, so the engines can never drift from it. It is built again only
//! when the state has changed: [`LinkView::of`] and [`OcsView::of`] keep,
//! per thread, the views of the last few [`FabricState::version`]s asked for
//! (a version names one content, unique in the process; a clone keeps it
//! until either state changes). One pass over every uplink and port costs
//! tens of microseconds at 8192 GPUs, and a replay that backfills asks for
//! the view of one state many times: every job it tries behind a blocked
//! head and finds no slice for, every size `--round-up` tries, and every
//! placement apart from a masked reservation (unmasking an otherwise
//! unchanged state gives back its version, and masking one version with
//! one reservation again gives the masked version of the first time). At
//! 8192 GPUs that was a quarter of a `--backfill slices` replay (issue 13;
//! docs/performance.md).

use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;

use crate::state::FabricState;
use crate::topology::{LeafId, OcsId, PortRef, SpineId};

const NONE: u16 = u16::MAX;

/// vClos view: which (leaf, spine) pairs have an unused link right now
/// (free uplink, free spine port, and if through an OCS, both OCS ports
/// idle and currently patched together).
#[derive(Debug, PartialEq)]
pub struct LinkView {
    pub spines: usize,
    pub words: usize,
    /// Per leaf, bitset over spines.
    pub bits: Vec<Vec<u64>>,
    /// `pick[leaf * spines + spine]`: an uplink of the leaf reaching the spine.
    pick: Vec<u16>,
    /// Free ports per spine (the paper's RPN).
    pub spine_free: Vec<u64>,
}

/// The views last built on this thread, most recent first, with the
/// state version each is of.
type Memo<V> = RefCell<Vec<(u64, Rc<V>)>>;

/// Views kept per thread and kind: a backfilling replay alternates between
/// a state and the same state with the head's slice masked.
const KEPT: usize = 4;

thread_local! {
    static LINKS: Memo<LinkView> = const { RefCell::new(Vec::new()) };
    static OCS: Memo<OcsView> = const { RefCell::new(Vec::new()) };
}

/// The view kept in `memo` for `st`'s version, else `build`'s, kept
/// instead of the least recently used.
fn memoised<V>(
    memo: &'static std::thread::LocalKey<Memo<V>>,
    st: &FabricState,
    build: fn(&FabricState) -> V,
) -> Rc<V> {
    let v = st.version();
    memo.with_borrow_mut(|kept| {
        let view = match kept.iter().position(|(at, _)| *at == v) {
            Some(i) => kept.remove(i).1,
            None => Rc::new(build(st)),
        };
        kept.insert(0, (v, Rc::clone(&view)));
        kept.truncate(KEPT);
        view
    })
}

impl LinkView {
    /// [`LinkView::new`], built once per state version (module doc).
    pub fn of(st: &FabricState) -> Rc<Self> {
        memoised(&LINKS, st, Self::new)
    }

    pub fn new(st: &FabricState) -> Self {
        let topo = st.topology();
        let ns = topo.spines.len();
        let words = ns.div_ceil(64).max(1);
        let mut bits = vec![vec![0u64; words]; topo.leaves.len()];
        let mut pick = vec![NONE; topo.leaves.len() * ns];
        for (li, leaf) in topo.leaves.iter().enumerate() {
            let lid = LeafId(li as u32);
            for u in 0..leaf.uplinks.len() as u16 {
                if !st.uplink_free(lid, u) {
                    continue;
                }
                let Some((PortRef::Spine(s, p), via)) = st.uplink_far_end(lid, u) else {
                    continue;
                };
                if !st.spine_port_free(s, p) {
                    continue;
                }
                if let Some((o, a, b)) = via {
                    if !st.ocs_port_idle(o, a) || !st.ocs_port_idle(o, b) {
                        continue;
                    }
                }
                let slot = &mut pick[li * ns + s.index()];
                if *slot == NONE {
                    *slot = u;
                    bits[li][s.index() / 64] |= 1 << (s.index() % 64);
                }
            }
        }
        let spine_free = (0..ns as u32)
            .map(|s| u64::from(st.free_spine_ports(SpineId(s))))
            .collect();
        LinkView {
            spines: ns,
            words,
            bits,
            pick,
            spine_free,
        }
    }

    /// [`LinkView::new`], plus the pairs with no unused link that a held
    /// link could serve in a sharing mode ([`FabricState::shareable`]):
    /// the one with the fewest holders, reported to `lent` (leaf, spine).
    /// `spine_free` stays the free ports.
    pub fn sharing(st: &FabricState, lent: &mut dyn FnMut(LeafId, SpineId)) -> Self {
        let mut v = LinkView::new(st);
        let ns = v.spines;
        let mut best: Vec<(usize, u16)> = vec![(usize::MAX, NONE); ns];
        for (li, leaf) in st.topology().leaves.iter().enumerate() {
            let lid = LeafId(li as u32);
            best.fill((usize::MAX, NONE));
            for u in 0..leaf.uplinks.len() as u16 {
                let Some((s, n)) = st.shareable(lid, u) else {
                    continue;
                };
                let b = &mut best[s.index()];
                if v.pick[li * ns + s.index()] == NONE && n < b.0 {
                    *b = (n, u);
                }
            }
            for (si, &(_, u)) in best.iter().enumerate() {
                if u != NONE {
                    v.pick[li * ns + si] = u;
                    v.bits[li][si / 64] |= 1 << (si % 64);
                    lent(lid, SpineId(si as u32));
                }
            }
        }
        v
    }

    /// An unused uplink of `leaf` to `spine`.
    pub fn uplink(&self, leaf: LeafId, spine: SpineId) -> Option<u16> {
        let u = self.pick[leaf.index() * self.spines + spine.index()];
        (u != NONE).then_some(u)
    }
}

/// OCS-vClos view: per (leaf, OCS) the free uplinks whose OCS port is idle,
/// per (spine, OCS) the free spine ports whose OCS port is idle, and the
/// free direct (non-OCS) leaf-spine cables.
///
/// The per-(switch, OCS) lists live in one flat array per side, each
/// switch's lists one after the other (`start` gives where each begins):
/// built once per `place` call, a list per pair was ~1 500 small vectors
/// to allocate at 8192 GPUs (issue 13).
#[derive(Debug, Clone, PartialEq)]
pub struct OcsView {
    pub k: usize,
    /// (uplink, OCS port) pairs of `leaf_on(leaf, ocs)`, in uplink order.
    leaf_ocs: Vec<(u16, u16)>,
    /// `leaf_start[leaf * k + ocs]`: where that list begins (one extra
    /// entry at the end).
    leaf_start: Vec<u32>,
    /// (spine port, OCS port) pairs of `spine_on(spine, ocs)`, in port order.
    spine_ocs: Vec<(u16, u16)>,
    spine_start: Vec<u32>,
    /// Direct free cables: (leaf, uplink, spine, spine port). Private, as
    /// every field: the counts below are derived from it.
    direct: Vec<(LeafId, u16, SpineId, u16)>,
    /// Direct free cables per leaf and per spine, so that
    /// [`OcsView::leaf_usable`] and [`OcsView::spine_usable`] (asked for
    /// every spine of every candidate leaf set) take constant time.
    leaf_direct: Vec<u32>,
    spine_direct: Vec<u32>,
    /// `leaf_caps[leaf * k + ocs]`: the length of `leaf_on(leaf, ocs)`, so
    /// that Stage 3 borrows a leaf's per-OCS counts instead of collecting
    /// them for every leaf of every candidate set (issue 13: with
    /// `--partial-servers` those small vectors were a tenth of the wall).
    leaf_caps: Vec<u32>,
    /// The same per spine.
    spine_caps: Vec<u32>,
    /// [`OcsView::reach`] of the (leaf, spine) pairs asked so far.
    reach: Reach,
}

/// A table the other fields of an [`OcsView`] determine, so two views are
/// equal whatever either has filled in yet ([`UNKNOWN`]: not yet).
#[derive(Debug, Clone, Default)]
struct Reach(OnceCell<Vec<Cell<u32>>>);

const UNKNOWN: u32 = u32::MAX;

impl PartialEq for Reach {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Append the `k` per-OCS lists of one switch (`buckets`, emptied) to
/// `flat`, recording where each begins in `start`.
fn flush(buckets: &mut [Vec<(u16, u16)>], flat: &mut Vec<(u16, u16)>, start: &mut Vec<u32>) {
    for b in buckets {
        start.push(flat.len() as u32);
        flat.append(b);
    }
}

impl OcsView {
    /// [`OcsView::new`], built once per state version (module doc).
    pub fn of(st: &FabricState) -> Rc<Self> {
        memoised(&OCS, st, Self::new)
    }

    pub fn new(st: &FabricState) -> Self {
        let topo = st.topology();
        let k = topo.ocs.len();
        let mut buckets: Vec<Vec<(u16, u16)>> = vec![Vec::new(); k];
        // Room for every port up front: a view is built per state version.
        let mut leaf_ocs = Vec::with_capacity(topo.leaves.iter().map(|l| l.uplinks.len()).sum());
        let mut leaf_start = Vec::with_capacity(topo.leaves.len() * k + 1);
        let mut direct = Vec::new();
        for (li, leaf) in topo.leaves.iter().enumerate() {
            let lid = LeafId(li as u32);
            for (u, peer) in leaf.uplink_peer.iter().enumerate() {
                let u = u as u16;
                if !st.uplink_free(lid, u) {
                    continue;
                }
                match *peer {
                    Some(PortRef::Ocs(o, a)) if st.ocs_port_idle(o, a) => {
                        buckets[o.index()].push((u, a));
                    }
                    Some(PortRef::Spine(s, p)) if st.spine_port_free(s, p) => {
                        direct.push((lid, u, s, p));
                    }
                    _ => {}
                }
            }
            flush(&mut buckets, &mut leaf_ocs, &mut leaf_start);
        }
        leaf_start.push(leaf_ocs.len() as u32);
        let mut spine_ocs = Vec::with_capacity(topo.spines.iter().map(|s| s.ports.len()).sum());
        let mut spine_start = Vec::with_capacity(topo.spines.len() * k + 1);
        for (si, spine) in topo.spines.iter().enumerate() {
            let sid = SpineId(si as u32);
            for (p, peer) in spine.port_peer.iter().enumerate() {
                let p = p as u16;
                if let Some(PortRef::Ocs(o, b)) = *peer {
                    if st.spine_port_free(sid, p) && st.ocs_port_idle(o, b) {
                        buckets[o.index()].push((p, b));
                    }
                }
            }
            flush(&mut buckets, &mut spine_ocs, &mut spine_start);
        }
        spine_start.push(spine_ocs.len() as u32);
        let mut leaf_direct = vec![0; topo.leaves.len()];
        let mut spine_direct = vec![0; topo.spines.len()];
        for &(n, _, m, _) in &direct {
            leaf_direct[n.index()] += 1;
            spine_direct[m.index()] += 1;
        }
        let lengths = |start: &[u32]| start.windows(2).map(|w| w[1] - w[0]).collect();
        OcsView {
            k,
            leaf_caps: lengths(&leaf_start),
            spine_caps: lengths(&spine_start),
            leaf_ocs,
            leaf_start,
            spine_ocs,
            spine_start,
            direct,
            leaf_direct,
            spine_direct,
            reach: Reach::default(),
        }
    }

    pub fn leaf_on(&self, leaf: LeafId, o: usize) -> &[(u16, u16)] {
        let i = leaf.index() * self.k + o;
        &self.leaf_ocs[self.leaf_start[i] as usize..self.leaf_start[i + 1] as usize]
    }
    pub fn spine_on(&self, spine: SpineId, o: usize) -> &[(u16, u16)] {
        let i = spine.index() * self.k + o;
        &self.spine_ocs[self.spine_start[i] as usize..self.spine_start[i + 1] as usize]
    }
    /// Per OCS, how many uplinks of `leaf` it can use (`leaf_on`'s lengths).
    pub fn leaf_caps(&self, leaf: LeafId) -> &[u32] {
        &self.leaf_caps[leaf.index() * self.k..(leaf.index() + 1) * self.k]
    }
    /// Per OCS, how many ports of `spine` it can use.
    pub fn spine_caps(&self, spine: SpineId) -> &[u32] {
        &self.spine_caps[spine.index() * self.k..(spine.index() + 1) * self.k]
    }
    /// Usable uplinks of `leaf` (through any OCS, or direct).
    pub fn leaf_usable(&self, leaf: LeafId) -> usize {
        self.usable(&self.leaf_start, leaf.index()) + self.leaf_direct[leaf.index()] as usize
    }
    /// Usable ports of `spine`.
    pub fn spine_usable(&self, spine: SpineId) -> usize {
        self.usable(&self.spine_start, spine.index()) + self.spine_direct[spine.index()] as usize
    }
    /// Entries of switch `at`'s `k` consecutive per-OCS lists in `start`.
    fn usable(&self, start: &[u32], at: usize) -> usize {
        (start[(at + 1) * self.k] - start[at * self.k]) as usize
    }
    /// Links `leaf` can have to `spine` as things are: per OCS the fewer
    /// of their usable ports there, plus the free direct cables between
    /// them. Stage 2 and Stage 3 ask it for every spine of every candidate
    /// leaf set, shape after shape, so a view keeps each pair's once asked
    /// (issue 13: the sums were a tenth of an OCS-vClos replay with slice
    /// reservations; building the whole table for every view cost more
    /// than that, most pairs never being asked; docs/performance.md).
    pub fn reach(&self, leaf: LeafId, spine: SpineId) -> u32 {
        let ns = self.spine_direct.len();
        let table =
            (self.reach.0).get_or_init(|| vec![Cell::new(UNKNOWN); self.leaf_direct.len() * ns]);
        let cell = &table[leaf.index() * ns + spine.index()];
        if cell.get() == UNKNOWN {
            let shared = (0..self.k)
                .map(|o| {
                    self.leaf_on(leaf, o)
                        .len()
                        .min(self.spine_on(spine, o).len())
                })
                .sum::<usize>();
            cell.set((shared + self.direct_count(leaf, spine)) as u32);
        }
        cell.get()
    }
    /// Direct free cables: (leaf, uplink, spine, spine port).
    pub fn direct(&self) -> &[(LeafId, u16, SpineId, u16)] {
        &self.direct
    }
    pub fn direct_count(&self, leaf: LeafId, spine: SpineId) -> usize {
        self.direct
            .iter()
            .filter(|d| d.0 == leaf && d.2 == spine)
            .count()
    }
}

/// The OCS an index of the view refers to.
pub fn ocs_id(o: usize) -> OcsId {
    OcsId(o as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::JobId;
    use crate::placement::{placer_on, JobRequest, Outcome, Policy, SliceOptions};
    use crate::topology::generate::uniform_topology;
    use std::sync::Arc;

    /// The memo gives the view of the state asked about, built once per
    /// version: never one of another state, a clone's changes included.
    #[test]
    fn a_view_is_built_once_per_version_and_is_always_the_states() {
        // One server of 4 GPUs per leaf: every job below spans leaves.
        let topo = uniform_topology(8, 4, 4, 2);
        for policy in [Policy::Vclos, Policy::OcsVclos] {
            let mut st = FabricState::new(Arc::clone(&topo));
            let same = |st: &FabricState| {
                assert_eq!(*LinkView::of(st), LinkView::new(st));
                assert_eq!(*OcsView::of(st), OcsView::new(st));
            };
            same(&st);
            let first = LinkView::of(&st);
            assert!(Rc::ptr_eq(&first, &LinkView::of(&st)), "unchanged: kept");
            let ocs = OcsView::of(&st);
            assert!(Rc::ptr_eq(&ocs, &OcsView::of(&st)));
            let mut placed = 0;
            for (i, gpus) in [8, 12, 8, 4].into_iter().enumerate() {
                let mut p = placer_on(policy, st.clone(), SliceOptions::default()).unwrap();
                let job = JobRequest::new(JobId::new(format!("j{i}")).unwrap(), gpus);
                if let Ok(Outcome::Placed(_)) = p.place(&job) {
                    let next = p.fabric().unwrap().clone();
                    // The clone placed on is another state now; the
                    // original still gets its own view.
                    same(&next);
                    same(&st);
                    st = next;
                    placed += 1;
                }
            }
            assert!(placed >= 3, "{policy:?}: {placed} jobs placed");
            assert_ne!(*LinkView::of(&st), *first, "{policy:?}: links taken");
        }
    }

    /// A leaf's or spine's usable count, per-OCS counts, and a pair's
    /// reach, are their per-OCS lists and their free direct cables, on an all-OCS fabric
    /// and on one of direct cables only, as jobs take some of them; a view
    /// that has built its reach table equals one that has not.
    #[test]
    fn usable_counts_and_reach_are_the_lists_and_the_direct_cables() {
        for ocs in [2, 0] {
            let topo = uniform_topology(8, 4, 4, ocs);
            let mut p = placer_on(
                Policy::Vclos,
                FabricState::new(topo),
                SliceOptions::default(),
            )
            .unwrap();
            let mut seen = std::collections::BTreeSet::new();
            for (i, gpus) in [0, 8, 12, 4, 8].into_iter().enumerate() {
                if gpus > 0 {
                    let job = JobRequest::new(JobId::new(format!("j{i}")).unwrap(), gpus);
                    assert!(
                        matches!(p.place(&job), Ok(Outcome::Placed(_))),
                        "{ocs} OCS: j{i}"
                    );
                }
                let st = p.fabric().unwrap();
                let v = OcsView::new(st);
                let topo = st.topology();
                for n in (0..topo.leaves.len() as u32).map(LeafId) {
                    let lists: usize = (0..v.k).map(|o| v.leaf_on(n, o).len()).sum();
                    let caps: Vec<u32> = (0..v.k).map(|o| v.leaf_on(n, o).len() as u32).collect();
                    assert_eq!(v.leaf_caps(n), caps, "{ocs} OCS: leaf {n:?}");
                    let direct = v.direct.iter().filter(|d| d.0 == n).count();
                    assert_eq!(v.leaf_usable(n), lists + direct, "{ocs} OCS: leaf {n:?}");
                    seen.insert(("leaf", v.leaf_usable(n)));
                }
                for m in (0..topo.spines.len() as u32).map(SpineId) {
                    let lists: usize = (0..v.k).map(|o| v.spine_on(m, o).len()).sum();
                    let caps: Vec<u32> = (0..v.k).map(|o| v.spine_on(m, o).len() as u32).collect();
                    assert_eq!(v.spine_caps(m), caps, "{ocs} OCS: spine {m:?}");
                    let direct = v.direct.iter().filter(|d| d.2 == m).count();
                    assert_eq!(v.spine_usable(m), lists + direct, "{ocs} OCS: spine {m:?}");
                    seen.insert(("spine", v.spine_usable(m)));
                    for n in (0..topo.leaves.len() as u32).map(LeafId) {
                        let shared: usize = (0..v.k)
                            .map(|o| v.leaf_on(n, o).len().min(v.spine_on(m, o).len()))
                            .sum();
                        let want = shared + v.direct_count(n, m);
                        assert_eq!(v.reach(n, m) as usize, want, "{ocs} OCS: {n:?} {m:?}");
                        seen.insert(("reach", want));
                    }
                }
                assert_eq!(v, OcsView::new(st), "a built table changes no view");
            }
            // The jobs took ports: each kind of count takes several values.
            for kind in ["leaf", "spine", "reach"] {
                let values = seen.iter().filter(|(k, _)| *k == kind).count();
                assert!(values > 1, "{ocs} OCS: {kind}: {seen:?}");
            }
        }
    }
}
