//! The forwarding state installed on the devices, in fabric terms.
//!
//! Built from parsed running configurations (or from an emulator's models);
//! the verifier reads nothing else. Leaf redirects are keyed by server-facing
//! port, spine VRFs list their bound ports and one route per destination
//! leaf (or per destination GPU, where a spine reaches a leaf over several
//! links), and each OCS has its current patch table.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::topology::{LeafId, OcsId, PortRef, SpineId, Topology};

/// A route's destination: a leaf's GPU prefix (`None`), or the host route
/// of the GPU behind one of its server ports (`Some(port)`), which wins
/// over the leaf's prefix (longest prefix match, RFC 1812 Section 5.2.4.3).
pub type Dest = (LeafId, Option<u16>);

/// A VRF on a (logical) spine: a virtual spine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vrf {
    pub name: String,
    /// Spine ports bound to the VRF.
    pub ports: BTreeSet<u16>,
    /// Destination -> egress spine port.
    pub routes: BTreeMap<Dest, u16>,
    /// Destination -> why its route has no usable egress on this logical
    /// spine (next hop on no port, on another logical spine, two routes). A
    /// flow to that destination fails with this reason.
    pub unresolved: BTreeMap<Dest, String>,
    /// Routes to prefixes that are no leaf's GPU prefix, described with the
    /// device; named when a flow finds no route.
    pub strays: Vec<String>,
    /// 802.1Q sub-interfaces bound to the VRF: (spine port, VLAN). Frames
    /// tagged with the VLAN on the port enter this VRF (a shared link,
    /// issue 16), untagged ones the VRF of the port itself.
    pub tagged: BTreeSet<(u16, u16)>,
    /// Destination -> VLAN, where the route leaves through a sub-interface
    /// of its egress port (tagged).
    pub egress_vlans: BTreeMap<Dest, u16>,
}

impl Vrf {
    /// Whether the VRF takes frames arriving on `port` with tag `vlan`.
    pub fn binds(&self, port: u16, vlan: Option<u16>) -> bool {
        match vlan {
            None => self.ports.contains(&port),
            Some(v) => self.tagged.contains(&(port, v)),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ForwardingState {
    /// (leaf, server-facing port) -> uplink index.
    redirects: HashMap<(LeafId, u16), u16>,
    /// Redirects that match only traffic to these leaves (an ACL's
    /// destinations); absent = all destinations.
    scopes: HashMap<(LeafId, u16), BTreeSet<LeafId>>,
    /// Redirects onto an 802.1Q sub-interface of their uplink: its VLAN.
    redirect_vlans: HashMap<(LeafId, u16), u16>,
    /// Leaf uplinks' sub-interfaces: (leaf, uplink, VLAN terminated).
    leaf_vlans: std::collections::HashSet<(LeafId, u16, u16)>,
    /// Server ports whose source route cannot be followed, and why.
    broken: HashMap<(LeafId, u16), String>,
    /// Device-level findings that concern no single flow (configuration on
    /// ports the topology does not know, prefixes of no leaf).
    problems: Vec<String>,
    /// Job -> where the devices hold configuration of it (source routes,
    /// VRFs), to find leftovers of jobs that are no longer held.
    configured: BTreeMap<String, Vec<String>>,
    vrfs: BTreeMap<SpineId, Vec<Vrf>>,
    /// Per OCS: port -> patched partner.
    patches: BTreeMap<OcsId, HashMap<u16, u16>>,
}

impl ForwardingState {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty state whose OCS patch tables are the topology's initial ones.
    pub fn with_initial_patches(topo: &Topology) -> Self {
        let mut s = Self::new();
        for (i, o) in topo.ocs.iter().enumerate() {
            s.set_patches(OcsId(i as u32), o.patches.iter().copied());
        }
        s
    }

    pub fn set_redirect(&mut self, leaf: LeafId, server_port: u16, uplink: u16) {
        self.redirects.insert((leaf, server_port), uplink);
    }

    /// A redirect matching only traffic toward `destinations`.
    pub fn set_scoped_redirect(
        &mut self,
        leaf: LeafId,
        server_port: u16,
        uplink: u16,
        destinations: BTreeSet<LeafId>,
    ) {
        self.redirects.insert((leaf, server_port), uplink);
        self.scopes.insert((leaf, server_port), destinations);
    }

    /// A source route that exists but cannot be followed (`why` says how).
    pub fn set_broken_redirect(&mut self, leaf: LeafId, server_port: u16, why: String) {
        self.clear_redirect(leaf, server_port);
        self.broken.insert((leaf, server_port), why);
    }

    /// The redirect of a server port leaves tagged `vlan` (through that
    /// sub-interface of its uplink).
    pub fn set_redirect_vlan(&mut self, leaf: LeafId, server_port: u16, vlan: u16) {
        self.redirect_vlans.insert((leaf, server_port), vlan);
    }

    /// The VLAN a server port's redirect tags its traffic with, if any.
    pub fn redirect_vlan(&self, leaf: LeafId, server_port: u16) -> Option<u16> {
        self.redirect_vlans.get(&(leaf, server_port)).copied()
    }

    /// Leaf uplink `uplink` has a sub-interface terminating `vlan`.
    pub fn add_leaf_vlan(&mut self, leaf: LeafId, uplink: u16, vlan: u16) {
        self.leaf_vlans.insert((leaf, uplink, vlan));
    }

    /// Whether frames tagged `vlan` arriving on the leaf's uplink are taken
    /// (untagged ones always are: the routed main interface).
    pub fn leaf_accepts(&self, leaf: LeafId, uplink: u16, vlan: Option<u16>) -> bool {
        vlan.is_none_or(|v| self.leaf_vlans.contains(&(leaf, uplink, v)))
    }

    pub fn clear_redirect(&mut self, leaf: LeafId, server_port: u16) {
        self.redirect_vlans.remove(&(leaf, server_port));
        self.redirects.remove(&(leaf, server_port));
        self.scopes.remove(&(leaf, server_port));
        self.broken.remove(&(leaf, server_port));
    }

    /// The leaves a redirect matches, if it is scoped.
    pub fn redirect_scope(&self, leaf: LeafId, server_port: u16) -> Option<&BTreeSet<LeafId>> {
        self.scopes.get(&(leaf, server_port))
    }

    /// Why the source route of a server port cannot be followed, if so.
    pub fn broken_redirect(&self, leaf: LeafId, server_port: u16) -> Option<&str> {
        self.broken.get(&(leaf, server_port)).map(String::as_str)
    }

    pub fn add_problem(&mut self, problem: String) {
        self.problems.push(problem);
    }

    /// Record that the devices hold configuration of `job` at `place`.
    pub fn note_job_config(&mut self, job: &str, place: String) {
        self.configured
            .entry(job.to_string())
            .or_default()
            .push(place);
    }

    /// Job -> where its configuration is held on the devices.
    pub fn configured_jobs(&self) -> &BTreeMap<String, Vec<String>> {
        &self.configured
    }

    /// Device-level findings (see the field doc).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The VRFs of a logical spine.
    pub fn vrfs(&self, spine: SpineId) -> &[Vrf] {
        self.vrfs.get(&spine).map_or(&[], Vec::as_slice)
    }

    pub fn add_vrf(&mut self, spine: SpineId, vrf: Vrf) {
        self.vrfs.entry(spine).or_default().push(vrf);
    }

    /// Mutable access to a spine's VRFs (tests break them deliberately).
    pub fn vrfs_mut(&mut self, spine: SpineId) -> &mut Vec<Vrf> {
        self.vrfs.entry(spine).or_default()
    }

    pub fn set_patches(&mut self, ocs: OcsId, pairs: impl IntoIterator<Item = (u16, u16)>) {
        let table = self.patches.entry(ocs).or_default();
        table.clear();
        for (a, b) in pairs {
            table.insert(a, b);
            table.insert(b, a);
        }
    }

    pub fn redirect(&self, leaf: LeafId, server_port: u16) -> Option<u16> {
        self.redirects.get(&(leaf, server_port)).copied()
    }

    /// The VRF taking frames tagged `vlan` (`None`: untagged) on spine
    /// port `port`, if any (the first, if misconfigured twice).
    pub fn vrf_of(&self, spine: SpineId, port: u16, vlan: Option<u16>) -> Option<&Vrf> {
        self.vrfs.get(&spine)?.iter().find(|v| v.binds(port, vlan))
    }

    /// Names of every VRF binding spine port `port` for frames tagged
    /// `vlan` (more than one is a fault).
    pub fn vrf_names_binding(&self, spine: SpineId, port: u16, vlan: Option<u16>) -> Vec<&str> {
        self.vrfs
            .get(&spine)
            .map(|v| {
                v.iter()
                    .filter(|v| v.binds(port, vlan))
                    .map(|v| v.name.as_str())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The switch port reached from the egress `from`, through an OCS patch
    /// when the cable ends on an OCS.
    pub fn far_end(&self, topo: &Topology, from: PortRef) -> Result<PortRef, String> {
        let peer = topo
            .peer(from)
            .ok_or_else(|| format!("{} is not cabled", topo.port_label(from)))?;
        match peer {
            PortRef::Ocs(o, p) => {
                let partner = self
                    .patches
                    .get(&o)
                    .and_then(|t| t.get(&p))
                    .ok_or_else(|| format!("{} is dark (unpatched)", topo.port_label(peer)))?;
                let out = PortRef::Ocs(o, *partner);
                topo.peer(out).ok_or_else(|| {
                    format!(
                        "{} is patched to uncabled {}",
                        topo.port_label(peer),
                        topo.port_label(out)
                    )
                })
            }
            other => Ok(other),
        }
    }
}
