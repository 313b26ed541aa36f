//! Admission end to end on the emulated testbed-ocs (in process, real
//! drivers over loopback SSH and Telnet): (a) a vClos job, no OCS change;
//! (b) an OCS-vClos job rewiring the OCS at 50 ms switching; (c) the same at
//! 0 ms; (d) = (b) with a fresh session per device per transaction (no
//! pool), for comparison. Each iteration times one `submit` (place, plan,
//! journal, transaction, state.json); the release that resets the fabric is
//! not timed.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::controller::{NoProgress, TopologyDrivers};
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::jobs::journal::{self, Journal, Operation};
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::state::store;
use vclos::topology;

const TESTBED: &str = include_str!("../topologies/testbed-ocs.yaml");

fn setup(
    rt: &tokio::runtime::Runtime,
    delay: Duration,
    policy: Policy,
    pooled: bool,
) -> (EmulatedFabric, Fabric, tempfile::TempDir) {
    std::env::set_var("VCLOS_BENCH_PW", "admin");
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let base = Arc::new(topology::from_str("t", TESTBED).unwrap());
        let opts = FabricOptions {
            switch_delay: delay,
            ..FabricOptions::default()
        };
        let fab = EmulatedFabric::start(base, opts).await.unwrap();
        let text = fab
            .aim("t", TESTBED, &dir.path().join("kh"), "VCLOS_BENCH_PW")
            .unwrap();
        let topo = Arc::new(topology::from_str("emu.yaml", &text).unwrap());
        let state = dir.path().join("state");
        vclos::state::store::init(&state, &topo.name).unwrap();
        let f = if pooled {
            Fabric::load(topo, state).unwrap()
        } else {
            let fresh = Arc::new(TopologyDrivers::new(topo.clone()));
            Fabric::load_with(topo, state, fresh).unwrap()
        };
        let mut f = f.with_policy(policy);
        f.reconcile(true, &NoProgress).await.unwrap();
        (fab, f, dir)
    })
}

fn admission(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut g = c.benchmark_group("admission");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    let ms50 = Duration::from_millis(50);
    let cases = [
        ("vclos_no_ocs", Duration::ZERO, Policy::Vclos, 32, true),
        ("ocs_rewire_50ms", ms50, Policy::OcsVclos, 24, true),
        ("ocs_rewire_0ms", Duration::ZERO, Policy::OcsVclos, 24, true),
        (
            "ocs_rewire_50ms_unpooled",
            ms50,
            Policy::OcsVclos,
            24,
            false,
        ),
    ];
    for (name, delay, policy, gpus, pooled) in cases {
        let (_fab, mut f, _dir) = setup(&rt, delay, policy, pooled);
        let job = JobId::new("bench").unwrap();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    let r = rt.block_on(f.submit(&job, gpus, &NoProgress)).unwrap();
                    total += t.elapsed();
                    assert!(r.report.is_committed(), "{}", r.report);
                    let r = rt.block_on(f.release(&job, &NoProgress)).unwrap();
                    assert!(r.report.is_committed(), "{}", r.report);
                }
                total
            })
        });
        // One annotated run: where the time goes.
        let t = Instant::now();
        let plan = f.plan_submit(&job, gpus).unwrap();
        let planned = t.elapsed();
        let report = rt.block_on(f.apply(&plan, &NoProgress)).unwrap();
        let total = t.elapsed();
        let stages: Vec<String> = report
            .stage_timings
            .iter()
            .map(|s| {
                format!(
                    "{}{}={:.1}ms",
                    s.phase,
                    s.stage.map(|x| format!(" {x}")).unwrap_or_default(),
                    s.duration.as_secs_f64() * 1e3
                )
            })
            .collect();
        eprintln!(
            "{name}: total {:.1} ms = place+plan {:.2} ms + transaction {:.1} ms + checks/journal/state {:.2} ms (disk writes alone: {:.2} ms, the journal's overlapping prepare); {}",
            total.as_secs_f64() * 1e3,
            planned.as_secs_f64() * 1e3,
            report.duration.as_secs_f64() * 1e3,
            (total - planned - report.duration).as_secs_f64() * 1e3,
            disk_writes(&f, &plan).as_secs_f64() * 1e3,
            stages.join(", ")
        );
        rt.block_on(f.release(&job, &NoProgress)).unwrap();
        if let Some(p) = f.sessions() {
            eprintln!("{name}: sessions {:?}", p.stats());
        }
        rt.block_on(f.shutdown());
    }
    g.finish();
}

/// What an apply's durable writes cost on this disk, one after the other:
/// the journal created and removed and state.json saved, as `Fabric::apply`
/// does (where the journal's sync overlaps prepare), in a scratch directory
/// next to the fabric's.
fn disk_writes(f: &Fabric, plan: &vclos::plan::Plan) -> Duration {
    let dir = tempfile::tempdir_in(f.dir().unwrap().parent().unwrap()).unwrap();
    let held = f.jobs();
    let j = Journal::new(
        &f.topology().name,
        Operation::Admit,
        plan.decision.clone(),
        held.clone(),
        held.clone(),
        plan.devices.iter().map(|d| d.diff.device.clone()).collect(),
    );
    let t = Instant::now();
    journal::create(dir.path(), &j).unwrap();
    store::save_journaled(dir.path(), &f.topology().name, &held).unwrap();
    journal::remove(dir.path()).unwrap();
    t.elapsed()
}

criterion_group!(benches, admission);
criterion_main!(benches);
