//! Differences between a device's running state and its candidate.
//!
//! Three views of one change, all from the same two item sets: semantic
//! (items added and removed), textual (a unified diff of the two rendered
//! configurations, so unmanaged parts of a real running configuration do
//! not drown the change), and operational (the dialect's ordered commands,
//! removal forms included).

use std::collections::BTreeSet;

use serde::Serialize;
use similar::{Algorithm, TextDiff};

use crate::dialect::dialect;
use crate::intent::{DeviceIntent, Item};
use crate::topology::{Dialect as DialectId, Role};

/// How one device changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceDiff {
    pub device: String,
    pub role: Role,
    pub dialect: DialectId,
    pub added: Vec<Item>,
    pub removed: Vec<Item>,
    /// Unified diff of the rendered running and candidate configurations.
    pub diff: String,
    /// Commands taking the device from running to candidate, in order.
    pub commands: Vec<String>,
}

impl DeviceDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// Compare `running` with `candidate` (the same device) in its dialect.
pub fn device_diff(running: &DeviceIntent, candidate: &DeviceIntent) -> DeviceDiff {
    let d = dialect(candidate.dialect);
    // Renderers and change renderers skip unclaimed kinds themselves, so
    // the (large) item sets are used as they are, never copied.
    let (old, new) = (&running.items, &candidate.items);
    let mine = |i: &&Item| d.claims(i.kind());
    let added: Vec<Item> = new.difference(old).filter(mine).cloned().collect();
    let removed: Vec<Item> = old.difference(new).filter(mine).cloned().collect();
    let diff = if added.is_empty() && removed.is_empty() {
        String::new()
    } else {
        unified(&candidate.device, &d.render(old), &d.render(new))
    };
    DeviceDiff {
        device: candidate.device.clone(),
        role: candidate.role,
        dialect: candidate.dialect,
        added,
        removed,
        diff,
        commands: d.changes(old, new),
    }
}

/// The commands of [`device_diff`] alone (no text diff), `None` when the
/// device does not change: what a plan is re-checked against before apply.
pub fn device_commands(running: &DeviceIntent, candidate: &DeviceIntent) -> Option<Vec<String>> {
    let d = dialect(candidate.dialect);
    let (old, new) = (&running.items, &candidate.items);
    let mine = |i: &&Item| d.claims(i.kind());
    let changes = new.difference(old).any(|i| mine(&i)) || old.difference(new).any(|i| mine(&i));
    changes.then(|| d.changes(old, new))
}

/// Semantic difference of two item sets: (added, removed).
pub fn items(old: &BTreeSet<Item>, new: &BTreeSet<Item>) -> (Vec<Item>, Vec<Item>) {
    (
        new.difference(old).cloned().collect(),
        old.difference(new).cloned().collect(),
    )
}

/// A unified diff (3 lines of context) labelled with the device name.
pub fn unified(device: &str, old: &str, new: &str) -> String {
    // Patience: configurations are mostly unique lines, where it is both
    // faster than Myers and closer to what a reader expects.
    TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .diff_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{device} (running)"),
            &format!("{device} (candidate)"),
        )
        .to_string()
}

/// Colour an already made unified diff (from [`unified`]) line by line.
pub fn colorize(unified: &str) -> String {
    unified
        .lines()
        .map(|l| {
            let c = if l.starts_with("+++") || l.starts_with("---") {
                "\x1b[1m"
            } else if l.starts_with('+') {
                "\x1b[32m"
            } else if l.starts_with('-') {
                "\x1b[31m"
            } else if l.starts_with("@@") {
                "\x1b[36m"
            } else {
                ""
            };
            if c.is_empty() {
                format!("{l}\n")
            } else {
                format!("{c}{l}\x1b[0m\n")
            }
        })
        .collect()
}
