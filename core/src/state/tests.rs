//! Fabric state tests: hand-written decisions (valid and each kind of
//! invalid), and property tests that admission and release are exact
//! inverses over long random sequences driven by the real placers.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::decision::{
    CrossConnect, GpuRef, OcsHop, ReservedLink, SourceRoute, Stage, VirtualClos, VirtualLeaf,
};
use crate::placement::{placer, placer_on, JobRequest, Outcome, Policy, SliceOptions};

fn testbed(ocs: bool) -> Arc<Topology> {
    let (name, text) = if ocs {
        (
            "testbed-ocs.yaml",
            include_str!("../../../topologies/testbed-ocs.yaml"),
        )
    } else {
        (
            "testbed.yaml",
            include_str!("../../../topologies/testbed.yaml"),
        )
    };
    Arc::new(crate::topology::from_str(name, text).unwrap())
}

use crate::topology::generate::uniform_topology as generated;

fn p(n: u32) -> Name {
    format!("100GE1/0/{n}").into()
}

/// Every GPU (4 each) of the testbed servers `servers`.
fn every_gpu(servers: &[&str]) -> Vec<GpuRef> {
    servers
        .iter()
        .flat_map(|s| {
            (0..4).map(|g| GpuRef {
                server: (*s).into(),
                gpu: g,
            })
        })
        .collect()
}

/// Job on srv1 (leaf1) + srv5 (leaf2), 4 + 4 GPUs, over spines 1-1..1-4,
/// on the testbed (direct cables) or through ocs1 as initially patched.
fn two_server_job(job: &str, ocs: bool) -> Decision {
    let mut links = Vec::new();
    let mut routes = Vec::new();
    for (li, leaf) in ["leaf1", "leaf2"].iter().enumerate() {
        for i in 0..4u32 {
            let spine_port = 2 * i + 1 + li as u32;
            let via = ocs.then(|| OcsHop {
                ocs: "ocs1".into(),
                leaf_side: (16 * li as u32 + i + 1).to_string().into(),
                far_side: (32 + 16 * li as u32 + i + 1).to_string().into(),
            });
            links.push(ReservedLink {
                leaf: (*leaf).into(),
                uplink: p(17 + i),
                peer: format!("spine1-{}", i + 1).into(),
                peer_port: p(spine_port),
                via,
            });
            routes.push(SourceRoute {
                leaf: (*leaf).into(),
                server_port: p(1 + i),
                uplink: p(17 + i),
            });
        }
    }
    let gpus = every_gpu(&["srv1", "srv5"]);
    Decision {
        requested_gpus: None,
        sharing: None,
        job: JobId::new(job).unwrap(),
        stage: Stage::Manual,
        gpus,
        vclos: VirtualClos {
            leaves: ["leaf1", "leaf2"]
                .iter()
                .map(|l| VirtualLeaf {
                    leaf: (*l).into(),
                    server_ports: (1..=4).map(p).collect(),
                })
                .collect(),
            spines: (1..=4).map(|i| format!("spine1-{i}").into()).collect(),
            links,
            cross_connects: vec![],
        },
        source_routes: routes,
    }
}

/// srv3 <-> srv7, one GPU each, leaf to leaf through the OCS: leaf1
/// uplink 25 (ocs1:9) rewired to leaf2 uplink 25 (ocs1:25).
fn two_leaf_job(job: &str) -> Decision {
    Decision {
        requested_gpus: None,
        sharing: None,
        job: JobId::new(job).unwrap(),
        stage: Stage::OcsTwoLeaf,
        gpus: vec![
            GpuRef {
                server: "srv3".into(),
                gpu: 0,
            },
            GpuRef {
                server: "srv7".into(),
                gpu: 0,
            },
        ],
        vclos: VirtualClos {
            leaves: vec![
                VirtualLeaf {
                    leaf: "leaf1".into(),
                    server_ports: vec![p(9)],
                },
                VirtualLeaf {
                    leaf: "leaf2".into(),
                    server_ports: vec![p(9)],
                },
            ],
            spines: vec![],
            links: vec![ReservedLink {
                leaf: "leaf1".into(),
                uplink: p(25),
                peer: "leaf2".into(),
                peer_port: p(25),
                via: Some(OcsHop {
                    ocs: "ocs1".into(),
                    leaf_side: "9".into(),
                    far_side: "25".into(),
                }),
            }],
            cross_connects: vec![CrossConnect {
                ocs: "ocs1".into(),
                a: "9".into(),
                b: "25".into(),
            }],
        },
        source_routes: vec![
            SourceRoute {
                leaf: "leaf1".into(),
                server_port: p(9),
                uplink: p(25),
            },
            SourceRoute {
                leaf: "leaf2".into(),
                server_port: p(9),
                uplink: p(25),
            },
        ],
    }
}

fn err(st: &mut FabricState, d: &Decision) -> String {
    let before = st.occ.clone();
    let e = st.admit(d).unwrap_err().to_string();
    assert_eq!(st.occ, before, "a refused decision changed the state");
    e
}

#[test]
fn hand_written_decision_round_trips() {
    for ocs in [false, true] {
        let topo = testbed(ocs);
        let mut st = FabricState::new(topo.clone());
        let fresh = st.occ.clone();
        let d = two_server_job("j1", ocs);
        st.admit(&d).unwrap();
        assert_eq!(st.free_gpus(topo.server_id("srv1").unwrap()), 0);
        assert_eq!(st.idle_servers(LeafId(0)), 3);
        let l1 = topo.leaf_id("leaf1").unwrap();
        assert_eq!(st.uplink_holder(l1, 0).unwrap().as_str(), "j1");
        assert!(st.uplink_free(l1, 4));
        let s11 = topo.spine_id("spine1-1").unwrap();
        assert_eq!(st.free_spine_ports(s11), 0);
        if ocs {
            assert_eq!(st.ocs_port_holder(OcsId(0), 0).unwrap().as_str(), "j1");
            assert_eq!(st.ocs_port_holder(OcsId(0), 32).unwrap().as_str(), "j1");
            assert!(st.ocs_port_holder(OcsId(0), 4).is_none());
        }
        assert_eq!(st.decisions(), vec![&d]);
        assert_eq!(st.release(&d.job).unwrap(), d);
        assert_eq!(st.occ, fresh);
        assert!(st.decisions().is_empty());
        assert!(matches!(st.release(&d.job), Err(StateError::UnknownJob(_))));
    }
}

/// A decision admitted on one copy of a fabric is admitted on another by
/// what it held there ([`FabricState::admit_held`]) only where the named
/// check admits it too: not when an OCS circuit it uses as patched is
/// patched elsewhere, nor when a port or GPU of it is held; its own
/// cross-connects are made, not required.
#[test]
fn a_held_admission_needs_its_circuits_as_they_were() {
    let topo = testbed(true);
    let fresh = FabricState::new(Arc::clone(&topo));
    for d in [two_server_job("a", true), two_leaf_job("a")] {
        let mut there = fresh.clone();
        there.admit(&d).unwrap();
        let held = there.held_admission(&d.job).unwrap();
        let d = Arc::new(d);
        let mut here = fresh.clone();
        assert!(here.admit_held(&d, &held), "{}", d.job);
        assert_eq!(here.decision(&d.job), Some(&*d));
        assert_eq!(here.occ, there.occ);
    }
    // Job `a` uses ocs1 port 1 <-> 33 as patched: repatch port 1 to 48.
    let d = Arc::new(two_server_job("a", true));
    let mut there = fresh.clone();
    there.admit(&d).unwrap();
    let held = there.held_admission(&d.job).unwrap();
    let ocs = OcsId(0);
    let (one, far) = (0u16, fresh.patch(ocs, 0).unwrap());
    assert_eq!(topo.ocs_dev(ocs).ports[usize::from(far)].as_ref(), "33");
    let mut repatched = fresh.clone();
    repatched.patch_pair(ocs, one, 47);
    assert!(repatched.clone().admit(&d).is_err());
    let before = repatched.clone();
    assert!(!repatched.admit_held(&d, &held));
    assert_eq!(
        (&repatched.occ, repatched.version()),
        (&before.occ, before.version())
    );
    // Held on another topology's copy (the same names): checked by name.
    let mut other = FabricState::new(testbed(true));
    assert!(other.admit_held(&d, &held));
    assert_eq!(other.decision(&d.job), Some(&*d));
    let mut other = FabricState::new(testbed(true));
    other.admit(&two_server_job("b", true)).unwrap();
    assert!(!other.admit_held(&d, &held));
    // Its GPUs and ports held by another job.
    let mut busy = fresh.clone();
    busy.admit(&two_server_job("b", true)).unwrap();
    let before = busy.clone();
    assert!(!busy.admit_held(&d, &held));
    assert_eq!(busy.occ, before.occ);
}

#[test]
fn typed_admission_refuses_what_the_named_check_refuses() {
    let topo = testbed(true);
    let mut st = FabricState::new(topo);
    let (a, b) = (two_server_job("a", true), two_server_job("b", true));
    let res_b = validate::resolve(&st, &b).unwrap();
    st.admit_typed(
        std::sync::Arc::new(a.clone()),
        validate::resolve(&st, &a).unwrap(),
    )
    .unwrap();
    let before = st.occ.clone();
    // Same resources, now held by `a`: the fast path must not take them.
    let e = st.admit_typed(std::sync::Arc::new(b), res_b).unwrap_err();
    assert!(matches!(e, StateError::Busy { .. }), "{e}");
    let again = st
        .admit_typed(std::sync::Arc::new(a.clone()), Resources::default())
        .unwrap_err();
    assert!(matches!(again, StateError::DuplicateJob(_)), "{again}");
    assert_eq!(st.occ, before, "a refused admission changed the state");
    assert_eq!(st.decisions(), vec![&a]);
}

#[test]
fn invalid_hand_written_decisions_are_named_errors() {
    let topo = testbed(false);
    let mut st = FabricState::new(topo);

    let mut d = two_server_job("j1", false);
    d.vclos.links[0].leaf = "leaf9".into();
    let e = err(&mut st, &d);
    assert!(
        e.contains("j1") && e.contains("unknown leaf `leaf9`"),
        "{e}"
    );

    let mut d = two_server_job("j1", false);
    d.vclos.links[1].uplink = "Eth9".into();
    let e = err(&mut st, &d);
    assert!(e.contains("leaf1 has no uplink `Eth9`"), "{e}");

    // Source route onto an uplink the job did not reserve.
    let mut d = two_server_job("j1", false);
    d.source_routes[0].uplink = p(30);
    let e = err(&mut st, &d);
    assert!(
        e.contains("leaf1:100GE1/0/30") && e.contains("not reserved"),
        "{e}"
    );

    // Not one-to-one: two server ports onto one uplink.
    let mut d = two_server_job("j1", false);
    d.source_routes[1].uplink = p(17);
    let e = err(&mut st, &d);
    assert!(e.contains("one-to-one") && e.contains("100GE1/0/17"), "{e}");

    // A server port without a route.
    let mut d = two_server_job("j1", false);
    d.source_routes.remove(2);
    let e = err(&mut st, &d);
    assert!(
        e.contains("no source route") && e.contains("100GE1/0/3"),
        "{e}"
    );

    // A link that is not cabled that way.
    let mut d = two_server_job("j1", false);
    d.vclos.links[0].peer_port = p(2);
    let e = err(&mut st, &d);
    assert!(e.contains("not cabled to spine1-1:100GE1/0/2"), "{e}");

    // Server port of a GPU the job does not have.
    let mut d = two_server_job("j1", false);
    d.vclos.leaves[0].server_ports.push(p(9));
    let e = err(&mut st, &d);
    assert!(
        e.contains("leaf1:100GE1/0/9") && e.contains("job's GPUs"),
        "{e}"
    );

    // GPU out of range, and GPU already held.
    let mut d = two_server_job("j1", false);
    d.gpus[0].gpu = 7;
    let e = err(&mut st, &d);
    assert!(e.contains("srv1:gpu7"), "{e}");
    st.admit(&two_server_job("j1", false)).unwrap();
    let e = err(&mut st, &two_server_job("j2", false));
    assert!(
        e.contains("j2") && e.contains("srv1:gpu0 is held by job `j1`"),
        "{e}"
    );
    assert!(matches!(
        st.admit(&two_server_job("j1", false)),
        Err(StateError::DuplicateJob(_))
    ));
}

#[test]
fn cross_connects_only_on_idle_ports_and_are_undone() {
    let topo = testbed(true);
    let mut st = FabricState::new(topo.clone());
    let fresh = st.occ.clone();
    st.admit(&two_server_job("j1", true)).unwrap();

    // j2 on srv2 + srv6: leaf1 uplink 21 (ocs1:5) patched to spine1-1's
    // second port (ocs1:49, which leaf2's uplink 17 = ocs1:17 uses for j1).
    let mut d = two_server_job("j2", true);
    for g in &mut d.gpus {
        g.server = if &*g.server == "srv1" {
            "srv2".into()
        } else {
            "srv6".into()
        };
    }
    for vl in &mut d.vclos.leaves {
        vl.server_ports = (5..=8).map(p).collect();
    }
    for r in &mut d.source_routes {
        let n: u32 = r
            .server_port
            .trim_start_matches("100GE1/0/")
            .parse()
            .unwrap();
        r.server_port = p(n + 4);
    }
    d.vclos.cross_connects = vec![CrossConnect {
        ocs: "ocs1".into(),
        a: "5".into(),
        b: "49".into(),
    }];
    let e = err(&mut st, &d);
    assert!(e.contains("ocs1:49 is held by job `j1`"), "{e}");

    // A cross-connect no link uses is refused too.
    let mut d2 = two_server_job("j3", true);
    d2.vclos.cross_connects = vec![CrossConnect {
        ocs: "ocs1".into(),
        a: "6".into(),
        b: "60".into(),
    }];
    let e = err(&mut FabricState::new(topo.clone()), &d2);
    assert!(e.contains("not used by any reserved link"), "{e}");

    // A valid rewire on idle ports (see `two_leaf_job`).
    let two_leaf = two_leaf_job("j4");
    st.admit(&two_leaf).unwrap();
    let o = OcsId(0);
    assert_eq!(st.patch(o, 8), Some(24));
    // Their old partners (ocs1:41 and ocs1:57) went dark.
    assert_eq!(st.patch(o, 40), None);
    assert_eq!(st.patch(o, 56), None);
    // Without the cross-connect the link is not patched: refused.
    let mut bad = two_leaf.clone();
    bad.job = JobId::new("j5").unwrap();
    bad.vclos.cross_connects.clear();
    let mut st2 = FabricState::new(topo.clone());
    let e = err(&mut st2, &bad);
    assert!(
        e.contains("ocs1:9") && e.contains("not patched to 25"),
        "{e}"
    );

    st.release(&JobId::new("j4").unwrap()).unwrap();
    assert_eq!(st.patch(o, 8), Some(40));
    assert_eq!(st.patch(o, 24), Some(56));
    st.release(&JobId::new("j1").unwrap()).unwrap();
    assert_eq!(st.occ, fresh);
}

#[test]
fn from_decisions_rebuilds_the_same_holders() {
    let topo = testbed(true);
    let d = two_server_job("j1", true);
    let st = FabricState::from_decisions(topo.clone(), std::slice::from_ref(&d)).unwrap();
    let mut live = FabricState::new(topo);
    live.admit(&d).unwrap();
    assert_eq!(st.occ, live.occ);
}

/// Same holders (by job name) and patches in two states.
fn same_holders(a: &FabricState, b: &FabricState) -> bool {
    let name = |s: &FabricState, slot: u32| s.holder_of(slot).cloned();
    let cmp = |x: &[u32], y: &[u32]| {
        x.len() == y.len() && x.iter().zip(y).all(|(&i, &j)| name(a, i) == name(b, j))
    };
    cmp(&a.occ.gpu, &b.occ.gpu)
        && cmp(&a.occ.server_port, &b.occ.server_port)
        && cmp(&a.occ.uplink, &b.occ.uplink)
        && cmp(&a.occ.spine_port, &b.occ.spine_port)
        && cmp(&a.occ.ocs_port, &b.occ.ocs_port)
        && a.occ.server_free == b.occ.server_free
        && a.occ.leaf_idle == b.occ.leaf_idle
        && a.occ.leaf_free == b.occ.leaf_free
}

fn run_sequence(policy: Policy, topo: Arc<Topology>, ops: &[(bool, u32, usize)]) {
    run_sequence_with(policy, SliceOptions::default(), topo, ops)
}

fn run_sequence_with(
    policy: Policy,
    options: SliceOptions,
    topo: Arc<Topology>,
    ops: &[(bool, u32, usize)],
) {
    let mut pl = placer_on(policy, FabricState::new(topo.clone()), options).unwrap();
    let fresh = FabricState::new(topo.clone()).occ;
    let mut live: Vec<JobId> = Vec::new();
    for (i, &(release, size, pick)) in ops.iter().enumerate() {
        if release && !live.is_empty() {
            let job = live.remove(pick % live.len());
            pl.release(&job).unwrap();
        } else {
            let job = JobId::new(format!("j{i}")).unwrap();
            let before = pl.fabric().unwrap().clone();
            let out = pl.place(&JobRequest::new(job.clone(), size)).unwrap();
            let after = pl.fabric().unwrap();
            match out {
                Outcome::Placed(d) => {
                    live.push(job.clone());
                    assert_eq!(after.decision(&job), Some(&*d));
                    // Release right away: exactly the state before.
                    let mut undo = after.clone();
                    undo.release(&job).unwrap();
                    assert_eq!(undo.occ, before.occ, "release is not the inverse of admit");
                    // Only idle OCS ports were rewired, and no running
                    // job's patch moved.
                    for c in &d.vclos.cross_connects {
                        let o = topo.ocs_id(&c.ocs).unwrap();
                        for port in [&c.a, &c.b] {
                            let pi = topo
                                .ocs_dev(o)
                                .ports
                                .iter()
                                .position(|x| x == port)
                                .unwrap();
                            assert!(before.ocs_port_holder(o, pi as u16).is_none());
                        }
                    }
                    for (pi, &h) in before.occ.ocs_port.iter().enumerate() {
                        if h != FREE {
                            assert_eq!(before.occ.patch[pi], after.occ.patch[pi]);
                        }
                    }
                }
                Outcome::Blocked(_) => assert_eq!(after.occ, before.occ),
            }
        }
        // The live state is what re-admitting its decisions gives.
        let st = pl.fabric().unwrap();
        let owned: Vec<Decision> = st.decisions().into_iter().cloned().collect();
        let rebuilt = FabricState::from_decisions(topo.clone(), &owned).unwrap();
        assert!(same_holders(st, &rebuilt));
    }
    for job in live.drain(..) {
        pl.release(&job).unwrap();
    }
    assert_eq!(
        pl.fabric().unwrap().occ,
        fresh,
        "state after releasing everything"
    );
}

fn ops() -> impl Strategy<Value = Vec<(bool, u32, usize)>> {
    prop::collection::vec(
        (
            prop::bool::weighted(0.4),
            prop::sample::select(vec![1u32, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24]),
            0usize..64,
        ),
        1..60,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn ocs_vclos_admit_release_are_inverses(ops in ops()) {
        run_sequence(Policy::OcsVclos, generated(4, 8, 2, 2), &ops);
    }

    #[test]
    fn vclos_admit_release_are_inverses(ops in ops()) {
        run_sequence(Policy::Vclos, generated(4, 8, 2, 0), &ops);
    }

    #[test]
    fn vclos_on_ocs_fabric_admit_release_are_inverses(ops in ops()) {
        run_sequence(Policy::Vclos, generated(4, 8, 2, 2), &ops);
    }

    #[test]
    fn partial_server_slices_admit_release_are_inverses(ops in ops()) {
        // Servers of 4 GPUs, so a job of 3, 5 or 6 leaves partly used servers.
        let partial = SliceOptions { partial_servers: true, ..SliceOptions::default() };
        run_sequence_with(Policy::Vclos, partial, generated(4, 8, 4, 0), &ops);
        run_sequence_with(Policy::OcsVclos, partial, generated(4, 8, 4, 2), &ops);
    }
}

// ---------------------------------------------------------------------
// Complete validation: unknown keys, stage vs. placement, the slice.

/// `d`'s refusal, which must be a shape error naming `field`.
fn shape_err(st: &mut FabricState, d: &Decision, field: &str) -> String {
    let e = err(st, d);
    let head = format!("job `{}`: `{field}`: ", d.job);
    assert!(e.starts_with(&head), "expected `{field}`: {e}");
    e
}

/// `d` relabelled as `stage`.
fn as_stage(d: &Decision, stage: Stage) -> Decision {
    Decision { stage, ..d.clone() }
}

fn on(d: &mut Decision, leaf: &str, servers: &[&str]) {
    d.gpus.retain(|g| servers.contains(&&*g.server));
    d.vclos.leaves.retain(|l| &*l.leaf == leaf);
    d.vclos.links.retain(|k| &*k.leaf == leaf);
    d.source_routes.retain(|r| &*r.leaf == leaf);
}

/// srv1 and srv2 (both under leaf1), every GPU, stage `leaf`, no slice.
fn one_leaf_job(job: &str) -> Decision {
    let gpus = every_gpu(&["srv1", "srv2"]);
    Decision {
        requested_gpus: None,
        sharing: None,
        job: JobId::new(job).unwrap(),
        stage: Stage::Leaf,
        gpus,
        vclos: VirtualClos::default(),
        source_routes: vec![],
    }
}

/// `two_server_job` (spines) and `two_leaf_job` (leaf to leaf) in one
/// decision: every struct of the format appears in it.
fn mixed_job(job: &str) -> Decision {
    let mut d = two_server_job(job, true);
    let pair = two_leaf_job(job);
    d.gpus.extend(pair.gpus);
    for (vl, extra) in d.vclos.leaves.iter_mut().zip(pair.vclos.leaves) {
        vl.server_ports.extend(extra.server_ports);
    }
    d.vclos.links.extend(pair.vclos.links);
    d.vclos.cross_connects = pair.vclos.cross_connects;
    d.source_routes.extend(pair.source_routes);
    d
}

#[test]
fn unknown_or_misspelt_keys_are_refused_at_every_level() {
    let d = mixed_job("j1");
    let v = serde_json::to_value(&d).unwrap();
    // JSON pointers of every object in the decision.
    fn objects(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    objects(x, format!("{at}/{k}"), out);
                }
                out.push(at);
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    objects(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut at = Vec::new();
    objects(&v, String::new(), &mut at);
    // Decision, GpuRef, VirtualClos, VirtualLeaf, ReservedLink, OcsHop,
    // CrossConnect, SourceRoute.
    for kind in [
        "",
        "/gpus/0",
        "/vclos",
        "/vclos/leaves/0",
        "/vclos/links/0",
        "/vclos/links/8/via",
        "/vclos/cross_connects/0",
        "/source_routes/0",
    ] {
        assert!(at.iter().any(|p| p == kind), "{kind} not in {at:?}");
    }
    for path in &at {
        let mut bad = v.clone();
        let obj = bad.pointer_mut(path).unwrap().as_object_mut().unwrap();
        obj.insert("colour".into(), serde_json::Value::from(1));
        let json = serde_json::to_string(&bad).unwrap();
        let e = serde_json::from_str::<Decision>(&json).unwrap_err();
        assert!(
            e.to_string().contains("unknown field `colour`"),
            "{path}: {e}"
        );
        let yaml = serde_yaml_ng::to_string(&bad).unwrap();
        let e = serde_yaml_ng::from_str::<Decision>(&yaml).unwrap_err();
        assert!(
            e.to_string().contains("unknown field `colour`"),
            "{path}: {e}"
        );
    }
    // A misspelt section is not a missing one.
    let yaml = serde_yaml_ng::to_string(&v).unwrap();
    assert_eq!(serde_yaml_ng::from_str::<Decision>(&yaml).unwrap(), d);
    let e = serde_yaml_ng::from_str::<Decision>(&yaml.replace("\nvclos:", "\nvclso:"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `vclso`"), "{e}");
    let e = serde_yaml_ng::from_str::<Decision>(&yaml.replace("source_routes:", "source_route:"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `source_route`"), "{e}");
}

#[test]
fn a_state_file_with_an_unknown_key_in_a_decision_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    store::save(dir.path(), "testbed-ocs", &[mixed_job("j1")]).unwrap();
    let file = store::state_path(dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    let bad = text.replacen("\"far_side\"", "\"far_sied\"", 1);
    assert_ne!(bad, text);
    std::fs::write(&file, bad).unwrap();
    let e = store::load(dir.path(), "testbed-ocs")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `far_sied`"), "{e}");
}

#[test]
fn stage_names_are_the_file_format() {
    for s in [
        Stage::Server,
        Stage::Leaf,
        Stage::Vclos,
        Stage::OcsSpine,
        Stage::OcsTwoLeaf,
        Stage::OcsVclos,
        Stage::Manual,
    ] {
        assert_eq!(serde_json::to_value(s).unwrap(), s.name());
    }
}

#[test]
fn the_stage_must_match_where_the_gpus_are() {
    let st = FabricState::new(testbed(false));
    let two = two_server_job("j1", false); // srv1 (leaf1) + srv5 (leaf2)
    for (stage, says) in [
        (
            Stage::Server,
            "`server` means one server, but the GPUs are on 2 servers (srv1, srv5)",
        ),
        (
            Stage::Leaf,
            "`leaf` means servers under one leaf, but the GPUs are under 2 leaves (leaf1, leaf2)",
        ),
    ] {
        let d = as_stage(&two, stage);
        let e = shape_err(&mut st.clone(), &d, "stage");
        assert!(e.contains(says), "{e}");
    }
    let one = one_leaf_job("j2");
    st.clone().admit(&one).unwrap();
    for stage in [
        Stage::Vclos,
        Stage::OcsSpine,
        Stage::OcsTwoLeaf,
        Stage::OcsVclos,
    ] {
        let d = as_stage(&one, stage);
        let e = shape_err(&mut st.clone(), &d, "stage");
        let says = format!(
            "`{}` builds a virtual Clos across leaves, but the GPUs are all under leaf1",
            stage.name()
        );
        assert!(e.contains(&says), "{e}");
    }
    let mut single = one.clone();
    single.gpus.retain(|g| &*g.server == "srv1");
    let e = shape_err(&mut st.clone(), &single, "stage");
    assert!(e.contains("all on srv1 (use `server`)"), "{e}");
    single.stage = Stage::Server;
    st.clone().admit(&single).unwrap();
    // `manual` takes any placement.
    for d in [&two, &one, &single] {
        let d = as_stage(d, Stage::Manual);
        st.clone().admit(&d).unwrap();
    }
}

#[test]
fn long_lists_in_errors_are_cut() {
    // An engine decision (12 servers, 3 leaves) relabelled.
    let topo = generated(4, 8, 2, 0);
    let mut pl = placer(Policy::Vclos, topo.clone()).unwrap();
    let job = JobRequest::new(JobId::new("big").unwrap(), 24);
    let Outcome::Placed(d) = pl.place(&job).unwrap() else {
        panic!("not placed");
    };
    assert_eq!((d.stage, d.vclos.leaves.len()), (Stage::Vclos, 3));
    let st = FabricState::new(topo);
    let server = as_stage(&d, Stage::Server);
    let e = shape_err(&mut st.clone(), &server, "stage");
    assert!(
        e.contains("on 12 servers (") && e.ends_with(", … 8 more)"),
        "{e}"
    );
    let two = as_stage(&d, Stage::OcsTwoLeaf);
    let e = shape_err(&mut st.clone(), &two, "vclos.leaves");
    assert!(e.contains("exactly two leaves (3 listed)"), "{e}");
}

#[test]
fn a_job_under_several_leaves_needs_its_whole_slice() {
    let mut st = FabricState::new(testbed(true));
    let full = two_server_job("j1", true);
    // The reproduction: 8 GPUs over two leaves, no network part.
    for stage in [Stage::Manual, Stage::Vclos] {
        let bare = Decision {
            stage,
            vclos: VirtualClos::default(),
            source_routes: vec![],
            ..full.clone()
        };
        let e = shape_err(&mut st, &bare, "vclos");
        assert!(
            e.contains("the GPUs are under 2 leaves (leaf1, leaf2)")
                && e.contains("`vclos` is missing"),
            "{e}"
        );
    }
    let mut no_leaves = full.clone();
    no_leaves.vclos.leaves.clear();
    shape_err(&mut st, &no_leaves, "vclos");
    let no_routes = Decision {
        source_routes: vec![],
        ..full.clone()
    };
    let e = shape_err(&mut st, &no_routes, "source_routes");
    assert!(e.contains("`source_routes` is missing or empty"), "{e}");

    // leaf2 listed with its ports but no link: its GPUs could not send.
    let mut cut = full.clone();
    cut.vclos.links.retain(|k| &*k.leaf == "leaf1");
    cut.source_routes.retain(|r| &*r.leaf == "leaf1");
    let e = err(&mut st, &cut);
    assert!(
        e.contains("leaf2:-: virtual leaf has no reserved link (`vclos.links`)"),
        "{e}"
    );
    // One GPU's port left out of the slice.
    let mut short = full.clone();
    short.vclos.leaves[1].server_ports.pop();
    short.source_routes.pop();
    let e = err(&mut st, &short);
    assert!(
        e.contains("srv5:gpu3: the GPU's server port is missing"),
        "{e}"
    );
    st.admit(&full).unwrap();
}

#[test]
fn a_job_under_one_leaf_carries_no_slice_unless_manual_and_complete() {
    let st = FabricState::new(testbed(false));
    // srv1 alone, with a complete slice over leaf1's uplinks: `manual` only.
    let mut d = two_server_job("j1", false);
    on(&mut d, "leaf1", &["srv1"]);
    st.clone().admit(&d).unwrap();
    let server = as_stage(&d, Stage::Server);
    let e = shape_err(&mut st.clone(), &server, "vclos.leaves");
    assert!(
        e.contains("a job under one leaf (leaf1) carries no virtual Clos"),
        "{e}"
    );
    let routes_only = Decision {
        vclos: VirtualClos::default(),
        ..server.clone()
    };
    shape_err(&mut st.clone(), &routes_only, "source_routes");
    let mut partial = d.clone();
    partial.source_routes.pop();
    let e = err(&mut st.clone(), &partial);
    assert!(
        e.contains("leaf1:100GE1/0/4: server port has no source route (`source_routes`)"),
        "{e}"
    );
    // leaf2's links reserved for a job with no GPU there.
    let mut reach = two_server_job("j2", false);
    reach.gpus.retain(|g| &*g.server == "srv1");
    reach.vclos.leaves[1].server_ports.clear();
    reach.source_routes.retain(|r| &*r.leaf == "leaf1");
    let e = err(&mut st.clone(), &reach);
    assert!(
        e.contains("leaf2:-: virtual leaf lists no server port"),
        "{e}"
    );
    let none = Decision {
        gpus: vec![],
        vclos: VirtualClos::default(),
        source_routes: vec![],
        ..d.clone()
    };
    shape_err(&mut st.clone(), &none, "gpus");
}

#[test]
fn each_network_stage_has_its_shape() {
    let st = FabricState::new(testbed(true));
    let spines = two_server_job("j1", true); // four spines, no rewiring
    for stage in [Stage::Vclos, Stage::OcsVclos, Stage::Manual] {
        st.clone().admit(&as_stage(&spines, stage)).unwrap();
    }
    let one = as_stage(&spines, Stage::OcsSpine);
    let e = shape_err(&mut st.clone(), &one, "vclos.spines");
    assert!(e.contains("exactly one spine (4 listed)"), "{e}");
    let two = as_stage(&spines, Stage::OcsTwoLeaf);
    let e = shape_err(&mut st.clone(), &two, "vclos.spines");
    assert!(e.contains("`ocs-two-leaf` uses no spine"), "{e}");

    let pair = two_leaf_job("j2"); // leaf to leaf, one cross-connect
    for stage in [Stage::OcsTwoLeaf, Stage::Manual] {
        st.clone().admit(&as_stage(&pair, stage)).unwrap();
    }
    let v = as_stage(&pair, Stage::Vclos);
    let e = shape_err(&mut st.clone(), &v, "vclos.cross_connects");
    assert!(e.contains("`vclos` never rewires an OCS"), "{e}");
    let o = as_stage(&pair, Stage::OcsVclos);
    let e = shape_err(&mut st.clone(), &o, "vclos.spines");
    assert!(
        e.contains("`ocs-vclos` uses virtual spines; none is listed"),
        "{e}"
    );

    // Spines and a leaf-to-leaf link: `manual` only.
    let mixed = mixed_job("j3");
    st.clone().admit(&mixed).unwrap();
    let e = err(&mut st.clone(), &as_stage(&mixed, Stage::OcsVclos));
    assert!(
        e.contains(
            "leaf1:100GE1/0/25: leaf-to-leaf link to leaf2:100GE1/0/25 in stage `ocs-vclos`"
        ),
        "{e}"
    );
}

#[test]
fn only_the_baselines_ideal_network_admits_gpus_without_a_slice() {
    let topo = testbed(false);
    let gpus_only = Decision {
        vclos: VirtualClos::default(),
        source_routes: vec![],
        ..two_server_job("j1", false)
    };
    shape_err(&mut FabricState::new(topo.clone()), &gpus_only, "vclos");
    let mut ideal = FabricState::new(topo.clone()).ideal_network();
    let vclos = as_stage(&gpus_only, Stage::Vclos);
    shape_err(&mut ideal, &vclos, "vclos");
    ideal.admit(&gpus_only).unwrap();
    // What the baselines hold is never a valid state of a real fabric.
    let held: Vec<Decision> = ideal.decisions().into_iter().cloned().collect();
    assert!(FabricState::from_decisions(topo, &held).is_err());
}

/// `requested_gpus` (issue 13): at least 1, at most what the decision
/// holds; absent in saved state written before it existed, and then every
/// held GPU counts as asked for.
#[test]
fn requested_gpus_is_between_one_and_the_gpus_held() {
    let st = FabricState::new(testbed(false));
    let mut d = one_leaf_job("j1");
    for bad in [0, 9] {
        d.requested_gpus = Some(bad);
        let e = shape_err(&mut st.clone(), &d, "requested_gpus");
        assert!(
            e.contains(&format!("{bad} GPUs requested")) && e.contains("at most the 8 GPUs"),
            "{e}"
        );
    }
    d.requested_gpus = Some(6);
    let mut ok = st.clone();
    ok.admit(&d).unwrap();
    assert_eq!(ok.decision(&d.job).unwrap().reserved_idle_gpus(), 2);
    // The field round-trips, and a decision without it still parses.
    let json = serde_json::to_string(&d).unwrap();
    assert!(json.contains("\"requested_gpus\":6"), "{json}");
    let old = json.replace(",\"requested_gpus\":6", "");
    assert!(!old.contains("requested_gpus"), "{old}");
    let back: Decision = serde_json::from_str(&old).unwrap();
    assert_eq!((back.requested_gpus, back.reserved_idle_gpus()), (None, 0));
}

#[test]
fn masked_gpus_are_neither_free_nor_held_and_unmasking_restores_every_count() {
    let topo = testbed(false);
    let mut st = FabricState::new(Arc::clone(&topo));
    st.admit(&two_server_job("a", false)).unwrap();
    let counts = |st: &FabricState| {
        let servers = (0..topo.servers.len()).map(|s| st.free_gpus(ServerId(s as u32)));
        let leaves = (0..topo.leaves.len() as u32)
            .map(|l| (st.idle_servers(LeafId(l)), st.leaf_free_gpus(LeafId(l))));
        (servers.collect::<Vec<_>>(), leaves.collect::<Vec<_>>())
    };
    let before = counts(&st);
    // Two GPUs of an idle server, and one held by `a` (left as it is).
    let idle = (0..topo.servers.len() as u32)
        .map(ServerId)
        .find(|&s| st.server_idle(s))
        .unwrap();
    let held = topo.server_id("srv1").unwrap();
    let gpus = [(idle, 0), (idle, 3), (held, 0)];
    st.mask_gpus(&gpus);
    assert!(st.gpu_holder(held, 0).is_some());
    assert_eq!(st.free_gpus(idle), topo.gpus_per_server - 2);
    assert!(!st.server_idle(idle));
    let leaf = topo.server(idle).leaf;
    assert_eq!(st.idle_servers(leaf) + 1, before.1[leaf.index()].0);
    // A decision naming a masked GPU is refused.
    let name = topo.server(idle).name.clone();
    let mut d = two_server_job("b", false);
    d.gpus = vec![GpuRef {
        server: name,
        gpu: 0,
    }];
    d.vclos = VirtualClos::default();
    d.source_routes.clear();
    assert!(st.admit(&d).is_err());
    st.unmask_gpus(&gpus);
    assert_eq!(counts(&st), before);
    assert!(st.gpu_holder(held, 0).is_some());
    st.admit(&d).unwrap();
}

#[test]
fn links_kept_at_release_stay_unusable_until_freed_then_match_a_release() {
    let topo = testbed(true);
    let masked = |st: &FabricState| {
        let o = &st.occ;
        let n = |v: &[u32]| v.iter().filter(|&&x| x == MASKED).count();
        (n(&o.uplink), n(&o.spine_port), n(&o.ocs_port))
    };
    for d in [two_leaf_job("x"), two_server_job("y", true)] {
        let mut plain = FabricState::new(Arc::clone(&topo));
        plain.admit(&d).unwrap();
        let patched = plain.occ.patch.clone();
        let mut kept = plain.clone();
        let (back, links) = kept.release_keeping_links(&d.job).unwrap();
        assert_eq!(back, d);
        // Its GPUs and server ports are free; every port of its links is
        // unusable and its circuits stay.
        assert!(kept.decision(&d.job).is_none());
        for g in &d.gpus {
            let s = topo.server_id(&g.server).unwrap();
            assert!(kept.gpu_holder(s, g.gpu).is_none() && kept.free_gpus(s) > 0);
        }
        let spines = d.vclos.links.iter().filter(|l| l.peer.starts_with("spine"));
        let hops = d.vclos.links.iter().filter(|l| l.via.is_some()).count();
        let leaf_ends = d.vclos.links.len() * 2 - spines.clone().count();
        assert_eq!(masked(&kept), (leaf_ends, spines.count(), 2 * hops));
        assert_eq!(kept.occ.patch, patched);
        kept.free_kept_links(&links);
        plain.release(&d.job).unwrap();
        assert!(same_holders(&plain, &kept));
        assert_eq!(kept.occ.patch, plain.occ.patch);
        assert_eq!(masked(&kept), (0, 0, 0));
    }
}

#[test]
fn a_masked_reservation_keeps_its_free_resources_out_until_unmasked() {
    let topo = testbed(true);
    // `x` runs; `y`'s reservation names ports and GPUs `x` does not hold
    // and, with `x2` (the same job under another name), ones it does.
    let (x, y) = (two_leaf_job("x"), two_server_job("y", true));
    let mut st = FabricState::new(Arc::clone(&topo));
    st.admit(&x).unwrap();
    let before = st.occ.clone();
    for d in [&y, &x] {
        let r = st.reservation(d).unwrap();
        let m = st.mask(&r);
        // What `x` holds stays held by it; everything else `d` names is
        // masked, so `d` (renamed) cannot be admitted, nor can any job
        // naming one of its GPUs or ports.
        let mut again = d.clone();
        again.job = JobId::new("again").unwrap();
        assert!(st.admit(&again).is_err());
        let n = |v: &[u32]| v.iter().filter(|&&h| h == MASKED).count();
        let o = &st.occ;
        let masked = n(&o.gpu) + n(&o.uplink) + n(&o.spine_port) + n(&o.ocs_port);
        let free = |v: &[u32], w: &[u32]| {
            v.iter()
                .zip(w)
                .filter(|&(&a, &b)| a == MASKED && b == FREE)
                .count()
        };
        let was_free = free(&o.gpu, &before.gpu)
            + free(&o.uplink, &before.uplink)
            + free(&o.spine_port, &before.spine_port)
            + free(&o.ocs_port, &before.ocs_port);
        assert_eq!(masked, was_free, "only free resources are masked");
        let lay = &st.layout;
        let gpus = r.gpus.iter().map(|&(s, g)| o.gpu[lay.gpu(s, g)]);
        let ports = (r.uplinks.iter().map(|&i| o.uplink[i]))
            .chain(r.spine_ports.iter().map(|&i| o.spine_port[i]))
            .chain(r.ocs_ports.iter().map(|&i| o.ocs_port[i]));
        assert!(
            gpus.chain(ports).all(|h| h != FREE),
            "every resource named is masked or held"
        );
        assert_eq!(
            r.uplinks.len(),
            d.vclos.links.len()
                + d.vclos
                    .links
                    .iter()
                    .filter(|l| l.peer.starts_with("leaf"))
                    .count()
        );
        assert_eq!(
            st.decision(&x.job).map(|d| d.job.clone()),
            Some(x.job.clone())
        );
        if d.job == y.job {
            assert!(masked > 0, "y names free resources");
        } else {
            assert_eq!(masked, 0, "x holds everything it names");
        }
        st.unmask(m);
        assert_eq!(st.occ, before, "unmasking restores the state");
    }
    st.admit(&y).unwrap();
    // An unknown name is an error naming it.
    let mut bad = y.clone();
    bad.vclos.links[0].peer_port = p(999);
    let e = st.reservation(&bad).unwrap_err().to_string();
    assert!(e.contains("999"), "{e}");
    let mut bad = y.clone();
    bad.gpus[0].gpu = topo.gpus_per_server;
    let e = st.reservation(&bad).unwrap_err().to_string();
    assert!(
        e.contains("no GPU") && e.contains(&bad.gpus[0].server.to_string()),
        "{e}"
    );
}

/// A reservation's lists in one order, for comparing two derivations.
fn sorted(mut r: Reservation) -> Reservation {
    r.gpus.sort_unstable();
    r.uplinks.sort_unstable();
    r.spine_ports.sort_unstable();
    r.ocs_ports.sort_unstable();
    r
}

#[test]
fn a_held_reservation_is_what_its_decision_names() {
    let topo = testbed(true);
    let (x, y) = (two_leaf_job("x"), two_server_job("y", true));
    let mut st = FabricState::new(Arc::clone(&topo));
    assert_eq!(st.held_reservation(&x.job), None, "not admitted");
    st.admit(&x).unwrap();
    st.admit(&y).unwrap();
    for d in [&x, &y] {
        let held = st.held_reservation(&d.job).unwrap();
        assert_eq!(sorted(held), sorted(st.reservation(d).unwrap()));
    }
    let (rx, ry) = (
        st.held_reservation(&x.job).unwrap(),
        st.held_reservation(&y.job).unwrap(),
    );
    assert!(rx.overlaps(&rx) && ry.overlaps(&ry));
    assert!(!rx.overlaps(&ry) && !ry.overlaps(&rx), "admitted together");
    // One shared port is an overlap, in either order and of any kind.
    for kind in 0..4 {
        let mut one = Reservation::default();
        match kind {
            0 => one.gpus.push(ry.gpus[1]),
            1 => one.uplinks.push(*ry.uplinks.last().unwrap()),
            2 => one.spine_ports.push(ry.spine_ports[0]),
            _ => one.ocs_ports.push(*ry.ocs_ports.last().unwrap()),
        }
        assert!(one.overlaps(&ry) && ry.overlaps(&one), "kind {kind}");
        assert!(!one.overlaps(&rx), "kind {kind}");
    }
}

#[test]
fn the_version_changes_with_the_contents_and_only_then() {
    let topo = testbed(true);
    let (x, y) = (two_leaf_job("x"), two_server_job("y", true));
    let mut st = FabricState::new(Arc::clone(&topo));
    let empty = st.version();
    assert_ne!(FabricState::new(Arc::clone(&topo)).version(), empty);
    assert!(st.admit(&x).is_ok());
    let with_x = st.version();
    assert_ne!(with_x, empty);
    // A refused admission changes nothing.
    assert!(st.admit(&x).is_err());
    assert_eq!(st.version(), with_x);
    // A clone keeps the version until either changes, and then they differ.
    let mut copy = st.clone();
    assert_eq!(copy.version(), with_x);
    copy.admit(&y).unwrap();
    st.admit(&y).unwrap();
    assert_ne!(copy.version(), st.version());
    assert_ne!(st.version(), with_x);
    st.release(&y.job).unwrap();
    assert_ne!(st.version(), with_x, "released is a new version");
    // Unmasking an otherwise unchanged state gives its version back ...
    let before = st.version();
    let r = st.reservation(&y).unwrap();
    let m = st.mask(&r);
    assert_ne!(st.version(), before);
    st.unmask(m);
    assert_eq!(st.version(), before);
    // Masking one version by one reservation again is the same contents:
    // the same masked version; by another reservation, a new one.
    let m = st.mask(&r);
    let masked = st.version();
    st.unmask(m);
    let m = st.mask(&r.clone());
    assert_eq!(st.version(), masked);
    st.unmask(m);
    let other = st.reservation(&y).unwrap();
    assert_eq!(other, r, "the same resources");
    let m = st.mask(&other);
    assert_ne!(st.version(), masked, "another reservation");
    st.unmask(m);
    assert_eq!(st.version(), before);
    // ... but not after another change in between.
    let m = st.mask(&r);
    st.release(&x.job).unwrap();
    let changed = st.version();
    st.unmask(m);
    assert_ne!(st.version(), before);
    assert_ne!(st.version(), changed);
    // Masked from a version it was not masked from before: a new version.
    let now = st.version();
    let m = st.mask(&r);
    assert_ne!(st.version(), masked);
    st.unmask(m);
    assert_eq!(st.version(), now);
}
