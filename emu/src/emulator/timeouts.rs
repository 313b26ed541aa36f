//! Session timeouts of the emulated management endpoints (SSH and
//! Telnet/TL1): a connection that has not logged in within the login grace
//! time is closed, and a logged-in session that sends nothing for the idle
//! time is logged out. Without them a half-open connection would hold a
//! task and a socket of the emulator for ever.
//!
//! The models:
//!
//! * **Login grace time**: OpenSSH `sshd_config(5)` `LoginGraceTime` ("the
//!   server disconnects after this time if the user has not successfully
//!   logged in"; sshd's default is 120 s, 0 means no limit). The emulator
//!   counts from the TCP accept, so a client that never sends its SSH
//!   version line, stalls in key exchange, or never answers the password
//!   prompt is closed alike. For TL1 the same grace applies to `ACT-USER`
//!   (and restarts after `CANC-USER`).
//! * **Idle time**: a logged-in session with no input is closed. For SSH the
//!   closest OpenSSH settings are `ChannelTimeout` / `UnusedConnectionTimeout`
//!   (sshd_config(5), OpenSSH 9.2+: close channels, then connections, that
//!   carried no traffic for the interval); Huawei VRP closes VTY sessions
//!   after `idle-timeout` (10 minutes by default). TL1 network elements log
//!   idle sessions out on their own: e.g. Carrier Access "Wide Bank 28 DS3"
//!   user manual, Release 2.4, "Cancel User Session Message": the TL1 session
//!   time-out (default 31 minutes) cancels a session after the period of
//!   inactivity, announced by the autonomous message
//!   `A atag CANC` / `/* Session Timeout: <uid> */`; IBM's TL1 guide
//!   ("Issuing commands") closes a session inactive for 30 minutes.
//! * **Dead peers**: SSH `ClientAliveInterval` / `ClientAliveCountMax`
//!   (sshd_config(5)): the server asks an idle client for an answer every
//!   interval and drops it after that many unanswered requests. The SSH
//!   endpoint does this with russh's keepalives ([`CLIENT_ALIVE_INTERVAL`],
//!   [`CLIENT_ALIVE_COUNT_MAX`]); a live client answers them, so they never
//!   end a session that is merely waiting for a long command.
//!
//! Input is what counts as activity, and a command still running keeps the
//! session open whatever its length (an OCS switching delay, an injected
//! reply delay): the idle clock restarts when its reply has been sent.
//!
//! Defaults: [`DEFAULT_LOGIN_TIMEOUT`] 30 s, [`DEFAULT_IDLE_TIMEOUT`] 10 min
//! (VRP's VTY default; above the controller's 5-minute session pool expiry,
//! so the pool normally closes its sessions first, and copes when the device
//! was first).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Default login grace time.
pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Default idle time of a logged-in session.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// SSH keepalive interval to a client that sent nothing (`ClientAliveInterval`).
pub const CLIENT_ALIVE_INTERVAL: Duration = Duration::from_secs(15);
/// Unanswered SSH keepalives before a client is dropped (`ClientAliveCountMax`).
pub const CLIENT_ALIVE_COUNT_MAX: usize = 3;

/// How long an emulated endpoint waits for a login and for input.
/// `None` disables that timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionTimeouts {
    /// Close a connection not logged in this long after it was accepted.
    pub login: Option<Duration>,
    /// Close a logged-in session without input (and no command running) this long.
    pub idle: Option<Duration>,
}

impl Default for SessionTimeouts {
    fn default() -> Self {
        SessionTimeouts {
            login: Some(DEFAULT_LOGIN_TIMEOUT),
            idle: Some(DEFAULT_IDLE_TIMEOUT),
        }
    }
}

impl SessionTimeouts {
    /// From whole seconds, 0 meaning "never" (as `LoginGraceTime 0`).
    pub fn from_secs(login: u64, idle: u64) -> Self {
        let d = |s: u64| (s > 0).then(|| Duration::from_secs(s));
        SessionTimeouts {
            login: d(login),
            idle: d(idle),
        }
    }
}

/// Why a session was closed by its timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Not logged in within the login grace time.
    Login,
    /// Logged in, no input for the idle time.
    Idle,
}

impl Expiry {
    /// The reason given to the client.
    pub fn reason(self) -> &'static str {
        match self {
            Expiry::Login => "login grace time exceeded",
            Expiry::Idle => "session idle timeout",
        }
    }
}

/// When a connection's timers fire, given its login state: the login
/// deadline counts from `waiting_since` (accept, or logout), the idle one
/// from the last activity; `None` when no timer applies.
pub fn deadline(
    t: &SessionTimeouts,
    logged_in: bool,
    waiting_since: Instant,
    last_activity: Instant,
) -> Option<(Instant, Expiry)> {
    if logged_in {
        t.idle.map(|d| (last_activity + d, Expiry::Idle))
    } else {
        t.login.map(|d| (waiting_since + d, Expiry::Login))
    }
}

/// Sleep until `at`, or for ever.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The activity of one connection with several concurrent channels (SSH):
/// whether it logged in, how many commands are running, when the last one
/// ended or the last input came. The channels report, a watchdog waits on
/// [`Activity::expired`].
#[derive(Debug)]
pub struct Activity {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug)]
struct State {
    opened: Instant,
    logged_in: bool,
    running: usize,
    last: Instant,
}

/// Held while a command (input being handled, reply being sent) runs.
#[derive(Debug)]
pub struct Running(Arc<Activity>);

impl Drop for Running {
    fn drop(&mut self) {
        {
            let mut st = self.0.lock();
            st.running = st.running.saturating_sub(1);
            st.last = Instant::now();
        }
        self.0.changed.notify_waiters();
    }
}

impl Activity {
    /// A connection accepted now.
    pub fn new() -> Arc<Self> {
        let now = Instant::now();
        Arc::new(Activity {
            state: Mutex::new(State {
                opened: now,
                logged_in: false,
                running: 0,
                last: now,
            }),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client authenticated: the idle clock starts.
    pub fn logged_in(&self) {
        {
            let mut st = self.lock();
            st.logged_in = true;
            st.last = Instant::now();
        }
        self.changed.notify_waiters();
    }

    /// Input arrived: a command runs until the guard is dropped.
    pub fn running(self: &Arc<Self>) -> Running {
        {
            let mut st = self.lock();
            st.running += 1;
            st.last = Instant::now();
        }
        self.changed.notify_waiters();
        Running(Arc::clone(self))
    }

    /// Resolves when the connection must be closed under `t`; never while
    /// a command runs.
    pub async fn expired(&self, t: SessionTimeouts) -> Expiry {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Registered before reading the state, so no change is missed.
            notified.as_mut().enable();
            let due = {
                let st = self.lock();
                if st.running > 0 {
                    None
                } else {
                    deadline(&t, st.logged_in, st.opened, st.last)
                }
            };
            match due {
                Some((at, why)) if Instant::now() >= at => return why,
                Some((at, _)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = &mut notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn login_grace_counts_from_accept() {
        let a = Activity::new();
        let t = SessionTimeouts::from_secs(2, 5);
        let start = Instant::now();
        assert_eq!(a.expired(t).await, Expiry::Login);
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_never_expires_while_a_command_runs() {
        let a = Activity::new();
        a.logged_in();
        let t = SessionTimeouts::from_secs(2, 1);
        let start = Instant::now();
        let busy = a.running();
        let watch = {
            let a = a.clone();
            tokio::spawn(async move { a.expired(t).await })
        };
        // A 10 s command: not idle during it.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!watch.is_finished());
        drop(busy);
        assert_eq!(watch.await.unwrap(), Expiry::Idle);
        // Idle counts from the end of the command.
        assert_eq!(start.elapsed(), Duration::from_secs(11));
    }

    #[tokio::test(start_paused = true)]
    async fn disabled_timeouts_never_fire() {
        let a = Activity::new();
        let t = SessionTimeouts::from_secs(0, 0);
        let r = tokio::time::timeout(Duration::from_secs(3600), a.expired(t)).await;
        assert!(r.is_err());
        a.logged_in();
        let r = tokio::time::timeout(Duration::from_secs(3600), a.expired(t)).await;
        assert!(r.is_err());
    }
}
