//! The Huawei CloudEngine CLI as a pure state machine: a line in, text and a
//! new prompt out, so it is tested without sockets and the SSH server is a
//! thin byte pump around it.
//!
//! # Two-stage configuration, as on a CE
//! A [`SwitchDevice`] holds the running configuration and the commit history;
//! each [`CliSession`] holds its own private candidate: a base snapshot of
//! running, the edited tree, and the log of configuration lines typed (with
//! the view each was typed in). Two sessions never see each other's
//! uncommitted edits. At `commit` the log is *replayed* onto the current
//! running configuration, so a commit by another session in between is merged
//! rather than overwritten; if the replay fails (say the other session deleted
//! a view this one edits) the commit is refused with an `Error:` line and the
//! candidate is kept. The prompt reads `[*NAME]` while the candidate differs
//! from its base, `[~NAME]` otherwise.
//!
//! # Prompts
//! User view `<NAME>`; system view `[~NAME]`; views `[~NAME-<tag>]` with the
//! tag VRP uses: the interface name (`100GE1/0/1`), `acl4-basic-N` /
//! `acl4-advance-N` / `acl-L2-N` by number range (`acl4-advance-X` for named
//! ACLs), `classifier-X`, `behavior-X`, `trafficpolicy-X`, `vpn-instance-X`,
//! `vpn-instance-X-af-ipv4`. NAME is the running `sysname`.
//!
//! # Commands
//! Configuration lines follow [`super::vrp`]. Anywhere: `display
//! current-configuration`, `display configuration candidate [changes]`,
//! `display configuration commit list [N]`, `screen-length 0 temporary`.
//! System view and below: `commit [label L]`, `clear configuration
//! candidate`, `quit`, `return`. User view: `system-view`, `quit` (ends the
//! session), `rollback configuration to commit-id ID | to label L | last N`
//! (user view only, as on VRP). `to commit-id X` restores running as it was
//! right after commit X; `last N` undoes the last N commit points. Commit ids
//! start at 1000000001; a rollback is itself recorded as a commit point.
//! Leaving system view keeps the candidate (a CE would ask whether to commit;
//! drivers must commit or clear first).
//!
//! # Sessions and line length
//! At most [`CE_VTY_USERS`] (21, VTY 0-20) connections at once
//! ([`super::slots`]); the login banner gives that maximum and the number
//! of VTYs in use, this one included ("Info: The max number of VTY users is
//! 21, the number of current VTY users online is N."). A command line holds
//! at most [`MAX_LINE`] = 510 characters: "Each command can contain a maximum
//! of 510 characters", and a key "inserts a character ... if the editing
//! buffer is not full ... Otherwise, an alarm is generated" (Huawei, "Editing
//! Command Lines", CLI overview of the CE and VRP configuration guides,
//! e.g. EDOC1100127196). The line editor stops storing at 510 characters and
//! rings the bell (BEL) once, as the terminal's alarm; where the device then
//! runs what fitted in its buffer, the emulator refuses the whole line with
//! `Error: The command is too long ...` (the session goes on), so a command
//! cut short can never take effect. Characters are counted as bytes (the CLI
//! is ASCII).
//!
//! # Faults
//! Every non-empty line consults [`Faults::on_command`] (drop: the session
//! returns [`SessionAction::Drop`]; fail: `Error: The system is busy...`),
//! and `commit` consults [`Faults::on_commit`] (refused: an `Error:` line, the
//! candidate kept). Reply delays are applied by the transport.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use super::faults::{Action, Faults};
pub use super::shell::{Reply, SessionAction};
use super::shell::{SessionKind, ShellDevice, ShellSession};
use super::slots::{SessionSlots, CE_VTY_USERS};
use super::vrp::{is_physical, normalize, VrpConfig, VrpError};

/// One commit point in the device's history.
#[derive(Debug, Clone)]
pub struct CommitRecord {
    pub id: u64,
    pub label: Option<String>,
    pub user: String,
    pub time: SystemTime,
    /// Running before and after this commit point.
    pub before: VrpConfig,
    pub after: VrpConfig,
}

/// The device-wide state every session shares.
#[derive(Debug)]
struct Running {
    config: VrpConfig,
    commits: Vec<CommitRecord>,
    next_id: u64,
}

/// An emulated CE switch: running configuration, commit history, faults.
#[derive(Debug)]
pub struct SwitchDevice {
    name: String,
    running: Mutex<Running>,
    faults: Arc<Faults>,
    /// The physical interfaces the box has, when known: `interface X` for
    /// another physical interface is refused, as on a CE (physical
    /// interfaces are neither created nor deleted by configuration).
    interfaces: Option<BTreeSet<String>>,
    /// The VTY lines: one per SSH connection.
    vty: Arc<SessionSlots>,
}

/// The longest command line, in characters.
pub const MAX_LINE: usize = 510;

/// First commit id, as on VRP.
pub const FIRST_COMMIT_ID: u64 = 1_000_000_001;

impl SwitchDevice {
    /// A device named `name` (also its sysname unless `initial` sets one)
    /// starting from `initial` as running.
    pub fn new(name: &str, initial: VrpConfig, faults: Arc<Faults>) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_string(),
            running: Mutex::new(Running {
                config: initial,
                commits: Vec::new(),
                next_id: FIRST_COMMIT_ID,
            }),
            faults,
            interfaces: None,
            vty: SessionSlots::new(CE_VTY_USERS),
        })
    }

    /// [`SwitchDevice::new`] for a box whose physical interfaces are exactly
    /// `interfaces` (logical ones, `Eth-Trunk1`, `Vlanif10`, ..., can still
    /// be created).
    pub fn with_interfaces(
        name: &str,
        initial: VrpConfig,
        faults: Arc<Faults>,
        interfaces: impl IntoIterator<Item = String>,
    ) -> Arc<Self> {
        let mut dev = Self::new(name, initial, faults);
        if let Some(d) = Arc::get_mut(&mut dev) {
            d.interfaces = Some(interfaces.into_iter().collect());
        }
        dev
    }

    /// Refuse `interface X` (typed as `line`) for a physical interface the
    /// box does not have: the caret under the name.
    fn check_interface(&self, line: &str) -> Result<(), VrpError> {
        let (col, body) = match line.strip_prefix("undo ") {
            Some(b) => (5, b),
            None => (0, line),
        };
        let (Some(known), Some(name)) = (&self.interfaces, body.strip_prefix("interface ")) else {
            return Ok(());
        };
        // A subinterface (`100GE1/0/1.10`) needs its parent port.
        let base = name.split('.').next().unwrap_or(name);
        if is_physical(name) && !known.contains(base) {
            return Err(VrpError::WrongParameter { column: col + 10 });
        }
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    fn state(&self) -> MutexGuard<'_, Running> {
        // A panic while holding the lock cannot leave the tree half-edited
        // (edits are made on clones), so a poisoned lock is still usable.
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A snapshot of the running configuration.
    pub fn running_config(&self) -> VrpConfig {
        self.state().config.clone()
    }

    /// Changes whenever running changes (every commit point is recorded,
    /// rollbacks included), so readers can cache what they derive from it.
    pub fn running_version(&self) -> u64 {
        self.state().next_id
    }

    /// The commit history, oldest first.
    pub fn commits(&self) -> Vec<CommitRecord> {
        self.state().commits.clone()
    }

    fn sysname(&self) -> String {
        self.state()
            .config
            .top
            .iter()
            .find_map(|n| n.text.strip_prefix("sysname "))
            .map_or_else(|| self.name.clone(), str::to_string)
    }

    /// Record a commit point and make `after` running. Caller holds the lock.
    fn record(st: &mut Running, after: VrpConfig, label: Option<String>, user: &str) -> u64 {
        let id = st.next_id;
        st.next_id += 1;
        let before = std::mem::replace(&mut st.config, after.clone());
        st.commits.push(CommitRecord {
            id,
            label,
            user: user.to_string(),
            time: SystemTime::now(),
            before,
            after,
        });
        id
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    User,
    System,
}

impl ShellDevice for SwitchDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    fn session(self: Arc<Self>, user: &str, _kind: SessionKind) -> Box<dyn ShellSession> {
        Box::new(CliSession::new(self, user))
    }

    fn sessions(&self) -> &Arc<SessionSlots> {
        &self.vty
    }

    fn max_line(&self) -> usize {
        MAX_LINE
    }
}

impl ShellSession for CliSession {
    fn banner(&self) -> String {
        CliSession::banner(self)
    }

    fn prompt(&self) -> String {
        CliSession::prompt(self)
    }

    fn handle_line(&mut self, line: &str) -> Reply {
        CliSession::handle_line(self, line)
    }

    fn line_too_long(&mut self) -> Reply {
        Reply::text(format!(
            "Error: The command is too long. A command can contain a maximum of {MAX_LINE} characters.\n"
        ))
    }
}

/// A private candidate: base snapshot, edited tree, and the typed lines.
#[derive(Debug, Clone)]
struct Candidate {
    base: VrpConfig,
    tree: VrpConfig,
    log: Vec<(Vec<String>, String)>,
}

impl Candidate {
    fn fresh(running: &VrpConfig) -> Self {
        Self {
            base: running.clone(),
            tree: running.clone(),
            log: Vec::new(),
        }
    }

    fn dirty(&self) -> bool {
        self.tree != self.base
    }

    /// The candidate as it would be committed onto `running`.
    fn replay(&self, running: &VrpConfig) -> Result<VrpConfig, VrpError> {
        if *running == self.base {
            return Ok(self.tree.clone());
        }
        let mut t = running.clone();
        for (cursor, line) in &self.log {
            let mut c = cursor.clone();
            t.apply(&mut c, line)?;
        }
        Ok(t)
    }
}

/// One logged-in CLI session.
#[derive(Debug)]
pub struct CliSession {
    dev: Arc<SwitchDevice>,
    user: String,
    mode: Mode,
    cursor: Vec<String>,
    cand: Candidate,
}

const BUSY: &str = "Error: The system is busy. Please try again later.\n";

impl CliSession {
    pub fn new(dev: Arc<SwitchDevice>, user: &str) -> Self {
        let cand = Candidate::fresh(&dev.running_config());
        Self {
            dev,
            user: user.to_string(),
            mode: Mode::User,
            cursor: Vec::new(),
            cand,
        }
    }

    /// The login banner printed before the first prompt.
    pub fn banner(&self) -> String {
        // This session is one of them, even when not served over SSH.
        let online = self.dev.vty.in_use().max(1);
        format!(
            "Info: The max number of VTY users is {}, the number of current VTY users online is {online}.\n",
            self.dev.vty.max()
        )
    }

    /// The prompt to print now.
    pub fn prompt(&self) -> String {
        let name = self.dev.sysname();
        match self.mode {
            Mode::User => format!("<{name}>"),
            Mode::System => {
                let mark = if self.cand.dirty() { '*' } else { '~' };
                match view_tag(&self.cursor) {
                    Some(tag) => format!("[{mark}{name}-{tag}]"),
                    None => format!("[{mark}{name}]"),
                }
            }
        }
    }

    /// Whether this session's candidate has uncommitted edits.
    pub fn is_dirty(&self) -> bool {
        self.cand.dirty()
    }

    /// Handle one input line (without its line terminator).
    pub fn handle_line(&mut self, raw: &str) -> Reply {
        let line = normalize(raw);
        if line.is_empty() {
            return Reply::text("");
        }
        match self.dev.faults.on_command() {
            Action::Drop => return Reply::drop_connection(),
            Action::Fail => return Reply::text(BUSY),
            Action::Proceed => {}
        }
        let prompt_len = self.prompt().len();
        if line == "display" || line.starts_with("display ") {
            return self.display(&line, prompt_len);
        }
        if line == "screen-length 0 temporary" {
            return Reply::text(
                "Info: The configuration takes effect on the current user terminal interface only.\n",
            );
        }
        match self.mode {
            Mode::User => match line.as_str() {
                "system-view" => {
                    self.mode = Mode::System;
                    self.cursor.clear();
                    self.rebase_if_clean();
                    Reply::text("Enter system view, return user view with return command.\n")
                }
                "quit" => Reply::close(""),
                "return" => Reply::text(""),
                l if l.starts_with("rollback configuration") => self.rollback(l, prompt_len),
                _ => caret_reply(prompt_len, &VrpError::Unrecognized { column: 0 }),
            },
            Mode::System => match line.as_str() {
                "quit" => {
                    if self.cursor.pop().is_none() {
                        self.mode = Mode::User;
                    }
                    Reply::text("")
                }
                "return" => {
                    self.cursor.clear();
                    self.mode = Mode::User;
                    Reply::text("")
                }
                "clear configuration candidate" => {
                    self.cand = Candidate::fresh(&self.dev.running_config());
                    Reply::text("")
                }
                l if l == "commit" || l.starts_with("commit ") => self.commit(l, prompt_len),
                l => self.configure(l, prompt_len),
            },
        }
    }

    fn rebase_if_clean(&mut self) {
        if !self.cand.dirty() {
            self.cand = Candidate::fresh(&self.dev.running_config());
        }
    }

    fn configure(&mut self, line: &str, prompt_len: usize) -> Reply {
        self.rebase_if_clean();
        if let Err(e) = self.dev.check_interface(line) {
            return caret_reply(prompt_len, &e);
        }
        let before = self.cursor.clone();
        let mut cursor = self.cursor.clone();
        match self.cand.tree.apply(&mut cursor, line) {
            Ok(()) => {
                self.cursor = cursor;
                self.cand.log.push((before, line.to_string()));
                Reply::text("")
            }
            Err(e) => caret_reply(prompt_len, &e),
        }
    }

    fn commit(&mut self, line: &str, prompt_len: usize) -> Reply {
        let label = match line.strip_prefix("commit").map(str::trim) {
            Some("") => None,
            Some(rest) => match rest.strip_prefix("label ") {
                Some(l) if !l.contains(' ') => Some(l.to_string()),
                _ => {
                    return caret_reply(prompt_len + 7, &VrpError::Unrecognized { column: 0 });
                }
            },
            None => None,
        };
        if self.dev.faults.on_commit() == Action::Fail {
            return Reply::text(
                "Error: Failed to commit the configuration. The device refused the commit.\n",
            );
        }
        let mut st = self.dev.state();
        let new = match self.cand.replay(&st.config) {
            Ok(t) => t,
            Err(e) => {
                return Reply::text(format!(
                    "Error: The candidate conflicts with a configuration committed by another user ({}).\n",
                    e.to_string().trim_start_matches("Error: ").trim_end_matches('.')
                ))
            }
        };
        if new == st.config {
            drop(st);
            self.cand = Candidate::fresh(&new);
            return Reply::text("Info: The configuration is not changed.\n");
        }
        if let Some(l) = &label {
            if st.commits.iter().any(|c| c.label.as_deref() == Some(l)) {
                return Reply::text("Error: The label already exists.\n");
            }
        }
        SwitchDevice::record(&mut st, new.clone(), label, &self.user);
        drop(st);
        self.cand = Candidate::fresh(&new);
        Reply::text("")
    }

    fn rollback(&mut self, line: &str, prompt_len: usize) -> Reply {
        let words: Vec<&str> = line.split(' ').collect();
        let mut st = self.dev.state();
        let target = match words.as_slice() {
            [_, _, "to", "commit-id", id] => id.parse::<u64>().ok().and_then(|id| {
                st.commits
                    .iter()
                    .find(|c| c.id == id)
                    .map(|c| c.after.clone())
            }),
            [_, _, "to", "label", l] => st
                .commits
                .iter()
                .find(|c| c.label.as_deref() == Some(*l))
                .map(|c| c.after.clone()),
            [_, _, "last", n] => match n.parse::<usize>() {
                Ok(n) if n >= 1 && n <= st.commits.len() => {
                    Some(st.commits[st.commits.len() - n].before.clone())
                }
                _ => return Reply::text("Error: The number of rollback points is insufficient.\n"),
            },
            _ => {
                drop(st);
                return caret_reply(prompt_len, &VrpError::Incomplete { column: line.len() });
            }
        };
        let Some(target) = target else {
            return Reply::text("Error: The specified rollback point does not exist.\n");
        };
        if target != st.config {
            SwitchDevice::record(&mut st, target, None, &self.user);
        }
        drop(st);
        self.rebase_if_clean();
        Reply::text("Info: The configuration was rolled back successfully.\n")
    }

    fn display(&self, line: &str, prompt_len: usize) -> Reply {
        let rest = line.trim_start_matches("display").trim_start();
        match rest {
            "current-configuration" => Reply::text(self.dev.running_config().render()),
            "configuration candidate" | "configuration candidate changes" => {
                let running = self.dev.running_config();
                match self.cand.replay(&running) {
                    Ok(t) if rest.ends_with("changes") => Reply::text(running.diff(&t)),
                    Ok(t) => Reply::text(t.render()),
                    Err(e) => Reply::text(format!("{e}\n")),
                }
            }
            r if r.starts_with("configuration commit list") => {
                let n = r.trim_start_matches("configuration commit list").trim();
                let limit = if n.is_empty() {
                    Some(usize::MAX)
                } else {
                    n.parse().ok()
                };
                match limit {
                    Some(l) => Reply::text(self.commit_list(l)),
                    None => caret_reply(
                        prompt_len,
                        &VrpError::Unrecognized {
                            column: line.len() - n.len(),
                        },
                    ),
                }
            }
            _ => caret_reply(
                prompt_len,
                &VrpError::Unrecognized {
                    column: line.len() - rest.len(),
                },
            ),
        }
    }

    fn commit_list(&self, limit: usize) -> String {
        let st = self.dev.state();
        let rule = "-".repeat(78);
        let mut out = format!(
            "{rule}\n No.  CommitId     Label                User             Date & Time\n{rule}\n"
        );
        for (i, c) in st.commits.iter().rev().take(limit).enumerate() {
            out.push_str(&format!(
                "{:>4}  {:<12} {:<20} {:<16} {}\n",
                i + 1,
                c.id,
                c.label.as_deref().unwrap_or("-"),
                c.user,
                utc(c.time)
            ));
        }
        out.push_str(&format!("{rule}\n"));
        out
    }
}

fn caret_reply(prompt_len: usize, err: &VrpError) -> Reply {
    match err {
        VrpError::Unrecognized { column }
        | VrpError::Incomplete { column }
        | VrpError::WrongParameter { column } => {
            Reply::text(format!("{}^\n{err}\n", " ".repeat(prompt_len + column)))
        }
        e => Reply::text(format!("{e}\n")),
    }
}

/// The prompt suffix of the innermost view, as VRP prints it.
fn view_tag(cursor: &[String]) -> Option<String> {
    let key = cursor.last()?;
    let w: Vec<&str> = key.split(' ').collect();
    Some(match w.as_slice() {
        ["interface", name] => (*name).to_string(),
        ["acl", "number", n] => match n.parse::<u32>() {
            Ok(2000..=2999) => format!("acl4-basic-{n}"),
            Ok(4000..=4999) => format!("acl-L2-{n}"),
            _ => format!("acl4-advance-{n}"),
        },
        ["acl", "name", n] => format!("acl4-advance-{n}"),
        ["traffic", "classifier", x] => format!("classifier-{x}"),
        ["traffic", "behavior", x] => format!("behavior-{x}"),
        ["traffic", "policy", x] => format!("trafficpolicy-{x}"),
        ["ip", "vpn-instance", x] => format!("vpn-instance-{x}"),
        ["ipv4-family"] => {
            let parent = cursor.len().checked_sub(2).and_then(|i| cursor.get(i))?;
            let vpn = parent.split(' ').nth(2)?;
            format!("vpn-instance-{vpn}-af-ipv4")
        }
        _ => key.clone(),
    })
}

/// `YYYY-MM-DD HH:MM:SS` in UTC (civil-from-days; no date crate needed).
fn utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests;
