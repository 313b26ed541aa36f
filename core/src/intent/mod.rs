//! Device intent: what every managed device must hold, derived from the
//! topology and the held decisions by a pure function ([`build`]).
//!
//! Intent is a set of typed [`Item`]s per device, vendor-neutral and ordered
//! deterministically (a `BTreeSet`, ports in natural order), so that two
//! intents are compared with set operations and rendered identically on
//! every run. Dialects turn items into configuration text and back; a
//! dialect expresses only the kinds it claims (`vclos::dialect::Dialect::claims`).
//!
//! Shape of the intent (paper Section 5.2, "source routing"; Section 6, one
//! VRF per job per spine):
//! * baseline, from the topology alone: host name, interface descriptions
//!   naming the cabled peer, routed ports and their addresses
//!   ([`addressing`]), the OCS's initial patches;
//! * per job: on each leaf one [`Item::Redirect`] per server-facing port (its
//!   traffic to the job's *other* leaves goes out of its uplink; leaf-local
//!   traffic is not matched and is switched locally); on each logical spine
//!   a VRF (a "virtual spine") binding the reserved ports with static routes
//!   to each job leaf's GPU prefix (or, where the spine reaches that leaf
//!   over several reserved links, a host route per GPU of the job there, so
//!   no ECMP hash spreads the job's flows: [`spine_downlink`]); on each OCS
//!   its cross-connects.
//!
//! Releasing a job is rebuilding without its decision: its items disappear,
//! the baseline items they displaced (an interface address, an initial OCS
//! patch) come back, and nothing else changes.

pub mod addressing;
mod build;
pub mod kept;
pub mod name;

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use build::{baseline, build, build_on, job_items, spine_downlink, Base, FabricIntent};
pub use kept::Kept;
pub use name::{Description, Hostname, PortName, VrfName};

use crate::names::{JobId, NameError};
use crate::topology::{Dialect, Role};

/// An IPv4 prefix or interface address with its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Ipv4Net {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Ipv4Net {
    pub fn new(addr: Ipv4Addr, len: u8) -> Self {
        Ipv4Net { addr, len }
    }
    /// The netmask, e.g. 255.255.255.254 for /31.
    pub fn mask(self) -> Ipv4Addr {
        Ipv4Addr::from(mask_bits(self.len))
    }
    /// The ACL wildcard (inverse mask), e.g. 0.0.0.255 for /24.
    pub fn wildcard(self) -> Ipv4Addr {
        Ipv4Addr::from(!mask_bits(self.len))
    }
    pub fn contains(self, a: Ipv4Addr) -> bool {
        u32::from(a) & mask_bits(self.len) == u32::from(self.addr) & mask_bits(self.len)
    }
    /// The other address of a /31 (the point-to-point peer).
    pub fn other_end(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) ^ 1)
    }
    /// Length from a dotted mask or wildcard (contiguous only).
    pub fn len_from_mask(mask: Ipv4Addr, wildcard: bool) -> Option<u8> {
        let m = u32::from(mask);
        let m = if wildcard { !m } else { m };
        let len = m.leading_ones();
        (m.checked_shl(len).unwrap_or(0) == 0).then_some(len as u8)
    }
}

fn mask_bits(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl std::str::FromStr for Ipv4Net {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a prefix (a.b.c.d/len)"))?;
        let addr: Ipv4Addr = a
            .parse()
            .map_err(|_| format!("{a:?} is not an IPv4 address"))?;
        let len: u8 = l
            .parse()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or_else(|| format!("{l:?} is not a prefix length"))?;
        Ok(Ipv4Net::new(addr, len))
    }
}

impl TryFrom<String> for Ipv4Net {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Ipv4Net> for String {
    fn from(n: Ipv4Net) -> String {
        n.to_string()
    }
}

/// One piece of device intent. The variant order is the kind order used
/// everywhere (rendering, diffs); fields are all validated types.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Item {
    /// The device's host name (`sysname`).
    Hostname { name: Hostname },
    /// An interface description naming what the port is cabled to.
    Description { port: PortName, text: Description },
    /// The port is a routed (layer-3) port.
    Routed { port: PortName },
    /// An 802.1Q sub-interface `port` (`<parent>.<vlan>`) of a routed port,
    /// terminating the one VLAN `vlan`: a job's own layer-3 interface on a
    /// link it shares (issue 16; [`addressing`] module doc).
    Subinterface { port: PortName, vlan: u16 },
    /// A job's virtual spine: one VRF per job per logical spine.
    Vrf { name: VrfName },
    /// An interface address, in a VRF or in the global table.
    Address {
        port: PortName,
        vrf: Option<VrfName>,
        net: Ipv4Net,
    },
    /// A static route inside a job VRF.
    Route {
        vrf: VrfName,
        prefix: Ipv4Net,
        nexthop: Ipv4Addr,
    },
    /// Source routing: traffic entering `port` (the `index`-th server-facing
    /// port of the leaf, 1-based) for `destinations` leaves by `uplink`.
    Redirect {
        job: JobId,
        index: u16,
        port: PortName,
        uplink: PortName,
        destinations: Vec<Ipv4Net>,
    },
    /// An OCS cross-connect between two ports (`a` before `b` in port order).
    Patch { a: PortName, b: PortName },
    /// Steering vclos did not write, found in a running configuration: the
    /// policy `policy` (a CE traffic policy, a SONiC ACL table, an
    /// OpenConfig forwarding policy) bound to `port` redirects traffic, onto
    /// `target` when the redirect resolves to a port of the device. Only
    /// parsers make it; it is never rendered, and no change command ever
    /// deletes or overwrites it (no dialect claims (`vclos::dialect::Dialect::claims`)
    /// its kind). See docs/devices/foreign-steering.md.
    ForeignSteering {
        port: PortName,
        policy: String,
        target: Option<PortName>,
    },
}

/// The kinds of [`Item`], for dialect claims and summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ItemKind {
    Hostname,
    Description,
    Routed,
    Subinterface,
    Vrf,
    Address,
    Route,
    Redirect,
    Patch,
    ForeignSteering,
}

impl ItemKind {
    /// The kinds of vclos's own intent (every kind but
    /// [`ItemKind::ForeignSteering`], which only parsers produce).
    pub const ALL: [ItemKind; 9] = [
        ItemKind::Hostname,
        ItemKind::Description,
        ItemKind::Routed,
        ItemKind::Subinterface,
        ItemKind::Vrf,
        ItemKind::Address,
        ItemKind::Route,
        ItemKind::Redirect,
        ItemKind::Patch,
    ];
}

impl Item {
    pub fn kind(&self) -> ItemKind {
        match self {
            Item::Hostname { .. } => ItemKind::Hostname,
            Item::Description { .. } => ItemKind::Description,
            Item::Routed { .. } => ItemKind::Routed,
            Item::Subinterface { .. } => ItemKind::Subinterface,
            Item::Vrf { .. } => ItemKind::Vrf,
            Item::Address { .. } => ItemKind::Address,
            Item::Route { .. } => ItemKind::Route,
            Item::Redirect { .. } => ItemKind::Redirect,
            Item::Patch { .. } => ItemKind::Patch,
            Item::ForeignSteering { .. } => ItemKind::ForeignSteering,
        }
    }

    /// The interface the item configures, if any.
    pub fn port(&self) -> Option<&PortName> {
        match self {
            Item::Description { port, .. }
            | Item::Routed { port }
            | Item::Subinterface { port, .. }
            | Item::Address { port, .. }
            | Item::Redirect { port, .. }
            | Item::ForeignSteering { port, .. } => Some(port),
            _ => None,
        }
    }

    /// Whether vclos wrote it (every item but [`Item::ForeignSteering`]).
    pub fn is_foreign(&self) -> bool {
        matches!(self, Item::ForeignSteering { .. })
    }

    /// A patch with its ends in port order.
    pub fn patch(a: PortName, b: PortName) -> Item {
        if b < a {
            Item::Patch { a: b, b: a }
        } else {
            Item::Patch { a, b }
        }
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Item::Hostname { name } => write!(f, "hostname {name}"),
            Item::Description { port, text } => write!(f, "description {port} \"{text}\""),
            Item::Routed { port } => write!(f, "routed {port}"),
            Item::Subinterface { port, vlan } => write!(f, "subinterface {port} dot1q {vlan}"),
            Item::Vrf { name } => write!(f, "vrf {name}"),
            Item::Address { port, vrf, net } => match vrf {
                Some(v) => write!(f, "address {port} {net} vrf {v}"),
                None => write!(f, "address {port} {net}"),
            },
            Item::Route {
                vrf,
                prefix,
                nexthop,
            } => write!(f, "route vrf {vrf} {prefix} via {nexthop}"),
            Item::Redirect {
                job,
                port,
                uplink,
                destinations,
                ..
            } => {
                write!(f, "redirect job {job} {port} -> {uplink} for")?;
                for d in destinations {
                    write!(f, " {d}")?;
                }
                Ok(())
            }
            Item::Patch { a, b } => write!(f, "patch {a}~{b}"),
            Item::ForeignSteering {
                port,
                policy,
                target,
            } => {
                // The policy name is the device's, unchecked: shown escaped.
                write!(f, "foreign steering on {port}: policy {policy:?}")?;
                match target {
                    Some(t) => write!(f, " redirects onto {t}"),
                    None => write!(f, " redirects (target not resolved)"),
                }
            }
        }
    }
}

/// The intent of one managed device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceIntent {
    pub device: String,
    pub role: Role,
    pub dialect: Dialect,
    pub items: BTreeSet<Item>,
}

impl DeviceIntent {
    /// The same device with other items (e.g. parsed from a running config).
    pub fn with_items(&self, items: BTreeSet<Item>) -> DeviceIntent {
        DeviceIntent {
            device: self.device.clone(),
            role: self.role,
            dialect: self.dialect,
            items,
        }
    }
}

/// Why intent could not be derived. Every variant names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IntentError {
    #[error("job `{job}`: {message}")]
    Decision { job: JobId, message: String },
    #[error("job `{job}`: {source}")]
    Name {
        job: JobId,
        #[source]
        source: NameError,
    },
    #[error("topology: {0}")]
    Topology(String),
    #[error("addressing plan: {0}")]
    Addressing(String),
    #[error("jobs `{a}` and `{b}` both configure {what}")]
    Conflict { a: JobId, b: JobId, what: String },
}

/// The route distinguisher number of a VRF (`65000:<n>`): a 32-bit FNV-1a
/// hash of its name, so it depends on the VRF alone (adding or releasing
/// another job never renumbers it), folded into 1..=3999999999.
/// Collisions on one device are refused when intent is built.
///
/// The fold: the OpenConfig model's type-0 route distinguisher
/// (openconfig-network-instance-types, the 2020-05-06 bundle vclos
/// validates against) matches the assigned number digit by digit
/// (`4[0-2][0-9][0-4][0-9][0-6][0-7][0-2][0-9][0-5]|[0-3][0-9]{9}|
/// [1-9][0-9]{1,8}|[1-9]`), which refuses 0 and most numbers from 4e9 up
/// (4095000000, say) though they are valid; about 7% of hashes, `Vrf-a`
/// and `Vrf-b` among them. Hashes from 4e9 up are shifted down by 4e9,
/// 0 becomes 1; every other VRF keeps the number it always had.
pub fn route_distinguisher(vrf: &VrfName) -> u32 {
    const LIMIT: u32 = 4_000_000_000;
    let h = vrf.as_str().bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (if h >= LIMIT { h - LIMIT } else { h }).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_distinguishers_are_numbers_the_openconfig_pattern_takes() {
        let rd = |n: &str| route_distinguisher(&VrfName::new(n).unwrap_or_else(|e| panic!("{e}")));
        // Hashed to 4e9 and more before the fold.
        for n in ["Vrf-a", "Vrf-b"] {
            assert!((1..4_000_000_000).contains(&rd(n)), "{n}: {}", rd(n));
        }
        for i in 0..20_000 {
            let n = format!("Vrf-job{i}");
            assert!((1..4_000_000_000).contains(&rd(&n)), "{n}");
        }
        // Names below the fold keep their number.
        let raw = |n: &str| {
            n.bytes().fold(0x811c_9dc5_u32, |h, b| {
                (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
            })
        };
        assert_eq!(rd("Vrf-j1"), raw("Vrf-j1"));
        assert!(raw("Vrf-a") >= 4_000_000_000);
    }

    #[test]
    fn prefix_arithmetic() {
        let n: Ipv4Net = "10.0.0.4/31"
            .parse()
            .unwrap_or(Ipv4Net::new(Ipv4Addr::UNSPECIFIED, 0));
        assert_eq!(n.mask(), Ipv4Addr::new(255, 255, 255, 254));
        assert_eq!(n.other_end(), Ipv4Addr::new(10, 0, 0, 5));
        let w = Ipv4Net::new(Ipv4Addr::new(10, 128, 1, 0), 24).wildcard();
        assert_eq!(w, Ipv4Addr::new(0, 0, 0, 255));
        assert_eq!(Ipv4Net::len_from_mask(w, true), Some(24));
        assert_eq!(
            Ipv4Net::len_from_mask(Ipv4Addr::new(255, 0, 255, 0), false),
            None
        );
        assert!("10.0.0.1/33".parse::<Ipv4Net>().is_err());
    }
}
