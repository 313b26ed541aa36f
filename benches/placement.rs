//! Placement decision latency at high occupancy.
//!
//! For each fabric (512 and 2048 GPUs from `topologies/`, 8192 GPUs
//! generated in memory: 128 leaves x 64 spines x 8 GPUs, 8 OCS) and each of
//! vclos / ocs-vclos, the fabric is first filled with random jobs (with
//! churn, so it is fragmented) to 80-90% of its GPUs. Each measured step
//! then places one random multi-server probe job and releases it again, so
//! the fabric stays at the same occupancy; blocked probes count too (an
//! infeasible search is the slow case). Criterion reports place+release;
//! before that, a plain loop prints p50/p99/max of `place` alone.
//!
//! Run: `cargo bench --bench placement -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cpu_time::ThreadTime;
use criterion::{criterion_group, criterion_main, Criterion};
use vclos::names::JobId;
use vclos::placement::{placer, JobRequest, Outcome, Placer, Policy};
use vclos::topology::{self, generate, Topology};

/// Deterministic xorshift so every run measures the same states.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Job sizes, roughly Helios-like: many small jobs, some large ones.
const SIZES: [u32; 14] = [1, 1, 2, 4, 8, 8, 16, 16, 24, 32, 40, 64, 72, 128];
const PROBES: [u32; 8] = [16, 24, 32, 40, 64, 72, 104, 128];

fn fabric(name: &str) -> Arc<Topology> {
    let text = match name {
        "512" => include_str!("../topologies/cluster512.yaml").to_string(),
        "512-ocs" => include_str!("../topologies/cluster512-ocs.yaml").to_string(),
        "2048" => include_str!("../topologies/cluster2048.yaml").to_string(),
        "2048-ocs" => include_str!("../topologies/cluster2048-ocs.yaml").to_string(),
        _ => generate::generate(&generate::Params::uniform(
            "cluster8192",
            128,
            64,
            8,
            if name.ends_with("ocs") { 8 } else { 0 },
        ))
        .expect("generate 8192"),
    };
    Arc::new(topology::from_str(name, &text).expect("topology"))
}

fn job(i: usize) -> JobId {
    JobId::new(format!("j{i}")).expect("job id")
}

/// Fill to 80-90% of GPUs with churn; returns the placer and its GPU use.
fn filled(policy: Policy, topo: Arc<Topology>, rng: &mut Rng) -> (Box<dyn Placer + Send>, f64) {
    let total = topo.gpu_count() as u32;
    let mut p = placer(policy, topo).expect("placer");
    let mut live: Vec<(JobId, u32)> = Vec::new();
    let mut used = 0u32;
    let mut next = 0usize;
    for round in 0..3 {
        let target = if round < 2 {
            total * 9 / 10
        } else {
            total * 85 / 100
        };
        let mut misses = 0;
        while used < target && misses < 200 {
            let n = SIZES[rng.below(SIZES.len() as u64) as usize];
            let id = job(next);
            next += 1;
            match p.place(&JobRequest::new(id.clone(), n)).expect("place") {
                Outcome::Placed(d) => {
                    used += d.gpus.len() as u32;
                    live.push((id, d.gpus.len() as u32));
                }
                Outcome::Blocked(_) => misses += 1,
            }
        }
        if round < 2 {
            // Release a random third to fragment the fabric.
            for _ in 0..live.len() / 3 {
                let (id, n) = live.swap_remove(rng.below(live.len() as u64) as usize);
                p.release(&id).expect("release");
                used -= n;
            }
        }
    }
    (p, f64::from(used) / f64::from(total))
}

/// One probe: wall time and thread CPU time of `place`, whether it placed.
fn probe(p: &mut Box<dyn Placer + Send>, rng: &mut Rng, id: &JobId) -> (Duration, Duration, bool) {
    let n = PROBES[rng.below(PROBES.len() as u64) as usize];
    let c0 = ThreadTime::now();
    let t0 = Instant::now();
    let out = p.place(&JobRequest::new(id.clone(), n)).expect("place");
    let dt = t0.elapsed();
    let cpu = c0.elapsed();
    let placed = matches!(out, Outcome::Placed(_));
    if placed {
        p.release(id).expect("release");
    }
    (dt, cpu, placed)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("place");
    for (fab, policy) in [
        ("512", Policy::Vclos),
        ("512-ocs", Policy::OcsVclos),
        ("2048", Policy::Vclos),
        ("2048-ocs", Policy::OcsVclos),
        ("8192", Policy::Vclos),
        ("8192-ocs", Policy::OcsVclos),
    ] {
        let mut rng = Rng(0x5eed_0000_0000_0001 ^ fab.len() as u64);
        let (mut p, occ) = filled(policy, fabric(fab), &mut rng);
        let id = job(usize::MAX / 2);
        let mut times: Vec<Duration> = Vec::new();
        let mut cpu: Vec<Duration> = Vec::new();
        let mut placed = 0;
        for _ in 0..2000 {
            let (dt, c, ok) = probe(&mut p, &mut rng, &id);
            times.push(dt);
            cpu.push(c);
            placed += usize::from(ok);
        }
        times.sort();
        cpu.sort();
        let pct = |v: &[Duration], q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
        println!(
            "{policy} on {fab} GPUs at {:.0}% GPU use ({placed}/2000 probes placed): \
             wall p50 {:?} p99 {:?} max {:?}; thread CPU p50 {:?} p99 {:?} max {:?}",
            occ * 100.0,
            pct(&times, 0.5),
            pct(&times, 0.99),
            times[times.len() - 1],
            pct(&cpu, 0.5),
            pct(&cpu, 0.99),
            cpu[cpu.len() - 1],
        );
        g.bench_function(format!("{policy}/{fab}"), |b| {
            b.iter(|| black_box(probe(&mut p, &mut rng, &id)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
