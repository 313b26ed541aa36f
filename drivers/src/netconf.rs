//! NETCONF (RFC 6241) over the SSH `netconf` subsystem, on russh.
//!
//! The safe-change sequence is the RFC's: `lock` the candidate, `edit-config`
//! (test-then-set, rollback-on-error), `validate`, `commit` (optionally
//! `<confirmed/>` with a `<confirm-timeout>`), a confirming `commit`, or
//! `discard-changes` on failure, then `unlock`. The lock is taken by
//! `load_candidate` and held until the change is committed (and confirmed)
//! or discarded, so no other client can slip edits in between.
//!
//! Support matrix: candidate, replace (`default-operation replace`),
//! commit-confirm (when the server announces `:confirmed-commit:1.1`),
//! rollback and atomic commits. NETCONF has no commit ids, so `commit`
//! returns a driver checkpoint id (`nc-<n>`) after saving running as it was;
//! `rollback(None)` cancels a pending confirmed commit, or restores that
//! checkpoint with a replace; `rollback(Some(id))` accepts only the latest.
//!
//! A session kept across transactions is checked and reset by
//! [`Driver::reuse`].
//!
//! `compare_config` is a line diff of the pretty-printed candidate and
//! running datastores (NETCONF has no diff operation).

pub mod framing;
pub mod xml;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use russh::client::Msg;
use russh::{Channel, ChannelMsg};
use tracing::{debug, info_span, Instrument};

use crate::ssh::{self, SshOptions, SshSession};
use crate::{Capabilities, CommitId, Driver, DriverError, ErrorKind, LoadMode, Step};
use framing::{encode, Decoder, Framing};
use xml::{Element, NS_BASE};

/// Capability URNs this client announces / looks for.
pub const CAP_BASE_10: &str = "urn:ietf:params:netconf:base:1.0";
pub const CAP_BASE_11: &str = "urn:ietf:params:netconf:base:1.1";
pub const CAP_CONFIRMED: &str = "urn:ietf:params:netconf:capability:confirmed-commit:1.1";

/// One open NETCONF session.
struct Conn {
    session: SshSession,
    channel: Channel<Msg>,
    decoder: Decoder,
    framing: Framing,
    next_id: u64,
    server_caps: Vec<String>,
    session_id: String,
}

/// The NETCONF driver.
pub struct NetconfDriver {
    device: String,
    opts: SshOptions,
    conn: Option<Conn>,
    locked: bool,
    confirm_pending: bool,
    /// Running as it was before our last commit, and its id.
    checkpoint: Option<(CommitId, String)>,
    commits: u64,
}

impl fmt::Debug for NetconfDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetconfDriver")
            .field("device", &self.device)
            .field("open", &self.conn.is_some())
            .field("locked", &self.locked)
            .finish()
    }
}

/// An `<rpc-error>` as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub tag: String,
    pub message: String,
    pub session_id: Option<String>,
}

impl RpcError {
    fn kind(&self) -> ErrorKind {
        match self.tag.as_str() {
            "lock-denied" | "in-use" => ErrorKind::Locked(match &self.session_id {
                Some(s) => format!("session {s}"),
                None => self.message.clone(),
            }),
            _ => ErrorKind::Rejected(if self.message.is_empty() {
                self.tag.clone()
            } else {
                format!("{}: {}", self.tag, self.message)
            }),
        }
    }
}

/// The first `<rpc-error>` of a reply, if any.
pub fn rpc_error(reply: &Element) -> Option<RpcError> {
    let e = reply.find("rpc-error")?;
    let text = |n: &str| e.find(n).map(|c| c.text.clone()).unwrap_or_default();
    Some(RpcError {
        tag: text("error-tag"),
        message: text("error-message"),
        session_id: e
            .find("error-info")
            .and_then(|i| i.find("session-id"))
            .map(|s| s.text.clone()),
    })
}

impl NetconfDriver {
    pub fn new(device: impl Into<String>, opts: SshOptions) -> Self {
        Self {
            device: device.into(),
            opts,
            conn: None,
            locked: false,
            confirm_pending: false,
            checkpoint: None,
            commits: 0,
        }
    }

    /// The session id the server gave us (after `open`).
    pub fn session_id(&self) -> Option<&str> {
        self.conn.as_ref().map(|c| c.session_id.as_str())
    }

    fn err(&self, step: Step, kind: ErrorKind) -> DriverError {
        DriverError {
            device: self.device.clone(),
            step,
            kind,
        }
    }

    /// Send `<rpc>` with `body` inside; return the reply element, mapping
    /// `<rpc-error>` to an error. Transport failures drop the session.
    pub async fn rpc(&mut self, step: Step, body: &str) -> Result<Element, DriverError> {
        let t = self.opts.command_timeout;
        let Some(conn) = self.conn.as_mut() else {
            return Err(self.err(step, ErrorKind::Disconnected("not open".into())));
        };
        let id = conn.next_id;
        conn.next_id += 1;
        let msg = format!(r#"<rpc xmlns="{NS_BASE}" message-id="{id}">{body}</rpc>"#);
        let res = tokio::time::timeout(t, async {
            send(conn, &msg).await?;
            loop {
                let text = recv(conn).await?;
                let el = Element::parse(&text)
                    .map_err(|e| ErrorKind::Protocol(format!("bad reply: {e}")))?;
                // A reply without message-id is the server's answer to a
                // message it could not parse: ours, as only one is in flight.
                let mid = el.get_attr("message-id");
                if el.local() == "rpc-reply" && (mid == Some(&id.to_string()) || mid.is_none()) {
                    return Ok(el);
                }
                debug!(element = el.local(), "skipping unrelated message");
            }
        })
        .await
        .unwrap_or(Err(ErrorKind::Timeout(t)));
        match res {
            Ok(reply) => match rpc_error(&reply) {
                Some(e) => Err(self.err(step, e.kind())),
                None => Ok(reply),
            },
            Err(kind) => {
                self.conn = None;
                Err(self.err(step, kind))
            }
        }
    }

    async fn get(&mut self, step: Step, source: &str) -> Result<String, DriverError> {
        let reply = self
            .rpc(
                step,
                &format!("<get-config><source><{source}/></source></get-config>"),
            )
            .await?;
        let data = reply.find("data").cloned().unwrap_or_default();
        Ok(data.children.iter().map(Element::to_pretty).collect())
    }

    async fn unlock(&mut self, step: Step) -> Result<(), DriverError> {
        if self.locked {
            self.rpc(step, "<unlock><target><candidate/></target></unlock>")
                .await?;
            self.locked = false;
        }
        Ok(())
    }

    async fn edit(
        &mut self,
        step: Step,
        config: &str,
        default_op: &str,
    ) -> Result<(), DriverError> {
        if !self.locked {
            self.rpc(step, "<lock><target><candidate/></target></lock>")
                .await?;
            self.locked = true;
        }
        let t = config.trim();
        let payload = if t.starts_with("<config") {
            t.to_string()
        } else {
            format!("<config>{t}</config>")
        };
        let edit = format!(
            "<edit-config><target><candidate/></target><default-operation>{default_op}</default-operation>\
             <test-option>test-then-set</test-option><error-option>rollback-on-error</error-option>\
             {payload}</edit-config>"
        );
        let res = match self.rpc(step, &edit).await {
            Ok(_) => self
                .rpc(step, "<validate><source><candidate/></source></validate>")
                .await
                .map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            if self.conn.is_some() {
                let _ = self.rpc(step, "<discard-changes/>").await;
                let _ = self.unlock(step).await;
            }
            return Err(e);
        }
        Ok(())
    }
}

async fn send(conn: &mut Conn, msg: &str) -> Result<(), ErrorKind> {
    conn.channel
        .data_bytes(encode(msg, conn.framing))
        .await
        .map_err(|e| ErrorKind::Disconnected(e.to_string()))
}

async fn recv(conn: &mut Conn) -> Result<String, ErrorKind> {
    loop {
        if let Some(m) = conn
            .decoder
            .next_message()
            .map_err(|e| ErrorKind::Protocol(e.to_string()))?
        {
            return Ok(m);
        }
        match conn.channel.wait().await {
            Some(ChannelMsg::Data { data }) => conn.decoder.push(&data),
            Some(ChannelMsg::Eof | ChannelMsg::Close) | None => {
                return Err(ErrorKind::Disconnected("NETCONF channel closed".into()))
            }
            Some(_) => {}
        }
    }
}

async fn handshake(session: SshSession, t: Duration) -> Result<Conn, ErrorKind> {
    let channel = session.open_subsystem("netconf").await?;
    let mut conn = Conn {
        session,
        channel,
        decoder: Decoder::new(),
        framing: Framing::EndOfMessage,
        next_id: 101,
        server_caps: Vec::new(),
        session_id: String::new(),
    };
    let hello = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><hello xmlns="{NS_BASE}"><capabilities><capability>{CAP_BASE_10}</capability><capability>{CAP_BASE_11}</capability></capabilities></hello>"#
    );
    tokio::time::timeout(t, async {
        send(&mut conn, &hello).await?;
        let text = recv(&mut conn).await?;
        let el =
            Element::parse(&text).map_err(|e| ErrorKind::Protocol(format!("bad hello: {e}")))?;
        if el.local() != "hello" {
            return Err(ErrorKind::Protocol(format!(
                "expected <hello>, got <{}>",
                el.local()
            )));
        }
        conn.server_caps = el
            .find("capabilities")
            .map(|c| c.children.iter().map(|c| c.text.clone()).collect())
            .unwrap_or_default();
        conn.session_id = el
            .find("session-id")
            .map(|s| s.text.clone())
            .unwrap_or_default();
        if conn.server_caps.iter().any(|c| c == CAP_BASE_11) {
            conn.framing = Framing::Chunked;
            conn.decoder.set_framing(Framing::Chunked);
        }
        Ok(())
    })
    .await
    .map_err(|_| ErrorKind::Timeout(t))??;
    Ok(conn)
}

#[async_trait]
impl Driver for NetconfDriver {
    fn device(&self) -> &str {
        &self.device
    }

    fn capabilities(&self) -> Capabilities {
        let confirm = self
            .conn
            .as_ref()
            .is_none_or(|c| c.server_caps.iter().any(|s| s.starts_with(CAP_CONFIRMED)));
        Capabilities {
            candidate: true,
            replace: true,
            commit_confirm: confirm,
            rollback: true,
            atomic: true,
        }
    }

    async fn open(&mut self) -> Result<(), DriverError> {
        let span = info_span!("netconf.open", device = %self.device);
        async {
            let session = ssh::connect(&self.opts)
                .await
                .map_err(|k| self.err(Step::Open, k))?;
            let t = self.opts.command_timeout;
            let conn = handshake(session, t)
                .await
                .map_err(|k| self.err(Step::Open, k))?;
            debug!(session_id = %conn.session_id, framing = ?conn.framing, "netconf session up");
            self.conn = Some(conn);
            Ok(())
        }
        .instrument(span)
        .await
    }

    async fn close(&mut self) -> Result<(), DriverError> {
        if self.conn.is_some() {
            let _ = self.rpc(Step::Close, "<close-session/>").await;
        }
        if let Some(c) = self.conn.take() {
            c.session.close().await;
        }
        self.locked = false;
        Ok(())
    }

    async fn get_config(&mut self) -> Result<String, DriverError> {
        let span = info_span!("netconf.get_config", device = %self.device);
        self.get(Step::GetConfig, "running").instrument(span).await
    }

    async fn load_candidate(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError> {
        let span = info_span!("netconf.load", device = %self.device);
        let op = match mode {
            LoadMode::Merge => "merge",
            LoadMode::Replace => "replace",
        };
        self.edit(Step::Load, config, op).instrument(span).await
    }

    async fn compare_config(&mut self) -> Result<String, DriverError> {
        let span = info_span!("netconf.compare", device = %self.device);
        async {
            let running = self.get(Step::Compare, "running").await?;
            let candidate = self.get(Step::Compare, "candidate").await?;
            Ok(line_diff(&running, &candidate))
        }
        .instrument(span)
        .await
    }

    async fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError> {
        let span = info_span!("netconf.commit", device = %self.device);
        async {
            let before = self.get(Step::Commit, "running").await?;
            let body = match confirm {
                Some(d) => format!(
                    "<commit><confirmed/><confirm-timeout>{}</confirm-timeout></commit>",
                    d.as_secs().max(1)
                ),
                None => "<commit/>".to_string(),
            };
            self.rpc(Step::Commit, &body).await?;
            self.commits += 1;
            let id = CommitId(format!("nc-{}", self.commits));
            self.checkpoint = Some((id.clone(), before));
            if confirm.is_some() {
                self.confirm_pending = true;
            } else {
                self.unlock(Step::Commit).await?;
            }
            Ok(id)
        }
        .instrument(span)
        .await
    }

    async fn confirm(&mut self) -> Result<(), DriverError> {
        let span = info_span!("netconf.confirm", device = %self.device);
        async {
            self.rpc(Step::Confirm, "<commit/>").await?;
            self.confirm_pending = false;
            self.unlock(Step::Confirm).await
        }
        .instrument(span)
        .await
    }

    async fn discard(&mut self) -> Result<(), DriverError> {
        let span = info_span!("netconf.discard", device = %self.device);
        async {
            self.rpc(Step::Discard, "<discard-changes/>").await?;
            self.unlock(Step::Discard).await
        }
        .instrument(span)
        .await
    }

    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        let span = info_span!("netconf.rollback", device = %self.device);
        let to = to.cloned();
        async {
            if self.confirm_pending && to.is_none() {
                self.rpc(Step::Rollback, "<cancel-commit/>").await?;
                self.confirm_pending = false;
                return self.unlock(Step::Rollback).await;
            }
            let Some((id, saved)) = self.checkpoint.clone() else {
                return Err(self.err(
                    Step::Rollback,
                    ErrorKind::Rejected("no commit made by this driver to roll back".into()),
                ));
            };
            if to.as_ref().is_some_and(|t| *t != id) {
                return Err(self.err(
                    Step::Rollback,
                    ErrorKind::Unsupported("NETCONF rollback to other than the last commit"),
                ));
            }
            self.edit(
                Step::Rollback,
                &format!("<config>{saved}</config>"),
                "replace",
            )
            .await?;
            self.rpc(Step::Rollback, "<commit/>").await?;
            self.checkpoint = None;
            self.confirm_pending = false;
            self.unlock(Step::Rollback).await
        }
        .instrument(span)
        .await
    }

    /// A `get-config` with an empty subtree filter (RFC 6241 6.4.2: selects
    /// nothing) is the round trip; the checkpoint of the last commit is
    /// forgotten. A session still holding the lock or a confirmed commit is
    /// not reused.
    async fn reuse(&mut self) -> Result<(), DriverError> {
        let step = Step::Open;
        if self.conn.is_none() {
            return Err(self.err(step, ErrorKind::Disconnected("not open".into())));
        }
        if self.locked || self.confirm_pending {
            return Err(self.err(
                step,
                ErrorKind::Rejected("a lock or a confirmed commit is still pending".into()),
            ));
        }
        let span = info_span!("netconf.reuse", device = %self.device);
        self.rpc(
            step,
            r#"<get-config><source><running/></source><filter type="subtree"/></get-config>"#,
        )
        .instrument(span)
        .await?;
        self.checkpoint = None;
        Ok(())
    }
}

/// A minimal line diff (`-` old, `+` new) by longest common subsequence;
/// falls back to "all removed, all added" for very large inputs.
pub fn line_diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut out = String::new();
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        if a != b {
            a.iter().for_each(|l| out.push_str(&format!("-{l}\n")));
            b.iter().for_each(|l| out.push_str(&format!("+{l}\n")));
        }
        return out;
    }
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_diff_marks_changes_only() {
        assert_eq!(line_diff("a\nb\nc\n", "a\nc\nd\n"), "-b\n+d\n");
        assert_eq!(line_diff("x\n", "x\n"), "");
    }
}
