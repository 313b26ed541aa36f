//! Generic edit-config merge on XML data trees, XML namespace scopes, and
//! a basic subtree filter.
//!
//! **List entries.** Two sibling elements with the same local name are the
//! same list entry when they agree on every key leaf. The key leaves of
//! the lists the OpenConfig dialect writes are in [`LIST_KEYS`], by path
//! suffix, as the models define them (`key` statements):
//! openconfig-interfaces 2016-05-26 `interfaces/interface` (name),
//! `subinterfaces/subinterface` (index); openconfig-if-ip 2019-01-08
//! `addresses/address` (ip); openconfig-network-instance 2017-01-13
//! `network-instances/network-instance` (name), `interfaces/interface`
//! (id), `protocols/protocol` (identifier, name); openconfig-local-routing
//! 2017-05-15 `static-routes/static` (prefix), `next-hops/next-hop`
//! (index); openconfig-pf-forwarding-policies / openconfig-pf-interfaces
//! (openconfig/public `release/models/policy-forwarding`)
//! `policies/policy` (policy-id), `rules/rule` (sequence-id),
//! `policy-forwarding/interfaces/interface` (interface-id). Such an entry
//! must carry every key (RFC 7950 7.8.2: "the key leafs MUST be present";
//! RFC 6241 Appendix A `missing-element`).
//!
//! Any other element is a list entry by the documented heuristic: when it
//! or a same-named sibling has a direct leaf child named in [`KEY_LEAVES`]
//! (`name`, `id`, `sequence-id`, `index`, `policy-id`, `interface-id`,
//! `identifier`, `prefix`, `ip`); it then matches the sibling agreeing on
//! every key leaf both have. A same-named element without any key leaf
//! next to keyed siblings is a key-less list entry and refused
//! (`missing-element`), never merged into the first entry; OpenConfig's
//! `config` and `state` containers (which repeat the keys, OpenConfig
//! YANG style guide "Modeling operational state") are never list entries. Elements with
//! no key leaves and no keyed siblings (containers, leaves) match on
//! their name alone. With libyang (feature `yang`), the models' own keys
//! are checked first by `Schema::validate_edit`; the table then only
//! decides which stored entry an edit addresses.
//!
//! **Namespaces.** Elements are kept as written (prefixes and all); a
//! [`Scope`] resolves a prefix to its namespace (XML Namespaces 1.0
//! section 6), and a subtree stored into a datastore carries the
//! declarations its names and prefixed values (identityrefs, RFC 7950
//! 9.10.5) use, so get-config and libyang see it as the client wrote it.

use vclos_drivers::netconf::xml::Element;

/// Leaf names that key list entries outside [`LIST_KEYS`] (see the
/// module doc).
pub const KEY_LEAVES: &[&str] = &[
    "name",
    "id",
    "sequence-id",
    "index",
    "policy-id",
    "interface-id",
    "identifier",
    "prefix",
    "ip",
];

/// Lists of the OpenConfig models the dialect writes: (path suffix of
/// local names, key leaves). The longest matching suffix wins.
pub const LIST_KEYS: &[(&[&str], &[&str])] = &[
    (&["interfaces", "interface"], &["name"]),
    (&["subinterfaces", "subinterface"], &["index"]),
    (&["addresses", "address"], &["ip"]),
    (&["network-instances", "network-instance"], &["name"]),
    (&["network-instance", "interfaces", "interface"], &["id"]),
    (&["protocols", "protocol"], &["identifier", "name"]),
    (&["static-routes", "static"], &["prefix"]),
    (&["next-hops", "next-hop"], &["index"]),
    (&["policies", "policy"], &["policy-id"]),
    (&["rules", "rule"], &["sequence-id"]),
    (
        &["policy-forwarding", "interfaces", "interface"],
        &["interface-id"],
    ),
];

/// The keys of the list at `path` (local names from the datastore root),
/// if [`LIST_KEYS`] knows it.
pub fn list_keys(path: &[&str]) -> Option<&'static [&'static str]> {
    LIST_KEYS
        .iter()
        .filter(|(suffix, _)| path.ends_with(suffix))
        .max_by_key(|(suffix, _)| suffix.len())
        .map(|(_, k)| *k)
}

/// The namespace declarations in effect at some element.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// (prefix, namespace); "" is the default namespace. Later wins.
    decls: Vec<(String, String)>,
}

fn prefix_of(name: &str) -> &str {
    name.split_once(':').map_or("", |(p, _)| p)
}

fn decl_of(attr: &str) -> Option<&str> {
    if attr == "xmlns" {
        Some("")
    } else {
        attr.strip_prefix("xmlns:")
    }
}

impl Scope {
    /// The scope inside `e` (its own declarations added).
    pub fn enter(&self, e: &Element) -> Scope {
        let mut s = self.clone();
        for (k, v) in &e.attrs {
            if let Some(p) = decl_of(k) {
                s.decls.push((p.to_string(), v.clone()));
            }
        }
        s
    }

    /// The namespace bound to `prefix` ("" for the default), if any.
    pub fn resolve(&self, prefix: &str) -> Option<&str> {
        self.decls
            .iter()
            .rev()
            .find(|(p, _)| p == prefix)
            .map(|(_, n)| n.as_str())
            .filter(|n| !n.is_empty())
    }

    /// The namespace of element `e` written in this scope.
    pub fn ns_of(&self, e: &Element) -> Option<String> {
        self.enter(e)
            .resolve(prefix_of(&e.name))
            .map(str::to_string)
    }

    /// `e` with the declarations of this scope it needs and does not make
    /// itself (see the module doc), so it reads the same anywhere.
    pub fn declare_on(&self, mut e: Element) -> Element {
        let mut used = Vec::new();
        prefixes_used(&e, &mut used);
        for p in used {
            let own = e.attrs.iter().any(|(k, _)| decl_of(k) == Some(p.as_str()));
            if own {
                continue;
            }
            if let Some(ns) = self.resolve(&p) {
                let k = if p.is_empty() {
                    "xmlns".to_string()
                } else {
                    format!("xmlns:{p}")
                };
                e.attrs.push((k, ns.to_string()));
            }
        }
        e
    }
}

/// Prefixes `e`'s subtree uses in element names, attribute names and
/// prefixed text values ("" for unprefixed element names).
fn prefixes_used(e: &Element, out: &mut Vec<String>) {
    let mut add = |p: &str| {
        if !out.iter().any(|o| o == p) {
            out.push(p.to_string());
        }
    };
    add(prefix_of(&e.name));
    for (k, _) in &e.attrs {
        if decl_of(k).is_none() && k.contains(':') {
            add(prefix_of(k));
        }
    }
    if let Some((p, _)) = e.text.split_once(':') {
        if !p.is_empty() && !p.contains(char::is_whitespace) {
            add(p);
        }
    }
    for c in &e.children {
        prefixes_used(c, out);
    }
}

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

/// Why an edit failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditError {
    /// The RFC 6241 error-tag.
    pub tag: &'static str,
    pub message: String,
    /// The data path (local names), for `<error-path>`.
    pub path: Option<String>,
    /// The offending element, for `<error-info><bad-element>`.
    pub bad_element: Option<String>,
}

fn keys(e: &Element) -> Vec<(&str, &str)> {
    e.children
        .iter()
        .filter(|c| c.children.is_empty() && KEY_LEAVES.contains(&c.local()))
        .map(|c| (c.local(), c.text.as_str()))
        .collect()
}

fn leaf<'a>(e: &'a Element, name: &str) -> Option<&'a str> {
    e.children
        .iter()
        .find(|c| c.children.is_empty() && c.local() == name)
        .map(|c| c.text.as_str())
}

/// Whether `a` (existing) and `b` (edit) denote the same node; `known`
/// are the keys of the list from [`LIST_KEYS`].
fn same_entry(a: &Element, b: &Element, known: Option<&[&str]>) -> bool {
    if a.local() != b.local() {
        return false;
    }
    if let Some(ks) = known {
        return ks.iter().all(|k| leaf(a, k) == leaf(b, k));
    }
    let (ka, kb) = (keys(a), keys(b));
    kb.iter().all(|(k, v)| {
        ka.iter()
            .find(|(k2, _)| k2 == k)
            .is_none_or(|(_, v2)| v2 == v)
    })
}

/// Refuse a list entry without its keys (see the module doc).
fn check_keys(
    e: &Element,
    known: Option<&[&str]>,
    siblings: &[&[Element]],
    path: &str,
) -> Result<(), EditError> {
    let missing = |what: String| EditError {
        tag: "missing-element",
        message: format!("list entry {path} has no key {what}"),
        path: Some(path.to_string()),
        bad_element: Some(e.local().to_string()),
    };
    if let Some(ks) = known {
        return match ks.iter().find(|k| leaf(e, k).is_none()) {
            Some(k) => Err(missing(format!("<{k}>"))),
            None => Ok(()),
        };
    }
    // OpenConfig's `config`/`state` containers hold copies of the keys
    // (OpenConfig YANG style guide, "Modeling operational state"): not lists.
    if matches!(e.local(), "config" | "state") {
        return Ok(());
    }
    let keyed_sibling = siblings
        .iter()
        .flat_map(|s| s.iter())
        .any(|s| s.local() == e.local() && !keys(s).is_empty());
    if keys(e).is_empty() && keyed_sibling {
        return Err(missing(format!(
            "(its siblings are keyed by {KEY_LEAVES:?})"
        )));
    }
    Ok(())
}

fn at_hint(target: &Element, e: &Element, known: Option<&[&str]>) -> bool {
    target.children.iter().any(|t| same_entry(t, e, known))
}

/// [`check_keys`] on every list entry below `e` (stored as a whole).
fn check_new<'e>(e: &'e Element, path: &mut Vec<&'e str>) -> Result<(), EditError> {
    for c in &e.children {
        path.push(c.local());
        let here = format!("/{}", path.join("/"));
        check_keys(c, list_keys(path), &[&e.children], &here)?;
        check_new(c, path)?;
        path.pop();
    }
    Ok(())
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
/// carrying no `operation` attribute. `scope` holds the namespace
/// declarations in effect at `edit` (its own included).
pub fn apply(
    target: &mut Element,
    edit: &Element,
    inherited: Op,
    scope: &Scope,
) -> Result<(), EditError> {
    apply_at(target, edit, inherited, scope, &mut Vec::new())
}

fn apply_at<'e>(
    target: &mut Element,
    edit: &'e Element,
    inherited: Op,
    scope: &Scope,
    path: &mut Vec<&'e str>,
) -> Result<(), EditError> {
    for e in &edit.children {
        let op = match e.get_attr("operation") {
            Some(s) => Op::parse(s).ok_or_else(|| EditError {
                tag: "bad-attribute",
                message: format!("unknown operation {s:?} on <{}>", e.local()),
                path: None,
                bad_element: Some(e.local().to_string()),
            })?,
            None => inherited,
        };
        path.push(e.local());
        let known = list_keys(path);
        let here = format!("/{}", path.join("/"));
        check_keys(e, known, &[&target.children, &edit.children], &here)?;
        if matches!(
            (op, at_hint(target, e, known)),
            (Op::Merge | Op::Replace | Op::Create, false) | (Op::Replace, true)
        ) {
            // A whole new subtree: every list entry in it needs its keys.
            check_new(e, path)?;
        }
        let stored = |e: &Element| scope.declare_on(strip(e));
        let at = target.children.iter().position(|t| same_entry(t, e, known));
        match (op, at) {
            (Op::Merge | Op::None, Some(i)) => {
                let t = &mut target.children[i];
                if e.children.is_empty() {
                    if op == Op::Merge {
                        // A leaf: its value and the declarations it uses.
                        *t = stored(e);
                    }
                } else {
                    apply_at(t, e, op, &scope.enter(e), path)?;
                }
            }
            (Op::Merge | Op::Replace, None) => target.children.push(stored(e)),
            (Op::None, None) => {
                // Containment only: create it if something below changes it.
                let mut t = Element {
                    name: e.name.clone(),
                    attrs: stored(&Element {
                        name: e.name.clone(),
                        attrs: e.attrs.clone(),
                        ..Element::default()
                    })
                    .attrs,
                    ..Element::default()
                };
                apply_at(&mut t, e, op, &scope.enter(e), path)?;
                if !t.children.is_empty() {
                    target.children.push(t);
                }
            }
            (Op::Replace, Some(i)) => target.children[i] = stored(e),
            (Op::Create, Some(_)) => {
                return Err(EditError {
                    tag: "data-exists",
                    message: format!("{} already exists", describe(e)),
                    path: Some(here),
                    bad_element: None,
                })
            }
            (Op::Create, None) => target.children.push(stored(e)),
            (Op::Delete, None) => {
                return Err(EditError {
                    tag: "data-missing",
                    message: format!("{} does not exist", describe(e)),
                    path: Some(here),
                    bad_element: None,
                })
            }
            (Op::Delete | Op::Remove, Some(i)) => {
                target.children.remove(i);
            }
            (Op::Remove, None) => {}
        }
        path.pop();
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
