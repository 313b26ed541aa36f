//! Forecasts on states reached by random arrivals and departures.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use super::super::{placer, placer_on, Blocked, JobRequest, Outcome, Policy, Rng, SliceOptions};
use crate::decision::Decision;
use crate::names::JobId;
use crate::topology::generate::uniform_topology;

fn held(p: &dyn super::super::Placer) -> Vec<Decision> {
    (p.fabric().unwrap().decisions().into_iter().cloned()).collect()
}

#[test]
fn a_forecast_is_the_first_prefix_of_ends_that_lets_the_job_in_and_changes_nothing() {
    let mut checked = 0;
    for (policy, ocs, seed) in [(Policy::Vclos, 0, 3), (Policy::OcsVclos, 2, 7)] {
        let topo = uniform_topology(8, 8, 2, ocs);
        let mut p = placer(policy, Arc::clone(&topo)).unwrap();
        let mut rng = Rng(seed);
        let mut running: Vec<JobId> = Vec::new();
        for step in 0..1500 {
            if !running.is_empty() && rng.below(4) == 0 {
                let j = running.swap_remove(rng.below(running.len() as u64) as usize);
                p.release(&j).unwrap();
                continue;
            }
            let gpus = [4, 6, 8, 10, 12, 14][rng.below(6) as usize];
            let job = JobRequest::new(JobId::new(format!("w{step}")).unwrap(), gpus);
            match p.place(&job).unwrap() {
                Outcome::Placed(_) => {
                    running.push(job.id);
                    continue;
                }
                Outcome::Blocked(Blocked::Gpu) if rng.below(2) == 0 => continue,
                Outcome::Blocked(_) => {}
            }
            // Ends in an arbitrary order (the replay's: estimated ends).
            let ends: Vec<JobId> = running.iter().rev().cloned().collect();
            let (before, cutoffs) = (held(&*p), p.search_cutoffs());
            let from = rng.below(3) as usize;
            let f = p.forecast(&job, &ends, from).unwrap();
            assert_eq!(held(&*p), before, "{policy}: a forecast changed the state");
            assert_eq!(p.search_cutoffs(), cutoffs);
            // Every job here fits the empty fabric.
            let f = f.unwrap_or_else(|| panic!("{policy}: no forecast with every job ended"));
            assert_eq!(f.decision.job, job.id);
            assert!(f.ended >= from.max(1) && f.ended <= ends.len());
            let after = |n: usize| {
                let mut st = p.fabric().unwrap().clone();
                for j in &ends[..n] {
                    st.release(j).unwrap();
                }
                st
            };
            // The decision admits on the state those ends leave...
            after(f.ended).admit(&f.decision).unwrap();
            // ...and one end fewer (from `from` on) does not let it in.
            if f.ended > from.max(1) {
                let mut q = placer_on(policy, after(f.ended - 1), SliceOptions::default()).unwrap();
                assert!(
                    matches!(q.place(&job).unwrap(), Outcome::Blocked(_)),
                    "{policy}: it fitted earlier"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} forecasts checked");
    // Policies without forecasts answer none.
    let mut best = placer(Policy::Best, uniform_topology(2, 2, 2, 0)).unwrap();
    let job = JobRequest::new(JobId::new("j").unwrap(), 2);
    assert_eq!(best.forecast(&job, &[], 0).unwrap(), None);
}
