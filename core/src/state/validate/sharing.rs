//! Shared links in a decision (issue 16; Cassini, seed 001 Chapter 4).
//!
//! A decision placed in a sharing mode carries `sharing` (its phase, its
//! profile and the links it shares). The rules a shared link obeys, so
//! that a hand-written or corrupted decision cannot smuggle in sharing:
//!
//! * it is one of the decision's reserved links, to a spine (a spine port
//!   separates the jobs by VRF; a leaf-to-leaf circuit could not);
//! * it is either free (the job then holds it alone, as after the jobs it
//!   shared with have gone, e.g. when a state is rebuilt) or held *whole*
//!   (uplink, spine port and OCS hop) by jobs that are all listed in
//!   `with` and were all placed in a sharing mode themselves: a job
//!   placed without one is never shared;
//! * it is used as patched: neither this decision nor a holder made its
//!   OCS circuit, so no release can take the circuit from under a sharer;
//! * at most [`MAX_LINK_JOBS`] jobs share it, and each that lists it as
//!   shared has its own VLAN of `SHARED_VLANS` (its 802.1Q sub-interface
//!   on the link; the job that does not list it keeps the main interface).
//!
//! `titan`'s time-shared links (`time_shared`, no reserved links) only
//! need to exist: a leaf of the fabric and one of its uplinks, each
//! direction listed once.

use std::collections::HashSet;

use super::{Ctx, End};
use crate::decision::{Decision, Sharing};
use crate::intent::addressing::SHARED_VLANS;
use crate::sharing::profile::MAX_PHASES;
use crate::state::{SharedLinkRes, StateError, FREE};
use crate::trace::workload::MAX_ITERATION_MS;

/// Most jobs on one shared link (the unified circle of each is scored
/// per job: `crate::sharing::circle`).
pub const MAX_LINK_JOBS: usize = 8;

/// The shared link of `ends` (uplink, spine port, OCS hop) if it is held
/// now; `None` when it is free (the job holds it alone).
pub(super) fn link(
    cx: &Ctx,
    d: &Decision,
    (leaf, uplink): (&str, &str),
    ends: &[(End, &str, &str)],
) -> Result<Option<SharedLinkRes>, StateError> {
    let occ = cx.st.occ();
    let primary = ends.iter().map(|e| e.0.slot(occ)).find(|&s| s != FREE);
    let Some(primary) = primary else {
        return Ok(None);
    };
    let mut res = SharedLinkRes::default();
    for &(end, dev, port) in ends {
        if end.slot(occ) != primary {
            return Err(cx.invalid(
                dev,
                port,
                "a shared link must be held whole (uplink, spine port, OCS hop) by the jobs it is shared with",
            ));
        }
        match end {
            End::Uplink(i) => res.uplink = i,
            End::Spine(i) => res.spine_port = i,
            End::Ocs(i) => res.ocs_ports.push(i),
        }
    }
    let listed = d.sharing.as_ref().and_then(|sh| {
        sh.links
            .iter()
            .find(|l| &*l.leaf == leaf && &*l.uplink == uplink)
    });
    let holders = cx.st.link_holders(res.uplink, &primary);
    if holders.len() >= MAX_LINK_JOBS {
        return Err(cx.invalid(
            leaf,
            uplink,
            format!("a link is shared by at most {MAX_LINK_JOBS} jobs"),
        ));
    }
    let lay = cx.st.layout();
    for &slot in holders {
        let Some(held) = cx.st.slots[slot as usize].as_ref() else {
            continue;
        };
        let job = &held.decision.job;
        if !listed.is_some_and(|l| l.with.contains(job)) {
            return Err(StateError::Busy {
                job: cx.job.clone(),
                device: leaf.to_string(),
                port: uplink.to_string(),
                holder: job.clone(),
            });
        }
        let theirs = held.decision.sharing.as_ref().and_then(|sh| {
            sh.links
                .iter()
                .find(|l| &*l.leaf == leaf && &*l.uplink == uplink)
        });
        if let (Some(ours), Some(theirs)) = (listed, theirs) {
            if ours.vlan == theirs.vlan {
                return Err(cx.invalid(
                    leaf,
                    uplink,
                    format!(
                        "VLAN {} on this shared link is `{job}`'s sub-interface already",
                        ours.vlan
                    ),
                ));
            }
        }
        if held.decision.sharing.is_none() {
            return Err(cx.invalid(
                leaf,
                uplink,
                format!("held by `{job}`, which was not placed in a sharing mode"),
            ));
        }
        if held.made_circuit(lay, &res.ocs_ports) {
            return Err(cx.invalid(
                leaf,
                uplink,
                format!(
                    "its OCS circuit was made by `{job}`: only links used as patched are shared"
                ),
            ));
        }
    }
    Ok(Some(res))
}

/// The `sharing` section itself: a profile, a shift within it, a score,
/// and shared links that are reserved links of the decision.
pub(super) fn check(cx: &Ctx, d: &Decision, sh: &Sharing) -> Result<(), StateError> {
    let bad = |reason: String| Err(cx.shape("sharing", reason));
    if sh.profile.is_empty() || sh.profile.len() > MAX_PHASES {
        return bad(format!("`profile` needs 1 to {MAX_PHASES} phases"));
    }
    for (i, p) in sh.profile.iter().enumerate() {
        if p.ms == 0 || !(0.0..=1.0).contains(&p.demand) {
            return bad(format!(
                "`profile` phase {i}: at least 1 ms and a demand from 0 to 1"
            ));
        }
    }
    let iteration = sh.iteration_ms();
    if iteration > u64::from(MAX_ITERATION_MS) {
        return bad(format!(
            "the profile's iteration lasts {iteration} ms; at most {MAX_ITERATION_MS}"
        ));
    }
    if u64::from(sh.time_shift_ms) >= iteration {
        return bad(format!(
            "`time_shift_ms` {} is not within the {iteration} ms iteration",
            sh.time_shift_ms
        ));
    }
    if !sh.score.is_finite() || sh.score > 1.0 {
        return bad(format!("`score` {} is not a score (at most 1)", sh.score));
    }
    let mut seen = HashSet::new();
    for l in &sh.links {
        let reserved = d
            .vclos
            .links
            .iter()
            .any(|r| r.leaf == l.leaf && r.uplink == l.uplink);
        if !reserved {
            return bad(format!(
                "shared link {}:{} is not one of the job's reserved links",
                l.leaf, l.uplink
            ));
        }
        if !SHARED_VLANS.contains(&l.vlan) {
            return bad(format!(
                "shared link {}:{}: `vlan` {} is not one of {}-{}",
                l.leaf,
                l.uplink,
                l.vlan,
                SHARED_VLANS.start(),
                SHARED_VLANS.end()
            ));
        }
        if !seen.insert((&l.leaf, &l.uplink)) {
            return bad(format!("shared link {}:{} listed twice", l.leaf, l.uplink));
        }
        if l.with.is_empty() || l.with.len() >= MAX_LINK_JOBS || l.with.contains(&d.job) {
            return bad(format!(
                "shared link {}:{}: `with` names 1 to {} other jobs",
                l.leaf,
                l.uplink,
                MAX_LINK_JOBS - 1
            ));
        }
    }
    time_shared(cx, sh)
}

/// `titan`'s time-shared links name a leaf of the fabric and one of its
/// uplinks, each direction once: the replay lends exactly these.
fn time_shared(cx: &Ctx, sh: &Sharing) -> Result<(), StateError> {
    let mut seen = HashSet::new();
    for t in &sh.time_shared {
        let leaf = cx.leaf(&t.leaf)?;
        let way = if t.up { "up" } else { "down" };
        let uplinks = &cx.st.topology().leaf(leaf).uplinks;
        if !uplinks.contains(&t.uplink) {
            let reason = format!("time-shared link {}:{}: no such uplink", t.leaf, t.uplink);
            return Err(cx.shape("sharing", reason));
        }
        if !seen.insert((&t.leaf, &t.uplink, t.up)) {
            let reason = format!(
                "time-shared link {}:{} ({way}) listed twice",
                t.leaf, t.uplink
            );
            return Err(cx.shape("sharing", reason));
        }
    }
    Ok(())
}
