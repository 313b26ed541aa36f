//! Verification catches deliberately broken configurations.

use std::sync::Arc;

use super::*;
use crate::decision::Decision;
use crate::topology::{self, generate, OcsId};

/// 4 leaves x 4 spines, 2 GPUs per server, 2 servers per leaf, 2 OCS.
fn fabric() -> Topology {
    let p = generate::Params {
        name: "v".into(),
        leaves: 4,
        spines: 4,
        gpus_per_server: 2,
        servers_per_leaf: Some(2),
        ocs: 2,
        allow_oversubscription: true,
    };
    topology::from_str("v.yaml", &generate::generate(&p).unwrap()).unwrap()
}

/// Uplink of `leaf` currently reaching `spine`.
fn uplink_to(t: &Topology, fwd: &ForwardingState, leaf: LeafId, spine: SpineId) -> u16 {
    (0..t.leaf(leaf).uplinks.len() as u16)
        .find(|&u| matches!(fwd.far_end(t, PortRef::Leaf(leaf, u)), Ok(PortRef::Spine(s, _)) if s == spine))
        .unwrap()
}

fn spine_port_to(t: &Topology, fwd: &ForwardingState, spine: SpineId, leaf: LeafId) -> u16 {
    (0..t.spine(spine).ports.len() as u16)
        .find(|&p| matches!(fwd.far_end(t, PortRef::Spine(spine, p)), Ok(PortRef::Leaf(l, _)) if l == leaf))
        .unwrap()
}

/// Install a vClos for a job: the first server of each leaf, GPU k of each
/// routed to spine k, one VRF per spine binding the ports toward the leaves.
fn install(
    t: &Topology,
    fwd: &mut ForwardingState,
    name: &str,
    leaves: &[u32],
    spines: &[u32],
) -> JobView {
    install_on(t, fwd, name, 0, leaves, spines)
}

/// [`install`] on server number `server` of each leaf.
fn install_on(
    t: &Topology,
    fwd: &mut ForwardingState,
    name: &str,
    server: usize,
    leaves: &[u32],
    spines: &[u32],
) -> JobView {
    let mut gpus = Vec::new();
    let mut allowed = BTreeSet::new();
    for &l in leaves {
        let leaf = LeafId(l);
        let server = t.leaf(leaf).servers[server];
        for (k, &s) in spines.iter().enumerate() {
            let g = GpuPort::of(t, server, k as u16).unwrap();
            let up = uplink_to(t, fwd, leaf, SpineId(s));
            fwd.set_redirect(leaf, g.port, up);
            allowed.insert(PortRef::Leaf(leaf, up));
            gpus.push(g);
        }
    }
    for &s in spines {
        let spine = SpineId(s);
        let mut vrf = Vrf {
            name: format!("{name}-{}", t.spine(spine).name),
            ..Default::default()
        };
        for &l in leaves {
            let p = spine_port_to(t, fwd, spine, LeafId(l));
            vrf.ports.insert(p);
            vrf.routes.insert((LeafId(l), None), p);
            allowed.insert(PortRef::Spine(spine, p));
        }
        fwd.add_vrf(spine, vrf);
    }
    JobView {
        name: name.into(),
        gpus,
        allowed: Some(allowed),
        shared: BTreeMap::new(),
    }
}

fn two_jobs() -> (Topology, ForwardingState, Vec<JobView>) {
    let t = fabric();
    let mut fwd = ForwardingState::with_initial_patches(&t);
    let a = install(&t, &mut fwd, "a", &[0, 1], &[0, 1]);
    let b = install(&t, &mut fwd, "b", &[2, 3], &[0, 1]);
    (t, fwd, vec![a, b])
}

fn all_violations(r: &[Report]) -> String {
    r.iter()
        .flat_map(|r| r.violations.iter().map(move |v| format!("{}: {v}", r.job)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_correct_vclos_verifies_clean() {
    let (t, fwd, jobs) = two_jobs();
    let r = verify(&t, &fwd, &jobs);
    assert!(r.iter().all(Report::ok), "{}", all_violations(&r));
    assert_eq!(r[0].flows, 4 * 3);
}

#[test]
fn a_swapped_redirect_is_caught() {
    let (t, mut fwd, jobs) = two_jobs();
    // Job a's first GPU on leaf1 now goes out of the uplink toward spine3,
    // which is in no job's virtual Clos.
    let g = jobs[0].gpus[0];
    let wrong = uplink_to(&t, &fwd, g.leaf, SpineId(2));
    fwd.set_redirect(g.leaf, g.port, wrong);
    let r = verify(&t, &fwd, &jobs);
    let v = all_violations(&r);
    assert!(
        v.contains("a: srv1-1/gpu0 -> srv2-1/gpu0 unreachable") && v.contains("is bound to no VRF"),
        "{v}"
    );
    assert!(v.contains("leaves the job's virtual Clos at leaf1:"), "{v}");
    assert!(r[1].ok(), "job b is unaffected: {v}");
}

#[test]
fn a_redirect_onto_the_other_uplink_of_the_job_causes_contention() {
    let (t, mut fwd, jobs) = two_jobs();
    // Both GPUs of leaf1 now use the uplink toward spine2: still reachable,
    // but a permutation step puts two flows on one link.
    let (g0, g1) = (jobs[0].gpus[0], jobs[0].gpus[1]);
    fwd.set_redirect(g0.leaf, g0.port, fwd.redirect(g1.leaf, g1.port).unwrap());
    let v = all_violations(&verify(&t, &fwd, &jobs));
    assert!(
        v.contains("pair-wise all-to-all step") && v.contains("2 flows on the link out of leaf1:"),
        "{v}"
    );
    assert!(!v.contains("unreachable"), "{v}");
}

#[test]
fn a_vrf_binding_another_jobs_port_is_caught() {
    let (t, mut fwd, jobs) = two_jobs();
    let spine = SpineId(0);
    let theirs = spine_port_to(&t, &fwd, spine, LeafId(2)); // job b's port toward leaf3
    fwd.vrfs_mut(spine)[0].ports.insert(theirs); // job a's VRF on spine1 binds it
    let v = all_violations(&verify(&t, &fwd, &jobs));
    assert!(
        v.contains("is bound to several VRFs (a-spine1, b-spine1)"),
        "{v}"
    );
}

#[test]
fn an_ocs_patch_to_the_wrong_spine_is_caught() {
    let (t, mut fwd, jobs) = two_jobs();
    // Re-patch the OCS port behind leaf1's uplink toward spine1 to the OCS
    // port of spine3 on the same OCS.
    let g = jobs[0].gpus[0];
    let up = fwd.redirect(g.leaf, g.port).unwrap();
    let Some(PortRef::Ocs(o, leaf_side)) = t.peer(PortRef::Leaf(g.leaf, up)) else {
        panic!("not via OCS")
    };
    let spine3_side = (0..t.ocs_dev(o).ports.len() as u16)
        .find(|&p| matches!(t.peer(PortRef::Ocs(o, p)), Some(PortRef::Spine(s, _)) if s == SpineId(2)))
        .unwrap();
    let mut table: Vec<(u16, u16)> = t
        .ocs_dev(o)
        .patches
        .iter()
        .copied()
        .filter(|&(a, b)| ![a, b].contains(&leaf_side) && ![a, b].contains(&spine3_side))
        .collect();
    table.push((leaf_side, spine3_side));
    fwd.set_patches(o, table);
    let v = all_violations(&verify(&t, &fwd, &jobs));
    assert!(
        v.contains("srv1-1/gpu0 -> srv2-1/gpu0 unreachable: spine3:")
            && v.contains("bound to no VRF"),
        "{v}"
    );
    assert_eq!(o, OcsId(o.0));
}

#[test]
fn a_dark_ocs_port_is_caught() {
    let (t, mut fwd, jobs) = two_jobs();
    let g = jobs[0].gpus[0];
    let up = fwd.redirect(g.leaf, g.port).unwrap();
    let Some(PortRef::Ocs(o, leaf_side)) = t.peer(PortRef::Leaf(g.leaf, up)) else {
        panic!("not via OCS")
    };
    let table: Vec<(u16, u16)> = t
        .ocs_dev(o)
        .patches
        .iter()
        .copied()
        .filter(|&(a, b)| a != leaf_side && b != leaf_side)
        .collect();
    fwd.set_patches(o, table);
    let v = all_violations(&verify(&t, &fwd, &jobs));
    assert!(v.contains("is dark (unpatched)"), "{v}");
}

#[test]
fn links_shared_between_jobs_are_reported_for_both() {
    let t = fabric();
    let mut fwd = ForwardingState::with_initial_patches(&t);
    let a = install(&t, &mut fwd, "a", &[0, 1], &[0, 1]);
    // Job c on leaves 1 and 3 uses spine1 too, in its own VRF, but its
    // leaf1 GPU is routed over job a's uplink.
    let mut c = install_on(&t, &mut fwd, "c", 1, &[0, 2], &[2, 3]);
    let ga = a.gpus[0];
    let gc = c.gpus[0];
    fwd.set_redirect(gc.leaf, gc.port, fwd.redirect(ga.leaf, ga.port).unwrap());
    c.allowed = None;
    let r = verify(&t, &fwd, &[a, c]);
    let v = all_violations(&r);
    assert!(
        v.contains("a: link out of leaf1:") && v.contains("is shared with job c"),
        "{v}"
    );
    assert!(
        v.contains("c: link out of leaf1:") && v.contains("is shared with job a"),
        "{v}"
    );
}

#[test]
fn a_decision_becomes_a_job_view_in_rank_order() {
    let t =
        topology::from_str("tb.yaml", include_str!("../../../topologies/testbed.yaml")).unwrap();
    let yaml = r#"
job: j1
stage: vclos
gpus: [{server: srv5, gpu: 0}, {server: srv1, gpu: 1}, {server: srv1, gpu: 0}]
vclos:
  leaves: []
  spines: [spine1-1]
  links:
    - {leaf: leaf1, uplink: 100GE1/0/17, peer: spine1-1, peer_port: 100GE1/0/1}
"#;
    let d: crate::decision::Decision = serde_yaml_ng::from_str(yaml).unwrap();
    let v = JobView::from_decision(&t, &d).unwrap();
    let order: Vec<(u32, u16)> = v.gpus.iter().map(|g| (g.leaf.0, g.port)).collect();
    assert_eq!(order, vec![(0, 0), (0, 1), (1, 0)]);
    let allowed = v.allowed.unwrap();
    assert!(
        allowed.contains(&PortRef::Leaf(LeafId(0), 0))
            && allowed.contains(&PortRef::Spine(SpineId(0), 0))
    );
    let bad: crate::decision::Decision =
        serde_yaml_ng::from_str(&yaml.replace("srv5", "srv9")).unwrap();
    assert_eq!(
        JobView::from_decision(&t, &bad).unwrap_err(),
        "job j1: unknown server `srv9`"
    );
}

fn id(s: &str) -> crate::names::JobId {
    crate::names::JobId::new(s).unwrap()
}

fn placed(o: crate::placement::Outcome) -> Decision {
    match o {
        crate::placement::Outcome::Placed(d) => Arc::unwrap_or_clone(d),
        crate::placement::Outcome::Blocked(b) => panic!("blocked: {b:?}"),
    }
}

#[test]
fn the_verifier_follows_each_job_through_its_own_interface_of_a_shared_link() {
    use crate::intent::Item;
    use crate::placement::Placer;
    use crate::placement::{shared::crowded, SharingMode, SliceOptions};
    use std::collections::{BTreeMap, BTreeSet};
    let (mut p, _) = crowded(SliceOptions {
        sharing: Some(SharingMode::default()),
        ..SliceOptions::default()
    });
    let b = placed(
        p.place(&crate::placement::JobRequest::new(id("b"), 8))
            .unwrap(),
    );
    let topo = Arc::clone(p.state().topology());
    let held: Vec<Decision> = p.state().decisions().into_iter().cloned().collect();
    let items: BTreeMap<String, BTreeSet<Item>> = (crate::intent::build(&topo, &held).unwrap())
        .devices
        .into_iter()
        .map(|d| (d.device.clone(), d.items.clone()))
        .collect();
    let violations = |items: &BTreeMap<String, BTreeSet<Item>>, held: &[Decision]| {
        let fwd = forwarding_state(&topo, items);
        (verify_state(&topo, held, &fwd).unwrap())
            .into_iter()
            .flat_map(|r| {
                r.violations
                    .into_iter()
                    .map(move |v| format!("{}: {v}", r.job))
            })
            .collect::<Vec<_>>()
    };
    // As built: every flow of a and b arrives, each in its own VRF, and
    // the sharing they agreed on is not a violation.
    assert_eq!(violations(&items, &held), Vec::<String>::new());
    // Not agreed (b's decision without its `with`): both are reported.
    let mut unagreed = held.clone();
    for d in &mut unagreed {
        if let Some(sh) = d.sharing.as_mut() {
            sh.links.iter_mut().for_each(|l| l.with = vec![id("zz")]);
        }
    }
    let v = violations(&items, &unagreed);
    assert!(
        v.iter()
            .any(|v| v.starts_with("a: ") && v.contains("shared with job b")),
        "{v:?}"
    );
    // A spine sub-interface terminating another VLAN than its name says
    // takes none of b's frames: b's flows through it fail, a's do not.
    let link = &b.sharing.as_ref().unwrap().links[0];
    let reserved = b
        .vclos
        .links
        .iter()
        .find(|k| k.leaf == link.leaf && k.uplink == link.uplink);
    let spine = &reserved.unwrap().peer;
    let mut broken = items.clone();
    let set = broken.get_mut(&**spine).unwrap();
    let sub = set
        .iter()
        .find(|i| matches!(i, Item::Subinterface { .. }))
        .cloned()
        .unwrap();
    set.remove(&sub);
    if let Item::Subinterface { port, .. } = sub {
        set.insert(Item::Subinterface { port, vlan: 102 });
    }
    let v = violations(&broken, &held);
    assert!(
        v.iter()
            .any(|v| v.starts_with("b: ") && v.contains("unreachable")),
        "{v:?}"
    );
    assert!(!v.iter().any(|v| v.starts_with("a: ")), "{v:?}");
    assert!(
        v.iter().any(|v| v.contains("terminating its VLAN")),
        "{v:?}"
    );
    // The leaf without its sub-interface: b's redirects there are broken.
    let mut broken = items.clone();
    let leaf = &topo
        .device(topo.leaf(topo.leaf_id(&link.leaf).unwrap()).device)
        .name;
    broken
        .get_mut(leaf)
        .unwrap()
        .retain(|i| !matches!(i, Item::Subinterface { .. }));
    let v = violations(&broken, &held);
    assert!(
        v.iter()
            .any(|v| v.starts_with("b: ") && v.contains("nor a sub-interface")),
        "{v:?}"
    );
}
