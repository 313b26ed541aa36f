//! The device side of NETCONF: running and candidate datastores, locks, and
//! the confirmed-commit timer. The candidate is shared by all sessions, as
//! RFC 6241 defines it (that is what `<lock>` protects).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tracing::info;
use vclos_drivers::netconf::xml::Element;

use super::super::faults::Faults;

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
}

impl NetconfDevice {
    /// A device whose running (and candidate) datastore holds the children
    /// of `initial` (a `<data>` or `<config>` element).
    pub fn new(name: &str, initial: Element, faults: Arc<Faults>) -> Arc<Self> {
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
        })
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
