//! Admission end to end on the emulated testbed-ocs (in process, real
//! drivers over loopback SSH and Telnet): (a) a vClos job, no OCS change;
//! (b) an OCS-vClos job rewiring the OCS at 50 ms switching; (c) the same at
//! 0 ms. Each iteration times one `submit` (place, plan, journal, transaction,
//! state.json); the release that resets the fabric is not timed.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::controller::NoProgress;
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::topology;

const TESTBED: &str = include_str!("../topologies/testbed-ocs.yaml");

fn setup(
    rt: &tokio::runtime::Runtime,
    delay: Duration,
    policy: Policy,
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
        let mut f = Fabric::load(topo, dir.path().join("state"))
            .unwrap()
            .with_policy(policy);
        f.reconcile(true, &NoProgress).await.unwrap();
        (fab, f, dir)
    })
}

fn admission(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut g = c.benchmark_group("admission");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    let cases = [
        ("vclos_no_ocs", Duration::ZERO, Policy::Vclos, 32),
        (
            "ocs_rewire_50ms",
            Duration::from_millis(50),
            Policy::OcsVclos,
            24,
        ),
        ("ocs_rewire_0ms", Duration::ZERO, Policy::OcsVclos, 24),
    ];
    for (name, delay, policy, gpus) in cases {
        let (_fab, mut f, _dir) = setup(&rt, delay, policy);
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
            "{name}: total {:.1} ms = place+plan {:.2} ms + transaction {:.1} ms + journal/state {:.2} ms; {}",
            total.as_secs_f64() * 1e3,
            planned.as_secs_f64() * 1e3,
            report.duration.as_secs_f64() * 1e3,
            (total - planned - report.duration).as_secs_f64() * 1e3,
            stages.join(", ")
        );
        rt.block_on(f.release(&job, &NoProgress)).unwrap();
    }
    g.finish();
}

criterion_group!(benches, admission);
criterion_main!(benches);
