//! Planning a change: what every device must do to admit or release a job,
//! computed without touching any device.
//!
//! A plan compares, device by device, the running configuration (parsed
//! from saved files, or assumed to be the intent of the held decisions) with
//! the candidate intent (held decisions plus or minus the job), and orders
//! the devices safely: on admission the OCS is rewired first (so the links
//! exist), then the spines' VRFs (so traffic has somewhere to go), then the
//! leaves' redirects (which send traffic); on release the reverse, so no
//! leaf ever sends into a slice that is not there yet or any more.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;
use tracing::{debug, info_span};

use crate::decision::Decision;
use crate::dialect::{dialect, ParseError};
use crate::diff::{device_diff, DeviceDiff};
use crate::intent::{self, DeviceIntent, FabricIntent, IntentError, Item};
use crate::names::JobId;
use crate::state::FabricState;
use crate::topology::{Role, Topology};

/// What the plan is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Admit a job with this decision.
    Admit(Decision),
    /// Release a held job.
    Release(JobId),
}

/// Why no plan could be made.
#[derive(Debug, Error)]
pub enum PlanError {
    #[error(transparent)]
    Intent(#[from] IntentError),
    #[error("running configuration of {0}")]
    Parse(#[from] ParseError),
    #[error("reading {file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error("job `{0}` is already held")]
    AlreadyHeld(JobId),
    #[error("job `{0}` is not held")]
    NotHeld(JobId),
    #[error("running configurations {dir}: {reason}")]
    RunningDir { dir: String, reason: String },
}

/// One device's part of a plan.
#[derive(Debug, Clone, Serialize)]
pub struct DevicePlan {
    /// Apply order: every device of stage n before any of stage n+1.
    pub stage: usize,
    /// Whether the running side came from a saved configuration file.
    pub running_from_file: bool,
    #[serde(flatten)]
    pub diff: DeviceDiff,
}

/// A dry-run plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub job: JobId,
    /// `admit` or `release`.
    pub action: &'static str,
    /// The admitted decision, or the released job's decision.
    pub decision: Decision,
    /// Devices that change, in apply order.
    pub devices: Vec<DevicePlan>,
}

/// Apply stage of a role: OCS, spines, leaves on admission; reversed on release.
pub fn stage(role: Role, admit: bool) -> usize {
    let s = match role {
        Role::Ocs => 0,
        Role::Spine => 1,
        Role::Leaf => 2,
    };
    if admit {
        s
    } else {
        2 - s
    }
}

/// Running items per device name, parsed from saved configurations.
pub type Running = BTreeMap<String, BTreeSet<Item>>;

/// Largest saved running configuration `load_running` reads (a CE or
/// SONiC configuration of a 64-port switch is tens of kilobytes).
pub const MAX_RUNNING_BYTES: usize = 16 * 1024 * 1024;

/// Read `dir/<device>.cfg` for every device that has one, parsed in the
/// device's dialect. Devices without a file are absent from the result.
/// `dir` must be an existing directory holding the file of at least one
/// device of `topo`: a mistyped path is an error, never an empty set of
/// running configurations.
pub fn load_running(topo: &Topology, dir: &Path) -> Result<Running, PlanError> {
    let refuse = |reason: String| PlanError::RunningDir {
        dir: dir.display().to_string(),
        reason,
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(refuse("not a directory".into())),
        Err(e) => return Err(refuse(e.to_string())),
    }
    let mut out = Running::new();
    for dev in &topo.devices {
        let file = dir.join(format!("{}.cfg", dev.name));
        let io = |source| PlanError::Io {
            file: file.display().to_string(),
            source,
        };
        let bytes = match vclos_core::yaml::read_capped(&file, MAX_RUNNING_BYTES) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(io(source)),
        };
        let invalid = |why: String| io(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
        if bytes.len() > MAX_RUNNING_BYTES {
            return Err(invalid(format!(
                "larger than the {MAX_RUNNING_BYTES}-byte limit"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".into()))?;
        let items = dialect(dev.mgmt.dialect).parse(&dev.name, &text)?;
        out.insert(dev.name.clone(), items);
    }
    if out.is_empty() {
        return Err(refuse(format!(
            "no `<device>.cfg` file for any device of topology `{}`",
            topo.name
        )));
    }
    Ok(out)
}

/// Plan `action` on a fabric holding `held`, with `running` configurations
/// (devices missing from it are assumed to run the intent of `held`).
pub fn plan(
    topo: &Arc<Topology>,
    held: &[Decision],
    running: &Running,
    action: Action,
) -> Result<Plan, PlanError> {
    let base = intent::Base::new(topo)?;
    let intents = |d: &[Decision]| intent::build_on(&base, topo, d).map(Arc::new);
    let state = FabricState::from_decisions(Arc::clone(topo), held)?;
    plan_on(&state, &intents, running, action)
}

/// Builds (or finds) the intent of a list of decisions.
pub type Intents<'a> = dyn Fn(&[Decision]) -> Result<Arc<FabricIntent>, IntentError> + 'a;

/// [`plan`] on a fabric in `state`, with the intents of its decisions and
/// of the fabric after `action` from `intents` (a fabric under management
/// keeps them between calls).
pub fn plan_on(
    state: &FabricState,
    intents: &Intents<'_>,
    running: &Running,
    action: Action,
) -> Result<Plan, PlanError> {
    let topo = state.topology();
    let held: Vec<Decision> = state.decisions().into_iter().cloned().collect();
    let current = intents(&held)?;
    let (job, decision, admit, candidate) = match action {
        Action::Admit(d) => {
            if held.iter().any(|h| h.job == d.job) {
                return Err(PlanError::AlreadyHeld(d.job));
            }
            // The fabric state is the authority on what is free: a decision
            // it refuses (busy port, wrong cabling) never gets a plan.
            state.check_admit(&d)?;
            let mut all = held;
            all.push(d.clone());
            (d.job.clone(), d, true, intents(&all)?)
        }
        Action::Release(job) => {
            let d = held
                .iter()
                .find(|h| h.job == job)
                .cloned()
                .ok_or_else(|| PlanError::NotHeld(job.clone()))?;
            let rest: Vec<Decision> = held.iter().filter(|h| h.job != job).cloned().collect();
            (job, d, false, intents(&rest)?)
        }
    };
    let devices = device_plans(topo, &current, &candidate, running, admit);
    Ok(Plan {
        job,
        action: if admit { "admit" } else { "release" },
        decision,
        devices,
    })
}

/// What [`device_plans`] gives with no running configurations, as
/// `(stage, device, commands)` and without rendering text diffs: the cheap
/// form apply uses to check a plan is still current.
pub fn device_commands(
    current: &FabricIntent,
    candidate: &FabricIntent,
    admit: bool,
) -> Vec<(usize, String, Vec<String>)> {
    let mut out: Vec<_> = current
        .devices
        .iter()
        .zip(&candidate.devices)
        // Equal sets first: comparing them is cheaper than their difference
        // (and a device a kept intent did not rebuild is the same `Arc`).
        .filter(|(cur, cand)| !Arc::ptr_eq(cur, cand) && cur.items != cand.items)
        .filter_map(|(cur, cand)| {
            let commands = crate::diff::device_commands(cur, cand)?;
            Some((stage(cand.role, admit), cand.device.clone(), commands))
        })
        .collect();
    out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    out
}

/// Diff every device and keep those that change, in safe order.
pub fn device_plans(
    topo: &Topology,
    current: &FabricIntent,
    candidate: &FabricIntent,
    running: &Running,
    admit: bool,
) -> Vec<DevicePlan> {
    // Only needed to filter running configurations read from files.
    let base = if running.is_empty() {
        None
    } else {
        intent::baseline(topo).ok()
    };
    let mut out = Vec::new();
    for (cur, cand) in current.devices.iter().zip(&candidate.devices) {
        if cur == cand && !running.contains_key(&cand.device) {
            continue; // what it runs is what it should run
        }
        let _span = info_span!("plan", device = %cand.device).entered();
        let (run, from_file) = match running.get(&cand.device) {
            Some(items) => {
                // Only ports vclos manages are compared; the rest of a real
                // configuration is left alone.
                let managed: BTreeSet<_> = base
                    .as_ref()
                    .and_then(|b| b.device(&cand.device))
                    .map(|b| b.items.iter().filter_map(Item::port).cloned().collect())
                    .unwrap_or_default();
                let items = items
                    .iter()
                    .filter(|i| i.port().is_none_or(|p| managed.contains(p)))
                    .cloned()
                    .collect();
                (cand.with_items(items), true)
            }
            None => (DeviceIntent::clone(cur), false),
        };
        let diff = device_diff(&run, cand);
        if diff.is_empty() {
            continue;
        }
        debug!(
            added = diff.added.len(),
            removed = diff.removed.len(),
            "device changes"
        );
        out.push(DevicePlan {
            stage: stage(cand.role, admit),
            running_from_file: from_file,
            diff,
        });
    }
    out.sort_by(|a, b| (a.stage, &a.diff.device).cmp(&(b.stage, &b.diff.device)));
    out
}
