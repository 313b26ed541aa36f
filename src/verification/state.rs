//! The forwarding state installed on the devices, in fabric terms.
//!
//! Built from parsed running configurations (or from an emulator's models);
//! the verifier reads nothing else. Leaf redirects are keyed by server-facing
//! port, spine VRFs list their bound ports and one route per destination
//! leaf, and each OCS has its current patch table.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::topology::{LeafId, OcsId, PortRef, SpineId, Topology};

/// A VRF on a (logical) spine: a virtual spine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vrf {
    pub name: String,
    /// Spine ports bound to the VRF.
    pub ports: BTreeSet<u16>,
    /// Destination leaf -> egress spine port.
    pub routes: BTreeMap<LeafId, u16>,
}

#[derive(Debug, Clone, Default)]
pub struct ForwardingState {
    /// (leaf, server-facing port) -> uplink index.
    redirects: HashMap<(LeafId, u16), u16>,
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

    pub fn clear_redirect(&mut self, leaf: LeafId, server_port: u16) {
        self.redirects.remove(&(leaf, server_port));
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

    /// The VRF binding spine port `port`, if any (the first, if misconfigured twice).
    pub fn vrf_of(&self, spine: SpineId, port: u16) -> Option<&Vrf> {
        self.vrfs
            .get(&spine)?
            .iter()
            .find(|v| v.ports.contains(&port))
    }

    /// Names of every VRF binding spine port `port` (more than one is a fault).
    pub fn vrf_names_binding(&self, spine: SpineId, port: u16) -> Vec<&str> {
        self.vrfs
            .get(&spine)
            .map(|v| {
                v.iter()
                    .filter(|v| v.ports.contains(&port))
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
