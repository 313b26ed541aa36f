//! Forecasts (issue 13): where a blocked job would be placed once some
//! running jobs have ended, for the replay's slice reservations
//! (`vclos replay --backfill slices`).
//!
//! **Why.** EASY backfilling (D. Lifka, "The ANL/IBM SP scheduling
//! system", JSSPP 1995; A. Mu'alem and D. Feitelson, IEEE TPDS 12(6),
//! 2001, Section 2) reserves the blocked head's *processors*: a job may
//! start behind it if it ends before the head's reserved time or uses only
//! processors the head leaves. On a vClos fabric the head mostly waits for
//! *spine ports* (docs/performance.md, "Where the gap to `best` comes
//! from": free ports scattered over many spines), which a GPU count does
//! not see, so jobs backfilled past the head's time scatter the ports
//! further and the head waits on. Slurm's backfill scheduler reserves the
//! head's future nodes (`sched/backfill`, "bf_window"); the analogue here
//! is the head's future *slice*: its GPUs, uplinks, spine and OCS ports.
//!
//! **How** (`forecast`), on a copy of the state, nothing changed: the
//! running jobs are released in the order given (the replay gives their
//! estimated ends, as EASY does), and after each of them, from the
//! `from`-th on (before it the GPUs alone fall short), the job is placed
//! with the placer's own stages, options and size memo
//! (`rearrange::place_on_view`; its search cutoffs are not
//! counted). The first placement found is the forecast: how many jobs had
//! to end, and the decision. It is the slice this placer would choose on
//! that future state, not a promise: the replay backfills only jobs that
//! end before it or are placed with it masked
//! ([`super::Placer::place_apart`]), starts the head on it when the
//! placer's own search on the real state misses it
//! ([`super::Placer::admit_reserved`]: a bounded OCS-vClos search may),
//! and counts heads that still start late (`late_heads`).

use std::sync::Arc;

use super::rearrange::{engine, place_on_view, Rearrange};
use super::{JobRequest, PlacementError};
use crate::decision::Decision;
use crate::names::JobId;
use crate::state::{Admission, Reservation};

/// A job's forecast placement ([`super::Placer::forecast`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Forecast {
    /// How many of the given running jobs must have ended (a prefix).
    pub ended: usize,
    /// Its decision on the state they leave.
    pub decision: Arc<Decision>,
    /// What the decision holds there, by index: the slice to keep other
    /// jobs off ([`crate::state::FabricState::mask`]).
    pub reservation: Reservation,
    /// The same, to start the job on it ([`super::Placer::admit_reserved`]).
    pub admission: Admission,
}

/// The module doc's search for `p`.
pub(crate) fn forecast<P: Rearrange>(
    p: &mut P,
    job: &JobRequest,
    ends: &[JobId],
    from: usize,
) -> Result<Option<Forecast>, PlacementError> {
    let policy = p.policy();
    let mut view = p.state_mut().clone();
    for (i, j) in ends.iter().enumerate() {
        view.release_shared(j).map_err(|e| engine(policy, e))?;
        if i + 1 < from {
            continue;
        }
        let (placed, v) = place_on_view(p, view, job)?;
        if let Some(decision) = placed {
            let admission = (v.held_admission(&decision.job))
                .ok_or_else(|| engine(policy, "a forecast decision is not held on its view"))?;
            let reservation = admission.reservation();
            return Ok(Some(Forecast {
                ended: i + 1,
                decision,
                reservation,
                admission,
            }));
        }
        view = v;
    }
    Ok(None)
}

/// [`super::Placer::admit_reserved`] for `p`: the reserved decision,
/// held as a whole if the state admits it now, checked by what it held on
/// the forecast's state ([`crate::state::FabricState::admit_held`]; a
/// refused admission changes nothing).
pub(crate) fn admit_reserved<P: Rearrange>(
    p: &mut P,
    reserved: &Forecast,
) -> Result<Option<Arc<Decision>>, PlacementError> {
    let admitted = (p.state_mut()).admit_held(&reserved.decision, &reserved.admission);
    Ok(admitted.then(|| Arc::clone(&reserved.decision)))
}

#[cfg(test)]
mod tests;
