//! Deriving intent: baseline from the topology, plus each held decision.
//!
//! Everything here is a pure function of `(&Topology, &[Decision])`. A
//! decision is resolved name by name against the topology first; any name
//! that does not resolve, or a link the cabling cannot provide, is an error
//! naming the job and the offending value, before any item is produced.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tracing::debug;

use super::addressing as addr;
use super::name::{policy_name, vrf_name};
use super::{Description, DeviceIntent, Hostname, IntentError, Item, PortName, VrfName};
use crate::decision::{Decision, ReservedLink};
use crate::names::{JobId, NameError};
use crate::topology::{DeviceId, LeafId, Member, OcsId, PortRef, Spine, SpineId, Topology};

/// The intent of every managed device, indexed like [`Topology::devices`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricIntent {
    /// Shared: a device an incremental build did not touch is the same
    /// allocation in both intents, so comparing it is a pointer compare.
    pub devices: Vec<Arc<DeviceIntent>>,
}

impl FabricIntent {
    pub fn device(&self, name: &str) -> Option<&DeviceIntent> {
        self.devices.iter().find(|d| d.device == name).map(|d| &**d)
    }
}

/// The configuration of an idle fabric (no jobs).
pub fn baseline(topo: &Topology) -> Result<FabricIntent, IntentError> {
    build(topo, &[])
}

/// A job's own items per device (OCS cross-connects included as patches),
/// before they are merged with the baseline and the other jobs.
pub fn job_items(
    topo: &Topology,
    d: &Decision,
) -> Result<BTreeMap<DeviceId, BTreeSet<Item>>, IntentError> {
    Ok(resolve(topo, d)?.items)
}

/// Intent of every device with `decisions` held.
pub fn build(topo: &Topology, decisions: &[Decision]) -> Result<FabricIntent, IntentError> {
    build_on(&Base::new(topo)?, topo, decisions)
}

/// The items every device has whatever jobs are held (ports, addresses,
/// descriptions, hostnames), derived once per topology: deriving them is
/// most of [`build`] (a name, a label and an ordered insert per port), and
/// a fabric under management builds its intent on every change.
#[derive(Debug, Clone)]
pub struct Base {
    devices: Vec<BTreeSet<Item>>,
    /// The baseline address of each port that has one (a job's address on
    /// the port displaces it).
    addr: HashMap<(DeviceId, PortName), Item>,
}

impl Base {
    pub fn new(topo: &Topology) -> Result<Self, IntentError> {
        addr::check(topo)?;
        let mut devices: Vec<BTreeSet<Item>> = vec![BTreeSet::new(); topo.devices.len()];
        let mut addr = HashMap::new();
        baseline_items(topo, &mut devices, &mut addr)?;
        Ok(Base { devices, addr })
    }
}

/// [`build`] from `base`, which must be [`Base::new`] of the same `topo`.
pub fn build_on(
    base: &Base,
    topo: &Topology,
    decisions: &[Decision],
) -> Result<FabricIntent, IntentError> {
    let sorted = unique_by_job(decisions)?;
    let resolved = (sorted.iter())
        .map(|d| Ok((&d.job, resolve(topo, d)?)))
        .collect::<Result<Vec<_>, IntentError>>()?;
    let jobs: Vec<(&JobId, &Resolved)> = resolved.iter().map(|(j, r)| (*j, r)).collect();
    Ok(assemble(topo, device_sets(base, topo, &jobs, None)?))
}

/// The fabric's intent from every device's item set.
pub(super) fn assemble(topo: &Topology, sets: Vec<Option<BTreeSet<Item>>>) -> FabricIntent {
    FabricIntent {
        devices: (topo.devices.iter().zip(sets))
            .map(|(dev, items)| Arc::new(device_intent(dev, items.unwrap_or_default())))
            .collect(),
    }
}

/// `decisions` sorted by job, or the error for a job held twice.
pub(super) fn unique_by_job(decisions: &[Decision]) -> Result<Vec<&Decision>, IntentError> {
    let mut sorted: Vec<&Decision> = decisions.iter().collect();
    sorted.sort_by(|a, b| a.job.cmp(&b.job));
    for w in sorted.windows(2) {
        if w[0].job == w[1].job {
            return Err(IntentError::Decision {
                job: w[0].job.clone(),
                message: "two decisions for the same job".into(),
            });
        }
    }
    Ok(sorted)
}

pub(super) fn device_intent(dev: &crate::topology::Device, items: BTreeSet<Item>) -> DeviceIntent {
    DeviceIntent {
        device: dev.name.clone(),
        role: dev.role,
        dialect: dev.mgmt.dialect,
        items,
    }
}

/// The item set of every device in `only` (every device when `None`;
/// the others are `None`) with the resolved `jobs` held, sorted by job:
/// baseline, job items, OCS tables, and every check on those devices
/// (two jobs on one port's address or source route, a reserved link over
/// an unpatched OCS pair, two VRFs with one route distinguisher).
///
/// A device's set, and every check on it, depends only on the baseline
/// and the jobs whose items, cross-connects or OCS hops are on it, so
/// building a few devices gives what the whole build gives for them
/// ([`super::kept`] rebuilds only the devices a change touches).
pub(super) fn device_sets(
    base: &Base,
    topo: &Topology,
    jobs: &[(&JobId, &Resolved)],
    only: Option<&BTreeSet<DeviceId>>,
) -> Result<Vec<Option<BTreeSet<Item>>>, IntentError> {
    let wanted = |dev: DeviceId| only.is_none_or(|o| o.contains(&dev));
    let mut devices: Vec<Option<BTreeSet<Item>>> = (base.devices.iter().enumerate())
        .map(|(i, b)| wanted(DeviceId(i as u32)).then(|| b.clone()))
        .collect();
    // Job items, with per-port ownership to catch overlapping decisions.
    let mut owner: HashMap<(DeviceId, String), &JobId> = HashMap::new();
    let mut cross: Vec<(OcsId, u16, u16, JobId)> = Vec::new();
    let mut hops: Vec<(JobId, OcsId, u16, u16)> = Vec::new();
    let ocs_wanted = |o: OcsId| wanted(topo.ocs_dev(o).device);
    for &(job, r) in jobs {
        for (&dev, items) in &r.items {
            let Some(set) = devices[dev.index()].as_mut() else {
                continue;
            };
            for item in items {
                let key = match item {
                    Item::Address { port, .. } => Some(format!("address of {port}")),
                    Item::Redirect { port, .. } => Some(format!("source route of {port}")),
                    _ => None,
                };
                if let Some(key) = key {
                    if let Some(prev) = owner.insert((dev, key.clone()), job) {
                        if prev != job {
                            return Err(IntentError::Conflict {
                                a: prev.clone(),
                                b: job.clone(),
                                what: format!("{} on {}", key, topo.device(dev).name),
                            });
                        }
                    }
                    // A job's address on a port displaces the baseline one.
                    if let Item::Address { port, .. } = item {
                        if let Some(b) = base.addr.get(&(dev, port.clone())) {
                            set.remove(b);
                        }
                    }
                }
                if !matches!(item, Item::Patch { .. }) {
                    set.insert(item.clone());
                }
            }
        }
        cross.extend(
            (r.cross.iter())
                .filter(|c| ocs_wanted(c.0))
                .map(|&(o, a, b)| (o, a, b, job.clone())),
        );
        hops.extend(
            (r.hops.iter())
                .filter(|h| ocs_wanted(h.0))
                .map(|&(o, a, b)| (job.clone(), o, a, b)),
        );
    }
    ocs_tables(topo, &cross, &hops, &ocs_wanted, &mut devices)?;
    check_route_distinguishers(topo, &devices)?;
    Ok(devices)
}

fn port(name: &str) -> Result<PortName, IntentError> {
    PortName::new(name).map_err(|e| IntentError::Topology(e.to_string()))
}

fn describe(text: String) -> Result<Description, IntentError> {
    Description::new(text).map_err(|e| IntentError::Topology(e.to_string()))
}

fn baseline_items(
    topo: &Topology,
    devices: &mut [BTreeSet<Item>],
    base_addr: &mut HashMap<(DeviceId, PortName), Item>,
) -> Result<(), IntentError> {
    let mut add_port = |dev: DeviceId,
                        name: &str,
                        peer: Option<String>,
                        net: Option<super::Ipv4Net>|
     -> Result<(), IntentError> {
        let p = port(name)?;
        let items = &mut devices[dev.index()];
        if let Some(peer) = peer {
            items.insert(Item::Description {
                port: p.clone(),
                text: describe(peer)?,
            });
        }
        items.insert(Item::Routed { port: p.clone() });
        if let Some(net) = net {
            let a = Item::Address {
                port: p.clone(),
                vrf: None,
                net,
            };
            items.insert(a.clone());
            base_addr.insert((dev, p), a);
        }
        Ok(())
    };
    for (li, leaf) in topo.leaves.iter().enumerate() {
        let l = LeafId(li as u32);
        for (i, name) in leaf.server_ports.iter().enumerate() {
            let peer =
                leaf.server_port_owner[i].map(|(s, g)| format!("{} gpu{g}", topo.server(s).name));
            add_port(
                leaf.device,
                name,
                peer,
                Some(addr::server_port_gateway(l, i)),
            )?;
        }
        for (u, name) in leaf.uplinks.iter().enumerate() {
            let peer = leaf.uplink_peer[u].map(|p| topo.port_label(p));
            add_port(leaf.device, name, peer, Some(addr::uplink_address(l, u)))?;
        }
    }
    // Spine ports facing a leaf uplink (directly or through an initial patch)
    // take the odd address of that uplink's link.
    let mut spine_net = HashMap::new();
    for (a, b) in topo.initial_fabric_links() {
        if let (PortRef::Leaf(l, u), far @ PortRef::Spine(..)) = (a, b) {
            spine_net.insert(far, addr::uplink_peer_address(l, u as usize));
        }
    }
    for (si, spine) in topo.spines.iter().enumerate() {
        for (i, name) in spine.ports.iter().enumerate() {
            let here = PortRef::Spine(crate::topology::SpineId(si as u32), i as u16);
            let peer = spine.port_peer[i].map(|p| topo.port_label(p));
            add_port(spine.device, name, peer, spine_net.get(&here).copied())?;
        }
    }
    for dev in &topo.devices {
        if dev.role != crate::topology::Role::Ocs {
            let id = topo
                .device_id(&dev.name)
                .ok_or_else(|| IntentError::Topology(format!("device {} has no id", dev.name)))?;
            let name = Hostname::new(dev.name.clone())
                .map_err(|e| IntentError::Topology(e.to_string()))?;
            devices[id.index()].insert(Item::Hostname { name });
        }
    }
    Ok(())
}

/// A decision resolved against the topology.
#[derive(Debug)]
pub(super) struct Resolved {
    pub(super) items: BTreeMap<DeviceId, BTreeSet<Item>>,
    pub(super) cross: Vec<(OcsId, u16, u16)>,
    /// OCS hops of reserved links: (ocs, leaf side, far side) must be patched.
    pub(super) hops: Vec<(OcsId, u16, u16)>,
}

impl Resolved {
    /// Every device the decision puts something on or needs patched.
    pub(super) fn devices(&self, topo: &Topology) -> BTreeSet<DeviceId> {
        let ocs = (self.cross.iter().map(|c| c.0))
            .chain(self.hops.iter().map(|h| h.0))
            .map(|o| topo.ocs_dev(o).device);
        self.items.keys().copied().chain(ocs).collect()
    }
}

pub(super) fn resolve(topo: &Topology, d: &Decision) -> Result<Resolved, IntentError> {
    let mut r = Resolver {
        topo,
        d,
        items: BTreeMap::new(),
        hops: Vec::new(),
        reserved: BTreeSet::new(),
        subs: HashMap::new(),
        downs: BTreeMap::new(),
    };
    let job_leaves = r.job_leaves()?;
    let cross = r.cross_connects()?;
    for link in &d.vclos.links {
        r.link(link)?;
    }
    let own = r.source_routes(&job_leaves)?;
    r.spine_vrf_routes(&own);
    r.patches(&cross)?;
    let job = &d.job;
    debug!(job = %job, devices = r.items.len(), "resolved decision");
    Ok(Resolved {
        items: r.items,
        cross,
        hops: r.hops,
    })
}

/// One decision being resolved against the topology: the lookups, whose
/// errors name the job, and the items and link facts gathered so far.
struct Resolver<'a> {
    topo: &'a Topology,
    d: &'a Decision,
    items: BTreeMap<DeviceId, BTreeSet<Item>>,
    /// OCS hops of reserved links: (ocs, leaf side, far side) must be patched.
    hops: Vec<(OcsId, u16, u16)>,
    /// The leaf uplinks the job reserves, at either end of its links.
    reserved: BTreeSet<(LeafId, usize)>,
    // Shared links: (leaf, uplink) -> the job's sub-interface on the leaf
    // and the leaf's address there (the spine VRF's next hop).
    subs: HashMap<(LeafId, usize), (PortName, super::Ipv4Net)>,
    // (spine device, VRF, leaf) -> the leaf's reserved uplinks on that
    // logical spine: the VRF's routes to the leaf, made once all are known.
    downs: BTreeMap<(DeviceId, VrfName, LeafId), Vec<usize>>,
}

impl Resolver<'_> {
    /// An error in the decision, naming its job.
    fn bad(&self, message: String) -> IntentError {
        IntentError::Decision {
            job: self.d.job.clone(),
            message,
        }
    }

    /// A name made from the job that is not valid, naming the job.
    fn named(&self, source: NameError) -> IntentError {
        IntentError::Name {
            job: self.d.job.clone(),
            source,
        }
    }

    /// The leaf called `name`.
    fn leaf_of(&self, name: &str) -> Result<LeafId, IntentError> {
        self.topo
            .leaf_id(name)
            .ok_or_else(|| self.bad(format!("unknown leaf {name:?}")))
    }

    /// The index of uplink `name` of leaf `l`.
    fn uplink_of(&self, l: LeafId, name: &str) -> Result<usize, IntentError> {
        let topo = self.topo;
        topo.leaf(l)
            .uplinks
            .iter()
            .position(|p| **p == *name)
            .ok_or_else(|| {
                self.bad(format!(
                    "{name:?} is not an uplink of {}",
                    topo.leaf(l).name
                ))
            })
    }

    /// The index of port `name` of OCS `o`.
    fn ocs_port(&self, o: OcsId, name: &str) -> Result<u16, IntentError> {
        let topo = self.topo;
        topo.ocs_dev(o)
            .ports
            .iter()
            .position(|p| **p == *name)
            .map(|i| i as u16)
            .ok_or_else(|| {
                self.bad(format!(
                    "{name:?} is not a port of {}",
                    topo.ocs_dev(o).name
                ))
            })
    }

    /// The OCS called `name`.
    fn ocs_of(&self, name: &str) -> Result<OcsId, IntentError> {
        self.topo
            .ocs_id(name)
            .ok_or_else(|| self.bad(format!("unknown OCS {name:?}")))
    }

    /// The job's leaves, each of its server ports checked.
    fn job_leaves(&self) -> Result<BTreeSet<LeafId>, IntentError> {
        let mut job_leaves = BTreeSet::new();
        for vl in &self.d.vclos.leaves {
            let l = self.leaf_of(&vl.leaf)?;
            for p in &vl.server_ports {
                if !self.topo.leaf(l).server_ports.contains(p) {
                    return Err(self.bad(format!("{p:?} is not a server port of {:?}", vl.leaf)));
                }
            }
            job_leaves.insert(l);
        }
        Ok(job_leaves)
    }

    /// The job's OCS cross-connects as (ocs, lower port, higher port).
    fn cross_connects(&self) -> Result<Vec<(OcsId, u16, u16)>, IntentError> {
        let mut cross = Vec::new();
        for c in &self.d.vclos.cross_connects {
            let o = self.ocs_of(&c.ocs)?;
            let (a, b) = (self.ocs_port(o, &c.a)?, self.ocs_port(o, &c.b)?);
            if a == b {
                return Err(self.bad(format!(
                    "cross-connect {}:{}~{} joins a port to itself",
                    c.ocs, c.a, c.b
                )));
            }
            cross.push((o, a.min(b), a.max(b)));
        }
        Ok(cross)
    }

    /// Resolve one reserved link: check it is cabled as stated and give
    /// its far end the job's address (in the job's VRF on a spine).
    fn link(&mut self, link: &ReservedLink) -> Result<(), IntentError> {
        let l = self.leaf_of(&link.leaf)?;
        let u = self.uplink_of(l, &link.uplink)?;
        self.reserved.insert((l, u));
        let far = self.far_end(link)?;
        let label = format!("{}:{}", link.leaf, link.uplink);
        self.check_cabling(link, l, u, far, &label)?;
        let vlan = self
            .d
            .sharing
            .as_ref()
            .and_then(|sh| {
                sh.links
                    .iter()
                    .find(|x| x.leaf == link.leaf && x.uplink == link.uplink)
            })
            .map(|x| x.vlan);
        match far {
            PortRef::Spine(s, i) => self.spine_link(l, u, s, i, vlan)?,
            _ if vlan.is_some() => {
                return Err(self.bad(format!(
                    "shares {label}, which does not reach a spine: only spine links are shared"
                )))
            }
            PortRef::Leaf(l2, i) => self.leaf_link(l, u, l2, i)?,
            PortRef::Ocs(..) => {}
        }
        Ok(())
    }

    /// The far end of a reserved link: a spine port, or another leaf's
    /// uplink (which the job then also reserves).
    fn far_end(&mut self, link: &ReservedLink) -> Result<PortRef, IntentError> {
        let topo = self.topo;
        if let Some(s) = topo.spine_id(&link.peer) {
            let i = topo
                .spine(s)
                .ports
                .iter()
                .position(|p| *p == link.peer_port)
                .ok_or_else(|| {
                    self.bad(format!(
                        "{:?} is not a port of {:?}",
                        link.peer_port, link.peer
                    ))
                })?;
            Ok(PortRef::Spine(s, i as u16))
        } else if let Some(l2) = topo.leaf_id(&link.peer) {
            let i = self.uplink_of(l2, &link.peer_port)?;
            self.reserved.insert((l2, i));
            Ok(PortRef::Leaf(l2, i as u16))
        } else {
            Err(self.bad(format!("unknown link peer {:?}", link.peer)))
        }
    }

    /// Check that uplink `u` of leaf `l` reaches `far` directly or through
    /// the link's OCS hop, recording the hop.
    fn check_cabling(
        &mut self,
        link: &ReservedLink,
        l: LeafId,
        u: usize,
        far: PortRef,
        label: &str,
    ) -> Result<(), IntentError> {
        let topo = self.topo;
        let cabled = topo.leaf(l).uplink_peer[u];
        match &link.via {
            None if cabled == Some(far) => {}
            None => {
                return Err(self.bad(format!(
                    "{label} is not cabled to {}:{}",
                    link.peer, link.peer_port
                )))
            }
            Some(hop) => {
                let o = self.ocs_of(&hop.ocs)?;
                let (ls, fs) = (
                    self.ocs_port(o, &hop.leaf_side)?,
                    self.ocs_port(o, &hop.far_side)?,
                );
                if cabled != Some(PortRef::Ocs(o, ls))
                    || topo.peer(PortRef::Ocs(o, fs)) != Some(far)
                {
                    return Err(self.bad(format!(
                        "{label} does not reach {}:{} through {}:{}~{}",
                        link.peer, link.peer_port, hop.ocs, hop.leaf_side, hop.far_side
                    )));
                }
                self.hops.push((o, ls.min(fs), ls.max(fs)));
            }
        }
        Ok(())
    }

    /// A link from uplink `u` of leaf `l` to port `i` of spine `s`: the
    /// job's VRF on the spine, with the link's address (or, on a shared
    /// link, its VLAN sub-interface's) in it.
    fn spine_link(
        &mut self,
        l: LeafId,
        u: usize,
        s: SpineId,
        i: u16,
        vlan: Option<u16>,
    ) -> Result<(), IntentError> {
        let topo = self.topo;
        let spine = topo.spine(s);
        let dev = topo.device(spine.device);
        let member = (dev.members.len() > 1)
            .then(|| dev.members.iter().position(|m| *m == Member::Spine(s)))
            .flatten();
        let vrf: VrfName = vrf_name(&self.d.job, member).map_err(|e| self.named(e))?;
        let max = super::name::max_name_len(dev.mgmt.dialect);
        if vrf.as_str().len() > max {
            return Err(self.bad(format!(
                "VRF name `{vrf}` is longer than {max} characters, the limit of {} on {}",
                dev.mgmt.dialect, dev.name
            )));
        }
        let (spine_port, net) = match vlan {
            None => (
                port(&spine.ports[i as usize])?,
                addr::uplink_peer_address(l, u),
            ),
            Some(v) => self.shared_link(l, u, v, spine, i)?,
        };
        let set = self.items.entry(spine.device).or_default();
        set.insert(Item::Vrf { name: vrf.clone() });
        set.insert(Item::Address {
            port: spine_port,
            vrf: Some(vrf.clone()),
            net,
        });
        self.downs
            .entry((spine.device, vrf, l))
            .or_default()
            .push(u);
        Ok(())
    }

    /// The job's VLAN `v` sub-interfaces on a shared leaf-spine link, the
    /// leaf's end addressed; returns the spine's end and its address.
    fn shared_link(
        &mut self,
        l: LeafId,
        u: usize,
        v: u16,
        spine: &Spine,
        i: u16,
    ) -> Result<(PortName, super::Ipv4Net), IntentError> {
        let topo = self.topo;
        let shared =
            SharedEnds::new(topo, l, u, v, &spine.ports[i as usize]).map_err(|m| self.bad(m))?;
        for (dev, p) in [
            (topo.leaf(l).device, &shared.leaf),
            (spine.device, &shared.far),
        ] {
            let d = topo.device(dev);
            let max = super::name::max_name_len(d.mgmt.dialect);
            if p.as_str().len() > max {
                return Err(self.bad(format!(
                    "sub-interface name `{p}` is longer than {max} characters, the limit of {} on {}",
                    d.mgmt.dialect, d.name
                )));
            }
        }
        let leaf_set = self.items.entry(topo.leaf(l).device).or_default();
        leaf_set.insert(Item::Subinterface {
            port: shared.leaf.clone(),
            vlan: v,
        });
        leaf_set.insert(Item::Address {
            port: shared.leaf.clone(),
            vrf: None,
            net: shared.net,
        });
        self.items
            .entry(spine.device)
            .or_default()
            .insert(Item::Subinterface {
                port: shared.far.clone(),
                vlan: v,
            });
        self.subs.insert((l, u), (shared.leaf, shared.net));
        Ok((shared.far, super::Ipv4Net::new(shared.net.other_end(), 31)))
    }

    /// A link between uplink `u` of leaf `l` and uplink `i` of leaf `l2`:
    /// the higher end's address.
    fn leaf_link(&mut self, l: LeafId, u: usize, l2: LeafId, i: u16) -> Result<(), IntentError> {
        // The lower end of a leaf-leaf link owns its /31.
        let ((ol, ou), (fl, fu)) = if (l, u) < (l2, i as usize) {
            ((l, u), (l2, i as usize))
        } else {
            ((l2, i as usize), (l, u))
        };
        let far_leaf = self.topo.leaf(fl);
        self.items
            .entry(far_leaf.device)
            .or_default()
            .insert(Item::Address {
                port: port(&far_leaf.uplinks[fu])?,
                vrf: None,
                net: addr::uplink_peer_address(ol, ou),
            });
        Ok(())
    }

    /// The job's source routes as redirects on its leaves; returns
    /// (leaf, server port) -> its source-routed uplink.
    fn source_routes(
        &mut self,
        job_leaves: &BTreeSet<LeafId>,
    ) -> Result<HashMap<(LeafId, usize), usize>, IntentError> {
        let (topo, job) = (self.topo, &self.d.job);
        // (leaf, server port) -> its source-routed uplink.
        let mut own: HashMap<(LeafId, usize), usize> = HashMap::new();
        for sr in &self.d.source_routes {
            let l = self.leaf_of(&sr.leaf)?;
            let leaf = topo.leaf(l);
            let index = leaf
                .server_ports
                .iter()
                .position(|p| *p == sr.server_port)
                .ok_or_else(|| {
                    self.bad(format!(
                        "{:?} is not a server port of {:?}",
                        sr.server_port, sr.leaf
                    ))
                })?;
            let u = self.uplink_of(l, &sr.uplink)?;
            own.insert((l, index), u);
            if !self.reserved.contains(&(l, u)) {
                return Err(self.bad(format!(
                    "source route {}:{} -> {} uses an uplink the job does not reserve",
                    sr.leaf, sr.server_port, sr.uplink
                )));
            }
            if !job_leaves.contains(&l) {
                return Err(self.bad(format!(
                    "source route on {}, which is not a leaf of the job",
                    sr.leaf
                )));
            }
            if job_leaves.len() < 2 {
                return Err(self.bad(format!(
                    "source route on {}: a job on one leaf has no traffic to redirect",
                    sr.leaf
                )));
            }
            let index =
                u16::try_from(index + 1).map_err(|_| self.bad("too many server ports".into()))?;
            policy_name(job, index).map_err(|e| self.named(e))?;
            let destinations = job_leaves
                .iter()
                .filter(|o| **o != l)
                .map(|o| addr::leaf_gpu_prefix(*o))
                .collect();
            self.items
                .entry(leaf.device)
                .or_default()
                .insert(Item::Redirect {
                    job: job.clone(),
                    index,
                    port: port(&sr.server_port)?,
                    uplink: match self.subs.get(&(l, u)) {
                        Some((sub, _)) => sub.clone(),
                        None => port(&sr.uplink)?,
                    },
                    destinations,
                });
        }
        Ok(own)
    }

    /// The indices of the server ports of leaf `l` the job uses.
    fn gpu_ports(&self, l: LeafId) -> Vec<usize> {
        let topo = self.topo;
        self.d
            .vclos
            .leaves
            .iter()
            .filter(|vl| topo.leaf_id(&vl.leaf) == Some(l))
            .flat_map(|vl| &vl.server_ports)
            .filter_map(|p| topo.leaf(l).server_ports.iter().position(|q| q == p))
            .collect()
    }

    /// Each job VRF's routes on its spines down to the job's leaves, over
    /// the uplinks reserved; `own` is the source-routed uplink of server ports.
    fn spine_vrf_routes(&mut self, own: &HashMap<(LeafId, usize), usize>) {
        for ((dev, vrf, l), mut ups) in std::mem::take(&mut self.downs) {
            ups.sort_unstable();
            let routes = spine_routes(l, &ups, &self.gpu_ports(l), own);
            let set = self.items.entry(dev).or_default();
            for (prefix, u) in routes {
                let nexthop = match self.subs.get(&(l, u)) {
                    Some((_, net)) => net.addr,
                    None => addr::uplink_address(l, u).addr,
                };
                set.insert(Item::Route {
                    vrf: vrf.clone(),
                    prefix,
                    nexthop,
                });
            }
        }
    }

    /// The job's cross-connects as patch items on their OCS.
    fn patches(&mut self, cross: &[(OcsId, u16, u16)]) -> Result<(), IntentError> {
        for (o, a, b) in cross {
            let ocs = self.topo.ocs_dev(*o);
            self.items
                .entry(ocs.device)
                .or_default()
                .insert(Item::patch(
                    port(&ocs.ports[*a as usize])?,
                    port(&ocs.ports[*b as usize])?,
                ));
        }
        Ok(())
    }
}

/// The two ends of a job's 802.1Q sub-interface on a shared link
/// (addressing module doc): `<uplink>.<vlan>` on the leaf, with the even
/// address of the link's VLAN /31, and `<spine port>.<vlan>` on the spine.
struct SharedEnds {
    leaf: PortName,
    far: PortName,
    net: super::Ipv4Net,
}

impl SharedEnds {
    fn new(topo: &Topology, l: LeafId, u: usize, vlan: u16, far: &str) -> Result<Self, String> {
        let net = addr::shared_link_address(topo, l, u, vlan).ok_or_else(|| {
            format!(
                "no address for VLAN {vlan} on {}:{}: VLANs {}-{} on at most {} uplinks",
                topo.leaf(l).name,
                topo.leaf(l).uplinks[u],
                addr::SHARED_VLANS.start(),
                addr::SHARED_VLANS.end(),
                addr::MAX_SHARED_LINKS
            )
        })?;
        let sub = |p: &str| {
            PortName::new(p)
                .and_then(|p| addr::subinterface_name(&p, vlan))
                .map_err(|e| e.to_string())
        };
        Ok(SharedEnds {
            leaf: sub(&topo.leaf(l).uplinks[u])?,
            far: sub(far)?,
            net,
        })
    }
}

/// A job VRF's routes on one logical spine to leaf `l`, reached over the
/// reserved uplinks `ups` (sorted): (prefix, uplink of the next hop).
///
/// One link: the leaf's GPU prefix through it (paper Section 6: the spine
/// routes each job leaf's prefix down its link). Several links (OCS-vClos,
/// Appendix A.3: `a_n * t_m` links between a leaf and a spine): a route per
/// leaf prefix would have one next hop per link, and the spine would spread
/// the job's flows over them by ECMP hash, two flows on one link (issue 14's
/// network model found it; `vclos verify` refused such jobs). Instead each
/// of the job's GPUs on the leaf gets a host route ([`spine_downlink`]).
fn spine_routes(
    l: LeafId,
    ups: &[usize],
    gpu_ports: &[usize],
    own: &HashMap<(LeafId, usize), usize>,
) -> Vec<(super::Ipv4Net, usize)> {
    match ups {
        [u] => vec![(addr::leaf_gpu_prefix(l), *u)],
        _ => gpu_ports
            .iter()
            .map(|&p| {
                let u = spine_downlink(ups, own.get(&(l, p)).copied(), p);
                (super::Ipv4Net::new(addr::gpu_address(l, p), 32), u)
            })
            .collect(),
    }
}

/// Which of a leaf's links to one spine (`ups`, sorted, not empty) carries
/// traffic to the GPU on server port `port`, whose own source route is
/// `own`: its own link when that is one of them, the link a flow from the
/// GPU's rail peers arrives paired with (Lemma 5.1's leaf-wise permutation:
/// ring and halving-doubling flows go rail to rail, so sender and receiver
/// use links of the same slot); otherwise the `port mod n`-th, spreading
/// the rest evenly. Shared by the intent and the replay's network model so
/// the two cannot disagree.
pub fn spine_downlink(ups: &[usize], own: Option<usize>, port: usize) -> usize {
    match own.filter(|u| ups.contains(u)) {
        Some(u) => u,
        None => ups[port % ups.len().max(1)],
    }
}

/// Final patch tables: every job cross-connect, plus each initial patch
/// whose ports no job cross-connect touches (module doc of `decision`).
fn ocs_tables(
    topo: &Topology,
    cross: &[(OcsId, u16, u16, JobId)],
    hops: &[(JobId, OcsId, u16, u16)],
    wanted: &dyn Fn(OcsId) -> bool,
    devices: &mut [Option<BTreeSet<Item>>],
) -> Result<(), IntentError> {
    let mut used: HashMap<(OcsId, u16), &JobId> = HashMap::new();
    for (o, a, b, job) in cross {
        for p in [a, b] {
            if let Some(prev) = used.insert((*o, *p), job) {
                if prev != job {
                    return Err(IntentError::Conflict {
                        a: prev.clone(),
                        b: job.clone(),
                        what: format!(
                            "port {} of {}",
                            topo.ocs_dev(*o).ports[*p as usize],
                            topo.ocs_dev(*o).name
                        ),
                    });
                }
            }
        }
    }
    let mut table: BTreeSet<(OcsId, u16, u16)> =
        cross.iter().map(|(o, a, b, _)| (*o, *a, *b)).collect();
    for (oi, ocs) in topo.ocs.iter().enumerate() {
        let o = OcsId(oi as u32);
        if !wanted(o) {
            continue;
        }
        for &(a, b) in &ocs.patches {
            if !used.contains_key(&(o, a)) && !used.contains_key(&(o, b)) {
                table.insert((o, a.min(b), a.max(b)));
            }
        }
    }
    for (job, o, a, b) in hops {
        if !table.contains(&(*o, *a, *b)) {
            let ocs = topo.ocs_dev(*o);
            return Err(IntentError::Decision {
                job: job.clone(),
                message: format!(
                    "reserved link needs {}:{}~{}, which is not patched",
                    ocs.name, ocs.ports[*a as usize], ocs.ports[*b as usize]
                ),
            });
        }
    }
    for (o, a, b) in table {
        let ocs = topo.ocs_dev(o);
        let Some(set) = devices[ocs.device.index()].as_mut() else {
            continue;
        };
        set.insert(Item::patch(
            port(&ocs.ports[a as usize])?,
            port(&ocs.ports[b as usize])?,
        ));
    }
    Ok(())
}

fn check_route_distinguishers(
    topo: &Topology,
    devices: &[Option<BTreeSet<Item>>],
) -> Result<(), IntentError> {
    for (i, items) in devices.iter().enumerate() {
        let Some(items) = items else {
            continue;
        };
        let mut seen: HashMap<u32, &VrfName> = HashMap::new();
        for item in items {
            if let Item::Vrf { name } = item {
                if let Some(prev) = seen.insert(super::route_distinguisher(name), name) {
                    return Err(IntentError::Topology(format!(
                        "VRFs {prev} and {name} on {} hash to the same route distinguisher; rename one job",
                        topo.devices[i].name
                    )));
                }
            }
        }
    }
    Ok(())
}
