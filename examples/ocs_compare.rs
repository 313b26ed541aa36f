//! Diagnostic: how do OCS-vClos's decisions differ from vClos's on the SAME
//! fabric state, along an OCS-vClos replay?
//!
//! At every head attempt of a job that needs a network slice, a copy of the
//! OCS-vClos placer's state is handed to a vClos placer, and both outcomes
//! are compared: blocks where vClos would have placed (OCS-vClos should be a
//! superset of vClos), and for jobs both can place, how many leaves, spine
//! ports and leaves-with-all-servers-idle each leaves behind.
//!
//! `cargo run --release --example ocs_compare -- TOPOLOGY TRACE [fifo|sf|edf]`
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use vclos::decision::Decision;
use vclos::names::JobId;
use vclos::placement::{JobRequest, OcsVclosPlacer, Outcome, PlacementError, Placer, VclosPlacer};
use vclos::replay::{self, Ledger, QueuePolicy, ReplayOptions};
use vclos::state::FabricState;
use vclos::topology::LeafId;

#[derive(Default, Debug)]
struct Tally {
    attempts: u64,
    both_blocked: u64,
    ocs_only: u64,
    vclos_only: u64,
    both: u64,
    ocs_leaves: u64,
    vclos_leaves: u64,
    ocs_spine_ports: u64,
    vclos_spine_ports: u64,
    ocs_full_leaves_after: u64,
    vclos_full_leaves_after: u64,
    vclos_only_by_size: BTreeMap<u32, u64>,
}

struct Probe {
    inner: OcsVclosPlacer,
    t: Tally,
}

/// Leaves whose servers are all idle.
fn full_leaves(st: &FabricState) -> u64 {
    let topo = st.topology();
    (0..topo.leaves.len() as u32)
        .filter(|&l| st.idle_servers(LeafId(l)) as usize == topo.leaves[l as usize].servers.len())
        .count() as u64
}

fn dump(st: &FabricState, gpus: u32) {
    use vclos::topology::{OcsId, PortRef, SpineId};
    let topo = st.topology();
    let idle: Vec<u32> = (0..topo.leaves.len() as u32)
        .map(|l| st.idle_servers(LeafId(l)))
        .collect();
    println!("BLOCK {gpus} GPUs; idle servers per leaf {idle:?}");
    let k = topo.ocs.len();
    for (si, sp) in topo.spines.iter().enumerate() {
        let mut per = vec![0; k];
        for (p, peer) in sp.port_peer.iter().enumerate() {
            if let Some(PortRef::Ocs(o, b)) = *peer {
                if st.spine_port_free(SpineId(si as u32), p as u16) && st.ocs_port_idle(o, b) {
                    per[o.index()] += 1;
                }
            }
        }
        print!("{per:?} ");
    }
    println!();
    let _ = OcsId(0);
    for (li, leaf) in topo.leaves.iter().enumerate() {
        let mut per = vec![0; k];
        for (u, peer) in leaf.uplink_peer.iter().enumerate() {
            if let Some(PortRef::Ocs(o, a)) = *peer {
                if st.uplink_free(LeafId(li as u32), u as u16) && st.ocs_port_idle(o, a) {
                    per[o.index()] += 1;
                }
            }
        }
        print!("{per:?} ");
    }
    println!();
}

fn spine_ports(d: &Decision) -> u64 {
    d.vclos
        .links
        .iter()
        .filter(|k| k.peer.starts_with("spine"))
        .count() as u64
}

impl Placer for Probe {
    fn name(&self) -> &'static str {
        "ocs-vclos"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let before = self.inner.state().clone();
        let per = u32::from(before.topology().gpus_per_server);
        let mut v = VclosPlacer::with_state(before.clone());
        let vo = v.place(job)?;
        let oo = self.inner.place(job)?;
        let network = |o: &Outcome| match o {
            Outcome::Placed(d) => !d.vclos.leaves.is_empty(),
            Outcome::Blocked(_) => true,
        };
        if job.gpus > per && (network(&vo) || network(&oo)) {
            self.t.attempts += 1;
            match (&oo, &vo) {
                (Outcome::Blocked(b), Outcome::Blocked(_)) => {
                    self.t.both_blocked += 1;
                    if job.gpus >= 128
                        && std::env::var_os("DUMP").is_some()
                        && *b == vclos::placement::Blocked::Network
                    {
                        dump(&before, job.gpus);
                    }
                }
                (Outcome::Placed(_), Outcome::Blocked(_)) => self.t.ocs_only += 1,
                (Outcome::Blocked(_), Outcome::Placed(_)) => {
                    self.t.vclos_only += 1;
                    *self.t.vclos_only_by_size.entry(job.gpus).or_default() += 1;
                }
                (Outcome::Placed(a), Outcome::Placed(b)) => {
                    self.t.both += 1;
                    self.t.ocs_leaves += a.vclos.leaves.len() as u64;
                    self.t.vclos_leaves += b.vclos.leaves.len() as u64;
                    self.t.ocs_spine_ports += spine_ports(a);
                    self.t.vclos_spine_ports += spine_ports(b);
                    self.t.ocs_full_leaves_after += full_leaves(self.inner.state());
                    self.t.vclos_full_leaves_after += full_leaves(v.state());
                }
            }
        }
        Ok(oo)
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.inner.release(job)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: ocs_compare TOPOLOGY TRACE [fifo|sf|edf]");
        std::process::exit(2);
    }
    let topo = Arc::new(vclos::topology::load(Path::new(&args[1])).unwrap());
    let trace = vclos::trace::load(Path::new(&args[2])).unwrap();
    let queue: QueuePolicy = args.get(3).map_or("fifo", String::as_str).parse().unwrap();
    let mut probe = Probe {
        inner: OcsVclosPlacer::new(Arc::clone(&topo)),
        t: Tally::default(),
    };
    let opts = ReplayOptions {
        queue,
        ledger: Ledger::from_topology(&topo),
        ..ReplayOptions::default()
    };
    let r = replay::replay(&mut probe, &trace, opts).unwrap();
    println!("queue {queue}: avg JCT {:.0} s", r.avg_jct_s);
    println!("{:#?}", probe.t);
}
