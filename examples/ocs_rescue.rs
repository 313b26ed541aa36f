//! Diagnostic: of the head attempts vClos blocks for lack of network
//! resources, how many could OCS-vClos place on the very same fabric state?
//!
//! End-to-end replays of two policies diverge after the first different
//! decision, so their blocked counts compare different histories. This probe
//! removes that noise: it replays with vClos and, at every network-blocked
//! attempt, hands a copy of vClos's fabric state to an OCS-vClos placer.
//!
//! With `wide` as the fourth argument it replays with OCS-vClos instead and
//! asks, at every network-blocked attempt, whether Stage 3 with 200 extra
//! random leaf sets per shape would have placed the job. Stage 3 ends with
//! an exact search, so this should find nothing the engine missed unless
//! the replay reports `search_cutoffs`; it is an independent check at scale.
//!
//! `cargo run --release --example ocs_rescue -- TOPOLOGY TRACE [fifo|sf|edf] [wide]`
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use vclos::decision::Decision;
use vclos::names::JobId;
use vclos::placement::{
    stage3_wide, Blocked, JobRequest, OcsVclosPlacer, Outcome, PlacementError, Placer, VclosPlacer,
};
use vclos::replay::{self, Ledger, QueuePolicy, ReplayOptions};

struct Probe {
    inner: Box<dyn Placer>,
    wide: bool,
    network_blocked: u64,
    rescued: u64,
}

impl Placer for Probe {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let outcome = self.inner.place(job)?;
        if outcome == Outcome::Blocked(Blocked::Network) {
            self.network_blocked += 1;
            if let Some(state) = self.inner.fabric() {
                let placed = if self.wide {
                    stage3_wide(state, job.gpus, 200, self.network_blocked)
                } else {
                    let mut ocs = OcsVclosPlacer::with_state(state.clone());
                    matches!(ocs.place(job)?, Outcome::Placed(_))
                };
                if placed {
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
    let wide = args.get(4).is_some_and(|a| a == "wide");
    let inner: Box<dyn Placer> = if wide {
        Box::new(OcsVclosPlacer::new(Arc::clone(&topo)))
    } else {
        Box::new(VclosPlacer::new(Arc::clone(&topo)))
    };
    let mut probe = Probe {
        inner,
        wide,
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
        "queue {queue}: {} network-blocked head attempts {} (jobs {}); \
         {} places {} of them on the same state",
        probe.inner.name(),
        probe.network_blocked,
        r.blocked_network,
        if wide { "wide Stage 3" } else { "OCS-vClos" },
        probe.rescued
    );
}
