//! Checking a decision against the topology and the current state.
//!
//! Decisions may be hand-written, so nothing in one is trusted: every name
//! must exist, every resource must be free, every reserved link must be a
//! real path (a cable, or a cable-patch-cable path through one OCS, patched
//! now or by one of the decision's own cross-connects), cross-connects may
//! only use idle OCS ports, and the source routes must be a one-to-one map
//! from the job's server ports onto its own reserved uplinks. The result is
//! the typed list of resources the decision takes, so that admission and
//! release work on exactly the same set.
//!
//! The decision's shape must also fit where its GPUs are ([`shape`]; the
//! rules and their error messages are listed in docs/decisions.md):
//!
//! * **Stage vs. placement** (paper Section 6.1 "Stage 0" / "Stage 1" and
//!   Section 7, as the engine applies them in `crate::placement`):
//!   `server` is one server; `leaf` is several servers under one leaf
//!   (Stage 1 only runs for `N > T`, so it always takes two servers or
//!   more); `vclos`, `ocs-spine`, `ocs-two-leaf` and `ocs-vclos` build a
//!   virtual Clos, so their GPUs are under two leaves or more. Per stage:
//!   `vclos` never rewires an OCS (Section 6: unused links as they are), so
//!   it has no cross-connect; `ocs-spine` uses exactly one spine
//!   (Section 7.2); `ocs-two-leaf` joins exactly two leaves through the OCS
//!   and uses no spine (Section 7.2, Fig. 3); only it (and `manual`) may
//!   reserve a leaf-to-leaf link; the other network stages list spines.
//!   `manual` (hand-written decisions and the baselines) may have any
//!   placement.
//! * **A job under one leaf carries no virtual Clos**: its traffic never
//!   leaves the leaf (Section 5.2, case 1), so `vclos` and `source_routes`
//!   are empty. Only `manual` may reserve a slice there, and then it must be
//!   complete as below.
//! * **A job under several leaves carries a complete virtual Clos**
//!   (Section 5.2, case 2: a packet leaves its leaf by the uplink its
//!   server port is source-routed to): `vclos.leaves` lists exactly the
//!   GPUs' leaves, each with exactly its GPUs' server ports; every such leaf
//!   has a reserved link; every listed server port has a source route onto
//!   one of the job's reserved uplinks of that leaf. A missing `vclos` or
//!   `source_routes` section is an error naming it, never an empty slice.
//!   The one exception is the baselines' ideal-network model
//!   ([`FabricState::ideal_network`], Section 9.3), where a `manual`
//!   decision may hold GPUs only.
//! * **`requested_gpus`**, when present, is between 1 and the number of
//!   GPUs held: a job never holds fewer GPUs than it asked for (the paper's
//!   `ReqSevNum` rounds a request UP to whole servers, Algorithms 1-2 line
//!   2; issue 13 rounds a size with no slice shape up to one that has).

use std::collections::{BTreeSet, HashMap, HashSet};

mod sharing;

pub use sharing::MAX_LINK_JOBS;

use super::{FabricState, Occupancy, Resources, StateError, FREE, MASKED};
use crate::decision::{Decision, OcsHop, ReservedLink, Stage};
use crate::names::JobId;
use crate::topology::{LeafId, Name, OcsId, PortRef, ServerId, SpineId};

/// One port of a reserved link, by its flat index.
#[derive(Debug, Clone, Copy)]
pub(super) enum End {
    Uplink(usize),
    Spine(usize),
    Ocs(usize),
}

impl End {
    pub(super) fn slot(self, occ: &Occupancy) -> u32 {
        match self {
            End::Uplink(i) => occ.uplink[i],
            End::Spine(i) => occ.spine_port[i],
            End::Ocs(i) => occ.ocs_port[i],
        }
    }
}

/// Names listed in a shape error, at most this many (then "… N more").
const LISTED: usize = 4;

struct Ctx<'a> {
    st: &'a FabricState,
    job: &'a JobId,
}

impl Ctx<'_> {
    fn invalid(&self, device: &str, port: &str, reason: impl Into<String>) -> StateError {
        StateError::Invalid {
            job: self.job.clone(),
            device: device.to_string(),
            port: port.to_string(),
            reason: reason.into(),
        }
    }
    fn busy(&self, device: &str, port: &str, slot: u32) -> Option<StateError> {
        if slot == FREE {
            return None;
        }
        let holder = self.st.holder_of(slot)?.clone();
        Some(StateError::Busy {
            job: self.job.clone(),
            device: device.to_string(),
            port: port.to_string(),
            holder,
        })
    }
    fn unknown(&self, kind: &'static str, name: &str) -> StateError {
        StateError::UnknownDevice {
            job: self.job.clone(),
            kind,
            name: name.to_string(),
        }
    }
    fn shape(&self, field: &'static str, reason: impl Into<String>) -> StateError {
        StateError::Shape {
            job: self.job.clone(),
            field,
            reason: reason.into(),
        }
    }
    fn leaf(&self, name: &str) -> Result<LeafId, StateError> {
        self.st
            .names()
            .leaf
            .get(name)
            .copied()
            .ok_or_else(|| self.unknown("leaf", name))
    }
    fn spine(&self, name: &str) -> Result<SpineId, StateError> {
        self.st
            .names()
            .spine
            .get(name)
            .copied()
            .ok_or_else(|| self.unknown("spine", name))
    }
    fn ocs(&self, name: &str) -> Result<OcsId, StateError> {
        self.st
            .names()
            .ocs
            .get(name)
            .copied()
            .ok_or_else(|| self.unknown("OCS", name))
    }
    fn port(
        &self,
        map: &HashMap<Name, u16>,
        device: &str,
        kind: &'static str,
        port: &str,
    ) -> Result<u16, StateError> {
        map.get(port)
            .copied()
            .ok_or_else(|| StateError::UnknownPort {
                job: self.job.clone(),
                device: device.to_string(),
                kind,
                port: port.to_string(),
            })
    }
}

/// What [`resolve`] has found so far: the resources, and what the later
/// sections check against (one method per section of the decision).
#[derive(Default)]
struct Walk {
    res: Resources,
    gpu_set: HashSet<(ServerId, u16)>,
    /// Per virtual leaf, the server ports it lists.
    leaf_ports: HashMap<LeafId, HashSet<u16>>,
    spines: HashSet<SpineId>,
    /// Both ends of each cross-connect of the decision.
    cross_of: HashMap<(OcsId, u16), u16>,
    uplinks_of: HashMap<LeafId, HashSet<u16>>,
    used_cross: HashSet<(OcsId, u16)>,
    seen_uplink: HashSet<(LeafId, u16)>,
    seen_spine_port: HashSet<(SpineId, u16)>,
    seen_ocs: HashSet<(OcsId, u16)>,
    spines_used: HashSet<SpineId>,
    routed: HashSet<(LeafId, u16)>,
}

/// Resolve and check `d`; the resources it would take.
pub(super) fn resolve(st: &FabricState, d: &Decision) -> Result<Resources, StateError> {
    let cx = Ctx { st, job: &d.job };
    let mut w = Walk::default();
    w.gpus(&cx, d)?;
    w.virtual_leaves(&cx, d)?;
    w.spines_and_cross_connects(&cx, d)?;
    if let Some(sh) = &d.sharing {
        sharing::check(&cx, d, sh)?;
    }
    for link in &d.vclos.links {
        w.link(&cx, d, link)?;
    }
    w.links_complete(&cx, d)?;
    w.source_routes(&cx, d)?;
    Ok(w.res)
}

impl Walk {
    /// GPUs, and the servers and leaves they are on; the shape rules.
    fn gpus(&mut self, cx: &Ctx, d: &Decision) -> Result<(), StateError> {
        let st = cx.st;
        let (topo, names, lay, occ) = (st.topology(), st.names(), st.layout(), st.occ());
        // GPUs, and the servers and leaves they are on.
        let mut servers = BTreeSet::new();
        let mut leaves = BTreeSet::new();
        for g in &d.gpus {
            let sid = *names
                .server
                .get(&g.server)
                .ok_or_else(|| cx.unknown("server", &g.server))?;
            // The label is built only for an error (this loop runs per GPU).
            let label = || format!("gpu{}", g.gpu);
            if g.gpu >= topo.gpus_per_server {
                return Err(cx.invalid(
                    &g.server,
                    &label(),
                    format!("servers have {} GPUs (0-based)", topo.gpus_per_server),
                ));
            }
            if !self.gpu_set.insert((sid, g.gpu)) {
                return Err(cx.invalid(&g.server, &label(), "GPU listed twice"));
            }
            let slot = occ.gpu[lay.gpu(sid, g.gpu)];
            if slot == MASKED {
                return Err(cx.invalid(
                    &g.server,
                    &label(),
                    "not one of the servers this job may use",
                ));
            }
            if slot != FREE {
                if let Some(e) = cx.busy(&g.server, &label(), slot) {
                    return Err(e);
                }
            }
            self.res.gpus.push((sid, g.gpu));
            if servers.insert(sid) {
                leaves.insert(topo.server(sid).leaf);
            }
        }
        shape(cx, d, &servers, &leaves)?;
        Ok(())
    }

    /// Virtual leaves and their server ports.
    fn virtual_leaves(&mut self, cx: &Ctx, d: &Decision) -> Result<(), StateError> {
        let st = cx.st;
        let (topo, names, lay, occ) = (st.topology(), st.names(), st.layout(), st.occ());
        // Virtual leaves and their server ports.
        for vl in &d.vclos.leaves {
            let lid = cx.leaf(&vl.leaf)?;
            if self.leaf_ports.insert(lid, HashSet::new()).is_some() {
                return Err(cx.invalid(&vl.leaf, "-", "leaf listed twice in the virtual Clos"));
            }
            if vl.server_ports.is_empty() {
                return Err(cx.invalid(
                    &vl.leaf,
                    "-",
                    "virtual leaf lists no server port (`vclos.leaves`): each leaf of the slice hosts some of the job's GPUs",
                ));
            }
            let leaf = topo.leaf(lid);
            for p in &vl.server_ports {
                let pi = cx.port(&names.server_port[lid.index()], &vl.leaf, "server port", p)?;
                match leaf.server_port_owner[pi as usize] {
                    Some(owner) if self.gpu_set.contains(&owner) => {}
                    _ => {
                        return Err(cx.invalid(
                            &vl.leaf,
                            p,
                            "server port is not the port of one of the job's GPUs",
                        ))
                    }
                }
                if let Some(set) = self.leaf_ports.get_mut(&lid) {
                    if !set.insert(pi) {
                        return Err(cx.invalid(&vl.leaf, p, "server port listed twice"));
                    }
                }
                let flat = lay.server_port(lid, pi);
                if let Some(e) = cx.busy(&vl.leaf, p, occ.server_port[flat]) {
                    return Err(e);
                }
                self.res.server_ports.push(flat);
            }
        }
        if !d.vclos.leaves.is_empty() {
            for &(sid, g) in &self.res.gpus {
                let srv = topo.server(sid);
                let listed = self
                    .leaf_ports
                    .get(&srv.leaf)
                    .is_some_and(|s| s.contains(&srv.ports[g as usize]));
                if !listed {
                    return Err(cx.invalid(
                        &srv.name,
                        &format!("gpu{g}"),
                        "the GPU's server port is missing from the virtual Clos",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Spines, and cross-connects (checked for idleness here; use is checked with links).
    fn spines_and_cross_connects(&mut self, cx: &Ctx, d: &Decision) -> Result<(), StateError> {
        let st = cx.st;
        let (topo, names, lay, occ) = (st.topology(), st.names(), st.layout(), st.occ());
        for s in &d.vclos.spines {
            if !self.spines.insert(cx.spine(s)?) {
                return Err(cx.invalid(s, "-", "spine listed twice in the virtual Clos"));
            }
        }

        // Cross-connects (checked for idleness here; use is checked with links).
        for c in &d.vclos.cross_connects {
            let oid = cx.ocs(&c.ocs)?;
            let map = &names.ocs_port[oid.index()];
            let a = cx.port(map, &c.ocs, "port", &c.a)?;
            let b = cx.port(map, &c.ocs, "port", &c.b)?;
            if a == b {
                return Err(cx.invalid(&c.ocs, &c.a, "cross-connect joins a port to itself"));
            }
            for (p, name) in [(a, &c.a), (b, &c.b)] {
                if let Some(e) = cx.busy(&c.ocs, name, occ.ocs_port[lay.ocs_port(oid, p)]) {
                    return Err(e);
                }
                if topo.ocs_dev(oid).port_peer[p as usize].is_none() {
                    return Err(cx.invalid(&c.ocs, name, "OCS port is not cabled"));
                }
            }
            if self.cross_of.insert((oid, a), b).is_some()
                || self.cross_of.insert((oid, b), a).is_some()
            {
                return Err(cx.invalid(&c.ocs, &c.a, "OCS port used by two cross-connects"));
            }
            self.res.cross.push((oid, a, b));
        }
        Ok(())
    }

    /// One reserved link: a real path, its ports free or shared by agreement.
    fn link(&mut self, cx: &Ctx, d: &Decision, link: &ReservedLink) -> Result<(), StateError> {
        let st = cx.st;
        let (names, lay, occ) = (st.names(), st.layout(), st.occ());
        let shared = d
            .sharing
            .as_ref()
            .is_some_and(|sh| sh.shares(&link.leaf, &link.uplink));
        // The link's ports: held by this job alone, or shared.
        let mut ends: Vec<(End, &str, &str)> = Vec::with_capacity(4);
        let lid = cx.leaf(&link.leaf)?;
        if !self.leaf_ports.contains_key(&lid) {
            return Err(cx.invalid(
                &link.leaf,
                &link.uplink,
                "reserved link from a leaf that is not in the virtual Clos",
            ));
        }
        let u = cx.port(
            &names.uplink[lid.index()],
            &link.leaf,
            "uplink",
            &link.uplink,
        )?;
        let here = PortRef::Leaf(lid, u);
        let far = self.far_end(cx, link, lid)?;
        self.hop(cx, link, (here, far, shared), &mut ends)?;
        for (end, dev, port) in [
            (here, &link.leaf, &link.uplink),
            (far, &link.peer, &link.peer_port),
        ] {
            match end {
                PortRef::Leaf(l, u) => {
                    if !self.seen_uplink.insert((l, u)) {
                        return Err(cx.invalid(dev, port, "uplink used by two reserved links"));
                    }
                    ends.push((End::Uplink(lay.uplink(l, u)), dev, port));
                    self.uplinks_of.entry(l).or_default().insert(u);
                }
                PortRef::Spine(s, p) => {
                    if !self.seen_spine_port.insert((s, p)) {
                        return Err(cx.invalid(dev, port, "spine port used by two reserved links"));
                    }
                    ends.push((End::Spine(lay.spine_port(s, p)), dev, port));
                }
                PortRef::Ocs(..) => {}
            }
        }
        if shared {
            if matches!(far, PortRef::Leaf(..)) {
                return Err(cx.invalid(
                    &link.leaf,
                    &link.uplink,
                    "a leaf-to-leaf link cannot be shared (no spine VRF to separate the jobs)",
                ));
            }
            if let Some(link) = sharing::link(cx, d, (&link.leaf, &link.uplink), &ends)? {
                self.res.shared.push(link);
                return Ok(());
            }
        }
        for (end, dev, port) in ends {
            let (v, flat) = match end {
                End::Uplink(i) => (&mut self.res.uplinks, i),
                End::Spine(i) => (&mut self.res.spine_ports, i),
                End::Ocs(i) => (&mut self.res.ocs_ports, i),
            };
            if let Some(e) = cx.busy(dev, port, end.slot(occ)) {
                return Err(e);
            }
            v.push(flat);
        }
        Ok(())
    }

    /// The far end of `link` from leaf `lid`: a spine port of the slice,
    /// or (OCS two-leaf case) another leaf's uplink.
    fn far_end(
        &mut self,
        cx: &Ctx,
        link: &ReservedLink,
        lid: LeafId,
    ) -> Result<PortRef, StateError> {
        let names = cx.st.names();
        Ok(if let Some(&sid) = names.spine.get(&link.peer) {
            if !self.spines.contains(&sid) {
                return Err(cx.invalid(
                    &link.peer,
                    &link.peer_port,
                    "reserved link to a spine that is not in the virtual Clos",
                ));
            }
            self.spines_used.insert(sid);
            let p = cx.port(
                &names.spine_port[sid.index()],
                &link.peer,
                "port",
                &link.peer_port,
            )?;
            PortRef::Spine(sid, p)
        } else if let Some(&l2) = names.leaf.get(&link.peer) {
            if l2 == lid || !self.leaf_ports.contains_key(&l2) {
                return Err(cx.invalid(
                    &link.peer,
                    &link.peer_port,
                    "leaf-to-leaf link must join two different leaves of the virtual Clos",
                ));
            }
            let p = cx.port(
                &names.uplink[l2.index()],
                &link.peer,
                "uplink",
                &link.peer_port,
            )?;
            PortRef::Leaf(l2, p)
        } else {
            return Err(cx.unknown("spine or leaf", &link.peer));
        })
    }

    /// `link`'s path from `here` to `far`: a cable, or an OCS hop patched
    /// now or by the decision's own cross-connects; its OCS ports join `ends`.
    fn hop<'l>(
        &mut self,
        cx: &Ctx,
        link: &'l ReservedLink,
        (here, far, shared): (PortRef, PortRef, bool),
        ends: &mut Vec<(End, &'l str, &'l str)>,
    ) -> Result<(), StateError> {
        let st = cx.st;
        let (topo, names, lay) = (st.topology(), st.names(), st.layout());
        match &link.via {
            None => {
                if topo.peer(here) != Some(far) {
                    return Err(cx.invalid(
                        &link.leaf,
                        &link.uplink,
                        format!("not cabled to {}:{}", link.peer, link.peer_port),
                    ));
                }
            }
            Some(OcsHop {
                ocs,
                leaf_side,
                far_side,
            }) => {
                let oid = cx.ocs(ocs)?;
                let map = &names.ocs_port[oid.index()];
                let a = cx.port(map, ocs, "port", leaf_side)?;
                let b = cx.port(map, ocs, "port", far_side)?;
                if topo.peer(here) != Some(PortRef::Ocs(oid, a)) {
                    return Err(cx.invalid(
                        &link.leaf,
                        &link.uplink,
                        format!("not cabled to {ocs}:{leaf_side}"),
                    ));
                }
                if topo.peer(far) != Some(PortRef::Ocs(oid, b)) {
                    return Err(cx.invalid(
                        &link.peer,
                        &link.peer_port,
                        format!("not cabled to {ocs}:{far_side}"),
                    ));
                }
                let by_cross = self.cross_of.get(&(oid, a)) == Some(&b);
                let rewired =
                    self.cross_of.contains_key(&(oid, a)) || self.cross_of.contains_key(&(oid, b));
                if by_cross {
                    self.used_cross.insert((oid, a));
                } else if rewired || st.patch(oid, a) != Some(b) {
                    return Err(cx.invalid(
                        ocs,
                        leaf_side,
                        format!("not patched to {far_side} (now or by this decision)"),
                    ));
                }
                if shared && by_cross {
                    return Err(cx.invalid(
                        ocs,
                        leaf_side,
                        "a shared link is used as patched; this decision may not rewire it",
                    ));
                }
                for (p, name) in [(a, leaf_side), (b, far_side)] {
                    if !self.seen_ocs.insert((oid, p)) {
                        return Err(cx.invalid(ocs, name, "OCS port used by two reserved links"));
                    }
                    ends.push((End::Ocs(lay.ocs_port(oid, p)), ocs, name));
                }
            }
        }
        Ok(())
    }

    /// What the links as a whole must cover: every cross-connect used, every spine reached; cross-connect ports held.
    fn links_complete(&mut self, cx: &Ctx, d: &Decision) -> Result<(), StateError> {
        let st = cx.st;
        let (names, lay) = (st.names(), st.layout());
        for c in &d.vclos.cross_connects {
            if let Some(oid) = names.ocs.get(&c.ocs) {
                let a = names.ocs_port[oid.index()].get(&c.a).copied();
                let b = names.ocs_port[oid.index()].get(&c.b).copied();
                let used = [a, b]
                    .iter()
                    .flatten()
                    .any(|p| self.used_cross.contains(&(*oid, *p)));
                if !used {
                    return Err(cx.invalid(
                        &c.ocs,
                        &c.a,
                        format!(
                            "cross-connect {}~{} is not used by any reserved link",
                            c.a, c.b
                        ),
                    ));
                }
            }
        }
        for s in &d.vclos.spines {
            if let Some(sid) = names.spine.get(s) {
                if !self.spines_used.contains(sid) {
                    return Err(cx.invalid(
                        s,
                        "-",
                        "spine in the virtual Clos has no reserved link",
                    ));
                }
            }
        }
        // Cross-connect ports are held even when a link already lists them.
        for &(oid, a, b) in &self.res.cross {
            for p in [a, b] {
                if !self.seen_ocs.contains(&(oid, p)) {
                    self.res.ocs_ports.push(lay.ocs_port(oid, p));
                }
            }
        }
        Ok(())
    }

    /// Source routes: one-to-one, from the job's server ports onto its uplinks; every virtual leaf routed.
    fn source_routes(&mut self, cx: &Ctx, d: &Decision) -> Result<(), StateError> {
        let st = cx.st;
        let names = st.names();
        // Source routes: one-to-one, from the job's server ports onto its uplinks.
        let mut route_up: HashSet<(LeafId, u16)> = HashSet::new();
        for r in &d.source_routes {
            let lid = cx.leaf(&r.leaf)?;
            let Some(ports) = self.leaf_ports.get(&lid) else {
                return Err(cx.invalid(
                    &r.leaf,
                    &r.server_port,
                    "source route on a leaf that is not in the virtual Clos",
                ));
            };
            let sp = cx.port(
                &names.server_port[lid.index()],
                &r.leaf,
                "server port",
                &r.server_port,
            )?;
            if !ports.contains(&sp) {
                return Err(cx.invalid(
                    &r.leaf,
                    &r.server_port,
                    "source route from a server port the job does not hold",
                ));
            }
            let up = cx.port(&names.uplink[lid.index()], &r.leaf, "uplink", &r.uplink)?;
            if !self.uplinks_of.get(&lid).is_some_and(|s| s.contains(&up)) {
                return Err(cx.invalid(
                    &r.leaf,
                    &r.uplink,
                    "source route onto an uplink the job has not reserved",
                ));
            }
            if !self.routed.insert((lid, sp)) {
                return Err(cx.invalid(
                    &r.leaf,
                    &r.server_port,
                    "server port routed twice (the map must be one-to-one)",
                ));
            }
            if !route_up.insert((lid, up)) {
                return Err(cx.invalid(
                    &r.leaf,
                    &r.uplink,
                    "two server ports routed onto one uplink (the map must be one-to-one)",
                ));
            }
        }
        for vl in &d.vclos.leaves {
            let Some(&lid) = names.leaf.get(&vl.leaf) else {
                continue;
            };
            if self.uplinks_of.get(&lid).is_none_or(|s| s.is_empty()) {
                return Err(cx.invalid(
                    &vl.leaf,
                    "-",
                    "virtual leaf has no reserved link (`vclos.links`): its GPUs' traffic could not leave it",
                ));
            }
            for p in &vl.server_ports {
                let pi = names.server_port[lid.index()].get(p).copied();
                if pi.is_some_and(|pi| !self.routed.contains(&(lid, pi))) {
                    return Err(cx.invalid(
                        &vl.leaf,
                        p,
                        "server port has no source route (`source_routes`)",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `a, b, c, d, … 3 more`: the first [`LISTED`] names of a list.
fn listed<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    let n = names.len();
    let mut out: Vec<&str> = names.take(LISTED).collect();
    let more = n.saturating_sub(LISTED);
    let more = (more > 0).then(|| format!("… {more} more"));
    out.extend(more.as_deref());
    out.join(", ")
}

/// The decision's shape against where its GPUs are (module doc): `servers`
/// and `leaves` are those of its GPUs, already resolved.
fn shape(
    cx: &Ctx,
    d: &Decision,
    servers: &BTreeSet<ServerId>,
    leaves: &BTreeSet<LeafId>,
) -> Result<(), StateError> {
    gpu_counts(cx, d)?;
    stage_fits_placement(cx, d, servers, leaves)?;

    let v = &d.vclos;
    let sections: [(&'static str, bool); 5] = [
        ("vclos.leaves", v.leaves.is_empty()),
        ("vclos.spines", v.spines.is_empty()),
        ("vclos.links", v.links.is_empty()),
        ("vclos.cross_connects", v.cross_connects.is_empty()),
        ("source_routes", d.source_routes.is_empty()),
    ];
    let carried = sections.iter().find(|(_, empty)| !empty).map(|&(f, _)| f);
    if leaves.len() == 1 {
        return match carried {
            Some(field) if d.stage != Stage::Manual => Err(cx.shape(
                field,
                format!(
                    "a job under one leaf ({}) carries no virtual Clos: its traffic never leaves the leaf",
                    leaf_names(cx, leaves)
                ),
            )),
            _ => Ok(()),
        };
    }

    // Several leaves: a virtual Clos and source routes, or (baselines'
    // ideal network only) a `manual` decision with no network part at all.
    if carried.is_none() && d.stage == Stage::Manual && !cx.st.isolated() {
        return Ok(());
    }
    several_leaves(cx, d, leaves)
}

/// `a, b, c, d, … 3 more`: the names of `leaves`.
fn leaf_names(cx: &Ctx, leaves: &BTreeSet<LeafId>) -> String {
    let topo = cx.st.topology();
    listed(leaves.iter().map(|&l| &*topo.leaf(l).name))
}

/// Whether `stage` builds a virtual Clos across leaves (not `server`,
/// `leaf` or `manual`).
fn builds_network(stage: Stage) -> bool {
    !matches!(stage, Stage::Server | Stage::Leaf | Stage::Manual)
}

/// The decision holds GPUs, and at least the number it requested.
fn gpu_counts(cx: &Ctx, d: &Decision) -> Result<(), StateError> {
    if d.gpus.is_empty() {
        return Err(cx.shape("gpus", "a decision holds at least one GPU; none is listed"));
    }
    if let Some(r) = d.requested_gpus {
        if r == 0 || r as usize > d.gpus.len() {
            return Err(cx.shape(
                "requested_gpus",
                format!(
                    "{r} GPUs requested, but a decision asks for at least 1 and at most the {} GPUs it holds",
                    d.gpus.len()
                ),
            ));
        }
    }
    Ok(())
}

/// The stage fits how many servers and leaves the GPUs are on.
fn stage_fits_placement(
    cx: &Ctx,
    d: &Decision,
    servers: &BTreeSet<ServerId>,
    leaves: &BTreeSet<LeafId>,
) -> Result<(), StateError> {
    let topo = cx.st.topology();
    let server_names = || listed(servers.iter().map(|&s| &*topo.server(s).name));
    let stage = d.stage.name();
    let network = builds_network(d.stage);
    let wrong = match d.stage {
        Stage::Server if servers.len() > 1 => Some(format!(
            "`server` means one server, but the GPUs are on {} servers ({})",
            servers.len(),
            server_names()
        )),
        Stage::Leaf if leaves.len() > 1 => Some(format!(
            "`leaf` means servers under one leaf, but the GPUs are under {} leaves ({})",
            leaves.len(),
            leaf_names(cx, leaves)
        )),
        Stage::Leaf if servers.len() == 1 => Some(format!(
            "`leaf` means several servers under one leaf, but the GPUs are all on {} (use `server`)",
            server_names()
        )),
        _ if network && leaves.len() == 1 => Some(format!(
            "`{stage}` builds a virtual Clos across leaves, but the GPUs are all under {} (use `server` or `leaf`)",
            leaf_names(cx, leaves)
        )),
        _ => None,
    };
    if let Some(reason) = wrong {
        return Err(cx.shape("stage", reason));
    }
    Ok(())
}

/// A job under several leaves has a virtual Clos and source routes, with
/// the sections its stage needs.
fn several_leaves(cx: &Ctx, d: &Decision, leaves: &BTreeSet<LeafId>) -> Result<(), StateError> {
    let v = &d.vclos;
    let span = format!(
        "the GPUs are under {} leaves ({})",
        leaves.len(),
        leaf_names(cx, leaves)
    );
    if v.leaves.is_empty() {
        return Err(cx.shape(
            "vclos",
            format!(
                "{span}, so the job needs a virtual Clos (`leaves`, `spines`, `links`) and a source route for each GPU's server port; `vclos` is missing or lists no leaves"
            ),
        ));
    }
    if d.source_routes.is_empty() {
        return Err(cx.shape(
            "source_routes",
            format!(
                "{span}, so each GPU's server port needs a source route onto one of the job's uplinks; `source_routes` is missing or empty"
            ),
        ));
    }
    stage_sections(cx, d)?;
    leaf_to_leaf_links(cx, d)
}

/// The spines, leaves and cross-connects a network stage allows.
fn stage_sections(cx: &Ctx, d: &Decision) -> Result<(), StateError> {
    let v = &d.vclos;
    let stage = d.stage.name();
    match d.stage {
        Stage::Vclos if !v.cross_connects.is_empty() => Err(cx.shape(
            "vclos.cross_connects",
            "stage `vclos` never rewires an OCS (it uses unused links as they are); use `ocs-spine`, `ocs-vclos` or `manual`",
        )),
        Stage::OcsSpine if v.spines.len() != 1 => Err(cx.shape(
            "vclos.spines",
            format!(
                "stage `ocs-spine` uses exactly one spine ({} listed)",
                v.spines.len()
            ),
        )),
        Stage::OcsTwoLeaf if v.leaves.len() != 2 => Err(cx.shape(
            "vclos.leaves",
            format!(
                "stage `ocs-two-leaf` joins exactly two leaves ({} listed)",
                v.leaves.len()
            ),
        )),
        Stage::OcsTwoLeaf if !v.spines.is_empty() => Err(cx.shape(
            "vclos.spines",
            "stage `ocs-two-leaf` uses no spine: its two leaves are joined through the OCS",
        )),
        Stage::Vclos | Stage::OcsVclos if v.spines.is_empty() => Err(cx.shape(
            "vclos.spines",
            format!("stage `{stage}` uses virtual spines; none is listed"),
        )),
        _ => Ok(()),
    }
}

/// Only `ocs-two-leaf` and `manual` reserve a link from a leaf to a leaf.
fn leaf_to_leaf_links(cx: &Ctx, d: &Decision) -> Result<(), StateError> {
    let v = &d.vclos;
    let stage = d.stage.name();
    if builds_network(d.stage) && d.stage != Stage::OcsTwoLeaf {
        let names = cx.st.names();
        if let Some(k) = v.links.iter().find(|k| names.leaf.contains_key(&k.peer)) {
            return Err(cx.invalid(
                &k.leaf,
                &k.uplink,
                format!(
                    "leaf-to-leaf link to {}:{} in stage `{stage}` (only `ocs-two-leaf` and `manual` join leaves directly)",
                    k.peer, k.peer_port
                ),
            ));
        }
    }
    Ok(())
}
