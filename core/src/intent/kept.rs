//! Intents kept between the changes of a fabric under management, each
//! change rebuilding only the devices it touches.
//!
//! `job submit` and `job release` (and every `vclos serve` change) need the
//! intent of the state before and after the change, several times over
//! (plan, apply's check, the change set). [`super::build_on`] derives the
//! whole fabric from every held decision; on an 8192-GPU fabric with 400
//! jobs that, the sets' copies and comparing every device's set was most
//! of a change's 36 ms (docs/performance.md, "One change against a large
//! fabric"). A change admits or releases one decision, and a device's
//! item set, and every check on it, depends only on the baseline and the
//! decisions with items, cross-connects or OCS hops on it
//! (`super::build::device_sets`). So [`Kept::intent`]:
//!
//! 1. returns an intent it built for exactly these decisions;
//! 2. else, when a kept intent's decisions differ from these by one
//!    decision admitted or released, copies it (the devices are shared
//!    `Arc`s) and rebuilds only the devices that decision touches, from
//!    the baseline and every held decision on them;
//! 3. else builds the whole fabric.
//!
//! Decisions are resolved once per job and kept while the job is held
//! (resolving is a pure function of the topology and the decision; a kept
//! resolution is used only for an equal decision). Devices a change does
//! not touch are the same allocation in both intents, so a plan's
//! comparison of them is a pointer compare. What it builds equals
//! [`super::build_on`] on any sequence of admissions and releases
//! (`kept_intents_equal_whole_builds`), errors included for the devices
//! the change touches; the devices it does not touch cannot newly fail, as
//! their items and the decisions on them did not change.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::build::{assemble, device_intent, device_sets, resolve, unique_by_job, Base, Resolved};
use super::{FabricIntent, IntentError};
use crate::decision::Decision;
use crate::names::JobId;
use crate::topology::{DeviceId, Topology};

/// How many intents [`Kept`] keeps: the current state's and the next one's.
const KEPT: usize = 2;

/// Intents kept for one topology (module doc).
#[derive(Debug)]
pub struct Kept {
    base: Base,
    /// Each held job's decision, resolved.
    resolved: HashMap<JobId, (Decision, Arc<Resolved>)>,
    /// The last intents built, newest first, with their decisions.
    last: Vec<(Vec<Decision>, Arc<FabricIntent>)>,
}

impl Kept {
    /// `base` must be [`Base::new`] of the topology later calls pass.
    pub fn new(base: Base) -> Self {
        Kept {
            base,
            resolved: HashMap::new(),
            last: Vec::new(),
        }
    }

    /// The baseline the intents are built on.
    pub fn base(&self) -> &Base {
        &self.base
    }

    /// The intent of `held` on `topo` (module doc).
    pub fn intent(
        &mut self,
        topo: &Topology,
        held: &[Decision],
    ) -> Result<Arc<FabricIntent>, IntentError> {
        if let Some(at) = self.last.iter().position(|(d, _)| d.as_slice() == held) {
            let hit = self.last.remove(at);
            let i = Arc::clone(&hit.1);
            self.last.insert(0, hit);
            return Ok(i);
        }
        let sorted = unique_by_job(held)?;
        let jobs = self.resolve_all(topo, &sorted)?;
        let from = (self.last.iter())
            .find_map(|(d, i)| Some((one_change(d, held)?.clone(), Arc::clone(i))));
        let built = match from {
            Some((changed, prev)) => {
                let touched = self.resolution(topo, &changed)?.devices(topo);
                rebuild(&self.base, topo, &prev, &jobs, &touched)?
            }
            None => whole(&self.base, topo, &jobs)?,
        };
        let built = Arc::new(built);
        self.last.insert(0, (held.to_vec(), Arc::clone(&built)));
        self.last.truncate(KEPT);
        self.forget_released();
        Ok(built)
    }

    /// The kept resolution of `d`, resolving it when there is none for
    /// this very decision.
    fn resolution(&mut self, topo: &Topology, d: &Decision) -> Result<Arc<Resolved>, IntentError> {
        if let Some((kept, r)) = self.resolved.get(&d.job) {
            if kept == d {
                return Ok(Arc::clone(r));
            }
        }
        let r = Arc::new(resolve(topo, d)?);
        self.resolved
            .insert(d.job.clone(), (d.clone(), Arc::clone(&r)));
        Ok(r)
    }

    /// Every decision of `sorted`, resolved, in that order.
    fn resolve_all(
        &mut self,
        topo: &Topology,
        sorted: &[&Decision],
    ) -> Result<Vec<(JobId, Arc<Resolved>)>, IntentError> {
        (sorted.iter())
            .map(|d| Ok((d.job.clone(), self.resolution(topo, d)?)))
            .collect()
    }

    /// Drop the resolutions of jobs no kept intent holds.
    fn forget_released(&mut self) {
        let held: BTreeSet<&JobId> = (self.last.iter())
            .flat_map(|(d, _)| d.iter().map(|d| &d.job))
            .collect();
        self.resolved.retain(|job, _| held.contains(job));
    }
}

/// The one decision admitted or released between `old` and `new`, if
/// that is all that differs.
fn one_change<'a>(old: &'a [Decision], new: &'a [Decision]) -> Option<&'a Decision> {
    let (small, large) = match new.len().checked_sub(old.len()) {
        Some(1) => (old, new),
        None if old.len() == new.len() + 1 => (new, old),
        _ => return None,
    };
    let by_job: HashMap<&JobId, &Decision> = small.iter().map(|d| (&d.job, d)).collect();
    let mut extra = None;
    for d in large {
        match by_job.get(&d.job) {
            Some(&k) if k == d => {}
            Some(_) => return None, // the same job with another decision
            None if extra.is_none() => extra = Some(d),
            None => return None,
        }
    }
    extra
}

fn refs(jobs: &[(JobId, Arc<Resolved>)]) -> Vec<(&JobId, &Resolved)> {
    jobs.iter().map(|(j, r)| (j, &**r)).collect()
}

fn whole(
    base: &Base,
    topo: &Topology,
    jobs: &[(JobId, Arc<Resolved>)],
) -> Result<FabricIntent, IntentError> {
    Ok(assemble(topo, device_sets(base, topo, &refs(jobs), None)?))
}

/// `prev` with the devices in `touched` rebuilt from every held job on
/// them.
fn rebuild(
    base: &Base,
    topo: &Topology,
    prev: &FabricIntent,
    jobs: &[(JobId, Arc<Resolved>)],
    touched: &BTreeSet<DeviceId>,
) -> Result<FabricIntent, IntentError> {
    let on: Vec<(&JobId, &Resolved)> = (jobs.iter())
        .filter(|(_, r)| !r.devices(topo).is_disjoint(touched))
        .map(|(j, r)| (j, &**r))
        .collect();
    let sets = device_sets(base, topo, &on, Some(touched))?;
    let mut devices = prev.devices.clone();
    for (i, items) in sets.into_iter().enumerate() {
        if let Some(items) = items {
            devices[i] = Arc::new(device_intent(&topo.devices[i], items));
        }
    }
    Ok(FabricIntent { devices })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::placement::{self, JobRequest, Outcome, Policy, Rng};
    use crate::topology::generate;

    /// The decisions `p` holds, in admission order.
    fn held_by(p: &dyn placement::Placer) -> Vec<Decision> {
        let state = p.fabric().unwrap();
        state.decisions().into_iter().cloned().collect()
    }

    /// Admit and release jobs at random on an OCS fabric (OCS-vClos
    /// rewires, so cross-connects and static patches come and go) and on
    /// a plain one; after every change the kept intent equals the whole
    /// build, device by device, and untouched devices stay shared.
    #[test]
    fn kept_intents_equal_whole_builds() {
        for (ocs, policy) in [(2, Policy::OcsVclos), (0, Policy::Vclos)] {
            let topo = generate::uniform_topology(8, 8, 4, ocs);
            let mut p = placement::placer(policy, Arc::clone(&topo)).unwrap();
            let mut kept = Kept::new(Base::new(&topo).unwrap());
            let mut rng = Rng(7);
            let mut held: Vec<JobId> = Vec::new();
            let (mut shared, mut rebuilt, mut rewired) = (0, 0, 0);
            let mut prev = kept.intent(&topo, &[]).unwrap();
            for step in 0..300 {
                if held.is_empty() || rng.below(3) > 0 {
                    let id = JobId::new(format!("j{step}")).unwrap();
                    let gpus = [1, 4, 8, 12, 16][rng.below(5) as usize];
                    if let Outcome::Placed(_) = p.place(&JobRequest::new(id.clone(), gpus)).unwrap()
                    {
                        held.push(id);
                    }
                } else {
                    let id = held.remove(rng.below(held.len() as u64) as usize);
                    p.release(&id).unwrap();
                }
                let now = held_by(&*p);
                rewired += now
                    .iter()
                    .filter(|d| !d.vclos.cross_connects.is_empty())
                    .count();
                let got = kept.intent(&topo, &now).unwrap();
                let want = super::super::build(&topo, &now).unwrap();
                assert_eq!(*got, want, "step {step}, {} jobs held", now.len());
                for (a, b) in prev.devices.iter().zip(&got.devices) {
                    if Arc::ptr_eq(a, b) {
                        shared += 1;
                    } else {
                        rebuilt += 1;
                    }
                }
                prev = got;
            }
            assert!(shared > rebuilt, "{shared} shared, {rebuilt} rebuilt");
            assert!(rebuilt > 0);
            assert_eq!(
                rewired > 0,
                ocs > 0,
                "cross-connects held over the run: {rewired}"
            );
        }
    }

    /// A decision that takes a held job's ports again is refused by the
    /// kept build with the whole build's error, and the refusal is not
    /// kept: the next call builds from the last good intent.
    #[test]
    fn kept_intents_refuse_what_whole_builds_refuse() {
        let topo = generate::uniform_topology(8, 8, 4, 2);
        let mut p = placement::placer(Policy::OcsVclos, Arc::clone(&topo)).unwrap();
        let mut kept = Kept::new(Base::new(&topo).unwrap());
        for (i, gpus) in [12, 16, 4, 12].into_iter().enumerate() {
            let id = JobId::new(format!("j{i}")).unwrap();
            assert!(matches!(
                p.place(&JobRequest::new(id, gpus)).unwrap(),
                Outcome::Placed(_)
            ));
        }
        let held = held_by(&*p);
        kept.intent(&topo, &held).unwrap();
        let mut refused = 0;
        for d in &held {
            let mut again = d.clone();
            again.job = JobId::new(format!("{}-again", d.job)).unwrap();
            let mut both = held.clone();
            both.push(again);
            // A job inside one leaf has no item a second copy would clash on.
            let Err(want) = super::super::build(&topo, &both) else {
                assert!(kept.intent(&topo, &both).is_ok());
                continue;
            };
            assert!(matches!(want, IntentError::Conflict { .. }), "{want}");
            assert_eq!(kept.intent(&topo, &both).err(), Some(want));
            refused += 1;
        }
        assert!(refused >= 3, "{refused} copies refused");
        let good = kept.intent(&topo, &held[1..]).unwrap();
        assert_eq!(*good, super::super::build(&topo, &held[1..]).unwrap());
    }
}
