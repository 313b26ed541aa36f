//! Diagnostic (issue 13): every instance OCS-vClos's exact Stage 3 search
//! is given while a trace is replayed, one JSON object a line, with the
//! search's answer (`slice`, `none`, `cutoff`, or `rescued`: cut off and
//! then placed by the spines-first try). `tools/stage3_ilp.py`
//! solves them again as an ILP of the paper's Appendix A.3 (HiGHS): it
//! checks every `none` (a proof of "no slice") and says which `cutoff`
//! shapes had a slice (docs/performance.md, "What the cut-off shapes are").
//!
//! `cargo run --release --example stage3_instances -- TOPOLOGY TRACE > instances.jsonl`

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::io::Write as _;
use std::sync::Arc;

use vclos::placement::{self, Policy};
use vclos::replay::{self, ReplayOptions};

fn main() -> anyhow::Result<()> {
    let (topo, trace) = common::topology_and_trace("stage3_instances")?;
    let mut placer = placement::placer(Policy::OcsVclos, Arc::clone(&topo))?;
    placement::record_instances(true);
    let report = replay::replay(placer.as_mut(), &trace, ReplayOptions::for_topology(&topo))?;
    let found = placement::record_instances(false);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for inst in &found {
        serde_json::to_writer(&mut out, inst)?;
        writeln!(out)?;
    }
    out.flush()?;
    let count = |o| found.iter().filter(|i| i.outcome == o).count();
    eprintln!(
        "{} instances ({} cut off and left so, {} cut off and placed by spines first; \
         the replay counted {} search cutoffs)",
        found.len(),
        count(placement::Stage3Outcome::Cutoff),
        count(placement::Stage3Outcome::Rescued),
        report.search_cutoffs
    );
    Ok(())
}
