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
//!   `shared_ports`, and `shared_jobs` for jobs that start sharing any
//!   (and for `titan` jobs that time-share links, which hold no ports:
//!   their decisions' `sharing.time_shared`);
//! * a **GPU conflict** for every GPU given to two running jobs at once;
//! * a **circuit mismatch** for every reserved link whose OCS hop is not
//!   actually cross-connected once the decision's rewiring is applied (only
//!   when the initial patches are known).
//!
//! Ports are compared by name, exactly as decisions carry them: each
//! `(device, port)` and `(server, gpu)` gets a dense slot the first time it
//! is seen ([`Interner`]: a name is the same port wherever it appears), and
//! everything the ledger knows per port — its holders, its live and initial
//! OCS partner — is a vector indexed by slot. The per-decision work is one
//! lookup by the names' addresses per port, not hashing and comparing
//! strings (issue 13: a 5000-job replay spent most of its time here).

use std::collections::HashMap;

use foldhash::fast::RandomState;
use serde::Serialize;

use super::intern::Interner;
use crate::decision::{CrossConnect, Decision};
use crate::topology::{Name, Topology};

type Map<K, V> = HashMap<K, V, RandomState>;

/// No partner (a dark OCS port) in [`Ledger::live`] and [`Ledger::initial`].
const DARK: u32 = u32::MAX;

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

/// One cross-connect: the port slots of its two ends (on one OCS).
#[derive(Debug, Clone, Copy)]
struct Xc {
    a: u32,
    b: u32,
}

#[derive(Debug)]
struct Hold {
    /// Its job id, interned, and whether it opted in to sharing.
    name: u32,
    sharing: bool,
    /// Its ports' and GPUs' slots.
    ports: Vec<u32>,
    gpus: Vec<u32>,
    cross_connects: Vec<Xc>,
}

/// Job ids to numbers.
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

/// The holders of every slot of one kind (ports or GPUs), indexed by slot:
/// a job's release frees its slots by index, without hashing (at 8192 GPUs
/// a replay holds and frees tens of millions of ports).
#[derive(Debug, Default)]
struct Slots {
    holders: Vec<Option<Holders>>,
    /// The start that last listed each slot, to list it once per start.
    listed: Vec<u64>,
}

impl Slots {
    /// Make room for slots `0..n`.
    fn grow(&mut self, n: usize) {
        if self.holders.len() < n {
            self.holders.resize_with(n, || None);
            self.listed.resize(n, 0);
        }
    }

    /// True the first time `start` lists slot `i`.
    fn first_listing(&mut self, i: u32, start: u64) -> bool {
        let l = &mut self.listed[i as usize];
        let first = *l != start;
        *l = start;
        first
    }

    fn get(&self, i: u32) -> Option<&Holders> {
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

/// What one decision lists, as slots.
#[derive(Debug, Default)]
struct Listing {
    /// Every port it holds, each once.
    ports: Vec<u32>,
    /// Its cross-connects, in order.
    xcs: Vec<Xc>,
    /// The OCS hops of its links (`leaf_side`, `far_side`), when circuits
    /// are tracked.
    hops: Vec<(u32, u32)>,
}

/// Ports, GPUs and OCS circuits held by running jobs (keyed by any `usize`).
#[derive(Debug, Default)]
pub struct Ledger {
    names: Names,
    port_ids: Interner,
    gpu_ids: Interner,
    holders: Slots,
    gpu_holders: Slots,
    /// Live OCS circuits, both directions: port slot -> partner slot or
    /// [`DARK`].
    live: Vec<u32>,
    /// The initial patches, the same way.
    initial: Vec<u32>,
    track_circuits: bool,
    /// Starts so far (stamps [`Slots::listed`]).
    starts: u64,
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
            l.initial[x.a as usize] = x.b;
            l.initial[x.b as usize] = x.a;
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
            a: self.port(&x.ocs, &x.a),
            b: self.port(&x.ocs, &x.b),
        }
    }

    /// The slot of `(device, port)`, with room for it in every per-port
    /// table.
    fn port(&mut self, device: &Name, port: &Name) -> u32 {
        let i = self.port_ids.pair(device, port);
        let n = self.port_ids.len();
        if self.live.len() < n {
            self.holders.grow(n);
            self.live.resize(n, DARK);
            self.initial.resize(n, DARK);
        }
        i
    }

    /// List port `(device, port)` for this start, once.
    fn list(&mut self, out: &mut Vec<u32>, device: &Name, port: &Name) -> u32 {
        let i = self.port(device, port);
        if self.holders.first_listing(i, self.starts) {
            out.push(i);
        }
        i
    }

    /// Every `(device, port)` `d` holds, each once, its cross-connects and
    /// (when circuits are tracked) its OCS hops.
    fn listing(&mut self, d: &Decision) -> Listing {
        let mut l = Listing::default();
        let ports = &mut l.ports;
        for k in &d.vclos.links {
            self.list(ports, &k.leaf, &k.uplink);
            self.list(ports, &k.peer, &k.peer_port);
            if let Some(h) = &k.via {
                let a = self.list(ports, &h.ocs, &h.leaf_side);
                let b = self.list(ports, &h.ocs, &h.far_side);
                if self.track_circuits {
                    l.hops.push((a, b));
                }
            }
        }
        for x in &d.vclos.cross_connects {
            let a = self.list(ports, &x.ocs, &x.a);
            let b = self.list(ports, &x.ocs, &x.b);
            l.xcs.push(Xc { a, b });
        }
        for r in &d.source_routes {
            self.list(ports, &r.leaf, &r.uplink);
        }
        for v in &d.vclos.leaves {
            for p in &v.server_ports {
                self.list(ports, &v.leaf, p);
            }
        }
        l
    }

    /// The slots of the GPUs `d` is given, each once.
    fn gpus_of(&mut self, d: &Decision) -> Vec<u32> {
        let mut gpus = Vec::with_capacity(d.gpus.len());
        for g in &d.gpus {
            let i = self.gpu_ids.numbered(&g.server, g.gpu);
            self.gpu_holders.grow(self.gpu_ids.len());
            if self.gpu_holders.first_listing(i, self.starts) {
                gpus.push(i);
            }
        }
        gpus
    }

    /// Record that `job` starts with decision `d`, counting conflicts.
    pub fn start(&mut self, job: usize, d: &Decision) {
        self.starts += 1;
        let Listing { ports, xcs, hops } = self.listing(d);
        let gpus = self.gpus_of(d);

        // Rewires are judged against what others hold before this job starts.
        for &x in &xcs {
            self.audit.busy_rewires += self.rewire_conflicts(x, job);
            self.patch(x);
        }
        for (a, b) in hops {
            if self.live[a as usize] != b {
                self.audit.circuit_mismatches += 1;
            }
        }
        let agreed = self.shared_ports_of(d);
        let mut shared = false;
        for &p in &ports {
            if self.holders.hold(p, job) {
                if self.agreed(p, job, &agreed) {
                    self.audit.shared_ports += 1;
                    shared = true;
                } else {
                    self.audit.isolation_violations += 1;
                }
            }
        }
        // Titan reserves no ports: its decision counts the links it
        // time-shares (`Sharing::time_shared`).
        let time_shared = d
            .sharing
            .as_ref()
            .is_some_and(|s| !s.time_shared.is_empty());
        self.audit.shared_jobs += u64::from(shared || time_shared);
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
                ports,
                gpus,
                cross_connects: xcs,
            },
        );
    }

    /// The port slots of the links `d` shares, each with the job ids
    /// (interned) it agreed to share them with.
    fn shared_ports_of(&mut self, d: &Decision) -> Map<u32, Vec<u32>> {
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
            for (dev, port) in l.ends() {
                let k = self.port(dev, port);
                out.insert(k, with.clone());
            }
        }
        out
    }

    /// Whether every other holder of port slot `port` is one `job` agreed
    /// to share it with, and opted in itself.
    fn agreed(&self, port: u32, job: usize, agreed: &Map<u32, Vec<u32>>) -> bool {
        let (Some(with), Some(h)) = (agreed.get(&port), self.holders.get(port)) else {
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
            if self.live[x.a as usize] == x.b {
                self.live[x.a as usize] = DARK;
                self.live[x.b as usize] = DARK;
            }
            for end in [x.a, x.b] {
                self.restore(end);
            }
        }
    }

    /// Conflicts caused by making cross-connect `x` for `job`.
    fn rewire_conflicts(&self, x: Xc, job: usize) -> u64 {
        let held_by_other = |port: u32| self.holders.get(port).is_some_and(|h| h.any_other(job));
        if self.live[x.a as usize] == x.b {
            return 0; // already connected: nothing moves
        }
        let mut n = 0;
        for (end, other) in [(x.a, x.b), (x.b, x.a)] {
            if held_by_other(end) {
                n += 1;
            }
            // The end's old partner goes dark.
            let old = self.live[end as usize];
            if old != DARK && old != other && held_by_other(old) {
                n += 1;
            }
        }
        n
    }

    fn patch(&mut self, x: Xc) {
        for end in [x.a, x.b] {
            let old = std::mem::replace(&mut self.live[end as usize], DARK);
            if old != DARK {
                self.live[old as usize] = DARK;
            }
        }
        self.live[x.a as usize] = x.b;
        self.live[x.b as usize] = x.a;
    }

    /// Put back port slot `port`'s initial patch if both of its ends are
    /// dark.
    fn restore(&mut self, port: u32) {
        let partner = self.initial[port as usize];
        if partner == DARK {
            return;
        }
        if self.live[port as usize] == DARK && self.live[partner as usize] == DARK {
            self.patch(Xc {
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
