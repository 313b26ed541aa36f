//! The foreign-steering guard: no apply, recovery push or `reconcile --fix`
//! configures a port that carries steering vclos did not write
//! (docs/devices/foreign-steering.md).
//!
//! A hand-made policy redirecting a port (a CE traffic policy, a SONiC ACL,
//! an OpenConfig forwarding policy; parsed as
//! [`Item::ForeignSteering`], see [`crate::dialect::foreign`]) is someone
//! else's traffic. vclos never deletes or overwrites it, so before a change
//! commits anywhere the running configurations of the devices it configures
//! (as the transaction's prepare read them: no second read) are checked, and
//! the change is refused (nothing committed on any device, the candidates
//! discarded) if any port it must configure carries foreign steering, or is
//! the port foreign steering redirects onto. Recovery's rollback and
//! `reconcile --fix` check what they read themselves. The ports a
//! change configures, per switch:
//! * the port of every item it adds (a server-facing port that gets a
//!   vclos source route, a spine port bound to a job VRF, ...) and the
//!   uplink each added source route steers onto (for a sub-interface of a
//!   shared link, its parent port as well);
//! * the switch end of every OCS port it rewires (`ENT-PATCH`/`DLT-PATCH`
//!   of an added or removed patch): the emulated OCS, like the paper's
//!   idle-only rule (Section 7), refuses to move a link steered onto, and
//!   this guard is the controller's side of the same rule.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::intent::addressing::split_subinterface;
use crate::intent::{Item, PortName};
use crate::plan::{DevicePlan, Running};
use crate::topology::{OcsId, PortRef, Role, Topology};

/// A port vclos must configure that carries foreign steering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForeignConflict {
    pub device: String,
    /// The port vclos must configure.
    pub port: String,
    /// The foreign policy (its name on the device).
    pub policy: String,
    /// The port the policy is bound to (`port`, or the port steering onto it).
    pub bound_to: String,
    /// Where the policy redirects, when resolved.
    pub target: Option<String>,
    /// What vclos must do on `port`.
    pub why: String,
}

impl fmt::Display for ForeignConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: port {} carries foreign steering: policy {:?} on {}",
            self.device, self.port, self.policy, self.bound_to
        )?;
        if let Some(t) = &self.target {
            write!(f, " redirects onto {t}")?;
        }
        write!(f, " ({})", self.why)
    }
}

/// Per switch: the ports a change configures, each with what vclos does there.
pub type Touched = BTreeMap<String, BTreeMap<PortName, String>>;

/// The switch ports the device plans configure (see the module doc).
pub fn touched(topo: &Topology, plans: &[DevicePlan]) -> Touched {
    let mut out = Touched::new();
    let mut note = |device: &str, port: &PortName, why: String| {
        out.entry(device.to_string())
            .or_default()
            .entry(port.clone())
            .or_insert(why);
    };
    for p in plans {
        let d = &p.diff;
        if d.role == Role::Ocs {
            let Some(o) = topo.ocs.iter().position(|o| *o.name == *d.device) else {
                continue;
            };
            let ends = d.added.iter().chain(&d.removed).flat_map(|i| match i {
                Item::Patch { a, b } => vec![a, b],
                _ => Vec::new(),
            });
            for end in ends {
                if let Some((dev, port)) = switch_end(topo, o, end.as_str()) {
                    note(&dev, &port, format!("{} rewires OCS port {end}", d.device));
                }
            }
            continue;
        }
        for i in &d.added {
            if let Item::Redirect { uplink, port, .. } = i {
                note(
                    &d.device,
                    uplink,
                    format!("a vclos source route of {port} steers onto it"),
                );
            }
            if let Some(port) = i.port() {
                note(&d.device, port, format!("vclos configures `{i}`"));
                // A sub-interface's traffic crosses its parent port.
                let parent =
                    split_subinterface(port.as_str()).and_then(|(p, _)| PortName::new(p).ok());
                if let Some(parent) = parent {
                    note(
                        &d.device,
                        &parent,
                        format!("vclos configures `{i}` on its sub-interface"),
                    );
                }
            }
        }
    }
    out
}

/// The switch device and port at the far end of an OCS port's cable.
fn switch_end(topo: &Topology, ocs: usize, port: &str) -> Option<(String, PortName)> {
    let ports = &topo.ocs.get(ocs)?.ports;
    let idx = u16::try_from(ports.iter().position(|p| **p == *port)?).ok()?;
    let (device, name) = match topo.peer(PortRef::Ocs(OcsId(ocs as u32), idx))? {
        PortRef::Leaf(l, u) => (
            topo.leaf(l).device,
            topo.leaf(l).uplinks.get(usize::from(u))?,
        ),
        PortRef::Spine(s, i) => (
            topo.spine(s).device,
            topo.spine(s).ports.get(usize::from(i))?,
        ),
        _ => return None,
    };
    Some((
        topo.device(device).name.clone(),
        PortName::new(&**name).ok()?,
    ))
}

/// Every foreign steering item of `running` that sits on, or steers onto,
/// a port of `touched`.
pub fn conflicts(touched: &Touched, running: &Running) -> Vec<ForeignConflict> {
    let mut out = Vec::new();
    for (device, ports) in touched {
        let items = running.get(device).into_iter().flatten();
        for i in items {
            let Item::ForeignSteering {
                port,
                policy,
                target,
            } = i
            else {
                continue;
            };
            let hit = ports
                .get_key_value(port)
                .or_else(|| target.as_ref().and_then(|t| ports.get_key_value(t)));
            if let Some((at, why)) = hit {
                out.push(ForeignConflict {
                    device: device.clone(),
                    port: at.to_string(),
                    policy: policy.clone(),
                    bound_to: port.to_string(),
                    target: target.as_ref().map(ToString::to_string),
                    why: why.clone(),
                });
            }
        }
    }
    out
}

/// The foreign steering items of a device's parsed running items.
pub fn foreign(items: &BTreeSet<Item>) -> Vec<Item> {
    items.iter().filter(|i| i.is_foreign()).cloned().collect()
}
