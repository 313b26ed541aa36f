//! Rearrangement on states reached by random arrivals and departures.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;

use super::super::{placer, Blocked, JobRequest, Outcome, Placer, Policy, Rng};
use super::Moves;
use crate::decision::Decision;
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::generate::uniform_topology;

fn req(id: &str, gpus: u32) -> JobRequest {
    JobRequest::new(JobId::new(id).unwrap(), gpus)
}

fn held(p: &dyn Placer) -> Vec<Decision> {
    (p.fabric().unwrap().decisions().into_iter().cloned()).collect()
}

/// Every port a decision's links hold, by device and port name.
fn link_ports(d: &Decision) -> HashSet<(String, String)> {
    (d.vclos.links.iter())
        .flat_map(|l| l.ends())
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn sorted_gpus(d: &Decision) -> Vec<(String, u16)> {
    let mut g: Vec<_> = d
        .gpus
        .iter()
        .map(|g| (g.server.to_string(), g.gpu))
        .collect();
    g.sort();
    g
}

/// Random arrivals (sizes that need slices) and departures; at every
/// network block, `check` sees the placer before and after
/// `rearrange(job, tries)` and its answer. Returns the moves made.
fn walk(
    policy: Policy,
    ocs: u32,
    seed: u64,
    (tries, order): (usize, Moves),
    mut check: impl FnMut(&[Decision], &dyn Placer, &JobRequest, &Option<super::Rearranged>),
) -> usize {
    let topo = uniform_topology(8, 8, 2, ocs);
    let mut p = placer(policy, topo).unwrap();
    let mut rng = Rng(seed);
    let (mut running, mut moves) = (Vec::new(), 0);
    for step in 0..3000 {
        if !running.is_empty() && rng.below(4) == 0 {
            let j: JobId = running.swap_remove(rng.below(running.len() as u64) as usize);
            p.release(&j).unwrap();
            continue;
        }
        let job = req(
            &format!("w{step}"),
            [4, 6, 8, 10, 12, 14][rng.below(6) as usize],
        );
        match p.place(&job).unwrap() {
            Outcome::Placed(_) => running.push(job.id),
            Outcome::Blocked(Blocked::Gpu) => {}
            Outcome::Blocked(Blocked::Network) => {
                let before = held(&*p);
                let r = p.rearrange(&job, tries, order).unwrap();
                check(&before, &*p, &job, &r);
                if let Some(r) = r {
                    moves += r.moves.len();
                    running.push(job.id);
                }
            }
        }
    }
    moves
}

#[test]
fn a_move_keeps_the_moved_jobs_gpus_and_every_other_job_and_isolation() {
    for order in [Moves::BreakBeforeMake, Moves::MakeBeforeBreak] {
        let mut total = 0;
        for (policy, ocs, seed) in [
            (Policy::Vclos, 0, 3),
            (Policy::Vclos, 0, 5),
            (Policy::OcsVclos, 2, 7),
            (Policy::OcsVclos, 2, 9),
        ] {
            let moves = walk(policy, ocs, seed, (4, order), |before, p, job, r| {
                check_move(policy, order, before, p, job, r)
            });
            if order == Moves::BreakBeforeMake {
                assert!(
                    moves >= 5,
                    "{order} {policy} seed {seed}: only {moves} moves"
                );
            }
            total += moves;
        }
        // Disjoint new slices are rarer (none here with OCS-vClos).
        assert!(total >= 5, "{order}: only {total} moves");
    }
}

/// What every rearrangement must keep (the test above).
fn check_move(
    policy: Policy,
    order: Moves,
    before: &[Decision],
    p: &dyn Placer,
    job: &JobRequest,
    r: &Option<super::Rearranged>,
) {
    let after = held(p);
    let st = p.fabric().unwrap();
    let Some(r) = r else {
        assert_eq!(
            after, before,
            "{policy}: a failed rearrangement changed the state"
        );
        return;
    };
    assert_eq!(st.decision(&job.id), Some(&*r.placed));
    let moved: Vec<&JobId> = r.moves.iter().map(|m| &m.job).collect();
    for m in &r.moves {
        assert_eq!(
            sorted_gpus(&m.from),
            sorted_gpus(&m.to),
            "{policy}: GPUs moved"
        );
        assert!(m.from.vclos != m.to.vclos || m.from.source_routes != m.to.source_routes);
        if order == Moves::MakeBeforeBreak {
            // The new links share no port with the old.
            let old = link_ports(&m.from);
            assert!(!old.is_empty());
            assert!(
                old.is_disjoint(&link_ports(&m.to)),
                "{policy}: ports reused"
            );
        }
        assert!(before.iter().any(|d| *d == *m.from));
        assert_eq!(st.decision(&m.job), Some(&*m.to));
    }
    for d in before.iter().filter(|d| !moved.contains(&&d.job)) {
        assert_eq!(
            st.decision(&d.job),
            Some(d),
            "{policy}: an unmoved job changed"
        );
    }
    assert_eq!(after.len(), before.len() + 1);
    // Nothing held twice: the whole state rebuilds from its decisions.
    let again = FabricState::from_decisions(Arc::clone(st.topology()), &after).unwrap();
    assert!(again.no_shared_links());
}

#[test]
fn no_tries_and_policies_without_rearrangement_change_nothing() {
    let moves = walk(
        Policy::OcsVclos,
        2,
        7,
        (0, Moves::BreakBeforeMake),
        |before, p, _, r| {
            assert!(r.is_none());
            assert_eq!(held(p), before);
        },
    );
    assert_eq!(moves, 0);
    let mut best = placer(Policy::Best, uniform_topology(2, 2, 2, 0)).unwrap();
    let none = best.rearrange(&req("j", 2), 4, Moves::BreakBeforeMake);
    assert_eq!(none.unwrap(), None);
}
