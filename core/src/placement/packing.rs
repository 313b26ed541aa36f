//! GPU-packing baselines from Titan's evaluation (seed 002, Section V,
//! "Benchmarks"; issue 15, item 3): small, documented approximations of
//! how HiveD and Tiresias choose GPUs, named as such (`hived-like`,
//! `tiresias-like`). Titan's third benchmark, Elasticflow's best-fit
//! consolidation on whole servers, is `best` (routed on real links:
//! `balanced-ecmp`).
//!
//! Like `best` they choose GPUs only (the ideal-network state, no slice):
//! nothing isolates their jobs, and the replay's network model routes
//! their flows as `balanced-ecmp` does, so jobs that share a link slow each
//! other. Both may use partly used servers and split a job over several
//! servers, which is what Titan compares them on (cross-server traffic,
//! used machines, fragmentation).
//!
//! * **`hived-like`: buddy cells.** HiveD (Zhao et al., OSDI'20, Section
//!   3.2, "buddy cell allocation") allocates a job as cells of a hierarchy
//!   (GPU, GPU pairs, ..., server, rack) with a buddy allocator: a free
//!   cell of the requested level is used if there is one, and a
//!   higher-level cell is split only when there is none, so fragments are
//!   reused first. Approximation: cell sizes are the powers of two up to
//!   `T` GPUs inside a server, aligned at multiples of their size (a server
//!   of `T` not a power of two keeps its tail as smaller cells), plus whole
//!   servers. A job of `N` GPUs is `floor(N / T)` whole servers (leaves
//!   with the fewest idle servers first, as `best`) plus one cell per set
//!   bit of `N mod T`, largest first; each cell is the free aligned block
//!   of that size on the server with the fewest free GPUs (the most split
//!   one: reuse fragments before splitting), ties by server order. The
//!   job's cells are chosen independently, so its GPUs spread over servers
//!   as Titan describes HiveD's ("tries to utilize fragment GPUs ...
//!   workers distributed among multiple servers"). No virtual clusters, no
//!   priorities, no rack cells beyond what whole servers give.
//! * **`tiresias-like`: consolidation by model.** Tiresias (Gu et al.,
//!   NSDI'19, Section 4.3, "Placement") consolidates a job on as few
//!   machines as possible only when its model is sensitive to
//!   consolidation, which its profiler finds for models with highly skewed
//!   tensor sizes (the paper's examples: VGG, AlexNet), and otherwise
//!   places it where GPUs are free. Approximation: the trace's `model`
//!   decides; `vgg*` and `alexnet*` (and jobs with no model: Tiresias
//!   consolidates what it has not profiled) are **consolidated**: the leaf
//!   with the fewest free GPUs that holds the whole job if any (else the
//!   whole fabric), its servers with the most free GPUs first, so the
//!   fewest servers; every other model is placed **anywhere**: the first
//!   free GPUs in topology order (first fit), partly used servers and
//!   all, with no attempt to keep the job together. (A first version took
//!   one GPU at a time from the emptiest server; that spread every job
//!   over as many servers as it has GPUs, far beyond Titan's description
//!   of Tiresias: 42% more servers in use than Titan where the paper has
//!   19%.) No discretised 2D-LAS queue here: the replay's queue
//!   (`--queue`) orders jobs for every policy.

use std::sync::Arc;

use super::plan::Plan;
use super::{commit, local, precheck, release_held, Blocked, JobRequest, Outcome};
use super::{PlacementError, Placer};
use crate::decision::{Decision, Stage};
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{LeafId, ServerId, Topology};

/// Which packing rule (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    Buddy,
    Tiresias,
}

/// A GPU-packing baseline (module doc).
#[derive(Debug, Clone)]
pub struct PackingPlacer {
    state: FabricState,
    rule: Packing,
}

impl PackingPlacer {
    /// Continue from `state`, in the baselines' ideal-network model.
    pub fn with_state(state: FabricState, rule: Packing) -> Self {
        PackingPlacer {
            state: state.ideal_network(),
            rule,
        }
    }

    pub fn new(topology: Arc<Topology>, rule: Packing) -> Self {
        Self::with_state(FabricState::new(topology), rule)
    }
}

impl Placer for PackingPlacer {
    fn name(&self) -> &'static str {
        match self.rule {
            Packing::Buddy => "hived-like",
            Packing::Tiresias => "tiresias-like",
        }
    }

    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        precheck(&self.state, job)?;
        let gpus = match self.rule {
            Packing::Buddy => buddy(&self.state, job.gpus),
            Packing::Tiresias if consolidates(job.model.as_deref()) => {
                consolidated(&self.state, job.gpus)
            }
            Packing::Tiresias => anywhere(&self.state, job.gpus),
        };
        let Some(gpus) = gpus else {
            return Ok(Outcome::Blocked(Blocked::Gpu));
        };
        let name = self.name();
        let plan = Plan::local(stage(&self.state, &gpus), gpus);
        commit(&mut self.state, name, job, &plan)
    }

    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        release_held(&mut self.state, job)
    }

    fn fabric(&self) -> Option<&FabricState> {
        Some(&self.state)
    }
}

/// Whether Tiresias-like consolidates a job of `model` (module doc).
pub fn consolidates(model: Option<&str>) -> bool {
    model.is_none_or(|m| {
        let m = m.to_ascii_lowercase();
        m.starts_with("vgg") || m.starts_with("alexnet")
    })
}

/// The decision's stage: where its GPUs are (a multi-leaf job is
/// `manual`, as `best`'s: GPUs only, in the ideal-network model).
fn stage(st: &FabricState, gpus: &[(ServerId, u16)]) -> Stage {
    let topo = st.topology();
    let first = gpus[0].0;
    if gpus.iter().all(|&(s, _)| s == first) {
        Stage::Server
    } else if gpus
        .iter()
        .all(|&(s, _)| topo.server(s).leaf == topo.server(first).leaf)
    {
        Stage::Leaf
    } else {
        Stage::Manual
    }
}

/// Free GPUs of every server, as a bitmask (bit `g`: GPU `g` free).
fn free_masks(st: &FabricState) -> Vec<u64> {
    (0..st.topology().servers.len() as u32)
        .map(|s| {
            st.free_gpu_indices(ServerId(s))
                .fold(0u64, |m, g| m | 1 << g)
        })
        .collect()
}

/// Buddy cells (module doc): whole servers, then one aligned cell per set
/// bit of the remainder, each on the most split server that has it free.
fn buddy(st: &FabricState, n: u32) -> Option<Vec<(ServerId, u16)>> {
    let topo = st.topology();
    let t = u32::from(topo.gpus_per_server);
    let (whole, rest) = (n / t, n % t);
    let mut out = Vec::with_capacity(n as usize);
    let mut masks = free_masks(st);
    let full = if t >= 64 { u64::MAX } else { (1u64 << t) - 1 };
    if whole > 0 {
        out = local::fewest_free_first(st, local::Grain::Servers, whole)?;
        for &(s, _) in &out {
            masks[s.index()] = 0;
        }
    }
    for bit in (0..u32::BITS - rest.leading_zeros()).rev() {
        let size = 1u32 << bit;
        if rest & size == 0 {
            continue;
        }
        let cell = (0..masks.len())
            .filter_map(|s| {
                let block = (1u64 << size) - 1;
                let off = (0..t / size)
                    .map(|i| i * size)
                    .find(|&o| (masks[s] >> o) & block == block)?;
                Some(((masks[s] & full).count_ones(), s, off))
            })
            .min()?;
        let (_, s, off) = cell;
        masks[s] &= !(((1u64 << size) - 1) << off);
        out.extend((off..off + size).map(|g| (ServerId(s as u32), g as u16)));
    }
    Some(out)
}

/// Consolidated: the best-fit leaf that holds the job (else the fabric),
/// servers with the most free GPUs first.
fn consolidated(st: &FabricState, n: u32) -> Option<Vec<(ServerId, u16)>> {
    let topo = st.topology();
    let leaf = (0..topo.leaves.len() as u32)
        .map(LeafId)
        .filter(|&l| st.leaf_free_gpus(l) >= n)
        .min_by_key(|&l| (st.leaf_free_gpus(l), l));
    let mut servers: Vec<ServerId> = match leaf {
        Some(l) => topo.leaf(l).servers.clone(),
        None => (0..topo.servers.len() as u32).map(ServerId).collect(),
    };
    // Stable: ties keep topology order.
    servers.sort_by_key(|&s| std::cmp::Reverse(st.free_gpus(s)));
    if n <= u32::from(topo.gpus_per_server) {
        // One server if any holds it: the best fit.
        if let Some(g) = local::stage0(st, n) {
            return Some(g);
        }
    }
    let g: Vec<(ServerId, u16)> = servers
        .into_iter()
        .flat_map(|s| st.free_gpu_indices(s).map(move |g| (s, g)))
        .take(n as usize)
        .collect();
    (g.len() == n as usize).then_some(g)
}

/// Anywhere: the free GPUs of the servers in topology order (first fit).
fn anywhere(st: &FabricState, n: u32) -> Option<Vec<(ServerId, u16)>> {
    let g: Vec<(ServerId, u16)> = (0..st.topology().servers.len() as u32)
        .map(ServerId)
        .flat_map(|s| st.free_gpu_indices(s).map(move |g| (s, g)))
        .take(n as usize)
        .collect();
    (g.len() == n as usize).then_some(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::uniform_topology as topo;

    fn place(p: &mut PackingPlacer, id: &str, gpus: u32, model: Option<&str>) -> Decision {
        let mut job = JobRequest::new(JobId::new(id).unwrap(), gpus);
        job.model = model.map(str::to_string);
        match p.place(&job).unwrap() {
            Outcome::Placed(d) => Arc::unwrap_or_clone(d),
            Outcome::Blocked(b) => panic!("{id}: {b:?}"),
        }
    }

    fn servers(d: &Decision) -> std::collections::BTreeSet<String> {
        d.gpus.iter().map(|g| g.server.to_string()).collect()
    }

    #[test]
    fn buddy_cells_reuse_fragments_before_splitting_and_align() {
        // 4 leaves x 2 servers x 4 GPUs.
        let mut p = PackingPlacer::new(topo(4, 8, 4, 0), Packing::Buddy);
        // 1 GPU: a cell split from some server; GPU 0 (aligned).
        let a = place(&mut p, "a", 1, None);
        assert_eq!(a.gpus[0].gpu, 0);
        // 3 GPUs = cells of 2 then 1: the 2-cell at offset 2 of the same
        // (most split) server, the 1-cell at GPU 1 there too.
        let b = place(&mut p, "b", 3, None);
        assert_eq!(servers(&b), servers(&a), "{b:?}");
        let mut got: Vec<u16> = b.gpus.iter().map(|g| g.gpu).collect();
        got.sort_unstable();
        assert_eq!(got, vec![1, 2, 3]);
        // 6 GPUs = one whole server + a 2-cell: the whole server is idle,
        // the 2-cell comes from the most split server with one free.
        let c = place(&mut p, "c", 6, None);
        assert_eq!(c.gpus.len(), 6);
        assert_eq!(servers(&c).len(), 2);
        // Two free GPUs that are not an aligned pair: buddy cells refuse,
        // first fit does not.
        let t = topo(1, 4, 4, 0);
        let mut st = FabricState::new(t.clone());
        st.admit(&Decision {
            requested_gpus: None,
            sharing: None,
            job: JobId::new("mid").unwrap(),
            stage: Stage::Server,
            gpus: [1, 2]
                .map(|gpu| crate::decision::GpuRef {
                    server: t.servers[0].name.clone(),
                    gpu,
                })
                .to_vec(),
            vclos: Default::default(),
            source_routes: vec![],
        })
        .unwrap();
        let two = JobRequest::new(JobId::new("z").unwrap(), 2);
        let mut q = PackingPlacer::with_state(st.clone(), Packing::Buddy);
        assert_eq!(q.place(&two).unwrap(), Outcome::Blocked(Blocked::Gpu));
        let mut r = PackingPlacer::with_state(st, Packing::Tiresias);
        let mut anywhere_two = two.clone();
        anywhere_two.model = Some("resnet50".into());
        assert!(matches!(
            r.place(&anywhere_two).unwrap(),
            Outcome::Placed(_)
        ));
    }

    #[test]
    fn tiresias_consolidates_vgg_and_places_resnet_anywhere() {
        assert!(consolidates(Some("vgg16")) && consolidates(Some("AlexNet")));
        assert!(consolidates(None));
        assert!(!consolidates(Some("resnet50")));
        // 2 leaves x 4 servers x 2 GPUs (8 spines).
        let t = topo(2, 8, 2, 0);
        let first = t.servers[0].name.to_string();
        let fresh = || {
            let mut p = PackingPlacer::new(t.clone(), Packing::Tiresias);
            // One GPU of the first server held: a fragment.
            place(&mut p, "a", 1, Some("resnet50"));
            p
        };
        // Not sensitive: the first free GPUs, the fragment included.
        let r = place(&mut fresh(), "r", 3, Some("resnet50"));
        assert!(servers(&r).contains(&first), "{r:?}");
        assert_eq!(servers(&r).len(), 2, "{r:?}");
        // Sensitive: the fewest servers, whole free ones first.
        let v = place(&mut fresh(), "v", 3, Some("vgg16"));
        assert!(!servers(&v).contains(&first), "{v:?}");
        assert_eq!(servers(&v).len(), 2, "{v:?}");
        // A consolidated job stays under one leaf when one holds it.
        let mut p = fresh();
        let w = place(&mut p, "w", 6, Some("vgg19"));
        let leaves: std::collections::BTreeSet<_> = w
            .gpus
            .iter()
            .map(|g| t.server(t.server_id(&g.server).unwrap()).leaf)
            .collect();
        assert_eq!(leaves.len(), 1, "{w:?}");
    }

    #[test]
    fn both_hold_exactly_the_gpus_asked_and_release_them() {
        for rule in [Packing::Buddy, Packing::Tiresias] {
            let t = topo(4, 8, 4, 0);
            let mut p = PackingPlacer::new(t.clone(), rule);
            let mut rng = crate::placement::Rng(9);
            let mut live = Vec::new();
            for i in 0..300 {
                if !live.is_empty() && rng.below(3) == 0 {
                    let j: JobId = live.swap_remove(rng.below(live.len() as u64) as usize);
                    p.release(&j).unwrap();
                    continue;
                }
                let n = 1 + rng.below(12) as u32;
                let model = ["vgg16", "resnet50"][rng.below(2) as usize];
                let mut job = JobRequest::new(JobId::new(format!("j{i}")).unwrap(), n);
                job.model = Some(model.to_string());
                if let Outcome::Placed(d) = p.place(&job).unwrap() {
                    assert_eq!(d.gpus.len(), n as usize);
                    live.push(job.id);
                }
            }
            for j in live {
                p.release(&j).unwrap();
            }
            let idle: u32 = (0..4).map(|l| p.state.idle_servers(LeafId(l))).sum();
            assert_eq!(idle as usize, t.servers.len(), "{rule:?}");
        }
    }
}
