//! Huawei CloudEngine (VRP 8) over the SSH CLI, NAPALM-style.
//!
//! Support matrix (see [`HuaweiCeDriver::capabilities`]):
//! * candidate: yes — the CE's two-stage configuration; `load_candidate`
//!   (merge) enters system view and types the lines, `compare_config` is
//!   `display configuration candidate changes`, `discard` is `clear
//!   configuration candidate`.
//! * replace: **no** (`Unsupported`) — a CLI has no "replace everything";
//!   the caller renders a merge that includes the `undo` lines instead.
//! * commit-confirm: **no** (`Unsupported`) — `commit trial` exists on some
//!   VRP releases but its behaviour could not be confirmed, and emulating it
//!   with a client-side timer would silently stop protecting the device when
//!   the controller dies. Use NETCONF for confirmed commits.
//! * rollback: yes — undo commit `ID` (running as it was right *before*
//!   it, the contract's meaning shared with the NETCONF and TL1 drivers):
//!   `rollback configuration last 1` once `ID` is checked to be the latest
//!   commit point (a later one is refused); with no id, `rollback configuration
//!   last 1` (undo the last commit point).
//! * atomic: yes — a CE commit applies the candidate as one unit.
//! * session reuse: yes — [`Driver::reuse`] returns to user view (one round
//!   trip); a session with uncommitted edits is not reused.
//!
//! Safety: a loaded line is refused *before* anything is sent if it would
//! leave the candidate (`commit`, `return`, `rollback`, `save`, ...), and any
//! `Error:` line while loading clears the candidate before failing.
//!
//! Loading types the lines in batches of `PIPELINE`, one write each, and
//! reads the replies back per line ([`crate::pipeline`]): a batch costs one
//! round trip instead of one per line. The lines after a failing one in its
//! batch have run too (in whatever view the failure left), but only in the
//! candidate, which is then cleared; running is never touched. A line the
//! device answered with a question (`[Y/N]`) would take the next line as its
//! answer: the replies then no longer line up and the batch times out, and
//! the controller's read-back after commit catches any line that did not
//! take effect.

use std::time::Duration;

use async_trait::async_trait;
use tracing::{info_span, Instrument};

use crate::cli::CliLink;
use crate::ssh::{self, SshOptions};
use crate::{Capabilities, CommitId, Driver, DriverError, ErrorKind, LoadMode, Step};

/// Configuration lines sent per write when loading a candidate (one round
/// trip each batch instead of each line; see [`crate::pipeline`]).
const PIPELINE: usize = 256;

/// Commands that must never appear in loaded configuration text.
const FORBIDDEN: &[&str] = &[
    "commit",
    "return",
    "rollback",
    "save",
    "reboot",
    "reset",
    "clear",
    "system-view",
    "display",
    "screen-length",
];

/// The Huawei CE CLI driver.
#[derive(Debug)]
pub struct HuaweiCeDriver {
    link: CliLink,
}

impl HuaweiCeDriver {
    /// A driver for `device` (its topology name, used in errors and spans).
    /// Nothing is connected until [`Driver::open`].
    pub fn new(device: impl Into<String>, opts: SshOptions) -> Self {
        Self {
            link: CliLink::new(device, opts, ssh::is_vrp_prompt),
        }
    }

    fn err(&self, step: Step, kind: ErrorKind) -> DriverError {
        self.link.err(step, kind)
    }

    /// Run a command and fail on any `Error:` line.
    async fn cmd_ok(&mut self, step: Step, cmd: &str) -> Result<String, DriverError> {
        let out = self.link.cmd(step, cmd).await?;
        match error_line(&out) {
            Some(e) => Err(self.err(step, ErrorKind::Rejected(format!("`{cmd}`: {e}")))),
            None => Ok(out),
        }
    }

    fn in_user_view(&self) -> bool {
        self.link.prompt().starts_with('<')
    }

    async fn system_view(&mut self, step: Step) -> Result<(), DriverError> {
        if self.in_user_view() {
            self.cmd_ok(step, "system-view").await?;
        }
        Ok(())
    }

    async fn user_view(&mut self, step: Step) -> Result<(), DriverError> {
        if !self.in_user_view() {
            self.cmd_ok(step, "return").await?;
        }
        Ok(())
    }

    fn dirty(&self) -> bool {
        self.link.prompt().starts_with("[*")
    }

    async fn latest_commit(&mut self, step: Step) -> Result<Option<CommitId>, DriverError> {
        let out = self
            .cmd_ok(step, "display configuration commit list 1")
            .await?;
        Ok(out.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            match (w.next(), w.next()) {
                (Some("1"), Some(id)) if id.bytes().all(|b| b.is_ascii_digit()) => {
                    Some(CommitId(id.to_string()))
                }
                _ => None,
            }
        }))
    }

    async fn load(&mut self, config: &str) -> Result<(), DriverError> {
        let step = Step::Load;
        let lines: Vec<&str> = config
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && *l != "#")
            .collect();
        for (i, l) in lines.iter().enumerate() {
            let first = l.split_whitespace().next().unwrap_or("");
            if FORBIDDEN.contains(&first) {
                return Err(self.err(
                    step,
                    ErrorKind::Rejected(format!(
                        "line {}: `{l}` is not allowed in a candidate",
                        i + 1
                    )),
                ));
            }
        }
        // Entering system view rides in the first batch.
        let enter = usize::from(self.in_user_view());
        let typed: Vec<&str> = ["system-view"][..enter]
            .iter()
            .chain(&lines)
            .copied()
            .collect();
        for (c, chunk) in typed.chunks(PIPELINE).enumerate() {
            let outs = self.link.batch(step, chunk).await?;
            let failed = outs.iter().enumerate().find_map(|(i, out)| {
                let e = error_line(out)?;
                Some(match (c * PIPELINE + i).checked_sub(enter) {
                    Some(n) => format!("line {} `{}`: {e}", n + 1, chunk[i]),
                    None => format!("`system-view`: {e}"),
                })
            });
            if let Some(msg) = failed {
                // Leave nothing half-loaded behind (the lines typed after
                // the failing one included).
                let _ = self.link.cmd(step, "clear configuration candidate").await;
                return Err(self.err(step, ErrorKind::Rejected(msg)));
            }
        }
        Ok(())
    }
}

fn error_line(out: &str) -> Option<String> {
    out.lines()
        .find(|l| l.trim_start().starts_with("Error:"))
        .map(|l| l.trim().to_string())
}

#[async_trait]
impl Driver for HuaweiCeDriver {
    fn device(&self) -> &str {
        self.link.device()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            candidate: true,
            replace: false,
            commit_confirm: false,
            rollback: true,
            atomic: true,
        }
    }

    async fn open(&mut self) -> Result<(), DriverError> {
        let span = info_span!("huawei_ce.open", device = %self.link.device());
        async {
            self.link.open(Step::Open).await?;
            self.cmd_ok(Step::Open, "screen-length 0 temporary").await?;
            Ok(())
        }
        .instrument(span)
        .await
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        self.link.close(Some("return")).await;
        Ok(())
    }

    async fn get_config(&mut self) -> Result<String, DriverError> {
        // After a dropped connection, read through a fresh session (the
        // controller reads running to judge a failed commit or a rollback).
        if !self.link.is_open() {
            self.open().await?;
        }
        let span = info_span!("huawei_ce.get_config", device = %self.link.device());
        self.cmd_ok(Step::GetConfig, "display current-configuration")
            .instrument(span)
            .await
    }

    async fn load_candidate(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError> {
        if mode == LoadMode::Replace {
            return Err(self.err(
                Step::Load,
                ErrorKind::Unsupported("replace on huawei-ce (load a merge with undo lines)"),
            ));
        }
        let span = info_span!("huawei_ce.load", device = %self.link.device());
        self.load(config).instrument(span).await
    }

    async fn compare_config(&mut self) -> Result<String, DriverError> {
        let span = info_span!("huawei_ce.compare", device = %self.link.device());
        self.cmd_ok(Step::Compare, "display configuration candidate changes")
            .instrument(span)
            .await
    }

    async fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError> {
        if confirm.is_some() {
            return Err(self.err(
                Step::Commit,
                ErrorKind::Unsupported("confirmed commit on huawei-ce CLI"),
            ));
        }
        let span = info_span!("huawei_ce.commit", device = %self.link.device());
        async {
            self.system_view(Step::Commit).await?;
            self.cmd_ok(Step::Commit, "commit").await?;
            if self.dirty() {
                return Err(self.err(
                    Step::Commit,
                    ErrorKind::Protocol("candidate still has changes after commit".into()),
                ));
            }
            self.latest_commit(Step::Commit).await?.ok_or_else(|| {
                self.err(
                    Step::Commit,
                    ErrorKind::Protocol(
                        "no commit id in `display configuration commit list`".into(),
                    ),
                )
            })
        }
        .instrument(span)
        .await
    }

    async fn confirm(&mut self) -> Result<(), DriverError> {
        Err(self.err(
            Step::Confirm,
            ErrorKind::Unsupported("confirmed commit on huawei-ce CLI"),
        ))
    }

    async fn discard(&mut self) -> Result<(), DriverError> {
        let span = info_span!("huawei_ce.discard", device = %self.link.device());
        async {
            self.system_view(Step::Discard).await?;
            self.cmd_ok(Step::Discard, "clear configuration candidate")
                .await?;
            self.user_view(Step::Discard).await
        }
        .instrument(span)
        .await
    }

    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        if let Some(id) = to {
            if id.0.is_empty() || !id.0.bytes().all(|b| b.is_ascii_digit()) {
                return Err(self.err(
                    Step::Rollback,
                    ErrorKind::Rejected(format!("`{}` is not a CE commit id", id.0)),
                ));
            }
        }
        if !self.link.is_open() {
            self.open().await?;
        }
        if let Some(id) = to {
            // Undo commit `id`: only while it is still the latest point, so
            // a later commit (someone else's) is never silently undone.
            let latest = self.latest_commit(Step::Rollback).await?;
            if latest.as_ref() != Some(id) {
                return Err(self.err(
                    Step::Rollback,
                    ErrorKind::Rejected(format!(
                        "commit {} is no longer the latest commit point ({})",
                        id.0,
                        latest.map_or_else(|| "none".to_string(), |l| l.0)
                    )),
                ));
            }
        }
        let cmd = "rollback configuration last 1".to_string();
        let span = info_span!("huawei_ce.rollback", device = %self.link.device());
        async {
            if self.dirty() {
                self.cmd_ok(Step::Rollback, "clear configuration candidate")
                    .await?;
            }
            self.user_view(Step::Rollback).await?;
            self.cmd_ok(Step::Rollback, &cmd).await.map(|_| ())
        }
        .instrument(span)
        .await
    }

    /// A reused session goes back to user view, where a fresh session
    /// starts: `return` (or an empty line if already there) is the one
    /// round trip. Uncommitted edits make it unusable.
    async fn reuse(&mut self) -> Result<(), DriverError> {
        let step = Step::Open;
        if !self.link.is_open() {
            return Err(self.err(step, ErrorKind::Disconnected("not open".into())));
        }
        if self.dirty() {
            return Err(self.err(
                step,
                ErrorKind::Rejected("the candidate has uncommitted edits".into()),
            ));
        }
        let span = info_span!("huawei_ce.reuse", device = %self.link.device());
        let cmd = if self.in_user_view() { "" } else { "return" };
        self.cmd_ok(step, cmd).instrument(span).await?;
        if self.in_user_view() {
            Ok(())
        } else {
            Err(self.err(step, ErrorKind::Protocol("not back in user view".into())))
        }
    }
}
