//! Argument grammar of the commands the emulated CE accepts, so a line the
//! device would refuse is refused here too, with the caret under the first
//! word that does not fit (VRP's `Unrecognized command` for an unknown
//! keyword, `Wrong parameter` for a bad value, `Incomplete command` for a
//! missing one). The command forms follow the CloudEngine 12800/8800/6800
//! V200R00x command references and configuration guides cited in
//! `docs/devices/huawei-ce.md`; each function names its command.
//!
//! Columns are byte offsets into the normalised command (blanks collapsed),
//! without any leading `undo `; the caller shifts them.

use std::net::Ipv4Addr;

use super::{Ctx, VrpError};

/// A normalised line split into words with their columns.
struct Words<'a> {
    words: Vec<(usize, &'a str)>,
    end: usize,
    /// `undo` forms may stop early: missing arguments are not an error.
    undo: bool,
}

impl<'a> Words<'a> {
    fn new(line: &'a str, undo: bool) -> Self {
        let mut words = Vec::new();
        let mut col = 0;
        for w in line.split(' ') {
            words.push((col, w));
            col += w.len() + 1;
        }
        Words {
            words,
            end: line.len(),
            undo,
        }
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        self.words.get(i).map(|(_, w)| *w)
    }

    fn col(&self, i: usize) -> usize {
        self.words.get(i).map_or(self.end + 1, |(c, _)| *c)
    }

    fn len(&self) -> usize {
        self.words.len()
    }

    fn unrecognized(&self, i: usize) -> VrpError {
        VrpError::Unrecognized {
            column: self.col(i),
        }
    }

    fn wrong(&self, i: usize) -> VrpError {
        VrpError::WrongParameter {
            column: self.col(i),
        }
    }

    /// Word `i` must exist (else `Incomplete`, or done for an undo form).
    fn need(&self, i: usize) -> Result<Option<&'a str>, VrpError> {
        match self.get(i) {
            Some(w) => Ok(Some(w)),
            None if self.undo => Ok(None),
            None => Err(VrpError::Incomplete {
                column: self.end + 1,
            }),
        }
    }

    /// Nothing may follow word `i - 1`.
    fn end_at(&self, i: usize) -> Result<(), VrpError> {
        if i < self.len() {
            Err(self.unrecognized(i))
        } else {
            Ok(())
        }
    }

    /// Word `i` must satisfy `ok` (a value): missing is `Incomplete`
    /// (or fine when undoing), wrong is `Wrong parameter`.
    fn value(&self, i: usize, ok: impl Fn(&str) -> bool) -> Result<bool, VrpError> {
        match self.need(i)? {
            Some(w) if ok(w) => Ok(true),
            Some(_) => Err(self.wrong(i)),
            None => Ok(false),
        }
    }

    /// Word `i` must be one of `keywords`.
    fn keyword(&self, i: usize, keywords: &[&str]) -> Result<Option<&'a str>, VrpError> {
        match self.need(i)? {
            Some(w) if keywords.contains(&w) => Ok(Some(w)),
            Some(_) => Err(self.unrecognized(i)),
            None => Ok(None),
        }
    }
}

pub(super) fn ipv4(s: &str) -> Option<Ipv4Addr> {
    // Only dotted quads: `Ipv4Addr::from_str` already refuses octal-looking
    // and short forms.
    s.parse().ok()
}

/// A mask given as a length (`0`-`32`) or dotted and contiguous.
fn mask(s: &str) -> Option<u8> {
    if s.contains('.') {
        let m = u32::from(ipv4(s)?);
        let len = m.leading_ones();
        (m.checked_shl(len).unwrap_or(0) == 0).then_some(len as u8)
    } else {
        s.parse::<u8>().ok().filter(|l| *l <= 32)
    }
}

/// A wildcard (inverse mask), contiguous, or `0` for a host.
fn wildcard(s: &str) -> bool {
    if s == "0" {
        return true;
    }
    ipv4(s).is_some_and(|w| {
        let m = !u32::from(w);
        let len = m.leading_ones();
        m.checked_shl(len).unwrap_or(0) == 0
    })
}

/// A unicast interface address valid with prefix length `len`: not
/// 0.0.0.0, loopback, multicast or reserved, and (below /31) neither the
/// subnet's network nor its broadcast address.
fn host_address(a: Ipv4Addr, len: u8) -> bool {
    let o = a.octets();
    if o[0] == 0 || o[0] == 127 || o[0] >= 224 || len == 0 || len > 32 {
        return false;
    }
    if len >= 31 {
        return true;
    }
    let host = u32::from(a) & (u32::MAX >> len);
    host != 0 && host != u32::MAX >> len
}

fn number(s: &str, lo: u64, hi: u64) -> bool {
    !s.starts_with('+') && s.parse::<u64>().is_ok_and(|n| (lo..=hi).contains(&n))
}

/// A name VRP accepts for a user object: 1-`max` printable characters, no
/// blank (the line is normalised), no `?` (help) or quote.
fn name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_graphic() && c != '?' && c != '"')
}

/// Interface names of a CE: `<type><slot>/<card>/<port>[:<breakout>]`
/// with an optional `.<subinterface>`, or a logical interface with its
/// number ("Interface Management" configuration guide, interface types and
/// numbering).
pub(super) fn interface_name(s: &str) -> bool {
    const PHYSICAL: [&str; 9] = [
        "GE", "10GE", "25GE", "40GE", "50GE", "100GE", "200GE", "400GE", "MEth",
    ];
    const LOGICAL: [(&str, u64, u64); 6] = [
        ("Eth-Trunk", 0, 1023),
        ("Vlanif", 1, 4094),
        ("LoopBack", 0, 1023),
        ("Tunnel", 0, 4095),
        ("Nve", 1, 1),
        ("NULL", 0, 0),
    ];
    let (base, sub) = match s.split_once('.') {
        Some((b, n)) => (b, Some(n)),
        None => (s, None),
    };
    if sub.is_some_and(|n| !number(n, 1, 4094)) {
        return false;
    }
    for (t, lo, hi) in LOGICAL {
        if let Some(n) = base.strip_prefix(t) {
            return number(n, lo, hi) && (sub.is_none() || t == "Eth-Trunk");
        }
    }
    PHYSICAL.iter().any(|t| {
        base.strip_prefix(t).is_some_and(|rest| {
            let (pos, breakout) = match rest.split_once(':') {
                Some((p, b)) => (p, Some(b)),
                None => (rest, None),
            };
            let parts: Vec<&str> = pos.split('/').collect();
            parts.len() == 3
                && parts.iter().all(|p| number(p, 0, 999))
                && breakout.is_none_or(|b| number(b, 1, 8))
        })
    })
}

/// Check the arguments of a leaf command already known valid in `ctx` by
/// its leading words (see `leaf_valid`).
pub(super) fn check_leaf(ctx: Ctx, line: &str, undo: bool) -> Result<(), VrpError> {
    let w = Words::new(line, undo);
    let first = w.get(0).unwrap_or_default();
    match (ctx, first, w.get(1)) {
        (_, "description", _) => description(&w, line),
        (Ctx::System, "sysname", _) => {
            w.value(1, |s| name(s, 246))?;
            w.end_at(2)
        }
        (Ctx::System, "ip", Some("route-static")) => route_static(&w),
        (Ctx::System, "vlan", Some("batch")) => vlan_batch(&w),
        (Ctx::System, _, _) => w.end_at(match first {
            "lldp" | "dhcp" => 2,
            "stelnet" => 3,
            _ => w.len(),
        }),
        (Ctx::Interface, "ip", Some("address")) => ip_address(&w),
        (Ctx::Interface, "ip", Some("binding")) => {
            // ip binding vpn-instance vpn-instance-name
            w.keyword(2, &["vpn-instance"])?;
            w.value(3, |s| name(s, 31))?;
            w.end_at(4)
        }
        (Ctx::Interface, "traffic-policy", _) => {
            // traffic-policy policy-name { inbound | outbound }
            w.value(1, |s| name(s, 127))?;
            w.keyword(2, &["inbound", "outbound"])?;
            w.end_at(3)
        }
        (Ctx::Interface, "mtu", _) => {
            w.value(1, |s| number(s, 46, 9600))?;
            w.end_at(2)
        }
        (Ctx::Interface, "portswitch" | "shutdown", _) => w.end_at(1),
        (Ctx::Interface, "dot1q", _) => dot1q_termination(&w),
        (Ctx::Acl, "rule", _) => acl_rule(&w),
        (Ctx::Acl | Ctx::Policy, "step", _) => {
            w.value(1, |s| number(s, 1, 20))?;
            w.end_at(2)
        }
        (Ctx::Classifier, "if-match", _) => if_match(&w),
        (Ctx::Behavior, "redirect", _) => redirect(&w),
        (Ctx::Behavior, "permit" | "deny", _) => w.end_at(1),
        (Ctx::Behavior, "remark", _) => remark(&w),
        (Ctx::Behavior | Ctx::Policy, "statistics", _) => {
            w.keyword(1, &["enable"])?;
            w.end_at(2)
        }
        (Ctx::Policy, "classifier", _) => classifier(&w, undo),
        (Ctx::VpnAf, "route-distinguisher", _) => {
            // route-distinguisher { as:nn | ip:nn }
            w.value(1, route_distinguisher)?;
            w.end_at(2)
        }
        _ => Ok(()),
    }
}

/// `description TEXT` (1-242 characters, blanks allowed).
fn description(w: &Words<'_>, line: &str) -> Result<(), VrpError> {
    if w.need(1)?.is_some() && line.len() - "description ".len() > 242 {
        return Err(w.wrong(1));
    }
    Ok(())
}

/// `vlan batch { vlan-id1 [ to vlan-id2 ] } &<1-10>`
fn vlan_batch(w: &Words<'_>) -> Result<(), VrpError> {
    w.value(2, |s| number(s, 1, 4094))?;
    let mut i = 3;
    while let Some(x) = w.get(i) {
        if x == "to" {
            w.value(i + 1, |s| number(s, 1, 4094))?;
            i += 2;
        } else if number(x, 1, 4094) {
            i += 1;
        } else {
            return Err(w.wrong(i));
        }
    }
    Ok(())
}

/// `ip address ip-address { mask | mask-length } [ sub ]`
fn ip_address(w: &Words<'_>) -> Result<(), VrpError> {
    let Some(a) = w.need(2)? else { return Ok(()) };
    let a = ipv4(a).ok_or_else(|| w.wrong(2))?;
    let Some(m) = w.need(3)? else { return Ok(()) };
    let len = mask(m).ok_or_else(|| w.wrong(3))?;
    if !host_address(a, len) {
        return Err(w.wrong(2));
    }
    if w.get(4) == Some("sub") {
        return w.end_at(5);
    }
    w.end_at(4)
}

/// `if-match acl { acl-number | acl-name }`, `if-match any`
fn if_match(w: &Words<'_>) -> Result<(), VrpError> {
    match w.keyword(1, &["acl", "any"])? {
        Some("acl") => {
            w.value(2, |s| name(s, 64))?;
            w.end_at(3)
        }
        _ => w.end_at(2),
    }
}

/// `remark dscp dscp-value | remark 8021p 8021p-value`
fn remark(w: &Words<'_>) -> Result<(), VrpError> {
    match w.keyword(1, &["dscp", "8021p"])? {
        Some("dscp") => w.value(2, |s| number(s, 0, 63))?,
        Some(_) => w.value(2, |s| number(s, 0, 7))?,
        None => return Ok(()),
    };
    w.end_at(3)
}

/// `classifier classifier-name behavior behavior-name [ precedence p ]`
/// (`undo classifier classifier-name` alone is whole).
fn classifier(w: &Words<'_>, undo: bool) -> Result<(), VrpError> {
    w.value(1, |s| name(s, 127))?;
    if undo && w.len() == 2 {
        return Ok(());
    }
    w.keyword(2, &["behavior"])?;
    w.value(3, |s| name(s, 127))?;
    if w.get(4).is_some() {
        w.keyword(4, &["precedence"])?;
        w.value(5, |s| number(s, 1, 5119))?;
        return w.end_at(6);
    }
    w.end_at(4)
}

/// Check the arguments of a view header (the view's key words were found
/// by `view_key`).
pub(super) fn check_view(line: &str, undo: bool) -> Result<(), VrpError> {
    let w = Words::new(line, undo);
    match (w.get(0).unwrap_or_default(), w.get(1)) {
        ("interface", _) => {
            // interface interface-type interface-number
            w.value(1, interface_name)?;
            w.end_at(2)
        }
        ("acl", Some("number")) => {
            // acl [ number ] acl-number (2000-2999 basic, 3000-3999
            // advanced, 4000-4999 Layer 2, 5000-5999 user-defined)
            w.value(2, |s| number(s, 2000, 5999))?;
            w.end_at(3)
        }
        ("acl", _) => {
            // acl name acl-name [ advance | basic | link | acl-number ]
            w.value(2, |s| {
                name(s, 64) && !s.starts_with(|c: char| c.is_ascii_digit())
            })?;
            match w.get(3) {
                None => Ok(()),
                Some("advance" | "basic" | "link") => w.end_at(4),
                Some(n) if number(n, 2000, 5999) => w.end_at(4),
                Some(_) => Err(w.unrecognized(3)),
            }
        }
        ("traffic", Some("classifier")) => {
            // traffic classifier classifier-name [ type { and | or } ]
            w.value(2, |s| name(s, 127))?;
            if w.get(3).is_some() {
                w.keyword(3, &["type"])?;
                w.keyword(4, &["and", "or"])?;
                return w.end_at(5);
            }
            Ok(())
        }
        ("traffic", _) => {
            // traffic behavior behavior-name, traffic policy policy-name
            w.value(2, |s| name(s, 127))?;
            w.end_at(3)
        }
        ("ip", _) => {
            // ip vpn-instance vpn-instance-name
            w.value(2, |s| name(s, 31) && s != "_public_")?;
            w.end_at(3)
        }
        _ => w.end_at(1), // ipv4-family
    }
}

fn route_distinguisher(s: &str) -> bool {
    let Some((a, n)) = s.rsplit_once(':') else {
        return false;
    };
    if ipv4(a).is_some() {
        return number(n, 0, 65535);
    }
    (number(a, 0, 65535) && number(n, 0, 4_294_967_295))
        || (number(a, 0, 4_294_967_295) && number(n, 0, 65535))
}

/// `ip route-static [ vpn-instance V ] ip-address { mask | mask-length }
/// { nexthop-address | interface-type interface-number [ nexthop-address ] }
/// [ preference p ] [ tag t ] [ description text ]`
fn route_static(w: &Words<'_>) -> Result<(), VrpError> {
    let mut i = 2;
    if w.get(i) == Some("vpn-instance") {
        w.value(i + 1, |s| name(s, 31))?;
        i += 2;
    }
    let Some(a) = w.need(i)? else { return Ok(()) };
    let a = ipv4(a).ok_or_else(|| w.wrong(i))?;
    let Some(m) = w.need(i + 1)? else {
        return Ok(());
    };
    let len = mask(m).ok_or_else(|| w.wrong(i + 1))?;
    // The destination must be a network address of its mask.
    if len < 32 && u32::from(a) & (u32::MAX.checked_shr(u32::from(len)).unwrap_or(0)) != 0 {
        return Err(w.wrong(i));
    }
    i += 2;
    match w.need(i)? {
        None => return Ok(()),
        Some(x) if ipv4(x).is_some() => i += 1,
        Some(x) if interface_name(x) => {
            i += 1;
            if w.get(i).and_then(ipv4).is_some() {
                i += 1;
            }
        }
        Some(_) => return Err(w.wrong(i)),
    }
    while let Some(k) = w.get(i) {
        match k {
            "preference" => w.value(i + 1, |s| number(s, 1, 255))?,
            "tag" => w.value(i + 1, |s| number(s, 1, 4_294_967_295))?,
            // The description runs to the end of the line.
            "description" => return w.need(i + 1).map(|_| ()),
            _ => return Err(w.unrecognized(i)),
        };
        i += 2;
    }
    Ok(())
}

/// `dot1q termination vid low-pe-vid [ to high-pe-vid ]` (sub-interface
/// views; VLAN ids 1-4094, `high-pe-vid` greater than `low-pe-vid`: the
/// VRP V8 command reference cited in the module doc of `vrp`).
fn dot1q_termination(w: &Words<'_>) -> Result<(), VrpError> {
    w.keyword(1, &["termination"])?;
    w.keyword(2, &["vid"])?;
    if !w.value(3, |s| number(s, 1, 4094))? {
        return Ok(());
    }
    if w.get(4).is_none() {
        return Ok(());
    }
    w.keyword(4, &["to"])?;
    let low = w.get(3).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    w.value(5, |s| number(s, low + 1, 4094))?;
    w.end_at(6)
}

/// `rule [ rule-id ] { permit | deny } [ protocol ] [ source { a w | any } ]
/// [ destination { a w | any } ]` (advanced ACL; a basic ACL has no
/// protocol, which is optional here).
fn acl_rule(w: &Words<'_>) -> Result<(), VrpError> {
    let mut i = 1;
    if w.get(i)
        .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()))
    {
        w.value(i, |s| number(s, 0, 4_294_967_294))?;
        i += 1;
        if w.undo && w.get(i).is_none() {
            return Ok(());
        }
    }
    w.keyword(i, &["permit", "deny"])?;
    i += 1;
    const PROTOCOLS: [&str; 6] = ["ip", "tcp", "udp", "icmp", "gre", "ospf"];
    if let Some(p) = w.get(i) {
        if PROTOCOLS.contains(&p) || number(p, 0, 255) {
            i += 1;
        }
    }
    let mut seen = Vec::new();
    while let Some(k) = w.get(i) {
        if !matches!(k, "source" | "destination") || seen.contains(&k) {
            return Err(w.unrecognized(i));
        }
        seen.push(k);
        match w.need(i + 1)? {
            Some("any") => i += 2,
            Some(a) if ipv4(a).is_some() => {
                w.value(i + 2, wildcard)?;
                i += 3;
            }
            Some(_) => return Err(w.wrong(i + 1)),
            None => return Ok(()),
        }
    }
    Ok(())
}

/// In traffic behavior view:
/// * `redirect interface interface-type interface-number`
///   ("Configuring Redirection", QoS configuration guide);
/// * `redirect [ vpn-instance V ] nexthop ip-address &<1-16>
///   [ fail-action discard ] [ low-precedence ]` ("Configuring PBR", IP
///   routing configuration guide).
fn redirect(w: &Words<'_>) -> Result<(), VrpError> {
    if w.undo && w.len() == 1 {
        return Ok(());
    }
    let mut i = 1;
    match w.keyword(i, &["interface", "vpn-instance", "nexthop"])? {
        None => return Ok(()),
        Some("interface") => {
            w.value(2, interface_name)?;
            return w.end_at(3);
        }
        Some("vpn-instance") => {
            w.value(2, |s| name(s, 31))?;
            w.keyword(3, &["nexthop"])?;
            i = 4;
        }
        Some(_) => i = 2,
    }
    // One to 16 next hops, then options.
    if !w.value(i, |s| ipv4(s).is_some_and(|a| host_address(a, 32)))? {
        return Ok(());
    }
    let first = i;
    i += 1;
    while w.get(i).is_some_and(|s| ipv4(s).is_some()) {
        if i - first == 16 {
            return Err(w.unrecognized(i));
        }
        w.value(i, |s| ipv4(s).is_some_and(|a| host_address(a, 32)))?;
        i += 1;
    }
    if w.get(i) == Some("fail-action") {
        w.keyword(i + 1, &["discard"])?;
        i += 2;
    }
    if w.get(i) == Some("low-precedence") {
        i += 1;
    }
    w.end_at(i)
}
