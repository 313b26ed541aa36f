//! The busy-link oracle read from the emulated switches' running configs.
//!
//! An OCS port is busy when the switch port at the far end of its cable has
//! traffic steered onto it by the switch's *running* configuration: a leaf
//! uplink that a source route (`Redirect`) targets, a port that a redirect
//! vclos did not write targets (`ForeignSteering`: a hand-made CE traffic
//! policy, SONiC ACL or OpenConfig forwarding policy,
//! docs/devices/foreign-steering.md), or a spine port bound to
//! a job VRF (an `Address` in a VRF); steering onto an 802.1Q
//! sub-interface (`<port>.<vlan>`, a shared link) makes its parent busy.
//! Whoever configured the switch — the
//! controller, a test over SSH, a human — the OCS then refuses to rewire the
//! link, as the paper's idle-only rule demands.
//!
//! Each query parses the far switch's running config with its dialect, so
//! the rule follows exactly what the device shows; the steered port names
//! are cached per device against its running-config version, so repeated
//! queries (every port of a `DLT-PATCH` batch) cost a lookup.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tracing::warn;

use super::busy::BusyOracle;
use super::fabric::Switch;
use crate::intent::addressing::split_subinterface;
use crate::intent::Item;
use crate::topology::{DeviceId, OcsId, PortRef, Topology};

/// Steered port names of one device, valid for one running-config version.
type Cached = Option<(u64, Arc<HashSet<String>>)>;

/// Busy when a switch's running config steers traffic onto the far end.
#[derive(Debug)]
pub struct SteeredBusy {
    topo: Arc<Topology>,
    /// Indexed like [`Topology::devices`]; `None` for an OCS.
    switches: Vec<Option<Switch>>,
    cache: Vec<Mutex<Cached>>,
}

impl SteeredBusy {
    /// `switches` are looked up by device name.
    pub fn new(topo: Arc<Topology>, switch: impl Fn(&str) -> Option<Switch>) -> Self {
        let switches: Vec<Option<Switch>> = topo.devices.iter().map(|d| switch(&d.name)).collect();
        let cache = switches.iter().map(|_| Mutex::new(None)).collect();
        SteeredBusy {
            topo,
            switches,
            cache,
        }
    }

    /// Names of the ports of `device` its running config steers traffic
    /// onto; `None` if the config cannot be read (callers answer "busy").
    pub fn steered(&self, device: DeviceId) -> Option<Arc<HashSet<String>>> {
        let sw = self.switches.get(device.index())?.as_ref()?;
        let version = sw.running_version();
        let mut slot = self
            .cache
            .get(device.index())?
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((v, set)) = slot.as_ref() {
            if *v == version {
                return Some(Arc::clone(set));
            }
        }
        let dev = self.topo.device(device);
        let items = match sw.items(dev.mgmt.dialect) {
            Ok(items) => items,
            Err(e) => {
                warn!(device = %dev.name, error = %e, "running config unreadable: every link counts as busy");
                return None;
            }
        };
        let set: HashSet<String> = items
            .iter()
            .filter_map(|i| match i {
                Item::Redirect { uplink, .. } => Some(uplink.as_str()),
                // Steering vclos did not write counts the same.
                Item::ForeignSteering {
                    target: Some(t), ..
                } => Some(t.as_str()),
                Item::Address {
                    port, vrf: Some(_), ..
                } => Some(port.as_str()),
                _ => None,
            })
            // Traffic steered onto a sub-interface (a shared link) occupies
            // its parent port: both names count.
            .flat_map(|p| [Some(p), split_subinterface(p).map(|(parent, _)| parent)])
            .flatten()
            .map(str::to_string)
            .collect();
        let set = Arc::new(set);
        *slot = Some((version, Arc::clone(&set)));
        Some(set)
    }
}

impl BusyOracle for SteeredBusy {
    fn busy(&self, ocs: OcsId, port: u16) -> bool {
        let t = &self.topo;
        let (device, name) = match t.peer(PortRef::Ocs(ocs, port)) {
            Some(PortRef::Leaf(l, u)) => (t.leaf(l).device, &t.leaf(l).uplinks[usize::from(u)]),
            Some(PortRef::Spine(s, i)) => (t.spine(s).device, &t.spine(s).ports[usize::from(i)]),
            _ => return false, // uncabled (or OCS-to-OCS): nothing steers onto it
        };
        self.steered(device).is_none_or(|set| set.contains(&**name))
    }
}
