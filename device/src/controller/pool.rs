//! Open device sessions kept across transactions.
//!
//! Opening a session is most of a small transaction's device time: SSH key
//! exchange, password authentication and a shell, or a Telnet connection and
//! a TL1 login, tens of milliseconds per device. A [`SessionPool`] wraps a
//! [`DriverFactory`] and is one itself, so the controller and the job
//! lifecycle use it unchanged:
//!
//! * `driver(device)` hands out the device's idle open session if there is
//!   one (taking it out of the pool: a session serves one transaction at a
//!   time), else a fresh driver from the wrapped factory.
//! * `open` on a pooled session is a health check instead of a connect:
//!   [`Driver::reuse`] (one cheap round trip that also resets the driver's
//!   per-transaction state, so `rollback(None)` cannot reach back into an
//!   earlier transaction), bounded by [`PoolOptions::check_timeout`]. A
//!   stale session (closed by the device, timed out, not reusable) is
//!   dropped and a fresh one opened: one transparent reconnect. Host keys are
//!   verified on every connect as before: a reconnect is an ordinary open.
//! * `close` returns the session to the pool, unless any call on it failed
//!   or was abandoned mid-way (the controller's step timeout dropped the
//!   call): such a session is closed, never reused. A driver dropped without
//!   `close` (a dead controller task) takes its session with it.
//! * Idle sessions are closed after [`PoolOptions::idle_timeout`] by a
//!   background task (running only while sessions are idle), and all of
//!   them by [`SessionPool::shutdown`]. At most one idle session is kept per
//!   device.
//!
//! A driver whose [`Driver::reuse`] is unsupported is never kept: the pool
//! then behaves as its wrapped factory for that device.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::{debug, info, Instrument};
use vclos_drivers::{Capabilities, CommitId, Driver, DriverError, ErrorKind, LoadMode, Step};

use super::change::DriverFactory;

/// How long sessions are kept and how hard they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// An idle session is closed after this long. Devices drop idle
    /// sessions themselves (VRP's VTY default is 10 minutes); a session they
    /// dropped first is caught by the health check and replaced.
    pub idle_timeout: Duration,
    /// Bound on the health check of a pooled session before reuse.
    pub check_timeout: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            idle_timeout: Duration::from_secs(300),
            check_timeout: Duration::from_secs(2),
        }
    }
}

/// What the pool has done since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Sessions opened by connecting (first use, or replacing a stale one).
    pub opened: u64,
    /// Transactions served by an already open session.
    pub reused: u64,
    /// Pooled sessions that failed their health check and were replaced.
    pub reconnected: u64,
    /// Sessions closed instead of returned: a call on them failed or was
    /// abandoned, or the driver was dropped without `close`.
    pub discarded: u64,
    /// Idle sessions closed by the idle timeout.
    pub expired: u64,
}

struct IdleSession {
    driver: Box<dyn Driver>,
    since: Instant,
}

#[derive(Default)]
struct State {
    idle: HashMap<String, IdleSession>,
    /// Devices whose driver cannot be reused.
    single_use: HashSet<String>,
    stats: PoolStats,
    reaper: Option<JoinHandle<()>>,
    shut: bool,
}

struct Shared {
    options: PoolOptions,
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: use it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self, f: impl FnOnce(&mut PoolStats)) {
        f(&mut self.lock().stats);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(r) = self.lock().reaper.take() {
            r.abort();
        }
    }
}

/// A [`DriverFactory`] that keeps sessions open across transactions. See
/// the module docs.
pub struct SessionPool {
    factory: Arc<dyn DriverFactory>,
    shared: Arc<Shared>,
}

impl fmt::Debug for SessionPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("SessionPool")
            .field("options", &self.shared.options)
            .field("idle", &st.idle.len())
            .field("stats", &st.stats)
            .finish_non_exhaustive()
    }
}

impl SessionPool {
    pub fn new(factory: Arc<dyn DriverFactory>, options: PoolOptions) -> Self {
        SessionPool {
            factory,
            shared: Arc::new(Shared {
                options,
                state: Mutex::new(State::default()),
            }),
        }
    }

    pub fn options(&self) -> PoolOptions {
        self.shared.options
    }

    pub fn stats(&self) -> PoolStats {
        self.shared.lock().stats
    }

    /// Devices with an idle open session, sorted.
    pub fn idle_devices(&self) -> Vec<String> {
        let mut v: Vec<String> = self.shared.lock().idle.keys().cloned().collect();
        v.sort();
        v
    }

    /// Close every idle session (politely, each bounded by the check
    /// timeout) and keep no more: sessions returned later are closed.
    pub async fn shutdown(&self) {
        let (sessions, reaper) = {
            let mut st = self.shared.lock();
            st.shut = true;
            let idle: Vec<(String, IdleSession)> = st.idle.drain().collect();
            (idle, st.reaper.take())
        };
        if let Some(r) = reaper {
            r.abort();
        }
        close_all(
            sessions.into_iter().map(|(d, s)| (d, s.driver)).collect(),
            self.shared.options.check_timeout,
        )
        .await;
    }
}

impl DriverFactory for SessionPool {
    fn driver(&self, device: &str) -> Result<Box<dyn Driver>, DriverError> {
        let now = Instant::now();
        let taken = self.shared.lock().idle.remove(device);
        let (inner, reused) = match taken {
            Some(s) if now.duration_since(s.since) < self.shared.options.idle_timeout => {
                (s.driver, true)
            }
            stale => {
                if let Some(s) = stale {
                    // Expired before the reaper ran: not worth a check.
                    self.shared.count(|c| c.expired += 1);
                    retire(device, s.driver, self.shared.options.check_timeout);
                }
                (self.factory.driver(device)?, false)
            }
        };
        Ok(Box::new(Pooled {
            device: device.to_string(),
            inner: Some(inner),
            reused,
            connected: reused,
            broken: false,
            in_call: false,
            factory: Arc::clone(&self.factory),
            pool: Arc::downgrade(&self.shared),
        }))
    }
}

/// Close `driver` in the background, bounded, if a runtime is at hand
/// (otherwise dropping it closes its socket).
fn retire(device: &str, mut driver: Box<dyn Driver>, limit: Duration) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let span = tracing::info_span!("pool.close", device = %device);
        rt.spawn(
            async move {
                let _ = tokio::time::timeout(limit, driver.close()).await;
            }
            .instrument(span),
        );
    }
}

/// Close sessions concurrently, each bounded by `limit`.
async fn close_all(sessions: Vec<(String, Box<dyn Driver>)>, limit: Duration) {
    let mut set = JoinSet::new();
    for (device, mut d) in sessions {
        let span = tracing::info_span!("pool.close", device = %device);
        set.spawn(
            async move {
                let _ = tokio::time::timeout(limit, d.close()).await;
                debug!("idle session closed");
            }
            .instrument(span),
        );
    }
    while set.join_next().await.is_some() {}
}

/// Keep `driver` as `device`'s idle session; gives it back if the pool
/// does not want it (shut down, single-use device, one already idle).
fn give_back(pool: &Arc<Shared>, device: &str, driver: Box<dyn Driver>) -> Option<Box<dyn Driver>> {
    let mut st = pool.lock();
    if st.shut || st.single_use.contains(device) || st.idle.contains_key(device) {
        return Some(driver);
    }
    st.idle.insert(
        device.to_string(),
        IdleSession {
            driver,
            since: Instant::now(),
        },
    );
    // A reaper whose runtime has gone (the pool moved to another one) is
    // finished too.
    if st.reaper.as_ref().is_none_or(JoinHandle::is_finished) {
        let weak = Arc::downgrade(pool);
        st.reaper = Some(tokio::spawn(reap(weak)));
    }
    None
}

/// Close idle sessions as they expire; ends when none is left (the next
/// return starts a new one) or the pool is gone.
async fn reap(pool: Weak<Shared>) {
    loop {
        let (expired, next, limit) = {
            let Some(p) = pool.upgrade() else { return };
            let timeout = p.options.idle_timeout;
            let now = Instant::now();
            let mut st = p.lock();
            let old: Vec<String> = st
                .idle
                .iter()
                .filter(|(_, s)| now.duration_since(s.since) >= timeout)
                .map(|(d, _)| d.clone())
                .collect();
            let expired: Vec<(String, Box<dyn Driver>)> = old
                .into_iter()
                .filter_map(|d| st.idle.remove(&d).map(|s| (d, s.driver)))
                .collect();
            st.stats.expired += expired.len() as u64;
            let next = st.idle.values().map(|s| s.since + timeout).min();
            if next.is_none() {
                st.reaper = None;
            }
            (expired, next, p.options.check_timeout)
        };
        if !expired.is_empty() {
            info!(sessions = expired.len(), "closing idle sessions");
            close_all(expired, limit).await;
        }
        match next {
            Some(t) => tokio::time::sleep_until(t).await,
            None => return,
        }
    }
}

/// A session lent to one transaction.
struct Pooled {
    device: String,
    /// `None` once closed or returned.
    inner: Option<Box<dyn Driver>>,
    /// Taken from the pool already open: `open` checks it instead.
    reused: bool,
    /// The inner driver holds an open session (worth returning).
    connected: bool,
    /// A call failed: never return this session.
    broken: bool,
    /// A call is under way; still set at the next call, it was abandoned.
    in_call: bool,
    factory: Arc<dyn DriverFactory>,
    pool: Weak<Shared>,
}

fn gone(device: &str, step: Step) -> DriverError {
    DriverError {
        device: device.to_string(),
        step,
        kind: ErrorKind::Disconnected("the session was closed".into()),
    }
}

/// Run one call of the inner driver, recording whether it failed.
macro_rules! tracked {
    ($self:ident, $step:expr, |$d:ident| $call:expr) => {{
        $self.begin();
        let r = match $self.inner.as_mut() {
            Some($d) => $call.await,
            None => Err(gone(&$self.device, $step)),
        };
        $self.settle(r)
    }};
}

impl Pooled {
    fn begin(&mut self) {
        if self.in_call {
            self.broken = true;
        }
        self.in_call = true;
    }

    fn settle<T>(&mut self, r: Result<T, DriverError>) -> Result<T, DriverError> {
        self.in_call = false;
        if r.is_err() {
            self.broken = true;
        }
        r
    }

    /// Check a pooled session; on failure replace it by a fresh one.
    async fn check_or_reconnect(&mut self) -> Result<(), DriverError> {
        let pool = self.pool.upgrade();
        let limit = pool
            .as_ref()
            .map_or(PoolOptions::default().check_timeout, |p| {
                p.options.check_timeout
            });
        if std::mem::take(&mut self.reused) {
            let Some(d) = self.inner.as_mut() else {
                return Err(gone(&self.device, Step::Open));
            };
            let why = match tokio::time::timeout(limit, d.reuse()).await {
                Ok(Ok(())) => {
                    if let Some(p) = &pool {
                        p.count(|c| c.reused += 1);
                    }
                    debug!(device = %self.device, "reusing the open session");
                    return Ok(());
                }
                Ok(Err(e)) => {
                    if let (ErrorKind::Unsupported(_), Some(p)) = (&e.kind, &pool) {
                        p.lock().single_use.insert(self.device.clone());
                    }
                    e.to_string()
                }
                Err(_) => format!("no answer in {limit:?}"),
            };
            info!(device = %self.device, reason = %why, "pooled session is stale; reconnecting");
            if let Some(p) = &pool {
                p.count(|c| c.reconnected += 1);
            }
            let fresh = self.factory.driver(&self.device)?;
            self.connected = false;
            if let Some(stale) = self.inner.replace(fresh) {
                retire(&self.device, stale, limit);
            }
        }
        let Some(d) = self.inner.as_mut() else {
            return Err(gone(&self.device, Step::Open));
        };
        d.open().await?;
        self.connected = true;
        if let Some(p) = &pool {
            p.count(|c| c.opened += 1);
        }
        Ok(())
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if self.inner.is_some() && self.connected {
            if let Some(p) = self.pool.upgrade() {
                p.count(|c| c.discarded += 1);
            }
        }
    }
}

#[async_trait]
impl Driver for Pooled {
    fn device(&self) -> &str {
        &self.device
    }

    fn capabilities(&self) -> Capabilities {
        self.inner
            .as_ref()
            .map(|d| d.capabilities())
            .unwrap_or_default()
    }

    async fn open(&mut self) -> Result<(), DriverError> {
        self.begin();
        let r = self.check_or_reconnect().await;
        self.settle(r)
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        let Some(mut d) = self.inner.take() else {
            return Ok(());
        };
        let pool = self.pool.upgrade();
        let clean = self.connected && !self.broken && !self.in_call;
        if let (true, Some(p)) = (clean, &pool) {
            match give_back(p, &self.device, d) {
                None => {
                    debug!(device = %self.device, "session returned to the pool");
                    return Ok(());
                }
                Some(back) => d = back,
            }
        } else if let (true, Some(p)) = (self.connected && !clean, &pool) {
            debug!(device = %self.device, "session discarded after a failure");
            p.count(|c| c.discarded += 1);
        }
        d.close().await
    }

    async fn get_config(&mut self) -> Result<String, DriverError> {
        tracked!(self, Step::GetConfig, |d| d.get_config())
    }

    async fn load_candidate(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError> {
        tracked!(self, Step::Load, |d| d.load_candidate(config, mode))
    }

    async fn compare_config(&mut self) -> Result<String, DriverError> {
        tracked!(self, Step::Compare, |d| d.compare_config())
    }

    async fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError> {
        tracked!(self, Step::Commit, |d| d.commit(confirm))
    }

    async fn confirm(&mut self) -> Result<(), DriverError> {
        tracked!(self, Step::Confirm, |d| d.confirm())
    }

    async fn discard(&mut self) -> Result<(), DriverError> {
        tracked!(self, Step::Discard, |d| d.discard())
    }

    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        tracked!(self, Step::Rollback, |d| d.rollback(to))
    }

    async fn reuse(&mut self) -> Result<(), DriverError> {
        tracked!(self, Step::Open, |d| d.reuse())
    }
}

#[cfg(test)]
mod tests;
