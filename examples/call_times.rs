//! Diagnostic (issue 13, item 1): where a replay's decision time goes.
//! Replays a trace with `--network ideal` semantics and splits every
//! `place` call by its outcome (placed, blocked on GPUs, blocked on the
//! network): count, p50/p90/p99/max, calls over 1 ms, calls that hit a
//! search cutoff, total time; then what the slowest 1% of calls (the ones
//! that set the p99) were, and the job sizes (servers) of the calls over
//! 1 ms. Times are wall clock (as `vclos replay` reports them) and thread
//! CPU time (what the call cost, whatever else runs on the machine). Uses
//! mimalloc, as the binary does, so its times match `vclos replay`'s.
//!
//! `cargo run --release --example call_times -- TOPOLOGY TRACE POLICY`
#![allow(clippy::unwrap_used)]

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cpu_time::ThreadTime;
use vclos::decision::Decision;
use vclos::names::JobId;
use vclos::placement::{self, JobRequest, Outcome, PlacementError, Placer, Policy};
use vclos::replay::{self, Ledger, ReplayOptions};

/// One `place` call.
#[derive(Clone, Copy)]
struct Row {
    wall_ns: u64,
    cpu_ns: u64,
    /// 0 placed, 1 blocked on GPUs, 2 blocked on the network, 3 error.
    kind: u8,
    cutoffs: u64,
    gpus: u32,
}

struct Timed {
    inner: Box<dyn Placer + Send>,
    rows: Vec<Row>,
    /// Admissions and releases so far: the fabric state's version.
    version: u64,
    /// Releases so far.
    releases: u64,
    /// Per job size: (version, releases) at its last blocked call.
    last_blocked: std::collections::HashMap<u32, (u64, u64)>,
    /// Calls on a state and size already found blocked (same version),
    /// and on one that only lost capacity since (admissions, no release).
    same_state: u64,
    only_admitted: u64,
}

impl Placer for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let c0 = self.inner.search_cutoffs();
        let cpu = ThreadTime::now();
        let t0 = Instant::now();
        let o = self.inner.place(job);
        let wall_ns = t0.elapsed().as_nanos() as u64;
        let cpu_ns = cpu.elapsed().as_nanos() as u64;
        if let Some(&(v, r)) = self.last_blocked.get(&job.gpus) {
            self.same_state += u64::from(v == self.version);
            self.only_admitted += u64::from(v != self.version && r == self.releases);
        }
        let kind = match &o {
            Ok(Outcome::Placed(_)) => 0,
            Ok(Outcome::Blocked(placement::Blocked::Gpu)) => 1,
            Ok(Outcome::Blocked(_)) => 2,
            Err(_) => 3,
        };
        match kind {
            0 => self.version += 1,
            1 | 2 => {
                self.last_blocked
                    .insert(job.gpus, (self.version, self.releases));
            }
            _ => {}
        }
        self.rows.push(Row {
            wall_ns,
            cpu_ns,
            kind,
            cutoffs: self.inner.search_cutoffs() - c0,
            gpus: job.gpus,
        });
        o
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.version += 1;
        self.releases += 1;
        self.inner.release(job)
    }
    fn fabric(&self) -> Option<&vclos::state::FabricState> {
        self.inner.fabric()
    }
    fn search_cutoffs(&self) -> u64 {
        self.inner.search_cutoffs()
    }
}

/// p50/p90/p99/max in microseconds of `ns`.
fn spread(mut ns: Vec<u64>) -> String {
    ns.sort_unstable();
    let n = ns.len();
    let at = |q: f64| ns[((n as f64 * q) as usize).min(n - 1)] / 1000;
    format!(
        "p50 {}us p90 {}us p99 {}us max {}us",
        at(0.5),
        at(0.9),
        at(0.99),
        ns[n - 1] / 1000
    )
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let topo = Arc::new(vclos::topology::load(Path::new(&a[1])).unwrap());
    let trace = vclos::trace::load(Path::new(&a[2])).unwrap();
    let policy: Policy = a[3].parse().unwrap();
    let mut p = Timed {
        inner: placement::placer(policy, Arc::clone(&topo)).unwrap(),
        rows: vec![],
        version: 0,
        releases: 0,
        last_blocked: Default::default(),
        same_state: 0,
        only_admitted: 0,
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
    eprintln!(
        "all {} calls: wall {}; cpu {}",
        p.rows.len(),
        spread(p.rows.iter().map(|r| r.wall_ns).collect()),
        spread(p.rows.iter().map(|r| r.cpu_ns).collect())
    );
    for kind in 0..3u8 {
        let v: Vec<Row> = p.rows.iter().copied().filter(|r| r.kind == kind).collect();
        if v.is_empty() {
            continue;
        }
        let over1 = v.iter().filter(|r| r.cpu_ns > 1_000_000).count();
        let cut = v.iter().filter(|r| r.cutoffs > 0).count();
        let tot: u64 = v.iter().map(|r| r.cpu_ns).sum();
        eprintln!(
            "kind {kind}: n {} cpu {} >1ms {over1} withcutoff {cut} total {}ms",
            v.len(),
            spread(v.iter().map(|r| r.cpu_ns).collect()),
            tot / 1_000_000
        );
    }
    // The slowest 1% by CPU time: what sets the p99.
    let mut by_cpu = p.rows.clone();
    by_cpu.sort_by_key(|r| std::cmp::Reverse(r.cpu_ns));
    let top = &by_cpu[..p.rows.len().div_ceil(100)];
    let count = |f: &dyn Fn(&Row) -> bool| top.iter().filter(|r| f(r)).count();
    eprintln!(
        "slowest 1% ({} calls, cpu >= {}us): placed {} (with cutoff {}), blocked on network {} (with cutoff {})",
        top.len(),
        top.last().map_or(0, |r| r.cpu_ns / 1000),
        count(&|r| r.kind == 0),
        count(&|r| r.kind == 0 && r.cutoffs > 0),
        count(&|r| r.kind == 2),
        count(&|r| r.kind == 2 && r.cutoffs > 0),
    );
    let mut hist = std::collections::BTreeMap::new();
    for r in p.rows.iter().filter(|r| r.cpu_ns > 1_000_000) {
        *hist.entry(r.gpus / 8).or_insert(0) += 1;
    }
    eprintln!("servers of calls >1ms (cpu): {:?}", hist);
    // What a memo of blocked outcomes per (size, state version) could
    // answer: calls of a size already blocked on this very state, and on a
    // state that has only lost free capacity since (admissions only).
    eprintln!(
        "blocked size repeated on the same state: {}; after admissions only: {}",
        p.same_state, p.only_admitted
    );
}
