//! SONiC over the SSH CLI (bash and sonic-utilities), NAPALM-style.
//!
//! SONiC has no candidate datastore; its safe way to change configuration is
//! the Generic Config Updater: `config apply-patch FILE` (an RFC 6902 JSON
//! Patch against config_db, validated before anything is written),
//! `config replace FILE`, and `config checkpoint` / `config rollback`.
//!
//! Support matrix (see [`SonicDriver::capabilities`]):
//! * candidate: emulated — `load_candidate` reads running, checks the patch
//!   applies, writes it to `/tmp/vclos-N.json` on the device and has the
//!   device validate it (`config apply-patch --dry-run`); running is not
//!   touched. Merge takes JSON Patch operations one per line (the SONiC
//!   dialect's change form); replace takes a whole config_db document.
//! * compare: driver-side — a unified diff of running (as loaded) against
//!   the candidate the patch makes, both printed as SONiC prints them.
//! * commit: `config checkpoint vclos-N`, then `config apply-patch` (or
//!   `config replace`); the checkpoint is the [`CommitId`]. Only the newest
//!   [`KEEP_CHECKPOINTS`] vclos checkpoints are kept.
//! * commit-confirm: **no** — SONiC has none, and a client-side timer would
//!   stop protecting the device when the controller dies.
//! * rollback: `config rollback vclos-N`, refused when running changed since
//!   that commit (the rollback would silently undo someone else's change).
//! * atomic: **no** — the updater validates the whole patch first, but then
//!   writes it as a sequence of config_db changes; the controller judges a
//!   failed commit by reading running and rolls back to the checkpoint.
//!
//! * exit statuses: every command line is sent as `CMD; echo vclos-rc=$?`
//!   (a bash list, then the special parameter `$?`: GNU Bash Reference
//!   Manual §3.2.4, §3.4.2), so the driver reads each command's exit status
//!   from the interactive shell; a non-zero status is a
//!   [`ErrorKind::Rejected`] naming the command and its status (the device
//!   is named by [`DriverError`]), whatever the command printed.
//! * model validation: the updater checks the whole resulting config_db
//!   against sonic-yang-models, which cannot express an ACL redirect that
//!   orchagent executes (see `vclos::dialect::sonic` and
//!   docs/devices/sonic.md); every `apply-patch`, `replace` and `rollback`
//!   therefore passes `-i /ACL_RULE` (sonic-utilities `config/main.py`,
//!   `--ignore-path`: "ignore validation for config specified by given path
//!   which is a JsonPointer"), so the other tables are still validated and
//!   the redirect rules are written for orchagent.
//!
//! * session reuse: yes — [`Driver::reuse`] sends an empty line and forgets
//!   the last checkpoint; a session with a staged candidate is not reused.
//!
//! Safety: a payload is parsed as JSON before anything is sent and written
//! back as JSON made of printable ASCII only (`'`, control and non-ASCII
//! characters as `\uXXXX`), so it can sit inside a single-quoted shell word:
//! nothing in it can end the quoting or act as a line-editing key.
//! Checkpoint names reaching the shell are checked to be `vclos-<digits>`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use json_patch::Patch;
use tracing::{info_span, Instrument};

use crate::cli::CliLink;
use crate::configdb::{self, ConfigDb};
use crate::ssh::{self, SshOptions};
use crate::{Capabilities, CommitId, Driver, DriverError, ErrorKind, LoadMode, Step};

/// The largest piece of a payload sent in one shell line.
const CHUNK: usize = 1024;

/// What precedes the exit status in the line `echo vclos-rc=$?` prints.
const RC_MARK: &str = "vclos-rc=";

/// The `-i` options of every Generic Config Updater command that validates:
/// ACL rules, which hold `REDIRECT_ACTION`, are not checked against the
/// models.
const IGNORE: &str = "-i /ACL_RULE";

/// vclos checkpoints kept on a switch. Each is a full copy of config_db on
/// the switch's disk, so older ones are deleted after every commit.
pub const KEEP_CHECKPOINTS: usize = 8;

/// The SONiC driver.
#[derive(Debug)]
pub struct SonicDriver {
    link: CliLink,
    staged: Option<Staged>,
    /// The checkpoint taken by the last commit attempt (even a failed one).
    checkpoint: Option<String>,
    /// The last commit: its checkpoint and the running config it made.
    committed: Option<(String, ConfigDb)>,
}

/// A loaded candidate: a validated file on the device.
#[derive(Debug)]
struct Staged {
    n: u64,
    mode: LoadMode,
    before: ConfigDb,
    after: ConfigDb,
}

impl Staged {
    fn file(&self) -> String {
        format!("/tmp/vclos-{}.json", self.n)
    }

    /// `config apply-patch` or `config replace`, and its success line.
    fn command(&self) -> (&'static str, &'static str) {
        match self.mode {
            LoadMode::Merge => ("apply-patch", "Patch applied successfully."),
            LoadMode::Replace => ("replace", "Config replaced successfully."),
        }
    }
}

/// A checked payload.
enum Given {
    Patch(Patch),
    Document(ConfigDb),
}

/// A number for a file and checkpoint name, unique in this process and
/// increasing across runs (milliseconds since the epoch, or one more).
fn next_number() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let prev = LAST
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |p| Some(now.max(p + 1)))
        .unwrap_or(0);
    now.max(prev + 1)
}

/// JSON text safe inside a single-quoted shell word: `'`, control and
/// non-ASCII characters escaped as `\uXXXX`. Valid because JSON outside
/// strings is printable ASCII, so every such character is inside a string.
pub fn shell_safe_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c == '\'' || !(' '..='~').contains(&c) {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `name` is a checkpoint this driver makes (`vclos-<digits>`).
fn is_checkpoint(name: &str) -> bool {
    name.strip_prefix("vclos-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl SonicDriver {
    /// A driver for `device` (its topology name, used in errors and spans).
    /// Nothing is connected until [`Driver::open`].
    pub fn new(device: impl Into<String>, opts: SshOptions) -> Self {
        Self {
            link: CliLink::new(device, opts, ssh::is_bash_prompt),
            staged: None,
            checkpoint: None,
            committed: None,
        }
    }

    fn err(&self, step: Step, kind: ErrorKind) -> DriverError {
        self.link.err(step, kind)
    }

    fn rejected(&self, step: Step, msg: impl Into<String>) -> DriverError {
        self.err(step, ErrorKind::Rejected(msg.into()))
    }

    /// Run one command line and read its exit status: the output without
    /// the status line, and the status.
    async fn run(&mut self, step: Step, cmd: &str) -> Result<(String, u32), DriverError> {
        let out = self
            .link
            .cmd(step, &format!("{cmd}; echo {RC_MARK}$?"))
            .await?;
        let mut lines: Vec<&str> = out.lines().collect();
        let status = lines
            .iter()
            .rposition(|l| {
                l.trim()
                    .strip_prefix(RC_MARK)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .and_then(|i| {
                let n = lines.remove(i).trim()[RC_MARK.len()..].parse().ok();
                lines.truncate(i);
                n
            });
        match status {
            Some(n) => Ok((lines.join("\n"), n)),
            None => Err(self.err(
                step,
                ErrorKind::Protocol(format!("`{cmd}`: no exit status in the reply")),
            )),
        }
    }

    /// Run a command that must exit 0; its output.
    async fn ok(&mut self, step: Step, cmd: &str) -> Result<String, DriverError> {
        let (out, status) = self.run(step, cmd).await?;
        if status == 0 {
            return Ok(out);
        }
        Err(self.failed(step, cmd, status, &out))
    }

    /// `cmd` exited with `status`: the error, with the command's `Error:`
    /// line (or its last line).
    fn failed(&self, step: Step, cmd: &str, status: u32, out: &str) -> DriverError {
        let why = out
            .lines()
            .find(|l| l.trim_start().starts_with("Error:"))
            .or_else(|| out.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("no output")
            .trim();
        let how = if status == 0 {
            "did not report success".to_string()
        } else {
            format!("exited with status {status}")
        };
        self.rejected(step, format!("`{cmd}` {how}: {why}"))
    }

    /// Run a command that exits 0 and prints `success` when it worked.
    async fn expect(&mut self, step: Step, cmd: &str, success: &str) -> Result<(), DriverError> {
        let (out, status) = self.run(step, cmd).await?;
        if status == 0 && out.lines().any(|l| l.trim() == success) {
            return Ok(());
        }
        Err(self.failed(step, cmd, status, &out))
    }

    /// Run a command that exits 0 and prints nothing when it works.
    async fn quiet(&mut self, step: Step, cmd: &str) -> Result<(), DriverError> {
        let (out, status) = self.run(step, cmd).await?;
        if status == 0 && out.trim().is_empty() {
            return Ok(());
        }
        Err(self.failed(step, cmd, status, &out))
    }

    /// The running config_db, parsed.
    async fn running(&mut self, step: Step) -> Result<ConfigDb, DriverError> {
        self.link.ensure_open(step).await?;
        let out = self.ok(step, "show runningconfiguration all").await?;
        configdb::parse(&out).map_err(|e| {
            let first = out.lines().next().unwrap_or("").trim();
            self.err(
                step,
                ErrorKind::Protocol(format!("running config is not config_db ({e}): {first}")),
            )
        })
    }

    /// Write `json` to `path` on the device, in single-quoted pieces.
    async fn write_file(&mut self, step: Step, path: &str, json: &str) -> Result<(), DriverError> {
        let safe = shell_safe_json(json);
        let mut rest = safe.as_str();
        let mut redirect = ">";
        while !rest.is_empty() || redirect == ">" {
            // `safe` is ASCII, so any byte index is a char boundary.
            let (piece, tail) = rest.split_at(rest.len().min(CHUNK));
            self.quiet(step, &format!("printf '%s' '{piece}' {redirect} {path}"))
                .await?;
            rest = tail;
            redirect = ">>";
        }
        Ok(())
    }

    async fn remove_file(&mut self, step: Step, path: &str) {
        let _ = self.run(step, &format!("rm -f {path}")).await;
    }

    async fn load(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError> {
        let step = Step::Load;
        // Check the payload before anything reaches the device.
        let given = match mode {
            LoadMode::Merge => Given::Patch(
                configdb::patch_from_lines(config)
                    .map_err(|(line, e)| self.rejected(step, format!("line {line}: {e}")))?,
            ),
            LoadMode::Replace => Given::Document(
                configdb::parse(config)
                    .map_err(|e| self.rejected(step, format!("not a config_db document: {e}")))?,
            ),
        };
        self.discard_staged().await;
        let before = self.running(step).await?;
        let (text, after) = match given {
            Given::Patch(patch) => {
                let (patch, after) = configdb::merge(&before, &patch).map_err(|e| {
                    self.rejected(step, format!("the patch does not apply to running: {e}"))
                })?;
                (json_text(&patch), after)
            }
            Given::Document(mut doc) => {
                configdb::prune(&mut doc);
                (json_text(&doc), doc)
            }
        };
        let staged = Staged {
            n: next_number(),
            mode,
            before,
            after,
        };
        let file = staged.file();
        let (verb, success) = staged.command();
        let dry = format!("sudo config {verb} --dry-run {IGNORE} {file}");
        let checked = match self.write_file(step, &file, &text).await {
            Ok(()) => self.expect(step, &dry, success).await,
            Err(e) => Err(e),
        };
        if let Err(e) = checked {
            // Leave no half-written or refused candidate behind.
            self.remove_file(step, &file).await;
            return Err(e);
        }
        self.staged = Some(staged);
        Ok(())
    }

    /// Forget the candidate and remove its file (best effort).
    async fn discard_staged(&mut self) {
        if let Some(s) = self.staged.take() {
            if self.link.is_open() {
                self.remove_file(Step::Discard, &s.file()).await;
            }
        }
    }

    async fn commit_staged(&mut self) -> Result<CommitId, DriverError> {
        let step = Step::Commit;
        let Some(staged) = self.staged.as_ref() else {
            return Err(self.rejected(step, "no candidate loaded"));
        };
        let (n, file) = (staged.n, staged.file());
        let (verb, success) = staged.command();
        self.link.ensure_open(step).await?;
        let name = format!("vclos-{n}");
        self.expect(
            step,
            &format!("sudo config checkpoint {name}"),
            "Checkpoint created successfully.",
        )
        .await?;
        self.checkpoint = Some(name.clone());
        self.expect(
            step,
            &format!("sudo config {verb} {IGNORE} {file}"),
            success,
        )
        .await?;
        if let Some(s) = self.staged.take() {
            self.committed = Some((name.clone(), s.after));
        }
        self.remove_file(step, &file).await;
        self.prune_checkpoints().await;
        Ok(CommitId(name))
    }

    /// Delete all but the newest [`KEEP_CHECKPOINTS`] vclos checkpoints
    /// (best effort: the commit already succeeded).
    async fn prune_checkpoints(&mut self) {
        let step = Step::Commit;
        let Ok(out) = self.ok(step, "sudo config list-checkpoints").await else {
            return;
        };
        let names: Vec<String> = serde_json::from_str(&out).unwrap_or_default();
        let mut ours: Vec<(u64, String)> = names
            .into_iter()
            .filter(|n| is_checkpoint(n))
            .filter_map(|n| Some((n["vclos-".len()..].parse().ok()?, n)))
            .collect();
        ours.sort_unstable();
        let excess = ours.len().saturating_sub(KEEP_CHECKPOINTS);
        for (_, n) in ours.into_iter().take(excess) {
            let cmd = format!("sudo config delete-checkpoint {n}");
            if self.ok(step, &cmd).await.is_err() {
                return;
            }
        }
    }

    async fn roll_back(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        let step = Step::Rollback;
        let name = match to {
            Some(id) if is_checkpoint(&id.0) => id.0.clone(),
            Some(id) => {
                return Err(self.rejected(step, format!("`{}` is not a vclos checkpoint", id.0)))
            }
            None => self
                .checkpoint
                .clone()
                .ok_or_else(|| self.rejected(step, "no checkpoint taken by this driver"))?,
        };
        self.discard_staged().await;
        if let Some((id, after)) = self.committed.clone() {
            if id == name && self.running(step).await? != after {
                return Err(self.rejected(
                    step,
                    format!("running changed since commit {id}; rolling back would undo that change too"),
                ));
            }
        }
        self.link.ensure_open(step).await?;
        self.expect(
            step,
            &format!("sudo config rollback {IGNORE} {name}"),
            "Config rolled back successfully.",
        )
        .await?;
        self.committed = None;
        Ok(())
    }
}

/// Compact JSON (serialising JSON values cannot fail).
fn json_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[async_trait]
impl Driver for SonicDriver {
    fn device(&self) -> &str {
        self.link.device()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            candidate: true,
            replace: true,
            commit_confirm: false,
            rollback: true,
            atomic: false,
        }
    }

    async fn open(&mut self) -> Result<(), DriverError> {
        let span = info_span!("sonic.open", device = %self.link.device());
        self.link.open(Step::Open).instrument(span).await
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        self.discard_staged().await;
        self.link.close(None).await;
        Ok(())
    }

    async fn get_config(&mut self) -> Result<String, DriverError> {
        let span = info_span!("sonic.get_config", device = %self.link.device());
        // Printed again in SONiC's own form: deterministic whatever the
        // device's spacing, so snapshots compare as text.
        let db = self.running(Step::GetConfig).instrument(span).await?;
        Ok(configdb::to_text(&db))
    }

    async fn load_candidate(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError> {
        let span = info_span!("sonic.load", device = %self.link.device());
        self.load(config, mode).instrument(span).await
    }

    async fn compare_config(&mut self) -> Result<String, DriverError> {
        let Some(s) = &self.staged else {
            return Ok(String::new());
        };
        let (a, b) = (configdb::to_text(&s.before), configdb::to_text(&s.after));
        if a == b {
            return Ok(String::new());
        }
        Ok(similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .context_radius(2)
            .header("running", "candidate")
            .to_string())
    }

    async fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError> {
        if confirm.is_some() {
            return Err(self.err(
                Step::Commit,
                ErrorKind::Unsupported("confirmed commit on SONiC (it has none)"),
            ));
        }
        let span = info_span!("sonic.commit", device = %self.link.device());
        self.commit_staged().instrument(span).await
    }

    async fn confirm(&mut self) -> Result<(), DriverError> {
        Err(self.err(
            Step::Confirm,
            ErrorKind::Unsupported("confirmed commit on SONiC (it has none)"),
        ))
    }

    async fn discard(&mut self) -> Result<(), DriverError> {
        self.discard_staged().await;
        Ok(())
    }

    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        let span = info_span!("sonic.rollback", device = %self.link.device());
        self.roll_back(to).instrument(span).await
    }

    /// An empty command line is the round trip (the shell answers with its
    /// prompt); the last transaction's checkpoint is forgotten, so
    /// `rollback(None)` cannot reach it. A candidate still staged on the
    /// device makes the session unusable.
    async fn reuse(&mut self) -> Result<(), DriverError> {
        let step = Step::Open;
        if !self.link.is_open() {
            return Err(self.err(step, ErrorKind::Disconnected("not open".into())));
        }
        if self.staged.is_some() {
            return Err(self.rejected(step, "a candidate is still staged"));
        }
        let span = info_span!("sonic.reuse", device = %self.link.device());
        self.link.cmd(step, "").instrument(span).await?;
        self.checkpoint = None;
        self.committed = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn shell_safe_json_is_printable_ascii_without_quotes() {
        let v = serde_json::json!({"a": "it's \u{7f}\tβ\u{1F600}"});
        let s = shell_safe_json(&v.to_string());
        assert!(
            s.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'\''),
            "{s}"
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&s).unwrap(), v);
    }

    #[test]
    fn numbers_increase_and_checkpoint_names_are_strict() {
        let (a, b) = (next_number(), next_number());
        assert!(b > a);
        assert!(is_checkpoint("vclos-17"));
        for bad in ["vclos-", "vclos-1;reboot", "x-1", "vclos-1 2"] {
            assert!(!is_checkpoint(bad), "{bad}");
        }
    }

    #[test]
    fn bash_prompts() {
        assert!(ssh::is_bash_prompt("admin@leaf1:~$ "));
        assert!(ssh::is_bash_prompt("root@sonic:/tmp# "));
        for no in ["admin@leaf1:~$", "}", "x: y$ ", "@h:~$ ", "a@h:~ $ "] {
            assert!(!ssh::is_bash_prompt(no), "{no}");
        }
    }
}
