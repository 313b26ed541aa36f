//! vclos-server: jobs on a real fabric, for people and for schedulers.
//!
//! - [`jobs`]: the job lifecycle over one fabric (`Fabric`: topology, a
//!   [`store::Store`], pooled drivers): submit and release planned purely,
//!   applied as one device transaction (`vclos-device`'s controller) behind
//!   a write-ahead journal, under the writer lock, with recovery on open;
//!   a failed apply leaves every device and the state as they were.
//! - [`store`]: where committed state lives: the state directory (files,
//!   fsync order, `flock`) or etcd (feature `etcd`: compare-and-swap on the
//!   revision read, a leased lock that fences every write).
//! - [`server`]: `vclos serve`, the HTTP API (axum) with authentication,
//!   bounded queues and bodies, events, metrics and OpenAPI; leadership on
//!   etcd.
//! - [`client`], [`slurm`]: the typed blocking client of that API and the
//!   pure part of the Slurm prolog/epilog wrappers.
//!
//! Why a crate of its own: it is the only part of vclos that holds state
//! across calls and serves concurrent callers, so its invariants
//! (acknowledged jobs never lost or resurrected, one writer per fabric)
//! are checked here, on top of the pure model (`vclos-core`) and the device
//! side (`vclos-device`), neither of which depends on it.

// The model and the device side under the paths the modules were written
// against.
use vclos_core::{decision, intent, names, placement, state, topology, yaml};
use vclos_device::{controller, dialect, plan};

pub mod client;
pub mod jobs;
pub mod server;
pub mod slurm;
pub mod store;
