//! TL1 for optical circuit switches (Polatis-style `ENT-PATCH`/`DLT-PATCH`).
//!
//! An OCS's "configuration" is its patch table. The full rendering is the
//! data lines of a `RTRV-PATCH` reply (`"11,28"`, one per cross-connect), so
//! a saved reply and a rendering parse alike. Changes disconnect before they
//! connect (`DLT-PATCH` on every port that must move, then `ENT-PATCH`), as
//! the device refuses a patch on a connected port; ctags number the commands
//! from 1 and are the driver's to rewrite if it wants its own.

use std::collections::BTreeSet;

use super::{Dialect, ParseError};
use crate::intent::{Item, ItemKind, PortName};
use crate::topology::Dialect as DialectId;

/// The TL1 dialect.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tl1;

/// Most patches one TL1 command carries (a 4 KiB line holds far more).
pub const PAIRS_PER_COMMAND: usize = 64;

impl Dialect for Tl1 {
    fn id(&self) -> DialectId {
        DialectId::Tl1
    }

    fn claims(&self, kind: ItemKind) -> bool {
        kind == ItemKind::Patch
    }

    fn render(&self, items: &BTreeSet<Item>) -> String {
        let mut out = String::new();
        for item in items {
            if let Item::Patch { a, b } = item {
                out.push_str(&format!("   \"{a},{b}\"\n"));
            }
        }
        out
    }

    /// All removals in `DLT-PATCH` commands, then all additions in
    /// multi-pair `ENT-PATCH::a1&a2,b1&b2` commands: the OCS switches every
    /// pair of one command together, so a rewiring costs one switching time,
    /// not one per patch. Commands carry at most [`PAIRS_PER_COMMAND`] pairs
    /// to stay far below TL1 line limits.
    fn changes(&self, running: &BTreeSet<Item>, candidate: &BTreeSet<Item>) -> Vec<String> {
        let patches = |from: &BTreeSet<Item>, to: &BTreeSet<Item>| -> Vec<(String, String)> {
            from.difference(to)
                .filter_map(|i| match i {
                    Item::Patch { a, b } => Some((a.to_string(), b.to_string())),
                    _ => None,
                })
                .collect()
        };
        let mut out = Vec::new();
        let mut ctag = 0u32;
        for chunk in patches(running, candidate).chunks(PAIRS_PER_COMMAND) {
            ctag += 1;
            let ports: Vec<String> = chunk
                .iter()
                .flat_map(|(a, b)| [a.clone(), b.clone()])
                .collect();
            out.push(format!("DLT-PATCH::{}:{ctag};", ports.join("&")));
        }
        for chunk in patches(candidate, running).chunks(PAIRS_PER_COMMAND) {
            ctag += 1;
            let (a, b): (Vec<String>, Vec<String>) = chunk.iter().cloned().unzip();
            out.push(format!(
                "ENT-PATCH::{},{}:{ctag};",
                a.join("&"),
                b.join("&")
            ));
        }
        out
    }

    fn parse(&self, device: &str, text: &str) -> Result<BTreeSet<Item>, ParseError> {
        let mut items = BTreeSet::new();
        let mut seen: BTreeSet<PortName> = BTreeSet::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let t = raw.trim();
            let err = |m: String| ParseError::at(device, Some(line), m);
            if t.contains(" DENY") {
                return Err(err(format!("the OCS denied the request: `{t}`")));
            }
            let Some(body) = t.strip_prefix('"') else {
                // Header, `M <ctag> COMPLD`, `;` and blank lines carry no patch.
                continue;
            };
            let body = body
                .strip_suffix('"')
                .ok_or_else(|| err(format!("unterminated data line `{t}`")))?;
            let (a, b) = body
                .split_once(',')
                .ok_or_else(|| err(format!("`{t}` is not a patch (\"a,b\")")))?;
            let port =
                |s: &str| PortName::new(s.trim()).map_err(|e| err(format!("patch `{t}`: {e}")));
            let (a, b) = (port(a)?, port(b)?);
            if a == b {
                return Err(err(format!("patch `{t}` joins a port to itself")));
            }
            for p in [&a, &b] {
                if !seen.insert(p.clone()) {
                    return Err(err(format!("port {p} appears in two patches")));
                }
            }
            items.insert(Item::patch(a, b));
        }
        Ok(items)
    }
}
