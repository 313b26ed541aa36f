//! What the diagnostic examples share: their `TOPOLOGY TRACE` arguments.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use vclos::topology::Topology;
use vclos::trace::Job;

/// The topology and trace named by the two arguments, or a usage line for
/// `example` / an error naming the file that would not load.
#[allow(dead_code)] // not every example takes exactly two
pub fn topology_and_trace(example: &str) -> anyhow::Result<(Arc<Topology>, Vec<Job>)> {
    let (topo, trace, _) = topology_trace_and(example, "")?;
    Ok((topo, trace))
}

/// [`topology_and_trace`], with one optional argument after the two
/// (`extra`, as the usage line shows it; `""`: none allowed).
#[allow(dead_code)] // not every example takes one
pub fn topology_trace_and(
    example: &str,
    extra: &str,
) -> anyhow::Result<(Arc<Topology>, Vec<Job>, Option<String>)> {
    let a: Vec<String> = std::env::args().collect();
    let (topo, trace, more) = match &a[..] {
        [_, topo, trace] => (topo, trace, None),
        [_, topo, trace, more] if !extra.is_empty() => (topo, trace, Some(more.clone())),
        _ => anyhow::bail!(
            "usage: cargo run --release --example {example} -- TOPOLOGY TRACE {extra}"
        ),
    };
    let topo =
        vclos::topology::load(Path::new(topo)).with_context(|| format!("topology {topo}"))?;
    let trace = vclos::trace::load(Path::new(trace)).with_context(|| format!("trace {trace}"))?;
    Ok((Arc::new(topo), trace, more))
}
