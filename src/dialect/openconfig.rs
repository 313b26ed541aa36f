//! OpenConfig XML for NETCONF (placeholder until filled).
use std::collections::BTreeSet;

use super::{Dialect, ParseError};
use crate::intent::{Item, ItemKind};
use crate::topology::Dialect as DialectId;

#[derive(Debug, Clone, Copy, Default)]
pub struct OpenConfig;

impl Dialect for OpenConfig {
    fn id(&self) -> DialectId {
        DialectId::Openconfig
    }
    fn claims(&self, _kind: ItemKind) -> bool {
        false
    }
    fn render(&self, _items: &BTreeSet<Item>) -> String {
        String::new()
    }
    fn changes(&self, _r: &BTreeSet<Item>, _c: &BTreeSet<Item>) -> Vec<String> {
        Vec::new()
    }
    fn parse(&self, _device: &str, _text: &str) -> Result<BTreeSet<Item>, ParseError> {
        Ok(BTreeSet::new())
    }
}
