//! Placement: deciding which GPUs and which slice of the fabric a job gets.
//!
//! A [`Placer`] owns its view of the fabric state and turns a
//! [`JobRequest`] into a [`Decision`] (and holds the resources), or says why
//! it could not ([`Blocked`]). The policies are vClos and OCS-vClos (the
//! paper's algorithms), the baselines `best`, `sr` and the ECMP ones, Titan
//! and the packing baselines of its evaluation ([`packing`]); the trace
//! replay drives any of them through this one trait.

mod assign;
mod baseline;
mod biclique;
#[doc(hidden)]
pub mod bound;
mod cuts;
mod flow;
pub mod forecast;
pub mod given;
mod local;
mod ocs;
pub mod packing;
mod plan;
pub mod rearrange;
mod refusals;
pub mod shared;
pub mod sizing;
pub mod spine_sets;
mod stage3;
#[cfg(test)]
mod tests;
pub mod titan;
mod vclos;
mod view;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use thiserror::Error;

use crate::decision::{Decision, Stage};
use crate::names::JobId;
use crate::sharing::profile::Profile;
use crate::state::FabricState;
use crate::topology::Topology;
use crate::trace::Collective;

pub use baseline::{BestPlacer, SrPlacer};
pub use local::Grain;
#[doc(hidden)]
pub use ocs::stage3_wide;
pub use ocs::OcsVclosPlacer;
pub use packing::{Packing, PackingPlacer};
pub use shared::SharingMode;
use sizing::{Probe, Sizes};
#[doc(hidden)]
pub use stage3::{record_instances, Outcome as Stage3Outcome};
pub use titan::TitanPlacer;
pub use vclos::VclosPlacer;

/// A job asking for GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRequest {
    pub id: JobId,
    pub gpus: u32,
    /// Its collective, for policies that place by traffic (`titan`;
    /// `None`: [`titan::DEFAULT_COLLECTIVE`]); the others ignore it.
    pub collective: Option<Collective>,
    /// Its model (the trace's `model`), for `tiresias-like`, which
    /// consolidates by model ([`packing`]); the others ignore it.
    pub model: Option<String>,
    /// Its periodic demand, for a placer in a sharing mode ([`shared`];
    /// `None`: [`SharingMode::profile_of`]); the others ignore it.
    pub profile: Option<Profile>,
}

impl JobRequest {
    pub fn new(id: JobId, gpus: u32) -> Self {
        JobRequest {
            id,
            gpus,
            collective: None,
            model: None,
            profile: None,
        }
    }
}

/// Why a job could not be placed now (it may fit later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blocked {
    /// Not enough free GPUs / idle servers to meet locality.
    Gpu,
    /// Enough idle servers, but no network resources for an isolated slice
    /// (`titan`: enough free GPUs, but no placement keeps every phase
    /// within its links).
    Network,
}

/// Errors that are not "try again later".
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlacementError {
    #[error("job `{0}` already holds resources")]
    DuplicateJob(JobId),
    #[error("job `{0}` holds no resources")]
    UnknownJob(JobId),
    #[error("job `{job}` asks for {gpus} GPUs; the fabric has {total}")]
    TooLarge { job: JobId, gpus: u32, total: u32 },
    #[error("job `{0}` asks for 0 GPUs")]
    Empty(JobId),
    /// No size from the job's up to the whole fabric has a slice, even on
    /// the empty fabric ([`sizing`]): waiting will never help.
    #[error("job `{job}` ({gpus} GPUs) can never be placed with {policy}: no slice of that size or any larger one fits this fabric, even when it is empty")]
    NoShape {
        job: JobId,
        gpus: u32,
        policy: &'static str,
    },
    #[error("`{option}` does not apply to policy `{policy}` (`--partial-servers`: policies that place whole servers; `--sharing`: vclos, ocs-vclos and titan)")]
    NotForPolicy {
        policy: Policy,
        option: &'static str,
    },
    /// A given allocation ([`given`]) that no search could fix: an
    /// unknown or repeated server or GPU (`field`: the request's entry,
    /// e.g. `servers[2]`, `gpus_on.srv1[0]`), or a count that does not
    /// match the job's size.
    #[error("job `{job}`: {}{reason}", field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
    Given {
        job: JobId,
        field: Option<Box<str>>,
        reason: String,
    },
    /// A simulation baseline asked to place on a real fabric
    /// ([`fabric_placer`]).
    #[error("policy `{0}` is a simulation baseline: it configures no isolation on a real fabric; use vclos, ocs-vclos or titan")]
    NotOnFabric(Policy),
    #[error("policy `{policy}` needs a fabric with OCS; topology `{topology}` has none")]
    NoOcs { policy: Policy, topology: String },
    /// The engine built a decision the fabric state refused: a bug.
    #[error("internal error: policy `{policy}` produced an invalid decision: {reason}")]
    Engine {
        policy: &'static str,
        reason: String,
    },
}

/// The outcome of [`Placer::place`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The decision, shared with the placer's fabric state (which holds it).
    Placed(Arc<Decision>),
    Blocked(Blocked),
}

/// A placement policy with its own fabric state.
pub trait Placer {
    /// Short policy name (`vclos`, `ocs-vclos`, `best`, `sr`).
    fn name(&self) -> &'static str;
    /// Decide for `job` and hold what the decision uses.
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError>;
    /// Free exactly what `job`'s placement held.
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError>;
    /// [`Placer::release`], returning the decision as the placer held it,
    /// not a copy: a replay's isolation audit may still hold it too, and a
    /// large job's decision names thousands of ports.
    fn release_shared(&mut self, job: &JobId) -> Result<Arc<Decision>, PlacementError> {
        self.release(job).map(Arc::new)
    }
    /// The placer's view of the fabric (None if it keeps no [`FabricState`]).
    fn fabric(&self) -> Option<&FabricState> {
        None
    }
    /// Exact searches that ran out of their node budget, so a "blocked"
    /// they led to was not proven (0 for policies without such a search).
    fn search_cutoffs(&self) -> u64 {
        0
    }
    /// [`Placer::search_cutoffs`], with every repeat of a cut-off search
    /// answered from a kept refusal counted again (module `refusals`):
    /// how often a "blocked" rested on a search that did not finish.
    fn unsettled_searches(&self) -> u64 {
        self.search_cutoffs()
    }
    /// Place `job`, blocked on the network, by moving the links of one of
    /// at most `tries` running jobs in the order `moves` ([`rearrange`]
    /// module doc): the moves and the decision, all held, or `None` with
    /// nothing changed (always, for policies that do not rearrange: all
    /// but vClos and OCS-vClos).
    fn rearrange(
        &mut self,
        job: &JobRequest,
        tries: usize,
        moves: rearrange::Moves,
    ) -> Result<Option<rearrange::Rearranged>, PlacementError> {
        let _ = (job, tries, moves);
        Ok(None)
    }

    /// Place `job` sharing nothing with `reserved` (a blocked head's
    /// forecast slice, resolved by [`FabricState::reservation`]): what of
    /// it is free now is masked for this call only
    /// ([`crate::state::FabricState::mask`]). Policies that do not
    /// forecast are never given a reservation, and place as usual.
    fn place_apart(
        &mut self,
        job: &JobRequest,
        reserved: &crate::state::Reservation,
    ) -> Result<Outcome, PlacementError> {
        let _ = reserved;
        self.place(job)
    }

    /// Hold `reserved`'s decision, which this placer forecast for a job it
    /// has not placed ([`Placer::forecast`]), if the state admits it as it
    /// is now; `None` (nothing changed) if some of it is held, and always
    /// for policies that do not forecast. A blocked head whose reserved
    /// slice is free starts on it, as Slurm starts a job on its reserved
    /// nodes.
    fn admit_reserved(
        &mut self,
        reserved: &forecast::Forecast,
    ) -> Result<Option<Arc<Decision>>, PlacementError> {
        let _ = reserved;
        Ok(None)
    }

    /// Where `job` would be placed once the running jobs `ends` have
    /// ended, in that order ([`forecast`] module doc): the fewest of them
    /// (at least `from`) after which it fits, and its decision there;
    /// `None` when it fits after none of them, and always for policies
    /// that do not forecast (all but vClos and OCS-vClos). Nothing changes.
    fn forecast(
        &mut self,
        job: &JobRequest,
        ends: &[JobId],
        from: usize,
    ) -> Result<Option<forecast::Forecast>, PlacementError> {
        let _ = (job, ends, from);
        Ok(None)
    }
}

/// The placement policies (paper Sections 6-7 and the Section 9.3 baselines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Policy {
    /// vClos: isolated virtual Clos over unused links (Section 6).
    Vclos,
    /// OCS-vClos: vClos plus rewiring of idle OCS ports (Section 7).
    OcsVclos,
    /// Ideal non-blocking fabric: only GPU and locality constraints.
    Best,
    /// Source routing without isolation: jobs share links.
    Sr,
    /// `best`'s GPUs on a fabric that hashes every flow onto an equal-cost
    /// path (paper Sections 3.1 and 9.3; routes: [`crate::network`]).
    Ecmp,
    /// `best`'s GPUs, every flow on the least-loaded equal-cost path when
    /// it starts (paper Section 9.3, "Balanced ECMP").
    BalancedEcmp,
    /// Titan (seed 002): partly used servers first (fewest idle servers,
    /// then fewest servers), no phase of any job over a link; routed as
    /// `balanced-ecmp`.
    Titan,
    /// HiveD-like buddy cells (Titan's benchmark; an approximation, see
    /// [`packing`]); routed as `balanced-ecmp`.
    #[value(name = "hived-like")]
    HivedLike,
    /// Tiresias-like consolidation by model (Titan's benchmark; an
    /// approximation, see [`packing`]); routed as `balanced-ecmp`.
    #[value(name = "tiresias-like")]
    TiresiasLike,
}

impl Policy {
    pub const ALL: [Policy; 9] = [
        Policy::Vclos,
        Policy::OcsVclos,
        Policy::Best,
        Policy::Sr,
        Policy::Ecmp,
        Policy::BalancedEcmp,
        Policy::Titan,
        Policy::HivedLike,
        Policy::TiresiasLike,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Vclos => "vclos",
            Policy::OcsVclos => "ocs-vclos",
            Policy::Best => "best",
            Policy::Sr => "sr",
            Policy::Ecmp => "ecmp",
            Policy::BalancedEcmp => "balanced-ecmp",
            Policy::Titan => "titan",
            Policy::HivedLike => "hived-like",
            Policy::TiresiasLike => "tiresias-like",
        }
    }

    /// Whether the policy places a job beyond one server on whole servers
    /// (so `--partial-servers` applies to it).
    pub fn whole_servers(self) -> bool {
        !matches!(
            self,
            Policy::Titan | Policy::HivedLike | Policy::TiresiasLike
        )
    }

    /// Places jobs on a real fabric ([`fabric_placer`]): vclos, ocs-vclos,
    /// and titan over the fabric's own isolation ([`titan::isolated`]).
    pub fn places_on_fabric(self) -> bool {
        matches!(self, Policy::Vclos | Policy::OcsVclos | Policy::Titan)
    }

    /// The policy a fabric isolates jobs with: ocs-vclos when it has
    /// OCS, else vclos.
    pub fn of_fabric(topology: &Topology) -> Policy {
        if topology.ocs.is_empty() {
            Policy::Vclos
        } else {
            Policy::OcsVclos
        }
    }

    /// Has a sharing mode (`--sharing`): vClos and OCS-vClos share reserved
    /// links ([`shared`]), titan time-shares the links it routes over
    /// ([`titan`] module doc, "Time-shared links").
    pub fn shares(self) -> bool {
        matches!(self, Policy::Vclos | Policy::OcsVclos | Policy::Titan)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown policy name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "unknown placement policy `{0}` (expected vclos, ocs-vclos, best, sr, ecmp, balanced-ecmp, titan, hived-like or tiresias-like)"
)]
pub struct UnknownPolicy(pub String);

impl FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

/// How a placer may shape a job beyond its own size and whole servers
/// (`--round-up`, `--partial-servers`, `--sharing`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SliceOptions {
    /// Whole servers a blocked job may grow by to find a free slice
    /// ([`sizing`]; vClos and OCS-vClos; 0: never, the paper's engine).
    pub round_up: u32,
    /// Take free GPUs on partly used servers instead of whole idle servers
    /// ([`Grain`] and the `local` module doc; issue 15 item 2). Applies to every policy
    /// that places by whole servers ([`Policy::whole_servers`]); the others
    /// refuse it.
    pub partial_servers: bool,
    /// Share links with compatible jobs when no isolated slice exists
    /// ([`shared`]; vClos and OCS-vClos), or time-share the links titan
    /// routes over ([`titan`] module doc); [`Policy::shares`].
    pub sharing: Option<SharingMode>,
}

impl SliceOptions {
    /// The grains a job is tried with, in order: whole servers, then (with
    /// partial servers) GPUs (the `local` module doc says why in that order).
    pub fn grains(self) -> &'static [Grain] {
        if self.partial_servers {
            &[Grain::Servers, Grain::Gpus]
        } else {
            &[Grain::Servers]
        }
    }
}

/// Build the placer for `policy` on an empty `topology`.
pub fn placer(
    policy: Policy,
    topology: Arc<Topology>,
) -> Result<Box<dyn Placer + Send>, PlacementError> {
    placer_on(policy, FabricState::new(topology), SliceOptions::default())
}

/// Build the placer for `policy` continuing from `state`, shaping jobs as
/// `options` allow ([`sizing`] and [`Grain`]).
pub fn placer_on(
    policy: Policy,
    state: FabricState,
    options: SliceOptions,
) -> Result<Box<dyn Placer + Send>, PlacementError> {
    if options.partial_servers && !policy.whole_servers() {
        return Err(PlacementError::NotForPolicy {
            policy,
            option: "--partial-servers",
        });
    }
    if options.sharing.is_some() && !policy.shares() {
        return Err(PlacementError::NotForPolicy {
            policy,
            option: "--sharing",
        });
    }
    Ok(match policy {
        Policy::Vclos => Box::new(VclosPlacer::with_state(state).with_options(options)),
        Policy::OcsVclos => {
            if state.topology().ocs.is_empty() {
                return Err(PlacementError::NoOcs {
                    policy,
                    topology: state.topology().name.clone(),
                });
            }
            Box::new(OcsVclosPlacer::with_state(state).with_options(options))
        }
        Policy::Best | Policy::Ecmp | Policy::BalancedEcmp => Box::new(
            BestPlacer::with_state(state)
                .named(policy.name())
                .with_options(options),
        ),
        Policy::Sr => Box::new(SrPlacer::with_state(state).with_options(options)),
        Policy::Titan => Box::new(TitanPlacer::with_state(state).with_sharing(options.sharing)),
        Policy::HivedLike => Box::new(PackingPlacer::with_state(state, Packing::Buddy)),
        Policy::TiresiasLike => Box::new(PackingPlacer::with_state(state, Packing::Tiresias)),
    })
}

/// The placer a real fabric admits jobs with (`plan`, `job submit`, the
/// service): vclos and ocs-vclos as [`placer_on`] builds them, titan over
/// the fabric's own policy ([`Policy::of_fabric`], [`titan::isolated`]);
/// the simulation's baselines are refused, as they isolate nothing.
pub fn fabric_placer(
    policy: Policy,
    state: FabricState,
    options: SliceOptions,
) -> Result<Box<dyn Placer + Send>, PlacementError> {
    match policy {
        Policy::Titan => {
            let under = Policy::of_fabric(state.topology());
            Ok(Box::new(titan::isolated::IsolatedTitan::new(
                under, state, options,
            )?))
        }
        p if p.places_on_fabric() => placer_on(p, state, options),
        p => Err(PlacementError::NotOnFabric(p)),
    }
}

/// Checks shared by every placer before it looks for resources.
pub(crate) fn precheck(state: &FabricState, job: &JobRequest) -> Result<(), PlacementError> {
    if job.gpus == 0 {
        return Err(PlacementError::Empty(job.id.clone()));
    }
    if state.decision(&job.id).is_some() {
        return Err(PlacementError::DuplicateJob(job.id.clone()));
    }
    let total = state.topology().gpu_count() as u32;
    if job.gpus > total {
        return Err(PlacementError::TooLarge {
            job: job.id.clone(),
            gpus: job.gpus,
            total,
        });
    }
    Ok(())
}

/// The vClos and OCS-vClos placement skeleton: shared checks, then per
/// grain `options` allows ([`SliceOptions::grains`]) the size to place at
/// ([`sizing`]), stages 0-1, `network` (the policy's multi-leaf stages)
/// and admission; the first grain that places the job wins. `probe` is
/// `network` on the empty fabric, saying whether its search was cut off.
pub(crate) fn place_staged(
    state: &mut FabricState,
    policy: &'static str,
    job: &JobRequest,
    (options, sizes): (SliceOptions, &mut Sizes),
    network: &mut dyn FnMut(&FabricState, Grain, u32) -> Option<plan::Plan>,
    probe: &mut dyn FnMut(&FabricState, Grain, u32) -> Probe,
) -> Result<Outcome, PlacementError> {
    precheck(state, job)?;
    let grains = options.grains();
    let mut last = Err(PlacementError::NoShape {
        job: job.id.clone(),
        gpus: job.gpus,
        policy,
    });
    let profile = options.sharing.map(|m| m.profile_of(job));
    for &grain in grains {
        match place_grain(state, job, (options, grain, sizes), network, probe) {
            Some(Ok(plan)) => {
                let alone = profile.as_ref().map(shared::alone);
                return commit_sharing(state, policy, job, &plan, alone);
            }
            Some(Err(b)) => last = Ok(Outcome::Blocked(b)),
            None => {}
        }
    }
    // Sharing mode: only when isolation is blocked on links ([`shared`]).
    if let (Ok(Outcome::Blocked(Blocked::Network)), Some(mode), Some(p)) =
        (&last, options.sharing, &profile)
    {
        if let Some((plan, sharing)) = shared::place(state, job, p, options, mode) {
            return commit_sharing(state, policy, job, &plan, Some(sharing));
        }
    }
    last
}

/// [`place_staged`] with one grain: the plan, or why not now; `None` when
/// no size of this grain has a slice even on the empty fabric.
fn place_grain(
    state: &FabricState,
    job: &JobRequest,
    (options, grain, sizes): (SliceOptions, Grain, &mut Sizes),
    network: &mut dyn FnMut(&FabricState, Grain, u32) -> Option<plan::Plan>,
    probe: &mut dyn FnMut(&FabricState, Grain, u32) -> Probe,
) -> Option<Result<plan::Plan, Blocked>> {
    let topology = Arc::clone(state.topology());
    let unit = grain.size(&topology);
    let (verdicts, empty) = sizes.for_grain(grain);
    let mut empty = EmptyProbe {
        state,
        grain,
        empty,
        network: probe,
    };
    let own = match grain.needed(&topology, job.gpus) {
        0 => job.gpus,
        k => {
            let most = grain.total(&topology);
            match verdicts.covering(k, most, &mut |c| empty.probe(c * unit))? {
                c if c == k => job.gpus,
                c => c * unit,
            }
        }
    };
    Some(match place_local(state, grain, own) {
        Err(b) => Err(b),
        Ok(Some(p)) => Ok(p),
        Ok(None) => network(state, grain, own)
            .or_else(|| {
                // `--round-up`: a few more whole servers' worth, if that
                // has a free slice now (sizing module doc).
                let units = own.div_ceil(unit);
                let more = options.round_up * (u32::from(topology.gpus_per_server) / unit);
                let free = grain.free_total(state);
                (units + 1..=units.saturating_add(more))
                    .take_while(|&c| c <= free)
                    .filter(|&c| verdicts.has_slice(c, &mut |c| empty.probe(c * unit)))
                    .find_map(|c| network(state, grain, c * unit))
            })
            .ok_or(Blocked::Network),
    })
}

/// The staged placement on the empty fabric (kept in [`Sizes`], built on
/// first use), for [`Sizes`]: does a size have a slice at all?
struct EmptyProbe<'a> {
    state: &'a FabricState,
    grain: Grain,
    empty: &'a mut Option<FabricState>,
    network: &'a mut dyn FnMut(&FabricState, Grain, u32) -> Probe,
}

impl EmptyProbe<'_> {
    fn probe(&mut self, gpus: u32) -> Probe {
        let state = self.state;
        let empty = self.empty.get_or_insert_with(|| state.emptied());
        match place_local(empty, self.grain, gpus) {
            Ok(Some(_)) => Probe::Yes,
            Err(_) => Probe::No,
            Ok(None) => (self.network)(empty, self.grain, gpus),
        }
    }
}

/// Turn a plan into a decision and admit it; a refusal is an engine bug.
/// A halving-doubling job's Stage 2 slice gets its rank order
/// ([`plan::Plan::order_for_hd`]).
pub(crate) fn commit(
    state: &mut FabricState,
    policy: &'static str,
    job: &JobRequest,
    plan: &plan::Plan,
) -> Result<Outcome, PlacementError> {
    commit_sharing(state, policy, job, plan, None)
}

/// [`commit`], with the job's `sharing` section when it was placed in a
/// sharing mode (kept only if the plan has links: a job in one leaf has
/// none to share).
fn commit_sharing(
    state: &mut FabricState,
    policy: &'static str,
    job: &JobRequest,
    plan: &plan::Plan,
    sharing: Option<crate::decision::Sharing>,
) -> Result<Outcome, PlacementError> {
    let reordered;
    let plan = if job.collective == Some(Collective::Hd) && plan.stage == Stage::Vclos {
        let mut p = plan.clone();
        p.order_for_hd(state.topology());
        reordered = p;
        &reordered
    } else {
        plan
    };
    let mut d = plan.to_decision(state.topology(), &job.id);
    d.requested_gpus = Some(job.gpus);
    // Titan's jobs across leaves hold no links but are routed over them.
    let keep = !plan.links.is_empty() || plan.stage == Stage::Manual;
    d.sharing = sharing.filter(|_| keep).map(Box::new);
    let d = Arc::new(d);
    let res = plan.resources(state);
    state
        .admit_typed(Arc::clone(&d), res)
        .map_err(|e| PlacementError::Engine {
            policy,
            reason: e.to_string(),
        })?;
    Ok(Outcome::Placed(d))
}

/// Release `job` from a placer's own state (every state-holding placer).
pub(crate) fn release_held(
    state: &mut FabricState,
    job: &JobId,
) -> Result<Decision, PlacementError> {
    release_held_shared(state, job).map(Arc::unwrap_or_clone)
}

/// [`release_held`], the decision as held ([`Placer::release_shared`]).
pub(crate) fn release_held_shared(
    state: &mut FabricState,
    job: &JobId,
) -> Result<Arc<Decision>, PlacementError> {
    state
        .release_shared(job)
        .map_err(|_| PlacementError::UnknownJob(job.clone()))
}

/// Stages 0 and 1 (shared by vClos and OCS-vClos): `Ok(Some)` when placed
/// locally, `Ok(None)` when the job needs a network slice, or the block.
pub(crate) fn place_local(
    state: &FabricState,
    grain: Grain,
    gpus: u32,
) -> Result<Option<plan::Plan>, Blocked> {
    use crate::decision::Stage;
    let topo = state.topology();
    if gpus <= u32::from(topo.gpus_per_server) {
        return local::stage0(state, gpus)
            .map(|g| Some(plan::Plan::local(Stage::Server, g)))
            .ok_or(Blocked::Gpu);
    }
    let k = grain.needed(topo, gpus);
    if let Some(gpus) = local::stage1(state, grain, k) {
        return Ok(Some(plan::Plan::local(Stage::Leaf, gpus)));
    }
    if grain.free_total(state) < k {
        return Err(Blocked::Gpu);
    }
    Ok(None)
}

/// The virtual Clos shapes `(l, s)` for a job of `k` units of `t` GPUs
/// (whole servers, or single GPUs with partial servers), in the paper's
/// preference order (Algorithm 3): fewest leaves (largest `s`) first. `s`
/// is a multiple of `t` (whole units per leaf), `l * s = k * t`,
/// `2 <= l <= leaves` and `s <= max_s` (spines / uplinks reachable).
pub fn shapes(k: u32, t: u32, leaves: u32, max_s: u32) -> Vec<(u32, u32)> {
    // `s = d * t <= max_s`: no divisor `d` above `max_s / t` can qualify
    // (at most a leaf's uplinks, where `k` can be thousands of GPUs).
    (1..=k.min(max_s / t.max(1)))
        .rev()
        .filter(|d| k.is_multiple_of(*d))
        .map(|d| (k / d, d * t))
        .filter(|&(l, s)| l >= 2 && l <= leaves && s <= max_s)
        .collect()
}

/// Greedily take `(item, up to its count)` in order until `need` is met;
/// `None` when the items run out first.
pub(crate) fn take_first<T>(
    items: impl IntoIterator<Item = (T, u32)>,
    need: u32,
) -> Option<Vec<(T, u32)>> {
    let mut out = Vec::new();
    let mut left = need;
    for (x, most) in items {
        if left == 0 {
            break;
        }
        let take = most.min(left);
        out.push((x, take));
        left -= take;
    }
    (left == 0).then_some(out)
}

/// The Stage 3 shapes of OCS-vClos for `k` units of `t` GPUs: a leaf may
/// host several virtual leaves (A.3), so `l` goes up to every leaf's
/// uplinks over `t`, and `s` up to a leaf's uplinks (one per slot).
pub(crate) fn ocs_shapes(topo: &Topology, k: u32, t: u32) -> Vec<(u32, u32)> {
    let max_up = topo
        .leaves
        .iter()
        .map(|l| l.uplinks.len())
        .max()
        .unwrap_or(0) as u32;
    shapes(k, t, topo.leaves.len() as u32 * max_up / t, max_up)
}

/// Tiny deterministic PRNG (xorshift) for the placement unit tests.
#[cfg(test)]
pub(crate) struct Rng(pub u64);

#[cfg(test)]
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
