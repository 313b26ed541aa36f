//! The addressing plan: every address vclos configures, derived from the
//! topology's indices alone so that rules and routes are concrete and the
//! same on every run.
//!
//! * GPU side: leaf `l` (0-based index in the topology) owns the /24
//!   `10.128.0.0 + 256*l`. Its server-facing port `i` (0-based) is a routed
//!   /31 inside it: the leaf takes the even address `.2i` (the GPU's
//!   gateway), the GPU NIC the odd one `.2i+1`. Hence at most 128
//!   server-facing ports per leaf; 16384 leaves use 10.128.0.0/10.
//! * Fabric side: uplink `u` of leaf `l` owns the /31 at
//!   `10.0.0.0 + 2*(256*l + u)` (10.0.0.0/9, at most 256 uplinks per leaf).
//!   The leaf takes the even address; whatever the uplink is connected to
//!   (a spine port, or through an OCS another leaf's uplink) takes the odd
//!   one. A link's addresses thus follow the leaf uplink, which never moves,
//!   not the far end, which an OCS may rewire. (10.0.0.0/9 holds 2^22 /31s:
//!   16384 leaves of 256 uplinks, hence [`MAX_LEAVES`].)
//! * Shared links (issue 16, the sharing mode): a job that joins a link
//!   other jobs hold gets an 802.1Q sub-interface `<port>.<vlan>` at both
//!   ends, `vlan` one of [`SHARED_VLANS`] (one per holder: at most
//!   `MAX_LINK_JOBS` = 8 jobs share a link). The link's `k`-th uplink in
//!   topology order (leaves in order, each leaf's uplinks in order) owns
//!   the /28 at `172.16.0.0 + 16k` (172.16.0.0/12, RFC 1918: 65536 links);
//!   VLAN `101 + i` takes its `i`-th /31, the leaf the even address. The
//!   job that held the link first keeps the untagged main interface and
//!   its 10.0.0.0/9 /31.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use super::{IntentError, Ipv4Net, Item, PortName};
use crate::topology::{LeafId, Topology};

const GPU_BASE: u32 = 0x0A80_0000; // 10.128.0.0
const LINK_BASE: u32 = 0x0A00_0000; // 10.0.0.0
const SHARED_BASE: u32 = 0xAC10_0000; // 172.16.0.0
/// Uplinks the shared-link block (172.16.0.0/12, a /28 each) holds.
pub const MAX_SHARED_LINKS: usize = 1 << 16;
/// The 802.1Q VLANs of shared-link sub-interfaces, one per holder.
pub const SHARED_VLANS: std::ops::RangeInclusive<u16> = 101..=108;
pub const MAX_LEAVES: usize = 16384;
pub const MAX_SERVER_PORTS: usize = 128;
pub const MAX_UPLINKS: usize = 256;

/// Check that the topology fits the plan (once, before deriving addresses).
pub fn check(topo: &Topology) -> Result<(), IntentError> {
    if topo.leaves.len() > MAX_LEAVES {
        return Err(IntentError::Addressing(format!(
            "{} leaves; the addressing plan holds {MAX_LEAVES}",
            topo.leaves.len()
        )));
    }
    for leaf in &topo.leaves {
        if leaf.server_ports.len() > MAX_SERVER_PORTS || leaf.uplinks.len() > MAX_UPLINKS {
            return Err(IntentError::Addressing(format!(
                "leaf {} has {} server ports and {} uplinks; the addressing plan holds {MAX_SERVER_PORTS} and {MAX_UPLINKS}",
                leaf.name,
                leaf.server_ports.len(),
                leaf.uplinks.len()
            )));
        }
    }
    Ok(())
}

/// The /24 holding every GPU NIC of `leaf`.
pub fn leaf_gpu_prefix(leaf: LeafId) -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::from(GPU_BASE + 256 * leaf.0), 24)
}

/// The leaf whose GPU prefix is exactly `p` (the inverse of
/// [`leaf_gpu_prefix`]); the caller checks the leaf exists in its topology.
pub fn leaf_of_gpu_prefix(p: Ipv4Net) -> Option<LeafId> {
    let off = u32::from(p.addr).checked_sub(GPU_BASE)?;
    (p.len == 24 && off % 256 == 0 && off / 256 < MAX_LEAVES as u32).then_some(LeafId(off / 256))
}

/// The (leaf, server-facing port) whose GPU NIC is exactly the host route
/// `p` (a /32 of [`gpu_address`]); the caller checks the port exists.
pub fn gpu_of_host_route(p: Ipv4Net) -> Option<(LeafId, usize)> {
    let off = u32::from(p.addr).checked_sub(GPU_BASE)?;
    let (leaf, host) = (off / 256, off % 256);
    (p.len == 32 && host % 2 == 1 && leaf < MAX_LEAVES as u32)
        .then_some((LeafId(leaf), (host / 2) as usize))
}

/// The leaf's address on server-facing port `i` (the GPU's gateway), /31.
pub fn server_port_gateway(leaf: LeafId, i: usize) -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::from(GPU_BASE + 256 * leaf.0 + 2 * i as u32), 31)
}

/// The GPU NIC's address behind server-facing port `i`.
pub fn gpu_address(leaf: LeafId, i: usize) -> Ipv4Addr {
    Ipv4Addr::from(GPU_BASE + 256 * leaf.0 + 2 * i as u32 + 1)
}

/// The leaf's (even) address on uplink `u`, /31.
pub fn uplink_address(leaf: LeafId, u: usize) -> Ipv4Net {
    Ipv4Net::new(
        Ipv4Addr::from(LINK_BASE + 2 * (256 * leaf.0 + u as u32)),
        31,
    )
}

/// The far end's (odd) address on the link of leaf uplink `u`, /31.
pub fn uplink_peer_address(leaf: LeafId, u: usize) -> Ipv4Net {
    let a = uplink_address(leaf, u);
    Ipv4Net::new(a.other_end(), 31)
}

/// The leaf's (even) address on its sub-interface `vlan` of uplink `u`
/// (a shared link, module doc), /31: `None` when `vlan` is not one of
/// [`SHARED_VLANS`] or the topology has more uplinks than the block holds.
pub fn shared_link_address(topo: &Topology, leaf: LeafId, u: usize, vlan: u16) -> Option<Ipv4Net> {
    let slot = u32::from(vlan.checked_sub(*SHARED_VLANS.start())?);
    if !SHARED_VLANS.contains(&vlan) {
        return None;
    }
    let before: usize = topo
        .leaves
        .get(..leaf.index())?
        .iter()
        .map(|l| l.uplinks.len())
        .sum();
    let k = before + u;
    (k < MAX_SHARED_LINKS)
        .then(|| Ipv4Net::new(Ipv4Addr::from(SHARED_BASE + 16 * k as u32 + 2 * slot), 31))
}

/// The sub-interface `<port>.<vlan>` of a routed port.
pub fn subinterface_name(port: &PortName, vlan: u16) -> Result<PortName, crate::names::NameError> {
    PortName::new(format!("{port}.{vlan}"))
}

/// A sub-interface name split into its parent port and VLAN
/// (`100GE1/0/1.101` -> (`100GE1/0/1`, 101)); `None` for a name without a
/// numeric `.<vlan>` suffix in 1..=4094.
pub fn split_subinterface(name: &str) -> Option<(&str, u16)> {
    let (parent, vlan) = name.rsplit_once('.')?;
    let v: u16 = vlan.parse().ok().filter(|v| (1..=4094).contains(v))?;
    (!parent.is_empty() && vlan.bytes().all(|b| b.is_ascii_digit())).then_some((parent, v))
}

/// Where a redirect onto each addressed port sends packets: the far end of
/// the port's /31 (its point-to-point peer). Dialects whose redirect names a
/// next hop rather than an egress port (OpenConfig policy-forwarding,
/// Huawei CE `redirect nexthop`) write a redirect to uplink `u` as "next
/// hop = `next_hops(items)[u]`" and read it back with [`port_of_next_hop`].
pub fn next_hops(items: &BTreeSet<Item>) -> BTreeMap<&PortName, Ipv4Addr> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Address { port, net, .. } if net.len == 31 => Some((port, net.other_end())),
            _ => None,
        })
        .collect()
}

/// The port a next hop leaves by: the first of `addrs` (interface address,
/// port) whose subnet holds `hop` without `hop` being the port's own address.
pub fn port_of_next_hop<'a, P: 'a>(
    addrs: impl IntoIterator<Item = (&'a Ipv4Net, &'a P)>,
    hop: Ipv4Addr,
) -> Option<&'a P> {
    addrs
        .into_iter()
        .find(|(n, _)| n.contains(hop) && n.addr != hop)
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_concrete() {
        assert_eq!(leaf_gpu_prefix(LeafId(1)).to_string(), "10.128.1.0/24");
        assert_eq!(
            server_port_gateway(LeafId(1), 3).to_string(),
            "10.128.1.6/31"
        );
        assert_eq!(gpu_address(LeafId(1), 3).to_string(), "10.128.1.7");
        assert_eq!(uplink_address(LeafId(1), 2).to_string(), "10.0.2.4/31");
        assert_eq!(uplink_peer_address(LeafId(1), 2).to_string(), "10.0.2.5/31");
        assert!(leaf_gpu_prefix(LeafId(1)).contains(gpu_address(LeafId(1), 127)));
        for l in [0, 1, 300, 16383] {
            assert_eq!(
                leaf_of_gpu_prefix(leaf_gpu_prefix(LeafId(l))),
                Some(LeafId(l))
            );
        }
        let odd = |s: &str| leaf_of_gpu_prefix(s.parse().unwrap_or(leaf_gpu_prefix(LeafId(0))));
        assert_eq!(odd("10.128.1.0/25"), None);
        assert_eq!(odd("10.128.1.4/24"), None);
        assert_eq!(odd("10.0.1.0/24"), None);
        assert_eq!(
            leaf_gpu_prefix(LeafId(16383)).to_string(),
            "10.191.255.0/24"
        );
    }

    #[test]
    fn next_hop_is_the_far_end_of_the_uplink_and_maps_back() {
        let up = PortName::new("100GE1/0/17").unwrap();
        let srv = PortName::new("100GE1/0/1").unwrap();
        let items: BTreeSet<Item> = [
            Item::Address {
                port: up.clone(),
                vrf: None,
                net: uplink_address(LeafId(1), 0),
            },
            Item::Address {
                port: srv.clone(),
                vrf: None,
                net: server_port_gateway(LeafId(1), 0),
            },
        ]
        .into_iter()
        .collect();
        let hops = next_hops(&items);
        let hop = hops[&up];
        assert_eq!(hop, uplink_peer_address(LeafId(1), 0).addr);
        let addrs: Vec<(Ipv4Net, PortName)> = vec![
            (server_port_gateway(LeafId(1), 0), srv.clone()),
            (uplink_address(LeafId(1), 0), up.clone()),
        ];
        let back = port_of_next_hop(addrs.iter().map(|(n, p)| (n, p)), hop);
        assert_eq!(back, Some(&up));
        // The port's own address is not a next hop through it.
        let own = uplink_address(LeafId(1), 0).addr;
        assert_eq!(
            port_of_next_hop(addrs.iter().map(|(n, p)| (n, p)), own),
            None
        );
    }
}
