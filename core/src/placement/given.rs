//! Admission of a given allocation (issue 17 item 2): a scheduler (Slurm's
//! `PrologSlurmctld`, a Kueue AdmissionCheck, Volcano) has already chosen
//! the job's servers; vclos finds an isolated slice over exactly those
//! servers, or says why there is none and, where one exists, names a
//! nearby set of servers that has one.
//!
//! **How.** The policy's own stages run on a view of the fabric in which
//! every free GPU of every other server is masked
//! ([`FabricState::only_servers`]): Stage 0/1 locality (paper Section 6.1,
//! Algorithm 1), the Stage 2 biclique over unused links (Section 6.2,
//! Eq. 6) and OCS-vClos's rewiring of idle OCS ports (Section 7) apply
//! unchanged, so there is no second rule set to trust. The job asks for
//! exactly as many whole servers as it names (checked first), so any
//! decision the policy finds holds all of them; this is checked again on
//! the decision. Links, spine ports and OCS ports are not restricted: the
//! scheduler chooses servers, vclos chooses the network.
//!
//! **Checks before any search**, each refusal with its own reason:
//! - every name is a server of the topology, named once (422);
//! - the count: a job of `N <= T` GPUs names one server with `N` free
//!   GPUs; a larger job names `ceil(N / T)` servers (the paper's whole-server
//!   rule, `ReqSevNum`), all idle (409 naming the server and its holder);
//! - the shape: a slice over several leaves takes the same number of
//!   servers `s / T` from each of its `l` leaves (Stage 2's `l x s`
//!   virtual Clos; Stage 3 builds the same shape with rewired links), so
//!   an allocation with unequal servers per leaf cannot be isolated
//!   (Lemma 5.1's leaf-wise permutation needs it) and is refused by
//!   counting, without a search (409).
//!
//! **Single GPUs** (`gpus_on`: a scheduler that allocates GPUs, as
//! Kubernetes device plugins do for Kueue and Volcano): the same, with
//! the view masking every GPU not named ([`FabricState::only_gpus`]) and
//! the policy's partial-server grain ([`super::Grain::Gpus`], the `local`
//! module doc: each GPU keeps its own server port and uplink, so
//! isolation holds); the job asks for exactly the GPUs named, each must
//! be free, and a slice over several leaves takes the same number of GPUs
//! from each. Only the policies that place by whole servers have that
//! grain (vClos, OCS-vClos).
//!
//! **The nearby set** offered with a refusal: the policy's choice with
//! every idle server under the named leaves visible, else its choice on
//! the whole fabric; none when neither places the job now. A scheduler
//! that cannot use it simply keeps the job pending.
//!
//! Without a masked view the sizing rule of [`super::sizing`] (a size
//! with no shape of its own is placed in a larger one) could take more
//! servers than named; on the view it cannot, so such a size is refused
//! with the shape reason or as a network refusal. `--round-up` and
//! `--partial-servers` do not apply to a given allocation: the scheduler
//! chose whole servers.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{placer_on, JobRequest, Outcome, PlacementError, Policy, SliceOptions};
use crate::decision::Decision;
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{LeafId, ServerId, Topology};

/// Most servers one request may name (more than any fabric vclos models).
pub const MAX_GIVEN_SERVERS: usize = 65_536;

/// What a request names, by topology names: whole servers (`servers`) or
/// GPUs per server (`gpus_on`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    Servers(Vec<String>),
    Gpus(BTreeMap<String, Vec<u16>>),
}

impl Named {
    /// The allocation these names denote, or the error naming the entry.
    pub fn resolve(&self, topo: &Topology, job: &JobId) -> Result<Allocation, PlacementError> {
        match self {
            Named::Servers(s) => resolve(topo, job, s),
            Named::Gpus(g) => resolve_gpus(topo, job, g),
        }
    }
}

/// What a scheduler chose: whole servers, or single GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allocation {
    Servers(Vec<ServerId>),
    Gpus(Vec<(ServerId, u16)>),
}

impl Allocation {
    /// The GPUs a job on it asks for when the request does not say: all.
    pub fn gpus(&self, topo: &Topology) -> u32 {
        match self {
            Allocation::Servers(s) => s.len() as u32 * u32::from(topo.gpus_per_server),
            Allocation::Gpus(g) => g.len() as u32,
        }
    }

    fn servers(&self) -> Vec<ServerId> {
        let mut s: Vec<ServerId> = match self {
            Allocation::Servers(s) => s.clone(),
            Allocation::Gpus(g) => g.iter().map(|&(s, _)| s).collect(),
        };
        s.sort_unstable();
        s.dedup();
        s
    }

    /// The masked view a policy places on (module doc).
    fn view(&self, state: &FabricState) -> FabricState {
        match self {
            Allocation::Servers(s) => state.only_servers(s),
            Allocation::Gpus(g) => state.only_gpus(g),
        }
    }

    /// Units per leaf, for the shape rule: servers, or GPUs.
    fn per_leaf(&self, topo: &Topology) -> BTreeMap<LeafId, usize> {
        let mut per_leaf = BTreeMap::new();
        let leaves: Vec<LeafId> = match self {
            Allocation::Servers(s) => s.iter().map(|&s| topo.server(s).leaf).collect(),
            Allocation::Gpus(g) => g.iter().map(|&(s, _)| topo.server(s).leaf).collect(),
        };
        for l in leaves {
            *per_leaf.entry(l).or_default() += 1;
        }
        per_leaf
    }
}

/// The outcome of [`place_on`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Given {
    /// Placed on exactly what was named; the caller's state does not hold
    /// it yet (plan and apply it as any decision).
    Placed(Arc<Decision>),
    /// No isolated slice over it now.
    Refused(Refusal),
}

/// Why a given allocation cannot be isolated now, and a set that can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub why: String,
    /// Servers the policy would place the job on now (empty: none).
    pub suggested: Vec<ServerId>,
}

fn given_error(job: &JobId, field: Option<String>, reason: String) -> PlacementError {
    PlacementError::Given {
        job: job.clone(),
        field: field.map(String::into_boxed_str),
        reason,
    }
}

/// The servers `names` denote, each once, or the error naming the entry.
pub fn resolve<S: AsRef<str>>(
    topo: &Topology,
    job: &JobId,
    names: &[S],
) -> Result<Allocation, PlacementError> {
    if names.is_empty() || names.len() > MAX_GIVEN_SERVERS {
        let reason = format!(
            "names {} servers; a request names 1 to {MAX_GIVEN_SERVERS}",
            names.len()
        );
        return Err(given_error(job, None, reason));
    }
    let mut seen = BTreeMap::new();
    let mut ids = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let name = name.as_ref();
        let bad = |reason: String| given_error(job, Some(format!("servers[{i}]")), reason);
        let id = (topo.server_id(name))
            .ok_or_else(|| bad(format!("`{name}` is not a server of this topology")))?;
        if let Some(first) = seen.insert(id, i) {
            return Err(bad(format!(
                "`{name}` is named twice (also servers[{first}])"
            )));
        }
        ids.push(id);
    }
    Ok(Allocation::Servers(ids))
}

/// The GPUs `gpus_on` (server name -> GPU indices) denotes, each once, or
/// the error naming the entry.
pub fn resolve_gpus(
    topo: &Topology,
    job: &JobId,
    gpus_on: &BTreeMap<String, Vec<u16>>,
) -> Result<Allocation, PlacementError> {
    let t = topo.gpus_per_server;
    let count: usize = gpus_on.values().map(Vec::len).sum();
    if count == 0 || gpus_on.len() > MAX_GIVEN_SERVERS {
        let reason = format!(
            "names {count} GPUs on {} servers; name at least one GPU",
            gpus_on.len()
        );
        return Err(given_error(job, Some("gpus_on".into()), reason));
    }
    let mut out = Vec::with_capacity(count);
    for (name, gpus) in gpus_on {
        let bad = |at: String, reason: String| {
            given_error(job, Some(format!("gpus_on.{name}{at}")), reason)
        };
        let id = (topo.server_id(name)).ok_or_else(|| {
            bad(
                String::new(),
                format!("`{name}` is not a server of this topology"),
            )
        })?;
        let mut seen = 0u128;
        for (i, &g) in gpus.iter().enumerate() {
            if g >= t || g >= 128 {
                return Err(bad(
                    format!("[{i}]"),
                    format!("GPU {g}: servers have {t} GPUs (0-based)"),
                ));
            }
            if seen & (1 << g) != 0 {
                return Err(bad(format!("[{i}]"), format!("GPU {g} is named twice")));
            }
            seen |= 1 << g;
            out.push((id, g));
        }
    }
    Ok(Allocation::Gpus(out))
}

/// Place `job` on exactly `alloc` with `policy`, as the policy would on a
/// fabric where only it is free (module doc). `state` is not changed.
pub fn place_on(
    policy: Policy,
    state: &FabricState,
    options: SliceOptions,
    job: &JobRequest,
    alloc: &Allocation,
) -> Result<Given, PlacementError> {
    match place_exactly(policy, state, options, job, alloc)? {
        Ok(d) => Ok(Given::Placed(d)),
        Err(why) => refuse(
            policy,
            state,
            given_options(options, alloc),
            job,
            alloc,
            why,
        ),
    }
}

/// What [`place_on`] decides, without looking for a nearby set: the
/// decision, or why there is none now (a refusal's reason). Errors are
/// [`place_on`]'s: bad names, counts, or a policy without the grain.
pub fn place_exactly(
    policy: Policy,
    state: &FabricState,
    options: SliceOptions,
    job: &JobRequest,
    alloc: &Allocation,
) -> Result<Result<Arc<Decision>, String>, PlacementError> {
    let topo = state.topology();
    check_count(topo, job, alloc)?;
    let gpus_grain = matches!(alloc, Allocation::Gpus(_));
    if gpus_grain && !policy.whole_servers() {
        let reason = format!("policy {policy} does not place single GPUs of a scheduler's choice; name whole servers");
        return Err(given_error(&job.id, Some("gpus_on".into()), reason));
    }
    if let Some(why) = busy(state, job.gpus, alloc).or_else(|| uneven(topo, alloc)) {
        return Ok(Err(why));
    }
    let mut placer = placer_on(policy, alloc.view(state), given_options(options, alloc))?;
    match placer.place(job)? {
        Outcome::Placed(d) => {
            if !holds_exactly(topo, &d, alloc) {
                return Err(PlacementError::Engine {
                    policy: policy.name(),
                    reason: format!("placed job `{}` beyond what it named", job.id),
                });
            }
            Ok(Ok(d))
        }
        Outcome::Blocked(_) => {
            let leaves = leaf_names(topo, &alloc.servers());
            Ok(Err(format!(
                "no isolated slice joins leaves {leaves} now: {policy} finds no set of spines \
                 every one of them reaches over links no other job holds{}",
                if policy == Policy::OcsVclos {
                    ", even after rewiring idle OCS ports"
                } else {
                    ""
                }
            )))
        }
    }
}

/// `options` for a given allocation: never rounded up (the scheduler
/// chose), the GPU grain exactly when single GPUs are named.
fn given_options(options: SliceOptions, alloc: &Allocation) -> SliceOptions {
    SliceOptions {
        round_up: 0,
        partial_servers: matches!(alloc, Allocation::Gpus(_)),
        ..options
    }
}

/// Whether `d` holds exactly what `alloc` names.
fn holds_exactly(topo: &Topology, d: &Decision, alloc: &Allocation) -> bool {
    match alloc {
        Allocation::Servers(_) => decision_servers(topo, d) == alloc.servers(),
        Allocation::Gpus(want) => {
            let mut held = decision_gpus(topo, d);
            let mut want = want.clone();
            held.sort_unstable();
            want.sort_unstable();
            held == want
        }
    }
}

/// The count rule (module doc): `ceil(N / T)` whole servers, one for
/// `N <= T`; exactly `N` GPUs.
fn check_count(
    topo: &Topology,
    job: &JobRequest,
    alloc: &Allocation,
) -> Result<(), PlacementError> {
    let t = u32::from(topo.gpus_per_server);
    let (needs, named, what) = match alloc {
        Allocation::Servers(s) => (
            job.gpus.div_ceil(t).max(1),
            s.len(),
            format!("whole server(s) of {t} GPUs"),
        ),
        Allocation::Gpus(g) => (job.gpus, g.len(), "GPUs".to_string()),
    };
    if job.gpus == 0 || named as u32 != needs {
        let reason = format!(
            "asks for {} GPUs, which take {needs} {what}, but names {named}",
            job.gpus
        );
        return Err(given_error(&job.id, None, reason));
    }
    if job.gpus <= t && alloc.servers().len() > 1 {
        let reason = format!(
            "a job of at most {t} GPUs lives in one server (the locality rule, paper Section 6.1); \
             these are on {}",
            alloc.servers().len()
        );
        return Err(given_error(&job.id, Some("gpus_on".into()), reason));
    }
    Ok(())
}

/// The first named server or GPU the job cannot have, and who holds it.
fn busy(state: &FabricState, gpus: u32, alloc: &Allocation) -> Option<String> {
    let topo = state.topology();
    let holder = |s: ServerId, g: Option<u16>| {
        let mut gs = g.map_or(0..topo.gpus_per_server, |g| g..g + 1);
        gs.find_map(|g| state.gpu_holder(s, g))
            .map_or_else(String::new, |j| format!(" (held by job `{j}`)"))
    };
    match alloc {
        Allocation::Servers(servers) => {
            let per = gpus.min(u32::from(topo.gpus_per_server));
            servers.iter().find_map(|&s| {
                let free = u32::from(state.free_gpus(s));
                (free < per).then(|| {
                    format!(
                        "server `{}` has {free} free GPUs, the job needs {per} there{}",
                        topo.server(s).name,
                        holder(s, None)
                    )
                })
            })
        }
        Allocation::Gpus(named) => named.iter().find_map(|&(s, g)| {
            state.gpu_holder(s, g).is_some().then(|| {
                format!(
                    "GPU {g} of server `{}` is not free{}",
                    topo.server(s).name,
                    holder(s, Some(g))
                )
            })
        }),
    }
}

/// The shape rule (module doc): unequal servers (GPUs) per leaf, in words.
fn uneven(topo: &Topology, alloc: &Allocation) -> Option<String> {
    let per_leaf = alloc.per_leaf(topo);
    let first = *per_leaf.values().next()?;
    if per_leaf.values().all(|&n| n == first) {
        return None;
    }
    let unit = match alloc {
        Allocation::Servers(_) => "servers",
        Allocation::Gpus(_) => "GPUs",
    };
    let counts: Vec<String> = per_leaf
        .iter()
        .map(|(l, n)| format!("{n} on `{}`", topo.leaf(*l).name))
        .collect();
    Some(format!(
        "an isolated slice takes the same number of {unit} from each of its leaves \
         (vClos Stage 2, a virtual Clos of l leaves x s spines); these are {}",
        counts.join(", ")
    ))
}

/// A refusal with the nearby set (module doc).
fn refuse(
    policy: Policy,
    state: &FabricState,
    options: SliceOptions,
    job: &JobRequest,
    alloc: &Allocation,
    why: String,
) -> Result<Given, PlacementError> {
    let topo = state.topology();
    let mut leaves: Vec<LeafId> = alloc
        .servers()
        .iter()
        .map(|&s| topo.server(s).leaf)
        .collect();
    leaves.dedup();
    let same_leaves: Vec<ServerId> = leaves
        .iter()
        .flat_map(|&l| topo.leaf(l).servers.iter().copied())
        .collect();
    let mut suggested = Vec::new();
    for view in [state.only_servers(&same_leaves), state.clone()] {
        if let Outcome::Placed(d) = placer_on(policy, view, options)?.place(job)? {
            suggested = decision_servers(topo, &d);
            break;
        }
    }
    Ok(Given::Refused(Refusal { why, suggested }))
}

/// The GPUs a decision holds, by topology index, in its order (names
/// the topology does not have are skipped: an admitted decision has none).
pub fn decision_gpus(topo: &Topology, d: &Decision) -> Vec<(ServerId, u16)> {
    (d.gpus.iter())
        .filter_map(|g| Some((topo.server_id(&g.server)?, g.gpu)))
        .collect()
}

/// The servers a decision holds GPUs on, sorted.
pub fn decision_servers(topo: &Topology, d: &Decision) -> Vec<ServerId> {
    let mut s: Vec<ServerId> = d
        .gpus
        .iter()
        .filter_map(|g| topo.server_id(&g.server))
        .collect();
    s.sort_unstable();
    s.dedup();
    s
}

fn leaf_names(topo: &Topology, servers: &[ServerId]) -> String {
    let mut names: Vec<&str> = servers
        .iter()
        .map(|&s| &*topo.leaf(topo.server(s).leaf).name)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
