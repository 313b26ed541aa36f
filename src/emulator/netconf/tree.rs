//! Generic edit-config merge on XML data trees, and a basic subtree filter.
//!
//! The emulator knows no YANG model, so list entries are recognised by a
//! heuristic: two sibling elements with the same local name are the *same
//! entry* when they agree on every *key child* both have, where key children
//! are the direct leaf children named in [`KEY_LEAVES`] (`name`, `id`,
//! `sequence-id`, `index`, and the OpenConfig keys `policy-id`,
//! `interface-id`, `identifier`, `prefix`). Elements with no key children
//! (containers, leaves) match on their name alone. This covers
//! openconfig-acl, -network-instance, -policy-forwarding and static routes.

use vclos_drivers::netconf::xml::Element;

/// Leaf names that key list entries (see the module doc).
pub const KEY_LEAVES: &[&str] = &[
    "name",
    "id",
    "sequence-id",
    "index",
    "policy-id",
    "interface-id",
    "identifier",
    "prefix",
];

/// An edit-config operation (RFC 6241 7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Merge,
    Replace,
    Create,
    Delete,
    Remove,
    None,
}

impl Op {
    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "merge" => Op::Merge,
            "replace" => Op::Replace,
            "create" => Op::Create,
            "delete" => Op::Delete,
            "remove" => Op::Remove,
            "none" => Op::None,
            _ => return None,
        })
    }
}

/// Why an edit failed: (error-tag, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditError {
    pub tag: &'static str,
    pub message: String,
}

fn keys(e: &Element) -> Vec<(&str, &str)> {
    e.children
        .iter()
        .filter(|c| c.children.is_empty() && KEY_LEAVES.contains(&c.local()))
        .map(|c| (c.local(), c.text.as_str()))
        .collect()
}

/// Whether `a` (existing) and `b` (edit) denote the same node.
fn same_entry(a: &Element, b: &Element) -> bool {
    if a.local() != b.local() {
        return false;
    }
    let (ka, kb) = (keys(a), keys(b));
    kb.iter().all(|(k, v)| {
        ka.iter()
            .find(|(k2, _)| k2 == k)
            .is_none_or(|(_, v2)| v2 == v)
    })
}

/// A copy without `operation` attributes (they are instructions, not data).
pub fn strip(e: &Element) -> Element {
    Element {
        name: e.name.clone(),
        attrs: e
            .attrs
            .iter()
            .filter(|(k, _)| k.rsplit(':').next() != Some("operation"))
            .cloned()
            .collect(),
        children: e.children.iter().map(strip).collect(),
        text: e.text.clone(),
    }
}

fn describe(e: &Element) -> String {
    let k: Vec<String> = keys(e).iter().map(|(k, v)| format!("{k}={v}")).collect();
    if k.is_empty() {
        e.local().to_string()
    } else {
        format!("{}[{}]", e.local(), k.join(","))
    }
}

/// Apply the children of `edit` (a `<config>` element or a node inside one)
/// to the children of `target`, with `inherited` as the operation of nodes
/// carrying no `operation` attribute.
pub fn apply(target: &mut Element, edit: &Element, inherited: Op) -> Result<(), EditError> {
    for e in &edit.children {
        let op = match e.get_attr("operation") {
            Some(s) => Op::parse(s).ok_or_else(|| EditError {
                tag: "bad-attribute",
                message: format!("unknown operation {s:?} on <{}>", e.local()),
            })?,
            None => inherited,
        };
        let at = target.children.iter().position(|t| same_entry(t, e));
        match (op, at) {
            (Op::Merge | Op::None, Some(i)) => {
                let t = &mut target.children[i];
                if e.children.is_empty() {
                    if op == Op::Merge {
                        t.text = e.text.clone();
                    }
                } else {
                    apply(t, e, op)?;
                }
            }
            (Op::Merge | Op::Replace, None) => target.children.push(strip(e)),
            (Op::None, None) => {
                // Containment only: create it if something below changes it.
                let mut t = Element {
                    name: e.name.clone(),
                    attrs: strip(e).attrs,
                    ..Element::default()
                };
                apply(&mut t, e, op)?;
                if !t.children.is_empty() {
                    target.children.push(t);
                }
            }
            (Op::Replace, Some(i)) => target.children[i] = strip(e),
            (Op::Create, Some(_)) => {
                return Err(EditError {
                    tag: "data-exists",
                    message: format!("{} already exists", describe(e)),
                })
            }
            (Op::Create, None) => target.children.push(strip(e)),
            (Op::Delete, None) => {
                return Err(EditError {
                    tag: "data-missing",
                    message: format!("{} does not exist", describe(e)),
                })
            }
            (Op::Delete | Op::Remove, Some(i)) => {
                target.children.remove(i);
            }
            (Op::Remove, None) => {}
        }
    }
    Ok(())
}

/// OpenConfig-style validation: a list entry's key leaf must equal the same
/// leaf in its `<config>` container (the model makes the key a leafref to
/// it). Returns the path of the first offender.
pub fn validate(e: &Element, path: &str) -> Result<(), String> {
    let here = format!("{path}/{}", describe(e));
    if let Some(cfg) = e.find("config") {
        for (k, v) in keys(e) {
            if let Some(c) = cfg.find(k) {
                if c.text != v {
                    return Err(format!(
                        "{here}: key {k}={v:?} differs from config/{k}={:?}",
                        c.text
                    ));
                }
            }
        }
    }
    e.children.iter().try_for_each(|c| validate(c, &here))
}

/// Basic RFC 6241 subtree filtering: selection nodes (empty), containment
/// nodes (with children), content-match nodes (leaves with text).
pub fn filter(data: &Element, f: &Element) -> Vec<Element> {
    let mut out = Vec::new();
    for d in &data.children {
        if let Some(x) = f
            .children
            .iter()
            .filter(|fc| fc.local() == d.local())
            .find_map(|fc| filter_node(d, fc))
        {
            out.push(x);
        }
    }
    out
}

fn filter_node(d: &Element, f: &Element) -> Option<Element> {
    if f.children.is_empty() {
        return (f.text.is_empty() || f.text == d.text).then(|| d.clone());
    }
    let (matches, others): (Vec<&Element>, Vec<&Element>) = f
        .children
        .iter()
        .partition(|c| c.children.is_empty() && !c.text.is_empty());
    for m in &matches {
        if !d
            .children
            .iter()
            .any(|c| c.local() == m.local() && c.text == m.text)
        {
            return None;
        }
    }
    if others.is_empty() {
        return Some(d.clone());
    }
    let sub = Element {
        children: others.into_iter().cloned().collect(),
        ..Element::default()
    };
    let mut e = Element {
        name: d.name.clone(),
        attrs: d.attrs.clone(),
        ..Element::default()
    };
    e.children = d
        .children
        .iter()
        .filter(|c| matches.iter().any(|m| m.local() == c.local()))
        .cloned()
        .collect();
    let picked = filter(d, &sub);
    if picked.is_empty() && e.children.is_empty() {
        return None;
    }
    e.children.extend(picked);
    Some(e)
}
