//! The flows of a job's collective between its GPUs on different servers.
//!
//! A job's GPUs are given in its decision's order, each with its server;
//! servers are ordered by first appearance (for vClos slices that is leaf by
//! leaf, the order Lemma 5.1's leaf-wise permutation needs). Each GPU has
//! its own NIC (paper Section 4.1, "we bound each GPU to a single NIC"), so
//! a job's traffic between two servers runs on **rails**: the `r`-th GPU of
//! one server talks to the `r`-th GPU of another, as NCCL's multi-channel
//! rings and trees do on rail-aligned clusters. Traffic inside a server uses
//! NVLink and is not a flow here.
//!
//! A flow's `weight` is the share of its source NIC's line rate it gets on
//! the job's own full-bandwidth network; steps of a collective are merged
//! into one set of flows weighted by each step's share of the communication
//! time (module doc of [`super`]), so the weights leaving one GPU add up to
//! at most 1.
//!
//! * **ring** (Ring AllReduce; Patarasuk and Yuan, "Bandwidth optimal
//!   all-reduce algorithms for clusters of workstations", JPDC 2009): every
//!   step sends a `1/n` chunk to the next member, so all `2(n-1)` steps have
//!   the same pattern: per rail, server `i` to server `i+1` (cyclic),
//!   weight 1.
//! * **hd** (recursive halving then doubling; Thakur, Rabenseifner and
//!   Gropp, "Optimization of Collective Communication Operations in MPICH",
//!   IJHPCA 2005, Section 4.4): with `p` the largest power of two at most
//!   the server count `m`, reduce-scatter exchanges half the data with the
//!   partner at distance `p/2`, a quarter at `p/4`, ..., `1/p` at distance
//!   1, and all-gather mirrors it; the `m - p` extra servers first send
//!   their whole vector to a partner among the first `p` and get the result
//!   back at the end. In units of the vector size `S`, the communication
//!   lasts `T = 2(1 - 1/p) + 2 [m > p]`; the flow at distance `d` carries
//!   `2 d / p` of it both ways (`d/p` in each half), the pre and post steps
//!   `1` each way; weights are those amounts over `T`.
//! * **alltoall**: every GPU sends an equal share to every GPU of the job
//!   on another server, at once (NCCL's all-to-all posts all sends
//!   together): weight `1 / (n - k)` for `n` GPUs and `k` the fewest GPUs
//!   the job has on one server (the GPU with the most peers elsewhere sets
//!   the pace; on whole servers every NIC is exactly full).
//!
//! The flows come as [`Block`]s, one per pair of servers and step (an
//! all-to-all job of 256 GPUs on 32 servers has 63 488 flows in 992
//! blocks): routers that need only the leaves a flow joins route a block,
//! or a run of them, at once, and nobody materialises the flows
//! ([`flows`] flattens them, for tests and readers).

use crate::topology::ServerId;

use super::super::trace::Collective;

/// One flow: GPU indices into the job's GPU list, its weight (the share
/// of its NIC's line rate it averages over the whole communication), its
/// phase and its rate during that phase (module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flow {
    pub src: u32,
    pub dst: u32,
    pub weight: f64,
    pub phase: u16,
    pub rate: f64,
}

impl Flow {
    /// What this flow has in common with the others of its [`Block`].
    pub fn share(&self) -> Share {
        Share {
            weight: self.weight,
            phase: self.phase,
            rate: self.rate,
        }
    }
}

/// A flow's weight, phase and rate: all the routers and the admission
/// check of `titan` need besides the flow's two ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub weight: f64,
    pub phase: u16,
    pub rate: f64,
}

/// Flows from one server to another with one [`Share`]: every GPU of `src`
/// to every GPU of `dst` (`all`, source by source), or rail by rail (the
/// `r`-th of `src` to the `r`-th of `dst`, where both have one). All the
/// flows of a block leave one leaf and enter one leaf, so a router that
/// needs no more than the leaves (balanced routing) can route a block, or
/// a run of blocks, at once ([`crate::network::routes`]).
#[derive(Debug, Clone, Copy)]
pub struct Block<'a> {
    pub src: &'a [u32],
    pub dst: &'a [u32],
    pub all: bool,
    pub share: Share,
}

impl<'a> Block<'a> {
    /// How many flows the block holds.
    pub fn count(&self) -> u32 {
        let n = if self.all {
            self.src.len() * self.dst.len()
        } else {
            self.src.len().min(self.dst.len())
        };
        n as u32
    }

    /// The block's flows, in the collective's order.
    pub fn flows(&self) -> impl Iterator<Item = Flow> + 'a {
        let (src, dst, all, s) = (self.src, self.dst, self.all, self.share);
        (0..self.count() as usize).map(move |k| {
            let (a, b) = if all {
                (src[k / dst.len()], dst[k % dst.len()])
            } else {
                (src[k], dst[k])
            };
            Flow {
                src: a,
                dst: b,
                weight: s.weight,
                phase: s.phase,
                rate: s.rate,
            }
        })
    }
}

/// The hd fold's phases: the extra servers' send, and the result's return.
const FOLD_SEND: u16 = u16::MAX - 1;
const FOLD_RETURN: u16 = u16::MAX;

/// A job's GPUs grouped by server: the source of its [`Block`]s.
#[derive(Debug, Clone)]
pub struct Traffic {
    /// The job's servers in first-appearance order, each with the indices
    /// of its GPUs (in the job's GPU list) in order: the rails.
    servers: Vec<Vec<u32>>,
}

impl Traffic {
    /// The traffic of GPUs on `gpus` (the server of each GPU, in the job's
    /// order).
    pub fn new(gpus: &[ServerId]) -> Self {
        let mut order: Vec<ServerId> = Vec::new();
        let mut members: Vec<Vec<u32>> = Vec::new();
        for (i, s) in gpus.iter().enumerate() {
            // GPUs come server by server, mostly: the last one first.
            let last = order.len().checked_sub(1).filter(|&k| order[k] == *s);
            let k = match last.or_else(|| order.iter().position(|o| o == s)) {
                Some(k) => k,
                None => {
                    order.push(*s);
                    members.push(Vec::new());
                    order.len() - 1
                }
            };
            members[k].push(i as u32);
        }
        Traffic { servers: members }
    }

    /// The job's servers in first-appearance order, each with the indices
    /// of its GPUs in the job's GPU list.
    pub fn servers(&self) -> &[Vec<u32>] {
        &self.servers
    }

    /// The inter-server flows of `collective`, block by block in the
    /// collective's order (flattened: [`flows`]).
    pub fn blocks(&self, collective: Collective) -> Vec<Block<'_>> {
        if self.servers.len() < 2 {
            return Vec::new();
        }
        match collective {
            Collective::Ring => ring(&self.servers),
            Collective::Hd => hd(&self.servers),
            Collective::Alltoall => alltoall(&self.servers),
        }
    }
}

/// The inter-server flows of `collective` over GPUs on `gpus` (the server
/// of each GPU, in the job's order), one by one.
pub fn flows(collective: Collective, gpus: &[ServerId]) -> Vec<Flow> {
    let t = Traffic::new(gpus);
    let blocks = t.blocks(collective);
    blocks.iter().flat_map(Block::flows).collect()
}

/// Per rail, `a`'s GPU to `b`'s GPU with `weight`, in `phase` at rate 1
/// (where both have the rail).
fn rails(servers: &[Vec<u32>], (a, b): (usize, usize), weight: f64, phase: u16) -> Block<'_> {
    Block {
        src: &servers[a],
        dst: &servers[b],
        all: false,
        share: Share {
            weight,
            phase,
            rate: 1.0,
        },
    }
}

fn ring(servers: &[Vec<u32>]) -> Vec<Block<'_>> {
    let m = servers.len();
    let mut out = Vec::new();
    // Per rail, a ring over the servers that have that rail.
    let rails_n = servers.iter().map(Vec::len).max().unwrap_or(0);
    for r in 0..rails_n {
        let members: Vec<usize> = (0..m).filter(|&s| servers[s].len() > r).collect();
        if members.len() < 2 {
            continue;
        }
        for (i, &a) in members.iter().enumerate() {
            let b = members[(i + 1) % members.len()];
            out.push(Block {
                src: &servers[a][r..=r],
                dst: &servers[b][r..=r],
                all: false,
                share: Share {
                    weight: 1.0,
                    phase: 0,
                    rate: 1.0,
                },
            });
        }
    }
    out
}

fn hd(servers: &[Vec<u32>]) -> Vec<Block<'_>> {
    let m = servers.len();
    let p = 1usize << (usize::BITS - 1 - m.leading_zeros());
    let extra = m > p;
    let total = 2.0 * (1.0 - 1.0 / p as f64) + if extra { 2.0 } else { 0.0 };
    let mut out = Vec::new();
    let mut d = p / 2;
    while d >= 1 {
        let w = (2.0 * d as f64 / p as f64) / total;
        let phase = d.trailing_zeros() as u16;
        for i in 0..p {
            out.push(rails(servers, (i, i ^ d), w, phase));
        }
        d /= 2;
    }
    for e in p..m {
        let partner = e - p;
        out.push(rails(servers, (e, partner), 1.0 / total, FOLD_SEND));
        out.push(rails(servers, (partner, e), 1.0 / total, FOLD_RETURN));
    }
    out
}

fn alltoall(servers: &[Vec<u32>]) -> Vec<Block<'_>> {
    let weight = alltoall_weight(servers);
    let mut out = Vec::with_capacity(servers.len() * servers.len());
    for (a, from) in servers.iter().enumerate() {
        for (b, to) in servers.iter().enumerate() {
            if a != b {
                out.push(Block {
                    src: from,
                    dst: to,
                    all: true,
                    share: Share {
                        weight,
                        phase: 0,
                        rate: weight,
                    },
                });
            }
        }
    }
    out
}

/// The weight (and rate) of each all-to-all flow among `servers`: a GPU
/// on a server of `k` GPUs sends to and receives from `n - k` others; the
/// busiest NIC (the smallest server) sets the common share.
pub(super) fn alltoall_weight(servers: &[Vec<u32>]) -> f64 {
    let n: usize = servers.iter().map(Vec::len).sum();
    let fewest = servers.iter().map(Vec::len).min().unwrap_or(0);
    1.0 / (n - fewest) as f64
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// `m` servers of `t` GPUs, GPUs listed server by server.
    fn job(m: u32, t: u32) -> Vec<ServerId> {
        (0..m)
            .flat_map(|s| std::iter::repeat_n(ServerId(s), t as usize))
            .collect()
    }

    /// Sum of outgoing and incoming weights per GPU.
    fn nic_load(flows: &[Flow]) -> (HashMap<u32, f64>, HashMap<u32, f64>) {
        let (mut out, mut inn) = (HashMap::new(), HashMap::new());
        for f in flows {
            *out.entry(f.src).or_insert(0.0) += f.weight;
            *inn.entry(f.dst).or_insert(0.0) += f.weight;
        }
        (out, inn)
    }

    #[test]
    fn one_server_sends_nothing_on_the_fabric() {
        for c in Collective::ALL {
            assert!(flows(c, &job(1, 8)).is_empty(), "{c}");
        }
    }

    #[test]
    fn ring_runs_on_rails_between_consecutive_servers() {
        let g = job(3, 2); // servers 0,1,2 with GPUs (0,1), (2,3), (4,5)
        let f = flows(Collective::Ring, &g);
        let pairs: Vec<(u32, u32)> = f.iter().map(|f| (f.src, f.dst)).collect();
        assert_eq!(pairs, [(0, 2), (2, 4), (4, 0), (1, 3), (3, 5), (5, 1)]);
        assert!(f.iter().all(|f| f.weight == 1.0));
    }

    #[test]
    fn hd_on_a_power_of_two_pairs_by_distance_with_halving_weights() {
        let f = flows(Collective::Hd, &job(4, 1));
        // T = 2 (1 - 1/4) = 1.5; distance 2 carries 2*2/4 = 1, distance 1 carries 0.5.
        let w = |a, b| {
            f.iter()
                .find(|x| x.src == a && x.dst == b)
                .map(|x| x.weight)
        };
        assert_eq!(w(0, 2), Some(1.0 / 1.5));
        assert_eq!(w(0, 1), Some(0.5 / 1.5));
        assert_eq!(w(0, 3), None);
        let (out, inn) = nic_load(&f);
        for g in 0..4 {
            assert!((out[&g] - 1.0).abs() < 1e-12 && (inn[&g] - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn hd_folds_extra_servers_onto_partners() {
        let f = flows(Collective::Hd, &job(5, 2));
        // Server 4 (GPUs 8, 9) talks to server 0 (GPUs 0, 1) only, per rail.
        let of4: Vec<(u32, u32)> = f
            .iter()
            .filter(|x| x.src >= 8 || x.dst >= 8)
            .map(|x| (x.src, x.dst))
            .collect();
        assert_eq!(of4, [(8, 0), (9, 1), (0, 8), (1, 9)]);
        let (out, _) = nic_load(&f);
        assert!(out.values().all(|&w| w <= 1.0 + 1e-12), "{out:?}");
    }

    #[test]
    fn blocks_hold_the_flows_server_pair_by_server_pair() {
        let g = job(3, 2); // servers 0,1,2 with GPUs (0,1), (2,3), (4,5)
        let t = Traffic::new(&g);
        let pairs: Vec<(u32, u32)> = flows(Collective::Alltoall, &g)
            .iter()
            .map(|f| (f.src, f.dst))
            .take(6)
            .collect();
        assert_eq!(pairs, [(0, 2), (0, 3), (1, 2), (1, 3), (0, 4), (0, 5)]);
        let mut uneven = job(5, 4);
        uneven.extend([ServerId(9), ServerId(9), ServerId(10)]);
        for c in Collective::ALL {
            let t2 = Traffic::new(&uneven);
            for b in t2.blocks(c) {
                assert_eq!(b.count() as usize, b.flows().count(), "{c}");
                assert!(b.flows().all(|f| f.share() == b.share), "{c}");
            }
        }
        assert_eq!(t.blocks(Collective::Alltoall).len(), 3 * 2);
    }

    #[test]
    fn alltoall_spreads_each_nic_over_the_other_servers_gpus() {
        let f = flows(Collective::Alltoall, &job(3, 4));
        assert_eq!(f.len(), 12 * 8);
        let (out, inn) = nic_load(&f);
        for g in 0..12 {
            assert!((out[&g] - 1.0).abs() < 1e-12 && (inn[&g] - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn phases_run_each_nic_at_most_at_line_rate_and_merge_back_to_the_weights() {
        // Whole and uneven servers, powers of two and not.
        let mut uneven = job(5, 4);
        uneven.extend([ServerId(9), ServerId(9), ServerId(10)]);
        for g in [job(4, 2), job(5, 2), job(8, 1), job(3, 4), uneven] {
            for c in Collective::ALL {
                let f = flows(c, &g);
                // Within a phase every GPU sends and receives at most 1.
                let mut by: HashMap<(u16, u32, bool), f64> = HashMap::new();
                for x in &f {
                    *by.entry((x.phase, x.src, true)).or_insert(0.0) += x.rate;
                    *by.entry((x.phase, x.dst, false)).or_insert(0.0) += x.rate;
                }
                assert!(by.values().all(|&r| r <= 1.0 + 1e-12), "{c}: {by:?}");
                // A phase's share of the time is the same for all its flows
                // (weight / rate), and the shares add up to 1.
                let mut share: HashMap<u16, f64> = HashMap::new();
                for x in &f {
                    let s = x.weight / x.rate;
                    let seen = *share.entry(x.phase).or_insert(s);
                    assert!((seen - s).abs() < 1e-12, "{c}: phase {}", x.phase);
                }
                if !f.is_empty() {
                    let total: f64 = share.values().sum();
                    assert!((total - 1.0).abs() < 1e-12, "{c}: shares {share:?}");
                }
            }
        }
    }

    #[test]
    fn uneven_servers_keep_every_nic_within_line_rate() {
        // A partly used server (2 GPUs) among full ones (4 GPUs).
        let mut g = job(3, 4);
        g.extend([ServerId(9), ServerId(9)]);
        for c in Collective::ALL {
            let (out, inn) = nic_load(&flows(c, &g));
            for w in out.values().chain(inn.values()) {
                assert!(*w <= 1.0 + 1e-12, "{c}: {w}");
            }
        }
    }
}
