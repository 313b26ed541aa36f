//! Diagnostic: of the head attempts vClos blocks for lack of network
//! resources, how many could OCS-vClos place on the very same fabric state?
//!
//! End-to-end replays of two policies diverge after the first different
//! decision, so their blocked counts compare different histories. This probe
//! removes that noise: it replays with vClos and, at every network-blocked
//! attempt, hands a copy of vClos's fabric state to an OCS-vClos placer.
//!
//! `cargo run --release --example ocs_rescue -- TOPOLOGY TRACE [fifo|sf|edf]`
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use vclos::decision::Decision;
use vclos::names::JobId;
use vclos::placement::{
    Blocked, JobRequest, OcsVclosPlacer, Outcome, PlacementError, Placer, VclosPlacer,
};
use vclos::replay::{self, Ledger, QueuePolicy, ReplayOptions};

struct Probe {
    inner: VclosPlacer,
    network_blocked: u64,
    rescued: u64,
}

impl Placer for Probe {
    fn name(&self) -> &'static str {
        "vclos"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let outcome = self.inner.place(job)?;
        if outcome == Outcome::Blocked(Blocked::Network) {
            self.network_blocked += 1;
            if let Some(state) = self.inner.fabric() {
                let mut ocs = OcsVclosPlacer::with_state(state.clone());
                if matches!(ocs.place(job)?, Outcome::Placed(_)) {
                    self.rescued += 1;
                }
            }
        }
        Ok(outcome)
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.inner.release(job)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: ocs_rescue TOPOLOGY TRACE [fifo|sf|edf]");
        std::process::exit(2);
    }
    let topo = Arc::new(vclos::topology::load(Path::new(&args[1])).unwrap());
    let trace = vclos::trace::load(Path::new(&args[2])).unwrap();
    let queue: QueuePolicy = args.get(3).map_or("fifo", String::as_str).parse().unwrap();
    let mut probe = Probe {
        inner: VclosPlacer::new(Arc::clone(&topo)),
        network_blocked: 0,
        rescued: 0,
    };
    let opts = ReplayOptions {
        queue,
        ledger: Ledger::from_topology(&topo),
        ..ReplayOptions::default()
    };
    let r = replay::replay(&mut probe, &trace, opts).unwrap();
    println!(
        "queue {queue}: vClos network-blocked head attempts {} (jobs {}); \
         OCS-vClos places {} of them on the same state",
        probe.network_blocked, r.blocked_network, probe.rescued
    );
}
