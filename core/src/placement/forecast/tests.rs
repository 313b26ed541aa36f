//! Forecasts on states reached by random arrivals and departures.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use super::super::forecast::Forecast;
use super::super::{
    placer, placer_on, Blocked, JobRequest, Outcome, Placer, Policy, Rng, SliceOptions,
};
use crate::decision::Decision;
use crate::names::JobId;
use crate::topology::generate::uniform_topology;

fn held(p: &dyn Placer) -> Vec<Decision> {
    (p.fabric().unwrap().decisions().into_iter().cloned()).collect()
}

/// Random arrivals (4-14 GPUs) and departures on `policy`'s placer, on an
/// 8-leaf fabric with `ocs` OCS devices: each job blocked (on the network,
/// or on GPUs half the time) is handed to `blocked` with the running jobs,
/// newest first (an arbitrary order of ends; the replay's is estimated
/// ends), the step and the generator. Returns the fabric.
fn walk(
    policy: Policy,
    ocs: u32,
    seed: u64,
    mut blocked: impl FnMut(&mut dyn Placer, &JobRequest, &[JobId], usize, &mut Rng),
) {
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
        let ends: Vec<JobId> = running.iter().rev().cloned().collect();
        blocked(p.as_mut(), &job, &ends, step, &mut rng);
    }
}

#[test]
fn a_forecast_is_the_first_prefix_of_ends_that_lets_the_job_in_and_changes_nothing() {
    let mut checked = 0;
    for (policy, ocs, seed) in [(Policy::Vclos, 0, 3), (Policy::OcsVclos, 2, 7)] {
        walk(policy, ocs, seed, |p, job, ends, _, rng| {
            let (before, cutoffs) = (held(&*p), p.search_cutoffs());
            let from = rng.below(3) as usize;
            let f = p.forecast(job, ends, from).unwrap();
            assert_eq!(held(&*p), before, "{policy}: a forecast changed the state");
            assert_eq!(p.search_cutoffs(), cutoffs);
            // Every job here fits the empty fabric.
            let f = f.unwrap_or_else(|| panic!("{policy}: no forecast with every job ended"));
            assert_eq!(f.decision.job, job.id);
            assert!(f.ended >= from.max(1) && f.ended <= ends.len());
            // Now it is not free (vClos's search is complete: the job was
            // blocked), so starting on it changes nothing.
            if policy == Policy::Vclos {
                assert_eq!(p.admit_reserved(&f).unwrap(), None);
                assert_eq!(held(&*p), before);
            }
            let after = |n: usize| {
                let mut st = p.fabric().unwrap().clone();
                for j in &ends[..n] {
                    st.release(j).unwrap();
                }
                st
            };
            // The decision admits on the state those ends leave...
            after(f.ended).admit(&f.decision).unwrap();
            // ...and a placer there starts the job on it as reserved.
            let mut q = placer_on(policy, after(f.ended), SliceOptions::default()).unwrap();
            let started = q.admit_reserved(&f).unwrap().unwrap();
            assert!(Arc::ptr_eq(&started, &f.decision));
            assert_eq!(q.fabric().unwrap().decision(&job.id), Some(&*f.decision));

            // ...and one end fewer (from `from` on) does not let it in.
            if f.ended > from.max(1) {
                let mut q = placer_on(policy, after(f.ended - 1), SliceOptions::default()).unwrap();
                assert!(
                    matches!(q.place(job).unwrap(), Outcome::Blocked(_)),
                    "{policy}: it fitted earlier"
                );
            }
            checked += 1;
        });
    }
    assert!(checked > 50, "only {checked} forecasts checked");
    // Policies without forecasts answer none.
    let mut best = placer(Policy::Best, uniform_topology(2, 2, 2, 0)).unwrap();
    let job = JobRequest::new(JobId::new("j").unwrap(), 2);
    assert_eq!(best.forecast(&job, &[], 0).unwrap(), None);
    let topo = uniform_topology(2, 2, 2, 0);
    let all = topo.gpu_count() as u32;
    let mut vclos = placer(Policy::Vclos, topo).unwrap();
    let held = JobRequest::new(JobId::new("h").unwrap(), all);
    let Outcome::Placed(_) = vclos.place(&held).unwrap() else {
        panic!("the whole fabric fits the empty fabric");
    };
    let f = vclos
        .forecast(&job, std::slice::from_ref(&held.id), 0)
        .unwrap()
        .unwrap();
    assert_eq!(best.admit_reserved(&f).unwrap(), None);
}

/// Starting a forecast job on its slice by what the slice held on the
/// forecast's state (typed: [`crate::state::FabricState::admit_held`])
/// admits exactly what the full check by name admits, on every state
/// tried: the one it was forecast on, those with fewer or more of the
/// ends, and the real state after jobs arrived and left.
#[test]
fn a_reserved_start_admits_exactly_what_the_named_check_admits() {
    let (mut admitted, mut refused) = (0, 0);
    for (policy, ocs, seed) in [
        (Policy::Vclos, 0, 3),
        (Policy::OcsVclos, 2, 7),
        (Policy::OcsVclos, 4, 9),
    ] {
        let mut kept: Vec<Forecast> = Vec::new();
        walk(policy, ocs, seed, |p, job, ends, _, _| {
            let mut states = vec![p.fabric().unwrap().clone()];
            for j in ends {
                let mut st = states.last().unwrap().clone();
                st.release(j).unwrap();
                states.push(st);
            }
            // Forecasts kept from earlier steps meet later states too.
            let f = p.forecast(job, ends, 0).unwrap();
            kept.extend(f);
            if kept.len() > 8 {
                kept.remove(0);
            }
            for st in &states {
                for f in kept
                    .iter()
                    .filter(|f| st.decision(&f.decision.job).is_none())
                {
                    let named = st.clone().admit(&f.decision).is_ok();
                    let mut typed = st.clone();
                    let started = typed.admit_held(&f.decision, &f.admission);
                    assert_eq!(started, named, "{policy}: {}", f.decision.job);
                    if started {
                        assert_eq!(typed.decision(&f.decision.job), Some(&*f.decision));
                        admitted += 1;
                    } else {
                        assert_eq!(typed.version(), st.version(), "a refusal changed the state");
                        refused += 1;
                    }
                }
            }
        });
    }
    assert!(
        admitted > 200 && refused > 200,
        "{admitted} admitted, {refused} refused"
    );
}

/// Every GPU and link port decision `d` names.
fn named(d: &Decision) -> std::collections::HashSet<(String, String)> {
    let gpus = d
        .gpus
        .iter()
        .map(|g| (g.server.to_string(), g.gpu.to_string()));
    let ends =
        (d.vclos.links.iter().flat_map(|l| l.ends())).map(|(a, b)| (a.to_string(), b.to_string()));
    gpus.chain(ends).collect()
}

#[test]
fn a_job_placed_apart_shares_nothing_with_the_reservation_and_leaves_no_mask() {
    let (mut apart, mut would_overlap) = (0, 0);
    for (policy, ocs, seed) in [(Policy::Vclos, 0, 5), (Policy::OcsVclos, 2, 11)] {
        walk(policy, ocs, seed, |p, job, ends, step, _| {
            let Some(f) = p.forecast(job, ends, 0).unwrap() else {
                return;
            };
            let reserved = named(&f.decision);
            let r = p.fabric().unwrap().reservation(&f.decision).unwrap();
            let small = JobRequest::new(JobId::new(format!("s{step}")).unwrap(), 4);
            let before = p.fabric().unwrap().clone();
            let topo = Arc::clone(before.topology());
            let plain = placer_on(policy, before.clone(), SliceOptions::default())
                .unwrap()
                .place(&small)
                .unwrap();
            match p.place_apart(&small, &r).unwrap() {
                Outcome::Placed(d) => {
                    let shared: Vec<_> = named(&d).intersection(&reserved).cloned().collect();
                    assert!(shared.is_empty(), "{policy}: {} took {shared:?}", d.job);
                    apart += 1;
                    if let Outcome::Placed(q) = plain {
                        would_overlap += usize::from(!named(&q).is_disjoint(&reserved));
                    }
                    p.release(&d.job).unwrap();
                }
                Outcome::Blocked(_) => {}
            }
            // Nothing stays masked: the state is as before the call.
            let after = p.fabric().unwrap();
            assert_eq!(
                held(&*p),
                (before.decisions().into_iter().cloned()).collect::<Vec<_>>()
            );
            for s in 0..topo.servers.len() as u32 {
                let s = crate::topology::ServerId(s);
                assert_eq!(after.free_gpus(s), before.free_gpus(s));
            }
            for l in 0..topo.leaves.len() as u32 {
                let l = crate::topology::LeafId(l);
                assert!(after.free_uplinks(l).eq(before.free_uplinks(l)));
            }
            for s in 0..topo.spines.len() as u32 {
                let s = crate::topology::SpineId(s);
                assert_eq!(after.free_spine_ports(s), before.free_spine_ports(s));
            }
        });
    }
    // The mask is what keeps them apart: placed as usual, many would not be.
    assert!(
        apart > 50 && would_overlap > 10,
        "{apart} apart, {would_overlap} would overlap"
    );
}
