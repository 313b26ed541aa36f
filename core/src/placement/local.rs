//! Stages 0 and 1, shared by every policy: a job inside one server, or on
//! whole idle servers under one leaf (paper Section 6.1, Algorithm 1).
//!
//! Locality rule: a job of `N <= T` GPUs lives in one server; a larger job
//! takes `ceil(N / T)` WHOLE idle servers. When `N` is not a multiple of `T`
//! the job still holds every GPU of those servers (the paper's `N^new`: the
//! slice is built for `N' = ceil(N/T) * T` GPUs), so the leftover GPUs of a
//! partly used server never end up shared with another job's traffic.
//!
//! **Partial servers** ([`Grain::Gpus`], `--partial-servers`; issue 15
//! item 2, after Titan, seed 002 Section III): a job beyond one server
//! may take exactly `N` free GPUs, on partly used servers first. Isolation
//! does not need whole servers: every GPU has its own NIC and server port
//! (the rail), a multi-leaf job source-routes each of its server ports to
//! its own uplink (Section 5.2), and GPUs of other jobs on the same server
//! talk over the server's own fabric (NVLink) or their own server ports.
//! Lemma 5.1's leaf-wise permutation argument is about server ports and
//! uplinks only, so no link is ever shared with another job: a leaf of the
//! slice gives `s` GPUs (any servers) and `s` uplinks, one per virtual
//! spine, and `s` is any divisor of `N` the spines allow.
//!
//! What partial servers give up: Lemma 5.1 also assumes the job's own
//! traffic is a leaf-wise permutation. A job with unequal GPU counts per
//! server has unequal rails (`crate::network::traffic`), so a ring or
//! halving-doubling step may send two flows down one of the job's own
//! links: the job can slow *itself* (never another job).
//!
//! **Order: whole servers first, GPUs only when whole servers cannot place
//! the job now** ([`super::SliceOptions::grains`]). Measured on 3 000-job
//! traces at 4096 GPUs, sizes any multiple of 2 up to 256, load 0.9
//! (docs/performance.md, "Partial servers"): GPUs first (Titan's own
//! order) took vClos's avg JCT from 14 896 s to 42 680 s (seed 2), because
//! slices of odd shapes on partly used servers leave spine bicliques the
//! next large job cannot find; whole servers first with GPUs as the
//! fallback changed vClos's avg JCT by -3% / +9% / -2% and OCS-vClos's by
//! -0.5% / -6.5% / -9% (load 0.9, seeds 3-5), and cut both by 7% and 14%
//! on the issue-13 hard traces, with fewer jobs blocked on GPUs in every
//! run.
//!
//! Which GPUs of a leaf: Titan's objective (Eq. 1) on that leaf, fewest
//! idle servers first, then fewest servers: partly used servers with the
//! most free GPUs first, idle servers last (ties: topology order).

use crate::state::FabricState;
use crate::topology::{LeafId, ServerId, Topology};

/// What a leaf gives a job that needs more than one server: whole idle
/// servers (the paper) or free GPUs (partial servers, module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Grain {
    /// Whole idle servers, `ceil(N / T)` of them (the paper's rule).
    #[default]
    Servers,
    /// Exactly `N` free GPUs, partly used servers first.
    Gpus,
}

impl Grain {
    /// GPUs per unit: `T` for whole servers, 1 for GPUs.
    pub fn size(self, topo: &Topology) -> u32 {
        match self {
            Grain::Servers => u32::from(topo.gpus_per_server),
            Grain::Gpus => 1,
        }
    }

    /// Units a job of `gpus` GPUs needs (0 when it fits in one server).
    pub fn needed(self, topo: &Topology, gpus: u32) -> u32 {
        if gpus <= u32::from(topo.gpus_per_server) {
            0
        } else {
            gpus.div_ceil(self.size(topo))
        }
    }

    /// Units the fabric has in all.
    pub fn total(self, topo: &Topology) -> u32 {
        match self {
            Grain::Servers => topo.servers.len() as u32,
            Grain::Gpus => topo.gpu_count() as u32,
        }
    }

    /// Free units under `leaf`.
    pub fn free(self, st: &FabricState, leaf: LeafId) -> u32 {
        match self {
            Grain::Servers => st.idle_servers(leaf),
            Grain::Gpus => st.leaf_free_gpus(leaf),
        }
    }

    /// Free units in the fabric.
    pub fn free_total(self, st: &FabricState) -> u32 {
        (0..st.topology().leaves.len() as u32)
            .map(|l| self.free(st, LeafId(l)))
            .sum()
    }

    /// The GPUs of `units` free units under `leaf` (module doc for which);
    /// fewer if the leaf has fewer.
    pub fn take(self, st: &FabricState, leaf: LeafId, units: u32) -> Vec<(ServerId, u16)> {
        let topo = st.topology();
        match self {
            Grain::Servers => {
                let servers: Vec<ServerId> =
                    st.idle_server_ids(leaf).take(units as usize).collect();
                whole(&servers, topo.gpus_per_server)
            }
            Grain::Gpus => {
                let t = topo.gpus_per_server;
                let mut servers: Vec<(u16, ServerId)> = topo.leaves[leaf.index()]
                    .servers
                    .iter()
                    .map(|&s| (st.free_gpus(s), s))
                    .filter(|&(f, _)| f > 0)
                    .collect();
                // Partly used (fewer than T free) first, most free first.
                servers.sort_by_key(|&(f, s)| (f == t, std::cmp::Reverse(f), s));
                servers
                    .into_iter()
                    .flat_map(|(_, s)| st.free_gpu_indices(s).map(move |g| (s, g)))
                    .take(units as usize)
                    .collect()
            }
        }
    }
}

/// Whole servers a job of `gpus` GPUs needs (0 when it fits in one server).
pub fn servers_needed(gpus: u32, per_server: u32) -> u32 {
    if gpus <= per_server {
        0
    } else {
        gpus.div_ceil(per_server)
    }
}

/// Stage 0: the server with the fewest free GPUs that still has `n`
/// (ties: lowest index); the lowest free GPU indices in it.
pub fn stage0(st: &FabricState, n: u32) -> Option<Vec<(ServerId, u16)>> {
    let topo = st.topology();
    let best = (0..topo.servers.len() as u32)
        .map(ServerId)
        .filter(|&s| u32::from(st.free_gpus(s)) >= n)
        .min_by_key(|&s| (st.free_gpus(s), s))?;
    Some(
        st.free_gpu_indices(best)
            .take(n as usize)
            .map(|g| (best, g))
            .collect(),
    )
}

/// Stage 1: the leaf with the fewest free units that still has `k`
/// (ties: lowest index), and the GPUs of `k` of them.
pub fn stage1(st: &FabricState, grain: Grain, k: u32) -> Option<Vec<(ServerId, u16)>> {
    let topo = st.topology();
    let leaf = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&l| grain.free(st, l) >= k)
        .min_by_key(|&l| (grain.free(st, l), l))?;
    Some(grain.take(st, leaf, k))
}

/// `k` units of `grain` from the leaves with the fewest free units first
/// (best fit; ties: lowest index), as many from each as it has; `None`
/// when the fabric has fewer.
pub fn fewest_free_first(st: &FabricState, grain: Grain, k: u32) -> Option<Vec<(ServerId, u16)>> {
    let mut leaves: Vec<(u32, LeafId)> = (0..st.topology().leaves.len() as u32)
        .map(LeafId)
        .map(|l| (grain.free(st, l), l))
        .filter(|&(f, _)| f > 0)
        .collect();
    leaves.sort_unstable();
    let take = super::take_first(leaves.into_iter().map(|(f, l)| (l, f)), k)?;
    Some(
        take.into_iter()
            .flat_map(|(l, n)| grain.take(st, l, n))
            .collect(),
    )
}

/// Every GPU of `servers`.
pub fn whole(servers: &[ServerId], per_server: u16) -> Vec<(ServerId, u16)> {
    servers
        .iter()
        .flat_map(|&s| (0..per_server).map(move |g| (s, g)))
        .collect()
}
