//! A placement in typed indices, and its translation into a named [`Decision`].
//!
//! The engines think in ids; the decision is by name so it can be stored,
//! reviewed and hand-edited. Keeping the translation in one place means
//! every policy emits decisions of the same shape: virtual leaves in the
//! order chosen, each listing its GPUs' server ports in GPU order; links in
//! "virtual spine slot" order per leaf; source route `j` of a leaf maps its
//! `j`-th server port to its `j`-th reserved uplink (paper Section 5.2).

use crate::decision::{
    CrossConnect, Decision, GpuRef, OcsHop, ReservedLink, SourceRoute, Stage, VirtualClos,
    VirtualLeaf,
};
use crate::names::JobId;
use crate::state::{FabricState, Resources};
use crate::topology::{LeafId, Name, OcsId, PortRef, ServerId, SpineId, Topology};

/// One reserved link: leaf uplink to a spine port or (two-leaf case) to
/// another leaf's uplink, optionally through an OCS hop
/// `(ocs, leaf-side port, far-side port)`; `rewire` asks for the cross-connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkPick {
    pub leaf: LeafId,
    pub uplink: u16,
    pub far: PortRef,
    pub via: Option<(OcsId, u16, u16)>,
    pub rewire: bool,
}

/// A placement before naming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub stage: Stage,
    pub gpus: Vec<(ServerId, u16)>,
    pub leaves: Vec<LeafId>,
    pub spines: Vec<SpineId>,
    pub links: Vec<LinkPick>,
    /// Per leaf: (server port index, uplink index), one-to-one.
    pub routes: Vec<(LeafId, u16, u16)>,
}

impl Plan {
    /// A placement with no network part (stages 0-1, baselines).
    pub fn local(stage: Stage, gpus: Vec<(ServerId, u16)>) -> Self {
        Plan {
            stage,
            gpus,
            leaves: vec![],
            spines: vec![],
            links: vec![],
            routes: vec![],
        }
    }

    /// Server ports of the plan's GPUs on `leaf`, in GPU order.
    pub fn server_ports(&self, topo: &Topology, leaf: LeafId) -> Vec<u16> {
        self.gpus
            .iter()
            .filter(|(s, _)| topo.server(*s).leaf == leaf)
            .map(|&(s, g)| topo.server(s).ports[g as usize])
            .collect()
    }

    /// Route each leaf's `j`-th server port onto its `j`-th uplink in
    /// `uplinks` (the leaf's reserved uplinks in slot order).
    pub fn route_in_order(&mut self, topo: &Topology, leaf: LeafId, uplinks: &[u16]) {
        self.route_in_order_since(topo, leaf, 0, uplinks);
    }

    /// [`Plan::route_in_order`] when the plan's GPUs on `leaf` all come
    /// at or after `from` in `gpus` (just taken): only those are scanned,
    /// so routing leaf after leaf stays linear in the job's GPUs (a 2 048-GPU
    /// job over 90 leaves scanned its GPUs once per leaf).
    pub fn route_in_order_since(
        &mut self,
        topo: &Topology,
        leaf: LeafId,
        from: usize,
        uplinks: &[u16],
    ) {
        debug_assert!(self.gpus[..from]
            .iter()
            .all(|(s, _)| topo.server(*s).leaf != leaf));
        let ports = self.gpus[from..]
            .iter()
            .filter(|(s, _)| topo.server(*s).leaf == leaf)
            .map(|&(s, g)| topo.server(s).ports[g as usize]);
        let routes: Vec<(LeafId, u16, u16)> =
            ports.zip(uplinks).map(|(sp, up)| (leaf, sp, *up)).collect();
        self.routes.extend(routes);
    }

    /// [`Plan::server_ports`] of every leaf of `leaves`, in that order,
    /// from one pass over the GPUs (not one per leaf).
    fn ports_by_leaf(&self, topo: &Topology) -> Vec<Vec<u16>> {
        const NONE: u32 = u32::MAX;
        let mut slot = vec![NONE; topo.leaves.len()];
        let mut buckets: Vec<Vec<u16>> = Vec::new();
        for &l in &self.leaves {
            if slot[l.index()] == NONE {
                slot[l.index()] = buckets.len() as u32;
                buckets.push(Vec::new());
            }
        }
        for &(s, g) in &self.gpus {
            let server = topo.server(s);
            if let Some(b) = buckets.get_mut(slot[server.leaf.index()] as usize) {
                b.push(server.ports[g as usize]);
            }
        }
        self.leaves
            .iter()
            .map(|l| buckets[slot[l.index()] as usize].clone())
            .collect()
    }

    /// Rank order for a halving-doubling job (the decision's GPU order is
    /// the rank order a scheduler launches the job with, and the one the
    /// network model reads: [`crate::network::traffic`]).
    ///
    /// HD pairs rank `i` with `i XOR d` in the phase at distance `d`. Listed
    /// leaf by leaf, a slice of `l` leaves of `k` servers keeps every phase
    /// a leaf-wise permutation (Lemma 5.1's condition: a partner on another
    /// leaf sits at the same position there, so the two ends share the
    /// slot's spine) only when `k` is a power of two; otherwise a phase can
    /// send two flows down one link of the slice. Listed position by
    /// position across the leaves (rank `b * l + a` for server `b` of leaf
    /// `a`), every phase is either inside a leaf or a permutation across
    /// leaves at the same position whenever `l` is a power of two, the
    /// fold included (`p` is then a multiple of `l`). So a Stage 2 slice of
    /// a power-of-two number of leaves and a non-power-of-two number of
    /// servers per leaf, each server holding as many of the job's GPUs, is
    /// reordered that way; each leaf's own order, hence its source routes,
    /// is unchanged. Other slices keep their order.
    pub fn order_for_hd(&mut self, topo: &Topology) {
        let l = self.leaves.len();
        if self.stage != Stage::Vclos || l < 2 || !l.is_power_of_two() {
            return;
        }
        let mut servers: Vec<Vec<ServerId>> = vec![Vec::new(); l];
        let mut count: std::collections::HashMap<ServerId, usize> = Default::default();
        for &(s, _) in &self.gpus {
            let Some(a) = self.leaves.iter().position(|&n| n == topo.server(s).leaf) else {
                return;
            };
            let c = count.entry(s).or_default();
            if *c == 0 {
                servers[a].push(s);
            }
            *c += 1;
        }
        let k = servers[0].len();
        let per = count.values().next().copied().unwrap_or(0);
        if k.is_power_of_two()
            || servers.iter().any(|v| v.len() != k)
            || count.values().any(|&c| c != per)
        {
            return;
        }
        let mut by_server: std::collections::HashMap<ServerId, Vec<(ServerId, u16)>> =
            Default::default();
        for &g in &self.gpus {
            by_server.entry(g.0).or_default().push(g);
        }
        self.gpus = (0..k)
            .flat_map(|b| servers.iter().map(move |v| v[b]))
            .flat_map(|s| by_server.remove(&s).unwrap_or_default())
            .collect();
    }

    /// The typed resources the plan takes, as admission would resolve them
    /// from its decision (checked against that in debug builds).
    pub(crate) fn resources(&self, st: &FabricState) -> Resources {
        let (topo, lay) = (st.topology(), st.layout());
        let mut r = Resources {
            gpus: self.gpus.clone(),
            ..Resources::default()
        };
        for (&l, ports) in self.leaves.iter().zip(self.ports_by_leaf(topo)) {
            r.server_ports
                .extend(ports.into_iter().map(|p| lay.server_port(l, p)));
        }
        for k in &self.links {
            r.uplinks.push(lay.uplink(k.leaf, k.uplink));
            match k.far {
                PortRef::Leaf(l, u) => r.uplinks.push(lay.uplink(l, u)),
                PortRef::Spine(s, p) => r.spine_ports.push(lay.spine_port(s, p)),
                PortRef::Ocs(..) => {}
            }
            if let Some((o, a, b)) = k.via {
                r.ocs_ports.extend([lay.ocs_port(o, a), lay.ocs_port(o, b)]);
                if k.rewire {
                    r.cross.push((o, a, b));
                }
            }
        }
        r
    }

    pub fn to_decision(&self, topo: &Topology, job: &JobId) -> Decision {
        let leaves = self
            .leaves
            .iter()
            .zip(self.ports_by_leaf(topo))
            .map(|(&l, ports)| VirtualLeaf {
                leaf: topo.leaf(l).name.clone(),
                server_ports: ports
                    .into_iter()
                    .map(|p| topo.leaf(l).server_ports[p as usize].clone())
                    .collect(),
            })
            .collect();
        let mut cross_connects = Vec::new();
        let links = self
            .links
            .iter()
            .map(|k| {
                let (peer, peer_port) = port_name(topo, k.far);
                let via = k.via.map(|(o, a, b)| {
                    let ocs = topo.ocs_dev(o);
                    if k.rewire {
                        cross_connects.push(CrossConnect {
                            ocs: ocs.name.clone(),
                            a: ocs.ports[a as usize].clone(),
                            b: ocs.ports[b as usize].clone(),
                        });
                    }
                    OcsHop {
                        ocs: ocs.name.clone(),
                        leaf_side: ocs.ports[a as usize].clone(),
                        far_side: ocs.ports[b as usize].clone(),
                    }
                });
                let leaf = topo.leaf(k.leaf);
                ReservedLink {
                    leaf: leaf.name.clone(),
                    uplink: leaf.uplinks[k.uplink as usize].clone(),
                    peer,
                    peer_port,
                    via,
                }
            })
            .collect();
        Decision {
            requested_gpus: None,
            sharing: None,
            job: job.clone(),
            stage: self.stage,
            gpus: self
                .gpus
                .iter()
                .map(|&(s, g)| GpuRef {
                    server: topo.server(s).name.clone(),
                    gpu: g,
                })
                .collect(),
            vclos: VirtualClos {
                leaves,
                spines: self
                    .spines
                    .iter()
                    .map(|&s| topo.spine(s).name.clone())
                    .collect(),
                links,
                cross_connects,
            },
            source_routes: self
                .routes
                .iter()
                .map(|&(l, sp, up)| {
                    let leaf = topo.leaf(l);
                    SourceRoute {
                        leaf: leaf.name.clone(),
                        server_port: leaf.server_ports[sp as usize].clone(),
                        uplink: leaf.uplinks[up as usize].clone(),
                    }
                })
                .collect(),
        }
    }
}

/// Device and port names of a leaf uplink or spine port.
pub fn port_name(topo: &Topology, p: PortRef) -> (Name, Name) {
    match p {
        PortRef::Leaf(l, u) => (
            topo.leaf(l).name.clone(),
            topo.leaf(l).uplinks[u as usize].clone(),
        ),
        PortRef::Spine(s, i) => (
            topo.spine(s).name.clone(),
            topo.spine(s).ports[i as usize].clone(),
        ),
        PortRef::Ocs(o, i) => (
            topo.ocs_dev(o).name.clone(),
            topo.ocs_dev(o).ports[i as usize].clone(),
        ),
    }
}
