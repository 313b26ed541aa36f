//! Diagnostic (issue 15): how much of titan's wait could a better router
//! win? Replays a trace with `best`, `titan` and
//! `TitanPlacer::without_spines` (titan whose check needs room only on
//! some link up from and some link down into each leaf, not on two links
//! meeting at one spine: a perfect router; module doc of
//! `network::routes`, `Router::without_spines`), under the ideal network
//! (titan's jobs run at full rate in the fair-share model, so their times
//! are the same), and prints avg JWT, blocks and utilisation of each;
//! then `TitanPlacer::spine_sets` (titan that moves running jobs' flows to
//! other spines to make room: `placement::spine_sets`, docs/titan.md 6.6-6.7)
//! with what it moved. The last is slow (minutes on a 3 000-job trace at
//! load 0.9): each refused candidate may place every running job again.
//!
//! `cargo run --release --example titan_bound -- TOPOLOGY TRACE`

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::sync::Arc;

use vclos::placement::titan::TitanPlacer;
use vclos::placement::{self, Placer, Policy};
use vclos::replay::{self, ReplayOptions};

fn main() -> anyhow::Result<()> {
    let (topo, trace) = common::topology_and_trace("titan_bound")?;
    let placers: Vec<(&str, Box<dyn Placer + Send>)> = vec![
        ("best", placement::placer(Policy::Best, Arc::clone(&topo))?),
        (
            "titan",
            placement::placer(Policy::Titan, Arc::clone(&topo))?,
        ),
        (
            "titan, no spines",
            Box::new(TitanPlacer::without_spines(Arc::clone(&topo))),
        ),
    ];
    for (name, mut p) in placers {
        let opts = ReplayOptions::for_topology(&topo);
        let r = replay::replay(p.as_mut(), &trace, opts)?;
        println!(
            "{name:17} avg JWT {:8.0} s  avg JCT {:8.0} s  blocked GPU / network jobs {:4} / {:4}  utilisation {:.3}  decision p99 / max {:.2} / {:.1} ms",
            r.avg_jwt_s,
            r.avg_jct_s,
            r.blocked_gpu,
            r.blocked_network,
            r.utilization.unwrap_or(0.0),
            r.decision_p99_us / 1e3,
            r.decision_max_us / 1e3,
        );
    }
    if let Some(mut p) = TitanPlacer::spine_sets(Arc::clone(&topo)) {
        let opts = ReplayOptions::for_topology(&topo);
        let r = replay::replay(&mut p, &trace, opts)?;
        println!(
            "{:17} avg JWT {:8.0} s  avg JCT {:8.0} s  blocked GPU / network jobs {:4} / {:4}  utilisation {:.3}  decision p99 / max {:.2} / {:.1} ms\n{:17} {:?}",
            "titan, spine sets",
            r.avg_jwt_s,
            r.avg_jct_s,
            r.blocked_gpu,
            r.blocked_network,
            r.utilization.unwrap_or(0.0),
            r.decision_p99_us / 1e3,
            r.decision_max_us / 1e3,
            "",
            p.moves().unwrap_or_default(),
        );
    }
    Ok(())
}
