//! An emulated SONiC switch: the running config_db, the Generic Config
//! Updater's checkpoints, and the small part of a Linux box its operators
//! and the driver use (a bash-like shell, files in `/tmp`).
//!
//! [`SonicDevice`] holds the device-wide state every SSH session shares;
//! [`session::SonicSession`] is one login (prompt `USER@HOST:~$ `), served by
//! the same SSH server as the Huawei CE CLI through [`ShellDevice`]; its
//! command lines are parsed by [`words`] and its `config` commands are the
//! `gcu` module's.
//!
//! Changes are all-or-nothing: `config apply-patch` / `config replace` build
//! the new document on a copy, check it ([`validate::check`]) and only then
//! make it running; a refused change leaves running as it was. A fresh
//! switch holds its baseline plus hardware settings ([`validate::initial`]).
//!
//! # Sessions and line length
//! sshd serves at most [`SONIC_SSH_CONNECTIONS`] connections at once
//! (`MaxStartups` 10:30:100, [`super::slots`]). bash itself puts no limit
//! on a command line (readline grows its buffer); the emulator reads at most
//! [`MAX_LINE`] = 64 KiB of one and answers a longer one, which it does not
//! run, with `-bash: line too long ...` (exit status 2, as bash's usage
//! errors), its own bound so a session's memory stays bounded. The driver
//! writes files 1 KiB a line, far below.
//!
//! # Files
//! `/tmp` is a filesystem of [`MAX_TMP_BYTES`] (64 MiB) and at most
//! [`MAX_TMP_FILES`] files, as a switch's small tmpfs is bounded: a write
//! past either fails as bash reports `ENOSPC` (`write error: No space left
//! on device`, exit status 1) and leaves the file as it was, so no client
//! can grow the emulator's memory through files. The driver writes one
//! patch file of a few kilobytes and removes it.
//!
//! # Faults
//! Every command line consults [`Faults::on_command`] (drop: the connection
//! closes; fail: bash cannot fork), and a non-dry-run `apply-patch` or
//! `replace` consults [`Faults::on_commit`] (refused: an `Error:` line, running
//! unchanged). Reply delays are applied by the transport.

mod gcu;
pub mod session;
mod subif;
pub mod validate;
pub mod words;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use vclos_drivers::configdb::{self, ConfigDb};

use super::faults::Faults;
use super::shell::{SessionKind, ShellDevice, ShellSession, DEFAULT_MAX_LINE};
use super::slots::{SessionSlots, SONIC_SSH_CONNECTIONS};

/// The longest command line the emulated shell reads, in bytes.
pub const MAX_LINE: usize = DEFAULT_MAX_LINE;

/// Bytes all `/tmp` files may hold together (module doc, "Files").
pub const MAX_TMP_BYTES: usize = 64 * 1024 * 1024;
/// Files `/tmp` may hold.
pub const MAX_TMP_FILES: usize = 1024;

/// Commands kept in the history (oldest dropped first).
const HISTORY: usize = 1000;

#[derive(Debug, Default)]
struct State {
    running: ConfigDb,
    /// Bumped at every change of running.
    version: u64,
    checkpoints: BTreeMap<String, ConfigDb>,
    /// The `/tmp` files: path to content.
    files: BTreeMap<String, String>,
    history: VecDeque<Vec<String>>,
}

/// An emulated SONiC switch.
#[derive(Debug)]
pub struct SonicDevice {
    name: String,
    state: Mutex<State>,
    faults: Arc<Faults>,
    /// One per SSH connection.
    sessions: Arc<SessionSlots>,
}

impl SonicDevice {
    /// A switch named `name` running `initial`, which must pass the same
    /// checks as any change.
    pub fn new(name: &str, initial: ConfigDb, faults: Arc<Faults>) -> Result<Arc<Self>, String> {
        validate::check(&initial, &initial, &[validate::IGNORE_ACL_RULE.to_string()])?;
        Ok(Arc::new(Self {
            name: name.to_string(),
            state: Mutex::new(State {
                running: initial,
                ..State::default()
            }),
            faults,
            sessions: SessionSlots::new(SONIC_SSH_CONNECTIONS),
        }))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Changes are built on copies, so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running config_db.
    pub fn running(&self) -> ConfigDb {
        self.state().running.clone()
    }

    /// Running as `show runningconfiguration all` prints it.
    pub fn running_text(&self) -> String {
        configdb::to_text(&self.state().running)
    }

    /// Changes whenever running changes.
    pub fn running_version(&self) -> u64 {
        self.state().version
    }

    /// The hostname the prompt shows.
    pub fn hostname(&self) -> String {
        self.state()
            .running
            .get("DEVICE_METADATA")
            .and_then(|m| m.pointer("/localhost/hostname"))
            .and_then(|h| h.as_str())
            .map_or_else(|| self.name.clone(), str::to_string)
    }

    /// Checkpoint names, sorted.
    pub fn checkpoints(&self) -> Vec<String> {
        self.state().checkpoints.keys().cloned().collect()
    }

    /// A `/tmp` file's content.
    pub fn file(&self, path: &str) -> Option<String> {
        self.state().files.get(path).cloned()
    }

    /// The `/tmp` files' paths, sorted.
    pub fn file_names(&self) -> Vec<String> {
        self.state().files.keys().cloned().collect()
    }

    /// The commands run, as words (what a shell would have executed), oldest
    /// first.
    pub fn history(&self) -> Vec<Vec<String>> {
        self.state().history.iter().cloned().collect()
    }

    fn record(&self, words: &[String]) {
        let mut st = self.state();
        if st.history.len() == HISTORY {
            st.history.pop_front();
        }
        st.history.push_back(words.to_vec());
    }

    /// Make `make(running)` running if it passes the checks (one step under
    /// the lock, so concurrent sessions never interleave), the `ignore`
    /// JSON Pointers left out of the model checks; the error says why not. A
    /// dry run only checks.
    fn change(
        &self,
        dry_run: bool,
        ignore: &[String],
        make: impl FnOnce(&ConfigDb) -> Result<ConfigDb, String>,
    ) -> Result<(), String> {
        let mut st = self.state();
        let new = make(&st.running)?;
        validate::check(&st.running, &new, ignore)?;
        if !dry_run && new != st.running {
            st.running = new;
            st.version += 1;
        }
        Ok(())
    }
}

impl ShellDevice for SonicDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    fn session(self: Arc<Self>, user: &str, kind: SessionKind) -> Box<dyn ShellSession> {
        Box::new(session::SonicSession::new(self, user, kind))
    }

    fn sessions(&self) -> &Arc<SessionSlots> {
        &self.sessions
    }

    fn max_line(&self) -> usize {
        MAX_LINE
    }
}

#[cfg(test)]
mod tests;
