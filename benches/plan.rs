//! Rendering and diffing a whole fabric: cluster2048-ocs (64 leaves, 32
//! spines, 8 OCS) with 200 running jobs.
//!
//! The 200 decisions are built synthetically and validated by the fabric
//! state: job k pins one GPU on each of two leaves to the same uplink index,
//! reaching one spine through the OCS's initial patches, so every job
//! touches two leaves and one spine VRF and no two jobs share a port.
//!
//! Run: `cargo bench --bench plan`. Budget: every device rendered and
//! diffed in <= 20 ms.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::decision::{
    Decision, GpuRef, OcsHop, ReservedLink, SourceRoute, Stage, VirtualClos, VirtualLeaf,
};
use vclos::dialect::{claimed, dialect};
use vclos::diff::device_diff;
use vclos::intent::{baseline, build};
use vclos::names::JobId;
use vclos::plan::{device_plans, Running};
use vclos::state::FabricState;
use vclos::topology::{self, PortRef, Topology};

/// Where uplink `u` of leaf `l` lands through its OCS's initial patch.
fn link(t: &Topology, l: usize, u: usize) -> ReservedLink {
    let leaf = &t.leaves[l];
    let Some(PortRef::Ocs(o, p)) = leaf.uplink_peer[u] else {
        panic!("uplink not on an OCS")
    };
    let ocs = t.ocs_dev(o);
    let far = ocs
        .patches
        .iter()
        .find_map(|&(a, b)| (a == p).then_some(b).or((b == p).then_some(a)))
        .expect("patched");
    let Some(PortRef::Spine(s, q)) = ocs.port_peer[far as usize] else {
        panic!("far side not a spine")
    };
    ReservedLink {
        leaf: leaf.name.clone(),
        uplink: leaf.uplinks[u].clone(),
        peer: t.spine(s).name.clone(),
        peer_port: t.spine(s).ports[q as usize].clone(),
        via: Some(OcsHop {
            ocs: ocs.name.clone(),
            leaf_side: ocs.ports[p as usize].clone(),
            far_side: ocs.ports[far as usize].clone(),
        }),
    }
}

fn decisions(t: &Topology, n: usize) -> Vec<Decision> {
    let leaves = t.leaves.len();
    (0..n)
        .map(|k| {
            let round = 2 * k / leaves;
            let pair = [(2 * k) % leaves, (2 * k + 1) % leaves];
            let mut d = Decision {
                requested_gpus: None,
                sharing: None,
                job: JobId::new(format!("job{k}")).expect("valid"),
                stage: Stage::Manual,
                gpus: Vec::new(),
                vclos: VirtualClos::default(),
                source_routes: Vec::new(),
            };
            for l in pair {
                let leaf = &t.leaves[l];
                let (server, gpu) = leaf.server_port_owner[round].expect("owned");
                d.gpus.push(GpuRef {
                    server: t.server(server).name.clone(),
                    gpu,
                });
                d.vclos.leaves.push(VirtualLeaf {
                    leaf: leaf.name.clone(),
                    server_ports: vec![leaf.server_ports[round].clone()],
                });
                let r = link(t, l, round);
                d.vclos.spines.push(r.peer.clone());
                d.source_routes.push(SourceRoute {
                    leaf: leaf.name.clone(),
                    server_port: leaf.server_ports[round].clone(),
                    uplink: r.uplink.clone(),
                });
                d.vclos.links.push(r);
            }
            d.vclos.spines.dedup();
            d
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/cluster2048-ocs.yaml");
    let t = Arc::new(topology::load(&path).expect("topology"));
    let jobs = decisions(&t, 200);
    FabricState::from_decisions(Arc::clone(&t), &jobs).expect("the 200 jobs are admissible");
    let base = baseline(&t).expect("baseline");
    let held = build(&t, &jobs).expect("intent");

    c.bench_function("intent_build_200_jobs", |b| {
        b.iter(|| build(black_box(&t), black_box(&jobs)).expect("intent"))
    });

    c.bench_function("render_all_devices_200_jobs", |b| {
        b.iter(|| {
            let mut bytes = 0;
            for dev in &held.devices {
                let d = dialect(dev.dialect);
                bytes += d.render(&claimed(d, &dev.items)).len();
            }
            bytes
        })
    });

    // The budgeted figure: every device rendered and diffed (text and
    // commands) from the idle fabric to 200 running jobs.
    c.bench_function("render_and_diff_all_devices_200_jobs", |b| {
        b.iter(|| {
            let mut n = 0;
            for (old, new) in base.devices.iter().zip(&held.devices) {
                // Renders both sides, diffs the text, renders the commands.
                let diff = device_diff(old, new);
                n += diff.diff.len() + diff.commands.len();
            }
            n
        })
    });

    // What `vclos plan` does for the 200th admission: both intents and the
    // diff of every device (only changed devices are rendered).
    c.bench_function("plan_admit_200th_job", |b| {
        b.iter(|| {
            let cur = build(&t, &jobs[..199]).expect("intent");
            let cand = build(&t, &jobs).expect("intent");
            device_plans(&t, &cur, &cand, &Running::new(), true).len()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
