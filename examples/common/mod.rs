//! What the diagnostic examples share: their `TOPOLOGY TRACE` arguments.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use vclos::topology::Topology;
use vclos::trace::Job;

/// The topology and trace named by the two arguments, or a usage line for
/// `example` / an error naming the file that would not load.
pub fn topology_and_trace(example: &str) -> anyhow::Result<(Arc<Topology>, Vec<Job>)> {
    let a: Vec<String> = std::env::args().collect();
    let [_, topo, trace] = &a[..] else {
        anyhow::bail!("usage: cargo run --release --example {example} -- TOPOLOGY TRACE");
    };
    let topo =
        vclos::topology::load(Path::new(topo)).with_context(|| format!("topology {topo}"))?;
    let trace = vclos::trace::load(Path::new(trace)).with_context(|| format!("trace {trace}"))?;
    Ok((Arc::new(topo), trace))
}
