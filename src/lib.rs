//! vclos: a control plane for isolated GPU-cluster fabrics.
//!
//! Data flows one way (see ARCHITECTURE.md):
//! topology -> placement decision -> per-device intent -> rendered dialect
//! -> diff -> transactional apply -> verify.
//!
//! This crate holds everything but the device transports, which live in
//! `vclos-drivers` so that "how to talk to a device" never depends on "what
//! to say to it".

// The model (topology, placement, intent, state, network model) is the
// `vclos-core` crate; re-exported under the paths it always had.
pub use vclos_core::{
    decision, intent, names, network, placement, sharing, state, topology, trace, yaml,
};

// Dialects, diffs, plans, the controller, YANG validation and verification
// are the `vclos-device` crate.
pub use vclos_device::{controller, dialect, diff, plan, schema, verification};

// Trace replay and sweeps are the `vclos-sim` crate.
pub use vclos_sim::{replay, sweep};

pub mod client;
pub mod emulator;
pub mod jobs;
pub mod server;
pub mod slurm;
pub mod store;
pub mod tdm;
