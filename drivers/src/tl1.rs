//! TL1 driver for optical circuit switches (Polatis-style `ENT/DLT/RTRV-PATCH`).
//!
//! An OCS has no candidate configuration: every `ENT-PATCH` or `DLT-PATCH`
//! takes effect at once. So, as NAPALM does for platforms without one, the
//! driver emulates the contract: the candidate is a list of TL1 commands held
//! here until `commit`; `commit` first reads the patch table (the checkpoint),
//! then runs the commands, disconnects before connects (a connected port must
//! be freed first); `rollback` computes and runs the commands that bring the
//! table back to a checkpoint. There is no commit-confirm and no atomicity: a
//! commit that fails halfway leaves the earlier commands applied, and
//! `rollback(None)` restores the checkpoint taken before it.
//!
//! "Configuration" text (what `get_config` returns and what a replace load
//! takes) is the patch table as `RTRV-PATCH` prints it: one `"a,b"` line per
//! cross-connect (quotes and indentation optional on input). Merge loads take
//! `ENT-PATCH::a,b:;` / `DLT-PATCH::p&q:;` lines, ctags optional; the driver
//! numbers ctags itself. This small amount of parsing lives here because the
//! driver must diff tables to compute a rollback; rendering patch tables from
//! intent is the dialect's job in the main crate.
//!
//! After any transport failure the connection is dropped and the next call
//! reconnects and logs in again, so a rollback can follow a dropped commit.
//! A session kept open across transactions logs in once; [`Driver::reuse`]
//! checks it with `RTRV-HDR` and forgets the earlier checkpoints. The driver
//! never asks `RTRV-NETYPE`: nothing it does depends on the model.
//! The password is only ever written to the socket, never logged.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use tracing::Instrument;

use crate::telnet::{TelnetConfig, TelnetLines, TransportError};
use crate::{Capabilities, CommitId, Driver, DriverError, ErrorKind, LoadMode, Step};

/// How to reach and log in to one OCS. `Debug` hides the password.
#[derive(Clone)]
pub struct Tl1Config {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: String,
    pub telnet: TelnetConfig,
}

impl fmt::Debug for Tl1Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tl1Config")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("telnet", &self.telnet)
            .finish()
    }
}

/// A cross-connect, ports in canonical order (numeric when both are numbers).
type Patch = (String, String);

/// One change command, without its ctag.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PatchCmd {
    Dlt(String),
    Ent(String),
}

impl PatchCmd {
    fn render(&self, ctag: &str) -> String {
        match self {
            PatchCmd::Dlt(aid) => format!("DLT-PATCH::{aid}:{ctag};"),
            PatchCmd::Ent(aid) => format!("ENT-PATCH::{aid}:{ctag};"),
        }
    }
}

#[derive(Debug, Clone)]
enum Candidate {
    /// Merge: commands as given (run DLT first, then ENT).
    Commands(Vec<PatchCmd>),
    /// Replace: the whole intended table.
    Table(Vec<Patch>),
}

/// A parsed TL1 `M` response.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reply {
    ok: bool,
    code: String,
    text: String,
    data: Vec<String>,
}

/// Most checkpoints kept for `rollback(Some(id))`.
const MAX_CHECKPOINTS: usize = 16;

/// The TL1 driver. See the module doc for how the contract is emulated.
pub struct Tl1Driver {
    device: String,
    config: Tl1Config,
    conn: Option<TelnetLines>,
    ctag: u32,
    candidate: Option<Candidate>,
    checkpoints: Vec<(CommitId, Vec<Patch>)>,
    commits: u32,
}

impl fmt::Debug for Tl1Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tl1Driver")
            .field("device", &self.device)
            .field("config", &self.config)
            .field("connected", &self.conn.is_some())
            .field("candidate", &self.candidate)
            .finish_non_exhaustive()
    }
}

impl Tl1Driver {
    /// A driver for device `device` (its topology name, used in errors and
    /// spans). Nothing is connected until the first call.
    pub fn new(device: impl Into<String>, config: Tl1Config) -> Self {
        Self {
            device: device.into(),
            config,
            conn: None,
            ctag: 0,
            candidate: None,
            checkpoints: Vec::new(),
            commits: 0,
        }
    }

    fn err(&self, step: Step, kind: ErrorKind) -> DriverError {
        DriverError {
            device: self.device.clone(),
            step,
            kind,
        }
    }

    fn transport(&mut self, step: Step, e: TransportError) -> DriverError {
        // The stream is in an unknown state (half a reply may be pending):
        // drop it and reconnect on the next call.
        self.conn = None;
        let kind = match e {
            TransportError::Connect { addr, reason } => {
                ErrorKind::Connect(format!("{addr}: {reason}"))
            }
            TransportError::Timeout(d) => ErrorKind::Timeout(d),
            TransportError::Closed => {
                ErrorKind::Disconnected("connection closed by the device".into())
            }
            TransportError::Io(s) => ErrorKind::Disconnected(s),
            TransportError::TooLong(n) => {
                ErrorKind::Protocol(format!("response larger than {n} bytes"))
            }
        };
        self.err(step, kind)
    }

    fn next_ctag(&mut self) -> String {
        self.ctag = self.ctag.wrapping_add(1) % 1_000_000;
        self.ctag.to_string()
    }

    /// Send one command and wait for the `M` response carrying its ctag.
    async fn request(
        &mut self,
        step: Step,
        cmd: impl FnOnce(&str) -> String,
    ) -> Result<Reply, DriverError> {
        self.ensure_open(step).await?;
        let ctag = self.next_ctag();
        let line = cmd(&ctag);
        let Some(conn) = self.conn.as_mut() else {
            return Err(self.err(step, ErrorKind::Disconnected("not connected".into())));
        };
        let res = conn
            .exchange(&line, |block| parse_reply(block, &ctag).is_some())
            .await;
        match res {
            Ok(block) => parse_reply(&block, &ctag).ok_or_else(|| {
                self.err(step, ErrorKind::Protocol("unparseable TL1 response".into()))
            }),
            Err(e) => Err(self.transport(step, e)),
        }
    }

    /// Like [`Self::request`], but a DENY is an error naming the code.
    async fn command(&mut self, step: Step, cmd: &PatchCmd) -> Result<Reply, DriverError> {
        tracing::debug!(command = %cmd.render(""), "tl1 change");
        let reply = self.request(step, |c| cmd.render(c)).await?;
        if reply.ok {
            Ok(reply)
        } else {
            Err(self.err(
                step,
                ErrorKind::Rejected(format!(
                    "{} {} ({})",
                    reply.code,
                    reply.text,
                    cmd.render("")
                )),
            ))
        }
    }

    async fn ensure_open(&mut self, step: Step) -> Result<(), DriverError> {
        if self.conn.is_some() {
            return Ok(());
        }
        let user = self.config.username.clone();
        if !is_token(&user) {
            return Err(self.err(step, ErrorKind::Auth));
        }
        if self.config.password.contains([';', '\r', '\n']) {
            // Cannot be framed in TL1; refuse rather than send half of it.
            return Err(self.err(step, ErrorKind::Auth));
        }
        let conn = TelnetLines::connect(
            &self.config.host,
            self.config.port,
            self.config.telnet.clone(),
        )
        .await
        .map_err(|e| self.transport(step, e))?;
        self.conn = Some(conn);
        let ctag = self.next_ctag();
        let login = format!("ACT-USER::{user}:{ctag}::{};", self.config.password);
        let Some(conn) = self.conn.as_mut() else {
            return Err(self.err(step, ErrorKind::Disconnected("not connected".into())));
        };
        let res = conn
            .exchange(&login, |b| parse_reply(b, &ctag).is_some())
            .await;
        drop(login);
        let reply = match res {
            Ok(block) => parse_reply(&block, &ctag),
            Err(e) => return Err(self.transport(step, e)),
        };
        match reply {
            Some(r) if r.ok => Ok(()),
            _ => {
                self.conn = None;
                Err(self.err(step, ErrorKind::Auth))
            }
        }
    }

    async fn read_table(&mut self, step: Step) -> Result<Vec<Patch>, DriverError> {
        let reply = self.request(step, |c| format!("RTRV-PATCH:::{c};")).await?;
        if !reply.ok {
            return Err(self.err(
                step,
                ErrorKind::Rejected(format!("{} {}", reply.code, reply.text)),
            ));
        }
        parse_table(&reply.data.join("\n")).map_err(|m| self.err(step, ErrorKind::Protocol(m)))
    }

    /// The commands the candidate stands for, given the current table.
    fn planned(&self, current: &[Patch]) -> Vec<PatchCmd> {
        match &self.candidate {
            None => Vec::new(),
            Some(Candidate::Commands(cmds)) => {
                let (mut dlt, ent): (Vec<_>, Vec<_>) = cmds
                    .iter()
                    .cloned()
                    .partition(|c| matches!(c, PatchCmd::Dlt(_)));
                dlt.extend(ent);
                dlt
            }
            Some(Candidate::Table(want)) => table_diff(current, want),
        }
    }

    async fn run(&mut self, step: Step, cmds: &[PatchCmd]) -> Result<(), DriverError> {
        for cmd in cmds {
            self.command(step, cmd).await?;
        }
        Ok(())
    }

    async fn do_commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError> {
        if confirm.is_some() {
            return Err(self.err(
                Step::Commit,
                ErrorKind::Unsupported("commit-confirm on a TL1 OCS"),
            ));
        }
        let current = self.read_table(Step::Commit).await?;
        let cmds = self.planned(&current);
        self.commits += 1;
        let id = CommitId(format!("checkpoint-{}", self.commits));
        self.checkpoints.push((id.clone(), current));
        if self.checkpoints.len() > MAX_CHECKPOINTS {
            self.checkpoints.remove(0);
        }
        self.run(Step::Commit, &cmds).await?;
        self.candidate = None;
        Ok(id)
    }

    async fn do_rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        let target = match to {
            None => self.checkpoints.last(),
            Some(id) => self.checkpoints.iter().find(|(c, _)| c == id),
        };
        let Some((id, table)) = target.cloned() else {
            let what = to.map_or("no commit to roll back".to_string(), |c| {
                format!("unknown checkpoint {}", c.0)
            });
            return Err(self.err(Step::Rollback, ErrorKind::Rejected(what)));
        };
        let current = self.read_table(Step::Rollback).await?;
        let cmds = table_diff(&current, &table);
        self.run(Step::Rollback, &cmds).await?;
        // Checkpoints taken after the target describe states now undone.
        if let Some(i) = self.checkpoints.iter().position(|(c, _)| *c == id) {
            self.checkpoints.truncate(i);
        }
        Ok(())
    }
}

#[async_trait]
impl Driver for Tl1Driver {
    fn device(&self) -> &str {
        &self.device
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Emulated in the driver, not held by the device.
            candidate: false,
            replace: true,
            commit_confirm: false,
            rollback: true,
            atomic: false,
        }
    }

    async fn open(&mut self) -> Result<(), DriverError> {
        let span = tracing::info_span!("tl1", device = %self.device);
        self.ensure_open(Step::Open).instrument(span).await
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        if self.conn.is_none() {
            return Ok(());
        }
        let user = self.config.username.clone();
        let span = tracing::info_span!("tl1", device = %self.device);
        // Logging out is a courtesy: the socket is closed either way.
        let _ = self
            .request(Step::Close, |c| format!("CANC-USER::{user}:{c};"))
            .instrument(span)
            .await;
        self.conn = None;
        Ok(())
    }

    async fn get_config(&mut self) -> Result<String, DriverError> {
        let span = tracing::info_span!("tl1", device = %self.device);
        let table = self.read_table(Step::GetConfig).instrument(span).await?;
        Ok(render_table(&table))
    }

    async fn load_candidate(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError> {
        let parsed = match mode {
            LoadMode::Merge => parse_commands(config).map(Candidate::Commands),
            LoadMode::Replace => parse_table(config).map(Candidate::Table),
        };
        let candidate = parsed.map_err(|m| self.err(Step::Load, ErrorKind::Rejected(m)))?;
        self.candidate = Some(candidate);
        Ok(())
    }

    async fn compare_config(&mut self) -> Result<String, DriverError> {
        let current = match self.candidate {
            Some(Candidate::Table(_)) => {
                let span = tracing::info_span!("tl1", device = %self.device);
                self.read_table(Step::Compare).instrument(span).await?
            }
            _ => Vec::new(),
        };
        Ok(self
            .planned(&current)
            .iter()
            .map(|c| c.render("") + "\n")
            .collect())
    }

    async fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError> {
        let span = tracing::info_span!("tl1", device = %self.device);
        self.do_commit(confirm).instrument(span).await
    }

    async fn confirm(&mut self) -> Result<(), DriverError> {
        Err(self.err(
            Step::Confirm,
            ErrorKind::Unsupported("commit-confirm on a TL1 OCS"),
        ))
    }

    async fn discard(&mut self) -> Result<(), DriverError> {
        self.candidate = None;
        Ok(())
    }

    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        let span = tracing::info_span!("tl1", device = %self.device);
        self.do_rollback(to).instrument(span).await
    }

    /// `RTRV-HDR` (TL1's standard no-op) proves the logged-in session still
    /// answers; the candidate and the checkpoints of earlier transactions
    /// are forgotten, so `rollback(None)` never reaches back past this one.
    async fn reuse(&mut self) -> Result<(), DriverError> {
        let step = Step::Open;
        if self.conn.is_none() {
            return Err(self.err(step, ErrorKind::Disconnected("not open".into())));
        }
        let span = tracing::info_span!("tl1", device = %self.device);
        let reply = self
            .request(step, |c| format!("RTRV-HDR:::{c};"))
            .instrument(span)
            .await?;
        if !reply.ok {
            return Err(self.err(
                step,
                ErrorKind::Rejected(format!("RTRV-HDR: {} {}", reply.code, reply.text)),
            ));
        }
        self.candidate = None;
        self.checkpoints.clear();
        Ok(())
    }
}

/// A TL1 user name or port: letters, digits, `.`, `-`, `_` only, so it can
/// neither break framing nor inject a second command.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// Parse an `M` block answering `ctag`; `None` if the block is something else.
fn parse_reply(block: &[String], ctag: &str) -> Option<Reply> {
    let start = block.iter().position(|l| {
        let mut w = l.split_whitespace();
        w.next() == Some("M") && w.next().is_some_and(|c| c.eq_ignore_ascii_case(ctag))
    })?;
    let status = block[start].split_whitespace().nth(2).unwrap_or("");
    let ok = status.eq_ignore_ascii_case("COMPLD");
    let mut reply = Reply {
        ok,
        code: String::new(),
        text: String::new(),
        data: Vec::new(),
    };
    let mut comments = Vec::new();
    for line in &block[start + 1..] {
        let t = line.trim();
        if let Some(c) = t.strip_prefix("/*") {
            comments.push(c.trim_end_matches("*/").trim().to_string());
        } else if !ok
            && reply.code.is_empty()
            && t.len() == 4
            && t.chars().all(|c| c.is_ascii_alphabetic())
        {
            reply.code = t.to_ascii_uppercase();
        } else {
            reply.data.push(t.to_string());
        }
    }
    reply.text = comments.join(" ");
    if !ok && reply.text.is_empty() {
        reply.text = reply.data.join(" ");
    }
    if !ok && reply.code.is_empty() {
        reply.code = status.to_string();
    }
    Some(reply)
}

/// Sort key of a port: numbers numerically, then anything else.
fn port_key(p: &str) -> (u64, &str) {
    (p.parse::<u64>().unwrap_or(u64::MAX), p)
}

fn canonical(a: &str, b: &str) -> Patch {
    if port_key(a) <= port_key(b) {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

/// Parse a patch table: one `a,b` per line, optionally quoted/indented;
/// blank lines and `#` comments ignored. Checks the table is a matching.
fn parse_table(text: &str) -> Result<Vec<Patch>, String> {
    let mut table = BTreeSet::new();
    let mut used = BTreeSet::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let body = line.trim_matches('"');
        // Some units append attributes after a colon; the ports come first.
        let body = body.split(':').next().unwrap_or("");
        let Some((a, b)) = body.split_once(',') else {
            return Err(format!("line {}: expected \"a,b\", got {line:?}", n + 1));
        };
        let (a, b) = (a.trim(), b.trim());
        if !is_token(a) || !is_token(b) {
            return Err(format!("line {}: bad port in {line:?}", n + 1));
        }
        if a == b {
            return Err(format!("line {}: port {a} patched to itself", n + 1));
        }
        for p in [a, b] {
            if !used.insert(p.to_string()) {
                return Err(format!("line {}: port {p} is in two patches", n + 1));
            }
        }
        table.insert(canonical(a, b));
    }
    let mut v: Vec<Patch> = table.into_iter().collect();
    v.sort_by(|x, y| port_key(&x.0).cmp(&port_key(&y.0)));
    Ok(v)
}

fn render_table(table: &[Patch]) -> String {
    table
        .iter()
        .map(|(a, b)| format!("\"{a},{b}\"\n"))
        .collect()
}

/// Parse merge input: `ENT-PATCH::<aid>[:ctag][;]` and `DLT-PATCH::<aid>...`
/// lines (case-insensitive), blank lines and `#` comments ignored.
fn parse_commands(text: &str) -> Result<Vec<PatchCmd>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let body = line.strip_suffix(';').unwrap_or(line);
        let fields: Vec<&str> = body.split(':').collect();
        let (verb, aid) = match fields.as_slice() {
            [verb, "", aid] | [verb, "", aid, _] => (verb.to_ascii_uppercase(), aid.trim()),
            _ => {
                return Err(format!(
                    "line {}: expected ENT-PATCH::a,b:; or DLT-PATCH::p:;, got {line:?}",
                    n + 1
                ))
            }
        };
        let aid_ok = |s: &str, sep: bool| {
            !s.is_empty()
                && s.split(['&', ',']).all(|p| p.is_empty() || is_token(p))
                && (sep == s.contains(','))
        };
        match verb.as_str() {
            "ENT-PATCH" if aid_ok(aid, true) => out.push(PatchCmd::Ent(aid.to_string())),
            "DLT-PATCH" if aid.eq_ignore_ascii_case("ALL") => out.push(PatchCmd::Dlt("ALL".into())),
            "DLT-PATCH" if aid_ok(aid, false) => out.push(PatchCmd::Dlt(aid.to_string())),
            _ => {
                return Err(format!(
                    "line {}: not an ENT-PATCH/DLT-PATCH command: {line:?}",
                    n + 1
                ))
            }
        }
    }
    Ok(out)
}

/// Commands turning table `from` into `to`: one DLT-PATCH for every patch to
/// remove, then one ENT-PATCH per patch to add.
fn table_diff(from: &[Patch], to: &[Patch]) -> Vec<PatchCmd> {
    let want: BTreeSet<&Patch> = to.iter().collect();
    let have: BTreeSet<&Patch> = from.iter().collect();
    let gone: Vec<&str> = from
        .iter()
        .filter(|p| !want.contains(p))
        .map(|p| p.0.as_str())
        .collect();
    let mut cmds = Vec::new();
    if !gone.is_empty() {
        cmds.push(PatchCmd::Dlt(gone.join("&")));
    }
    for p in to.iter().filter(|p| !have.contains(p)) {
        cmds.push(PatchCmd::Ent(format!("{},{}", p.0, p.1)));
    }
    cmds
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn lines(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn parses_compld_and_deny() {
        let ok = parse_reply(
            &lines(&["   ocs1 26-01-01 00:00:00", "M  7 COMPLD", "   \"1,33\""]),
            "7",
        )
        .unwrap();
        assert!(ok.ok);
        assert_eq!(ok.data, vec!["\"1,33\""]);
        let deny = parse_reply(
            &lines(&[
                "   ocs1 26-01-01 00:00:00",
                "M  8 DENY",
                "   SARB",
                "   /* link busy */",
            ]),
            "8",
        )
        .unwrap();
        assert!(!deny.ok);
        assert_eq!(
            (deny.code.as_str(), deny.text.as_str()),
            ("SARB", "link busy")
        );
        assert!(parse_reply(&lines(&["A  1 REPT EVT"]), "8").is_none());
        assert!(
            parse_reply(&lines(&["M  7 COMPLD"]), "8").is_none(),
            "other ctag"
        );
    }

    #[test]
    fn table_parsing_checks_a_matching() {
        let t = parse_table("\"33,1\"\n  2,34\n\n# c\n").unwrap();
        assert_eq!(
            t,
            vec![("1".into(), "33".into()), ("2".into(), "34".into())]
        );
        assert!(parse_table("1,2\n2,3").unwrap_err().contains("two patches"));
        assert!(parse_table("1,1").is_err());
        assert!(parse_table("1;DLT-PATCH::ALL,2").is_err());
    }

    #[test]
    fn diff_removes_before_adding() {
        let from = parse_table("1,33\n2,34\n").unwrap();
        let to = parse_table("1,34\n").unwrap();
        assert_eq!(
            table_diff(&from, &to),
            vec![PatchCmd::Dlt("1&2".into()), PatchCmd::Ent("1,34".into())]
        );
        assert!(table_diff(&from, &from).is_empty());
    }

    #[test]
    fn merge_lines_are_validated() {
        let c = parse_commands("ent-patch::1,33:5;\nDLT-PATCH::4&11:;\nDLT-PATCH::all\n").unwrap();
        assert_eq!(
            c,
            vec![
                PatchCmd::Ent("1,33".into()),
                PatchCmd::Dlt("4&11".into()),
                PatchCmd::Dlt("ALL".into())
            ]
        );
        assert!(parse_commands("RTRV-PATCH:::1;").is_err());
        assert!(parse_commands("ENT-PATCH::1;DLT-PATCH::ALL,2:;").is_err());
        assert!(parse_commands("DLT-PATCH::1,2:;").is_err());
    }
}
