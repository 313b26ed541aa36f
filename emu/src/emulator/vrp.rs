//! A Huawei VRP 8 device configuration as a tree of command lines.
//!
//! VRP configuration is hierarchical text: some commands open a *view*
//! (`interface 100GE1/0/1`, `acl number 3001`, ...) and the lines typed in
//! that view become its children. The emulator keeps exactly that shape — a
//! generic tree of lines with a small vocabulary saying which commands open
//! views and which leaves belong where — instead of a typed model, so any
//! command the dialect renders round-trips without the emulator having to
//! understand its meaning.
//!
//! # Display format (a contract: the dialect's parser depends on it)
//! [`VrpConfig::render`] prints what `display current-configuration` prints:
//! top-level lines at column 0, each view's children indented by ONE space per
//! level, a `#` line before every top-level section (a view, or a run of
//! consecutive top-level leaves), then `#` and `return`. Top-level sections
//! are ordered by kind as VRP does (sysname, other globals, vpn-instances,
//! ACLs, classifiers, behaviors, policies, interfaces, static routes), and by
//! insertion order within a kind. Children keep insertion order.
//!
//! # Command semantics
//! * View openers: `interface X`, `acl number N` / `acl name N`,
//!   `traffic classifier X ...`, `traffic behavior X`, `traffic policy X`,
//!   `ip vpn-instance X`, and `ipv4-family` (inside an `ip vpn-instance` only).
//!   Entering an existing view reuses it (matched on its key: the first two
//!   words for `interface`, the first three for the others).
//! * As on VRP, a command not valid in the current view is tried in the parent
//!   views, leaving the current one (so `interface A` typed in an ACL view
//!   goes back to system view and opens interface A).
//! * Leaves are added at the current level; a leaf with a *replace key*
//!   (`description`, `ip address`, `rule N`, `classifier C behavior B`, ...)
//!   replaces the existing leaf with the same key, like VRP.
//! * `undo <line>` removes the child equal to `<line>` (a view header removes
//!   the whole view), else the first child starting with `<line> `; if none
//!   exists it fails with `Error: The configuration does not exist.`.
//!   Exceptions, as on a CE: `undo portswitch` is itself stored as a leaf
//!   (`portswitch` removes it) and `undo shutdown` of an interface that is not
//!   shut down is a no-op.
//! * `ip binding vpn-instance V` requires `ip vpn-instance V` to exist and
//!   removes the interface's `ip address` lines (real behaviour).
//! * Ethernet interfaces (and Eth-Trunks) work in Layer 2 mode by default;
//!   `ip address` is accepted only after `undo portswitch` switched them
//!   to Layer 3 (CloudEngine configuration guide, "Switching an interface
//!   to Layer 3 mode": by default Ethernet interfaces are in Layer 2 mode,
//!   and after `undo portswitch` IP addresses can be configured; cited in
//!   `docs/devices/huawei-ce.md`).
//! * Sub-interfaces (`interface 100GE1/0/17.101`, Layer-3 Ethernet
//!   sub-interfaces of a physical port or Eth-Trunk): created only on a
//!   main interface in Layer 3 mode (`undo portswitch`; the CloudEngine
//!   configuration examples cited in the dialect's module doc switch the
//!   main interface first), else `MainLayer2` (an Eth-Trunk that does not
//!   exist is a wrong parameter); `dot1q termination vid A [to B]` (VRP V8
//!   command reference, `dot1qTermination(ETHBASEOM)`: sub-interface views
//!   only, VLAN ids 1-4094, B greater than A) is refused in a main
//!   interface's view (`Unrecognized`) and when a sub-interface of the
//!   same main interface already terminates one of its VLANs
//!   (`VlanTerminated`: on VRP a VLAN tag selects one sub-interface of the
//!   port it arrives on); several lines accumulate. A sub-interface's
//!   `ip binding vpn-instance` follows the interface rule above. A new
//!   sub-interface is displayed right after its main interface and the
//!   lower-numbered sub-interfaces of it (as in the configuration scripts
//!   of those examples). `undo interface X.N` deletes it with its lines;
//!   `undo interface` of a physical port is refused (`PhysicalInterface`:
//!   physical interfaces exist by hardware, not by configuration). The
//!   three refusals' wording is the emulator's.
//!
//! # Strictness: documented syntax only
//! Each view accepts only the commands listed in `leaf_valid` (others are
//! `Unrecognized`, even in system view: the emulator does not pretend to
//! configure what it does not model), and every argument is checked by
//! `syntax` against the CloudEngine V200R00x command forms
//! (`docs/devices/huawei-ce.md` cites each): IPv4 addresses, masks (length
//! or contiguous dotted) and wildcards; interface addresses neither the
//! subnet's network nor broadcast address; static-route destinations that
//! are network addresses; interface names in CE numbering
//! (`100GE1/0/1`, `25GE1/0/1:2`, `Eth-Trunk1`, `Vlanif10`, ...); ACL
//! numbers and rules; `traffic classifier N [type and|or]`;
//! `redirect interface IF` and `redirect [vpn-instance V] nexthop
//! A{1,16} [fail-action discard] [low-precedence]` (the S-series
//! `ip-nexthop` spelling is refused). A bad value is `Error: Wrong
//! parameter found at '^' position.` with the caret under it, an unknown
//! keyword `Unrecognized`, a missing argument `Incomplete`.
//!
//! References, as MQC requires ("Configuring PBR" and "classifier
//! behavior", cited in the docs): `classifier C behavior B` needs both
//! objects, `traffic-policy P inbound` needs P, `redirect vpn-instance V`
//! and `ip route-static vpn-instance V` need V; a policy applied to an
//! interface, and a classifier or behavior used in a policy, cannot be
//! deleted (`Error: The ... is being used and cannot be deleted.`; the
//! wording of these two reference errors is the emulator's). Which physical
//! interfaces exist is the session's business (`SwitchDevice::with_interfaces`).

use std::collections::HashMap;
use std::fmt;

use thiserror::Error;

mod syntax;

/// One configuration line and, for a view, the lines typed inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub text: String,
    pub children: Vec<Node>,
    pub view: bool,
}

impl Node {
    fn leaf(text: &str) -> Self {
        Self {
            text: text.to_string(),
            children: Vec::new(),
            view: false,
        }
    }
}

/// A whole device configuration (the children of system view).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VrpConfig {
    pub top: Vec<Node>,
}

/// Why a configuration line was refused. `Display` is the device's own
/// error line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VrpError {
    /// Not a command in this view nor any parent view. `column` is the byte
    /// offset (in the trimmed line) the `^` caret points at.
    #[error("Error: Unrecognized command found at '^' position.")]
    Unrecognized { column: usize },
    #[error("Error: The configuration does not exist.")]
    NotExist,
    #[error("Error: The VPN instance does not exist.")]
    NoVpnInstance,
    #[error("Error: Incomplete command found at '^' position.")]
    Incomplete { column: usize },
    /// A value out of range or of the wrong form (an address, a mask, an
    /// interface name).
    #[error("Error: Wrong parameter found at '^' position.")]
    WrongParameter { column: usize },
    /// A Layer-3 command on an interface still in Layer 2 mode (the
    /// wording is the emulator's).
    #[error("Error: The interface works in Layer 2 mode; run undo portswitch first.")]
    Layer2Interface,
    /// An MQC object referred to before it exists (`classifier C behavior
    /// B`, `traffic-policy P inbound`).
    #[error("Error: The {0} does not exist.")]
    Missing(&'static str),
    /// An MQC object deleted while something still refers to it (a policy
    /// applied to an interface, a classifier or behavior in a policy).
    #[error("Error: The {0} is being used and cannot be deleted.")]
    InUse(&'static str),
    /// A sub-interface created on a main interface still in Layer 2 mode
    /// (the wording is the emulator's).
    #[error("Error: The main interface works in Layer 2 mode; run undo portswitch on it first.")]
    MainLayer2,
    /// A VLAN already terminated by a sub-interface of the same main
    /// interface (the wording is the emulator's).
    #[error(
        "Error: The VLAN is already terminated by another sub-interface of the main interface."
    )]
    VlanTerminated,
    /// `undo interface` of a physical (main) interface, which configuration
    /// cannot delete (the wording is the emulator's).
    #[error("Error: A physical interface cannot be deleted.")]
    PhysicalInterface,
    /// The view the session was in has been deleted (by another session's
    /// commit, found when a candidate is replayed onto a newer running).
    #[error("Error: The view {0} no longer exists.")]
    ViewGone(String),
}

/// The kind of view a cursor points into; decides which commands are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    System,
    Interface,
    Acl,
    Classifier,
    Behavior,
    Policy,
    VpnInstance,
    VpnAf,
}

fn ctx_of_key(key: &str) -> Ctx {
    let mut w = key.split(' ');
    match (w.next(), w.next()) {
        (Some("interface"), _) => Ctx::Interface,
        (Some("acl"), _) => Ctx::Acl,
        (Some("traffic"), Some("classifier")) => Ctx::Classifier,
        (Some("traffic"), Some("behavior")) => Ctx::Behavior,
        (Some("traffic"), Some("policy")) => Ctx::Policy,
        (Some("ip"), Some("vpn-instance")) => Ctx::VpnInstance,
        (Some("ipv4-family"), _) => Ctx::VpnAf,
        _ => Ctx::System,
    }
}

/// If `line` opens a view valid in `ctx`, its key (what identifies the view).
fn view_key(ctx: Ctx, line: &str) -> Option<Result<String, VrpError>> {
    let w: Vec<&str> = line.split(' ').collect();
    let key_words = match (w[0], w.get(1).copied()) {
        ("interface", _) => 2,
        ("acl", Some("number" | "name")) => 3,
        ("traffic", Some("classifier" | "behavior" | "policy")) => 3,
        ("ip", Some("vpn-instance")) => 3,
        ("ipv4-family", _) if matches!(ctx, Ctx::VpnInstance) => 1,
        _ => return None,
    };
    let top_level = w[0] != "ipv4-family";
    if top_level && ctx != Ctx::System {
        return None;
    }
    if w.len() < key_words {
        return Some(Err(VrpError::Incomplete { column: line.len() }));
    }
    Some(Ok(w[..key_words].join(" ")))
}

/// Leading words of the leaf commands each view accepts.
fn leaf_valid(ctx: Ctx, line: &str) -> bool {
    let starts = |p: &[&str]| {
        p.iter()
            .any(|p| line == *p || line.starts_with(&format!("{p} ")))
    };
    match ctx {
        Ctx::System => starts(&[
            "sysname",
            "ip route-static",
            "vlan batch",
            "lldp enable",
            "dhcp enable",
            "stelnet server enable",
        ]),
        Ctx::Interface => starts(&[
            "description",
            "dot1q",
            "ip address",
            "ip binding",
            "portswitch",
            "shutdown",
            "traffic-policy",
            "mtu",
        ]),
        Ctx::Acl => starts(&["rule", "description", "step"]),
        Ctx::Classifier => starts(&["if-match", "description"]),
        Ctx::Behavior => starts(&["redirect", "permit", "deny", "remark", "statistics"]),
        Ctx::Policy => starts(&["classifier", "description", "statistics", "step"]),
        Ctx::VpnInstance => starts(&["description"]),
        Ctx::VpnAf => starts(&[
            "route-distinguisher",
            "vpn-target",
            "import route-policy",
            "export route-policy",
        ]),
    }
}

/// Leaves that VRP keeps at most once per view: the key they are replaced by.
fn replace_key(line: &str) -> Option<String> {
    let w: Vec<&str> = line.split(' ').collect();
    match w.as_slice() {
        ["description", ..] => Some("description".into()),
        ["sysname", ..] => Some("sysname".into()),
        ["mtu", ..] => Some("mtu".into()),
        ["route-distinguisher", ..] => Some("route-distinguisher".into()),
        ["redirect", ..] => Some("redirect".into()),
        ["ip", "binding", ..] => Some("ip binding".into()),
        ["ip", "address", .., last] if *last != "sub" => Some("ip address".into()),
        ["rule", n, ..] => Some(format!("rule {n}")),
        ["classifier", c, ..] => Some(format!("classifier {c}")),
        ["traffic-policy", _, dir] => Some(format!("traffic-policy {dir}")),
        _ => None,
    }
}

/// Rank of a top-level section in the display (VRP groups by kind).
fn rank(text: &str) -> u8 {
    let w: Vec<&str> = text.splitn(3, ' ').collect();
    match (w[0], w.get(1).copied()) {
        ("sysname", _) => 0,
        ("ip", Some("vpn-instance")) => 2,
        ("acl", _) => 3,
        ("traffic", Some("classifier")) => 4,
        ("traffic", Some("behavior")) => 5,
        ("traffic", Some("policy")) => 6,
        ("interface", _) => 7,
        ("ip", Some("route-static")) => 8,
        _ => 1,
    }
}

/// Whether `name` is a well-formed physical interface name (`100GE1/0/1`),
/// as opposed to a logical one (`Eth-Trunk1`, `Vlanif10`, `LoopBack0`).
pub fn is_physical(name: &str) -> bool {
    syntax::interface_name(name)
        && name.starts_with(|c: char| c.is_ascii_digit() || c == 'G' || c == 'M')
}

/// Normalise a typed line: trim and collapse runs of blanks.
pub fn normalize(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The key of a view node (see [`view_key`]): its header's first words, a
/// prefix of the header (no allocation: every line typed looks views up).
fn node_key(n: &Node) -> &str {
    let words = match n.text.split(' ').next() {
        Some("interface") => 2,
        Some("ipv4-family") => 1,
        _ => 3,
    };
    match n.text.match_indices(' ').nth(words - 1) {
        Some((end, _)) => &n.text[..end],
        None => &n.text,
    }
}

impl VrpConfig {
    /// A configuration holding only `sysname NAME`.
    pub fn new(sysname: &str) -> Self {
        Self {
            top: vec![Node::leaf(&format!("sysname {sysname}"))],
        }
    }

    /// Build a configuration from text in the display format (indentation
    /// gives the view; `#`, `!` and `return` lines are skipped), applying each
    /// line as if typed, so the same rules hold. Errors name the line number.
    pub fn parse(text: &str) -> Result<Self, (usize, VrpError)> {
        let mut cfg = Self::default();
        let mut cursor: Vec<String> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = normalize(raw);
            if line.is_empty() || line == "#" || line == "return" || line.starts_with('!') {
                continue;
            }
            let depth = raw.len() - raw.trim_start().len();
            cursor.truncate(depth);
            cfg.apply(&mut cursor, &line).map_err(|e| (i + 1, e))?;
        }
        Ok(cfg)
    }

    fn level_mut(&mut self, cursor: &[String]) -> Result<&mut Vec<Node>, VrpError> {
        let mut level = &mut self.top;
        for key in cursor {
            let node = level
                .iter_mut()
                .find(|n| n.view && node_key(n) == key.as_str())
                .ok_or_else(|| VrpError::ViewGone(key.clone()))?;
            level = &mut node.children;
        }
        Ok(level)
    }

    /// Whether a top-level view with this key exists.
    pub fn has_view(&self, key: &str) -> bool {
        self.top.iter().any(|n| n.view && node_key(n) == key)
    }

    /// Apply one typed configuration line at `cursor` (a path of view keys,
    /// empty = system view). The cursor moves when the line opens a view or
    /// is only valid in a parent view. `quit`/`return` are the session's
    /// business, not this function's.
    pub fn apply(&mut self, cursor: &mut Vec<String>, line: &str) -> Result<(), VrpError> {
        let line = normalize(line);
        let (undo, body) = match line.strip_prefix("undo ") {
            Some(b) => (true, b.to_string()),
            None if line == "undo" => return Err(VrpError::Incomplete { column: 4 }),
            None => (false, line.clone()),
        };
        let body_col = if undo { 5 } else { 0 };
        // Find the innermost view (current, then parents) that knows the command.
        let mut depth = cursor.len();
        let (depth, opener) = loop {
            let ctx = cursor[..depth]
                .last()
                .map_or(Ctx::System, |k| ctx_of_key(k));
            if let Some(k) = view_key(ctx, &body) {
                break (depth, Some(k));
            }
            let as_leaf = if undo && body == "portswitch" {
                ctx == Ctx::Interface
            } else {
                leaf_valid(ctx, &body)
            };
            if as_leaf {
                break (depth, None);
            }
            if depth == 0 {
                return Err(VrpError::Unrecognized { column: body_col });
            }
            depth -= 1;
        };
        let opener = opener.transpose().map_err(|e| match e {
            VrpError::Incomplete { column } => VrpError::Incomplete {
                column: column + body_col,
            },
            e => e,
        })?;
        cursor.truncate(depth);
        let ctx = cursor.last().map_or(Ctx::System, |k| ctx_of_key(k));
        let shift = |e: VrpError| match e {
            VrpError::Unrecognized { column } => VrpError::Unrecognized {
                column: column + body_col,
            },
            VrpError::Incomplete { column } => VrpError::Incomplete {
                column: column + body_col,
            },
            VrpError::WrongParameter { column } => VrpError::WrongParameter {
                column: column + body_col,
            },
            e => e,
        };
        match &opener {
            Some(_) => syntax::check_view(&body, undo).map_err(shift)?,
            None if undo && body == "portswitch" => {}
            None => syntax::check_leaf(ctx, &body, undo).map_err(shift)?,
        }
        self.check_references(ctx, opener.as_deref(), &body, undo)?;
        self.check_subinterface(cursor, opener.as_deref(), &body, undo)
            .map_err(shift)?;
        let at_interface = cursor
            .last()
            .is_some_and(|k| ctx_of_key(k) == Ctx::Interface);
        let top = cursor.is_empty();
        // Ethernet interfaces start in Layer 2 mode; an address needs
        // `undo portswitch` first (module doc).
        let layer2 = at_interface
            && cursor
                .last()
                .and_then(|k| k.strip_prefix("interface "))
                .is_some_and(|i| {
                    !i.contains('.') && (is_physical(i) || i.starts_with("Eth-Trunk"))
                });
        let level = self.level_mut(cursor)?;
        if layer2
            && !undo
            && body.starts_with("ip address ")
            && !level.iter().any(|n| n.text == "undo portswitch")
        {
            return Err(VrpError::Layer2Interface);
        }
        match (opener, undo) {
            (Some(key), true) => {
                let before = level.len();
                level.retain(|n| !(n.view && node_key(n) == key));
                if level.len() == before {
                    return Err(VrpError::NotExist);
                }
            }
            (Some(key), false) => {
                if !level.iter().any(|n| n.view && node_key(n) == key) {
                    let node = Node {
                        text: body,
                        children: Vec::new(),
                        view: true,
                    };
                    insert(level, node, top);
                }
                cursor.push(key);
            }
            (None, true) => undo_leaf(level, &body, at_interface)?,
            (None, false) => set_leaf(level, &body, top),
        }
        Ok(())
    }

    /// Objects a line refers to must exist; objects still referred to
    /// cannot be deleted (see the module doc).
    fn check_references(
        &self,
        ctx: Ctx,
        opener: Option<&str>,
        body: &str,
        undo: bool,
    ) -> Result<(), VrpError> {
        let w: Vec<&str> = body.split(' ').collect();
        if undo {
            let used = |view: &str, child: &dyn Fn(&[&str]) -> bool| {
                self.top
                    .iter()
                    .filter(|n| n.view && n.text.starts_with(view))
                    .flat_map(|n| &n.children)
                    .any(|c| child(&c.text.split(' ').collect::<Vec<_>>()))
            };
            return match (opener.is_some(), w.as_slice()) {
                (true, ["traffic", "policy", p]) => {
                    if used(
                        "interface ",
                        &|c| matches!(c, ["traffic-policy", x, _] if x == p),
                    ) {
                        Err(VrpError::InUse("traffic policy"))
                    } else {
                        Ok(())
                    }
                }
                (true, ["traffic", kind @ ("classifier" | "behavior"), x]) => {
                    let at = if *kind == "classifier" { 1 } else { 3 };
                    if used("traffic policy ", &|c| {
                        c.first() == Some(&"classifier") && c.get(at) == Some(x)
                    }) {
                        Err(VrpError::InUse(if at == 1 {
                            "traffic classifier"
                        } else {
                            "traffic behavior"
                        }))
                    } else {
                        Ok(())
                    }
                }
                _ => Ok(()),
            };
        }
        let need = |key: String, what: &'static str| {
            if self.has_view(&key) {
                Ok(())
            } else if what == "VPN instance" {
                Err(VrpError::NoVpnInstance)
            } else {
                Err(VrpError::Missing(what))
            }
        };
        match (ctx, opener, w.as_slice()) {
            (Ctx::Policy, None, ["classifier", c, "behavior", b, ..]) => {
                need(format!("traffic classifier {c}"), "traffic classifier")?;
                need(format!("traffic behavior {b}"), "traffic behavior")
            }
            (Ctx::Interface, None, ["traffic-policy", p, ..]) => {
                need(format!("traffic policy {p}"), "traffic policy")
            }
            (Ctx::Interface, None, ["ip", "binding", "vpn-instance", v])
            | (Ctx::Behavior, None, ["redirect", "vpn-instance", v, ..])
            | (Ctx::System, None, ["ip", "route-static", "vpn-instance", v, ..]) => {
                need(format!("ip vpn-instance {v}"), "VPN instance")
            }
            _ => Ok(()),
        }
    }

    /// The sub-interface rules (module doc): a physical interface is not
    /// deleted; a new sub-interface needs a Layer-3 main interface;
    /// `dot1q termination vid` is a sub-interface command and a VLAN is
    /// terminated by one sub-interface of a main interface at most.
    /// Columns are relative to `body`.
    fn check_subinterface(
        &self,
        cursor: &[String],
        opener: Option<&str>,
        body: &str,
        undo: bool,
    ) -> Result<(), VrpError> {
        if let Some(name) = opener.and_then(|k| k.strip_prefix("interface ")) {
            return match (undo, name.split_once('.')) {
                (true, None) if is_physical(name) => Err(VrpError::PhysicalInterface),
                (false, Some((main, _))) if !self.has_view(&format!("interface {name}")) => {
                    self.check_layer3_main(main)
                }
                _ => Ok(()),
            };
        }
        let Some(new) = opener.is_none().then(|| terminated(body)).flatten() else {
            return Ok(());
        };
        let here = cursor.last().map(String::as_str).unwrap_or_default();
        let Some((main, _)) = here.split_once('.') else {
            return Err(VrpError::Unrecognized { column: 0 });
        };
        if undo {
            return Ok(());
        }
        let siblings = (self.top.iter()).filter(|n| {
            n.view
                && n.text
                    .strip_prefix(main)
                    .is_some_and(|r| r.starts_with('.'))
        });
        let clash = siblings
            .flat_map(|n| n.children.iter().map(move |c| (n, c)))
            .filter(|(n, c)| !(n.text == here && c.text == body))
            .filter_map(|(_, c)| terminated(&c.text))
            .any(|(lo, hi)| lo <= new.1 && new.0 <= hi);
        if clash {
            return Err(VrpError::VlanTerminated);
        }
        Ok(())
    }

    /// A sub-interface of `main` can be created: `main` works in Layer 3
    /// mode. A physical port not in the configuration is in its default
    /// Layer 2 mode; an Eth-Trunk not in it does not exist.
    fn check_layer3_main(&self, main: &str) -> Result<(), VrpError> {
        let key = format!("interface {main}");
        match self.top.iter().find(|n| n.view && n.text == key) {
            Some(n) if n.children.iter().any(|c| c.text == "undo portswitch") => Ok(()),
            None if !is_physical(main) => Err(VrpError::WrongParameter { column: 10 }),
            _ => Err(VrpError::MainLayer2),
        }
    }

    /// The `display current-configuration` text (see the module doc).
    /// Top-level nodes are kept in display order by [`VrpConfig::apply`].
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut prev_leaf = false;
        for n in &self.top {
            let leaf = !n.view;
            if !(leaf && prev_leaf) {
                out.push_str("#\n");
            }
            prev_leaf = leaf;
            render_node(n, 0, &mut out);
        }
        out.push_str("#\nreturn\n");
        out
    }

    /// The candidate-changes diff from `self` (running) to `new`: sections
    /// separated by `#`, changed lines prefixed `+`/`-` before their
    /// indentation, unchanged view headers printed bare for context. Empty
    /// when nothing changed.
    pub fn diff(&self, new: &VrpConfig) -> String {
        let mut out = String::new();
        diff_level(&self.top, &new.top, 0, &mut out, true);
        out
    }
}

fn render_node(n: &Node, depth: usize, out: &mut String) {
    out.push_str(&" ".repeat(depth));
    out.push_str(&n.text);
    out.push('\n');
    for c in &n.children {
        render_node(c, depth + 1, out);
    }
}

fn render_signed(n: &Node, depth: usize, sign: char, out: &mut String) {
    out.push(sign);
    out.push_str(&" ".repeat(depth));
    out.push_str(&n.text);
    out.push('\n');
    for c in &n.children {
        render_signed(c, depth + 1, sign, out);
    }
}

/// What makes two nodes the same node in a diff: a view's key, or a
/// command's whole text.
fn identity(n: &Node) -> (bool, &str) {
    if n.view {
        (true, node_key(n))
    } else {
        (false, &n.text)
    }
}

fn diff_level<'a>(old: &'a [Node], new: &'a [Node], depth: usize, out: &mut String, top: bool) {
    let section = |s: String, out: &mut String| {
        if top {
            out.push_str("#\n");
        }
        out.push_str(&s);
    };
    // Node identity (see `same`) indexed, so a diff is linear, not
    // quadratic, in the number of views: the first match wins, as a scan.
    let index = |level: &'a [Node]| {
        let mut m: HashMap<(bool, &str), &Node> = HashMap::with_capacity(level.len());
        for n in level {
            m.entry(identity(n)).or_insert(n);
        }
        m
    };
    let (olds, news) = (index(old), index(new));
    for o in old {
        match news.get(&identity(o)).copied() {
            None => {
                let mut s = String::new();
                render_signed(o, depth, '-', &mut s);
                section(s, out);
            }
            Some(n) if n != o => {
                let mut s = String::new();
                if o.text != n.text {
                    render_signed(&Node::leaf(&o.text), depth, '-', &mut s);
                    render_signed(&Node::leaf(&n.text), depth, '+', &mut s);
                } else {
                    s.push(' ');
                    s.push_str(&" ".repeat(depth));
                    s.push_str(&o.text);
                    s.push('\n');
                }
                diff_level(&o.children, &n.children, depth + 1, &mut s, false);
                section(s, out);
            }
            Some(_) => {}
        }
    }
    for n in new {
        if !olds.contains_key(&identity(n)) {
            let mut s = String::new();
            render_signed(n, depth, '+', &mut s);
            section(s, out);
        }
    }
}

/// Where a new top-level sub-interface view `interface X.N` goes: right
/// after its main interface `X` and the sub-interfaces of `X` numbered
/// below `N`, as the CE lists interfaces (module doc). `None` for any
/// other node, or when `X` is not in the configuration.
fn subinterface_slot(level: &[Node], text: &str) -> Option<usize> {
    let (parent, n) = text.strip_prefix("interface ")?.split_once('.')?;
    let n: u32 = n.parse().ok()?;
    let main = format!("interface {parent}");
    let before = |t: &str| {
        t == main
            || t.strip_prefix(main.as_str())
                .and_then(|r| r.strip_prefix('.'))
                .and_then(|m| m.parse::<u32>().ok())
                .is_some_and(|m| m < n)
    };
    level
        .iter()
        .rposition(|x| x.view && before(&x.text))
        .map(|i| i + 1)
}

/// The VLAN ids a `dot1q termination vid A [to B]` line terminates.
fn terminated(line: &str) -> Option<(u16, u16)> {
    let w: Vec<&str> = line
        .strip_prefix("dot1q termination vid ")?
        .split(' ')
        .collect();
    match w.as_slice() {
        [a] => a.parse().ok().map(|a| (a, a)),
        [a, "to", b] => Some((a.parse().ok()?, b.parse().ok()?)),
        _ => None,
    }
}

/// Add a node; at top level keep the kind order of the display, so two
/// configurations that display the same compare equal.
fn insert(level: &mut Vec<Node>, node: Node, top: bool) {
    if let Some(at) = top.then(|| subinterface_slot(level, &node.text)).flatten() {
        level.insert(at, node);
    } else if top {
        let r = rank(&node.text);
        let at = level
            .iter()
            .rposition(|n| rank(&n.text) <= r)
            .map_or(0, |i| i + 1);
        level.insert(at, node);
    } else {
        level.push(node);
    }
}

fn set_leaf(level: &mut Vec<Node>, line: &str, top: bool) {
    if level.iter().any(|n| !n.view && n.text == line) {
        return;
    }
    if line == "portswitch" {
        level.retain(|n| n.text != "undo portswitch");
        return;
    }
    if line.starts_with("ip binding vpn-instance ") {
        level.retain(|n| !n.text.starts_with("ip address "));
    }
    if let Some(key) = replace_key(line) {
        if let Some(n) = level
            .iter_mut()
            .find(|n| !n.view && replace_key(&n.text).as_deref() == Some(key.as_str()))
        {
            n.text = line.to_string();
            return;
        }
    }
    insert(level, Node::leaf(line), top);
}

fn undo_leaf(level: &mut Vec<Node>, body: &str, at_interface: bool) -> Result<(), VrpError> {
    if at_interface && body == "portswitch" {
        set_leaf(level, "undo portswitch", false);
        return Ok(());
    }
    let exact = level.iter().position(|n| !n.view && n.text == body);
    let prefix = || {
        level
            .iter()
            .position(|n| !n.view && n.text.starts_with(&format!("{body} ")))
    };
    match exact.or_else(prefix) {
        Some(i) => {
            level.remove(i);
            Ok(())
        }
        None if at_interface && body == "shutdown" => Ok(()),
        None => Err(VrpError::NotExist),
    }
}

impl fmt::Display for VrpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests;
