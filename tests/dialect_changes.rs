//! Change commands do what they claim: applied to the running
//! configuration by a model of the device, they yield the candidate.
//!
//! The Huawei model follows the emulator's text contract (generic view
//! tree, `quit`, `undo <line>` by exact text or `<line> ` prefix) and fails
//! on any command that would fail there (undo of something absent); the
//! SONiC model applies RFC 6902 operations strictly; the TL1 model refuses
//! a patch on a connected port.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::Value;
use vclos::dialect::{claimed, huawei_ce::HuaweiCe, sonic::Sonic, tl1::Tl1, Dialect};
use vclos::intent::Item;

mod common;
use common::item_set;

#[derive(Debug, Clone, Default)]
struct Node {
    text: String,
    children: Vec<Node>,
}

fn is_view(line: &str) -> bool {
    [
        "interface ",
        "acl number ",
        "acl name ",
        "traffic classifier ",
        "traffic behavior ",
        "traffic policy ",
        "ip vpn-instance ",
    ]
    .iter()
    .any(|p| line.starts_with(p))
        || line == "ipv4-family"
}

fn vrp_tree(text: &str) -> Node {
    let mut root = Node::default();
    for line in text.lines() {
        let body = line.trim_start_matches(' ');
        if body.is_empty() || body == "#" || body == "return" {
            continue;
        }
        let depth = line.len() - body.len();
        let mut at = &mut root;
        for _ in 0..depth {
            at = at.children.last_mut().unwrap();
        }
        at.children.push(Node {
            text: body.into(),
            children: vec![],
        });
    }
    root
}

fn vrp_print(root: &Node) -> String {
    fn walk(n: &Node, depth: usize, out: &mut String) {
        out.push_str(&format!("{}{}\n", " ".repeat(depth), n.text));
        for c in &n.children {
            walk(c, depth + 1, out);
        }
    }
    let mut out = String::new();
    for c in &root.children {
        walk(c, 0, &mut out);
        out.push_str("#\n");
    }
    out.push_str("return\n");
    out
}

fn vrp_apply(root: &mut Node, commands: &[String]) -> Result<(), String> {
    let mut path: Vec<usize> = Vec::new();
    for cmd in commands {
        let mut at = &mut *root;
        for i in &path {
            at = &mut at.children[*i];
        }
        if cmd == "quit" {
            path.pop().ok_or("quit at top level")?;
        } else if let Some(target) = cmd.strip_prefix("undo ") {
            let pos = at
                .children
                .iter()
                .position(|c| c.text == target)
                .or_else(|| {
                    at.children
                        .iter()
                        .position(|c| c.text.starts_with(&format!("{target} ")))
                });
            match pos {
                Some(p) => {
                    at.children.remove(p);
                }
                // `undo portswitch` is a line of its own on the device.
                None if target == "portswitch" => at.children.push(Node {
                    text: cmd.clone(),
                    children: vec![],
                }),
                None => return Err(format!("`{cmd}`: nothing to undo")),
            }
        } else if cmd == "portswitch" {
            let p = at
                .children
                .iter()
                .position(|c| c.text == "undo portswitch")
                .ok_or("portswitch: not routed")?;
            at.children.remove(p);
        } else if is_view(cmd) {
            let p = match at.children.iter().position(|c| c.text == *cmd) {
                Some(p) => p,
                None => {
                    at.children.push(Node {
                        text: cmd.clone(),
                        children: vec![],
                    });
                    at.children.len() - 1
                }
            };
            path.push(p);
        } else if at.children.iter().any(|c| c.text == *cmd) {
            return Err(format!("`{cmd}` already present"));
        } else {
            at.children.push(Node {
                text: cmd.clone(),
                children: vec![],
            });
        }
    }
    if !path.is_empty() {
        return Err("commands leave a view open".into());
    }
    Ok(())
}

fn sonic_apply(doc: &mut Value, commands: &[String]) -> Result<(), String> {
    for c in commands {
        let op: Value = serde_json::from_str(c).map_err(|e| format!("{c}: {e}"))?;
        let path = op["path"].as_str().ok_or("no path")?;
        let segs: Vec<String> = path[1..]
            .split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        let (last, parents) = segs.split_last().ok_or("empty path")?;
        let mut at = &mut *doc;
        for s in parents {
            at = at
                .get_mut(s.as_str())
                .ok_or_else(|| format!("{c}: parent {s} missing"))?;
        }
        let obj = at.as_object_mut().ok_or("parent not an object")?;
        match op["op"].as_str() {
            Some("add") => {
                obj.insert(last.clone(), op["value"].clone());
            }
            Some("replace") => {
                let v = obj
                    .get_mut(last.as_str())
                    .ok_or_else(|| format!("{c}: nothing to replace"))?;
                *v = op["value"].clone();
            }
            Some("remove") => {
                obj.remove(last.as_str())
                    .ok_or_else(|| format!("{c}: nothing to remove"))?;
            }
            other => return Err(format!("unknown op {other:?}")),
        }
    }
    Ok(())
}

fn tl1_apply(table: &mut BTreeMap<String, String>, commands: &[String]) -> Result<(), String> {
    for c in commands {
        let body = c.trim_end_matches(';');
        let parts: Vec<&str> = body.split(':').collect();
        let aid = parts.get(2).ok_or("no aid")?;
        if parts[0] == "DLT-PATCH" {
            // Every listed port must be patched, to a port also listed.
            let ports: Vec<&str> = aid.split('&').collect();
            for p in &ports {
                match table.get(*p) {
                    Some(q) if ports.contains(&q.as_str()) => {}
                    _ => return Err(format!("{c}: {p} is not patched to a listed port")),
                }
            }
            for p in ports {
                table.remove(p);
            }
        } else if parts[0] == "ENT-PATCH" {
            // `a1&a2,b1&b2` patches a1~b1 and a2~b2.
            let (a, b) = aid.split_once(',').ok_or("bad ENT aid")?;
            let (a, b): (Vec<&str>, Vec<&str>) = (a.split('&').collect(), b.split('&').collect());
            if a.len() != b.len() {
                return Err(format!("{c}: lists of different lengths"));
            }
            for (a, b) in a.into_iter().zip(b) {
                if table.contains_key(a) || table.contains_key(b) {
                    return Err(format!("{c}: port busy"));
                }
                table.insert(a.into(), b.into());
                table.insert(b.into(), a.into());
            }
        } else {
            return Err(format!("unknown verb in {c}"));
        }
    }
    Ok(())
}

fn patches(items: &BTreeSet<Item>) -> BTreeMap<String, String> {
    let mut t = BTreeMap::new();
    for i in items {
        if let Item::Patch { a, b } = i {
            t.insert(a.to_string(), b.to_string());
            t.insert(b.to_string(), a.to_string());
        }
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn huawei_commands_reach_the_candidate(a in item_set(false), b in item_set(false)) {
        let d = HuaweiCe;
        let (a, b) = (claimed(&d, &a), claimed(&d, &b));
        let mut tree = vrp_tree(&d.render(&a));
        vrp_apply(&mut tree, &d.changes(&a, &b)).map_err(TestCaseError::fail)?;
        let got = d.parse("dev", &vrp_print(&tree)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, b);
    }

    #[test]
    fn sonic_patches_reach_the_candidate(a in item_set(false), b in item_set(false)) {
        let d = Sonic;
        let (a, b) = (claimed(&d, &a), claimed(&d, &b));
        let mut doc: Value = serde_json::from_str(&d.render(&a)).unwrap();
        sonic_apply(&mut doc, &d.changes(&a, &b)).map_err(TestCaseError::fail)?;
        let got = d.parse("dev", &doc.to_string()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, b);
    }

    #[test]
    fn tl1_commands_reach_the_candidate(a in item_set(true), b in item_set(true)) {
        let d = Tl1;
        let (a, b) = (claimed(&d, &a), claimed(&d, &b));
        let mut table = patches(&a);
        tl1_apply(&mut table, &d.changes(&a, &b)).map_err(TestCaseError::fail)?;
        prop_assert_eq!(table, patches(&b));
    }
}

#[test]
fn huawei_policy_is_unbound_before_it_is_deleted() {
    use vclos::intent::{Ipv4Net, PortName};
    use vclos::names::JobId;
    let r = Item::Redirect {
        job: JobId::new("j1").unwrap(),
        index: 3,
        port: PortName::new("100GE1/0/3").unwrap(),
        uplink: PortName::new("100GE1/0/19").unwrap(),
        destinations: vec!["10.128.1.0/24".parse::<Ipv4Net>().unwrap()],
    };
    // The uplink's /31: the redirect's next hop is its far end.
    let up = Item::Address {
        port: PortName::new("100GE1/0/19").unwrap(),
        vrf: None,
        net: "10.0.0.4/31".parse::<Ipv4Net>().unwrap(),
    };
    let with: BTreeSet<Item> = [r, up].into_iter().collect();
    let del = HuaweiCe.changes(&with, &BTreeSet::new());
    let unbind = del
        .iter()
        .position(|c| c == "undo traffic-policy v-j1-p3 inbound")
        .unwrap();
    let delete = del
        .iter()
        .position(|c| c == "undo traffic policy v-j1-p3")
        .unwrap();
    assert!(unbind < delete, "{del:#?}");
    let add = HuaweiCe.changes(&BTreeSet::new(), &with);
    let create = add
        .iter()
        .position(|c| c == "traffic policy v-j1-p3")
        .unwrap();
    let bind = add
        .iter()
        .position(|c| c == "traffic-policy v-j1-p3 inbound")
        .unwrap();
    assert!(create < bind, "{add:#?}");
    assert!(add.contains(&"redirect nexthop 10.0.0.5".to_string()));
    // The next hop's address is configured before the behavior using it.
    let addr = add
        .iter()
        .position(|c| c == "ip address 10.0.0.4 31")
        .unwrap();
    let behavior = add
        .iter()
        .position(|c| c == "redirect nexthop 10.0.0.5")
        .unwrap();
    assert!(addr < behavior, "{add:#?}");
    assert!(add.contains(&"rule 5 permit ip destination 10.128.1.0 0.0.0.255".to_string()));
}

/// The `<config>` wrapper's content of an edit-config fragment.
fn oc_body(fragment: &str) -> &str {
    let start = fragment.find('>').map(|i| i + 1).unwrap_or(0);
    let end = fragment.rfind("</config>").unwrap_or(fragment.len());
    &fragment[start..end]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Merging every edit-config fragment of "empty -> candidate" gives a
    /// document that reads back as the candidate; "candidate -> empty" is
    /// all deletes, at least one per item.
    #[test]
    fn openconfig_fragments_build_the_candidate(items in item_set(false)) {
        use vclos::dialect::openconfig::OpenConfig;
        let d = OpenConfig;
        let mine = claimed(&d, &items);
        let add = d.changes(&BTreeSet::new(), &mine);
        let merged: String = add.iter().map(|f| oc_body(f)).collect();
        let doc = format!("<config xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\">{merged}</config>");
        let back = d.parse("dev", &doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, mine.clone());
        let del = d.changes(&mine, &BTreeSet::new());
        prop_assert!(del.len() >= mine.len());
        for f in del {
            prop_assert!(f.contains("nc:operation=\"delete\""), "{}", f);
        }
    }
}
