//! Dialects: how intent is written in each vendor's configuration language,
//! and read back from a running configuration.
//!
//! A dialect is a pure translator, separate from transport (SSH, Telnet,
//! NETCONF live in `vclos-drivers`): it renders a device's items as a full
//! configuration, renders the ordered change commands that take a device
//! from one item set to another (removal forms included), and parses a
//! running configuration back into items. `parse(render(i)) == i` for every
//! item set made of the kinds the dialect [claims](Dialect::claims)
//! (property-tested); items of other kinds are not expressible in it and are
//! left out by [`claimed`].
//!
//! Parsers read only what vclos manages (its own object names, the ports
//! and lines it writes) and ignore the rest of a real configuration;
//! malformed managed lines are errors naming the device and line. The one
//! exception is steering vclos did not write: every redirect bound to a
//! port is reported as an [`Item::ForeignSteering`] (see [`foreign`]),
//! which no dialect claims, so it is never rendered nor removed.

pub mod foreign;
pub mod huawei_ce;
pub mod openconfig;
pub mod sonic;
pub mod tl1;

use std::collections::BTreeSet;
use std::fmt;

use thiserror::Error;

use crate::intent::{Item, ItemKind};
use crate::topology::Dialect as DialectId;

/// A configuration language.
pub trait Dialect: fmt::Debug + Send + Sync {
    /// Which dialect of the topology file this is.
    fn id(&self) -> DialectId;
    /// Whether items of `kind` are expressible (rendered and parsed).
    fn claims(&self, kind: ItemKind) -> bool;
    /// The full configuration holding `items` (unclaimed kinds are skipped).
    fn render(&self, items: &BTreeSet<Item>) -> String;
    /// Ordered commands taking a device holding `running` to `candidate`.
    fn changes(&self, running: &BTreeSet<Item>, candidate: &BTreeSet<Item>) -> Vec<String>;
    /// Items found in a running configuration of `device`.
    fn parse(&self, device: &str, text: &str) -> Result<BTreeSet<Item>, ParseError>;
}

/// A running configuration vclos cannot read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct ParseError {
    pub device: String,
    /// 1-based line of the offending text, when the format has lines.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(n) => write!(f, "{}: line {n}: {}", self.device, self.message),
            None => write!(f, "{}: {}", self.device, self.message),
        }
    }
}

impl ParseError {
    pub fn at(device: &str, line: Option<usize>, message: impl Into<String>) -> Self {
        ParseError {
            device: device.to_string(),
            line,
            message: message.into(),
        }
    }
}

/// The dialect implementation for a topology's dialect id.
pub fn dialect(id: DialectId) -> &'static dyn Dialect {
    match id {
        DialectId::HuaweiCe => &huawei_ce::HuaweiCe,
        DialectId::Sonic => &sonic::Sonic,
        DialectId::Openconfig => &openconfig::OpenConfig,
        DialectId::Tl1 => &tl1::Tl1,
    }
}

/// All dialects.
pub fn all() -> [&'static dyn Dialect; 4] {
    [
        &huawei_ce::HuaweiCe,
        &sonic::Sonic,
        &openconfig::OpenConfig,
        &tl1::Tl1,
    ]
}

/// The items of `items` that `d` can express.
pub fn claimed(d: &dyn Dialect, items: &BTreeSet<Item>) -> BTreeSet<Item> {
    items
        .iter()
        .filter(|i| d.claims(i.kind()))
        .cloned()
        .collect()
}

/// Longest VRF / policy name the dialect accepts (defined with the names
/// it bounds, in the intent layer, which checks job ids against it).
pub use crate::intent::name::max_name_len;
