//! What the controller is asked to do: a [`ChangeSet`] of per-device text
//! payloads, already rendered in each device's dialect, plus how to reach
//! the devices ([`DriverFactory`]) and how hard to push ([`ApplyOptions`]).
//!
//! Pure data on purpose: the controller knows nothing of intent or dialects,
//! so the same engine applies Huawei CLI, NETCONF XML and TL1 alike, and
//! tests can hand it any text.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use vclos_drivers::{Driver, DriverError, LoadMode};

use crate::topology::Role;

/// A check of the running configuration read back after commit.
pub type VerifyFn = dyn Fn(&str) -> Result<(), String> + Send + Sync;

/// How a device's read-back is checked against its intent.
#[derive(Clone, Default)]
pub enum Verify {
    /// Only that the read-back succeeds.
    #[default]
    ReadOnly,
    /// Running must equal this text (line endings, trailing blanks and
    /// blank lines ignored).
    Equals(String),
    /// Every non-blank line of this text must appear in running.
    ContainsLines(String),
    /// A dialect-aware check supplied by the caller; `Err` says what is wrong.
    Custom(Arc<VerifyFn>),
}

impl fmt::Debug for Verify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verify::ReadOnly => f.write_str("ReadOnly"),
            Verify::Equals(t) => write!(f, "Equals({} lines)", t.lines().count()),
            Verify::ContainsLines(t) => write!(f, "ContainsLines({} lines)", t.lines().count()),
            Verify::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl Verify {
    /// Check `running` against this expectation.
    pub fn check(&self, running: &str) -> Result<(), String> {
        match self {
            Verify::ReadOnly => Ok(()),
            Verify::Equals(want) => {
                if normalise(running) == normalise(want) {
                    Ok(())
                } else {
                    Err(first_difference(want, running))
                }
            }
            Verify::ContainsLines(want) => {
                let have: BTreeSet<&str> = lines(running).collect();
                match lines(want).find(|l| !have.contains(l)) {
                    None => Ok(()),
                    Some(l) => Err(format!("running config lacks {l:?}")),
                }
            }
            Verify::Custom(f) => f(running),
        }
    }
}

/// Non-blank lines with trailing whitespace removed.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim_end).filter(|l| !l.is_empty())
}

/// Configuration text compared modulo line endings and blank lines (used
/// for `Verify::Equals` and for the pre-transaction snapshot).
pub(crate) fn normalise(text: &str) -> Vec<&str> {
    lines(text).collect()
}

fn first_difference(want: &str, have: &str) -> String {
    let (w, h) = (normalise(want), normalise(have));
    for (i, pair) in w.iter().zip(h.iter()).enumerate() {
        if pair.0 != pair.1 {
            return format!(
                "line {}: expected {:?}, running has {:?}",
                i + 1,
                pair.0,
                pair.1
            );
        }
    }
    format!(
        "expected {} lines, running has {} (first {} equal)",
        w.len(),
        h.len(),
        w.len().min(h.len())
    )
}

/// One device's part of a transaction.
#[derive(Debug, Clone)]
pub struct DeviceChange {
    /// The device's topology name (used to get its driver and in every error).
    pub device: String,
    pub role: Role,
    /// Commit order: stage 0 first; devices of one stage commit concurrently.
    pub stage: u32,
    /// The change, in the device's dialect.
    pub payload: String,
    pub mode: LoadMode,
    pub verify: Verify,
}

impl DeviceChange {
    pub fn new(
        device: impl Into<String>,
        role: Role,
        stage: u32,
        payload: impl Into<String>,
    ) -> Self {
        Self {
            device: device.into(),
            role,
            stage,
            payload: payload.into(),
            mode: LoadMode::Merge,
            verify: Verify::ReadOnly,
        }
    }

    pub fn with_mode(mut self, mode: LoadMode) -> Self {
        self.mode = mode;
        self
    }

    pub fn with_verify(mut self, verify: Verify) -> Self {
        self.verify = verify;
        self
    }
}

/// Every device change of one transaction. A device appears at most once.
#[derive(Debug, Clone, Default)]
pub struct ChangeSet {
    pub changes: Vec<DeviceChange>,
}

impl ChangeSet {
    pub fn new(changes: Vec<DeviceChange>) -> Self {
        Self { changes }
    }

    pub fn push(&mut self, change: DeviceChange) {
        self.changes.push(change);
    }

    pub fn len(&self) -> usize {
        self.changes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The distinct stages, in commit order.
    pub fn stages(&self) -> Vec<u32> {
        let s: BTreeSet<u32> = self.changes.iter().map(|c| c.stage).collect();
        s.into_iter().collect()
    }

    /// Refuse a set the engine could not apply safely.
    pub fn validate(&self) -> Result<(), ChangeSetError> {
        let mut seen = BTreeSet::new();
        for c in &self.changes {
            if c.device.trim().is_empty() {
                return Err(ChangeSetError::EmptyName);
            }
            if !seen.insert(c.device.as_str()) {
                return Err(ChangeSetError::Duplicate(c.device.clone()));
            }
        }
        Ok(())
    }
}

/// A change set or options the controller refuses before touching a device.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChangeSetError {
    #[error("device {0} appears twice in the change set (one change per device per transaction)")]
    Duplicate(String),
    #[error("a change has an empty device name")]
    EmptyName,
    #[error("max_parallel must be at least 1")]
    NoParallelism,
}

/// Hands the controller a driver per device per transaction: a fresh,
/// unopened one, or an open session lent by a
/// [`SessionPool`](super::SessionPool).
///
/// Either way the driver must know no commit older than this transaction:
/// the controller's rollback of a failed commit relies on the driver's own
/// checkpoint of *this* transaction (`rollback(None)`); a pool resets a
/// reused driver with [`Driver::reuse`](vclos_drivers::Driver::reuse).
pub trait DriverFactory: Send + Sync {
    fn driver(&self, device: &str) -> Result<Box<dyn Driver>, DriverError>;
}

impl<F> DriverFactory for F
where
    F: Fn(&str) -> Result<Box<dyn Driver>, DriverError> + Send + Sync,
{
    fn driver(&self, device: &str) -> Result<Box<dyn Driver>, DriverError> {
        self(device)
    }
}

/// How the transaction is run.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Most devices with a driver call in flight at once.
    pub max_parallel: usize,
    /// Backstop on every single driver call (drivers have their own,
    /// usually shorter, transport timeouts).
    pub step_timeout: Duration,
    /// Revert timer given to devices that support commit-confirm. Must cover
    /// the rest of the transaction (later stages, read-back, confirm).
    pub confirm_timeout: Duration,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            max_parallel: 128,
            step_timeout: Duration::from_secs(120),
            confirm_timeout: Duration::from_secs(600),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_kinds() {
        let running = "a\r\n  b  \n\nc\n";
        assert_eq!(Verify::Equals("a\n  b\nc".into()).check(running), Ok(()));
        let e = Verify::Equals("a\nx\nc".into()).check(running).unwrap_err();
        assert!(e.contains("line 2") && e.contains("\"x\""), "{e}");
        assert!(Verify::Equals("a\n  b".into()).check(running).is_err());
        assert_eq!(
            Verify::ContainsLines("c\na\n".into()).check(running),
            Ok(())
        );
        assert!(Verify::ContainsLines("d".into())
            .check(running)
            .unwrap_err()
            .contains("\"d\""));
        let custom = Verify::Custom(Arc::new(|r: &str| {
            r.contains('b')
                .then_some(())
                .ok_or_else(|| "no b".to_string())
        }));
        assert_eq!(custom.check(running), Ok(()));
        assert_eq!(custom.check("a"), Err("no b".to_string()));
        assert_eq!(Verify::ReadOnly.check(""), Ok(()));
    }

    #[test]
    fn validation_refuses_duplicates_and_empty_names() {
        let c = |d: &str, s| DeviceChange::new(d, Role::Leaf, s, "x");
        let ok = ChangeSet::new(vec![c("l1", 2), c("l2", 0), c("l3", 2)]);
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(ok.stages(), vec![0, 2]);
        let dup = ChangeSet::new(vec![c("l1", 0), c("l1", 1)]);
        assert_eq!(dup.validate(), Err(ChangeSetError::Duplicate("l1".into())));
        assert_eq!(
            ChangeSet::new(vec![c(" ", 0)]).validate(),
            Err(ChangeSetError::EmptyName)
        );
    }
}
