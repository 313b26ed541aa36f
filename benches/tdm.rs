//! `vclos tdm plan` at 003's scale: 256 pods in 32 pod groups of 8 (one
//! 128-port OCS each, 16 uplinks per pod), 003's default job mix
//! (`vclos::tdm::synth`, 12 jobs drawn per group, context 1k tokens so that
//! TDM has something to gain), both variants.
//!
//! Run: `cargo bench --bench tdm`. Budget (issue 19): all 32 groups planned
//! in <= 1 s.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::tdm::{plan, synth, Settings, Variant};
use vclos::topology::{self, generate};

fn bench(c: &mut Criterion) {
    let text = generate::generate_pods(&generate::PodParams {
        name: "pods256".into(),
        pods: 256,
        pod_uplinks: 16,
        ocs_ports: 128,
        gpus_per_server: 8,
        servers_per_pod: None,
        allow_oversubscription: false,
    })
    .expect("pod fabric");
    let t = topology::from_str("pods256.yaml", &text).expect("loads");
    let jobs = synth::synthetic(&t, 12, 1024, 1);
    let mut g = c.benchmark_group("tdm_plan_256_pods");
    g.sample_size(10);
    for (name, variant) in [("tdm", Variant::Tdm), ("bi-stage", Variant::BiStage)] {
        let s = Settings {
            variant,
            ..Settings::default()
        };
        let schedules = plan(&t, &jobs, "synthetic", s).expect("plans");
        assert_eq!(schedules.len(), 32);
        let gained = schedules
            .iter()
            .filter(|s| s.round_s < s.baseline_round_s)
            .count();
        eprintln!(
            "{name}: {} jobs, {gained} of 32 groups below the baseline",
            jobs.jobs.len()
        );
        g.bench_function(name, |b| {
            b.iter(|| plan(black_box(&t), black_box(&jobs), "synthetic", s))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
