//! Rearrangement (issue 13, item 3): when a job is blocked on the network
//! alone, move the links of one running job so that both fit.
//!
//! **Why.** On fabrics where every GPU has its own uplink a slice of
//! `l x s` takes as many spine ports as it has GPUs, so free spine ports
//! always outnumber the idle servers' GPUs; what blocks a job is *where*
//! they are. An `l x s` slice needs `s` spines with `l` free ports each
//! reachable from its leaves (paper Section 6.2, Eq. 6; with an OCS layer,
//! Section 7 and Appendix A.3), and earlier slices scatter the free ports
//! over many spines. With every spine's ports pooled into one, the
//! counting bound of [`super::bound`] places exactly what `best` places
//! (docs/performance.md, "Moving a running job's links when the head
//! blocks"): the whole gap to an ideal fabric on the hard traces of issue
//! 13 is scattered spine ports, which no search can gather and moving a
//! running slice can. This is the remedy of rearrangeably (as opposed to
//! strictly) non-blocking Clos networks: a three-stage network with as
//! many middle switches as inputs per edge switch carries every
//! connection pattern if existing connections may be moved (the
//! Slepian-Duguid theorem; V. E. Beneš, "On rearrangeable three-stage
//! connecting networks", Bell System Technical Journal 41(5), 1962),
//! where a strictly non-blocking one needs about twice as many (C. Clos,
//! "A study of non-blocking switching networks", BSTJ 32(2), 1953).
//!
//! **How**, per try, on a copy of the state (nothing changes until a try
//! succeeds, and then all at once). Candidates are running jobs whose
//! decision holds links (a slice over several leaves) and does not share
//! them (`--sharing`), fewest GPUs first, then the oldest; at most `tries`
//! of them, one per try. In either order ([`Moves`]) the moved job is
//! placed again on exactly its GPUs with the same policy
//! ([`given::place_exactly`]: the policy's stages on a view where only they
//! are free; never in a sharing mode), the blocked job with the placer's
//! own stages, options and size memo (its search cutoffs are not counted:
//! the blocked call has already counted its own), and every decision is
//! admitted and checked by [`FabricState::admit`] like any other.
//! - [`Moves::MakeBeforeBreak`]: the moved job's new slice is placed while
//!   its old links stay held ([`FabricState::release_keeping_links`]), so
//!   it shares no uplink, spine port or OCS port with them and rewires
//!   idle OCS ports only (Section 7's rule); the old links are then freed
//!   ([`FabricState::free_kept_links`]) and the blocked job placed.
//! - [`Moves::BreakBeforeMake`]: the moved job's links are released and its
//!   GPUs masked ([`FabricState::mask_gpus`]), the blocked job placed, then
//!   the moved job on what is left, which may include its own old ports.
//!
//! **On devices** a move changes the moved job's leaf source routes, its
//! spine VRF ports and, with an OCS, its circuits (the decision's links).
//! Make-before-break is appliable without a gap: the new links configured
//! beside the old ones (new circuits on idle OCS ports only), the job's
//! source routes switched to them, the old links removed, then the blocked
//! job admitted. Break-before-make changes the moved job's links in the
//! same transaction that admits the blocked job, so the job pauses for it
//! and its busy OCS ports are rewired: only for jobs that agreed to it.
//! The controller does neither yet, so moves exist in simulation only
//! (`vclos replay --rearrange N [--moves ORDER]`); `job submit`, `plan` and
//! the service never move a job.
//!
//! **Cost.** A state copy and two placements per try, on blocked calls
//! only: docs/performance.md, "Rearrangement".

use std::collections::HashSet;
use std::sync::Arc;

use super::given::{self, Allocation};
use super::{JobRequest, Outcome, PlacementError, Placer, Policy, SliceOptions};
use crate::decision::Decision;
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{ServerId, Topology};

/// How a moved job's links change (module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Moves {
    /// Its new slice shares no port with the old one: configured beside
    /// it, then switched to, then the old removed; the job never stops.
    #[default]
    #[value(name = "make-before-break")]
    MakeBeforeBreak,
    /// The blocked job is placed first and the moved job's new slice may
    /// reuse its old ports: its links are down while they change, and its
    /// busy OCS ports are rewired, so the job must agree to a pause.
    #[value(name = "break-before-make")]
    BreakBeforeMake,
}

impl std::fmt::Display for Moves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Moves::MakeBeforeBreak => "make-before-break",
            Moves::BreakBeforeMake => "break-before-make",
        })
    }
}

/// One running job's links moved: its GPUs stay, its slice changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub job: JobId,
    /// The decision it ran under until now.
    pub from: Arc<Decision>,
    /// The decision it runs under from now on: the same GPUs.
    pub to: Arc<Decision>,
}

/// A placement found by moving running jobs' links ([`Placer::rearrange`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Rearranged {
    /// The moves, in the order they apply (before `placed` starts).
    pub moves: Vec<Move>,
    /// The blocked job's decision.
    pub placed: Arc<Decision>,
}

/// What [`rearrange`] (and [`super::forecast`]) need of a placer beyond
/// [`Placer`].
pub(crate) trait Rearrange: Placer {
    fn policy(&self) -> Policy;
    fn options(&self) -> SliceOptions;
    fn state_mut(&mut self) -> &mut FabricState;
    fn cutoffs_mut(&mut self) -> &mut u64;
    /// Repeats answered from kept cut-off refusals (`refusals` module).
    fn repeats_mut(&mut self) -> &mut u64;
}

/// [`Rearrange`] for a placer struct with fields `state`, `options`,
/// `cutoffs` and `refusals`, placing with `policy`.
macro_rules! rearranges {
    ($placer:ty, $policy:expr) => {
        impl $crate::placement::rearrange::Rearrange for $placer {
            fn policy(&self) -> $crate::placement::Policy {
                $policy
            }
            fn options(&self) -> $crate::placement::SliceOptions {
                self.options
            }
            fn state_mut(&mut self) -> &mut $crate::state::FabricState {
                &mut self.state
            }
            fn cutoffs_mut(&mut self) -> &mut u64 {
                &mut self.cutoffs
            }
            fn repeats_mut(&mut self) -> &mut u64 {
                self.refusals.repeats_mut()
            }
        }
    };
}
pub(crate) use rearranges;

/// [`Placer::rearrange`], [`Placer::place_apart`], [`Placer::admit_reserved`]
/// and [`Placer::forecast`] inside the `Placer` impl
/// of a placer that implements [`Rearrange`] ([`rearranges`]).
macro_rules! rearranging_methods {
    () => {
        fn release_shared(
            &mut self,
            job: &$crate::names::JobId,
        ) -> Result<std::sync::Arc<$crate::decision::Decision>, $crate::placement::PlacementError>
        {
            use $crate::placement::rearrange::Rearrange as _;
            $crate::placement::release_held_shared(self.state_mut(), job)
        }

        fn rearrange(
            &mut self,
            job: &$crate::placement::JobRequest,
            tries: usize,
            moves: $crate::placement::rearrange::Moves,
        ) -> Result<
            Option<$crate::placement::rearrange::Rearranged>,
            $crate::placement::PlacementError,
        > {
            $crate::placement::rearrange::rearrange(self, job, (tries, moves))
        }

        fn place_apart(
            &mut self,
            job: &$crate::placement::JobRequest,
            reserved: &$crate::state::Reservation,
        ) -> Result<$crate::placement::Outcome, $crate::placement::PlacementError> {
            use $crate::placement::rearrange::Rearrange as _;
            let masked = self.state_mut().mask(reserved);
            let out = self.place(job);
            self.state_mut().unmask(masked);
            out
        }

        fn admit_reserved(
            &mut self,
            reserved: &$crate::placement::forecast::Forecast,
        ) -> Result<
            Option<std::sync::Arc<$crate::decision::Decision>>,
            $crate::placement::PlacementError,
        > {
            $crate::placement::forecast::admit_reserved(self, reserved)
        }

        fn forecast(
            &mut self,
            job: &$crate::placement::JobRequest,
            ends: &[$crate::names::JobId],
            from: usize,
        ) -> Result<
            Option<$crate::placement::forecast::Forecast>,
            $crate::placement::PlacementError,
        > {
            $crate::placement::forecast::forecast(self, job, ends, from)
        }
    };
}
pub(crate) use rearranging_methods;

/// The search of the module doc for `job`, at most `tries` candidates:
/// the rearrangement (already held by `p`'s state), or `None` with `p`'s
/// state unchanged.
pub(crate) fn rearrange<P: Rearrange>(
    p: &mut P,
    job: &JobRequest,
    (tries, moves): (usize, Moves),
) -> Result<Option<Rearranged>, PlacementError> {
    let movers = candidates(p.state_mut(), tries);
    for mover in movers {
        if let Some((r, state)) = try_moving(p, job, &mover, moves)? {
            *p.state_mut() = state;
            return Ok(Some(r));
        }
    }
    Ok(None)
}

/// Running jobs with links and no sharing, fewest GPUs first, then the
/// oldest (admission order); at most `tries`.
fn candidates(state: &FabricState, tries: usize) -> Vec<JobId> {
    let mut c: Vec<(usize, usize, &JobId)> = state
        .decisions()
        .into_iter()
        .enumerate()
        .filter(|(_, d)| !d.vclos.links.is_empty() && d.sharing.is_none())
        .map(|(age, d)| (d.gpus.len(), age, &d.job))
        .collect();
    c.sort_unstable();
    c.into_iter().take(tries).map(|(.., j)| j.clone()).collect()
}

/// One candidate's try in `moves`' order (module doc): the
/// rearrangement and the state holding it, or `None` when this move does
/// not place `job`.
fn try_moving<P: Rearrange>(
    p: &mut P,
    job: &JobRequest,
    mover: &JobId,
    moves: Moves,
) -> Result<Option<(Rearranged, FabricState)>, PlacementError> {
    let policy = p.policy();
    let mut copy = p.state_mut().clone();
    let (placed, from, to, copy) = match moves {
        Moves::MakeBeforeBreak => {
            let (from, kept) = copy
                .release_keeping_links(mover)
                .map_err(|e| engine(policy, e))?;
            let Some(to) = place_again(p, &mut copy, &from)? else {
                return Ok(None);
            };
            copy.free_kept_links(&kept);
            let (placed, copy) = place_on_view(p, copy, job)?;
            (placed, from, to, copy)
        }
        Moves::BreakBeforeMake => {
            let from = copy.release(mover).map_err(|e| engine(policy, e))?;
            let gpus = given::decision_gpus(copy.topology(), &from);
            copy.mask_gpus(&gpus);
            let (placed, mut copy) = place_on_view(p, copy, job)?;
            if placed.is_none() {
                return Ok(None);
            }
            copy.unmask_gpus(&gpus);
            let Some(to) = place_again(p, &mut copy, &from)? else {
                return Ok(None);
            };
            (placed, from, to, copy)
        }
    };
    let Some(placed) = placed else {
        return Ok(None);
    };
    let moves = vec![Move {
        job: from.job.clone(),
        from: Arc::new(from),
        to: Arc::new(to),
    }];
    Ok(Some((Rearranged { moves, placed }, copy)))
}

/// Place the job of `from` again on exactly its GPUs in `copy` with
/// `p`'s policy and options, never sharing, and admit it there.
fn place_again<P: Rearrange>(
    p: &P,
    copy: &mut FabricState,
    from: &Decision,
) -> Result<Option<Decision>, PlacementError> {
    let policy = p.policy();
    let gpus = given::decision_gpus(copy.topology(), from);
    let again = JobRequest::new(from.job.clone(), from.gpus.len() as u32);
    let alloc = allocation(copy.topology(), &gpus);
    let isolated = SliceOptions {
        sharing: None,
        ..p.options()
    };
    let Ok(to) = given::place_exactly(policy, copy, isolated, &again, &alloc)? else {
        return Ok(None);
    };
    let mut to = Arc::unwrap_or_clone(to);
    to.requested_gpus = from.requested_gpus;
    copy.admit(&to).map_err(|e| engine(policy, e))?;
    Ok(Some(to))
}

/// Step 4: `p.place(job)` on `view` instead of its own state, which is
/// put back afterwards with its cutoff count; the view comes back holding
/// the decision, if any.
pub(super) fn place_on_view<P: Rearrange>(
    p: &mut P,
    view: FabricState,
    job: &JobRequest,
) -> Result<(Option<Arc<Decision>>, FabricState), PlacementError> {
    let saved = std::mem::replace(p.state_mut(), view);
    let counts = (*p.cutoffs_mut(), *p.repeats_mut());
    let outcome = p.place(job);
    let view = std::mem::replace(p.state_mut(), saved);
    (*p.cutoffs_mut(), *p.repeats_mut()) = counts;
    match outcome? {
        Outcome::Placed(d) => Ok((Some(d), view)),
        Outcome::Blocked(_) => Ok((None, view)),
    }
}

/// `gpus` as a given allocation: whole servers when it holds every GPU of
/// each of its servers (how a whole-server job was placed), else GPUs.
fn allocation(topo: &Topology, gpus: &[(ServerId, u16)]) -> Allocation {
    let servers: HashSet<ServerId> = gpus.iter().map(|&(s, _)| s).collect();
    if servers.len() * usize::from(topo.gpus_per_server) == gpus.len() {
        let mut s: Vec<ServerId> = servers.into_iter().collect();
        s.sort_unstable();
        Allocation::Servers(s)
    } else {
        Allocation::Gpus(gpus.to_vec())
    }
}

pub(super) fn engine(policy: Policy, e: impl std::fmt::Display) -> PlacementError {
    PlacementError::Engine {
        policy: policy.name(),
        reason: format!("rearrangement: {e}"),
    }
}

#[cfg(test)]
mod tests;
