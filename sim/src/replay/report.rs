//! The replay report: the figures the paper compares policies by, plus the
//! independent isolation audit. Field names are a stable JSON interface
//! (`vclos replay --json`); add fields, never rename.

use serde::Serialize;

use super::{QueuePolicy, StageCounts};

/// Result of one replay. Times are seconds of simulated time, except
/// `decision_*_us` (wall-clock microseconds per `place` call, blocked
/// attempts included) and `wall_ms` (wall-clock time of the whole replay).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub policy: String,
    pub queue: QueuePolicy,
    /// `none`, or `easy` / `slices` when jobs may start behind a blocked
    /// head (`--backfill`, `super::backfill`).
    pub backfill: String,
    /// Jobs behind the head tried per change of the fabric
    /// (`--backfill-depth`); 0 without backfilling.
    pub backfill_depth: usize,
    pub topology: String,
    /// Jobs in the trace.
    pub jobs: usize,
    pub completed: usize,
    /// Dropped: larger than the fabric.
    pub rejected: usize,
    /// Dropped: no slice of its size or any larger one exists even on the
    /// empty fabric ([`crate::placement::PlacementError::NoShape`]), or
    /// blocked while nothing runs.
    pub unplaceable: usize,
    /// Jobs placed in a larger slice than their own size (whole servers
    /// beyond `ceil(N / T)`: a size with no slice shape, or `--round-up`).
    pub rounded_jobs: u64,
    /// Over those jobs, the GPUs held beyond `ceil(N / T)` whole servers.
    pub reserved_idle_gpus: u64,
    /// The same GPUs times the jobs' run times: GPU-seconds held idle by
    /// rounding (not counted as work in `utilization`).
    pub reserved_idle_gpu_s: f64,
    /// Jobs beyond one server placed on partly held servers
    /// (`--partial-servers`, or `titan`): exactly their GPUs, some server
    /// shared with another job.
    pub partial_server_jobs: u64,
    /// Jobs of at most one server's GPUs placed over several servers (only
    /// `titan` splits them; Titan's `split_small_jobs`).
    pub split_small_jobs: u64,
    /// Mean of start - arrival over completed jobs.
    pub avg_jwt_s: f64,
    /// `avg_jwt_s` split by why the jobs waited: while a job is queued the
    /// queue's head is blocked (else it would start), on GPUs or locality
    /// (`blocked_gpu`'s cause) or on the network (`blocked_network`'s), so
    /// each job's wait is split by the head's cause while it was queued.
    /// The two add up to `avg_jwt_s`; a policy that never blocks on the
    /// network (`best`) waits on GPUs only.
    pub avg_jwt_gpu_s: f64,
    pub avg_jwt_network_s: f64,
    /// Mean of completion - arrival.
    pub avg_jct_s: f64,
    /// Mean of completion - start.
    pub avg_jrt_s: f64,
    pub p99_jwt_s: f64,
    pub max_jwt_s: f64,
    /// Last completion - first arrival.
    pub makespan_s: f64,
    /// The network model: `ideal` (a job runs for exactly its
    /// `duration_s`) or `fair-share` ([`crate::network`]).
    pub network: String,
    /// Under `fair-share`: how links shared by sharing-mode jobs were
    /// modelled (`fair`, `cassini`, `random`, `mltcp`); empty under `ideal`.
    pub congestion: String,
    /// Mean and 99th percentile of JRT / `duration_s` over completed jobs
    /// (exactly 1 when no job was slowed by sharing).
    pub avg_slowdown: f64,
    pub p99_slowdown: f64,
    /// Jobs that shared a fabric link with another job at some time
    /// (`fair-share` only; decisions of `ecmp` hold no links, so sharing
    /// shows here and not in `isolation_violations`).
    pub contended_jobs: u64,
    /// Time-average load of the fabric's directed links over the makespan,
    /// in line rates (`fair-share` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_utilization: Option<f64>,
    /// GPU-seconds run / (GPUs * makespan), when the GPU count is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// Time average of the share of free GPUs that sit on partly used
    /// servers (`occupancy` module doc; Titan's GPU fragmentation), when the
    /// fabric's GPUs are known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_fragmentation: Option<f64>,
    /// Mean distinct servers of the jobs placed on more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_servers_per_multi_server_job: Option<f64>,
    /// Time average of the idle share of the servers in use (Titan's
    /// machine fragmentation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_fragmentation: Option<f64>,
    /// Time average of the servers with a GPU held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_used_servers: Option<f64>,
    /// Mean over placed jobs of what one collective moves between servers,
    /// in vectors of the job's own size (`occupancy` module doc).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_cross_server_volume: Option<f64>,
    /// Time average of that volume summed over the running jobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_server_traffic: Option<f64>,
    /// Jobs that were at least once blocked at the queue head for GPU or
    /// locality reasons (each job counted once for this cause).
    pub blocked_gpu: u64,
    /// Jobs that were at least once blocked at the head although enough
    /// idle servers existed, for lack of network resources (once per job).
    pub blocked_network: u64,
    /// Every failed head attempt, by cause.
    pub blocked_attempts_gpu: u64,
    pub blocked_attempts_network: u64,
    pub place_calls: u64,
    pub max_queue: usize,
    /// Jobs started behind a blocked head (`--backfill easy|slices`).
    pub backfilled_jobs: u64,
    /// `--backfill slices`: forecasts of a blocked head's slice made, the
    /// time they took (ms, in all; not in the decision times), and heads
    /// that started after the time their forecast reserved.
    pub reservations: u64,
    pub reservation_ms: f64,
    pub late_heads: u64,
    /// Heads started on their reserved slice as forecast, once it was
    /// free as a whole, without a search (`--backfill slices`).
    pub reserved_starts: u64,
    /// Running jobs whose links a blocked job may move, tried per call
    /// (`--rearrange`; 0: never).
    pub rearrange: usize,
    /// The order of those moves (`make-before-break`, `break-before-make`;
    /// empty without `--rearrange`).
    pub moves: String,
    /// Jobs placed by moving running jobs' links, and the moves made
    /// (`--rearrange`; each move keeps the job's GPUs).
    pub rearranged_jobs: u64,
    pub moved_jobs: u64,
    pub deadline_misses: u64,
    pub decision_p50_us: f64,
    pub decision_p99_us: f64,
    pub decision_max_us: f64,
    pub isolation_violations: u64,
    pub busy_rewires: u64,
    /// OCS-vClos Stage 3 searches stopped by their node budget: blocks not
    /// proven by the exact search (0 means every `blocked_network` is real).
    /// A question asked again of an unchanged state is answered from the
    /// refusal kept for it, not searched again, and not counted here
    /// (`vclos_core` placement module `refusals`).
    pub search_cutoffs: u64,
    /// Network-blocked attempts (of `blocked_attempts_network`) during
    /// which the search left some shape unsettled, or a kept refusal
    /// resting on such a search answered: the refusals that are not
    /// proofs. `search_cutoffs` counts shapes (every shape a call's
    /// budget did not reach counts, so it grows with the shapes a size
    /// has); this counts calls.
    pub unproven_blocks: u64,
    pub gpu_conflicts: u64,
    pub circuit_mismatches: u64,
    /// Sharing mode (issue 16): ports held by several jobs by agreement
    /// (never counted in `isolation_violations`), and the jobs that
    /// started sharing any.
    pub shared_ports: u64,
    pub shared_jobs: u64,
    /// Decisions per stage (`server`, `leaf`, `vclos`, `ocs-spine`, ...).
    pub stages: StageCounts,
    pub wall_ms: f64,
    /// One record per trace job, in trace order (`vclos replay --jobs-out`,
    /// [`super::JobRecord`]); not part of the JSON report.
    #[serde(skip)]
    pub job_records: Vec<super::JobRecord>,
}

impl Report {
    pub(crate) fn new(queue: QueuePolicy, topology: &str, jobs: usize) -> Self {
        Self {
            policy: String::new(),
            queue,
            backfill: "none".to_string(),
            backfill_depth: 0,
            topology: topology.to_string(),
            jobs,
            completed: 0,
            rejected: 0,
            unplaceable: 0,
            rounded_jobs: 0,
            reserved_idle_gpus: 0,
            reserved_idle_gpu_s: 0.0,
            partial_server_jobs: 0,
            split_small_jobs: 0,
            avg_jwt_s: 0.0,
            avg_jwt_gpu_s: 0.0,
            avg_jwt_network_s: 0.0,
            avg_jct_s: 0.0,
            avg_jrt_s: 0.0,
            p99_jwt_s: 0.0,
            max_jwt_s: 0.0,
            makespan_s: 0.0,
            congestion: String::new(),
            network: "ideal".to_string(),
            avg_slowdown: 0.0,
            p99_slowdown: 0.0,
            contended_jobs: 0,
            link_utilization: None,
            utilization: None,
            gpu_fragmentation: None,
            avg_servers_per_multi_server_job: None,
            machine_fragmentation: None,
            avg_used_servers: None,
            avg_cross_server_volume: None,
            cross_server_traffic: None,
            blocked_gpu: 0,
            blocked_network: 0,
            blocked_attempts_gpu: 0,
            blocked_attempts_network: 0,
            place_calls: 0,
            max_queue: 0,
            backfilled_jobs: 0,
            reservations: 0,
            reservation_ms: 0.0,
            late_heads: 0,
            reserved_starts: 0,
            rearrange: 0,
            moves: String::new(),
            rearranged_jobs: 0,
            moved_jobs: 0,
            deadline_misses: 0,
            decision_p50_us: 0.0,
            decision_p99_us: 0.0,
            decision_max_us: 0.0,
            isolation_violations: 0,
            busy_rewires: 0,
            shared_ports: 0,
            shared_jobs: 0,
            search_cutoffs: 0,
            unproven_blocks: 0,
            gpu_conflicts: 0,
            circuit_mismatches: 0,
            stages: StageCounts::new(),
            wall_ms: 0.0,
            job_records: Vec::new(),
        }
    }
}

/// Nearest-rank percentile of sorted values (`q` in [0, 1]); 0 when empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
