//! Replay throughput: a 5000-job synthetic trace through each placement
//! policy on the 2048-GPU fabric (target: <= 2 s per replay).

use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::placement::{self, Policy};
use vclos::replay::{self, Ledger, ReplayOptions};
use vclos::trace::generate;

fn bench(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/cluster2048-ocs.yaml");
    let Ok(topo) = vclos::topology::load(&path) else {
        panic!("cannot load {}", path.display());
    };
    let topo = Arc::new(topo);
    let params = generate::Params {
        jobs: 5000,
        gpus: 2048,
        load: 0.7,
        seed: 1,
        sizes: generate::Sizes::Helios,
    };
    let Ok(trace) = generate::generate(&params) else {
        panic!("cannot generate the trace");
    };
    let mut group = c.benchmark_group("replay_5000_jobs_2048_gpus");
    group.sample_size(10);
    for policy in Policy::ALL {
        group.bench_function(policy.name(), |b| {
            b.iter(|| {
                let Ok(mut placer) = placement::placer(policy, Arc::clone(&topo)) else {
                    panic!("no placer for {policy}");
                };
                let opts = ReplayOptions {
                    topology: topo.name.clone(),
                    total_gpus: Some(2048),
                    ledger: Ledger::from_topology(&topo),
                    ..ReplayOptions::default()
                };
                replay::replay(placer.as_mut(), &trace.jobs, opts)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
