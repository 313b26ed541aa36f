//! Fabric state: which GPUs, ports, links and OCS ports are held by which
//! job, and the live OCS patch table.
//!
//! The state is the single authority on "what is free". It is index based
//! (one flat `Vec<u32>` of holders per resource kind, addressed through
//! per-device offsets) so that the placement engine can scan a whole
//! 8192-GPU fabric in microseconds, and it changes only through
//! [`FabricState::admit`] and [`FabricState::release`], which are exact
//! inverses: admission validates a [`Decision`] completely before touching
//! anything, records exactly which resources it takes, and release frees
//! exactly those.
//!
//! OCS semantics (see `crate::decision`): a job's cross-connect `a~b`
//! replaces the patches of `a` and `b` (their old partners go dark); on
//! release the job's cross-connects are removed and the topology's initial
//! patches are restored wherever both ports are free and unpatched. Once
//! every job is released, the patch table is the initial one again.

mod error;
pub mod lock;
mod mask;
pub mod store;
mod validate;

/// The most jobs one link may be shared by (`--sharing`).
pub use validate::MAX_LINK_JOBS;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::decision::Decision;
use crate::names::JobId;
use crate::topology::{LeafId, Name, OcsId, PortRef, ServerId, SpineId, Topology};

pub use error::StateError;
pub use mask::{Admission, Masked, Reservation};

/// Where a leaf uplink leads: the far port, and the OCS hop
/// `(ocs, leaf-side port, far-side port)` when it goes through one.
pub type FarEnd = (PortRef, Option<(OcsId, u16, u16)>);

/// Marks a free slot in the holder vectors.
const FREE: u32 = u32::MAX;
/// Marks a GPU outside the servers a view is restricted to
/// ([`FabricState::only_servers`]): not free, held by no job.
const MASKED: u32 = u32::MAX - 1;

/// Name -> index maps, built once per topology so that resolving a
/// decision's names is a hash lookup, not a scan.
#[derive(Debug)]
pub(crate) struct Names {
    pub leaf: HashMap<Name, LeafId>,
    pub spine: HashMap<Name, SpineId>,
    pub ocs: HashMap<Name, OcsId>,
    pub server: HashMap<Name, ServerId>,
    pub uplink: Vec<HashMap<Name, u16>>,
    pub server_port: Vec<HashMap<Name, u16>>,
    pub spine_port: Vec<HashMap<Name, u16>>,
    pub ocs_port: Vec<HashMap<Name, u16>>,
}

impl Names {
    fn new(t: &Topology) -> Self {
        fn idx(v: &[Name]) -> HashMap<Name, u16> {
            v.iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i as u16))
                .collect()
        }
        Names {
            leaf: (t.leaves.iter().enumerate())
                .map(|(i, l)| (l.name.clone(), LeafId(i as u32)))
                .collect(),
            spine: (t.spines.iter().enumerate())
                .map(|(i, s)| (s.name.clone(), SpineId(i as u32)))
                .collect(),
            ocs: (t.ocs.iter().enumerate())
                .map(|(i, o)| (o.name.clone(), OcsId(i as u32)))
                .collect(),
            server: (t.servers.iter().enumerate())
                .map(|(i, s)| (s.name.clone(), ServerId(i as u32)))
                .collect(),
            uplink: t.leaves.iter().map(|l| idx(&l.uplinks)).collect(),
            server_port: t.leaves.iter().map(|l| idx(&l.server_ports)).collect(),
            spine_port: t.spines.iter().map(|s| idx(&s.ports)).collect(),
            ocs_port: t.ocs.iter().map(|o| idx(&o.ports)).collect(),
        }
    }
}

/// Offsets of each device's ports in the flat holder vectors.
#[derive(Debug)]
pub(crate) struct Layout {
    pub gpus_per_server: usize,
    pub uplink_base: Vec<u32>,
    pub server_port_base: Vec<u32>,
    pub spine_base: Vec<u32>,
    pub ocs_base: Vec<u32>,
    pub totals: [usize; 4],
    /// Per OCS port (indexed like `ocs_port`), its partner in the
    /// topology's initial patch table, `FREE` if none: a release restores
    /// the patches of the ports it frees without scanning the table.
    pub initial_patch: Vec<u32>,
}

impl Layout {
    fn new(t: &Topology) -> Self {
        fn bases(counts: impl Iterator<Item = usize>) -> (Vec<u32>, usize) {
            let mut acc = 0usize;
            let v = counts
                .map(|c| {
                    let b = acc as u32;
                    acc += c;
                    b
                })
                .collect();
            (v, acc)
        }
        let (uplink_base, nu) = bases(t.leaves.iter().map(|l| l.uplinks.len()));
        let (server_port_base, nsp) = bases(t.leaves.iter().map(|l| l.server_ports.len()));
        let (spine_base, ns) = bases(t.spines.iter().map(|s| s.ports.len()));
        let (ocs_base, no) = bases(t.ocs.iter().map(|o| o.ports.len()));
        let mut initial_patch = vec![FREE; no];
        for (o, base) in t.ocs.iter().zip(&ocs_base) {
            for &(a, b) in &o.patches {
                initial_patch[*base as usize + a as usize] = u32::from(b);
                initial_patch[*base as usize + b as usize] = u32::from(a);
            }
        }
        Layout {
            gpus_per_server: t.gpus_per_server as usize,
            uplink_base,
            server_port_base,
            spine_base,
            ocs_base,
            totals: [nu, nsp, ns, no],
            initial_patch,
        }
    }
    pub fn gpu(&self, s: ServerId, g: u16) -> usize {
        s.index() * self.gpus_per_server + g as usize
    }
    pub fn uplink(&self, l: LeafId, u: u16) -> usize {
        self.uplink_base[l.index()] as usize + u as usize
    }
    pub fn server_port(&self, l: LeafId, p: u16) -> usize {
        self.server_port_base[l.index()] as usize + p as usize
    }
    pub fn spine_port(&self, s: SpineId, p: u16) -> usize {
        self.spine_base[s.index()] as usize + p as usize
    }
    pub fn ocs_port(&self, o: OcsId, p: u16) -> usize {
        self.ocs_base[o.index()] as usize + p as usize
    }
}

/// Who holds what, and the live patch table. Compared as a whole by the
/// tests ("after releasing everything the state equals the fresh state").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Occupancy {
    pub gpu: Vec<u32>,
    pub server_port: Vec<u32>,
    pub uplink: Vec<u32>,
    pub spine_port: Vec<u32>,
    pub ocs_port: Vec<u32>,
    /// Live OCS patch partner of each OCS port (local port index), or FREE.
    pub patch: Vec<u32>,
    pub server_free: Vec<u16>,
    pub leaf_idle: Vec<u32>,
    /// Free GPUs under each leaf.
    pub leaf_free: Vec<u32>,
}

impl Occupancy {
    /// Free again the masked ones among these uplinks, spine ports and
    /// OCS ports (flat indices).
    fn unmask_ports(&mut self, [uplinks, spine_ports, ocs_ports]: [&[usize]; 3]) {
        for (ports, list) in [
            (&mut self.uplink, uplinks),
            (&mut self.spine_port, spine_ports),
            (&mut self.ocs_port, ocs_ports),
        ] {
            for &i in list {
                if ports[i] == MASKED {
                    ports[i] = FREE;
                }
            }
        }
    }
}

/// Typed resources taken by one admitted decision (flat indices).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Resources {
    pub gpus: Vec<(ServerId, u16)>,
    pub server_ports: Vec<usize>,
    pub uplinks: Vec<usize>,
    pub spine_ports: Vec<usize>,
    pub ocs_ports: Vec<usize>,
    pub cross: Vec<(OcsId, u16, u16)>,
    /// Links it shares with the jobs that held them at its admission
    /// (issue 16); none of their ports is in the lists above.
    pub shared: Vec<SharedLinkRes>,
}

/// The links of a job released with [`FabricState::release_keeping_links`],
/// still unusable until [`FabricState::free_kept_links`].
#[derive(Debug, Clone)]
pub struct KeptLinks(Resources);

/// A reserved link's ports, by flat index: uplink, spine port, OCS hop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SharedLinkRes {
    pub uplink: usize,
    pub spine_port: usize,
    pub ocs_ports: Vec<usize>,
}

/// A link held by several jobs: its ports and its holders in admission
/// order; the holder vectors name the first. It lives from the second
/// holder's admission to the last holder's release.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Share {
    link: SharedLinkRes,
    holders: Vec<u32>,
}
impl Resources {
    /// Order-free form, for comparing two derivations of the same set.
    #[cfg(debug_assertions)]
    fn sorted(mut self) -> Self {
        self.gpus.sort_unstable();
        self.server_ports.sort_unstable();
        self.uplinks.sort_unstable();
        self.spine_ports.sort_unstable();
        self.ocs_ports.sort_unstable();
        self.cross.sort_unstable();
        self.shared.sort_unstable_by_key(|l| l.uplink);
        self
    }
}

#[derive(Debug, Clone)]
struct Held {
    seq: u64,
    decision: Arc<Decision>,
    res: Resources,
}

impl Held {
    /// Whether one of its cross-connects made a circuit through any of
    /// the OCS ports `hop` (flat indices): such a link is never shared.
    fn made_circuit(&self, lay: &Layout, hop: &[usize]) -> bool {
        (self.res.cross.iter())
            .any(|&(o, a, b)| [a, b].iter().any(|&q| hop.contains(&lay.ocs_port(o, q))))
    }
}

/// The live state of a fabric: holders of every resource and the OCS patches.
#[derive(Debug, Clone)]
pub struct FabricState {
    topo: Arc<Topology>,
    names: Arc<Names>,
    layout: Arc<Layout>,
    occ: Occupancy,
    slots: Vec<Option<Held>>,
    free_slots: Vec<u32>,
    by_id: HashMap<JobId, u32>,
    order: BTreeMap<u64, u32>,
    next_seq: u64,
    /// Links held by several jobs, by flat uplink index ([`Share`]).
    shares: HashMap<usize, Share>,
    /// Whether a job under several leaves must carry a virtual Clos (a real,
    /// isolated fabric); false only in the baselines' ideal-network model.
    isolated: bool,
    /// [`FabricState::version`].
    version: u64,
    /// The last [`FabricState::mask`]: from which version, by which
    /// reservation, to which version.
    mask_memo: Option<MaskMemo>,
}

#[derive(Debug, Clone, Copy)]
struct MaskMemo {
    base: u64,
    reservation: u64,
    masked: u64,
}

/// Versions are unique in the process, so that two states (a clone and
/// its original changed apart) never show one version with different
/// contents.
static NEXT_VERSION: AtomicU64 = AtomicU64::new(1);

fn fresh_version() -> u64 {
    NEXT_VERSION.fetch_add(1, Ordering::Relaxed)
}

impl FabricState {
    /// An empty fabric: nothing held, OCS patched as cabled.
    pub fn new(topo: Arc<Topology>) -> Self {
        let names = Arc::new(Names::new(&topo));
        let layout = Arc::new(Layout::new(&topo));
        Self::empty_with(topo, names, layout)
    }

    /// This fabric empty, as [`FabricState::new`] makes it, sharing this
    /// state's name and layout indices instead of building them again (a
    /// placer built per request probes the empty fabric: at 4096 GPUs the
    /// indices were half of titan's decision time on a fabric).
    pub fn emptied(&self) -> FabricState {
        Self::empty_with(
            Arc::clone(&self.topo),
            Arc::clone(&self.names),
            Arc::clone(&self.layout),
        )
    }

    fn empty_with(topo: Arc<Topology>, names: Arc<Names>, layout: Arc<Layout>) -> Self {
        let [nu, nsp, ns, no] = layout.totals;
        let mut patch = vec![FREE; no];
        for (oi, o) in topo.ocs.iter().enumerate() {
            let base = layout.ocs_base[oi] as usize;
            for &(a, b) in &o.patches {
                patch[base + a as usize] = u32::from(b);
                patch[base + b as usize] = u32::from(a);
            }
        }
        let t = topo.gpus_per_server;
        let occ = Occupancy {
            gpu: vec![FREE; topo.servers.len() * t as usize],
            server_port: vec![FREE; nsp],
            uplink: vec![FREE; nu],
            spine_port: vec![FREE; ns],
            ocs_port: vec![FREE; no],
            patch,
            server_free: vec![t; topo.servers.len()],
            leaf_idle: topo.leaves.iter().map(|l| l.servers.len() as u32).collect(),
            leaf_free: topo
                .leaves
                .iter()
                .map(|l| l.servers.len() as u32 * u32::from(t))
                .collect(),
        };
        FabricState {
            topo,
            names,
            layout,
            occ,
            slots: Vec::new(),
            free_slots: Vec::new(),
            by_id: HashMap::new(),
            version: fresh_version(),
            mask_memo: None,
            order: BTreeMap::new(),
            next_seq: 0,
            shares: HashMap::new(),
            isolated: true,
        }
    }

    /// Rebuild a state by admitting `decisions` in order.
    pub fn from_decisions(topo: Arc<Topology>, decisions: &[Decision]) -> Result<Self, StateError> {
        let mut s = FabricState::new(topo);
        for d in decisions {
            s.admit(d)?;
        }
        Ok(s)
    }

    /// This state as the comparison baselines model the fabric (paper
    /// Section 9.3: `best` assumes one non-blocking switch, `sr` shares
    /// links): it holds GPUs only, so a `manual` decision under several
    /// leaves needs no virtual Clos here. Every other rule still applies.
    /// Only the baseline placers use it; states rebuilt from state.json, a
    /// journal or a hand-written decision never are.
    pub(crate) fn ideal_network(mut self) -> Self {
        self.isolated = false;
        self.touch();
        self
    }

    /// Which contents this state holds: a new number, unique in the
    /// process, whenever anything changes that placement reads (holders,
    /// masks, patches, shares), and kept by a clone until either of the
    /// two changes. Two states of one version hold the same: what was
    /// derived from one (a view of its free links, say) is true of the
    /// other (`crate::placement::view` keeps its views by version).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// A change: a new [`FabricState::version`].
    fn touch(&mut self) {
        self.version = fresh_version();
    }

    /// False for the baselines' model ([`FabricState::ideal_network`]).
    pub(crate) fn isolated(&self) -> bool {
        self.isolated
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    /// What [`FabricState::admit`] would say of `d`, changing nothing.
    pub fn check_admit(&self, d: &Decision) -> Result<(), StateError> {
        if self.by_id.contains_key(&d.job) {
            return Err(StateError::DuplicateJob(d.job.clone()));
        }
        validate::resolve(self, d).map(drop)
    }

    /// Validate `d` against the topology and the current state, then hold
    /// everything it uses and make its cross-connects. Nothing changes if
    /// validation fails.
    pub fn admit(&mut self, d: &Decision) -> Result<(), StateError> {
        if self.by_id.contains_key(&d.job) {
            return Err(StateError::DuplicateJob(d.job.clone()));
        }
        let res = validate::resolve(self, d)?;
        self.take(Arc::new(d.clone()), res);
        Ok(())
    }

    /// Admission for the placement engine, which already knows the typed
    /// resources of its decision: only checks that each is free (no name
    /// lookups; this is most of a decision's cost on large jobs). Anything
    /// unexpected falls back to [`FabricState::admit`] for the full check
    /// and its descriptive error. Debug builds (every test) also resolve the
    /// decision by name and panic unless it validates to the very same
    /// resources: an engine bug, caught by every placement test.
    pub(crate) fn admit_typed(
        &mut self,
        d: Arc<Decision>,
        res: Resources,
    ) -> Result<(), StateError> {
        if self.by_id.contains_key(&d.job) || !self.all_free(&res) {
            return self.admit(&d);
        }
        #[cfg(debug_assertions)]
        match validate::resolve(self, &d) {
            Ok(named) => assert_eq!(
                res.clone().sorted(),
                named.sorted(),
                "engine resources of {} differ from its decision's",
                d.job
            ),
            Err(e) => panic!("the engine's decision does not validate: {e}"),
        }
        self.take(d, res);
        Ok(())
    }

    fn all_free(&self, r: &Resources) -> bool {
        let (l, o) = (&self.layout, &self.occ);
        let free = |v: &[u32], idx: &[usize]| idx.iter().all(|&i| v.get(i) == Some(&FREE));
        r.gpus
            .iter()
            .all(|&(s, g)| o.gpu.get(l.gpu(s, g)) == Some(&FREE))
            && free(&o.server_port, &r.server_ports)
            && free(&o.uplink, &r.uplinks)
            && free(&o.spine_port, &r.spine_ports)
            && free(&o.ocs_port, &r.ocs_ports)
    }

    /// Hold `d`'s resources; the state shares the decision with whoever
    /// placed it (a deep copy of a large job's decision, every name in it,
    /// was a third of an engine admission).
    fn take(&mut self, d: Arc<Decision>, res: Resources) {
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.apply(&res, slot);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.slots[slot as usize] = Some(Held {
            seq,
            decision: Arc::clone(&d),
            res,
        });
        self.by_id.insert(d.job.clone(), slot);
        self.order.insert(seq, slot);
    }

    /// Free exactly what `job`'s admission took, remove its cross-connects
    /// and restore initial patches where possible; returns its decision.
    pub fn release(&mut self, job: &JobId) -> Result<Decision, StateError> {
        self.release_shared(job).map(Arc::unwrap_or_clone)
    }

    /// [`FabricState::release`], returning the decision as held: a copy of
    /// a state (a forecast's future) shares its decisions with the
    /// original, and releasing there need not copy one (a large job's
    /// decision names thousands of ports).
    pub fn release_shared(&mut self, job: &JobId) -> Result<Arc<Decision>, StateError> {
        let slot = self
            .by_id
            .remove(job)
            .ok_or_else(|| StateError::UnknownJob(job.clone()))?;
        let held = self.slots[slot as usize]
            .take()
            .ok_or_else(|| StateError::UnknownJob(job.clone()))?;
        self.order.remove(&held.seq);
        self.free_slots.push(slot);
        self.unapply(&held.res, slot);
        Ok(held.decision)
    }

    fn apply(&mut self, r: &Resources, slot: u32) {
        self.touch();
        let l = &self.layout;
        let o = &mut self.occ;
        for &(s, g) in &r.gpus {
            o.gpu[l.gpu(s, g)] = slot;
            let si = s.index();
            let leaf = self.topo.servers[si].leaf.index();
            if o.server_free[si] == self.topo.gpus_per_server {
                o.leaf_idle[leaf] -= 1;
            }
            o.server_free[si] -= 1;
            o.leaf_free[leaf] -= 1;
        }
        for &i in &r.server_ports {
            o.server_port[i] = slot;
        }
        for &i in &r.uplinks {
            o.uplink[i] = slot;
        }
        for &i in &r.spine_ports {
            o.spine_port[i] = slot;
        }
        for &i in &r.ocs_ports {
            o.ocs_port[i] = slot;
        }
        for link in &r.shared {
            let first = o.uplink[link.uplink];
            let share = self.shares.entry(link.uplink).or_insert_with(|| Share {
                link: link.clone(),
                holders: vec![first],
            });
            share.holders.push(slot);
        }
        for &(ocs, a, b) in &r.cross {
            self.patch_pair(ocs, a, b);
        }
    }

    fn unapply(&mut self, r: &Resources, slot: u32) {
        self.touch();
        self.leave_shares(r, slot);
        let l = Arc::clone(&self.layout);
        let o = &mut self.occ;
        for &(s, g) in &r.gpus {
            o.gpu[l.gpu(s, g)] = FREE;
            let si = s.index();
            let leaf = self.topo.servers[si].leaf.index();
            o.server_free[si] += 1;
            o.leaf_free[leaf] += 1;
            if o.server_free[si] == self.topo.gpus_per_server {
                o.leaf_idle[leaf] += 1;
            }
        }
        for &i in &r.server_ports {
            o.server_port[i] = FREE;
        }
        let mine = |v: &u32| *v == slot;
        for &i in &r.uplinks {
            if mine(&o.uplink[i]) {
                o.uplink[i] = FREE;
            }
        }
        for &i in &r.spine_ports {
            if mine(&o.spine_port[i]) {
                o.spine_port[i] = FREE;
            }
        }
        for &i in &r.ocs_ports {
            if mine(&o.ocs_port[i]) {
                o.ocs_port[i] = FREE;
            }
        }
        for &(ocs, a, b) in &r.cross {
            let base = l.ocs_base[ocs.index()] as usize;
            o.patch[base + a as usize] = FREE;
            o.patch[base + b as usize] = FREE;
        }
        self.restore_patches(&r.cross);
    }

    /// Restore initial patches touching the ends of the removed
    /// cross-connects `cross`, where both ends are free and dark (a live
    /// cross-connect of another job wins).
    fn restore_patches(&mut self, cross: &[(OcsId, u16, u16)]) {
        self.touch();
        let (l, o) = (&self.layout, &mut self.occ);
        for &(ocs, a, b) in cross {
            let base = l.ocs_base[ocs.index()] as usize;
            for p in [a, b] {
                let pi = base + p as usize;
                let q = l.initial_patch[pi];
                if q == FREE {
                    continue;
                }
                let qi = base + q as usize;
                if o.patch[pi] == FREE
                    && o.patch[qi] == FREE
                    && o.ocs_port[pi] == FREE
                    && o.ocs_port[qi] == FREE
                {
                    o.patch[pi] = q;
                    o.patch[qi] = u32::from(p);
                }
            }
        }
    }

    /// Release `job` as [`FabricState::release`] does, except its links:
    /// their uplinks, spine ports and OCS ports stay unusable (masked) and
    /// its circuits stay patched, as on a fabric where the job still runs
    /// on them. For a job whose links move make-before-break
    /// (`crate::placement::rearrange`): its new slice is placed beside the
    /// old one, which [`FabricState::free_kept_links`] then frees. Never
    /// save a state between the two.
    pub fn release_keeping_links(
        &mut self,
        job: &JobId,
    ) -> Result<(Decision, KeptLinks), StateError> {
        let slot = *self
            .by_id
            .get(job)
            .ok_or_else(|| StateError::UnknownJob(job.clone()))?;
        let res = (self.slots[slot as usize].as_ref())
            .map(|h| h.res.clone())
            .ok_or_else(|| StateError::UnknownJob(job.clone()))?;
        let d = self.release(job)?;
        for &(ocs, a, b) in &res.cross {
            self.patch_pair(ocs, a, b);
        }
        self.touch();
        let o = &mut self.occ;
        for (ports, list) in [
            (&mut o.uplink, &res.uplinks),
            (&mut o.spine_port, &res.spine_ports),
            (&mut o.ocs_port, &res.ocs_ports),
        ] {
            for &i in list {
                ports[i] = MASKED;
            }
        }
        Ok((d, KeptLinks(res)))
    }

    /// Free the links [`FabricState::release_keeping_links`] kept: their
    /// ports, and their circuits (initial patches restored where possible).
    pub fn free_kept_links(&mut self, kept: &KeptLinks) {
        self.touch();
        let (r, o) = (&kept.0, &mut self.occ);
        o.unmask_ports([&r.uplinks, &r.spine_ports, &r.ocs_ports]);
        for &(ocs, a, b) in &r.cross {
            let base = self.layout.ocs_base[ocs.index()] as usize;
            for p in [a, b] {
                let pi = base + p as usize;
                if o.patch[pi] != FREE {
                    let q = o.patch[pi] as usize;
                    o.patch[base + q] = FREE;
                    o.patch[pi] = FREE;
                }
            }
        }
        self.restore_patches(&r.cross);
    }

    /// Patch `a` to `b` on `ocs`, darkening their old partners.
    fn patch_pair(&mut self, ocs: OcsId, a: u16, b: u16) {
        self.touch();
        let base = self.layout.ocs_base[ocs.index()] as usize;
        let o = &mut self.occ;
        for p in [a, b] {
            let old = o.patch[base + p as usize];
            if old != FREE {
                o.patch[base + old as usize] = FREE;
            }
        }
        o.patch[base + a as usize] = u32::from(b);
        o.patch[base + b as usize] = u32::from(a);
    }

    /// Leave every shared link `r` is on ([`Share`]): the next holder
    /// takes the link's ports, and the last one frees them. Exclusive
    /// ports handed over this way keep their new holder in [`unapply`].
    fn leave_shares(&mut self, r: &Resources, slot: u32) {
        self.touch();
        if self.shares.is_empty() {
            return;
        }
        let ups = r.uplinks.iter().copied();
        let keys: Vec<usize> = ups
            .chain(r.shared.iter().map(|s| s.uplink))
            .filter(|u| self.shares.contains_key(u))
            .collect();
        for u in &keys {
            let Some(share) = self.shares.get_mut(u) else {
                continue;
            };
            share.holders.retain(|&h| h != slot);
            let next = share.holders.first().copied().unwrap_or(FREE);
            let o = &mut self.occ;
            o.uplink[share.link.uplink] = next;
            o.spine_port[share.link.spine_port] = next;
            for &i in &share.link.ocs_ports {
                o.ocs_port[i] = next;
            }
            if next == FREE {
                self.shares.remove(u);
            }
        }
    }

    /// The slots of the jobs holding the link of flat uplink `uplink`,
    /// whose holder vectors name `primary`.
    pub(crate) fn link_holders<'a>(&'a self, uplink: usize, primary: &'a u32) -> &'a [u32] {
        match self.shares.get(&uplink) {
            Some(s) => &s.holders,
            None => std::slice::from_ref(primary),
        }
    }

    /// The jobs holding leaf uplink `(leaf, uplink)`: one, several when
    /// the link is shared (issue 16), none when it is free.
    pub fn uplink_holders(&self, leaf: LeafId, uplink: u16) -> Vec<&JobId> {
        let i = self.layout.uplink(leaf, uplink);
        let primary = self.occ.uplink[i];
        if primary == FREE {
            return Vec::new();
        }
        self.link_holders(i, &primary)
            .iter()
            .filter_map(|&s| self.holder_of(s))
            .collect()
    }

    /// The spine link `(leaf, uplink)` reaches and how many jobs hold it,
    /// if a job placed in a
    /// sharing mode could share it now, by the rules of the
    /// `validate::sharing` module (held whole by jobs that all opted in, to
    /// a spine, used as patched, fewer than `MAX_LINK_JOBS` holders);
    /// `None` otherwise, a free link included. Allocates nothing: the
    /// sharing mode asks it of every held uplink per decision.
    pub fn shareable(&self, leaf: LeafId, uplink: u16) -> Option<(SpineId, usize)> {
        let (lay, occ) = (&self.layout, &self.occ);
        let i = lay.uplink(leaf, uplink);
        let primary = occ.uplink[i];
        if primary == FREE {
            return None;
        }
        let (PortRef::Spine(s, p), via) = self.uplink_far_end(leaf, uplink)? else {
            return None;
        };
        if occ.spine_port[lay.spine_port(s, p)] != primary {
            return None;
        }
        let hop = via.map(|(o, a, b)| [lay.ocs_port(o, a), lay.ocs_port(o, b)]);
        if hop.is_some_and(|h| h.iter().any(|&x| occ.ocs_port[x] != primary)) {
            return None;
        }
        let holders = self.link_holders(i, &primary);
        if holders.len() >= validate::MAX_LINK_JOBS {
            return None;
        }
        for &slot in holders {
            let held = self.slots[slot as usize].as_ref()?;
            held.decision.sharing.as_ref()?;
            if hop.is_some_and(|h| held.made_circuit(lay, &h)) {
                return None;
            }
        }
        Some((s, holders.len()))
    }

    /// Whether no link is shared (always so without a sharing mode).
    pub fn no_shared_links(&self) -> bool {
        self.shares.is_empty()
    }

    /// Admitted decisions, in admission order.
    pub fn decisions(&self) -> Vec<&Decision> {
        self.order
            .values()
            .filter_map(|&s| self.slots[s as usize].as_ref().map(|h| &*h.decision))
            .collect()
    }

    /// The decision admitted for `job`, if any.
    pub fn decision(&self, job: &JobId) -> Option<&Decision> {
        let s = *self.by_id.get(job)?;
        self.slots[s as usize].as_ref().map(|h| &*h.decision)
    }

    /// Number of admitted jobs.
    pub fn job_count(&self) -> usize {
        self.by_id.len()
    }

    fn holder_of(&self, slot: u32) -> Option<&JobId> {
        if slot == FREE || slot == MASKED {
            return None;
        }
        self.slots[slot as usize].as_ref().map(|h| &h.decision.job)
    }

    /// This state as seen by a job that may use only `servers` (a
    /// scheduler's allocation, `crate::placement::given`): every free GPU
    /// of any other server is masked, so no placement stage can take it,
    /// and admitting a decision that names one is refused. Links, ports
    /// and OCS patches are as they are. A view for placement only: never
    /// save it.
    pub fn only_servers(&self, servers: &[ServerId]) -> FabricState {
        let keep: HashSet<ServerId> = servers.iter().copied().collect();
        self.masked_except(|s, _| keep.contains(&s))
    }

    /// [`FabricState::only_servers`] for single GPUs: every free GPU not
    /// in `gpus` is masked.
    pub fn only_gpus(&self, gpus: &[(ServerId, u16)]) -> FabricState {
        let keep: HashSet<(ServerId, u16)> = gpus.iter().copied().collect();
        self.masked_except(|s, g| keep.contains(&(s, g)))
    }

    /// Mask the free GPUs among `gpus` in place (a job whose links move
    /// keeps its GPUs: `crate::placement::rearrange`): no placement stage
    /// takes a masked GPU and admitting a decision that names one is
    /// refused. [`FabricState::unmask_gpus`] undoes it; a state with masked
    /// GPUs is a view for placement only: never save it.
    pub fn mask_gpus(&mut self, gpus: &[(ServerId, u16)]) {
        self.touch();
        for &(s, g) in gpus {
            if self.occ.gpu[self.layout.gpu(s, g)] == FREE {
                self.set_masked(s, g, true);
            }
        }
    }

    /// Free again the masked GPUs among `gpus` ([`FabricState::mask_gpus`]).
    pub fn unmask_gpus(&mut self, gpus: &[(ServerId, u16)]) {
        self.touch();
        for &(s, g) in gpus {
            if self.occ.gpu[self.layout.gpu(s, g)] == MASKED {
                self.set_masked(s, g, false);
            }
        }
    }

    /// Mask free GPU `g` of `s`, or free masked GPU `g` (`masked` false),
    /// keeping the per-server and per-leaf counts.
    /// The caller changes the version (once, not per GPU).
    fn set_masked(&mut self, s: ServerId, g: u16, masked: bool) {
        let (t, si) = (self.topo.gpus_per_server, s.index());
        let leaf = self.topo.servers[si].leaf.index();
        let o = &mut self.occ;
        if masked {
            if o.server_free[si] == t {
                o.leaf_idle[leaf] -= 1;
            }
            o.server_free[si] -= 1;
            o.leaf_free[leaf] -= 1;
        } else {
            o.server_free[si] += 1;
            o.leaf_free[leaf] += 1;
            if o.server_free[si] == t {
                o.leaf_idle[leaf] += 1;
            }
        }
        o.gpu[self.layout.gpu(s, g)] = if masked { MASKED } else { FREE };
    }

    /// A copy with every free GPU for which `keep` is false masked.
    fn masked_except(&self, keep: impl Fn(ServerId, u16) -> bool) -> FabricState {
        let mut view = self.clone();
        view.touch();
        for (si, _) in self.topo.servers.iter().enumerate() {
            let sid = ServerId(si as u32);
            for g in 0..self.topo.gpus_per_server {
                if view.occ.gpu[self.layout.gpu(sid, g)] == FREE && !keep(sid, g) {
                    view.set_masked(sid, g, true);
                }
            }
        }
        view
    }

    /// Free GPUs in `server`.
    pub fn free_gpus(&self, server: ServerId) -> u16 {
        self.occ.server_free[server.index()]
    }

    /// Indices of the free GPUs of `server`.
    pub fn free_gpu_indices(&self, server: ServerId) -> impl Iterator<Item = u16> + '_ {
        let t = self.topo.gpus_per_server;
        (0..t).filter(move |&g| self.occ.gpu[self.layout.gpu(server, g)] == FREE)
    }

    pub fn gpu_holder(&self, server: ServerId, gpu: u16) -> Option<&JobId> {
        self.holder_of(self.occ.gpu[self.layout.gpu(server, gpu)])
    }

    /// Whether every GPU of `server` is free.
    pub fn server_idle(&self, server: ServerId) -> bool {
        self.occ.server_free[server.index()] == self.topo.gpus_per_server
    }

    /// Number of idle (wholly free) servers under `leaf`.
    pub fn idle_servers(&self, leaf: LeafId) -> u32 {
        self.occ.leaf_idle[leaf.index()]
    }

    /// Number of free GPUs under `leaf` (on idle and partly used servers).
    pub fn leaf_free_gpus(&self, leaf: LeafId) -> u32 {
        self.occ.leaf_free[leaf.index()]
    }

    /// The idle servers under `leaf`, in topology order.
    pub fn idle_server_ids(&self, leaf: LeafId) -> impl Iterator<Item = ServerId> + '_ {
        self.topo.leaves[leaf.index()]
            .servers
            .iter()
            .copied()
            .filter(|&s| self.server_idle(s))
    }

    pub fn server_port_holder(&self, leaf: LeafId, port: u16) -> Option<&JobId> {
        self.holder_of(self.occ.server_port[self.layout.server_port(leaf, port)])
    }

    pub fn uplink_holder(&self, leaf: LeafId, uplink: u16) -> Option<&JobId> {
        self.holder_of(self.occ.uplink[self.layout.uplink(leaf, uplink)])
    }

    pub fn uplink_free(&self, leaf: LeafId, uplink: u16) -> bool {
        self.occ.uplink[self.layout.uplink(leaf, uplink)] == FREE
    }

    /// Free uplinks of `leaf`.
    pub fn free_uplinks(&self, leaf: LeafId) -> impl Iterator<Item = u16> + '_ {
        let n = self.topo.leaves[leaf.index()].uplinks.len() as u16;
        (0..n).filter(move |&u| self.uplink_free(leaf, u))
    }

    pub fn spine_port_holder(&self, spine: SpineId, port: u16) -> Option<&JobId> {
        self.holder_of(self.occ.spine_port[self.layout.spine_port(spine, port)])
    }

    pub fn spine_port_free(&self, spine: SpineId, port: u16) -> bool {
        self.occ.spine_port[self.layout.spine_port(spine, port)] == FREE
    }

    /// Number of free ports of `spine`.
    pub fn free_spine_ports(&self, spine: SpineId) -> u32 {
        let n = self.topo.spines[spine.index()].ports.len() as u16;
        (0..n).filter(|&p| self.spine_port_free(spine, p)).count() as u32
    }

    /// The job holding OCS port `port` of `ocs` (None: idle, may be rewired).
    pub fn ocs_port_holder(&self, ocs: OcsId, port: u16) -> Option<&JobId> {
        self.holder_of(self.occ.ocs_port[self.layout.ocs_port(ocs, port)])
    }

    pub fn ocs_port_idle(&self, ocs: OcsId, port: u16) -> bool {
        self.occ.ocs_port[self.layout.ocs_port(ocs, port)] == FREE
    }

    /// The current patch partner of OCS port `port` (None: dark).
    pub fn patch(&self, ocs: OcsId, port: u16) -> Option<u16> {
        let p = self.occ.patch[self.layout.ocs_port(ocs, port)];
        (p != FREE).then_some(p as u16)
    }

    /// The job holding a fabric port, whatever its kind.
    pub fn holder(&self, p: PortRef) -> Option<&JobId> {
        match p {
            PortRef::Leaf(l, u) => self.uplink_holder(l, u),
            PortRef::Spine(s, i) => self.spine_port_holder(s, i),
            PortRef::Ocs(o, i) => self.ocs_port_holder(o, i),
        }
    }

    /// Where leaf uplink `(leaf, uplink)` currently leads: the far port
    /// (spine port, or another leaf's uplink) and the OCS hop
    /// `(ocs, leaf-side port, far-side port)` if it goes through one.
    pub fn uplink_far_end(&self, leaf: LeafId, uplink: u16) -> Option<FarEnd> {
        match self.topo.leaves[leaf.index()].uplink_peer[uplink as usize]? {
            PortRef::Ocs(o, a) => {
                let b = self.patch(o, a)?;
                let far = self.topo.ocs[o.index()].port_peer[b as usize]?;
                Some((far, Some((o, a, b))))
            }
            far => Some((far, None)),
        }
    }

    pub(crate) fn names(&self) -> &Names {
        &self.names
    }
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }
    pub(crate) fn occ(&self) -> &Occupancy {
        &self.occ
    }
}

#[cfg(test)]
mod tests;
