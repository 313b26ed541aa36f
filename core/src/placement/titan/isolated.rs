//! `titan` on a real fabric (issue 15 item 1: `plan --policy titan`,
//! `job submit --policy titan`, the HTTP API's `policy`): Titan's choice of
//! GPUs (Eq. 1: fewest idle servers, then fewest servers) kept only where
//! the fabric's own policy, vClos or OCS-vClos, can give it an isolated
//! slice, so every job on the devices still has its contention-free part
//! of the network.
//!
//! **Why not titan's own placements.** Titan's check ([`super`] module
//! doc) routes every flow of every phase on its own equal-cost path, so
//! one GPU's flows of different phases may cross different spines. A
//! vClos leaf steers each server-facing port to one uplink (source
//! routing, vClos paper Section 5.1), and a spine separates jobs by VRF
//! (Section 5.2): a titan route is a slice only where each GPU's flows
//! share one uplink. Rather than a second routing rule, the fabric policy
//! decides: what it places is isolated by its own proof (Lemma 5.1).
//!
//! **How, per job** (docs/titan.md 3.4):
//! 1. Titan's candidates on the free GPUs, in titan's order (the
//!    [`super`] module doc's 1-5; no routing). Candidate 5, "the roomiest
//!    leaves", counts a leaf's room in free uplinks: in a slice each GPU
//!    leaves its leaf over an uplink of its own (Stage 2's `l x s` virtual
//!    Clos), so a leaf gives at most `min(free GPUs, free uplinks)`.
//! 2. A candidate under one leaf is admitted as it is (stage `server` or
//!    `leaf`, as titan's decisions): its traffic crosses only its leaf,
//!    a non-blocking switch, and there is nothing between leaves to
//!    configure (docs/decisions.md, "server" and "leaf").
//! 3. A candidate over several leaves is offered to the fabric policy as
//!    named GPUs ([`given::place_exactly`]): its slice over exactly those
//!    GPUs (Stage 2's biclique over unused links, OCS-vClos's rewiring of
//!    idle OCS ports, Section 7), or a refusal. A slice takes the same
//!    number of GPUs from each of its leaves (Lemma 5.1's leaf-wise
//!    permutation), so an uneven candidate is refused by counting, with no
//!    search; a job of at most one server's GPUs is never split across
//!    leaves (vClos's locality rule, Section 6.1), so its multi-leaf
//!    candidates are skipped.
//! 4. When no candidate places, the fabric policy places the job as it
//!    would without titan (whole servers, the paper's engine), or says why
//!    it is blocked; so titan blocks no job the fabric policy would place.
//!
//! So every decision is one the fabric policy makes or one that needs no
//! network at all, and titan's Eq. 1 order decides which.
//!
//! **Measured** (docs/titan.md 3.4; `vclos replay --on-fabric`, 4096 GPUs,
//! sizes any multiple of 2 up to 256, 5 traces each at loads 0.75 and
//! 0.9): avg JWT 0.85x and 0.99x vclos's in all. Falling back to the
//! fabric policy with `--partial-servers` instead waited longer, 1.14x
//! and 1.10x vclos's: a partial-server slice spreads a job's GPUs over
//! more leaves' uplinks, which the next multi-leaf jobs then lack.
//!
//! **Options.** `--sharing` goes to the fabric policy (steps 3 and 4).
//! `--partial-servers` is refused as for titan, which always uses partly
//! used servers; `--round-up` is refused: titan takes exactly its GPUs.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{candidates, fill, local_stage, most_first, Free, Pick};
use crate::decision::Decision;
use crate::names::JobId;
use crate::placement::given::{self, Allocation};
use crate::placement::plan::Plan;
use crate::placement::{
    commit, placer_on, release_held, Blocked, JobRequest, Outcome, PlacementError, Placer, Policy,
    SliceOptions,
};
use crate::state::FabricState;
use crate::topology::{LeafId, ServerId};

/// `titan` over the fabric policy's isolation (module doc).
#[derive(Debug, Clone)]
pub struct IsolatedTitan {
    state: FabricState,
    /// vclos or ocs-vclos: what isolates a multi-leaf candidate.
    under: Policy,
    /// `--sharing`, for `under`.
    options: SliceOptions,
}

impl IsolatedTitan {
    /// Titan on `state`, isolating with `under` (vclos or ocs-vclos).
    pub fn new(
        under: Policy,
        state: FabricState,
        options: SliceOptions,
    ) -> Result<Self, PlacementError> {
        if !matches!(under, Policy::Vclos | Policy::OcsVclos) {
            return Err(PlacementError::Engine {
                policy: "titan",
                reason: format!("titan on a fabric isolates with vclos or ocs-vclos, not {under}"),
            });
        }
        for (set, option) in [
            (options.partial_servers, "--partial-servers"),
            (options.round_up != 0, "--round-up"),
        ] {
            if set {
                return Err(PlacementError::NotForPolicy {
                    policy: Policy::Titan,
                    option,
                });
            }
        }
        Ok(IsolatedTitan {
            state,
            under,
            options,
        })
    }

    /// Steps 1-3 of the module doc: the first candidate placed, if any
    /// (not yet held).
    fn choose(&self, job: &JobRequest, free: &Free) -> Result<Option<Chosen>, PlacementError> {
        let topo = Arc::clone(self.state.topology());
        let n = job.gpus;
        let room = |free: &Free| self.roomiest(n, free);
        for (_, pick) in candidates(&topo, n, free, room) {
            let gpus = self.gpus(&pick);
            let leaves: BTreeSet<LeafId> = gpus.iter().map(|&(s, _)| topo.server(s).leaf).collect();
            if leaves.len() == 1 {
                return Ok(Some(Chosen::Local(gpus)));
            }
            if n <= u32::from(topo.gpus_per_server) {
                continue; // the locality rule: one server's worth stays in a leaf
            }
            let alloc = Allocation::Gpus(gpus);
            if let Ok(d) = given::place_exactly(self.under, &self.state, self.options, job, &alloc)?
            {
                return Ok(Some(Chosen::Slice(d)));
            }
        }
        Ok(None)
    }

    /// A pick's GPUs: the lowest free indices of each server, in its order.
    fn gpus(&self, pick: &Pick) -> Vec<(ServerId, u16)> {
        (pick.iter())
            .flat_map(|&(s, c)| {
                (self.state.free_gpu_indices(s))
                    .take(usize::from(c))
                    .map(move |g| (s, g))
            })
            .collect()
    }

    /// Candidate 5 on a fabric: leaves by `min(free GPUs, free uplinks)`,
    /// most first (module doc, step 1).
    fn roomiest(&self, n: u32, free: &Free) -> Option<Pick> {
        let leaves = most_first((0..free.idle.len()).map(|l| {
            let uplinks = self.state.free_uplinks(LeafId(l as u32)).count() as u32;
            (free.on_leaf(l).min(uplinks), l)
        }));
        fill(n, free, &leaves)
    }

    /// Step 4: the fabric policy as `job submit` without titan places.
    fn fallback(&self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        placer_on(self.under, self.state.clone(), self.options)?.place(job)
    }

    /// Hold `d`, checked again by name against the whole state (it was
    /// placed on a masked view, or by another placer).
    fn hold(&mut self, d: Arc<Decision>) -> Result<Outcome, PlacementError> {
        self.state.admit(&d).map_err(|e| PlacementError::Engine {
            policy: "titan",
            reason: e.to_string(),
        })?;
        Ok(Outcome::Placed(d))
    }
}

/// What [`IsolatedTitan::choose`] found.
enum Chosen {
    /// Under one leaf: GPUs in rank order, nothing to configure.
    Local(Vec<(ServerId, u16)>),
    /// The fabric policy's slice over a multi-leaf candidate.
    Slice(Arc<Decision>),
}

impl Placer for IsolatedTitan {
    fn name(&self) -> &'static str {
        "titan"
    }

    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let Some(free) = Free::for_job(&self.state, job)? else {
            return Ok(Outcome::Blocked(Blocked::Gpu));
        };
        match self.choose(job, &free)? {
            Some(Chosen::Local(gpus)) => {
                let stage = local_stage(self.state.topology(), &gpus);
                commit(&mut self.state, "titan", job, &Plan::local(stage, gpus))
            }
            Some(Chosen::Slice(d)) => self.hold(d),
            None => match self.fallback(job)? {
                Outcome::Placed(d) => self.hold(d),
                blocked => Ok(blocked),
            },
        }
    }

    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        release_held(&mut self.state, job)
    }

    fn fabric(&self) -> Option<&FabricState> {
        Some(&self.state)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::decision::Stage;
    use crate::placement::{Rng, SliceOptions};
    use crate::topology::generate::uniform_topology;
    use crate::topology::Topology;

    fn req(id: &str, gpus: u32) -> JobRequest {
        JobRequest::new(JobId::new(id).unwrap(), gpus)
    }

    /// Hold GPUs `(server, gpu)` for job `id`, with no network.
    fn hold(state: &mut FabricState, id: &str, gpus: &[(u32, u16)]) {
        let gpus: Vec<(ServerId, u16)> = gpus.iter().map(|&(s, g)| (ServerId(s), g)).collect();
        let plan = Plan::local(local_stage(state.topology(), &gpus), gpus);
        let d = plan.to_decision(state.topology(), &JobId::new(id).unwrap());
        state.admit(&d).unwrap();
    }

    fn titan(state: &FabricState) -> IsolatedTitan {
        let under = Policy::of_fabric(state.topology());
        IsolatedTitan::new(under, state.clone(), SliceOptions::default()).unwrap()
    }

    fn placed(o: Outcome) -> Arc<Decision> {
        match o {
            Outcome::Placed(d) => d,
            b => panic!("not placed: {b:?}"),
        }
    }

    /// `(server, gpu)` of a decision, sorted.
    fn gpus_of(topo: &Topology, d: &Decision) -> Vec<(u32, u16)> {
        let mut v: Vec<(u32, u16)> = (d.gpus.iter())
            .map(|g| (topo.server_id(&g.server).unwrap().0, g.gpu))
            .collect();
        v.sort_unstable();
        v
    }

    /// Servers of `d` that were idle in `before`.
    fn idle_taken(before: &FabricState, d: &Decision) -> usize {
        let topo = before.topology();
        let servers: BTreeSet<u32> = gpus_of(topo, d).into_iter().map(|(s, _)| s).collect();
        (servers.iter())
            .filter(|&&s| before.server_idle(ServerId(s)))
            .count()
    }

    /// Two leaves of four 4-GPU servers, two GPUs held on two servers of
    /// each: titan's optimum is those eight free GPUs, four per leaf, and
    /// the fabric policy isolates exactly them (source routes, a slice
    /// over unused links), where vclos with partial servers takes idle
    /// servers. With and without OCS.
    #[test]
    fn a_multi_leaf_optimum_gets_the_fabric_policys_slice() {
        for ocs in [0, 2] {
            let topo = uniform_topology(2, 16, 4, ocs);
            let mut st = FabricState::new(Arc::clone(&topo));
            for (i, s) in [0, 1, 4, 5].into_iter().enumerate() {
                hold(&mut st, &format!("h{i}"), &[(s, 0), (s, 1)]);
            }
            let d = placed(titan(&st).place(&req("j", 8)).unwrap());
            let want: Vec<(u32, u16)> =
                (([0, 1, 4, 5].into_iter()).flat_map(|s| [(s, 2), (s, 3)])).collect();
            assert_eq!(gpus_of(&topo, &d), want, "ocs {ocs}: {d:?}");
            assert!(!matches!(d.stage, Stage::Manual | Stage::Leaf), "{d:?}");
            assert_eq!(d.source_routes.len(), 8, "{d:?}");
            assert_eq!(d.requested_gpus, Some(8));
            let mut all: Vec<Decision> = st.decisions().into_iter().cloned().collect();
            all.push(Decision::clone(&d));
            FabricState::from_decisions(Arc::clone(&topo), &all).unwrap();
            // The fabric policy alone, even with partial servers, takes
            // idle servers for it.
            let partial = SliceOptions {
                partial_servers: true,
                ..SliceOptions::default()
            };
            let under = Policy::of_fabric(&topo);
            let mut v = placer_on(under, st.clone(), partial).unwrap();
            let v = placed(v.place(&req("j", 8)).unwrap());
            assert_eq!(idle_taken(&st, &d), 0);
            assert!(idle_taken(&st, &v) >= 2, "{v:?}");
        }
    }

    /// `--sharing` goes to the fabric policy: the multi-leaf optimum's
    /// slice is placed in its sharing mode (the decision carries the job's
    /// profile and shift); `--partial-servers` and `--round-up` are refused.
    #[test]
    fn options_go_to_the_fabric_policy_or_are_refused() {
        let topo = uniform_topology(2, 16, 4, 0);
        let mut st = FabricState::new(Arc::clone(&topo));
        for (i, s) in [0, 1, 4, 5].into_iter().enumerate() {
            hold(&mut st, &format!("h{i}"), &[(s, 0), (s, 1)]);
        }
        let sharing = SliceOptions {
            sharing: Some(crate::placement::shared::SharingMode::default()),
            ..SliceOptions::default()
        };
        let mut t = IsolatedTitan::new(Policy::Vclos, st.clone(), sharing).unwrap();
        let d = placed(t.place(&req("j", 8)).unwrap());
        assert_eq!(d.source_routes.len(), 8, "{d:?}");
        assert_eq!(
            d.sharing.as_ref().map(|s| s.time_shift_ms),
            Some(0),
            "{d:?}"
        );
        for refused in [
            SliceOptions {
                partial_servers: true,
                ..SliceOptions::default()
            },
            SliceOptions {
                round_up: 1,
                ..SliceOptions::default()
            },
        ] {
            let e = IsolatedTitan::new(Policy::Vclos, st.clone(), refused).unwrap_err();
            assert!(matches!(e, PlacementError::NotForPolicy { .. }), "{e}");
        }
        let e = IsolatedTitan::new(Policy::Best, st, SliceOptions::default()).unwrap_err();
        assert!(e.to_string().contains("vclos or ocs-vclos"), "{e}");
    }

    /// One GPU held on a server: a 7-GPU job takes its three free GPUs and
    /// one idle server under the same leaf (Eq. 1: one idle server, not
    /// two), with nothing to configure; the fabric policy holds two whole
    /// idle servers.
    #[test]
    fn a_one_leaf_candidate_is_admitted_without_a_slice() {
        let topo = uniform_topology(2, 16, 4, 2);
        let mut st = FabricState::new(Arc::clone(&topo));
        hold(&mut st, "h", &[(1, 0)]);
        let d = placed(titan(&st).place(&req("j", 7)).unwrap());
        assert_eq!(d.stage, Stage::Leaf, "{d:?}");
        assert_eq!((d.gpus.len(), d.requested_gpus), (7, Some(7)));
        let servers: BTreeSet<u32> = gpus_of(&topo, &d).into_iter().map(|(s, _)| s).collect();
        assert!(servers.contains(&1) && servers.len() == 2, "{d:?}");
        assert!(
            d.source_routes.is_empty() && d.vclos.links.is_empty(),
            "{d:?}"
        );
        assert_eq!(idle_taken(&st, &d), 1);
        let mut v = placer_on(Policy::OcsVclos, st.clone(), SliceOptions::default()).unwrap();
        let v = placed(v.place(&req("j", 7)).unwrap());
        assert_eq!((idle_taken(&st, &v), v.gpus.len()), (2, 8), "{v:?}");
    }

    /// Three leaves of two 4-GPU servers, three GPUs held on one server:
    /// a 10-GPU job fits no leaf, and titan's multi-leaf candidates take
    /// unequal GPUs per leaf (4 + 6, 8 + 2), which no slice can; the job
    /// gets exactly the fabric policy's decision.
    #[test]
    fn uneven_candidates_fall_back_to_the_fabric_policy() {
        let topo = uniform_topology(3, 8, 4, 0);
        let mut st = FabricState::new(Arc::clone(&topo));
        hold(&mut st, "h", &[(0, 0), (0, 1), (0, 2)]);
        let d = placed(titan(&st).place(&req("j", 10)).unwrap());
        let mut v = placer_on(Policy::Vclos, st.clone(), SliceOptions::default()).unwrap();
        assert_eq!(d, placed(v.place(&req("j", 10)).unwrap()));
        assert!(d.source_routes.len() >= 10, "{d:?}");
    }

    /// Random jobs placed and released on small fabrics with and without
    /// OCS: every state titan leaves is valid on an isolated fabric
    /// (checked again from the decisions by name, so every multi-leaf job
    /// has its complete slice), titan holds exactly the GPUs it was asked
    /// for except where it fell back, and it blocks no job the fabric
    /// policy would place.
    #[test]
    fn titan_on_a_fabric_keeps_isolation_and_blocks_no_more() {
        let mut rng = Rng(7);
        let mut slices = 0;
        for (leaves, spines, ocs) in [(3, 8, 0), (4, 8, 2), (4, 16, 0)] {
            let topo = uniform_topology(leaves, spines, 4, ocs);
            let mut t = titan(&FabricState::new(Arc::clone(&topo)));
            let mut held: Vec<JobId> = Vec::new();
            for i in 0..400 {
                if !held.is_empty() && rng.below(3) == 0 {
                    let j = held.swap_remove(rng.below(held.len() as u64) as usize);
                    t.release(&j).unwrap();
                    continue;
                }
                let job = req(&format!("j{i}"), 1 + rng.below(14) as u32);
                let mut v = placer_on(t.under, t.state.clone(), SliceOptions::default()).unwrap();
                let fallback = match v.place(&job).unwrap() {
                    Outcome::Placed(d) => Some(d),
                    Outcome::Blocked(_) => None,
                };
                match t.place(&job).unwrap() {
                    Outcome::Placed(d) => {
                        held.push(job.id.clone());
                        let all: Vec<Decision> = t.state.decisions().into_iter().cloned().collect();
                        FabricState::from_decisions(Arc::clone(&topo), &all).unwrap();
                        let exact = d.gpus.len() == job.gpus as usize;
                        assert!(exact || fallback.as_ref() == Some(&d), "{d:?}");
                        slices += usize::from(!d.source_routes.is_empty());
                    }
                    Outcome::Blocked(b) => assert!(fallback.is_none(), "{job:?} {b:?}"),
                }
            }
        }
        assert!(slices > 20, "too few multi-leaf jobs to test: {slices}");
    }
}
