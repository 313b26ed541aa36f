//! From a [`Schedule`] to the OCS changes at each stage barrier (issue 19,
//! item 4): validation against a topology, the minimal change per barrier and
//! per OCS, and the idle-link rule. Pure: no device, no clock.
//!
//! **Stage maps.** Stage `k` gives, per OCS name, the complete cross-connect
//! map during the stage. The OCS a schedule manages are those named in at
//! least one stage; one of them absent from a stage has no circuit in it.
//! An OCS of the topology named in no stage is left alone.
//!
//! **Minimal change.** At the barrier ending stage `k`, the OCS move from
//! map `k` to map `k + 1` (after the last stage, back to stage 0: the cycle of
//! seed 003 Section II.C and 004's multi-stage form). A circuit in both maps
//! is not touched: no command names its ports, so it never goes dark. Every
//! circuit only in map `k` is disconnected, then every circuit only in map
//! `k + 1` is connected; [`OcsChange::tl1_commands`] renders this as one
//! `DLT-PATCH` and one multi-pair `ENT-PATCH` (the [`Tl1`] dialect's
//! rendering, Polatis-style `ENT-PATCH::a1&a2,b1&b2`), so the OCS switches
//! every new circuit of a barrier together, in one switching time (50 ms for
//! the MEMS OCS the seeds assume).
//!
//! **Idle-link rule** (the paper's Section 7: only idle links are rewired).
//! During stage `k` every circuit carrying a job of `stages[k].jobs` is busy.
//! The barrier ending stage `k` is where the jobs of stage `k` have finished
//! the communication phase of that stage, so their circuits go idle, *except*
//! for a job that communicates in stage `k + 1` as well: its communication
//! runs across the barrier, so the circuits it uses in stage `k` still carry
//! its traffic. Precisely: at the barrier ending stage `k`, a circuit `c` of
//! OCS `o` is **busy** iff some job `j` is listed in `c.jobs` in stage `k`
//! and `j` is in both `stages[k].jobs` and `stages[k + 1].jobs`. A schedule
//! whose barrier removes or rewires a busy circuit (`c` is not in map `k + 1`
//! of `o`) is refused by [`validate`] before anything moves; the error names
//! the barrier, the OCS, the circuit and the job. A circuit's jobs must be
//! communicating jobs of its stage (a circuit cannot carry the traffic of a
//! job that is computing), which [`validate`] checks too.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use super::schedule::{Circuit, Schedule, Stage};
use crate::dialect::tl1::Tl1;
use crate::dialect::Dialect as _;
use crate::intent::{Item, PortName};
use crate::topology::{OcsId, Topology};

/// Most stages a schedule may have (the drafts use 2 to 4).
pub const MAX_STAGES: usize = 1024;
/// Longest switching delay accepted, in milliseconds (a slow
/// piezo/robotic OCS switches in seconds; anything beyond a minute is a
/// unit mistake).
pub const MAX_SWITCH_MS: f64 = 60_000.0;
/// Longest stage accepted, in seconds (one day).
pub const MAX_STAGE_S: f64 = 86_400.0;

/// Largest schedule file read, in bytes.
pub const MAX_SCHEDULE_BYTES: usize = 8 * 1024 * 1024;

/// Why a schedule file cannot be read.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: larger than the {MAX_SCHEDULE_BYTES}-byte limit for a schedule")]
    TooLarge { path: String },
    /// serde_json's message, which names the line and column.
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
}

/// Read a schedule (JSON, as the planner writes it) under a size bound;
/// unknown keys are refused.
pub fn load(path: &std::path::Path) -> Result<Schedule, LoadError> {
    let shown = path.display().to_string();
    let bytes =
        crate::yaml::read_capped(path, MAX_SCHEDULE_BYTES).map_err(|source| LoadError::Read {
            path: shown.clone(),
            source,
        })?;
    if bytes.len() > MAX_SCHEDULE_BYTES {
        return Err(LoadError::TooLarge { path: shown });
    }
    serde_json::from_slice(&bytes).map_err(|e| LoadError::Parse {
        path: shown,
        message: e.to_string(),
    })
}

/// A cross-connect by port names, the smaller port first (numbers in
/// numeric order, then names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Pair(pub String, pub String);

/// Sort key of a port: numbers numerically, then anything else.
fn port_order(a: &str, b: &str) -> Ordering {
    let key = |p: &str| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_string());
    key(a).cmp(&key(b))
}

impl Pair {
    /// The pair in canonical order.
    pub fn new(a: &str, b: &str) -> Self {
        if port_order(a, b) == Ordering::Greater {
            Pair(b.to_string(), a.to_string())
        } else {
            Pair(a.to_string(), b.to_string())
        }
    }
}

impl std::fmt::Display for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}~{}", self.0, self.1)
    }
}

/// One OCS's cross-connect map.
pub type OcsMap = BTreeSet<Pair>;

/// Why a schedule is refused. Stages are numbered from 0 as in the file.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ScheduleError {
    #[error("the schedule has no stage")]
    NoStages,
    #[error("the schedule has {count} stages; at most {MAX_STAGES} are accepted")]
    TooManyStages { count: usize },
    #[error("the schedule was planned for topology `{schedule}`, not `{topology}`")]
    WrongTopology { schedule: String, topology: String },
    #[error("{field} is {value}; expected a number from 0 to {max}")]
    BadNumber { field: String, value: f64, max: f64 },
    #[error("stage {stage}: `{ocs}` is not an OCS of the topology")]
    UnknownOcs { stage: usize, ocs: String },
    #[error("stage {stage}: {ocs}: port {port} does not exist")]
    UnknownPort {
        stage: usize,
        ocs: String,
        port: String,
    },
    #[error("stage {stage}: {ocs}: port {port} is connected to itself")]
    SelfPatch {
        stage: usize,
        ocs: String,
        port: String,
    },
    #[error("stage {stage}: {ocs}: port {port} is in two circuits")]
    RepeatedPort {
        stage: usize,
        ocs: String,
        port: String,
    },
    #[error("stage {stage}: {ocs}: circuit {circuit} carries job `{job}`, which does not communicate in stage {stage}")]
    ComputingJob {
        stage: usize,
        ocs: String,
        circuit: Pair,
        job: String,
    },
    #[error("barrier {from}->{to}: {ocs}: circuit {circuit} would be cut while job `{job}` communicates across the barrier (it uses the circuit in stage {from} and communicates in stage {to}); only idle links may be rewired")]
    BusyCut {
        from: usize,
        to: usize,
        ocs: String,
        circuit: Pair,
        job: String,
    },
}

/// What one OCS does at one barrier: disconnect these circuits, then
/// connect those. Circuits in neither list are not touched.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OcsChange {
    pub disconnect: Vec<Pair>,
    pub connect: Vec<Pair>,
}

impl OcsChange {
    pub fn is_empty(&self) -> bool {
        self.disconnect.is_empty() && self.connect.is_empty()
    }

    /// Ports whose cross-connect changes (each counted once).
    pub fn ports_touched(&self) -> BTreeSet<&str> {
        self.disconnect
            .iter()
            .chain(&self.connect)
            .flat_map(|p| [p.0.as_str(), p.1.as_str()])
            .collect()
    }

    /// The TL1 commands doing this change: `DLT-PATCH` of every circuit to
    /// remove, then multi-pair `ENT-PATCH` of every circuit to add, as
    /// [`Tl1::changes`] renders them. Ports that are not TL1 tokens are
    /// skipped (the topology loader never yields them for an OCS).
    pub fn tl1_commands(&self) -> Vec<String> {
        let items = |pairs: &[Pair]| -> BTreeSet<Item> {
            pairs
                .iter()
                .filter_map(|p| {
                    Some(Item::patch(
                        PortName::new(&p.0).ok()?,
                        PortName::new(&p.1).ok()?,
                    ))
                })
                .collect()
        };
        Tl1.changes(&items(&self.disconnect), &items(&self.connect))
    }
}

/// The port `port` is connected to in `map`.
pub fn partner<'a>(map: &'a OcsMap, port: &str) -> Option<&'a str> {
    map.iter().find_map(|p| {
        if p.0 == port {
            Some(p.1.as_str())
        } else if p.1 == port {
            Some(p.0.as_str())
        } else {
            None
        }
    })
}

/// The minimal change turning map `from` into map `to`.
pub fn diff(from: &OcsMap, to: &OcsMap) -> OcsChange {
    OcsChange {
        disconnect: from.difference(to).cloned().collect(),
        connect: to.difference(from).cloned().collect(),
    }
}

/// The changes at the barrier ending stage `from`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Barrier {
    pub from: usize,
    pub to: usize,
    /// Per managed OCS with something to change.
    pub changes: BTreeMap<String, OcsChange>,
}

/// A schedule checked against a topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Validated {
    /// The OCS the schedule manages, with their topology ids.
    pub ocs: BTreeMap<String, OcsId>,
    /// Per stage, the map of every managed OCS (empty when absent).
    pub maps: Vec<BTreeMap<String, OcsMap>>,
    /// `barriers[k]` ends stage `k` (the last one wraps to stage 0).
    pub barriers: Vec<Barrier>,
}

/// The `(OCS id, port index)` of both ends of every circuit given as
/// `(OCS name, circuit)`; names the topology does not know are skipped.
/// This is how hosts (or a test standing in for them) tell the emulated OCS
/// which links a stage uses (`vclos::emulator::busy::StageBusy`).
pub fn port_ids<'a>(
    topo: &Topology,
    circuits: impl IntoIterator<Item = (&'a str, &'a Pair)>,
) -> Vec<(OcsId, u16)> {
    let mut index: BTreeMap<OcsId, BTreeMap<&str, u16>> = BTreeMap::new();
    let mut out = Vec::new();
    for (ocs, pair) in circuits {
        let Some(id) = topo.ocs_id(ocs) else { continue };
        let ports = index.entry(id).or_insert_with(|| {
            (0..=u16::MAX)
                .zip(topo.ocs_dev(id).ports.iter())
                .map(|(i, p)| (&**p, i))
                .collect()
        });
        for name in [&pair.0, &pair.1] {
            if let Some(&i) = ports.get(name.as_str()) {
                out.push((id, i));
            }
        }
    }
    out
}

fn check_number(field: String, value: f64, max: f64) -> Result<(), ScheduleError> {
    if value.is_finite() && (0.0..=max).contains(&value) {
        Ok(())
    } else {
        Err(ScheduleError::BadNumber { field, value, max })
    }
}

/// One stage's map of one OCS, checked: ports exist, none twice, none to
/// itself, every job on a circuit communicates in the stage.
fn stage_map(
    topo: &Topology,
    stage_index: usize,
    stage: &Stage,
    ocs: &str,
    circuits: &[Circuit],
) -> Result<OcsMap, ScheduleError> {
    let id = topo.ocs_id(ocs).ok_or_else(|| ScheduleError::UnknownOcs {
        stage: stage_index,
        ocs: ocs.to_string(),
    })?;
    let ports: BTreeSet<&str> = topo.ocs_dev(id).ports.iter().map(|p| &**p).collect();
    let talking: BTreeSet<&String> = stage.jobs.iter().collect();
    let mut seen = BTreeSet::new();
    let mut map = OcsMap::new();
    for c in circuits {
        for p in [&c.a, &c.b] {
            let port = || p.chars().take(64).collect::<String>();
            if !ports.contains(p.as_str()) {
                return Err(ScheduleError::UnknownPort {
                    stage: stage_index,
                    ocs: ocs.to_string(),
                    port: port(),
                });
            }
            if c.a == c.b {
                return Err(ScheduleError::SelfPatch {
                    stage: stage_index,
                    ocs: ocs.to_string(),
                    port: port(),
                });
            }
            if !seen.insert(p.as_str()) {
                return Err(ScheduleError::RepeatedPort {
                    stage: stage_index,
                    ocs: ocs.to_string(),
                    port: port(),
                });
            }
        }
        let pair = Pair::new(&c.a, &c.b);
        if let Some(job) = c.jobs.iter().find(|j| !talking.contains(j)) {
            return Err(ScheduleError::ComputingJob {
                stage: stage_index,
                ocs: ocs.to_string(),
                circuit: pair,
                job: job.clone(),
            });
        }
        map.insert(pair);
    }
    Ok(map)
}

/// Check the schedule's numbers and size.
fn check_shape(schedule: &Schedule, topo: &Topology) -> Result<(), ScheduleError> {
    if schedule.stages.is_empty() {
        return Err(ScheduleError::NoStages);
    }
    if schedule.stages.len() > MAX_STAGES {
        return Err(ScheduleError::TooManyStages {
            count: schedule.stages.len(),
        });
    }
    if schedule.topology != topo.name {
        return Err(ScheduleError::WrongTopology {
            schedule: schedule.topology.chars().take(128).collect(),
            topology: topo.name.clone(),
        });
    }
    check_number("switch_ms".into(), schedule.switch_ms, MAX_SWITCH_MS)?;
    for (k, s) in schedule.stages.iter().enumerate() {
        check_number(format!("stages[{k}].time_s"), s.time_s, MAX_STAGE_S)?;
    }
    Ok(())
}

/// Validate `schedule` against `topo` and compute every barrier's changes,
/// refusing a barrier that would cut a busy circuit (module doc).
pub fn validate(schedule: &Schedule, topo: &Topology) -> Result<Validated, ScheduleError> {
    check_shape(schedule, topo)?;
    let mut ocs = BTreeMap::new();
    let mut given = Vec::with_capacity(schedule.stages.len());
    for (k, stage) in schedule.stages.iter().enumerate() {
        let mut maps = BTreeMap::new();
        for (name, circuits) in &stage.ocs {
            let map = stage_map(topo, k, stage, name, circuits)?;
            if let Some(id) = topo.ocs_id(name) {
                ocs.insert(name.clone(), id);
            }
            maps.insert(name.clone(), map);
        }
        given.push(maps);
    }
    let maps: Vec<BTreeMap<String, OcsMap>> = given
        .into_iter()
        .map(|mut m| {
            ocs.keys()
                .map(|name| (name.clone(), m.remove(name).unwrap_or_default()))
                .collect()
        })
        .collect();
    let n = maps.len();
    let mut barriers = Vec::with_capacity(n);
    for from in 0..n {
        let to = (from + 1) % n;
        check_idle(schedule, from, to, &maps[to])?;
        let changes = maps[from]
            .iter()
            .map(|(name, map)| (name.clone(), diff(map, &maps[to][name])))
            .filter(|(_, c)| !c.is_empty())
            .collect();
        barriers.push(Barrier { from, to, changes });
    }
    Ok(Validated {
        ocs,
        maps,
        barriers,
    })
}

/// Circuits busy at the barrier ending stage `from` (followed by `to`), per
/// OCS name, with one job that keeps each busy.
pub fn busy_at_barrier(
    schedule: &Schedule,
    from: usize,
    to: usize,
) -> BTreeMap<String, BTreeMap<Pair, String>> {
    let (Some(leaving), Some(next)) = (schedule.stages.get(from), schedule.stages.get(to)) else {
        return BTreeMap::new();
    };
    let next_jobs: BTreeSet<&String> = next.jobs.iter().collect();
    let across: BTreeSet<&String> = leaving
        .jobs
        .iter()
        .filter(|j| next_jobs.contains(j))
        .collect();
    let mut out: BTreeMap<String, BTreeMap<Pair, String>> = BTreeMap::new();
    for (ocs, circuits) in &leaving.ocs {
        for c in circuits {
            if let Some(job) = c.jobs.iter().find(|j| across.contains(j)) {
                out.entry(ocs.clone())
                    .or_default()
                    .insert(Pair::new(&c.a, &c.b), job.clone());
            }
        }
    }
    out
}

/// Circuits busy *during* stage `k`: every circuit carrying a job.
pub fn busy_during(schedule: &Schedule, k: usize) -> BTreeMap<String, BTreeSet<Pair>> {
    let Some(stage) = schedule.stages.get(k) else {
        return BTreeMap::new();
    };
    stage
        .ocs
        .iter()
        .map(|(ocs, circuits)| {
            let busy = circuits
                .iter()
                .filter(|c| !c.jobs.is_empty())
                .map(|c| Pair::new(&c.a, &c.b))
                .collect();
            (ocs.clone(), busy)
        })
        .collect()
}

/// Refuse the barrier `from -> to` if it cuts a busy circuit.
fn check_idle(
    schedule: &Schedule,
    from: usize,
    to: usize,
    next: &BTreeMap<String, OcsMap>,
) -> Result<(), ScheduleError> {
    for (ocs, busy) in busy_at_barrier(schedule, from, to) {
        for (circuit, job) in busy {
            if !next.get(&ocs).is_some_and(|m| m.contains(&circuit)) {
                return Err(ScheduleError::BusyCut {
                    from,
                    to,
                    ocs,
                    circuit,
                    job,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
