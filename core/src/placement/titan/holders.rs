//! Who holds each link, for titan's time-shared links (the parent
//! module's doc, "Time-shared links"): per directed link the jobs routed
//! over it, by admission number, and what scoring needs of each.

use std::collections::HashMap;

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
    pub(super) on_link: Vec<Vec<u64>>,
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
    pub(super) fn on(&self) -> bool {
        !self.on_link.is_empty()
    }

    /// `job`, held on `class`'s links with its decision in `st`.
    pub(super) fn admit(&mut self, st: &FabricState, job: &JobId, class: &Class) {
        let n = self.next;
        self.next += 1;
        for &(l, _) in &class.peaks {
            self.on_link[l].push(n);
        }
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
        for &(l, _) in &class.peaks {
            self.on_link[l].retain(|&j| j != n);
        }
        self.jobs.remove(&n);
    }
}
