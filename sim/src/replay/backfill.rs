//! EASY backfilling: which waiting jobs may start behind a blocked head.
//!
//! Source: D. Lifka, "The ANL/IBM SP scheduling system" (JSSPP 1995), as
//! analysed by A. Mu'alem and D. Feitelson, "Utilization, Predictability,
//! Workloads, and User Runtime Estimates in Scheduling the IBM SP2 with
//! Backfilling" (IEEE TPDS 12(6), 2001), Section 2; it is what Slurm's
//! `sched/backfill` does for the highest-priority pending job. With
//! head-of-line blocking alone ([`super::QueuePolicy`]) one job that does
//! not fit holds every job behind it, however small (issue 13).
//!
//! When the head is blocked at time `now`:
//!
//! 1. **Reservation (the "shadow time").** Running jobs are taken in the
//!    order of their *estimated* ends (`start + duration_s`: the trace's
//!    duration plays the user's runtime estimate, as a Slurm time limit
//!    does; under `fair-share` a job may run longer, which only makes the
//!    estimate optimistic). The shadow time is the first estimated end at
//!    which the free GPUs would reach what the head needs; the *extra*
//!    GPUs are what would be free beyond that at that time.
//! 2. **Candidates.** The next `depth` waiting jobs in queue order (like
//!    Slurm's `bf_max_job_test`, and by default as many: 500,
//!    `DEF_BF_MAX_JOB_TEST` in Slurm's `src/plugins/sched/backfill/backfill.c`),
//!    each tried once per change of the
//!    fabric: a job refused since the last release is not tried again
//!    until a job ends, because admissions only take resources away.
//! 3. **The rule.** A candidate may start if it fits now (the placer
//!    decides, with every constraint of its policy) and either it is
//!    estimated to end by the shadow time, or it takes no more than the
//!    extra GPUs (which it then uses up). Either way the head's
//!    reservation is not delayed by GPU count.
//!
//! **What this does not guarantee** (EASY's own limit, and one more on a
//! network-aware fabric): the reservation counts GPUs, not slices. Under
//! vClos a backfilled job that holds the extra GPUs past the shadow time
//! can hold links or spine ports the head's slice would have used, so the
//! head may still wait longer; and a head whose size needs whole servers
//! is counted at `ceil(N / T)` servers' GPUs. The replay measures the net
//! effect (`backfilled_jobs`, the head's JWT in `p99_jwt_s` / `max_jwt_s`).
//!
//! **Slice reservations (`--backfill slices`).** The head's reservation is
//! its future *slice* instead ([`Slice`]): the placer forecasts where the
//! head would be placed once running jobs have ended in their estimated
//! order (`vclos_core::placement::forecast`, starting where the GPUs
//! alone would suffice), and the first time that lets it in is the shadow
//! time. A job behind it may start if it fits now and either ends by then
//! or shares no GPU, uplink, spine port or OCS port with the forecast
//! slice: it is placed with what of the slice is free now masked
//! (`Placer::place_apart`, `vclos_core::state::FabricState::mask`), as
//! Slurm keeps a job that would still run at a reservation's start off the
//! reserved nodes. [`Slice::overlaps`] checks the result anyway (a policy
//! without masks gets its decision taken back). Until 2026-12-02 the job
//! was placed as usual and taken back if it touched the slice: on the hard
//! traces masking needs a third fewer `place` calls and halves the
//! replay's wall, while avg JCT moves by -7% to +9.5% per trace (worse on
//! every vclos trace, by 1-10%: a job that may not take its preferred
//! slice takes a worse fitting one; docs/performance.md, "Masked
//! reservations").
//! The forecast is kept while the same head waits (jobs ending only free
//! resources, and backfilled ones avoid it) and made again for a new head
//! or, when there was none, after a job ends. Policies without forecasts
//! (all but vClos and OCS-vClos) fall back to the GPU count above. A head
//! whose reserved slice is free as a whole starts on it without a search
//! (`Placer::admit_reserved`, counted as `reserved_starts`), as Slurm
//! starts a job on the nodes reserved for it: the slice is what the placer
//! chose for it on the state the reservation waited for, and is checked by
//! what it held there (`FabricState::admit_held`), not by name. Until
//! 2026-12-07 the head was placed by a full search first, and started on
//! the slice only when that search (bounded, on a state with jobs placed
//! apart from the slice) found nothing; 73% of the searches chose the
//! reserved slice anyway (`u8k` seed 2), and a head's search is a large
//! job's, the slowest calls of a replay (docs/performance.md, "Heads start
//! on their reservation"). Heads that still start after their reserved
//! time (under `fair-share` jobs run past their estimates) are counted
//! (`late_heads`).

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::queue::Key;
use crate::names::JobId;
use crate::placement::forecast::Forecast;
use crate::state::{self, FabricState};

/// `--backfill`: may jobs start behind a blocked head?
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backfill {
    /// Strict head-of-line blocking (the paper's scheduler).
    #[default]
    None,
    /// EASY backfilling (module doc), trying up to `depth` jobs behind the
    /// head per change of the fabric.
    Easy { depth: usize },
    /// EASY with the head's forecast slice as its reservation (module doc).
    Slices { depth: usize },
}

impl Backfill {
    /// Jobs tried behind the head per change of the fabric (0: none).
    pub fn depth(self) -> usize {
        match self {
            Backfill::None => 0,
            Backfill::Easy { depth } | Backfill::Slices { depth } => depth,
        }
    }
}

/// Jobs tried behind the head when `--backfill-depth` is not given:
/// Slurm's default `bf_max_job_test` (module doc). It was 100 (Slurm's
/// default before); 500 lowers avg JCT on most hard traces, by up to 26%
/// (one of twelve measured rose by 3.6%), at a similar replay wall
/// (docs/performance.md, "Backfill depth").
pub const DEFAULT_DEPTH: usize = 500;

impl fmt::Display for Backfill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backfill::None => f.write_str("none"),
            Backfill::Easy { .. } => f.write_str("easy"),
            Backfill::Slices { .. } => f.write_str("slices"),
        }
    }
}

impl FromStr for Backfill {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Backfill::None),
            "easy" => Ok(Backfill::Easy {
                depth: DEFAULT_DEPTH,
            }),
            "slices" => Ok(Backfill::Slices {
                depth: DEFAULT_DEPTH,
            }),
            _ => Err(format!(
                "unknown backfill `{s}` (expected none, easy or slices)"
            )),
        }
    }
}

/// Running jobs by estimated end, with the GPUs each holds.
#[derive(Debug, Default)]
pub(crate) struct Running {
    by_end: BTreeSet<Key>,
    /// GPUs held per trace job (0 when not running).
    gpus: Vec<u32>,
    /// GPUs held in all.
    held: u64,
}

impl Running {
    pub fn new(jobs: usize) -> Self {
        Running {
            by_end: BTreeSet::new(),
            gpus: vec![0; jobs],
            held: 0,
        }
    }

    pub fn start(&mut self, idx: usize, estimated_end: f64, gpus: u32) {
        if self.by_end.insert(Key(estimated_end, idx)) {
            self.gpus[idx] = gpus;
            self.held += u64::from(gpus);
        }
    }

    pub fn finish(&mut self, idx: usize, estimated_end: f64) {
        if self.by_end.remove(&Key(estimated_end, idx)) {
            self.held -= u64::from(std::mem::take(&mut self.gpus[idx]));
        }
    }

    pub fn held(&self) -> u64 {
        self.held
    }

    /// Running jobs by estimated end: (estimated end, trace job).
    pub fn by_end(&self) -> Vec<(f64, usize)> {
        self.by_end.iter().map(|k| (k.0, k.1)).collect()
    }

    /// How many running jobs (by estimated end) must end before `need`
    /// of `total` GPUs are free.
    pub fn ends_for(&self, total: u64, need: u64) -> usize {
        let mut free = total.saturating_sub(self.held);
        for (i, k) in self.by_end.iter().enumerate() {
            if free >= need {
                return i;
            }
            free += u64::from(self.gpus[k.1]);
        }
        self.by_end.len()
    }

    /// The head's reservation on a fabric of `total` GPUs: (shadow time,
    /// extra GPUs then) for a head needing `need` GPUs, at `now`. A head
    /// that more than the whole fabric would not satisfy gets an infinite
    /// shadow time and no extra GPUs.
    pub fn reservation(&self, total: u64, need: u64, now: f64) -> Reservation {
        let mut free = total.saturating_sub(self.held);
        if free >= need {
            return Reservation {
                shadow: now,
                extra: free - need,
            };
        }
        for k in &self.by_end {
            free += u64::from(self.gpus[k.1]);
            if free >= need {
                return Reservation {
                    shadow: k.0.max(now),
                    extra: free - need,
                };
            }
        }
        Reservation {
            shadow: f64::INFINITY,
            extra: 0,
        }
    }
}

/// The head's reservation (module doc, step 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reservation {
    pub shadow: f64,
    pub extra: u64,
}

impl Reservation {
    /// May a job of `gpus` GPUs estimated to run `duration` start at `now`
    /// (step 3, before asking the placer)? If it may only by using extra
    /// GPUs, they are taken when [`Reservation::take`] is called.
    pub fn allows(&self, now: f64, duration: f64, gpus: u64) -> Allowed {
        if now + duration <= self.shadow {
            Allowed::EndsBefore
        } else if gpus <= self.extra {
            Allowed::Extra
        } else {
            Allowed::No
        }
    }

    /// A job started under [`Allowed::Extra`] with `gpus` GPUs.
    pub fn take(&mut self, gpus: u64) {
        self.extra = self.extra.saturating_sub(gpus);
    }
}

/// [`Reservation::allows`]'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allowed {
    EndsBefore,
    Extra,
    /// Past the head's reserved time, sharing nothing with its slice.
    Apart,
    No,
}

/// A blocked head's forecast slice (module doc, "Slice reservations"):
/// when it is reserved from, and what it holds.
#[derive(Debug)]
pub(crate) struct Slice {
    pub at: f64,
    /// The forecast: its decision, which a blocked head starts on when
    /// it is free ([`crate::placement::Placer::admit_reserved`]), and its
    /// reservation, which a job placed apart from it is kept off
    /// ([`crate::placement::Placer::place_apart`]).
    pub forecast: Forecast,
    /// [`Slice::idle_gpus`] on the state version it was counted on: every
    /// job tried behind the head asks, and the state changes only when
    /// one starts.
    idle: Cell<Option<(u64, u64)>>,
}

impl Slice {
    /// The slice of forecast `fc`, reserved from `at`.
    pub fn new(at: f64, fc: Forecast) -> Self {
        Slice {
            at,
            forecast: fc,
            idle: Cell::new(None),
        }
    }

    /// What a job placed apart from it is kept off.
    pub fn reservation(&self) -> &state::Reservation {
        &self.forecast.reservation
    }

    /// Whether admitted job `job` holds a GPU or a link port of this slice
    /// in `state`.
    pub fn overlaps(&self, state: &FabricState, job: &JobId) -> bool {
        (state.held_reservation(job)).is_some_and(|r| r.overlaps(self.reservation()))
    }

    /// May a job of `gpus` GPUs estimated to run `duration` start at `now`
    /// with `free` GPUs free in `state`: if it ends by [`Slice::at`], or
    /// else apart from the slice ([`Allowed::Apart`]; first only if the
    /// GPUs outside it suffice).
    pub fn allows(
        &self,
        now: f64,
        duration: f64,
        gpus: u64,
        free: u64,
        state: &FabricState,
    ) -> Allowed {
        if now + duration <= self.at {
            Allowed::EndsBefore
        } else if gpus <= free.saturating_sub(self.idle_gpus(state)) {
            Allowed::Apart
        } else {
            Allowed::No
        }
    }

    /// How many of its GPUs are idle in `state` now: a job that runs past
    /// [`Slice::at`] has only the other idle GPUs. Kept per state version
    /// (versions are unique in the process, `FabricState::version`).
    pub fn idle_gpus(&self, state: &FabricState) -> u64 {
        let version = state.version();
        if let Some((_, idle)) = self.idle.get().filter(|&(at, _)| at == version) {
            return idle;
        }
        let idle = self.count_idle(state);
        self.idle.set(Some((version, idle)));
        idle
    }

    fn count_idle(&self, state: &FabricState) -> u64 {
        let idle = self
            .reservation()
            .gpus()
            .iter()
            .filter(|&&(s, g)| state.gpu_holder(s, g).is_none());
        idle.count() as u64
    }
}

/// GPUs a head of `gpus` GPUs is counted at: whole servers beyond one
/// server (the policies that take whole servers; for those that do not,
/// this only reserves a little more than needed).
pub(crate) fn head_need(gpus: u32, per_server: u32) -> u64 {
    if per_server == 0 || gpus <= per_server {
        u64::from(gpus)
    } else {
        u64::from(gpus.div_ceil(per_server) * per_server)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The idle GPUs of a reserved slice are those of the state asked
    /// about, as it changes (counted once per state version).
    #[test]
    fn a_slices_idle_gpus_follow_the_state() {
        use crate::placement::{placer, JobRequest, Outcome, Policy};
        let topo = crate::topology::generate::uniform_topology(2, 2, 2, 0);
        let all = topo.gpu_count() as u32;
        let mut p = placer(Policy::Vclos, topo).unwrap();
        let id = |s: &str| JobId::new(s).unwrap();
        let holder = JobRequest::new(id("h"), all);
        assert!(matches!(p.place(&holder).unwrap(), Outcome::Placed(_)));
        let head = JobRequest::new(id("j"), all / 2);
        let fc = p.forecast(&head, &[id("h")], 0).unwrap().unwrap();
        let slice = Slice::new(10.0, fc);
        let size = slice.reservation().gpus().len() as u64;
        assert_eq!(size, u64::from(all / 2));
        assert_eq!(slice.idle_gpus(p.fabric().unwrap()), 0);
        assert_eq!(slice.idle_gpus(p.fabric().unwrap()), 0);
        p.release(&id("h")).unwrap();
        assert_eq!(slice.idle_gpus(p.fabric().unwrap()), size);
        let small = JobRequest::new(id("s"), 1);
        assert!(matches!(p.place(&small).unwrap(), Outcome::Placed(_)));
        let held = u64::from(
            slice
                .reservation()
                .gpus()
                .iter()
                .any(|&(s, g)| p.fabric().unwrap().gpu_holder(s, g).is_some()),
        );
        assert_eq!(slice.idle_gpus(p.fabric().unwrap()), size - held);
    }

    #[test]
    fn the_shadow_time_is_the_first_estimated_end_that_frees_enough() {
        let mut r = Running::new(4);
        r.start(0, 100.0, 32);
        r.start(1, 50.0, 16);
        r.start(2, 200.0, 8);
        // 64 GPUs, 56 held, 8 free.
        assert_eq!(r.held(), 56);
        assert_eq!(
            r.reservation(64, 8, 10.0),
            Reservation {
                shadow: 10.0,
                extra: 0
            }
        );
        // 24 needed: job 1 (ends 50) frees 16 -> 24 free.
        assert_eq!(
            r.reservation(64, 24, 10.0),
            Reservation {
                shadow: 50.0,
                extra: 0
            }
        );
        // 40 needed: jobs 1 and 0 (ends 50, 100) -> 56 free, 16 extra.
        assert_eq!(
            r.reservation(64, 40, 10.0),
            Reservation {
                shadow: 100.0,
                extra: 16
            }
        );
        // More than the fabric: never.
        assert_eq!(r.reservation(64, 65, 10.0).shadow, f64::INFINITY);
        // An estimate already past is taken as now.
        assert_eq!(r.reservation(64, 24, 70.0).shadow, 70.0);
        r.finish(1, 50.0);
        assert_eq!(r.held(), 40);
        // Finishing twice changes nothing.
        r.finish(1, 50.0);
        assert_eq!(r.held(), 40);
    }

    #[test]
    fn a_candidate_ends_before_the_shadow_or_fits_in_the_extra_gpus() {
        let mut res = Reservation {
            shadow: 100.0,
            extra: 16,
        };
        assert_eq!(res.allows(10.0, 90.0, 64), Allowed::EndsBefore);
        assert_eq!(res.allows(10.0, 91.0, 16), Allowed::Extra);
        assert_eq!(res.allows(10.0, 91.0, 17), Allowed::No);
        res.take(16);
        assert_eq!(res.allows(10.0, 91.0, 1), Allowed::No);
        assert_eq!(res.allows(10.0, 90.0, 1), Allowed::EndsBefore);
    }

    #[test]
    fn heads_beyond_a_server_count_whole_servers() {
        assert_eq!(head_need(6, 8), 6);
        assert_eq!(head_need(8, 8), 8);
        assert_eq!(head_need(12, 8), 16);
        assert_eq!(head_need(12, 0), 12);
    }

    #[test]
    fn names_parse_and_print() {
        assert_eq!("none".parse::<Backfill>(), Ok(Backfill::None));
        assert_eq!(
            "easy".parse::<Backfill>(),
            Ok(Backfill::Easy {
                depth: DEFAULT_DEPTH
            })
        );
        assert_eq!(
            "slices".parse::<Backfill>(),
            Ok(Backfill::Slices {
                depth: DEFAULT_DEPTH
            })
        );
        assert!("conservative".parse::<Backfill>().is_err());
        assert_eq!(Backfill::Easy { depth: 3 }.to_string(), "easy");
        assert_eq!(Backfill::Slices { depth: 3 }.to_string(), "slices");
        assert_eq!(Backfill::Slices { depth: 3 }.depth(), 3);
        assert_eq!(Backfill::None.depth(), 0);
    }

    #[test]
    fn the_ends_that_free_enough_gpus_are_counted_by_estimated_end() {
        let mut r = Running::new(3);
        r.start(0, 300.0, 8);
        r.start(1, 100.0, 16);
        r.start(2, 200.0, 8);
        assert_eq!(r.by_end(), vec![(100.0, 1), (200.0, 2), (300.0, 0)]);
        // 64 GPUs, 32 held: 40 needs the first end, 48 too, 56 two.
        assert_eq!(r.ends_for(64, 32), 0);
        assert_eq!(r.ends_for(64, 40), 1);
        assert_eq!(r.ends_for(64, 48), 1);
        assert_eq!(r.ends_for(64, 56), 2);
        assert_eq!(r.ends_for(64, 65), 3);
    }
}
