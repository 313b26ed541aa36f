//! An independent audit of isolation: which fabric ports running jobs hold.
//!
//! The replay does not trust the placement engine's own bookkeeping to prove
//! that jobs are isolated. It rebuilds, from the [`Decision`]s alone, which
//! `(device, port)` pairs every running job holds — both ends of each
//! reserved leaf-spine link, the OCS ports of its `via` hop, its
//! cross-connect ports, its source-routed uplinks and its server-facing
//! ports — and the live OCS cross-connect table (initial patches, changed by
//! each decision's cross-connects and restored on release, as described in
//! `crate::decision`). From that it counts:
//!
//! * an **isolation violation** for every port a starting job holds that
//!   another running job already holds (so `sr`, which shares uplinks, shows
//!   its sharing and vClos/OCS-vClos must show 0);
//! * a **busy rewire** for every cross-connect that touches an OCS port held
//!   by a running job, or that disconnects a port held by a running job
//!   (its old partner goes dark);
//! * a **GPU conflict** for every GPU given to two running jobs at once;
//! * a **circuit mismatch** for every reserved link whose OCS hop is not
//!   actually cross-connected once the decision's rewiring is applied (only
//!   when the initial patches are known).
//!
//! Ports are compared by name, exactly as decisions carry them.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use crate::decision::{CrossConnect, Decision};
use crate::topology::Topology;

type Port = (String, String);
type Gpu = (String, u16);

/// The four audit counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Audit {
    pub isolation_violations: u64,
    pub busy_rewires: u64,
    pub gpu_conflicts: u64,
    pub circuit_mismatches: u64,
}

#[derive(Debug)]
struct Hold {
    ports: Vec<Port>,
    gpus: Vec<Gpu>,
    cross_connects: Vec<CrossConnect>,
}

/// Ports, GPUs and OCS circuits held by running jobs (keyed by any `usize`).
#[derive(Debug, Default)]
pub struct Ledger {
    holders: HashMap<Port, Vec<usize>>,
    gpu_holders: HashMap<Gpu, Vec<usize>>,
    /// Live OCS circuits, both directions: (ocs, port) -> partner port.
    live: HashMap<Port, String>,
    initial: HashMap<Port, String>,
    track_circuits: bool,
    jobs: HashMap<usize, Hold>,
    audit: Audit,
}

impl Ledger {
    /// A ledger that does not know the OCS patches (no circuit checks).
    pub fn new() -> Self {
        Self::default()
    }

    /// A ledger starting from these OCS cross-connects (checks circuits).
    pub fn with_patches(patches: &[CrossConnect]) -> Self {
        let mut l = Self {
            track_circuits: true,
            ..Self::default()
        };
        for p in patches {
            l.patch(&p.ocs, &p.a, &p.b);
            l.initial.insert((p.ocs.clone(), p.a.clone()), p.b.clone());
            l.initial.insert((p.ocs.clone(), p.b.clone()), p.a.clone());
        }
        l
    }

    /// A ledger starting from the topology's initial OCS patches.
    pub fn from_topology(t: &Topology) -> Self {
        Self::with_patches(&initial_patches(t))
    }

    pub fn audit(&self) -> Audit {
        self.audit
    }

    /// How many jobs currently hold something.
    pub fn running(&self) -> usize {
        self.jobs.len()
    }

    /// Record that `job` starts with decision `d`, counting conflicts.
    pub fn start(&mut self, job: usize, d: &Decision) {
        let mut ports: BTreeSet<Port> = BTreeSet::new();
        for l in &d.vclos.links {
            ports.insert((l.leaf.clone(), l.uplink.clone()));
            ports.insert((l.peer.clone(), l.peer_port.clone()));
            if let Some(h) = &l.via {
                ports.insert((h.ocs.clone(), h.leaf_side.clone()));
                ports.insert((h.ocs.clone(), h.far_side.clone()));
            }
        }
        for x in &d.vclos.cross_connects {
            ports.insert((x.ocs.clone(), x.a.clone()));
            ports.insert((x.ocs.clone(), x.b.clone()));
        }
        for r in &d.source_routes {
            ports.insert((r.leaf.clone(), r.uplink.clone()));
        }
        for v in &d.vclos.leaves {
            for p in &v.server_ports {
                ports.insert((v.leaf.clone(), p.clone()));
            }
        }
        let gpus: BTreeSet<Gpu> = d.gpus.iter().map(|g| (g.server.clone(), g.gpu)).collect();

        // Rewires are judged against what others hold before this job starts.
        for x in &d.vclos.cross_connects {
            self.audit.busy_rewires += self.rewire_conflicts(x, job);
            self.patch(&x.ocs, &x.a, &x.b);
        }
        if self.track_circuits {
            for h in d.vclos.links.iter().filter_map(|l| l.via.as_ref()) {
                let key = (h.ocs.clone(), h.leaf_side.clone());
                if self.live.get(&key) != Some(&h.far_side) {
                    self.audit.circuit_mismatches += 1;
                }
            }
        }
        for p in &ports {
            let holders = self.holders.entry(p.clone()).or_default();
            if holders.iter().any(|h| *h != job) {
                self.audit.isolation_violations += 1;
            }
            holders.push(job);
        }
        for g in &gpus {
            let holders = self.gpu_holders.entry(g.clone()).or_default();
            if holders.iter().any(|h| *h != job) {
                self.audit.gpu_conflicts += 1;
            }
            holders.push(job);
        }
        self.jobs.insert(
            job,
            Hold {
                ports: ports.into_iter().collect(),
                gpus: gpus.into_iter().collect(),
                cross_connects: d.vclos.cross_connects.clone(),
            },
        );
    }

    /// Record that `job` ended: free its ports and undo its cross-connects.
    pub fn finish(&mut self, job: usize) {
        let Some(hold) = self.jobs.remove(&job) else {
            return;
        };
        for p in &hold.ports {
            drop_holder(&mut self.holders, p, job);
        }
        for g in &hold.gpus {
            drop_holder(&mut self.gpu_holders, g, job);
        }
        for x in &hold.cross_connects {
            let a = (x.ocs.clone(), x.a.clone());
            if self.live.get(&a) == Some(&x.b) {
                self.live.remove(&a);
                self.live.remove(&(x.ocs.clone(), x.b.clone()));
            }
            for end in [&x.a, &x.b] {
                self.restore(&x.ocs, end);
            }
        }
    }

    /// Conflicts caused by making cross-connect `x` for `job`.
    fn rewire_conflicts(&self, x: &CrossConnect, job: usize) -> u64 {
        let held_by_other = |port: &str| {
            self.holders
                .get(&(x.ocs.clone(), port.to_string()))
                .is_some_and(|h| h.iter().any(|j| *j != job))
        };
        if self.live.get(&(x.ocs.clone(), x.a.clone())) == Some(&x.b) {
            return 0; // already connected: nothing moves
        }
        let mut n = 0;
        for (end, other) in [(&x.a, &x.b), (&x.b, &x.a)] {
            if held_by_other(end) {
                n += 1;
            }
            // The end's old partner goes dark.
            if let Some(old) = self.live.get(&(x.ocs.clone(), end.clone())) {
                if old != other && held_by_other(old) {
                    n += 1;
                }
            }
        }
        n
    }

    fn patch(&mut self, ocs: &str, a: &str, b: &str) {
        for end in [a, b] {
            if let Some(old) = self.live.remove(&(ocs.to_string(), end.to_string())) {
                self.live.remove(&(ocs.to_string(), old));
            }
        }
        self.live
            .insert((ocs.to_string(), a.to_string()), b.to_string());
        self.live
            .insert((ocs.to_string(), b.to_string()), a.to_string());
    }

    /// Put back `port`'s initial patch if both of its ends are dark.
    fn restore(&mut self, ocs: &str, port: &str) {
        let key = (ocs.to_string(), port.to_string());
        let Some(partner) = self.initial.get(&key).cloned() else {
            return;
        };
        if !self.live.contains_key(&key)
            && !self.live.contains_key(&(ocs.to_string(), partner.clone()))
        {
            self.patch(ocs, port, &partner);
        }
    }
}

fn drop_holder<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Vec<usize>>, key: &K, job: usize) {
    if let Some(v) = map.get_mut(key) {
        v.retain(|h| *h != job);
        if v.is_empty() {
            map.remove(key);
        }
    }
}

/// The topology's initial OCS patches, by name.
pub fn initial_patches(t: &Topology) -> Vec<CrossConnect> {
    let mut out = Vec::new();
    for o in &t.ocs {
        for &(a, b) in &o.patches {
            if let (Some(pa), Some(pb)) = (o.ports.get(usize::from(a)), o.ports.get(usize::from(b)))
            {
                out.push(CrossConnect {
                    ocs: o.name.clone(),
                    a: pa.clone(),
                    b: pb.clone(),
                });
            }
        }
    }
    out
}
