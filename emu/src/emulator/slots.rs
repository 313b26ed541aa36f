//! How many sessions an emulated device serves at once, and the log
//! throttle its accept loops use.
//!
//! Every emulated management endpoint takes a [`Slot`] of its device's
//! [`SessionSlots`] for each accepted TCP connection and gives it back when
//! the connection ends; a connection beyond the device's maximum is closed
//! at once, before a byte is read, as a device whose terminal lines are all
//! in use refuses the next one. So a flood of idle connections takes at
//! most that many descriptors and tasks per device, and the others (every
//! device of a fabric is one process) still answer. A connection that never
//! logs in holds its slot until the login grace time
//! ([`super::timeouts`]) closes it, as a real VTY line is held by a user at
//! the login prompt.
//!
//! The maxima, and where they come from:
//!
//! * **Huawei CE (VRP CLI over SSH)**: [`CE_VTY_USERS`] = 21, the VTY
//!   lines 0-20 of `user-interface vty 0 20`; the device announces it at
//!   login ("Info: The max number of VTY users is 21, the number of current
//!   VTY users online is N."), N counting every connection holding a VTY,
//!   this one included.
//! * **NETCONF**: [`NETCONF_SESSIONS`] = 15, Huawei VRP8's `max-sessions`
//!   (NETCONF user interface view: "sets the maximum number of clients for
//!   the NETCONF service ... The default maximum number of clients is 15",
//!   range 0-15; NetEngine 8000 command reference). It bounds both the SSH
//!   connections and the NETCONF sessions (`netconf` subsystem channels) of
//!   the device, so its memory is bounded by 15 times a session's
//!   ([`super::netconf::datastore::Limits`]).
//! * **SONiC (OpenSSH sshd)**: sshd refuses every unauthenticated connection
//!   beyond `MaxStartups` 10:30:**100** (sshd_config(5)) and does not bound
//!   logged-in ones; the emulator bounds all connections at
//!   [`SONIC_SSH_CONNECTIONS`] = 100, its own bound for the logged-in ones.
//! * **Channels per SSH connection** (every SSH device):
//!   [`SSH_SESSIONS_PER_CONNECTION`] = 10, sshd's `MaxSessions` default
//!   ("the maximum number of open shell, login or subsystem (e.g. sftp)
//!   sessions permitted per network connection", sshd_config(5)); the next
//!   channel open is refused `administratively prohibited`, as sshd does.
//! * **OCS (TL1 over Telnet)**: [`TL1_SESSIONS`] = 32. TL1 network elements
//!   limit their concurrent TL1 sessions, by a figure each vendor sets; no
//!   common document gives one, so this is the emulator's choice: a
//!   controller needs one or two, and the suite's busiest test runs 18 at
//!   once.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::warn;

/// Concurrent VTY users of a Huawei CE (VTY 0-20).
pub const CE_VTY_USERS: usize = 21;
/// Concurrent NETCONF clients of a device (VRP8 `max-sessions` default).
pub const NETCONF_SESSIONS: usize = 15;
/// Concurrent SSH connections of a SONiC switch (sshd `MaxStartups` full).
pub const SONIC_SSH_CONNECTIONS: usize = 100;
/// Channels (shell, exec, subsystem) open at once on one SSH connection
/// (sshd `MaxSessions` default).
pub const SSH_SESSIONS_PER_CONNECTION: usize = 10;
/// Concurrent TL1 sessions of an emulated OCS.
pub const TL1_SESSIONS: usize = 32;
/// How long an accept loop pauses after a failed accept.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// The next connection `accept` yields. A failed accept (`EMFILE` when the
/// process is out of descriptors, and the like) is logged through
/// `failing` (at most once a second) and retried after [`ACCEPT_PAUSE`], so
/// the loop neither spins nor floods the log while the condition lasts, and
/// sessions ending meanwhile free what it lacked.
pub async fn accept_next<T, A, F>(mut accept: A, failing: &Throttle, endpoint: &str) -> T
where
    A: FnMut() -> F,
    F: Future<Output = io::Result<T>>,
{
    loop {
        match accept().await {
            Ok(c) => return c,
            Err(e) => {
                if let Some(held) = failing.pass() {
                    warn!(error = %e, repeated = held, "{endpoint} accept failed");
                }
                tokio::time::sleep(ACCEPT_PAUSE).await;
            }
        }
    }
}

/// A device's session counter with a maximum.
#[derive(Debug)]
pub struct SessionSlots {
    max: usize,
    used: AtomicUsize,
}

/// One taken slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot(Arc<SessionSlots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.used.fetch_sub(1, Ordering::SeqCst);
    }
}

impl SessionSlots {
    /// At most `max` sessions at once.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(SessionSlots {
            max,
            used: AtomicUsize::new(0),
        })
    }

    /// The maximum.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Slots taken now.
    pub fn in_use(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// A slot, or `None` when all `max` are taken.
    pub fn try_take(self: &Arc<Self>) -> Option<Slot> {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(self)))
    }
}

/// Lets a repeated warning through at most once per interval (one a
/// second by default), counting what it held back, so a failure that
/// repeats at the speed of a loop (an accept failing with `EMFILE`, a
/// connection flood) cannot flood the log.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    last: Mutex<Option<Instant>>,
    held: AtomicU64,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new(Duration::from_secs(1))
    }
}

impl Throttle {
    pub fn new(every: Duration) -> Self {
        Throttle {
            every,
            last: Mutex::new(None),
            held: AtomicU64::new(0),
        }
    }

    /// `Some(n)` when the message may be logged now, `n` being how many
    /// were held back since the last one; `None` to stay quiet.
    pub fn pass(&self) -> Option<u64> {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match *last {
            Some(t) if now.duration_since(t) < self.every => {
                self.held.fetch_add(1, Ordering::Relaxed);
                None
            }
            _ => {
                *last = Some(now);
                Some(self.held.swap(0, Ordering::Relaxed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn slots_stop_at_the_maximum_and_come_back_when_dropped() {
        let s = SessionSlots::new(2);
        let a = s.try_take().unwrap();
        let b = s.try_take().unwrap();
        assert_eq!(s.in_use(), 2);
        assert!(s.try_take().is_none());
        drop(a);
        assert_eq!(s.in_use(), 1);
        let _c = s.try_take().unwrap();
        assert!(s.try_take().is_none());
        drop(b);
        assert_eq!(s.in_use(), 1);
    }

    #[test]
    fn throttle_passes_the_first_and_counts_the_rest() {
        let t = Throttle::new(Duration::from_secs(3600));
        assert_eq!(t.pass(), Some(0));
        for _ in 0..1000 {
            assert_eq!(t.pass(), None);
        }
        let t = Throttle::new(Duration::ZERO);
        assert_eq!(t.pass(), Some(0));
        assert_eq!(t.pass(), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_accept_is_retried_after_a_pause_and_logged_once() {
        let failing = Throttle::new(Duration::from_secs(3600));
        let mut calls = 0;
        let start = tokio::time::Instant::now();
        let got = accept_next(
            || {
                calls += 1;
                let r = if calls <= 5 {
                    Err(io::Error::from_raw_os_error(24)) // EMFILE
                } else {
                    Ok(calls)
                };
                std::future::ready(r)
            },
            &failing,
            "test",
        )
        .await;
        assert_eq!(got, 6);
        // One pause per failure: no busy loop.
        assert_eq!(start.elapsed(), 5 * ACCEPT_PAUSE);
        // The first failure was logged; the four after it were held back.
        assert_eq!(failing.held.load(Ordering::Relaxed), 4);
    }
}
