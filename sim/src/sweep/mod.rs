//! `vclos sweep` (issue 14, item 5): a grid of replays (policies x loads x
//! queues x seeds) run in parallel, one CSV row per replay, and the charts
//! of the paper's Table 5/6 and Fig. 13 shapes ([`chart`]).
//!
//! Each (load, seed) pair gets one generated trace ([`crate::trace::generate`],
//! the same generator and model as `vclos trace generate`), shared by every
//! policy and queue of that pair, so policies are compared on the same jobs.
//! Replays are independent and run on a rayon pool (a data-parallel map:
//! rayon's work stealing keeps both cores busy whatever each replay costs);
//! rows come back in grid order, and hold no wall-clock figure, so the same
//! grid gives the same bytes on any machine and any number of threads.

pub mod chart;

use std::fmt::Write as _;
use std::sync::Arc;

use rayon::prelude::*;
use thiserror::Error;

use crate::network::model::Congestion;
use crate::network::routes::{Router, Routing};
use crate::placement::{self, PlacementError, Policy, SharingMode, SliceOptions};
use crate::replay::{self, Backfill, QueuePolicy, ReplayError, ReplayOptions, Report};
use crate::topology::Topology;
use crate::trace::generate::{self, GenError, Params, Sizes};
use crate::trace::Job;

/// A policy as a sweep runs it: `NAME`, then any of `+partial` (with
/// `--partial-servers`, [`SliceOptions::partial_servers`]), `+fabric` (as a
/// real fabric admits jobs, `replay --on-fabric`:
/// [`placement::fabric_placer`], e.g. `titan+fabric`) and one of
/// `+cassini`, `+random`, `+mltcp` (with `--sharing cassini`, the fair-share
/// model playing shared links out with the decisions' time shifts, at
/// random phases, or with MLTCP: [`Congestion`]), so one sweep compares
/// them on the same traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    pub policy: Policy,
    pub partial_servers: bool,
    /// Placed as a real fabric admits jobs ([`placement::fabric_placer`]),
    /// routed by the decisions' slices.
    pub on_fabric: bool,
    /// The sharing mode, and how its shared links are modelled.
    pub sharing: Option<Congestion>,
}

impl From<Policy> for Variant {
    fn from(policy: Policy) -> Self {
        Variant {
            policy,
            partial_servers: false,
            on_fabric: false,
            sharing: None,
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.policy.name())?;
        if self.partial_servers {
            f.write_str(PARTIAL)?;
        }
        if self.on_fabric {
            f.write_str(FABRIC)?;
        }
        if let Some(c) = self.sharing {
            let (suffix, _) = SHARING
                .iter()
                .find(|(_, x)| *x == c)
                .ok_or(std::fmt::Error)?;
            f.write_str(suffix)?;
        }
        Ok(())
    }
}

/// The suffix of a [`Variant`] with partial servers.
const PARTIAL: &str = "+partial";
/// The suffix of a [`Variant`] placed as on a real fabric.
const FABRIC: &str = "+fabric";
/// The suffixes of a [`Variant`] in the sharing mode.
const SHARING: [(&str, Congestion); 3] = [
    ("+cassini", Congestion::Cassini),
    ("+random", Congestion::Random),
    ("+mltcp", Congestion::Mltcp),
];

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut rest = s;
        let mut sharing = None;
        if let Some((suffix, c)) = SHARING.iter().find(|(x, _)| rest.ends_with(x)) {
            rest = &rest[..rest.len() - suffix.len()];
            sharing = Some(*c);
        }
        let on_fabric = match rest.strip_suffix(FABRIC) {
            Some(r) => {
                rest = r;
                true
            }
            None => false,
        };
        let (name, partial_servers) = match rest.strip_suffix(PARTIAL) {
            Some(name) => (name, true),
            None => (rest, false),
        };
        let policy: Policy = name.parse().map_err(|e: placement::UnknownPolicy| {
            format!("{e}; add `{PARTIAL}` for the policy with --partial-servers, `{FABRIC}` for it as a real fabric admits jobs, then `+cassini`, `+random` or `+mltcp` for its sharing mode")
        })?;
        if partial_servers && !policy.whole_servers() {
            return Err(format!("`{s}`: {policy} always takes partly used servers"));
        }
        if on_fabric && !policy.places_on_fabric() {
            return Err(format!(
                "`{s}`: {}",
                placement::PlacementError::NotOnFabric(policy)
            ));
        }
        if sharing.is_some() && !policy.shares() {
            return Err(format!(
                "`{s}`: the sharing mode is for vclos, ocs-vclos and titan"
            ));
        }
        Ok(Variant {
            policy,
            partial_servers,
            on_fabric,
            sharing,
        })
    }
}

/// What to sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub policies: Vec<Variant>,
    pub loads: Vec<f64>,
    pub queues: Vec<QueuePolicy>,
    pub seeds: Vec<u64>,
    /// Jobs per trace.
    pub jobs: u32,
    pub sizes: Sizes,
    /// The `fair-share` network model (else `ideal`).
    pub fair_share: bool,
    /// Backfilling behind a blocked head, in every replay of the grid.
    pub backfill: Backfill,
    /// Servers a blocked job may take beyond its size, in every replay of
    /// the grid (`--round-up`, [`SliceOptions::round_up`]; vclos and
    /// ocs-vclos use it, 0: never).
    pub round_up: u32,
}

/// One replay of the grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub policy: Variant,
    pub load: f64,
    pub queue: QueuePolicy,
    pub seed: u64,
    pub report: Report,
}

#[derive(Debug, Error)]
pub enum SweepError {
    #[error("the grid is empty: give at least one policy, load, queue and seed")]
    Empty,
    #[error("the grid has {0} replays; at most {MAX_RUNS} in one sweep")]
    TooLarge(usize),
    #[error("load {load}, seed {seed}: {source}")]
    Trace {
        load: f64,
        seed: u64,
        #[source]
        source: GenError,
    },
    #[error("policy {policy}: {source}")]
    Placer {
        policy: Variant,
        #[source]
        source: PlacementError,
    },
    #[error("{policy}, load {load}, queue {queue}, seed {seed}: {source}")]
    Replay {
        policy: Variant,
        load: f64,
        queue: QueuePolicy,
        seed: u64,
        #[source]
        source: ReplayError,
    },
    #[error("cannot start {threads} threads: {reason}")]
    Threads { threads: usize, reason: String },
}

/// Most replays in one sweep (a bound on what one command may start).
pub const MAX_RUNS: usize = 10_000;

impl Grid {
    /// Replays in the grid.
    pub fn runs(&self) -> usize {
        self.policies.len() * self.loads.len() * self.queues.len() * self.seeds.len()
    }
}

/// Run `grid` on `topo` with `threads` worker threads (0: one per core),
/// calling `done` after each replay; rows in grid order (load, seed, queue,
/// policy).
pub fn run(
    topo: &Arc<Topology>,
    grid: &Grid,
    threads: usize,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<Row>, SweepError> {
    let n = grid.runs();
    if n == 0 {
        return Err(SweepError::Empty);
    }
    if n > MAX_RUNS {
        return Err(SweepError::TooLarge(n));
    }
    let gpus = u32::try_from(topo.gpu_count()).unwrap_or(u32::MAX);
    let mut traces: Vec<(f64, u64, Vec<Job>)> = Vec::new();
    for &load in &grid.loads {
        for &seed in &grid.seeds {
            let params = Params {
                jobs: grid.jobs,
                gpus,
                load,
                seed,
                sizes: grid.sizes,
            };
            let g = generate::generate(&params).map_err(|source| SweepError::Trace {
                load,
                seed,
                source,
            })?;
            traces.push((load, seed, g.jobs));
        }
    }
    let mut cells = Vec::with_capacity(n);
    for (t, _) in traces.iter().enumerate() {
        for &queue in &grid.queues {
            for &policy in &grid.policies {
                cells.push((t, queue, policy));
            }
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| SweepError::Threads {
            threads,
            reason: e.to_string(),
        })?;
    pool.install(|| {
        cells
            .par_iter()
            .map(|&(t, queue, policy)| {
                let (load, seed, jobs) = &traces[t];
                let row = one(topo, grid, (*load, *seed, jobs), queue, policy);
                done();
                row
            })
            .collect()
    })
}

/// One replay of the grid.
fn one(
    topo: &Arc<Topology>,
    grid: &Grid,
    (load, seed, jobs): (f64, u64, &[Job]),
    queue: QueuePolicy,
    policy: Variant,
) -> Result<Row, SweepError> {
    let options = SliceOptions {
        round_up: grid.round_up,
        partial_servers: policy.partial_servers,
        // Titan time-shares only where no phases meet (its bandwidth
        // guarantee, and its shortest waits: docs/titan.md 6.8).
        sharing: policy.sharing.map(|_| SharingMode {
            min_score: if policy.policy == Policy::Titan && !policy.on_fabric {
                1.0
            } else {
                SharingMode::default().min_score
            },
            ..SharingMode::default()
        }),
    };
    let state = crate::state::FabricState::new(Arc::clone(topo));
    let placer = match policy.on_fabric {
        true => placement::fabric_placer,
        false => placement::placer_on,
    };
    let mut placer = placer(policy.policy, state, options)
        .map_err(|source| SweepError::Placer { policy, source })?;
    // On a fabric every job across leaves has its slice: routed by it.
    let routing = match policy.on_fabric {
        true => Routing::Decision,
        false => Routing::for_policy(policy.policy, seed),
    };
    let opts = ReplayOptions {
        queue,
        backfill: grid.backfill,
        network: grid.fair_share.then(|| Router::new(topo, routing)),
        profiles: None,
        congestion: policy.sharing.unwrap_or_default(),
        ..ReplayOptions::for_topology(topo)
    };
    let report =
        replay::replay(placer.as_mut(), jobs, opts).map_err(|source| SweepError::Replay {
            policy,
            load,
            queue,
            seed,
            source,
        })?;
    Ok(Row {
        policy,
        load,
        queue,
        seed,
        report,
    })
}

/// The CSV columns, in order.
pub const COLUMNS: &[&str] = &[
    "policy",
    "load",
    "queue",
    "seed",
    "network",
    "jobs",
    "completed",
    "unplaceable",
    "avg_jwt_s",
    "avg_jrt_s",
    "avg_jct_s",
    "p99_jwt_s",
    "avg_slowdown",
    "p99_slowdown",
    "contended_jobs",
    "blocked_gpu",
    "blocked_network",
    "isolation_violations",
    "busy_rewires",
    "utilization",
    "gpu_fragmentation",
    "machine_fragmentation",
    "avg_used_servers",
    "cross_server_traffic",
    "partial_server_jobs",
    "split_small_jobs",
    "shared_jobs",
    "avg_jwt_gpu_s",
    "avg_jwt_network_s",
    "backfilled_jobs",
    "rounded_jobs",
    "reserved_idle_gpu_s",
];

/// The rows as CSV (three decimals, no timings: the same grid, the same bytes).
pub fn csv(rows: &[Row]) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for row in rows {
        let r = &row.report;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.6},{:.6},{},{},{},{},{},{:.6},{:.6},{:.6},{:.3},{:.3},{},{},{},{:.3},{:.3},{},{},{:.3}",
            row.policy,
            row.load,
            row.queue,
            row.seed,
            r.network,
            r.jobs,
            r.completed,
            r.unplaceable,
            r.avg_jwt_s,
            r.avg_jrt_s,
            r.avg_jct_s,
            r.p99_jwt_s,
            r.avg_slowdown,
            r.p99_slowdown,
            r.contended_jobs,
            r.blocked_gpu,
            r.blocked_network,
            r.isolation_violations,
            r.busy_rewires,
            r.utilization.unwrap_or(0.0),
            r.gpu_fragmentation.unwrap_or(0.0),
            r.machine_fragmentation.unwrap_or(0.0),
            r.avg_used_servers.unwrap_or(0.0),
            r.cross_server_traffic.unwrap_or(0.0),
            r.partial_server_jobs,
            r.split_small_jobs,
            r.shared_jobs,
            r.avg_jwt_gpu_s,
            r.avg_jwt_network_s,
            r.backfilled_jobs,
            r.rounded_jobs,
            r.reserved_idle_gpu_s,
        );
    }
    out
}

/// The mean over seeds of `f` for each (policy, load) at `queue`, in the
/// grid's policy and load order.
pub fn means(
    rows: &[Row],
    grid: &Grid,
    queue: QueuePolicy,
    f: impl Fn(&Report) -> f64,
) -> Vec<(Variant, Vec<(f64, f64)>)> {
    grid.policies
        .iter()
        .map(|&p| {
            let points = grid
                .loads
                .iter()
                .map(|&load| {
                    let v: Vec<f64> = rows
                        .iter()
                        .filter(|r| r.policy == p && r.load == load && r.queue == queue)
                        .map(|r| f(&r.report))
                        .collect();
                    (load, v.iter().sum::<f64>() / v.len().max(1) as f64)
                })
                .collect();
            (p, points)
        })
        .collect()
}

#[cfg(test)]
mod tests;
