//! Fault injection for emulated devices, shared by every protocol endpoint.
//!
//! Tests (and `vclos emu serve` flags) arm faults on a device; each protocol
//! server consults [`Faults`] at the documented points: before every reply
//! (delay), at every command (count, drop), and at commit (refuse).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What a protocol server should do at a given point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Carry on normally.
    Proceed,
    /// Close the connection abruptly, without a reply.
    Drop,
    /// Answer with an error (a refused commit, or a DENY on the OCS).
    Fail,
}

/// Faults armed on one device. All methods take `&self` so one instance can
/// be shared (behind an `Arc`) by every session of the device.
#[derive(Debug, Default)]
pub struct Faults {
    drop_next: AtomicBool,
    refuse_commit: AtomicBool,
    delay_ms: AtomicU64,
    /// Fail every command after this many more have been accepted (0: off).
    fail_after: Mutex<Option<u64>>,
}

impl Faults {
    pub fn new() -> Self {
        Self::default()
    }
    /// Drop the connection at the next command.
    pub fn drop_next(&self) {
        self.drop_next.store(true, Ordering::SeqCst);
    }
    /// Refuse (or, for the OCS, DENY) every commit until cleared.
    pub fn refuse_commits(&self, on: bool) {
        self.refuse_commit.store(on, Ordering::SeqCst);
    }
    /// Delay every reply by `d`.
    pub fn delay_replies(&self, d: Duration) {
        self.delay_ms.store(d.as_millis() as u64, Ordering::SeqCst);
    }
    /// Accept `n` more commands, then fail every one after.
    pub fn fail_after(&self, n: Option<u64>) {
        if let Ok(mut g) = self.fail_after.lock() {
            *g = n;
        }
    }
    /// Clear every fault.
    pub fn clear(&self) {
        self.drop_next.store(false, Ordering::SeqCst);
        self.refuse_commit.store(false, Ordering::SeqCst);
        self.delay_ms.store(0, Ordering::SeqCst);
        self.fail_after(None);
    }

    /// The reply delay currently armed.
    pub fn reply_delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms.load(Ordering::SeqCst))
    }

    /// Consult at every command a session receives.
    pub fn on_command(&self) -> Action {
        if self.drop_next.swap(false, Ordering::SeqCst) {
            return Action::Drop;
        }
        if let Ok(mut g) = self.fail_after.lock() {
            match *g {
                Some(0) => return Action::Fail,
                Some(n) => *g = Some(n - 1),
                None => {}
            }
        }
        Action::Proceed
    }

    /// Consult at every commit (after [`Faults::on_command`]).
    pub fn on_commit(&self) -> Action {
        if self.refuse_commit.load(Ordering::SeqCst) {
            Action::Fail
        } else {
            Action::Proceed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_after_counts_down_then_fails() {
        let f = Faults::new();
        f.fail_after(Some(2));
        assert_eq!(f.on_command(), Action::Proceed);
        assert_eq!(f.on_command(), Action::Proceed);
        assert_eq!(f.on_command(), Action::Fail);
        f.clear();
        assert_eq!(f.on_command(), Action::Proceed);
    }

    #[test]
    fn drop_fires_once_and_commit_refusal_sticks() {
        let f = Faults::new();
        f.drop_next();
        assert_eq!(f.on_command(), Action::Drop);
        assert_eq!(f.on_command(), Action::Proceed);
        f.refuse_commits(true);
        assert_eq!(f.on_commit(), Action::Fail);
        assert_eq!(f.on_commit(), Action::Fail);
    }
}
