//! Hand-made vClos decisions over a topology's initial links.
//!
//! Tests and demos need a job with a known shape (these servers, these
//! spines) rather than whatever the placement engine picks; writing such a
//! decision by hand means looking up uplinks, spine ports and OCS hops in the
//! cabling, which this does. The result is an ordinary [`Decision`], checked
//! like any other wherever it is used.

use crate::decision::{
    Decision, OcsHop, ReservedLink, SourceRoute, Stage, VirtualClos, VirtualLeaf,
};
use crate::names::JobId;
use crate::topology::{LeafId, Name, PortRef, Topology};

/// A vClos decision for `job`: every GPU of `servers`, each leaf reaching
/// every one of `spines` over its initial link (through the initial OCS
/// patch where there is one), and the `k`-th GPU port of each leaf (in
/// server order) source-routed to `spines[k]`. Each leaf must hold exactly
/// `spines.len()` of the job's GPUs.
pub fn vclos_decision(
    topo: &Topology,
    job: &str,
    servers: &[&str],
    spines: &[&str],
) -> Result<Decision, String> {
    let job = JobId::new(job).map_err(|e| e.to_string())?;
    let mut gpus = Vec::new();
    let mut leaves: Vec<(LeafId, Vec<Name>)> = Vec::new();
    for name in servers {
        let s = topo
            .server_id(name)
            .ok_or_else(|| format!("unknown server `{name}`"))?;
        let server = topo.server(s);
        let ports = &topo.leaf(server.leaf).server_ports;
        let at = match leaves.iter().position(|(l, _)| *l == server.leaf) {
            Some(i) => i,
            None => {
                leaves.push((server.leaf, Vec::new()));
                leaves.len() - 1
            }
        };
        for (g, &p) in server.ports.iter().enumerate() {
            gpus.push(crate::decision::GpuRef {
                server: server.name.clone(),
                gpu: g as u16,
            });
            leaves[at].1.push(ports[usize::from(p)].clone());
        }
    }
    let spine_ids = spines
        .iter()
        .map(|n| {
            topo.spine_id(n)
                .ok_or_else(|| format!("unknown spine `{n}`"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let initial = topo.initial_fabric_links();
    let mut links = Vec::new();
    let mut source_routes = Vec::new();
    for (l, ports) in &leaves {
        let leaf = topo.leaf(*l);
        if ports.len() != spines.len() {
            return Err(format!(
                "{} holds {} GPUs of the job, not one per spine ({})",
                leaf.name,
                ports.len(),
                spines.len()
            ));
        }
        for (port, &s) in ports.iter().zip(&spine_ids) {
            let (u, i) = initial
                .iter()
                .find_map(|&(a, b)| match (a, b) {
                    (PortRef::Leaf(la, u), PortRef::Spine(sb, i)) if la == *l && sb == s => {
                        Some((u, i))
                    }
                    _ => None,
                })
                .ok_or_else(|| format!("{} has no link to {}", leaf.name, topo.spine(s).name))?;
            let uplink = leaf.uplinks[usize::from(u)].clone();
            let via = match leaf.uplink_peer[usize::from(u)] {
                Some(PortRef::Ocs(o, ls)) => {
                    let ocs = topo.ocs_dev(o);
                    let fs = ocs
                        .patches
                        .iter()
                        .find_map(|&(a, b)| (a == ls).then_some(b).or((b == ls).then_some(a)))
                        .ok_or_else(|| {
                            format!("{}:{} is not patched", ocs.name, ocs.ports[usize::from(ls)])
                        })?;
                    Some(OcsHop {
                        ocs: ocs.name.clone(),
                        leaf_side: ocs.ports[usize::from(ls)].clone(),
                        far_side: ocs.ports[usize::from(fs)].clone(),
                    })
                }
                _ => None,
            };
            links.push(ReservedLink {
                leaf: leaf.name.clone(),
                uplink: uplink.clone(),
                peer: topo.spine(s).name.clone(),
                peer_port: topo.spine(s).ports[usize::from(i)].clone(),
                via,
            });
            source_routes.push(SourceRoute {
                leaf: leaf.name.clone(),
                server_port: port.clone(),
                uplink,
            });
        }
    }
    Ok(Decision {
        requested_gpus: None,
        sharing: None,
        job,
        stage: Stage::Manual,
        gpus,
        vclos: VirtualClos {
            leaves: leaves
                .into_iter()
                .map(|(l, server_ports)| VirtualLeaf {
                    leaf: topo.leaf(l).name.clone(),
                    server_ports,
                })
                .collect(),
            spines: spines.iter().map(|&s| Name::from(s)).collect(),
            links,
            cross_connects: Vec::new(),
        },
        source_routes,
    })
}
