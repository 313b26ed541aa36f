//! Diagnostic (issue 13, item 3): how much of OCS-vClos's gap to `best`
//! could a better search close? Replays a trace with `best`, `ocs-vclos`
//! and `placement::bound::CountingPlacer` (OCS-vClos with every port-level
//! constraint relaxed to counting: a perfect search with perfect OCS port
//! assignment; module doc) under `--network ideal` semantics, and prints
//! avg JCT, utilisation and network-blocked jobs of each.
//!
//! `cargo run --release --example counting_bound -- TOPOLOGY TRACE`

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::sync::Arc;

use vclos::placement::bound::CountingPlacer;
use vclos::placement::{self, Placer, Policy};
use vclos::replay::{self, ReplayOptions};

fn main() -> anyhow::Result<()> {
    let (topo, trace) = common::topology_and_trace("counting_bound")?;
    let placers: Vec<Box<dyn Placer + Send>> = vec![
        placement::placer(Policy::Best, Arc::clone(&topo))?,
        placement::placer(Policy::OcsVclos, Arc::clone(&topo))?,
        Box::new(CountingPlacer::new(Arc::clone(&topo))),
    ];
    for mut p in placers {
        let opts = ReplayOptions::for_topology(&topo);
        let name = p.name();
        let r = replay::replay(p.as_mut(), &trace, opts)?;
        println!(
            "{name:15} avg JCT {:9.0} s  utilisation {:.3}  network-blocked jobs {:5}  completed {}",
            r.avg_jct_s,
            r.utilization.unwrap_or(0.0),
            r.blocked_network,
            r.completed
        );
    }
    Ok(())
}
