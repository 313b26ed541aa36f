//! Placement tests: each stage on small hand-built fabrics, the Stage 2
//! solver against brute force on random fabrics, OCS rewiring of idle ports
//! only, the baselines and the constructor.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use super::view::LinkView;
use super::*;
use crate::decision::{Decision, GpuRef, Stage, VirtualClos};
use crate::topology::{LeafId, Name, PortRef, ServerId, SpineId};

use crate::topology::generate::uniform_topology as topo;

fn req(id: &str, gpus: u32) -> JobRequest {
    JobRequest::new(JobId::new(id).unwrap(), gpus)
}

fn placed(o: Outcome) -> Decision {
    match o {
        Outcome::Placed(d) => std::sync::Arc::unwrap_or_clone(d),
        Outcome::Blocked(b) => panic!("blocked: {b:?}"),
    }
}

/// A job holding every GPU of `server` and links from its leaf to `spines`
/// (as currently cabled/patched), to fragment the fabric on purpose.
fn blocker(st: &FabricState, job: &str, server: ServerId, spines: &[usize]) -> Decision {
    let topo = st.topology();
    let srv = topo.server(server);
    let leaf = topo.leaf(srv.leaf);
    let mut links = Vec::new();
    let mut routes = Vec::new();
    let mut used = Vec::new();
    // Spines the leaf no longer reaches (held by an earlier blocker) are skipped.
    for &m in spines {
        let Some(u) = (0..leaf.uplinks.len() as u16).find(|&u| {
            st.uplink_free(srv.leaf, u)
                && matches!(st.uplink_far_end(srv.leaf, u), Some((PortRef::Spine(s, p), _)) if s.index() == m && st.spine_port_free(s, p))
        }) else {
            continue;
        };
        let (far, via) = st.uplink_far_end(srv.leaf, u).unwrap();
        links.push(plan::LinkPick {
            leaf: srv.leaf,
            uplink: u,
            far,
            via,
            rewire: false,
        });
        routes.push((srv.leaf, srv.ports[routes.len()], u));
        used.push(SpineId(m as u32));
    }
    let mut p = plan::Plan::local(Stage::Manual, local::whole(&[server], topo.gpus_per_server));
    if !used.is_empty() {
        // One GPU per link (every routed port must be the job's), which
        // still makes the server non-idle.
        p.gpus.truncate(used.len());
        p.leaves = vec![srv.leaf];
        p.spines = used;
        p.links = links;
        p.routes = routes;
    }
    p.to_decision(topo, &JobId::new(job).unwrap())
}

/// Checks every placed decision must pass beyond admission: contention-free
/// shape (each leaf's ports routed one-to-one onto distinct links).
fn check_shape(d: &Decision) {
    let mut seen = HashSet::new();
    for r in &d.source_routes {
        assert!(seen.insert((r.leaf.clone(), r.uplink.clone())));
    }
    let ports: usize = d.vclos.leaves.iter().map(|l| l.server_ports.len()).sum();
    if d.touches_network() {
        assert_eq!(d.source_routes.len(), ports);
    }
}

#[test]
fn stage0_picks_the_fullest_server_that_fits() {
    let t = topo(2, 8, 4, 0);
    let mut p = VclosPlacer::new(t);
    let a = placed(p.place(&req("a", 3)).unwrap());
    assert_eq!(a.stage, Stage::Server);
    assert!(!a.touches_network());
    let b = placed(p.place(&req("b", 1)).unwrap());
    assert_eq!(
        b.gpus,
        vec![GpuRef {
            server: a.gpus[0].server.clone(),
            gpu: 3
        }]
    );
    let c = placed(p.place(&req("c", 2)).unwrap());
    assert_ne!(c.gpus[0].server, a.gpus[0].server);
}

#[test]
fn stage1_picks_the_leaf_with_fewest_idle_servers() {
    let t = topo(3, 8, 2, 0);
    // Occupy one server on leaf2 by hand so leaf2 has the fewest idle.
    let mut st = FabricState::new(t.clone());
    st.admit(&blocker(&st, "x", t.leaf(LeafId(1)).servers[0], &[]))
        .unwrap();
    let mut p = VclosPlacer::with_state(st);
    let d = placed(p.place(&req("a", 6)).unwrap());
    assert_eq!(d.stage, Stage::Leaf);
    assert_eq!(d.gpus.len(), 6);
    assert!(
        d.gpus.iter().all(|g| g.server.starts_with("srv2-")),
        "{:?}",
        d.gpus
    );
    assert!(!d.touches_network());
}

#[test]
fn vclos_stage2_builds_l_by_s_clos() {
    let t = topo(4, 8, 2, 0);
    let mut p = VclosPlacer::new(t);
    let d = placed(p.place(&req("a", 16)).unwrap());
    assert_eq!(d.stage, Stage::Vclos);
    assert_eq!((d.vclos.leaves.len(), d.vclos.spines.len()), (2, 8));
    assert_eq!(d.vclos.links.len(), 16);
    for l in &d.vclos.leaves {
        let spines: HashSet<_> = d
            .vclos
            .links
            .iter()
            .filter(|k| k.leaf == l.leaf)
            .map(|k| &k.peer)
            .collect();
        assert_eq!(spines.len(), 8);
    }
    check_shape(&d);
    // Fewest leaves first: 8 servers as 2 x (4 servers), not 4 x 2.
    assert_eq!(super::shapes(8, 2, 4, 8), vec![(2, 8), (4, 4)]);
}

#[test]
fn odd_sizes_take_whole_servers() {
    let t = topo(6, 16, 8, 0);
    let mut p = VclosPlacer::new(t);
    let d = placed(p.place(&req("a24", 24)).unwrap());
    assert_eq!((d.vclos.leaves.len(), d.vclos.spines.len()), (3, 8));
    let d = placed(p.place(&req("a12", 12)).unwrap());
    assert_eq!((d.stage, d.gpus.len()), (Stage::Leaf, 16));
    let d = placed(p.place(&req("a40", 40)).unwrap());
    assert_eq!(
        (d.vclos.leaves.len(), d.vclos.spines.len(), d.gpus.len()),
        (5, 8, 40)
    );
    check_shape(&d);
    assert_eq!(super::shapes(9, 8, 16, 64), vec![(3, 24), (9, 8)]);
    assert_eq!(super::shapes(13, 8, 16, 64), vec![(13, 8)]);
}

/// `shapes` walks only the divisors that can fit a leaf's uplinks: the
/// same shapes, in the same order, as every divisor of `k` filtered.
#[test]
fn shapes_are_every_divisor_that_fits() {
    let every = |k: u32, t: u32, leaves: u32, max_s: u32| -> Vec<(u32, u32)> {
        (1..=k)
            .rev()
            .filter(|&d| k.is_multiple_of(d))
            .map(|d| (k / d, d * t))
            .filter(|&(l, s)| l >= 2 && l <= leaves && s <= max_s)
            .collect()
    };
    let mut some = 0;
    for k in 0..200 {
        for t in [1, 2, 3, 8] {
            for (leaves, max_s) in [(4, 8), (16, 64), (300, 7), (2, 1), (300, 0)] {
                let got = super::shapes(k, t, leaves, max_s);
                assert_eq!(got, every(k, t, leaves, max_s), "{k} {t} {leaves} {max_s}");
                some += usize::from(got.len() > 2);
            }
        }
    }
    assert!(some > 100);
}

/// 3 leaves x 2 servers (T=2), 4 spines; leaf1 and leaf2 each have one
/// server busy with links to disjoint spine pairs, leaf3 fully busy.
fn fragmented(ocs: u32) -> FabricState {
    let t = topo(3, 4, 2, ocs);
    let mut st = FabricState::new(t.clone());
    for (job, leaf, spines) in [("a", 0, vec![0, 1]), ("b", 1, vec![2, 3])] {
        let d = blocker(&st, job, t.leaf(LeafId(leaf)).servers[0], &spines);
        st.admit(&d).unwrap();
    }
    for (i, &s) in t.leaf(LeafId(2)).servers.iter().enumerate() {
        st.admit(&blocker(&st, &format!("c{i}"), s, &[])).unwrap();
    }
    st
}

#[test]
fn blocked_reasons_are_gpu_or_network() {
    let st = fragmented(0);
    let mut p = VclosPlacer::with_state(st.clone());
    assert_eq!(
        p.place(&req("j", 4)).unwrap(),
        Outcome::Blocked(Blocked::Network)
    );
    assert_eq!(
        p.place(&req("k", 6)).unwrap(),
        Outcome::Blocked(Blocked::Gpu)
    );
    // The ideal fabric places it; source routing too (sharing links).
    let mut best = best_with(&st);
    let d = placed(best.place(&req("j", 4)).unwrap());
    assert!(!d.touches_network());
    // OCS-vClos on the same fabric with an OCS layer: leaf to leaf.
    let mut o = OcsVclosPlacer::with_state(fragmented(1));
    let d = placed(o.place(&req("j", 4)).unwrap());
    assert_eq!(d.stage, Stage::OcsTwoLeaf);
    assert!(d.vclos.spines.is_empty());
    check_shape(&d);
}

/// The same GPUs busy, without their network part (`manual` GPU-only
/// decisions, which only the baselines' ideal-network model admits).
fn best_with(st: &FabricState) -> BestPlacer {
    let mut ideal = FabricState::new(st.topology().clone()).ideal_network();
    for d in st.decisions() {
        let gpus_only = Decision {
            stage: Stage::Manual,
            vclos: VirtualClos::default(),
            source_routes: vec![],
            ..d.clone()
        };
        ideal.admit(&gpus_only).unwrap();
    }
    BestPlacer::with_state(ideal)
}

#[test]
fn ocs_one_spine_two_leaf_and_several_spines() {
    let t = topo(8, 4, 2, 2);
    // 3 servers: odd, so no two-leaf; 6 ports fit one spine (8 ports).
    let mut p = OcsVclosPlacer::new(t.clone());
    let d = placed(p.place(&req("a", 6)).unwrap());
    assert_eq!(d.stage, Stage::OcsSpine);
    assert_eq!(d.vclos.spines.len(), 1);
    assert_eq!(d.vclos.links.len(), 6);
    assert!(d
        .vclos
        .links
        .iter()
        .all(|k| k.peer == d.vclos.spines[0] && k.via.is_some()));
    assert!(!d.vclos.cross_connects.is_empty());
    check_shape(&d);
    // 4 servers: two leaves x 2, joined through the OCS.
    let d = placed(p.place(&req("b", 8)).unwrap());
    assert_eq!(
        (d.stage, d.vclos.leaves.len(), d.vclos.links.len()),
        (Stage::OcsTwoLeaf, 2, 4)
    );
    check_shape(&d);
    // 6 servers: neither fits; several spines (3 leaves x 4 slots of 3
    // ports). The uniform patches form that slice over all 4 spines, but
    // rewiring packs 2 slots per spine (8 ports each): 2 spines stay idle.
    let mut p = OcsVclosPlacer::new(t);
    let d = placed(p.place(&req("c", 12)).unwrap());
    assert_eq!(d.stage, Stage::OcsVclos);
    assert_eq!(d.vclos.leaves.len(), 3);
    assert_eq!(d.vclos.spines.len(), 2);
    assert_eq!(d.vclos.links.len(), 12);
    assert!(!d.vclos.cross_connects.is_empty());
    check_shape(&d);
}

#[test]
fn ocs_stage3_packs_slots_onto_partly_used_spines_before_idle_ones() {
    // 8 leaves x 2 servers (T = 2), 4 spines of 8 ports, 2 OCS. A blocker
    // holds one port of spine 1. A 6-server job (3 virtual leaves x 4 slots
    // of 3 ports) fits 2 slots on any spine, spine 1 included: among equal
    // spines it must take the partly used one, so two spines stay whole.
    let t = topo(8, 4, 2, 2);
    let mut st = FabricState::new(t.clone());
    let last = *t.leaf(LeafId(7)).servers.last().unwrap();
    st.admit(&blocker(&st, "x", last, &[0])).unwrap();
    let mut p = OcsVclosPlacer::with_state(st);
    let c = placed(p.place(&req("c", 12)).unwrap());
    assert_eq!(c.stage, Stage::OcsVclos);
    assert_eq!(c.vclos.spines.len(), 2, "{:?}", c.vclos.spines);
    assert!(
        c.vclos.spines.contains(&"spine1".into()),
        "{:?}",
        c.vclos.spines
    );
    check_shape(&c);
    let st = p.state();
    let whole = (0..t.spines.len() as u32)
        .map(SpineId)
        .filter(|&m| st.free_spine_ports(m) as usize == t.spines[m.index()].ports.len())
        .count();
    assert_eq!(whole, 2);
}

#[test]
fn ocs_stage3_uses_as_few_spines_as_possible() {
    // As above, but four blockers (leaves 5-8) hold half of spine 1: it
    // takes only one 3-port slot. Best fit alone would start there and
    // spread the 4 slots over 3 spines; the job must take 2 whole spines,
    // since a job spread thinly keeps every spine it touches partly held.
    let t = topo(8, 4, 2, 2);
    let mut st = FabricState::new(t.clone());
    for n in 4..8 {
        let s = *t.leaf(LeafId(n)).servers.last().unwrap();
        st.admit(&blocker(&st, &format!("x{n}"), s, &[0])).unwrap();
    }
    assert_eq!(st.free_spine_ports(SpineId(0)), 4);
    let mut p = OcsVclosPlacer::with_state(st);
    let c = placed(p.place(&req("c", 12)).unwrap());
    assert_eq!(c.stage, Stage::OcsVclos);
    assert_eq!(c.vclos.spines.len(), 2, "{:?}", c.vclos.spines);
    assert!(
        !c.vclos.spines.contains(&"spine1".into()),
        "{:?}",
        c.vclos.spines
    );
    check_shape(&c);
}

#[test]
fn ocs_stage3_takes_the_leaf_set_that_leaves_the_fewest_servers_stranded() {
    // 10 leaves x 4 servers (T = 2), 8 spines, 2 OCS. Leaves 1-3 have 1, 2
    // and 2 idle servers, leaves 4-6 are idle, 7-10 busy. A 9-server job
    // (odd: no two-leaf stage) has two shapes. The paper's first, 3 virtual leaves
    // of 3 servers, fits only leaves 4-6 and would strand a server on
    // each; 9 virtual leaves of 1 server on leaves 1-4 use up every server
    // they touch, and leaves 5 and 6 stay whole for jobs that need whole
    // leaves (several module doc).
    let t = topo(10, 8, 2, 2);
    let mut st = FabricState::new(t.clone());
    let busy = [(0, 3), (1, 2), (2, 2), (6, 4), (7, 4), (8, 4), (9, 4)];
    for (n, busy) in busy {
        for &s in &t.leaf(LeafId(n)).servers[..busy] {
            st.admit(&blocker(&st, &format!("x{}", s.index()), s, &[]))
                .unwrap();
        }
    }
    let mut p = OcsVclosPlacer::with_state(st);
    let d = placed(p.place(&req("j", 18)).unwrap());
    assert_eq!(d.stage, Stage::OcsVclos);
    check_shape(&d);
    let st = p.state();
    let idle: Vec<u32> = (0..6).map(|n| st.idle_servers(LeafId(n))).collect();
    assert_eq!(idle, vec![0, 0, 0, 0, 4, 4], "{:?}", d.vclos.leaves);
    assert_eq!(d.vclos.leaves.len(), 4);
}

#[test]
fn ocs_stage3_hosts_several_virtual_leaves_on_one_leaf() {
    // 4 leaves x 2 servers (T = 2), 4 spines, 2 OCS. Leaves 3 and 4 are
    // busy, leaf 2 has one idle server: 3 idle servers on 2 leaves. A job
    // of 3 servers needs 3 virtual leaves of 1 server (s = 2): vClos (one
    // virtual leaf per leaf) is blocked; OCS-vClos gives leaf 1 two
    // virtual leaves with parallel links to each spine slot.
    let t = topo(4, 4, 2, 2);
    let mut st = FabricState::new(t.clone());
    let mut busy = vec![t.leaf(LeafId(1)).servers[0]];
    busy.extend(t.leaf(LeafId(2)).servers.iter().copied());
    busy.extend(t.leaf(LeafId(3)).servers.iter().copied());
    for (i, s) in busy.into_iter().enumerate() {
        st.admit(&blocker(&st, &format!("x{i}"), s, &[])).unwrap();
    }
    let mut v = VclosPlacer::with_state(st.clone());
    assert_eq!(
        v.place(&req("j", 6)).unwrap(),
        Outcome::Blocked(Blocked::Network)
    );
    let mut o = OcsVclosPlacer::with_state(st);
    let d = placed(o.place(&req("j", 6)).unwrap());
    assert_eq!(d.stage, Stage::OcsVclos);
    assert_eq!(d.gpus.len(), 6);
    assert_eq!(d.vclos.links.len(), 6);
    check_shape(&d);
    // Leaf 1 carries two virtual leaves: 4 routes, and for every spine it
    // has exactly twice the links leaf 2 has (one per virtual leaf).
    let per = |leaf: &str, spine: &str| {
        d.vclos
            .links
            .iter()
            .filter(|k| *k.leaf == *leaf && *k.peer == *spine)
            .count()
    };
    for sp in &d.vclos.spines {
        assert_eq!(per("leaf1", sp), 2 * per("leaf2", sp), "{d:#?}");
    }
}

/// States reached by random arrivals and departures under `policy`.
fn random_walk(policy: Policy, seed: u64, visit: impl FnMut(&FabricState, &JobRequest)) {
    random_walk_on(topo(8, 8, 2, 2), policy, seed, visit)
}

pub(super) fn random_walk_on(
    t: Arc<Topology>,
    policy: Policy,
    seed: u64,
    mut visit: impl FnMut(&FabricState, &JobRequest),
) {
    let mut p = super::placer(policy, t).unwrap();
    let mut rng = Rng(seed);
    let mut running: Vec<JobId> = Vec::new();
    for step in 0..300 {
        if !running.is_empty() && rng.below(3) == 0 {
            let j = running.swap_remove(rng.below(running.len() as u64) as usize);
            p.release(&j).unwrap();
            continue;
        }
        let gpus = [1, 2, 3, 4, 6, 8, 10, 12, 16, 24][rng.below(10) as usize];
        if gpus as usize > p.fabric().unwrap().topology().gpu_count() {
            continue;
        }
        let job = req(&format!("w{step}"), gpus);
        visit(p.fabric().unwrap(), &job);
        if let Outcome::Placed(_) = p.place(&job).unwrap() {
            running.push(job.id);
        }
    }
}

#[test]
fn ocs_vclos_places_whatever_vclos_places() {
    // On every reachable state (under either policy), a job vClos can
    // place, OCS-vClos can place too: the OCS can keep the uniform patches.
    let mut checked = 0;
    for (policy, seed) in [
        (Policy::Vclos, 7),
        (Policy::OcsVclos, 11),
        (Policy::OcsVclos, 13),
    ] {
        random_walk(policy, seed, |st, job| {
            let mut v = VclosPlacer::with_state(st.clone());
            if let Outcome::Placed(vd) = v.place(job).unwrap() {
                let mut o = OcsVclosPlacer::with_state(st.clone());
                let od = placed(o.place(job).unwrap());
                check_shape(&od);
                if vd.touches_network() {
                    checked += 1;
                }
            }
        });
    }
    assert!(checked > 30, "only {checked} network placements checked");
}

#[test]
fn the_counting_bound_places_whatever_ocs_vclos_places() {
    // `bound::CountingPlacer` only drops constraints, so on every state
    // OCS-vClos reaches it places every job OCS-vClos places, and it
    // releases exactly the spine ports the state's jobs hold.
    let mut checked = 0;
    for seed in [17, 19] {
        random_walk(Policy::OcsVclos, seed, |st, job| {
            let mut o = OcsVclosPlacer::with_state(st.clone());
            let mut b = bound::CountingPlacer::with_state(st.clone());
            let relaxed = matches!(b.place(job).unwrap(), Outcome::Placed(_));
            match o.place(job).unwrap() {
                Outcome::Placed(d) => {
                    assert!(relaxed, "{d:#?}");
                    checked += u32::from(d.touches_network());
                }
                Outcome::Blocked(_) => {}
            }
            for d in st.decisions() {
                b.release(&d.job).unwrap();
            }
            b.release(&job.id).ok();
            let ports: usize = st.topology().spines.iter().map(|s| s.ports.len()).sum();
            assert_eq!(b.free.iter().sum::<u32>() as usize, ports);
        });
    }
    assert!(checked > 30, "only {checked} network placements checked");
}

#[test]
fn ocs_vclos_never_splits_a_job_that_fits_one_leaf() {
    let mut local_cases = 0;
    random_walk(Policy::OcsVclos, 5, |st, job| {
        let per = u32::from(st.topology().gpus_per_server);
        let k = local::servers_needed(job.gpus, per);
        let fits_leaf = k > 0 && local::stage1(st, Grain::Servers, k).is_some();
        let fits_server = k == 0 && local::stage0(st, job.gpus).is_some();
        if fits_leaf || fits_server {
            local_cases += 1;
            let mut o = OcsVclosPlacer::with_state(st.clone());
            let d = placed(o.place(job).unwrap());
            assert!(!d.touches_network(), "{d:#?}");
            let want = if fits_leaf {
                Stage::Leaf
            } else {
                Stage::Server
            };
            assert_eq!(d.stage, want);
        }
    });
    assert!(local_cases > 50);
}

#[test]
fn ocs_rewires_idle_ports_only() {
    // Running jobs hold links through the OCS; a new job needing rewiring
    // must leave every held port and its patch exactly as it was.
    let t = topo(8, 4, 2, 2);
    let mut p = OcsVclosPlacer::new(t.clone());
    let mut running = Vec::new();
    for (i, n) in [6u32, 8, 4, 6, 2].iter().enumerate() {
        if let Outcome::Placed(d) = p.place(&req(&format!("r{i}"), *n)).unwrap() {
            running.push(d);
        }
    }
    assert!(running.iter().any(|d| d.touches_network()));
    let before = p.state().clone();
    let out = p.place(&req("new", 4)).unwrap();
    let after = p.state();
    for o in 0..t.ocs.len() {
        let oid = crate::topology::OcsId(o as u32);
        for port in 0..t.ocs[o].ports.len() as u16 {
            if before.ocs_port_holder(oid, port).is_some() {
                assert_eq!(before.patch(oid, port), after.patch(oid, port));
                assert_eq!(
                    before.ocs_port_holder(oid, port),
                    after.ocs_port_holder(oid, port)
                );
            }
        }
    }
    if let Outcome::Placed(d) = out {
        for c in &d.vclos.cross_connects {
            let oid = t.ocs_id(&c.ocs).unwrap();
            for port in [&c.a, &c.b] {
                let i = t.ocs[oid.index()]
                    .ports
                    .iter()
                    .position(|x| x == port)
                    .unwrap();
                assert!(before.ocs_port_holder(oid, i as u16).is_none());
            }
        }
    }
}

fn subsets(n: usize, k: usize) -> Vec<Vec<usize>> {
    (0u32..1 << n)
        .filter(|m| m.count_ones() as usize == k)
        .map(|m| (0..n).filter(|i| m >> i & 1 == 1).collect())
        .collect()
}

/// Brute force, straight from the state: is there an l x s virtual Clos?
fn brute_exists(st: &FabricState, l: usize, s: usize) -> bool {
    let topo = st.topology();
    let t = topo.gpus_per_server as usize;
    let mut unused = HashSet::new();
    for (li, leaf) in topo.leaves.iter().enumerate() {
        let lid = LeafId(li as u32);
        for u in 0..leaf.uplinks.len() as u16 {
            if let Some((PortRef::Spine(m, p), via)) = st.uplink_far_end(lid, u) {
                let idle =
                    via.is_none_or(|(o, a, b)| st.ocs_port_idle(o, a) && st.ocs_port_idle(o, b));
                if st.uplink_free(lid, u) && st.spine_port_free(m, p) && idle {
                    unused.insert((li, m.index()));
                }
            }
        }
    }
    let leaves: Vec<usize> = (0..topo.leaves.len())
        .filter(|&n| st.idle_servers(LeafId(n as u32)) as usize >= s / t)
        .collect();
    subsets(leaves.len(), l).iter().any(|ls| {
        subsets(topo.spines.len(), s).iter().any(|ss| {
            ls.iter()
                .all(|&i| ss.iter().all(|&m| unused.contains(&(leaves[i], m))))
        })
    })
}

#[test]
fn stage2_solver_matches_brute_force_on_random_fabrics() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut cases, mut feasible) = (0, 0);
    for round in 0..240 {
        let leaves = 3 + rng.below(3) as u32;
        let spines = [4u32, 6, 8][rng.below(3) as usize];
        let ocs = if round % 3 == 0 && leaves.is_multiple_of(2) && spines.is_multiple_of(2) {
            2
        } else {
            0
        };
        let t = topo(leaves, spines, 2, ocs);
        let mut st = FabricState::new(t.clone());
        // Random blockers: some servers busy, some with links held.
        for (i, srv) in (0..t.servers.len()).enumerate() {
            match rng.below(4) {
                0 => {
                    let mut sp: Vec<usize> = (0..spines as usize).collect();
                    let k = rng.below(3) as usize;
                    let picks: Vec<usize> = (0..k)
                        .map(|_| sp.remove(rng.below(sp.len() as u64) as usize))
                        .collect();
                    let d = blocker(&st, &format!("b{i}"), ServerId(srv as u32), &picks);
                    st.admit(&d).unwrap();
                }
                1 if rng.below(2) == 0 => {
                    st.admit(&blocker(&st, &format!("b{i}"), ServerId(srv as u32), &[]))
                        .unwrap();
                }
                _ => {}
            }
        }
        let view = LinkView::new(&st);
        for l in 2..=leaves as usize {
            for s in (2..=spines as usize).step_by(2) {
                let want = brute_exists(&st, l, s);
                let got =
                    vclos::find_slice(&st, Grain::Servers, &view, (l, s), 50, u64::MAX).unwrap();
                cases += 1;
                assert_eq!(got.is_some(), want, "round {round} l={l} s={s}");
                if let Some(plan) = got {
                    feasible += 1;
                    let d = plan.to_decision(&t, &JobId::new("probe").unwrap());
                    assert_eq!((d.vclos.leaves.len(), d.vclos.spines.len()), (l, s));
                    check_shape(&d);
                    st.clone().admit(&d).unwrap();
                }
            }
        }
    }
    assert!(
        cases > 1000 && feasible > 100,
        "cases {cases}, feasible {feasible}"
    );
}

#[test]
fn sr_shares_links_and_best_ignores_the_network() {
    let t = topo(4, 8, 2, 0);
    let mut sr = SrPlacer::new(t.clone());
    // 5 servers each: a on leaf1 (4) + leaf2 (1), b on leaf2 (3) + leaf3 (2).
    let a = placed(sr.place(&req("a", 10)).unwrap());
    let b = placed(sr.place(&req("b", 10)).unwrap());
    assert!(a.touches_network() && b.touches_network());
    let links = |d: &Decision| -> HashSet<(Name, Name)> {
        d.vclos
            .links
            .iter()
            .map(|k| (k.leaf.clone(), k.uplink.clone()))
            .collect()
    };
    assert_eq!(a.vclos.links.len(), 2 * 8);
    assert!(
        !links(&a).is_disjoint(&links(&b)),
        "jobs on one leaf share its links"
    );
    check_shape(&a);
    assert_eq!(sr.release(&a.job).unwrap(), a);
    let mut best = BestPlacer::new(t);
    let d = placed(best.place(&req("a", 10)).unwrap());
    assert_eq!((d.gpus.len(), d.touches_network()), (10, false));
}

#[test]
fn constructor_and_errors() {
    for p in Policy::ALL {
        assert_eq!(p.to_string().parse::<Policy>().unwrap(), p);
    }
    assert!("wcmp"
        .parse::<Policy>()
        .unwrap_err()
        .to_string()
        .contains("wcmp"));
    let plain = topo(2, 4, 2, 0);
    let e = placer(Policy::OcsVclos, plain.clone()).err().unwrap();
    assert!(matches!(e, PlacementError::NoOcs { .. }));
    let mut p = placer(Policy::Vclos, plain).unwrap();
    assert_eq!(p.name(), "vclos");
    assert!(matches!(
        p.place(&req("z", 0)),
        Err(PlacementError::Empty(_))
    ));
    assert!(matches!(
        p.place(&req("z", 99)),
        Err(PlacementError::TooLarge { total: 8, .. })
    ));
    placed(p.place(&req("z", 2)).unwrap());
    assert!(matches!(
        p.place(&req("z", 2)),
        Err(PlacementError::DuplicateJob(_))
    ));
    assert!(matches!(
        p.release(&JobId::new("nope").unwrap()),
        Err(PlacementError::UnknownJob(_))
    ));
    assert_eq!(
        placer(Policy::OcsVclos, topo(2, 4, 2, 2)).unwrap().name(),
        "ocs-vclos"
    );
}

/// The Stage 3 instance for `s`-port virtual leaves, straight from the state: every
/// leaf and spine, idle OCS ports counted per OCS, free direct cables.
fn stage3_problem(st: &FabricState, s: u32) -> super::stage3::Problem {
    let topo = st.topology();
    let t = u32::from(topo.gpus_per_server);
    let view = super::view::OcsView::new(st);
    let (nl, ns) = (topo.leaves.len() as u32, topo.spines.len() as u32);
    let caps = |len: &dyn Fn(usize) -> usize| (0..view.k).map(|o| len(o) as u32).collect();
    super::stage3::Problem {
        leaf_max: (0..nl)
            .map(|n| st.idle_servers(LeafId(n)) / (s / t))
            .collect(),
        leaf_cap: (0..nl)
            .map(|n| caps(&|o| view.leaf_on(LeafId(n), o).len()))
            .collect(),
        spine_cap: (0..ns)
            .map(|m| caps(&|o| view.spine_on(SpineId(m), o).len()))
            .collect(),
        direct: (0..nl)
            .map(|n| {
                (0..ns)
                    .map(|m| view.direct_count(LeafId(n), SpineId(m)) as u32)
                    .collect()
            })
            .collect(),
    }
}

#[test]
fn ocs_vclos_blocks_for_the_network_only_when_brute_force_finds_no_slice() {
    // Small enough for exhaustive search: 4 leaves x 2 servers x 2 GPUs,
    // 4 spines, 2 OCS. On every state of several random walks, a job
    // OCS-vClos blocks for the network has no Stage 3 slice of any shape.
    let (mut blocked, mut multi_leaf) = (0, 0);
    for seed in 1..=40 {
        random_walk_on(topo(6, 6, 2, 3), Policy::OcsVclos, seed, |st, job| {
            let mut p = OcsVclosPlacer::with_state(st.clone());
            let t = u32::from(st.topology().gpus_per_server);
            let k = local::servers_needed(job.gpus, t);
            if let Outcome::Placed(d) = p.place(job).unwrap() {
                multi_leaf += u32::from(d.vclos.leaves.len() > 1);
                return;
            }
            if Grain::Servers.free_total(st) < k || local::stage1(st, Grain::Servers, k).is_some() {
                return;
            }
            blocked += 1;
            for (l, s) in shapes(k, t, 6 * 6 / t, 6) {
                let prob = stage3_problem(st, s);
                assert!(
                    !super::stage3::tests::brute(&prob, l, s),
                    "job {} ({} GPUs) blocked, but shape {l}x{s} has a slice: {prob:?}",
                    job.id,
                    job.gpus
                );
            }
        });
    }
    assert!(blocked > 0, "no network-blocked state was visited");
    assert!(multi_leaf > 0, "no multi-leaf slice was placed");
}

// ---- Sizes: rounding up to a slice shape (issue 13, `sizing`) ----

fn testbed() -> Arc<Topology> {
    let text = include_str!("../../../topologies/testbed.yaml");
    Arc::new(crate::topology::from_str("testbed.yaml", text).unwrap())
}

fn idle_gpus(st: &FabricState) -> u32 {
    (0..st.topology().servers.len() as u32)
        .map(|s| u32::from(st.free_gpus(ServerId(s))))
        .sum()
}

#[test]
fn a_size_with_no_slice_shape_is_placed_in_the_smallest_larger_one() {
    // testbed: 2 leaves x 4 servers x 4 GPUs. 20 GPUs = 5 servers: more
    // than a leaf holds, and 5 does not split evenly over 2 leaves.
    let mut p = VclosPlacer::new(testbed());
    let d = placed(p.place(&req("wide", 20)).unwrap());
    assert_eq!(d.stage, Stage::Vclos);
    assert_eq!(d.requested_gpus, Some(20));
    assert_eq!(d.gpus.len(), 24, "6 servers, 3 under each leaf");
    assert_eq!(d.reserved_idle_gpus(), 4);
    // The state holds all of them: the slice's ports are the job's.
    assert_eq!(idle_gpus(p.state()), 32 - 24);
    // A size with a shape of its own is not rounded.
    let d = placed(p.place(&req("two", 8)).unwrap());
    assert_eq!((d.gpus.len(), d.reserved_idle_gpus()), (8, 0));
}

#[test]
fn a_size_no_shape_covers_even_on_the_empty_fabric_is_refused_not_blocked() {
    // 3 leaves x 2 servers x 4 GPUs, 4 spines: a virtual leaf has at most 4
    // uplinks, so one server each, and at most 3 leaves: 4, 5 and 6 servers
    // have no slice at all.
    let topo = crate::topology::generate::narrow_topology();
    let mut p = VclosPlacer::new(topo);
    let e = p.place(&req("big", 16)).unwrap_err();
    assert!(
        matches!(e, PlacementError::NoShape { gpus: 16, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("can never be placed"), "{e}");
    // Nothing was held, and 3 servers (one per leaf) still fit.
    assert_eq!(idle_gpus(p.state()), 24);
    let d = placed(p.place(&req("three", 12)).unwrap());
    assert_eq!(d.gpus.len(), 12);
}

#[test]
fn round_up_takes_a_larger_free_slice_only_when_allowed() {
    // Leave 2 idle servers under each leaf: 3 servers fit under no leaf
    // and split evenly over none, 4 (2 + 2) do.
    let fill = |p: &mut dyn Placer| {
        placed(p.place(&req("a", 8)).unwrap());
        placed(p.place(&req("b", 8)).unwrap());
        placed(p.place(&req("c", 8)).unwrap());
        p.release(&JobId::new("b").unwrap()).unwrap();
    };
    let mut strict = VclosPlacer::new(testbed());
    fill(&mut strict);
    assert_eq!(
        strict.place(&req("j", 12)).unwrap(),
        Outcome::Blocked(Blocked::Network)
    );
    let mut p = VclosPlacer::new(testbed()).with_options(SliceOptions {
        round_up: 1,
        ..SliceOptions::default()
    });
    fill(&mut p);
    let d = placed(p.place(&req("j", 12)).unwrap());
    assert_eq!((d.gpus.len(), d.requested_gpus), (16, Some(12)));
    assert_eq!(d.reserved_idle_gpus(), 4);
    assert_eq!(idle_gpus(p.state()), 0);
    // Released, everything it held is free again.
    p.release(&JobId::new("j").unwrap()).unwrap();
    assert_eq!(idle_gpus(p.state()), 16);
}

#[test]
fn every_policy_records_what_the_job_asked_for() {
    let topo = {
        let text = include_str!("../../../topologies/testbed-ocs.yaml");
        Arc::new(crate::topology::from_str("testbed-ocs.yaml", text).unwrap())
    };
    for policy in Policy::ALL {
        let mut p = placer(policy, Arc::clone(&topo)).unwrap();
        for (i, gpus) in [24, 3, 4].into_iter().enumerate() {
            let d = placed(p.place(&req(&format!("j{i}"), gpus)).unwrap());
            assert_eq!(d.requested_gpus, Some(gpus), "{policy}");
            assert!(d.gpus.len() as u32 >= gpus, "{policy}");
        }
    }
}

/// A fabric of `topo` where every server has exactly one GPU held (by a
/// one-GPU job), so no server is idle: whole-server placement is stuck.
fn one_gpu_per_server(topo: Arc<Topology>) -> FabricState {
    let mut st = FabricState::new(topo.clone());
    for i in 0..topo.servers.len() {
        let d = Decision {
            requested_gpus: None,
            sharing: None,
            job: JobId::new(format!("one{i}")).unwrap(),
            stage: Stage::Server,
            gpus: vec![GpuRef {
                server: topo.servers[i].name.clone(),
                gpu: 0,
            }],
            vclos: VirtualClos::default(),
            source_routes: vec![],
        };
        st.admit(&d).unwrap();
    }
    st
}

#[test]
fn grain_takes_partly_used_servers_with_most_free_first_then_idle_ones() {
    // 2 leaves x 2 servers x 4 GPUs (8 spines).
    let t = topo(2, 8, 4, 0);
    let mut st = FabricState::new(t.clone());
    let leaf = LeafId(0);
    let servers = &t.leaf(leaf).servers;
    // Server 0: 3 held (1 free); server 1: idle.
    let d = placed(
        VclosPlacer::with_state(st.clone())
            .place(&req("a", 3))
            .unwrap(),
    );
    st.admit(&d).unwrap();
    let s0 = t.server_id(&d.gpus[0].server).unwrap();
    assert_eq!(t.server(s0).leaf, leaf);
    assert_eq!(Grain::Gpus.free(&st, leaf), 5);
    assert_eq!(Grain::Servers.free(&st, leaf), 1);
    let got = Grain::Gpus.take(&st, leaf, 3);
    let other = *servers.iter().find(|&&s| s != s0).unwrap();
    assert_eq!(got[0].0, s0, "the partly used server first: {got:?}");
    assert!(got[1..].iter().all(|&(s, _)| s == other), "{got:?}");
    // Whole servers: only the idle one, all of its GPUs.
    let whole = Grain::Servers.take(&st, leaf, 1);
    assert_eq!(whole.len(), 4);
    assert!(whole.iter().all(|&(s, _)| s == other));
    // Sizes: 6 GPUs need 6 units of GPUs, or 2 whole servers.
    assert_eq!(Grain::Gpus.needed(&t, 6), 6);
    assert_eq!(Grain::Servers.needed(&t, 6), 2);
    assert_eq!(Grain::Gpus.needed(&t, 4), 0);
}

#[test]
fn partial_servers_place_what_whole_servers_cannot_with_a_full_slice() {
    // 8 leaves x 4 servers x 2 GPUs, 8 spines; one GPU of every server held.
    let t = topo(8, 8, 2, 0);
    let st = one_gpu_per_server(t.clone());
    let partial = SliceOptions {
        partial_servers: true,
        ..SliceOptions::default()
    };
    for policy in [Policy::Vclos, Policy::Best] {
        let mut whole = placer_on(policy, st.clone(), SliceOptions::default()).unwrap();
        assert_eq!(
            whole.place(&req("x", 8)).unwrap(),
            Outcome::Blocked(Blocked::Gpu),
            "{policy}"
        );
    }
    let mut p = placer_on(Policy::Vclos, st.clone(), partial).unwrap();
    // 4 GPUs: one leaf's four free GPUs (stage 1, no network).
    let d = placed(p.place(&req("leaf", 4)).unwrap());
    assert_eq!((d.stage, d.gpus.len()), (Stage::Leaf, 4));
    // 8 GPUs over 2 leaves x 4 spines: exactly 8 GPUs, no whole server.
    let d = placed(p.place(&req("x", 8)).unwrap());
    assert_eq!((d.stage, d.gpus.len()), (Stage::Vclos, 8));
    assert_eq!((d.vclos.leaves.len(), d.vclos.spines.len()), (2, 4));
    assert_eq!(d.source_routes.len(), 8, "one route per GPU");
    let ups: HashSet<_> = d
        .source_routes
        .iter()
        .map(|r| (&r.leaf, &r.uplink))
        .collect();
    assert_eq!(ups.len(), 8, "each GPU its own uplink");
    // A second one takes other leaves; the fabric state (which refuses any
    // shared port or link) admitted both.
    let e = placed(p.place(&req("y", 8)).unwrap());
    assert_eq!(e.stage, Stage::Vclos);
    assert!(e.vclos.leaves.iter().all(|l| !d.vclos.leaves.contains(l)));
    // Released, the state is the one before.
    for j in ["leaf", "x", "y"] {
        p.release(&JobId::new(j).unwrap()).unwrap();
    }
    assert!(p.fabric().unwrap().decisions().len() == st.decisions().len());
    // OCS-vClos too.
    let ot = topo(8, 8, 2, 2);
    let mut o = placer_on(Policy::OcsVclos, one_gpu_per_server(ot), partial).unwrap();
    let d = placed(o.place(&req("x", 8)).unwrap());
    assert_eq!(d.gpus.len(), 8);
    assert!(d.touches_network());
}

#[test]
fn partial_servers_keep_whole_server_slices_when_they_exist() {
    // On the empty fabric the decisions are the paper's: whole servers.
    let t = topo(8, 8, 2, 0);
    let partial = SliceOptions {
        partial_servers: true,
        ..SliceOptions::default()
    };
    let mut a = placer_on(Policy::Vclos, FabricState::new(t.clone()), partial).unwrap();
    let mut b = placer(Policy::Vclos, t).unwrap();
    for (i, n) in [3u32, 12, 20, 5, 16].into_iter().enumerate() {
        let j = req(&format!("j{i}"), n);
        assert_eq!(a.place(&j).unwrap(), b.place(&j).unwrap(), "job {i}");
    }
}

#[test]
fn partial_servers_are_refused_where_they_mean_nothing() {
    let partial = SliceOptions {
        partial_servers: true,
        ..SliceOptions::default()
    };
    for policy in Policy::ALL {
        let got = placer_on(policy, FabricState::new(topo(2, 8, 4, 2)), partial);
        match got {
            Ok(p) => assert!(policy.whole_servers(), "{}", p.name()),
            Err(e) => {
                assert!(!policy.whole_servers(), "{policy}: {e}");
                assert!(e.to_string().contains("--partial-servers"), "{e}");
            }
        }
    }
}

mod given_allocation {
    //! Admission of a scheduler's allocation ([`super::given`]).
    use super::*;
    use crate::placement::given::{self, Allocation, Given};

    fn names(t: &Topology, servers: &[ServerId]) -> Vec<String> {
        servers
            .iter()
            .map(|&s| t.server(s).name.to_string())
            .collect()
    }

    fn on(policy: Policy, st: &FabricState, gpus: u32, servers: &[ServerId]) -> Given {
        let alloc = Allocation::Servers(servers.to_vec());
        given::place_on(policy, st, SliceOptions::default(), &req("g", gpus), &alloc).unwrap()
    }

    fn on_gpus(policy: Policy, st: &FabricState, gpus: &[(ServerId, u16)]) -> Given {
        let alloc = Allocation::Gpus(gpus.to_vec());
        let n = gpus.len() as u32;
        given::place_on(policy, st, SliceOptions::default(), &req("g", n), &alloc).unwrap()
    }

    #[test]
    fn takes_exactly_the_named_servers_even_where_the_policy_would_not() {
        // 4 leaves x 4 servers x 2 GPUs, 8 spines.
        let t = topo(4, 8, 2, 0);
        let st = FabricState::new(t.clone());
        let (l0, l2) = (&t.leaf(LeafId(0)).servers, &t.leaf(LeafId(2)).servers);
        let chosen = [l0[1], l2[0], l0[2], l2[3]];
        // Left alone, vClos puts 4 servers under one leaf (Stage 1).
        let free = placed(
            VclosPlacer::with_state(st.clone())
                .place(&req("g", 8))
                .unwrap(),
        );
        assert_eq!(free.stage, Stage::Leaf);
        let Given::Placed(d) = on(Policy::Vclos, &st, 8, &chosen) else {
            panic!("refused")
        };
        let mut want = chosen.to_vec();
        want.sort_unstable();
        assert_eq!(given::decision_servers(&t, &d), want);
        assert_eq!(d.stage, Stage::Vclos);
        assert_eq!((d.vclos.leaves.len(), d.vclos.spines.len()), (2, 4));
        check_shape(&d);
        // The caller's state holds nothing; the decision admits into it.
        assert_eq!(st.job_count(), 0);
        let mut st2 = st.clone();
        st2.admit(&d).unwrap();
        // One server, and two servers under one leaf, are local stages.
        let Given::Placed(d) = on(Policy::Vclos, &st, 2, &[l2[1]]) else {
            panic!("refused")
        };
        assert_eq!(given::decision_servers(&t, &d), vec![l2[1]]);
        let Given::Placed(d) = on(
            Policy::OcsVclos,
            &FabricState::new(topo(4, 8, 2, 2)),
            3,
            &[l0[0], l0[3]],
        ) else {
            panic!("refused")
        };
        assert_eq!((d.stage, d.gpus.len()), (Stage::Leaf, 4));
    }

    #[test]
    fn uneven_leaves_are_refused_by_counting_with_a_set_that_fits() {
        let t = topo(4, 8, 2, 0);
        let st = FabricState::new(t.clone());
        let (l0, l1) = (&t.leaf(LeafId(0)).servers, &t.leaf(LeafId(1)).servers);
        let Given::Refused(r) = on(Policy::Vclos, &st, 6, &[l0[0], l0[1], l1[0]]) else {
            panic!("placed an uneven allocation")
        };
        assert!(r.why.contains("same number of servers"), "{}", r.why);
        assert!(
            r.why.contains("2 on `") && r.why.contains("1 on `"),
            "{}",
            r.why
        );
        // The nearby set keeps to the named leaves and is itself placeable.
        assert_eq!(r.suggested.len(), 3);
        assert!(r
            .suggested
            .iter()
            .all(|s| [LeafId(0), LeafId(1)].contains(&t.server(*s).leaf)));
        assert!(matches!(
            on(Policy::Vclos, &st, 6, &r.suggested),
            Given::Placed(_)
        ));
    }

    #[test]
    fn a_busy_server_is_refused_naming_its_holder() {
        let st = fragmented(0);
        let t = st.topology().clone();
        let busy = t.leaf(LeafId(0)).servers[0];
        let idle = t.leaf(LeafId(1)).servers[1];
        let Given::Refused(r) = on(Policy::Vclos, &st, 4, &[busy, idle]) else {
            panic!("placed on a busy server")
        };
        assert!(r.why.contains("held by job `a`"), "{}", r.why);
    }

    #[test]
    fn no_free_links_is_a_network_refusal_that_ocs_rewiring_can_lift() {
        // leaf1 and leaf2 each keep one idle server, their free links go
        // to disjoint spines (the `fragmented` fabric).
        let st = fragmented(0);
        let t = st.topology().clone();
        let pair = [t.leaf(LeafId(0)).servers[1], t.leaf(LeafId(1)).servers[1]];
        let Given::Refused(r) = on(Policy::Vclos, &st, 4, &pair) else {
            panic!("placed without links")
        };
        assert!(
            r.why.starts_with("no isolated slice joins leaves"),
            "{}",
            r.why
        );
        assert!(
            r.suggested.is_empty(),
            "nothing fits anywhere: {:?}",
            r.suggested
        );
        let st = fragmented(1);
        let Given::Placed(d) = on(Policy::OcsVclos, &st, 4, &pair) else {
            panic!("OCS-vClos refused")
        };
        assert_eq!(d.stage, Stage::OcsTwoLeaf);
    }

    #[test]
    fn bad_lists_name_the_entry() {
        let t = topo(4, 8, 2, 0);
        let st = FabricState::new(t.clone());
        let job = JobId::new("g").unwrap();
        let s = &t.leaf(LeafId(0)).servers;
        let err = |names: &[String]| given::resolve(&t, &job, names).unwrap_err().to_string();
        let mut list = names(&t, &[s[0], s[1]]);
        list.push("nope".into());
        assert!(
            err(&list).contains("servers[2]: `nope` is not a server"),
            "{}",
            err(&list)
        );
        let twice = names(&t, &[s[0], s[1], s[0]]);
        assert!(err(&twice).contains("servers[2]") && err(&twice).contains("also servers[0]"));
        assert!(err(&[]).contains("names 0 servers"));
        // 6 GPUs of T=2 take 3 servers, not 2.
        let e = given::place_on(
            Policy::Vclos,
            &st,
            SliceOptions::default(),
            &req("g", 6),
            &Allocation::Servers(vec![s[0], s[1]]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("take 3 whole server(s)") && e.contains("names 2"),
            "{e}"
        );
    }

    #[test]
    fn a_masked_view_refuses_a_decision_on_other_servers() {
        let t = topo(4, 8, 2, 0);
        let st = FabricState::new(t.clone());
        let s = &t.leaf(LeafId(0)).servers;
        let view = st.only_servers(&[s[0]]);
        assert_eq!(
            (view.idle_servers(LeafId(0)), view.leaf_free_gpus(LeafId(1))),
            (1, 0)
        );
        let d = placed(
            VclosPlacer::with_state(st.clone())
                .place(&req("x", 2))
                .unwrap(),
        );
        let on_other = if given::decision_servers(&t, &d) == vec![s[0]] {
            placed(
                VclosPlacer::with_state(st.only_servers(&[s[1]]))
                    .place(&req("x", 2))
                    .unwrap(),
            )
        } else {
            d
        };
        let e = view.clone().admit(&on_other).unwrap_err().to_string();
        assert!(e.contains("not one of the servers this job may use"), "{e}");
    }

    #[test]
    fn named_gpus_are_placed_exactly_on_partly_used_servers() {
        // 4 leaves x 4 servers x 2 GPUs; server 0 of leaf 0 half busy.
        let t = topo(4, 8, 2, 0);
        let mut st = FabricState::new(t.clone());
        let (l0, l1) = (&t.leaf(LeafId(0)).servers, &t.leaf(LeafId(1)).servers);
        let busy = placed(
            VclosPlacer::with_state(st.only_gpus(&[(l0[0], 0)]))
                .place(&req("b", 1))
                .unwrap(),
        );
        st.admit(&busy).unwrap();
        // GPU 1 of the half-used server and one of another server under
        // leaf 0; a whole server under leaf 1.
        let named = [(l0[0], 1), (l0[3], 0), (l1[2], 0), (l1[2], 1)];
        let Given::Placed(d) = on_gpus(Policy::Vclos, &st, &named) else {
            panic!("refused")
        };
        let mut held: Vec<(ServerId, u16)> = (d.gpus.iter())
            .map(|g| (t.server_id(&g.server).unwrap(), g.gpu))
            .collect();
        held.sort_unstable();
        let mut want = named.to_vec();
        want.sort_unstable();
        assert_eq!(held, want);
        assert_eq!(
            (d.stage, d.vclos.leaves.len(), d.vclos.spines.len()),
            (Stage::Vclos, 2, 2)
        );
        check_shape(&d);
        st.clone().admit(&d).unwrap();
        // A busy GPU is refused naming its holder; so is an uneven set.
        let Given::Refused(r) = on_gpus(
            Policy::Vclos,
            &st,
            &[(l0[0], 0), (l0[0], 1), (l1[0], 0), (l1[0], 1)],
        ) else {
            panic!("placed on a busy GPU")
        };
        assert!(
            r.why.contains("GPU 0 of server") && r.why.contains("held by job `b`"),
            "{}",
            r.why
        );
        let Given::Refused(r) = on_gpus(
            Policy::Vclos,
            &st,
            &[(l0[1], 0), (l0[1], 1), (l0[2], 0), (l1[0], 0)],
        ) else {
            panic!("placed an uneven set")
        };
        assert!(r.why.contains("same number of GPUs"), "{}", r.why);
        // Names: out-of-range and repeated GPUs name the entry.
        let job = JobId::new("g").unwrap();
        let name = t.server(l0[1]).name.to_string();
        let map = |g: Vec<u16>| std::collections::BTreeMap::from([(name.clone(), g)]);
        let e = given::resolve_gpus(&t, &job, &map(vec![0, 2]))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("gpus_on.{name}[1]: GPU 2")), "{e}");
        let e = given::resolve_gpus(&t, &job, &map(vec![1, 1]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("named twice"), "{e}");
        // Policies without the partial-server grain refuse GPUs by name.
        let e = given::place_on(
            Policy::Titan,
            &st,
            SliceOptions::default(),
            &req("g", 1),
            &Allocation::Gpus(vec![(l1[1], 0)]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("name whole servers"), "{e}");
        // A job of at most T GPUs lives in one server.
        let alloc = Allocation::Gpus(vec![(l1[1], 0), (l1[3], 0)]);
        let e = given::place_on(
            Policy::Vclos,
            &st,
            SliceOptions::default(),
            &req("g", 2),
            &alloc,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("lives in one server"), "{e}");
    }
}

#[test]
fn ocs_view_lists_every_usable_port_by_switch_and_ocs() {
    // The flat view against the rule it encodes, port by port, on a
    // fabric some OCS-vClos jobs hold parts of.
    let t = topo(4, 8, 2, 2);
    let mut p = OcsVclosPlacer::new(t.clone());
    for (i, gpus) in [6, 4, 10, 2].into_iter().enumerate() {
        p.place(&req(&format!("j{i}"), gpus)).unwrap();
    }
    let st = p.state();
    let view = super::view::OcsView::new(st);
    let mut held = 0;
    for (li, leaf) in t.leaves.iter().enumerate() {
        let n = LeafId(li as u32);
        for o in 0..view.k {
            let want: Vec<(u16, u16)> = (0..leaf.uplinks.len() as u16)
                .filter_map(|u| match leaf.uplink_peer[u as usize] {
                    Some(PortRef::Ocs(oc, a)) if oc.index() == o => Some((u, a)),
                    _ => None,
                })
                .filter(|&(u, a)| {
                    let free = st.uplink_free(n, u) && st.ocs_port_idle(super::view::ocs_id(o), a);
                    held += usize::from(!free);
                    free
                })
                .collect();
            assert_eq!(view.leaf_on(n, o), &want[..], "leaf {li} ocs {o}");
        }
    }
    assert!(
        held > 0,
        "no port held: the test would not see a wrong filter"
    );
    for (si, spine) in t.spines.iter().enumerate() {
        let m = SpineId(si as u32);
        for o in 0..view.k {
            let want: Vec<(u16, u16)> = (0..spine.ports.len() as u16)
                .filter_map(|q| match spine.port_peer[q as usize] {
                    Some(PortRef::Ocs(oc, b)) if oc.index() == o => Some((q, b)),
                    _ => None,
                })
                .filter(|&(q, b)| {
                    st.spine_port_free(m, q) && st.ocs_port_idle(super::view::ocs_id(o), b)
                })
                .collect();
            assert_eq!(view.spine_on(m, o), &want[..], "spine {si} ocs {o}");
        }
    }
}

#[test]
fn a_decision_lists_each_leaf_s_server_ports_in_gpu_order() {
    // GPUs of two leaves interleaved, leaves listed in the other order:
    // the one-pass grouping must give what the per-leaf scan gives.
    let t = topo(2, 4, 2, 0);
    let (a, b) = (t.leaf(LeafId(0)).servers[1], t.leaf(LeafId(1)).servers[0]);
    let mut plan = plan::Plan::local(Stage::Vclos, vec![(b, 1), (a, 0), (b, 0), (a, 1)]);
    plan.leaves = vec![LeafId(1), LeafId(0)];
    let d = plan.to_decision(&t, &"j".parse().unwrap());
    for (v, &n) in d.vclos.leaves.iter().zip(&plan.leaves) {
        let want: Vec<Name> = plan
            .server_ports(&t, n)
            .into_iter()
            .map(|p| t.leaf(n).server_ports[p as usize].clone())
            .collect();
        assert_eq!(v.server_ports, want);
        assert_eq!(v.server_ports.len(), 2);
    }
    let st = FabricState::new(t.clone());
    let ports = plan.resources(&st).server_ports;
    let lay = st.layout();
    let want: Vec<usize> = plan
        .leaves
        .iter()
        .flat_map(|&n| {
            plan.server_ports(&t, n)
                .into_iter()
                .map(move |p| lay.server_port(n, p))
        })
        .collect();
    assert_eq!(ports, want);
}

/// `release_shared` hands back the decision the placer held, not a copy
/// (a replay's audit may hold it too), for every policy: the same
/// allocation where the placer keeps its decisions, an equal one where it
/// does not; and it frees what `release` frees.
#[test]
fn release_shared_returns_the_held_decision() {
    let t = topo(4, 4, 2, 2);
    for policy in [Policy::Vclos, Policy::OcsVclos, Policy::Best, Policy::Sr] {
        let mut p = placer(policy, std::sync::Arc::clone(&t)).unwrap();
        let Outcome::Placed(d) = p.place(&req("a", 6)).unwrap() else {
            panic!("{policy:?}: blocked")
        };
        let back = p.release_shared(&d.job).unwrap();
        assert_eq!(back, d, "{policy:?}");
        if matches!(policy, Policy::Vclos | Policy::OcsVclos) {
            assert!(std::sync::Arc::ptr_eq(&back, &d), "{policy:?}: a copy");
        }
        assert!(
            p.release_shared(&d.job).is_err(),
            "{policy:?}: released twice"
        );
        assert!(matches!(p.place(&req("b", 6)).unwrap(), Outcome::Placed(_)));
    }
}
