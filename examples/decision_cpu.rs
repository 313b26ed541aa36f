//! Diagnostic: thread CPU time of every `place` call along a trace replay,
//! so decision latency can be judged on a shared machine (wall-clock tails
//! there are scheduler time slices, not work).
//!
//! `cargo run --release --example decision_cpu -- TOPOLOGY TRACE POLICY [fifo|sf|edf]`
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cpu_time::ThreadTime;
use vclos::decision::Decision;
use vclos::names::JobId;
use vclos::placement::{placer, JobRequest, Outcome, PlacementError, Placer, Policy};
use vclos::replay::{self, Ledger, QueuePolicy, ReplayOptions};

struct Timed {
    inner: Box<dyn Placer + Send>,
    /// (CPU time, GPUs, placed)
    calls: Vec<(Duration, u32, bool)>,
}

impl Placer for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let c0 = ThreadTime::now();
        let out = self.inner.place(job)?;
        let placed = matches!(out, Outcome::Placed(_));
        self.calls.push((c0.elapsed(), job.gpus, placed));
        Ok(out)
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.inner.release(job)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: decision_cpu TOPOLOGY TRACE POLICY [fifo|sf|edf]");
        std::process::exit(2);
    }
    let topo = Arc::new(vclos::topology::load(Path::new(&args[1])).unwrap());
    let trace = vclos::trace::load(Path::new(&args[2])).unwrap();
    let policy: Policy = args[3].parse().unwrap();
    let queue: QueuePolicy = args.get(4).map_or("fifo", String::as_str).parse().unwrap();
    let mut t = Timed {
        inner: placer(policy, Arc::clone(&topo)).unwrap(),
        calls: Vec::new(),
    };
    let opts = ReplayOptions {
        queue,
        ledger: Ledger::from_topology(&topo),
        ..ReplayOptions::default()
    };
    replay::replay(&mut t, &trace, opts).unwrap();
    let mut v: Vec<Duration> = t.calls.iter().map(|c| c.0).collect();
    v.sort();
    let pct = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    println!(
        "{policy} {queue}: {} place calls, thread CPU p50 {:?} p99 {:?} max {:?}",
        v.len(),
        pct(0.5),
        pct(0.99),
        v[v.len() - 1]
    );
    let mut slow = t.calls.clone();
    slow.sort_by_key(|c| std::cmp::Reverse(c.0));
    for (d, g, placed) in slow.iter().take(8) {
        println!("  {d:?} for {g} GPUs, placed {placed}");
    }
}
