//! The forwarding state as the devices' own configurations define it.
//!
//! Input is what each device holds, as [`Item`]s parsed from its running
//! configuration by its dialect; output is a [`ForwardingState`] in fabric
//! terms (typed ports), which [`super::verify`] then walks. The mapping is
//! the data plane's, not the scheduler's:
//! * a leaf `Redirect` pins a server port to an uplink, for the leaves whose
//!   GPU prefixes its ACL lists (the addressing plan maps a prefix to a leaf);
//! * a spine port is in the VRF its `Address` binds it to; a VRF `Route`'s
//!   prefix names the destination leaf, and its next hop the egress port:
//!   the port of the (physical) device whose /31 holds it, bound or not —
//!   the verifier reports an egress outside the VRF. On a chassis, a port
//!   name resolves to its logical spine; a route out of another logical
//!   spine is recorded as unresolved, with the reason;
//! * 802.1Q sub-interfaces (a link shared by jobs, issue 16): a redirect
//!   onto `<uplink>.<vlan>` sends tagged frames; on the spine they enter
//!   the VRF bound to the sub-interface of that VLAN, not the port's, and a
//!   route whose next hop is on a sub-interface sends them tagged, which
//!   the leaf takes only on a sub-interface terminating that VLAN. A
//!   sub-interface counts only if the VLAN it terminates
//!   (`Item::Subinterface`) is the one its name says;
//! * an OCS's patch table is its `Patch` items;
//! * steering vclos did not write on a leaf server port
//!   (`ForeignSteering`, docs/devices/foreign-steering.md) takes that
//!   port's traffic wherever its policy says: the port's source route is
//!   broken, so a job using it fails verification naming the policy.
//!
//! It also notes which jobs the devices hold configuration of (source
//! routes, VRFs by their [`vrf_name`](crate::intent::name::vrf_name)), so
//! leftovers of a released job are reported.
//!
//! Nothing here fails: what cannot be mapped (a port the topology does not
//! know, a prefix of no leaf) is kept as a reason the verifier reports, so
//! a broken device shows up as a violation naming it, never as a crash.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;

use super::state::Dest;
use super::{ForwardingState, Vrf};
use crate::intent::{addressing, Ipv4Net, Item, VrfName};
use crate::topology::{Device, LeafId, Member, OcsId, PortRef, SpineId, Topology};

/// Build the forwarding state from every device's items (device name ->
/// items). A device without an entry holds nothing (no redirects, no VRFs,
/// an OCS with every port dark); an entry for a device the topology does
/// not have is a problem.
pub fn forwarding_state(
    topo: &Topology,
    configs: &BTreeMap<String, BTreeSet<Item>>,
) -> ForwardingState {
    let mut fwd = ForwardingState::new();
    let empty = BTreeSet::new();
    for dev in &topo.devices {
        let items = configs.get(&dev.name).unwrap_or(&empty);
        let mut spines = Vec::new();
        for m in &dev.members {
            match *m {
                Member::Leaf(l) => {
                    leaf(topo, l, items, &mut fwd);
                    foreign_on_leaf(topo, l, items, &mut fwd);
                }
                Member::Spine(s) => spines.push(s),
                Member::Ocs(o) => ocs(topo, o, items, &mut fwd),
            }
        }
        if !spines.is_empty() {
            spine_device(topo, dev, &spines, items, &mut fwd);
        }
    }
    for name in configs.keys() {
        if topo.device_id(name).is_none() {
            fwd.add_problem(format!("{name}: not a device of the topology"));
        }
    }
    fwd
}

/// Where a prefix routes to: a leaf's GPU prefix, or one GPU's host route.
fn dest_of(topo: &Topology, p: Ipv4Net) -> Option<Dest> {
    if let Some(l) = addressing::leaf_of_gpu_prefix(p) {
        return (l.index() < topo.leaves.len()).then_some((l, None));
    }
    let (l, port) = addressing::gpu_of_host_route(p)?;
    let ports = topo.leaves.get(l.index())?.server_ports.len();
    (port < ports).then_some((l, Some(port as u16)))
}

/// The 802.1Q sub-interfaces of a device's items whose name agrees with
/// the VLAN they terminate: name -> (parent, VLAN). A sub-interface that
/// terminates another VLAN than its name says, or none, takes no traffic
/// vclos sends it: left out, so a flow through it fails naming it.
fn subinterfaces(items: &BTreeSet<Item>) -> HashMap<&str, (&str, u16)> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Subinterface { port, vlan } => addressing::split_subinterface(port.as_str())
                .filter(|(_, v)| v == vlan)
                .map(|pv| (port.as_str(), pv)),
            _ => None,
        })
        .collect()
}

fn leaf(topo: &Topology, l: LeafId, items: &BTreeSet<Item>, fwd: &mut ForwardingState) {
    let leaf = topo.leaf(l);
    let uplink_of = |name: &str| leaf.uplinks.iter().position(|u| &**u == name);
    let subs = subinterfaces(items);
    for (parent, vlan) in subs.values() {
        if let Some(u) = uplink_of(parent) {
            fwd.add_leaf_vlan(l, u as u16, *vlan);
        }
    }
    let mut seen: HashMap<u16, String> = HashMap::new();
    for item in items {
        let Item::Redirect {
            job,
            port,
            uplink,
            destinations,
            ..
        } = item
        else {
            continue;
        };
        let what = format!("source route of job {job} -> {uplink}");
        fwd.note_job_config(job.as_str(), format!("{}:{port}: {what}", leaf.name));
        let Some(sp) = leaf.server_ports.iter().position(|p| &**p == port.as_str()) else {
            fwd.add_problem(format!(
                "{}:{port}: {what} is on a port that is not server-facing",
                leaf.name
            ));
            continue;
        };
        let sp = sp as u16;
        if let Some(prev) = seen.insert(sp, what.clone()) {
            fwd.set_broken_redirect(l, sp, format!("two source routes ({prev}; {what})"));
            continue;
        }
        let mut scope = BTreeSet::new();
        for d in destinations {
            // Redirects match whole leaves (their ACL lists leaf prefixes).
            match dest_of(topo, *d).filter(|d| d.1.is_none()).map(|d| d.0) {
                Some(dl) => {
                    scope.insert(dl);
                }
                None => fwd.add_problem(format!(
                    "{}:{port}: {what} matches {d}, which is no leaf's GPU prefix",
                    leaf.name
                )),
            }
        }
        let tagged = subs
            .get(uplink.as_str())
            .and_then(|&(parent, v)| Some((uplink_of(parent)?, v)));
        match (uplink_of(uplink.as_str()), tagged) {
            (Some(u), _) => fwd.set_scoped_redirect(l, sp, u as u16, scope),
            (None, Some((u, v))) => {
                fwd.set_scoped_redirect(l, sp, u as u16, scope);
                fwd.set_redirect_vlan(l, sp, v);
            }
            (None, None) => fwd.set_broken_redirect(
                l,
                sp,
                format!(
                    "{what}: {uplink} is not an uplink of {} (nor a sub-interface of one terminating its VLAN)",
                    leaf.name
                ),
            ),
        }
    }
}

/// Foreign steering on a server port breaks that port's source route.
fn foreign_on_leaf(topo: &Topology, l: LeafId, items: &BTreeSet<Item>, fwd: &mut ForwardingState) {
    let leaf = topo.leaf(l);
    for item in items {
        let Item::ForeignSteering { port, .. } = item else {
            continue;
        };
        if let Some(sp) = leaf.server_ports.iter().position(|p| &**p == port.as_str()) {
            fwd.set_broken_redirect(l, sp as u16, format!("{}: {item}", leaf.name));
        }
    }
}

fn ocs(topo: &Topology, o: OcsId, items: &BTreeSet<Item>, fwd: &mut ForwardingState) {
    let dev = topo.ocs_dev(o);
    let index = |name: &str| {
        dev.ports
            .iter()
            .position(|p| **p == *name)
            .map(|i| i as u16)
    };
    let mut pairs = Vec::new();
    for item in items {
        if let Item::Patch { a, b } = item {
            match (index(a.as_str()), index(b.as_str())) {
                (Some(x), Some(y)) => pairs.push((x, y)),
                _ => fwd.add_problem(format!(
                    "{}: patch {a}~{b} names a port the topology does not have",
                    dev.name
                )),
            }
        }
    }
    fwd.set_patches(o, pairs);
}

/// The job of a VRF named by `intent::name::vrf_name`: `Vrf-<job>`, or
/// `Vrf-<job>-<n>` on a chassis.
fn vrf_job(name: &str, chassis: bool) -> Option<&str> {
    let rest = name.strip_prefix("Vrf-")?;
    if !chassis {
        return Some(rest);
    }
    let (job, n) = rest.rsplit_once('-')?;
    n.bytes().all(|b| b.is_ascii_digit()).then_some(job)
}

/// Where a VRF route leaves: a (logical spine, port, VLAN if through a
/// sub-interface) or why it cannot.
type Egress = Result<(SpineId, u16, Option<u16>), String>;

/// A spine port: (logical spine, port, VLAN if through a sub-interface).
type SpinePort = (SpineId, u16, Option<u16>);

/// The ports, untagged or with a VLAN, a VRF binds on one logical spine.
type Bound = BTreeSet<(u16, Option<u16>)>;

/// The spine ports each VRF binds, by logical spine.
type Bindings<'a> = BTreeMap<&'a VrfName, BTreeMap<SpineId, Bound>>;

/// Each VRF's routes to a destination: (destination, prefix, next hop, egress).
type Routes<'a> = BTreeMap<&'a VrfName, Vec<(Dest, Ipv4Net, Ipv4Addr, Egress)>>;

fn spine_device(
    topo: &Topology,
    dev: &Device,
    spines: &[SpineId],
    items: &BTreeSet<Item>,
    fwd: &mut ForwardingState,
) {
    let port_of = spine_ports(topo, spines, items);
    for item in items {
        if let Item::Vrf { name } = item {
            if let Some(job) = vrf_job(name.as_str(), dev.members.len() > 1) {
                fwd.note_job_config(job, format!("{}: VRF {name}", dev.name));
            }
        }
    }
    let (nets, bound) = vrf_bindings(dev, items, &port_of, fwd);
    let (routes, strays) = vrf_routes(topo, dev, items, &nets, &port_of);
    // A VRF exists on each logical spine where it binds a port: only there
    // can traffic enter it.
    for (vrf_name, per_spine) in &bound {
        for (&s, ports) in per_spine {
            let vrf = spine_vrf(topo, s, vrf_name, ports, &routes, &strays);
            fwd.add_vrf(s, vrf);
        }
    }
}

/// Port or sub-interface name -> (logical spine, port, VLAN if tagged).
fn spine_ports<'a>(
    topo: &'a Topology,
    spines: &[SpineId],
    items: &'a BTreeSet<Item>,
) -> HashMap<&'a str, SpinePort> {
    let mut port_of: HashMap<&str, SpinePort> = HashMap::new();
    for &s in spines {
        for (i, p) in topo.spine(s).ports.iter().enumerate() {
            port_of.insert(p, (s, i as u16, None));
        }
    }
    for (name, (parent, vlan)) in subinterfaces(items) {
        if let Some(&(s, i, None)) = port_of.get(parent) {
            port_of.insert(name, (s, i, Some(vlan)));
        }
    }
    port_of
}

/// Every address of the device, and the spine ports each VRF binds (a
/// problem for a bound port that is no spine port).
fn vrf_bindings<'a>(
    dev: &Device,
    items: &'a BTreeSet<Item>,
    port_of: &HashMap<&str, SpinePort>,
    fwd: &mut ForwardingState,
) -> (Vec<(&'a str, Ipv4Net)>, Bindings<'a>) {
    // Every address of the device (a next hop may resolve to any of them).
    let mut nets: Vec<(&str, Ipv4Net)> = Vec::new();
    let mut bound: Bindings<'_> = BTreeMap::new();
    for item in items {
        if let Item::Address { port, vrf, net } = item {
            nets.push((port.as_str(), *net));
            if let Some(v) = vrf {
                match port_of.get(port.as_str()) {
                    Some(&(s, i, tag)) => {
                        bound.entry(v).or_default().entry(s).or_default().insert((i, tag));
                    }
                    None => fwd.add_problem(format!(
                        "{}:{port}: bound to VRF {v}, but neither a spine port of the topology nor a sub-interface of one terminating its VLAN",
                        dev.name
                    )),
                }
            }
        }
    }
    (nets, bound)
}

/// Where next hop `nh` leaves the device: the spine port whose subnet holds it.
fn egress(
    dev: &Device,
    nets: &[(&str, Ipv4Net)],
    port_of: &HashMap<&str, SpinePort>,
    nh: Ipv4Addr,
) -> Egress {
    let (port, _) = nets
        .iter()
        .find(|(_, n)| n.contains(nh) && n.addr != nh)
        .ok_or_else(|| format!("next hop {nh} is on no port of {}", dev.name))?;
    port_of
        .get(port)
        .copied()
        .ok_or_else(|| format!("next hop {nh} is on {}:{port}, not a spine port", dev.name))
}

/// Each VRF's routes with their egress, and its routes to no leaf or GPU.
fn vrf_routes<'a>(
    topo: &Topology,
    dev: &Device,
    items: &'a BTreeSet<Item>,
    nets: &[(&str, Ipv4Net)],
    port_of: &HashMap<&str, SpinePort>,
) -> (Routes<'a>, BTreeMap<&'a VrfName, Vec<String>>) {
    let mut routes: Routes<'a> = BTreeMap::new();
    let mut strays: BTreeMap<&VrfName, Vec<String>> = BTreeMap::new();
    for item in items {
        if let Item::Route {
            vrf,
            prefix,
            nexthop,
        } = item
        {
            match dest_of(topo, *prefix) {
                Some(l) => routes.entry(vrf).or_default().push((
                    l,
                    *prefix,
                    *nexthop,
                    egress(dev, nets, port_of, *nexthop),
                )),
                None => strays.entry(vrf).or_default().push(format!(
                    "route {prefix} via {nexthop} on {}, which is no leaf's GPU prefix or GPU",
                    dev.name
                )),
            }
        }
    }
    (routes, strays)
}

/// The label of a spine port, with its VLAN if tagged.
fn spine_port_label(topo: &Topology, (s, i, v): SpinePort) -> String {
    let port = topo.port_label(PortRef::Spine(s, i));
    v.map_or(port.clone(), |v| format!("{port} (VLAN {v})"))
}

/// VRF `vrf_name` on logical spine `s`: its ports and the routes that
/// leave by this spine, one per destination.
fn spine_vrf(
    topo: &Topology,
    s: SpineId,
    vrf_name: &VrfName,
    ports: &Bound,
    routes: &Routes<'_>,
    strays: &BTreeMap<&VrfName, Vec<String>>,
) -> Vrf {
    let mut vrf = Vrf {
        name: vrf_name.to_string(),
        ports: ports
            .iter()
            .filter(|p| p.1.is_none())
            .map(|p| p.0)
            .collect(),
        tagged: ports.iter().filter_map(|&(p, v)| Some((p, v?))).collect(),
        strays: strays.get(vrf_name).cloned().unwrap_or_default(),
        ..Vrf::default()
    };
    let mut via: BTreeMap<Dest, Vec<String>> = BTreeMap::new();
    for (l, prefix, nh, out) in routes.get(vrf_name).into_iter().flatten() {
        via.entry(*l)
            .or_default()
            .push(format!("{prefix} via {nh}"));
        match out {
            Ok((s2, i, tag)) if *s2 == s => {
                vrf.routes.insert(*l, *i);
                if let Some(v) = tag {
                    vrf.egress_vlans.insert(*l, *v);
                }
            }
            Ok(other) => {
                vrf.unresolved.insert(
                    *l,
                    format!(
                        "route {prefix} via {nh} leaves by {}, on another logical spine than {}",
                        spine_port_label(topo, *other),
                        topo.spine(s).name
                    ),
                );
            }
            Err(why) => {
                vrf.unresolved.insert(*l, format!("route {prefix}: {why}"));
            }
        }
    }
    for (l, v) in via.into_iter().filter(|(_, v)| v.len() > 1) {
        // Equal-cost routes spread a flow over links the job did not
        // pin: not the source-routed, contention-free forwarding.
        vrf.routes.remove(&l);
        vrf.egress_vlans.remove(&l);
        let what = if l.1.is_some() { "one GPU" } else { "one leaf" };
        vrf.unresolved
            .insert(l, format!("several routes to {what} ({})", v.join(", ")));
    }
    vrf
}
