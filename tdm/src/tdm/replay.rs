//! A planned round replayed on the network model (issue 19 item 5).
//!
//! The planner times a stage by Eq. 2, link by link: t_comm = max(D_ij /
//! (B L_ij), D_i / B_tor), as if each link's traffic could use it alone. The
//! replay plays the stage's collectives on the replay's fluid model
//! instead (`crate::network::fairshare`, issue 14): each communicating job
//! is one lock-step class (a collective advances as fast as its slowest
//! flow) over the links it uses, the directed circuit bundles of the stage
//! (capacity L_ij x B; in full duplex each direction of a pair gets its
//! circuits' full rate) and its pods' ToR planes (capacity B_tor); rates are
//! max-min fair, recomputed whenever a job finishes. A job alone on its
//! links finishes exactly at Eq. 2's time; jobs sharing a link can only
//! take longer, so the replayed stage is never shorter than the planned
//! one. The stage still ends at its barrier: max(last collective, training
//! of the computing group) (Eq. 3), and the round adds the same
//! reconfigurations.

use super::circuits::Alloc;
use super::grouping::{Ctx, Evaluation, StagePlan};
use super::traffic;
use crate::network::fairshare::{self, Class};

/// The replayed round of `plan` (seconds), and each stage's replayed
/// communication time.
pub fn round(ctx: &Ctx, plan: &Evaluation) -> (f64, Vec<f64>) {
    let comm: Vec<f64> = plan.stages.iter().map(|st| stage_comm(ctx, st)).collect();
    let mut total = 0.0;
    for (st, c) in plan.stages.iter().zip(&comm) {
        let train = (0..ctx.jobs.len())
            .filter(|n| !st.comm.contains(n))
            .map(|n| ctx.jobs[n].train_s)
            .fold(0.0, f64::max);
        total += c.max(train);
    }
    let reconf = plan.reconfigurations as f64 * ctx.switch_s;
    (total + reconf, comm)
}

/// The resources of a stage: directed circuit bundles, then ToR planes.
fn capacities(ctx: &Ctx, alloc: &Alloc, pods: usize) -> Vec<f64> {
    let mut cap = vec![0.0; pods * pods + pods];
    for l in &alloc.links {
        let c = l.circuits.len() as f64 * ctx.gbps;
        cap[l.a * pods + l.b] += c;
        if ctx.variant == super::schedule::Variant::BiStage {
            cap[l.b * pods + l.a] += c;
        }
    }
    for (i, b) in ctx.b_tor.iter().enumerate() {
        cap[pods * pods + i] = *b;
    }
    // No job crosses a pair without circuits (Algorithm 2 gives every
    // demand one); the fluid model wants every capacity positive.
    for c in &mut cap {
        if *c <= 0.0 {
            *c = 1.0;
        }
    }
    cap
}

/// When the last collective of `st` ends, on the fluid model.
fn stage_comm(ctx: &Ctx, st: &StagePlan) -> f64 {
    let Some(alloc) = &st.alloc else {
        return 0.0;
    };
    let pods = ctx.ports.pods();
    let cap = capacities(ctx, alloc, pods);
    // Per job: its demand on each resource (Gbit) and its isolated time.
    let mut jobs: Vec<(Vec<(usize, f64)>, f64)> = Vec::new();
    for &n in &st.comm {
        let job = &ctx.jobs[n];
        let mut d = vec![0.0; cap.len()];
        st.pair_edges(ctx, n, |i, j, g| d[i * pods + j] += g);
        for &(i, g) in &job.gpus {
            d[pods * pods + i] += traffic::tor_demand(job, ctx.variant, g);
        }
        let used: Vec<(usize, f64)> = d
            .iter()
            .copied()
            .enumerate()
            .filter(|x| x.1 > 0.0)
            .collect();
        let iso = used.iter().map(|&(l, g)| g / cap[l]).fold(0.0, f64::max);
        if iso > 0.0 && iso.is_finite() {
            jobs.push((used, iso));
        }
    }
    // Remaining fraction of each job's collective; progressive events.
    let mut left: Vec<f64> = vec![1.0; jobs.len()];
    let mut now = 0.0;
    while left.iter().any(|&r| r > 0.0) {
        let live: Vec<usize> = (0..jobs.len()).filter(|&k| left[k] > 0.0).collect();
        let classes: Vec<Class> = live
            .iter()
            .map(|&k| Class::new(jobs[k].0.iter().map(|&(l, g)| (l, g / jobs[k].1)).collect()))
            .collect();
        let lambda = fairshare::solve(&cap, &classes);
        let dt = live
            .iter()
            .zip(&lambda)
            .map(|(&k, &x)| left[k] * jobs[k].1 / x)
            .fold(f64::INFINITY, f64::min);
        now += dt;
        for (&k, &x) in live.iter().zip(&lambda) {
            left[k] -= dt * x / jobs[k].1;
            if left[k] <= 1e-9 {
                left[k] = 0.0;
            }
        }
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tdm::circuits::GroupPorts;
    use crate::tdm::grouping;
    use crate::tdm::job::JobKind;
    use crate::tdm::schedule::Variant;
    use crate::tdm::traffic::GroupJob;

    fn job(name: &str, kind: JobKind, gpus: Vec<(usize, u32)>) -> GroupJob {
        GroupJob {
            name: name.into(),
            kind,
            f_gbit: 100.0,
            unit: 1,
            train_s: 0.5,
            gpus,
            ps: 0,
        }
    }

    #[test]
    fn alone_a_job_replays_at_eq_2_and_sharing_only_slows() {
        let ports = GroupPorts {
            ports: (0..4u16)
                .map(|p| vec![(p * 8..p * 8 + 8).collect()])
                .collect(),
        };
        let b_tor = [1e4; 4];
        let one = [job("a", JobKind::A2a, vec![(0, 2), (1, 2), (2, 2)])];
        let two = [
            one[0].clone(),
            job("b", JobKind::Ps, vec![(0, 1), (1, 4), (3, 2)]),
            job("c", JobKind::Rar, vec![(1, 1), (2, 1), (3, 1)]),
        ];
        for (jobs, alone) in [(&one[..], true), (&two[..], false)] {
            for variant in [Variant::Tdm, Variant::BiStage] {
                let ctx = Ctx {
                    jobs,
                    variant,
                    ports: &ports,
                    gbps: 100.0,
                    b_tor: &b_tor,
                    switch_s: 0.05,
                };
                let e = grouping::evaluate(&ctx, &vec![false; jobs.len()]).unwrap();
                let (replayed, comm) = round(&ctx, &e);
                for (st, c) in e.stages.iter().zip(&comm) {
                    let planned = st.alloc.as_ref().map_or(0.0, |a| a.t_comm);
                    assert!(*c >= planned * (1.0 - 1e-9), "{c} < {planned}");
                    if alone {
                        assert!(
                            (c - planned).abs() <= 1e-9 * planned.max(1.0),
                            "{c} vs {planned}"
                        );
                    }
                }
                assert!(replayed >= e.round_s * (1.0 - 1e-9));
                if alone {
                    assert!((replayed - e.round_s).abs() < 1e-9);
                }
            }
        }
    }
}
