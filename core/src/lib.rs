//! vclos-core: the model every other part of vclos is a function of.
//!
//! The first three arrows of the data flow (ARCHITECTURE.md), all pure:
//! topology -> placement decision -> per-device intent. What is here:
//!
//! - [`topology`]: the fabric (leaves, spines, servers, OCSes, cabling),
//!   loaded and validated from YAML with errors naming file, line and
//!   field; the generator; exports for schedulers.
//! - [`trace`], [`names`], [`yaml`]: job traces, validated names, the
//!   bounded YAML reader.
//! - [`placement`]: the engine (vClos, OCS-vClos, Titan, baselines), each
//!   policy a [`placement::Placer`] over a [`state::FabricState`], and a
//!   [`decision::Decision`] as its output, the one type every later stage
//!   reads.
//! - [`intent`]: the per-device items a set of decisions needs (VRFs,
//!   redirects, OCS patches), independent of any vendor's syntax.
//! - [`state`]: what the fabric holds (isolation checked on admission), and
//!   the crash-safe state directory it is persisted in.
//! - [`network`], [`sharing`]: the network model a replay and Titan's
//!   bandwidth check run on (routing, max-min fair share) and Cassini's
//!   link sharing.
//!
//! What is *not* here, and why it is a separate crate: vendor dialects,
//! diffs, the transactional controller and verification (`vclos`, they
//! depend on how a device is written to, this crate only on what it must
//! hold); device transports (`vclos-drivers`); replay and sweeps
//! (`vclos-sim`). This crate depends on none of them, so a change in how
//! a device is configured cannot change a placement.

pub mod decision;
pub mod intent;
pub mod names;
pub mod network;
pub mod placement;
pub mod sharing;
pub mod state;
pub mod topology;
pub mod trace;
pub mod yaml;
