//! vclos: a control plane for isolated GPU-cluster fabrics.
//!
//! Data flows one way (see ARCHITECTURE.md):
//! topology -> placement decision -> per-device intent -> rendered dialect
//! -> diff -> transactional apply -> verify.
//!
//! This crate holds everything but the device transports, which live in
//! `vclos-drivers` so that "how to talk to a device" never depends on "what
//! to say to it".

pub mod client;
pub mod controller;
pub mod decision;
pub mod dialect;
pub mod diff;
pub mod emulator;
pub mod intent;
pub mod jobs;
pub mod names;
pub mod network;
pub mod placement;
pub mod plan;
pub mod replay;
pub mod schema;
pub mod server;
pub mod sharing;
pub mod slurm;
pub mod state;
pub mod store;
pub mod sweep;
pub mod tdm;
pub mod topology;
pub mod trace;
pub mod verification;
pub mod yaml;
