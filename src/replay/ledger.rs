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
//! * **allowed sharing** instead of a violation (issue 16) for a port of a
//!   link the starting job's decision lists under `sharing.links` when
//!   every running job already holding it is named in that link's `with`
//!   and was placed in a sharing mode itself (its decision has `sharing`):
//!   `shared_ports`, and `shared_jobs` for jobs that start sharing any;
//! * a **GPU conflict** for every GPU given to two running jobs at once;
//! * a **circuit mismatch** for every reserved link whose OCS hop is not
//!   actually cross-connected once the decision's rewiring is applied (only
//!   when the initial patches are known).
//!
//! Ports are compared by name, exactly as decisions carry them: each
//! device, port and server name is interned once to a number (a name is the
//! same port wherever it appears), so the per-decision work is hashing short
//! names, not cloning and comparing strings (issue 13: a 5000-job replay
//! spent most of its time here).

use std::collections::HashMap;

use foldhash::fast::RandomState;
use serde::Serialize;

use crate::decision::{CrossConnect, Decision};
use crate::topology::Topology;

/// `(device, port)` or `(server, gpu)` as interned ids in one word.
type Key = u64;
type Map<K, V> = HashMap<K, V, RandomState>;

/// The four audit counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Audit {
    pub isolation_violations: u64,
    pub busy_rewires: u64,
    pub gpu_conflicts: u64,
    pub circuit_mismatches: u64,
    /// Ports held by several jobs by agreement (module doc).
    pub shared_ports: u64,
    /// Jobs that started on at least one shared port.
    pub shared_jobs: u64,
}

/// One cross-connect, interned: OCS, port `a`, port `b`.
#[derive(Debug, Clone, Copy)]
struct Xc {
    ocs: u32,
    a: u32,
    b: u32,
}

#[derive(Debug)]
struct Hold {
    /// Its job id, interned, and whether it opted in to sharing.
    name: u32,
    sharing: bool,
    /// Its ports' and GPUs' slots in the ledger's tables.
    ports: Vec<u32>,
    gpus: Vec<u32>,
    cross_connects: Vec<Xc>,
}

/// Names to numbers (devices, ports and servers share one table).
#[derive(Debug, Default)]
struct Names(Map<String, u32>);

impl Names {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.0.get(name) {
            return i;
        }
        let i = self.0.len() as u32;
        self.0.insert(name.to_string(), i);
        i
    }
}

fn key(a: u32, b: u32) -> Key {
    u64::from(a) << 32 | u64::from(b)
}

/// The running jobs holding one port or GPU: almost always exactly one
/// (isolated policies), several where a policy shares (`sr`); one inline
/// job saves an allocation per port and start.
#[derive(Debug)]
enum Holders {
    One(usize),
    Many(Vec<usize>),
}

impl Holders {
    fn any_other(&self, job: usize) -> bool {
        match self {
            Holders::One(h) => *h != job,
            Holders::Many(v) => v.iter().any(|h| *h != job),
        }
    }
}

/// The holders of every key ever held, in a dense table: a key gets its
/// slot the first time it is held and keeps it, so a job's release frees
/// its slots by index, without hashing (at 8192 GPUs a replay holds and
/// frees tens of millions of ports; the hash map's inserts and removals
/// were a third of a replay).
#[derive(Debug, Default)]
struct Slots {
    index: Map<Key, u32>,
    holders: Vec<Option<Holders>>,
}

impl Slots {
    fn slot(&mut self, key: Key) -> u32 {
        let next = self.holders.len() as u32;
        let i = *self.index.entry(key).or_insert(next);
        if i == next {
            self.holders.push(None);
        }
        i
    }

    fn get(&self, key: &Key) -> Option<&Holders> {
        let i = *self.index.get(key)?;
        self.holders[i as usize].as_ref()
    }

    /// Add `job` to slot `i`'s holders; true when another job already
    /// held it.
    fn hold(&mut self, i: u32, job: usize) -> bool {
        let h = &mut self.holders[i as usize];
        match h {
            None => {
                *h = Some(Holders::One(job));
                false
            }
            Some(h) => {
                let shared = h.any_other(job);
                match h {
                    Holders::One(first) => *h = Holders::Many(vec![*first, job]),
                    Holders::Many(v) => v.push(job),
                }
                shared
            }
        }
    }

    fn drop_holder(&mut self, i: u32, job: usize) {
        let h = &mut self.holders[i as usize];
        match h {
            Some(Holders::One(o)) if *o == job => *h = None,
            Some(Holders::Many(v)) => {
                v.retain(|o| *o != job);
                match v[..] {
                    [] => *h = None,
                    [last] => *h = Some(Holders::One(last)),
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

/// Ports, GPUs and OCS circuits held by running jobs (keyed by any `usize`).
#[derive(Debug, Default)]
pub struct Ledger {
    names: Names,
    holders: Slots,
    gpu_holders: Slots,
    /// Live OCS circuits, both directions: (ocs, port) -> partner port.
    live: Map<Key, u32>,
    initial: Map<Key, u32>,
    track_circuits: bool,
    jobs: Map<usize, Hold>,
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
            let x = l.xc(p);
            l.patch(x);
            l.initial.insert(key(x.ocs, x.a), x.b);
            l.initial.insert(key(x.ocs, x.b), x.a);
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

    fn xc(&mut self, x: &CrossConnect) -> Xc {
        Xc {
            ocs: self.names.id(&x.ocs),
            a: self.names.id(&x.a),
            b: self.names.id(&x.b),
        }
    }

    fn port(&mut self, device: &str, port: &str) -> Key {
        key(self.names.id(device), self.names.id(port))
    }

    /// Every `(device, port)` `d` holds, each once.
    fn ports_of(&mut self, d: &Decision) -> Vec<Key> {
        let mut ports = Vec::new();
        for l in &d.vclos.links {
            ports.push(self.port(&l.leaf, &l.uplink));
            ports.push(self.port(&l.peer, &l.peer_port));
            if let Some(h) = &l.via {
                ports.push(self.port(&h.ocs, &h.leaf_side));
                ports.push(self.port(&h.ocs, &h.far_side));
            }
        }
        for x in &d.vclos.cross_connects {
            ports.push(self.port(&x.ocs, &x.a));
            ports.push(self.port(&x.ocs, &x.b));
        }
        for r in &d.source_routes {
            ports.push(self.port(&r.leaf, &r.uplink));
        }
        for v in &d.vclos.leaves {
            for p in &v.server_ports {
                ports.push(self.port(&v.leaf, p));
            }
        }
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Record that `job` starts with decision `d`, counting conflicts.
    pub fn start(&mut self, job: usize, d: &Decision) {
        let ports = self.ports_of(d);
        let mut gpus: Vec<Key> = d
            .gpus
            .iter()
            .map(|g| key(self.names.id(&g.server), u32::from(g.gpu)))
            .collect();
        gpus.sort_unstable();
        gpus.dedup();
        let xcs: Vec<Xc> = d.vclos.cross_connects.iter().map(|x| self.xc(x)).collect();

        // Rewires are judged against what others hold before this job starts.
        for &x in &xcs {
            self.audit.busy_rewires += self.rewire_conflicts(x, job);
            self.patch(x);
        }
        if self.track_circuits {
            for h in d.vclos.links.iter().filter_map(|l| l.via.as_ref()) {
                let (o, a, b) = (
                    self.names.id(&h.ocs),
                    self.names.id(&h.leaf_side),
                    self.names.id(&h.far_side),
                );
                if self.live.get(&key(o, a)) != Some(&b) {
                    self.audit.circuit_mismatches += 1;
                }
            }
        }
        let agreed = self.shared_ports_of(d);
        let mut shared = false;
        let mut slots = Vec::with_capacity(ports.len());
        for &p in &ports {
            let i = self.holders.slot(p);
            slots.push(i);
            if self.holders.hold(i, job) {
                if self.agreed(p, job, &agreed) {
                    self.audit.shared_ports += 1;
                    shared = true;
                } else {
                    self.audit.isolation_violations += 1;
                }
            }
        }
        self.audit.shared_jobs += u64::from(shared);
        let gpus: Vec<u32> = gpus.iter().map(|&g| self.gpu_holders.slot(g)).collect();
        for &g in &gpus {
            if self.gpu_holders.hold(g, job) {
                self.audit.gpu_conflicts += 1;
            }
        }
        self.jobs.insert(
            job,
            Hold {
                name: self.names.id(d.job.as_str()),
                sharing: d.sharing.is_some(),
                ports: slots,
                gpus,
                cross_connects: xcs,
            },
        );
    }

    /// The ports of the links `d` shares, each with the job ids (interned)
    /// it agreed to share them with.
    fn shared_ports_of(&mut self, d: &Decision) -> Map<Key, Vec<u32>> {
        let mut out = Map::default();
        let Some(sh) = &d.sharing else {
            return out;
        };
        for l in &d.vclos.links {
            let Some(s) = sh
                .links
                .iter()
                .find(|s| s.leaf == l.leaf && s.uplink == l.uplink)
            else {
                continue;
            };
            let with: Vec<u32> = s.with.iter().map(|j| self.names.id(j.as_str())).collect();
            let mut ends = vec![(&l.leaf, &l.uplink), (&l.peer, &l.peer_port)];
            if let Some(h) = &l.via {
                ends.extend([(&h.ocs, &h.leaf_side), (&h.ocs, &h.far_side)]);
            }
            for (dev, port) in ends {
                let k = self.port(dev, port);
                out.insert(k, with.clone());
            }
        }
        out
    }

    /// Whether every other holder of `port` is one `job` agreed to share
    /// it with, and opted in itself.
    fn agreed(&self, port: Key, job: usize, agreed: &Map<Key, Vec<u32>>) -> bool {
        let (Some(with), Some(h)) = (agreed.get(&port), self.holders.get(&port)) else {
            return false;
        };
        let ok = |other: &usize| {
            *other == job
                || self
                    .jobs
                    .get(other)
                    .is_some_and(|o| o.sharing && with.contains(&o.name))
        };
        match h {
            Holders::One(o) => ok(o),
            Holders::Many(v) => v.iter().all(ok),
        }
    }

    /// Record that `job` ended: free its ports and undo its cross-connects.
    pub fn finish(&mut self, job: usize) {
        let Some(hold) = self.jobs.remove(&job) else {
            return;
        };
        for &p in &hold.ports {
            self.holders.drop_holder(p, job);
        }
        for &g in &hold.gpus {
            self.gpu_holders.drop_holder(g, job);
        }
        for &x in &hold.cross_connects {
            if self.live.get(&key(x.ocs, x.a)) == Some(&x.b) {
                self.live.remove(&key(x.ocs, x.a));
                self.live.remove(&key(x.ocs, x.b));
            }
            for end in [x.a, x.b] {
                self.restore(x.ocs, end);
            }
        }
    }

    /// Conflicts caused by making cross-connect `x` for `job`.
    fn rewire_conflicts(&self, x: Xc, job: usize) -> u64 {
        let held_by_other = |port: u32| {
            self.holders
                .get(&key(x.ocs, port))
                .is_some_and(|h| h.any_other(job))
        };
        if self.live.get(&key(x.ocs, x.a)) == Some(&x.b) {
            return 0; // already connected: nothing moves
        }
        let mut n = 0;
        for (end, other) in [(x.a, x.b), (x.b, x.a)] {
            if held_by_other(end) {
                n += 1;
            }
            // The end's old partner goes dark.
            if let Some(&old) = self.live.get(&key(x.ocs, end)) {
                if old != other && held_by_other(old) {
                    n += 1;
                }
            }
        }
        n
    }

    fn patch(&mut self, x: Xc) {
        for end in [x.a, x.b] {
            if let Some(old) = self.live.remove(&key(x.ocs, end)) {
                self.live.remove(&key(x.ocs, old));
            }
        }
        self.live.insert(key(x.ocs, x.a), x.b);
        self.live.insert(key(x.ocs, x.b), x.a);
    }

    /// Put back `port`'s initial patch if both of its ends are dark.
    fn restore(&mut self, ocs: u32, port: u32) {
        let Some(&partner) = self.initial.get(&key(ocs, port)) else {
            return;
        };
        if !self.live.contains_key(&key(ocs, port)) && !self.live.contains_key(&key(ocs, partner)) {
            self.patch(Xc {
                ocs,
                a: port,
                b: partner,
            });
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
