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

/// The outcome of [`place_on`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Given {
    /// Placed on exactly the named servers; the caller's state does not
    /// hold it yet (plan and apply it as any decision).
    Placed(Arc<Decision>),
    /// No isolated slice over these servers now.
    Refused(Refusal),
}

/// Why a given allocation cannot be isolated now, and a set that can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub why: String,
    /// Servers the policy would place the job on now (empty: none).
    pub suggested: Vec<ServerId>,
}

/// The servers `names` denote, each once, or the error naming the entry.
pub fn resolve<S: AsRef<str>>(
    topo: &Topology,
    job: &JobId,
    names: &[S],
) -> Result<Vec<ServerId>, PlacementError> {
    let bad = |index: usize, reason: String| PlacementError::Given {
        job: job.clone(),
        index: Some(index),
        reason,
    };
    if names.is_empty() || names.len() > MAX_GIVEN_SERVERS {
        return Err(PlacementError::Given {
            job: job.clone(),
            index: None,
            reason: format!(
                "names {} servers; a request names 1 to {MAX_GIVEN_SERVERS}",
                names.len()
            ),
        });
    }
    let mut seen = BTreeMap::new();
    let mut ids = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let name = name.as_ref();
        let id = topo
            .server_id(name)
            .ok_or_else(|| bad(i, format!("`{name}` is not a server of this topology")))?;
        if let Some(first) = seen.insert(id, i) {
            return Err(bad(
                i,
                format!("`{name}` is named twice (also servers[{first}])"),
            ));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// GPUs a job on `servers` asks for when the request does not say: all of
/// them.
pub fn all_gpus(topo: &Topology, servers: &[ServerId]) -> u32 {
    servers.len() as u32 * u32::from(topo.gpus_per_server)
}

/// Place `job` on exactly `servers` with `policy`, as the policy would on
/// a fabric where only they are free (module doc). `state` is not changed.
pub fn place_on(
    policy: Policy,
    state: &FabricState,
    options: SliceOptions,
    job: &JobRequest,
    servers: &[ServerId],
) -> Result<Given, PlacementError> {
    let topo = state.topology();
    check_count(topo, job, servers)?;
    let options = SliceOptions {
        round_up: 0,
        partial_servers: false,
        ..options
    };
    if let Some(why) = busy(state, job.gpus, servers).or_else(|| uneven(topo, servers)) {
        return refuse(policy, state, options, job, servers, why);
    }
    let mut placer = placer_on(policy, state.only_servers(servers), options)?;
    match placer.place(job)? {
        Outcome::Placed(d) => {
            let held = decision_servers(topo, &d);
            let mut want = servers.to_vec();
            want.sort_unstable();
            if held != want {
                return Err(PlacementError::Engine {
                    policy: policy.name(),
                    reason: format!("placed job `{}` beyond the servers it named", job.id),
                });
            }
            Ok(Given::Placed(d))
        }
        Outcome::Blocked(_) => {
            let leaves = leaf_names(topo, servers);
            let why = format!(
                "no isolated slice joins leaves {leaves} now: {policy} finds no set of spines \
                 every one of them reaches over links no other job holds{}",
                if policy == Policy::OcsVclos {
                    ", even after rewiring idle OCS ports"
                } else {
                    ""
                }
            );
            refuse(policy, state, options, job, servers, why)
        }
    }
}

/// The count rule (module doc): `ceil(N / T)` whole servers, one for `N <= T`.
fn check_count(
    topo: &Topology,
    job: &JobRequest,
    servers: &[ServerId],
) -> Result<(), PlacementError> {
    let t = u32::from(topo.gpus_per_server);
    let needs = job.gpus.div_ceil(t).max(1);
    if job.gpus == 0 || servers.len() as u32 != needs {
        return Err(PlacementError::Given {
            job: job.id.clone(),
            index: None,
            reason: format!(
                "asks for {} GPUs, which take {needs} whole server(s) of {t} GPUs, but names {}",
                job.gpus,
                servers.len()
            ),
        });
    }
    Ok(())
}

/// The first named server without the GPUs the job needs there, and who
/// holds them.
fn busy(state: &FabricState, gpus: u32, servers: &[ServerId]) -> Option<String> {
    let topo = state.topology();
    let per = gpus.min(u32::from(topo.gpus_per_server));
    servers.iter().find_map(|&s| {
        let free = u32::from(state.free_gpus(s));
        (free < per).then(|| {
            let holder = (0..topo.gpus_per_server)
                .find_map(|g| state.gpu_holder(s, g))
                .map_or_else(String::new, |j| format!(" (held by job `{j}`)"));
            format!(
                "server `{}` has {free} free GPUs, the job needs {per} there{holder}",
                topo.server(s).name
            )
        })
    })
}

/// The shape rule (module doc): unequal servers per leaf, in words.
fn uneven(topo: &Topology, servers: &[ServerId]) -> Option<String> {
    let mut per_leaf: BTreeMap<LeafId, usize> = BTreeMap::new();
    for &s in servers {
        *per_leaf.entry(topo.server(s).leaf).or_default() += 1;
    }
    let first = *per_leaf.values().next()?;
    if per_leaf.values().all(|&n| n == first) {
        return None;
    }
    let counts: Vec<String> = per_leaf
        .iter()
        .map(|(l, n)| format!("{n} on `{}`", topo.leaf(*l).name))
        .collect();
    Some(format!(
        "an isolated slice takes the same number of servers from each of its leaves \
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
    servers: &[ServerId],
    why: String,
) -> Result<Given, PlacementError> {
    let topo = state.topology();
    let mut leaves: Vec<LeafId> = servers.iter().map(|&s| topo.server(s).leaf).collect();
    leaves.sort_unstable();
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
