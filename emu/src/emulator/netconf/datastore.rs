//! The device side of NETCONF: running and candidate datastores, locks, and
//! the confirmed-commit timer. The candidate is shared by all sessions, as
//! RFC 6241 defines it (that is what `<lock>` protects).
//!
//! The device also keeps the registry of its open sessions, so
//! `<kill-session>` (RFC 6241 7.9) can end another one, its
//! [`Limits`] on what a peer may send, and its session slots
//! ([`NetconfDevice::clients`], [`NetconfDevice::netconf_sessions`]): at
//! most [`NETCONF_SESSIONS`] (15, Huawei VRP8's `max-sessions` default;
//! [`crate::emulator::slots`]) SSH connections and as many NETCONF sessions
//! at once, so the device's memory is bounded by 15 sessions' [`Limits`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::info;
use vclos_drivers::netconf::xml::Element;

use super::super::faults::Faults;
use super::super::slots::{SessionSlots, NETCONF_SESSIONS};
use crate::schema::Schema;

/// What one message may be, so a hostile peer cannot exhaust the
/// emulator's stack or memory (see docs/devices/netconf-emulator.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes in one message, framing excluded (RFC 6242 framing is
    /// refused while reading past it). Default 16 MiB.
    pub max_message: usize,
    /// Element nesting depth. Default 256 (OpenConfig data trees are
    /// under 20 deep; the rpc envelope adds 3).
    pub max_depth: usize,
    /// Elements in one message. Default 1,000,000 (an element costs about
    /// 120 bytes parsed, so this bounds a message's tree near 120 MiB).
    pub max_elements: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message: 16 * 1024 * 1024,
            max_depth: 256,
            max_elements: 1_000_000,
        }
    }
}

/// How a device is built beyond its name and initial configuration.
#[derive(Debug, Clone, Default)]
pub struct DeviceOptions {
    pub limits: Limits,
    /// YANG models edits and datastores are validated against (`None`:
    /// structural checks only).
    pub schema: Option<Arc<Schema>>,
}

impl DeviceOptions {
    /// Default limits, and the process-wide OpenConfig schema when this
    /// build has libyang and the models are installed
    /// ([`crate::schema::shared_openconfig`]).
    pub fn openconfig() -> Self {
        Self {
            limits: Limits::default(),
            schema: crate::schema::shared_openconfig(),
        }
    }
}

/// The kill switch of one open session (RFC 6241 7.9).
#[derive(Debug, Default)]
pub struct KillSwitch {
    killed: AtomicBool,
    notify: Notify,
}

impl KillSwitch {
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Completes once the session was killed (at once if it already was).
    pub async fn killed(&self) {
        while !self.is_killed() {
            self.notify.notified().await;
        }
    }

    fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// A datastore name as it appears in `<target>`/`<source>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    Running,
    Candidate,
}

impl Store {
    pub fn parse(s: &str) -> Option<Store> {
        match s {
            "running" => Some(Store::Running),
            "candidate" => Some(Store::Candidate),
            _ => None,
        }
    }
}

/// A confirmed commit awaiting confirmation.
#[derive(Debug, Clone)]
pub struct Pending {
    /// Running before the confirmed commit: what a timeout restores.
    pub backup: Element,
    pub owner: u64,
    /// Bumped on every (re)arm so a stale timer does nothing.
    pub generation: u64,
}

#[derive(Debug)]
pub struct State {
    pub running: Element,
    pub candidate: Element,
    pub lock_running: Option<u64>,
    pub lock_candidate: Option<u64>,
    pub pending: Option<Pending>,
    generation: u64,
    /// Bumped whenever running changes (commit, revert), so readers can
    /// cache what they derive from it.
    pub running_version: u64,
}

impl State {
    pub fn lock_of(&mut self, s: Store) -> &mut Option<u64> {
        match s {
            Store::Running => &mut self.lock_running,
            Store::Candidate => &mut self.lock_candidate,
        }
    }

    pub fn store(&self, s: Store) -> &Element {
        match s {
            Store::Running => &self.running,
            Store::Candidate => &self.candidate,
        }
    }

    /// What ending session `id` does to the datastores (close-session,
    /// connection loss, kill-session): its locks are released, a
    /// candidate it had locked is discarded (RFC 6241 8.3.5.2), and a
    /// confirmed commit it issued and did not confirm is reverted
    /// (RFC 6241 8.4.1; no `persist`).
    pub fn release(&mut self, id: u64) {
        if self.lock_candidate == Some(id) {
            self.lock_candidate = None;
            self.candidate = self.running.clone();
        }
        if self.lock_running == Some(id) {
            self.lock_running = None;
        }
        if self.pending.as_ref().is_some_and(|p| p.owner == id) {
            self.revert();
        }
    }

    /// Undo a pending confirmed commit now (timeout, cancel, or owner gone).
    pub fn revert(&mut self) -> bool {
        match self.pending.take() {
            Some(p) => {
                self.running = p.backup.clone();
                self.candidate = p.backup;
                self.running_version += 1;
                true
            }
            None => false,
        }
    }
}

/// An emulated NETCONF (OpenConfig) device.
#[derive(Debug)]
pub struct NetconfDevice {
    name: String,
    state: Mutex<State>,
    faults: Arc<Faults>,
    next_session: AtomicU64,
    options: DeviceOptions,
    sessions: Mutex<HashMap<u64, Arc<KillSwitch>>>,
    /// One per SSH connection.
    clients: Arc<SessionSlots>,
    /// One per NETCONF session (`netconf` subsystem channel).
    netconf_sessions: Arc<SessionSlots>,
}

impl NetconfDevice {
    /// A device whose running (and candidate) datastore holds the children
    /// of `initial` (a `<data>` or `<config>` element), with
    /// [`DeviceOptions::openconfig`].
    pub fn new(name: &str, initial: Element, faults: Arc<Faults>) -> Arc<Self> {
        Self::with_options(name, initial, faults, DeviceOptions::openconfig())
    }

    /// [`NetconfDevice::new`] with explicit limits and schema.
    pub fn with_options(
        name: &str,
        initial: Element,
        faults: Arc<Faults>,
        options: DeviceOptions,
    ) -> Arc<Self> {
        let root = Element {
            name: "data".into(),
            children: initial.children,
            ..Element::default()
        };
        Arc::new(Self {
            name: name.to_string(),
            state: Mutex::new(State {
                running: root.clone(),
                candidate: root,
                lock_running: None,
                lock_candidate: None,
                pending: None,
                generation: 0,
                running_version: 0,
            }),
            faults,
            next_session: AtomicU64::new(1),
            options,
            sessions: Mutex::new(HashMap::new()),
            clients: SessionSlots::new(NETCONF_SESSIONS),
            netconf_sessions: SessionSlots::new(NETCONF_SESSIONS),
        })
    }

    /// The SSH connections' slots: the server takes one per accepted
    /// connection and refuses connections beyond the maximum.
    pub fn clients(&self) -> &Arc<SessionSlots> {
        &self.clients
    }

    /// The NETCONF sessions' slots: the transport takes one per `netconf`
    /// subsystem and closes the channel of a session beyond the maximum.
    pub fn netconf_sessions(&self) -> &Arc<SessionSlots> {
        &self.netconf_sessions
    }

    pub fn limits(&self) -> Limits {
        self.options.limits
    }

    pub fn schema(&self) -> Option<&Arc<Schema>> {
        self.options.schema.as_ref()
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<u64, Arc<KillSwitch>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register an open session; its transport watches the returned switch.
    pub(super) fn register(&self, id: u64) -> Arc<KillSwitch> {
        let k = Arc::new(KillSwitch::default());
        self.sessions().insert(id, k.clone());
        k
    }

    pub(super) fn unregister(&self, id: u64) {
        self.sessions().remove(&id);
    }

    /// Kill session `id` (RFC 6241 7.9): release what it holds (with the
    /// state lock held by the caller, passed in) and tell its transport
    /// to close. False when no such session is open.
    pub(super) fn kill(&self, st: &mut State, id: u64) -> bool {
        let Some(k) = self.sessions().remove(&id) else {
            return false;
        };
        st.release(id);
        k.kill();
        info!(device = %self.name, session = id, "session killed");
        true
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        // Edits are made on copies and swapped in, so a poisoned lock still
        // guards a consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A snapshot of running.
    pub fn running(&self) -> Element {
        self.state().running.clone()
    }

    /// Changes whenever running changes.
    pub fn running_version(&self) -> u64 {
        self.state().running_version
    }

    pub(super) fn new_session_id(&self) -> u64 {
        self.next_session.fetch_add(1, Ordering::SeqCst)
    }

    /// Arm (or re-arm) the confirmed-commit timer: unless confirmed within
    /// `timeout`, running reverts. Must be called with the state lock held
    /// (passed in) and from inside a tokio runtime.
    pub(super) fn arm(self: &Arc<Self>, st: &mut State, owner: u64, timeout: Duration) {
        st.generation += 1;
        let generation = st.generation;
        let backup = match st.pending.take() {
            Some(p) => p.backup,
            None => st.running.clone(),
        };
        st.pending = Some(Pending {
            backup,
            owner,
            generation,
        });
        let dev = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let mut st = dev.state();
            if st
                .pending
                .as_ref()
                .is_some_and(|p| p.generation == generation)
            {
                st.revert();
                info!(device = %dev.name, "confirmed commit not confirmed in time: reverted");
            }
        });
    }
}
