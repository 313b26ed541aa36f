//! Trace replay: a discrete-event run of a job trace through a [`Placer`].
//!
//! Only two kinds of event exist — a job arrives, a job completes. How long
//! a job runs depends on the network model ([`ReplayOptions::network`]):
//! `ideal`, exactly its trace duration; `fair-share`
//! ([`crate::network::model`]), its duration stretched by the links it
//! shares with other jobs, recomputed at every start and completion. At
//! each event time the replay
//!
//! 1. releases every job completing at that time (so freed resources are
//!    visible to jobs starting at the same instant),
//! 2. enqueues every job arriving at that time,
//! 3. repeatedly tries the queue head ([`QueuePolicy`]) until the head is
//!    blocked — head-of-line blocking, as in the paper — or the queue is
//!    empty;
//! 4. with `--backfill easy`, while the head is blocked, starts jobs behind
//!    it that do not delay its reservation (`backfill`).
//!
//! A blocked head is retried only after something changed (a release, or a
//! different job reached the head), since a placer decides on its state
//! alone. A size with no slice on the *empty* fabric is not waited for:
//! the engine places it in the smallest larger shape that has one
//! ([`crate::placement::sizing`]; the report counts `rounded_jobs` and the
//! GPUs they hold idle), and refuses it if none exists
//! ([`PlacementError::NoShape`]), which drops it as `unplaceable` at once
//! (issue 13: each such job used to wait until the whole fabric drained). A
//! head blocked while nothing runs is dropped as `unplaceable` too. A job
//! larger than the fabric ([`PlacementError::TooLarge`]) is dropped as
//! `rejected`.
//!
//! Each decision also goes through an independent [`Ledger`] that audits
//! isolation from the decisions themselves; see its module doc. It runs on
//! a thread of its own beside the replay (module `auditor`).

mod auditor;
mod backfill;
mod intern;
mod ledger;
mod occupancy;
mod queue;
mod records;
mod report;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use thiserror::Error;

pub use auditor::AuditFailed;
pub use backfill::{Backfill, DEFAULT_DEPTH as DEFAULT_BACKFILL_DEPTH};
pub use ledger::{initial_patches, Audit, Ledger};
pub use queue::QueuePolicy;
pub use records::{write_csv as write_job_records, Fate, JobRecord, StartedAs};
pub use report::{percentile, Report};

use crate::decision::Decision;
use crate::names::JobId;
use crate::network::model::{Congestion, Contention};
use crate::network::routes::{Router, Unknown};
use crate::placement::rearrange::{Move, Moves};
use crate::placement::{Blocked, JobRequest, Outcome, PlacementError, Placer};
use crate::sharing::profile::{Profile, Profiles};
use crate::topology::Topology;
use crate::trace::Job;
use auditor::Auditor;
use backfill::{Allowed, Running, Slice};
use occupancy::Occupancy;
use queue::{Key, Queue};

/// How to run a replay.
#[derive(Debug, Default)]
pub struct ReplayOptions {
    pub queue: QueuePolicy,
    /// May jobs start behind a blocked head ([`Backfill`]; default: no).
    pub backfill: Backfill,
    /// Topology name, copied into the report.
    pub topology: String,
    /// GPUs in the fabric, for the utilisation figure.
    pub total_gpus: Option<u32>,
    /// The isolation ledger to audit with (use [`Ledger::from_topology`] so
    /// OCS circuits are checked too).
    pub ledger: Ledger,
    /// The network model: `None` is `ideal`; a router (built for the
    /// policy, [`crate::network::routes::Routing::for_policy`]) runs the
    /// `fair-share` model.
    pub network: Option<Router>,
    /// Multi-phase profiles by model, for a placer in a sharing mode
    /// (`--profiles`; `None`: every job's Up-Down default from its row).
    pub profiles: Option<Profiles>,
    /// How the fair-share model treats links shared by jobs placed in a
    /// sharing mode ([`Congestion`]; `Fair`: as every other link).
    pub congestion: Congestion,
    /// Running jobs whose links a network-blocked job may move, tried per
    /// blocked call (`--rearrange`, [`Placer::rearrange`]; 0: never, the
    /// paper's engine), and in which order their links change (`--moves`).
    pub rearrange: usize,
    pub moves: Moves,
    /// Keep one [`JobRecord`] per job in [`Report::job_records`]
    /// (`--jobs-out`); off by default, as a 10^7-job trace's records would
    /// take gigabytes.
    pub job_records: bool,
}

impl ReplayOptions {
    /// A replay on `topo`: its name and GPU count in the report and its
    /// isolation ledger; everything else as [`ReplayOptions::default`]
    /// (FIFO, no backfilling, the ideal network).
    pub fn for_topology(topo: &Topology) -> Self {
        ReplayOptions {
            topology: topo.name.clone(),
            total_gpus: u32::try_from(topo.gpu_count()).ok(),
            ledger: Ledger::from_topology(topo),
            ..ReplayOptions::default()
        }
    }
}

/// Failures that end a replay (bugs in a placer, not blocked jobs).
#[derive(Debug, Error)]
pub enum ReplayError {
    #[error("placer `{policy}` failed on job `{job}`: {source}")]
    Placement {
        policy: &'static str,
        job: JobId,
        #[source]
        source: PlacementError,
    },
    #[error("placer `{policy}` returned a decision for job `{got}` when asked to place `{asked}`")]
    WrongJob {
        policy: &'static str,
        asked: JobId,
        got: JobId,
    },
    #[error("trace is not sorted by arrival at job `{0}` (use trace::parse, which sorts)")]
    Unsorted(JobId),
    #[error("network model: {0}")]
    Route(#[from] Unknown),
    #[error("cannot start the isolation audit's thread: {0}")]
    AuditThread(#[source] std::io::Error),
    #[error(transparent)]
    Audit(#[from] AuditFailed),
}

/// Replay progress, reported after each event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Jobs finished (completed or dropped) so far.
    pub done: usize,
    pub total: usize,
}

/// Replay `trace` (sorted by arrival) through `placer`.
pub fn replay(
    placer: &mut dyn Placer,
    trace: &[Job],
    opts: ReplayOptions,
) -> Result<Report, ReplayError> {
    replay_with_progress(placer, trace, opts, &mut |_| {})
}

/// What happened to one job.
#[derive(Debug, Default, Clone)]
struct JobState {
    start: Option<f64>,
    end: Option<f64>,
    dropped: bool,
    blocked_gpu: bool,
    blocked_network: bool,
    /// Why its latest `place` call was refused.
    blocked_by: Option<Blocked>,
    /// [`HeadBlocked::total`] when it was queued; from its start, its wait
    /// split by the head's cause.
    waited: [f64; 2],
    /// Its `place` calls refused on GPUs, on the network.
    refused: [u32; 2],
    /// For its [`JobRecord`]: what its decision held, and how it started.
    slice: Option<Started>,
}

/// What a started job's [`JobRecord`] says of its decision.
#[derive(Debug, Clone, Copy)]
struct Started {
    held: u32,
    stage: &'static str,
    leaves: u32,
    spines: u32,
    role: StartedAs,
}

/// Where the waits come from ([`Report::avg_jwt_gpu_s`]): while a job is
/// queued the queue's head is blocked (else it would start), so each
/// job's wait is the time the head was blocked while it was queued, by the
/// head's cause. `total` adds that time up since the replay began, by
/// cause (GPU, network); a job's split is `total` at its start less
/// `total` when it was queued.
#[derive(Debug, Default)]
struct HeadBlocked {
    since: f64,
    total: [f64; 2],
}

impl HeadBlocked {
    /// Time goes on to `now` with the head blocked for `cause` (none:
    /// the queue was empty).
    fn advance(&mut self, now: f64, cause: Option<Blocked>) {
        if let Some(c) = cause {
            self.total[usize::from(c == Blocked::Network)] += now - self.since;
        }
        self.since = now;
    }
}

/// [`replay`], calling `progress` after each event time.
pub fn replay_with_progress(
    placer: &mut dyn Placer,
    trace: &[Job],
    opts: ReplayOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report, ReplayError> {
    let began = Instant::now();
    if let Some(w) = trace.windows(2).find(|w| w[1].arrival_s < w[0].arrival_s) {
        return Err(ReplayError::Unsorted(w[1].id.clone()));
    }
    let fair_share = opts.network.is_some();
    let opts_congestion = opts.congestion;
    let per_server = placer.fabric().map(|f| f.topology().gpus_per_server);
    let occupancy = opts
        .total_gpus
        .zip(per_server)
        .map(|(total, t)| Occupancy::new(u64::from(total), u32::from(t)));
    let mut run = Run {
        placer,
        trace,
        queue: Queue::new(opts.queue),
        audit: Auditor::spawn(opts.ledger).map_err(ReplayError::AuditThread)?,
        profiles: opts.profiles,
        state: vec![JobState::default(); trace.len()],
        completions: BinaryHeap::new(),
        network: (opts.network)
            .map(|r| Contention::new(r, trace.len()).with_congestion(opts.congestion)),
        decision_ns: Vec::with_capacity(trace.len() * 2),
        occupancy,
        report: Report::new(opts.queue, &opts.topology, trace.len()),
        done: 0,
        backfill: Filler {
            mode: opts.backfill,
            running: Running::new(trace.len()),
            refused_in: vec![u64::MAX; trace.len()],
            epoch: 0,
            total_gpus: opts.total_gpus.map_or(0, u64::from),
            per_server: per_server.map_or(0, u32::from),
            reserved: None,
        },
        head_blocked: HeadBlocked::default(),
        rearrange: (opts.rearrange, opts.moves),
        records: opts.job_records,
        index: if opts.rearrange > 0 {
            (trace.iter().enumerate())
                .map(|(i, j)| (j.id.clone(), i))
                .collect()
        } else {
            HashMap::new()
        },
    };
    run.report.policy = run.placer.name().to_string();
    run.report.rearrange = opts.rearrange;
    if opts.rearrange > 0 {
        run.report.moves = opts.moves.to_string();
    }
    run.report.backfill = opts.backfill.to_string();
    run.report.backfill_depth = opts.backfill.depth();
    if fair_share {
        run.report.network = "fair-share".to_string();
        run.report.congestion = format!("{:?}", opts_congestion).to_lowercase();
    }

    let mut next = 0;
    // The head that was last found blocked, while nothing has been released.
    let mut stuck_head: Option<usize> = None;
    loop {
        let arrival = trace.get(next).map(|j| j.arrival_s);
        let completion = run.next_completion().map(|c| c.0);
        let now = match (arrival, completion) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(c)) => c,
            (Some(a), Some(c)) => a.min(c),
        };
        let cause = stuck_head.and_then(|h| run.state[h].blocked_by);
        run.head_blocked.advance(now, cause);
        while let Some((end, idx)) = run.next_completion() {
            if end > now {
                break;
            }
            run.completions.pop();
            run.finish(idx, end)?;
            stuck_head = None;
        }
        while let Some(job) = trace.get(next) {
            if job.arrival_s > now {
                break;
            }
            run.queue.push(next, job);
            run.state[next].waited = run.head_blocked.total;
            next += 1;
        }
        run.report.max_queue = run.report.max_queue.max(run.queue.len());
        if run.queue.head() != stuck_head {
            stuck_head = run.schedule(now)?;
        }
        if let Some(head) = stuck_head {
            run.fill_behind(head, now)?;
        }
        progress(Progress {
            done: run.done,
            total: trace.len(),
        });
    }
    let mut report = run.into_report(opts.total_gpus)?;
    report.wall_ms = began.elapsed().as_secs_f64() * 1e3;
    Ok(report)
}

struct Run<'a> {
    placer: &'a mut dyn Placer,
    trace: &'a [Job],
    queue: Queue,
    audit: Auditor,
    profiles: Option<Profiles>,
    state: Vec<JobState>,
    /// Completion times under the `ideal` model.
    completions: BinaryHeap<Reverse<Key>>,
    /// The `fair-share` model, when it runs (then `completions` stays empty).
    network: Option<Contention>,
    decision_ns: Vec<u64>,
    /// GPU fragmentation and servers per job, when the fabric's GPUs and
    /// GPUs per server are known.
    occupancy: Option<Occupancy>,
    report: Report,
    done: usize,
    backfill: Filler,
    head_blocked: HeadBlocked,
    /// [`ReplayOptions::rearrange`], and the trace index of every job id
    /// (built only when it is on: a move names its job).
    rearrange: (usize, Moves),
    index: HashMap<JobId, usize>,
    /// [`ReplayOptions::job_records`].
    records: bool,
}

/// What `--backfill` needs beyond the queue (module [`backfill`]).
struct Filler {
    mode: Backfill,
    running: Running,
    /// Per trace job, the epoch in which it was last refused behind the
    /// head (`u64::MAX`: never).
    refused_in: Vec<u64>,
    /// Releases so far: a job refused in this epoch would be refused again.
    epoch: u64,
    total_gpus: u64,
    per_server: u32,
    /// `--backfill slices`: the blocked head's forecast, if made.
    reserved: Option<Reserved>,
}

/// A blocked head's slice reservation (`--backfill slices`, module
/// [`backfill`]): made for `head` in `epoch`; `slice` is `None` when the
/// forecast found none (made again after the next job ends).
struct Reserved {
    head: usize,
    epoch: u64,
    slice: Option<Slice>,
}

/// Who a `place` call is for: the queue's head, a job behind it, or a job
/// behind it that must share nothing with the head's reserved slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Head,
    Behind,
    Apart,
}

/// What one `place` call did to a queued job.
enum Tried {
    Started,
    Blocked,
    Dropped,
}

impl Run<'_> {
    /// Start jobs from the head until it blocks; return the blocked head.
    fn schedule(&mut self, now: f64) -> Result<Option<usize>, ReplayError> {
        while let Some(idx) = self.queue.head() {
            if let Tried::Blocked = self.try_place(idx, now, Role::Head)? {
                if self.running_jobs() > 0 {
                    return Ok(Some(idx));
                }
                // Nothing runs and the fabric is still too small.
                let job = &self.trace[idx];
                tracing::warn!(job = %job.id, gpus = job.gpus, "job can never be placed; dropped");
                self.queue.remove(idx, job);
                self.drop_job(idx);
                self.report.unplaceable += 1;
            }
        }
        Ok(None)
    }

    /// EASY backfilling behind the blocked `head` ([`backfill`] module
    /// doc), its reservation counted in GPUs or, with `--backfill slices`,
    /// the head's forecast slice.
    fn fill_behind(&mut self, head: usize, now: f64) -> Result<(), ReplayError> {
        let depth = self.backfill.mode.depth();
        if depth == 0 {
            return Ok(());
        }
        let f = &self.backfill;
        let need = backfill::head_need(self.trace[head].gpus, f.per_server);
        let mut reservation = f.running.reservation(f.total_gpus, need, now);
        if let Backfill::Slices { .. } = self.backfill.mode {
            self.reserve(head, need, now)?;
        }
        for idx in self.queue.behind_head(depth) {
            let job = &self.trace[idx];
            let gpus = u64::from(job.gpus);
            let free = (self.backfill.total_gpus).saturating_sub(self.backfill.running.held());
            if self.backfill.refused_in[idx] == self.backfill.epoch || gpus > free {
                continue;
            }
            let allowed = match (self.reserved_slice(), self.placer.fabric()) {
                (Some(s), Some(st)) => s.allows(now, job.duration_s, gpus, free, st),
                _ => reservation.allows(now, job.duration_s, gpus),
            };
            let role = match allowed {
                Allowed::No => continue,
                Allowed::Apart => Role::Apart,
                Allowed::EndsBefore | Allowed::Extra => Role::Behind,
            };
            match self.try_place(idx, now, role)? {
                Tried::Started => {
                    self.report.backfilled_jobs += 1;
                    if allowed == Allowed::Extra {
                        reservation.take(gpus);
                    }
                }
                Tried::Blocked => self.backfill.refused_in[idx] = self.backfill.epoch,
                Tried::Dropped => {}
            }
        }
        Ok(())
    }

    /// `--backfill slices`: forecast the blocked `head`'s slice once the
    /// running jobs end in their estimated order, from where `need` GPUs
    /// would be free; kept while the same head waits, or made again after
    /// a job ends when there was none ([`backfill`] module doc).
    fn reserve(&mut self, head: usize, need: u64, now: f64) -> Result<(), ReplayError> {
        let f = &self.backfill;
        let kept = |r: &Reserved| r.head == head && (r.slice.is_some() || r.epoch == f.epoch);
        if f.reserved.as_ref().is_some_and(kept) {
            return Ok(());
        }
        let slice = self.forecast_slice(head, need, now)?;
        self.backfill.reserved = Some(Reserved {
            head,
            epoch: self.backfill.epoch,
            slice,
        });
        Ok(())
    }

    /// The slice job `idx` would take once running jobs end in their
    /// estimated order, from where `need` GPUs would be free (counted in
    /// `reservations` and `reservation_ms`).
    fn forecast_slice(
        &mut self,
        idx: usize,
        need: u64,
        now: f64,
    ) -> Result<Option<Slice>, ReplayError> {
        let t0 = Instant::now();
        let f = &self.backfill;
        let by_end = f.running.by_end();
        let from = f.running.ends_for(f.total_gpus, need);
        let ends: Vec<JobId> = by_end
            .iter()
            .map(|&(_, i)| self.trace[i].id.clone())
            .collect();
        let forecast = (self.placer)
            .forecast(&self.request(idx), &ends, from)
            .map_err(|source| self.failed(idx, source))?;
        let slice = forecast.map(|fc| Slice::new(by_end[fc.ended - 1].0.max(now), fc));
        self.report.reservations += 1;
        self.report.reservation_ms += t0.elapsed().as_secs_f64() * 1e3;
        Ok(slice)
    }

    /// The placement request for trace job `idx`.
    fn request(&self, idx: usize) -> JobRequest {
        let job = &self.trace[idx];
        JobRequest {
            id: job.id.clone(),
            gpus: job.gpus,
            collective: Some(job.workload.collective),
            model: job.workload.model.clone(),
            profile: Some(self.profiles.as_ref().map_or_else(
                || Profile::of_workload(&job.workload),
                |p| p.of_workload(&job.workload),
            )),
        }
    }

    /// Whether decision `d` for a job started under [`Role::Apart`] at
    /// `now` would take part of the head's reserved slice: then it is taken
    /// back and the job counts as refused.
    fn takes_the_heads_slice(&mut self, idx: usize, d: &Decision) -> Result<bool, ReplayError> {
        let Some(st) = self.placer.fabric() else {
            return Ok(false);
        };
        if !self
            .reserved_slice()
            .is_some_and(|s| s.overlaps(st, &d.job))
        {
            return Ok(false);
        }
        self.release(idx)?;
        Ok(true)
    }

    /// Start head `idx` on its reserved slice if that is free as a whole
    /// ([`Placer::admit_reserved`]), before any search: the slice is what
    /// the placer chose for it on the state the reservation waited for
    /// ([`backfill`] module doc).
    fn start_on_reservation(&mut self, idx: usize) -> Result<Option<Arc<Decision>>, ReplayError> {
        let r = self.backfill.reserved.as_ref().filter(|r| r.head == idx);
        let Some(slice) = r.and_then(|r| r.slice.as_ref()) else {
            return Ok(None);
        };
        // Before its reserved time a GPU of it is mostly still held.
        let idle = (self.placer.fabric()).map_or(0, |st| slice.idle_gpus(st));
        if idle < slice.reservation().gpus().len() as u64 {
            return Ok(None);
        }
        let started = self.placer.admit_reserved(&slice.forecast);
        let started = started.map_err(|e| self.failed(idx, e))?;
        self.report.reserved_starts += u64::from(started.is_some());
        Ok(started)
    }

    /// The blocked head's reserved slice, if one was forecast.
    fn reserved_slice(&self) -> Option<&Slice> {
        (self.backfill.reserved.as_ref()).and_then(|r| r.slice.as_ref())
    }

    /// Release trace job `idx` from the placer: its decision as held (the
    /// audit may hold it too).
    fn release(&mut self, idx: usize) -> Result<Arc<Decision>, ReplayError> {
        let job = &self.trace[idx].id;
        self.placer
            .release_shared(job)
            .map_err(|source| self.failed(idx, source))
    }

    /// The placer failed on trace job `idx` (a bug in it, not a block).
    fn failed(&self, idx: usize, source: PlacementError) -> ReplayError {
        ReplayError::Placement {
            policy: self.placer.name(),
            job: self.trace[idx].id.clone(),
            source,
        }
    }

    /// A head started at `now`: late if its reserved slice was for earlier.
    fn head_started(&mut self, idx: usize, now: f64) {
        let r = self.backfill.reserved.as_ref().filter(|r| r.head == idx);
        if r.and_then(|r| r.slice.as_ref())
            .is_some_and(|s| now > s.at + 1e-6)
        {
            self.report.late_heads += 1;
        }
    }

    /// One `place` call for queued job `idx`: started and dequeued,
    /// blocked (still queued), or dropped and dequeued. Only the queue's
    /// head ([`Role::Head`]) may move running jobs' links (`--rearrange`): a
    /// job backfilled behind it starts only where it fits as things are,
    /// and under [`Role::Apart`] only apart from the head's reserved slice.
    fn try_place(&mut self, idx: usize, now: f64, role: Role) -> Result<Tried, ReplayError> {
        let head = role == Role::Head;
        let job = &self.trace[idx];
        let request = self.request(idx);
        let unsettled = self.placer.unsettled_searches();
        let t0 = Instant::now();
        let reserved = if head {
            self.start_on_reservation(idx)?
        } else {
            None
        };
        let slice = (self.backfill.reserved.as_ref()).and_then(|r| r.slice.as_ref());
        let mut outcome = match (reserved, role, slice) {
            (Some(d), _, _) => Ok(Outcome::Placed(d)),
            (None, Role::Apart, Some(s)) => self.placer.place_apart(&request, s.reservation()),
            _ => self.placer.place(&request),
        };
        let mut moves = Vec::new();
        let (tries, order) = self.rearrange;
        if head && tries > 0 && outcome == Ok(Outcome::Blocked(Blocked::Network)) {
            if let Some(r) = self.placer.rearrange(&request, tries, order).transpose() {
                outcome = r.map(|r| {
                    moves = r.moves;
                    Outcome::Placed(r.placed)
                });
            }
        }
        self.decision_ns
            .push(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
        self.report.place_calls += 1;
        let unplaceable = match outcome {
            Ok(Outcome::Placed(d)) => {
                if role == Role::Apart && self.takes_the_heads_slice(idx, &d)? {
                    return Ok(Tried::Blocked);
                }
                if head {
                    self.head_started(idx, now);
                }
                self.queue.remove(idx, job);
                self.apply_moves(&moves, now)?;
                self.start(idx, now, &d, role)?;
                return Ok(Tried::Started);
            }
            Ok(Outcome::Blocked(cause)) => {
                let unproven = self.placer.unsettled_searches() > unsettled;
                self.blocked(idx, cause, unproven);
                return Ok(Tried::Blocked);
            }
            Err(PlacementError::NoShape { .. }) => {
                tracing::warn!(job = %job.id, gpus = job.gpus, "no slice of this size or larger exists; dropped");
                true
            }
            Err(PlacementError::TooLarge { .. } | PlacementError::Empty(_)) => {
                tracing::warn!(job = %job.id, gpus = job.gpus, "job larger than the fabric; rejected");
                false
            }
            Err(source) => return Err(self.failed(idx, source)),
        };
        self.queue.remove(idx, job);
        self.drop_job(idx);
        if unplaceable {
            self.report.unplaceable += 1;
        } else {
            self.report.rejected += 1;
        }
        Ok(Tried::Dropped)
    }

    /// Running jobs' links moved before a blocked job starts
    /// ([`Placer::rearrange`]): the ledger audits each job's new links
    /// against every other holder, the network model carries it on them
    /// with its progress kept. A move costs the job no time here in either
    /// order; on a fabric a break-before-make move would pause it for one
    /// transaction (module doc of `vclos_core::placement::rearrange`).
    fn apply_moves(&mut self, moves: &[Move], now: f64) -> Result<(), ReplayError> {
        if !moves.is_empty() {
            self.report.rearranged_jobs += 1;
        }
        for m in moves {
            let Some(&idx) = self.index.get(&m.job) else {
                return Err(ReplayError::Placement {
                    policy: self.placer.name(),
                    job: m.job.clone(),
                    source: PlacementError::UnknownJob(m.job.clone()),
                });
            };
            self.audit.finish(idx);
            self.audit.start(idx, &m.to);
            if let Some(n) = &mut self.network {
                n.reroute(idx, now, &m.to, self.trace[idx].workload.collective)?;
            }
            self.report.moved_jobs += 1;
        }
        Ok(())
    }

    fn running_jobs(&self) -> usize {
        match &self.network {
            Some(n) => n.running(),
            None => self.completions.len(),
        }
    }

    /// The earliest completion to come: (time, trace job).
    fn next_completion(&mut self) -> Option<(f64, usize)> {
        match &mut self.network {
            Some(n) => n.next_completion(),
            None => self.completions.peek().map(|Reverse(k)| (k.0, k.1)),
        }
    }

    fn start(
        &mut self,
        idx: usize,
        now: f64,
        d: &Arc<Decision>,
        role: Role,
    ) -> Result<(), ReplayError> {
        let job = &self.trace[idx];
        if d.job != job.id {
            return Err(ReplayError::WrongJob {
                policy: self.placer.name(),
                asked: job.id.clone(),
                got: d.job.clone(),
            });
        }
        self.audit.start(idx, d);
        if let Some(o) = &mut self.occupancy {
            o.start(now, d, job.workload.collective);
        }
        let Held {
            beyond,
            partial,
            split,
        } = held(self.placer, job.gpus, d);
        self.report.partial_server_jobs += u64::from(partial);
        self.report.split_small_jobs += u64::from(split);
        if beyond > 0 {
            self.report.rounded_jobs += 1;
            self.report.reserved_idle_gpus += u64::from(beyond);
            self.report.reserved_idle_gpu_s += f64::from(beyond) * job.duration_s;
        }
        *self
            .report
            .stages
            .entry(d.stage.name().to_string())
            .or_insert(0) += 1;
        let (s, total) = (&mut self.state[idx], self.head_blocked.total);
        s.slice = Some(Started::of(d, job.gpus, role.started_as()));
        s.start = Some(now);
        s.waited = [total[0] - s.waited[0], total[1] - s.waited[1]];
        // What the decision holds (a rounded slice holds more than asked).
        let held = (d.gpus.len() as u32).max(job.gpus);
        self.backfill.running.start(idx, now + job.duration_s, held);
        match &mut self.network {
            Some(n) => n.start(idx, now, job.duration_s, &job.workload, d)?,
            None => self
                .completions
                .push(Reverse(Key(now + job.duration_s, idx))),
        }
        Ok(())
    }

    fn finish(&mut self, idx: usize, end: f64) -> Result<(), ReplayError> {
        let d = self.release(idx)?;
        let job = &self.trace[idx];
        self.audit.finish(idx);
        if let Some(o) = &mut self.occupancy {
            o.finish(end, &d, job.workload.collective);
        }
        if let Some(n) = &mut self.network {
            n.finish(idx, end);
        }
        self.state[idx].end = Some(end);
        if let Some(start) = self.state[idx].start {
            self.backfill.running.finish(idx, start + job.duration_s);
        }
        self.backfill.epoch += 1;
        self.done += 1;
        Ok(())
    }

    /// Count a refused head attempt; `unproven` when the placer's search
    /// left some shape unsettled during it (a cutoff).
    fn blocked(&mut self, idx: usize, cause: Blocked, unproven: bool) {
        let s = &mut self.state[idx];
        s.blocked_by = Some(cause);
        s.refused[usize::from(cause == Blocked::Network)] += 1;
        match cause {
            Blocked::Gpu => {
                self.report.blocked_attempts_gpu += 1;
                if !s.blocked_gpu {
                    s.blocked_gpu = true;
                    self.report.blocked_gpu += 1;
                }
            }
            Blocked::Network => {
                self.report.blocked_attempts_network += 1;
                self.report.unproven_blocks += u64::from(unproven);
                if !s.blocked_network {
                    s.blocked_network = true;
                    self.report.blocked_network += 1;
                }
            }
        }
    }

    fn drop_job(&mut self, idx: usize) {
        self.state[idx].dropped = true;
        self.done += 1;
    }

    fn into_report(self, total_gpus: Option<u32>) -> Result<Report, ReplayError> {
        let mut r = self.report;
        let mut jwt = Vec::new();
        let mut slowdown = Vec::new();
        let mut sum_jct = 0.0;
        let mut sum_jrt = 0.0;
        let mut waited = [0.0; 2];
        let mut work = 0.0;
        let mut first_arrival = f64::INFINITY;
        let mut last_end: f64 = 0.0;
        for (job, s) in self.trace.iter().zip(&self.state) {
            first_arrival = first_arrival.min(job.arrival_s);
            let (Some(start), Some(end)) = (s.start, s.end) else {
                continue;
            };
            r.completed += 1;
            jwt.push(start - job.arrival_s);
            waited = [waited[0] + s.waited[0], waited[1] + s.waited[1]];
            slowdown.push(slowdown_of(end - start, job.duration_s));
            sum_jct += end - job.arrival_s;
            sum_jrt += end - start;
            work += f64::from(job.gpus) * (end - start);
            last_end = last_end.max(end);
            if job.deadline_s.is_some_and(|d| end > d) {
                r.deadline_misses += 1;
            }
        }
        if r.completed > 0 {
            let n = r.completed as f64;
            r.avg_jwt_s = jwt.iter().sum::<f64>() / n;
            [r.avg_jwt_gpu_s, r.avg_jwt_network_s] = waited.map(|w| w / n);
            r.avg_jct_s = sum_jct / n;
            r.avg_jrt_s = sum_jrt / n;
            jwt.sort_by(f64::total_cmp);
            r.p99_jwt_s = percentile(&jwt, 0.99);
            r.max_jwt_s = jwt.last().copied().unwrap_or(0.0);
            r.makespan_s = last_end - first_arrival;
            r.avg_slowdown = slowdown.iter().sum::<f64>() / n;
            slowdown.sort_by(f64::total_cmp);
            r.p99_slowdown = percentile(&slowdown, 0.99);
        }
        if let Some(net) = &self.network {
            r.contended_jobs = (0..self.trace.len())
                .filter(|&i| net.seen(i).contended)
                .count() as u64;
            r.link_utilization = Some(net.link_utilization(r.makespan_s));
        }
        if let Some(g) = total_gpus.filter(|g| *g > 0) {
            if r.makespan_s > 0.0 {
                r.utilization = Some(work / (f64::from(g) * r.makespan_s));
            }
        }
        let mut ns = self.decision_ns;
        ns.sort_unstable();
        let us: Vec<f64> = ns.iter().map(|n| *n as f64 / 1e3).collect();
        r.decision_p50_us = percentile(&us, 0.50);
        r.decision_p99_us = percentile(&us, 0.99);
        r.decision_max_us = us.last().copied().unwrap_or(0.0);
        if let Some(o) = &self.occupancy {
            r.gpu_fragmentation = o.fragmentation();
            r.avg_servers_per_multi_server_job = o.servers_per_multi_server_job();
            r.machine_fragmentation = o.machine_fragmentation();
            r.avg_used_servers = o.servers_in_use();
            r.avg_cross_server_volume = o.cross_server_volume();
            r.cross_server_traffic = o.cross_server_traffic();
        }
        if self.records {
            r.job_records = (self.trace.iter().zip(&self.state))
                .map(|(job, s)| s.record(job))
                .collect();
        }
        let a = self.audit.audit()?;
        r.isolation_violations = a.isolation_violations;
        r.busy_rewires = a.busy_rewires;
        r.search_cutoffs = self.placer.search_cutoffs();
        r.gpu_conflicts = a.gpu_conflicts;
        r.circuit_mismatches = a.circuit_mismatches;
        r.shared_ports = a.shared_ports;
        r.shared_jobs = a.shared_jobs;
        Ok(r)
    }
}

impl Role {
    fn started_as(self) -> StartedAs {
        match self {
            Role::Head => StartedAs::Head,
            Role::Behind => StartedAs::Behind,
            Role::Apart => StartedAs::Apart,
        }
    }
}

impl Started {
    /// A decision's slice, for a job of `gpus` started in `role`.
    fn of(d: &Decision, gpus: u32, role: StartedAs) -> Self {
        let leaves: std::collections::BTreeSet<_> =
            d.vclos.leaves.iter().map(|v| &v.leaf).collect();
        let spines: std::collections::BTreeSet<_> = d.vclos.spines.iter().collect();
        Started {
            held: (d.gpus.len() as u32).max(gpus),
            stage: d.stage.name(),
            leaves: leaves.len() as u32,
            spines: spines.len() as u32,
            role,
        }
    }
}

impl JobState {
    /// Its [`JobRecord`] once the replay is over.
    fn record(&self, job: &Job) -> JobRecord {
        let fate = match (self.end, self.dropped) {
            (Some(_), _) => Fate::Completed,
            (None, true) => Fate::Dropped,
            (None, false) => Fate::Unfinished,
        };
        let slice = self.slice;
        JobRecord {
            job: job.id.clone(),
            gpus: job.gpus,
            arrival_s: job.arrival_s,
            start_s: self.start,
            end_s: self.end,
            held_gpus: slice.map_or(0, |s| s.held),
            stage: slice.map_or("", |s| s.stage),
            leaves: slice.map_or(0, |s| s.leaves),
            spines: slice.map_or(0, |s| s.spines),
            started_as: slice.map(|s| s.role),
            blocked_gpu: self.refused[0],
            blocked_network: self.refused[1],
            fate,
        }
    }
}

/// How a decision holds its job's GPUs, beyond what the job asked for.
#[derive(Debug, Default)]
struct Held {
    /// GPUs beyond the job's `ceil(N / T)` whole servers (or its `N` GPUs
    /// inside one server, or on partly held servers): what rounding to a
    /// larger shape reserved.
    beyond: u32,
    /// A job beyond one server holding some server only partly
    /// (`--partial-servers`, `titan`).
    partial: bool,
    /// A job of at most one server's GPUs spread over several servers
    /// (only `titan` does that: Titan's `split_small_jobs`).
    split: bool,
}

/// [`Held`] for `d`, a decision for a job of `gpus` GPUs.
fn held(placer: &dyn Placer, gpus: u32, d: &Decision) -> Held {
    let Some(t) = placer
        .fabric()
        .map(|f| u32::from(f.topology().gpus_per_server))
    else {
        return Held::default();
    };
    // Hashed (foldhash): an ordered map's string comparisons per GPU were
    // 2.5% of a backfilling replay at 8192 GPUs.
    let mut per_server: HashMap<&str, u32, foldhash::fast::FixedState> = HashMap::default();
    for g in &d.gpus {
        *per_server.entry(&g.server).or_default() += 1;
    }
    let partial = gpus > t && per_server.values().any(|&n| n < t);
    let own = if gpus > t && !partial {
        gpus.div_ceil(t) * t
    } else {
        gpus
    };
    Held {
        beyond: (d.gpus.len() as u32).saturating_sub(own),
        partial,
        split: gpus <= t && per_server.len() > 1,
    }
}

/// Count of decisions per stage, as the report carries it.
pub type StageCounts = BTreeMap<String, u64>;

#[cfg(test)]
mod tests;

/// JRT / duration; within a relative 1e-9 of 1 it is 1 (the rounding of
/// `start + duration - start`, far below the trace's millisecond precision).
fn slowdown_of(jrt: f64, duration: f64) -> f64 {
    let s = jrt / duration;
    if (s - 1.0).abs() <= 1e-9 {
        1.0
    } else {
        s
    }
}
