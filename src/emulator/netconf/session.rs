//! One NETCONF session: the hello exchange, framing negotiation, and the
//! RPCs, as a pure message-in/message-out machine (timers aside) so it is
//! testable without SSH. The SSH server feeds it decoded messages.

use std::sync::Arc;
use std::time::Duration;

use vclos_drivers::netconf::framing::Framing;
use vclos_drivers::netconf::xml::{Element, NS_BASE};
use vclos_drivers::netconf::{CAP_BASE_10, CAP_BASE_11, CAP_CONFIRMED};

use super::datastore::{NetconfDevice, Store};
use super::tree::{self, Op};
use crate::emulator::faults::Action;

/// Capabilities the emulator announces.
pub const CAPABILITIES: &[&str] = &[
    CAP_BASE_10,
    CAP_BASE_11,
    "urn:ietf:params:netconf:capability:candidate:1.0",
    "urn:ietf:params:netconf:capability:validate:1.1",
    CAP_CONFIRMED,
    "urn:ietf:params:netconf:capability:rollback-on-error:1.0",
];

/// Default `<confirm-timeout>` (RFC 6241: 600 s).
pub const DEFAULT_CONFIRM_TIMEOUT: Duration = Duration::from_secs(600);

/// What the transport must do with a handled message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// A reply to send (framed with [`NetconfSession::framing`]).
    pub reply: Option<String>,
    /// Close the session after sending the reply.
    pub close: bool,
    /// Fault injection: drop the connection without replying.
    pub drop: bool,
}

impl Outcome {
    fn reply(r: String) -> Self {
        Self {
            reply: Some(r),
            close: false,
            drop: false,
        }
    }
}

/// An `<rpc-error>`.
#[derive(Debug, Clone)]
struct RpcErr {
    kind: &'static str,
    tag: &'static str,
    message: String,
    session_id: Option<u64>,
}

fn rpc_err(kind: &'static str, tag: &'static str, message: impl Into<String>) -> RpcErr {
    RpcErr {
        kind,
        tag,
        message: message.into(),
        session_id: None,
    }
}

#[derive(Debug)]
pub struct NetconfSession {
    dev: Arc<NetconfDevice>,
    id: u64,
    hello_done: bool,
    framing: Framing,
}

impl NetconfSession {
    pub fn new(dev: Arc<NetconfDevice>) -> Self {
        let id = dev.new_session_id();
        Self {
            dev,
            id,
            hello_done: false,
            framing: Framing::EndOfMessage,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The framing for messages after the one just handled.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// The server `<hello>` (always end-of-message framed).
    pub fn hello(&self) -> String {
        let caps: String = CAPABILITIES
            .iter()
            .map(|c| format!("<capability>{c}</capability>"))
            .collect();
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><hello xmlns="{NS_BASE}"><capabilities>{caps}</capabilities><session-id>{}</session-id></hello>"#,
            self.id
        )
    }

    /// Handle one decoded message.
    pub fn handle(&mut self, msg: &str) -> Outcome {
        let el = match Element::parse(msg) {
            Ok(e) => e,
            Err(e) => {
                let err = rpc_err("rpc", "malformed-message", e.to_string());
                return Outcome::reply(error_reply(&[], &err));
            }
        };
        if !self.hello_done {
            if el.local() != "hello" {
                return Outcome {
                    reply: None,
                    close: true,
                    drop: false,
                };
            }
            self.hello_done = true;
            let caps = el.find("capabilities");
            let peer_11 = caps.is_some_and(|c| c.children.iter().any(|x| x.text == CAP_BASE_11));
            if peer_11 {
                self.framing = Framing::Chunked;
            }
            return Outcome {
                reply: None,
                close: false,
                drop: false,
            };
        }
        if el.local() != "rpc" {
            let err = rpc_err(
                "rpc",
                "unknown-element",
                format!("expected <rpc>, got <{}>", el.local()),
            );
            return Outcome::reply(error_reply(&[], &err));
        }
        let echo: Vec<(String, String)> = el.attrs.clone();
        if el.get_attr("message-id").is_none() {
            let mut e = rpc_err("rpc", "missing-attribute", "<rpc> has no message-id");
            e.session_id = None;
            return Outcome::reply(error_reply(&echo, &e));
        }
        match self.dev.faults().on_command() {
            Action::Drop => {
                return Outcome {
                    reply: None,
                    close: true,
                    drop: true,
                }
            }
            Action::Fail => {
                let e = rpc_err("application", "operation-failed", "the device is busy");
                return Outcome::reply(error_reply(&echo, &e));
            }
            Action::Proceed => {}
        }
        let Some(op) = el.children.first() else {
            let e = rpc_err("rpc", "missing-element", "<rpc> has no operation");
            return Outcome::reply(error_reply(&echo, &e));
        };
        let close = op.local() == "close-session";
        match self.rpc(op) {
            Ok(body) => Outcome {
                reply: Some(reply(&echo, &body)),
                close,
                drop: false,
            },
            Err(e) => Outcome::reply(error_reply(&echo, &e)),
        }
    }

    /// The session ended (close-session or connection loss): release its
    /// locks, discard a candidate it had locked, and revert a confirmed
    /// commit it issued and did not confirm (RFC 6241 8.4.1).
    pub fn end(&mut self) {
        let mut st = self.dev.state();
        if st.lock_candidate == Some(self.id) {
            st.lock_candidate = None;
            st.candidate = st.running.clone();
        }
        if st.lock_running == Some(self.id) {
            st.lock_running = None;
        }
        if st.pending.as_ref().is_some_and(|p| p.owner == self.id) {
            st.revert();
        }
    }

    fn rpc(&mut self, op: &Element) -> Result<String, RpcErr> {
        match op.local() {
            "get-config" => {
                let s = store(op, "source")?;
                self.get(s, op.find("filter"))
            }
            "get" => self.get(Store::Running, op.find("filter")),
            "edit-config" => self.edit(op),
            "lock" => self.lock(store(op, "target")?),
            "unlock" => self.unlock(store(op, "target")?),
            "validate" => {
                let st = self.dev.state();
                let s = store(op, "source")?;
                check(st.store(s))?;
                Ok("<ok/>".into())
            }
            "commit" => self.commit(op),
            "cancel-commit" => {
                let mut st = self.dev.state();
                if st.revert() {
                    Ok("<ok/>".into())
                } else {
                    Err(rpc_err(
                        "protocol",
                        "operation-failed",
                        "no confirmed commit is in progress",
                    ))
                }
            }
            "discard-changes" => {
                let mut st = self.dev.state();
                self.not_locked_by_other(st.lock_candidate)?;
                st.candidate = st.running.clone();
                Ok("<ok/>".into())
            }
            "close-session" => {
                self.end();
                Ok("<ok/>".into())
            }
            other => Err(rpc_err(
                "protocol",
                "operation-not-supported",
                format!("<{other}> is not supported"),
            )),
        }
    }

    fn not_locked_by_other(&self, holder: Option<u64>) -> Result<(), RpcErr> {
        match holder {
            Some(h) if h != self.id => Err(RpcErr {
                kind: "protocol",
                tag: "in-use",
                message: format!("the datastore is locked by session {h}"),
                session_id: Some(h),
            }),
            _ => Ok(()),
        }
    }

    fn get(&self, s: Store, filter: Option<&Element>) -> Result<String, RpcErr> {
        let st = self.dev.state();
        let data = st.store(s);
        let children = match filter {
            // RFC 6241 6.4.2: an empty filter selects nothing (a keep-alive).
            Some(f) if f.children.is_empty() => Vec::new(),
            Some(f) => tree::filter(data, f),
            None => data.children.clone(),
        };
        let inner: String = children.iter().map(Element::to_xml).collect();
        Ok(format!("<data>{inner}</data>"))
    }

    fn edit(&mut self, op: &Element) -> Result<String, RpcErr> {
        let target = store(op, "target")?;
        if target != Store::Candidate {
            return Err(rpc_err(
                "protocol",
                "operation-not-supported",
                "only the candidate is writable (no :writable-running)",
            ));
        }
        let default = match op.find("default-operation").map(|d| d.text.as_str()) {
            None => Op::Merge,
            Some(s) => Op::parse(s)
                .filter(|o| matches!(o, Op::Merge | Op::Replace | Op::None))
                .ok_or_else(|| {
                    rpc_err(
                        "protocol",
                        "invalid-value",
                        format!("bad default-operation {s:?}"),
                    )
                })?,
        };
        let config = op.find("config").ok_or_else(|| {
            rpc_err(
                "protocol",
                "missing-element",
                "<edit-config> needs <config>",
            )
        })?;
        let mut st = self.dev.state();
        self.not_locked_by_other(st.lock_candidate)?;
        // All-or-nothing (rollback-on-error): edit a copy, swap on success.
        let mut work = st.candidate.clone();
        if default == Op::Replace {
            work.children = config.children.iter().map(tree::strip).collect();
        } else {
            tree::apply(&mut work, config, default)
                .map_err(|e| rpc_err("application", e.tag, e.message))?;
        }
        st.candidate = work;
        Ok("<ok/>".into())
    }

    fn lock(&mut self, s: Store) -> Result<String, RpcErr> {
        let mut st = self.dev.state();
        let dirty = s == Store::Candidate && st.candidate != st.running;
        let holder = *st.lock_of(s);
        match holder {
            Some(h) => Err(RpcErr {
                kind: "protocol",
                tag: "lock-denied",
                message: format!("lock is already held by session {h}"),
                session_id: Some(h),
            }),
            None if dirty => Err(RpcErr {
                kind: "protocol",
                tag: "lock-denied",
                message: "the candidate has uncommitted changes".into(),
                session_id: Some(0),
            }),
            None => {
                *st.lock_of(s) = Some(self.id);
                Ok("<ok/>".into())
            }
        }
    }

    fn unlock(&mut self, s: Store) -> Result<String, RpcErr> {
        let mut st = self.dev.state();
        if *st.lock_of(s) != Some(self.id) {
            return Err(rpc_err(
                "protocol",
                "operation-failed",
                "this session does not hold the lock",
            ));
        }
        *st.lock_of(s) = None;
        if s == Store::Candidate {
            // Uncommitted changes made under the lock are discarded.
            st.candidate = st.running.clone();
        }
        Ok("<ok/>".into())
    }

    fn commit(&mut self, op: &Element) -> Result<String, RpcErr> {
        if self.dev.faults().on_commit() == Action::Fail {
            return Err(rpc_err(
                "application",
                "operation-failed",
                "commit refused by the device",
            ));
        }
        let confirmed = op.find("confirmed").is_some();
        let timeout = match op.find("confirm-timeout") {
            None => DEFAULT_CONFIRM_TIMEOUT,
            Some(t) => t
                .text
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .map(|n| Duration::from_secs(u64::from(n)))
                .ok_or_else(|| {
                    rpc_err(
                        "protocol",
                        "invalid-value",
                        "confirm-timeout must be a positive integer",
                    )
                })?,
        };
        let mut st = self.dev.state();
        self.not_locked_by_other(st.lock_running)?;
        self.not_locked_by_other(st.lock_candidate)?;
        check(&st.candidate)?;
        if confirmed {
            self.dev.arm(&mut st, self.id, timeout);
        } else {
            st.pending = None;
        }
        st.running = st.candidate.clone();
        st.running_version += 1;
        Ok("<ok/>".into())
    }
}

fn check(data: &Element) -> Result<(), RpcErr> {
    data.children
        .iter()
        .try_for_each(|c| tree::validate(c, ""))
        .map_err(|m| rpc_err("application", "invalid-value", m))
}

fn store(op: &Element, which: &str) -> Result<Store, RpcErr> {
    let t = op
        .find(which)
        .and_then(|t| t.children.first())
        .ok_or_else(|| {
            rpc_err(
                "protocol",
                "missing-element",
                format!("<{}> needs <{which}>", op.local()),
            )
        })?;
    Store::parse(t.local()).ok_or_else(|| {
        rpc_err(
            "protocol",
            "invalid-value",
            format!("unknown datastore <{}>", t.local()),
        )
    })
}

fn reply(echo: &[(String, String)], body: &str) -> String {
    let mut attrs = String::new();
    for (k, v) in echo {
        if k == "xmlns" {
            continue;
        }
        attrs.push_str(&format!(
            " {k}=\"{}\"",
            quick_xml::escape::escape(v.as_str())
        ));
    }
    format!(r#"<rpc-reply xmlns="{NS_BASE}"{attrs}>{body}</rpc-reply>"#)
}

fn error_reply(echo: &[(String, String)], e: &RpcErr) -> String {
    let info = e
        .session_id
        .map(|s| format!("<error-info><session-id>{s}</session-id></error-info>"))
        .unwrap_or_default();
    let body = format!(
        "<rpc-error><error-type>{}</error-type><error-tag>{}</error-tag><error-severity>error</error-severity><error-message xml:lang=\"en\">{}</error-message>{info}</rpc-error>",
        e.kind,
        e.tag,
        quick_xml::escape::escape(e.message.as_str())
    );
    reply(echo, &body)
}
