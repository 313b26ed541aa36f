//! Diagnostic (issue 13, item 3): how much of OCS-vClos's gap to `best`
//! could a better search close? Replays a trace with `best`, `ocs-vclos`
//! and `placement::bound::CountingPlacer` (OCS-vClos with every port-level
//! constraint relaxed to counting: a perfect search with perfect OCS port
//! assignment; module doc) under `--network ideal` semantics, and prints
//! avg JCT, utilisation and network-blocked jobs of each.
//!
//! With `BACKFILL` (`easy` or `slices`, as `vclos replay --backfill`) all
//! three replay with that backfilling instead of FIFO alone, so the bound is
//! read against `best` given the same scheduler. Only OCS-vClos forecasts
//! slices; under `slices` the other two reserve GPUs, as under `easy`
//! (`vclos_sim::replay` backfill module doc).
//!
//! `cargo run --release --example counting_bound -- TOPOLOGY TRACE [BACKFILL]`

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::sync::Arc;

use vclos::placement::bound::CountingPlacer;
use vclos::placement::{self, Placer, Policy};
use vclos::replay::{self, Backfill, ReplayOptions};

fn main() -> anyhow::Result<()> {
    let (topo, trace, backfill) = common::topology_trace_and("counting_bound", "[BACKFILL]")?;
    let backfill: Backfill = match backfill {
        Some(b) => b.parse().map_err(anyhow::Error::msg)?,
        None => Backfill::None,
    };
    let placers: Vec<Box<dyn Placer + Send>> = vec![
        placement::placer(Policy::Best, Arc::clone(&topo))?,
        placement::placer(Policy::OcsVclos, Arc::clone(&topo))?,
        Box::new(CountingPlacer::new(Arc::clone(&topo))),
    ];
    for mut p in placers {
        let opts = ReplayOptions {
            backfill,
            ..ReplayOptions::for_topology(&topo)
        };
        let name = p.name();
        let r = replay::replay(p.as_mut(), &trace, opts)?;
        println!(
            "{name:15} avg JCT {:9.0} s  utilisation {:.3}  network-blocked jobs {:5}  completed {}  backfilled {}",
            r.avg_jct_s,
            r.utilization.unwrap_or(0.0),
            r.blocked_network,
            r.completed,
            r.backfilled_jobs
        );
    }
    Ok(())
}
