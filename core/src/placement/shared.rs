//! The sharing mode (issue 16, item 4; Cassini, seed 001 Section 4.4):
//! when a job has no isolated slice, share links with jobs whose
//! communication interleaves with its own.
//!
//! **Isolation first.** The mode runs only when the policy's isolated
//! search is blocked on the network (`Blocked::Network`; a job short of
//! GPUs cannot be helped by links), and only jobs placed in a sharing mode
//! are ever shared: each carries `sharing` in its decision (its profile
//! and phase), shared or not ([`crate::decision::Sharing`]).
//!
//! **Candidates (Section 4.4.2: up to [`MAX_CANDIDATES`]).** vClos's
//! Stage 2 (a `K_{l,s}` biclique, `super::vclos::find_slice`) on a view
//! where a (leaf, spine) pair is usable over an unused link, or else over
//! a *shareable* held link (the rules of `crate::state`'s sharing module:
//! held whole by jobs that all opted in, used as patched, fewer than
//! `MAX_LINK_JOBS` holders), the one with the fewest holders. A spine's
//! cost carries [`HELD_COST`] per held link it would lend, so the eq. 6
//! search prefers slices that share little. One candidate per slice shape
//! (fewest leaves first, the paper's order), each search bounded by
//! [`SEARCH_LIMIT`] nodes. The slice never rewires an OCS: links are used
//! as patched, on OCS fabrics too.
//!
//! **Score.** Every job on a link is at full line rate during its Up
//! phases (a vClos link carries one server port's traffic). Running jobs
//! keep their phase: **ours, not the thesis's** Algorithm 1, which
//! re-derives every job's shift from a BFS over the Affinity graph. A
//! running job cannot be re-phased without pausing it, and with every
//! other shift fixed the newcomer has one shift to choose, the same on all
//! its links, so no loop can arise (Algorithm 2's case is avoided by
//! construction rather than rejected). The newcomer's shift is searched on
//! a grid of [`SHIFT_STEPS`] points over its iteration; at each, a link's
//! score is Eq. 4.2 on its unified circle (`crate::sharing::circle::
//! scores_joining`) and the candidate's is the minimum over its shared
//! links (**inference**: the worst link paces a synchronous job). Links
//! with the same holders score alike and are computed once. The best
//! candidate (then fewest shared links) is taken if its score is at least
//! the mode's `min_score` (default [`DEFAULT_MIN_SCORE`]: Table 4.3 shows
//! the gains vanishing near 0.6).

use std::collections::BTreeSet;

use super::plan::Plan;
use super::view::LinkView;
use super::{shapes, vclos, JobRequest, SliceOptions};
use crate::decision::{SharedLink, Sharing, SharingPhase};
use crate::intent::addressing::SHARED_VLANS;
use crate::names::JobId;
use crate::sharing::circle::{scores_joining, OnLink};
use crate::sharing::profile::{Phase, Profile, DEFAULT_ITERATION_MS};
use crate::state::FabricState;
use crate::topology::PortRef;
use crate::trace::workload::DEFAULT_COMM_FRACTION;

/// Shared placements scored per decision, at most (Section 4.4.2).
pub const MAX_CANDIDATES: usize = 10;
/// Biclique search nodes per candidate shape.
pub const SEARCH_LIMIT: u64 = 2_000;
/// Cost of one held link a spine lends to a candidate, against the eq. 6
/// cost of one free port.
pub const HELD_COST: u64 = 1 << 20;
/// Newcomer shifts tried per iteration.
pub const SHIFT_STEPS: u32 = 64;
/// The score a shared placement needs by default.
pub const DEFAULT_MIN_SCORE: f64 = 0.9;

/// The sharing mode of a placer (`--sharing cassini`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharingMode {
    /// Lowest compatibility score (Eq. 4.2) a shared placement may have.
    pub min_score: f64,
    /// The Up-Down profile of a job whose request states none
    /// (`--iteration-ms`, `--comm-fraction`; `None`: the trace defaults).
    pub iteration_ms: Option<u32>,
    pub comm_fraction: Option<f64>,
}

impl Default for SharingMode {
    fn default() -> Self {
        SharingMode {
            min_score: DEFAULT_MIN_SCORE,
            iteration_ms: None,
            comm_fraction: None,
        }
    }
}

impl SharingMode {
    /// The profile of `job` in this mode: its own, else the mode's Up-Down
    /// default.
    pub fn profile_of(&self, job: &JobRequest) -> Profile {
        job.profile.clone().unwrap_or_else(|| {
            Profile::up_down(
                self.iteration_ms.unwrap_or(DEFAULT_ITERATION_MS),
                self.comm_fraction.unwrap_or(DEFAULT_COMM_FRACTION),
            )
        })
    }
}

/// A job's profile as its decision records it.
pub fn phases_of(p: &Profile) -> Vec<SharingPhase> {
    p.phases()
        .iter()
        .map(|ph| SharingPhase {
            ms: ph.ms,
            demand: ph.demand,
        })
        .collect()
}

/// The profile a decision records (checked on admission, so valid).
pub(crate) fn profile_of(s: &Sharing) -> Option<Profile> {
    let phases = s.profile.iter().map(|p| Phase {
        ms: p.ms,
        demand: p.demand,
    });
    Profile::new(phases.collect()).ok()
}

/// The `sharing` section of a job placed without sharing anything.
pub fn alone(profile: &Profile) -> Sharing {
    Sharing {
        time_shift_ms: 0,
        score: 1.0,
        profile: phases_of(profile),
        links: Vec::new(),
        time_shared: Vec::new(),
    }
}

/// A shared placement for `job` (module doc), trying `options`' grains.
pub(crate) fn place(
    st: &FabricState,
    job: &JobRequest,
    profile: &Profile,
    options: SliceOptions,
    mode: SharingMode,
) -> Option<(Plan, Sharing)> {
    let topo = st.topology();
    let view = shareable_view(st);
    let mut best: Option<(f64, usize, Plan, Sharing)> = None;
    let mut tried = 0;
    for &grain in options.grains() {
        let k = grain.needed(topo, job.gpus);
        if k == 0 || grain.free_total(st) < k {
            continue;
        }
        let t = grain.size(topo);
        // As vClos's Stage 2: a virtual leaf has one uplink per spine.
        let max_up = topo.leaves.iter().map(|l| l.uplinks.len()).max();
        let max_s = topo.spines.len().min(max_up.unwrap_or(0)) as u32;
        for (l, s) in shapes(k, t, topo.leaves.len() as u32, max_s) {
            if tried == MAX_CANDIDATES {
                break;
            }
            let shape = (l as usize, s as usize);
            let found = vclos::find_slice(st, grain, &view, shape, 0, SEARCH_LIMIT);
            let Ok(Some(plan)) = found else { continue };
            tried += 1;
            let sharing = score(st, &plan, profile);
            let n = sharing.links.len();
            let better = best
                .as_ref()
                .is_none_or(|b| sharing.score > b.0 || (sharing.score == b.0 && n < b.1));
            if better {
                best = Some((sharing.score, n, plan, sharing));
            }
        }
    }
    let (score, _, plan, sharing) = best?;
    (score >= mode.min_score).then_some((plan, sharing))
}

/// The vClos view with shareable held links ([`LinkView::sharing`]),
/// a spine costing [`HELD_COST`] more per held link it lends.
fn shareable_view(st: &FabricState) -> LinkView {
    let mut lent = vec![0u64; st.topology().spines.len()];
    let mut links = LinkView::sharing(st, &mut |_, spine| lent[spine.index()] += 1);
    for (free, n) in links.spine_free.iter_mut().zip(lent) {
        *free += n * HELD_COST;
    }
    links
}

/// The lowest VLAN of [`SHARED_VLANS`] no holder of link `leaf:uplink`
/// (`with`) has a sub-interface in. A holder that does not list the link
/// as shared has its untagged main interface. At most `MAX_LINK_JOBS - 1`
/// holders (the view lends no fuller link) leave one of the eight free.
fn free_vlan(st: &FabricState, with: &[JobId], leaf: &str, uplink: &str) -> u16 {
    let taken: Vec<u16> = with
        .iter()
        .filter_map(|j| st.decision(j)?.sharing.as_ref())
        .flat_map(|s| &s.links)
        .filter(|l| &*l.leaf == leaf && &*l.uplink == uplink)
        .map(|l| l.vlan)
        .collect();
    SHARED_VLANS
        .clone()
        .find(|v| !taken.contains(v))
        .unwrap_or(*SHARED_VLANS.end())
}

/// The plan's shared links, the newcomer's best shift and its score.
fn score(st: &FabricState, plan: &Plan, profile: &Profile) -> Sharing {
    let topo = st.topology();
    // Shared links grouped by who holds them: alike links score alike.
    let mut groups: BTreeSet<Vec<JobId>> = BTreeSet::new();
    let mut links = Vec::new();
    for k in &plan.links {
        if !matches!(k.far, PortRef::Spine(..)) {
            continue;
        }
        let with: Vec<JobId> = (st.uplink_holders(k.leaf, k.uplink).into_iter())
            .cloned()
            .collect();
        if with.is_empty() {
            continue;
        }
        groups.insert(with.clone());
        let leaf = topo.leaf(k.leaf);
        let (leaf_name, uplink) = (&leaf.name, &leaf.uplinks[k.uplink as usize]);
        links.push(SharedLink {
            leaf: leaf_name.clone(),
            uplink: uplink.clone(),
            vlan: free_vlan(st, &with, leaf_name, uplink),
            with,
        });
    }
    let (time_shift_ms, score) = best_shift(st, &groups, profile);
    Sharing {
        time_shift_ms,
        score,
        profile: phases_of(profile),
        links,
        time_shared: Vec::new(),
    }
}

/// The newcomer's best shift on a grid of [`SHIFT_STEPS`] points over its
/// iteration ([`shift_grid`]), and its score there: the least over `groups`
/// (the holders of each shared link, alike links once) of
/// [`scores_on`] (module doc, "Score").
fn best_shift(st: &FabricState, groups: &BTreeSet<Vec<JobId>>, profile: &Profile) -> (u32, f64) {
    let grid = shift_grid(profile);
    let mut worst = vec![1.0f64; grid.len()];
    for jobs in groups {
        for (w, s) in worst.iter_mut().zip(scores_on(st, jobs, profile, &grid)) {
            *w = w.min(s);
        }
    }
    let (at, score) =
        worst.iter().enumerate().fold(
            (0, f64::NEG_INFINITY),
            |b, (i, &s)| if s > b.1 { (i, s) } else { b },
        );
    (grid.get(at).copied().unwrap_or(0), score)
}

/// The shifts a newcomer is tried at: [`SHIFT_STEPS`] points over its
/// iteration, ms.
pub(crate) fn shift_grid(profile: &Profile) -> Vec<u32> {
    let iter = profile.iteration_ms();
    let steps = SHIFT_STEPS.min(iter);
    (0..steps)
        .map(|i| (u64::from(i) * u64::from(iter) / u64::from(steps)) as u32)
        .collect()
}

/// Eq. 4.2 for a newcomer of `profile` on one link held by `jobs` (each at
/// full load at its recorded shift; a job without a `sharing` section is
/// left out), at each shift of `grid`.
pub(crate) fn scores_on(
    st: &FabricState,
    jobs: &[JobId],
    profile: &Profile,
    grid: &[u32],
) -> Vec<f64> {
    let running: Vec<(Profile, u32)> = jobs
        .iter()
        .filter_map(|j| {
            let s = st.decision(j)?.sharing.as_ref()?;
            Some((profile_of(s)?, s.time_shift_ms))
        })
        .collect();
    let fixed: Vec<(OnLink, u32)> = (running.iter())
        .map(|(profile, t)| (OnLink { profile, load: 1.0 }, *t))
        .collect();
    let new = OnLink { profile, load: 1.0 };
    scores_joining(&fixed, new, 1.0, grid)
}

/// A fabric crowded for sharing, for the tests here and above (feature
/// `test-fixtures`). narrow: 3 leaves x 2 servers x 4 GPUs, 4 uplinks per
/// leaf. With one server of every leaf held (`h0`-`h2`, no links), `a` (8
/// GPUs) takes a server on two leaves and all their uplinks; then the
/// holder on `a`'s first leaf leaves. A 2-server job then has an idle
/// server on `a`'s first leaf and one on the third, whose uplinks are
/// free: no isolated slice. Returns the placer (`options` on) and the
/// holders still held.
#[cfg(any(test, feature = "test-fixtures"))]
#[allow(clippy::unwrap_used)]
pub fn crowded(options: SliceOptions) -> (super::VclosPlacer, Vec<JobId>) {
    use super::{Outcome, Placer};
    let id = |s: &str| JobId::new(s).unwrap();
    let topo = crate::topology::generate::narrow_topology();
    let mut st = crate::state::FabricState::new(std::sync::Arc::clone(&topo));
    for leaf in 0..3u32 {
        let server = topo.leaf(crate::topology::LeafId(leaf)).servers[1];
        let gpus = super::local::whole(&[server], topo.gpus_per_server);
        let d = Plan::local(crate::decision::Stage::Server, gpus)
            .to_decision(&topo, &id(&format!("h{leaf}")));
        st.admit(&d).unwrap();
    }
    let mut p = super::VclosPlacer::with_state(st).with_options(options);
    let Ok(Outcome::Placed(a)) = p.place(&JobRequest::new(id("a"), 8)) else {
        panic!("a is not placed");
    };
    assert_eq!(a.vclos.links.len(), 8);
    let first = topo.leaf_id(&a.vclos.leaves[0].leaf).unwrap();
    let gone = id(&format!("h{}", first.index()));
    p.release(&gone).unwrap();
    let left = (0..3).map(|i| id(&format!("h{i}"))).filter(|h| *h != gone);
    (p, left.collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;
    use crate::decision::Decision;
    use crate::placement::{Blocked, Outcome, Placer, VclosPlacer};
    use crate::state::StateError;
    use crate::topology::generate::narrow_topology;

    fn req(id: &str, gpus: u32) -> JobRequest {
        JobRequest::new(JobId::new(id).unwrap(), gpus)
    }

    fn id(s: &str) -> JobId {
        JobId::new(s).unwrap()
    }

    fn placed(o: Outcome) -> Decision {
        match o {
            Outcome::Placed(d) => Arc::unwrap_or_clone(d),
            Outcome::Blocked(b) => panic!("blocked: {b:?}"),
        }
    }

    fn sharing_on() -> SliceOptions {
        SliceOptions {
            sharing: Some(SharingMode::default()),
            ..SliceOptions::default()
        }
    }

    #[test]
    fn a_job_without_isolated_slice_shares_links_with_a_shift_that_interleaves() {
        let (mut p, _) = crowded(sharing_on());
        let d = placed(p.place(&req("b", 8)).unwrap());
        let sh = d.sharing.as_ref().unwrap();
        // It shares one leaf's four links with `a`, and nothing else.
        assert_eq!(sh.links.len(), 4, "{sh:?}");
        assert!(sh.links.iter().all(|l| l.with == vec![id("a")]));
        // Two Up phases of 30% of 250 ms fit one circle: fully compatible,
        // and only away from `a`'s phase (shift 0).
        assert_eq!(sh.score, 1.0);
        let a = p
            .state()
            .decision(&id("a"))
            .unwrap()
            .sharing
            .clone()
            .unwrap();
        assert_eq!((a.time_shift_ms, a.score, a.links.len()), (0, 1.0, 0));
        let up = 75; // 30% of 250 ms
        let gap = (sh.time_shift_ms + 250 - a.time_shift_ms) % 250;
        assert!((up..=250 - up).contains(&gap), "shift {}", sh.time_shift_ms);
        // The state holds the link for both; the ledger of the state agrees.
        let l = &sh.links[0];
        let leaf = p.state().topology().leaf_id(&l.leaf).unwrap();
        let up_i = p
            .state()
            .topology()
            .leaf(leaf)
            .uplinks
            .iter()
            .position(|u| *u == l.uplink);
        let holders = p.state().uplink_holders(leaf, up_i.unwrap() as u16);
        assert_eq!(holders, vec![&id("a"), &id("b")]);
    }

    #[test]
    fn a_job_placed_without_a_sharing_mode_is_never_shared() {
        let (mut p, _) = crowded(SliceOptions::default());
        p.options.sharing = Some(SharingMode::default());
        assert_eq!(
            p.place(&req("b", 8)).unwrap(),
            Outcome::Blocked(Blocked::Network)
        );
    }

    #[test]
    fn an_incompatible_job_waits() {
        // Up for 90% of its iteration: with `a` at 30% no shift keeps the
        // link under capacity, so the score is under the default 0.9.
        let (mut p, _) = crowded(sharing_on());
        let mut b = req("b", 8);
        b.profile = Some(Profile::up_down(250, 0.9));
        assert_eq!(p.place(&b).unwrap(), Outcome::Blocked(Blocked::Network));
        // A lower bar admits it, scored below 1.
        p.options.sharing = Some(SharingMode {
            min_score: 0.5,
            ..SharingMode::default()
        });
        let d = placed(p.place(&b).unwrap());
        let s = d.sharing.unwrap().score;
        assert!((0.5..1.0).contains(&s), "{s}");
    }

    #[test]
    fn releases_in_any_order_hand_the_link_over_and_leave_a_fresh_state() {
        for first in ["a", "b"] {
            let (mut p, held) = crowded(sharing_on());
            let fresh = crate::state::FabricState::new(narrow_topology());
            let b = placed(p.place(&req("b", 8)).unwrap());
            let l = &b.sharing.as_ref().unwrap().links[0];
            let topo = Arc::clone(p.state().topology());
            let leaf = topo.leaf_id(&l.leaf).unwrap();
            let u = topo
                .leaf(leaf)
                .uplinks
                .iter()
                .position(|x| *x == l.uplink)
                .unwrap() as u16;
            p.release(&id(first)).unwrap();
            let other = if first == "a" { "b" } else { "a" };
            // The link is still held, by the job left on it.
            assert_eq!(p.state().uplink_holders(leaf, u), vec![&id(other)]);
            assert!(!p.state().uplink_free(leaf, u));
            p.release(&id(other)).unwrap();
            for h in &held {
                p.release(h).unwrap();
            }
            assert!(p.state().no_shared_links());
            assert_eq!(p.state().occ(), fresh.occ(), "released {first} first");
        }
    }

    #[test]
    fn a_state_rebuilt_without_the_first_holder_gives_the_sharer_its_links() {
        let (mut p, held) = crowded(sharing_on());
        let b = placed(p.place(&req("b", 8)).unwrap());
        let mut ds: Vec<Decision> = (held.iter())
            .map(|h| p.state().decision(h).unwrap().clone())
            .collect();
        ds.push(b);
        let st = crate::state::FabricState::from_decisions(narrow_topology(), &ds).unwrap();
        assert!(st.no_shared_links());
        assert_eq!(st.job_count(), 3);
    }

    #[test]
    fn admission_refuses_sharing_that_was_not_agreed() {
        let (mut p, _) = crowded(sharing_on());
        let b = placed(p.place(&req("b", 8)).unwrap());
        p.release(&id("b")).unwrap();
        let mut st = p.state().clone();
        // Not naming the holder: the link is busy.
        let mut d = b.clone();
        for l in &mut d.sharing.as_mut().unwrap().links {
            l.with = vec![id("zz")];
        }
        assert!(matches!(st.admit(&d), Err(StateError::Busy { holder, .. }) if holder == id("a")));
        // No `sharing` section at all: busy as well.
        let mut d = b.clone();
        d.sharing = None;
        assert!(matches!(st.admit(&d), Err(StateError::Busy { .. })));
        // A holder placed without a sharing mode is never shared.
        let a = st.release(&id("a")).unwrap();
        let mut a_isolated = a.clone();
        a_isolated.sharing = None;
        st.admit(&a_isolated).unwrap();
        let e = st.admit(&b).unwrap_err().to_string();
        assert!(e.contains("not placed in a sharing mode"), "{e}");
        // A shift outside the iteration, and a shared link not reserved.
        let mut d = b.clone();
        d.sharing.as_mut().unwrap().time_shift_ms = 250;
        let e = st.admit(&d).unwrap_err().to_string();
        assert!(e.contains("time_shift_ms"), "{e}");
        let mut d = b.clone();
        d.sharing.as_mut().unwrap().links[0].uplink = "nope".into();
        let e = st.admit(&d).unwrap_err().to_string();
        assert!(e.contains("not one of the job's reserved links"), "{e}");
        let mut d = b.clone();
        d.sharing.as_mut().unwrap().links[0].vlan = 4000;
        let e = st.admit(&d).unwrap_err().to_string();
        assert!(e.contains("`vlan` 4000 is not one of 101-108"), "{e}");
        // Time-shared links (titan's) must exist, each direction once.
        let (leaf, uplink) = (
            &p.state().topology().leaves[0].name,
            &p.state().topology().leaves[0].uplinks[0],
        );
        let link = |leaf: &str, uplink: &str, up| crate::decision::TimeSharedLink {
            leaf: leaf.into(),
            uplink: uplink.into(),
            up,
        };
        for (shared, want) in [
            (vec![link("nowhere", uplink, true)], "leaf `nowhere`"),
            (vec![link(leaf, "nope", true)], "no such uplink"),
            (
                vec![link(leaf, uplink, false), link(leaf, uplink, false)],
                "listed twice",
            ),
        ] {
            let mut d = b.clone();
            d.sharing.as_mut().unwrap().time_shared = shared;
            let e = st.admit(&d).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        // As placed, with `a` opted in, it is admitted.
        st.release(&id("a")).unwrap();
        st.admit(&a).unwrap();
        st.admit(&b).unwrap();
    }

    #[test]
    fn a_joiner_gets_its_own_subinterface_at_both_ends_of_each_shared_link() {
        use crate::intent::{addressing, Item};
        let (mut p, _) = crowded(sharing_on());
        let b = placed(p.place(&req("b", 8)).unwrap());
        let topo = Arc::clone(p.state().topology());
        let build = |p: &VclosPlacer| {
            let all: Vec<Decision> = p.state().decisions().into_iter().cloned().collect();
            crate::intent::build(&topo, &all).unwrap()
        };
        let fabric = build(&p);
        let sh = b.sharing.as_ref().unwrap();
        for l in &sh.links {
            assert_eq!(l.vlan, 101, "the first joiner takes the first VLAN");
            let link = b
                .vclos
                .links
                .iter()
                .find(|k| k.leaf == l.leaf && k.uplink == l.uplink);
            let link = link.unwrap();
            let leaf = fabric.device(
                &topo
                    .device(topo.leaf(topo.leaf_id(&l.leaf).unwrap()).device)
                    .name,
            );
            let leaf = leaf.unwrap();
            let sub = format!("{}.101", l.uplink);
            let net = leaf.items.iter().find_map(|i| match i {
                Item::Address {
                    port,
                    vrf: None,
                    net,
                } if port.as_str() == sub => Some(*net),
                _ => None,
            });
            let net = net.unwrap();
            assert!(net.to_string().starts_with("172.16."), "{net}");
            assert!(leaf.items.contains(&Item::Subinterface {
                port: crate::intent::PortName::new(sub.clone()).unwrap(),
                vlan: 101
            }));
            // b's source routes onto this uplink go to the sub-interface.
            let onto: Vec<&str> = (leaf.items.iter())
                .filter_map(|i| match i {
                    Item::Redirect { job, uplink, .. } if *job == b.job => Some(uplink.as_str()),
                    _ => None,
                })
                .collect();
            assert!(
                onto.contains(&sub.as_str()) && !onto.contains(&&*l.uplink),
                "{onto:?}"
            );
            // The spine: b's VRF on the spine port's sub-interface, routing
            // to the leaf through the leaf's sub-interface address; a's VRF
            // keeps the main port.
            let spine = fabric.device(&link.peer).unwrap();
            let far_sub = format!("{}.101", link.peer_port);
            let bound = |port: &str| {
                spine.items.iter().find_map(|i| match i {
                    Item::Address {
                        port: p,
                        vrf: Some(v),
                        ..
                    } if p.as_str() == port => Some(v.to_string()),
                    _ => None,
                })
            };
            assert_eq!(bound(&far_sub).as_deref(), Some("Vrf-b"));
            assert_eq!(bound(&link.peer_port).as_deref(), Some("Vrf-a"));
            assert!(spine.items.iter().any(|i| matches!(i,
                Item::Route { vrf, nexthop, .. } if vrf.as_str() == "Vrf-b" && *nexthop == net.addr)));
        }
        // With `a` gone its main interfaces return to the baseline; b's
        // sub-interfaces stay as they were: nothing of b changes.
        let b_items = |f: &crate::intent::FabricIntent| -> Vec<Item> {
            (f.devices.iter())
                .flat_map(|d| d.items.iter())
                .filter(|i| i.to_string().contains(".101") || i.to_string().contains("Vrf-b"))
                .cloned()
                .collect()
        };
        let before = b_items(&fabric);
        p.release(&id("a")).unwrap();
        let after = build(&p);
        assert_eq!(b_items(&after), before);
        let l = &sh.links[0];
        let li = topo.leaf_id(&l.leaf).unwrap();
        let u = topo
            .leaf(li)
            .uplinks
            .iter()
            .position(|x| *x == l.uplink)
            .unwrap();
        let link = b
            .vclos
            .links
            .iter()
            .find(|k| k.leaf == l.leaf && k.uplink == l.uplink);
        let spine = after.device(&link.unwrap().peer).unwrap();
        assert!(spine.items.iter().any(|i| matches!(i,
            Item::Address { port, vrf: None, net }
                if port.as_str() == &*link.unwrap().peer_port
                    && *net == addressing::uplink_peer_address(li, u))));
    }

    /// Who holds every uplink, spine port and GPU, by job name (slot
    /// numbers differ between a live state and one rebuilt).
    fn holders(st: &crate::state::FabricState) -> Vec<Vec<String>> {
        let topo = st.topology();
        let mut out = Vec::new();
        for (li, leaf) in topo.leaves.iter().enumerate() {
            let l = crate::topology::LeafId(li as u32);
            for u in 0..leaf.uplinks.len() as u16 {
                out.push(
                    st.uplink_holders(l, u)
                        .iter()
                        .map(|j| j.to_string())
                        .collect(),
                );
            }
        }
        for (si, spine) in topo.spines.iter().enumerate() {
            let m = crate::topology::SpineId(si as u32);
            for p in 0..spine.ports.len() as u16 {
                out.push(
                    st.spine_port_holder(m, p)
                        .map(|j| j.to_string())
                        .into_iter()
                        .collect(),
                );
            }
        }
        for (si, _) in topo.servers.iter().enumerate() {
            let sid = crate::topology::ServerId(si as u32);
            for g in 0..topo.gpus_per_server {
                out.push(
                    st.gpu_holder(sid, g)
                        .map(|j| j.to_string())
                        .into_iter()
                        .collect(),
                );
            }
        }
        out
    }

    /// Random sharing-mode admissions and releases on a crowded 2-spine
    /// fabric: after every step the state rebuilt from its decisions holds
    /// exactly what the live one does (shared links, handovers included),
    /// and releasing everything leaves a fresh state.
    #[test]
    fn random_sharing_admissions_and_releases_rebuild_to_the_same_holders() {
        use crate::topology::generate::{loaded, Params};
        let topo = loaded(&Params {
            name: "two-spine".into(),
            leaves: 4,
            spines: 2,
            gpus_per_server: 2,
            servers_per_leaf: Some(3),
            ocs: 0,
            allow_oversubscription: true,
        });
        let fresh = crate::state::FabricState::new(Arc::clone(&topo));
        let mut rng = crate::placement::Rng(0x5eed);
        let mut shared_seen = 0;
        for round in 0..20 {
            let mut p = VclosPlacer::new(Arc::clone(&topo)).with_options(sharing_on());
            let mut running: Vec<JobId> = Vec::new();
            for step in 0..60 {
                if !running.is_empty() && rng.below(3) == 0 {
                    let j = running.remove(rng.below(running.len() as u64) as usize);
                    p.release(&j).unwrap();
                } else {
                    let mut r = req(&format!("j{round}-{step}"), 2 * (1 + rng.below(4) as u32));
                    r.profile = Some(Profile::up_down(200, 0.1 + 0.1 * rng.below(4) as f64));
                    if let Outcome::Placed(d) = p.place(&r).unwrap() {
                        if d.sharing.as_ref().is_some_and(|s| !s.links.is_empty()) {
                            shared_seen += 1;
                        }
                        running.push(r.id);
                    }
                }
                let all: Vec<Decision> = p.state().decisions().into_iter().cloned().collect();
                let rebuilt = crate::state::FabricState::from_decisions(Arc::clone(&topo), &all)
                    .unwrap_or_else(|e| panic!("round {round} step {step}: {e}"));
                assert_eq!(
                    holders(&rebuilt),
                    holders(p.state()),
                    "round {round} step {step}"
                );
            }
            for j in running {
                p.release(&j).unwrap();
            }
            assert!(p.state().no_shared_links());
            assert_eq!(p.state().occ(), fresh.occ(), "round {round}");
        }
        assert!(shared_seen > 10, "only {shared_seen} shared placements");
    }
}
