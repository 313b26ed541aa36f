//! Verification from running-configuration texts, as devices print them.
//!
//! The texts come from real drivers ([`super::fetch`]) or from the
//! emulator's models (`EmulatedFabric::running_configs`); either way each is
//! parsed by its device's dialect, turned into a [`ForwardingState`]
//! ([`super::forwarding_state`]) and every held job is verified against it.
//! Device-level findings that concern no single job — configuration the
//! topology cannot place, and configuration of jobs that are not held
//! (leftovers of a release) — are returned as one extra report named
//! [`DEVICES_REPORT`].

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use super::{forwarding_state, verify, ForwardingState, JobView, Report};
use crate::decision::Decision;
use crate::dialect::{dialect, ParseError};
use crate::intent::Item;
use crate::topology::Topology;

/// Name of the report holding device-level findings (not a valid job id,
/// so it never collides with a job).
pub const DEVICES_REPORT: &str = "(devices)";

/// Why verification could not run at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VerifyError {
    #[error("{0}: no running configuration was read")]
    Missing(String),
    #[error("{0}: not a device of the topology")]
    UnknownDevice(String),
    #[error("cannot read the running configuration of {0}")]
    Parse(#[from] ParseError),
    #[error("{0}")]
    Decision(String),
}

/// Parse every device's running configuration with its dialect. Every
/// device of the topology must be present.
pub fn parse_configs(
    topo: &Topology,
    configs: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, BTreeSet<Item>>, VerifyError> {
    if let Some(name) = configs.keys().find(|n| topo.device_id(n).is_none()) {
        return Err(VerifyError::UnknownDevice(name.clone()));
    }
    let mut out = BTreeMap::new();
    for dev in &topo.devices {
        let text = configs
            .get(&dev.name)
            .ok_or_else(|| VerifyError::Missing(dev.name.clone()))?;
        let items = dialect(dev.mgmt.dialect).parse(&dev.name, text)?;
        out.insert(dev.name.clone(), items);
    }
    Ok(out)
}

/// The forwarding state defined by running-configuration texts.
pub fn forwarding_from_configs(
    topo: &Topology,
    configs: &BTreeMap<String, String>,
) -> Result<ForwardingState, VerifyError> {
    Ok(forwarding_state(topo, &parse_configs(topo, configs)?))
}

/// Verify every held decision against the devices' running configurations
/// (device name -> text as the device prints it).
pub fn verify_fabric(
    topo: &Topology,
    decisions: &[Decision],
    configs: &BTreeMap<String, String>,
) -> Result<Vec<Report>, VerifyError> {
    let fwd = forwarding_from_configs(topo, configs)?;
    verify_state(topo, decisions, &fwd)
}

/// Verify every held decision against a forwarding state, plus the
/// device-level findings report when there are any.
pub fn verify_state(
    topo: &Topology,
    decisions: &[Decision],
    fwd: &ForwardingState,
) -> Result<Vec<Report>, VerifyError> {
    let jobs = decisions
        .iter()
        .map(|d| JobView::from_decision(topo, d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(VerifyError::Decision)?;
    let mut reports = verify(topo, fwd, &jobs);
    let held: BTreeSet<&str> = decisions.iter().map(|d| d.job.as_str()).collect();
    let mut findings = fwd.problems().to_vec();
    for (job, places) in fwd.configured_jobs() {
        if !held.contains(job.as_str()) {
            findings.extend(
                places
                    .iter()
                    .map(|p| format!("{p}: configuration of job {job}, which is not held")),
            );
        }
    }
    if !findings.is_empty() {
        reports.push(Report {
            job: DEVICES_REPORT.into(),
            flows: 0,
            violations: findings,
        });
    }
    Ok(reports)
}
