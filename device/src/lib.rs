//! vclos-device: what is said to a device, and how a change is made safely.
//!
//! The last four arrows of the data flow (ARCHITECTURE.md): per-device
//! intent (from `vclos-core`) -> rendered dialect -> diff -> transactional
//! apply -> verify.
//!
//! - [`dialect`]: Huawei CE CLI, SONiC config_db, OpenConfig (NETCONF XML)
//!   and TL1, each a pure translator: render a device's items, the ordered
//!   change commands between two item sets, and parse a running
//!   configuration back (`parse(render(i)) == i`, property-tested).
//! - [`diff`], [`plan`]: semantic and unified diffs, and the dry-run plan
//!   (`vclos plan`, like `terraform plan` / Ansible `--check --diff`).
//! - [`schema`]: the YANG seam (libyang through `yang2`, feature `yang`):
//!   rendered OpenConfig payloads and the emulated NETCONF server's edits
//!   are validated against the published models.
//! - [`controller`]: the transactional apply across devices through the
//!   `vclos-drivers` transports (prepare everywhere, staged commit with
//!   read-back, rollback judged against a snapshot), and the session pool.
//! - [`verification`]: forwarding followed hop by hop from what the devices
//!   hold (parsed running configurations), never from the scheduler's view.
//!
//! Why a crate of its own: it depends on the model (`vclos-core`) and the
//! transports (`vclos-drivers`) and on nothing that decides where a job
//! goes, so a placement change cannot alter what a device is told except
//! through a `Decision`. The emulator, the job lifecycle and the service
//! sit above it in `vclos`.

// The model under the paths the modules were written against.
#[cfg(test)]
use vclos_core::placement;
use vclos_core::{decision, intent, names, state, topology};

pub mod controller;
pub mod dialect;
pub mod diff;
pub mod plan;
pub mod schema;
pub mod verification;
