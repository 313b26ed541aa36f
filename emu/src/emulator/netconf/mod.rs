//! Emulated NETCONF (RFC 6241) devices for the OpenConfig dialect.
//!
//! * [`datastore`]: running + shared candidate, locks, confirmed-commit timer.
//! * [`session`]: hello/capabilities, framing negotiation, the RPCs and
//!   well-formed `<rpc-error>`s, as a message-in/message-out machine.
//! * [`tree`]: the generic edit-config merge (list entries keyed by a
//!   documented heuristic) and subtree filtering.
//! * [`rules`]: device rules no model states (one subinterface per
//!   802.1Q tag on a port).
//!
//! The transport is the `netconf` subsystem of [`super::ssh`]; framing and
//! the XML tree are shared with the NETCONF driver (`vclos_drivers::netconf`)
//! so both ends of the wire parse and escape alike.
//!
//! What the server enforces (namespaces, list keys, YANG validation with
//! libyang when available, size/depth limits) and the RFC 6241 / RFC 7950
//! sections behind each rule: the module docs of [`session`] and [`tree`],
//! and docs/devices/netconf-emulator.md.
//!
//! Not implemented: `get` of state data (it returns running),
//! `:writable-running`, `:url`, `:xpath`, `:startup`, confirmed-commit
//! `persist`.

pub mod datastore;
pub mod rules;
pub mod session;
pub mod tree;

pub use datastore::NetconfDevice;
pub use session::NetconfSession;

#[cfg(test)]
mod tests;
