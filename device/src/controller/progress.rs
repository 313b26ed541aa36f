//! Progress hooks: how a front end (the CLI's progress bars) follows a
//! transaction without the library knowing about terminals.
//!
//! Hooks are called from the controller's own task, in order, as phases
//! start and devices finish; they must be quick (update a bar, send on a
//! channel) because the next device waits for them.

use super::report::Phase;

/// Observer of a running transaction. Every method has a no-op default.
pub trait Progress: Send + Sync {
    /// A phase (for commit and rollback: one stage of it) starts on `devices`.
    fn phase_started(&self, _phase: Phase, _stage: Option<u32>, _devices: usize) {}
    /// One device finished its part of the current phase.
    fn device_done(&self, _phase: Phase, _device: &str, _ok: bool) {}
    /// The phase (stage) is over; `ok` is false if any device failed in it.
    fn phase_done(&self, _phase: Phase, _stage: Option<u32>, _ok: bool) {}
}

/// No progress reporting.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
