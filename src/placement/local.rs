//! Stages 0 and 1, shared by every policy: a job inside one server, or on
//! whole idle servers under one leaf (paper Section 6.1, Algorithm 1).
//!
//! Locality rule: a job of `N <= T` GPUs lives in one server; a larger job
//! takes `ceil(N / T)` WHOLE idle servers. When `N` is not a multiple of `T`
//! the job still holds every GPU of those servers (the paper's `N^new`: the
//! slice is built for `N' = ceil(N/T) * T` GPUs), so the leftover GPUs of a
//! partly used server never end up shared with another job's traffic.

use crate::state::FabricState;
use crate::topology::{LeafId, ServerId};

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

/// Stage 1: the leaf with the fewest idle servers that still has `k`
/// (ties: lowest index), and its first `k` idle servers.
pub fn stage1(st: &FabricState, k: u32) -> Option<(LeafId, Vec<ServerId>)> {
    let topo = st.topology();
    let leaf = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&l| st.idle_servers(l) >= k)
        .min_by_key(|&l| (st.idle_servers(l), l))?;
    Some((leaf, st.idle_server_ids(leaf).take(k as usize).collect()))
}

/// Total idle servers in the fabric.
pub fn idle_total(st: &FabricState) -> u32 {
    (0..st.topology().leaves.len() as u32)
        .map(|l| st.idle_servers(LeafId(l)))
        .sum()
}

/// Every GPU of `servers`.
pub fn whole(servers: &[ServerId], per_server: u16) -> Vec<(ServerId, u16)> {
    servers
        .iter()
        .flat_map(|&s| (0..per_server).map(move |g| (s, g)))
        .collect()
}
