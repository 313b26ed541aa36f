//! Diagnostic (issue 13, item 1): where a replay's decision time goes.
//! Replays a trace with `--network ideal` semantics and splits every
//! `place` call by its outcome (placed, blocked on GPUs, blocked on the
//! network): count, p50/p90/p99/max, calls over 1 ms, calls that hit a
//! search cutoff, total time; then the job sizes (servers) of the calls
//! over 1 ms. Uses mimalloc, as the binary does, so its times match
//! `vclos replay`'s.
//!
//! `cargo run --release --example call_times -- TOPOLOGY TRACE POLICY`
#![allow(clippy::unwrap_used)]

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use vclos::decision::Decision;
use vclos::names::JobId;
use vclos::placement::{self, JobRequest, Outcome, PlacementError, Placer, Policy};
use vclos::replay::{self, Ledger, ReplayOptions};

struct Timed {
    inner: Box<dyn Placer + Send>,
    rows: Vec<(u64, u8, u64, u32)>,
}
impl Placer for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let c0 = self.inner.search_cutoffs();
        let t0 = Instant::now();
        let o = self.inner.place(job);
        let ns = t0.elapsed().as_nanos() as u64;
        let kind = match &o {
            Ok(Outcome::Placed(_)) => 0,
            Ok(Outcome::Blocked(placement::Blocked::Gpu)) => 1,
            Ok(Outcome::Blocked(_)) => 2,
            Err(_) => 3,
        };
        self.rows
            .push((ns, kind, self.inner.search_cutoffs() - c0, job.gpus));
        o
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.inner.release(job)
    }
    fn fabric(&self) -> Option<&vclos::state::FabricState> {
        self.inner.fabric()
    }
    fn search_cutoffs(&self) -> u64 {
        self.inner.search_cutoffs()
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let topo = Arc::new(vclos::topology::load(Path::new(&a[1])).unwrap());
    let trace = vclos::trace::load(Path::new(&a[2])).unwrap();
    let policy: Policy = a[3].parse().unwrap();
    let mut p = Timed {
        inner: placement::placer(policy, Arc::clone(&topo)).unwrap(),
        rows: vec![],
    };
    let opts = ReplayOptions {
        topology: topo.name.clone(),
        total_gpus: Some(topo.gpu_count() as u32),
        ledger: Ledger::from_topology(&topo),
        ..ReplayOptions::default()
    };
    let r = replay::replay(&mut p, &trace, opts).unwrap();
    eprintln!(
        "avg_jct {:.0} p99 {:.0}us max {:.0}us cutoffs {}",
        r.avg_jct_s, r.decision_p99_us, r.decision_max_us, r.search_cutoffs
    );
    for kind in 0..3u8 {
        let mut v: Vec<&(u64, u8, u64, u32)> = p.rows.iter().filter(|r| r.1 == kind).collect();
        v.sort();
        let n = v.len();
        if n == 0 {
            continue;
        }
        let over1 = v.iter().filter(|r| r.0 > 1_000_000).count();
        let cut = v.iter().filter(|r| r.2 > 0).count();
        let tot: u64 = v.iter().map(|r| r.0).sum();
        eprintln!("kind {kind}: n {n} p50 {}us p90 {}us p99 {}us max {}us >1ms {over1} withcutoff {cut} total {}ms", v[n/2].0/1000, v[n*9/10].0/1000, v[n*99/100].0/1000, v[n-1].0/1000, tot/1_000_000);
    }
    let mut big: Vec<&(u64, u8, u64, u32)> = p.rows.iter().filter(|r| r.0 > 1_000_000).collect();
    big.sort_by_key(|r| r.3);
    let mut hist = std::collections::BTreeMap::new();
    for r in &big {
        *hist.entry(r.3 / 8).or_insert(0) += 1;
    }
    eprintln!("servers of calls >1ms: {:?}", hist);
}
