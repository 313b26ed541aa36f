//! Who holds each link, for titan's time-shared links (the parent
//! module's doc, "Time-shared links"): per directed link the jobs routed
//! over it, by admission number, and what scoring needs of each.
//!
//! A candidate's lendable links are grouped by who holds them (one score
//! per group), for every candidate of every blocked job tried again after
//! each release, over thousands of links. So each distinct holder set is
//! kept once, by a small id (`Sets`), and a link names its set by id: the
//! grouping compares ids, not job lists. A set's id changes only when a
//! job on it is admitted or released, which looks the new set up once per
//! distinct old set of the job's links, not once per link.

use std::collections::HashMap;

use foldhash::fast::FixedState;

use super::busy_ms;
use crate::names::JobId;
use crate::network::fairshare::Class;
use crate::placement::shared;
use crate::state::FabricState;

/// In a sharing mode: the jobs holding each directed link, by admission
/// number (never reused, so a set of them names holders whose profiles and
/// shifts never change), and what scoring needs of each holder.
#[derive(Debug, Clone, Default)]
pub(super) struct Holders {
    /// Per link: its holder set's id in `sets` (0: none).
    on_link: Vec<u32>,
    sets: Sets,
    pub(super) jobs: HashMap<u64, Holder>,
    serial: HashMap<JobId, u64>,
    next: u64,
}

/// A held job as [`super::Scores`] sees it.
#[derive(Debug, Clone)]
pub(super) struct Holder {
    pub(super) job: JobId,
    /// Placed in a sharing mode (its decision has `sharing`): only such
    /// jobs are shared with.
    pub(super) opted: bool,
    /// With an on-off profile: its iteration and its busy milliseconds at
    /// its shift ([`super::busy_ms`]), computed once at admission.
    pub(super) busy: Option<(u32, Vec<u64>)>,
}

impl Holders {
    /// Holders of `links` directed links, none held yet.
    pub(super) fn new(links: usize) -> Self {
        Holders {
            on_link: vec![0; links],
            sets: Sets::default(),
            ..Holders::default()
        }
    }

    pub(super) fn on(&self) -> bool {
        !self.on_link.is_empty()
    }

    /// Link `k`'s holder set's id (0: none).
    pub(super) fn set_id(&self, k: usize) -> u32 {
        self.on_link[k]
    }

    /// Holder set `id`'s jobs, by admission number, in order.
    pub(super) fn set(&self, id: u32) -> &[u64] {
        self.sets.jobs(id)
    }

    /// More than the largest holder set id.
    pub(super) fn set_ids(&self) -> usize {
        self.sets.members.len()
    }

    /// `job`, held on `class`'s links with its decision in `st`.
    pub(super) fn admit(&mut self, st: &FabricState, job: &JobId, class: &Class) {
        let n = self.next;
        self.next += 1;
        let links = class.peaks.iter().map(|&(l, _)| l);
        // Admission numbers grow, so `n` goes last: sets stay in order.
        self.sets.change(&mut self.on_link, links, |set| {
            set.push(n);
        });
        let sharing = st.decision(job).and_then(|d| d.sharing.as_ref());
        let busy = sharing.and_then(|s| {
            let p = shared::profile_of(s)?;
            Some((p.iteration_ms(), busy_ms(&p, s.time_shift_ms)?))
        });
        let holder = Holder {
            job: job.clone(),
            opted: sharing.is_some(),
            busy,
        };
        self.jobs.insert(n, holder);
        self.serial.insert(job.clone(), n);
    }

    pub(super) fn release(&mut self, job: &JobId, class: &Class) {
        let Some(n) = self.serial.remove(job) else {
            return;
        };
        let links = class.peaks.iter().map(|&(l, _)| l);
        self.sets
            .change(&mut self.on_link, links, |set| set.retain(|&j| j != n));
        self.jobs.remove(&n);
    }
}

/// The distinct holder sets on links, each by an id (module doc): id 0 is
/// the empty set; an id whose last link left is reused.
#[derive(Debug, Clone, Default)]
struct Sets {
    id: HashMap<Vec<u64>, u32, FixedState>,
    /// By id: the set's admission numbers, and how many links hold it.
    members: Vec<Vec<u64>>,
    links: Vec<u32>,
    free: Vec<u32>,
}

impl Sets {
    fn jobs(&self, id: u32) -> &[u64] {
        self.members.get(id as usize).map_or(&[], |m| &m[..])
    }

    /// Each of `links` (distinct) moved from its set to that set changed
    /// by `edit`, computed once per distinct old set; ids left without a
    /// link are freed only at the end, so none is reused within a change.
    fn change(
        &mut self,
        on_link: &mut [u32],
        links: impl Iterator<Item = usize>,
        edit: impl Fn(&mut Vec<u64>),
    ) {
        let mut moved: HashMap<u32, u32, FixedState> = HashMap::default();
        for l in links {
            let Some(old) = on_link.get(l).copied() else {
                continue;
            };
            let new = match moved.get(&old) {
                Some(&new) => new,
                None => {
                    let mut set = self.jobs(old).to_vec();
                    edit(&mut set);
                    let new = self.intern(set);
                    moved.insert(old, new);
                    new
                }
            };
            on_link[l] = new;
            self.count(new, 1);
            self.count(old, -1);
        }
        for (old, _) in moved {
            if old != 0 && self.links[old as usize] == 0 {
                let set = std::mem::take(&mut self.members[old as usize]);
                self.id.remove(&set);
                self.free.push(old);
            }
        }
    }

    /// `set`'s id, made if new (the empty set is 0).
    fn intern(&mut self, set: Vec<u64>) -> u32 {
        if set.is_empty() {
            return 0;
        }
        if let Some(&id) = self.id.get(&set) {
            return id;
        }
        if self.members.is_empty() {
            self.members.push(Vec::new()); // id 0
            self.links.push(0);
        }
        let id = self.free.pop().unwrap_or_else(|| {
            self.members.push(Vec::new());
            self.links.push(0);
            (self.members.len() - 1) as u32
        });
        self.members[id as usize].clone_from(&set);
        self.id.insert(set, id);
        id
    }

    fn count(&mut self, id: u32, by: i32) {
        if id != 0 {
            let n = &mut self.links[id as usize];
            *n = n.wrapping_add_signed(by);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::placement::Rng;

    /// Random admissions and releases over 40 links, against a plain list
    /// of holders per link: each link's set is the list, two links share
    /// an id exactly when their sets are equal, and the ids kept are the
    /// distinct sets on links, no more (an emptied set's id is freed and
    /// reused).
    #[test]
    fn holder_set_ids_name_each_links_holders_and_only_live_sets() {
        const LINKS: usize = 40;
        let mut rng = Rng(0x5e75_0000_0000_0015);
        let (mut sets, mut on_link) = (Sets::default(), vec![0u32; LINKS]);
        let mut model: Vec<Vec<u64>> = vec![Vec::new(); LINKS];
        let mut held: Vec<(u64, Vec<usize>)> = Vec::new();
        let (mut next, mut reused, mut most) = (0u64, 0, 0);
        for _ in 0..3000 {
            if held.is_empty() || (held.len() < 12 && rng.below(2) == 0) {
                let links: Vec<usize> = (0..LINKS).filter(|_| rng.below(3) == 0).collect();
                let n = next;
                next += 1;
                let before = sets.members.len();
                sets.change(&mut on_link, links.iter().copied(), |s| s.push(n));
                reused += usize::from(sets.members.len() == before && !links.is_empty());
                links.iter().for_each(|&l| model[l].push(n));
                held.push((n, links));
            } else {
                let (n, links) = held.swap_remove(rng.below(held.len() as u64) as usize);
                sets.change(&mut on_link, links.iter().copied(), |s| {
                    s.retain(|&j| j != n)
                });
                links.iter().for_each(|&l| model[l].retain(|&j| j != n));
            }
            for a in 0..LINKS {
                assert_eq!(sets.jobs(on_link[a]), &model[a][..], "link {a}");
                assert_eq!(on_link[a] == 0, model[a].is_empty());
                for b in 0..a {
                    assert_eq!(on_link[a] == on_link[b], model[a] == model[b]);
                }
            }
            let mut live: Vec<&Vec<u64>> = model.iter().filter(|m| !m.is_empty()).collect();
            live.sort();
            live.dedup();
            assert_eq!(sets.id.len(), live.len());
            for id in 1..sets.members.len() as u32 {
                let on = on_link.iter().filter(|&&x| x == id).count() as u32;
                assert_eq!(sets.links[id as usize], on, "links on set {id}");
                assert_eq!(sets.jobs(id).is_empty(), on == 0);
            }
            most = most.max(live.len());
        }
        assert!(reused > 100 && most > 10, "reused {reused} most {most}");
    }
}
