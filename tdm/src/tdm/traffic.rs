//! Traffic of one stage (issue 19 item 3; seed 003 Eq. 2, 4, 5 and
//! Algorithm 2 lines 1-8; seed 004 Section II-B).
//!
//! In a stage, the jobs of the communicating group put demand on two
//! planes: between pods, through the OCS (`pair[i][j]`, 003's D_{i,j}), and
//! between each pod's ToR and its servers (`tor[i]`, 003's D_i), both in
//! Gbit. Units never span pods (job module doc), so inter-unit traffic FI is
//! 0 and a pod holds `G_i / U` master nodes.
//!
//! **003 (variant `tdm`, half duplex)**, Eq. 4 and 5, per job n with F = F_n,
//! U = U_n, G_i = G_{i,n}:
//!
//! * PS, push stage (t = 0): `pair[i][I] += G_i F` (= PN_i F U) for every
//!   pod i != I; pull stage (t = 1): `pair[I][i] +=` the same. `tor[i] +=
//!   G_i F`.
//! * RAR: `pair[a][b] += F U` for every link a -> b of its ring (Eq. 4 with
//!   Ring_{a,b} = 1, the ring from Algorithm 3); `tor[i] += 2 G_i F`.
//! * AllToAll: `pair[i][j] += AN_i AN_j F U` for i != j; `tor[i] += 2 G_i F
//!   (U - 1)`.
//!
//! **004 (variant `bi-stage`, full duplex, in-network aggregation at the
//! ToR)**: a ToR aggregates its pod's units, so a pod sends one copy of the
//! model: PS `pair[i][I] = pair[I][i] += F U` (push and pull at once, 004
//! Section II-B "symmetric traffic matrix"), RAR splits the gradients in two
//! rings of opposite directions, `pair[a][b] += F U / 2` and `pair[b][a] +=
//! F U / 2` per ring link; AllToAll as in 003. ToR plane, per direction:
//! PS and RAR `G_i F` (each GPU exchanges its share with the aggregating
//! ToR), AllToAll `G_i F (U - 1)`.
//!
//! Algorithm 2 lines 2-8: jobs other than RAR are added first; each RAR
//! job's ring is then formed (Algorithm 3) against the connection demand LB
//! (`pair > 0`) built so far, and added in turn.

use super::job::JobKind;
use super::ring::{self, Ring};
use super::schedule::Variant;

/// A job of one pod group, with pods as the group's local pod indices.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupJob {
    pub name: String,
    pub kind: JobKind,
    /// F_n, Gbit.
    pub f_gbit: f64,
    /// U_n.
    pub unit: u32,
    /// Eq. 8, seconds.
    pub train_s: f64,
    /// (local pod, GPUs), pods distinct.
    pub gpus: Vec<(usize, u32)>,
    /// I_n, the PS pod (local), for `ps` jobs.
    pub ps: usize,
}

/// 003's t: PS jobs push in the first communication stage of their group
/// and pull in the second (Section II-C, Fig. 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Push,
    Pull,
}

/// The demand of one stage, Gbit.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    pub pods: usize,
    /// `pair[i * pods + j]`: pod i to pod j through the OCS.
    pub pair: Vec<f64>,
    /// ToR to servers, per pod.
    pub tor: Vec<f64>,
}

impl Demand {
    pub fn new(pods: usize) -> Self {
        Demand {
            pods,
            pair: vec![0.0; pods * pods],
            tor: vec![0.0; pods],
        }
    }
    pub fn at(&self, i: usize, j: usize) -> f64 {
        self.pair[i * self.pods + j]
    }
}

/// Eq. 4 (and 004's symmetric version): call `emit(i, j, gbit)` for every
/// pod-to-pod demand of `job` in `phase`; `ring` is the job's ring (RAR).
pub fn pair_edges(
    job: &GroupJob,
    phase: Phase,
    variant: Variant,
    ring: &[usize],
    mut emit: impl FnMut(usize, usize, f64),
) {
    let fu = job.f_gbit * f64::from(job.unit);
    match (job.kind, variant) {
        (JobKind::Ps, Variant::Tdm) => {
            for &(i, g) in job.gpus.iter().filter(|p| p.0 != job.ps) {
                let d = f64::from(g) * job.f_gbit;
                match phase {
                    Phase::Push => emit(i, job.ps, d),
                    Phase::Pull => emit(job.ps, i, d),
                }
            }
        }
        (JobKind::Ps, Variant::BiStage) => {
            for &(i, _) in job.gpus.iter().filter(|p| p.0 != job.ps) {
                emit(i, job.ps, fu);
                emit(job.ps, i, fu);
            }
        }
        (JobKind::Rar, Variant::Tdm) => {
            for (a, b) in ring::ring_links(ring) {
                emit(a, b, fu);
            }
        }
        (JobKind::Rar, Variant::BiStage) => {
            for (a, b) in ring::ring_links(ring) {
                emit(a, b, fu / 2.0);
                emit(b, a, fu / 2.0);
            }
        }
        (JobKind::A2a, _) => {
            let u = f64::from(job.unit);
            for &(i, gi) in &job.gpus {
                for &(j, gj) in job.gpus.iter().filter(|p| p.0 != i) {
                    emit(i, j, f64::from(gi) / u * f64::from(gj) / u * fu);
                }
            }
        }
    }
}

/// Eq. 5 (and 004's ToR plane): the ToR-to-servers demand of `job` in pod
/// `i` holding `g` of its GPUs.
pub fn tor_demand(job: &GroupJob, variant: Variant, g: u32) -> f64 {
    let gf = f64::from(g) * job.f_gbit;
    let u1 = f64::from(job.unit) - 1.0;
    match (job.kind, variant) {
        (JobKind::Ps, _) | (JobKind::Rar, Variant::BiStage) => gf,
        (JobKind::Rar, Variant::Tdm) => 2.0 * gf,
        (JobKind::A2a, Variant::Tdm) => 2.0 * gf * u1,
        (JobKind::A2a, Variant::BiStage) => gf * u1,
    }
}

/// The rings a stage's RAR jobs use, by job index.
pub type Rings = Vec<(usize, Ring)>;

/// Algorithm 2 lines 1-8: the demand of the jobs `comm` in one stage, with
/// the rings of its RAR jobs formed by Algorithm 3 (or taken from `given`,
/// for a stage that reuses another's circuits).
pub fn stage_demand(
    jobs: &[GroupJob],
    comm: &[usize],
    pods: usize,
    phase: Phase,
    variant: Variant,
    given: Option<&Rings>,
) -> (Demand, Rings) {
    let mut d = Demand::new(pods);
    let mut rings = Rings::new();
    let (rar, other): (Vec<usize>, Vec<usize>) =
        comm.iter().partition(|&&n| jobs[n].kind == JobKind::Rar);
    for &n in other.iter().chain(&rar) {
        let job = &jobs[n];
        let ring = if job.kind != JobKind::Rar {
            Vec::new()
        } else if let Some(r) = given.and_then(|g| g.iter().find(|r| r.0 == n)) {
            r.1.clone()
        } else {
            let nodes: Vec<usize> = job.gpus.iter().map(|p| p.0).collect();
            let lb = |a: usize, b: usize| d.at(a, b) > 0.0;
            match variant {
                Variant::Tdm => ring::form_directed(&nodes, lb),
                Variant::BiStage => ring::form_undirected(&nodes, lb),
            }
        };
        pair_edges(job, phase, variant, &ring, |i, j, g| {
            d.pair[i * pods + j] += g;
        });
        for &(i, g) in &job.gpus {
            d.tor[i] += tor_demand(job, variant, g);
        }
        if job.kind == JobKind::Rar {
            rings.push((n, ring));
        }
    }
    (d, rings)
}
