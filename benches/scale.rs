//! Placement at scale (issue 13): 5000-job replays of the hard traces —
//! offered load 0.9, job sizes any multiple of 8 GPUs up to a quarter of
//! the fabric (`vclos trace generate --sizes uniform`) — on 2048 GPUs
//! (`topologies/cluster2048-ocs.yaml`, 8 OCS) and 8192 GPUs (128 leaves x
//! 64 spines x 8 GPUs per server, generated in memory, with and without 8
//! OCS).
//!
//! Before criterion times anything, one replay per (fabric, policy) prints
//! the figures the targets are about: avg JCT and its ratio to
//! `best` on the same fabric, decision p99 and max, search cutoffs, jobs
//! rounded up / unplaceable, isolation violations and busy rewires, and the
//! replay's wall time; then OCS-vClos again with `--rearrange 4` in
//! either `--moves` order (simulation only: a blocked job may move one
//! running job's links, `placement::rearrange`), vClos and OCS-vClos with
//! `--backfill slices --round-up 2`, and OCS-vClos with `--partial-servers`
//! as well (the options under which it meets the avg JCT targets,
//! docs/performance.md, "Partial servers meet the avg JCT targets"),
//! figures only. Criterion then times whole replays of the vClos policies
//! (10 samples each).
//!
//! Run: `cargo bench --bench scale` (the figure table alone, no timing:
//! `cargo bench --bench scale -- nomatch`). Set `VCLOS_SCALE_LOAD` to
//! replay at another offered load.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::placement::rearrange::Moves;
use vclos::placement::{self, Policy};
use vclos::replay::{self, ReplayOptions, Report};
use vclos::topology::{self, generate as topogen, Topology};
use vclos::trace::generate::{self, Sizes};
use vclos::trace::Job;

/// The fabrics: name, topology, GPUs.
fn fabrics() -> Vec<(&'static str, Arc<Topology>)> {
    let gen = |name: &str, ocs: u32| {
        let text = topogen::generate(&topogen::Params::uniform(name, 128, 64, 8, ocs))
            .expect("generate the 8192-GPU fabric");
        Arc::new(topology::from_str(name, &text).expect("8192-GPU topology"))
    };
    let c2048 = include_str!("../topologies/cluster2048-ocs.yaml");
    vec![
        (
            "2048-ocs",
            Arc::new(topology::from_str("cluster2048-ocs.yaml", c2048).expect("cluster2048-ocs")),
        ),
        ("8192-ocs", gen("cluster8192-ocs", 8)),
        ("8192", gen("cluster8192", 0)),
    ]
}

fn trace(gpus: u32) -> Vec<Job> {
    let load = std::env::var("VCLOS_SCALE_LOAD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.9);
    let params = generate::Params {
        jobs: 5000,
        gpus,
        load,
        seed: 1,
        sizes: Sizes::Uniform {
            step: 8,
            max: gpus / 4,
        },
    };
    generate::generate(&params)
        .expect("generate the trace")
        .jobs
}

fn run(policy: Policy, topo: &Arc<Topology>, jobs: &[Job]) -> Report {
    run_moving(policy, topo, jobs, (0, Moves::default()))
}

/// [`run`] with `--rearrange tries --moves moves`.
fn run_moving(
    policy: Policy,
    topo: &Arc<Topology>,
    jobs: &[Job],
    (tries, moves): (usize, Moves),
) -> Report {
    let mut placer = placement::placer(policy, Arc::clone(topo)).expect("placer");
    let opts = ReplayOptions {
        rearrange: tries,
        moves,
        ..ReplayOptions::for_topology(topo)
    };
    replay::replay(placer.as_mut(), jobs, opts).expect("replay")
}

/// A row of the figure table beyond the plain policy.
#[derive(Clone, Copy)]
enum Variant {
    Plain,
    /// `--rearrange 4 --moves` this order.
    Moving(Moves),
    /// [`run_sliced`], with `--partial-servers` or not.
    Sliced {
        partial: bool,
    },
}

/// `policy` with `--backfill slices --round-up 2` and, if `partial`,
/// `--partial-servers` (docs/performance.md, "Slice reservations with
/// rounding up" and "Partial servers meet the avg JCT targets"): the
/// scheduler options under which vClos's avg JCT, and OCS-vClos's with
/// partial servers, come within the targets of FIFO `best`.
fn run_sliced(policy: Policy, topo: &Arc<Topology>, jobs: &[Job], partial: bool) -> Report {
    let options = placement::SliceOptions {
        round_up: 2,
        partial_servers: partial,
        ..Default::default()
    };
    let state = vclos::state::FabricState::new(Arc::clone(topo));
    let mut placer = placement::placer_on(policy, state, options).expect("placer");
    let opts = ReplayOptions {
        backfill: replay::Backfill::Slices {
            depth: replay::DEFAULT_BACKFILL_DEPTH,
        },
        ..ReplayOptions::for_topology(topo)
    };
    replay::replay(placer.as_mut(), jobs, opts).expect("replay")
}

/// The policies worth replaying on a fabric (ocs-vclos needs OCS).
fn policies(topo: &Topology) -> Vec<Policy> {
    let mut v = vec![Policy::Best, Policy::Vclos];
    if !topo.ocs.is_empty() {
        v.push(Policy::OcsVclos);
    }
    v
}

fn bench(c: &mut Criterion) {
    println!(
        "| fabric | policy | avg JCT s | vs best | decision p99 / max | cutoffs | rounded / unplaceable | violations / busy rewires | wall |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let fabrics = fabrics();
    for (name, topo) in &fabrics {
        let jobs = trace(topo.gpu_count() as u32);
        let mut best = None;
        let orders = [Moves::MakeBeforeBreak, Moves::BreakBeforeMake];
        let moving = orders.map(|m| (Policy::OcsVclos, Variant::Moving(m)));
        let moving = moving.into_iter().filter(|_| !topo.ocs.is_empty());
        let plain = policies(topo).into_iter().map(|p| (p, Variant::Plain));
        let sliced = policies(topo).into_iter().filter(|&p| p != Policy::Best);
        let sliced = sliced.map(|p| (p, Variant::Sliced { partial: false }));
        let partial = [(Policy::OcsVclos, Variant::Sliced { partial: true })];
        let partial = partial.into_iter().filter(|_| !topo.ocs.is_empty());
        for (policy, variant) in plain.chain(moving).chain(sliced).chain(partial) {
            let r = match variant {
                Variant::Plain => run(policy, topo, &jobs),
                Variant::Moving(m) => run_moving(policy, topo, &jobs, (4, m)),
                Variant::Sliced { partial } => run_sliced(policy, topo, &jobs, partial),
            };
            let base = *best.get_or_insert(r.avg_jct_s);
            let policy = match variant {
                Variant::Plain => policy.to_string(),
                Variant::Moving(m) => format!(
                    "{policy} --rearrange 4 --moves {m} ({} moves)",
                    r.moved_jobs
                ),
                Variant::Sliced { partial: false } => {
                    format!("{policy} --backfill slices --round-up 2")
                }
                Variant::Sliced { partial: true } => {
                    format!("{policy} --backfill slices --round-up 2 --partial-servers")
                }
            };
            println!(
                "| {name} | {policy} | {:.0} | {:.2}x | {:.2} / {:.1} ms | {} | {} / {} | {} / {} | {:.1} s |",
                r.avg_jct_s,
                r.avg_jct_s / base,
                r.decision_p99_us / 1e3,
                r.decision_max_us / 1e3,
                r.search_cutoffs,
                r.rounded_jobs,
                r.unplaceable,
                r.isolation_violations,
                r.busy_rewires,
                r.wall_ms / 1e3,
            );
        }
    }
    let mut g = c.benchmark_group("replay_5000_uniform");
    g.sample_size(10);
    for (name, topo) in &fabrics {
        let jobs = trace(topo.gpu_count() as u32);
        for policy in policies(topo).into_iter().filter(|p| *p != Policy::Best) {
            g.bench_function(format!("{name}/{policy}"), |b| {
                b.iter(|| run(policy, topo, &jobs))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
