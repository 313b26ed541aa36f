//! Fault injection for emulated devices, shared by every protocol endpoint.
//!
//! Tests (and `vclos emu serve` flags) arm faults on a device; each protocol
//! server consults [`Faults`] at the documented points: before every reply
//! (delay), at every command (count, drop), and at commit (refuse). Every
//! open session also watches [`Faults::disconnects`], so a test can make the
//! device close its sessions between two transactions (a reboot, the
//! device's own idle timeout). Successful logins are counted, so tests can
//! assert that the controller reuses sessions instead of logging in again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

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
#[derive(Debug)]
pub struct Faults {
    drop_next: AtomicBool,
    refuse_commit: AtomicBool,
    delay_ms: AtomicU64,
    /// Fail every command after this many more have been accepted (0: off).
    fail_after: Mutex<Option<u64>>,
    /// Bumped to close every open session.
    disconnect: watch::Sender<u64>,
    logins: AtomicU64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            drop_next: AtomicBool::new(false),
            refuse_commit: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            fail_after: Mutex::new(None),
            disconnect: watch::Sender::new(0),
            logins: AtomicU64::new(0),
        }
    }
}

impl Faults {
    pub fn new() -> Self {
        Self::default()
    }
    /// Close every session open now, without a reply (new connections are
    /// accepted as usual).
    pub fn disconnect_all(&self) {
        self.disconnect.send_modify(|n| *n += 1);
    }
    /// What a session watches: it changes at every [`Faults::disconnect_all`].
    pub fn disconnects(&self) -> watch::Receiver<u64> {
        self.disconnect.subscribe()
    }
    /// Record a successful login (SSH authentication, TL1 `ACT-USER`).
    pub fn count_login(&self) {
        self.logins.fetch_add(1, Ordering::SeqCst);
    }
    /// Successful logins so far.
    pub fn logins(&self) -> u64 {
        self.logins.load(Ordering::SeqCst)
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
    fn disconnects_are_seen_by_every_watcher_and_logins_count() {
        let f = Faults::new();
        let (mut a, mut b) = (f.disconnects(), f.disconnects());
        assert!(!a.has_changed().unwrap());
        f.disconnect_all();
        assert!(a.has_changed().unwrap() && b.has_changed().unwrap());
        a.mark_unchanged();
        assert!(!a.has_changed().unwrap());
        b.mark_unchanged();
        f.count_login();
        f.count_login();
        assert_eq!(f.logins(), 2);
        f.clear();
        assert_eq!(f.logins(), 2, "clearing faults keeps the count");
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
