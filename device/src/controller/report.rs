//! What happened, per device and overall: the [`ApplyReport`].
//!
//! The report is the controller's only output, so it has to answer the
//! operator's questions without logs: did the fabric change, which devices
//! hold the new configuration, which were put back, and — above all — which
//! device could NOT be put back and what to do about it. It serialises (serde)
//! for `--json` and prints for humans; durations are milliseconds in JSON.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::topology::Role;

/// A phase of the transaction (also the step a device error happened in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Open, snapshot running, load the candidate, compare.
    Prepare,
    /// Commit one stage (with commit-confirm where supported).
    Commit,
    /// Read running back after commit and check it against the intent.
    Verify,
    /// Confirm commit-confirmed devices once everything is verified.
    Confirm,
    /// Put committed devices back, last stage first.
    Rollback,
    /// Discard uncommitted candidates and close sessions.
    Close,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Prepare => "prepare",
            Phase::Commit => "commit",
            Phase::Verify => "verify",
            Phase::Confirm => "confirm",
            Phase::Rollback => "rollback",
            Phase::Close => "close",
        })
    }
}

/// Where a device ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceStatus {
    /// Could not be prepared (unreachable, refused the candidate, ...);
    /// running untouched.
    PrepareFailed,
    /// Prepared, then its candidate discarded: running untouched.
    Discarded,
    /// Nothing to change (empty diff) and the read-back checked out.
    Unchanged,
    /// Holds the new configuration, verified (and confirmed if supported).
    Committed,
    /// Was changed, then put back to its pre-transaction configuration.
    RolledBack,
    /// Was (or may have been) changed and could NOT be put back: its running
    /// configuration is unknown. Needs an operator.
    RollbackFailed,
}

impl fmt::Display for DeviceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceStatus::PrepareFailed => "prepare failed",
            DeviceStatus::Discarded => "discarded",
            DeviceStatus::Unchanged => "unchanged",
            DeviceStatus::Committed => "committed",
            DeviceStatus::RolledBack => "rolled back",
            DeviceStatus::RollbackFailed => "ROLLBACK FAILED",
        })
    }
}

/// The first failure on a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceError {
    pub phase: Phase,
    /// Names the device and the step (`leaf3: commit: connection lost: ...`).
    pub message: String,
}

/// One device's part of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    pub device: String,
    pub role: Role,
    pub stage: u32,
    /// The device's own diff of candidate against running (from prepare).
    pub diff: String,
    pub status: DeviceStatus,
    /// The commit used commit-confirm (the device would revert on its own).
    pub commit_confirm: bool,
    /// Time spent in this device's driver calls.
    #[serde(rename = "duration_ms", with = "millis")]
    pub duration: Duration,
    /// The first thing that went wrong on this device, if anything.
    pub error: Option<DeviceError>,
    /// Why the rollback failed (only with `RollbackFailed`).
    pub rollback_error: Option<String>,
    /// Non-fatal remarks (a failed discard or close, a recovered rollback).
    pub notes: Vec<String>,
}

/// How long one phase (or one stage of a phase) took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageTiming {
    pub phase: Phase,
    pub stage: Option<u32>,
    pub devices: usize,
    #[serde(rename = "duration_ms", with = "millis")]
    pub duration: Duration,
}

/// The transaction's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Outcome {
    /// Every device holds the new configuration, verified.
    Committed,
    /// A prepare failed; nothing was committed anywhere.
    Aborted { cause: String },
    /// Something failed after commits began; every changed device was put
    /// back. The fabric is as it was before.
    RolledBack { cause: String },
    /// Something failed and at least one device could not be put back: the
    /// fabric is in a mixed state. `devices` need an operator.
    RollbackFailed { cause: String, devices: Vec<String> },
    /// This writer lost its right to write (its lock, checked by the
    /// [`crate::controller::Guard`] before every commit stage after the
    /// first and before a rollback) after commits began: it touched no
    /// device since. `devices` may hold the new configuration; the next
    /// writer settles them from its journal.
    Abandoned { cause: String, devices: Vec<String> },
}

/// Everything the controller did in one transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyReport {
    pub outcome: Outcome,
    /// In change-set order.
    pub devices: Vec<DeviceReport>,
    pub stage_timings: Vec<StageTiming>,
    #[serde(rename = "duration_ms", with = "millis")]
    pub duration: Duration,
}

impl ApplyReport {
    /// The fabric holds the new configuration everywhere.
    pub fn is_committed(&self) -> bool {
        self.outcome == Outcome::Committed
    }

    /// The fabric is exactly as before (aborted or fully rolled back).
    pub fn is_unchanged(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Aborted { .. } | Outcome::RolledBack { .. }
        )
    }

    pub fn device(&self, name: &str) -> Option<&DeviceReport> {
        self.devices.iter().find(|d| d.device == name)
    }

    /// Devices left in an unknown state.
    pub fn rollback_failures(&self) -> impl Iterator<Item = &DeviceReport> {
        self.devices
            .iter()
            .filter(|d| d.status == DeviceStatus::RollbackFailed)
    }
}

impl fmt::Display for ApplyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Committed => {
                writeln!(f, "apply: COMMITTED on {} device(s)", self.devices.len())?
            }
            Outcome::Aborted { cause } => {
                writeln!(f, "apply: ABORTED before any commit; nothing changed")?;
                writeln!(f, "  cause: {cause}")?;
            }
            Outcome::RolledBack { cause } => {
                writeln!(f, "apply: ROLLED BACK; every device is as it was")?;
                writeln!(f, "  cause: {cause}")?;
            }
            Outcome::RollbackFailed { cause, devices } => {
                writeln!(
                    f,
                    "apply: FAILED AND ROLLBACK FAILED on {}: the fabric is in a MIXED state",
                    devices.join(", ")
                )?;
                writeln!(f, "  cause: {cause}")?;
            }
            Outcome::Abandoned { cause, devices } => {
                writeln!(
                    f,
                    "apply: ABANDONED after commits began on {} (this writer lost its lock); left for the next writer's recovery",
                    devices.join(", ")
                )?;
                writeln!(f, "  cause: {cause}")?;
            }
        }
        let mut order: Vec<&DeviceReport> = self.devices.iter().collect();
        order.sort_by(|a, b| (a.stage, &a.device).cmp(&(b.stage, &b.device)));
        let width = order.iter().map(|d| d.device.len()).max().unwrap_or(0);
        for d in order {
            write!(
                f,
                "  stage {:<2} {:<width$}  {:<5}  {:<15} {:>7.1} ms",
                d.stage,
                d.device,
                d.role.to_string(),
                d.status.to_string(),
                d.duration.as_secs_f64() * 1e3,
            )?;
            if d.commit_confirm {
                f.write_str("  (commit-confirm)")?;
            }
            writeln!(f)?;
            if let Some(e) = &d.error {
                writeln!(f, "      error in {}: {}", e.phase, e.message)?;
            }
            for n in &d.notes {
                writeln!(f, "      note: {n}")?;
            }
        }
        for t in &self.stage_timings {
            match t.stage {
                Some(s) => write!(f, "  {} stage {s}", t.phase)?,
                None => write!(f, "  {}", t.phase)?,
            }
            writeln!(
                f,
                ": {} device(s) in {:.1} ms",
                t.devices,
                t.duration.as_secs_f64() * 1e3
            )?;
        }
        writeln!(f, "  total: {:.1} ms", self.duration.as_secs_f64() * 1e3)?;
        for d in self.rollback_failures() {
            writeln!(
                f,
                "!!! {}: ROLLBACK FAILED: {}",
                d.device,
                d.rollback_error.as_deref().unwrap_or("unknown reason")
            )?;
            writeln!(
                f,
                "!!! {0}'s running configuration may still hold this transaction's change. \
                 Log in to {0}, compare its running configuration with the pre-transaction one \
                 and restore it by hand (or re-run the release/apply once it is reachable); \
                 keep jobs off it until then.",
                d.device
            )?;
        }
        Ok(())
    }
}

/// Durations as fractional milliseconds in JSON.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1e3).map_err(serde::de::Error::custom)
    }
}
