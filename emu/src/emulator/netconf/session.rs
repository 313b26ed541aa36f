//! One NETCONF session: the hello exchange, framing negotiation, and the
//! RPCs, as a pure message-in/message-out machine (timers aside) so it is
//! testable without SSH. The SSH server feeds it decoded messages.
//!
//! The client's `<hello>` (RFC 6241 8.1) must carry a base capability,
//! `urn:ietf:params:netconf:base:1.0` or `:1.1` ("each peer MUST send at
//! least the base NETCONF capability"; without one the peers share no
//! protocol version), and no `<session-id>` ("if a server receives a
//! `<hello>` message with a `<session-id>` element, the NETCONF server MUST
//! terminate the NETCONF session"); otherwise the session is closed without
//! a reply, as for any first message that is not a `<hello>`.
//!
//! What a message must be before anything runs (in this order):
//! UTF-8 (RFC 6241 section 3: "All NETCONF messages MUST be well-formed
//! XML, encoded in UTF-8"; the transport answers `malformed-message`,
//! [`NetconfSession::not_utf8`], without a `message-id` since none can be
//! read), no NUL character (XML 1.0 section 2.2 excludes it from `Char`;
//! libyang reads C strings), no document type declaration (RFC 6241 3.2:
//! "Document type declarations ... MUST NOT appear in NETCONF content";
//! `malformed-message`, the message is not processed), nesting and element
//! count within [`Limits`](super::datastore::Limits) (`too-big`, RFC 6241
//! Appendix A), well-formed (`malformed-message`),
//! an `<rpc>` in the base namespace `urn:ietf:params:xml:ns:netconf:base:1.0`
//! (RFC 6241 4.1; `unknown-element` / `unknown-namespace`), with a
//! `message-id` (`missing-attribute`), whose operation element is in the
//! base namespace too (`unknown-namespace`).
//!
//! Configuration content (`edit-config`, `copy-config` from `<config>`):
//! top-level elements in a namespace the device implements
//! (`unknown-namespace`, application), list entries with their keys
//! ([`super::tree`], `missing-element`); with a schema (feature `yang`),
//! the content passes `Schema::validate_edit` and the datastore it would
//! produce `Schema::validate_config`, as does the datastore of `validate`
//! and `commit`; a refusal is an `<rpc-error>` of error-type
//! `application` with the violation's tag and `<error-path>`, and the
//! datastore is left unchanged (RFC 6241 7.2 `rollback-on-error`).
//!
//! Filters: subtree only; `type="xpath"` (or any other type) answers
//! `bad-attribute` with `<bad-attribute>type</bad-attribute>`, since
//! `:xpath` is not advertised (RFC 6241 6.1 and 8.9: the `xpath` type is
//! available only with that capability; the operation itself is supported,
//! so `operation-not-supported` would misreport it).
//!
//! `kill-session` (RFC 6241 7.9), `copy-config` (7.3) and `delete-config`
//! (7.4) are implemented as documented on [`NetconfSession`]'s handlers.

use std::sync::Arc;
use std::time::Duration;

use quick_xml::events::Event;
use quick_xml::Reader;
use tracing::info;
use vclos_drivers::netconf::framing::Framing;
use vclos_drivers::netconf::xml::{Element, NS_BASE};
use vclos_drivers::netconf::{CAP_BASE_10, CAP_BASE_11, CAP_CONFIRMED};

use super::datastore::{KillSwitch, NetconfDevice, Store};
use super::rules;
use super::tree::{self, Op, Scope};
use crate::emulator::faults::Action;
use crate::schema::Violation;

/// Capabilities the emulator announces (no `:xpath`, no `:url`, no
/// `:writable-running`).
pub const CAPABILITIES: &[&str] = &[
    CAP_BASE_10,
    CAP_BASE_11,
    "urn:ietf:params:netconf:capability:candidate:1.0",
    "urn:ietf:params:netconf:capability:validate:1.1",
    CAP_CONFIRMED,
    "urn:ietf:params:netconf:capability:rollback-on-error:1.0",
];

/// The YANG modules the OpenConfig dialect writes (and the identity
/// modules its values name): (module, namespace, revision), from the
/// OpenConfig 2020 bundle of PyPI's ydk-models-openconfig (each module's
/// latest `revision` statement). Without libyang they are what `<hello>`
/// advertises (RFC 6020 5.6.4 form) and the namespaces the device
/// implements; with libyang, `Schema::capabilities` and
/// `Schema::knows_namespace` answer instead.
pub const MODULES: &[(&str, &str, &str)] = &[
    (
        "openconfig-interfaces",
        "http://openconfig.net/yang/interfaces",
        "2016-05-26",
    ),
    (
        "openconfig-if-ip",
        "http://openconfig.net/yang/interfaces/ip",
        "2019-01-08",
    ),
    (
        "openconfig-if-ethernet",
        "http://openconfig.net/yang/interfaces/ethernet",
        "2020-05-06",
    ),
    (
        "openconfig-vlan",
        "http://openconfig.net/yang/vlan",
        "2016-05-26",
    ),
    (
        "openconfig-system",
        "http://openconfig.net/yang/system",
        "2018-07-17",
    ),
    (
        "openconfig-network-instance",
        "http://openconfig.net/yang/network-instance",
        "2017-01-13",
    ),
    (
        "openconfig-network-instance-types",
        "http://openconfig.net/yang/network-instance-types",
        "2016-12-15",
    ),
    (
        "openconfig-policy-types",
        "http://openconfig.net/yang/policy-types",
        "2017-07-14",
    ),
    (
        "openconfig-types",
        "http://openconfig.net/yang/openconfig-types",
        "2018-11-21",
    ),
    (
        "iana-if-type",
        "urn:ietf:params:xml:ns:yang:iana-if-type",
        "2014-05-08",
    ),
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

    fn silent(close: bool) -> Self {
        Self {
            reply: None,
            close,
            drop: false,
        }
    }
}

/// An `<rpc-error>` (RFC 6241 4.3).
#[derive(Debug, Clone)]
struct RpcErr {
    kind: &'static str,
    tag: &'static str,
    message: String,
    path: Option<String>,
    /// `<error-info>` children (Appendix A names them per tag).
    info: Vec<(&'static str, String)>,
}

fn rpc_err(kind: &'static str, tag: &'static str, message: impl Into<String>) -> RpcErr {
    RpcErr {
        kind,
        tag,
        message: message.into(),
        path: None,
        info: Vec::new(),
    }
}

impl RpcErr {
    fn info(mut self, k: &'static str, v: impl Into<String>) -> Self {
        self.info.push((k, v.into()));
        self
    }

    fn in_use(tag: &'static str, message: String, holder: u64) -> Self {
        rpc_err("protocol", tag, message).info("session-id", holder.to_string())
    }
}

impl From<tree::EditError> for RpcErr {
    fn from(e: tree::EditError) -> Self {
        let mut r = rpc_err("application", e.tag, e.message);
        r.path = e.path;
        if let Some(b) = e.bad_element {
            r = r.info("bad-element", b);
        }
        r
    }
}

/// A schema refusal: always about configuration content, so error-type
/// `application` (RFC 6241 Appendix A allows it for every tag libyang's
/// refusals map to).
fn violation(v: Violation) -> RpcErr {
    let mut r = rpc_err("application", v.tag.as_str(), v.message);
    r.path = v.path;
    r
}

/// The `too-big` answer to a message over the size limit (sent without a
/// message-id: the message was never parsed).
pub fn too_big_reply(limit: usize) -> String {
    error_reply(
        &[],
        &rpc_err(
            "rpc",
            "too-big",
            format!("message larger than {limit} bytes: session closed"),
        ),
    )
}

/// One session of a [`NetconfDevice`].
#[derive(Debug)]
pub struct NetconfSession {
    dev: Arc<NetconfDevice>,
    id: u64,
    hello_done: bool,
    framing: Framing,
    kill: Arc<KillSwitch>,
}

impl NetconfSession {
    pub fn new(dev: Arc<NetconfDevice>) -> Self {
        let id = dev.new_session_id();
        let kill = dev.register(id);
        Self {
            dev,
            id,
            hello_done: false,
            framing: Framing::EndOfMessage,
            kill,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Fires when another session kills this one (`<kill-session>`): the
    /// transport must then close the connection.
    pub fn kill_switch(&self) -> Arc<KillSwitch> {
        self.kill.clone()
    }

    /// The framing for messages after the one just handled.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// The capability URIs of `<hello>`: the protocol's, then one per YANG
    /// module (RFC 6020 5.6.4, `ns?module=name&revision=date`).
    pub fn capabilities(&self) -> Vec<String> {
        let mut caps: Vec<String> = CAPABILITIES.iter().map(|c| c.to_string()).collect();
        match self.dev.schema() {
            Some(s) => caps.extend(s.capabilities()),
            None => caps.extend(
                MODULES
                    .iter()
                    .map(|(m, ns, rev)| format!("{ns}?module={m}&revision={rev}")),
            ),
        }
        caps
    }

    /// The server `<hello>` (always end-of-message framed).
    pub fn hello(&self) -> String {
        let caps: String = self
            .capabilities()
            .iter()
            .map(|c| {
                format!(
                    "<capability>{}</capability>",
                    quick_xml::escape::escape(c.as_str())
                )
            })
            .collect();
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><hello xmlns="{NS_BASE}"><capabilities>{caps}</capabilities><session-id>{}</session-id></hello>"#,
            self.id
        )
    }

    /// Handle one decoded message.
    pub fn handle(&mut self, msg: &str) -> Outcome {
        if self.kill.is_killed() {
            return Outcome::silent(true);
        }
        if msg.contains('\0') {
            let err = rpc_err("rpc", "malformed-message", "NUL character in the message");
            return Outcome::reply(error_reply(&[], &err));
        }
        if has_doctype(msg) {
            let err = rpc_err(
                "rpc",
                "malformed-message",
                "document type declarations must not appear in NETCONF messages (RFC 6241 3.2)",
            );
            return Outcome::reply(error_reply(&[], &err));
        }
        let limits = self.dev.limits();
        let el = match Element::parse_limited(msg, limits.max_depth, limits.max_elements) {
            Ok(e) => e,
            Err(e) => {
                let tag = if e.too_big {
                    "too-big"
                } else {
                    "malformed-message"
                };
                let err = rpc_err("rpc", tag, e.to_string());
                return Outcome::reply(error_reply(&[], &err));
            }
        };
        if !self.hello_done {
            if el.local() != "hello" {
                return Outcome::silent(true);
            }
            if el.find("session-id").is_some() {
                info!(
                    session = self.id,
                    "client <hello> has a <session-id>: terminating (RFC 6241 8.1)"
                );
                return Outcome::silent(true);
            }
            let caps = el.find("capabilities");
            let offers = |cap: &str| caps.is_some_and(|c| c.children.iter().any(|x| x.text == cap));
            let peer_11 = offers(CAP_BASE_11);
            if !peer_11 && !offers(CAP_BASE_10) {
                info!(
                    session = self.id,
                    "client <hello> has no base capability: terminating (RFC 6241 8.1)"
                );
                return Outcome::silent(true);
            }
            self.hello_done = true;
            if peer_11 {
                self.framing = Framing::Chunked;
            }
            return Outcome::silent(false);
        }
        let scope = Scope::default().enter(&el);
        if el.local() != "rpc" {
            let err = rpc_err(
                "rpc",
                "unknown-element",
                format!("expected <rpc>, got <{}>", el.local()),
            )
            .info("bad-element", el.local());
            return Outcome::reply(error_reply(&[], &err));
        }
        let echo: Vec<(String, String)> = el.attrs.clone();
        if let Err(e) = in_base(&scope, &el) {
            return Outcome::reply(error_reply(&echo, &e));
        }
        if el.get_attr("message-id").is_none() {
            let e = rpc_err("rpc", "missing-attribute", "<rpc> has no message-id")
                .info("bad-attribute", "message-id")
                .info("bad-element", "rpc");
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
        let result = in_base(&scope, op).and_then(|()| self.rpc(op, &scope.enter(op)));
        match result {
            Ok(body) => Outcome {
                reply: Some(reply(&echo, &body)),
                close,
                drop: false,
            },
            Err(e) => Outcome::reply(error_reply(&echo, &e)),
        }
    }

    /// The answer to a message that is not UTF-8 (RFC 6241 section 3):
    /// `malformed-message`, without a `message-id` (none can be read); the
    /// session goes on. Before the hello exchange the session is closed.
    pub fn not_utf8(&mut self) -> Outcome {
        if self.kill.is_killed() || !self.hello_done {
            return Outcome::silent(true);
        }
        let err = rpc_err("rpc", "malformed-message", "the message is not UTF-8");
        Outcome::reply(error_reply(&[], &err))
    }

    /// The session ended (close-session, connection loss, or killed):
    /// release what it holds ([`super::datastore::State::release`]).
    pub fn end(&mut self) {
        self.dev.unregister(self.id);
        self.dev.state().release(self.id);
    }

    fn rpc(&mut self, op: &Element, scope: &Scope) -> Result<String, RpcErr> {
        match op.local() {
            "get-config" => {
                let s = store(op, "source")?;
                self.get(s, op.find("filter"))
            }
            "get" => self.get(Store::Running, op.find("filter")),
            "edit-config" => self.edit(op, scope),
            "copy-config" => self.copy(op, scope),
            "delete-config" => self.delete(op),
            "lock" => self.lock(store(op, "target")?),
            "unlock" => self.unlock(store(op, "target")?),
            "validate" => self.validate(op, scope),
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
            "kill-session" => self.kill_session(op),
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
            Some(h) if h != self.id => Err(RpcErr::in_use(
                "in-use",
                format!("the datastore is locked by session {h}"),
                h,
            )),
            _ => Ok(()),
        }
    }

    fn get(&self, s: Store, filter: Option<&Element>) -> Result<String, RpcErr> {
        if let Some(f) = filter {
            let ty = f.get_attr("type").unwrap_or("subtree");
            if ty != "subtree" {
                return Err(rpc_err(
                    "protocol",
                    "bad-attribute",
                    format!(
                        "filter type {ty:?} is not supported (no :xpath capability; RFC 6241 8.9)"
                    ),
                )
                .info("bad-attribute", "type")
                .info("bad-element", "filter"));
            }
        }
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

    /// Check configuration content before it touches a datastore:
    /// top-level namespaces, then the schema's view of the edit.
    fn check_content(&self, config: &Element, scope: &Scope) -> Result<(), RpcErr> {
        for top in &config.children {
            let ns = scope.ns_of(top).unwrap_or_default();
            if !self.implements(&ns) {
                return Err(rpc_err(
                    "application",
                    "unknown-namespace",
                    format!(
                        "<{}> is in namespace {ns:?}, which this device does not implement",
                        top.local()
                    ),
                )
                .info("bad-element", top.local())
                .info("bad-namespace", ns));
            }
        }
        if let Some(schema) = self.dev.schema() {
            let xml: String = config
                .children
                .iter()
                .map(|c| scope.declare_on(c.clone()).to_xml())
                .collect();
            schema.validate_edit(&xml).map_err(violation)?;
        }
        Ok(())
    }

    fn implements(&self, ns: &str) -> bool {
        match self.dev.schema() {
            Some(s) => ns != NS_BASE && s.knows_namespace(ns),
            None => MODULES.iter().any(|(_, n, _)| *n == ns),
        }
    }

    /// The datastore `content` replaced wholesale (`default-operation
    /// replace`, `copy-config` from `<config>`), checked like an edit.
    fn replacement(
        &self,
        base: &Element,
        config: &Element,
        scope: &Scope,
    ) -> Result<Element, RpcErr> {
        self.check_content(config, scope)?;
        let mut work = shallow(base);
        tree::apply(&mut work, config, Op::Replace, scope)?;
        Ok(work)
    }

    fn edit(&mut self, op: &Element, scope: &Scope) -> Result<String, RpcErr> {
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
            .info("bad-element", "config")
        })?;
        let scope = scope.enter(config);
        let mut st = self.dev.state();
        self.not_locked_by_other(st.lock_candidate)?;
        // All-or-nothing (rollback-on-error): edit a copy, swap on success.
        let work = if default == Op::Replace {
            self.replacement(&st.candidate, config, &scope)?
        } else {
            self.check_content(config, &scope)?;
            let mut work = st.candidate.clone();
            tree::apply(&mut work, config, default, &scope)?;
            work
        };
        self.check_store(&work)?;
        st.candidate = work;
        Ok("<ok/>".into())
    }

    /// `<copy-config>` (RFC 6241 7.3): source `<running/>`, `<candidate/>`
    /// or `<config>` (no `:url`); target `<candidate/>`, or `<running/>`
    /// from the candidate only, which is then exactly a `<commit>` (this
    /// device has no `:writable-running`, RFC 6241 8.2, so running
    /// changes only by committing the candidate). Source and target the
    /// same: `invalid-value` (7.3). The result is validated like an edit.
    fn copy(&mut self, op: &Element, scope: &Scope) -> Result<String, RpcErr> {
        let target = store(op, "target")?;
        let src = op
            .find("source")
            .and_then(|s| s.children.first())
            .ok_or_else(|| {
                rpc_err(
                    "protocol",
                    "missing-element",
                    "<copy-config> needs <source>",
                )
                .info("bad-element", "source")
            })?;
        let source = match src.local() {
            "config" => None,
            "url" => {
                return Err(rpc_err(
                    "protocol",
                    "operation-not-supported",
                    "<url> needs the :url capability, which this device does not have",
                ))
            }
            other => Some(Store::parse(other).ok_or_else(|| {
                rpc_err(
                    "protocol",
                    "invalid-value",
                    format!("unknown datastore <{other}>"),
                )
                .info("bad-element", other)
            })?),
        };
        if source == Some(target) {
            return Err(rpc_err(
                "protocol",
                "invalid-value",
                "source and target are the same datastore",
            ));
        }
        if target == Store::Running {
            if source != Some(Store::Candidate) {
                return Err(rpc_err(
                    "protocol",
                    "operation-not-supported",
                    "running is written only from the candidate (no :writable-running)",
                ));
            }
            return self.commit(&Element::new("commit"));
        }
        let mut st = self.dev.state();
        self.not_locked_by_other(st.lock_candidate)?;
        let content = match source {
            Some(s) => st.store(s).clone(),
            None => {
                let scope = scope.enter(op).enter(src);
                self.replacement(&st.candidate, src, &scope)?
            }
        };
        self.check_store(&content)?;
        st.candidate = content;
        Ok("<ok/>".into())
    }

    /// `<delete-config>` (RFC 6241 7.4): "the running configuration
    /// datastore cannot be deleted" (`operation-not-supported`, as
    /// Nokia SR OS and ConfD answer); the candidate is emptied (what a
    /// commit then makes running, as Huawei VRP documents for
    /// `<delete-config>` of the candidate).
    fn delete(&mut self, op: &Element) -> Result<String, RpcErr> {
        match store(op, "target")? {
            Store::Running => Err(rpc_err(
                "protocol",
                "operation-not-supported",
                "the running configuration datastore cannot be deleted (RFC 6241 7.4)",
            )),
            Store::Candidate => {
                let mut st = self.dev.state();
                self.not_locked_by_other(st.lock_candidate)?;
                let empty = shallow(&st.candidate);
                self.check_store(&empty)?;
                st.candidate = empty;
                Ok("<ok/>".into())
            }
        }
    }

    /// `<kill-session>` (RFC 6241 7.9): the other session's locks are
    /// released and its transport closed; a confirmed commit it issued
    /// and did not confirm is reverted (8.4.1: the issuing session was
    /// terminated). Killing oneself is `invalid-value` (7.9).
    fn kill_session(&mut self, op: &Element) -> Result<String, RpcErr> {
        let id = op
            .find("session-id")
            .ok_or_else(|| {
                rpc_err(
                    "protocol",
                    "missing-element",
                    "<kill-session> needs <session-id>",
                )
                .info("bad-element", "session-id")
            })?
            .text
            .parse::<u64>()
            .map_err(|_| rpc_err("protocol", "invalid-value", "session-id must be a number"))?;
        if id == self.id {
            return Err(rpc_err(
                "protocol",
                "invalid-value",
                "a session cannot kill itself (use <close-session>)",
            ));
        }
        let mut st = self.dev.state();
        if self.dev.kill(&mut st, id) {
            Ok("<ok/>".into())
        } else {
            Err(rpc_err(
                "protocol",
                "invalid-value",
                format!("no session {id}"),
            ))
        }
    }

    fn lock(&mut self, s: Store) -> Result<String, RpcErr> {
        let mut st = self.dev.state();
        let dirty = s == Store::Candidate && st.candidate != st.running;
        let holder = *st.lock_of(s);
        match holder {
            Some(h) => Err(RpcErr::in_use(
                "lock-denied",
                format!("lock is already held by session {h}"),
                h,
            )),
            None if dirty => Err(RpcErr::in_use(
                "lock-denied",
                "the candidate has uncommitted changes".into(),
                0,
            )),
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

    /// `<validate>` (RFC 6241 8.6): a datastore or a `<config>`.
    fn validate(&mut self, op: &Element, scope: &Scope) -> Result<String, RpcErr> {
        if let Some(cfg) = op.find("source").and_then(|s| s.find("config")) {
            let scope = scope.enter(op).enter(cfg);
            let base = shallow(&self.dev.state().candidate);
            let content = self.replacement(&base, cfg, &scope)?;
            self.check_store(&content)?;
            return Ok("<ok/>".into());
        }
        let st = self.dev.state();
        let s = store(op, "source")?;
        self.check_store(st.store(s))?;
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
        self.check_store(&st.candidate)?;
        if confirmed {
            self.dev.arm(&mut st, self.id, timeout);
        } else {
            st.pending = None;
        }
        st.running = st.candidate.clone();
        st.running_version += 1;
        Ok("<ok/>".into())
    }

    /// A whole datastore: the OpenConfig key/config rule
    /// ([`tree::validate`]), then the schema's, then the device rules no
    /// model states ([`rules`]).
    fn check_store(&self, data: &Element) -> Result<(), RpcErr> {
        data.children
            .iter()
            .try_for_each(|c| tree::validate(c, ""))
            .map_err(|m| rpc_err("application", "invalid-value", m))?;
        if let Some(schema) = self.dev.schema() {
            let xml: String = data.children.iter().map(Element::to_xml).collect();
            schema.validate_config(&xml).map_err(violation)?;
        }
        rules::unique_vlans(data).map_err(|d| {
            let mut r = rpc_err("application", "operation-failed", d.message);
            r.path = Some(d.path);
            r
        })
    }
}

/// Whether `msg` holds a document type declaration. Only a message that
/// has the text `<!DOCTYPE` (in any case) is read for it, so a CDATA section
/// or comment quoting one is not mistaken for one; a message the reader
/// cannot get through is left to the full parser, which refuses it.
fn has_doctype(msg: &str) -> bool {
    const DOCTYPE: &[u8] = b"<!doctype";
    let quoted = msg
        .as_bytes()
        .windows(DOCTYPE.len())
        .any(|w| w.eq_ignore_ascii_case(DOCTYPE));
    if !quoted {
        return false;
    }
    let mut reader = Reader::from_str(msg);
    loop {
        match reader.read_event() {
            Ok(Event::DocType(_)) => return true,
            Ok(Event::Eof) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

/// `e` without its children.
fn shallow(e: &Element) -> Element {
    Element {
        name: e.name.clone(),
        attrs: e.attrs.clone(),
        ..Element::default()
    }
}

/// RFC 6241 4.1: `<rpc>` and the operations are in the base namespace
/// (`unknown-namespace` is error-type `protocol` or `application` in
/// Appendix A; a protocol element's namespace is a `protocol` matter).
fn in_base(scope: &Scope, e: &Element) -> Result<(), RpcErr> {
    match scope.ns_of(e) {
        Some(ns) if ns == NS_BASE => Ok(()),
        ns => {
            let ns = ns.unwrap_or_default();
            Err(rpc_err(
                "protocol",
                "unknown-namespace",
                format!("<{}> must be in namespace {NS_BASE}, not {ns:?}", e.local()),
            )
            .info("bad-element", e.local())
            .info("bad-namespace", ns))
        }
    }
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
            .info("bad-element", which)
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
    let esc = |s: &str| quick_xml::escape::escape(s).into_owned();
    let path = e
        .path
        .as_deref()
        .map(|p| format!("<error-path>{}</error-path>", esc(p)))
        .unwrap_or_default();
    let info = if e.info.is_empty() {
        String::new()
    } else {
        let items: String = e
            .info
            .iter()
            .map(|(k, v)| format!("<{k}>{}</{k}>", esc(v)))
            .collect();
        format!("<error-info>{items}</error-info>")
    };
    let body = format!(
        "<rpc-error><error-type>{}</error-type><error-tag>{}</error-tag><error-severity>error</error-severity>{path}<error-message xml:lang=\"en\">{}</error-message>{info}</rpc-error>",
        e.kind,
        e.tag,
        esc(&e.message)
    );
    reply(echo, &body)
}
