//! Stage times and the grouping of jobs (issue 19 item 3; seed 003 Eq. 1-3,
//! Algorithm 1 and Section II-C; seed 004 Section II-D and Algorithm 1).
//!
//! The jobs of a pod group are split into groups A and B. A round is a cycle
//! of stages; in each, one group communicates while the other computes:
//!
//! * `tdm` (003 Section II-C, Fig. 5, Table II: stage index 2t + k + 1):
//!   four stages, (A push, B train), (B push, A train), (A pull, B train),
//!   (B pull, A train). PS jobs push in their group's first communication
//!   stage and pull in its second (aggregation falls in the stage between,
//!   its time neglected as 003 neglects RAR aggregation, Eq. 2); RAR and
//!   AllToAll jobs communicate in both, so a round is one PS iteration and
//!   two of the others ("the iterations for twice of RAR and AllToAll jobs
//!   also consist of four stages").
//! * `bi-stage` (004 Section II-D): two stages, (A communicates, B trains)
//!   and (B communicates, A trains).
//!
//! Stage time, Eq. 3: t_{k,t} = max(t_comm^{k,t}, t_train^n for every job n
//! not communicating), t_comm from Algorithm 2 (Eq. 2). Reconfiguration:
//! the OCS are switched at a barrier only when the next stage's
//! cross-connect map differs from the current one; a stage where nobody
//! communicates keeps the map it finds. Each switch costs `switch_s` and is
//! counted **once** in the round (003 both folds it into the communication
//! time, Section II-C, and adds epsilon in Algorithm 1 line 3-4; we take
//! Algorithm 1's reading: round = sum of stage times + epsilon).
//!
//! The **non-TDM baseline** is every job in one group (003 Algorithm 1 line
//! 1: A = J, B = empty): all communicate, then all train, on **one static
//! circuit map**, that of the push stage (Algorithm 2); the pull stage runs
//! on the same circuits, same rings, half-duplex circuits split between the
//! two directions ([`super::circuits::on_map`]), so the baseline never
//! reconfigures.
//!
//! **Hill climbing** (003 Algorithm 1, 004 Algorithm 1): start from the
//! baseline; the neighbours of a grouping move one job to the other group;
//! the best neighbour replaces the current grouping only if its round is
//! strictly shorter (line 5), reconfiguration included; neighbours whose
//! first circuits do not fit the ports are not solutions. Hence the round
//! returned is never above the baseline's.

use super::circuits::{self, Alloc, Duplex, GroupPorts, Shortage};
use super::schedule::Variant;
use super::traffic::{self, GroupJob, Phase, Rings};

/// What the planner needs of one pod group.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    pub jobs: &'a [GroupJob],
    pub variant: Variant,
    pub ports: &'a GroupPorts,
    /// B, Gbit/s per OCS port.
    pub gbps: f64,
    /// B_tor per pod, Gbit/s.
    pub b_tor: &'a [f64],
    /// One OCS reconfiguration, seconds.
    pub switch_s: f64,
}

/// One stage of an evaluated grouping.
#[derive(Debug, Clone, PartialEq)]
pub struct StagePlan {
    /// Jobs communicating (indices into `Ctx::jobs`).
    pub comm: Vec<usize>,
    pub phase: Phase,
    /// The circuits (None: nobody communicates; the map is kept).
    pub alloc: Option<Alloc>,
    pub rings: Rings,
    /// Eq. 3, seconds, reconfiguration excluded.
    pub time_s: f64,
}

/// A grouping's stages and round.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub stages: Vec<StagePlan>,
    /// Barriers where the OCS switch.
    pub reconfigurations: usize,
    /// Stage times plus reconfiguration, seconds.
    pub round_s: f64,
}

/// The hill climbing's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Per job: in group B.
    pub in_b: Vec<bool>,
    pub plan: Evaluation,
    pub baseline: Evaluation,
}

impl StagePlan {
    /// Eq. 4 for job `n` communicating in this stage, on its ring if RAR:
    /// `emit(i, j, gbit)` per pod-to-pod demand.
    pub fn pair_edges(&self, ctx: &Ctx, n: usize, emit: impl FnMut(usize, usize, f64)) {
        let ring = self
            .rings
            .iter()
            .find(|r| r.0 == n)
            .map_or(&[][..], |r| &r.1[..]);
        traffic::pair_edges(&ctx.jobs[n], self.phase, ctx.variant, ring, emit);
    }
}

impl Ctx<'_> {
    fn duplex(&self) -> Duplex {
        match self.variant {
            Variant::Tdm => Duplex::Half,
            Variant::BiStage => Duplex::Full,
        }
    }

    /// (communicating group, phase) of each stage.
    fn layout(&self) -> &'static [(bool, Phase)] {
        match self.variant {
            Variant::Tdm => &[
                (false, Phase::Push),
                (true, Phase::Push),
                (false, Phase::Pull),
                (true, Phase::Pull),
            ],
            Variant::BiStage => &[(false, Phase::Push), (true, Phase::Push)],
        }
    }
}

/// Evaluate the grouping `in_b` (Eq. 1-3, Algorithm 1 lines 2-4).
pub fn evaluate(ctx: &Ctx, in_b: &[bool]) -> Result<Evaluation, Shortage> {
    let one_group = in_b.windows(2).all(|w| w[0] == w[1]);
    let pods = ctx.ports.pods();
    let mut stages: Vec<StagePlan> = Vec::with_capacity(4);
    for &(group, phase) in ctx.layout() {
        let comm: Vec<usize> = (0..ctx.jobs.len()).filter(|&n| in_b[n] == group).collect();
        let train = (0..ctx.jobs.len())
            .filter(|&n| in_b[n] != group)
            .map(|n| ctx.jobs[n].train_s)
            .fold(0.0, f64::max);
        let mut plan = StagePlan {
            comm,
            phase,
            alloc: None,
            rings: Vec::new(),
            time_s: train,
        };
        if !plan.comm.is_empty() {
            // The baseline's pull stage: the push stage's circuits and rings.
            let push = stages.iter().find(|s| !s.comm.is_empty() && one_group);
            let given = push.map(|s| &s.rings);
            let (d, rings) =
                traffic::stage_demand(ctx.jobs, &plan.comm, pods, phase, ctx.variant, given);
            let fixed = push.and_then(|s| s.alloc.as_ref()).and_then(|a| {
                circuits::on_map(
                    &d,
                    ctx.duplex(),
                    &circuits::signature(a),
                    ctx.gbps,
                    ctx.b_tor,
                )
            });
            let alloc = match fixed {
                Some(a) => a,
                None => circuits::allocate(&d, ctx.duplex(), ctx.ports, ctx.gbps, ctx.b_tor)?,
            };
            plan.time_s = plan.time_s.max(alloc.t_comm);
            plan.rings = rings;
            plan.alloc = Some(alloc);
        }
        stages.push(plan);
    }
    let reconfigurations = switches(&stages);
    let round_s =
        stages.iter().map(|s| s.time_s).sum::<f64>() + reconfigurations as f64 * ctx.switch_s;
    Ok(Evaluation {
        stages,
        reconfigurations,
        round_s,
    })
}

/// The map in force during each stage: its own, or the one it finds.
pub fn maps_in_force(stages: &[StagePlan]) -> Vec<Option<usize>> {
    let n = stages.len();
    let own: Vec<bool> = stages.iter().map(|s| s.alloc.is_some()).collect();
    (0..n)
        .map(|k| (0..n).map(|back| (k + n - back) % n).find(|&j| own[j]))
        .collect()
}

/// Barriers (cyclic) where the map in force changes.
fn switches(stages: &[StagePlan]) -> usize {
    let force = maps_in_force(stages);
    let sig: Vec<Option<Vec<(usize, usize, u16)>>> = force
        .iter()
        .map(|f| {
            f.and_then(|j| stages[j].alloc.as_ref())
                .map(circuits::signature)
        })
        .collect();
    let n = sig.len();
    (0..n)
        .filter(|&k| n > 1 && sig[k] != sig[(k + 1) % n])
        .count()
}

/// 003 Algorithm 1: hill climbing from the baseline. `Err` if even the
/// baseline's first circuits exceed the ports.
pub fn hill_climb(ctx: &Ctx) -> Result<Outcome, Shortage> {
    let n = ctx.jobs.len();
    let mut in_b = vec![false; n];
    let baseline = evaluate(ctx, &in_b)?;
    let mut plan = baseline.clone();
    // Every accepted move shortens the round; the bound only guards
    // against floating-point surprises.
    for _ in 0..4 * n + 4 {
        let mut best: Option<(usize, Evaluation)> = None;
        for j in 0..n {
            in_b[j] = !in_b[j];
            if let Ok(e) = evaluate(ctx, &in_b) {
                if best.as_ref().is_none_or(|b| e.round_s < b.1.round_s) {
                    best = Some((j, e));
                }
            }
            in_b[j] = !in_b[j];
        }
        match best {
            Some((j, e)) if e.round_s < plan.round_s => {
                in_b[j] = !in_b[j];
                plan = e;
            }
            _ => break,
        }
    }
    Ok(Outcome {
        in_b,
        plan,
        baseline,
    })
}
